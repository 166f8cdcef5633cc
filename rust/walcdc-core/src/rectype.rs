//! Record types (`LOG_RECTYPE`): names, data-header sizes and where each type keeps its
//! payload lengths.

use crate::le::i32_at;

pub const LOG_UNDOREDO_DATA: i32 = 2;
pub const LOG_UNDO_DATA: i32 = 3;
pub const LOG_REDO_DATA: i32 = 4;
pub const LOG_DBEXTERN_REDO_DATA: i32 = 5;
pub const LOG_POSTPONE: i32 = 6;
pub const LOG_RUN_POSTPONE: i32 = 7;
pub const LOG_COMPENSATE: i32 = 8;
pub const LOG_COMMIT_WITH_POSTPONE: i32 = 14;
pub const LOG_COMMIT_WITH_POSTPONE_OBSOLETE: i32 = 15;
pub const LOG_COMMIT: i32 = 17;
pub const LOG_SYSOP_START_POSTPONE: i32 = 18;
pub const LOG_SYSOP_END: i32 = 20;
pub const LOG_ABORT: i32 = 22;
pub const LOG_START_CHKPT: i32 = 25;
pub const LOG_END_CHKPT: i32 = 26;
pub const LOG_SAVEPOINT: i32 = 27;
pub const LOG_2PC_PREPARE: i32 = 28;
pub const LOG_2PC_START: i32 = 29;
pub const LOG_2PC_COMMIT_DECISION: i32 = 30;
pub const LOG_2PC_ABORT_DECISION: i32 = 31;
pub const LOG_2PC_COMMIT_INFORM_PARTICPS: i32 = 32;
pub const LOG_2PC_ABORT_INFORM_PARTICPS: i32 = 33;
pub const LOG_2PC_RECV_ACK: i32 = 34;
pub const LOG_END_OF_LOG: i32 = 35;
pub const LOG_DUMMY_HEAD_POSTPONE: i32 = 36;
pub const LOG_DUMMY_CRASH_RECOVERY: i32 = 37;
pub const LOG_REPLICATION_DATA: i32 = 39;
pub const LOG_REPLICATION_STATEMENT: i32 = 40;
pub const LOG_DIFF_UNDOREDO_DATA: i32 = 43;
pub const LOG_DUMMY_HA_SERVER_STATE: i32 = 44;
pub const LOG_DUMMY_OVF_RECORD: i32 = 45;
pub const LOG_MVCC_UNDOREDO_DATA: i32 = 46;
pub const LOG_MVCC_UNDO_DATA: i32 = 47;
pub const LOG_MVCC_REDO_DATA: i32 = 48;
pub const LOG_MVCC_DIFF_UNDOREDO_DATA: i32 = 49;
pub const LOG_SYSOP_ATOMIC_START: i32 = 50;
pub const LOG_DUMMY_GENERIC: i32 = 51;
pub const LOG_SUPPLEMENTAL_INFO: i32 = 52;

/// Number of type slots (names are indexed by type value).
pub const NUM_TYPES: usize = 53;

/// Largest data header (`LOG_REC_SYSOP_START_POSTPONE`).
pub const MAX_DATA_HEADER: usize = 80;

