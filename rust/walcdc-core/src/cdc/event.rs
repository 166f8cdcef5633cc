//! Change events and the options of a change stream: what an event is, what a reader is
//! asked for, and where a stream stands (cursor, pending transactions).

use std::collections::HashSet;
use std::sync::Arc;

use crate::catalog::{self, KeyMode};
use crate::chase::Image;
use crate::error::{LogError, Result};
use crate::lsa::Lsa;
use crate::record::Record;
use crate::row::Value;
use crate::supplemental::{DdlSupplement, Oid};
use crate::walker::OnEncrypted;

/// What an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Op {
    Insert,
    Update,
    Delete,
    Ddl,
    Commit,
    Abort,
    Timer,
}

impl Op {
    pub const ALL: [Op; 7] = [Op::Insert, Op::Update, Op::Delete, Op::Ddl, Op::Commit, Op::Abort, Op::Timer];

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Delete => "delete",
            Op::Ddl => "ddl",
            Op::Commit => "commit",
            Op::Abort => "abort",
            Op::Timer => "timer",
        }
    }

    pub fn index(self) -> u8 {
        Op::ALL.iter().position(|&o| o == self).unwrap() as u8
    }

    pub fn parse(s: &str) -> Result<Op> {
        Op::ALL
            .iter()
            .copied()
            .find(|o| o.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| LogError::InvalidArgument { msg: format!("unknown operation {s:?}") })
    }
}

/// Which row images an event carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ImageMode {
    /// No images (identities only: class, row OID, LSAs).
    Id,
    Before,
    After,
    #[default]
    Full,
}

impl ImageMode {
    /// Whether the mode keeps the (before, after) images.
    pub fn images(self) -> (bool, bool) {
        match self {
            ImageMode::Id => (false, false),
            ImageMode::Before => (true, false),
            ImageMode::After => (false, true),
            ImageMode::Full => (true, true),
        }
    }
}

crate::choices!(ImageMode, "mode", {
    "id" => ImageMode::Id,
    "before" => ImageMode::Before,
    "after" => ImageMode::After,
    "full" => ImageMode::Full,
});

/// One change event.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    /// The supplemental (or commit/abort/timer) record that produced the event.
    pub lsa: Lsa,
    /// The volume holding that record.
    pub vol: u16,
    pub trid: i32,
    pub op: Op,
    pub trigger: bool,
    pub user: Option<Arc<str>>,
    pub class_oid: Option<Oid>,
    pub row_oid: Option<Oid>,
    pub before: Option<Image>,
    pub after: Option<Image>,
    pub ddl: Option<DdlSupplement>,
    /// Commit/abort/timer wall-clock time (seconds).
    pub time: Option<i64>,
    /// Why the images are missing (with `on_error = skip`).
    pub error: Option<String>,
    /// Set when the event is emitted by the committed-only stream.
    pub commit_lsa: Option<Lsa>,
    pub commit_time: Option<i64>,
    /// Position inside its transaction (0, 1, ...), among the events emitted for it.
    pub txn_seq: u32,
    /// Typed values, filled when the event is emitted (schemas as of that point of the log).
    pub typed: Option<Box<Typed>>,
    /// Counted in its transaction (`txn_seq`) but not emitted: the options' [`Narrowing`]
    /// rejects it, so no image was read for it. Never in a reader's state (a narrowed reader
    /// has none).
    #[serde(skip)]
    pub hidden: bool,
    /// Emitted from a transaction that began before the log set's oldest volume (see
    /// [`OnPartial`]); set when the event is emitted.
    #[serde(skip)]
    pub partial: bool,
}

/// What the schema catalog made of an event's images.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Typed {
    /// Table name (owner-qualified as stored) at the time of the change.
    pub table: Option<String>,
    /// The partition the row lives in, when the event is reported under its partitioned table
    /// (whose OID then replaces the partition's in `class_oid`, as in CUBRID's CDC).
    pub partition_oid: Option<Oid>,
    pub root_oid: Option<Oid>,
    pub before: Option<String>,
    pub after: Option<String>,
    /// Columns whose value differs between before and after (updates).
    pub changed_columns: Option<Vec<String>>,
    /// The primary-key columns of the row (of `after`, or `before` for a delete) as JSON.
    pub key: Option<String>,
    /// Why an image could not be decoded (unknown schema, corrupt row).
    pub decode_error: Option<String>,
    /// The images' column values by attribute id, in place of their JSON, when the stream
    /// decodes for a typed table ([`ChangeOptions::values`]).
    #[serde(skip)]
    pub before_values: Option<RowValues>,
    #[serde(skip)]
    pub after_values: Option<RowValues>,
}

/// A decoded row: `(attribute id, value)` in the storage order of its representation.
#[derive(Clone, Debug, Default)]
pub struct RowValues(pub Vec<(i32, Value)>);

impl RowValues {
    /// The value of attribute `id` (None when the row's representation has no such attribute).
    pub fn get(&self, id: i32) -> Option<&Value> {
        self.0.iter().find(|(a, _)| *a == id).map(|(_, v)| v)
    }
}

