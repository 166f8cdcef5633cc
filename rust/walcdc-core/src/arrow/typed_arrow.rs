//! One table's changes with typed columns: `before` and `after` as Arrow structs of the table's
//! columns, filled straight from decoded heap values (no JSON text in between).
//!
//! [`arrow_type`] is the one mapping of CUBRID types to Arrow types:
//!
//! | CUBRID type                          | Arrow type                                           |
//! |--------------------------------------|------------------------------------------------------|
//! | INTEGER / SMALLINT / BIGINT          | int32 / int16 / int64                                |
//! | FLOAT / DOUBLE                       | float32 / float64                                    |
//! | NUMERIC(p, s)                        | decimal128(p, s)                                     |
//! | MONETARY                             | struct<amount: float64, currency: utf8>              |
//! | CHAR, VARCHAR, NCHAR, VARNCHAR       | utf8 (every charset to Unicode; CHAR padding kept)   |
//! | BIT(n)                               | binary (the n bits left-aligned, as stored)          |
//! | VARBIT                               | struct<bytes: binary, bits: int32> (its bit length)  |
//! | DATE                                 | date32                                               |
//! | TIME                                 | time32[s]                                            |
//! | TIMESTAMP, TIMESTAMPLTZ              | timestamp[s, UTC]                                    |
//! | TIMESTAMPTZ                          | struct<instant: timestamp[s, UTC], zone: utf8>       |
//! | DATETIME                             | timestamp[ms] (wall clock, no zone)                  |
//! | DATETIMELTZ                          | timestamp[ms, UTC]                                   |
//! | DATETIMETZ                           | struct<instant: timestamp[ms, UTC], zone: utf8>      |
//! | ENUM                                 | dictionary<int16, utf8> of its labels                |
//! | JSON                                 | utf8, field metadata `walcdc.json: true`             |
//! | SET, MULTISET, SEQUENCE              | list of the element type (utf8 JSON when mixed)      |
//! | BLOB, CLOB                           | utf8 (the locator)                                   |
//! | OBJECT (OID)                         | utf8 (`volid|pageid|slotid`)                         |
//!
//! Dates carry CUBRID's calendar labels: a day before 1582-10-15 (Julian calendar in CUBRID) is
//! the proleptic Gregorian day with the same year, month and day, so what a user wrote reads back
//! the same. CUBRID's zero date/time (`0000-00-00`) is null. `zone` is what the CDC text form
//! shows after the local time: `+09:00` for a fixed offset (the instant is UTC), or, for a
//! geographic zone the log cannot resolve, `UTC (unresolved zone: tz_id 0x…, …)`.
//!
//! Rows of older representations are matched by attribute id; columns a row does not have are
//! null. A value that does not fit its column (a type changed by ALTER) is null, and the event's
//! `decode_error` says which column and why.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder, Int16Builder, Int32Builder,
    Int64Builder, ListBuilder, StringBuilder, StringDictionaryBuilder, Time32SecondBuilder,
    TimestampMillisecondBuilder, TimestampSecondBuilder,
};
use arrow_array::types::Int16Type;
use arrow_array::{ArrayRef, ListArray, RecordBatch, StringArray, StructArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, SchemaRef, TimeUnit};

use crate::arrow::changes_arrow::{changes_schema, ChangesBuilder, EventBatchBuilder};
use crate::arrow::jsonl::JSON_METADATA_KEY;
use crate::cdc::event::Event;
use crate::cdc::options::ImageMode;
use crate::format::row::RowValues;
use crate::format::row::{self, Value};
use crate::format::schema::{db_type, Domain};
use crate::format::supplemental::Oid;
use crate::log::logset::LogSet;
use crate::log::source::LogSource;

pub use crate::cdc::catalog::TableColumn;

fn utc(unit: TimeUnit) -> DataType {
    DataType::Timestamp(unit, Some("UTC".into()))
}

fn zoned(unit: TimeUnit) -> DataType {
    DataType::Struct(Fields::from(vec![
        Field::new("instant", utc(unit), true),
        Field::new("zone", DataType::Utf8, true),
    ]))
}

fn numeric_precision_scale(d: &Domain) -> (u8, i8) {
    let p = if (1..=38).contains(&d.precision) { d.precision } else { 38 };
    (p as u8, d.scale.clamp(0, p) as i8)
}

/// The one element domain of a collection whose elements are typed (None: mixed or unknown).
fn element_domain(d: &Domain) -> Option<&Domain> {
    match d.set_domains.as_slice() {
        [one] => Some(one),
        _ => None,
    }
}

