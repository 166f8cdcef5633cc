//! Transaction assembly: an open transaction's events, undone ranges (partial rollbacks) and
//! staged class changes, and the rule that decides which events a rollback undid.

use std::io::BufWriter;
use std::sync::Arc;

use crate::cdc::event::Event;
use crate::format::lsa::Lsa;

/// Events of one transaction that did not fit the memory bound, in a temporary file.
pub(crate) struct Spill {
    pub(crate) file: BufWriter<std::fs::File>,
    pub(crate) count: u64,
}

/// One open transaction.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Txn {
    pub(crate) first_lsa: Lsa,
    pub(crate) last_lsa: Lsa,
    pub(crate) user: Option<Arc<str>>,
    pub(crate) events: Vec<Event>,
    pub(crate) bytes: usize,
    /// Never part of a reader state (`ChangeReader::state` refuses spilled transactions).
    #[serde(skip)]
    pub(crate) spill: Option<Spill>,
    /// Ranges of this transaction's LSAs undone by partial rollbacks: `(lo, hi)` exclusive,
    /// `lo = NULL` for "from the transaction's start".
    pub(crate) undone: Vec<(Lsa, Lsa)>,
    pub(crate) mvcc_dml: bool,
    pub(crate) committed_with_postpone: bool,
    /// Engine-compatible stream: CUBRID's producer ignores this transaction (it aborted before
    /// its user could be learned).
    pub(crate) ignored: bool,
    /// Its first record lies before the log set's oldest volume (an archive that held it is
    /// gone): the events it made there are lost, so it is not passed off as complete.
    pub(crate) partial: bool,
    /// The walk skipped records (encrypted pages, unplaced records) since this transaction's
    /// last record: its chain of `prev_tranlsa` cannot be checked any more.
    #[serde(default)]
    pub(crate) chain_unknown: bool,
    /// An UNDO_RECORD supplement (a deleted row's image) waiting for the DELETE supplement
    /// that points to it, which CUBRID writes next.
    #[serde(default)]
    pub(crate) pending_undo: Option<Lsa>,
    /// Reading one range of a plan: the transaction's record before its first one in the
    /// range, from which its earlier records are read back along its chain when it ends.
    #[serde(skip)]
    pub(crate) earlier: Option<Lsa>,
    /// A supplemental record of this transaction was read (see [`Txn::then`]).
    #[serde(skip)]
    pub(crate) saw_supplement: bool,
}

impl Txn {
    pub(crate) fn new(lsa: Lsa) -> Txn {
        Txn {
            first_lsa: lsa,
            last_lsa: lsa,
            user: None,
            events: Vec::new(),
            bytes: 0,
            spill: None,
            undone: Vec::new(),
            mvcc_dml: false,
            committed_with_postpone: false,
            ignored: false,
            partial: false,
            chain_unknown: false,
            pending_undo: None,
            earlier: None,
            saw_supplement: false,
        }
    }

    /// This transaction's records followed by `later`'s, the same transaction's (read back
    /// along its chain and read forward in a range): one transaction, as a reader that saw
    /// all its records in order would have made it. Spilled events stay in order: this one's
    /// events (spilled, then in memory) go to its spill file, followed by `later`'s spilled
    /// ones; `later`'s events in memory stay in memory.
    pub(crate) fn then(mut self, mut later: Txn) -> std::io::Result<Txn> {
        if later.spill.is_some() || self.spill.is_some() {
            if self.spill.is_none() {
                let file = tempfile::tempfile()?;
                self.spill = Some(Spill { file: BufWriter::with_capacity(1 << 20, file), count: 0 });
            }
            let spill = self.spill.as_mut().expect("made above");
            for e in self.events.drain(..) {
                crate::cdc::spill::write_event(&mut spill.file, &e)?;
                spill.count += 1;
            }
            if let Some(theirs) = later.spill.take() {
                use std::io::{Seek, Write};
                let mut file = theirs.file.into_inner().map_err(|e| e.into_error())?;
                file.seek(std::io::SeekFrom::Start(0))?;
                std::io::copy(&mut file, &mut spill.file)?;
                spill.count += theirs.count;
                spill.file.flush()?;
            }
        }
        self.events.append(&mut later.events);
        self.last_lsa = later.last_lsa;
        self.user = self.user.or(later.user);
        self.bytes += later.bytes;
        self.undone.append(&mut later.undone);
        self.mvcc_dml |= later.mvcc_dml;
        self.committed_with_postpone |= later.committed_with_postpone;
        self.ignored |= later.ignored;
        self.chain_unknown |= later.chain_unknown;
        // A deleted row's image left waiting at the end of the earlier records is the later
        // records' first supplement's to use.
        if later.saw_supplement {
            self.pending_undo = later.pending_undo;
        }
        self.saw_supplement |= later.saw_supplement;
        Ok(self)
    }

    pub(crate) fn event_count(&self) -> u64 {
        self.events.len() as u64 + self.spill.as_ref().map_or(0, |s| s.count)
    }

    /// A copy, if all its events are in memory.
    pub(crate) fn snapshot(&self) -> Option<Txn> {
        if self.spill.is_some() {
            return None;
        }
        Some(Txn {
            first_lsa: self.first_lsa,
            last_lsa: self.last_lsa,
            user: self.user.clone(),
            events: self.events.clone(),
            bytes: self.bytes,
            spill: None,
            undone: self.undone.clone(),
            mvcc_dml: self.mvcc_dml,
            committed_with_postpone: self.committed_with_postpone,
            ignored: self.ignored,
            partial: self.partial,
            chain_unknown: self.chain_unknown,
            pending_undo: self.pending_undo,
            earlier: self.earlier,
            saw_supplement: self.saw_supplement,
        })
    }
}

pub(crate) fn merge_ranges(mut r: Vec<(Lsa, Lsa)>) -> Vec<(Lsa, Lsa)> {
    // A range must end after it starts (a hostile compensation could say otherwise).
    r.retain(|(lo, hi)| lo.is_null() || lo < hi);
    // NULL (from the start) sorts first once mapped to the smallest LSA.
    for x in r.iter_mut() {
        if x.0.is_null() {
            x.0 = Lsa::new(i64::MIN >> 16, i16::MIN);
        }
    }
    r.sort();
    let mut out: Vec<(Lsa, Lsa)> = Vec::with_capacity(r.len());
    for (lo, hi) in r {
        match out.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

pub(crate) fn undone(ranges: &[(Lsa, Lsa)], lsa: Lsa) -> bool {
    let i = ranges.partition_point(|r| r.1 <= lsa);
    ranges.get(i).is_some_and(|r| r.0 < lsa && lsa < r.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undone_ranges_merge_and_test_exclusively() {
        let l = |p, o| Lsa::new(p, o);
        let r = merge_ranges(vec![(l(5, 0), l(9, 0)), (Lsa::NULL, l(2, 0)), (l(8, 0), l(12, 0))]);
        assert_eq!(r.len(), 2);
        assert!(undone(&r, l(1, 0)));
        assert!(!undone(&r, l(2, 0)));
        assert!(!undone(&r, l(5, 0)));
        assert!(undone(&r, l(11, 8)));
        assert!(!undone(&r, l(12, 0)));
    }
}
