//! Arrow forms of what ranges read in parallel exchange (see `cdc::parallel`): facts, and
//! events as they cross a join (every column a type Spark maps one to one, read back whatever
//! width of strings Spark chose).

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Int16Builder, Int32Builder, Int64Builder, Int8Builder, StringBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int16Type, Int32Type, Int64Type, Int8Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::changes::{Event, Op};
use crate::chase::Image;
use crate::error::{LogError, Result};
use crate::format::heap::REC_HOME;
use crate::lsa::Lsa;
use crate::parallel::{RangeFacts, Verdict};
use crate::supplemental::{DdlSupplement, Oid};

/// The schema of a range's facts; a last row of kind [`COUNTS_KIND`] carries the range's count
/// of supplemental records in `count`, its start in `lsa` and where its walk stopped in `lo`.
pub fn facts_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("kind", DataType::Int8, false),
        Field::new("trid", DataType::Int32, false),
        Field::new("lsa", DataType::Int64, false),
        Field::new("vol", DataType::Int16, false),
        Field::new("lo", DataType::Int64, true),
        Field::new("time", DataType::Int64, true),
        Field::new("user", DataType::Utf8, true),
        Field::new("class_record", DataType::Boolean, false),
        Field::new("count", DataType::Int64, true),
    ]))
}

/// The kind of the row that carries a range's counts.
pub const COUNTS_KIND: i8 = 15;

fn key(l: Lsa) -> i64 {
    l.to_key() as i64
}

pub fn facts_batch(f: &RangeFacts, range_start: i64) -> RecordBatch {
    let n = f.facts.len() + 1;
    let mut kind = Int8Builder::with_capacity(n);
    let mut trid = Int32Builder::with_capacity(n);
    let mut lsa = Int64Builder::with_capacity(n);
    let mut vol = Int16Builder::with_capacity(n);
    let mut lo = Int64Builder::with_capacity(n);
    let mut time = Int64Builder::with_capacity(n);
    let mut user = StringBuilder::new();
    let mut class_record = BooleanBuilder::with_capacity(n);
    let mut count = Int64Builder::with_capacity(n);
    for x in &f.facts {
        kind.append_value(x.kind as i8);
        trid.append_value(x.trid);
        lsa.append_value(key(x.lsa));
        vol.append_value(x.vol as i16);
        lo.append_option(x.lo.map(key));
        time.append_option(x.time);
        user.append_option(x.user.as_deref());
        class_record.append_value(x.class_record);
        count.append_null();
    }
    kind.append_value(COUNTS_KIND);
    trid.append_value(0);
    lsa.append_value(range_start);
    vol.append_value(0);
    lo.append_option(f.resume.map(key));
    time.append_null();
    user.append_null();
    class_record.append_value(false);
    count.append_value(f.supplemental_records as i64);
    let cols: Vec<ArrayRef> = vec![
        Arc::new(kind.finish()),
        Arc::new(trid.finish()),
        Arc::new(lsa.finish()),
        Arc::new(vol.finish()),
        Arc::new(lo.finish()),
        Arc::new(time.finish()),
        Arc::new(user.finish()),
        Arc::new(class_record.finish()),
        Arc::new(count.finish()),
    ];
    RecordBatch::try_new(facts_schema(), cols).expect("columns match the schema")
}

/// The schema of events crossing a join.
pub fn carrier_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("lsa", DataType::Int64, false),
        Field::new("vol", DataType::Int16, false),
        Field::new("trid", DataType::Int32, false),
        Field::new("op", DataType::Int8, false),
        Field::new("trigger", DataType::Boolean, false),
        Field::new("user", DataType::Utf8, true),
        Field::new("class_oid", DataType::Int64, true),
        Field::new("row_oid", DataType::Int64, true),
        Field::new("before_image", DataType::Binary, true),
        Field::new("after_image", DataType::Binary, true),
        Field::new("ddl_type", DataType::Int32, true),
        Field::new("object_type", DataType::Int32, true),
        Field::new("object_oid", DataType::Int64, true),
        Field::new("statement", DataType::Utf8, true),
        Field::new("time", DataType::Int64, true),
        Field::new("error", DataType::Utf8, true),
        Field::new("commit_lsa", DataType::Int64, true),
        Field::new("commit_time", DataType::Int64, true),
        Field::new("txn_seq", DataType::Int64, false),
        // The first start or end record of the event's trid after it (CUBRID's own stream).
        Field::new("end_lsa", DataType::Int64, true),
    ]))
}