/// The Arrow type of a column of domain `d` (the table in the module's documentation).
pub fn arrow_type(d: &Domain) -> DataType {
    match d.db_type {
        db_type::INTEGER => DataType::Int32,
        db_type::SHORT => DataType::Int16,
        db_type::BIGINT => DataType::Int64,
        db_type::FLOAT => DataType::Float32,
        db_type::DOUBLE => DataType::Float64,
        db_type::NUMERIC => {
            let (p, s) = numeric_precision_scale(d);
            DataType::Decimal128(p, s)
        }
        db_type::MONETARY => DataType::Struct(Fields::from(vec![
            Field::new("amount", DataType::Float64, true),
            Field::new("currency", DataType::Utf8, true),
        ])),
        db_type::BIT => DataType::Binary,
        db_type::VARBIT => DataType::Struct(Fields::from(vec![
            Field::new("bytes", DataType::Binary, true),
            Field::new("bits", DataType::Int32, true),
        ])),
        db_type::DATE => DataType::Date32,
        db_type::TIME => DataType::Time32(TimeUnit::Second),
        db_type::TIMESTAMP | db_type::TIMESTAMPLTZ => utc(TimeUnit::Second),
        db_type::TIMESTAMPTZ => zoned(TimeUnit::Second),
        db_type::DATETIME => DataType::Timestamp(TimeUnit::Millisecond, None),
        db_type::DATETIMELTZ => utc(TimeUnit::Millisecond),
        db_type::DATETIMETZ => zoned(TimeUnit::Millisecond),
        db_type::ENUMERATION => DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8)),
        db_type::SET | db_type::MULTISET | db_type::SEQUENCE => DataType::List(Arc::new(item_field(d))),
        _ => DataType::Utf8,
    }
}

/// A field of domain `d` (JSON columns marked in the metadata, as in `read_changes`).
pub fn column_field(name: &str, d: &Domain) -> Field {
    let f = Field::new(name, arrow_type(d), true);
    if d.db_type == db_type::JSON {
        f.with_metadata(HashMap::from([(JSON_METADATA_KEY.to_string(), "true".to_string())]))
    } else {
        f
    }
}

fn item_field(d: &Domain) -> Field {
    match element_domain(d) {
        Some(e) => column_field("item", e),
        None => Field::new("item", DataType::Utf8, true),
    }
}

/// The field metadata key holding a column's attribute id (stable across RENAME COLUMN).
pub const ATTRIBUTE_ID_KEY: &str = "walcdc.attribute_id";

/// The struct type of a table's rows; each field says its attribute id in its metadata.
pub fn row_fields(columns: &[TableColumn]) -> Fields {
    columns
        .iter()
        .map(|c| {
            let f = column_field(&c.name, &c.domain);
            let mut meta = f.metadata().clone();
            meta.insert(ATTRIBUTE_ID_KEY.to_string(), c.id.to_string());
            f.with_metadata(meta)
        })
        .collect()
}

/// The schema of one table's changes: the columns of `read_changes()` without the raw images
/// and the class OID, `before` / `after` typed structs of the table's columns.
pub fn table_changes_schema(columns: &[TableColumn]) -> SchemaRef {
    let row = DataType::Struct(row_fields(columns));
    let fields: Vec<Field> = changes_schema()
        .fields()
        .iter()
        .filter(|f| !DROPPED.contains(&f.name().as_str()))
        .map(|f| match f.name().as_str() {
            "before" | "after" => Field::new(f.name(), row.clone(), true),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// Columns of `read_changes()` a typed table leaves out.
const DROPPED: [&str; 3] = ["before_image", "after_image", "class_oid"];

// ---------------------------------------------------------------------------------------------
// Values to Arrow

/// Day count since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The day (since 1970-01-01) with the calendar label CUBRID gives day number `jdn`.
fn label_days(jdn: i32) -> i64 {
    let (y, m, d) = row::text::jdn_to_ymd(jdn as i64);
    days_from_civil(y, m, d)
}

/// What the CDC text form shows after the local time of a TZ value (see the module docs).
pub fn zone_text(tz: u32) -> String {
    match row::text::decode_tz_id(tz) {
        row::text::TzId::Offset(off) => {
            let a = off.unsigned_abs();
            let sign = if off < 0 { '-' } else { '+' };
            let mut s = format!("{sign}{:02}:{:02}", a / 3600, (a / 60) % 60);
            if a % 60 != 0 {
                s.push_str(&format!(":{:02}", a % 60));
            }
            s
        }
        row::text::TzId::Zone { zone, gmt_rule, dst_rule } => {
            format!("UTC (unresolved zone: tz_id 0x{tz:08X}, zone {zone}, gmt rule {gmt_rule}, dst rule {dst_rule})")
        }
        row::text::TzId::Invalid(_) => format!("UTC (invalid tz_id 0x{tz:08X})"),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "NULL",
        Value::Int(_) => "integer",
        Value::Float(_) | Value::Double(_) => "floating-point",
        Value::Numeric { .. } => "NUMERIC",
        Value::Monetary { .. } => "MONETARY",
        Value::String { .. } => "string",
        Value::Bit { .. } => "bit string",
        Value::Date(_) => "DATE",
        Value::Time(_) => "TIME",
        Value::Timestamp(_) | Value::TimestampLtz(_) => "TIMESTAMP",
        Value::TimestampTz { .. } => "TIMESTAMPTZ",
        Value::Datetime { .. } | Value::DatetimeLtz { .. } => "DATETIME",
        Value::DatetimeTz { .. } => "DATETIMETZ",
        Value::Enum { .. } => "ENUM",
        Value::Oid(_) => "OID",
        Value::Json(_) => "JSON",
        Value::Collection { .. } => "collection",
        Value::Lob { .. } => "LOB",
        Value::Unknown { .. } => "undecodable",
    }
}

/// The text a string column shows for any value: the CDC text form (numbers, JSON and
/// collections as their JSON text).
fn any_text(v: &Value, d: &Domain) -> Option<String> {
    match v {
        Value::Null | Value::Unknown { .. } => None,
        Value::String { bytes, codeset } => Some(row::text::string_text(bytes, *codeset)),
        Value::Json(t) => Some(t.clone()),
        Value::Enum { index: 0, label: None } => Some(String::new()),
        _ => row::text::value_text(v).or_else(|| Some(row::text::value_json(v, d))),
    }
}

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

/// `unscaled / 10^scale` as an unscaled value of `to_scale` digits, within `precision` digits.
fn rescale(unscaled: i128, scale: i32, precision: u8, to_scale: i8) -> Result<i128, String> {
    let to = to_scale as i32;
    // Scales come from the log: a damaged one must not overflow the arithmetic.
    let diff = |a: i32, b: i32| u32::try_from(a as i64 - b as i64).ok();
    let v = if scale <= to {
        diff(to, scale).and_then(pow10).and_then(|f| unscaled.checked_mul(f))
    } else {
        diff(scale, to).and_then(pow10).filter(|f| unscaled % f == 0).map(|f| unscaled / f)
    };
    let v = v.ok_or_else(|| format!("{} does not fit NUMERIC(.., {to})", row::text::numeric_text(unscaled, scale)))?;
    if pow10(precision as u32).is_some_and(|lim| v.unsigned_abs() >= lim as u128) {
        return Err(format!("{} has more than {precision} digits", row::text::numeric_text(unscaled, scale)));
    }
    Ok(v)
}

fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::Numeric { unscaled, scale } if *scale >= 0 => {
            let f = pow10(u32::try_from(*scale).ok()?)?;
            (unscaled % f == 0).then(|| i64::try_from(unscaled / f).ok()).flatten()
        }
        Value::Numeric { unscaled, scale } => {
            let f = pow10(u32::try_from(-(*scale as i64)).ok()?)?;
            i64::try_from(unscaled.checked_mul(f)?).ok()
        }
        Value::String { bytes, codeset } => row::text::string_text(bytes, *codeset).trim().parse().ok(),
        _ => None,
    }
}

fn float_of(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f as f64),
        Value::Double(f) => Some(*f),
        Value::Numeric { unscaled, scale } => row::text::numeric_text(*unscaled, *scale).parse().ok(),
        Value::String { bytes, codeset } => row::text::string_text(bytes, *codeset).trim().parse().ok(),
        _ => None,
    }
}

