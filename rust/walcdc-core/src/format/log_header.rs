//! The active volume's header page (`LOG_HEADER`, physical page 0 of `<db>_lgat`): the fields
//! a reader uses, decoded from bytes.

use crate::format::le::{i16_at, i32_at, i64_at, lsa_at};
use crate::format::lsa::Lsa;

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// `LOG_HEADER` of the active volume (the fields a reader uses).
#[derive(Clone, Debug)]
pub struct ActiveHeader {
    pub db_creation: i64,
    pub db_release: String,
    pub db_compatibility: f32,
    pub db_iopagesize: i16,
    pub db_logpagesize: i16,
    pub is_shutdown: bool,
    pub next_trid: i32,
    pub mvcc_next_id: u64,
    pub npages: i32,
    pub db_charset: i8,
    pub fpageid: i64,
    pub append_lsa: Lsa,
    pub chkpt_lsa: Lsa,
    pub nxarv_pageid: i64,
    pub nxarv_phy_pageid: i32,
    pub nxarv_num: i32,
    pub last_arv_num_for_syscrashes: i32,
    pub last_deleted_arv_num: i32,
    pub prefix_name: String,
    pub ha_server_state: i32,
    pub eof_lsa: Lsa,
    pub smallest_lsa_at_last_chkpt: Lsa,
    pub mvcc_op_log_lsa: Lsa,
    pub was_active_log_reset: bool,
}

impl ActiveHeader {
    /// Parses `LOG_HEADER` from the struct bytes (file offset 16 of physical page 0).
    pub fn parse(h: &[u8]) -> ActiveHeader {
        ActiveHeader {
            db_creation: i64_at(h, 32),
            db_release: cstr(&h[40..55]),
            db_compatibility: f32::from_le_bytes(h[56..60].try_into().unwrap()),
            db_iopagesize: i16_at(h, 60),
            db_logpagesize: i16_at(h, 62),
            is_shutdown: h[64] != 0,
            next_trid: i32_at(h, 68),
            mvcc_next_id: i64_at(h, 72) as u64,
            npages: i32_at(h, 88),
            db_charset: h[92] as i8,
            fpageid: i64_at(h, 96),
            append_lsa: lsa_at(h, 104),
            chkpt_lsa: lsa_at(h, 112),
            nxarv_pageid: i64_at(h, 120),
            nxarv_phy_pageid: i32_at(h, 128),
            nxarv_num: i32_at(h, 132),
            last_arv_num_for_syscrashes: i32_at(h, 136),
            last_deleted_arv_num: i32_at(h, 140),
            prefix_name: cstr(&h[168..186]),
            ha_server_state: i32_at(h, 304),
            eof_lsa: lsa_at(h, 312),
            smallest_lsa_at_last_chkpt: lsa_at(h, 320),
            mvcc_op_log_lsa: lsa_at(h, 328),
            was_active_log_reset: h[370] != 0,
        }
    }
}
