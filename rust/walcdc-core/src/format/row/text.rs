//! Text forms of values as CUBRID's CDC API shows them (dates, times with zones, NUMERIC,
//! MONETARY, BIT, strings of every charset) and the canonical JSON of a row's values.

use super::*;
use serde_json::ser::Formatter as _;

/// Appends `s` as a JSON string literal (escapes as serde_json writes them).
pub fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    push_json_str_body(out, s);
    out.push('"');
}

/// [`push_json_str`] without the quotes.
fn push_json_str_body(out: &mut String, s: &str) {
    // Most text needs no escape: one pass that the compiler vectorizes finds out.
    if !s.bytes().fold(false, |any, b| any | (b < 0x20) | (b == b'"') | (b == b'\\')) {
        out.push_str(s);
        return;
    }
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if esc.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(esc);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

/// Appends ISO-8859-1 text as a JSON string literal: each byte is the character of its code.
fn push_latin1_json(out: &mut String, bytes: &[u8]) {
    out.push('"');
    // ASCII runs are the same text in UTF-8 (and hold every character JSON escapes).
    for run in bytes.split_inclusive(|b| !b.is_ascii()) {
        let (ascii, high) = match run.split_last() {
            Some((&last, head)) if !last.is_ascii() => (head, Some(last as char)),
            _ => (run, None),
        };
        push_json_str_body(out, std::str::from_utf8(ascii).unwrap_or_default());
        out.extend(high);
    }
    out.push('"');
}

/// A double as JSON, `null` when not finite.
pub(super) fn push_json_f64(out: &mut String, v: f64) {
    if v.is_finite() {
        push_serde_float(out, |f, w| f.write_f64(w, v));
    } else {
        out.push_str("null");
    }
}

/// A finite float as JSON, in serde_json's own digits (its formatter, written to the stack:
/// nothing allocated); JSON rows have always been serde_json's text (`1e+16`, not `1e16`).
fn push_serde_float(
    out: &mut String,
    write: impl FnOnce(&mut serde_json::ser::CompactFormatter, &mut std::io::Cursor<&mut [u8]>) -> std::io::Result<()>,
) {
    // The longest float text is 24 bytes (`-2.2250738585072014e-308`).
    let mut buf = [0u8; 40];
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    if write(&mut serde_json::ser::CompactFormatter, &mut cursor).is_ok() {
        let n = cursor.position() as usize;
        if let Ok(text) = std::str::from_utf8(&buf[..n]) {
            out.push_str(text);
            return;
        }
    }
    out.push_str("null");
}

/// Proleptic calendar date of a Julian Day Number as CUBRID decodes it: Julian calendar before
/// 1582-10-15, Gregorian from then on. Returns (year, month, day).
pub fn jdn_to_ymd(jdn: i64) -> (i64, u32, u32) {
    // Richards' algorithm; the Gregorian correction applies only from the switch on.
    let mut f = jdn + 1401;
    if jdn >= GREGORIAN_START_JDN {
        f += (((4 * jdn + 274_277).div_euclid(146_097)) * 3).div_euclid(4) - 38;
    }
    let e = 4 * f + 3;
    let g = e.rem_euclid(1461).div_euclid(4);
    let h = 5 * g + 2;
    let day = h.rem_euclid(153).div_euclid(5) + 1;
    let month = (h.div_euclid(153) + 2).rem_euclid(12) + 1;
    let year = e.div_euclid(1461) - 4716 + (14 - month) / 12;
    (year, month as u32, day as u32)
}

/// Julian Day Number of a calendar date (inverse of [`jdn_to_ymd`]).
pub fn ymd_to_jdn(year: i64, month: u32, day: u32) -> i64 {
    let (y, m, d) = (year, month as i64, day as i64);
    let a = (14 - m) / 12;
    let yy = y + 4800 - a;
    let mm = m + 12 * a - 3;
    let julian = d + (153 * mm + 2) / 5 + 365 * yy + yy.div_euclid(4) - 32083;
    if (y, m, d) >= (1582, 10, 15) {
        d + (153 * mm + 2) / 5 + 365 * yy + yy.div_euclid(4) - yy.div_euclid(100) + yy.div_euclid(400) - 32045
    } else {
        julian
    }
}

// The text forms below are written into a caller's string: a row's JSON is written in place,
// with nothing allocated per value.

fn write_date(out: &mut String, jdn: i64) {
    if jdn == 0 {
        out.push_str("0000-00-00");
        return;
    }
    let (y, m, d) = jdn_to_ymd(jdn);
    let _ = write!(out, "{y:04}-{m:02}-{d:02}");
}

fn write_time_ms(out: &mut String, ms: i64, with_ms: bool) {
    let s = ms.div_euclid(1000);
    let (h, mi, se) = (s / 3600, (s / 60) % 60, s % 60);
    let _ = write!(out, "{h:02}:{mi:02}:{se:02}");
    if with_ms {
        let _ = write!(out, ".{:03}", ms.rem_euclid(1000));
    }
}

/// `YYYY-MM-DD HH:MM:SS[.fff]` of a (day number, milliseconds) pair; the zero date stays zero.
fn write_datetime(out: &mut String, jdn: i64, ms: i64, with_ms: bool) {
    if jdn == 0 && ms == 0 {
        out.push_str("0000-00-00 ");
        write_time_ms(out, 0, with_ms);
        return;
    }
    write_date(out, jdn);
    out.push(' ');
    write_time_ms(out, ms, with_ms);
}

/// A point in time as (day number, ms) shifted by `secs` seconds.
pub(super) fn shift(jdn: i64, ms: i64, secs: i64) -> (i64, i64) {
    let total = jdn * MS_PER_DAY + ms + secs * 1000;
    (total.div_euclid(MS_PER_DAY), total.rem_euclid(MS_PER_DAY))
}

pub(super) fn timestamp_parts(secs: u32) -> (i64, i64) {
    let s = secs as i64;
    (UNIX_EPOCH_JDN + s / 86_400, (s % 86_400) * 1000)
}

/// What a `TZ_ID` says: a fixed offset in seconds, or an unresolved geographic zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TzId {
    Offset(i64),
    /// Zone id (index into the server's timezone library), GMT-offset rule id, DST rule id.
    Zone {
        zone: u32,
        gmt_rule: u32,
        dst_rule: u32,
    },
    Invalid(u32),
}

