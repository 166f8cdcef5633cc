//! Change events: what an event is, and where a stream stands (cursor, pending transactions).
//! What a reader is asked for is in [`crate::cdc::options`].

use std::sync::Arc;

use crate::cdc::chase::Image;
use crate::error::{LogError, Result};
use crate::format::lsa::Lsa;
use crate::format::row::RowValues;
use crate::format::supplemental::{DdlSupplement, Oid};
use crate::log::record::Record;

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
    pub table: Option<Arc<str>>,
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

impl Typed {
    /// Approximate bytes the decoded rows hold (their JSON texts, or their values).
    fn weight(&self) -> usize {
        let texts: usize =
            [&self.before, &self.after, &self.key].iter().map(|t| t.as_ref().map_or(0, |t| t.len())).sum();
        let values: usize =
            [&self.before_values, &self.after_values].iter().map(|v| v.as_ref().map_or(0, |v| v.weight())).sum();
        texts + values
    }
}

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
            + self.typed.as_ref().map_or(0, |t| t.weight())
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
    pub fn check(&self, log: &dyn crate::log::source::LogSource, committed_only: bool) -> Result<()> {
        if self.db_creation != log.db_creation() {
            return Err(LogError::InvalidArgument {
                msg: format!(
                    "the cursor belongs to another database (db_creation {}), this log set's is {}",
                    self.db_creation,
                    log.db_creation()
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
