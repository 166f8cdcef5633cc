//! Heap rows: the column values of a heap record, decoded with the representation the record
//! was written with, and their text forms as CUBRID's CDC API shows them.
//!
//! A record is `[header][variable-offset table][fixed area][bound bits][variable values]`
//! (spec §8.2–§8.4). Everything read from the record is checked against its length before use:
//! a damaged record gives `Err` (header, table or fixed area out of range) or, for one column,
//! [`Value::Unknown`] with the reason. No allocation is sized from a length read from the record
//! without first checking it against the bytes that are there (LZ4 output is bounded by the
//! largest expansion LZ4 can produce).

use std::fmt::Write as _;
use std::ops::Range;

use crate::format::heap;
use crate::format::schema::{db_type, Domain, Representation};
use crate::format::supplemental::Oid;

pub mod binary_json;
pub mod layout;
pub mod text;

use binary_json::*;
use layout::*;
use text::*;

/// One column value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    /// INTEGER, SMALLINT, BIGINT.
    Int(i64),
    Float(f32),
    Double(f64),
    /// NUMERIC: `unscaled / 10^scale`.
    Numeric {
        unscaled: i128,
        scale: i32,
    },
    /// MONETARY: `DB_CURRENCY` code and amount.
    Monetary {
        currency: i32,
        amount: f64,
    },
    /// CHAR, VARCHAR, NCHAR, VARNCHAR: the bytes as stored, in `codeset` (`INTL_CODESET`);
    /// CHAR values keep their blank padding (their first `precision` characters).
    String {
        bytes: Vec<u8>,
        codeset: i32,
    },
    /// BIT, VARBIT: `bits` bits, left-aligned in `bytes`.
    Bit {
        bytes: Vec<u8>,
        bits: u32,
    },
    /// DATE: Julian Day Number (0 = the zero date).
    Date(i32),
    /// TIME: seconds since midnight.
    Time(u32),
    /// TIMESTAMP: seconds since 1970-01-01 00:00:00 UTC (0 = the zero timestamp).
    Timestamp(u32),
    /// TIMESTAMPLTZ: as TIMESTAMP, shown in the session time zone.
    TimestampLtz(u32),
    /// TIMESTAMPTZ: UTC seconds and the `TZ_ID` it was written with.
    TimestampTz {
        secs: u32,
        tz: u32,
    },
    /// DATETIME: Julian Day Number and milliseconds since midnight (wall clock).
    Datetime {
        jdn: i32,
        ms: u32,
    },
    /// DATETIMELTZ: as DATETIME, holding UTC, shown in the session time zone.
    DatetimeLtz {
        jdn: i32,
        ms: u32,
    },
    /// DATETIMETZ: UTC date/time and the `TZ_ID`.
    DatetimeTz {
        jdn: i32,
        ms: u32,
        tz: u32,
    },
    /// ENUM: 1-based index into the domain's labels (0 = the special empty value).
    Enum {
        index: u16,
        label: Option<String>,
    },
    /// OBJECT / OID: a reference to a row.
    Oid(Oid),
    /// JSON, as JSON text (compact, members in stored order).
    Json(String),
    /// SET (6), MULTISET (7), SEQUENCE (8): elements in stored order.
    Collection {
        kind: i32,
        items: Vec<Value>,
    },
    /// BLOB / CLOB: the LOB's size and its external-storage locator (the data is not in the log).
    Lob {
        size: i64,
        locator: String,
    },
    /// A value that could not be decoded (damaged record or unsupported type), and why.
    Unknown {
        reason: String,
    },
}

impl Value {
    /// Why the value, or an element of it at any depth, could not be decoded (the first such
    /// reason). A collection with an undecodable element is not a whole value: it must say so
    /// as an undecodable column does, not pass the element off as NULL.
    pub fn undecoded(&self) -> Option<&str> {
        match self {
            Value::Unknown { reason } => Some(reason),
            Value::Collection { items, .. } => items.iter().find_map(Value::undecoded),
            _ => None,
        }
    }
}

/// Nesting limit for collections and JSON documents.
const MAX_DEPTH: u32 = 64;
/// Largest string CUBRID stores (`DB_MAX_STRING_LENGTH`).
const MAX_STRING_LENGTH: u64 = 0x3FFF_FFFF;
/// Largest factor by which an LZ4 block expands.
const LZ4_MAX_RATIO: u64 = 255;
/// Header size by `flags & 7` (§8.2).
const HEADER_SIZE: [usize; 8] = {
    let mut t = [0; 8];
    let mut f = 0;
    while f < 8 {
        t[f] = heap::header_size(f as u8);
        f += 1;
    }
    t
};
/// JDN of 1970-01-01.
const UNIX_EPOCH_JDN: i64 = 2_440_588;
/// JDN of 1582-10-15, the first Gregorian day.
const GREGORIAN_START_JDN: i64 = 2_299_161;
const MS_PER_DAY: i64 = 86_400_000;

use crate::format::le::{
    be_i32_checked as be_i32, be_i64_checked as be_i64, be_u16_checked as be_u16, be_u32_checked as be_u32,
    be_u64_checked as be_u64,
};

fn align4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

fn short(what: &str) -> String {
    format!("{what} runs past the end of its bytes")
}

/// Decodes a heap record (header included, e.g. an event image's `row`) with the
/// representation it was written with. Returns one value per `rep.attributes` entry (storage
/// order). `Err` when the record's structure does not fit the representation; a column whose
/// bytes cannot be decoded is [`Value::Unknown`].
pub fn decode_row(rep: &Representation, record: &[u8]) -> Result<Vec<Value>, String> {
    let layout = row_layout(rep, record)?;
    Ok(rep
        .attributes
        .iter()
        .zip(layout.slots)
        .map(|(a, slot)| match slot {
            Slot::Null => Value::Null,
            Slot::Bad(reason) => Value::Unknown { reason },
            Slot::Bytes(r) => decode_value(&a.domain, &record[r], 0),
        })
        .collect())
}

/// Decodes one value of `domain` from its bytes (a fixed column's disk bytes, or a variable
/// column's bytes from its offset-table entry on). `depth` is the nesting level (0 for a column;
/// collections and JSON documents deeper than 64 levels are refused).
pub fn decode_value(d: &Domain, b: &[u8], depth: u32) -> Value {
    match decode_value_inner(d, b, depth) {
        Ok(v) => v,
        Err(reason) => Value::Unknown { reason },
    }
}

fn fixed_bytes<'a>(d: &Domain, b: &'a [u8]) -> Result<&'a [u8], String> {
    let size = fixed_disk_size(d).ok_or_else(|| format!("type {} has no fixed size", d.db_type))?;
    b.get(..size).ok_or_else(|| format!("type {} needs {size} bytes, {} there", d.db_type, b.len()))
}

/// A stored day number: 0 (CUBRID's zero date) or a day of years 1 to 9999, the range CUBRID
/// accepts; anything else is bytes that are not a date.
fn jdn_of(v: u32) -> Result<i32, String> {
    let jdn = i32::try_from(v).map_err(|_| format!("day number {v} out of range"))?;
    if jdn != 0 && !(1..=9999).contains(&jdn_to_ymd(jdn as i64).0) {
        return Err(format!("day number {v} lies outside the years 1 to 9999"));
    }
    Ok(jdn)
}

/// Milliseconds into a day (DATETIME) or seconds (TIME) must stay within the day.
fn within_day(v: u32, per_day: u32, what: &str) -> Result<u32, String> {
    if v >= per_day {
        return Err(format!("{what} {v} is not within a day"));
    }
    Ok(v)
}

