//! What the ranges of a plan (Spark tasks, each reading its range once with
//! [`crate::cdc::changes::ChangeReader::for_range`]) need that no range knows alone: the catalog.
//!
//! A range reports *facts* — transaction starts and ends, undone ranges, users, writes of the
//! heap and overflow pages class records live in ([`range_facts`]) — and reduces them where
//! it is read to what the catalog needs ([`RangeCatalog`]: the class-record writes of its DDL
//! transactions, and those of the transactions open at its edges). The driver joins the
//! reductions in log order ([`catalog_inputs`]) and reads those writes once by random access
//! into [`CatalogVersions`]: the class changes each commit made (and each transaction's own,
//! for CUBRID's stream), from which any task builds the catalog as of any LSA
//! ([`CatalogAsOf`]). Nothing about the catalog is learned by walking the log before a range.
//! The facts also answer the questions of cursors and of the supplemental-logging check
//! (`python/walcdc/spark.py`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cdc::catalog::{self, Catalog, CatalogCheckpoint, ClassChange, ClassTracker, Staging};
use crate::cdc::extract::Extractor;
use crate::cdc::framed::Framed;
use crate::cdc::options::UserSchema;
use crate::error::{LogError, Result};
use crate::format::lsa::Lsa;
use crate::format::rectype::*;
use crate::format::supplemental::{self, Supplement};
use crate::log::logset::LogSet;
use crate::log::record::ReadRecords;
use crate::log::source::LogSource;
use crate::log::walker::{BeyondEnd, OnEncrypted, SkippedRange, Walker};

/// What a fact says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum FactKind {
    /// A record with a NULL `prev_tranlsa`: a transaction starts under `trid`.
    Start = 0,
    Commit = 1,
    Abort = 2,
    /// A compensation or system-operation end undid the transaction's records in `(lo, lsa)`.
    Undone = 3,
    /// A TRAN_USER supplemental record naming the transaction's user.
    User = 4,
    /// A heap or overflow write the class tracker reads; `class_record` when one of its images
    /// is (the start of) a class record.
    ClassWrite = 5,
    /// The first MVCC heap change of a transaction in the range (evidence for
    /// `supplemental_log=0`).
    MvccDml = 6,
    /// CUBRID's timer: the HA-state dummy record of a system transaction (`time` set).
    Timer = 7,
    /// The first record of a transaction in the range that neither starts nor ends it (where a
    /// transaction open at a cut was first seen, for cursors).
    First = 8,
}

impl FactKind {
    /// Every kind with its name: the one table of fact codes (exported to Python by
    /// `walcdc._native.fact_kinds`).
    pub const ALL: [(FactKind, &'static str); 9] = [
        (FactKind::Start, "start"),
        (FactKind::Commit, "commit"),
        (FactKind::Abort, "abort"),
        (FactKind::Undone, "undone"),
        (FactKind::User, "user"),
        (FactKind::ClassWrite, "class_write"),
        (FactKind::MvccDml, "mvcc_dml"),
        (FactKind::Timer, "timer"),
        (FactKind::First, "first"),
    ];

    pub fn from_i8(v: i8) -> Option<FactKind> {
        FactKind::ALL.iter().map(|&(k, _)| k).find(|k| *k as i8 == v)
    }

    pub fn name(self) -> &'static str {
        FactKind::ALL.iter().find(|(k, _)| *k == self).map(|(_, n)| *n).expect("every kind is in ALL")
    }
}

/// One fact of a range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    pub kind: FactKind,
    pub trid: i32,
    pub lsa: Lsa,
    /// The volume holding the record.
    pub vol: u16,
    /// `Undone`: the exclusive low end of the range (`None`: from the transaction's start).
    pub lo: Option<Lsa>,
    /// `Commit`/`Abort`: the end record's time (seconds).
    pub time: Option<i64>,
    pub user: Option<String>,
    pub class_record: bool,
}

impl Fact {
    fn new(kind: FactKind, rec: &crate::log::record::Record) -> Fact {
        Fact { kind, trid: rec.trid, lsa: rec.lsa, vol: rec.vol, lo: None, time: None, user: None, class_record: false }
    }
}

/// What a range says about transactions and class records.
#[derive(Debug, Default)]
pub struct RangeFacts {
    pub facts: Vec<Fact>,
    pub records: u64,
    pub supplemental_records: u64,
    /// Where the walk stopped: the range's end, or the end of the log (for cursors).
    pub resume: Option<Lsa>,
    /// What the walk skipped or could not read (as a stream reports it).
    pub walk: WalkNotes,
}

/// What a walk skipped: runs of encrypted pages (`OnEncrypted::Skip`), records on archived
/// pages that end their page early, readable records past a torn end.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WalkNotes {
    pub skipped: Vec<SkippedRange>,
    pub unplaced: Vec<Lsa>,
    pub beyond_end: Option<BeyondEnd>,
}