/// A builder of one column (or collection element) of a typed row.
enum Col {
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    Decimal(Decimal128Builder, u8, i8),
    Text(StringBuilder, Domain),
    Binary(BinaryBuilder),
    VarBit {
        bytes: BinaryBuilder,
        bits: Int32Builder,
        valid: NullBufferBuilder,
        fields: Fields,
    },
    Date(Date32Builder),
    Time(Time32SecondBuilder),
    /// TIMESTAMP / TIMESTAMPLTZ: UTC seconds.
    Seconds(TimestampSecondBuilder),
    /// DATETIME (naive) or DATETIMELTZ (UTC): milliseconds of the labelled day.
    Millis(TimestampMillisecondBuilder),
    Money {
        amount: Float64Builder,
        currency: StringBuilder,
        valid: NullBufferBuilder,
        fields: Fields,
    },
    Zoned {
        instant: Box<Col>,
        zone: StringBuilder,
        valid: NullBufferBuilder,
        fields: Fields,
    },
    /// The builder, and the labels its dictionary starts with (batch after batch).
    Enum(StringDictionaryBuilder<Int16Type>, Vec<String>),
    List {
        offsets: Vec<i32>,
        valid: NullBufferBuilder,
        item: Box<Col>,
        field: FieldRef,
    },
}

impl Col {
    fn new(d: &Domain) -> Col {
        let ms_utc = || TimestampMillisecondBuilder::new().with_timezone("UTC");
        match d.db_type {
            db_type::INTEGER => Col::I32(Int32Builder::new()),
            db_type::SHORT => Col::I16(Int16Builder::new()),
            db_type::BIGINT => Col::I64(Int64Builder::new()),
            db_type::FLOAT => Col::F32(Float32Builder::new()),
            db_type::DOUBLE => Col::F64(Float64Builder::new()),
            db_type::NUMERIC => {
                let (p, s) = numeric_precision_scale(d);
                let b = Decimal128Builder::new().with_precision_and_scale(p, s).expect("precision 1..=38, scale <= p");
                Col::Decimal(b, p, s)
            }
            db_type::MONETARY => Col::Money {
                amount: Float64Builder::new(),
                currency: StringBuilder::new(),
                valid: NullBufferBuilder::new(0),
                fields: struct_fields(d),
            },
            db_type::BIT => Col::Binary(BinaryBuilder::new()),
            db_type::VARBIT => Col::VarBit {
                bytes: BinaryBuilder::new(),
                bits: Int32Builder::new(),
                valid: NullBufferBuilder::new(0),
                fields: struct_fields(d),
            },
            db_type::DATE => Col::Date(Date32Builder::new()),
            db_type::TIME => Col::Time(Time32SecondBuilder::new()),
            db_type::TIMESTAMP | db_type::TIMESTAMPLTZ => {
                Col::Seconds(TimestampSecondBuilder::new().with_timezone("UTC"))
            }
            db_type::DATETIME => Col::Millis(TimestampMillisecondBuilder::new()),
            db_type::DATETIMELTZ => Col::Millis(ms_utc()),
            db_type::TIMESTAMPTZ | db_type::DATETIMETZ => Col::Zoned {
                instant: Box::new(if d.db_type == db_type::TIMESTAMPTZ {
                    Col::Seconds(TimestampSecondBuilder::new().with_timezone("UTC"))
                } else {
                    Col::Millis(ms_utc())
                }),
                zone: StringBuilder::new(),
                valid: NullBufferBuilder::new(0),
                fields: struct_fields(d),
            },
            db_type::ENUMERATION => Col::Enum(seeded_enum(&d.enum_labels), d.enum_labels.clone()),
            db_type::SET | db_type::MULTISET | db_type::SEQUENCE => {
                let item = match element_domain(d) {
                    Some(e) => Col::new(e),
                    None => Col::Text(StringBuilder::new(), Domain::default()),
                };
                Col::List {
                    offsets: vec![0],
                    valid: NullBufferBuilder::new(0),
                    item: Box::new(item),
                    field: Arc::new(item_field(d)),
                }
            }
            _ => Col::Text(StringBuilder::new(), d.clone()),
        }
    }

