//! Change events: one forward pass over the log turns supplemental records into INSERT, UPDATE,
//! DELETE and DDL events, either as CUBRID's own CDC producer reports them (in log order,
//! rolled-back work included) or committed work only, per transaction, in commit order.

use std::collections::{HashMap, VecDeque};
use std::io::{BufReader, BufWriter, Write};
use std::sync::Arc;

use crate::cdc::catalog::{self, Catalog, ClassChange, ClassTracker, DecodedRow, KeyMode, RowScratch, Staging};
use crate::cdc::chase::Image;
use crate::cdc::event::{Cursor, Event, Op, Pending, Typed};
use crate::cdc::extract::{self, Extractor};
use crate::cdc::framed::Framed;
use crate::cdc::options::{ChangeOptions, DdlScope, ImageMode, OnPartial};
use crate::cdc::parallel::{CatalogAsOf, CatalogVersions};
use crate::cdc::spill::{read_event, write_event};
use crate::cdc::txn::{merge_ranges, undone, Spill, Txn};
use crate::error::{LogError, Result};
use crate::format::lsa::Lsa;
use crate::log::source::LogSource;

use crate::format::rectype::*;
use crate::format::supplemental::{self, Oid, Supplement};
use crate::log::logset::LogSet;
use crate::log::record::ReadRecords;
use crate::log::record::Record;
use crate::log::walker::{OnEncrypted, Walker};

/// What a change reader knows at a record boundary: the catalog (committed classes, the
/// class-record tracker, class changes of transactions still open) and the open transactions
/// (their events so far, undone ranges, users). A reader built from it
/// ([`ChangeReader::from_state`]) goes on from [`ReaderState::position`] and reads nothing
/// before it except by random access (chases), however long the log before it is. The events
/// it holds were filtered and imaged with the options of the reader that made it: give the
/// new reader the same options.
/// Open transactions by trid (trids are small integers: a fast hash, not a DoS-proof one).
type TxnMap = HashMap<i32, Txn, rustc_hash::FxBuildHasher>;

#[derive(serde::Serialize, serde::Deserialize)]
pub struct ReaderState {
    position: Lsa,
    db_creation: i64,
    committed_only: bool,
    catalog: Catalog,
    classes: ClassTracker,
    staging: Staging,
    txns: TxnMap,
    last_commit: Option<Lsa>,
    skip_commits_upto: Option<Lsa>,
    skip_before: Option<Lsa>,
    supplemental_records: u64,
    suspect_commits: u64,
}

impl Clone for ReaderState {
    fn clone(&self) -> Self {
        ReaderState {
            position: self.position,
            db_creation: self.db_creation,
            committed_only: self.committed_only,
            catalog: self.catalog.clone(),
            classes: self.classes.clone(),
            staging: self.staging.clone(),
            // A state's transactions never spill (`ChangeReader::state` refuses those).
            txns: self.txns.iter().filter_map(|(&k, t)| Some((k, t.snapshot()?))).collect(),
            last_commit: self.last_commit,
            skip_commits_upto: self.skip_commits_upto,
            skip_before: self.skip_before,
            supplemental_records: self.supplemental_records,
            suspect_commits: self.suspect_commits,
        }
    }
}

/// A reader state's bytes (version 2).
const STATE_BYTES: Framed = Framed { magic: b"WALCDCRS", version: 2, what: "a walcdc reader state" };

impl ReaderState {
    /// What a reader starting at `position` knows: the catalog there, no open transaction.
    fn at_start(
        log: &dyn LogSource,
        position: Lsa,
        committed_only: bool,
        catalog: Catalog,
        skip_commits_upto: Option<Lsa>,
        skip_before: Option<Lsa>,
    ) -> ReaderState {
        ReaderState {
            position,
            db_creation: log.db_creation(),
            committed_only,
            catalog,
            classes: ClassTracker::default(),
            staging: Staging::default(),
            txns: TxnMap::default(),
            last_commit: None,
            skip_commits_upto,
            skip_before,
            supplemental_records: 0,
            suspect_commits: 0,
        }
    }

    /// The state as bytes (to ship to another process, or keep beside a cursor).
    pub fn to_bytes(&self) -> Vec<u8> {
        STATE_BYTES.encode(self, 64 + self.buffered_events() * 64)
    }

    /// A state from [`ReaderState::to_bytes`]. Bytes of another kind or version are an
    /// `InvalidArgument` error; nothing in them is trusted for an allocation size.
    pub fn from_bytes(bytes: &[u8]) -> Result<ReaderState> {
        let mut state: ReaderState = STATE_BYTES.decode(bytes)?;
        // Memory accounting is recomputed, not taken from the bytes.
        for t in state.txns.values_mut() {
            t.bytes = t.events.iter().map(Event::weight).sum();
        }
        Ok(state)
    }

    /// The database (`db_creation`) the state belongs to.
    pub fn db_creation(&self) -> i64 {
        self.db_creation
    }

    /// The first record a reader built from this state reads.
    pub fn position(&self) -> Lsa {
        self.position
    }

    /// Transactions open at the position.
    pub fn open_transactions(&self) -> usize {
        self.txns.len()
    }

    /// Events of open transactions held in the state.
    pub fn buffered_events(&self) -> usize {
        self.txns.values().map(|t| t.events.len()).sum()
    }
}

/// One range of a plan, read by [`ChangeReader::for_range`]: the records in `[start, end)`
/// (record starts; `None`: the stream's start / the log's end), the catalog as of any LSA
/// (built by the plan from the class-record writes), and what an earlier run emitted (a
/// cursor's, when the options give none): the commits up to `skip_commits_upto`, the markers
/// before `skip_before`, and `skip_events` events of the first transaction committed after
/// `skip_commits_upto` (give those only to the range that holds that commit).
#[derive(Clone, Default)]
pub struct RangeSpec {
    pub start: Option<Lsa>,
    pub end: Option<Lsa>,
    pub versions: Arc<CatalogVersions>,
    pub skip_commits_upto: Option<Lsa>,
    pub skip_before: Option<Lsa>,
    pub skip_events: u32,
    /// What the readers of one stream's ranges learned reading transactions back (see
    /// [`ChainMemo`]); None: each range reads back on its own.
    pub chain_memo: Option<Arc<ChainMemo>>,
}

/// What CUBRID's stream, read by ranges, learns of a transaction begun before a range by
/// reading its chain back: its first TRAN_USER record from the stream's start on, and whether
/// it began before the log set. Kept by the chain record it was read back from, for the
/// ranges after: a long transaction is then read back over the range before each range it
/// reaches, not from its beginning in every one. Shared by the readers of one stream's
/// ranges (the same start and log set); bounded.
#[derive(Debug, Default)]
pub struct ChainMemo(std::sync::Mutex<rustc_hash::FxHashMap<(i32, Lsa), Learned>>);

/// What reading a transaction back from a record taught: its first TRAN_USER record, and
/// whether it began before the log set.
type Learned = (Option<Lsa>, bool);

/// Entries a [`ChainMemo`] keeps (it starts again empty past them).
const CHAIN_MEMO_ENTRIES: usize = 1 << 16;

impl ChainMemo {
    fn get(&self, trid: i32, at: Lsa) -> Option<Learned> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get(&(trid, at)).copied()
    }

    fn put(&self, trid: i32, at: Lsa, learned: Learned) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= CHAIN_MEMO_ENTRIES {
            map.clear();
        }
        map.insert((trid, at), learned);
    }
}

/// What a range's reader has instead of the catalog learned as the walk goes.
struct RangeRead {
    /// The catalog as of the record the walk is at.
    walk: CatalogAsOf,
    /// The catalog as of the records read back along a transaction's chain (made when first
    /// needed: many ranges never read back).
    chase: Option<CatalogAsOf>,
    versions: Arc<CatalogVersions>,
    user: Vec<crate::cdc::options::UserSchema>,
    /// The stream's start (where user-given schemas join the catalog).
    start: Option<Lsa>,
    /// The stream's first record: the chase never reads before it (the one-pass reader
    /// started there never saw those records either).
    floor: Lsa,
    chain_memo: Option<Arc<ChainMemo>>,
}

/// A committed transaction being emitted: spilled events first, then those in memory.
struct Emitting {
    commit_lsa: Lsa,
    /// The transaction's first record and the commit emitted before it: the resume point while
    /// this transaction is only partly emitted.
    first_lsa: Lsa,
    prev_last_commit: Option<Lsa>,
    /// Events already emitted by an earlier stream (from the cursor): skip them.
    skip: u32,
    commit_time: Option<i64>,
    user: Option<Arc<str>>,
    undone: Vec<(Lsa, Lsa)>,
    spilled: Option<(BufReader<std::fs::File>, u64)>,
    mem: std::vec::IntoIter<Event>,
    seq: u32,
    marker: Option<Event>,
    /// Began before the log set's oldest volume: its events are marked (`OnPartial::Emit`) or,
    /// with `discard`, counted and left out (`OnPartial::Skip`).
    partial: bool,
    discard: bool,
}