/// The facts of the records in `[start, end)` (record starts; `None` = the log's first record /
/// its end).
pub fn range_facts(
    log: &Arc<LogSet>,
    start: Option<Lsa>,
    end: Option<Lsa>,
    on_encrypted: OnEncrypted,
) -> Result<RangeFacts> {
    let mut walker = Walker::for_range(log.clone(), start, end, on_encrypted)?;
    let mut out = RangeFacts::default();
    let mut extractor = Extractor::default();
    // Trids with an MvccDml fact, and trids seen, since their last start or end in this range.
    let mut mvcc = rustc_hash::FxHashSet::default();
    let mut seen = rustc_hash::FxHashSet::default();
    // The walker lends each record: none is copied.
    while let Some(rec) = walker.next_ref()? {
        out.records += 1;
        if rec.trid <= 0 {
            if rec.rectype == LOG_DUMMY_HA_SERVER_STATE {
                out.facts.push(Fact { time: rec.at_time(), ..Fact::new(FactKind::Timer, rec) });
            }
            continue;
        }
        let ends = matches!(rec.rectype, LOG_COMMIT | LOG_ABORT);
        if rec.prev_tranlsa.is_null() {
            out.facts.push(Fact::new(FactKind::Start, rec));
            mvcc.remove(&rec.trid);
            seen.insert(rec.trid);
        } else if !ends && seen.insert(rec.trid) {
            out.facts.push(Fact::new(FactKind::First, rec));
        }
        if let Some(class_record) = catalog::class_record_write(&**log, rec)? {
            out.facts.push(Fact { class_record, ..Fact::new(FactKind::ClassWrite, rec) });
        }
        let undone = |lo: Lsa| Fact { lo: (!lo.is_null()).then_some(lo), ..Fact::new(FactKind::Undone, rec) };
        match rec.rectype {
            LOG_SUPPLEMENTAL_INFO => {
                out.supplemental_records += 1;
                if rec.supplement_type() == Some(supplemental::TRAN_USER) {
                    if let Supplement::TranUser(user) = extractor.supplement(&**log, rec)? {
                        out.facts.push(Fact { user: Some(user), ..Fact::new(FactKind::User, rec) });
                    }
                }
            }
            LOG_COMPENSATE => {
                if let Some(x) = rec.undo_nxlsa() {
                    out.facts.push(undone(x));
                }
            }
            LOG_SYSOP_END => match rec.sysop_type() {
                Some(SYSOP_END_ABORT) => out.facts.push(undone(rec.sysop_lastparent_lsa().unwrap_or(Lsa::NULL))),
                Some(SYSOP_END_LOGICAL_COMPENSATE) => {
                    if let Some(c) = rec.sysop_compensate_lsa() {
                        out.facts.push(undone(c));
                    }
                }
                _ => {}
            },
            LOG_COMMIT | LOG_ABORT => {
                let kind = if rec.rectype == LOG_COMMIT { FactKind::Commit } else { FactKind::Abort };
                out.facts.push(Fact { time: rec.at_time(), ..Fact::new(kind, rec) });
                mvcc.remove(&rec.trid);
                seen.remove(&rec.trid);
            }
            _ => {
                if rec.is_mvcc_dml() && mvcc.insert(rec.trid) {
                    out.facts.push(Fact::new(FactKind::MvccDml, rec));
                }
            }
        }
    }
    out.resume = walker.resume_point();
    out.walk = WalkNotes {
        skipped: std::mem::take(&mut walker.skipped),
        unplaced: std::mem::take(&mut walker.unplaced),
        beyond_end: walker.beyond_end,
    };
    Ok(out)
}

/// What the catalog builder reads, in log order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CatalogInput {
    /// A record to read by random access: a class-record write, or the end record of a
    /// transaction that made one; `end` is the first start or end record of its trid after it
    /// (what events of the same transaction are joined to), `None` while it is still open.
    Record { lsa: Lsa, end: Option<Lsa> },
    /// A transaction that made class-record writes was abandoned: a new one starts under its
    /// trid at `lsa` (its staged changes are dropped).
    Restart { trid: i32, lsa: Lsa },
}

impl CatalogInput {
    fn lsa(&self) -> Lsa {
        match *self {
            CatalogInput::Record { lsa: l, .. } | CatalogInput::Restart { lsa: l, .. } => l,
        }
    }
}

/// What one range tells the catalog's builder, reduced from its facts where it was read: the
/// class-tracker writes of the transaction instances that begin and end in the range (only
/// those holding a class-record image, with their end), and, for the instances that cross its
/// edges, each trid's writes before its first start or end record here (`heads`, with that
/// record) and after its last one (`tails`). [`catalog_inputs`] joins the ranges in log order:
/// what reaches the driver is bounded by the DDL and by the transactions open at the edges,
/// not by the changes. The rules are those of the as-of join (`python/walcdc/spark.py`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RangeCatalog {
    heads: Vec<Head>,
    inputs: Vec<CatalogInput>,
    tails: Vec<(i32, Vec<(Lsa, bool)>)>,
    /// Supplemental records in the range.
    pub supplemental_records: u64,
    /// The transactions open at the range's start, in log order of their first record here.
    crossing: Vec<Crossing>,
    /// What the range's walk skipped.
    pub walk: WalkNotes,
    /// Transactions begun in the range that a start of another under the same trid cut short
    /// there (before an end record).
    restarted: u64,
    /// The transactions open at the range's end, as far as the range shows: each trid with
    /// the first record of its transaction in the range.
    open_at_end: Vec<(i32, Lsa)>,
}

/// A transaction open at a range's start: its first record in the range, and its first start
/// or end record there (`FactKind` code: a start means the open one was abandoned), if any.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Crossing {
    trid: i32,
    first: Lsa,
    end: Option<(Lsa, i8)>,
}

