//! Arrow batches built in Rust: records, change events, one table's typed changes, and JSON
//! Lines from batches.

pub mod changes_arrow;
mod columns;
pub mod jsonl;
pub mod parallel_arrow;
pub mod records_arrow;
pub mod typed_arrow;
