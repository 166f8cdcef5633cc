//! Log volumes as a log set: files and headers, the page map, records by LSA (layout rules,
//! data headers), the forward walk (with its read-ahead) and the end of the log, payloads (LZ4, DIFF), record-aligned ranges.

pub mod logset;
pub mod payload;
pub mod positions;
pub mod ranges;
pub(crate) mod readahead;
pub mod record;
#[cfg(feature = "object-store")]
pub mod remote;
pub mod source;
pub mod walker;
