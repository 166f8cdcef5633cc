//! Change events as Arrow batches.

use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::types::{Int16Type, Int32Type, Int8Type, TimestampSecondType, UInt32Type, UInt64Type};
use arrow_array::{ArrayRef, DictionaryArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::arrow::columns::{booleans, Bytes, Column, Reserve, Text, RESERVED_ROWS};
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
    lsa: Column<UInt64Type>,
    commit_lsa: Column<UInt64Type>,
    commit_time: Column<TimestampSecondType>,
    trid: Column<Int32Type>,
    seq: Column<UInt32Type>,
    user: Text,
    op: Column<Int8Type>,
    trigger: Vec<bool>,
    class_oid: Column<UInt64Type>,
    row_oid: Column<UInt64Type>,
    table: Text,
    before: Bytes,
    after: Bytes,
    ddl_type: Column<Int8Type>,
    object_type: Column<Int8Type>,
    object_oid: Column<UInt64Type>,
    statement: Text,
    time: Column<TimestampSecondType>,
    error: Text,
    partition_oid: Column<UInt64Type>,
    before_json: Text,
    after_json: Text,
    key: Text,
    changed: ListBuilder<StringBuilder>,
    decode_error: Text,
    file_values: ArrayRef,
    file: Column<Int16Type>,
    partial: Vec<bool>,
}

impl ChangesBuilder {
    /// A builder for events of `log` (whose volume names fill the `file` column).
    pub fn new(log: &dyn LogSource) -> Self {
        ChangesBuilder {
            file_values: Arc::new(StringArray::from_iter_values(
                (0..log.volume_count()).map(|vol| log.volume_file(vol)),
            )),
            file: Column::new(),
            schema: changes_schema(),
            images: true,
            ops: Arc::new(StringArray::from_iter_values(Op::ALL.iter().map(|o| o.as_str()))),
            lsa: Column::new(),
            commit_lsa: Column::new(),
            commit_time: Column::new(),
            trid: Column::new(),
            seq: Column::new(),
            user: Text::new(),
            op: Column::new(),
            trigger: Vec::new(),
            class_oid: Column::new(),
            row_oid: Column::new(),
            table: Text::new(),
            before: Bytes::new(),
            after: Bytes::new(),
            ddl_type: Column::new(),
            object_type: Column::new(),
            object_oid: Column::new(),
            statement: Text::new(),
            time: Column::new(),
            error: Text::new(),
            partition_oid: Column::new(),
            before_json: Text::new(),
            after_json: Text::new(),
            key: Text::new(),
            changed: ListBuilder::new(StringBuilder::new()),
            decode_error: Text::new(),
            partial: Vec::new(),
        }
    }

    /// As [`ChangesBuilder::new`], leaving `before_image` / `after_image` null.
    pub fn without_images(log: &dyn LogSource) -> Self {
        ChangesBuilder { images: false, ..ChangesBuilder::new(log) }
    }

