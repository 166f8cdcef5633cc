//! Change events as Arrow batches.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, Int16Builder, Int32Builder, Int8Builder, ListBuilder, StringBuilder,
    TimestampSecondBuilder, UInt32Builder, UInt64Builder,
};
use arrow_array::types::{Int16Type, Int8Type};
use arrow_array::{ArrayRef, DictionaryArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::cdc::changes::ChangeReader;
use crate::cdc::event::{Event, Op};
use crate::error::Result;
use crate::format::supplemental::Oid;
use crate::log::source::LogSource;

fn ts() -> DataType {
    DataType::Timestamp(TimeUnit::Second, Some("UTC".into()))
}

/// An OID column value: CUBRID's CDC packing, null for the null OID (page -1).
fn oid(o: Option<Oid>) -> Option<u64> {
    o.filter(|o| !o.is_null()).map(Oid::to_cdc)
}

/// A string column holding JSON texts (marked so that JSON writers embed them as JSON).
fn json_field(name: &str) -> Field {
    Field::new(name, DataType::Utf8, true).with_metadata(std::collections::HashMap::from([(
        crate::arrow::jsonl::JSON_METADATA_KEY.to_string(),
        "true".to_string(),
    )]))
}

/// The schema of `read_changes()`.
pub fn changes_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("lsa", DataType::UInt64, false),
        Field::new("commit_lsa", DataType::UInt64, true),
        Field::new("commit_time", ts(), true),
        Field::new("trid", DataType::Int32, false),
        Field::new("txn_seq", DataType::UInt32, false),
        Field::new("user", DataType::Utf8, true),
        Field::new("op", DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8)), false),
        Field::new("trigger", DataType::Boolean, false),
        Field::new("class_oid", DataType::UInt64, true),
        Field::new("row_oid", DataType::UInt64, true),
        Field::new("table", DataType::Utf8, true),
        Field::new("before_image", DataType::Binary, true),
        Field::new("after_image", DataType::Binary, true),
        Field::new("ddl_type", DataType::Int8, true),
        Field::new("object_type", DataType::Int8, true),
        Field::new("object_oid", DataType::UInt64, true),
        Field::new("statement", DataType::Utf8, true),
        Field::new("time", ts(), true),
        Field::new("error", DataType::Utf8, true),
        Field::new("partition_oid", DataType::UInt64, true),
        json_field("before"),
        json_field("after"),
        json_field("key"),
        Field::new("changed_columns", DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))), true),
        Field::new("decode_error", DataType::Utf8, true),
        Field::new("file", DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8)), false),
        Field::new("partial", DataType::Boolean, false),
    ]))
}

/// Fills a batch of some stream's columns one event at a time.
pub trait EventBatchBuilder: Send + Sync {
    fn schema(&self) -> SchemaRef;
    fn append(&mut self, e: &Event);
    /// Events appended since the last batch.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The batch of the events appended since the last one.
    fn finish(&mut self) -> RecordBatch;
    /// The names of the volumes events' `vol` ids stand for, when they change (a followed
    /// log's new volumes; see `ChangeReader::volume_names`).
    fn set_volume_names(&mut self, _names: &[String]) {}
}

/// Fills the columns of `read_changes()` one event at a time.
pub struct ChangesBuilder {
    schema: SchemaRef,
    /// Whether the raw images are copied (a typed table builder does not show them).
    images: bool,
    ops: ArrayRef,
    lsa: UInt64Builder,
    commit_lsa: UInt64Builder,
    commit_time: TimestampSecondBuilder,
    trid: Int32Builder,
    seq: UInt32Builder,
    user: StringBuilder,
    op: Int8Builder,
    trigger: BooleanBuilder,
    class_oid: UInt64Builder,
    row_oid: UInt64Builder,
    table: StringBuilder,
    before: BinaryBuilder,
    after: BinaryBuilder,
    ddl_type: Int8Builder,
    object_type: Int8Builder,
    object_oid: UInt64Builder,
    statement: StringBuilder,
    time: TimestampSecondBuilder,
    error: StringBuilder,
    partition_oid: UInt64Builder,
    before_json: StringBuilder,
    after_json: StringBuilder,
    key: StringBuilder,
    changed: ListBuilder<StringBuilder>,
    decode_error: StringBuilder,
    file_values: ArrayRef,
    file: Int16Builder,
    partial: BooleanBuilder,
}

