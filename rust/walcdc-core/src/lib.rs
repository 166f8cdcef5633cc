//! walcdc-core: reads CUBRID write-ahead log volumes offline.
//!
//! Layers, data flowing one way:
//! - [`format`]: bytes to values, no I/O (LSAs, pages, record types, supplemental payloads,
//!   class records, heap rows);
//! - [`log`]: volumes as a log set ([`LogSet`]: files, headers, page map, fetch with identity,
//!   checksum and TDE checks), records by LSA, the forward walk ([`Walker`]), payloads;
//! - [`cdc`]: change events (chase, catalog, transaction assembly, filters, cursors, states);
//! - [`arrow`]: Arrow batches of records and change events.
//!
//! The modules are also re-exported at the crate root (`walcdc_core::lsa`, ...).

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

pub use arrow::{changes_arrow, jsonl, parallel_arrow, records_arrow, typed_arrow};
pub use cdc::{catalog, changes, chase, extract, parallel, redact};
pub use format::{le, lsa, page, rcvindex, rectype, row, schema, supplemental};
pub use log::{logset, payload, ranges, record, source, walker};
#[cfg(any(test, feature = "writer"))]
pub use testkit::{encode, writer};

pub use error::{LogError, Result};
pub use logset::LogSet;
pub use lsa::Lsa;
pub use record::Record;
pub use walker::{OnEncrypted, Walker};