    pub fn len(&self) -> usize {
        self.lsa.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn append(&mut self, e: &Event) {
        self.lsa.push(e.lsa.to_key());
        self.commit_lsa.push_option(e.commit_lsa.map(|l| l.to_key()));
        self.commit_time.push_option(e.commit_time);
        self.trid.push(e.trid);
        self.seq.push(e.txn_seq);
        self.user.push_option(e.user.as_deref());
        self.op.push(e.op.index() as i8);
        self.trigger.push(e.trigger);
        let typed = e.typed.as_ref();
        // A partition's change is reported under its partitioned table, as CUBRID's CDC does.
        let class = typed.and_then(|t| t.root_oid).or(e.class_oid);
        self.class_oid.push_option(oid(class));
        self.row_oid.push_option(oid(e.row_oid));
        self.table.push_option(typed.and_then(|t| t.table.as_deref()));
        let images = self.images;
        self.before.push_option(e.before.as_ref().filter(|_| images).map(|i| &i.row[..]));
        self.after.push_option(e.after.as_ref().filter(|_| images).map(|i| &i.row[..]));
        match &e.ddl {
            Some(d) => {
                self.ddl_type.push(d.ddl_type as i8);
                self.object_type.push(d.object_type as i8);
                self.object_oid.push_option(oid(Some(d.object_oid)));
                self.statement.push_option(Some(&d.statement));
            }
            None => {
                self.ddl_type.push_option(None);
                self.object_type.push_option(None);
                self.object_oid.push_option(None);
                self.statement.push_null();
            }
        }
        self.time.push_option(e.time);
        self.error.push_option(e.error.as_deref());
        self.partition_oid.push_option(oid(typed.and_then(|t| t.partition_oid)));
        self.before_json.push_option(typed.and_then(|t| t.before.as_deref()));
        self.after_json.push_option(typed.and_then(|t| t.after.as_deref()));
        self.key.push_option(typed.and_then(|t| t.key.as_deref()));
        match typed.and_then(|t| t.changed_columns.as_ref()) {
            Some(cols) => {
                for c in cols {
                    self.changed.values().append_value(c);
                }
                self.changed.append(true);
            }
            None => self.changed.append(false),
        }
        self.decode_error.push_option(typed.and_then(|t| t.decode_error.as_deref()));
        self.file.push(e.vol as i16);
        self.partial.push(e.partial);
    }

    pub fn finish(&mut self) -> RecordBatch {
        // The next batch is likely the size of this one: start its columns at that size, and
        // its largest buffers with an eighth more, rather than growing them by doubling (each
        // growth a copy, and twice the memory).
        let rows = self.len();
        let room = |n: usize| n + n / 8;
        let (before_room, after_room) = (room(self.before.bytes()), room(self.after.bytes()));
        let (before_json_room, after_json_room) = (room(self.before_json.bytes()), room(self.after_json.bytes()));
        let op = DictionaryArray::<Int8Type>::try_new(self.op.finish(), self.ops.clone()).expect("op keys in range");
        let file = DictionaryArray::<Int16Type>::try_new(self.file.finish(), self.file_values.clone())
            .expect("volume numbers in range");
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.lsa.finish()),
            Arc::new(self.commit_lsa.finish()),
            Arc::new(self.commit_time.finish().with_timezone("UTC")),
            Arc::new(self.trid.finish()),
            Arc::new(self.seq.finish()),
            Arc::new(self.user.finish(0)),
            Arc::new(op),
            Arc::new(booleans(&mut self.trigger)),
            Arc::new(self.class_oid.finish()),
            Arc::new(self.row_oid.finish()),
            Arc::new(self.table.finish(0)),
            Arc::new(self.before.finish(before_room)),
            Arc::new(self.after.finish(after_room)),
            Arc::new(self.ddl_type.finish()),
            Arc::new(self.object_type.finish()),
            Arc::new(self.object_oid.finish()),
            Arc::new(self.statement.finish(0)),
            Arc::new(self.time.finish().with_timezone("UTC")),
            Arc::new(self.error.finish(0)),
            Arc::new(self.partition_oid.finish()),
            Arc::new(self.before_json.finish(before_json_room)),
            Arc::new(self.after_json.finish(after_json_room)),
            Arc::new(self.key.finish(0)),
            Arc::new(self.changed.finish()),
            Arc::new(self.decode_error.finish(0)),
            Arc::new(file),
            Arc::new(booleans(&mut self.partial)),
        ];
        self.reserve(rows.min(RESERVED_ROWS));
        RecordBatch::try_new(self.schema.clone(), cols).expect("columns match the schema")
    }

    /// Room for `rows` more rows in every column but the list of changed columns.
    fn reserve(&mut self, rows: usize) {
        let columns: [&mut dyn Reserve; 26] = [
            &mut self.lsa,
            &mut self.commit_lsa,
            &mut self.commit_time,
            &mut self.trid,
            &mut self.seq,
            &mut self.user,
            &mut self.op,
            &mut self.trigger,
            &mut self.class_oid,
            &mut self.row_oid,
            &mut self.table,
            &mut self.before,
            &mut self.after,
            &mut self.ddl_type,
            &mut self.object_type,
            &mut self.object_oid,
            &mut self.statement,
            &mut self.time,
            &mut self.error,
            &mut self.partition_oid,
            &mut self.before_json,
            &mut self.after_json,
            &mut self.key,
            &mut self.decode_error,
            &mut self.file,
            &mut self.partial,
        ];
        for column in columns {
            column.reserve(rows);
        }
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
