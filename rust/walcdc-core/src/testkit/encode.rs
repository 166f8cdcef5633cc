//! Encoders: the inverse of the decoders, for tests and benchmarks.
//!
//! * [`encode_class_record`]: a [`ClassSchema`] as the class record CUBRID stores in the root-class
//!   heap (`cubrid-class-records.md` §2–3), which [`crate::format::class_record::parse_class_record`] parses back.
//! * [`encode_row`] / [`encode_row_with_header`]: column values as a heap record (log format
//!   §8.2–8.4), which [`crate::format::row::decode_row`] decodes back.
//! * [`value_from_json`]: the CDC JSON text forms of [`crate::format::row::text::value_json`] read back into a
//!   [`Value`] of a domain, so that tests can state rows in the form the change stream reports.
//!
//! Layouts follow what the server writes: storage order as given, fixed columns back to back,
//! LSB-first bound bits, the offset-table width chosen from the estimated record size,
//! VARCHAR in the short form below 255 bytes and from 255 bytes in the long form, LZ4-compressed
//! when that saves more than 8 bytes; collections in the tagged layout with the built-in set
//! domain; JSON in the binary serialization. Nothing here is used by the readers.

use std::cmp::Reverse;

use crate::format::class_record::ATTFLAG_PRIMARY_KEY;
use crate::format::row::{self, Value};
use crate::format::schema::{db_type, Attribute, ClassSchema, Domain, Representation};
use crate::format::supplemental::Oid;

type EncResult<T> = std::result::Result<T, String>;