    fn append_null(&mut self) {
        match self {
            Col::I16(b) => b.append_null(),
            Col::I32(b) => b.append_null(),
            Col::I64(b) => b.append_null(),
            Col::F32(b) => b.append_null(),
            Col::F64(b) => b.append_null(),
            Col::Decimal(b, ..) => b.append_null(),
            Col::Text(b, _) => b.append_null(),
            Col::Binary(b) => b.append_null(),
            Col::VarBit { bytes, bits, valid, .. } => {
                bytes.append_null();
                bits.append_null();
                valid.append_null();
            }
            Col::Date(b) => b.append_null(),
            Col::Time(b) => b.append_null(),
            Col::Seconds(b) => b.append_null(),
            Col::Millis(b) => b.append_null(),
            Col::Money { amount, currency, valid, .. } => {
                amount.append_null();
                currency.append_null();
                valid.append_null();
            }
            Col::Zoned { instant, zone, valid, .. } => {
                instant.append_null();
                zone.append_null();
                valid.append_null();
            }
            Col::Enum(b, _) => b.append_null(),
            Col::List { offsets, valid, .. } => {
                offsets.push(*offsets.last().unwrap_or(&0));
                valid.append_null();
            }
        }
    }

    /// Appends one value (null when it is NULL, CUBRID's zero date, or does not fit: then
    /// `errs` says why).
    fn push(&mut self, v: &Value, errs: &mut Vec<String>) {
        if let Value::Null = v {
            return self.append_null();
        }
        if let Value::Unknown { .. } = v {
            // The decoder already said why (the event's decode_error).
            return self.append_null();
        }
        if let Err(why) = self.try_push(v, errs) {
            errs.push(why);
            self.append_null();
        }
    }