fn decode_value_inner(d: &Domain, b: &[u8], depth: u32) -> Result<Value, String> {
    let t = d.db_type;
    // Fixed types whose width does not depend on the domain.
    let f = |n: usize| b.get(..n).ok_or_else(|| format!("type {t} needs {n} bytes, {} there", b.len()));
    Ok(match t {
        db_type::INTEGER => Value::Int(be_i32(f(4)?, 0).unwrap_or_default() as i64),
        db_type::SHORT => Value::Int(be_u16(f(2)?, 0).unwrap_or_default() as i16 as i64),
        db_type::BIGINT => Value::Int(be_i64(f(8)?, 0).unwrap_or_default()),
        db_type::FLOAT => Value::Float(f32::from_bits(be_u32(f(4)?, 0).unwrap_or_default())),
        db_type::DOUBLE => Value::Double(f64::from_bits(be_u64(f(8)?, 0).unwrap_or_default())),
        db_type::MONETARY => {
            let x = f(12)?;
            Value::Monetary {
                currency: be_i32(x, 0).unwrap_or_default(),
                amount: f64::from_bits(be_u64(x, 4).unwrap_or_default()),
            }
        }
        db_type::NUMERIC => {
            let x: [u8; 16] = f(16)?.try_into().map_err(|_| "numeric")?;
            let unscaled = i128::from_be_bytes(x);
            // More digits than the column's precision: not a value CUBRID stored.
            if (1..=38).contains(&d.precision) && unscaled.unsigned_abs() >= 10u128.pow(d.precision as u32) {
                return Err(format!("{unscaled} has more than the column's {} digits", d.precision));
            }
            Value::Numeric { unscaled, scale: d.scale }
        }
        db_type::DATE => Value::Date(jdn_of(be_u32(f(4)?, 0).unwrap_or_default())?),
        db_type::TIME => Value::Time(within_day(be_u32(f(4)?, 0).unwrap_or_default(), 86_400, "time of day")?),
        db_type::TIMESTAMP => Value::Timestamp(be_u32(f(4)?, 0).unwrap_or_default()),
        db_type::TIMESTAMPLTZ => Value::TimestampLtz(be_u32(f(4)?, 0).unwrap_or_default()),
        db_type::TIMESTAMPTZ => {
            let x = f(8)?;
            Value::TimestampTz { secs: be_u32(x, 0).unwrap_or_default(), tz: be_u32(x, 4).unwrap_or_default() }
        }
        db_type::DATETIME | db_type::DATETIMELTZ | db_type::DATETIMETZ => {
            let x = f(if t == db_type::DATETIMETZ { 12 } else { 8 })?;
            let jdn = jdn_of(be_u32(x, 0).unwrap_or_default())?;
            let ms = within_day(be_u32(x, 4).unwrap_or_default(), 86_400_000, "milliseconds of day")?;
            match t {
                db_type::DATETIME => Value::Datetime { jdn, ms },
                db_type::DATETIMELTZ => Value::DatetimeLtz { jdn, ms },
                _ => Value::DatetimeTz { jdn, ms, tz: be_u32(x, 8).unwrap_or_default() },
            }
        }
        db_type::ENUMERATION => {
            let index = be_u16(f(2)?, 0).unwrap_or_default();
            let label = (index as usize).checked_sub(1).and_then(|i| d.enum_labels.get(i)).cloned();
            Value::Enum { index, label }
        }
        db_type::OBJECT | db_type::OID => Value::Oid(Oid::from_packed(f(8)?)),
        db_type::CHAR | db_type::NCHAR => Value::String { bytes: char_bytes(d, b)?.to_vec(), codeset: d.codeset },
        db_type::BIT => {
            let x = if d.precision > 0 { fixed_bytes(d, b)? } else { b };
            let bits = if d.precision > 0 { d.precision as u32 } else { (x.len() * 8) as u32 };
            Value::Bit { bytes: x.to_vec(), bits }
        }
        db_type::STRING | db_type::VARNCHAR => Value::String { bytes: decode_varchar(b)?.0, codeset: d.codeset },
        db_type::VARBIT => {
            let (bytes, bits) = decode_varbit(b)?;
            Value::Bit { bytes, bits }
        }
        db_type::SET | db_type::MULTISET | db_type::SEQUENCE => decode_set(d, b, depth)?,
        db_type::JSON => Value::Json(json_text(b, depth)?),
        db_type::BLOB | db_type::CLOB | db_type::ELO => decode_lob(b)?,
        _ => return Err(format!("type {t} is not a column type this decoder knows")),
    })
}

/// A CHAR / NCHAR value's bytes: its first `precision` characters (blank padding kept).
fn char_bytes<'a>(d: &Domain, b: &'a [u8]) -> Result<&'a [u8], String> {
    // A tagged collection element may carry a domain without precision: take what is there.
    let x = if d.precision > 0 { fixed_bytes(d, b)? } else { b };
    let keep = first_chars(x, d.codeset, usize::try_from(d.precision).ok().filter(|&n| n > 0));
    Ok(&x[..keep])
}

/// Room a reader reuses to decode row after row: the row's layout, and a compressed string's
/// text.
#[derive(Debug, Default)]
pub struct RowRoom {
    pub slots: Vec<Slot>,
    pub text: Vec<u8>,
}

/// Appends the JSON of the value of domain `d` stored in `b` (a column's bytes, as
/// [`decode_value`] takes them): what `value_json_into(decode_value(d, b, 0))` appends, with
/// strings escaped from the row's own bytes (or unzipped into `text_room`) instead of copied
/// into a [`Value`] first. Returns why the value could not be decoded, when it could not (its
/// JSON is then `null`).
pub fn column_json_into(out: &mut String, d: &Domain, b: &[u8], text_room: &mut Vec<u8>) -> Option<String> {
    let text = match d.db_type {
        db_type::STRING | db_type::VARNCHAR => Some(varchar_bytes(b, text_room)),
        db_type::CHAR | db_type::NCHAR => Some(char_bytes(d, b)),
        _ => None,
    };
    match text {
        Some(Ok(bytes)) => {
            push_text_json(out, bytes, d.codeset);
            None
        }
        Some(Err(reason)) => {
            out.push_str("null");
            Some(reason)
        }
        None => {
            let v = decode_value(d, b, 0);
            value_json_into(out, &v, d);
            v.undecoded().map(str::to_owned)
        }
    }
}

/// Byte length of the first `n` characters of `b` in `codeset` (all of `b` when `n` is None).
fn first_chars(b: &[u8], codeset: i32, n: Option<usize>) -> usize {
    let Some(n) = n else { return b.len() };
    let mut pos = 0;
    for _ in 0..n {
        if pos >= b.len() {
            break;
        }
        let lead = b[pos];
        let w = match codeset {
            5 => match lead {
                0xF0..=0xF7 => 4,
                0xE0..=0xEF => 3,
                0xC0..=0xDF => 2,
                _ => 1,
            },
            4 => match lead {
                0x8F => 3,
                0x80..=0xFF => 2,
                _ => 1,
            },
            _ => 1,
        };
        pos += w;
    }
    pos.min(b.len())
}

/// A VARCHAR-encoded string (§8.4): the text bytes and whether they were LZ4-compressed.
pub fn decode_varchar(b: &[u8]) -> Result<(Vec<u8>, bool), String> {
    let mut room = Vec::new();
    let text = varchar_bytes(b, &mut room)?;
    if b[0] == 0xFF && be_i32(b, 1).is_some_and(|c| c != 0) {
        return Ok((room, true)); // unzipped into the room: no second copy
    }
    Ok((text.to_vec(), false))
}

/// A VARCHAR-encoded string's text bytes: in `b`, or unzipped into `room` when they were
/// LZ4-compressed (`room` is left empty otherwise).
fn varchar_bytes<'a>(b: &'a [u8], room: &'a mut Vec<u8>) -> Result<&'a [u8], String> {
    room.clear();
    let &first = b.first().ok_or("empty string value")?;
    if first < 0xFF {
        let len = first as usize;
        return b.get(1..1 + len).ok_or_else(|| short(&format!("string of {len} bytes")));
    }
    let c = be_i32(b, 1).ok_or_else(|| short("long string header"))?;
    let l = be_i32(b, 5).ok_or_else(|| short("long string header"))?;
    let (c, l) = match (usize::try_from(c), usize::try_from(l)) {
        (Ok(c), Ok(l)) => (c, l),
        _ => return Err(format!("long string with negative length (compressed {c}, length {l})")),
    };
    if c == 0 {
        return b.get(9..9 + l).ok_or_else(|| short(&format!("string of {l} bytes")));
    }
    let block = b.get(9..9 + c).ok_or_else(|| short(&format!("LZ4 string of {c} compressed bytes")))?;
    if l as u64 > MAX_STRING_LENGTH || l as u64 > (c as u64).saturating_mul(LZ4_MAX_RATIO) + 64 {
        return Err(format!("LZ4 string claims {l} bytes from {c} compressed bytes"));
    }
    room.resize(l, 0);
    let n = lz4_flex::block::decompress_into(block, room).map_err(|e| format!("LZ4 string does not decode: {e}"))?;
    if n != l {
        room.clear();
        return Err(format!("LZ4 string decodes to {n} bytes, {l} declared"));
    }
    Ok(room)
}

/// A VARBIT value: bytes and bit length.
fn decode_varbit(b: &[u8]) -> Result<(Vec<u8>, u32), String> {
    let &first = b.first().ok_or("empty bit string")?;
    let (bits, at) = if first < 0xFF {
        (first as u32, 1)
    } else {
        let n = be_i32(b, 1).ok_or_else(|| short("bit string length"))?;
        (u32::try_from(n).map_err(|_| format!("bit string with negative length {n}"))?, 5)
    };
    let n = (bits as usize).div_ceil(8);
    let data = b.get(at..at + n).ok_or_else(|| short(&format!("bit string of {bits} bits")))?;
    Ok((data.to_vec(), bits))
}

fn decode_lob(b: &[u8]) -> Result<Value, String> {
    let size = be_i64(b, 0).ok_or_else(|| short("LOB header"))?;
    let n = be_i32(b, 8).ok_or_else(|| short("LOB header"))?;
    let n = usize::try_from(n).map_err(|_| format!("LOB locator with negative length {n}"))?;
    let loc = b.get(12..12 + n).ok_or_else(|| short("LOB locator"))?;
    let end = loc.iter().position(|&c| c == 0).unwrap_or(loc.len());
    Ok(Value::Lob { size, locator: String::from_utf8_lossy(&loc[..end]).into_owned() })
}