/// How many transactions the ranges (consecutive reductions, in log order) show restarted:
/// cut short by a start of another transaction under their trid before an end record, as the
/// one-pass reader over the same records counts them (`restarted_transactions`); only those
/// cut short in `ranges[window]` are counted.
pub fn restarted(ranges: &[RangeCatalog], window: std::ops::Range<usize>) -> u64 {
    let start = FactKind::Start as i8;
    let mut open = rustc_hash::FxHashSet::default();
    let mut n = 0;
    for (i, r) in ranges.iter().enumerate().take(window.end) {
        let crossing: rustc_hash::FxHashSet<i32> = r.crossing.iter().map(|c| c.trid).collect();
        let mut here = r.restarted;
        here += r.crossing.iter().filter(|c| c.end.is_some_and(|e| e.1 == start)).count() as u64;
        // Open before the range and not seen in it before its trid's first marker, a start.
        here += r
            .heads
            .iter()
            .filter(|h| h.marker.is_some_and(|m| m.1) && open.contains(&h.trid) && !crossing.contains(&h.trid))
            .count() as u64;
        if i >= window.start {
            n += here;
        }
        for t in crossing.iter().chain(r.heads.iter().map(|h| &h.trid)) {
            open.remove(t);
        }
        open.extend(r.open_at_end.iter().map(|&(trid, _)| trid));
    }
    n
}

/// How a transaction begun before the first record of a log set ended, if it did within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Committed(Lsa),
    Aborted(Lsa),
    /// A new transaction started under its trid first (the log set never ends it).
    Abandoned(Lsa),
}

/// The transactions begun before the first of `ranges` (the reductions of consecutive ranges
/// from the first record of a log set on, in log order): each one's trid, its first record in
/// the set and how it ended there (None: open at the end of the last range). These are the
/// partial transactions a reader leaves out (`on_partial`), found from the ranges' edges alone.
pub fn begun_before(ranges: &[RangeCatalog]) -> Vec<(i32, Lsa, Option<Fate>)> {
    let Some(first) = ranges.first() else { return Vec::new() };
    let fate = |(lsa, kind): (Lsa, i8)| match FactKind::from_i8(kind) {
        Some(FactKind::Commit) => Fate::Committed(lsa),
        Some(FactKind::Abort) => Fate::Aborted(lsa),
        _ => Fate::Abandoned(lsa),
    };
    let mut out: Vec<(i32, Lsa, Option<Fate>)> =
        first.crossing.iter().map(|c| (c.trid, c.first, c.end.map(fate))).collect();
    for r in &ranges[1..] {
        if out.iter().all(|o| o.2.is_some()) {
            break;
        }
        // Open across this range's start (seen crossing it), or abandoned in it: its trid's
        // first marker here is a start of another transaction.
        let starts: rustc_hash::FxHashMap<i32, Lsa> =
            r.heads.iter().filter_map(|h| h.marker.filter(|m| m.1).map(|m| (h.trid, m.0))).collect();
        for o in out.iter_mut().filter(|o| o.2.is_none()) {
            match r.crossing.iter().find(|x| x.trid == o.0) {
                Some(x) => o.2 = x.end.map(fate),
                None => o.2 = starts.get(&o.0).map(|&lsa| Fate::Abandoned(lsa)),
            }
        }
    }
    out
}

/// The transactions open at the end of the last of `ranges` (the reductions of consecutive
/// ranges, in log order), each trid with the first record of its transaction in them, oldest
/// first: what a one-pass reader over the same records holds open at its end (and so where
/// its cursor restarts).
pub fn open_at_end(ranges: &[RangeCatalog]) -> Vec<(i32, Lsa)> {
    let mut open: rustc_hash::FxHashMap<i32, Lsa> = Default::default();
    for r in ranges {
        let crossing: rustc_hash::FxHashMap<i32, &Crossing> = r.crossing.iter().map(|c| (c.trid, c)).collect();
        let marked: rustc_hash::FxHashSet<i32> =
            r.heads.iter().filter(|h| h.marker.is_some()).map(|h| h.trid).collect();
        // Open before the range and not seen in it: still open, begun where it began.
        let mut next: rustc_hash::FxHashMap<i32, Lsa> = open
            .iter()
            .filter(|(t, _)| !crossing.contains_key(t) && !marked.contains(t))
            .map(|(&t, &first)| (t, first))
            .collect();
        for &(trid, here) in &r.open_at_end {
            // Crossing the range's start and not ended in it: the transaction open before.
            let continuing = crossing.get(&trid).is_some_and(|c| c.end.is_none());
            let first = if continuing { open.get(&trid).copied().unwrap_or(here) } else { here };
            next.insert(trid, first);
        }
        open = next;
    }
    let mut out: Vec<(i32, Lsa)> = open.into_iter().collect();
    out.sort_by_key(|&(trid, first)| (first, trid));
    out
}

/// A trid's class-tracker writes `(lsa, class_record)` in a range before its first start or
/// end record there (`marker`: its LSA and whether it starts a transaction; None: the trid
/// has none in the range).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Head {
    trid: i32,
    writes: Vec<(Lsa, bool)>,
    marker: Option<(Lsa, bool)>,
}

/// A range's catalog facts as bytes (version 3: with the transactions crossing its start, what
/// its walk skipped, and where the transactions open at its end begin in it).
const RANGE_CATALOG_BYTES: Framed = Framed { magic: b"WALCDCRC", version: 3, what: "a walcdc range catalog" };

/// The inputs of an instance ending at `marker` (None: still open) with these writes.
fn instance_inputs(trid: i32, writes: &[(Lsa, bool)], marker: Option<(Lsa, bool)>, out: &mut Vec<CatalogInput>) {
    let end = marker.map(|(m, _)| m);
    out.extend(writes.iter().map(|&(lsa, _)| CatalogInput::Record { lsa, end }));
    match marker {
        Some((lsa, true)) => out.push(CatalogInput::Restart { trid, lsa }),
        Some((lsa, false)) => out.push(CatalogInput::Record { lsa, end: Some(lsa) }),
        None => {}
    }
}