fn packed(o: Option<Oid>) -> Option<i64> {
    o.map(|o| o.to_cdc() as i64)
}

/// Events as a carrier batch (images without their record type, which decoding never reads).
pub fn events_to_carrier(events: &[Event]) -> RecordBatch {
    let n = events.len();
    let mut lsa = Int64Builder::with_capacity(n);
    let mut vol = Int16Builder::with_capacity(n);
    let mut trid = Int32Builder::with_capacity(n);
    let mut op = Int8Builder::with_capacity(n);
    let mut trigger = BooleanBuilder::with_capacity(n);
    let mut user = StringBuilder::new();
    let mut class_oid = Int64Builder::with_capacity(n);
    let mut row_oid = Int64Builder::with_capacity(n);
    let mut before = BinaryBuilder::new();
    let mut after = BinaryBuilder::new();
    let mut ddl_type = Int32Builder::with_capacity(n);
    let mut object_type = Int32Builder::with_capacity(n);
    let mut object_oid = Int64Builder::with_capacity(n);
    let mut statement = StringBuilder::new();
    let mut time = Int64Builder::with_capacity(n);
    let mut error = StringBuilder::new();
    let mut commit_lsa = Int64Builder::with_capacity(n);
    let mut commit_time = Int64Builder::with_capacity(n);
    let mut seq = Int64Builder::with_capacity(n);
    let mut end = Int64Builder::with_capacity(n);
    for e in events {
        end.append_null();
        lsa.append_value(key(e.lsa));
        vol.append_value(e.vol as i16);
        trid.append_value(e.trid);
        op.append_value(e.op.index() as i8);
        trigger.append_value(e.trigger);
        user.append_option(e.user.as_deref());
        class_oid.append_option(packed(e.class_oid));
        row_oid.append_option(packed(e.row_oid));
        before.append_option(e.before.as_ref().map(|i| &i.row[..]));
        after.append_option(e.after.as_ref().map(|i| &i.row[..]));
        ddl_type.append_option(e.ddl.as_ref().map(|d| d.ddl_type));
        object_type.append_option(e.ddl.as_ref().map(|d| d.object_type));
        object_oid.append_option(packed(e.ddl.as_ref().map(|d| d.object_oid)));
        statement.append_option(e.ddl.as_ref().map(|d| d.statement.as_str()));
        time.append_option(e.time);
        error.append_option(e.error.as_deref());
        commit_lsa.append_option(e.commit_lsa.map(key));
        commit_time.append_option(e.commit_time);
        seq.append_value(e.txn_seq as i64);
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(lsa.finish()),
        Arc::new(vol.finish()),
        Arc::new(trid.finish()),
        Arc::new(op.finish()),
        Arc::new(trigger.finish()),
        Arc::new(user.finish()),
        Arc::new(class_oid.finish()),
        Arc::new(row_oid.finish()),
        Arc::new(before.finish()),
        Arc::new(after.finish()),
        Arc::new(ddl_type.finish()),
        Arc::new(object_type.finish()),
        Arc::new(object_oid.finish()),
        Arc::new(statement.finish()),
        Arc::new(time.finish()),
        Arc::new(error.finish()),
        Arc::new(commit_lsa.finish()),
        Arc::new(commit_time.finish()),
        Arc::new(seq.finish()),
        Arc::new(end.finish()),
    ];
    RecordBatch::try_new(carrier_schema(), cols).expect("columns match the schema")
}

