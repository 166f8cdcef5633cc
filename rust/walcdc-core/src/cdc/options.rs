//! The read options of a change stream, declared once.
//!
//! [`for_each_read_option!`] is the one list (in the spirit of PostgreSQL's `rmgrlist.h`): a
//! row per option with its name, the type of its value once the caller has resolved it (table
//! names to class OIDs, times to LSAs, a cursor file to its cursor), its default, what kind of
//! resolution it needs, how it sets [`ChangeOptions`], and its documentation. This module
//! expands it into [`READ_OPTIONS`] (what the bindings, the CLI and the docs list) and the
//! defaults of [`ChangeOptions`]; a binding expands it into its conversion of arguments.
//! Adding an option is a row here and the code that uses it.

use crate::catalog::UserColumn;
use crate::cdc::event::{ChangeOptions, Cursor, Narrowing, Op};
use crate::choice::OptionValue;
use crate::supplemental::Oid;

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
            start: Option<u64> = None, Position => |o, v| o.start = v.map($crate::lsa::Lsa::from_key);
            /// Where to stop (exclusive): an LSA or a time.
            end: Option<u64> = None, Position => |o, v| o.end = v.map($crate::lsa::Lsa::from_key);
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
            include_ddl: $crate::cdc::event::DdlScope = $crate::cdc::event::DdlScope::Matching, Value => |o, v| o.include_ddl = v;
            /// Committed transactions only, in commit order; otherwise the items of CUBRID's
            /// own CDC stream, in log order, with commit, abort and timer markers.
            committed_only: bool = true, Value => |o, v| o.committed_only = v;
            /// Which row images to build: id (none), before, after or full.
            mode: $crate::cdc::event::ImageMode = $crate::cdc::event::ImageMode::Full, Value => |o, v| o.mode = v;
            /// The keys of the before/after JSON: column names then, names at the end of the
            /// log, or attribute ids.
            keys: $crate::catalog::KeyMode = $crate::catalog::KeyMode::NameThen, Value => |o, v| o.keys = v;
            /// Schemas of tables created before the log window (a JSON file or dict).
            schema: Option<Vec<$crate::cdc::options::UserSchema>> = None, Schema => |o, v| o.user_schemas = v.unwrap_or_default();
            /// Resume after a previous stream (a cursor, or the path of a saved one).
            cursor: Option<$crate::cdc::event::Cursor> = None, Cursor => |o, v| o.cursor = v;
            /// A record whose images cannot be rebuilt: raise, or emit it with the reason in
            /// error.
            on_error: $crate::cdc::event::OnError = $crate::cdc::event::OnError::Raise, Value => |o, v| o.on_error = v;
            /// Buffered events past this many bytes spill to a temporary file.
            memory_limit: usize = 256 << 20, Value => |o, v| o.memory_limit = v;
            /// A TDE-encrypted page (no keys are available): raise, or skip to the next clear
            /// page and report the gap.
            on_encrypted: $crate::walker::OnEncrypted = $crate::walker::OnEncrypted::Raise, Value => |o, v| o.on_encrypted = v;
            /// A transaction begun before the oldest volume (an older archive is gone): leave
            /// it out, or emit what the log still holds of it, marked partial.
            on_partial: $crate::cdc::event::OnPartial = $crate::cdc::event::OnPartial::Skip, Value => |o, v| o.on_partial = v;
            /// Decode images to before/after JSON, key and changed columns (false: raw images
            /// only, the fastest extraction).
            decode: bool = true, Value => |o, v| o.decode = v;
            /// Replace passwords in DDL statements with ***.
            redact: bool = true, Value => |o, v| o.redact = v;
        }
    };
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
    use crate::cdc::event::ImageMode;

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