const NULL_OID: Oid = Oid { pageid: -1, slotid: 0, volid: 0 };
/// A NULL packed value as the server writes it for "no default" (built-in NULL domain, null flag).
const NULL_PACKED_VALUE: u32 = 0x0030_0140;
/// `SM_ATTFLAG_NON_NULL`: primary-key columns are NOT NULL.
const ATTFLAG_NON_NULL: i32 = 4;
/// JDN of 1970-01-01.
const UNIX_EPOCH_JDN: i64 = 2_440_588;
const MS_PER_DAY: i64 = 86_400_000;
/// Nesting limit for collections and JSON documents (the decoders refuse deeper ones anyway).
const MAX_DEPTH: u32 = 64;
/// Header size by MVCC flags (§8.2).
use crate::format::heap;

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn pad4(out: &mut Vec<u8>) {
    while out.len() & 3 != 0 {
        out.push(0);
    }
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn put_oid(out: &mut Vec<u8>, oid: Option<Oid>) {
    let o = oid.unwrap_or(NULL_OID);
    out.extend_from_slice(&o.pageid.to_be_bytes());
    out.extend_from_slice(&o.slotid.to_be_bytes());
    out.extend_from_slice(&o.volid.to_be_bytes());
}

fn len_i32(n: usize, what: &str) -> EncResult<i32> {
    i32::try_from(n).map_err(|_| format!("{what}: {n} does not fit a 32-bit length"))
}

/// VARCHAR encoding (§8.4): short form below 255 bytes; from 255 bytes the long form, holding an
/// LZ4 block when that is more than 8 bytes shorter (the server's rule), else the bytes as they are.
/// NUL-terminated and zero-padded to 4.
pub fn encode_varchar(s: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(s.len() + 12);
    if s.len() < 255 {
        b.push(s.len() as u8);
        b.extend_from_slice(s);
    } else {
        let block = lz4_flex::block::compress(s);
        b.push(0xFF);
        if block.len() + 8 < s.len() {
            put_u32(&mut b, block.len() as u32);
            put_u32(&mut b, s.len() as u32);
            b.extend_from_slice(&block);
        } else {
            put_u32(&mut b, 0);
            put_u32(&mut b, s.len() as u32);
            b.extend_from_slice(s);
        }
    }
    b.push(0);
    pad4(&mut b);
    b
}

// ---------------------------------------------------------------------------------------------
// Class records
// ---------------------------------------------------------------------------------------------

/// An object without header: `[n_var + 1 BE offsets][fixed part][variable fields]`, offsets
/// relative to the object's first byte.
fn obj(fixed: &[u8], vars: &[Vec<u8>]) -> Vec<u8> {
    let mut off = 4 * (vars.len() + 1) + fixed.len();
    let mut b = Vec::with_capacity(off + vars.iter().map(Vec::len).sum::<usize>());
    for v in vars {
        put_u32(&mut b, off as u32);
        off += v.len();
    }
    put_u32(&mut b, off as u32);
    b.extend_from_slice(fixed);
    for v in vars {
        b.extend_from_slice(v);
    }
    b
}

/// A substructure set (`put_substructure_set`): header word, count, offsets from the set start,
/// the `DB_TYPE_SUB` domain, the 16-byte common sub-header, then the elements.
fn substructure_set(elems: &[Vec<u8>]) -> Vec<u8> {
    let mut b = Vec::new();
    put_u32(&mut b, 0x0016_0008);
    put_u32(&mut b, elems.len() as u32);
    if elems.is_empty() {
        put_i32(&mut b, 4);
        put_i32(&mut b, db_type::SUB);
        return b;
    }
    let mut off = 8 + 4 * (elems.len() + 1) + 8 + 16;
    for e in elems {
        put_u32(&mut b, off as u32);
        off += e.len();
    }
    put_u32(&mut b, off as u32);
    put_i32(&mut b, 4);
    put_i32(&mut b, db_type::SUB);
    // Common sub-header: the meta class OID (volume 256 = META_VOLUME), its repid, flags.
    put_oid(&mut b, Some(Oid { pageid: 7, slotid: 0, volid: 256 }));
    put_i32(&mut b, 0);
    put_i32(&mut b, 0);
    for e in elems {
        b.extend_from_slice(e);
    }
    b
}

/// An object set (`put_object_set`); no OIDs = an absent field.
fn object_set(oids: &[Oid]) -> Vec<u8> {
    if oids.is_empty() {
        return Vec::new();
    }
    let mut b = Vec::new();
    put_u32(&mut b, 0x0004_0008);
    put_u32(&mut b, oids.len() as u32);
    put_i32(&mut b, 4);
    put_u32(&mut b, 0x0001_0100);
    for o in oids {
        put_oid(&mut b, Some(*o));
    }
    b
}

/// ENUM labels (`or_put_enumeration`): plain sequence header, count, VARCHAR-encoded labels.
fn enumeration(labels: &[String]) -> Vec<u8> {
    if labels.is_empty() {
        return Vec::new();
    }
    let mut b = Vec::new();
    put_u32(&mut b, db_type::SEQUENCE as u32);
    put_u32(&mut b, labels.len() as u32);
    for l in labels {
        b.extend(encode_varchar(l.as_bytes()));
    }
    b
}

/// A domain element (`domain_to_disk`).
fn domain_element(d: &Domain) -> Vec<u8> {
    let mut fixed = Vec::with_capacity(28);
    for v in [d.db_type, d.precision, d.scale, d.codeset, d.collation] {
        put_i32(&mut fixed, v);
    }
    put_oid(&mut fixed, d.class_oid);
    let sub: Vec<Vec<u8>> = d.set_domains.iter().map(domain_element).collect();
    let sub = if sub.is_empty() { Vec::new() } else { substructure_set(&sub) };
    obj(&fixed, &[sub, enumeration(&d.enum_labels), Vec::new()])
}

fn domain_set(d: &Domain) -> Vec<u8> {
    substructure_set(&[domain_element(d)])
}

/// An attribute's default as a packed value; the NULL packed value when there is none or it does
/// not encode.
fn packed_default(a: &Attribute) -> Vec<u8> {
    a.default_value
        .as_deref()
        .and_then(|j| value_from_json(j, &a.domain).ok())
        .filter(|v| *v != Value::Null)
        .and_then(|v| encode_packed_value(&v, &a.domain).ok())
        .unwrap_or_else(|| NULL_PACKED_VALUE.to_be_bytes().to_vec())
}

/// An attribute element (`attribute_to_disk`) of the current attribute set.
fn attribute_element(a: &Attribute, class: Oid) -> Vec<u8> {
    let mut fixed = Vec::with_capacity(40);
    put_i32(&mut fixed, a.id);
    put_i32(&mut fixed, a.domain.db_type);
    put_i32(&mut fixed, 0);
    put_i32(&mut fixed, a.def_order);
    put_oid(&mut fixed, Some(class));
    put_i32(&mut fixed, if a.primary_key { ATTFLAG_PRIMARY_KEY | ATTFLAG_NON_NULL } else { 0 });
    // Legacy BTID: fileid -1, root pageid -1, volid 0.
    put_i32(&mut fixed, -1);
    put_i32(&mut fixed, -1);
    put_i32(&mut fixed, 0);
    let default = packed_default(a);
    obj(
        &fixed,
        &[
            encode_varchar(a.name.as_bytes()),
            default.clone(),
            default,
            domain_set(&a.domain),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        ],
    )
}

/// An old representation element (`representation_to_disk`) with its rep-attributes.
fn representation_element(r: &Representation) -> Vec<u8> {
    let atts: Vec<Vec<u8>> = r
        .attributes
        .iter()
        .map(|a| {
            let mut fixed = Vec::with_capacity(8);
            put_i32(&mut fixed, a.id);
            put_i32(&mut fixed, a.domain.db_type);
            obj(&fixed, &[domain_set(&a.domain)])
        })
        .collect();
    let mut fixed = Vec::with_capacity(16);
    for v in [r.repid, r.n_fixed as i32, r.n_var as i32, 0] {
        put_i32(&mut fixed, v);
    }
    obj(&fixed, &[substructure_set(&atts), Vec::new()])
}

/// `fixed_length` of a representation: the fixed disk sizes summed and rounded up to 4.
fn fixed_length(r: &Representation) -> usize {
    align4(r.attributes.iter().take(r.n_fixed).map(|a| row::layout::fixed_disk_size(&a.domain).unwrap_or(0)).sum())
}

/// The class record of `schema` (REC_HOME bytes, header included) as the server writes it:
/// word 0 = current repid with the 4-byte-offset flags, the 17-field variable table, the 88-byte
/// fixed part, then name, old representations (every representation other than the current one,
/// newest first), subclasses and the current attributes in storage order, each with its domain
/// and (original and current) default.
///
/// [`crate::format::class_record::parse_class_record`] gives back an equal [`ClassSchema`] when the schema is
/// one a class record can express: old representations' attributes take their names, definition
/// order, primary-key flag and default from the current attribute with the same id
/// (`attr#<id>`, -1, false and none for attributes no longer current), and defaults are in the
/// canonical CDC forms of [`crate::format::row::text::value_json`]. A default that does not encode for its
/// domain is written as NULL (parsed back as none).
pub fn encode_class_record(schema: &ClassSchema) -> Vec<u8> {
    let empty = Representation::new(schema.current_repid, Vec::new(), 0, 0);
    let cur = schema.representations.get(&schema.current_repid).unwrap_or(&empty);
    let mut old: Vec<&Representation> =
        schema.representations.values().filter(|r| r.repid != schema.current_repid).collect();
    old.sort_by_key(|r| Reverse(r.repid));

    let next_att_id =
        schema.representations.values().flat_map(|r| r.attributes.iter().map(|a| a.id + 1)).max().unwrap_or(0);
    let mut fixed = Vec::with_capacity(88);
    put_i32(&mut fixed, next_att_id.max(0)); // att_ids
    put_i32(&mut fixed, 0); // method_ids
    put_oid(&mut fixed, None); // representation directory
                               // Heap file of the rows (none for a view).
    let heap = if schema.class_type == 1 { [-1, 0, -1] } else { [schema.oid.pageid, schema.oid.volid as i32, 1] };
    for v in heap {
        put_i32(&mut fixed, v);
    }
    put_i32(&mut fixed, cur.n_fixed as i32);
    put_i32(&mut fixed, cur.n_var as i32);
    put_i32(&mut fixed, fixed_length(cur) as i32);
    put_i32(&mut fixed, cur.attributes.len() as i32);
    for _ in 0..5 {
        put_i32(&mut fixed, 0); // object size, shared/method/class-method/class attribute counts
    }
    put_i32(&mut fixed, schema.flags);
    put_i32(&mut fixed, schema.class_type);
    put_oid(&mut fixed, None); // owner
    put_i32(&mut fixed, 1); // default collation: utf8_bin
    put_i32(&mut fixed, 0); // TDE algorithm
    debug_assert_eq!(fixed.len(), 88);

    let mut vars = vec![Vec::new(); 17];
    vars[0] = encode_varchar(schema.name.as_bytes());
    if !old.is_empty() {
        vars[2] = substructure_set(&old.iter().map(|r| representation_element(r)).collect::<Vec<_>>());
    }
    vars[3] = object_set(&schema.subclasses);
    vars[5] = substructure_set(&cur.attributes.iter().map(|a| attribute_element(a, schema.oid)).collect::<Vec<_>>());

    let mut b = Vec::new();
    put_u32(&mut b, 0x6000_0000 | (schema.current_repid as u32 & 0x00FF_FFFF));
    put_i32(&mut b, 1); // CHN
    b.extend(obj(&fixed, &vars));
    b
}

// ---------------------------------------------------------------------------------------------
// Packed domains and values (collection elements, attribute defaults)
// ---------------------------------------------------------------------------------------------

fn is_string_type(t: i32) -> bool {
    matches!(t, db_type::CHAR | db_type::STRING | db_type::NCHAR | db_type::VARNCHAR)
}

fn is_bit_type(t: i32) -> bool {
    matches!(t, db_type::BIT | db_type::VARBIT)
}

/// A packed domain (`or_put_domain`, class-records spec §2.5.2) for `d`; `null` sets the NULL
/// flag. Types without parameters use the built-in domain reference (index = type + 1), as the
/// server does for INTEGER set elements.
fn packed_domain(d: &Domain, null: bool, depth: u32) -> EncResult<Vec<u8>> {
    if depth > MAX_DEPTH {
        return Err("domain nested too deeply".into());
    }
    let t = d.db_type;
    let null_bit = if null { 0x40 } else { 0 };
    let mut b = Vec::new();
    let precision = u32::try_from(d.precision).unwrap_or(0);
    let (p16, ext_p) = if precision >= 0xFFFF { (0xFFFF, Some(precision)) } else { (precision, None) };
    match t {
        _ if is_string_type(t) || is_bit_type(t) => {
            let cs = (d.codeset as u32) & 0xFF;
            put_u32(&mut b, (p16 << 16) | (cs << 8) | null_bit | t as u32);
            if is_string_type(t) {
                put_u32(&mut b, d.collation as u32 & 0x3FFF_FFFF);
            }
            if let Some(p) = ext_p {
                put_u32(&mut b, p);
            }
        }
        db_type::NUMERIC => {
            let scale = u32::try_from(d.scale).map_err(|_| format!("NUMERIC scale {}", d.scale))?;
            let (s8, ext_s) = if scale >= 0xFF { (0xFF, Some(scale)) } else { (scale, None) };
            put_u32(&mut b, (p16 << 16) | (s8 << 8) | null_bit | t as u32);
            if let Some(p) = ext_p {
                put_u32(&mut b, p);
            }
            if let Some(s) = ext_s {
                put_u32(&mut b, s);
            }
        }
        db_type::ENUMERATION => {
            if d.enum_labels.is_empty() {
                put_u32(&mut b, null_bit | t as u32);
            } else {
                // Labels: a plain sequence header, the count, the VARCHAR-encoded labels.
                put_u32(&mut b, 0x100 | null_bit | t as u32);
                b.extend(enumeration(&d.enum_labels));
            }
        }
        db_type::SET | db_type::MULTISET | db_type::SEQUENCE => {
            if d.set_domains.is_empty() {
                put_u32(&mut b, null_bit | t as u32);
            } else {
                put_u32(&mut b, 0x100 | null_bit | t as u32);
                let n = d.set_domains.len();
                for (i, sub) in d.set_domains.iter().enumerate() {
                    let mut s = packed_domain(sub, false, depth + 1)?;
                    if i + 1 < n {
                        s[3] |= 0x80; // another domain follows
                    }
                    b.extend(s);
                }
            }
        }
        db_type::JSON | db_type::OBJECT | db_type::OID | db_type::BLOB | db_type::CLOB => {
            put_u32(&mut b, null_bit | t as u32);
        }
        db_type::INTEGER
        | db_type::SHORT
        | db_type::BIGINT
        | db_type::FLOAT
        | db_type::DOUBLE
        | db_type::MONETARY
        | db_type::DATE
        | db_type::TIME
        | db_type::TIMESTAMP
        | db_type::TIMESTAMPLTZ
        | db_type::TIMESTAMPTZ
        | db_type::DATETIME
        | db_type::DATETIMELTZ
        | db_type::DATETIMETZ => put_u32(&mut b, (((t + 1) as u32) << 16) | 0x100 | null_bit),
        _ => return Err(format!("type {t} has no packed domain here")),
    }
    Ok(b)
}

/// A packed value (`or_put_value` with its domain; class-records spec §2.4): the packed domain,
/// then the value in its disk encoding, padded to 4. This is how attribute defaults are stored.
pub fn encode_packed_value(v: &Value, d: &Domain) -> EncResult<Vec<u8>> {
    if *v == Value::Null {
        return Ok(NULL_PACKED_VALUE.to_be_bytes().to_vec());
    }
    // Values of parameterless types are packed with the plain type word (the attribute's domain
    // reads them back); parameterized ones with their own domain.
    let mut b = match d.db_type {
        t if is_string_type(t) || is_bit_type(t) || t == db_type::NUMERIC => packed_domain(d, false, 0)?,
        t => (t as u32).to_be_bytes().to_vec(),
    };
    b.extend(encode_value(d, v)?);
    pad4(&mut b);
    Ok(b)
}

/// A domain for a value of a collection whose element domain is not given.
fn infer_domain(v: &Value) -> Domain {
    let (t, precision, scale, codeset) = match v {
        Value::Int(i) if i32::try_from(*i).is_ok() => (db_type::INTEGER, 10, 0, 0),
        Value::Int(_) => (db_type::BIGINT, 19, 0, 0),
        Value::Float(_) => (db_type::FLOAT, 7, 0, 0),
        Value::Double(_) => (db_type::DOUBLE, 15, 0, 0),
        Value::Numeric { scale, .. } => (db_type::NUMERIC, 38, *scale, 0),
        Value::Monetary { .. } => (db_type::MONETARY, 0, 0, 0),
        Value::String { codeset, .. } => (db_type::STRING, -1, 0, *codeset),
        Value::Bit { .. } => (db_type::VARBIT, -1, 0, 1),
        Value::Date(_) => (db_type::DATE, 0, 0, 0),
        Value::Time(_) => (db_type::TIME, 0, 0, 0),
        Value::Timestamp(_) => (db_type::TIMESTAMP, 0, 0, 0),
        Value::TimestampLtz(_) => (db_type::TIMESTAMPLTZ, 0, 0, 0),
        Value::TimestampTz { .. } => (db_type::TIMESTAMPTZ, 0, 0, 0),
        Value::Datetime { .. } => (db_type::DATETIME, 0, 0, 0),
        Value::DatetimeLtz { .. } => (db_type::DATETIMELTZ, 0, 0, 0),
        Value::DatetimeTz { .. } => (db_type::DATETIMETZ, 0, 0, 0),
        Value::Enum { .. } => (db_type::ENUMERATION, 0, 0, 0),
        Value::Oid(_) => (db_type::OBJECT, 0, 0, 0),
        Value::Json(_) => (db_type::JSON, 0, 0, 0),
        Value::Collection { kind, .. } => (*kind, 0, 0, 0),
        Value::Lob { .. } => (db_type::BLOB, 0, 0, 0),
        Value::Null | Value::Unknown { .. } => (db_type::INTEGER, 10, 0, 0),
    };
    Domain { db_type: t, precision, scale, codeset, ..Domain::default() }
}

/// A collection in the layout the server writes (log format §8.4, verified on the fixtures):
/// offset table, the built-in domain of the collection type, every element tagged with its
/// packed domain (a NULL element is its domain with the NULL flag).
fn encode_set(d: &Domain, items: &[Value], depth: u32) -> EncResult<Vec<u8>> {
    if depth > MAX_DEPTH {
        return Err("collection nested too deeply".into());
    }
    let kind = d.db_type;
    let elem = match d.set_domains.as_slice() {
        [one] => Some(one),
        _ => None,
    };
    let mut elems = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        let inferred;
        let ed = match elem {
            Some(e) => e,
            None => {
                inferred = infer_domain(it);
                &inferred
            }
        };
        let null = matches!(it, Value::Null);
        let mut b = packed_domain(ed, null, depth + 1)?;
        if !null {
            b.extend(encode_value_at(ed, it, depth + 1).map_err(|e| format!("element {i}: {e}"))?);
        }
        pad4(&mut b);
        elems.push(b);
    }
    let mut b = Vec::new();
    put_u32(&mut b, 0x000E_0000 | kind as u32);
    put_u32(&mut b, len_i32(items.len(), "collection count")? as u32);
    if !items.is_empty() {
        let mut off = 8 + 4 * (items.len() + 1) + 8;
        for e in &elems {
            put_u32(&mut b, len_i32(off, "collection offset")? as u32);
            off += e.len();
        }
        put_u32(&mut b, len_i32(off, "collection offset")? as u32);
    }
    put_i32(&mut b, 4);
    put_u32(&mut b, (((kind + 1) as u32) << 16) | 0x100);
    for e in elems {
        b.extend(e);
    }
    Ok(b)
}