    /// Appends `v`, or appends nothing and says why it does not fit (`Ok` for a zero date,
    /// appended as null).
    fn try_push(&mut self, v: &Value, errs: &mut Vec<String>) -> Result<(), String> {
        let misfit = |what: &str| format!("a {} value does not fit a {what} column", kind(v));
        if let (Col::Zoned { .. }, Value::DatetimeTz { jdn: 0, .. }) = (&*self, v) {
            self.append_null(); // the zero date
            return Ok(());
        }
        match self {
            Col::I16(b) => {
                b.append_value(int_of(v).and_then(|i| i16::try_from(i).ok()).ok_or_else(|| misfit("SMALLINT"))?)
            }
            Col::I32(b) => {
                b.append_value(int_of(v).and_then(|i| i32::try_from(i).ok()).ok_or_else(|| misfit("INTEGER"))?)
            }
            Col::I64(b) => b.append_value(int_of(v).ok_or_else(|| misfit("BIGINT"))?),
            Col::F32(b) => match v {
                Value::Float(f) => b.append_value(*f),
                _ => b.append_value(float_of(v).ok_or_else(|| misfit("FLOAT"))? as f32),
            },
            Col::F64(b) => b.append_value(float_of(v).ok_or_else(|| misfit("DOUBLE"))?),
            Col::Decimal(b, p, s) => {
                let x = match v {
                    Value::Numeric { unscaled, scale } => rescale(*unscaled, *scale, *p, *s)?,
                    Value::Int(i) => rescale(*i as i128, 0, *p, *s)?,
                    _ => return Err(misfit("NUMERIC")),
                };
                b.append_value(x)
            }
            Col::Text(b, d) => b.append_value(any_text(v, d).ok_or_else(|| misfit("string"))?),
            Col::Binary(b) => match v {
                Value::Bit { bytes, .. } | Value::String { bytes, .. } => b.append_value(bytes),
                _ => return Err(misfit("BIT")),
            },
            Col::VarBit { bytes, bits, valid, .. } => match v {
                Value::Bit { bytes: b, bits: n } => {
                    let n = i32::try_from(*n).map_err(|_| format!("{n} bits"))?;
                    bytes.append_value(b);
                    bits.append_value(n);
                    valid.append_non_null();
                }
                Value::String { bytes: b, .. } => {
                    let n = i32::try_from(b.len() * 8).map_err(|_| "too long".to_string())?;
                    bytes.append_value(b);
                    bits.append_value(n);
                    valid.append_non_null();
                }
                _ => return Err(misfit("VARBIT")),
            },
            Col::Date(b) => match v {
                Value::Date(0) => b.append_null(),
                Value::Date(jdn) => b.append_value(
                    i32::try_from(label_days(*jdn)).map_err(|_| format!("day number {jdn} out of range"))?,
                ),
                _ => return Err(misfit("DATE")),
            },
            Col::Time(b) => match v {
                Value::Time(s) => b.append_value(*s as i32),
                _ => return Err(misfit("TIME")),
            },
            Col::Seconds(b) => match v {
                Value::Timestamp(0) | Value::TimestampLtz(0) => b.append_null(),
                Value::Timestamp(s) | Value::TimestampLtz(s) | Value::TimestampTz { secs: s, .. } => {
                    b.append_value(*s as i64)
                }
                _ => return Err(misfit("TIMESTAMP")),
            },
            Col::Millis(b) => match v {
                Value::Datetime { jdn: 0, .. }
                | Value::DatetimeLtz { jdn: 0, .. }
                | Value::DatetimeTz { jdn: 0, .. } => b.append_null(),
                Value::Datetime { jdn, ms } | Value::DatetimeLtz { jdn, ms } | Value::DatetimeTz { jdn, ms, .. } => {
                    b.append_value(label_days(*jdn) * 86_400_000 + *ms as i64)
                }
                Value::Date(0) | Value::Timestamp(0) | Value::TimestampLtz(0) => b.append_null(),
                Value::Date(jdn) => b.append_value(label_days(*jdn) * 86_400_000),
                Value::Timestamp(s) | Value::TimestampLtz(s) => b.append_value(*s as i64 * 1000),
                _ => return Err(misfit("DATETIME")),
            },
            Col::Money { amount, currency, valid, .. } => match v {
                Value::Monetary { currency: c, amount: a } => {
                    amount.append_value(*a);
                    let symbol = row::text::currency_symbol(*c);
                    if symbol.is_empty() {
                        currency.append_null();
                    } else {
                        currency.append_value(symbol);
                    }
                    valid.append_non_null();
                }
                _ => return Err(misfit("MONETARY")),
            },
            Col::Zoned { instant, zone, valid, .. } => {
                let tz = match v {
                    Value::TimestampTz { tz, .. } | Value::DatetimeTz { tz, .. } => *tz,
                    _ => {
                        return Err(misfit(if matches!(**instant, Col::Seconds(_)) {
                            "TIMESTAMPTZ"
                        } else {
                            "DATETIMETZ"
                        }))
                    }
                };
                instant.try_push(v, errs)?;
                zone.append_value(zone_text(tz));
                valid.append_non_null();
            }
            Col::Enum(b, _) => match v {
                Value::Enum { label: Some(l), .. } => {
                    b.append(l).map_err(|e| e.to_string())?;
                }
                Value::Enum { index: 0, .. } => {
                    b.append("").map_err(|e| e.to_string())?;
                }
                Value::Enum { index, .. } => return Err(format!("ENUM index {index} has no label")),
                Value::String { bytes, codeset } => {
                    b.append(row::text::string_text(bytes, *codeset)).map_err(|e| e.to_string())?;
                }
                _ => return Err(misfit("ENUM")),
            },
            Col::List { offsets, valid, item, .. } => match v {
                Value::Collection { items, .. } => {
                    for it in items {
                        item.push(it, errs);
                    }
                    let end = offsets.last().copied().unwrap_or(0) + items.len() as i32;
                    offsets.push(end);
                    valid.append_non_null();
                }
                _ => return Err(misfit("collection")),
            },
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Col::I16(b) => Arc::new(b.finish()),
            Col::I32(b) => Arc::new(b.finish()),
            Col::I64(b) => Arc::new(b.finish()),
            Col::F32(b) => Arc::new(b.finish()),
            Col::F64(b) => Arc::new(b.finish()),
            Col::Decimal(b, ..) => Arc::new(b.finish()),
            Col::Text(b, _) => Arc::new(b.finish()),
            Col::Binary(b) => Arc::new(b.finish()),
            Col::VarBit { bytes, bits, valid, fields } => Arc::new(StructArray::new(
                fields.clone(),
                vec![Arc::new(bytes.finish()), Arc::new(bits.finish())],
                valid.finish(),
            )),
            Col::Date(b) => Arc::new(b.finish()),
            Col::Time(b) => Arc::new(b.finish()),
            Col::Seconds(b) => Arc::new(b.finish()),
            Col::Millis(b) => Arc::new(b.finish()),
            Col::Money { amount, currency, valid, fields } => Arc::new(StructArray::new(
                fields.clone(),
                vec![Arc::new(amount.finish()), Arc::new(currency.finish())],
                valid.finish(),
            )),
            Col::Zoned { instant, zone, valid, fields } => Arc::new(StructArray::new(
                fields.clone(),
                vec![instant.finish(), Arc::new(zone.finish())],
                valid.finish(),
            )),
            Col::Enum(b, labels) => {
                let done = Arc::new(b.finish());
                *b = seeded_enum(labels); // the next batch's keys are CUBRID's indexes again
                done
            }
            Col::List { offsets, valid, item, field } => {
                let values = item.finish();
                let offsets = OffsetBuffer::new(std::mem::replace(offsets, vec![0]).into());
                Arc::new(ListArray::new(field.clone(), offsets, values, valid.finish()))
            }
        }
    }
}

