//! Class records (the engine's own schema objects, logged when a table is created, altered,
//! renamed or dropped) parsed into [`ClassSchema`]s.

use std::collections::HashMap;

use crate::format::schema::{db_type, Attribute, ClassSchema, Domain, Representation};
use crate::format::supplemental::Oid;

// ---------------------------------------------------------------------------------------------
// Class record parsing (format: `cubrid-class-records.md` §2–3; strings: log format §8.4).
//
// Every length and offset read from the record is checked against the bytes actually present
// before it is used; nothing is allocated from a length field that was not checked first. Bad
// input yields `Err`, never a panic.
// ---------------------------------------------------------------------------------------------

type ParseResult<T> = std::result::Result<T, String>;

/// Word 0 of a class record: no bound bits, 4-byte offsets, no MVCC flags.
const CLASS_WORD0_FLAGS: u32 = 0x6000_0000;
const CLASS_HEADER_SIZE: usize = 8;
/// `ORC_CLASS_VAR_ATT_COUNT`.
const CLASS_VAR_COUNT: usize = 17;
const CLASS_FIXED_SIZE: usize = 88;

// Variable attributes of a class record (`ORC_*_INDEX`).
const ORC_NAME_INDEX: usize = 0;
const ORC_REPRESENTATIONS_INDEX: usize = 2;
const ORC_SUBCLASSES_INDEX: usize = 3;
const ORC_ATTRIBUTES_INDEX: usize = 5;

// Fixed part of a class record.
const ORC_FIXED_COUNT_OFFSET: usize = 28;
const ORC_VARIABLE_COUNT_OFFSET: usize = 32;
const ORC_CLASS_FLAGS: usize = 64;
const ORC_CLASS_TYPE: usize = 68;

// Attribute element: 7 variable fields, 40 fixed bytes.
const ATT_VAR_COUNT: usize = 7;
const ATT_FIXED_SIZE: usize = 40;
const ATT_ID_OFFSET: usize = 0;
const ATT_TYPE_OFFSET: usize = 4;
const ATT_DEF_ORDER_OFFSET: usize = 12;
const ATT_FLAG_OFFSET: usize = 24;
const ATT_NAME_INDEX: usize = 0;
const ATT_ORIGINAL_VALUE_INDEX: usize = 2;
const ATT_DOMAIN_INDEX: usize = 3;
/// `SM_ATTFLAG_PRIMARY_KEY`.
pub const ATTFLAG_PRIMARY_KEY: i32 = 128;

// Domain element: 3 variable fields, 28 fixed bytes.
const DOMAIN_VAR_COUNT: usize = 3;
const DOMAIN_FIXED_SIZE: usize = 28;
const DOMAIN_SETDOMAIN_INDEX: usize = 0;
const DOMAIN_ENUMERATION_INDEX: usize = 1;

// Old representation element: 2 variable fields, 16 fixed bytes; rep-attribute: 1 and 8.
const REP_VAR_COUNT: usize = 2;
const REP_FIXED_SIZE: usize = 16;
const REP_ATTRIBUTES_INDEX: usize = 0;
const REPATT_VAR_COUNT: usize = 1;
const REPATT_FIXED_SIZE: usize = 8;

// Collection header bits (`OR_SET_*`).
const SET_TYPE_MASK: u32 = 0xFF;
const SET_BOUND_BIT: u32 = 0x1_0000;
const SET_VARIABLE_BIT: u32 = 0x2_0000;
const SET_DOMAIN_BIT: u32 = 0x4_0000;

/// Nesting limit for collection-of-collection domains (each level needs its own bytes anyway;
/// the limit keeps hostile input from exhausting the stack).
const MAX_DOMAIN_DEPTH: usize = 16;
/// An LZ4 block cannot expand its input by more than this factor.
const LZ4_MAX_RATIO: usize = 255;
/// `OR_MINIMUM_STRING_LENGTH_FOR_COMPRESSION`: shorter strings use the 1-byte length form.
const STRING_LONG_FORM_MARK: u8 = 0xFF;

fn align4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

/// A BE int32 at `at`, or an error naming `what`.
fn be_i32(b: &[u8], at: usize, what: &str) -> ParseResult<i32> {
    at.checked_add(4)
        .and_then(|end| b.get(at..end))
        .map(|s| crate::format::le::be_i32_at(s, 0))
        .ok_or_else(|| format!("{what}: 4 bytes at offset {at} lie outside its {} bytes", b.len()))
}

/// A count or size field: a BE int32 that must not be negative.
fn be_count(b: &[u8], at: usize, what: &str) -> ParseResult<usize> {
    let v = be_i32(b, at, what)?;
    usize::try_from(v).map_err(|_| format!("{what}: negative count/length {v} at offset {at}"))
}

/// A packed (BE) OID; the NULL OID (pageid -1) is `None`.
fn packed_oid(b: &[u8], at: usize, what: &str) -> ParseResult<Option<Oid>> {
    let s = at
        .checked_add(8)
        .and_then(|end| b.get(at..end))
        .ok_or_else(|| format!("{what}: OID at offset {at} lies outside its {} bytes", b.len()))?;
    let oid = Oid::from_packed(s);
    Ok((!oid.is_null()).then_some(oid))
}

/// Bytes of a stored string as text: UTF-8 when valid, else byte-for-byte ISO-8859-1 (so that
/// nothing is lost for names or labels stored in another codeset).
fn bytes_to_text(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => e.into_bytes().iter().map(|&c| c as char).collect(),
    }
}

