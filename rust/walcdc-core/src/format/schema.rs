//! Table schemas: column types and domains, attributes, representations keyed by
//! representation id, and what a class record says about a table ([`ClassSchema`]), so that
//! every heap row can be decoded with the layout it was written with. Class records are parsed
//! into these by [`crate::format::class_record`].

use std::collections::HashMap;

use crate::format::supplemental::Oid;

/// `DB_TYPE` ids of column types (`dbtype_def.h`).
pub mod db_type {
    pub const NULL: i32 = 0;
    pub const INTEGER: i32 = 1;
    pub const FLOAT: i32 = 2;
    pub const DOUBLE: i32 = 3;
    pub const STRING: i32 = 4;
    pub const OBJECT: i32 = 5;
    pub const SET: i32 = 6;
    pub const MULTISET: i32 = 7;
    pub const SEQUENCE: i32 = 8;
    pub const ELO: i32 = 9;
    pub const TIME: i32 = 10;
    pub const TIMESTAMP: i32 = 11;
    pub const DATE: i32 = 12;
    pub const MONETARY: i32 = 13;
    pub const SUB: i32 = 15;
    pub const SHORT: i32 = 18;
    pub const OID: i32 = 20;
    pub const NUMERIC: i32 = 22;
    pub const BIT: i32 = 23;
    pub const VARBIT: i32 = 24;
    pub const CHAR: i32 = 25;
    pub const NCHAR: i32 = 26;
    pub const VARNCHAR: i32 = 27;
    pub const BIGINT: i32 = 31;
    pub const DATETIME: i32 = 32;
    pub const BLOB: i32 = 33;
    pub const CLOB: i32 = 34;
    pub const ENUMERATION: i32 = 35;
    pub const TIMESTAMPTZ: i32 = 36;
    pub const TIMESTAMPLTZ: i32 = 37;
    pub const DATETIMETZ: i32 = 38;
    pub const DATETIMELTZ: i32 = 39;
    pub const JSON: i32 = 40;
}

/// The column types: `DB_TYPE` id, the name CUBRID's catalog shows, and the other names SQL
/// accepts for it. The one table of type names (Python's `walcdc.schemas` reads it too).
pub const DB_TYPES: &[(i32, &str, &[&str])] = &[
    (db_type::INTEGER, "INTEGER", &["INT"]),
    (db_type::FLOAT, "FLOAT", &["REAL"]),
    (db_type::DOUBLE, "DOUBLE", &["DOUBLE PRECISION"]),
    (db_type::STRING, "VARCHAR", &["STRING", "CHAR VARYING", "CHARACTER VARYING"]),
    (db_type::OBJECT, "OBJECT", &[]),
    (db_type::SET, "SET", &[]),
    (db_type::MULTISET, "MULTISET", &[]),
    (db_type::SEQUENCE, "SEQUENCE", &["LIST"]),
    (db_type::TIME, "TIME", &[]),
    (db_type::TIMESTAMP, "TIMESTAMP", &[]),
    (db_type::DATE, "DATE", &[]),
    (db_type::MONETARY, "MONETARY", &[]),
    (db_type::SHORT, "SMALLINT", &["SHORT"]),
    (db_type::OID, "OID", &[]),
    (db_type::NUMERIC, "NUMERIC", &["DECIMAL"]),
    (db_type::BIT, "BIT", &[]),
    (db_type::VARBIT, "VARBIT", &["BIT VARYING"]),
    (db_type::CHAR, "CHAR", &["CHARACTER"]),
    (db_type::NCHAR, "NCHAR", &[]),
    (db_type::VARNCHAR, "VARNCHAR", &["NCHAR VARYING"]),
    (db_type::BIGINT, "BIGINT", &[]),
    (db_type::DATETIME, "DATETIME", &[]),
    (db_type::BLOB, "BLOB", &[]),
    (db_type::CLOB, "CLOB", &[]),
    (db_type::ENUMERATION, "ENUM", &["ENUMERATION"]),
    (db_type::TIMESTAMPTZ, "TIMESTAMPTZ", &[]),
    (db_type::TIMESTAMPLTZ, "TIMESTAMPLTZ", &[]),
    (db_type::DATETIMETZ, "DATETIMETZ", &[]),
    (db_type::DATETIMELTZ, "DATETIMELTZ", &[]),
    (db_type::JSON, "JSON", &[]),
];

/// The catalog's name of a `DB_TYPE` id.
pub fn db_type_name(id: i32) -> Option<&'static str> {
    DB_TYPES.iter().find(|t| t.0 == id).map(|t| t.1)
}

/// The `DB_TYPE` id of an SQL type name (`INT`, `VARCHAR`, `TIMESTAMPTZ`, `ENUM`, `LIST`, ...),
/// case, blanks and underscores ignored.
pub fn db_type_from_name(name: &str) -> Option<i32> {
    let squash = |s: &str| s.to_ascii_uppercase().replace([' ', '_'], "");
    let want = squash(name.trim());
    DB_TYPES.iter().find(|(_, n, aliases)| squash(n) == want || aliases.iter().any(|a| squash(a) == want)).map(|t| t.0)
}

/// `INTL_CODESET` ids by charset name.
pub const CODESETS: &[(i32, &str)] = &[(0, "ascii"), (2, "binary"), (3, "iso88591"), (4, "euckr"), (5, "utf8")];

/// A column's domain: its type and the parameters that matter for decoding and display.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Domain {
    pub db_type: i32,
    /// Characters for CHAR/VARCHAR/NCHAR/VARNCHAR, bits for BIT/VARBIT, digits for NUMERIC;
    /// -1 when unspecified.
    pub precision: i32,
    pub scale: i32,
    /// `INTL_CODESET`: 0 ascii, 1 raw bits, 2 binary, 3 iso88591, 4 euckr, 5 utf8.
    pub codeset: i32,
    pub collation: i32,
    /// Declared class of an OBJECT column.
    pub class_oid: Option<Oid>,
    /// ENUM labels; stored values are 1-based indexes into this list.
    pub enum_labels: Vec<String>,
    /// Element domains of SET / MULTISET / SEQUENCE.
    pub set_domains: Vec<Domain>,
}