impl RangeCatalog {
    /// The reduction of a range's facts (in log order).
    pub fn from_facts(facts: &RangeFacts) -> RangeCatalog {
        let mut out = RangeCatalog {
            supplemental_records: facts.supplemental_records,
            walk: facts.walk.clone(),
            ..Default::default()
        };
        // Per trid: whether a marker was seen, and the writes since the last one.
        let mut open: BTreeMap<i32, (bool, Vec<(Lsa, bool)>)> = BTreeMap::new();
        // Trids seen here (their instance began here, or crosses the start), and the crossing
        // ones whose end is not seen yet (their place in `crossing`).
        let mut here = rustc_hash::FxHashSet::default();
        let mut undecided: rustc_hash::FxHashMap<i32, usize> = Default::default();
        // Trids whose transaction is open here (begun here, or seen crossing the start).
        let mut open_here = BTreeMap::new();
        for f in &facts.facts {
            match f.kind {
                FactKind::First if here.insert(f.trid) => {
                    undecided.insert(f.trid, out.crossing.len());
                    out.crossing.push(Crossing { trid: f.trid, first: f.lsa, end: None });
                    open_here.insert(f.trid, f.lsa);
                }
                FactKind::Start | FactKind::Commit | FactKind::Abort => {
                    let end = Some((f.lsa, f.kind as i8));
                    if let Some(i) = undecided.remove(&f.trid) {
                        out.crossing[i].end = end;
                    } else if f.kind != FactKind::Start && !here.contains(&f.trid) {
                        out.crossing.push(Crossing { trid: f.trid, first: f.lsa, end });
                    } else if f.kind == FactKind::Start && open_here.contains_key(&f.trid) {
                        out.restarted += 1;
                    }
                    here.insert(f.trid);
                    if f.kind == FactKind::Start {
                        open_here.insert(f.trid, f.lsa);
                    } else {
                        open_here.remove(&f.trid);
                    }
                }
                _ => {}
            }
            match f.kind {
                FactKind::ClassWrite => open.entry(f.trid).or_default().1.push((f.lsa, f.class_record)),
                FactKind::Start | FactKind::Commit | FactKind::Abort => {
                    let marker = Some((f.lsa, f.kind == FactKind::Start));
                    let (seen, writes) = open.entry(f.trid).or_default();
                    let writes = std::mem::take(writes);
                    if !*seen {
                        *seen = true;
                        out.heads.push(Head { trid: f.trid, writes, marker });
                    } else if writes.iter().any(|w| w.1) {
                        instance_inputs(f.trid, &writes, marker, &mut out.inputs);
                    }
                }
                _ => {}
            }
        }
        out.open_at_end = open_here.into_iter().collect();
        for (trid, (seen, writes)) in open {
            if !seen {
                out.heads.push(Head { trid, writes, marker: None });
            } else if !writes.is_empty() {
                out.tails.push((trid, writes));
            }
        }
        out
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        RANGE_CATALOG_BYTES.encode(self, 0)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<RangeCatalog> {
        RANGE_CATALOG_BYTES.decode(bytes)
    }
}

/// The catalog's inputs from the ranges' reductions, in log order of the ranges (which cover
/// the facts' span without gaps): what [`CatalogVersions::build_from`] reads. `seed_trids`:
/// transactions with class work staged at the catalog checkpoint the ranges start at (their
/// instance is read up to their first start or end record, class-record image or not).
/// Sorted by LSA, a restart before a record at the same LSA.
pub fn catalog_inputs(ranges: &[RangeCatalog], seed_trids: &[i32]) -> Vec<CatalogInput> {
    // Per trid: writes of the instance open so far, and whether it is a seed's.
    let mut pending: BTreeMap<i32, (Vec<(Lsa, bool)>, bool)> =
        seed_trids.iter().map(|&t| (t, (Vec::new(), true))).collect();
    let mut out = Vec::new();
    for r in ranges {
        for h in &r.heads {
            let (mut writes, forced) = pending.remove(&h.trid).unwrap_or_default();
            writes.extend_from_slice(&h.writes);
            match h.marker {
                Some(marker) => {
                    if forced || writes.iter().any(|w| w.1) {
                        instance_inputs(h.trid, &writes, Some(marker), &mut out);
                    }
                }
                None => {
                    pending.insert(h.trid, (writes, forced));
                }
            }
        }
        out.extend_from_slice(&r.inputs);
        for (trid, writes) in &r.tails {
            pending.insert(*trid, (writes.clone(), false));
        }
    }
    for (trid, (writes, forced)) in pending {
        if forced || writes.iter().any(|w| w.1) {
            instance_inputs(trid, &writes, None, &mut out);
        }
    }
    out.sort_by_key(|i| match *i {
        CatalogInput::Restart { lsa, .. } => (lsa, false),
        CatalogInput::Record { lsa, .. } => (lsa, true),
    });
    out
}

/// The class changes each commit made, in commit order: the catalog as of any LSA, built once
/// from the class-record writes and shipped to every task. Also each transaction's class
/// changes as it made them (CUBRID's own stream decodes a change with its transaction's DDL in
/// effect), by `(trid, end)` as in [`CatalogInput::Record`].
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct CatalogVersions {
    /// The catalog before the first input (a checkpoint's, when the inputs start at one).
    base: Catalog,
    commits: Vec<(Lsa, Vec<ClassChange>)>,
    staged: BTreeMap<TxnKey, Vec<(Lsa, ClassChange)>>,
}

/// A transaction: its trid and the first start or end record of that trid after its records.
type TxnKey = (i32, Option<Lsa>);

/// Catalog versions as bytes (version 1).
const VERSIONS_BYTES: Framed = Framed { magic: b"WALCDCCV", version: 1, what: "walcdc catalog versions" };

impl CatalogVersions {
    /// Reads `inputs` (sorted by LSA, a restart before a record at the same LSA) with the class
    /// tracker, as the one-pass reader does over the whole log.
    pub fn build(log: &dyn LogSource, inputs: &[CatalogInput]) -> Result<CatalogVersions> {
        Ok(Self::replay(log, inputs, None, None)?.0)
    }