/// Splits a `TZ_ID` (§8.4): top bits `01` / `10` = fixed positive / negative offset in seconds,
/// `00` = geographic zone.
pub fn decode_tz_id(tz: u32) -> TzId {
    match tz >> 30 {
        1 => TzId::Offset((tz & 0x3FFF_FFFF) as i64),
        2 => TzId::Offset(-((tz & 0x3FFF_FFFF) as i64)),
        0 => TzId::Zone { zone: (tz >> 16) & 0x3FF, gmt_rule: (tz >> 8) & 0xFF, dst_rule: tz & 0xFF },
        _ => TzId::Invalid(tz),
    }
}

/// `YYYY-MM-DD HH:MM:SS[.fff] <zone>` for a UTC instant with a `TZ_ID`: a fixed offset is
/// shown as local time with `+HH:MM`; a geographic zone cannot be resolved without the server's
/// timezone library, so the instant stays in UTC, followed by the raw id.
fn write_tz(out: &mut String, jdn: i64, ms: i64, tz: u32, with_ms: bool) {
    match decode_tz_id(tz) {
        TzId::Offset(off) => {
            let (j, m) = shift(jdn, ms, off);
            let a = off.unsigned_abs();
            let sign = if off < 0 { '-' } else { '+' };
            write_datetime(out, j, m, with_ms);
            let _ = write!(out, " {sign}{:02}:{:02}", a / 3600, (a / 60) % 60);
            if a % 60 != 0 {
                let _ = write!(out, ":{:02}", a % 60);
            }
        }
        TzId::Zone { zone, gmt_rule, dst_rule } => {
            write_datetime(out, jdn, ms, with_ms);
            let _ = write!(
                out,
                " UTC (unresolved zone: tz_id 0x{tz:08X}, zone {zone}, gmt rule {gmt_rule}, dst rule {dst_rule})"
            );
        }
        TzId::Invalid(_) => {
            write_datetime(out, jdn, ms, with_ms);
            let _ = write!(out, " UTC (invalid tz_id 0x{tz:08X})");
        }
    }
}

/// `numeric_db_value_print`: the unscaled value with a decimal point `scale` digits from the
/// right and at least one digit before it.
pub fn numeric_text(unscaled: i128, scale: i32) -> String {
    let mut out = String::new();
    write_numeric(&mut out, unscaled, scale);
    out
}

fn write_numeric(out: &mut String, unscaled: i128, scale: i32) {
    let mut buffer = itoa::Buffer::new();
    let digits = buffer.format(unscaled.unsigned_abs());
    if unscaled < 0 {
        out.push('-');
    }
    if scale <= 0 {
        out.push_str(digits);
        return;
    }
    if scale > 38 {
        let _ = write!(out, "{digits}E-{scale}");
        return;
    }
    let s = scale as usize;
    if digits.len() <= s {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', s - digits.len()));
        out.push_str(digits);
    } else {
        let (int, frac) = digits.split_at(digits.len() - s);
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    }
}