// ---------------------------------------------------------------------------------------------
// JSON: CUBRID's binary serialization (§8.4), written from JSON text in document order
// ---------------------------------------------------------------------------------------------

struct JsonIn<'a> {
    s: &'a str,
    pos: usize,
}

fn json_put_string(out: &mut Vec<u8>, s: &str) -> EncResult<()> {
    put_i32(out, len_i32(s.len() + 1, "JSON string")?);
    out.extend_from_slice(s.as_bytes());
    out.push(0);
    pad4(out);
    Ok(())
}

impl JsonIn<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn err(&self, what: &str) -> String {
        format!("JSON text: {what} at byte {}", self.pos)
    }

    fn literal(&mut self, word: &str) -> EncResult<()> {
        if self.s[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.err("unexpected token"))
        }
    }

    fn string(&mut self) -> EncResult<String> {
        let b = self.s.as_bytes();
        let start = self.pos;
        if b.get(start) != Some(&b'"') {
            return Err(self.err("expected a string"));
        }
        let mut p = start + 1;
        loop {
            match b.get(p) {
                None => return Err(self.err("unterminated string")),
                Some(b'\\') => p += 2,
                Some(b'"') => break,
                Some(_) => p += 1,
            }
        }
        self.pos = p + 1;
        serde_json::from_str::<String>(&self.s[start..self.pos]).map_err(|e| self.err(&e.to_string()))
    }

    fn number(&mut self, out: &mut Vec<u8>) -> EncResult<()> {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')) {
            self.pos += 1;
        }
        let tok = &self.s[start..self.pos];
        if !serde_json::from_str::<serde_json::Value>(tok).is_ok_and(|v| v.is_number()) {
            return Err(self.err(&format!("bad number {tok:?}")));
        }
        // rapidjson's order: int, uint, int64, uint64, double.
        let integral = !tok.contains(['.', 'e', 'E']);
        if let (true, Ok(i)) = (integral, tok.parse::<i64>()) {
            if let Ok(x) = i32::try_from(i) {
                put_i32(out, 2);
                put_i32(out, 0);
                put_i32(out, x);
            } else if let Ok(x) = u32::try_from(i) {
                put_i32(out, 2);
                put_i32(out, 1);
                put_u32(out, x);
            } else {
                put_i32(out, 3);
                put_i32(out, 0);
                out.extend_from_slice(&i.to_be_bytes());
            }
        } else if let (true, Ok(u)) = (integral, tok.parse::<u64>()) {
            put_i32(out, 3);
            put_i32(out, 1);
            out.extend_from_slice(&u.to_be_bytes());
        } else {
            let f: f64 = tok.parse().map_err(|_| self.err(&format!("bad number {tok:?}")))?;
            put_i32(out, 4);
            out.extend_from_slice(&f.to_bits().to_be_bytes());
        }
        Ok(())
    }

    fn node(&mut self, out: &mut Vec<u8>, depth: u32) -> EncResult<()> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        self.ws();
        match self.peek() {
            Some(open @ (b'{' | b'[')) => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.pos += 1;
                put_i32(out, if open == b'{' { 6 } else { 7 });
                let count_at = out.len();
                put_i32(out, 0);
                let mut n: i32 = 0;
                self.ws();
                if self.peek() == Some(close) {
                    self.pos += 1;
                } else {
                    loop {
                        self.ws();
                        if open == b'{' {
                            let key = self.string()?;
                            json_put_string(out, &key)?;
                            self.ws();
                            if self.peek() != Some(b':') {
                                return Err(self.err("expected ':'"));
                            }
                            self.pos += 1;
                        }
                        self.node(out, depth + 1)?;
                        n += 1;
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.pos += 1,
                            Some(c) if c == close => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(self.err("expected ',' or the end of the container")),
                        }
                    }
                }
                out[count_at..count_at + 4].copy_from_slice(&n.to_be_bytes());
            }
            Some(b'"') => {
                let s = self.string()?;
                put_i32(out, 5);
                json_put_string(out, &s)?;
            }
            Some(b't') => {
                self.literal("true")?;
                put_i32(out, 8);
                put_i32(out, 1);
            }
            Some(b'f') => {
                self.literal("false")?;
                put_i32(out, 8);
                put_i32(out, 0);
            }
            Some(b'n') => {
                self.literal("null")?;
                put_i32(out, 0);
            }
            Some(b'-' | b'0'..=b'9') => self.number(out)?,
            _ => return Err(self.err("unexpected character")),
        }
        Ok(())
    }
}

/// CUBRID's binary JSON (`db_json_serialize`) of a JSON text, members and elements in document
/// order. Integers are INT (signed, else unsigned 32-bit), BIGINT (signed, else unsigned
/// 64-bit), numbers with a fraction or exponent DOUBLE.
pub fn json_binary(text: &str) -> EncResult<Vec<u8>> {
    let mut p = JsonIn { s: text, pos: 0 };
    let mut out = Vec::new();
    p.node(&mut out, 0)?;
    p.ws();
    if p.pos != text.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Heap rows
// ---------------------------------------------------------------------------------------------

/// The header fields of a heap record (§8.2) besides word 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowHeader {
    pub chn: i32,
    /// Insert MVCCID (flag 0x01), e.g. a fresh MVCC insert.
    pub insid: Option<u64>,
    /// Delete MVCCID (flag 0x02).
    pub delid: Option<u64>,
    /// Previous-version LSA as its raw on-disk u64 (flag 0x04); an MVCC update's logged after
    /// image holds the NULL LSA (`u64::MAX`, all bytes 0xFF).
    pub prev_version_lsa: Option<u64>,
}

fn offset_size_for(est: impl Fn(usize) -> usize) -> usize {
    // `heap_attrinfo_get_disksize`: 1-byte offsets while the record fits 127 bytes, then 2-byte
    // ones up to 32767, else 4.
    if est(1) <= 127 {
        1
    } else if est(2) <= 32_767 {
        2
    } else {
        4
    }
}

/// One value's disk bytes (fixed: exactly its disk size; variable: padded to 4). NULL has none:
/// the bound bit or the offset table says NULL.
pub fn encode_value(d: &Domain, v: &Value) -> EncResult<Vec<u8>> {
    encode_value_at(d, v, 0)
}

fn numeric_rescale(unscaled: i128, from: i32, to: i32) -> EncResult<i128> {
    let pow = |k: i32| -> EncResult<i128> {
        10i128.checked_pow(u32::try_from(k).map_err(|_| "negative scale")?).ok_or_else(|| format!("10^{k} overflows"))
    };
    if to >= from {
        unscaled
            .checked_mul(pow(to - from)?)
            .ok_or_else(|| format!("NUMERIC {unscaled}e-{from} at scale {to} overflows"))
    } else {
        let f = pow(from - to)?;
        if unscaled % f == 0 {
            Ok(unscaled / f)
        } else {
            Err(format!("NUMERIC {unscaled}e-{from} has more than {to} fraction digits"))
        }
    }
}

/// Bits beyond `bits` cleared; `n` bytes long.
fn bit_bytes(bytes: &[u8], bits: usize, n: usize) -> EncResult<Vec<u8>> {
    let need = bits.div_ceil(8);
    if bytes[need.min(bytes.len())..].iter().any(|&b| b != 0) {
        return Err(format!("bit string longer than its {bits} bits"));
    }
    let mut b = bytes.to_vec();
    b.resize(n, 0);
    if bits & 7 != 0 && need > 0 && need <= b.len() {
        b[need - 1] &= 0xFFu8 << (8 - (bits & 7));
    }
    Ok(b)
}