    /// As [`CatalogVersions::build`] for inputs from `seed.at` on (those of the transactions
    /// open at the checkpoint included): the catalog before them is the checkpoint's.
    pub fn build_from(
        log: &dyn LogSource,
        inputs: &[CatalogInput],
        seed: Option<&CatalogCheckpoint>,
    ) -> Result<CatalogVersions> {
        Ok(Self::replay(log, inputs, seed, None)?.0)
    }

    /// What the class records say at `at` (a record boundary at or after the seed), from the
    /// inputs before it: the checkpoint a cursor restarting at `at` carries.
    pub fn checkpoint(
        log: &dyn LogSource,
        inputs: &[CatalogInput],
        seed: Option<&CatalogCheckpoint>,
        at: Lsa,
    ) -> Result<CatalogCheckpoint> {
        if let Some(s) = seed {
            s.check(log, at)?;
        }
        let (_, catalog, tracker, staging) = Self::replay(log, inputs, seed, Some(at))?;
        Ok(CatalogCheckpoint { at, db_creation: log.db_creation(), catalog, tracker, staging })
    }

    /// The versions from the inputs (before `until`, if given), and the catalog, tracker and
    /// staging where they stop.
    fn replay(
        log: &dyn LogSource,
        inputs: &[CatalogInput],
        seed: Option<&CatalogCheckpoint>,
        until: Option<Lsa>,
    ) -> Result<(CatalogVersions, Catalog, ClassTracker, Staging)> {
        let (base, mut tracker, mut staging, from) = match seed {
            Some(s) => (s.catalog.clone(), s.tracker.clone(), s.staging.clone(), s.at),
            None => (Catalog::default(), ClassTracker::default(), Staging::default(), Lsa::new(0, 0)),
        };
        // Transactions open at the seed: what they staged before it belongs to their instance
        // (placed before every change of theirs).
        let mut seeded: std::collections::HashSet<i32> =
            seed.map(|s| s.open_trids().into_iter().collect()).unwrap_or_default();
        let mut catalog = until.map(|_| base.clone());
        let mut commits = Vec::new();
        let mut staged: BTreeMap<TxnKey, Vec<_>> = BTreeMap::new();
        let mut last: Option<CatalogInput> = None;
        for input in inputs {
            if last.is_some_and(|l| l.lsa() > input.lsa()) {
                return Err(LogError::InvalidArgument { msg: "catalog inputs must be sorted by LSA".into() });
            }
            last = Some(*input);
            if input.lsa() < from {
                continue;
            }
            if until.is_some_and(|u| input.lsa() >= u) {
                break;
            }
            let (lsa, end) = match *input {
                CatalogInput::Restart { trid, .. } => {
                    seeded.remove(&trid);
                    staging.take(trid);
                    continue;
                }
                CatalogInput::Record { lsa, end } => (lsa, end),
            };
            crate::log::walker::validate_record_start(log, lsa)?;
            let rec = log.record_at(lsa)?;
            if rec.trid <= 0 {
                continue;
            }
            if seeded.remove(&rec.trid) && !rec.prev_tranlsa.is_null() {
                let before: Vec<_> = staging.of(rec.trid).iter().map(|c| (Lsa::new(0, 0), c.clone())).collect();
                if !before.is_empty() {
                    staged.entry((rec.trid, end)).or_default().extend(before);
                }
            }
            let had = if rec.prev_tranlsa.is_null() { 0 } else { staging.of(rec.trid).len() };
            staging.record(&mut tracker, log, &rec)?;
            let made = &staging.of(rec.trid)[had..];
            if !made.is_empty() && !matches!(rec.rectype, LOG_COMMIT | LOG_ABORT) {
                let mine: &mut Vec<(Lsa, ClassChange)> = staged.entry((rec.trid, end)).or_default();
                mine.extend(made.iter().map(|c| (rec.lsa, c.clone())));
            }
            match rec.rectype {
                LOG_COMMIT => {
                    let changes = staging.take(rec.trid);
                    if !changes.is_empty() {
                        if let Some(c) = catalog.as_mut() {
                            for change in &changes {
                                c.apply(change.clone());
                            }
                        }
                        commits.push((rec.lsa, changes));
                    }
                }
                LOG_ABORT => {
                    staging.take(rec.trid);
                }
                _ => {}
            }
        }
        Ok((CatalogVersions { base, commits, staged }, catalog.unwrap_or_default(), tracker, staging))
    }

    /// The class changes the transaction `(trid, end)` made before `lsa`.
    pub fn staged(&self, trid: i32, end: Option<Lsa>, lsa: Lsa) -> Vec<ClassChange> {
        self.staged
            .get(&(trid, end))
            .map_or_else(Vec::new, |v| v.iter().take_while(|(at, _)| *at < lsa).map(|(_, c)| c.clone()).collect())
    }

    /// The class changes the transaction holding the record at `lsa` made before it, without
    /// knowing where that transaction ends: its instance is the first of the trid's to end
    /// after `lsa` (or the one still open); a later instance's changes all lie after `lsa`.
    pub fn staged_before(&self, trid: i32, lsa: Lsa) -> Vec<ClassChange> {
        use std::ops::Bound::{Excluded, Unbounded};
        let ended = self.staged.range((Excluded((trid, Some(lsa))), Unbounded)).next().filter(|(k, _)| k.0 == trid);
        let end = ended.and_then(|(k, _)| k.1);
        self.staged(trid, end, lsa)
    }

