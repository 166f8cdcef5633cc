//! Arrow form of a range's facts (see `cdc::parallel`), read by the Spark jobs that still ask
//! questions of the facts (cursors, the supplemental-logging check).

use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Int16Builder, Int32Builder, Int64Builder, Int8Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::cdc::parallel::RangeFacts;
use crate::format::lsa::Lsa;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdc::parallel::{Fact, FactKind};
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, Int8Type};
    use arrow_array::Array;

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
            walk: Default::default(),
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