/// Decodes one VARCHAR-encoded string at the start of `b` (short form, long uncompressed form or
/// long LZ4 form). Returns the string's bytes and the encoded size including the terminating NUL
/// and the padding to 4 (capped at `b.len()`, as the last element may omit its padding).
fn varchar_at(b: &[u8]) -> ParseResult<(Vec<u8>, usize)> {
    let first = *b.first().ok_or("string: no bytes")?;
    if first != STRING_LONG_FORM_MARK {
        let len = first as usize;
        let text = b
            .get(1..1 + len)
            .ok_or_else(|| format!("string: length {len} exceeds the {} bytes available", b.len().saturating_sub(1)))?;
        return Ok((text.to_vec(), align4(len + 2).min(b.len())));
    }
    let compressed = be_count(b, 1, "long string compressed length")?;
    let length = be_count(b, 5, "long string length")?;
    if compressed == 0 {
        let text = 9usize.checked_add(length).and_then(|end| b.get(9..end)).ok_or_else(|| {
            format!("long string: length {length} exceeds the {} bytes available", b.len().saturating_sub(9))
        })?;
        return Ok((text.to_vec(), align4(9 + length + 1).min(b.len())));
    }
    let block = 9usize.checked_add(compressed).and_then(|end| b.get(9..end)).ok_or_else(|| {
        format!("LZ4 string: compressed length {compressed} exceeds the {} bytes available", b.len().saturating_sub(9))
    })?;
    if length > compressed.saturating_add(1).saturating_mul(LZ4_MAX_RATIO) {
        return Err(format!("LZ4 string: {compressed} compressed bytes cannot hold {length} bytes"));
    }
    let text = lz4_flex::block::decompress(block, length).map_err(|e| format!("LZ4 string does not decode: {e}"))?;
    if text.len() != length {
        return Err(format!("LZ4 string decoded to {} bytes, its header says {length}", text.len()));
    }
    Ok((text, align4(9 + compressed + 1).min(b.len())))
}

/// A string variable field: empty = NULL (returned as `None`); otherwise exactly one string.
fn string_field(b: &[u8]) -> ParseResult<Option<String>> {
    if b.is_empty() {
        return Ok(None);
    }
    varchar_at(b).map(|(bytes, _)| Some(bytes_to_text(bytes)))
}

/// An object without header: `[n_var + 1 BE offsets][fixed part][variable fields]`, offsets
/// relative to the object's first byte (class records: relative to the end of the header).
struct Obj<'a> {
    b: &'a [u8],
    offsets: Vec<usize>,
    fixed_at: usize,
    what: &'static str,
}

impl<'a> Obj<'a> {
    fn parse(b: &'a [u8], n_var: usize, fixed_size: usize, what: &'static str) -> ParseResult<Obj<'a>> {
        let fixed_at = 4 * (n_var + 1);
        let first_var = fixed_at + fixed_size;
        if b.len() < first_var {
            return Err(format!(
                "{what}: {} bytes, shorter than its {fixed_at}-byte offset table and {fixed_size}-byte fixed part",
                b.len()
            ));
        }
        let mut offsets = Vec::with_capacity(n_var + 1);
        for i in 0..=n_var {
            let v = be_i32(b, 4 * i, what)?;
            let v = usize::try_from(v).map_err(|_| format!("{what}: negative variable offset {v} (entry {i})"))?;
            if i == 0 && v != first_var {
                return Err(format!(
                    "{what}: first variable field at {v}, expected {first_var} ({n_var} variable fields, \
                     {fixed_size} fixed bytes)"
                ));
            }
            if let Some(&prev) = offsets.last() {
                if v < prev {
                    return Err(format!("{what}: variable offset table decreases at entry {i} ({prev} > {v})"));
                }
            }
            if v > b.len() {
                return Err(format!("{what}: variable offset {v} (entry {i}) beyond its {} bytes", b.len()));
            }
            offsets.push(v);
        }
        Ok(Obj { b, offsets, fixed_at, what })
    }

    /// The BE int32 at `off` in the fixed part.
    fn int(&self, off: usize) -> ParseResult<i32> {
        be_i32(self.b, self.fixed_at + off, self.what)
    }

    fn oid(&self, off: usize) -> ParseResult<Option<Oid>> {
        packed_oid(self.b, self.fixed_at + off, self.what)
    }

    /// Variable field `i` (empty when NULL).
    fn var(&self, i: usize) -> &'a [u8] {
        &self.b[self.offsets[i]..self.offsets[i + 1]]
    }
}

/// The elements of a substructure set (`put_substructure_set`): header word, count, `count + 1`
/// offsets relative to the set start, common domain and sub-header, then the elements. An empty
/// field is an absent (NULL) set.
fn substructure_set<'a>(b: &'a [u8], what: &str) -> ParseResult<Vec<&'a [u8]>> {
    if b.is_empty() {
        return Ok(Vec::new());
    }
    let word = be_i32(b, 0, what)? as u32;
    if word & SET_TYPE_MASK != db_type::SEQUENCE as u32 || word & SET_VARIABLE_BIT == 0 {
        return Err(format!("{what}: header word {word:#010x} is not a substructure set"));
    }
    let count = be_count(b, 4, what)?;
    if count == 0 {
        return Ok(Vec::new());
    }
    // The offset table must fit before anything is allocated from `count`.
    if count >= b.len() / 4 || 8 + 4 * (count + 1) > b.len() {
        return Err(format!("{what}: {count} elements cannot fit in {} bytes", b.len()));
    }
    let table_end = 8 + 4 * (count + 1);
    let mut out = Vec::with_capacity(count);
    let mut start = be_count(b, 8, what)?;
    if start < table_end || start > b.len() {
        return Err(format!("{what}: first element at {start}, outside {table_end}..{}", b.len()));
    }
    for i in 0..count {
        let end = be_count(b, 8 + 4 * (i + 1), what)?;
        if end < start || end > b.len() {
            return Err(format!("{what}: element {i} spans {start}..{end}, outside the set's {} bytes", b.len()));
        }
        out.push(&b[start..end]);
        start = end;
    }
    Ok(out)
}

