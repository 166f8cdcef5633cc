//! Record-aligned ranges of a log set, found from volume and page headers alone: how a driver
//! splits years of archives for parallel readers without walking them. A range holds the
//! records that start in `[start, end)`; a record that spans a cut belongs to the range it
//! starts in, and the last range runs to the true end of the log (past a crashed log's stale
//! header).

use crate::format::lsa::Lsa;
use crate::log::logset::LogSet;
use crate::log::source::Fetch;

/// The records that start at or after `start` (None: the first record of the set) and before
/// `end` (None: the end of the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub start: Option<Lsa>,
    pub end: Option<Lsa>,
}

/// Splits the log into ranges of about `pages_per_range` pages. Each cut is the first record
/// starting on the first page at or after a multiple of `pages_per_range` whose header names
/// one; reads one page header per cut (a few more where records span pages).
pub fn split(log: &LogSet, pages_per_range: i64) -> Vec<Range> {
    split_from(log, None, pages_per_range)
}

/// As [`split`], for the records from `from` on (a record start; None: the first record of
/// the set): the first range starts there, the cuts lie on the pages after it (none before it
/// is read).
pub fn split_from(log: &LogSet, from: Option<Lsa>, pages_per_range: i64) -> Vec<Range> {
    let step = pages_per_range.max(1);
    let first = from.map_or(log.first_pageid, |l| l.pageid);
    // The last page the headers vouch for; the last range reads on to the true end.
    let last = match log.header() {
        Some(h) => h.append_lsa.pageid,
        None => log.nxarv_pageid() - 1,
    };
    let mut cuts: Vec<Lsa> = Vec::new();
    let mut at = first + step;
    while at <= last {
        let below = (at + step).min(last + 1);
        if let Some(cut) = first_record_on_or_after(log, at, below) {
            if cuts.last().is_none_or(|&c| cut > c) {
                cuts.push(cut);
            }
        }
        // The headers read (and what the system mapped around them) are not kept mapped: a
        // plan of a long log would otherwise hold a piece of every range.
        log.release_pages(at, below);
        at += step;
    }
    let mut ranges = Vec::with_capacity(cuts.len() + 1);
    let mut start = from;
    for cut in cuts {
        ranges.push(Range { start, end: Some(cut) });
        start = Some(cut);
    }
    ranges.push(Range { start, end: None });
    ranges
}

/// The first record that starts on a page in `[from, below)`, from the page headers.
fn first_record_on_or_after(log: &LogSet, from: i64, below: i64) -> Option<Lsa> {
    (from..below).find_map(|p| match log.fetch(p) {
        Fetch::Ok(page) | Fetch::Encrypted(page) if page.header.offset >= 0 => Some(Lsa::new(p, page.header.offset)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::log::walker::{OnEncrypted, Walker};
    use crate::testkit::writer::{DataFields, LogWriter, WriterConfig};

    fn lsas(log: &Arc<LogSet>, r: Range) -> Vec<Lsa> {
        Walker::new(log.clone(), r.start, r.end, OnEncrypted::Raise).unwrap().map(|x| x.unwrap().lsa).collect()
    }

    /// Ranges of every size, over archives and the ring, hold every record exactly once, in
    /// order, records spanning pages included.
    #[test]
    fn ranges_partition_the_records() {
        let cfg = WriterConfig { page_size: 4096, active_pages: 24, archive_pages: 8, ..WriterConfig::default() };
        let mut w = LogWriter::new(cfg).unwrap();
        for i in 0..600usize {
            let body = vec![i as u8; if i % 50 == 0 { 9000 } else { 40 + i % 300 }];
            let fields = DataFields { rcvindex: 1, ..DataFields::default() };
            w.append(1 + (i % 3) as i32, crate::format::rectype::LOG_REDO_DATA, &fields, &[], &body, false, false)
                .unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        w.finish(dir.path()).unwrap();
        let log = Arc::new(LogSet::open(&[dir.path()]).unwrap());
        let whole = lsas(&log, Range { start: None, end: None });
        assert!(whole.len() == 600);
        for pages in [1, 2, 3, 7, 16, 1000] {
            let ranges = split(&log, pages);
            let mut joined = Vec::new();
            for r in &ranges {
                let part = lsas(&log, *r);
                assert!(!part.is_empty() || r.end.is_none(), "an empty range {r:?}");
                joined.extend(part);
            }
            assert_eq!(joined, whole, "{pages} pages per range");
            // From any cut on, the ranges are those cuts' own (and the same records).
            if let Some(mid) = ranges.get(ranges.len() / 2).and_then(|r| r.start) {
                let tail = split_from(&log, Some(mid), pages);
                assert_eq!(tail[..], ranges[ranges.len() / 2..], "{pages} pages per range, from {mid}");
            }
            if pages <= 3 {
                assert!(ranges.len() > 10, "{} ranges of {pages} pages", ranges.len());
            }
        }
    }
}