/// Type names indexed by value; `None` for values the 11.x engine never writes.
pub const TYPE_NAMES: [Option<&str>; NUM_TYPES] = {
    let mut t: [Option<&str>; NUM_TYPES] = [None; NUM_TYPES];
    t[2] = Some("LOG_UNDOREDO_DATA");
    t[3] = Some("LOG_UNDO_DATA");
    t[4] = Some("LOG_REDO_DATA");
    t[5] = Some("LOG_DBEXTERN_REDO_DATA");
    t[6] = Some("LOG_POSTPONE");
    t[7] = Some("LOG_RUN_POSTPONE");
    t[8] = Some("LOG_COMPENSATE");
    t[14] = Some("LOG_COMMIT_WITH_POSTPONE");
    t[15] = Some("LOG_COMMIT_WITH_POSTPONE_OBSOLETE");
    t[17] = Some("LOG_COMMIT");
    t[18] = Some("LOG_SYSOP_START_POSTPONE");
    t[20] = Some("LOG_SYSOP_END");
    t[22] = Some("LOG_ABORT");
    t[25] = Some("LOG_START_CHKPT");
    t[26] = Some("LOG_END_CHKPT");
    t[27] = Some("LOG_SAVEPOINT");
    t[28] = Some("LOG_2PC_PREPARE");
    t[29] = Some("LOG_2PC_START");
    t[30] = Some("LOG_2PC_COMMIT_DECISION");
    t[31] = Some("LOG_2PC_ABORT_DECISION");
    t[32] = Some("LOG_2PC_COMMIT_INFORM_PARTICPS");
    t[33] = Some("LOG_2PC_ABORT_INFORM_PARTICPS");
    t[34] = Some("LOG_2PC_RECV_ACK");
    t[35] = Some("LOG_END_OF_LOG");
    t[36] = Some("LOG_DUMMY_HEAD_POSTPONE");
    t[37] = Some("LOG_DUMMY_CRASH_RECOVERY");
    t[39] = Some("LOG_REPLICATION_DATA");
    t[40] = Some("LOG_REPLICATION_STATEMENT");
    t[43] = Some("LOG_DIFF_UNDOREDO_DATA");
    t[44] = Some("LOG_DUMMY_HA_SERVER_STATE");
    t[45] = Some("LOG_DUMMY_OVF_RECORD");
    t[46] = Some("LOG_MVCC_UNDOREDO_DATA");
    t[47] = Some("LOG_MVCC_UNDO_DATA");
    t[48] = Some("LOG_MVCC_REDO_DATA");
    t[49] = Some("LOG_MVCC_DIFF_UNDOREDO_DATA");
    t[50] = Some("LOG_SYSOP_ATOMIC_START");
    t[51] = Some("LOG_DUMMY_GENERIC");
    t[52] = Some("LOG_SUPPLEMENTAL_INFO");
    t
};

pub fn type_name(t: i32) -> Option<&'static str> {
    usize::try_from(t).ok().and_then(|i| TYPE_NAMES.get(i).copied().flatten())
}

/// Size of the data header that follows the record header, or `None` for values that are not
/// record types the engine writes.
pub fn data_header_size(t: i32) -> Option<usize> {
    Some(match t {
        LOG_UNDOREDO_DATA | LOG_DIFF_UNDOREDO_DATA => 20,
        LOG_UNDO_DATA | LOG_REDO_DATA | LOG_POSTPONE => 16,
        LOG_DBEXTERN_REDO_DATA => 8,
        LOG_RUN_POSTPONE | LOG_COMPENSATE => 32,
        LOG_COMMIT_WITH_POSTPONE => 16,
        LOG_COMMIT_WITH_POSTPONE_OBSOLETE | LOG_COMMIT | LOG_ABORT => 8,
        LOG_SYSOP_START_POSTPONE => 80,
        LOG_SYSOP_END => 72,
        LOG_END_CHKPT | LOG_SAVEPOINT => 16,
        LOG_2PC_PREPARE => 52,
        LOG_2PC_START => 48,
        LOG_2PC_RECV_ACK => 4,
        LOG_REPLICATION_DATA | LOG_REPLICATION_STATEMENT => 16,
        LOG_DUMMY_HA_SERVER_STATE => 16,
        LOG_MVCC_UNDOREDO_DATA | LOG_MVCC_DIFF_UNDOREDO_DATA => 48,
        LOG_MVCC_UNDO_DATA => 40,
        LOG_MVCC_REDO_DATA => 24,
        LOG_SUPPLEMENTAL_INFO => 8,
        LOG_START_CHKPT
        | LOG_2PC_COMMIT_DECISION
        | LOG_2PC_ABORT_DECISION
        | LOG_2PC_COMMIT_INFORM_PARTICPS
        | LOG_2PC_ABORT_INFORM_PARTICPS
        | LOG_END_OF_LOG
        | LOG_DUMMY_HEAD_POSTPONE
        | LOG_DUMMY_CRASH_RECOVERY
        | LOG_DUMMY_OVF_RECORD
        | LOG_SYSOP_ATOMIC_START
        | LOG_DUMMY_GENERIC => 0,
        _ => return None,
    })
}