/// A dictionary builder whose first keys are the ENUM's labels (so keys follow CUBRID's 1-based
/// indexes, minus one).
fn seeded_enum(labels: &[String]) -> StringDictionaryBuilder<Int16Type> {
    let values = StringArray::from_iter_values(labels.iter());
    StringDictionaryBuilder::new_with_dictionary(0, &values).unwrap_or_else(|_| StringDictionaryBuilder::new())
}

fn struct_fields(d: &Domain) -> Fields {
    match arrow_type(d) {
        DataType::Struct(f) => f,
        _ => Fields::empty(),
    }
}

/// Builds one side (`before` or `after`) of a table's changes.
struct RowBuilder {
    fields: Fields,
    cols: Vec<Col>,
    valid: NullBufferBuilder,
    len: usize,
}

impl RowBuilder {
    fn new(columns: &[TableColumn]) -> Self {
        RowBuilder {
            fields: row_fields(columns),
            cols: columns.iter().map(|c| Col::new(&c.domain)).collect(),
            valid: NullBufferBuilder::new(0),
            len: 0,
        }
    }

    fn append(
        &mut self,
        row: Option<&RowValues>,
        slots: &HashMap<i32, usize>,
        filled: &mut [bool],
        errs: &mut Vec<String>,
    ) {
        self.len += 1;
        let Some(row) = row else {
            self.cols.iter_mut().for_each(Col::append_null);
            return self.valid.append_null();
        };
        filled.iter_mut().for_each(|f| *f = false);
        for (id, v) in &row.0 {
            if let Some(&i) = slots.get(id) {
                if !std::mem::replace(&mut filled[i], true) {
                    let before = errs.len();
                    self.cols[i].push(v, errs);
                    let name = self.fields[i].name();
                    for e in &mut errs[before..] {
                        *e = format!("column {name}: {e}");
                    }
                }
            }
        }
        for (col, done) in self.cols.iter_mut().zip(filled.iter()) {
            if !done {
                col.append_null();
            }
        }
        self.valid.append_non_null();
    }

    fn finish(&mut self) -> ArrayRef {
        let len = std::mem::take(&mut self.len);
        let arrays: Vec<ArrayRef> = self.cols.iter_mut().map(Col::finish).collect();
        if arrays.is_empty() {
            return Arc::new(StructArray::new_empty_fields(len, self.valid.finish()));
        }
        Arc::new(StructArray::new(self.fields.clone(), arrays, self.valid.finish()))
    }
}

/// Fills the columns of one table's changes (see [`table_changes_schema`]) from events decoded
/// with [`crate::cdc::options::ChangeOptions::values`].
pub struct TableChangesBuilder {
    schema: SchemaRef,
    columns: Vec<TableColumn>,
    /// Column index by attribute id.
    slots: HashMap<i32, usize>,
    filled: Vec<bool>,
    sides: (bool, bool),
    meta: ChangesBuilder,
    before: RowBuilder,
    after: RowBuilder,
    key: StringBuilder,
    changed: ListBuilder<StringBuilder>,
    decode_error: StringBuilder,
    errs: Vec<String>,
}

impl TableChangesBuilder {
    /// A builder for events of `log` of the table with `columns` (current, definition order),
    /// keeping the images `mode` keeps.
    pub fn new(log: &dyn LogSource, columns: Vec<TableColumn>, mode: ImageMode) -> Self {
        TableChangesBuilder {
            schema: table_changes_schema(&columns),
            slots: columns.iter().enumerate().map(|(i, c)| (c.id, i)).collect(),
            filled: vec![false; columns.len()],
            sides: mode.images(),
            meta: ChangesBuilder::without_images(log),
            before: RowBuilder::new(&columns),
            after: RowBuilder::new(&columns),
            key: StringBuilder::new(),
            changed: ListBuilder::new(StringBuilder::new()),
            decode_error: StringBuilder::new(),
            errs: Vec::new(),
            columns,
        }
    }

    /// The table's columns the batches have.
    pub fn columns(&self) -> &[TableColumn] {
        &self.columns
    }

    /// `{"pk column": value, ...}` of the row's primary-key columns (current names).
    fn key_json(&self, row: &RowValues) -> Option<String> {
        let mut out = String::new();
        for c in self.columns.iter().filter(|c| c.primary_key) {
            out.push(if out.is_empty() { '{' } else { ',' });
            row::text::push_json_str(&mut out, &c.name);
            out.push(':');
            match row.get(c.id) {
                Some(v) => out.push_str(&row::text::value_json(v, &c.domain)),
                None => out.push_str("null"),
            }
        }
        (!out.is_empty()).then(|| out + "}")
    }

    fn side_errors(&mut self, side: &str, from: usize) {
        for e in &mut self.errs[from..] {
            *e = format!("{side}: {e}");
        }
    }
}

impl EventBatchBuilder for TableChangesBuilder {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn len(&self) -> usize {
        self.meta.len()
    }