    /// Commits that changed class records.
    pub fn commits(&self) -> usize {
        self.commits.len()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        VERSIONS_BYTES.encode(self, 0)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<CatalogVersions> {
        VERSIONS_BYTES.decode(bytes)
    }
}

/// The catalog as of an LSA, moved forward cheaply (a request for an earlier LSA rebuilds it).
/// User-given schemas join it where the log's class records before the stream's start know
/// nothing of their table, as in the one-pass reader.
pub struct CatalogAsOf {
    versions: Arc<CatalogVersions>,
    user: Vec<UserSchema>,
    start: Option<Lsa>,
    catalog: Catalog,
    next: usize,
    user_added: bool,
    /// Counts the changes of `catalog` (see [`CatalogAsOf::advance`]).
    generation: u64,
}

impl CatalogAsOf {
    pub fn new(versions: Arc<CatalogVersions>, user: Vec<UserSchema>, start: Option<Lsa>) -> Self {
        let catalog = versions.base.clone();
        CatalogAsOf { versions, user, start, catalog, next: 0, user_added: false, generation: 0 }
    }

    /// The user-given schemas of tables the catalog does not define (the log's own class
    /// records take precedence).
    fn add_user_to(catalog: &mut Catalog, user: &[UserSchema]) {
        for (oid, name, repid, columns) in user.iter().cloned() {
            if catalog.get(oid).is_none() {
                catalog.add_columns(oid, &name, repid, columns);
            }
        }
    }

    /// As [`CatalogAsOf::at`], but only a catalog that differs from the one the last call
    /// left (for a reader that keeps its own copy and replaces it on DDL only).
    pub fn advance(&mut self, lsa: Lsa, inclusive: bool) -> Option<&Catalog> {
        let before = self.generation;
        self.at(lsa, inclusive);
        (self.generation != before).then_some(&self.catalog)
    }

    /// The catalog with the changes committed before `lsa` (`inclusive`: at or before it).
    pub fn at(&mut self, lsa: Lsa, inclusive: bool) -> &Catalog {
        let within = |c: Lsa| if inclusive { c <= lsa } else { c < lsa };
        // Borrowed apart: the versions are shared by every range's reader, and cloning their
        // `Arc` on each record would bounce its count between the readers' cores.
        let CatalogAsOf { versions, user, start, catalog, next, user_added, generation } = self;
        let commits = &versions.commits;
        if *next > 0 && !within(commits[*next - 1].0) {
            *catalog = versions.base.clone();
            *next = 0;
            *user_added = false;
            *generation += 1;
        }
        while let Some((c, changes)) = commits.get(*next).filter(|(c, _)| within(*c)) {
            if !*user_added && start.is_none_or(|s| *c >= s) {
                Self::add_user_to(catalog, user);
                *user_added = true;
                *generation += 1;
            }
            for change in changes {
                catalog.apply(change.clone());
            }
            *next += 1;
            *generation += 1;
        }
        if !*user_added {
            Self::add_user_to(catalog, user);
            *user_added = true;
            *generation += 1;
        }
        &self.catalog
    }

