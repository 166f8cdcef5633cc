//! What a change stream is asked for ([`ChangeOptions`], the filters that need the catalog,
//! [`Narrowing`]) and its read options, declared once.
//!
//! [`for_each_read_option!`] is the one list (in the spirit of PostgreSQL's `rmgrlist.h`): a
//! row per option with its name, the type of its value once the caller has resolved it (table
//! names to class OIDs, times to LSAs, a cursor file to its cursor), its default, what kind of
//! resolution it needs, how it sets [`ChangeOptions`], and its documentation. This module
//! expands it into [`READ_OPTIONS`] (what the bindings, the CLI and the docs list) and the
//! defaults of [`ChangeOptions`]; a binding expands it into its conversion of arguments.
//! Adding an option is a row here and the code that uses it.

use std::collections::HashSet;

use crate::cdc::catalog::{self, KeyMode, UserColumn};
use crate::cdc::event::{Cursor, Op};
use crate::choice::OptionValue;
use crate::format::lsa::Lsa;
use crate::format::supplemental::Oid;
use crate::log::walker::OnEncrypted;

/// A table of a schema file: class OID, name, representation id, columns.
pub type UserSchema = (Oid, String, Option<i32>, Vec<UserColumn>);

/// Calls `$m!` with every read option, one row each:
/// `/// docs` `name: Type = default, Kind => |options, value| what it sets;`
/// `Kind` says what a caller resolves before passing the value ([`Resolve`]).
#[macro_export]
macro_rules! for_each_read_option {
    ($m:ident) => {
        $m! {
            /// Where to start: an LSA, or a time (the first commit, abort or timer record at or
            /// after it, as CUBRID's cdc_find_lsa).
            start: Option<u64> = None, Position => |o, v| o.start = v.map($crate::format::lsa::Lsa::from_key);
            /// Where to stop (exclusive): an LSA or a time.
            end: Option<u64> = None, Position => |o, v| o.end = v.map($crate::format::lsa::Lsa::from_key);
            /// Only these tables: names (t or owner.t, any name the table had) or class OIDs.
            tables: Option<Vec<u64>> = None, Tables => |o, v| o.tables = v.map(|t| t.into_iter().collect());
            /// Leave these tables out: names or class OIDs.
            exclude_tables: Option<Vec<u64>> = None, Tables => |o, v| o.exclude_tables = v.unwrap_or_default().into_iter().collect();
            /// Only the transactions of these users.
            users: Option<Vec<String>> = None, Users => |o, v| o.users = v;
            /// Only these operations (insert, update, delete, ddl; commit, abort and timer
            /// markers in the engine stream).
            ops: Option<Vec<$crate::cdc::event::Op>> = None, Ops => |o, v| o.ops = v.map(|ops| ops.into_iter().collect());
            /// Keep the changes made by triggers.
            include_trigger: bool = true, Value => |o, v| o.include_trigger = v;
            /// Which DDL a table filter keeps: DDL on its tables, or every table-less DDL too.
            include_ddl: $crate::cdc::options::DdlScope = $crate::cdc::options::DdlScope::Matching, Value => |o, v| o.include_ddl = v;
            /// Committed transactions only, in commit order; otherwise the items of CUBRID's
            /// own CDC stream, in log order, with commit, abort and timer markers.
            committed_only: bool = true, Value => |o, v| o.committed_only = v;
            /// Which row images to build: id (none), before, after or full.
            mode: $crate::cdc::options::ImageMode = $crate::cdc::options::ImageMode::Full, Value => |o, v| o.mode = v;
            /// The keys of the before/after JSON: column names then, names at the end of the
            /// log, or attribute ids.
            keys: $crate::cdc::catalog::KeyMode = $crate::cdc::catalog::KeyMode::NameThen, Value => |o, v| o.keys = v;
            /// Schemas of tables created before the log window (a JSON file or dict).
            schema: Option<Vec<$crate::cdc::options::UserSchema>> = None, Schema => |o, v| o.user_schemas = v.unwrap_or_default();
            /// Resume after a previous stream (a cursor, or the path of a saved one).
            cursor: Option<$crate::cdc::event::Cursor> = None, Cursor => |o, v| o.cursor = v;
            /// A record whose images cannot be rebuilt: raise, or emit it with the reason in
            /// error.
            on_error: $crate::cdc::options::OnError = $crate::cdc::options::OnError::Raise, Value => |o, v| o.on_error = v;
            /// Buffered events past this many bytes spill to a temporary file.
            memory_limit: usize = 256 << 20, Value => |o, v| o.memory_limit = v;
            /// A TDE-encrypted page (no keys are available): raise, or skip to the next clear
            /// page and report the gap.
            on_encrypted: $crate::log::walker::OnEncrypted = $crate::log::walker::OnEncrypted::Raise, Value => |o, v| o.on_encrypted = v;
            /// A transaction begun before the oldest volume (an older archive is gone): leave
            /// it out, or emit what the log still holds of it, marked partial.
            on_partial: $crate::cdc::options::OnPartial = $crate::cdc::options::OnPartial::Skip, Value => |o, v| o.on_partial = v;
            /// Decode images to before/after JSON, key and changed columns (false: raw images
            /// only, the fastest extraction).
            decode: bool = true, Value => |o, v| o.decode = v;
            /// Replace passwords in DDL statements with ***.
            redact: bool = true, Value => |o, v| o.redact = v;
        }
    };
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
    /// knows, and goes on in a later snapshot of the log ([`crate::cdc::changes::ChangeReader::refresh`]).
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

/// What a caller does to an option's value before passing it (the bindings know how).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolve {
    /// Passed as it is.
    Value,
    /// An LSA, or a time mapped to the LSA of the first commit, abort or timer at or after it.
    Position,
    /// Table names or class OIDs, names resolved to class OIDs against the log.
    Tables,
    /// User names (a comma-separated string or a list).
    Users,
    /// Operation names (a comma-separated string or a list).
    Ops,
    /// A schema file or dict, loaded.
    Schema,
    /// A cursor, or the path of a saved one, loaded.
    Cursor,
}