fn encode_value_at(d: &Domain, v: &Value, depth: u32) -> EncResult<Vec<u8>> {
    use db_type as T;
    let t = d.db_type;
    let mut b = Vec::new();
    let mismatch = || format!("value {v:?} does not fit type {t}");
    match (t, v) {
        (_, Value::Null) => return Err("NULL has no disk bytes (the bound bit or offset table says NULL)".into()),
        (_, Value::Unknown { reason }) => return Err(format!("undecodable value ({reason})")),
        (T::INTEGER, Value::Int(i)) => {
            put_i32(&mut b, i32::try_from(*i).map_err(|_| format!("{i} is not an INTEGER"))?)
        }
        (T::SHORT, Value::Int(i)) => {
            b.extend_from_slice(&i16::try_from(*i).map_err(|_| format!("{i} is not a SMALLINT"))?.to_be_bytes())
        }
        (T::BIGINT, Value::Int(i)) => b.extend_from_slice(&i.to_be_bytes()),
        (T::FLOAT, Value::Float(f)) => b.extend_from_slice(&f.to_bits().to_be_bytes()),
        (T::FLOAT, Value::Double(f)) => b.extend_from_slice(&(*f as f32).to_bits().to_be_bytes()),
        (T::FLOAT, Value::Int(i)) => b.extend_from_slice(&(*i as f32).to_bits().to_be_bytes()),
        (T::DOUBLE, Value::Double(f)) => b.extend_from_slice(&f.to_bits().to_be_bytes()),
        (T::DOUBLE, Value::Float(f)) => b.extend_from_slice(&(*f as f64).to_bits().to_be_bytes()),
        (T::DOUBLE, Value::Int(i)) => b.extend_from_slice(&(*i as f64).to_bits().to_be_bytes()),
        (T::MONETARY, Value::Monetary { currency, amount }) => {
            put_i32(&mut b, *currency);
            b.extend_from_slice(&amount.to_bits().to_be_bytes());
        }
        (T::NUMERIC, Value::Numeric { unscaled, scale }) => {
            b.extend_from_slice(&numeric_rescale(*unscaled, *scale, d.scale)?.to_be_bytes())
        }
        (T::CHAR | T::NCHAR, Value::String { bytes, .. }) => {
            // Space padded to the reserved width (a tagged element without precision: as is).
            let size =
                if d.precision > 0 { row::layout::fixed_disk_size(d).ok_or_else(mismatch)? } else { bytes.len() };
            if bytes.len() > size {
                return Err(format!("{} bytes do not fit CHAR({}) ({size} bytes)", bytes.len(), d.precision));
            }
            b.extend_from_slice(bytes);
            b.resize(size, b' ');
        }
        (T::STRING | T::VARNCHAR, Value::String { bytes, .. }) => b = encode_varchar(bytes),
        (T::BIT, Value::Bit { bytes, bits }) => {
            let (nbits, size) = if d.precision > 0 {
                (d.precision as usize, row::layout::fixed_disk_size(d).ok_or_else(mismatch)?)
            } else {
                (*bits as usize, (*bits as usize).div_ceil(8))
            };
            b = bit_bytes(bytes, nbits.min(*bits as usize), size)?;
        }
        (T::VARBIT, Value::Bit { bytes, bits }) => {
            let n = *bits as usize;
            if n < 255 {
                b.push(n as u8);
            } else {
                b.push(0xFF);
                put_i32(&mut b, len_i32(n, "VARBIT length")?);
            }
            b.extend(bit_bytes(bytes, n, n.div_ceil(8))?);
        }
        (T::DATE, Value::Date(j)) => put_i32(&mut b, *j),
        (T::TIME, Value::Time(s)) => put_u32(&mut b, *s),
        (T::TIMESTAMP | T::TIMESTAMPLTZ, Value::Timestamp(s) | Value::TimestampLtz(s)) => put_u32(&mut b, *s),
        (T::TIMESTAMPTZ, Value::TimestampTz { secs, tz }) => {
            put_u32(&mut b, *secs);
            put_u32(&mut b, *tz);
        }
        (T::DATETIME | T::DATETIMELTZ, Value::Datetime { jdn, ms } | Value::DatetimeLtz { jdn, ms }) => {
            put_i32(&mut b, *jdn);
            put_u32(&mut b, *ms);
        }
        (T::DATETIMETZ, Value::DatetimeTz { jdn, ms, tz }) => {
            put_i32(&mut b, *jdn);
            put_u32(&mut b, *ms);
            put_u32(&mut b, *tz);
        }
        (T::ENUMERATION, Value::Enum { index, label }) => {
            let index = match (index, label) {
                (0, Some(l)) => d
                    .enum_labels
                    .iter()
                    .position(|x| x == l)
                    .map(|i| i as u16 + 1)
                    .ok_or_else(|| format!("{l:?} is not a label of the ENUM"))?,
                (i, _) => *i,
            };
            b.extend_from_slice(&index.to_be_bytes());
        }
        (T::OBJECT | T::OID, Value::Oid(o)) => put_oid(&mut b, Some(*o)),
        (T::JSON, Value::Json(text)) => b = json_binary(text)?,
        (T::SET | T::MULTISET | T::SEQUENCE, Value::Collection { items, .. }) => b = encode_set(d, items, depth)?,
        (T::BLOB | T::CLOB, Value::Lob { size, locator }) => {
            b.extend_from_slice(&size.to_be_bytes());
            let n = if locator.is_empty() { 0 } else { align4(locator.len() + 1) };
            put_i32(&mut b, len_i32(n, "LOB locator")?);
            b.extend_from_slice(locator.as_bytes());
            b.resize(12 + n, 0);
            put_i32(&mut b, 0); // meta data
            put_i32(&mut b, 1); // ELO_FBO
        }
        _ => return Err(mismatch()),
    }
    if row::layout::is_variable_type(t) {
        pad4(&mut b);
    }
    Ok(b)
}

/// A heap record of `values` (one per attribute of `rep`, storage order; [`Value::Null`] for
/// NULL) written with `rep`: word 0 (bound-bit flag when there are fixed columns, offset width,
/// MVCC flags, repid), CHN 0 and, with `mvcc_insid`, the insert MVCCID (a fresh MVCC insert's
/// 16-byte header), then the offset table, the fixed area, the bound bits and the variable values.
pub fn encode_row(rep: &Representation, values: &[Value], mvcc_insid: Option<u64>) -> EncResult<Vec<u8>> {
    encode_row_with_header(rep, values, &RowHeader { insid: mvcc_insid, ..RowHeader::default() })
}

/// [`encode_row`] with any header (§8.2): CHN, insert and delete MVCCIDs, previous-version LSA.
pub fn encode_row_with_header(rep: &Representation, values: &[Value], h: &RowHeader) -> EncResult<Vec<u8>> {
    let n = rep.attributes.len();
    if values.len() != n {
        return Err(format!("{} values for the {n} attributes of representation {}", values.len(), rep.repid));
    }
    if rep.n_fixed.checked_add(rep.n_var) != Some(n) {
        return Err(format!("representation {}: n_fixed {} + n_var {} != {n}", rep.repid, rep.n_fixed, rep.n_var));
    }
    let repid = u32::try_from(rep.repid)
        .ok()
        .filter(|&r| r <= 0x00FF_FFFF)
        .ok_or_else(|| format!("representation id {} is not a 24-bit id", rep.repid))?;
    let (n_fixed, n_var) = (rep.n_fixed, rep.n_var);

    let mut fixed = Vec::new();
    let mut bound = vec![0u8; n_fixed.div_ceil(32) * 4];
    for (p, (a, v)) in rep.attributes[..n_fixed].iter().zip(values).enumerate() {
        let size = row::layout::fixed_disk_size(&a.domain)
            .filter(|_| !row::layout::is_variable_type(a.domain.db_type))
            .ok_or_else(|| format!("attribute {} (type {}) cannot be in the fixed part", a.name, a.domain.db_type))?;
        if *v == Value::Null {
            fixed.resize(fixed.len() + size, 0);
            continue;
        }
        let b = encode_value(&a.domain, v).map_err(|e| format!("attribute {}: {e}", a.name))?;
        if b.len() != size {
            return Err(format!("attribute {}: {} bytes for a {size}-byte column", a.name, b.len()));
        }
        fixed.extend(b);
        bound[p >> 3] |= 1 << (p & 7);
    }
    pad4(&mut fixed);

    let mut vars = Vec::with_capacity(n_var);
    for (a, v) in rep.attributes[n_fixed..].iter().zip(&values[n_fixed..]) {
        if !row::layout::is_variable_type(a.domain.db_type) {
            return Err(format!("attribute {} (type {}) cannot be in the variable part", a.name, a.domain.db_type));
        }
        vars.push(match v {
            Value::Null => Vec::new(),
            v => encode_value(&a.domain, v).map_err(|e| format!("attribute {}: {e}", a.name))?,
        });
    }
    let var_total: usize = vars.iter().map(Vec::len).sum();

    let flag = |present: bool, bit: u8| if present { u32::from(bit) } else { 0 };
    let flags = flag(h.insid.is_some(), heap::MVCC_FLAG_INSID)
        | flag(h.delid.is_some(), heap::MVCC_FLAG_DELID)
        | flag(h.prev_version_lsa.is_some(), heap::MVCC_FLAG_PREV_VERSION);
    let header_size = heap::header_size(flags as u8);
    let bb = if n_fixed > 0 { bound.len() } else { 0 };
    let vt = |os: usize| if n_var == 0 { 0 } else { align4(os * (n_var + 1)) };
    // The server estimates with the 16-byte insert header (8 for non-MVCC records).
    let est_header = if flags == 0 { 8 } else { 16 };
    let os = offset_size_for(|os| est_header + vt(os) + fixed.len() + bb + var_total);

    let mut word = repid | ((flags & heap::MVCC_FLAGS_MASK) << 24);
    word |= match os {
        1 => 0x2000_0000,
        2 => 0x4000_0000,
        _ => 0x6000_0000,
    };
    if n_fixed > 0 {
        word |= 0x8000_0000;
    }
    let mut r = Vec::with_capacity(header_size + vt(os) + fixed.len() + bb + var_total);
    put_u32(&mut r, word);
    put_i32(&mut r, h.chn);
    if let Some(i) = h.insid {
        r.extend_from_slice(&i.to_be_bytes());
    }
    if let Some(d) = h.delid {
        r.extend_from_slice(&d.to_be_bytes());
    }
    if let Some(l) = h.prev_version_lsa {
        r.extend_from_slice(&l.to_le_bytes());
    }
    debug_assert_eq!(r.len(), header_size);
    if n_var > 0 {
        let mut off = vt(os) + fixed.len() + bb;
        let mut entries = Vec::with_capacity(n_var + 1);
        for v in &vars {
            entries.push(off);
            off += v.len();
        }
        entries.push(off);
        for e in entries {
            match os {
                1 => r.push(e as u8),
                2 => r.extend_from_slice(&(e as u16).to_be_bytes()),
                _ => put_u32(&mut r, len_i32(e, "record")? as u32),
            }
        }
        r.resize(header_size + vt(os), 0);
    }
    r.extend(fixed);
    if n_fixed > 0 {
        r.extend(bound);
    }
    for v in vars {
        r.extend(v);
    }
    Ok(r)
}

