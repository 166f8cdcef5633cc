//! Record types (`LOG_RECTYPE`): names, data-header sizes and where each type keeps its
//! payload lengths.

use crate::format::le::i32_at;

/// Where a record type keeps its payload lengths (byte offsets into its data header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lengths {
    /// No payload.
    NoPayload,
    /// An undo and a redo length.
    UndoRedo(usize, usize),
    Undo(usize),
    Redo(usize),
    /// `LOG_SYSOP_END` / `LOG_SYSOP_START_POSTPONE`: a logical undo payload (length at 44) for
    /// the sysop-end types that carry one (type at 16).
    SysopLogicalUndo,
    /// `LOG_END_CHKPT`: transaction (112 B each, count at 8) and sysop (24 B each, count at
    /// 12) tables.
    Checkpoint,
    /// `LOG_2PC_PREPARE`: global transaction info (length at 40) and lock entries (20 B each,
    /// count at 44).
    TwoPcPrepare,
    /// `LOG_2PC_START`: participants (count at 40) × their info length (at 44).
    TwoPcStart,
}

/// Flags of a record type.
pub const ZIP: u8 = 1;
/// The redo is stored as a DIFF (XOR with the undo, then LZ4).
pub const DIFF: u8 = 2;
/// The data header starts with `LOG_DATA` {rcvindex, pageid, offset, volid}.
pub const LOG_DATA: u8 = 4;

/// One record type the 11.x engine writes: its number, name, data-header size, where its
/// payload lengths are, and flags.
#[derive(Clone, Copy, Debug)]
pub struct RecordType {
    pub id: i32,
    pub name: &'static str,
    pub data_header: usize,
    pub lengths: Lengths,
    pub flags: u8,
}

/// The table of record types, one row per type (as PostgreSQL's `rmgrlist.h`): every fact
/// about a type is in its row, and the constants are generated from it.
macro_rules! record_types {
    ($($name:ident = $id:literal, $dh:literal, $len:expr, $flags:expr;)*) => {
        $(pub const $name: i32 = $id;)*
        pub const RECORD_TYPES: &[RecordType] = &[
            $(RecordType { id: $id, name: stringify!($name), data_header: $dh, lengths: $len, flags: $flags },)*
        ];
    };
}

use Lengths::*;

record_types! {
    LOG_UNDOREDO_DATA = 2, 20, UndoRedo(12, 16), ZIP | LOG_DATA;
    LOG_UNDO_DATA = 3, 16, Undo(12), ZIP | LOG_DATA;
    LOG_REDO_DATA = 4, 16, Redo(12), ZIP | LOG_DATA;
    LOG_DBEXTERN_REDO_DATA = 5, 8, Redo(4), 0;
    LOG_POSTPONE = 6, 16, Redo(12), LOG_DATA;
    LOG_RUN_POSTPONE = 7, 32, Undo(24), LOG_DATA;
    LOG_COMPENSATE = 8, 32, Undo(24), LOG_DATA;
    LOG_COMMIT_WITH_POSTPONE = 14, 16, NoPayload, 0;
    LOG_COMMIT_WITH_POSTPONE_OBSOLETE = 15, 8, NoPayload, 0;
    LOG_COMMIT = 17, 8, NoPayload, 0;
    LOG_SYSOP_START_POSTPONE = 18, 80, SysopLogicalUndo, 0;
    LOG_SYSOP_END = 20, 72, SysopLogicalUndo, 0;
    LOG_ABORT = 22, 8, NoPayload, 0;
    LOG_START_CHKPT = 25, 0, NoPayload, 0;
    LOG_END_CHKPT = 26, 16, Checkpoint, 0;
    LOG_SAVEPOINT = 27, 16, Undo(8), 0;
    LOG_2PC_PREPARE = 28, 52, TwoPcPrepare, 0;
    LOG_2PC_START = 29, 48, TwoPcStart, 0;
    LOG_2PC_COMMIT_DECISION = 30, 0, NoPayload, 0;
    LOG_2PC_ABORT_DECISION = 31, 0, NoPayload, 0;
    LOG_2PC_COMMIT_INFORM_PARTICPS = 32, 0, NoPayload, 0;
    LOG_2PC_ABORT_INFORM_PARTICPS = 33, 0, NoPayload, 0;
    LOG_2PC_RECV_ACK = 34, 4, NoPayload, 0;
    LOG_END_OF_LOG = 35, 0, NoPayload, 0;
    LOG_DUMMY_HEAD_POSTPONE = 36, 0, NoPayload, 0;
    LOG_DUMMY_CRASH_RECOVERY = 37, 0, NoPayload, 0;
    LOG_REPLICATION_DATA = 39, 16, Undo(8), 0;
    LOG_REPLICATION_STATEMENT = 40, 16, Undo(8), 0;
    LOG_DIFF_UNDOREDO_DATA = 43, 20, UndoRedo(12, 16), ZIP | DIFF | LOG_DATA;
    LOG_DUMMY_HA_SERVER_STATE = 44, 16, NoPayload, 0;
    LOG_DUMMY_OVF_RECORD = 45, 0, NoPayload, 0;
    LOG_MVCC_UNDOREDO_DATA = 46, 48, UndoRedo(12, 16), ZIP | LOG_DATA;
    LOG_MVCC_UNDO_DATA = 47, 40, Undo(12), ZIP | LOG_DATA;
    LOG_MVCC_REDO_DATA = 48, 24, Redo(12), ZIP | LOG_DATA;
    LOG_MVCC_DIFF_UNDOREDO_DATA = 49, 48, UndoRedo(12, 16), ZIP | DIFF | LOG_DATA;
    LOG_SYSOP_ATOMIC_START = 50, 0, NoPayload, 0;
    LOG_DUMMY_GENERIC = 51, 0, NoPayload, 0;
    LOG_SUPPLEMENTAL_INFO = 52, 8, Undo(4), ZIP;
}