impl ChangesBuilder {
    /// A builder for events of `log` (whose volume names fill the `file` column).
    pub fn new(log: &dyn LogSource) -> Self {
        ChangesBuilder {
            file_values: Arc::new(StringArray::from_iter_values(
                (0..log.volume_count()).map(|vol| log.volume_file(vol)),
            )),
            file: Int16Builder::new(),
            schema: changes_schema(),
            images: true,
            ops: Arc::new(StringArray::from_iter_values(Op::ALL.iter().map(|o| o.as_str()))),
            lsa: UInt64Builder::new(),
            commit_lsa: UInt64Builder::new(),
            commit_time: TimestampSecondBuilder::new().with_timezone("UTC"),
            trid: Int32Builder::new(),
            seq: UInt32Builder::new(),
            user: StringBuilder::new(),
            op: Int8Builder::new(),
            trigger: BooleanBuilder::new(),
            class_oid: UInt64Builder::new(),
            row_oid: UInt64Builder::new(),
            table: StringBuilder::new(),
            before: BinaryBuilder::new(),
            after: BinaryBuilder::new(),
            ddl_type: Int8Builder::new(),
            object_type: Int8Builder::new(),
            object_oid: UInt64Builder::new(),
            statement: StringBuilder::new(),
            time: TimestampSecondBuilder::new().with_timezone("UTC"),
            error: StringBuilder::new(),
            partition_oid: UInt64Builder::new(),
            before_json: StringBuilder::new(),
            after_json: StringBuilder::new(),
            key: StringBuilder::new(),
            changed: ListBuilder::new(StringBuilder::new()),
            decode_error: StringBuilder::new(),
            partial: BooleanBuilder::new(),
        }
    }

    /// As [`ChangesBuilder::new`], leaving `before_image` / `after_image` null.
    pub fn without_images(log: &dyn LogSource) -> Self {
        ChangesBuilder { images: false, ..ChangesBuilder::new(log) }
    }