/// Currency sign CUBRID prints before a MONETARY amount (`DB_CURRENCY` order).
pub fn currency_symbol(currency: i32) -> &'static str {
    const SYMBOLS: [&str; 24] = [
        "$", "Y", "&", "\\", "TL", "KHR", "CNY", "INR", "RUB", "AUD", "CAD", "BRL", "RON", "EUR", "CHF", "DKK", "NOK",
        "BGN", "VND", "CZK", "PLN", "SEK", "HRK", "RSD",
    ];
    usize::try_from(currency).ok().and_then(|i| SYMBOLS.get(i)).copied().unwrap_or("")
}

fn write_monetary(out: &mut String, currency: i32, amount: f64) {
    let amount = if amount.is_infinite() { f64::MAX.copysign(amount) } else { amount };
    out.push_str(currency_symbol(currency));
    if amount.is_nan() {
        out.push_str("nan");
    } else {
        let _ = write!(out, "{amount:.2}");
    }
}

/// `X'<hex>'`: one hex digit per 4 bits of the value.
fn write_bit(out: &mut String, bytes: &[u8], bits: u32) {
    let nibbles = (bits as usize).div_ceil(4).min(bytes.len() * 2);
    out.push_str("X'");
    for i in 0..nibbles {
        let b = bytes[i / 2];
        let n = if i % 2 == 0 { b >> 4 } else { b & 0xF };
        out.push(char::from_digit(n as u32, 16).unwrap_or('?'));
    }
    out.push('\'');
}

/// The text of a string in its codeset: utf8 as is (invalid bytes become U+FFFD), iso88591 as
/// Latin-1, euckr decoded from EUC-KR; other codesets are read as UTF-8.
pub fn string_text(bytes: &[u8], codeset: i32) -> String {
    match codeset {
        3 => bytes.iter().map(|&b| b as char).collect(),
        4 => encoding_rs::EUC_KR.decode_without_bom_handling(bytes).0.into_owned(),
        _ => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// The value as JSON text in the forms CUBRID's CDC API uses (§7.6): numbers for integer and
/// floating types; strings for NUMERIC (`"123.4500"`), MONETARY (`"$50244.71"`), CHAR (padded),
/// VARCHAR, NCHAR/VARNCHAR (plain Unicode text, where CUBRID's API shows `N'…'`), BIT/VARBIT (`"X'1da1'"`), DATE (`"YYYY-MM-DD"`), TIME
/// (`"HH:MM:SS"`), TIMESTAMP (`"YYYY-MM-DD HH:MM:SS"`), DATETIME (`"… HH:MM:SS.fff"`),
/// TIMESTAMPLTZ/DATETIMELTZ in UTC with `" UTC"`, TIMESTAMPTZ/DATETIMETZ in their fixed offset's
/// local time with `" +09:00"` (a geographic zone id stays UTC and is shown raw), ENUM (its
/// label), OBJECT (`"volid|pageid|slotid"`), BLOB/CLOB (the locator); JSON as JSON; collections
/// as arrays; NULL and undecodable values as `null`.
///
/// TIMESTAMP (UTC seconds) and the LTZ types are shown in UTC, which is what the API shows for a
/// server running with `timezone=UTC` (as the fixtures' servers did); DATETIME is wall-clock time
/// and shown as stored.
pub fn value_json(v: &Value, domain: &Domain) -> String {
    let mut out = String::new();
    value_json_into(&mut out, v, domain);
    out
}

/// [`value_json`], appended to `out` (a row's JSON is written in place, value after value).
pub fn value_json_into(out: &mut String, v: &Value, domain: &Domain) {
    match v {
        Value::Null | Value::Unknown { .. } => out.push_str("null"),
        // The same digits as `Display`, without the formatting machinery (a row has many).
        Value::Int(i) => out.push_str(itoa::Buffer::new().format(*i)),
        Value::Float(f) if f.is_finite() => push_serde_float(out, |fmt, w| fmt.write_f32(w, *f)),
        Value::Float(_) => out.push_str("null"),
        Value::Double(f) => push_json_f64(out, *f),
        Value::Json(text) => out.push_str(text),
        Value::Enum { index, label } => match label {
            Some(l) => push_json_str(out, l),
            None if *index == 0 => out.push_str("\"\""),
            None => {
                let _ = write!(out, "{index}");
            }
        },
        Value::Collection { items, .. } => {
            let elem = match domain.set_domains.as_slice() {
                [one] => one,
                _ => &Domain::default(),
            };
            out.push('[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                value_json_into(out, it, elem);
            }
            out.push(']');
        }
        // Valid UTF-8 (nearly every string) is escaped from the row's bytes, not copied first.
        Value::String { bytes, codeset } => push_text_json(out, bytes, *codeset),
        // Texts of digits, dates and zones: nothing in them to escape (a currency sign may be
        // a backslash: MONETARY is escaped).
        Value::Numeric { .. }
        | Value::Bit { .. }
        | Value::Date(_)
        | Value::Time(_)
        | Value::Timestamp(_)
        | Value::TimestampLtz(_)
        | Value::TimestampTz { .. }
        | Value::Datetime { .. }
        | Value::DatetimeLtz { .. }
        | Value::DatetimeTz { .. }
        | Value::Oid(_) => {
            out.push('"');
            value_text_into(out, v);
            out.push('"');
        }
        _ => push_json_str(out, &value_text(v).unwrap_or_default()),
    }
}

/// Appends a string's bytes in `codeset` as a JSON string literal, the text [`string_text`]
/// gives: ISO-8859-1 and UTF-8 (nearly every string) escaped from the bytes themselves, not
/// copied first; invalid UTF-8 becomes U+FFFD.
pub(super) fn push_text_json(out: &mut String, bytes: &[u8], codeset: i32) {
    match codeset {
        3 => push_latin1_json(out, bytes),
        4 => push_json_str(out, &string_text(bytes, codeset)),
        _ => match std::str::from_utf8(bytes) {
            Ok(text) => push_json_str(out, text),
            Err(_) => push_json_str(out, &String::from_utf8_lossy(bytes)),
        },
    }
}

/// Whether two values are the same stored value: floating-point values compare by their bits
/// (so a NaN equals itself and 0.0 differs from -0.0), everything else by equality.
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
        (Value::Monetary { currency: c1, amount: a1 }, Value::Monetary { currency: c2, amount: a2 }) => {
            c1 == c2 && a1.to_bits() == a2.to_bits()
        }
        (Value::Collection { kind: k1, items: i1 }, Value::Collection { kind: k2, items: i2 }) => {
            k1 == k2 && i1.len() == i2.len() && i1.iter().zip(i2).all(|(x, y)| same_value(x, y))
        }
        _ => a == b,
    }
}

