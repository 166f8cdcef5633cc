//! Positions in a log set: time to LSA, and the archives a restart still needs.

use std::sync::Arc;

use crate::error::Result;
use crate::format::lsa::Lsa;
use crate::format::rectype::{LOG_ABORT, LOG_COMMIT, LOG_DUMMY_HA_SERVER_STATE};
use crate::log::logset::LogSet;
use crate::log::walker::{OnEncrypted, Walker};

/// Time to LSA, as CUBRID's `cdc_find_lsa` does it: the first commit, abort or HA-state record
/// with a time at or after `time` (seconds). Returns the LSA and whether no such record exists
/// (then the LSA is where the log ends: nothing happened at or after that time).
pub fn find_lsa(log: &Arc<LogSet>, time: i64) -> Result<(Lsa, bool)> {
    let mut w = Walker::new(log.clone(), None, None, OnEncrypted::Skip)?;
    while let Some(r) = w.next_record()? {
        if matches!(r.rectype, LOG_COMMIT | LOG_ABORT | LOG_DUMMY_HA_SERVER_STATE)
            && r.at_time().is_some_and(|t| t >= time)
        {
            return Ok((r.lsa, false));
        }
    }
    Ok((w.end_lsa.or(w.last_lsa).unwrap_or(Lsa::new(log.first_pageid, 0)), true))
}

/// The oldest archive a reader restarting at `restart_lsa` still needs: archives with smaller
/// numbers can be deleted (CUBRID's `cdc_min_log_pageid_to_keep`, at archive granularity).
/// `None` when the set holds neither archives nor an active header that counts them.
pub fn min_archive_needed(log: &LogSet, restart_lsa: Lsa) -> Option<i64> {
    if let Some(a) = log.archives.iter().find(|a| a.contains(restart_lsa.pageid)) {
        return Some(a.num);
    }
    let h = log.header()?;
    if restart_lsa.pageid >= h.nxarv_pageid {
        return Some(h.nxarv_num as i64);
    }
    // Below the archives of the set: the oldest one given is still needed.
    log.archives.first().map(|a| a.num)
}