/// A carrier column, cast to the type the carrier schema gives it (Spark may hand back other
/// widths: large strings, or integers it widened).
fn column(batch: &RecordBatch, name: &str) -> Result<ArrayRef> {
    let schema = carrier_schema();
    let want = schema.field_with_name(name).expect("a carrier column").data_type().clone();
    let col = batch
        .column_by_name(name)
        .ok_or_else(|| LogError::InvalidArgument { msg: format!("the event batch has no column {name:?}") })?;
    arrow_cast::cast(col, &want)
        .map_err(|e| LogError::InvalidArgument { msg: format!("the event batch's column {name:?}: {e}") })
}

/// Events from a carrier batch (as Spark returns it after the joins).
pub fn events_from_carrier(batch: &RecordBatch) -> Result<Vec<Event>> {
    let c = |name| column(batch, name);
    let (lsa, vol, trid, op, trigger, user) = (c("lsa")?, c("vol")?, c("trid")?, c("op")?, c("trigger")?, c("user")?);
    let (class_oid, row_oid, before, after) = (c("class_oid")?, c("row_oid")?, c("before_image")?, c("after_image")?);
    let (ddl_type, object_type, object_oid, statement) =
        (c("ddl_type")?, c("object_type")?, c("object_oid")?, c("statement")?);
    let (time, error, commit_lsa, commit_time, seq) =
        (c("time")?, c("error")?, c("commit_lsa")?, c("commit_time")?, c("txn_seq")?);
    let (lsa, vol, trid, op) = (
        lsa.as_primitive::<Int64Type>(),
        vol.as_primitive::<Int16Type>(),
        trid.as_primitive::<Int32Type>(),
        op.as_primitive::<Int8Type>(),
    );
    let (trigger, user) = (trigger.as_boolean(), user.as_string::<i32>());
    let (class_oid, row_oid) = (class_oid.as_primitive::<Int64Type>(), row_oid.as_primitive::<Int64Type>());
    let (before, after) = (before.as_binary::<i32>(), after.as_binary::<i32>());
    let (ddl_type, object_type) = (ddl_type.as_primitive::<Int32Type>(), object_type.as_primitive::<Int32Type>());
    let (object_oid, statement) = (object_oid.as_primitive::<Int64Type>(), statement.as_string::<i32>());
    let (time, error) = (time.as_primitive::<Int64Type>(), error.as_string::<i32>());
    let (commit_lsa, commit_time) = (commit_lsa.as_primitive::<Int64Type>(), commit_time.as_primitive::<Int64Type>());
    let seq = seq.as_primitive::<Int64Type>();
    let opt_i64 = |a: &arrow_array::Int64Array, i: usize| a.is_valid(i).then(|| a.value(i));
    let opt_str = |a: &arrow_array::StringArray, i: usize| a.is_valid(i).then(|| a.value(i).to_string());
    let oid = |a: &arrow_array::Int64Array, i: usize| opt_i64(a, i).map(|v| Oid::from_cdc(v as u64));
    let image = |a: &arrow_array::BinaryArray, i: usize| {
        a.is_valid(i).then(|| Image { rec_type: REC_HOME, row: a.value(i).to_vec() })
    };
    let mut out = Vec::with_capacity(batch.num_rows());
    for i in 0..batch.num_rows() {
        let op = Op::ALL.get(op.value(i) as usize).copied().ok_or_else(|| LogError::InvalidArgument {
            msg: format!("operation number {} in an event batch", op.value(i)),
        })?;
        let mut e = Event::new(Lsa::from_key(lsa.value(i) as u64), trid.value(i), op);
        e.vol = vol.value(i) as u16;
        e.trigger = trigger.value(i);
        e.user = user.is_valid(i).then(|| Arc::from(user.value(i)));
        e.class_oid = oid(class_oid, i);
        e.row_oid = oid(row_oid, i);
        e.before = image(before, i);
        e.after = image(after, i);
        if ddl_type.is_valid(i) {
            e.ddl = Some(DdlSupplement {
                ddl_type: ddl_type.value(i),
                object_type: object_type.value(i),
                class_oid: e.class_oid.unwrap_or(Oid { pageid: -1, slotid: -1, volid: -1 }),
                object_oid: oid(object_oid, i).unwrap_or(Oid { pageid: -1, slotid: -1, volid: -1 }),
                statement: statement.value(i).to_string(),
            });
        }
        e.time = opt_i64(time, i);
        e.error = opt_str(error, i);
        e.commit_lsa = opt_i64(commit_lsa, i).map(|k| Lsa::from_key(k as u64));
        e.commit_time = opt_i64(commit_time, i);
        e.txn_seq = u32::try_from(seq.value(i))
            .map_err(|_| LogError::InvalidArgument { msg: format!("txn_seq {} in an event batch", seq.value(i)) })?;
        out.push(e);
    }
    Ok(out)
}

