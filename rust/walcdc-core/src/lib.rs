//! walcdc-core: reads CUBRID write-ahead log volumes offline.
//!
//! Layers, data flowing one way:
//! - [`format`]: bytes to values, no I/O (LSAs, pages, record types, supplemental payloads,
//!   class records, heap rows);
//! - [`log`]: volumes as a log set ([`LogSet`](log::logset::LogSet): files, headers, page map, fetch with identity,
//!   checksum and TDE checks), records by LSA, the forward walk ([`Walker`](log::walker::Walker)), payloads;
//! - [`cdc`]: change events (chase, catalog, transaction assembly, filters, cursors, states);
//! - [`arrow`]: Arrow batches of records and change events.
//!
//! Paths name their layer (`walcdc_core::cdc::changes`, `walcdc_core::format::row`): nothing is
//! re-exported at the crate root, and no module depends on a module that depends on it
//! (tests/test_layers.py checks both).

#[cfg(test)]
mod alloc_count;
pub mod arrow;
pub mod cdc;
pub mod choice;
pub mod error;
pub mod format;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod log;
#[cfg(test)]
mod test_rng;
#[cfg(any(test, feature = "writer"))]
pub mod testkit;