    fn append(&mut self, e: &Event) {
        self.meta.append(e);
        let typed = e.typed.as_ref();
        let before = typed.and_then(|t| t.before_values.as_ref());
        let after = typed.and_then(|t| t.after_values.as_ref());
        self.errs.clear();
        let keep = self.sides;
        self.before.append(before.filter(|_| keep.0), &self.slots, &mut self.filled, &mut self.errs);
        self.side_errors("before", 0);
        let n = self.errs.len();
        self.after.append(after.filter(|_| keep.1), &self.slots, &mut self.filled, &mut self.errs);
        self.side_errors("after", n);
        self.key.append_option(after.or(before).and_then(|r| self.key_json(r)));
        match (before, after) {
            (Some(b), Some(a)) if keep.0 && keep.1 => {
                for c in &self.columns {
                    let same = match (b.get(c.id), a.get(c.id)) {
                        (Some(x), Some(y)) => row::text::same_value(x, y),
                        (x, y) => x.is_none() && y.is_none(),
                    };
                    if !same {
                        self.changed.values().append_value(&c.name);
                    }
                }
                self.changed.append(true);
            }
            _ => self.changed.append(false),
        }
        let decoder = typed.and_then(|t| t.decode_error.as_deref());
        if self.errs.is_empty() {
            self.decode_error.append_option(decoder);
        } else {
            let mut all: Vec<&str> = decoder.into_iter().collect();
            all.extend(self.errs.iter().map(String::as_str));
            self.decode_error.append_value(all.join("; "));
        }
    }

    fn finish(&mut self) -> RecordBatch {
        let meta = self.meta.finish();
        let cols: Vec<ArrayRef> = self
            .schema
            .fields()
            .iter()
            .map(|f| match f.name().as_str() {
                "before" => self.before.finish(),
                "after" => self.after.finish(),
                "key" => Arc::new(self.key.finish()) as ArrayRef,
                "changed_columns" => Arc::new(self.changed.finish()),
                "decode_error" => Arc::new(self.decode_error.finish()),
                name => meta.column_by_name(name).expect("a column of read_changes()").clone(),
            })
            .collect();
        RecordBatch::try_new(self.schema.clone(), cols).expect("columns match the schema")
    }
}

/// What a [`TableBatch`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableBatchKind {
    /// One table's typed changes, decoded with one representation.
    Table,
    /// DDL that belongs to no table: `read_changes()`'s columns without images.
    OtherDdl,
    /// Changes of tables whose schema the log does not hold (created before its oldest volume,
    /// and no schema file given): `read_changes()`'s columns with the raw images, so that
    /// nothing is lost.
    UnknownSchema,
}

impl TableBatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TableBatchKind::Table => "table",
            TableBatchKind::OtherDdl => "ddl",
            TableBatchKind::UnknownSchema => "unknown_schema",
        }
    }
}

/// A batch from [`next_table_batch`]: for [`TableBatchKind::Table`], every event in it was
/// decoded with representation `repid`, whose columns the batch's `before` / `after` have.
pub struct TableBatch {
    pub kind: TableBatchKind,
    /// The table (a partitioned table for its partitions' rows); None for the other kinds.
    pub class_oid: Option<Oid>,
    /// Its name (every row of a part was written under the same name).
    pub table: Option<String>,
    /// The representation of the columns (-1 for the other kinds).
    pub repid: i32,
    pub batch: RecordBatch,
}

struct Part {
    repid: i32,
    table: Option<String>,
    builder: TableChangesBuilder,
}

/// Splits a committed change stream by table: one typed builder per table, begun again with
/// the new columns when a table's representation changes (ALTER), when a DDL changes its columns
/// without one (RENAME COLUMN), or under its new name when it is renamed.
pub struct TableSplitter {
    log: Arc<LogSet>,
    mode: ImageMode,
    max_rows: usize,
    parts: HashMap<Oid, Part>,
    other: ChangesBuilder,
    unknown: ChangesBuilder,
    ready: std::collections::VecDeque<TableBatch>,
}

impl TableSplitter {
    pub fn new(log: Arc<LogSet>, mode: ImageMode, max_rows: usize) -> Self {
        let other = ChangesBuilder::without_images(&*log);
        let unknown = ChangesBuilder::new(&*log);
        TableSplitter {
            log,
            mode,
            max_rows: max_rows.max(1),
            parts: HashMap::new(),
            other,
            unknown,
            ready: Default::default(),
        }
    }

    fn flush(&mut self, class: Oid) {
        if let Some(p) = self.parts.get_mut(&class) {
            if !p.builder.is_empty() {
                let batch = p.builder.finish();
                self.ready.push_back(TableBatch {
                    kind: TableBatchKind::Table,
                    class_oid: Some(class),
                    table: p.table.clone(),
                    repid: p.repid,
                    batch,
                });
            }
        }
    }

    fn flush_other(&mut self) {
        if !self.other.is_empty() {
            let all = self.other.finish();
            let keep: Vec<usize> =
                (0..all.num_columns()).filter(|&i| !DROPPED.contains(&all.schema().field(i).name().as_str())).collect();
            let batch = all.project(&keep).expect("columns of read_changes()");
            self.ready.push_back(TableBatch {
                kind: TableBatchKind::OtherDdl,
                class_oid: None,
                table: None,
                repid: -1,
                batch,
            });
        }
    }

    fn flush_unknown(&mut self) {
        if !self.unknown.is_empty() {
            let batch = self.unknown.finish();
            let kind = TableBatchKind::UnknownSchema;
            self.ready.push_back(TableBatch { kind, class_oid: None, table: None, repid: -1, batch });
        }
    }

