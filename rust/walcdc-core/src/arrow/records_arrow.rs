//! `records()`: one Arrow row per log record, built directly into Arrow buffers.

use std::sync::Arc;

use arrow_array::builder::BinaryBuilder;
use arrow_array::types::{Int16Type, Int32Type, Int8Type, TimestampSecondType, UInt32Type, UInt64Type};
use arrow_array::{ArrayRef, DictionaryArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::arrow::columns::{booleans, Column, Reserve, RESERVED_ROWS};
use crate::error::Result;
use crate::format::lsa::Lsa;
use crate::format::rcvindex::RCVINDEX_NAMES;
use crate::format::rectype::{type_name, NUM_TYPES};
use crate::log::payload::ReadPayloads;
use crate::log::record::Record;
use crate::log::source::LogSource;
use crate::log::walker::Walker;

fn dict(key: DataType) -> DataType {
    DataType::Dictionary(Box::new(key), Box::new(DataType::Utf8))
}

/// The schema of `records()`. LSAs are order-preserving u64 (`pageid << 16 | offset`), NULL LSAs
/// are nulls.
pub fn records_schema(with_payloads: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("lsa", DataType::UInt64, false),
        Field::new("forw_lsa", DataType::UInt64, true),
        Field::new("back_lsa", DataType::UInt64, true),
        Field::new("prev_tranlsa", DataType::UInt64, true),
        Field::new("trid", DataType::Int32, false),
        Field::new("type", dict(DataType::Int8), false),
        Field::new("rcvindex", DataType::Int32, true),
        Field::new("rcvindex_name", dict(DataType::Int16), true),
        Field::new("data_volid", DataType::Int16, true),
        Field::new("data_pageid", DataType::Int32, true),
        Field::new("data_offset", DataType::Int16, true),
        Field::new("undo_length", DataType::UInt32, false),
        Field::new("redo_length", DataType::UInt32, false),
        Field::new("undo_stored_length", DataType::UInt32, false),
        Field::new("redo_stored_length", DataType::UInt32, false),
        Field::new("undo_zipped", DataType::Boolean, false),
        Field::new("redo_zipped", DataType::Boolean, false),
        Field::new("supplement_type", DataType::Int8, true),
        Field::new("at_time", DataType::Timestamp(TimeUnit::Second, Some("UTC".into())), true),
        Field::new("size", DataType::UInt32, false),
        Field::new("file", dict(DataType::Int16), false),
    ];
    if with_payloads {
        fields.push(Field::new("undo", DataType::Binary, false));
        fields.push(Field::new("redo", DataType::Binary, false));
    }
    Arc::new(Schema::new(fields))
}

/// Fills the columns of `records()` one record at a time (only those asked for).
pub struct RecordsBuilder {
    schema: SchemaRef,
    /// Which columns of the full schema are built (by position).
    want: [bool; MAX_COLUMNS],
    type_values: ArrayRef,
    rcv_values: ArrayRef,
    file_values: ArrayRef,
    lsa: Column<UInt64Type>,
    forw: Column<UInt64Type>,
    back: Column<UInt64Type>,
    prev: Column<UInt64Type>,
    trid: Column<Int32Type>,
    rectype: Column<Int8Type>,
    rcv: Column<Int32Type>,
    rcv_name: Column<Int16Type>,
    volid: Column<Int16Type>,
    pageid: Column<Int32Type>,
    offset: Column<Int16Type>,
    undo_len: Column<UInt32Type>,
    redo_len: Column<UInt32Type>,
    undo_stored: Column<UInt32Type>,
    redo_stored: Column<UInt32Type>,
    undo_zip: Vec<bool>,
    redo_zip: Vec<bool>,
    supp: Column<Int8Type>,
    at_time: Column<TimestampSecondType>,
    size: Column<UInt32Type>,
    file: Column<Int16Type>,
    payloads: Option<(BinaryBuilder, BinaryBuilder, Vec<u8>, Vec<u8>)>,
    /// Payload bytes in the batch being built, and the most a batch takes (a binary column's
    /// offsets are 32-bit, and a batch's memory should not grow with what a record claims).
    payload_bytes: u64,
    pub max_payload_bytes: u64,
    /// A record read but left for the next batch (it would have overfilled this one).
    carry: Option<Record>,
}