/// Header of a plain collection: `(word, count, offset of the first element, offset table)`.
/// The offset table (when the variable bit is set) has absolute offsets relative to `b`.
type SetLayout = (u32, usize, usize, Option<Vec<usize>>);

fn collection_layout(b: &[u8], min_element: usize, what: &str) -> ParseResult<SetLayout> {
    let word = be_i32(b, 0, what)? as u32;
    let count = be_count(b, 4, what)?;
    if count > (b.len().saturating_sub(8)) / min_element.max(1) {
        return Err(format!("{what}: {count} elements cannot fit in {} bytes", b.len()));
    }
    let mut pos = 8usize;
    let mut table = None;
    if count > 0 && word & SET_VARIABLE_BIT != 0 {
        let end = pos + 4 * (count + 1);
        if end > b.len() {
            return Err(format!("{what}: offset table of {count} elements beyond {} bytes", b.len()));
        }
        let mut t = Vec::with_capacity(count + 1);
        for i in 0..=count {
            let v = be_count(b, pos + 4 * i, what)?;
            if v > b.len() || t.last().is_some_and(|&p| v < p) {
                return Err(format!("{what}: bad element offset {v} (entry {i})"));
            }
            t.push(v);
        }
        pos = end;
        table = Some(t);
    } else if count > 0 && word & SET_BOUND_BIT != 0 {
        pos += 4 * count.div_ceil(32);
    }
    if word & SET_DOMAIN_BIT != 0 {
        let size = be_count(b, pos, what)?;
        pos = pos
            .checked_add(4)
            .and_then(|p| p.checked_add(size))
            .filter(|&p| p <= b.len())
            .ok_or_else(|| format!("{what}: domain of {size} bytes beyond the set's {} bytes", b.len()))?;
    }
    if pos > b.len() {
        return Err(format!("{what}: header of {pos} bytes beyond the set's {} bytes", b.len()));
    }
    Ok((word, count, pos, table))
}

/// An object set (`put_object_set`): collection header, then packed 8-byte OIDs.
fn object_set(b: &[u8], what: &str) -> ParseResult<Vec<Oid>> {
    if b.is_empty() {
        return Ok(Vec::new());
    }
    let (_, count, pos, table) = collection_layout(b, 8, what)?;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let at = match &table {
            Some(t) => t[i],
            None => pos + 8 * i,
        };
        // A NULL OID in the list is kept out: it names no class.
        if let Some(oid) = packed_oid(b, at, what)? {
            out.push(oid);
        }
    }
    Ok(out)
}

/// ENUM labels (`ORC_DOMAIN_ENUMERATION_INDEX`): collection header, count, VARCHAR strings.
fn enumeration(b: &[u8]) -> ParseResult<Vec<String>> {
    const WHAT: &str = "enumeration";
    if b.is_empty() {
        return Ok(Vec::new());
    }
    // The smallest encoded label (empty string) takes 2 bytes (length byte and NUL).
    let (_, count, mut pos, table) = collection_layout(b, 2, WHAT)?;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let (bytes, used) = match &table {
            Some(t) => varchar_at(&b[t[i]..t[i + 1]])?,
            None => varchar_at(b.get(pos..).unwrap_or(&[]))?,
        };
        pos += used;
        out.push(bytes_to_text(bytes));
    }
    Ok(out)
}

fn domain_set(b: &[u8], depth: usize) -> ParseResult<Vec<Domain>> {
    if depth > MAX_DOMAIN_DEPTH {
        return Err(format!("domain: nested deeper than {MAX_DOMAIN_DEPTH} levels"));
    }
    substructure_set(b, "domain set")?.into_iter().map(|e| domain_element(e, depth)).collect()
}

fn domain_element(e: &[u8], depth: usize) -> ParseResult<Domain> {
    let o = Obj::parse(e, DOMAIN_VAR_COUNT, DOMAIN_FIXED_SIZE, "domain")?;
    Ok(Domain {
        db_type: o.int(0)?,
        precision: o.int(4)?,
        scale: o.int(8)?,
        codeset: o.int(12)?,
        collation: o.int(16)?,
        class_oid: o.oid(20)?,
        enum_labels: enumeration(o.var(DOMAIN_ENUMERATION_INDEX))?,
        set_domains: domain_set(o.var(DOMAIN_SETDOMAIN_INDEX), depth + 1)?,
    })
}

/// The attribute's domain: the first element of its domain set, or a bare `db_type` if none.
fn first_domain(b: &[u8], db_type: i32) -> ParseResult<Domain> {
    Ok(domain_set(b, 0)?.into_iter().next().unwrap_or(Domain { db_type, ..Domain::default() }))
}

fn attribute_element(e: &[u8]) -> ParseResult<Attribute> {
    let o = Obj::parse(e, ATT_VAR_COUNT, ATT_FIXED_SIZE, "attribute")?;
    let id = o.int(ATT_ID_OFFSET)?;
    let flags = o.int(ATT_FLAG_OFFSET)?;
    let domain = first_domain(o.var(ATT_DOMAIN_INDEX), o.int(ATT_TYPE_OFFSET)?)?;
    // A default that does not decode is left out rather than failing the whole class.
    let default_value = crate::format::row::packed_value_json(o.var(ATT_ORIGINAL_VALUE_INDEX), &domain);
    Ok(Attribute {
        id,
        name: string_field(o.var(ATT_NAME_INDEX))?.unwrap_or_else(|| format!("attr#{id}")),
        def_order: o.int(ATT_DEF_ORDER_OFFSET)?,
        domain,
        primary_key: flags & ATTFLAG_PRIMARY_KEY != 0,
        default_value,
    })
}