pub use crate::format::row::layout::storage_order;

pub use crate::format::schema::db_type_from_name;

// ---------------------------------------------------------------------------------------------
// CDC JSON text forms → values (the inverse of `row::text::value_json`)
// ---------------------------------------------------------------------------------------------

fn digits<T: std::str::FromStr>(s: &str, what: &str) -> EncResult<T> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!("{what}: {s:?} is not a number"));
    }
    s.parse().map_err(|_| format!("{what}: {s:?} is out of range"))
}

/// `YYYY-MM-DD` (CUBRID's calendar: Julian before 1582-10-15) → day number; `0000-00-00` → 0.
fn parse_date(s: &str) -> EncResult<i64> {
    let mut it = s.splitn(3, '-');
    let (y, m, d) = match (it.next(), it.next(), it.next()) {
        (Some(y), Some(m), Some(d)) => {
            (digits::<i64>(y, "year")?, digits::<u32>(m, "month")?, digits::<u32>(d, "day")?)
        }
        _ => return Err(format!("{s:?} is not a YYYY-MM-DD date")),
    };
    if (y, m, d) == (0, 0, 0) {
        return Ok(0);
    }
    if !(1..=9999).contains(&y) || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(format!("{s:?} is not a date CUBRID stores"));
    }
    let jdn = row::text::ymd_to_jdn(y, m, d);
    if row::text::jdn_to_ymd(jdn) != (y, m, d) {
        return Err(format!("{s:?} is not a day of the calendar"));
    }
    Ok(jdn)
}

/// `HH:MM:SS[.fff]` → milliseconds since midnight.
fn parse_time_ms(s: &str) -> EncResult<i64> {
    let (hms, frac) = s.split_once('.').unwrap_or((s, ""));
    let mut it = hms.splitn(3, ':');
    let (h, m, sec) = match (it.next(), it.next(), it.next()) {
        (Some(h), Some(m), Some(sec)) => {
            (digits::<i64>(h, "hour")?, digits::<i64>(m, "minute")?, digits::<i64>(sec, "second")?)
        }
        _ => return Err(format!("{s:?} is not a HH:MM:SS time")),
    };
    if h > 23 || m > 59 || sec > 59 {
        return Err(format!("{s:?} is not a time of day"));
    }
    let ms = if frac.is_empty() {
        0
    } else {
        if frac.len() > 3 {
            return Err(format!("{s:?}: more than millisecond precision"));
        }
        digits::<i64>(frac, "milliseconds")? * 10i64.pow(3 - frac.len() as u32)
    };
    Ok(((h * 60 + m) * 60 + sec) * 1000 + ms)
}

/// `YYYY-MM-DD HH:MM:SS[.fff][ zone]` → (day number, ms, zone text).
fn parse_datetime(s: &str) -> EncResult<(i64, i64, Option<&str>)> {
    let mut it = s.splitn(3, ' ');
    let (Some(date), Some(time)) = (it.next(), it.next()) else {
        return Err(format!("{s:?} is not a date and time"));
    };
    Ok((parse_date(date)?, parse_time_ms(time)?, it.next()))
}

/// A zone shown after a TZ value: `+HH:MM[:SS]` / `-HH:MM[:SS]` (a fixed offset), or the
/// `UTC (unresolved zone: tz_id 0x…` / `UTC (invalid tz_id 0x…` forms. Returns the `TZ_ID` and
/// the offset the value is shown at.
fn parse_zone(z: &str) -> EncResult<(u32, i64)> {
    if let Some(rest) = z.strip_prefix('+').or_else(|| z.strip_prefix('-')) {
        let parts: Vec<&str> = rest.split(':').collect();
        if !(2..=3).contains(&parts.len()) {
            return Err(format!("zone {z:?} is not ±HH:MM[:SS]"));
        }
        let mut secs = digits::<i64>(parts[0], "zone hours")? * 3600 + digits::<i64>(parts[1], "zone minutes")? * 60;
        if let Some(s) = parts.get(2) {
            secs += digits::<i64>(s, "zone seconds")?;
        }
        if secs > 0x3FFF_FFFF {
            return Err(format!("zone {z:?} out of range"));
        }
        return Ok(if z.starts_with('-') {
            (0x8000_0000 | secs as u32, -secs)
        } else {
            (0x4000_0000 | secs as u32, secs)
        });
    }
    if let Some(at) = z.find("tz_id 0x") {
        let hex = z.get(at + 8..at + 16).ok_or_else(|| format!("zone {z:?}: no tz_id"))?;
        let tz = u32::from_str_radix(hex, 16).map_err(|_| format!("zone {z:?}: bad tz_id"))?;
        // Only zone ids that are no fixed offset are shown this way, and in UTC.
        return Ok((tz, 0));
    }
    Err(format!("zone {z:?} is not a fixed offset or a raw tz_id"))
}

fn timestamp_secs(jdn: i64, ms: i64) -> EncResult<u32> {
    if jdn == 0 && ms == 0 {
        return Ok(0);
    }
    let secs = (jdn - UNIX_EPOCH_JDN) * 86_400 + ms.div_euclid(1000);
    u32::try_from(secs).map_err(|_| format!("{secs} seconds since 1970 do not fit a TIMESTAMP"))
}

/// The `(day number, ms)` of a local date and time `off` seconds ahead of UTC, in UTC.
fn to_utc(jdn: i64, ms: i64, off: i64) -> EncResult<(i32, u32)> {
    let total = jdn * MS_PER_DAY + ms - off * 1000;
    let j = i32::try_from(total.div_euclid(MS_PER_DAY)).map_err(|_| "day number out of range".to_string())?;
    Ok((j, total.rem_euclid(MS_PER_DAY) as u32))
}

/// `[-]digits[.digits]` or `[-]digitsE-scale` → (unscaled, scale).
fn parse_decimal(s: &str) -> EncResult<(i128, i32)> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (mantissa, scale) = if let Some((m, e)) = body.split_once("E-") {
        (m.to_string(), digits::<i32>(e, "NUMERIC scale")?)
    } else {
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        if int.is_empty() && frac.is_empty() {
            return Err(format!("{s:?} is not a decimal"));
        }
        (format!("{int}{frac}"), frac.len() as i32)
    };
    let u: i128 = digits(&mantissa, "NUMERIC")?;
    Ok((if neg { -u } else { u }, scale))
}

fn parse_monetary(s: &str) -> EncResult<Value> {
    // The longest currency sign the text starts with (the amount never starts with a letter).
    let currency = (0..24)
        .filter(|&c| s.starts_with(row::text::currency_symbol(c)))
        .max_by_key(|&c| row::text::currency_symbol(c).len());
    let (currency, rest) = match currency {
        Some(c) => (c, &s[row::text::currency_symbol(c).len()..]),
        None => (24, s), // a currency code without a sign
    };
    let amount = if rest == "nan" {
        f64::NAN
    } else {
        rest.parse::<f64>().map_err(|_| format!("{s:?} is not a MONETARY amount"))?
    };
    Ok(Value::Monetary { currency, amount })
}

/// `X'<hex>'` → bytes and bit count (BIT(n): n bits; otherwise 4 per hex digit).
fn parse_bits(s: &str, d: &Domain) -> EncResult<Value> {
    let hex = s
        .strip_prefix("X'")
        .or_else(|| s.strip_prefix("x'"))
        .and_then(|h| h.strip_suffix('\''))
        .ok_or_else(|| format!("{s:?} is not X'<hex>'"))?;
    let mut bytes = vec![0u8; hex.len().div_ceil(2)];
    for (i, c) in hex.chars().enumerate() {
        let n = c.to_digit(16).ok_or_else(|| format!("{s:?}: {c:?} is not a hex digit"))? as u8;
        bytes[i / 2] |= if i % 2 == 0 { n << 4 } else { n };
    }
    let bits = if d.db_type == db_type::BIT && d.precision > 0 { d.precision as usize } else { hex.len() * 4 };
    if hex.len() > bits.div_ceil(4) {
        return Err(format!("{s:?} is longer than {bits} bits"));
    }
    let bytes = bit_bytes(&bytes, bits, bits.div_ceil(8))?;
    Ok(Value::Bit { bytes, bits: bits as u32 })
}