/// Statistics of a stream.
#[derive(Clone, Debug, Default)]
pub struct ChangeStats {
    pub records: u64,
    pub supplemental_records: u64,
    pub events: u64,
    pub committed_transactions: u64,
    pub aborted_transactions: u64,
    pub undone_events: u64,
    pub spilled_events: u64,
    pub peak_buffered_bytes: usize,
    /// Records that started a new transaction under a trid whose transaction had not ended
    /// (CUBRID reuses a trid only after an end record), and the events that were dropped with
    /// the unfinished transaction.
    pub restarted_transactions: u64,
    pub abandoned_events: u64,
    /// Pages past a torn or unwritten end of a crashed log that still hold readable records
    /// (not read; see `Walker::beyond_end`).
    pub pages_beyond_end: u64,
    /// Records read by random access (chases, overflow rows, moved rows) beyond the forward
    /// walk: proportional to the events, whatever the log's LSAs say.
    pub random_reads: u64,
    /// Transactions whose first record lies before the log set's oldest volume (an older
    /// archive is gone) that ended in the stream (committed; in the engine stream, aborted
    /// too), and their change events the log still holds (left out or emitted marked
    /// `partial`, per `ChangeOptions::on_partial`; their commit/abort markers too, not counted).
    pub partial_transactions: u64,
    pub partial_events: u64,
    /// Emitted change events of tables whose schema the log does not hold (created before its
    /// oldest volume, and not in `user_schemas`): raw images only, `decode_error` set. And how
    /// many such tables (at most [`MAX_UNKNOWN_TABLES`] are told apart).
    pub unknown_schema_events: u64,
    pub unknown_schema_tables: u64,
}

/// Tables of unknown schema a stream tells apart for `ChangeStats::unknown_schema_tables` (a
/// bound on memory, whatever a damaged log's class OIDs say).
pub const MAX_UNKNOWN_TABLES: usize = 4096;

/// Reads change events from a log source (the memory-mapped [`LogSet`] unless said
/// otherwise), one forward pass.
pub struct ChangeReader<S: LogSource + 'static = LogSet> {
    log: Arc<S>,
    /// The log set's random-access count when the stream started (see `ChangeStats`).
    reads_at_start: u64,
    walker: Walker<S>,
    /// The record being processed, parsed in place by the walker (see [`Walker::next_into`]).
    record: Option<Box<Record>>,
    opts: ChangeOptions,
    txns: TxnMap,
    ready: VecDeque<Event>,
    emitting: Option<Emitting>,
    skip_commits_upto: Option<Lsa>,
    /// Events of the first transaction committed after `skip_commits_upto` already emitted.
    skip_events: u32,
    /// Markers and engine-stream events before this LSA were emitted by an earlier stream.
    skip_before: Option<Lsa>,
    /// Class changes of open transactions (those open at the start learned from the records
    /// before it).
    staging: Staging,
    /// Commits of transactions with MVCC heap changes and no supplemental record yet: evidence
    /// of `supplemental_log=0` if the whole stream holds no supplemental record.
    suspect_commits: u64,
    last_commit: Option<Lsa>,
    buffered: usize,
    done: bool,
    pub stats: ChangeStats,
    pending: Vec<Pending>,
    extractor: Extractor,
    catalog: Catalog,
    /// The catalog at the end of the log (for `KeyMode::NameNow`).
    catalog_now: Option<Catalog>,
    classes: ClassTracker,
    /// Following a live log: events' `vol` are ids stable across snapshots of the log set
    /// (whose volume indexes change as archives appear and go).
    volume_ids: Option<VolumeIds>,
    /// What the class records said at points of the walk, oldest first (for cursors).
    checkpoints: Vec<catalog::CatalogCheckpoint>,
    /// Pages between checkpoints; 0: none are taken (user-given schemas).
    checkpoint_pages: i64,
    /// The page from which the next record read is a checkpoint.
    next_checkpoint: i64,
    /// Tables of unknown schema seen (see `ChangeStats::unknown_schema_tables`).
    unknown_tables: rustc_hash::FxHashSet<Oid>,
    /// The tables events are reported under, by class, as the catalog names them now.
    tables: TableNames,
    /// Room to decode rows in, reused event after event.
    rows: RowScratch,
    /// Where the walk began: every transaction with a record at or after it was seen from
    /// then on (see `ChangeReader::check_chain`).
    walk_start: Lsa,
    /// Runs of records the walk skipped so far (encrypted pages, unplaced records).
    skips_seen: usize,
    /// Reading one range of a plan (see [`ChangeReader::for_range`]).
    range: Option<RangeRead>,
}

/// Checkpoints kept while a transaction stays open (thinned beyond it).
const MAX_CHECKPOINTS: usize = 8;

/// Volume ids that stay the same across snapshots of a followed log set: every volume name
/// seen gets the next id.
#[derive(Default)]
struct VolumeIds {
    names: Vec<String>,
    /// This snapshot's volume index -> id.
    of_index: Vec<u16>,
}

impl VolumeIds {
    fn map(&mut self, log: &dyn LogSource) {
        self.of_index = (0..log.volume_count())
            .map(|vol| match self.names.iter().position(|n| *n == log.volume_file(vol)) {
                Some(i) => i as u16,
                None => {
                    self.names.push(log.volume_file(vol).to_string());
                    (self.names.len() - 1) as u16
                }
            })
            .collect();
    }
}