/// Checks that the attribute list agrees with the stored fixed/variable counts.
fn counts(n_fixed: i32, n_var: i32, n_attributes: usize, what: &str) -> ParseResult<(usize, usize)> {
    match (usize::try_from(n_fixed), usize::try_from(n_var)) {
        (Ok(f), Ok(v)) if f.checked_add(v) == Some(n_attributes) => Ok((f, v)),
        _ => Err(format!("{what}: n_fixed {n_fixed} + n_var {n_var} does not match its {n_attributes} attributes")),
    }
}

/// An old representation element; names, definition order, the primary-key flag and the default
/// come from the current attributes with the same id.
fn old_representation(e: &[u8], current: &[Attribute]) -> ParseResult<Representation> {
    let o = Obj::parse(e, REP_VAR_COUNT, REP_FIXED_SIZE, "representation")?;
    let repid = o.int(0)?;
    let mut attributes = Vec::new();
    for a in substructure_set(o.var(REP_ATTRIBUTES_INDEX), "representation attributes")? {
        let ra = Obj::parse(a, REPATT_VAR_COUNT, REPATT_FIXED_SIZE, "representation attribute")?;
        let id = ra.int(0)?;
        let domain = first_domain(ra.var(0), ra.int(4)?)?;
        let attribute = match current.iter().find(|c| c.id == id) {
            Some(c) => Attribute {
                id,
                name: c.name.clone(),
                def_order: c.def_order,
                domain,
                primary_key: c.primary_key,
                default_value: c.default_value.clone(),
            },
            None => Attribute {
                id,
                name: format!("attr#{id}"),
                def_order: -1,
                domain,
                primary_key: false,
                default_value: None,
            },
        };
        attributes.push(attribute);
    }
    let what = format!("representation {repid}");
    let (n_fixed, n_var) = counts(o.int(4)?, o.int(8)?, attributes.len(), &what)?;
    Ok(Representation::new(repid, attributes, n_fixed, n_var))
}

/// Word 0 and the variable part of a class record, or why it is not one.
fn class_body(record: &[u8]) -> ParseResult<(u32, Obj<'_>)> {
    let word0 = be_i32(record, 0, "class record")? as u32;
    if word0 & 0xFF00_0000 != CLASS_WORD0_FLAGS {
        return Err(format!("class record: word 0 {word0:#010x} lacks the 4-byte-offset/no-MVCC flags"));
    }
    let body = record.get(CLASS_HEADER_SIZE..).ok_or("class record: shorter than its header")?;
    Ok((word0, Obj::parse(body, CLASS_VAR_COUNT, CLASS_FIXED_SIZE, "class record")?))
}

/// A plausible class name: non-empty, at most 255 bytes, no control characters or blanks.
fn plausible_name(name: &[u8]) -> bool {
    !name.is_empty() && name.len() <= 255 && name.iter().all(|&c| c > 0x20 && c != 0x7F)
}

/// Cheap test: is this heap record (the bytes after the 2-byte recdes type) a class record?
/// (word0 flags 0 and 4-byte offsets, 18-entry BE var table starting at 160 and non-decreasing
/// within the record, name string plausible)
pub fn looks_like_class_record(record: &[u8]) -> bool {
    let Ok((_, body)) = class_body(record) else {
        return false;
    };
    let name = body.var(ORC_NAME_INDEX);
    // Short form only: a class name is far below 255 bytes.
    match name.first() {
        Some(&len) if len != STRING_LONG_FORM_MARK => name.get(1..1 + len as usize).is_some_and(plausible_name),
        _ => false,
    }
}

