//! The log's on-disk formats, decoded from bytes with no I/O: LSAs, byte readers, page
//! headers and checksums, the record-type and recovery-index tables, supplemental payloads,
//! class records (schemas) and heap rows.

pub mod class_record;
pub mod heap;
pub mod le;
pub mod log_header;
pub mod lsa;
pub mod page;
pub mod rcvindex;
pub mod rectype;
pub mod row;
pub mod schema;
pub mod sorted;
pub mod supplemental;
