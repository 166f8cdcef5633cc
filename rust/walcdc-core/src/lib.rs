//! walcdc-core: reads CUBRID write-ahead log volumes offline.
//!
//! Data path: [`logset::LogSet`] (files, headers, page map) → [`logset::LogSet::fetch`] (page
//! identity, checksum, TDE flags) → [`record`] (layout rules, data headers) → [`walker::Walker`]
//! (forward walk, end of log) → [`records_arrow`] (Arrow batches).

pub mod catalog;
pub mod changes;
pub mod changes_arrow;
pub mod chase;
pub mod encode;
pub mod error;
pub mod jsonl;
pub mod le;
pub mod logset;
pub mod lsa;
pub mod page;
pub mod payload;
pub mod rcvindex;
pub mod record;
pub mod records_arrow;
pub mod rectype;
pub mod redact;
pub mod row;
pub mod schema;
pub mod supplemental;
#[cfg(test)]
mod test_rng;
pub mod walker;
pub mod writer;

pub use error::{LogError, Result};
pub use logset::LogSet;
pub use lsa::Lsa;
pub use record::Record;
pub use walker::{OnEncrypted, Walker};