/// The `end_lsa` column of a carrier batch (all `None` without one).
pub fn instance_ends(batch: &RecordBatch) -> Result<Vec<Option<Lsa>>> {
    if batch.column_by_name("end_lsa").is_none() {
        return Ok(vec![None; batch.num_rows()]);
    }
    let col = column(batch, "end_lsa")?;
    let a = col.as_primitive::<Int64Type>();
    Ok((0..a.len()).map(|i| a.is_valid(i).then(|| Lsa::from_key(a.value(i) as u64))).collect())
}

/// Verdicts from a batch of the joins' decisions: `lsa`, `user`, `commit_lsa`, `commit_time`,
/// `txn_seq` and `end_lsa`, typed as the carrier types them.
pub fn verdicts_from_batch(batch: &RecordBatch) -> Result<Vec<Verdict>> {
    let c = |name| column(batch, name);
    let (lsa, user, commit_lsa) = (c("lsa")?, c("user")?, c("commit_lsa")?);
    let (commit_time, seq, end) = (c("commit_time")?, c("txn_seq")?, c("end_lsa")?);
    let (lsa, user) = (lsa.as_primitive::<Int64Type>(), user.as_string::<i32>());
    let (commit_lsa, commit_time) = (commit_lsa.as_primitive::<Int64Type>(), commit_time.as_primitive::<Int64Type>());
    let (seq, end) = (seq.as_primitive::<Int64Type>(), end.as_primitive::<Int64Type>());
    let opt_lsa = |a: &arrow_array::Int64Array, i: usize| a.is_valid(i).then(|| Lsa::from_key(a.value(i) as u64));
    (0..batch.num_rows())
        .map(|i| {
            if lsa.is_null(i) {
                return Err(LogError::InvalidArgument { msg: "a verdict without an LSA".into() });
            }
            let txn_seq = u32::try_from(seq.value(i))
                .map_err(|_| LogError::InvalidArgument { msg: format!("txn_seq {} in a verdict", seq.value(i)) })?;
            Ok(Verdict {
                lsa: Lsa::from_key(lsa.value(i) as u64),
                user: user.is_valid(i).then(|| Arc::from(user.value(i))),
                commit_lsa: opt_lsa(commit_lsa, i),
                commit_time: commit_time.is_valid(i).then(|| commit_time.value(i)),
                txn_seq,
                end: opt_lsa(end, i),
            })
        })
        .collect()
}