/// Text as bytes of a codeset: iso88591 (3) byte per character, euckr (4) EUC-KR, else UTF-8.
fn text_bytes(s: &str, codeset: i32) -> EncResult<Vec<u8>> {
    match codeset {
        3 => s.chars().map(|c| u8::try_from(c as u32).map_err(|_| format!("{c:?} is not ISO-8859-1"))).collect(),
        4 => {
            let (b, _, unmappable) = encoding_rs::EUC_KR.encode(s);
            if unmappable {
                return Err(format!("{s:?} is not EUC-KR"));
            }
            Ok(b.into_owned())
        }
        _ => Ok(s.as_bytes().to_vec()),
    }
}

/// A value of an untyped collection: numbers, strings, booleans, arrays, objects.
fn infer_value(v: &serde_json::Value, depth: u32) -> EncResult<Value> {
    use serde_json::Value as J;
    if depth > MAX_DEPTH {
        return Err("value nested too deeply".into());
    }
    Ok(match v {
        J::Null => Value::Null,
        J::Bool(b) => Value::Int(i64::from(*b)),
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::String { bytes: s.as_bytes().to_vec(), codeset: 5 },
        J::Array(a) => Value::Collection {
            kind: db_type::SEQUENCE,
            items: a.iter().map(|x| infer_value(x, depth + 1)).collect::<EncResult<_>>()?,
        },
        J::Object(_) => Value::Json(v.to_string()),
    })
}

fn value_from(v: &serde_json::Value, d: &Domain, depth: u32) -> EncResult<Value> {
    use db_type as T;
    if depth > MAX_DEPTH {
        return Err("value nested too deeply".into());
    }
    if v.is_null() {
        return Ok(Value::Null);
    }
    let t = d.db_type;
    let text = || v.as_str().ok_or_else(|| format!("type {t} takes a JSON string, not {v}"));
    let int = || v.as_i64().ok_or_else(|| format!("type {t} takes an integer, not {v}"));
    let float = || v.as_f64().ok_or_else(|| format!("type {t} takes a number, not {v}"));
    Ok(match t {
        T::INTEGER => Value::Int(i32::try_from(int()?).map_err(|_| format!("{v} is not an INTEGER"))? as i64),
        T::SHORT => Value::Int(i16::try_from(int()?).map_err(|_| format!("{v} is not a SMALLINT"))? as i64),
        T::BIGINT => Value::Int(int()?),
        T::FLOAT => Value::Float(float()? as f32),
        T::DOUBLE => Value::Double(float()?),
        T::NUMERIC => {
            let s = match v {
                serde_json::Value::Number(n) => n.to_string(),
                _ => text()?.to_string(),
            };
            let (u, scale) = parse_decimal(&s)?;
            Value::Numeric { unscaled: numeric_rescale(u, scale, d.scale)?, scale: d.scale }
        }
        T::MONETARY => parse_monetary(text()?)?,
        T::CHAR | T::STRING | T::NCHAR | T::VARNCHAR => {
            Value::String { bytes: text_bytes(text()?, d.codeset)?, codeset: d.codeset }
        }
        T::BIT | T::VARBIT => parse_bits(text()?, d)?,
        T::DATE => Value::Date(parse_date(text()?)? as i32),
        T::TIME => {
            let ms = parse_time_ms(text()?)?;
            if ms % 1000 != 0 {
                return Err(format!("TIME {v} has a fraction of a second"));
            }
            Value::Time((ms / 1000) as u32)
        }
        T::TIMESTAMP | T::TIMESTAMPLTZ => {
            let (jdn, ms, zone) = parse_datetime(text()?)?;
            match (t, zone) {
                (T::TIMESTAMP, None) => Value::Timestamp(timestamp_secs(jdn, ms)?),
                (T::TIMESTAMPLTZ, Some("UTC")) => Value::TimestampLtz(timestamp_secs(jdn, ms)?),
                _ => return Err(format!("{v} is not a type {t} text")),
            }
        }
        T::TIMESTAMPTZ => {
            let (jdn, ms, zone) = parse_datetime(text()?)?;
            let (tz, off) = parse_zone(zone.ok_or_else(|| format!("{v} has no zone"))?)?;
            let (j, m) = to_utc(jdn, ms, off)?;
            Value::TimestampTz { secs: timestamp_secs(j as i64, m as i64).map_err(|e| format!("{v}: {e}"))?, tz }
        }
        T::DATETIME | T::DATETIMELTZ => {
            let (jdn, ms, zone) = parse_datetime(text()?)?;
            let jdn = jdn as i32;
            let ms = ms as u32;
            match (t, zone) {
                (T::DATETIME, None) => Value::Datetime { jdn, ms },
                (T::DATETIMELTZ, Some("UTC")) => Value::DatetimeLtz { jdn, ms },
                _ => return Err(format!("{v} is not a type {t} text")),
            }
        }
        T::DATETIMETZ => {
            let (jdn, ms, zone) = parse_datetime(text()?)?;
            let (tz, off) = parse_zone(zone.ok_or_else(|| format!("{v} has no zone"))?)?;
            let (jdn, ms) = to_utc(jdn, ms, off)?;
            Value::DatetimeTz { jdn, ms, tz }
        }
        T::ENUMERATION => match v {
            serde_json::Value::String(l) => match d.enum_labels.iter().position(|x| x == l) {
                Some(i) => Value::Enum { index: i as u16 + 1, label: Some(l.clone()) },
                None if l.is_empty() => Value::Enum { index: 0, label: None },
                None => return Err(format!("{l:?} is not a label of the ENUM")),
            },
            _ => {
                let i = u16::try_from(int()?).map_err(|_| format!("{v} is not an ENUM index"))?;
                let label = (i as usize).checked_sub(1).and_then(|k| d.enum_labels.get(k)).cloned();
                Value::Enum { index: i, label }
            }
        },
        T::OBJECT | T::OID => {
            let s = text()?;
            let p: Vec<&str> = s.split('|').collect();
            let num = |x: &str| x.parse::<i64>().map_err(|_| format!("{s:?} is not volid|pageid|slotid"));
            if p.len() != 3 {
                return Err(format!("{s:?} is not volid|pageid|slotid"));
            }
            Value::Oid(Oid { volid: num(p[0])? as i16, pageid: num(p[1])? as i32, slotid: num(p[2])? as i16 })
        }
        T::JSON => row::decode_value(d, &json_binary(&v.to_string())?, 0),
        T::SET | T::MULTISET | T::SEQUENCE => {
            let a = v.as_array().ok_or_else(|| format!("a collection takes a JSON array, not {v}"))?;
            let elem = match d.set_domains.as_slice() {
                [one] => Some(one),
                _ => None,
            };
            let items = a
                .iter()
                .map(|x| match elem {
                    Some(e) => value_from(x, e, depth + 1),
                    None => infer_value(x, depth + 1),
                })
                .collect::<EncResult<Vec<_>>>()?;
            Value::Collection { kind: t, items }
        }
        T::BLOB | T::CLOB => Value::Lob { size: 0, locator: text()?.to_string() },
        _ => return Err(format!("type {t} is not a column type this encoder knows")),
    })
}