/// Columns of `records(payloads=True)`.
const MAX_COLUMNS: usize = 23;
// Positions in the full schema (`lsa`, 0, is always built: it counts the rows).
const FORW: usize = 1;
const BACK: usize = 2;
const PREV: usize = 3;
const TRID: usize = 4;
const TYPE: usize = 5;
const RCV: usize = 6;
const RCV_NAME: usize = 7;
const VOLID: usize = 8;
const PAGEID: usize = 9;
const OFFSET: usize = 10;
const UNDO_LEN: usize = 11;
const REDO_LEN: usize = 12;
const UNDO_STORED: usize = 13;
const REDO_STORED: usize = 14;
const UNDO_ZIP: usize = 15;
const REDO_ZIP: usize = 16;
const SUPP: usize = 17;
const AT_TIME: usize = 18;
const SIZE: usize = 19;
const FILE: usize = 20;

/// Payload bytes per batch of `records(payloads=True)`: a batch ends before a record that would
/// take it past this (a record alone may: each payload is at most 1 GiB).
pub const MAX_BATCH_PAYLOAD_BYTES: u64 = 256 << 20;

impl RecordsBuilder {
    /// A builder of every column of `records()` (with `undo` / `redo` when `with_payloads`).
    pub fn new(log: &dyn LogSource, with_payloads: bool) -> RecordsBuilder {
        Self::with_columns(log, with_payloads, None).expect("every column exists")
    }

    /// A builder of the columns named (in the schema's order; None: all of them). Unknown
    /// names are an error; `undo` / `redo` need `with_payloads`.
    pub fn with_columns(
        log: &dyn LogSource,
        with_payloads: bool,
        columns: Option<&[String]>,
    ) -> Result<RecordsBuilder> {
        let full = records_schema(with_payloads);
        let mut want = [false; MAX_COLUMNS];
        match columns {
            None => want[..full.fields().len()].iter_mut().for_each(|w| *w = true),
            Some([]) => {
                return Err(crate::error::LogError::InvalidArgument { msg: "columns: name at least one column".into() })
            }
            Some(names) => {
                for n in names {
                    let i = full.index_of(n).map_err(|_| crate::error::LogError::InvalidArgument {
                        msg: format!(
                            "columns: records() has no column {n:?}{}",
                            if !with_payloads && (n == "undo" || n == "redo") {
                                " (without payloads=True)"
                            } else {
                                ""
                            }
                        ),
                    })?;
                    want[i] = true;
                }
            }
        }
        let kept: Vec<usize> = (0..full.fields().len()).filter(|&i| want[i]).collect();
        let schema = Arc::new(full.project(&kept).expect("positions of the schema"));
        let mut b = Self::all(log, with_payloads && (want[MAX_COLUMNS - 2] || want[MAX_COLUMNS - 1]));
        b.schema = schema;
        b.want = want;
        Ok(b)
    }

    fn all(log: &dyn LogSource, with_payloads: bool) -> RecordsBuilder {
        let type_values: ArrayRef =
            Arc::new(StringArray::from_iter_values((0..NUM_TYPES).map(|t| type_name(t as i32).unwrap_or(""))));
        let rcv_values: ArrayRef = Arc::new(StringArray::from_iter_values(RCVINDEX_NAMES.iter()));
        let file_values: ArrayRef =
            Arc::new(StringArray::from_iter_values((0..log.volume_count()).map(|vol| log.volume_file(vol))));
        RecordsBuilder {
            schema: records_schema(with_payloads),
            want: [true; MAX_COLUMNS],
            type_values,
            rcv_values,
            file_values,
            lsa: Column::new(),
            forw: Column::new(),
            back: Column::new(),
            prev: Column::new(),
            trid: Column::new(),
            rectype: Column::new(),
            rcv: Column::new(),
            rcv_name: Column::new(),
            volid: Column::new(),
            pageid: Column::new(),
            offset: Column::new(),
            undo_len: Column::new(),
            redo_len: Column::new(),
            undo_stored: Column::new(),
            redo_stored: Column::new(),
            undo_zip: Vec::new(),
            redo_zip: Vec::new(),
            supp: Column::new(),
            at_time: Column::new(),
            size: Column::new(),
            file: Column::new(),
            payloads: with_payloads.then(|| (BinaryBuilder::new(), BinaryBuilder::new(), Vec::new(), Vec::new())),
            payload_bytes: 0,
            max_payload_bytes: MAX_BATCH_PAYLOAD_BYTES,
            carry: None,
        }
    }