/// A packed domain (class-records spec §2.5.2) at `*pos`; returns it and its NULL flag.
fn packed_domain(b: &[u8], pos: &mut usize, depth: u32) -> Result<(Domain, bool), String> {
    if depth > MAX_DEPTH {
        return Err("packed domain nested too deeply".into());
    }
    let word = |pos: &mut usize| -> Result<u32, String> {
        let w = be_u32(b, *pos).ok_or_else(|| short("packed domain"))?;
        *pos += 4;
        Ok(w)
    };
    let w = word(pos)?;
    let null = w & 0x40 != 0;
    let t = (w & 0x3F) as i32;
    let mut d = Domain { db_type: t, precision: -1, ..Default::default() };
    if t == db_type::NULL && w & 0x100 != 0 {
        // Built-in domain reference: index = type + 1.
        let index = (w >> 16) as i32;
        d.db_type = index - 1;
        d.codeset = 5;
        return Ok((d, null));
    }
    let mut precision = (w >> 16) as i32;
    let mut scale = ((w >> 8) & 0xFF) as i32;
    match t {
        db_type::CHAR | db_type::STRING | db_type::NCHAR | db_type::VARNCHAR | db_type::BIT | db_type::VARBIT => {
            d.codeset = scale;
            scale = 0;
            if matches!(t, db_type::CHAR | db_type::STRING | db_type::NCHAR | db_type::VARNCHAR) {
                d.collation = (word(pos)? & 0x3FFF_FFFF) as i32;
            }
        }
        db_type::ENUMERATION if w & 0x200 != 0 => d.collation = (word(pos)? & 0x3FFF_FFFF) as i32,
        _ => {}
    }
    if precision == 0xFFFF {
        precision = word(pos)? as i32;
    }
    if t == db_type::NUMERIC && scale == 0xFF {
        scale = word(pos)? as i32;
    }
    d.precision = if precision == 0 && t != db_type::NUMERIC { -1 } else { precision };
    d.scale = scale;
    match t {
        db_type::OBJECT | db_type::OID if w & 0x100 != 0 => {
            let oid = b.get(*pos..*pos + 8).ok_or_else(|| short("domain class OID"))?;
            d.class_oid = Some(Oid::from_packed(oid));
            *pos += 8;
        }
        db_type::ENUMERATION if w & 0x100 != 0 => {
            // A plain sequence header, a count, then the labels as VARCHAR-encoded strings.
            let count = be_i32(b, *pos + 4).ok_or_else(|| short("enumeration"))?;
            *pos += 8;
            for _ in 0..count.max(0) {
                let rest = b.get(*pos..).unwrap_or_default();
                let (text, _) = decode_varchar(rest)?;
                *pos += varchar_stored_len(rest)?;
                d.enum_labels.push(String::from_utf8_lossy(&text).into_owned());
            }
        }
        _ => {}
    }
    if t == db_type::JSON && w & 0x400 != 0 {
        let rest = b.get(*pos..).unwrap_or_default();
        *pos += varchar_stored_len(rest)?;
    }
    if matches!(t, db_type::SET | db_type::MULTISET | db_type::SEQUENCE) && w & 0x100 != 0 {
        loop {
            let more = be_u32(b, *pos).ok_or_else(|| short("set element domain"))? & 0x80 != 0;
            let (sub, _) = packed_domain(b, pos, depth + 1)?;
            d.set_domains.push(sub);
            if !more {
                break;
            }
        }
    }
    Ok((d, null))
}

/// A packed value (class-records spec §2.4: packed domain word(s), then the value in its type's
/// disk encoding; used for attribute defaults) decoded for an attribute of domain `attr`.
///
/// Returns the value and the domain to show it with, or `None` when there are no bytes, the
/// value is NULL, or the bytes do not decode. When the packed domain has the attribute's type,
/// the attribute's domain interprets the bytes (it carries ENUM labels, element domains and the
/// codeset); NUMERIC keeps the packed scale, and a CHAR/NCHAR/BIT packed with floating precision
/// is read in its variable-width form. Otherwise the packed domain alone is used.
pub fn decode_packed_value(b: &[u8], attr: &Domain) -> Option<(Value, Domain)> {
    if b.is_empty() {
        return None;
    }
    let mut pos = 0;
    let (packed, null) = packed_domain(b, &mut pos, 0).ok()?;
    if null || packed.db_type == db_type::NULL {
        return None;
    }
    let bytes = b.get(pos..)?;
    let shown = if packed.db_type == attr.db_type { attr.clone() } else { packed.clone() };
    let mut read = shown.clone();
    if packed.db_type == db_type::NUMERIC && packed.precision > 0 {
        read.scale = packed.scale;
    }
    if matches!(packed.db_type, db_type::CHAR | db_type::NCHAR | db_type::BIT) && packed.precision > 0 {
        // A fixed-width value occupies the width of its own domain.
        read.precision = packed.precision;
    }
    if packed.precision <= 0 {
        // Floating precision: CHAR/NCHAR/BIT values are packed as VARCHAR/VARNCHAR/VARBIT.
        read.db_type = match read.db_type {
            db_type::CHAR => db_type::STRING,
            db_type::NCHAR => db_type::VARNCHAR,
            db_type::BIT => db_type::VARBIT,
            t => t,
        };
    }
    match decode_value(&read, bytes, 0) {
        Value::Unknown { .. } | Value::Null => None,
        v => Some((v, shown)),
    }
}

/// [`decode_packed_value`] in the JSON text form of [`value_json`]; `None` for no value, NULL or
/// undecodable bytes.
pub fn packed_value_json(b: &[u8], attr: &Domain) -> Option<String> {
    decode_packed_value(b, attr).map(|(v, d)| value_json(&v, &d))
}

/// Bytes a VARCHAR-encoded string occupies, NUL and padding included.
fn varchar_stored_len(b: &[u8]) -> Result<usize, String> {
    let &first = b.first().ok_or("empty string value")?;
    let body = if first < 0xFF {
        1 + first as usize
    } else {
        let c = be_i32(b, 1).ok_or_else(|| short("long string header"))?;
        let l = be_i32(b, 5).ok_or_else(|| short("long string header"))?;
        9 + usize::try_from(if c > 0 { c } else { l }).map_err(|_| "negative string length".to_string())?
    };
    Ok(align4(body + 1))
}

/// A collection (§8.4): header word, count, offset table or bound bits, optional domain, elements.
fn decode_set(d: &Domain, b: &[u8], depth: u32) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err("collection nested too deeply".into());
    }
    let w = be_u32(b, 0).ok_or_else(|| short("collection header"))?;
    let kind = (w & 0xFF) as i32;
    let count = be_i32(b, 4).ok_or_else(|| short("collection header"))?;
    let count = usize::try_from(count).map_err(|_| format!("collection with {count} elements"))?;
    let (bound_bit, var_bit, dom_bit, tag_bit) =
        (w & 0x10000 != 0, w & 0x20000 != 0, w & 0x40000 != 0, w & 0x80000 != 0);
    let mut pos = 8usize;
    let mut offsets_at = None;
    let mut bound_at = None;
    if count > 0 {
        if var_bit {
            let n = count.checked_add(1).and_then(|n| n.checked_mul(4)).ok_or("collection count overflows")?;
            if pos + n > b.len() {
                return Err(format!("collection of {count} elements: offset table runs past its {} bytes", b.len()));
            }
            offsets_at = Some(pos);
            pos += n;
        } else if bound_bit {
            let n = count.div_ceil(32) * 4;
            if pos + n > b.len() {
                return Err(format!("collection of {count} elements: bound bits run past its {} bytes", b.len()));
            }
            bound_at = Some(pos);
            pos += n;
        }
    }
    let mut elem: Option<Domain> = match d.set_domains.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    if dom_bit {
        let size = be_i32(b, pos).ok_or_else(|| short("collection domain"))?;
        let size = usize::try_from(size).map_err(|_| format!("collection domain of {size} bytes"))?;
        let dom = b.get(pos + 4..pos + 4 + size).ok_or_else(|| short("collection domain"))?;
        if elem.is_none() && !dom.is_empty() {
            let mut p = 0;
            if let Ok((sd, _)) = packed_domain(dom, &mut p, depth + 1) {
                if let [one] = sd.set_domains.as_slice() {
                    elem = Some(one.clone());
                }
            }
        }
        pos += 4 + size;
    }
    let mut items = Vec::new();
    if let Some(at) = offsets_at {
        // Elements lie after the header, offset table and domain, one after the other: an
        // element that overlaps them or an earlier one is refused, so that every byte is
        // decoded once per level (offsets pointing back at the collection itself would
        // otherwise decode it again inside itself, exponentially in the nesting).
        let mut free_from = pos;
        for i in 0..count {
            let s = be_i32(b, at + 4 * i).unwrap_or(-1);
            let e = be_i32(b, at + 4 * (i + 1)).unwrap_or(-1);
            let bytes = match (usize::try_from(s), usize::try_from(e)) {
                (Ok(s), Ok(e)) if free_from <= s && s <= e && e <= b.len() => {
                    free_from = e;
                    &b[s..e]
                }
                _ => {
                    items.push(Value::Unknown {
                        reason: format!("element {i}: offsets {s}..{e} outside the collection's free bytes"),
                    });
                    continue;
                }
            };
            items.push(if tag_bit {
                let mut p = 0;
                match packed_domain(bytes, &mut p, depth + 1) {
                    Ok((_, true)) => Value::Null,
                    Ok((ed, false)) => decode_value(&ed, &bytes[p.min(bytes.len())..], depth + 1),
                    Err(reason) => Value::Unknown { reason: format!("element {i}: {reason}") },
                }
            } else if bytes.is_empty() {
                Value::Null
            } else {
                match &elem {
                    Some(ed) => decode_value(ed, bytes, depth + 1),
                    None => Value::Unknown { reason: "untagged element without an element domain".into() },
                }
            });
        }
    } else if count > 0 {
        let ed = elem.ok_or("fixed-width collection without an element domain")?;
        let size = fixed_disk_size(&ed).ok_or_else(|| format!("element type {} is not fixed-width", ed.db_type))?;
        let total = count.checked_mul(size).ok_or("collection size overflows")?;
        if size == 0 || pos + total > b.len() {
            return Err(format!("collection of {count} × {size}-byte elements runs past its {} bytes", b.len()));
        }
        for i in 0..count {
            let bound = match bound_at {
                Some(at) => (be_u32(b, at + 4 * (i >> 5)).unwrap_or(0) >> (i & 31)) & 1 != 0,
                None => true,
            };
            let x = &b[pos + i * size..pos + (i + 1) * size];
            items.push(if bound { decode_value(&ed, x, depth + 1) } else { Value::Null });
        }
    }
    Ok(Value::Collection { kind, items })
}