/// Parses a class record (REC_HOME bytes, header included) of the class whose OID is `oid`.
pub fn parse_class_record(oid: Oid, record: &[u8]) -> Result<ClassSchema, String> {
    let (word0, body) = class_body(record)?;
    let name = string_field(body.var(ORC_NAME_INDEX))?.ok_or("class record: no name")?;
    let current_repid = (word0 & 0x00FF_FFFF) as i32;

    let attributes = substructure_set(body.var(ORC_ATTRIBUTES_INDEX), "attributes")?
        .into_iter()
        .map(attribute_element)
        .collect::<ParseResult<Vec<_>>>()?;
    let (n_fixed, n_var) = counts(
        body.int(ORC_FIXED_COUNT_OFFSET)?,
        body.int(ORC_VARIABLE_COUNT_OFFSET)?,
        attributes.len(),
        "current representation",
    )?;
    let mut representations = HashMap::new();
    for e in substructure_set(body.var(ORC_REPRESENTATIONS_INDEX), "representations")? {
        let rep = old_representation(e, &attributes)?;
        // The list is newest first; the current representation is never replaced.
        if rep.repid != current_repid {
            representations.entry(rep.repid).or_insert(rep);
        }
    }
    representations.insert(current_repid, Representation::new(current_repid, attributes, n_fixed, n_var));

    Ok(ClassSchema {
        oid,
        name,
        current_repid,
        representations,
        subclasses: object_set(body.var(ORC_SUBCLASSES_INDEX), "subclasses")?,
        flags: body.int(ORC_CLASS_FLAGS)?,
        class_type: body.int(ORC_CLASS_TYPE)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn be(v: i32) -> [u8; 4] {
        v.to_be_bytes()
    }

    fn pad4(b: &mut Vec<u8>) {
        while b.len() & 3 != 0 {
            b.push(0);
        }
    }

    /// VARCHAR encoding: short form below 255 bytes, else long uncompressed form.
    fn enc_string(s: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        if s.len() < 255 {
            b.push(s.len() as u8);
        } else {
            b.push(0xFF);
            b.extend(be(0));
            b.extend(be(s.len() as i32));
        }
        b.extend(s);
        b.push(0);
        pad4(&mut b);
        b
    }

    /// Long form with an LZ4 block.
    fn enc_lz4(s: &[u8]) -> Vec<u8> {
        let block = lz4_flex::block::compress(s);
        let mut b = vec![0xFF];
        b.extend(be(block.len() as i32));
        b.extend(be(s.len() as i32));
        b.extend(&block);
        b.push(0);
        pad4(&mut b);
        b
    }

    fn ints(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| be(*x)).collect()
    }

    fn packed(oid: Oid) -> Vec<u8> {
        let mut b = oid.pageid.to_be_bytes().to_vec();
        b.extend(oid.slotid.to_be_bytes());
        b.extend(oid.volid.to_be_bytes());
        b
    }

    const NULL_OID: Oid = Oid { pageid: -1, slotid: 0, volid: 0 };

    /// `[offset table][fixed][variable fields]`, offsets relative to the object start.
    fn obj(fixed: &[u8], vars: &[Vec<u8>]) -> Vec<u8> {
        let mut off = 4 * (vars.len() + 1) + fixed.len();
        let mut b = Vec::new();
        for v in vars {
            b.extend(be(off as i32));
            off += v.len();
        }
        b.extend(be(off as i32));
        b.extend(fixed);
        for v in vars {
            b.extend(v);
        }
        b
    }

    fn sub_set(elems: &[Vec<u8>]) -> Vec<u8> {
        let mut b = 0x0016_0008u32.to_be_bytes().to_vec();
        b.extend(be(elems.len() as i32));
        if elems.is_empty() {
            b.extend(ints(&[4, 15]));
            return b;
        }
        let mut off = 8 + 4 * (elems.len() + 1) + 8 + 16;
        for e in elems {
            b.extend(be(off as i32));
            off += e.len();
        }
        b.extend(be(off as i32));
        b.extend(ints(&[4, 15]));
        b.extend(packed(Oid { pageid: 7, slotid: 0, volid: 256 }));
        b.extend(ints(&[0, 0]));
        for e in elems {
            b.extend(e);
        }
        b
    }

    fn object_set_bytes(oids: &[Oid]) -> Vec<u8> {
        let mut b = 0x0004_0008u32.to_be_bytes().to_vec();
        b.extend(be(oids.len() as i32));
        b.extend(ints(&[4, 0x0001_0100]));
        for o in oids {
            b.extend(packed(*o));
        }
        b
    }

    fn enumeration_bytes(labels: &[&[u8]]) -> Vec<u8> {
        let mut b = ints(&[8, labels.len() as i32]);
        for l in labels {
            b.extend(enc_string(l));
        }
        b
    }

    #[allow(clippy::too_many_arguments)]
    fn domain_bytes(
        t: i32,
        prec: i32,
        scale: i32,
        cs: i32,
        coll: i32,
        class: Oid,
        set: &[Vec<u8>],
        labels: &[&[u8]],
    ) -> Vec<u8> {
        let mut fixed = ints(&[t, prec, scale, cs, coll]);
        fixed.extend(packed(class));
        let set = if set.is_empty() { Vec::new() } else { sub_set(set) };
        let labels = if labels.is_empty() { Vec::new() } else { enumeration_bytes(labels) };
        obj(&fixed, &[set, labels, Vec::new()])
    }

    fn simple_domain(t: i32, prec: i32) -> Vec<u8> {
        domain_bytes(t, prec, 0, 0, 0, NULL_OID, &[], &[])
    }

    fn attribute_bytes(id: i32, t: i32, def_order: i32, flags: i32, name: &str, domain: Vec<u8>) -> Vec<u8> {
        // No default: the NULL packed value the server writes (built-in NULL domain, null flag).
        let null = 0x0030_0140u32.to_be_bytes().to_vec();
        attribute_with_defaults(id, t, def_order, flags, name, domain, null.clone(), null)
    }

    /// An attribute element with its current and original defaults (packed values).
    #[allow(clippy::too_many_arguments)]
    fn attribute_with_defaults(
        id: i32,
        t: i32,
        def_order: i32,
        flags: i32,
        name: &str,
        domain: Vec<u8>,
        current: Vec<u8>,
        original: Vec<u8>,
    ) -> Vec<u8> {
        let mut fixed = ints(&[id, t, 0, def_order]);
        fixed.extend(packed(Oid { pageid: 100, slotid: 1, volid: 0 }));
        fixed.extend(ints(&[flags, -1, -1, 0]));
        assert_eq!(fixed.len(), ATT_FIXED_SIZE);
        let mut vars = vec![enc_string(name.as_bytes()), current, original, sub_set(&[domain])];
        vars.resize(ATT_VAR_COUNT, Vec::new());
        obj(&fixed, &vars)
    }

    fn rep_bytes(repid: i32, n_fixed: i32, n_var: i32, atts: &[(i32, i32, Vec<u8>)]) -> Vec<u8> {
        let elems: Vec<Vec<u8>> =
            atts.iter().map(|(id, t, d)| obj(&ints(&[*id, *t]), &[sub_set(std::slice::from_ref(d))])).collect();
        obj(&ints(&[repid, n_fixed, n_var, 0]), &[sub_set(&elems), Vec::new()])
    }

    fn class_bytes(
        repid: i32,
        name: &str,
        n_fixed: i32,
        n_var: i32,
        atts: &[Vec<u8>],
        reps: &[Vec<u8>],
        subs: &[Oid],
    ) -> Vec<u8> {
        let mut fixed = vec![0u8; CLASS_FIXED_SIZE];
        fixed[28..32].copy_from_slice(&be(n_fixed));
        fixed[32..36].copy_from_slice(&be(n_var));
        fixed[64..68].copy_from_slice(&be(8));
        fixed[68..72].copy_from_slice(&be(0));
        let mut vars = vec![Vec::new(); CLASS_VAR_COUNT];
        vars[ORC_NAME_INDEX] = enc_string(name.as_bytes());
        vars[ORC_REPRESENTATIONS_INDEX] = if reps.is_empty() { Vec::new() } else { sub_set(reps) };
        vars[ORC_SUBCLASSES_INDEX] = if subs.is_empty() { Vec::new() } else { object_set_bytes(subs) };
        vars[ORC_ATTRIBUTES_INDEX] = sub_set(atts);
        vars[15] = enc_string(b"a comment");
        let mut b = ints(&[0x6000_0000 | repid, 42]);
        b.extend(obj(&fixed, &vars));
        b
    }

    /// `dba.t (id INT PRIMARY KEY, e ENUM('red','green'), s SET(VARCHAR(10)), o t2)` at repid 3, with
    /// an old representation 2 that still had a dropped column (id 9) and representation 0 empty.
    /// `id` has original default 7 (current default 8), `e` original default 'green' (no current
    /// default), `o` no defaults at all (empty fields).
    fn sample_class() -> Vec<u8> {
        let o = Oid { pageid: 233, slotid: 4, volid: 0 };
        let set_dom =
            domain_bytes(db_type::SET, 0, 0, 0, 0, NULL_OID, &[domain_bytes(4, 10, 0, 5, 1, NULL_OID, &[], &[])], &[]);
        let atts = vec![
            attribute_with_defaults(
                3,
                db_type::INTEGER,
                0,
                ATTFLAG_PRIMARY_KEY | 4,
                "id",
                simple_domain(1, 10),
                ints(&[0x0002_0100, 8]),
                ints(&[0x0002_0100, 7]),
            ),
            attribute_with_defaults(
                0,
                db_type::OBJECT,
                3,
                0,
                "o",
                domain_bytes(5, 0, 0, 0, 0, o, &[], &[]),
                Vec::new(),
                Vec::new(),
            ),
            attribute_with_defaults(
                2,
                db_type::ENUMERATION,
                1,
                0,
                "e",
                domain_bytes(35, 0, 0, 5, 1, NULL_OID, &[], &[b"red", b"green"]),
                0x0030_0140u32.to_be_bytes().to_vec(),
                ints(&[0x0000_0223, 1, 0x0002_0000]),
            ),
            attribute_bytes(1, db_type::SET, 2, 0, "s", set_dom.clone()),
        ];
        let rep2 = rep_bytes(
            2,
            2,
            2,
            &[
                (2, 35, simple_domain(35, 0)),
                (3, 1, simple_domain(1, 10)),
                (9, 4, simple_domain(4, 20)),
                (1, 6, set_dom),
            ],
        );
        let rep0 = rep_bytes(0, 0, 0, &[]);
        class_bytes(3, "dba.t", 3, 1, &atts, &[rep2, rep0], &[Oid { pageid: 5, slotid: 1, volid: 0 }, o])
    }

    #[test]
    fn schema_string_forms() {
        let (s, n) = varchar_at(&enc_string(b"abc")).unwrap();
        assert_eq!((s.as_slice(), n), (&b"abc"[..], 8));
        let (s, n) = varchar_at(&enc_string(b"")).unwrap();
        assert_eq!((s.len(), n), (0, 4));
        let long = vec![b'q'; 300];
        let (s, n) = varchar_at(&enc_string(&long)).unwrap();
        assert_eq!((s, n), (long.clone(), 312));
        let varied: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 26) as u8 + b'a').collect();
        let enc = enc_lz4(&varied);
        let (s, n) = varchar_at(&enc).unwrap();
        assert_eq!((s, n), (varied, enc.len()));
        // The log format notes' example: 300 x 'x' as compressed by liblz4.
        let mut spec = vec![0xFF, 0, 0, 0, 12, 0, 0, 1, 0x2C];
        spec.extend([0x1F, 0x78, 0x01, 0x00, 0xFF, 0x14, 0x50, 0x78, 0x78, 0x78, 0x78, 0x78, 0, 0, 0]);
        let (s, n) = varchar_at(&spec).unwrap();
        assert_eq!((s, n), (vec![b'x'; 300], 24));
        assert_eq!(string_field(&[]).unwrap(), None);
        assert_eq!(string_field(&enc_string("한글".as_bytes())).unwrap().as_deref(), Some("한글"));
        // Not UTF-8: kept byte for byte as ISO-8859-1.
        assert_eq!(string_field(&enc_string(&[0xC7, 0xD1])).unwrap().as_deref(), Some("\u{C7}\u{D1}"));
    }

    #[test]
    fn schema_string_hostile() {
        // Short length beyond the bytes.
        assert!(varchar_at(&[10, b'a', b'b']).is_err());
        assert!(varchar_at(&[]).is_err());
        // Long form: truncated header, negative lengths, lengths beyond the bytes.
        assert!(varchar_at(&[0xFF, 0, 0]).is_err());
        let mut b = vec![0xFF];
        b.extend(be(0));
        b.extend(be(-5));
        assert!(varchar_at(&b).is_err());
        let mut b = vec![0xFF];
        b.extend(be(0));
        b.extend(be(1000));
        b.extend([b'a'; 20]);
        assert!(varchar_at(&b).is_err());
        let mut b = vec![0xFF];
        b.extend(be(-1));
        b.extend(be(10));
        assert!(varchar_at(&b).is_err());
        // LZ4: a huge declared length from a tiny block is refused before allocating it.
        let mut b = vec![0xFF];
        b.extend(be(4));
        b.extend(be(i32::MAX));
        b.extend([0x10, b'a', 0, 0, 0]);
        assert!(varchar_at(&b).unwrap_err().contains("cannot hold"));
        // LZ4: block beyond the bytes; corrupt block; block shorter than the declared length.
        let good = enc_lz4(&vec![b'z'; 600]);
        let mut b = good.clone();
        b[1..5].copy_from_slice(&be(10_000));
        assert!(varchar_at(&b).is_err());
        let mut b = good.clone();
        for x in &mut b[9..13] {
            *x = 0xFF;
        }
        assert!(varchar_at(&b).is_err());
        let mut b = good.clone();
        b[5..9].copy_from_slice(&be(700));
        assert!(varchar_at(&b).is_err());
        let mut b = good;
        b[5..9].copy_from_slice(&be(500));
        assert!(varchar_at(&b).is_err());
    }

    #[test]
    fn schema_substructure_set() {
        let a = obj(&ints(&[1, 2]), &[enc_string(b"x")]);
        let b = obj(&ints(&[3, 4]), &[Vec::new()]);
        let set = sub_set(&[a.clone(), b.clone()]);
        let elems = substructure_set(&set, "t").unwrap();
        assert_eq!(elems, vec![&a[..], &b[..]]);
        let o = Obj::parse(elems[0], 1, 8, "t").unwrap();
        assert_eq!((o.int(0).unwrap(), o.int(4).unwrap()), (1, 2));
        assert_eq!(string_field(o.var(0)).unwrap().as_deref(), Some("x"));
        let o = Obj::parse(elems[1], 1, 8, "t").unwrap();
        assert_eq!(o.var(0), &[] as &[u8]);
        assert!(o.int(8).is_err());
        // Empty and absent sets.
        assert!(substructure_set(&sub_set(&[]), "t").unwrap().is_empty());
        assert!(substructure_set(&[], "t").unwrap().is_empty());
        // Not a substructure set; absurd count; offsets outside or decreasing.
        let mut bad = set.clone();
        bad[3] = 6;
        assert!(substructure_set(&bad, "t").is_err());
        let mut bad = set.clone();
        bad[4..8].copy_from_slice(&be(i32::MAX));
        assert!(substructure_set(&bad, "t").is_err());
        let mut bad = set.clone();
        bad[4..8].copy_from_slice(&be(-1));
        assert!(substructure_set(&bad, "t").is_err());
        let mut bad = set.clone();
        bad[16..20].copy_from_slice(&be(set.len() as i32 + 4));
        assert!(substructure_set(&bad, "t").is_err());
        let mut bad = set.clone();
        bad[12..16].copy_from_slice(&be(0x30));
        bad[16..20].copy_from_slice(&be(0x2C));
        assert!(substructure_set(&bad, "t").is_err());
        let mut bad = set.clone();
        bad[8..12].copy_from_slice(&be(4));
        assert!(substructure_set(&bad, "t").is_err());
        assert!(substructure_set(&set[..7], "t").is_err());
        // Element offset tables: wrong first offset, decreasing, beyond the element.
        assert!(Obj::parse(&a, 2, 8, "t").is_err());
        assert!(Obj::parse(&a, 1, 4, "t").is_err());
        let mut bad = a.clone();
        bad[4..8].copy_from_slice(&be(a.len() as i32 + 1));
        assert!(Obj::parse(&bad, 1, 8, "t").is_err());
        let mut bad = a.clone();
        bad[4..8].copy_from_slice(&be(4));
        assert!(Obj::parse(&bad, 1, 8, "t").is_err());
        assert!(Obj::parse(&a[..10], 1, 8, "t").is_err());
    }

    #[test]
    fn schema_object_set_and_enumeration() {
        let oids = [Oid { pageid: 225, slotid: 2, volid: 0 }, Oid { pageid: 218, slotid: 1, volid: 0 }];
        assert_eq!(object_set(&object_set_bytes(&oids), "t").unwrap(), oids.to_vec());
        assert!(object_set(&[], "t").unwrap().is_empty());
        let b = object_set_bytes(&oids);
        assert!(object_set(&b[..b.len() - 1], "t").is_err());
        let mut bad = b.clone();
        bad[4..8].copy_from_slice(&be(1 << 28));
        assert!(object_set(&bad, "t").is_err());
        let mut bad = b;
        bad[8..12].copy_from_slice(&be(1000));
        assert!(object_set(&bad, "t").is_err());

        let long = vec![b'L'; 260];
        let e = enumeration_bytes(&[b"red", b"", &long, b"blue"]);
        let labels = enumeration(&e).unwrap();
        assert_eq!(labels, vec!["red".to_string(), String::new(), "L".repeat(260), "blue".to_string()]);
        assert!(enumeration(&e[..e.len() - 8]).is_err());
        let mut bad = e;
        bad[4..8].copy_from_slice(&be(i32::MAX));
        assert!(enumeration(&bad).is_err());
    }

    #[test]
    fn schema_class_record() {
        let rec = sample_class();
        assert!(looks_like_class_record(&rec));
        let oid = Oid { pageid: 233, slotid: 3, volid: 0 };
        let c = parse_class_record(oid, &rec).unwrap();
        assert_eq!((c.oid, c.name.as_str(), c.current_repid, c.flags, c.class_type), (oid, "dba.t", 3, 8, 0));
        assert_eq!(
            c.subclasses,
            vec![Oid { pageid: 5, slotid: 1, volid: 0 }, Oid { pageid: 233, slotid: 4, volid: 0 }]
        );
        assert_eq!(c.representations.len(), 3);
        let cur = &c.representations[&3];
        assert_eq!((cur.repid, cur.n_fixed, cur.n_var), (3, 3, 1));
        let names: Vec<&str> = cur.attributes.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["id", "o", "e", "s"]);
        let id = &cur.attributes[0];
        assert_eq!((id.id, id.def_order, id.primary_key, id.domain.db_type, id.domain.precision), (3, 0, true, 1, 10));
        assert_eq!(cur.attributes[1].domain.class_oid, Some(Oid { pageid: 233, slotid: 4, volid: 0 }));
        assert_eq!(cur.attributes[0].domain.class_oid, None);
        assert_eq!(cur.attributes[2].domain.enum_labels, ["red", "green"]);
        assert_eq!((cur.attributes[2].domain.codeset, cur.attributes[2].domain.collation), (5, 1));
        let s = &cur.attributes[3].domain;
        assert_eq!(s.db_type, db_type::SET);
        assert_eq!(s.set_domains.len(), 1);
        assert_eq!((s.set_domains[0].db_type, s.set_domains[0].precision, s.set_domains[0].codeset), (4, 10, 5));
        // Original defaults (not the current ones), in the CDC JSON forms; none for `o` and `s`.
        let defaults: Vec<Option<&str>> = cur.attributes.iter().map(|a| a.default_value.as_deref()).collect();
        assert_eq!(defaults, [Some("7"), None, Some("\"green\""), None]);

        let old = &c.representations[&2];
        assert_eq!((old.n_fixed, old.n_var), (2, 2));
        let got: Vec<(i32, &str, i32, bool)> =
            old.attributes.iter().map(|a| (a.id, a.name.as_str(), a.def_order, a.primary_key)).collect();
        assert_eq!(got, [(2, "e", 1, false), (3, "id", 0, true), (9, "attr#9", -1, false), (1, "s", 2, false)]);
        // Old representations take the defaults of the current attributes with the same id.
        let defaults: Vec<Option<&str>> = old.attributes.iter().map(|a| a.default_value.as_deref()).collect();
        assert_eq!(defaults, [Some("\"green\""), Some("7"), None, None]);
        assert_eq!(old.attributes[2].domain.precision, 20);
        assert_eq!(old.attributes[3].domain.set_domains.len(), 1);
        let empty = &c.representations[&0];
        assert!(empty.attributes.is_empty());
    }

    #[test]
    fn schema_bad_default_is_none() {
        // A damaged or truncated default leaves the default out; the class still parses.
        for original in [vec![0x00, 0x02], ints(&[0x0002_0100]), ints(&[0x0000_0504, 1, 0x0A41_4243]), ints(&[-1, -1])]
        {
            let att = attribute_with_defaults(
                0,
                db_type::STRING,
                0,
                0,
                "v",
                simple_domain(4, 20),
                Vec::new(),
                original.clone(),
            );
            let rec = class_bytes(1, "dba.u", 0, 1, &[att], &[], &[]);
            let c = parse_class_record(Oid::default(), &rec).unwrap();
            assert_eq!(c.representations[&1].attributes[0].default_value, None, "{original:02x?}");
        }
    }

    #[test]
    fn schema_looks_like_rejects() {
        let rec = sample_class();
        assert!(!looks_like_class_record(&rec[..100]));
        assert!(!looks_like_class_record(&[]));
        // MVCC flags / bound bit / 1-byte offsets in word 0.
        for w in [0x6100_0003u32, 0xE000_0003, 0x2000_0003] {
            let mut r = rec.clone();
            r[0..4].copy_from_slice(&w.to_be_bytes());
            assert!(!looks_like_class_record(&r));
            assert!(parse_class_record(Oid::default(), &r).is_err());
        }
        // Table not starting at 160, decreasing, or past the record.
        let mut r = rec.clone();
        r[8..12].copy_from_slice(&be(164));
        assert!(!looks_like_class_record(&r));
        let mut r = rec.clone();
        r[16..20].copy_from_slice(&be(150));
        assert!(!looks_like_class_record(&r));
        let mut r = rec.clone();
        r[76..80].copy_from_slice(&be(rec.len() as i32));
        assert!(!looks_like_class_record(&r));
        // Name with a control character, or empty.
        let mut r = rec.clone();
        r[8 + 160 + 1] = b'\n';
        assert!(!looks_like_class_record(&r));
        let mut r = rec;
        r[8 + 160] = 0;
        assert!(!looks_like_class_record(&r));
    }

    #[test]
    fn schema_class_record_hostile() {
        let rec = sample_class();
        // Every truncation is an error.
        for n in 0..rec.len() {
            assert!(parse_class_record(Oid::default(), &rec[..n]).is_err(), "prefix of {n} bytes parsed");
        }
        // Attribute counts that disagree with the fixed part.
        let mut r = rec.clone();
        r[8 + 72 + 28..8 + 72 + 32].copy_from_slice(&be(4));
        assert!(parse_class_record(Oid::default(), &r).unwrap_err().contains("n_fixed"));
        let mut r = rec.clone();
        r[8 + 72 + 32..8 + 72 + 36].copy_from_slice(&be(-1));
        assert!(parse_class_record(Oid::default(), &r).is_err());
        // Extreme values in every word, and pseudo-random byte damage: never a panic.
        for at in (0..rec.len() - 3).step_by(4) {
            for v in [0x7FFF_FFFFu32, 0xFFFF_FFFF, 0x8000_0000, 0x0000_00FF, 0xFF00_0000] {
                let mut r = rec.clone();
                r[at..at + 4].copy_from_slice(&v.to_be_bytes());
                let _ = looks_like_class_record(&r);
                let _ = parse_class_record(Oid::default(), &r);
            }
        }
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let mut r = rec.clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() % r.len() as u64) as usize;
                r[at] = next() as u8;
            }
            let _ = looks_like_class_record(&r);
            let _ = parse_class_record(Oid::default(), &r);
        }
    }

    #[test]
    fn schema_nesting_is_bounded() {
        let mut d = simple_domain(db_type::INTEGER, 10);
        for _ in 0..(MAX_DOMAIN_DEPTH + 4) {
            d = domain_bytes(db_type::SEQUENCE, 0, 0, 0, 0, NULL_OID, &[d], &[]);
        }
        let err = domain_set(&sub_set(&[d]), 0).unwrap_err();
        assert!(err.contains("nested"), "{err}");
        let mut d = simple_domain(db_type::INTEGER, 10);
        for _ in 0..3 {
            d = domain_bytes(db_type::SEQUENCE, 0, 0, 0, 0, NULL_OID, &[d], &[]);
        }
        let got = domain_set(&sub_set(&[d]), 0).unwrap();
        assert_eq!(got[0].set_domains[0].set_domains[0].set_domains[0].db_type, db_type::INTEGER);
    }
}