    /// The schema of the batches (the columns asked for).
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    pub fn len(&self) -> usize {
        self.lsa.values.len()
    }

    /// Room in every column built for a batch of `max_rows` (up to [`RESERVED_ROWS`]): the
    /// columns [`RecordsBuilder::append`] fills, by the same tests of what was asked for.
    fn reserve(&mut self, max_rows: usize) {
        let rows = max_rows.min(RESERVED_ROWS);
        let w = self.want;
        let (rcv, page) = (w[RCV] || w[RCV_NAME], w[VOLID] || w[PAGEID] || w[OFFSET]);
        let columns: [(&mut dyn Reserve, bool); 21] = [
            (&mut self.lsa, true),
            (&mut self.forw, w[FORW]),
            (&mut self.back, w[BACK]),
            (&mut self.prev, w[PREV]),
            (&mut self.trid, w[TRID]),
            (&mut self.rectype, w[TYPE]),
            (&mut self.rcv, rcv),
            (&mut self.rcv_name, rcv),
            (&mut self.volid, page),
            (&mut self.pageid, page),
            (&mut self.offset, page),
            (&mut self.undo_len, w[UNDO_LEN]),
            (&mut self.redo_len, w[REDO_LEN]),
            (&mut self.undo_stored, w[UNDO_STORED]),
            (&mut self.redo_stored, w[REDO_STORED]),
            (&mut self.undo_zip, w[UNDO_ZIP]),
            (&mut self.redo_zip, w[REDO_ZIP]),
            (&mut self.supp, w[SUPP]),
            (&mut self.at_time, w[AT_TIME]),
            (&mut self.size, w[SIZE]),
            (&mut self.file, w[FILE]),
        ];
        for (column, wanted) in columns {
            if wanted {
                column.reserve(rows);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn append(&mut self, log: &dyn LogSource, r: &Record) -> Result<()> {
        let w = &self.want;
        self.lsa.push(r.lsa.to_key());
        if w[FORW] {
            self.forw.push_option(r.forw_lsa.key_or_none());
        }
        if w[BACK] {
            self.back.push_option(r.back_lsa.key_or_none());
        }
        if w[PREV] {
            self.prev.push_option(r.prev_tranlsa.key_or_none());
        }
        if w[TRID] {
            self.trid.push(r.trid);
        }
        if w[TYPE] {
            self.rectype.push(r.rectype as i8);
        }
        if w[RCV] || w[RCV_NAME] {
            let rcv = r.rcvindex();
            self.rcv.push_option(rcv);
            self.rcv_name.push_option(rcv.filter(|&i| i >= 0 && (i as usize) < RCVINDEX_NAMES.len()).map(|i| i as i16));
        }
        if w[VOLID] || w[PAGEID] || w[OFFSET] {
            match r.data_page() {
                Some((v, p, o)) => {
                    self.volid.push(v);
                    self.pageid.push(p);
                    self.offset.push(o);
                }
                None => {
                    self.volid.push_option(None);
                    self.pageid.push_option(None);
                    self.offset.push_option(None);
                }
            }
        }
        if w[UNDO_LEN] {
            self.undo_len.push(log.original_len(&r.undo)?);
        }
        if w[REDO_LEN] {
            self.redo_len.push(log.original_len(&r.redo)?);
        }
        if w[UNDO_STORED] {
            self.undo_stored.push(r.undo.stored_len);
        }
        if w[REDO_STORED] {
            self.redo_stored.push(r.redo.stored_len);
        }
        if w[UNDO_ZIP] {
            self.undo_zip.push(r.undo.zipped);
        }
        if w[REDO_ZIP] {
            self.redo_zip.push(r.redo.zipped);
        }
        if w[SUPP] {
            self.supp.push_option(r.supplement_type().map(|t| t as i8));
        }
        if w[AT_TIME] {
            self.at_time.push_option(r.at_time());
        }
        if w[SIZE] {
            self.size.push(r.size_in_log(log.page_size()).min(u32::MAX as u64) as u32);
        }
        if w[FILE] {
            self.file.push(r.vol as i16);
        }
        if let Some((ub, rb, undo, redo)) = &mut self.payloads {
            log.images(r, undo, redo)?;
            ub.append_value(&undo[..]);
            rb.append_value(&redo[..]);
            self.payload_bytes += (undo.len() + redo.len()) as u64;
        }
        Ok(())
    }

    /// Whether `r`'s payloads would take a non-empty batch past its payload bound (known from
    /// the lengths alone, before anything is unzipped).
    fn would_overfill(&self, log: &dyn LogSource, r: &Record) -> Result<bool> {
        if self.payloads.is_none() || self.is_empty() {
            return Ok(false);
        }
        let need = log.original_len(&r.undo)? as u64 + log.original_len(&r.redo)? as u64;
        Ok(self.payload_bytes + need > self.max_payload_bytes)
    }

    /// The record left for the next batch, if any (where a reader that stops now resumes).
    pub fn carried(&self) -> Option<Lsa> {
        self.carry.map(|r| r.lsa)
    }

    fn dict8(keys: &mut Column<Int8Type>, values: &ArrayRef) -> ArrayRef {
        Arc::new(DictionaryArray::<Int8Type>::try_new(keys.finish(), values.clone()).expect("keys in range"))
    }

    fn dict16(keys: &mut Column<Int16Type>, values: &ArrayRef) -> ArrayRef {
        Arc::new(DictionaryArray::<Int16Type>::try_new(keys.finish(), values.clone()).expect("keys in range"))
    }

    /// Takes the rows appended so far as one batch.
    pub fn finish(&mut self) -> RecordBatch {
        self.payload_bytes = 0;
        let n = self.len();
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(self.lsa.finish()),
            Arc::new(self.forw.finish()),
            Arc::new(self.back.finish()),
            Arc::new(self.prev.finish()),
            Arc::new(self.trid.finish()),
            Self::dict8(&mut self.rectype, &self.type_values),
            Arc::new(self.rcv.finish()),
            Self::dict16(&mut self.rcv_name, &self.rcv_values),
            Arc::new(self.volid.finish()),
            Arc::new(self.pageid.finish()),
            Arc::new(self.offset.finish()),
            Arc::new(self.undo_len.finish()),
            Arc::new(self.redo_len.finish()),
            Arc::new(self.undo_stored.finish()),
            Arc::new(self.redo_stored.finish()),
            Arc::new(booleans(&mut self.undo_zip)),
            Arc::new(booleans(&mut self.redo_zip)),
            Arc::new(self.supp.finish()),
            Arc::new(self.at_time.finish().with_timezone("UTC")),
            Arc::new(self.size.finish()),
            Self::dict16(&mut self.file, &self.file_values),
        ];
        if let Some((ub, rb, _, _)) = &mut self.payloads {
            cols.push(Arc::new(ub.finish()));
            cols.push(Arc::new(rb.finish()));
        }
        let kept: Vec<ArrayRef> = cols.into_iter().enumerate().filter(|(i, _)| self.want[*i]).map(|(_, c)| c).collect();
        debug_assert!(kept.iter().all(|c| c.len() == n));
        RecordBatch::try_new(self.schema.clone(), kept).expect("columns match the schema")
    }
}

/// Walks up to `max_rows` records into one batch; `None` once the walk is over.
pub fn next_batch(walker: &mut Walker, builder: &mut RecordsBuilder, max_rows: usize) -> Result<Option<RecordBatch>> {
    let log = walker.log().clone();
    if builder.is_empty() {
        builder.reserve(max_rows);
    }
    if let Some(r) = builder.carry.take() {
        builder.append(&*log, &r)?;
    }
    while builder.len() < max_rows {
        match walker.next_ref()? {
            Some(r) if builder.would_overfill(&*log, r)? => {
                builder.carry = Some(*r);
                break;
            }
            Some(r) => builder.append(&*log, r)?,
            None => break,
        }
    }
    if builder.is_empty() {
        return Ok(None);
    }
    Ok(Some(builder.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rectype::LOG_UNDO_DATA;
    use crate::log::logset::LogSet;
    use crate::log::walker::OnEncrypted;
    use crate::testkit::writer::{DataFields, LogWriter, WriterConfig};

    #[test]
    fn payload_batches_stay_within_their_bound() {
        let dir = tempfile::tempdir().unwrap();
        let mut w =
            LogWriter::new(WriterConfig { active_pages: 4096, archive_pages: 1024, ..Default::default() }).unwrap();
        let big = vec![7u8; 1 << 20];
        let mut lsas = Vec::new();
        for i in 0..9 {
            let undo = if i % 3 == 2 { &big[..10] } else { &big[..] };
            lsas.push(w.append(1, LOG_UNDO_DATA, &DataFields::default(), undo, &[], i % 2 == 0, false).unwrap());
        }
        w.finish(dir.path()).unwrap();
        let log = Arc::new(LogSet::open(&[dir.path()]).unwrap());
        let mut walker = Walker::new(log.clone(), None, None, OnEncrypted::Raise).unwrap();
        let mut b = RecordsBuilder::new(&*log, true);
        b.max_payload_bytes = (5 << 20) / 2;
        let (mut seen, mut batches) = (Vec::new(), 0);
        while let Some(batch) = next_batch(&mut walker, &mut b, 1000).unwrap() {
            batches += 1;
            let undo =
                batch.column_by_name("undo").unwrap().as_any().downcast_ref::<arrow_array::BinaryArray>().unwrap();
            let bytes: usize = undo.iter().map(|v| v.map_or(0, <[u8]>::len)).sum();
            assert!(bytes as u64 <= b.max_payload_bytes || batch.num_rows() == 1, "{bytes} bytes in one batch");
            let lsa = batch.column(0).as_any().downcast_ref::<arrow_array::UInt64Array>().unwrap();
            seen.extend(lsa.values().iter().copied());
        }
        // Every record once, in order; 6 MiB of payloads in batches of at most 2.5 MiB.
        assert_eq!(seen, lsas.iter().map(|l| l.to_key()).collect::<Vec<_>>());
        assert!(batches >= 3, "{batches} batches");
    }

    #[test]
    fn a_short_batch_holds_only_its_rows() {
        // Thousands of small ranges each give a short batch, and a caller may keep them all
        // (`read_all`): a batch must not hold the room reserved for a full one.
        let dir = tempfile::tempdir().unwrap();
        let mut w = LogWriter::new(WriterConfig { active_pages: 64, archive_pages: 64, ..Default::default() }).unwrap();
        for i in 0..5 {
            w.append(1, LOG_UNDO_DATA, &DataFields::default(), b"row", &[], i % 2 == 0, false).unwrap();
        }
        w.finish(dir.path()).unwrap();
        let log = Arc::new(LogSet::open(&[dir.path()]).unwrap());
        let mut builder = RecordsBuilder::new(&*log, false);
        for _ in 0..3 {
            let mut walker = Walker::new(log.clone(), None, None, OnEncrypted::Raise).unwrap();
            let batch = next_batch(&mut walker, &mut builder, 1 << 16).unwrap().unwrap();
            assert!(batch.num_rows() >= 5);
            let bytes = batch.get_array_memory_size();
            assert!(bytes < 16 << 10, "{bytes} bytes for {} rows", batch.num_rows());
        }
    }
}