/// A decoded row: `(attribute id, value)` in the storage order of its representation.
#[derive(Clone, Debug, Default)]
pub struct RowValues(pub Vec<(i32, Value)>);

impl RowValues {
    /// The value of attribute `id` (None when the row's representation has no such attribute).
    pub fn get(&self, id: i32) -> Option<&Value> {
        self.0.iter().find(|(a, _)| *a == id).map(|(_, v)| v)
    }

    /// Approximate bytes the values hold.
    pub fn weight(&self) -> usize {
        self.0.iter().map(|(_, v)| std::mem::size_of::<(i32, Value)>() + v.held_bytes()).sum()
    }
}

impl Value {
    /// Bytes the value holds beyond itself (text, elements).
    fn held_bytes(&self) -> usize {
        match self {
            Value::String { bytes, .. } | Value::Bit { bytes, .. } => bytes.len(),
            Value::Json(text) => text.len(),
            Value::Enum { label, .. } => label.as_ref().map_or(0, String::len),
            Value::Lob { locator, .. } => locator.len(),
            Value::Unknown { reason } => reason.len(),
            Value::Collection { items, .. } => {
                items.iter().map(|v| std::mem::size_of::<Value>() + v.held_bytes()).sum()
            }
            _ => 0,
        }
    }
}

impl PartialEq for RowValues {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len() && self.0.iter().zip(&other.0).all(|(a, b)| a.0 == b.0 && same_value(&a.1, &b.1))
    }
}

impl Eq for RowValues {}

#[cfg(test)]
mod tests {
    use super::*;

