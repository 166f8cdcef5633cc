//! Change data capture over the log: the chase from supplemental records to row images, the
//! catalog learned from class records, transaction assembly (partial rollbacks, spill,
//! commit order, cursors, reader states), filters, the stream cut into ranges read in
//! parallel, and the redaction of DDL text.

pub mod catalog;
pub mod changes;
pub mod chase;
pub mod event;
pub mod extract;
pub mod framed;
pub mod options;
pub mod parallel;
pub mod redact;
pub mod spill;
pub mod txn;