/// Types whose payload length fields may carry the zip bit.
pub fn may_zip(t: i32) -> bool {
    matches!(
        t,
        LOG_UNDOREDO_DATA
            | LOG_UNDO_DATA
            | LOG_REDO_DATA
            | LOG_DIFF_UNDOREDO_DATA
            | LOG_MVCC_UNDOREDO_DATA
            | LOG_MVCC_UNDO_DATA
            | LOG_MVCC_REDO_DATA
            | LOG_MVCC_DIFF_UNDOREDO_DATA
            | LOG_SUPPLEMENTAL_INFO
    )
}

pub fn is_diff(t: i32) -> bool {
    t == LOG_DIFF_UNDOREDO_DATA || t == LOG_MVCC_DIFF_UNDOREDO_DATA
}

/// Types whose data header starts with `LOG_DATA` {rcvindex, pageid, offset, volid}.
pub fn has_log_data(t: i32) -> bool {
    matches!(
        t,
        LOG_UNDOREDO_DATA
            | LOG_UNDO_DATA
            | LOG_REDO_DATA
            | LOG_POSTPONE
            | LOG_RUN_POSTPONE
            | LOG_COMPENSATE
            | LOG_DIFF_UNDOREDO_DATA
            | LOG_MVCC_UNDOREDO_DATA
            | LOG_MVCC_UNDO_DATA
            | LOG_MVCC_REDO_DATA
            | LOG_MVCC_DIFF_UNDOREDO_DATA
    )
}

/// `LOG_SYSOP_END_TYPE` values that carry a logical undo payload.
pub const SYSOP_END_LOGICAL_UNDO: i32 = 2;
pub const SYSOP_END_LOGICAL_MVCC_UNDO: i32 = 3;

/// The raw (undo slot, redo slot) length fields of a record, zip bit included.
/// Counts that multiply (checkpoint tables, 2PC arrays) are returned already multiplied and
/// saturated, never as negative numbers.
pub fn raw_payload_lengths(t: i32, dh: &[u8]) -> (u32, u32) {
    let u = |off: usize| i32_at(dh, off) as u32;
    let count = |n_off: usize, size: u64| -> u32 {
        let n = i32_at(dh, n_off).max(0) as u64;
        (n * size).min(u32::MAX as u64) as u32
    };
    match t {
        LOG_UNDOREDO_DATA | LOG_DIFF_UNDOREDO_DATA | LOG_MVCC_UNDOREDO_DATA | LOG_MVCC_DIFF_UNDOREDO_DATA => {
            (u(12), u(16))
        }
        LOG_UNDO_DATA | LOG_MVCC_UNDO_DATA => (u(12), 0),
        LOG_REDO_DATA | LOG_POSTPONE | LOG_MVCC_REDO_DATA => (0, u(12)),
        LOG_DBEXTERN_REDO_DATA => (0, u(4)),
        LOG_RUN_POSTPONE | LOG_COMPENSATE => (u(24), 0),
        LOG_SYSOP_END | LOG_SYSOP_START_POSTPONE => {
            let st = i32_at(dh, 16);
            if st == SYSOP_END_LOGICAL_UNDO || st == SYSOP_END_LOGICAL_MVCC_UNDO {
                (u(44), 0)
            } else {
                (0, 0)
            }
        }
        LOG_END_CHKPT => (count(8, 112), count(12, 24)),
        LOG_SAVEPOINT | LOG_REPLICATION_DATA | LOG_REPLICATION_STATEMENT => (u(8), 0),
        LOG_2PC_PREPARE => (u(40), count(44, 20)),
        LOG_2PC_START => {
            let n = i32_at(dh, 40).max(0) as u64;
            let l = i32_at(dh, 44).max(0) as u64;
            ((n * l).min(u32::MAX as u64) as u32, 0)
        }
        LOG_SUPPLEMENTAL_INFO => (u(4), 0),
        _ => (0, 0),
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
    fn every_named_type_has_a_layout() {
        for (t, name) in TYPE_NAMES.iter().enumerate() {
            if name.is_some() {
                assert!(data_header_size(t as i32).is_some(), "{name:?}");
                assert!(data_header_size(t as i32).unwrap() <= MAX_DATA_HEADER);
            }
        }
        assert_eq!(type_name(52), Some("LOG_SUPPLEMENTAL_INFO"));
        assert_eq!(type_name(24), None);
        assert_eq!(data_header_size(24), None);
    }
}