    /// FLOAT, DOUBLE and JSON-document numbers are serde_json's text, as rows have always been
    /// written (serde_json writes `1e+16` where other shortest-digit formatters write `1e16`):
    /// random bit patterns, and the edges.
    #[test]
    fn floats_are_written_as_serde_json_writes_them() {
        let mut rng = crate::test_rng::Rng(0x5eed_f10a);
        let mut doubles: Vec<f64> = (0..200_000).map(|_| f64::from_bits(rng.next())).collect();
        let mut floats: Vec<f32> = (0..200_000).map(|_| f32::from_bits(rng.next() as u32)).collect();
        doubles.extend([0.0, -0.0, 1e16, 1e15, 1e21, 1e22, 1.5e300, 5e-324, 1e-7, f64::MAX, f64::MIN_POSITIVE]);
        doubles.extend([f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 123456789012345680.0, 0.1 + 0.2]);
        floats.extend([1e16, 3.4028235e38, 1e-45, 0.1, f32::NAN, f32::INFINITY]);
        let serde = |text: serde_json::Result<String>, finite: bool| {
            if finite {
                text.unwrap()
            } else {
                "null".to_string()
            }
        };
        for d in doubles {
            let mut out = String::new();
            text::value_json_into(&mut out, &Value::Double(d), &Domain::default());
            assert_eq!(out, serde(serde_json::to_string(&d), d.is_finite()), "{d:e}");
        }
        for f in floats {
            let mut out = String::new();
            text::value_json_into(&mut out, &Value::Float(f), &Domain::default());
            assert_eq!(out, serde(serde_json::to_string(&f), f.is_finite()), "{f:e}");
        }
    }
    use crate::format::schema::Attribute;

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut texts: Vec<String> = (0u8..0x80).map(|b| format!("a{}b", b as char)).collect();
        texts.extend(
            ["", "plain", "tab\there", "q\"uote\\back", "\u{7f}\u{80}é漢字🙂", "\u{1}\u{1f}"].map(String::from),
        );
        for t in &texts {
            let mut out = String::from("x");
            text::push_json_str(&mut out, t);
            assert_eq!(out, format!("x{}", serde_json::to_string(t).unwrap()), "{t:?}");
        }
    }

    #[test]
    fn integers_are_written_as_display_writes_them() {
        let d = dom(db_type::BIGINT, 0, 0, 0);
        for i in [i64::MIN, i64::MIN + 1, -1_000_000_007, -10, -9, -1, 0, 1, 9, 10, 99, 100, i32::MAX as i64, i64::MAX]
        {
            let mut out = String::from("[");
            text::value_json_into(&mut out, &Value::Int(i), &d);
            assert_eq!(out, format!("[{i}"));
        }
    }

    #[test]
    fn string_values_are_json_whatever_their_bytes() {
        let utf8 = dom(db_type::STRING, 10, 0, 5);
        let s = |bytes: &[u8], codeset| Value::String { bytes: bytes.to_vec(), codeset };
        assert_eq!(value_json(&s(b"caf\xc3\xa9 \"x\"", 5), &utf8), "\"café \\\"x\\\"\"");
        // Invalid UTF-8 shows U+FFFD, as the text form does; Latin-1 and EUC-KR are decoded.
        assert_eq!(value_json(&s(b"a\xffb", 5), &utf8), "\"a\u{fffd}b\"");
        assert_eq!(value_json(&s(b"caf\xe9", 3), &utf8), "\"café\"");
        assert_eq!(value_json(&s(b"\xc7\xd1", 4), &utf8), "\"한\"");
    }

    fn dom(db_type: i32, precision: i32, scale: i32, codeset: i32) -> Domain {
        Domain { db_type, precision, scale, codeset, ..Default::default() }
    }

    fn rep(repid: i32, cols: &[(&str, Domain)]) -> Representation {
        let n_fixed = cols.iter().take_while(|c| !is_variable_type(c.1.db_type)).count();
        let attributes = cols
            .iter()
            .enumerate()
            .map(|(i, (n, d))| Attribute {
                id: i as i32,
                name: n.to_string(),
                def_order: i as i32,
                domain: d.clone(),
                primary_key: false,
                default_value: None,
            })
            .collect();
        Representation::new(repid, attributes, n_fixed, cols.len() - n_fixed)
    }

    /// Spec §8.5: `t (id INT, name VARCHAR(20), price NUMERIC(10,2), created DATETIME, note STRING)`
    /// in storage order id, created, price | name, note.
    fn example_rep() -> Representation {
        rep(
            1,
            &[
                ("id", dom(db_type::INTEGER, 10, 0, 0)),
                ("created", dom(db_type::DATETIME, 23, 3, 0)),
                ("price", dom(db_type::NUMERIC, 10, 2, 0)),
                ("name", dom(db_type::STRING, 20, 0, 5)),
                ("note", dom(db_type::STRING, 1_073_741_823, 0, 5)),
            ],
        )
    }

    fn example_record() -> Vec<u8> {
        let mut r = vec![0xA1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34];
        r.extend([0x24, 0x2C, 0x2C, 0x00]);
        r.extend([0, 0, 0, 1, 0x00, 0x25, 0x8A, 0xE1, 0x02, 0x40, 0xC8, 0x40]);
        r.extend([0u8; 14]);
        r.extend([0x04, 0xE2]);
        r.extend([0x07, 0, 0, 0]);
        r.extend([5, b'a', b'p', b'p', b'l', b'e', 0, 0]);
        assert_eq!(r.len(), 60);
        r
    }

    fn json_of(v: &Value, d: &Domain) -> String {
        value_json(v, d)
    }

    #[test]
    fn row_worked_example() {
        let rep = example_rep();
        let rec = example_record();
        let layout = row_layout(&rep, &rec).unwrap();
        assert_eq!((layout.repid, layout.mvcc_flags, layout.header_size, layout.offset_size), (1, 1, 16, 1));
        assert_eq!(layout.slots[3], Slot::Bytes(0x34..0x3C));
        let v = decode_row(&rep, &rec).unwrap();
        assert_eq!(v[0], Value::Int(1));
        assert_eq!(v[1], Value::Datetime { jdn: 2_460_385, ms: 37_800_000 });
        assert_eq!(v[2], Value::Numeric { unscaled: 1250, scale: 2 });
        assert_eq!(v[3], Value::String { bytes: b"apple".to_vec(), codeset: 5 });
        assert_eq!(v[4], Value::Null);
        let a = &rep.attributes;
        let texts: Vec<String> = v.iter().zip(a).map(|(v, a)| json_of(v, &a.domain)).collect();
        assert_eq!(texts, ["1", "\"2024-03-15 10:30:00.000\"", "\"12.50\"", "\"apple\"", "null"]);
        assert_eq!(record_repid(&rec), Ok(1));
    }

    #[test]
    fn row_columns_sharing_bytes_are_refused() {
        // Offsets [name, end, name, end] for name, note, extra: extra would be name's bytes
        // again (many such columns: the row decoded many times over); note has no end after
        // its start.
        let mut cols = vec![
            ("id", dom(db_type::INTEGER, 10, 0, 0)),
            ("created", dom(db_type::DATETIME, 23, 3, 0)),
            ("price", dom(db_type::NUMERIC, 10, 2, 0)),
            ("name", dom(db_type::STRING, 20, 0, 5)),
            ("note", dom(db_type::STRING, 1_073_741_823, 0, 5)),
        ];
        cols.push(("extra", dom(db_type::STRING, 20, 0, 5)));
        let rep = rep(1, &cols);
        let mut rec = example_record();
        rec[0x10..0x14].copy_from_slice(&[0x24, 0x2C, 0x24, 0x2C]);
        let v = decode_row(&rep, &rec).unwrap();
        assert_eq!(v[3], Value::String { bytes: b"apple".to_vec(), codeset: 5 });
        assert!(matches!(&v[4], Value::Unknown { .. }), "{:?}", v[4]);
        assert!(matches!(&v[5], Value::Unknown { reason } if reason.contains("earlier column")), "{:?}", v[5]);
    }

    #[test]
    fn row_worked_example_lz4_note() {
        let rep = example_rep();
        let mut rec = example_record();
        rec[0x10..0x14].copy_from_slice(&[0x24, 0x2C, 0x44, 0x00]);
        rec.extend([0xFF, 0, 0, 0, 0x0C, 0, 0, 0x01, 0x2C]);
        rec.extend([0x1F, 0x78, 0x01, 0x00, 0xFF, 0x14, 0x50, 0x78, 0x78, 0x78, 0x78, 0x78]);
        rec.extend([0, 0, 0]);
        assert_eq!(rec.len(), 84);
        let v = decode_row(&rep, &rec).unwrap();
        assert_eq!(v[4], Value::String { bytes: vec![b'x'; 300], codeset: 5 });
        assert_eq!(v[3], Value::String { bytes: b"apple".to_vec(), codeset: 5 });
    }

    #[test]
    fn row_repid_mismatch_and_null_fixed() {
        let mut rep = example_rep();
        let mut rec = example_record();
        rep.repid = 2;
        assert!(decode_row(&rep, &rec).unwrap_err().contains("representation 1"));
        rep.repid = 1;
        rec[0x30] = 0b101; // created is NULL
        let v = decode_row(&rep, &rec).unwrap();
        assert_eq!(v[1], Value::Null);
        assert_eq!(v[2], Value::Numeric { unscaled: 1250, scale: 2 });
        // Without the bound-bit flag every fixed column is bound.
        rec[0] &= 0x7F;
        rec.drain(0x30..0x34);
        rec[0x10..0x13].copy_from_slice(&[0x20, 0x28, 0x28]);
        let v = decode_row(&rep, &rec).unwrap();
        assert_eq!(v[1], Value::Datetime { jdn: 2_460_385, ms: 37_800_000 });
        assert_eq!(v[3], Value::String { bytes: b"apple".to_vec(), codeset: 5 });
    }

    #[test]
    fn row_numeric_text() {
        let d = dom(db_type::NUMERIC, 15, 4, 0);
        let v = decode_value(&d, &[0xFF; 16], 0);
        assert_eq!(v, Value::Numeric { unscaled: -1, scale: 4 });
        assert_eq!(json_of(&v, &d), "\"-0.0001\"");
        assert_eq!(numeric_text(-1, 0), "-1");
        assert_eq!(numeric_text(-12345, 4), "-1.2345");
        assert_eq!(numeric_text(5, 4), "0.0005");
        assert_eq!(numeric_text(0, 2), "0.00");
        assert_eq!(numeric_text(39_795_254_982_081, 4), "3979525498.2081");
        assert_eq!(numeric_text(-116_422_104_690, 4), "-11642210.4690");
        assert_eq!(numeric_text(i128::MIN, 38).len(), 1 + 2 + 38);
        let mut b = [0u8; 16];
        b[8..].copy_from_slice(&(-98_765i64).to_be_bytes());
        b[..8].fill(0xFF);
        assert_eq!(
            decode_value(&dom(db_type::NUMERIC, 10, 2, 0), &b, 0),
            Value::Numeric { unscaled: -98_765, scale: 2 }
        );
    }

    #[test]
    fn row_dates_julian_gregorian() {
        assert_eq!(jdn_to_ymd(2_440_588), (1970, 1, 1));
        assert_eq!(jdn_to_ymd(2_460_385), (2024, 3, 15));
        assert_eq!(jdn_to_ymd(2_451_604), (2000, 2, 29));
        assert_eq!(jdn_to_ymd(2_299_161), (1582, 10, 15)); // first Gregorian day
        assert_eq!(jdn_to_ymd(2_299_160), (1582, 10, 4)); // the Julian day before it
        assert_eq!(jdn_to_ymd(1_721_424), (1, 1, 1)); // 0001-01-01, Julian calendar
        assert_eq!(jdn_to_ymd(5_373_484), (9999, 12, 31));
        assert_eq!(jdn_to_ymd(2_305_448), (1600, 1, 1));
        // 1500 is a leap year in the Julian calendar, not in the proleptic Gregorian one.
        assert_eq!(ymd_to_jdn(1500, 3, 1) - ymd_to_jdn(1500, 2, 28), 2);
        for j in (1_721_424..5_373_485).step_by(997) {
            let (y, m, d) = jdn_to_ymd(j);
            assert_eq!(ymd_to_jdn(y, m, d), j, "{y}-{m}-{d}");
        }
        let d = Domain::default();
        assert_eq!(json_of(&Value::Date(2_460_385), &d), "\"2024-03-15\"");
        assert_eq!(json_of(&Value::Date(2_299_160), &d), "\"1582-10-04\"");
        assert_eq!(json_of(&Value::Date(0), &d), "\"0000-00-00\"");
        assert_eq!(json_of(&Value::Time(70_163), &d), "\"19:29:23\"");
        assert_eq!(json_of(&Value::Datetime { jdn: 2_459_607, ms: 86_399_999 }, &d), "\"2022-01-27 23:59:59.999\"");
        assert_eq!(json_of(&Value::Timestamp(1_700_000_000), &d), "\"2023-11-14 22:13:20\"");
        assert_eq!(json_of(&Value::TimestampLtz(1_687_827_723), &d), "\"2023-06-27 01:02:03 UTC\"");
        assert_eq!(
            json_of(&Value::DatetimeLtz { jdn: 2_459_638, ms: 86_399_001 }, &d),
            "\"2022-02-27 23:59:59.001 UTC\""
        );
        // Stored UTC, shown in the offset's local time (the fixtures' c_tstz / c_dttz).
        let tstz = decode_value(&dom(db_type::TIMESTAMPTZ, 0, 0, 0), &[0x64, 0xB0, 0x4A, 0xE2, 0x40, 0, 0x7E, 0x90], 0);
        assert_eq!(json_of(&tstz, &d), "\"2023-07-14 04:05:06 +09:00\"");
        let dttz = decode_value(
            &dom(db_type::DATETIMETZ, 0, 0, 0),
            &[0, 0x25, 0x88, 0x05, 0x02, 0xE5, 0x94, 0xBA, 0x80, 0, 0x4D, 0x58],
            0,
        );
        assert_eq!(json_of(&dttz, &d), "\"2022-03-14 08:00:00.250 -05:30\"");
        // Crossing midnight forwards.
        let v = Value::DatetimeTz { jdn: 2_460_385, ms: 23 * 3_600_000, tz: 0x4000_7E90 };
        assert_eq!(json_of(&v, &d), "\"2024-03-16 08:00:00.000 +09:00\"");
        // A geographic zone id cannot be resolved offline: UTC time plus the raw id.
        let v = Value::TimestampTz { secs: 1_700_000_000, tz: 0x0001_02FF };
        assert!(json_of(&v, &d).starts_with("\"2023-11-14 22:13:20 UTC (unresolved zone: tz_id 0x000102FF, zone 1,"));
        let dt = decode_value(&dom(db_type::DATETIME, 0, 0, 0), &[0, 0x25, 0x8A, 0xE1, 0x02, 0x40, 0xC8, 0x40], 0);
        assert_eq!(dt, Value::Datetime { jdn: 2_460_385, ms: 37_800_000 });
        // A day number that does not fit DATE is not a date.
        assert!(matches!(decode_value(&dom(db_type::DATE, 0, 0, 0), &[0xFF; 4], 0), Value::Unknown { .. }));
    }

    #[test]
    fn row_varchar_forms() {
        // Short form.
        assert_eq!(decode_varchar(&[3, b'a', b'b', b'c', 0, 0, 0, 0]), Ok((b"abc".to_vec(), false)));
        assert_eq!(decode_varchar(&[0, 0, 0, 0]), Ok((vec![], false)));
        // Long form, stored uncompressed.
        let text: Vec<u8> = (0..300u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut b = vec![0xFF, 0, 0, 0, 0];
        b.extend(300u32.to_be_bytes());
        b.extend(&text);
        b.extend([0, 0, 0, 0]);
        assert_eq!(decode_varchar(&b), Ok((text.clone(), false)));
        // Long form, LZ4.
        let big: Vec<u8> = b"lz4-P4K-S0-T0001-".iter().copied().cycle().take(14_000).collect();
        let block = lz4_flex::block::compress(&big);
        let mut b = vec![0xFF];
        b.extend((block.len() as u32).to_be_bytes());
        b.extend((big.len() as u32).to_be_bytes());
        b.extend(&block);
        b.push(0);
        assert_eq!(decode_varchar(&b), Ok((big.clone(), true)));
        // Through a row: STRING column, 2-byte offsets.
        let d = dom(db_type::STRING, 1_073_741_823, 0, 5);
        assert_eq!(decode_value(&d, &b, 0), Value::String { bytes: big.clone(), codeset: 5 });
        // Lies and truncation.
        let mut lie = b.clone();
        lie[5..9].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_varchar(&lie).is_err());
        let mut lie = b.clone();
        lie[5..9].copy_from_slice(&((block.len() as u32) * 300).to_be_bytes());
        assert!(decode_varchar(&lie).unwrap_err().contains("claims"));
        let mut lie = b.clone();
        lie[5..9].copy_from_slice(&(big.len() as u32 - 1).to_be_bytes());
        assert!(decode_varchar(&lie).is_err());
        for n in 0..b.len() - 1 {
            let r = decode_varchar(&b[..n]);
            assert!(r.is_err(), "{n}");
        }
        assert!(decode_varchar(&[10, b'a']).is_err());
        assert!(decode_varchar(&[0xFF, 0x80, 0, 0, 0, 0, 0, 0, 1]).is_err());
    }

    #[test]
    fn row_bits() {
        let vb = dom(db_type::VARBIT, 64, 0, 0);
        let v = decode_value(&vb, &[0x14, 0xBA, 0xAB, 0x00], 0);
        assert_eq!(v, Value::Bit { bytes: vec![0xBA, 0xAB, 0x00], bits: 20 });
        assert_eq!(json_of(&v, &vb), "\"X'baab0'\"");
        let v = decode_value(&vb, &[0x14, 0xB3, 0x4A, 0x50], 0);
        assert_eq!(json_of(&v, &vb), "\"X'b34a5'\"");
        let mut long = vec![0xFF, 0, 0, 1, 0x2C];
        long.extend([0xA5; 38]);
        long.extend([0, 0, 0]);
        let v = decode_value(&vb, &long, 0);
        assert_eq!(v, Value::Bit { bytes: vec![0xA5; 38], bits: 300 });
        assert_eq!(json_of(&v, &vb).len(), 2 + 3 + 75);
        assert!(matches!(decode_value(&vb, &long[..20], 0), Value::Unknown { .. }));
        assert!(matches!(decode_value(&vb, &[0x20, 1], 0), Value::Unknown { .. }));
        let bit = dom(db_type::BIT, 16, 0, 1);
        assert_eq!(json_of(&decode_value(&bit, &[0x1D, 0xA1], 0), &bit), "\"X'1da1'\"");
    }

    #[test]
    fn row_char_codesets_and_text() {
        // utf8 CHAR(3) reserves 12 bytes; the value is its first 3 characters.
        let d = dom(db_type::CHAR, 3, 0, 5);
        let mut b = "가a".as_bytes().to_vec();
        b.resize(12, b' ');
        let v = decode_value(&d, &b, 0);
        assert_eq!(v, Value::String { bytes: "가a ".as_bytes().to_vec(), codeset: 5 });
        assert_eq!(json_of(&v, &d), "\"가a \"");
        // NCHAR is plain text (CUBRID's API shows it as N'...').
        let nd = dom(db_type::VARNCHAR, 40, 0, 5);
        assert_eq!(json_of(&Value::String { bytes: b"abc".to_vec(), codeset: 5 }, &nd), "\"abc\"");
        // iso88591 as Latin-1, EUC-KR decoded, broken UTF-8 replaced.
        let d0 = Domain::default();
        assert_eq!(json_of(&Value::String { bytes: b"caf\xe9".to_vec(), codeset: 3 }, &d0), "\"café\"");
        assert_eq!(json_of(&Value::String { bytes: vec![0xC7, 0xD1, 0xB1, 0xDB], codeset: 4 }, &d0), "\"한글\"");
        assert_eq!(json_of(&Value::String { bytes: vec![0xC7, 0xD1, 0xB1], codeset: 4 }, &d0), "\"한\u{FFFD}\"");
        assert_eq!(json_of(&Value::String { bytes: vec![b'a', 0xFF, b'"'], codeset: 5 }, &d0), "\"a\u{FFFD}\\\"\"");
        // euckr CHAR(2) reserves 6 bytes.
        let d = dom(db_type::CHAR, 2, 0, 4);
        assert_eq!(
            decode_value(&d, &[0xC7, 0xD1, b'x', b' ', b' ', b' '], 0),
            Value::String { bytes: vec![0xC7, 0xD1, b'x'], codeset: 4 }
        );
    }

    #[test]
    fn row_scalars_and_text_forms() {
        let d0 = Domain::default();
        assert_eq!(decode_value(&dom(db_type::SHORT, 5, 0, 0), &[0x95, 0xAC], 0), Value::Int(-27_220));
        assert_eq!(
            decode_value(&dom(db_type::BIGINT, 19, 0, 0), &[0x93, 0x19, 0x53, 0x06, 0x58, 0xD2, 0x8B, 0xBD], 0),
            Value::Int(-7_847_149_588_991_276_099)
        );
        let f = decode_value(&dom(db_type::FLOAT, 7, 0, 0), &[0x43, 0x9E, 0x20, 0x00], 0);
        assert_eq!(f, Value::Float(316.25));
        assert_eq!(json_of(&f, &d0), "316.25");
        assert_eq!(json_of(&Value::Float(-1670.0), &d0), "-1670.0");
        assert_eq!(json_of(&Value::Double(f64::NAN), &d0), "null");
        let m = decode_value(
            &dom(db_type::MONETARY, 0, 0, 0),
            &[0, 0, 0, 0, 0x40, 0xD1, 0x91, 0x4C, 0xCC, 0xCC, 0xCC, 0xCD],
            0,
        );
        assert_eq!(json_of(&m, &d0), "\"$17989.20\"");
        assert_eq!(json_of(&Value::Monetary { currency: 3, amount: -5.0 }, &d0), "\"\\\\-5.00\"");
        assert_eq!(json_of(&Value::Monetary { currency: 99, amount: 1.005 }, &d0), "\"1.00\"");
        let e = dom(db_type::ENUMERATION, 0, 0, 5);
        let e = Domain { enum_labels: vec!["red".into(), "green".into(), "blue".into()], ..e };
        assert_eq!(json_of(&decode_value(&e, &[0, 3], 0), &e), "\"blue\"");
        assert_eq!(json_of(&decode_value(&e, &[0, 9], 0), &e), "9");
        assert_eq!(json_of(&decode_value(&e, &[0, 0], 0), &e), "\"\"");
        let o = decode_value(&dom(db_type::OBJECT, 0, 0, 0), &[0, 0, 0, 0xE9, 0, 3, 0, 0], 0);
        assert_eq!(o, Value::Oid(Oid { pageid: 233, slotid: 3, volid: 0 }));
        assert_eq!(json_of(&o, &d0), "\"0|233|3\"");
        let mut lob = vec![0, 0, 0, 0, 0, 0, 0, 88, 0, 0, 0, 12];
        lob.extend(b"file:ces_1/\0");
        lob.extend([0, 0, 0, 4]);
        lob.extend(b"t_l\0");
        lob.extend([0, 0, 0, 1]);
        let l = decode_value(&dom(db_type::BLOB, 0, 0, 0), &lob, 0);
        assert_eq!(l, Value::Lob { size: 88, locator: "file:ces_1/".into() });
        assert_eq!(json_of(&l, &d0), "\"file:ces_1/\"");
        assert!(matches!(decode_value(&dom(db_type::CLOB, 0, 0, 0), &lob[..15], 0), Value::Unknown { .. }));
        assert!(matches!(decode_value(&dom(db_type::INTEGER, 0, 0, 0), &[1, 2], 0), Value::Unknown { .. }));
        assert!(matches!(decode_value(&dom(17, 0, 0, 0), &[1, 2, 3, 4], 0), Value::Unknown { .. }));
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn row_collections_and_json() {
        // As the server writes them (p4k/v11_2 fixtures): offset table, built-in domain, tagged elements.
        let set = hex("000e00060000000300000020000000280000003000000038000000040007010000020100000000040002010000000006000201000000000c");
        let d = dom(db_type::SET, 0, 0, 0);
        let v = decode_value(&d, &set, 0);
        assert_eq!(v, Value::Collection { kind: 6, items: vec![Value::Int(4), Value::Int(6), Value::Int(12)] });
        assert_eq!(json_of(&v, &d), "[4,6,12]");
        let mset = hex(concat!(
            "000e000700000003000000200000002c00000038000000440000000400080100000a05040000000101610000000a0504",
            "0000000101610000000a05040000000102623700"
        ));
        let v = decode_value(&dom(db_type::MULTISET, 0, 0, 0), &mset, 0);
        assert_eq!(json_of(&v, &d), "[\"a\",\"a\",\"b7\"]");
        // Untagged fixed elements with bound bits (element 1 NULL), element domain from the schema.
        let mut fixed = vec![0, 1, 0, 8, 0, 0, 0, 3, 0, 0, 0, 0b101];
        fixed.extend([0, 0, 0, 7, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]);
        let seq = Domain { set_domains: vec![dom(db_type::INTEGER, 0, 0, 0)], ..dom(db_type::SEQUENCE, 0, 0, 0) };
        assert_eq!(json_of(&decode_value(&seq, &fixed, 0), &seq), "[7,null,-1]");
        // A NULL tagged element and an empty set.
        let null_elem = hex("000e0008000000010000001000000014000000040009010000020140");
        assert_eq!(json_of(&decode_value(&seq, &null_elem, 0), &seq), "[null]");
        assert_eq!(json_of(&decode_value(&seq, &hex("0000000800000000"), 0), &seq), "[]");
        // Hostile counts and offsets.
        assert!(matches!(decode_value(&seq, &hex("000e00087fffffff00000010"), 0), Value::Unknown { .. }));
        assert!(matches!(decode_value(&seq, &hex("0001000840000000"), 0), Value::Unknown { .. }));
        let bad = hex("000e0008000000010000001000000099000000040009010000020140");
        assert_eq!(
            decode_value(&seq, &bad, 0),
            Value::Collection {
                kind: 8,
                items: vec![Value::Unknown {
                    reason: "element 0: offsets 16..153 outside the collection's free bytes".into()
                }]
            }
        );
        // Offsets pointing back (at the header, or at an earlier element) are refused: a
        // collection whose elements are itself would otherwise be decoded again inside itself,
        // twice per level for two such elements (2^64 values at the nesting limit).
        let unknown = |v: &Value| matches!(v, Value::Unknown { .. });
        let items = |v: Value| match v {
            Value::Collection { items, .. } => items,
            v => panic!("not a collection: {v:?}"),
        };
        let mut again = set.clone();
        again[16..24].copy_from_slice(&hex("0000002000000028")); // element 2 = element 0's bytes
        let whole = decode_value(&d, &again, 0);
        // Not passed off as a whole value: the column says why (the event's decode_error).
        assert!(whole.undecoded().is_some_and(|r| r.contains("element 1")), "{whole:?}");
        assert_eq!(decode_value(&d, &set, 0).undecoded(), None);
        let got = items(whole);
        assert_eq!(got[0], Value::Int(4));
        assert!(unknown(&got[1]) && unknown(&got[2]), "{got:?}");
        let mut header = set.clone();
        header[8..12].copy_from_slice(&hex("00000000")); // element 0 starts at the header
        let got = items(decode_value(&d, &header, 0));
        assert!(unknown(&got[0]), "{got:?}");
        assert_eq!(got[1..], [Value::Int(6), Value::Int(12)]);

        // JSON: {"a":1,"b":[true,null,"xy"],"c":2.5,"d":-5000000000,"e":4294967295}
        let mut j = Vec::new();
        let w = |j: &mut Vec<u8>, v: i32| j.extend(v.to_be_bytes());
        let s = |j: &mut Vec<u8>, t: &str| {
            j.extend(((t.len() + 1) as i32).to_be_bytes());
            j.extend(t.as_bytes());
            j.push(0);
            while !j.len().is_multiple_of(4) {
                j.push(0xAB); // pad bytes are not zeroed by the server
            }
        };
        w(&mut j, 6);
        w(&mut j, 5);
        s(&mut j, "a");
        w(&mut j, 2);
        w(&mut j, 0);
        w(&mut j, 1);
        s(&mut j, "b");
        w(&mut j, 7);
        w(&mut j, 3);
        w(&mut j, 8);
        w(&mut j, 1);
        w(&mut j, 0);
        w(&mut j, 5);
        s(&mut j, "xy");
        s(&mut j, "c");
        w(&mut j, 4);
        j.extend(2.5f64.to_bits().to_be_bytes());
        s(&mut j, "d");
        w(&mut j, 3);
        w(&mut j, 0);
        j.extend((-5_000_000_000i64).to_be_bytes());
        s(&mut j, "e\"");
        w(&mut j, 2);
        w(&mut j, 1);
        w(&mut j, -1);
        let jd = dom(db_type::JSON, 0, 0, 0);
        let v = decode_value(&jd, &j, 0);
        let text = r#"{"a":1,"b":[true,null,"xy"],"c":2.5,"d":-5000000000,"e\"":4294967295}"#;
        assert_eq!(v, Value::Json(text.into()));
        assert_eq!(json_of(&v, &jd), text);
        for n in 0..j.len() {
            assert!(matches!(decode_value(&jd, &j[..n], 0), Value::Unknown { .. }), "{n}");
        }
        // Deep nesting is refused, not recursed into.
        let mut deep = Vec::new();
        for _ in 0..10_000 {
            deep.extend([0, 0, 0, 7, 0, 0, 0, 1]);
        }
        assert!(matches!(decode_value(&jd, &deep, 0), Value::Unknown { .. }));
    }

    use crate::test_rng::Rng;

    #[test]
    fn row_hostile_input_never_panics() {
        let rep = example_rep();
        let rec = example_record();
        for n in 0..rec.len() {
            let r = decode_row(&rep, &rec[..n]);
            if n < 0x34 {
                assert!(r.is_err(), "truncated to {n}");
            } else {
                assert!(r.is_ok(), "{n}");
            }
        }
        // Bad offset-table entries give Unknown, not a panic.
        let mut bad = rec.clone();
        bad[0x11] = 0xF0;
        bad[0x12] = 0xF0;
        let v = decode_row(&rep, &bad).unwrap();
        assert!(matches!(v[3], Value::Unknown { .. }), "{:?}", v[3]);
        bad[0x10] = 0x01;
        assert!(matches!(decode_row(&rep, &bad).unwrap()[3], Value::Unknown { .. }));
        // A representation that does not add up.
        let mut wrong = rep.clone();
        wrong.n_var = 5;
        assert!(decode_row(&wrong, &rec).is_err());
        let mut wrong = rep.clone();
        wrong.n_fixed = 4;
        wrong.n_var = 1;
        assert!(decode_row(&wrong, &rec).is_err());
        // Random bytes through every kind of column and through whole rows.
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let kinds = [
            dom(db_type::STRING, -1, 0, 5),
            dom(db_type::VARBIT, -1, 0, 1),
            dom(db_type::SET, 0, 0, 0),
            dom(db_type::SEQUENCE, 0, 0, 0),
            dom(db_type::JSON, 0, 0, 0),
            dom(db_type::BLOB, 0, 0, 0),
            dom(db_type::CHAR, 1_000_000, 0, 5),
            dom(db_type::NUMERIC, 38, 60, 0),
        ];
        let wide = rep_all();
        for round in 0..20_000 {
            let len = (rng.next() % 96) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if round % 2 == 0 && len >= 8 {
                // Plausible headers and collection words make the decoders go deeper.
                b[0] = [0x00, 0x0E, 0xFF][(rng.next() % 3) as usize];
                b[3] = [6, 7, 8, 1][(rng.next() % 4) as usize];
                b[4..8].copy_from_slice(&((rng.next() % 5) as u32).to_be_bytes());
            }
            for k in &kinds {
                let v = decode_value(k, &b, 0);
                let _ = value_json(&v, k);
            }
            if let Ok(vals) = decode_row(&wide, &b) {
                for (v, a) in vals.iter().zip(&wide.attributes) {
                    let _ = value_json(v, &a.domain);
                }
            }
            let _ = decode_row(&rep, &b);
        }
    }

    /// A packed value: the domain words, then the value bytes.
    fn packed(words: &[u32], value: &[u8]) -> Vec<u8> {
        let mut b: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        b.extend(value);
        b
    }

    /// Packed values as attribute defaults are stored (class-records spec §2.4, §2.5.2); the
    /// first three are byte for byte what the p4k fixture holds.
    fn packed_samples() -> Vec<(Vec<u8>, Domain, &'static str)> {
        let int = dom(db_type::INTEGER, 10, 0, 0);
        let dt = dom(db_type::DATETIME, 23, 3, 0);
        let vc = Domain { collation: 1, ..dom(db_type::STRING, 40, 0, 5) };
        let num = dom(db_type::NUMERIC, 38, 0, 0);
        let mut unscaled_1250 = [0u8; 16];
        unscaled_1250[14..].copy_from_slice(&[0x04, 0xE2]);
        let en = Domain { enum_labels: vec!["red".into(), "green".into()], ..dom(db_type::ENUMERATION, 0, 0, 5) };
        vec![
            // Built-in INTEGER domain (index 2 = type + 1).
            (packed(&[0x0002_0100], &[0xFF, 0xFF, 0xFF, 0xFF]), int.clone(), "-1"),
            // Built-in DATETIME domain; JDN 2458850 = 2020-01-01, midnight.
            (packed(&[0x0021_0100], &[0x00, 0x25, 0x84, 0xE2, 0, 0, 0, 0]), dt.clone(), "\"2020-01-01 00:00:00.000\""),
            // NUMERIC(38,0) with precision in the word.
            (
                packed(&[0x0026_0016], &{
                    let mut x = [0u8; 16];
                    x[15] = 1;
                    x
                }),
                num,
                "\"1\"",
            ),
            // Plain INTEGER word.
            (packed(&[0x0000_0001], &42i32.to_be_bytes()), int, "42"),
            // DATETIME word with a time: 2024-03-15 10:30:00.
            (
                packed(&[0x0000_0020], &[0x00, 0x25, 0x8A, 0xE1, 0x02, 0x40, 0xC8, 0x40]),
                dt,
                "\"2024-03-15 10:30:00.000\"",
            ),
            // VARCHAR(40) utf8 (codeset 5 in bits 8-15) + collation word (utf8_bin, enforce flag).
            (packed(&[0x0028_0504, 0x8000_0001], &[3, b'a', b'b', b'c', 0, 0, 0, 0]), vc.clone(), "\"abc\""),
            // STRING: precision 0xFFFF in the word, collation word, then the extended precision word.
            (
                packed(&[0xFFFF_0504, 0x0000_0001, 0x3FFF_FFFF], &[6, b'h', b'e', b'l', b'l', b'o', b'!', 0]),
                vc,
                "\"hello!\"",
            ),
            // NUMERIC(10,2): scale in bits 8-15.
            (packed(&[0x000A_0216], &unscaled_1250), dom(db_type::NUMERIC, 10, 2, 0), "\"12.50\""),
            // NUMERIC with extended precision and scale words.
            (packed(&[0xFFFF_FF16, 40, 2], &unscaled_1250), dom(db_type::NUMERIC, 40, 2, 0), "\"12.50\""),
            // ENUM with collation word and its own labels; the attribute's labels name the value.
            (
                packed(&[0x0000_0323, 0x0000_0001, 0x0000_0008, 2], &{
                    let mut x = vec![3, b'r', b'e', b'd', 0, 0, 0, 0, 5, b'g', b'r', b'e', b'e', b'n', 0, 0];
                    x.extend([0, 2, 0, 0]);
                    x
                }),
                en,
                "\"green\"",
            ),
            // CHAR(3) utf8: 12 bytes, space padded.
            (
                packed(&[0x0003_0519, 0x0000_0001], b"ab          "),
                Domain { collation: 1, ..dom(db_type::CHAR, 3, 0, 5) },
                "\"ab \"",
            ),
        ]
    }

    #[test]
    fn row_packed_values() {
        for (b, d, want) in packed_samples() {
            assert_eq!(packed_value_json(&b, &d).as_deref(), Some(want), "{b:02x?}");
        }
        // A packed type other than the attribute's is decoded with the packed domain alone.
        let b = packed(&[0x0002_0100], &7i32.to_be_bytes());
        assert_eq!(packed_value_json(&b, &dom(db_type::BIGINT, 19, 0, 0)).as_deref(), Some("7"));
        // CHAR with floating precision is packed in the VARCHAR form.
        let b = packed(&[0x0000_0519, 1], &[2, b'x', b'y', 0]);
        assert_eq!(packed_value_json(&b, &dom(db_type::CHAR, 5, 0, 5)).as_deref(), Some("\"xy\""));
        // NULL: no bytes, the null flag on a built-in or a plain word (as in the fixtures:
        // `00 30 01 40`), or type NULL.
        for b in [vec![], packed(&[0x0030_0140], &[]), packed(&[0x0000_0041], &[0, 0, 0, 1]), packed(&[0], &[])] {
            assert_eq!(packed_value_json(&b, &dom(db_type::INTEGER, 10, 0, 0)), None, "{b:02x?}");
        }
    }

    #[test]
    fn row_packed_values_hostile() {
        for (b, d, _) in packed_samples() {
            // Every prefix that cuts into the domain words or the value's own bytes is None (a
            // string's NUL terminator and padding are not needed to read it).
            let padding = match d.db_type {
                db_type::STRING => b.iter().rev().take_while(|&&x| x == 0).count(),
                db_type::ENUMERATION => 2,
                _ => 0,
            };
            for n in 0..b.len() - padding {
                assert_eq!(packed_value_json(&b[..n], &d), None, "prefix {n} of {b:02x?}");
            }
            // Extreme words anywhere, and random damage: never a panic.
            for at in (0..b.len().saturating_sub(3)).step_by(4) {
                for w in [0xFFFF_FFFFu32, 0x7FFF_FFFF, 0x8000_0000, 0x0000_FFFF, 0xFFFF_01FF, 0x0000_0788] {
                    let mut x = b.clone();
                    x[at..at + 4].copy_from_slice(&w.to_be_bytes());
                    let _ = packed_value_json(&x, &d);
                }
            }
            let mut rng = Rng(0x1234_5678_9ABC_DEF1 ^ b.len() as u64);
            for _ in 0..3000 {
                let mut x = b.clone();
                for _ in 0..1 + rng.next() % 3 {
                    let at = (rng.next() % x.len() as u64) as usize;
                    x[at] = rng.next() as u8;
                }
                let _ = packed_value_json(&x, &d);
            }
        }
        // Hostile enumeration counts, nested set domains, long-string lengths: None, no panic.
        let d = dom(db_type::ENUMERATION, 0, 0, 5);
        assert_eq!(packed_value_json(&packed(&[0x0000_0123, 8, 0x7FFF_FFFF], &[0, 0, 0, 0]), &d), None);
        let deep: Vec<u32> = std::iter::repeat_n(0x0000_0188u32, 200).collect();
        assert_eq!(packed_value_json(&packed(&deep, &[]), &dom(db_type::SEQUENCE, 0, 0, 0)), None);
        let vc = dom(db_type::STRING, -1, 0, 5);
        assert_eq!(
            packed_value_json(&packed(&[0x0000_0504, 1], &[0xFF, 0, 0, 0, 0, 0x7F, 0xFF, 0xFF, 0xFF]), &vc),
            None
        );
        assert_eq!(packed_value_json(&packed(&[0x0000_0504, 1], &[0xFF, 0x7F, 0, 0, 0, 0, 0, 1, 0]), &vc), None);
    }

    /// Every fixed type, then every variable type; repid taken from any record (-1).
    fn rep_all() -> Representation {
        rep(
            -1,
            &[
                ("i", dom(db_type::INTEGER, 0, 0, 0)),
                ("s", dom(db_type::SHORT, 0, 0, 0)),
                ("b", dom(db_type::BIGINT, 0, 0, 0)),
                ("tz", dom(db_type::DATETIMETZ, 0, 0, 0)),
                ("m", dom(db_type::MONETARY, 0, 0, 0)),
                ("c", dom(db_type::CHAR, 2, 0, 5)),
                ("v", dom(db_type::STRING, -1, 0, 5)),
                ("j", dom(db_type::JSON, 0, 0, 0)),
                ("q", dom(db_type::SEQUENCE, 0, 0, 0)),
            ],
        )
    }
}