impl<S: LogSource + 'static> ChangeReader<S> {
    /// The schemas in force where the stream stands (the events it emits now were decoded
    /// with them).
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn new(log: Arc<S>, mut opts: ChangeOptions) -> Result<ChangeReader<S>> {
        let mut skip_commits_upto = None;
        let mut skip_events = 0;
        let mut skip_before = None;
        if let Some(c) = opts.cursor {
            c.check(&*log, opts.committed_only)?;
            opts.start = Some(c.restart_lsa);
            skip_commits_upto = c.last_commit_lsa;
            skip_events = c.txn_offset;
            skip_before = Some(c.position);
        }
        let walker = Walker::checked(log.clone(), opts.start, opts.end, opts.on_encrypted)?;
        // Tables defined before the start are known from the class records before it (from a
        // checkpoint at or before the start, when one is given).
        let (catalog, classes, staging) = match (opts.start, opts.checkpoint.clone()) {
            (start, Some(cp)) => {
                let start = start.unwrap_or(Lsa::new(log.first_pageid(), 0));
                cp.check(&*log, start)?;
                cp.learn_until(&log, Some(start), OnEncrypted::Skip)?
            }
            (Some(s), None) if s.pageid > log.first_pageid() || s.offset > 0 => {
                catalog::learn_until(&log, Some(s), OnEncrypted::Skip)?
            }
            _ => (Catalog::default(), ClassTracker::default(), Staging::default()),
        };
        let position = opts.start.unwrap_or(Lsa::new(log.first_pageid(), 0));
        let mut state =
            ReaderState::at_start(&*log, position, opts.committed_only, catalog, skip_commits_upto, skip_before);
        (state.classes, state.staging) = (classes, staging);
        Self::assemble(log, opts, walker, state, skip_events, None)
    }

    /// A reader of one range of a plan (committed-only stream): it walks `range` once and
    /// emits, exactly as the one-pass reader over the whole stream does, the transactions
    /// that commit in it. Nothing before the range is walked: a transaction begun before it
    /// has its earlier records read back along its chain of `prev_tranlsa` (random access)
    /// when it commits in the range, and the catalog in force anywhere comes from
    /// `range.versions`. `opts.start` (or the cursor's restart point) is the stream's start;
    /// the plan's ranges cover the stream and each commit lies in one range, so their events,
    /// in range order, are the stream's.
    pub fn for_range(log: Arc<S>, mut opts: ChangeOptions, range: RangeSpec) -> Result<ChangeReader<S>> {
        if opts.follow {
            return Err(LogError::InvalidArgument { msg: "a range of a plan is read to its end, not followed".into() });
        }
        // The catalog comes from the versions (built from a checkpoint, if need be).
        opts.checkpoint = None;
        let (mut skip_commits_upto, mut skip_before) = (range.skip_commits_upto, range.skip_before);
        if let Some(c) = opts.cursor {
            c.check(&*log, opts.committed_only)?;
            opts.start = Some(c.restart_lsa);
            skip_commits_upto = c.last_commit_lsa;
            skip_before = Some(c.position);
        }
        let floor = opts.start.unwrap_or(Lsa::new(log.first_pageid(), 0));
        let skip_events = range.skip_events;
        let start = range.start.map_or(floor, |s| s.max(floor));
        let walker = Walker::for_range(log.clone(), Some(start), range.end, opts.on_encrypted)?;
        let mut walk = CatalogAsOf::new(range.versions.clone(), opts.user_schemas.clone(), opts.start);
        let catalog = walk.at(start, false).clone();
        let state = ReaderState::at_start(&*log, start, opts.committed_only, catalog, skip_commits_upto, skip_before);
        let range = RangeRead {
            walk,
            chase: None,
            versions: range.versions,
            user: opts.user_schemas.clone(),
            start: opts.start,
            floor,
            chain_memo: range.chain_memo,
        };
        Self::assemble(log, opts, walker, state, skip_events, Some(range))
    }

    /// A reader that goes on from `state` (see [`ReaderState`]) to `opts.end`; `opts.start`
    /// and `opts.cursor` must be unset (the state says where to start).
    pub fn from_state(log: Arc<S>, mut opts: ChangeOptions, state: ReaderState) -> Result<ChangeReader<S>> {
        if state.db_creation != log.db_creation() {
            return Err(LogError::InvalidArgument {
                msg: format!(
                    "the reader state belongs to another database (db_creation {}), this log set's is {}",
                    state.db_creation,
                    log.db_creation()
                ),
            });
        }
        if state.committed_only != opts.committed_only {
            return Err(LogError::InvalidArgument {
                msg: "the reader state is of the other stream (committed-only or engine-compatible)".into(),
            });
        }
        if opts.start.is_some() || opts.cursor.is_some() {
            return Err(LogError::InvalidArgument {
                msg: "a reader state says where to start: give no start or cursor with it".into(),
            });
        }
        opts.start = Some(state.position);
        let walker = Walker::checked(log.clone(), Some(state.position), opts.end, opts.on_encrypted)?;
        Self::assemble(log, opts, walker, state, 0, None)
    }

    /// The reader over `walker`, knowing what `state` knows; `skip_events` of the first
    /// transaction committed after the state's skip point were emitted already (a cursor).
    fn assemble(
        log: Arc<S>,
        mut opts: ChangeOptions,
        walker: Walker<S>,
        state: ReaderState,
        skip_events: u32,
        mut range: Option<RangeRead>,
    ) -> Result<ChangeReader<S>> {
        let walk_start = state.position;
        let mut catalog = state.catalog;
        // Checkpoints hold what the log's class records say: not with user-given schemas,
        // which join the catalog; not in a range of a plan, which learns no class records.
        let checkpoint_pages = if opts.user_schemas.is_empty() && range.is_none() {
            (opts.checkpoint_every / log.page_size().max(1) as u64).clamp(1, i64::MAX as u64) as i64
        } else {
            0
        };
        // The log's own class records (learned as the stream goes) take precedence.
        let user_schemas = std::mem::take(&mut opts.user_schemas);
        for (oid, name, repid, columns) in user_schemas.iter().cloned() {
            if catalog.get(oid).is_none() {
                catalog.add_columns(oid, &name, repid, columns);
            }
        }
        let catalog_now = match range.as_mut() {
            Some(r) => (opts.keys == KeyMode::NameNow && opts.decode).then(|| r.walk.at_end()),
            None => Self::catalog_now(&log, &opts, user_schemas)?,
        };
        let walker = if opts.follow { walker.follow() } else { walker };
        let buffered = state.txns.values().map(|t| t.bytes).sum();
        let volume_ids = opts.follow.then(|| {
            let mut ids = VolumeIds::default();
            ids.map(&*log);
            ids
        });
        let stats = ChangeStats { supplemental_records: state.supplemental_records, ..ChangeStats::default() };
        Ok(ChangeReader {
            reads_at_start: log.random_reads(),
            log,
            walker,
            record: None,
            opts,
            txns: state.txns,
            ready: VecDeque::new(),
            emitting: None,
            skip_commits_upto: state.skip_commits_upto,
            skip_events,
            skip_before: state.skip_before,
            staging: state.staging,
            suspect_commits: state.suspect_commits,
            last_commit: state.last_commit,
            buffered,
            done: false,
            stats,
            pending: Vec::new(),
            extractor: Extractor::default(),
            volume_ids,
            catalog,
            catalog_now,
            classes: state.classes,
            checkpoints: Vec::new(),
            checkpoint_pages,
            next_checkpoint: if checkpoint_pages == 0 { i64::MAX } else { i64::MIN },
            unknown_tables: Default::default(),
            tables: Default::default(),
            rows: Default::default(),
            walk_start,
            skips_seen: 0,
            range,
        })
    }

    /// Remembers what the class records say before the record at `at` (see
    /// [`ChangeReader::catalog_checkpoint`]). Keeps the newest checkpoint at or before the
    /// restart point of the stream's cursor and those after it, thinned to a few.
    fn take_checkpoint(&mut self, at: Lsa) {
        if self.checkpoint_pages == 0 || self.checkpoints.last().is_some_and(|c| c.at >= at) {
            return;
        }
        self.next_checkpoint = at.pageid.saturating_add(self.checkpoint_pages);
        let restart = self.cursor().restart_lsa;
        if let Some(newest_usable) = self.checkpoints.iter().rposition(|c| c.at <= restart) {
            self.checkpoints.drain(..newest_usable);
        }
        if self.checkpoints.len() >= MAX_CHECKPOINTS {
            // A transaction open for long: keep every other one after the first.
            let mut i = 0;
            self.checkpoints.retain(|_| {
                i += 1;
                i == 1 || i % 2 == 0
            });
        }
        self.checkpoints.push(catalog::CatalogCheckpoint {
            at,
            db_creation: self.log.db_creation(),
            catalog: self.catalog.clone(),
            tracker: self.classes.clone(),
            staging: self.staging.clone(),
        });
    }

    /// What the class records said at a point at or before `restart` (a cursor's restart
    /// point), for the next stream to start learning from there: the newest the reader
    /// remembers (one every `ChangeOptions::checkpoint_every` bytes of log, and where it
    /// ended). `None` with user-given schemas, or before any record was read.
    pub fn catalog_checkpoint(&self, restart: Lsa) -> Option<&catalog::CatalogCheckpoint> {
        self.checkpoints.iter().rev().find(|c| c.at <= restart)
    }

    /// The catalog at the end of the log, when keys are the names at the end.
    fn catalog_now(
        log: &Arc<S>,
        opts: &ChangeOptions,
        user_schemas: Vec<(Oid, String, Option<i32>, Vec<catalog::UserColumn>)>,
    ) -> Result<Option<Catalog>> {
        if opts.keys != KeyMode::NameNow || !opts.decode {
            return Ok(None);
        }
        let mut now = catalog::learn(log, OnEncrypted::Skip)?;
        for (oid, name, repid, columns) in user_schemas {
            if now.get(oid).is_none() {
                now.add_columns(oid, &name, repid, columns);
            }
        }
        Ok(Some(now))
    }

    /// What the reader knows now, to go on from here in another reader (see [`ReaderState`]).
    /// Only between events: every event made so far must have been read, and no open
    /// transaction may have spilled to disk.
    pub fn state(&self) -> Result<ReaderState> {
        if !self.opts.narrow.is_none() {
            return Err(LogError::InvalidArgument { msg: "a narrowed reader has no state to resume from".into() });
        }
        if self.range.is_some() {
            return Err(LogError::InvalidArgument { msg: "a range of a plan has no state to resume from".into() });
        }
        if self.emitting.is_some() || !self.ready.is_empty() {
            return Err(LogError::InvalidArgument {
                msg: "read the events made so far before taking the reader's state".into(),
            });
        }
        let position =
            self.walker.resume_point().or(self.opts.start).unwrap_or_else(|| Lsa::new(self.log.first_pageid(), 0));
        let mut txns = TxnMap::with_capacity_and_hasher(self.txns.len(), Default::default());
        for (&trid, t) in &self.txns {
            let Some(copy) = t.snapshot() else {
                return Err(LogError::InvalidArgument {
                    msg: format!("transaction {trid} spilled to disk: raise memory_limit to take the reader's state"),
                });
            };
            txns.insert(trid, copy);
        }
        Ok(ReaderState {
            position,
            db_creation: self.log.db_creation(),
            committed_only: self.opts.committed_only,
            catalog: self.catalog.clone(),
            classes: self.classes.clone(),
            staging: self.staging.clone(),
            txns,
            last_commit: self.last_commit,
            skip_commits_upto: self.skip_commits_upto,
            skip_before: self.skip_before,
            supplemental_records: self.stats.supplemental_records,
            suspect_commits: self.suspect_commits,
        })
    }

    pub fn log(&self) -> &Arc<S> {
        &self.log
    }

    /// The names of the volumes events' `vol` stand for (following a live log, ids that stay
    /// the same across snapshots; otherwise the log set's volume indexes).
    pub fn volume_names(&self) -> Vec<String> {
        match &self.volume_ids {
            Some(ids) => ids.names.clone(),
            None => (0..self.log.volume_count()).map(|vol| self.log.volume_file(vol).to_string()).collect(),
        }
    }

    /// Following a live log (`ChangeOptions::follow`): goes on in `log`, a later snapshot of
    /// the same log set (its header read again, new archives), from where the written log
    /// ended. Returns whether the reader had reached that end (otherwise nothing changes).
    pub fn refresh(&mut self, log: Arc<S>) -> Result<bool> {
        match self.walker.resume_on(log.clone())? {
            Some(walker) => {
                self.walker = walker;
                self.reads_at_start = log.random_reads();
                if let Some(ids) = self.volume_ids.as_mut() {
                    ids.map(&*log);
                }
                self.log = log;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Why the walk ended, once it has.
    pub fn end_reason(&self) -> Option<crate::log::walker::EndReason> {
        self.walker.end_reason
    }

    /// Runs of encrypted pages skipped so far (with `on_encrypted = Skip`).
    pub fn skipped(&self) -> &[crate::log::walker::SkippedRange] {
        &self.walker.skipped
    }

    /// Records on archived pages the walk could not place (see `Walker::unplaced`).
    pub fn unplaced(&self) -> &[Lsa] {
        &self.walker.unplaced
    }

    /// Readable records past a torn end of a crashed log (see `Walker::beyond_end`).
    pub fn beyond_end(&self) -> Option<crate::log::walker::BeyondEnd> {
        self.walker.beyond_end
    }

    /// Transactions still open where the stream ended (available once it is over).
    pub fn pending(&self) -> &[Pending] {
        &self.pending
    }

    /// The tables of unknown schema seen so far (see `ChangeStats::unknown_schema_tables`), as
    /// CDC-packed class OIDs: the readers of a stream's ranges count them apart.
    pub fn unknown_schema_classes(&self) -> Vec<u64> {
        let mut out: Vec<u64> = self.unknown_tables.iter().map(|o| o.to_cdc()).collect();
        out.sort_unstable();
        out
    }

    /// Says that the stream this reader ends held `n` supplemental records in all (a reader
    /// that reads the tail of a stream read by ranges): whether the log was written with
    /// supplemental logging is decided over the whole stream, and a reader state carries it.
    pub fn set_supplemental_records(&mut self, n: u64) {
        self.stats.supplemental_records = n;
    }

    pub fn is_done(&self) -> bool {
        self.done && self.emitting.is_none() && self.ready.is_empty()
    }

    /// Where to resume so that no event is lost or repeated.
    pub fn cursor(&self) -> Cursor {
        let here = self
            .walker
            .resume_point()
            .or(self.walker.last_lsa)
            .unwrap_or_else(|| self.opts.start.unwrap_or(Lsa::new(self.log.first_pageid(), 0)));
        // Everything before `here` has been read; what was emitted from it, the stream knows.
        let position = self.ready.front().map_or(here, |e| e.lsa.min(here));
        // The oldest transaction still open restarts the walk: its user, undone ranges and
        // events so far are learned again.
        let mut restart_lsa = self.txns.values().map(|t| t.first_lsa).min().map_or(position, |o| o.min(position));
        if !self.opts.committed_only {
            // CUBRID's stream has no buffers: what comes before `position` was emitted. The
            // last commit passed is the resumed cursor's until the stream passes another.
            return Cursor {
                db_creation: self.log.db_creation(),
                restart_lsa,
                last_commit_lsa: self.last_commit.or(self.skip_commits_upto),
                txn_offset: 0,
                position,
                engine: true,
            };
        }
        let (last_commit, txn_offset) = match &self.emitting {
            // In the middle of a transaction: resume before it, skipping what was emitted.
            Some(e) => {
                restart_lsa = restart_lsa.min(e.first_lsa);
                (e.prev_last_commit, e.seq)
            }
            None => (self.last_commit, 0),
        };
        Cursor {
            db_creation: self.log.db_creation(),
            restart_lsa,
            last_commit_lsa: last_commit.or(self.skip_commits_upto),
            txn_offset,
            position,
            engine: false,
        }
    }

    fn wants(&self, op: Op) -> bool {
        self.opts.wants(op)
    }

    fn user_passes(&self, user: Option<&str>) -> bool {
        self.opts.user_passes(user)
    }

    /// Whether a row with no table (a marker, a timer) of `op` passes the narrowing filters.
    fn shown(&self, op: Op) -> bool {
        self.opts.narrow.passes(&self.catalog, None, op)
    }

    /// The next event, `Ok(None)` at the end.
    pub fn next_event(&mut self) -> Result<Option<Event>> {
        loop {
            if let Some(e) = self.next_emitted()? {
                self.stats.events += 1;
                return Ok(Some(e));
            }
            if let Some(e) = self.ready.pop_front() {
                if self.skip_before.is_some_and(|p| e.lsa < p) {
                    continue; // emitted by the stream this one resumes
                }
                self.stats.events += 1;
                return Ok(Some(e));
            }
            if self.done {
                return Ok(None);
            }
            let mut rec = self.record.take().unwrap_or_default();
            match self.walker.next_into(&mut rec)? {
                true => {
                    if let Some(ids) = &self.volume_ids {
                        rec.vol = ids.of_index[rec.vol as usize];
                    }
                    self.stats.records += 1;
                    if rec.lsa.pageid >= self.next_checkpoint {
                        self.take_checkpoint(rec.lsa);
                    }
                    let processed = self.process(&rec);
                    self.record = Some(rec);
                    processed?;
                }
                // Following: the written log ends here for now; the reader keeps what it
                // knows (open transactions included) until `refresh` gives it more. With
                // none open, a cursor restarts here: remember the catalog here too.
                false if self.opts.follow => {
                    if let Some(at) = self.txns.is_empty().then(|| self.walker.resume_point()).flatten() {
                        self.take_checkpoint(at);
                    }
                    return Ok(None);
                }
                false => self.finish()?,
            }
        }
    }

    fn finish(&mut self) -> Result<()> {
        self.done = true;
        if let Some(r) = &self.range {
            // A range reads back the transactions open at its start and chases images before
            // it; its walk releases only its own pages. Those before it are released here, so
            // that the memory mapped does not grow with the ranges read.
            self.log.release_pages(r.floor.pageid, self.walk_start.pageid);
        }
        if let Some(at) = self.walker.resume_point() {
            self.take_checkpoint(at);
        }
        self.stats.pages_beyond_end = self.walker.beyond_end.map_or(0, |b| b.pages);
        self.stats.random_reads = self.log.random_reads() - self.reads_at_start;
        let mut pending: Vec<Pending> = self
            .txns
            .iter()
            .filter(|(_, t)| !t.ignored)
            .map(|(&trid, t)| Pending {
                trid,
                first_lsa: t.first_lsa,
                last_lsa: t.last_lsa,
                events: t.event_count(),
                user: t.user.clone(),
                committed_with_postpone: t.committed_with_postpone,
            })
            .collect();
        pending.sort_by_key(|p| p.first_lsa);
        self.pending = pending;
        self.check_supplemental_logging(true)?;
        Ok(())
    }

    /// A log written with `supplemental_log=0` has data records but no supplemental records:
    /// say so instead of returning an empty stream. Evidence: committed transactions that
    /// changed MVCC heap rows (user tables; the catalog's own rows are changed by DDL too, which
    /// writes supplemental records when the parameter is on) while no supplemental record
    /// exists at all. Decided at the end, or early once the evidence is overwhelming.
    fn check_supplemental_logging(&self, at_end: bool) -> Result<()> {
        const EARLY: u64 = 64;
        // A range alone is no evidence: the plan decides over every range.
        if self.range.is_some() || self.stats.supplemental_records > 0 || self.suspect_commits == 0 {
            return Ok(());
        }
        if at_end || self.suspect_commits >= EARLY {
            return Err(LogError::NoSupplementalLog { file: self.log.set_name() });
        }
        Ok(())
    }

    fn process(&mut self, rec: &Record) -> Result<()> {
        if rec.trid <= 0 {
            // System transactions never carry changes; the HA-state dummy is CUBRID's timer.
            extract::check_system_record(&*self.log, rec)?;
            if rec.rectype == LOG_DUMMY_HA_SERVER_STATE && self.wants(Op::Timer) && self.shown(Op::Timer) {
                let mut e = Event::at(rec, Op::Timer);
                e.time = rec.at_time();
                self.ready.push_back(e);
            }
            return Ok(());
        }
        self.check_chain(rec)?;
        // A NULL prev_tranlsa starts a transaction: a trid seen again never merges two.
        let fresh = rec.prev_tranlsa.is_null();
        if fresh {
            if let Some(old) = self.txns.remove(&rec.trid) {
                self.buffered -= old.bytes;
                if old.event_count() > 0 {
                    self.stats.abandoned_events += old.event_count();
                }
                self.stats.restarted_transactions += 1;
            }
        }
        let floor = match self.range.as_mut() {
            Some(r) => {
                if let Some(c) = r.walk.advance(rec.lsa, false) {
                    self.catalog = c.clone();
                }
                Some(r.floor)
            }
            None => {
                self.staging.record(&mut self.classes, &*self.log, rec)?;
                None
            }
        };
        // A transaction first seen in the middle of its chain, whose previous record lies
        // before the oldest volume, began in an archive that is gone. In a range of a plan,
        // one whose previous record lies in the stream before the range is read back when it
        // ends.
        let oldest = Lsa::new(self.log.first_pageid(), 0);
        self.txns.entry(rec.trid).or_insert_with(|| {
            let mut t = Txn::new(rec.lsa);
            if !fresh {
                match floor {
                    Some(f) if rec.prev_tranlsa >= f => t.earlier = Some(rec.prev_tranlsa),
                    _ => t.partial = rec.prev_tranlsa < oldest,
                }
            }
            t
        });
        self.apply(rec)
    }

    /// What a record of an open transaction (in `txns`) does to it.
    fn apply(&mut self, rec: &Record) -> Result<()> {
        let txn = self.txns.get_mut(&rec.trid).expect("transaction opened");
        txn.last_lsa = rec.lsa;
        match rec.rectype {
            LOG_SUPPLEMENTAL_INFO => self.on_supplemental(rec)?,
            LOG_COMPENSATE => {
                if let Some(x) = rec.undo_nxlsa() {
                    txn.undone.push((x, rec.lsa));
                }
            }
            LOG_SYSOP_END => match rec.sysop_type() {
                Some(SYSOP_END_ABORT) => txn.undone.push((rec.sysop_lastparent_lsa().unwrap_or(Lsa::NULL), rec.lsa)),
                Some(SYSOP_END_LOGICAL_COMPENSATE) => {
                    if let Some(c) = rec.sysop_compensate_lsa() {
                        txn.undone.push((c, rec.lsa));
                    }
                }
                _ => {}
            },
            LOG_COMMIT_WITH_POSTPONE | LOG_COMMIT_WITH_POSTPONE_OBSOLETE => txn.committed_with_postpone = true,
            LOG_COMMIT => self.on_end(rec, true)?,
            LOG_ABORT => self.on_end(rec, false)?,
            _ => {
                if rec.is_mvcc_dml() {
                    txn.mvcc_dml = true;
                }
            }
        }
        Ok(())
    }

    /// A transaction's records form a chain: each one's `prev_tranlsa` is the transaction's
    /// record before it (the engine rolls back along it). A record that breaks the chain (a
    /// damaged trid or `prev_tranlsa`) would put its change in another transaction, or none,
    /// without a trace: it is an error. Not checked across records the walk skipped.
    fn check_chain(&mut self, rec: &Record) -> Result<()> {
        let skips = self.walker.skipped.len() + self.walker.unplaced.len();
        if skips != self.skips_seen {
            self.skips_seen = skips;
            for t in self.txns.values_mut() {
                t.chain_unknown = true;
            }
        }
        if rec.prev_tranlsa.is_null() {
            return Ok(());
        }
        if rec.prev_tranlsa >= rec.lsa {
            return Err(LogError::corrupt(
                &self.log.set_name(),
                rec.lsa,
                format!("its prev_tranlsa {} does not lie before it (a damaged link)", rec.prev_tranlsa),
            ));
        }
        let broken = match self.txns.get(&rec.trid) {
            Some(t) if !t.chain_unknown && t.last_lsa != rec.prev_tranlsa => {
                format!("whose record before it was at {}", t.last_lsa)
            }
            // Everything from the start of the walk on was seen: a transaction's earlier record
            // after it would have been.
            None if skips == 0 && rec.prev_tranlsa >= self.walk_start => {
                "which has no open record before it in the log read".to_string()
            }
            _ => return Ok(()),
        };
        Err(LogError::corrupt(
            &self.log.set_name(),
            rec.lsa,
            format!(
                "the record says the previous record of its transaction {} is at {}, {broken}                  (a damaged trid or prev_tranlsa)",
                rec.trid, rec.prev_tranlsa
            ),
        ))
    }

    /// CUBRID logs a deleted row's image as an UNDO_RECORD supplement and, as the transaction's
    /// next supplement, the DELETE supplement that points to it. Any other sequence is a
    /// damaged record (a DELETE turned into something else would vanish without a trace).
    fn check_undo_pair(&mut self, rec: &Record, supp: &Supplement) -> Result<()> {
        let txn = self.txns.get_mut(&rec.trid).expect("transaction opened");
        let pending = txn.pending_undo.take();
        if matches!(supp, Supplement::UndoRecord) {
            txn.pending_undo = Some(rec.lsa);
        }
        let Some(undo) = pending else { return Ok(()) };
        let paired =
            matches!(supp, Supplement::Dml(d) if d.kind == supplemental::DmlKind::Delete && d.undo_lsa == Some(undo));
        if paired || txn.chain_unknown {
            return Ok(());
        }
        Err(LogError::corrupt(
            &self.log.set_name(),
            rec.lsa,
            format!("the deleted row's image logged at {undo} is not followed by the DELETE supplement that uses it"),
        ))
    }

    fn on_end(&mut self, rec: &Record, commit: bool) -> Result<()> {
        match self.range.as_mut() {
            Some(r) => {
                if let Some(c) = r.walk.advance(rec.lsa, true) {
                    self.catalog = c.clone();
                }
            }
            None => self.staging.end(rec.trid, commit, &mut self.catalog),
        }
        if !self.opts.committed_only && self.wants(if commit { Op::Commit } else { Op::Abort }) {
            self.learn_earlier(rec.trid)?;
        }
        let Some(mut txn) = self.txns.remove(&rec.trid) else { return Ok(()) };
        self.buffered -= txn.bytes;
        if let Some(from) = txn.earlier.take().filter(|_| self.opts.committed_only) {
            // Needed: a commit to emit, or an abort whose marker may be (if it had events).
            let needed = if commit {
                self.skip_commits_upto.is_none_or(|s| rec.lsa > s)
            } else {
                self.wants(Op::Abort) && self.shown(Op::Abort)
            };
            if needed {
                let earlier = self.read_earlier(rec.trid, from)?;
                txn = earlier.then(txn).map_err(|e| self.spill_error(&e))?;
            }
        }
        if let Some(undo) = txn.pending_undo.filter(|_| !txn.chain_unknown) {
            return Err(LogError::corrupt(
                &self.log.set_name(),
                rec.lsa,
                format!(
                    "the transaction ends with the deleted row's image logged at {undo} unused by a DELETE supplement"
                ),
            ));
        }
        if commit && txn.mvcc_dml {
            self.suspect_commits += 1;
            self.check_supplemental_logging(false)?;
        }
        let op = if commit { Op::Commit } else { Op::Abort };
        if !self.opts.committed_only {
            self.stats.partial_transactions += txn.partial as u64;
            // CUBRID's producer reports the end of a transaction whose user it learned.
            if !txn.ignored
                && (!txn.partial || self.opts.on_partial == OnPartial::Emit)
                && txn.user.is_some()
                && self.wants(op)
                && self.shown(op)
                && self.user_passes(txn.user.as_deref())
            {
                let mut e = Event::at(rec, op);
                e.user = txn.user.clone();
                e.time = rec.at_time();
                e.partial = txn.partial;
                self.ready.push_back(e);
            }
            if commit {
                self.last_commit = Some(rec.lsa);
            }
            return Ok(());
        }
        if !commit {
            self.stats.aborted_transactions += 1;
            if self.wants(Op::Abort)
                && self.shown(Op::Abort)
                && txn.event_count() > 0
                && self.user_passes(txn.user.as_deref())
            {
                let mut e = Event::at(rec, Op::Abort);
                e.user = txn.user.clone();
                e.time = rec.at_time();
                self.ready.push_back(e);
            }
            return Ok(());
        }
        if self.skip_commits_upto.is_some_and(|s| rec.lsa <= s) {
            return Ok(());
        }
        let prev_last_commit = self.last_commit.or(self.skip_commits_upto);
        let skip = std::mem::take(&mut self.skip_events);
        self.last_commit = Some(rec.lsa);
        self.stats.committed_transactions += 1;
        if !self.user_passes(txn.user.as_deref()) {
            return Ok(());
        }
        self.stats.partial_transactions += txn.partial as u64;
        let discard = txn.partial && self.opts.on_partial == OnPartial::Skip;
        let has_events = txn.event_count() > 0;
        let spilled = match txn.spill {
            Some(s) => {
                let count = s.count;
                let file = s.file.into_inner().map_err(|e| self.spill_error(e.error()))?;
                let mut file = file;
                use std::io::Seek;
                file.seek(std::io::SeekFrom::Start(0)).map_err(|e| self.spill_error(&e))?;
                Some((BufReader::new(file), count))
            }
            None => None,
        };
        let marker = (self.wants(Op::Commit) && self.shown(Op::Commit) && has_events && !discard).then(|| {
            let mut e = Event::at(rec, Op::Commit);
            e.partial = txn.partial;
            e.user = txn.user.clone();
            e.time = rec.at_time();
            e.commit_lsa = Some(rec.lsa);
            e.commit_time = rec.at_time();
            e
        });
        self.emitting = Some(Emitting {
            commit_lsa: rec.lsa,
            first_lsa: txn.first_lsa,
            prev_last_commit,
            skip,
            commit_time: rec.at_time(),
            user: txn.user.clone(),
            undone: merge_ranges(txn.undone),
            spilled,
            mem: txn.events.into_iter(),
            seq: 0,
            marker,
            partial: txn.partial,
            discard,
        });
        Ok(())
    }

    fn next_emitted(&mut self) -> Result<Option<Event>> {
        loop {
            let Some(em) = self.emitting.as_mut() else { return Ok(None) };
            let next = if let Some((reader, left)) = em.spilled.as_mut() {
                if *left == 0 {
                    em.spilled = None;
                    continue;
                }
                *left -= 1;
                Some(read_event(reader).map_err(|e| LogError::Io {
                    file: "spill file".into(),
                    lsa: None,
                    msg: e.to_string(),
                })?)
            } else {
                em.mem.next()
            };
            let Some(mut e) = next else {
                let marker = em.marker.take().filter(|_| em.seq > 0);
                self.emitting = None;
                if let Some(m) = marker {
                    return Ok(Some(m));
                }
                return Ok(None);
            };
            if undone(&em.undone, e.lsa) {
                self.stats.undone_events += 1;
                continue;
            }
            if em.seq < em.skip {
                em.seq += 1;
                continue;
            }
            e.txn_seq = em.seq;
            em.seq += 1;
            if let Some(m) = em.marker.as_mut() {
                m.txn_seq = em.seq;
            }
            if e.hidden {
                continue; // its place is taken; the narrowing filters reject it
            }
            if em.partial {
                self.stats.partial_events += 1;
                if em.discard {
                    continue;
                }
                e.partial = true;
            }
            e.commit_lsa = Some(em.commit_lsa);
            e.commit_time = em.commit_time;
            if e.user.is_none() {
                e.user = em.user.clone();
            }
            e.typed = Some(Box::new(type_event(
                &self.catalog,
                &[],
                &e,
                &self.opts,
                self.catalog_now.as_ref(),
                &mut self.tables,
                &mut self.rows,
            )));
            self.note_schema(&e);
            self.keep_wanted_images(&mut e);
            return Ok(Some(e));
        }
    }

    fn spill_error(&self, e: &std::io::Error) -> LogError {
        LogError::Io { file: "spill file".into(), lsa: None, msg: e.to_string() }
    }

    /// Transaction `trid`'s records from `from` back along its chain of `prev_tranlsa` to its
    /// first one or the stream's start, newest first (each handed to `visit`), and whether it
    /// began before the log set's oldest volume. Reads only those records; checks every link.
    /// The walk stops before a record whose earlier part `known` says is known (that record
    /// is returned; the partial flag is then the caller's to learn).
    fn chain_back(
        &self,
        trid: i32,
        from: Lsa,
        mut visit: impl FnMut(&Record),
        mut known: impl FnMut(Lsa) -> bool,
    ) -> Result<(Vec<Lsa>, bool, Option<Lsa>)> {
        let floor = self.range.as_ref().map_or(Lsa::NULL, |r| r.floor);
        let oldest = Lsa::new(self.log.first_pageid(), 0);
        let corrupt = |log: &dyn LogSource, at: Lsa, msg: String| LogError::corrupt(&log.set_name(), at, msg);
        let mut chain = Vec::new();
        let mut at = from;
        let mut partial = false;
        loop {
            if known(at) {
                return Ok((chain, partial, Some(at)));
            }
            let rec = self.log.record_at(at)?;
            if rec.trid != trid || matches!(rec.rectype, LOG_COMMIT | LOG_ABORT) {
                return Err(corrupt(
                    &*self.log,
                    at,
                    format!(
                        "the chain of transaction {trid}'s records leads here, to a {} of transaction {} \
                         (a damaged trid or prev_tranlsa)",
                        rec.type_name(),
                        rec.trid
                    ),
                ));
            }
            visit(&rec);
            chain.push(at);
            let prev = rec.prev_tranlsa;
            if prev.is_null() {
                break;
            }
            if prev >= at {
                let msg = format!("its prev_tranlsa {prev} does not lie before it (a damaged link)");
                return Err(corrupt(&*self.log, at, msg));
            }
            if prev < floor {
                partial = prev < oldest;
                break;
            }
            at = prev;
        }
        Ok((chain, partial, None))
    }

    /// CUBRID's stream read by range: what a transaction begun before the range needs from
    /// its earlier records, read back along its chain once it matters (a supplemental record
    /// or its end in the range) — its first TRAN_USER from the stream's start on, and whether
    /// it is partial. Its events there were the earlier ranges' to emit.
    fn learn_earlier(&mut self, trid: i32) -> Result<()> {
        let Some(from) = self.txns.get_mut(&trid).and_then(|t| t.earlier.take()) else { return Ok(()) };
        let memo = self.range.as_ref().and_then(|r| r.chain_memo.clone());
        let mut first_user = None;
        let mut earlier = None;
        let (_, mut partial, stopped) = self.chain_back(
            trid,
            from,
            |r| {
                if r.supplement_type() == Some(supplemental::TRAN_USER) {
                    first_user = Some(r.lsa); // read newest first: the last one seen is the first
                }
            },
            |at| {
                earlier = memo.as_ref().and_then(|m| m.get(trid, at));
                earlier.is_some()
            },
        )?;
        if let (Some(_), Some((user_at, was_partial))) = (stopped, earlier) {
            first_user = user_at.or(first_user);
            partial = was_partial;
        }
        if let Some(m) = &memo {
            m.put(trid, from, (first_user, partial));
        }
        let user = match first_user {
            Some(at) => match self.extractor.supplement(&*self.log, &self.log.record_at(at)?)? {
                Supplement::TranUser(u) => Some(Arc::from(u.as_str())),
                _ => None,
            },
            None => None,
        };
        let txn = self.txns.get_mut(&trid).expect("transaction opened");
        txn.partial = partial;
        if user.is_some() {
            txn.user = user;
        }
        Ok(())
    }

    /// Reading a range of a plan: transaction `trid`'s records from the stream's start up to
    /// `from` (its record before the range), read back along its chain of `prev_tranlsa` and
    /// made into the transaction they are, in log order, as the one-pass reader makes them
    /// (with the catalog as of each record). Reads only those records.
    fn read_earlier(&mut self, trid: i32, from: Lsa) -> Result<Txn> {
        let (chain, partial, _) = self.chain_back(trid, from, |_| {}, |_| false)?;
        let first = *chain.last().expect("the chain holds `from`");
        let walk_catalog = std::mem::take(&mut self.catalog);
        self.txns.insert(trid, Txn { partial, ..Txn::new(first) });
        let mut replayed = Ok(());
        for (i, &lsa) in chain.iter().rev().enumerate() {
            let r = self.range.as_mut().expect("reading a range");
            let (versions, user, start) = (&r.versions, &r.user, r.start);
            let chase = r.chase.get_or_insert_with(|| CatalogAsOf::new(versions.clone(), user.clone(), start));
            if let Some(c) = chase.advance(lsa, false) {
                self.catalog = c.clone();
            } else if i == 0 {
                self.catalog = chase.at(lsa, false).clone();
            }
            replayed = self.log.record_at(lsa).and_then(|rec| self.apply(&rec));
            if replayed.is_err() {
                break;
            }
        }
        self.catalog = walk_catalog;
        let txn = self.txns.remove(&trid).expect("inserted above");
        self.buffered -= txn.bytes;
        replayed.map(|()| txn)
    }

    fn on_supplemental(&mut self, rec: &Record) -> Result<()> {
        self.stats.supplemental_records += 1;
        let supp = self.extractor.supplement(&*self.log, rec)?;
        self.check_undo_pair(rec, &supp)?;
        if !self.opts.committed_only && !matches!(supp, Supplement::UndoRecord) {
            self.learn_earlier(rec.trid)?;
        }
        if let Some(t) = self.txns.get_mut(&rec.trid) {
            t.saw_supplement = true;
        }
        let engine = !self.opts.committed_only;
        match supp {
            Supplement::TranUser(user) => {
                let txn = self.txns.get_mut(&rec.trid).expect("transaction opened above");
                if txn.user.is_none() {
                    txn.user = Some(Arc::from(user.as_str()));
                }
                Ok(())
            }
            Supplement::Dml(dml) => {
                if engine && !self.resolve_user(rec)? {
                    return Ok(());
                }
                let user = self.txns.get(&rec.trid).and_then(|t| t.user.clone());
                // Filters are decided before any image is built.
                if (user.is_some() || engine) && !self.user_passes(user.as_deref()) {
                    return Ok(());
                }
                let Some(mut e) = dml_candidate(&*self.log, rec, &dml, &self.opts, &self.catalog)? else {
                    return Ok(());
                };
                e.user = user;
                self.push_event(e)
            }
            Supplement::Ddl(ddl) => {
                if engine && !self.resolve_user(rec)? {
                    return Ok(());
                }
                let user = self.txns.get(&rec.trid).and_then(|t| t.user.clone());
                if (user.is_some() || engine) && !self.user_passes(user.as_deref()) {
                    return Ok(());
                }
                let Some(mut e) = ddl_candidate(rec, ddl, &self.opts, &self.catalog) else { return Ok(()) };
                e.user = user;
                self.push_event(e)
            }
            Supplement::UndoRecord => Ok(()),
        }
    }

    /// CUBRID's producer needs the transaction's user before it reports a change; when the
    /// first TRAN_USER lies before the start, it scans forward for the commit-time one (or the
    /// abort, after which it ignores the transaction). Returns false to skip the record.
    fn resolve_user(&mut self, rec: &Record) -> Result<bool> {
        let txn = self.txns.get(&rec.trid).expect("transaction opened");
        if txn.ignored {
            return Ok(false);
        }
        if txn.user.is_some() {
            return Ok(true);
        }
        let mut w = Walker::new(self.log.clone(), Some(rec.forw_lsa), None, OnEncrypted::Skip)?;
        let mut found: Option<std::result::Result<String, ()>> = None;
        while let Some(r) = w.next_record()? {
            if r.trid != rec.trid {
                continue;
            }
            if r.rectype == LOG_ABORT || r.rectype == LOG_COMMIT {
                // Aborted (CUBRID then ignores the transaction), or committed without telling
                // its user (as after crash recovery): nothing can be reported for it.
                found = Some(Err(()));
                break;
            }
            if r.supplement_type() == Some(supplemental::TRAN_USER) {
                if let Supplement::TranUser(user) = self.extractor.supplement(&*self.log, &r)? {
                    found = Some(Ok(user));
                    break;
                }
            }
        }
        let txn = self.txns.get_mut(&rec.trid).expect("transaction opened");
        match found {
            Some(Ok(u)) => {
                txn.user = Some(Arc::from(u.as_str()));
                Ok(true)
            }
            // Not found before the end of the log either: remember, so as not to scan again.
            Some(Err(())) | None => {
                txn.ignored = true;
                Ok(false)
            }
        }
    }

    fn push_event(&mut self, mut e: Event) -> Result<()> {
        if !self.opts.committed_only {
            if e.hidden {
                return Ok(()); // CUBRID's stream numbers nothing: a rejected event is dropped
            }
            if self.txns.get(&e.trid).is_some_and(|t| t.partial) {
                self.stats.partial_events += 1;
                if self.opts.on_partial == OnPartial::Skip {
                    return Ok(());
                }
                e.partial = true;
            }
            // CUBRID's stream decodes at the change, with the transaction's own DDL in effect.
            let staged = match &self.range {
                Some(r) => std::borrow::Cow::Owned(r.versions.staged_before(e.trid, e.lsa)),
                None => std::borrow::Cow::Borrowed(self.staging.of(e.trid)),
            };
            e.typed = Some(Box::new(type_event(
                &self.catalog,
                &staged,
                &e,
                &self.opts,
                self.catalog_now.as_ref(),
                &mut self.tables,
                &mut self.rows,
            )));
            self.note_schema(&e);
            self.keep_wanted_images(&mut e);
            self.ready.push_back(e);
            return Ok(());
        }
        let w = e.weight();
        let txn = self.txns.get_mut(&e.trid).expect("transaction opened");
        txn.events.push(e);
        txn.bytes += w;
        self.buffered += w;
        self.stats.peak_buffered_bytes = self.stats.peak_buffered_bytes.max(self.buffered);
        if self.buffered > self.opts.memory_limit {
            self.spill_largest()?;
        }
        Ok(())
    }

    /// Moves the buffered events of the largest transaction to its spill file.
    fn spill_largest(&mut self) -> Result<()> {
        let Some((&trid, _)) = self.txns.iter().max_by_key(|(_, t)| t.bytes) else { return Ok(()) };
        let txn = self.txns.get_mut(&trid).unwrap();
        if txn.events.is_empty() {
            return Ok(());
        }
        let io = |e: std::io::Error| LogError::Io { file: "spill file".into(), lsa: None, msg: e.to_string() };
        if txn.spill.is_none() {
            let file = tempfile::tempfile().map_err(io)?;
            txn.spill = Some(Spill { file: BufWriter::with_capacity(1 << 20, file), count: 0 });
        }
        let spill = txn.spill.as_mut().unwrap();
        for e in txn.events.drain(..) {
            write_event(&mut spill.file, &e).map_err(io)?;
            spill.count += 1;
            self.stats.spilled_events += 1;
        }
        spill.file.flush().map_err(io)?;
        self.buffered -= txn.bytes;
        txn.bytes = 0;
        txn.events.shrink_to_fit();
        Ok(())
    }
}

impl<S: LogSource + 'static> ChangeReader<S> {
    /// Counts an emitted change of a table whose schema the log does not hold.
    fn note_schema(&mut self, e: &Event) {
        let Some(class) = e.class_oid else { return };
        if !matches!(e.op, Op::Insert | Op::Update | Op::Delete) || e.typed.as_ref().is_none_or(|t| t.table.is_some()) {
            return;
        }
        self.stats.unknown_schema_events += 1;
        if self.unknown_tables.len() < MAX_UNKNOWN_TABLES && self.unknown_tables.insert(class) {
            self.stats.unknown_schema_tables += 1;
        }
    }

    /// Drops the images the mode does not keep (read only for the key).
    fn keep_wanted_images(&self, e: &mut Event) {
        keep_wanted_images(self.opts.mode, e)
    }
}

/// The candidate event of a DML supplement, or `None` when the options filter it out (trigger,
/// table, operation; the user is the caller's to check): decided before any image is built,
/// with `catalog` as of the record (committed class changes only).
pub fn dml_candidate(
    log: &dyn LogSource,
    rec: &Record,
    dml: &supplemental::DmlSupplement,
    opts: &ChangeOptions,
    catalog: &Catalog,
) -> Result<Option<Event>> {
    let op = extract::dml_op(dml);
    if (dml.trigger && !opts.include_trigger) || !opts.class_passes(catalog, dml.class_oid) {
        return Ok(None);
    }
    // An update of an OID reservation is reported as an insert; only the chase knows.
    if !(opts.wants(op) || (op == Op::Update && opts.wants(Op::Insert))) {
        return Ok(None);
    }
    // Whether the event is in the stream does not depend on the chase, and the narrowing
    // filters reject it whatever the chase says: its place, and no image.
    let placed = opts.wants(op) && (op != Op::Update || opts.wants(Op::Insert));
    let narrow = &opts.narrow;
    if placed && (!narrow.op_may_pass(op, op == Op::Update) || !narrow.class_passes(catalog, Some(dml.class_oid))) {
        let mut e = Event::at(rec, op);
        e.class_oid = Some(dml.class_oid);
        e.hidden = true;
        return Ok(Some(e));
    }
    let (mode_before, mode_after) = opts.mode.images();
    // The key (primary-key columns) comes from the row after the change, or before it for a
    // delete, in every mode; an image the mode does not keep is dropped once the key is taken
    // (`keep_wanted_images`).
    let key_after = op != Op::Delete;
    let want_before = mode_before || (opts.decode && !key_after);
    let want_after = mode_after || (opts.decode && key_after);
    let mut e = extract::dml_event(log, rec, dml, want_before, want_after, opts.on_error)?;
    if !opts.wants(e.op) {
        return Ok(None);
    }
    if !narrow.passes(catalog, e.class_oid, e.op) {
        e.before = None;
        e.after = None;
        e.hidden = true;
    }
    Ok(Some(e))
}

/// The candidate event of a DDL supplement, or `None` when the options filter it out (the
/// user is the caller's to check).
pub fn ddl_candidate(
    rec: &Record,
    ddl: supplemental::DdlSupplement,
    opts: &ChangeOptions,
    catalog: &Catalog,
) -> Option<Event> {
    let passes = if ddl.class_oid.is_null() {
        // Table-less DDL (serials, users, ...): kept unless a table filter asks for its tables'
        // DDL only.
        opts.tables.is_none() || opts.include_ddl == DdlScope::All
    } else {
        opts.class_passes(catalog, ddl.class_oid)
    };
    if !opts.wants(Op::Ddl) || !passes {
        return None;
    }
    let class = (!ddl.class_oid.is_null()).then_some(ddl.class_oid);
    let hidden = !opts.narrow.passes(catalog, class, Op::Ddl);
    let mut e = extract::ddl_event(rec, ddl, opts.redact);
    e.hidden = hidden;
    Some(e)
}

/// Decodes an event's images with `catalog` (plus a transaction's not yet committed class
/// changes), and names its table; `now` is the catalog at the end of the log, for
/// `KeyMode::NameNow`. With `opts.values`, the images become column values instead of JSON.
pub fn type_event(
    catalog: &Catalog,
    staged: &[ClassChange],
    e: &Event,
    opts: &ChangeOptions,
    now: Option<&Catalog>,
    tables: &mut TableNames,
    rows: &mut RowScratch,
) -> Typed {
    let mut t = Typed::default();
    let Some(class) = e.class_oid else { return t };
    let overlay;
    let overlaid = staged.iter().any(|c| matches!(c, ClassChange::Upsert(s) if s.oid == class));
    let cat = if overlaid {
        let mut c = catalog.clone();
        for change in staged {
            c.apply(change.clone());
        }
        overlay = c;
        &overlay
    } else {
        catalog
    };
    let (root, table) = if overlaid {
        // The transaction's own class changes: a catalog of its own, met once.
        let (root, name) = cat.table_of(class);
        (root, name.map(Arc::from))
    } else {
        tables.of(cat, class)
    };
    if root != class {
        t.partition_oid = Some(class);
        t.root_oid = Some(root);
    }
    t.table = table;
    if !opts.decode {
        return t;
    }
    let mut errors = Vec::new();
    if opts.values {
        let mut values = |img: &Option<Image>, side: &str| {
            let i = img.as_ref()?;
            match cat.decode_values(class, i) {
                Ok((v, problems)) => {
                    errors.extend(problems.iter().map(|p| format!("{side}: {p}")));
                    Some(v)
                }
                Err(m) => {
                    errors.push(m);
                    None
                }
            }
        };
        t.before_values = values(&e.before, "before");
        t.after_values = values(&e.after, "after");
        if !errors.is_empty() {
            errors.dedup();
            t.decode_error = Some(errors.join("; "));
        }
        return t;
    }
    let keys = opts.keys;
    let RowScratch { room, before: before_row, after: after_row } = rows;
    let mut decode = |img: &Option<Image>, row: &mut DecodedRow| match img {
        Some(i) => match cat.decode_keyed_into(class, i, keys, now, room, row) {
            Ok(()) => true,
            Err(m) => {
                errors.push(m);
                false
            }
        },
        None => false,
    };
    let has_before = decode(&e.before, before_row);
    let has_after = decode(&e.after, after_row);
    let before = has_before.then_some(&*before_row);
    let after = has_after.then_some(&*after_row);
    for (side, row) in [("before", before), ("after", after)] {
        if let Some(r) = row {
            errors.extend(r.problems.iter().map(|p| format!("{side}: {p}")));
        }
    }
    if let (Some(b), Some(a)) = (before, after) {
        t.changed_columns = Some(catalog::changed_columns(b, a));
    }
    t.key = after.or(before).and_then(|d| d.key_json());
    // The JSON texts move into the event; the rows' other room stays for the next event (their
    // columns, which point into the texts, emptied with them).
    for row in [&mut *before_row, &mut *after_row] {
        row.columns.clear();
    }
    t.before = has_before.then(|| std::mem::take(&mut before_row.json));
    t.after = has_after.then(|| std::mem::take(&mut after_row.json));
    if !errors.is_empty() {
        errors.dedup();
        t.decode_error = Some(errors.join("; "));
    }
    t
}

/// The tables events are reported under, by class, remembered while the catalog does not
/// change (three map lookups and a name comparison per event otherwise). The names are this
/// reader's own: events of readers on other threads do not count references to one name.
/// SipHash, as the catalog's maps: the classes come from the log, where a faster hash's
/// collisions could be crafted.
#[derive(Default)]
pub struct TableNames {
    epoch: u64,
    by_class: std::collections::HashMap<Oid, (Oid, Option<Arc<str>>)>,
}

/// Classes remembered at most (a log may name any number of classes that do not exist).
const MAX_TABLE_NAMES: usize = 4096;

impl TableNames {
    /// `Catalog::table_of`, with the name shared.
    pub fn of(&mut self, catalog: &Catalog, class: Oid) -> (Oid, Option<Arc<str>>) {
        if self.epoch != catalog.epoch() || self.by_class.len() >= MAX_TABLE_NAMES {
            self.by_class.clear();
            self.epoch = catalog.epoch();
        }
        self.by_class
            .entry(class)
            .or_insert_with(|| {
                let (root, name) = catalog.table_of(class);
                (root, name.map(Arc::from))
            })
            .clone()
    }
}

/// Drops the images `mode` does not keep (read only for the key). Column values stay: a typed
/// builder takes the key from them and leaves out the sides `mode` does not keep.
pub fn keep_wanted_images(mode: ImageMode, e: &mut Event) {
    let (before, after) = mode.images();
    if before && after {
        return;
    }
    if !before {
        e.before = None;
    }
    if !after {
        e.after = None;
    }
    if let Some(t) = e.typed.as_mut() {
        if !before {
            t.before = None;
        }
        if !after {
            t.after = None;
        }
        t.changed_columns = None;
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;
    use crate::format::log_header::ActiveHeader;
    use crate::format::rcvindex::RVHF_MVCC_INSERT;
    use crate::log::source::{Absent, Fetch, PageSource};
    use crate::testkit::writer::{DataFields, LogWriter, WriterConfig};

    /// A log a server is still writing, as a source of its own: the pages of a finished log
    /// below `written`, nothing after. No header vouches for more; it grows in place.
    struct Growing {
        log: Arc<LogSet>,
        written: AtomicI64,
    }

    impl PageSource for Growing {
        fn page_size(&self) -> usize {
            self.log.page_size
        }
        fn fetch(&self, pageid: i64) -> Fetch<'_> {
            if pageid >= self.written.load(Ordering::Acquire) {
                return Fetch::Absent(Absent::NoVolume);
            }
            self.log.fetch(pageid)
        }
        fn fetch_error(&self, f: Fetch<'_>, pageid: i64, lsa: Lsa) -> LogError {
            self.log.fetch_error(f, pageid, lsa)
        }
        fn volume_name(&self, vol: usize) -> &str {
            self.log.volume_name(vol)
        }
        fn total_bytes(&self) -> u64 {
            self.log.total_bytes()
        }
    }

    impl LogSource for Growing {
        fn db_creation(&self) -> i64 {
            self.log.db_creation
        }
        fn first_pageid(&self) -> i64 {
            self.log.first_pageid
        }
        fn header(&self) -> Option<&ActiveHeader> {
            None
        }
        fn active_volume(&self) -> Option<usize> {
            None
        }
        fn nxarv_pageid(&self) -> i64 {
            self.log.first_pageid
        }
        fn set_name(&self) -> String {
            self.log.set_name()
        }
        fn volume_count(&self) -> usize {
            self.log.volumes().len()
        }
        fn volume_file(&self, vol: usize) -> &str {
            &self.log.volumes()[vol].name
        }
    }

    /// Committed transactions of one INSERT each (a heap record, its supplemental records),
    /// written as the engine writes them.
    fn inserts(dir: &std::path::Path, count: usize) -> Lsa {
        let cfg = WriterConfig { page_size: 4096, active_pages: 16, archive_pages: 8, ..WriterConfig::default() };
        let mut w = LogWriter::new(cfg).unwrap();
        let supplement = |kind: i32| DataFields { supplement_type: kind, ..DataFields::default() };
        for i in 0..count {
            let trid = 100 + (i % 7) as i32;
            w.append(trid, LOG_SUPPLEMENTAL_INFO, &supplement(supplemental::TRAN_USER), b"DBA", &[], false, false)
                .unwrap();
            let row = [&[0u8, 2][..], &[1, 0, 0, 1, 0, 0, 0, 0][..], &vec![i as u8; 40 + i % 90][..]].concat();
            let data = DataFields {
                rcvindex: RVHF_MVCC_INSERT,
                pageid: 500 + i as i32,
                offset: 1,
                mvccid: 1000 + i as u64,
                ..DataFields::default()
            };
            let at = w.append(trid, LOG_MVCC_UNDOREDO_DATA, &data, &[], &row, false, false).unwrap();
            let class = [&[7u8, 0, 0, 0, 3, 0, 0, 0][..], &at.to_raw().to_le_bytes()[..]].concat();
            w.append(trid, LOG_SUPPLEMENTAL_INFO, &supplement(supplemental::INSERT), &class, &[], false, false)
                .unwrap();
            let commit = DataFields { at_time: 1_700_000_000 + i as i64, ..DataFields::default() };
            w.append(trid, LOG_COMMIT, &commit, &[], &[], false, false).unwrap();
        }
        let end = w.end_lsa();
        w.finish(dir).unwrap();
        end
    }

    /// Allocations a change event may cost, with raw images, in a transaction of its own (so
    /// that what a transaction costs counts whole: its entry and buffer, its user's name): 6.2
    /// measured, mostly the event's image and its transaction's state.
    const MAX_ALLOCATIONS_PER_EVENT: f64 = 6.5;

    fn drain<S: LogSource + 'static>(reader: &mut ChangeReader<S>, into: &mut Vec<Event>) {
        while let Some(e) = reader.next_event().unwrap() {
            into.push(e);
        }
    }

    /// The change stream allocates a bounded number of times per event, whatever the log's
    /// length, and the walk under it nothing per record (a few times in all).
    #[test]
    fn allocations_per_event_are_bounded() {
        use crate::alloc_count::allocations_in;
        use crate::arrow::changes_arrow::{next_changes_batch, ChangesBuilder};
        let dir = tempfile::tempdir().unwrap();
        inserts(dir.path(), 1000);
        let log = Arc::new(LogSet::open(&[dir.path()]).unwrap());
        let opts = ChangeOptions { mode: ImageMode::Full, decode: false, ..ChangeOptions::default() };
        let mut reader = ChangeReader::new(log.clone(), opts).unwrap();
        let mut builder = ChangesBuilder::new(&*log);
        let (events, allocations) = allocations_in(|| {
            let mut events = 0;
            while let Some(batch) = next_changes_batch(&mut reader, &mut builder, 1024).unwrap() {
                events += batch.num_rows();
            }
            events
        });
        assert_eq!(events, 1000);
        let per_event = allocations as f64 / events as f64;
        eprintln!("{allocations} allocations for {events} events: {per_event:.2} per event");
        assert!(per_event <= MAX_ALLOCATIONS_PER_EVENT, "{per_event:.2} allocations per event");

        let mut walker = crate::log::walker::Walker::new(log.clone(), None, None, OnEncrypted::Raise).unwrap();
        let (records, allocations) = allocations_in(|| {
            let mut n = 0u64;
            while walker.next_ref().unwrap().is_some() {
                n += 1;
            }
            n
        });
        assert!(records >= 4 * 1000, "{records} records");
        assert!(allocations <= 4, "{allocations} allocations walking {records} records");
    }

    /// The reader reads any `LogSource`: over a source whose pages appear one at a time, a
    /// followed stream goes on over the same source (its pages refreshed, not a new log set)
    /// and emits exactly the events of the finished log.
    #[test]
    fn a_followed_source_that_grows_in_place_gives_the_finished_logs_events() {
        let dir = tempfile::tempdir().unwrap();
        let end = inserts(dir.path(), 400);
        let log = Arc::new(LogSet::open(&[dir.path()]).unwrap());
        assert!(!log.archives.is_empty(), "the log spans archives");
        let opts = ChangeOptions { mode: ImageMode::Full, ..ChangeOptions::default() };
        let mut whole = Vec::new();
        drain(&mut ChangeReader::new(log.clone(), opts.clone()).unwrap(), &mut whole);
        assert_eq!(whole.len(), 400);
        assert!(whole.iter().all(|e| e.op == Op::Insert && e.after.is_some() && e.commit_lsa.is_some()));

        let first = log.first_pageid;
        let growing = Arc::new(Growing { log: log.clone(), written: AtomicI64::new(first + 1) });
        let mut reader = ChangeReader::new(growing.clone(), ChangeOptions { follow: true, ..opts }).unwrap();
        let mut followed = Vec::new();
        let mut polls = 0;
        loop {
            drain(&mut reader, &mut followed);
            assert!(followed.len() <= whole.len());
            assert_eq!(followed[..], whole[..followed.len()], "poll {polls}");
            if growing.written.load(Ordering::Acquire) > end.pageid {
                break;
            }
            growing.written.fetch_add(1, Ordering::AcqRel); // the server writes a page
            assert!(reader.refresh(growing.clone()).unwrap(), "the walk waited at the written end");
            polls += 1;
        }
        assert_eq!(followed, whole);
        assert!(polls as i64 >= end.pageid - first, "{polls} polls");
    }
}