/// Reads a value of domain `d` from its CDC JSON text form ([`crate::format::row::text::value_json`]): numbers
/// for integer and floating types, `"123.4500"` NUMERIC, `"$50244.71"` MONETARY, strings (CHAR
/// with its padding, plain text for NCHAR), `"X'1da1'"` bits, `"YYYY-MM-DD"`, `"HH:MM:SS"`,
/// `"YYYY-MM-DD HH:MM:SS[.fff]"` with ` UTC` (LTZ) or a fixed offset `+09:00` (TZ: local time at
/// that offset), ENUM labels, `"vol|page|slot"` OIDs, JSON as JSON (members kept in document
/// order), collections as arrays; `null` is NULL. The text form of the result is the input's
/// canonical form.
pub fn value_from_json(text: &str, d: &Domain) -> EncResult<Value> {
    let text = text.trim();
    if d.db_type == db_type::JSON {
        if text == "null" {
            return Ok(Value::Null);
        }
        // Through the binary form: the decoder's compact text, in document order.
        return match row::decode_value(d, &json_binary(text)?, 0) {
            Value::Unknown { reason } => Err(reason),
            v => Ok(v),
        };
    }
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("{text:?} is not JSON: {e}"))?;
    value_from(&v, d, 0)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::format::class_record::parse_class_record;
    use crate::format::row::layout::{record_repid, row_layout};
    use crate::format::row::text::value_json;
    use crate::format::row::{decode_row, decode_value};

    fn dom(db_type: i32, precision: i32, scale: i32, codeset: i32) -> Domain {
        Domain { db_type, precision, scale, codeset, ..Domain::default() }
    }

    fn att(id: i32, name: &str, def_order: i32, domain: Domain) -> Attribute {
        Attribute { id, name: name.into(), def_order, domain, primary_key: false, default_value: None }
    }

    fn rep(repid: i32, attributes: Vec<Attribute>) -> Representation {
        let n_fixed = attributes.iter().filter(|a| !row::layout::is_variable_type(a.domain.db_type)).count();
        let n_var = attributes.len() - n_fixed;
        Representation::new(repid, attributes, n_fixed, n_var)
    }

    /// Incompressible bytes (xorshift64).
    fn noise(n: usize) -> Vec<u8> {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    fn labels(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    /// Every supported column type, in storage order (fixed first).
    fn wide_rep(repid: i32) -> Representation {
        let mut set_int = dom(db_type::SET, 0, 0, 0);
        set_int.set_domains = vec![dom(db_type::INTEGER, 10, 0, 0)];
        let mut mset_vc = dom(db_type::MULTISET, 0, 0, 0);
        mset_vc.set_domains = vec![Domain { collation: 1, ..dom(db_type::STRING, 10, 0, 5) }];
        let mut seq_int = dom(db_type::SEQUENCE, 0, 0, 0);
        seq_int.set_domains = vec![dom(db_type::INTEGER, 10, 0, 0)];
        let en = Domain { enum_labels: labels(&["red", "green", "blue"]), ..dom(db_type::ENUMERATION, 0, 0, 5) };
        let cols = vec![
            ("i", dom(db_type::INTEGER, 10, 0, 0)),
            ("b", dom(db_type::BIGINT, 19, 0, 0)),
            ("f", dom(db_type::FLOAT, 7, 0, 0)),
            ("d", dom(db_type::DOUBLE, 15, 0, 0)),
            ("m", dom(db_type::MONETARY, 15, 2, 0)),
            ("dt", dom(db_type::DATE, 10, 0, 0)),
            ("tm", dom(db_type::TIME, 8, 0, 0)),
            ("ts", dom(db_type::TIMESTAMP, 19, 0, 0)),
            ("tsl", dom(db_type::TIMESTAMPLTZ, 19, 0, 0)),
            ("tst", dom(db_type::TIMESTAMPTZ, 19, 0, 0)),
            ("dtm", dom(db_type::DATETIME, 23, 3, 0)),
            ("dtl", dom(db_type::DATETIMELTZ, 23, 3, 0)),
            ("dtz", dom(db_type::DATETIMETZ, 23, 3, 0)),
            ("s", dom(db_type::SHORT, 5, 0, 0)),
            ("e", en),
            ("n", dom(db_type::NUMERIC, 15, 4, 0)),
            ("c", Domain { collation: 1, ..dom(db_type::CHAR, 5, 0, 5) }),
            ("c1", dom(db_type::CHAR, 3, 0, 3)),
            ("bt", dom(db_type::BIT, 12, 0, 1)),
            ("v", Domain { collation: 1, ..dom(db_type::STRING, 1_073_741_823, 0, 5) }),
            ("vk", dom(db_type::STRING, 100, 0, 4)),
            ("nv", dom(db_type::VARNCHAR, 40, 0, 5)),
            ("vb", dom(db_type::VARBIT, 2000, 0, 1)),
            ("j", dom(db_type::JSON, 0, 0, 0)),
            ("si", set_int),
            ("ms", mset_vc),
            ("sq", seq_int),
        ];
        rep(repid, cols.into_iter().enumerate().map(|(i, (n, d))| att(i as i32, n, i as i32, d)).collect())
    }

    fn wide_values() -> Vec<&'static str> {
        vec![
            "-2147483648",
            "9223372036854775807",
            "316.25",
            "-1.5e-300",
            "\"\\\\-12345.67\"",
            "\"1582-10-04\"",
            "\"23:59:59\"",
            "\"2106-02-07 06:28:15\"",
            "\"2023-06-27 01:02:03 UTC\"",
            "\"2023-07-14 04:05:06 +09:00\"",
            "\"0001-01-01 00:00:00.001\"",
            "\"2022-02-27 23:59:59.001 UTC\"",
            "\"2022-03-14 08:00:00.250 -05:30\"",
            "-27220",
            "\"blue\"",
            "\"-0.0001\"",
            "\"가a   \"",
            "\"caf\"",
            "\"X'1d0'\"",
            "\"apple\"",
            "\"한글\"",
            "\"abc\"",
            "\"X'baab0'\"",
            r#"{"z":1,"a":[true,null,"xy",{"k":-5000000000}],"c":2.5,"e":4294967295,"u":18446744073709551615}"#,
            "[4,6,null,12]",
            "[\"a\",\"a\",null,\"b7\"]",
            "[]",
        ]
    }

    fn values_of(rep: &Representation, texts: &[&str]) -> Vec<Value> {
        rep.attributes.iter().zip(texts).map(|(a, t)| value_from_json(t, &a.domain).unwrap()).collect()
    }

    fn json_of(rep: &Representation, values: &[Value]) -> Vec<String> {
        rep.attributes.iter().zip(values).map(|(a, v)| value_json(v, &a.domain)).collect()
    }

    #[test]
    fn encode_row_every_type_round_trips() {
        let rep = wide_rep(3);
        let texts = wide_values();
        let values = values_of(&rep, &texts);
        let rec = encode_row(&rep, &values, Some(0x1234)).unwrap();
        assert_eq!(record_repid(&rec), Ok(3));
        let layout = row_layout(&rep, &rec).unwrap();
        assert_eq!((layout.mvcc_flags, layout.header_size, layout.offset_size), (1, 16, 2));
        let back = decode_row(&rep, &rec).unwrap();
        assert_eq!(back, values);
        // The text forms are the inputs (the canonical CDC forms).
        assert_eq!(json_of(&rep, &back), texts);
    }

    #[test]
    fn encode_row_nulls_and_offset_widths() {
        let wide = wide_rep(1);
        let all_null = vec![Value::Null; wide.attributes.len()];
        let rec = encode_row(&wide, &all_null, None).unwrap();
        let layout = row_layout(&wide, &rec).unwrap();
        assert_eq!((layout.mvcc_flags, layout.header_size), (0, 8));
        assert!(layout.slots.iter().all(|s| *s == row::layout::Slot::Null));
        assert_eq!(decode_row(&wide, &rec).unwrap(), all_null);
        // Every other column NULL.
        let mut some = values_of(&wide, &wide_values());
        for v in some.iter_mut().step_by(2) {
            *v = Value::Null;
        }
        let rec = encode_row(&wide, &some, Some(9)).unwrap();
        assert_eq!(decode_row(&wide, &rec).unwrap(), some);
        // A tiny row: 1-byte offsets; a huge one: 4-byte offsets.
        let small = rep(
            7,
            vec![att(0, "a", 0, dom(db_type::INTEGER, 10, 0, 0)), att(1, "v", 1, dom(db_type::STRING, -1, 0, 5))],
        );
        let v = vec![Value::Int(1), Value::String { bytes: b"apple".to_vec(), codeset: 5 }];
        let rec = encode_row(&small, &v, Some(0x1234)).unwrap();
        // The worked example of the log format notes (§8.5), minus its DATETIME/NUMERIC columns.
        assert_eq!(&rec[..20], &[0xA1, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x0C, 0x14, 0, 0]);
        assert_eq!(decode_row(&small, &rec).unwrap(), v);
        let big = vec![Value::Null, Value::String { bytes: noise(40_000), codeset: 5 }];
        let rec = encode_row(&small, &big, Some(1)).unwrap();
        assert_eq!(row_layout(&small, &rec).unwrap().offset_size, 4);
        assert_eq!(decode_row(&small, &rec).unwrap(), big);
        // Only variable columns: no bound bits; only fixed ones: no offset table.
        let only_var = rep(2, vec![att(0, "v", 0, dom(db_type::STRING, -1, 0, 5))]);
        let rec = encode_row(&only_var, &[Value::String { bytes: b"x".to_vec(), codeset: 5 }], None).unwrap();
        assert_eq!(rec[0] & 0x80, 0);
        assert_eq!(decode_row(&only_var, &rec).unwrap(), vec![Value::String { bytes: b"x".to_vec(), codeset: 5 }]);
        let only_fixed = rep(2, vec![att(0, "i", 0, dom(db_type::INTEGER, 10, 0, 0))]);
        let rec = encode_row(&only_fixed, &[Value::Int(-7)], Some(5)).unwrap();
        assert_eq!(rec.len(), 16 + 4 + 4);
        assert_eq!(decode_row(&only_fixed, &rec).unwrap(), vec![Value::Int(-7)]);
    }

    #[test]
    fn encode_row_long_strings_all_forms() {
        let r = rep(1, vec![att(0, "v", 0, dom(db_type::STRING, 1_073_741_823, 0, 5))]);
        let repeated: Vec<u8> = b"lz4-P4K-".iter().copied().cycle().take(5000).collect();
        let random = noise(300);
        for (s, form) in
            [(b"short".to_vec(), 5u8), (vec![b'q'; 254], 254), (random.clone(), 0xFF), (repeated.clone(), 0xFF)]
        {
            let v = vec![Value::String { bytes: s.clone(), codeset: 5 }];
            let rec = encode_row(&r, &v, Some(3)).unwrap();
            let layout = row_layout(&r, &rec).unwrap();
            let row::layout::Slot::Bytes(range) = &layout.slots[0] else { panic!() };
            assert_eq!(rec[range.start], form);
            assert_eq!(range.start % 4, 0);
            assert_eq!(rec.len() % 4, 0);
            let (back, zipped) = row::decode_varchar(&rec[range.clone()]).unwrap();
            assert_eq!(back, s);
            assert_eq!(zipped, s == repeated, "LZ4 only when it saves more than 8 bytes");
            assert_eq!(decode_row(&r, &rec).unwrap(), v);
        }
    }

    #[test]
    fn encode_old_representation_rows() {
        // Representation 1 had (a INT, b VARCHAR); representation 2 dropped b and added c DATETIME.
        let a = att(0, "a", 0, dom(db_type::INTEGER, 10, 0, 0));
        let b = att(1, "b", 1, dom(db_type::STRING, 20, 0, 5));
        let c = att(2, "c", 1, dom(db_type::DATETIME, 23, 3, 0));
        let r1 = rep(1, vec![a.clone(), b]);
        let r2 = rep(2, vec![a, c]);
        let old = encode_row(&r1, &values_of(&r1, &["5", "\"old\""]), Some(6)).unwrap();
        let new = encode_row(&r2, &values_of(&r2, &["6", "\"2024-03-15 10:30:00.000\""]), Some(7)).unwrap();
        assert!(decode_row(&r2, &old).is_err(), "a row is decoded with its own representation");
        assert_eq!(json_of(&r1, &decode_row(&r1, &old).unwrap()), ["5", "\"old\""]);
        assert_eq!(json_of(&r2, &decode_row(&r2, &new).unwrap()), ["6", "\"2024-03-15 10:30:00.000\""]);
    }

    #[test]
    fn encode_collections_as_the_server_writes_them() {
        // The fixtures' SET(INT) {4, 6, 12}, byte for byte.
        let mut d = dom(db_type::SET, 0, 0, 0);
        d.set_domains = vec![dom(db_type::INTEGER, 10, 0, 0)];
        let v = value_from_json("[4,6,12]", &d).unwrap();
        let want = "000e00060000000300000020000000280000003000000038000000040007010000020100000000040002010000000006000201000000000c";
        let hex: String = encode_value(&d, &v).unwrap().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, want);
        // MULTISET(VARCHAR(10)) {'a','a','b7'}, byte for byte.
        let mut d = dom(db_type::MULTISET, 0, 0, 0);
        d.set_domains = vec![Domain { collation: 1, ..dom(db_type::STRING, 10, 0, 5) }];
        let v = value_from_json("[\"a\",\"a\",\"b7\"]", &d).unwrap();
        let want = concat!(
            "000e000700000003000000200000002c00000038000000440000000400080100000a05040000000101610000000a0504",
            "0000000101610000000a05040000000102623700"
        );
        let hex: String = encode_value(&d, &v).unwrap().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, want);
        // Without an element domain: inferred tags, nested collections.
        let d = dom(db_type::SEQUENCE, 0, 0, 0);
        let v = value_from_json("[1,\"x\",null,[2,3],5000000000]", &d).unwrap();
        let b = encode_value(&d, &v).unwrap();
        assert_eq!(value_json(&decode_value(&d, &b, 0), &d), "[1,\"x\",null,[2,3],5000000000]");
    }

    #[test]
    fn encode_json_binary_order_and_numbers() {
        let d = dom(db_type::JSON, 0, 0, 0);
        for (text, want) in [
            (r#" { "b" : 1 , "a" : [ ] , "c" : { } } "#, r#"{"b":1,"a":[],"c":{}}"#),
            (r#"[1.0,1e5,-0.5,"\u00e9\n",false]"#, r#"[1.0,100000.0,-0.5,"é\n",false]"#),
            (r#"[2147483647,2147483648,4294967296,-2147483649]"#, r#"[2147483647,2147483648,4294967296,-2147483649]"#),
            ("\"\"", "\"\""),
        ] {
            let v = value_from_json(text, &d).unwrap();
            assert_eq!(value_json(&v, &d), want, "{text}");
        }
        for bad in ["{", "[1,]", "{\"a\" 1}", "tru", "[1] x", "01x", "\"abc"] {
            assert!(value_from_json(bad, &d).is_err(), "{bad}");
        }
    }

    #[test]
    fn encode_text_forms_rejected() {
        let cases = [
            (dom(db_type::INTEGER, 10, 0, 0), "2147483648"),
            (dom(db_type::SHORT, 5, 0, 0), "\"1\""),
            (dom(db_type::DATE, 0, 0, 0), "\"2023-02-29\""),
            (dom(db_type::DATE, 0, 0, 0), "\"1582-10-10\""),
            (dom(db_type::TIME, 0, 0, 0), "\"24:00:00\""),
            (dom(db_type::TIMESTAMP, 0, 0, 0), "\"1969-12-31 23:59:59\""),
            (dom(db_type::TIMESTAMPLTZ, 0, 0, 0), "\"2020-01-01 00:00:00\""),
            (dom(db_type::NUMERIC, 10, 2, 0), "\"1.234\""),
            (dom(db_type::BIT, 8, 0, 1), "\"X'123'\""),
            (dom(db_type::CHAR, 3, 0, 3), "\"한\""),
            (Domain { enum_labels: labels(&["x"]), ..dom(db_type::ENUMERATION, 0, 0, 5) }, "\"y\""),
        ];
        for (d, text) in cases {
            assert!(value_from_json(text, &d).is_err(), "{text} as type {}", d.db_type);
        }
        // Values that do not fit their column.
        let r = rep(1, vec![att(0, "c", 0, dom(db_type::CHAR, 2, 0, 3))]);
        assert!(encode_row(&r, &[Value::String { bytes: b"abc".to_vec(), codeset: 3 }], None).is_err());
        assert!(encode_row(&r, &[Value::Int(1)], None).is_err());
        assert!(encode_row(&r, &[], None).is_err());
    }

    /// `dba.t` at representation 3 with every kind of column, an old representation 2 holding a
    /// dropped column (id 9) and an empty representation 0, subclasses and a default.
    fn sample_schema() -> ClassSchema {
        let oid = Oid { pageid: 233, slotid: 3, volid: 0 };
        let mut cur = wide_rep(3);
        cur.attributes[0].primary_key = true;
        cur.attributes[0].default_value = Some("7".into());
        cur.attributes[14].default_value = Some("\"green\"".into());
        cur.attributes[15].default_value = Some("\"12.5000\"".into());
        cur.attributes[19].default_value = Some("\"hello\"".into());
        cur.attributes[10].default_value = Some("\"2020-01-01 00:00:00.000\"".into());
        cur.attributes[16].default_value = Some("\"ab   \"".into());
        // Representation 2: id, e, a dropped VARCHAR, the SET; defaults as the current attributes'.
        let keep = |i: usize| cur.attributes[i].clone();
        let mut dropped = att(99, "attr#99", -1, dom(db_type::STRING, 20, 0, 5));
        dropped.domain.collation = 1;
        let old = rep(2, vec![keep(0), keep(14), dropped, keep(24)]);
        let empty = rep(0, Vec::new());
        let mut representations = HashMap::new();
        for r in [cur, old, empty] {
            representations.insert(r.repid, r);
        }
        ClassSchema {
            oid,
            name: "dba.t_types".into(),
            current_repid: 3,
            representations,
            subclasses: vec![Oid { pageid: 5, slotid: 1, volid: 0 }],
            flags: 8,
            class_type: 0,
        }
    }

    #[test]
    fn encode_class_record_round_trips() {
        let s = sample_schema();
        let rec = encode_class_record(&s);
        assert!(crate::format::class_record::looks_like_class_record(&rec));
        let back = parse_class_record(s.oid, &rec).unwrap();
        assert_eq!(back, s);
        // A fresh class: representation 1, the empty representation 0, long names and labels,
        // a long table comment-free record with a view's flags.
        let long_label = "L".repeat(300);
        let en =
            Domain { enum_labels: vec!["a".into(), long_label, String::new()], ..dom(db_type::ENUMERATION, 0, 0, 5) };
        let cur = rep(1, vec![att(0, "e", 0, en), att(1, &"n".repeat(260), 1, dom(db_type::JSON, 0, 0, 0))]);
        let mut representations = HashMap::new();
        representations.insert(1, cur);
        representations.insert(0, rep(0, Vec::new()));
        let s = ClassSchema {
            oid: Oid { pageid: 240, slotid: 9, volid: 0 },
            name: "dba.v".into(),
            current_repid: 1,
            representations,
            subclasses: Vec::new(),
            flags: 0,
            class_type: 1,
        };
        assert_eq!(parse_class_record(s.oid, &encode_class_record(&s)).unwrap(), s);
    }

    #[test]
    fn encode_class_record_then_rows_of_every_representation() {
        let s = sample_schema();
        let back = parse_class_record(s.oid, &encode_class_record(&s)).unwrap();
        let cur = &back.representations[&3];
        let values = values_of(cur, &wide_values());
        let rec = encode_row(cur, &values, Some(11)).unwrap();
        let repid = record_repid(&rec).unwrap();
        assert_eq!(decode_row(&back.representations[&repid], &rec).unwrap(), values);
        let old = &back.representations[&2];
        let texts = ["1", "\"red\"", "\"gone\"", "[1,2]"];
        let values = values_of(old, &texts);
        let rec = encode_row(old, &values, Some(12)).unwrap();
        let repid = record_repid(&rec).unwrap();
        assert_eq!(repid, 2);
        assert_eq!(json_of(old, &decode_row(&back.representations[&repid], &rec).unwrap()), texts);
    }

    #[test]
    fn encode_packed_defaults() {
        let rep = wide_rep(1);
        for (a, text) in rep.attributes.iter().zip(wide_values()) {
            let v = value_from_json(text, &a.domain).unwrap();
            let packed = encode_packed_value(&v, &a.domain).unwrap();
            assert_eq!(packed.len() % 4, 0);
            assert_eq!(row::packed_value_json(&packed, &a.domain).as_deref(), Some(text), "{}", a.name);
        }
        assert_eq!(
            row::packed_value_json(
                &encode_packed_value(&Value::Null, &rep.attributes[0].domain).unwrap(),
                &rep.attributes[0].domain
            ),
            None
        );
    }

    #[test]
    fn encode_storage_order_and_type_names() {
        // CREATE TABLE t (id INT, name VARCHAR(20), price NUMERIC(10,2), created DATETIME, note STRING,
        // s SMALLINT): candidates in reverse definition order.
        let defs = [
            dom(db_type::INTEGER, 10, 0, 0),
            dom(db_type::STRING, 20, 0, 5),
            dom(db_type::NUMERIC, 10, 2, 0),
            dom(db_type::DATETIME, 23, 3, 0),
            dom(db_type::STRING, -1, 0, 5),
            dom(db_type::SHORT, 5, 0, 0),
        ];
        let reversed: Vec<Domain> = defs.iter().rev().cloned().collect();
        let order: Vec<usize> = storage_order(&reversed).into_iter().map(|i| defs.len() - 1 - i).collect();
        assert_eq!(order, [0, 3, 5, 2, 4, 1]);
        assert_eq!(db_type_from_name("varchar"), Some(db_type::STRING));
        assert_eq!(db_type_from_name("Timestamp LTZ"), Some(db_type::TIMESTAMPLTZ));
        assert_eq!(db_type_from_name("list"), Some(db_type::SEQUENCE));
        assert_eq!(db_type_from_name("blobby"), None);
    }
}