impl Resolve {
    pub fn as_str(self) -> &'static str {
        match self {
            Resolve::Value => "value",
            Resolve::Position => "position",
            Resolve::Tables => "tables",
            Resolve::Users => "users",
            Resolve::Ops => "ops",
            Resolve::Schema => "schema",
            Resolve::Cursor => "cursor",
        }
    }
}

/// One read option, as listed to users.
#[derive(Clone, Copy, Debug)]
pub struct ReadOption {
    pub name: &'static str,
    /// The type of the resolved value (`bool`, `int`, `choice`, `lsa`, `class_oids`, ...).
    pub kind: &'static str,
    pub resolve: Resolve,
    /// The default, as JSON (null for none).
    pub default: fn() -> serde_json::Value,
    /// The names a choice takes (empty for other kinds).
    pub choices: fn() -> Vec<&'static str>,
    pub doc: &'static str,
}

macro_rules! declare {
    ($( $(#[doc = $doc:literal])* $name:ident : $ty:ty = $default:expr, $resolve:ident => |$o:ident, $v:ident| $set:expr ;)*) => {
        /// Every read option, in the order shown to users.
        pub static READ_OPTIONS: &[ReadOption] = &[$(
            ReadOption {
                name: stringify!($name),
                kind: <$ty as OptionValue>::KIND,
                resolve: Resolve::$resolve,
                default: || { let v: $ty = $default; v.to_json() },
                choices: <$ty as OptionValue>::choices,
                doc: concat!($($doc, "\n"),*),
            }
        ),*];

        /// Sets every read option of `o` to its default.
        fn read_defaults(o: &mut ChangeOptions) {
            $({
                let $o = &mut *o;
                let $v: $ty = $default;
                $set;
            })*
        }
    };
}

for_each_read_option!(declare);

/// The option named `name`.
pub fn read_option(name: &str) -> Option<&'static ReadOption> {
    READ_OPTIONS.iter().find(|o| o.name == name)
}

impl Default for ChangeOptions {
    fn default() -> Self {
        // The read options at their types' defaults, then at their declared ones; the
        // other fields are set by the readers built on a stream.
        let mut o = ChangeOptions {
            start: Default::default(),
            end: Default::default(),
            committed_only: Default::default(),
            mode: Default::default(),
            tables: Default::default(),
            exclude_tables: Default::default(),
            users: Default::default(),
            ops: Default::default(),
            include_trigger: Default::default(),
            cursor: Default::default(),
            memory_limit: Default::default(),
            on_error: Default::default(),
            on_encrypted: Default::default(),
            on_partial: Default::default(),
            decode: Default::default(),
            keys: Default::default(),
            include_ddl: Default::default(),
            redact: Default::default(),
            user_schemas: Default::default(),
            values: false,
            follow: false,
            checkpoint: None,
            checkpoint_every: 64 << 20,
            narrow: Narrowing::default(),
        };
        read_defaults(&mut o);
        o
    }
}

impl OptionValue for Op {
    const KIND: &'static str = "choice";
    fn to_json(&self) -> serde_json::Value {
        self.as_str().into()
    }
    fn choices() -> Vec<&'static str> {
        Op::ALL.iter().map(|o| o.as_str()).collect()
    }
}

impl OptionValue for Cursor {
    const KIND: &'static str = "cursor";
    fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

impl OptionValue for UserSchema {
    const KIND: &'static str = "schema";
    fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_declared_ones() {
        let o = ChangeOptions::default();
        assert_eq!(o.mode, ImageMode::Full);
        assert_eq!(o.memory_limit, 256 << 20);
        assert!(o.committed_only && o.decode && o.redact && o.include_trigger);
        let mode = read_option("mode").unwrap();
        assert_eq!((mode.default)(), serde_json::json!("full"));
        assert_eq!((mode.choices)(), ["id", "before", "after", "full"]);
        assert_eq!((read_option("memory_limit").unwrap().default)(), serde_json::json!(256 << 20));
        assert_eq!((read_option("tables").unwrap().default)(), serde_json::Value::Null);
        assert_eq!(read_option("start").unwrap().resolve, Resolve::Position);
        assert!(READ_OPTIONS.iter().all(|o| !o.doc.trim().is_empty()), "every option is documented");
    }
}