/// One attribute of a representation, in storage order.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Attribute {
    /// Stable across ALTER and RENAME COLUMN.
    pub id: i32,
    /// Column name (from the current attribute set; `attr#<id>` for a dropped column whose name
    /// is unknown).
    pub name: String,
    /// User-visible column order.
    pub def_order: i32,
    pub domain: Domain,
    /// Whether the column is part of the primary key (current representation only).
    pub primary_key: bool,
    /// The attribute's original default (`ORC_ATT_ORIGINAL_VALUE_INDEX`: the value rows written
    /// before the attribute existed must assume) as JSON text in the CDC forms of
    /// [`crate::format::row::text::value_json`] (a DATETIME default is `"\"2020-01-01 00:00:00.000\""`); `None`
    /// when there is none, it is NULL, or it does not decode. Attributes of old representations
    /// take the default of the current attribute with the same id.
    pub default_value: Option<String>,
}

/// The layout of rows written with one representation id.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Representation {
    pub repid: i32,
    /// Fixed-width attributes first (`n_fixed` of them), then variable-width ones.
    pub attributes: Vec<Attribute>,
    pub n_fixed: usize,
    pub n_var: usize,
    /// Made from `attributes` on first use (see [`Representation::json_keys`]).
    #[serde(skip)]
    pub(crate) json_keys: JsonKeysOnce,
}

impl Representation {
    /// A representation of `attributes` (in storage order), `n_fixed` of them fixed-width.
    pub fn new(repid: i32, attributes: Vec<Attribute>, n_fixed: usize, n_var: usize) -> Representation {
        Representation { repid, attributes, n_fixed, n_var, json_keys: Default::default() }
    }

    /// The attributes in the user's column order and their names as JSON keys: what every row
    /// of this representation is written with, made once (not sorted and escaped per row).
    pub fn json_keys(&self) -> &JsonKeys {
        self.json_keys.0.get_or_init(|| {
            let key = |i: usize| {
                let a = &self.attributes[i];
                (if a.def_order < 0 { i32::MAX } else { a.def_order }, a.id)
            };
            let mut order: Vec<usize> = (0..self.attributes.len()).collect();
            order.sort_by_key(|&i| key(i));
            let names = self
                .attributes
                .iter()
                .map(|a| {
                    let mut k = String::with_capacity(a.name.len() + 2);
                    crate::format::row::text::push_json_str(&mut k, &a.name);
                    k.into_boxed_str()
                })
                .collect();
            JsonKeys { order, names }
        })
    }
}

/// See [`Representation::json_keys`].
#[derive(Debug)]
pub struct JsonKeys {
    /// Attribute positions in the user's column order (`def_order`, then id; a negative
    /// `def_order` last).
    pub order: Vec<usize>,
    /// Each attribute's name as a JSON string (quoted and escaped), by position.
    pub names: Vec<Box<str>>,
}

/// A representation's [`JsonKeys`], made on first use. Not part of what a representation is:
/// equal whatever it holds, and a clone starts empty (so that a clone whose attributes are then
/// changed never keys rows by the original's names).
#[derive(Default)]
pub struct JsonKeysOnce(std::sync::OnceLock<JsonKeys>);

impl Clone for JsonKeysOnce {
    fn clone(&self) -> Self {
        JsonKeysOnce::default()
    }
}

impl PartialEq for JsonKeysOnce {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for JsonKeysOnce {}

impl std::fmt::Debug for JsonKeysOnce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonKeysOnce")
    }
}

/// What a class record says about a table.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClassSchema {
    pub oid: Oid,
    /// Owner-qualified name as stored (`dba.t_types`).
    pub name: String,
    pub current_repid: i32,
    /// Current and old representations by id.
    #[serde(serialize_with = "crate::format::sorted::map")]
    pub representations: HashMap<i32, Representation>,
    /// Partitions of a partitioned table (their class OIDs).
    pub subclasses: Vec<Oid>,
    /// SM_CLASSFLAG_* bits.
    pub flags: i32,
    /// 0 table, 1 view.
    pub class_type: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(id: i32, name: &str, def_order: i32) -> Attribute {
        Attribute {
            id,
            name: name.into(),
            def_order,
            domain: Domain::default(),
            primary_key: false,
            default_value: None,
        }
    }

    #[test]
    fn json_keys_follow_the_users_column_order_and_are_escaped_once() {
        // Storage order: fixed first; the user's order by def_order, then id; negative last.
        let attributes =
            vec![attribute(7, "b", 1), attribute(3, "q\"x", -1), attribute(5, "a", 0), attribute(2, "c", 1)];
        let rep = Representation::new(1, attributes, 2, 2);
        let keys = rep.json_keys();
        assert_eq!(keys.order, vec![2, 3, 0, 1]);
        assert_eq!(keys.names.iter().map(|k| &**k).collect::<Vec<_>>(), ["\"b\"", "\"q\\\"x\"", "\"a\"", "\"c\""]);
        assert!(std::ptr::eq(keys, rep.json_keys()), "made once");
        // A clone starts empty: changed after cloning, it is keyed by its own names.
        let mut renamed = rep.clone();
        assert_eq!(renamed, rep);
        renamed.attributes[0].name = "B".into();
        assert_eq!(&*renamed.json_keys().names[0], "\"B\"");
        assert_eq!(&*rep.json_keys().names[0], "\"b\"");
    }
}