    /// The catalog after every commit (for `KeyMode::NameNow`).
    pub fn at_end(&mut self) -> Catalog {
        let mut now = self.versions.base.clone();
        for (_, changes) in &self.versions.commits {
            for change in changes {
                now.apply(change.clone());
            }
        }
        for (oid, name, repid, columns) in self.user.iter().cloned() {
            if now.get(oid).is_none() {
                now.add_columns(oid, &name, repid, columns);
            }
        }
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::schema::ClassSchema;
    use crate::format::supplemental::Oid;

    fn upsert(name: &str, pageid: i32) -> ClassChange {
        let oid = Oid { pageid, slotid: 1, volid: 0 };
        let mut c = Catalog::default();
        c.add_columns(oid, name, Some(0), Vec::new());
        let s: ClassSchema = c.get(oid).unwrap().clone();
        ClassChange::Upsert(Box::new(s))
    }

    /// A fact of `kind` for `trid` at page `p`'s first byte.
    fn fact(kind: FactKind, trid: i32, p: i64) -> Fact {
        Fact { kind, trid, lsa: Lsa::new(p, 0), vol: 0, lo: None, time: None, user: None, class_record: false }
    }

    fn reduce(facts: Vec<Fact>) -> RangeCatalog {
        RangeCatalog::from_facts(&RangeFacts { facts, ..Default::default() })
    }

    #[test]
    fn transactions_begun_before_the_first_range_are_followed_to_their_end() {
        use FactKind::*;
        let l = |p| Lsa::new(p, 0);
        let ranges = [
            // Open at the first record: 1, 2, 3, 4, and 6 (its first record there is its commit).
            reduce(vec![
                fact(First, 1, 1),
                fact(First, 2, 2),
                fact(First, 3, 3),
                fact(First, 4, 4),
                fact(Start, 5, 5),
                fact(Commit, 6, 6),
            ]),
            reduce(vec![
                fact(Commit, 1, 10),
                fact(First, 2, 11),
                fact(Abort, 2, 12),
                fact(Start, 3, 13), // 3 was never ended: another transaction under its trid
                fact(First, 4, 14),
                fact(Commit, 5, 15),
            ]),
            reduce(vec![fact(Commit, 3, 20)]), // the later transaction 3, not the open one
        ];
        let ranges: Vec<RangeCatalog> =
            ranges.iter().map(|r| RangeCatalog::from_bytes(&r.to_bytes()).unwrap()).collect();
        assert_eq!(
            begun_before(&ranges),
            vec![
                (1, l(1), Some(Fate::Committed(l(10)))),
                (2, l(2), Some(Fate::Aborted(l(12)))),
                (3, l(3), Some(Fate::Abandoned(l(13)))),
                (4, l(4), None),
                (6, l(6), Some(Fate::Committed(l(6)))),
            ]
        );
        assert_eq!(begun_before(&ranges[2..]), vec![(3, l(20), Some(Fate::Committed(l(20))))]);
        assert!(begun_before(&[]).is_empty());
        // The transaction 3 seen open in the first range, restarted in the second.
        assert_eq!(restarted(&ranges, 0..3), 1);
    }

    #[test]
    fn the_transactions_open_at_the_end_begin_where_one_pass_first_sees_them() {
        use FactKind::*;
        let l = |p| Lsa::new(p, 0);
        let ranges = [
            // 1 begins before the ranges (first seen at 1); 2 and 3 begin here; 4 ends here.
            reduce(vec![
                fact(First, 1, 1),
                fact(Start, 2, 2),
                fact(Start, 3, 3),
                fact(Start, 4, 4),
                fact(Commit, 4, 5),
            ]),
            // 1 goes on; 2 is not seen at all; 3 ends and a new 3 begins; 5 begins.
            reduce(vec![fact(First, 1, 10), fact(Commit, 3, 11), fact(Start, 3, 12), fact(Start, 5, 13)]),
            // 5 is restarted (another transaction under its trid); 6 begins and ends.
            reduce(vec![fact(Start, 5, 20), fact(Start, 6, 21), fact(Abort, 6, 22)]),
        ];
        let ranges: Vec<RangeCatalog> =
            ranges.iter().map(|r| RangeCatalog::from_bytes(&r.to_bytes()).unwrap()).collect();
        assert_eq!(open_at_end(&ranges), vec![(1, l(1)), (2, l(2)), (3, l(12)), (5, l(20))]);
        assert_eq!(open_at_end(&ranges[..1]), vec![(1, l(1)), (2, l(2)), (3, l(3))]);
        // From the second range on, 1 is first seen there.
        assert_eq!(open_at_end(&ranges[1..]), vec![(1, l(10)), (3, l(12)), (5, l(20))]);
        assert!(open_at_end(&[]).is_empty());
    }

    #[test]
    fn restarts_are_counted_in_a_range_and_across_ranges() {
        use FactKind::*;
        let ranges = [
            // 1 restarts within the range; 2 and 3 are open at its end; 4 ends.
            reduce(vec![
                fact(Start, 1, 1),
                fact(Start, 1, 2),
                fact(Start, 2, 3),
                fact(Start, 3, 4),
                fact(Start, 4, 5),
                fact(Commit, 4, 6),
            ]),
            // 2 is not seen before a start of another under its trid; 3 is seen, then ends.
            reduce(vec![fact(Start, 2, 10), fact(First, 3, 11), fact(Commit, 3, 12), fact(Start, 3, 13)]),
            // The new 2 is seen crossing, then restarted; a start of 4 (ended) is no restart.
            reduce(vec![fact(First, 2, 20), fact(Start, 2, 21), fact(Start, 4, 22)]),
        ];
        assert_eq!(restarted(&ranges, 0..3), 3);
        assert_eq!(restarted(&ranges, 1..3), 2);
        assert_eq!(restarted(&ranges, 2..3), 1);
        assert_eq!(restarted(&ranges, 0..2), 2); // the restart in the third range is past the window
                                                 // Seen one range alone, the second shows none (what is open before it is unknown).
        assert_eq!(restarted(&ranges[1..2], 0..1), 0);
    }

    #[test]
    fn ranges_reduced_apart_give_the_inputs_of_the_whole() {
        let l = |p| Lsa::new(p, 0);
        let fact = |kind, trid, p, class_record| Fact {
            kind,
            trid,
            lsa: l(p),
            vol: 0,
            lo: None,
            time: None,
            user: None,
            class_record,
        };
        use FactKind::*;
        let all = vec![
            fact(ClassWrite, 5, 1, true), // trid 5: a class-record image, its commit two ranges on
            fact(ClassWrite, 6, 2, false),
            fact(Commit, 6, 3, false), // trid 6: no class-record image: not an input
            fact(ClassWrite, 5, 4, false),
            fact(Commit, 5, 5, false),
            fact(Start, 7, 6, false),
            fact(ClassWrite, 7, 6, true), // the start record itself writes a class record
            fact(Abort, 7, 7, false),
            fact(Start, 9, 8, false),     // a seed's first marker: it ends what the seed staged
            fact(ClassWrite, 8, 9, true), // still open at the end
        ];
        let reduce =
            |facts: &[Fact]| RangeCatalog::from_facts(&RangeFacts { facts: facts.to_vec(), ..Default::default() });
        let whole = catalog_inputs(&[reduce(&all)], &[9]);
        let rec = |p, e: Option<i64>| CatalogInput::Record { lsa: l(p), end: e.map(l) };
        let want = vec![
            rec(1, Some(5)),
            rec(4, Some(5)),
            rec(5, Some(5)),
            rec(6, Some(7)),
            rec(7, Some(7)),
            CatalogInput::Restart { trid: 9, lsa: l(8) },
            rec(9, None),
        ];
        assert_eq!(whole, want);
        // Every way of cutting the facts into three ranges gives the same inputs.
        for a in 0..=all.len() {
            for b in a..=all.len() {
                let parts = [reduce(&all[..a]), reduce(&all[a..b]), reduce(&all[b..])];
                let bytes: Vec<_> = parts.iter().map(|p| RangeCatalog::from_bytes(&p.to_bytes()).unwrap()).collect();
                assert_eq!(catalog_inputs(&bytes, &[9]), want, "cut at {a}, {b}");
            }
        }
        assert!(RangeCatalog::from_bytes(b"WALCDCRC").is_err());
    }

    #[test]
    fn the_catalog_as_of_an_lsa_has_the_commits_before_it() {
        let versions = Arc::new(CatalogVersions {
            base: Catalog::default(),
            commits: vec![
                (Lsa::new(10, 0), vec![upsert("a", 100)]),
                (Lsa::new(20, 0), vec![upsert("b", 200), upsert("a2", 100)]),
            ],
            staged: Default::default(),
        });
        let mut at = CatalogAsOf::new(versions.clone(), Vec::new(), None);
        let name = |c: &Catalog, p| c.name(Oid { pageid: p, slotid: 1, volid: 0 }).map(str::to_string);
        assert_eq!(name(at.at(Lsa::new(10, 0), false), 100), None);
        assert_eq!(name(at.at(Lsa::new(10, 0), true), 100).as_deref(), Some("a"));
        assert_eq!(name(at.at(Lsa::new(25, 0), false), 100).as_deref(), Some("a2"));
        // Backwards: rebuilt.
        assert_eq!(name(at.at(Lsa::new(15, 0), false), 200), None);
        assert_eq!(name(&at.at_end(), 200).as_deref(), Some("b"));
        let bytes = versions.to_bytes();
        assert_eq!(CatalogVersions::from_bytes(&bytes).unwrap().commits(), 2);
        assert!(CatalogVersions::from_bytes(&bytes[1..]).is_err());
        assert!(CatalogVersions::from_bytes(&[bytes.clone(), vec![0]].concat()).is_err());
    }

    #[test]
    fn versions_seeded_by_a_checkpoint_start_from_its_catalog() {
        let mut base = Catalog::default();
        base.apply(upsert("before", 300));
        let versions = Arc::new(CatalogVersions {
            base,
            commits: vec![(Lsa::new(10, 0), vec![upsert("a", 100)])],
            staged: Default::default(),
        });
        let name = |c: &Catalog, p| c.name(Oid { pageid: p, slotid: 1, volid: 0 }).map(str::to_string);
        let mut at = CatalogAsOf::new(versions.clone(), Vec::new(), None);
        assert_eq!(name(at.at(Lsa::new(5, 0), false), 300).as_deref(), Some("before"));
        assert_eq!(name(at.at(Lsa::new(15, 0), false), 100).as_deref(), Some("a"));
        // Backwards: rebuilt from the base, not from nothing.
        assert_eq!(name(at.at(Lsa::new(5, 0), false), 300).as_deref(), Some("before"));
        assert_eq!(name(&at.at_end(), 300).as_deref(), Some("before"));
    }

    #[test]
    fn a_transactions_own_changes_are_found_by_its_trid_and_end() {
        let end = Some(Lsa::new(50, 0));
        let mut staged = BTreeMap::new();
        staged.insert((7, end), vec![(Lsa::new(10, 0), upsert("a", 100)), (Lsa::new(12, 0), upsert("b", 100))]);
        let v = CatalogVersions { base: Catalog::default(), commits: Vec::new(), staged };
        assert_eq!(v.staged(7, end, Lsa::new(10, 0)).len(), 0);
        assert_eq!(v.staged(7, end, Lsa::new(11, 0)).len(), 1);
        assert_eq!(v.staged(7, end, Lsa::new(49, 0)).len(), 2);
        assert_eq!(v.staged_before(7, Lsa::new(11, 0)).len(), 1);
        assert_eq!(v.staged_before(7, Lsa::new(49, 0)).len(), 2);
        assert!(v.staged_before(7, Lsa::new(55, 0)).is_empty());
        assert!(v.staged_before(8, Lsa::new(11, 0)).is_empty());
        // Another transaction under the same trid (another end), or still open: none.
        assert!(v.staged(7, Some(Lsa::new(60, 0)), Lsa::new(55, 0)).is_empty());
        assert!(v.staged(7, None, Lsa::new(55, 0)).is_empty());
        let back = CatalogVersions::from_bytes(&v.to_bytes()).unwrap();
        assert_eq!(back.staged(7, end, Lsa::new(49, 0)).len(), 2);
    }

    #[test]
    fn user_schemas_join_where_the_log_before_the_start_knows_nothing() {
        let versions = Arc::new(CatalogVersions {
            base: Catalog::default(),
            commits: vec![
                (Lsa::new(10, 0), vec![upsert("from_log", 100)]),
                (Lsa::new(30, 0), vec![upsert("later", 100)]),
            ],
            staged: Default::default(),
        });
        let oid = Oid { pageid: 100, slotid: 1, volid: 0 };
        let user = vec![(oid, "given".to_string(), Some(0), Vec::new())];
        // Started after the first commit: the log knows the table, the given schema is not used.
        let mut at = CatalogAsOf::new(versions.clone(), user.clone(), Some(Lsa::new(20, 0)));
        assert_eq!(at.at(Lsa::new(25, 0), false).name(oid), Some("from_log"));
        // Started before it: the given schema serves until the log's class record replaces it.
        let mut at = CatalogAsOf::new(versions, user, Some(Lsa::new(5, 0)));
        assert_eq!(at.at(Lsa::new(6, 0), false).name(oid), Some("given"));
        assert_eq!(at.at(Lsa::new(35, 0), false).name(oid), Some("later"));
    }
}