impl PartialEq for RowValues {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().zip(&other.0).all(|(a, b)| a.0 == b.0 && crate::row::same_value(&a.1, &b.1))
    }
}

impl Eq for RowValues {}

impl Event {
    pub(crate) fn at(rec: &Record, op: Op) -> Event {
        let mut e = Event::new(rec.lsa, rec.trid, op);
        e.vol = rec.vol;
        e
    }

    pub(crate) fn new(lsa: Lsa, trid: i32, op: Op) -> Event {
        Event {
            lsa,
            vol: 0,
            trid,
            op,
            trigger: false,
            user: None,
            class_oid: None,
            row_oid: None,
            before: None,
            after: None,
            ddl: None,
            time: None,
            error: None,
            commit_lsa: None,
            commit_time: None,
            txn_seq: 0,
            typed: None,
            hidden: false,
            partial: false,
        }
    }

    /// Approximate bytes an event holds in memory.
    pub fn weight(&self) -> usize {
        std::mem::size_of::<Event>()
            + self.before.as_ref().map_or(0, |i| i.row.len())
            + self.after.as_ref().map_or(0, |i| i.row.len())
            + self.ddl.as_ref().map_or(0, |d| d.statement.len())
            + self.error.as_ref().map_or(0, |e| e.len())
    }
}

/// The resume point of a stream: restart the walk at `restart_lsa` (the first record of the
/// oldest transaction still open) and skip every commit at or before `last_commit_lsa`.
/// `txn_offset` events of the next committed transaction were already emitted (a stream can
/// stop in the middle of a large transaction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub db_creation: i64,
    pub restart_lsa: Lsa,
    pub last_commit_lsa: Option<Lsa>,
    pub txn_offset: u32,
    /// Where the previous stream stopped reading: markers (abort, timer) and, in the
    /// engine-compatible stream, every event before it were already emitted.
    pub position: Lsa,
    /// The cursor of an engine-compatible stream (`committed_only = false`).
    pub engine: bool,
}

impl Cursor {
    /// The cursor can resume a stream of `log` (its database) of this kind.
    pub fn check(&self, log: &crate::logset::LogSet, committed_only: bool) -> Result<()> {
        if self.db_creation != log.db_creation {
            return Err(LogError::InvalidArgument {
                msg: format!(
                    "the cursor belongs to another database (db_creation {}), this log set's is {}",
                    self.db_creation, log.db_creation
                ),
            });
        }
        if self.engine == committed_only {
            return Err(LogError::InvalidArgument {
                msg: format!(
                    "the cursor is of {} stream, this one is {}",
                    if self.engine { "an engine-compatible" } else { "a committed-only" },
                    if committed_only { "committed-only" } else { "engine-compatible" }
                ),
            });
        }
        Ok(())
    }
}

/// A transaction still open where the stream ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub trid: i32,
    pub first_lsa: Lsa,
    pub last_lsa: Lsa,
    /// Events buffered for it (before any undone range is applied).
    pub events: u64,
    pub user: Option<Arc<str>>,
    /// `LOG_COMMIT_WITH_POSTPONE` was written: the transaction is durable and recovery will
    /// complete its commit.
    pub committed_with_postpone: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnError {
    #[default]
    Raise,
    /// Emit the event without images, with the reason in `error`.
    Skip,
}

crate::choices!(OnError, "on_error", { "raise" => OnError::Raise, "skip" => OnError::Skip });

/// What becomes of a transaction whose first record lies before the log set's oldest volume
/// (an older archive was deleted): its events there are lost, so it is never passed off as
/// complete. Either way it is counted (`ChangeStats::partial_transactions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnPartial {
    /// Leave its events out.
    #[default]
    Skip,
    /// Emit the events the log still holds, marked `partial`.
    Emit,
}

crate::choices!(OnPartial, "on_partial", { "skip" => OnPartial::Skip, "emit" => OnPartial::Emit });

/// Which DDL events a table filter keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DdlScope {
    /// DDL on the tables the filter selects (table-less DDL such as `CREATE SERIAL` or
    /// `CREATE USER` only when no table filter is given).
    #[default]
    Matching,
    /// DDL on the selected tables and every table-less DDL.
    All,
}

crate::choices!(DdlScope, "include_ddl", { "matching" => DdlScope::Matching, "all" => DdlScope::All });