/// The CDC text form of a scalar value that the API sends as a string (see [`value_json`]);
/// `None` for NULL, numbers, JSON, collections and undecodable values.
pub fn value_text(v: &Value) -> Option<String> {
    let mut out = String::new();
    value_text_into(&mut out, v).then_some(out)
}

/// [`value_text`], appended to `out`; false (nothing appended) where `value_text` is `None`.
pub fn value_text_into(out: &mut String, v: &Value) -> bool {
    match v {
        Value::Numeric { unscaled, scale } => write_numeric(out, *unscaled, *scale),
        Value::Monetary { currency, amount } => write_monetary(out, *currency, *amount),
        Value::String { bytes, codeset } => out.push_str(&string_text(bytes, *codeset)),
        Value::Bit { bytes, bits } => write_bit(out, bytes, *bits),
        Value::Date(jdn) => write_date(out, *jdn as i64),
        Value::Time(s) => write_time_ms(out, *s as i64 * 1000, false),
        Value::Timestamp(0) => out.push_str("0000-00-00 00:00:00"),
        Value::Timestamp(s) => {
            let (j, m) = timestamp_parts(*s);
            write_datetime(out, j, m, false)
        }
        Value::TimestampLtz(0) => out.push_str("0000-00-00 00:00:00 UTC"),
        Value::TimestampLtz(s) => {
            let (j, m) = timestamp_parts(*s);
            write_datetime(out, j, m, false);
            out.push_str(" UTC");
        }
        Value::TimestampTz { secs, tz } => {
            let (j, m) = timestamp_parts(*secs);
            write_tz(out, j, m, *tz, false)
        }
        Value::Datetime { jdn, ms } => write_datetime(out, *jdn as i64, *ms as i64, true),
        Value::DatetimeLtz { jdn, ms } => {
            write_datetime(out, *jdn as i64, *ms as i64, true);
            out.push_str(" UTC");
        }
        Value::DatetimeTz { jdn, ms, tz } => write_tz(out, *jdn as i64, *ms as i64, *tz, true),
        Value::Enum { label: Some(l), .. } => out.push_str(l),
        Value::Oid(o) => {
            let _ = write!(out, "{o}");
        }
        Value::Lob { locator, .. } => out.push_str(locator),
        _ => return false,
    }
    true
}