/// Reads candidate events of a range into one carrier batch of at most `max_rows` events or
/// about `max_bytes` of images; `None` once the range is over.
pub fn next_carrier_batch(
    events: &mut crate::parallel::RangeEvents,
    max_rows: usize,
    max_bytes: usize,
) -> Result<Option<RecordBatch>> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    while batch.len() < max_rows && bytes < max_bytes {
        match events.next_event()? {
            Some(e) => {
                bytes += e.weight();
                batch.push(e);
            }
            None => break,
        }
    }
    Ok((!batch.is_empty()).then(|| events_to_carrier(&batch)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::{Fact, FactKind};

    fn events() -> Vec<Event> {
        let mut dml = Event::new(Lsa::new(12, 40), 7, Op::Update);
        dml.vol = 2;
        dml.trigger = true;
        dml.user = Some(Arc::from("PUBLIC"));
        dml.class_oid = Some(Oid { pageid: 233, slotid: 3, volid: 0 });
        dml.row_oid = Some(Oid { pageid: 9000, slotid: -2, volid: 1 });
        dml.before = Some(Image { rec_type: REC_HOME, row: vec![1, 2, 3] });
        dml.after = Some(Image { rec_type: REC_HOME, row: vec![] });
        dml.commit_lsa = Some(Lsa::new(20, 8));
        dml.commit_time = Some(1_700_000_000);
        dml.txn_seq = 41;
        let mut ddl = Event::new(Lsa::new(13, 0), 8, Op::Ddl);
        ddl.ddl = Some(DdlSupplement {
            ddl_type: 1,
            object_type: 0,
            class_oid: Oid { pageid: -1, slotid: -1, volid: -1 },
            object_oid: Oid { pageid: 5, slotid: 1, volid: 0 },
            statement: "create table t (a int)".into(),
        });
        ddl.error = Some("why".into());
        ddl.time = Some(-5);
        vec![dml, ddl, Event::new(Lsa::new(14, 16), 9, Op::Commit)]
    }

    #[test]
    fn events_cross_a_join_unchanged() {
        let events = events();
        let back = events_from_carrier(&events_to_carrier(&events)).unwrap();
        assert_eq!(back, events);
    }

    #[test]
    fn verdicts_carry_the_decided_columns() {
        let events = events();
        let verdicts = verdicts_from_batch(&events_to_carrier(&events)).unwrap();
        let want: Vec<Verdict> = events
            .iter()
            .map(|e| Verdict {
                lsa: e.lsa,
                user: e.user.clone(),
                commit_lsa: e.commit_lsa,
                commit_time: e.commit_time,
                txn_seq: e.txn_seq,
                end: None,
            })
            .collect();
        assert_eq!(verdicts, want);
    }

    #[test]
    fn carrier_columns_are_read_whatever_width_spark_chose() {
        let batch = events_to_carrier(&events());
        // Spark may hand strings back as large strings and integers widened.
        let cols: Vec<ArrayRef> = batch
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                DataType::Utf8 => arrow_cast::cast(c, &DataType::LargeUtf8).unwrap(),
                DataType::Int16 | DataType::Int32 => arrow_cast::cast(c, &DataType::Int64).unwrap(),
                _ => c.clone(),
            })
            .collect();
        let fields: Vec<Field> = batch
            .schema()
            .fields()
            .iter()
            .zip(&cols)
            .map(|(f, c)| Field::new(f.name(), c.data_type().clone(), true))
            .collect();
        let wide = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
        assert_eq!(events_from_carrier(&wide).unwrap(), events());
        assert_eq!(instance_ends(&wide).unwrap(), vec![None; 3]);
        let missing = batch.project(&[0, 1]).unwrap();
        assert!(events_from_carrier(&missing).unwrap_err().to_string().contains("no column"));
    }

    #[test]
    fn facts_end_with_the_ranges_counts() {
        let f = RangeFacts {
            facts: vec![Fact {
                kind: FactKind::Undone,
                trid: 3,
                lsa: Lsa::new(4, 8),
                vol: 1,
                lo: None,
                time: None,
                user: None,
                class_record: false,
            }],
            records: 10,
            supplemental_records: 6,
            resume: Some(Lsa::new(9, 0)),
        };
        let b = facts_batch(&f, 77);
        assert_eq!(b.num_rows(), 2);
        let kind = b.column(0).as_primitive::<Int8Type>();
        assert_eq!((kind.value(0), kind.value(1)), (FactKind::Undone as i8, COUNTS_KIND));
        assert!(b.column(4).is_null(0));
        assert_eq!(b.column(2).as_primitive::<Int64Type>().value(1), 77);
        assert_eq!(b.column(8).as_primitive::<Int64Type>().value(1), 6);
        assert_eq!(b.column(4).as_primitive::<Int64Type>().value(1), key(Lsa::new(9, 0)));
        assert_eq!(FactKind::from_i8(3), Some(FactKind::Undone));
        assert_eq!(FactKind::from_i8(COUNTS_KIND), None);
    }
}