/// Number of type slots (types are looked up by value).
pub const NUM_TYPES: usize = 53;

/// Largest data header (`LOG_REC_SYSOP_START_POSTPONE`).
pub const MAX_DATA_HEADER: usize = 80;

/// The table indexed by type value.
const BY_ID: [Option<RecordType>; NUM_TYPES] = {
    let mut t: [Option<RecordType>; NUM_TYPES] = [None; NUM_TYPES];
    let mut i = 0;
    while i < RECORD_TYPES.len() {
        t[RECORD_TYPES[i].id as usize] = Some(RECORD_TYPES[i]);
        i += 1;
    }
    t
};

/// The row of a type value, `None` for values the 11.x engine never writes.
#[inline]
pub fn record_type(t: i32) -> Option<&'static RecordType> {
    usize::try_from(t).ok().and_then(|i| BY_ID.get(i)).and_then(Option::as_ref)
}

pub fn type_name(t: i32) -> Option<&'static str> {
    record_type(t).map(|r| r.name)
}

/// Size of the data header that follows the record header, or `None` for values that are not
/// record types the engine writes.
#[inline]
pub fn data_header_size(t: i32) -> Option<usize> {
    record_type(t).map(|r| r.data_header)
}

fn has_flag(t: i32, flag: u8) -> bool {
    record_type(t).is_some_and(|r| r.flags & flag != 0)
}

/// Types whose payload length fields may carry the zip bit.
pub fn may_zip(t: i32) -> bool {
    has_flag(t, ZIP)
}

pub fn is_diff(t: i32) -> bool {
    has_flag(t, DIFF)
}

/// Types whose data header starts with `LOG_DATA` {rcvindex, pageid, offset, volid}.
pub fn has_log_data(t: i32) -> bool {
    has_flag(t, LOG_DATA)
}

/// `LOG_SYSOP_END_TYPE` values that carry a logical undo payload.
pub const SYSOP_END_LOGICAL_UNDO: i32 = 2;
pub const SYSOP_END_LOGICAL_MVCC_UNDO: i32 = 3;
/// `LOG_SYSOP_END_TYPE` values the change reader uses.
pub const SYSOP_END_ABORT: i32 = 1;
pub const SYSOP_END_LOGICAL_COMPENSATE: i32 = 4;

/// The raw (undo slot, redo slot) length fields of a record, zip bit included.
/// Counts that multiply (checkpoint tables, 2PC arrays) are returned already multiplied and
/// saturated, never as negative numbers.
pub fn raw_payload_lengths(t: i32, dh: &[u8]) -> (u32, u32) {
    let u = |off: usize| i32_at(dh, off) as u32;
    let count = |n_off: usize, size: u64| -> u32 {
        let n = i32_at(dh, n_off).max(0) as u64;
        (n * size).min(u32::MAX as u64) as u32
    };
    let Some(rt) = record_type(t) else { return (0, 0) };
    match rt.lengths {
        NoPayload => (0, 0),
        UndoRedo(undo, redo) => (u(undo), u(redo)),
        Undo(off) => (u(off), 0),
        Redo(off) => (0, u(off)),
        SysopLogicalUndo => {
            let st = i32_at(dh, 16);
            if st == SYSOP_END_LOGICAL_UNDO || st == SYSOP_END_LOGICAL_MVCC_UNDO {
                (u(44), 0)
            } else {
                (0, 0)
            }
        }
        Checkpoint => (count(8, 112), count(12, 24)),
        TwoPcPrepare => (u(40), count(44, 20)),
        TwoPcStart => {
            let n = i32_at(dh, 40).max(0) as u64;
            let l = i32_at(dh, 44).max(0) as u64;
            ((n * l).min(u32::MAX as u64) as u32, 0)
        }
    }
}

/// `SUPPLEMENT_REC_TYPE` names.
pub const SUPPLEMENT_NAMES: [&str; 9] = [
    "TRAN_USER",
    "UNDO_RECORD",
    "DDL",
    "INSERT",
    "UPDATE",
    "DELETE",
    "TRIGGER_INSERT",
    "TRIGGER_UPDATE",
    "TRIGGER_DELETE",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_one_row() {
        let mut seen = std::collections::HashSet::new();
        for r in RECORD_TYPES {
            assert!(seen.insert(r.id), "{} twice", r.id);
            assert!(r.data_header <= MAX_DATA_HEADER, "{}", r.name);
            assert_eq!(record_type(r.id).map(|x| x.name), Some(r.name));
        }
        assert_eq!(type_name(52), Some("LOG_SUPPLEMENTAL_INFO"));
        assert_eq!(type_name(24), None);
        assert_eq!(data_header_size(24), None);
    }
}