    pub fn len(&self) -> usize {
        self.lsa.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn append(&mut self, e: &Event) {
        self.lsa.append_value(e.lsa.to_key());
        self.commit_lsa.append_option(e.commit_lsa.map(|l| l.to_key()));
        self.commit_time.append_option(e.commit_time);
        self.trid.append_value(e.trid);
        self.seq.append_value(e.txn_seq);
        self.user.append_option(e.user.as_deref());
        self.op.append_value(e.op.index() as i8);
        self.trigger.append_value(e.trigger);
        let typed = e.typed.as_ref();
        // A partition's change is reported under its partitioned table, as CUBRID's CDC does.
        let class = typed.and_then(|t| t.root_oid).or(e.class_oid);
        self.class_oid.append_option(oid(class));
        self.row_oid.append_option(oid(e.row_oid));
        self.table.append_option(typed.and_then(|t| t.table.as_deref()));
        let images = self.images;
        self.before.append_option(e.before.as_ref().filter(|_| images).map(|i| &i.row[..]));
        self.after.append_option(e.after.as_ref().filter(|_| images).map(|i| &i.row[..]));
        match &e.ddl {
            Some(d) => {
                self.ddl_type.append_value(d.ddl_type as i8);
                self.object_type.append_value(d.object_type as i8);
                self.object_oid.append_option(oid(Some(d.object_oid)));
                self.statement.append_value(&d.statement);
            }
            None => {
                self.ddl_type.append_null();
                self.object_type.append_null();
                self.object_oid.append_null();
                self.statement.append_null();
            }
        }
        self.time.append_option(e.time);
        self.error.append_option(e.error.as_deref());
        self.partition_oid.append_option(oid(typed.and_then(|t| t.partition_oid)));
        self.before_json.append_option(typed.and_then(|t| t.before.as_deref()));
        self.after_json.append_option(typed.and_then(|t| t.after.as_deref()));
        self.key.append_option(typed.and_then(|t| t.key.as_deref()));
        match typed.and_then(|t| t.changed_columns.as_ref()) {
            Some(cols) => {
                for c in cols {
                    self.changed.values().append_value(c);
                }
                self.changed.append(true);
            }
            None => self.changed.append(false),
        }
        self.decode_error.append_option(typed.and_then(|t| t.decode_error.as_deref()));
        self.file.append_value(e.vol as i16);
        self.partial.append_value(e.partial);
    }

    pub fn finish(&mut self) -> RecordBatch {
        // The next batch is likely the size of this one: start its largest buffers at that
        // size, with an eighth more, rather than growing them by doubling (each growth a copy,
        // and twice the memory).
        let rows = self.lsa.len();
        let room = |n: usize| n + n / 8;
        let grown = |b: &BinaryBuilder| BinaryBuilder::with_capacity(rows, room(b.values_slice().len()));
        let (before, after) = (grown(&self.before), grown(&self.after));
        let text = |b: &StringBuilder| StringBuilder::with_capacity(rows, room(b.values_slice().len()));
        let (before_json, after_json) = (text(&self.before_json), text(&self.after_json));
        let (mut before, mut after) =
            (std::mem::replace(&mut self.before, before), std::mem::replace(&mut self.after, after));
        let mut before_json = std::mem::replace(&mut self.before_json, before_json);
        let mut after_json = std::mem::replace(&mut self.after_json, after_json);
        let op = DictionaryArray::<Int8Type>::try_new(self.op.finish(), self.ops.clone()).expect("op keys in range");
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.lsa.finish()),
            Arc::new(self.commit_lsa.finish()),
            Arc::new(self.commit_time.finish()),
            Arc::new(self.trid.finish()),
            Arc::new(self.seq.finish()),
            Arc::new(self.user.finish()),
            Arc::new(op),
            Arc::new(self.trigger.finish()),
            Arc::new(self.class_oid.finish()),
            Arc::new(self.row_oid.finish()),
            Arc::new(self.table.finish()),
            Arc::new(before.finish()),
            Arc::new(after.finish()),
            Arc::new(self.ddl_type.finish()),
            Arc::new(self.object_type.finish()),
            Arc::new(self.object_oid.finish()),
            Arc::new(self.statement.finish()),
            Arc::new(self.time.finish()),
            Arc::new(self.error.finish()),
            Arc::new(self.partition_oid.finish()),
            Arc::new(before_json.finish()),
            Arc::new(after_json.finish()),
            Arc::new(self.key.finish()),
            Arc::new(self.changed.finish()),
            Arc::new(self.decode_error.finish()),
            Arc::new(
                DictionaryArray::<Int16Type>::try_new(self.file.finish(), self.file_values.clone())
                    .expect("volume numbers in range"),
            ),
            Arc::new(self.partial.finish()),
        ];
        RecordBatch::try_new(self.schema.clone(), cols).expect("columns match the schema")
    }
}

impl EventBatchBuilder for ChangesBuilder {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn append(&mut self, e: &Event) {
        ChangesBuilder::append(self, e)
    }

    fn len(&self) -> usize {
        ChangesBuilder::len(self)
    }

    fn finish(&mut self) -> RecordBatch {
        ChangesBuilder::finish(self)
    }

    fn set_volume_names(&mut self, names: &[String]) {
        self.file_values = Arc::new(StringArray::from_iter_values(names.iter()));
    }
}

/// Event bytes (images, statements; see `Event::weight`) past which a batch of change events
/// ends before `max_rows`: a batch of wide rows stays small, so the memory a stream needs does
/// not depend on how wide its log's rows are (one event more at worst). 8 MiB keeps a batch's
/// largest buffer among the allocations the allocator reuses: at 32 MiB each batch's image
/// column was fresh memory, faulted and zeroed (changes 13 % slower, peak memory a third more).
pub const MAX_BATCH_EVENT_BYTES: usize = 8 << 20;

/// Reads up to `max_rows` events into one batch; `None` once the stream is over.
pub fn next_changes_batch(
    reader: &mut ChangeReader,
    builder: &mut (impl EventBatchBuilder + ?Sized),
    max_rows: usize,
) -> Result<Option<RecordBatch>> {
    let mut bytes = 0;
    while builder.len() < max_rows && bytes < MAX_BATCH_EVENT_BYTES {
        match reader.next_event()? {
            Some(e) => {
                bytes += e.weight();
                builder.append(&e)
            }
            None => break,
        }
    }
    if builder.is_empty() {
        return Ok(None);
    }
    Ok(Some(builder.finish()))
}