/// What `read_changes` reads and how.
#[derive(Clone, Debug)]
pub struct ChangeOptions {
    pub start: Option<Lsa>,
    pub end: Option<Lsa>,
    /// Committed work only, in commit order (default); otherwise CUBRID's own CDC stream.
    pub committed_only: bool,
    pub mode: ImageMode,
    /// Only these classes (CDC OID packing); `None` = all.
    pub tables: Option<HashSet<u64>>,
    pub exclude_tables: HashSet<u64>,
    /// Only these users (compared case-insensitively); `None` = all.
    pub users: Option<Vec<String>>,
    /// Only these operations; `None` = insert, update, delete, ddl (plus commit, abort and
    /// timer markers in the engine-compatible stream).
    pub ops: Option<HashSet<Op>>,
    pub include_trigger: bool,
    pub cursor: Option<Cursor>,
    /// Buffered events past this many bytes spill to a temporary file.
    pub memory_limit: usize,
    pub on_error: OnError,
    pub on_encrypted: OnEncrypted,
    /// Transactions begun before the oldest volume.
    pub on_partial: OnPartial,
    /// Decode images to typed values (`before`/`after` JSON, changed columns); the table name
    /// is filled either way.
    pub decode: bool,
    /// The keys of typed rows' JSON: names then, names now, or attribute ids.
    pub keys: KeyMode,
    /// Decode images to column values by attribute id (`Typed::before_values` / `after_values`)
    /// for a typed table builder, instead of JSON; key and changed columns are then left to
    /// the builder, which knows the table's columns.
    pub values: bool,
    /// Which DDL a table filter keeps.
    pub include_ddl: DdlScope,
    /// Replace passwords in DDL statements with `***`.
    pub redact: bool,
    /// Schemas of tables whose class records are not in the log (a schema file).
    pub user_schemas: Vec<(Oid, String, Option<i32>, Vec<catalog::UserColumn>)>,
    /// Follow a live log: the reader stops where the written log ends for now, keeping what it
    /// knows, and goes on in a later snapshot of the log ([`crate::changes::ChangeReader::refresh`]).
    pub follow: bool,
    /// What the class records said at or before the start (kept beside a cursor): the tables
    /// defined before the start are learned from it instead of from the beginning of the log.
    pub checkpoint: Option<std::sync::Arc<catalog::CatalogCheckpoint>>,
    /// Log between two catalog checkpoints the reader takes for its cursors: a stream resumed
    /// from a cursor walks about this much at most before its restart point.
    pub checkpoint_every: u64,
    /// Filters that narrow what is built, not what the stream is (see [`Narrowing`]).
    pub narrow: Narrowing,
}

/// Filters a query engine pushes into a read (`where table = … and op in (…)`) that must not
/// change the rows that pass them: an event they reject still takes its place in its
/// transaction (`txn_seq`, markers) but is not emitted, and no image is read for it when its
/// place does not depend on the chase. The rows that pass are those of the whole stream that
/// pass, value for value. Table filters match a partition by its partitioned table too; rows
/// with no table (markers, table-less DDL, timers) fail a table filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Narrowing {
    /// Only these classes (CDC OID packing); `None` = all.
    pub tables: Option<HashSet<u64>>,
    /// Only these operations; `None` = all.
    pub ops: Option<HashSet<Op>>,
}

impl Narrowing {
    pub fn is_none(&self) -> bool {
        self.tables.is_none() && self.ops.is_none()
    }

    /// Whether a row of `class` (None: a row with no table) and `op` passes.
    pub fn passes(&self, catalog: &catalog::Catalog, class: Option<Oid>, op: Op) -> bool {
        self.op_may_pass(op, false) && self.class_passes(catalog, class)
    }

    /// Whether a row of `class` (None: a row with no table) passes the table filter.
    pub fn class_passes(&self, catalog: &catalog::Catalog, class: Option<Oid>) -> bool {
        match (&self.tables, class) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(t), Some(c)) => [c, catalog.root(c)].iter().any(|o| t.contains(&o.to_cdc())),
        }
    }

    /// Whether `op` passes, or (`or_insert`) could once the chase has said whether an update
    /// is an insert.
    pub fn op_may_pass(&self, op: Op, or_insert: bool) -> bool {
        self.ops.as_ref().is_none_or(|o| o.contains(&op) || (or_insert && o.contains(&Op::Insert)))
    }
}

impl ChangeOptions {
    /// Whether events of `op` are asked for.
    pub fn wants(&self, op: Op) -> bool {
        match &self.ops {
            Some(set) => set.contains(&op),
            None => match op {
                Op::Insert | Op::Update | Op::Delete | Op::Ddl => true,
                Op::Commit | Op::Abort | Op::Timer => !self.committed_only,
            },
        }
    }

    /// Whether changes of `class` (a table, or a partition of one, matched by its partitioned
    /// table too) pass the table filters, with `catalog` as of the change. (Names are resolved
    /// to class OIDs by the caller.)
    pub fn class_passes(&self, catalog: &catalog::Catalog, class: Oid) -> bool {
        let root = catalog.root(class);
        let oids = [class.to_cdc(), root.to_cdc()];
        if oids.iter().any(|o| self.exclude_tables.contains(o)) {
            return false;
        }
        self.tables.as_ref().is_none_or(|t| oids.iter().any(|o| t.contains(o)))
    }

    /// Whether a transaction of `user` passes the user filter (an unknown user passes only
    /// when there is none).
    pub fn user_passes(&self, user: Option<&str>) -> bool {
        match (&self.users, user) {
            (None, _) => true,
            (Some(list), Some(u)) => list.iter().any(|x| x.eq_ignore_ascii_case(u)),
            (Some(_), None) => false,
        }
    }
}