    fn append(&mut self, catalog: &crate::cdc::catalog::Catalog, e: &Event) {
        let typed = e.typed.as_ref();
        let Some(class) = typed.and_then(|t| t.root_oid).or(e.class_oid) else {
            self.other.append(e);
            if self.other.len() >= self.max_rows {
                self.flush_other();
            }
            return;
        };
        let Some(repid) =
            catalog.get(class).filter(|c| c.representations.contains_key(&c.current_repid)).map(|c| c.current_repid)
        else {
            self.unknown.append(e);
            if self.unknown.len() >= self.max_rows {
                self.flush_unknown();
            }
            return;
        };
        let name = typed.and_then(|t| t.table.as_deref());
        // A new representation (ALTER), new names of columns (a DDL that keeps the
        // representation) or a new name (RENAME) begins a new part, wherever the stream was cut
        // into runs.
        let stale = self.parts.get(&class).is_some_and(|p| {
            p.repid != repid
                || p.table.as_deref() != name
                || (e.op == crate::cdc::event::Op::Ddl
                    && catalog.table_columns(class).map(|(_, c)| c).as_deref() != Some(p.builder.columns()))
        });
        if stale {
            self.flush(class);
            self.parts.remove(&class);
        }
        let (log, mode) = (&self.log, self.mode);
        let part = self.parts.entry(class).or_insert_with(|| {
            let columns = catalog.table_columns(class).map(|(_, c)| c).unwrap_or_default();
            let table = typed.and_then(|t| t.table.clone());
            Part {
                repid,
                table: table.map(|t| t.to_string()),
                builder: TableChangesBuilder::new(&**log, columns, mode),
            }
        });
        part.builder.append(e);
        if part.builder.len() >= self.max_rows {
            self.flush(class);
        }
    }

    /// Every table's batch begun so far (in class OID order), at the end of the stream.
    fn flush_all(&mut self) {
        let mut classes: Vec<Oid> = self.parts.keys().copied().collect();
        classes.sort_by_key(|o| o.to_cdc());
        for c in classes {
            self.flush(c);
        }
        self.flush_other();
        self.flush_unknown();
    }
}

/// The next table batch of a committed stream whose options decode to values
/// ([`crate::cdc::options::ChangeOptions::values`]); `None` once the stream is over.
pub fn next_table_batch(
    reader: &mut crate::cdc::changes::ChangeReader,
    split: &mut TableSplitter,
) -> crate::error::Result<Option<TableBatch>> {
    while split.ready.is_empty() {
        match reader.next_event()? {
            Some(e) => split.append(reader.catalog(), &e),
            None => {
                split.flush_all();
                break;
            }
        }
    }
    Ok(split.ready.pop_front())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn proleptic_days_agree_with_day_numbers_from_the_gregorian_switch_on() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for jdn in [2_299_161, 2_440_588, 2_451_545, 2_460_000, 5_373_484] {
            assert_eq!(label_days(jdn), jdn as i64 - 2_440_588, "{jdn}");
        }
        // Before the switch CUBRID labels days in the Julian calendar: the label is kept.
        let jdn = row::text::ymd_to_jdn(1000, 1, 1) as i32;
        assert_eq!(label_days(jdn), days_from_civil(1000, 1, 1));
    }

    #[test]
    fn a_value_that_does_not_fit_is_null_and_named() {
        let int = Domain { db_type: db_type::INTEGER, ..Default::default() };
        let columns = vec![TableColumn { id: 7, name: "qty".into(), domain: int, primary_key: false }];
        let mut b = RowBuilder::new(&columns);
        let slots = HashMap::from([(7, 0)]);
        let (mut filled, mut errs) = (vec![false], Vec::new());
        let text = Value::String { bytes: b"twelve".to_vec(), codeset: 5 };
        b.append(Some(&RowValues(vec![(7, text)])), &slots, &mut filled, &mut errs);
        b.append(Some(&RowValues(vec![(7, Value::Int(12))])), &slots, &mut filled, &mut errs);
        b.append(
            Some(&RowValues(vec![(7, Value::Numeric { unscaled: 5, scale: i32::MIN })])),
            &slots,
            &mut filled,
            &mut errs,
        );
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with("column qty: a string value does not fit"), "{errs:?}");
        let a = b.finish();
        let s = a.as_any().downcast_ref::<StructArray>().unwrap();
        let q = s.column(0).as_any().downcast_ref::<arrow_array::Int32Array>().unwrap();
        assert_eq!((q.is_null(0), q.value(1), q.is_null(2)), (true, 12, true));
    }

    #[test]
    fn numerics_rescale_exactly_or_say_why() {
        assert_eq!(rescale(12345, 2, 10, 4), Ok(1_234_500));
        assert_eq!(rescale(1_234_500, 4, 10, 2), Ok(12345));
        assert!(rescale(1_234_501, 4, 10, 2).is_err());
        assert!(rescale(10i128.pow(10), 0, 10, 0).is_err());
    }

    #[test]
    fn every_type_has_a_builder_of_its_arrow_type() {
        let mut d = Domain { precision: 10, scale: 2, codeset: 5, ..Default::default() };
        for t in [
            1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 31, 32, 33, 34, 35, 36, 37,
            38, 39, 40,
        ] {
            d.db_type = t;
            d.set_domains = vec![Domain { db_type: 1, ..Default::default() }];
            d.enum_labels = vec!["a".into()];
            let mut c = Col::new(&d);
            c.append_null();
            let a = c.finish();
            assert_eq!(a.data_type(), &arrow_type(&d), "type {t}");
            assert_eq!(a.len(), 1);
        }
    }
}
