//! Iterators handing batches to Python: records of a forward walk, change events, and the state
//! a change stream can be started again from.

use arrow_schema::SchemaRef;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use walcdc_core::arrow::changes_arrow::{next_changes_batch, ChangesBuilder, EventBatchBuilder};
use walcdc_core::arrow::records_arrow::{next_batch, RecordsBuilder};
use walcdc_core::arrow::typed_arrow::{next_table_batch, TableChangesBuilder, TableSplitter};
use walcdc_core::cdc::changes::{ChangeReader, ReaderState};
use walcdc_core::cdc::options::ChangeOptions;
use walcdc_core::format::lsa::Lsa;
use walcdc_core::log::walker::Walker;

use crate::arrow::{Batch, Schema};
use crate::conversion::{
    beyond_end_dict, cursor_tuple, pending_list, skipped_list, stats_dict, table_columns, CursorTuple,
};
use crate::error::to_py;
use crate::logset::{PyChangeOptions, PyLogSet};

/// Iterates over record batches of a forward walk.
#[pyclass(module = "walcdc._native")]
pub(crate) struct RecordBatches {
    pub(crate) walker: Walker,
    pub(crate) builder: RecordsBuilder,
    pub(crate) batch_size: usize,
    pub(crate) schema: SchemaRef,
}

#[pymethods]
impl RecordBatches {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Batch>> {
        let (walker, builder, n) = (&mut self.walker, &mut self.builder, self.batch_size);
        let res = py.detach(|| next_batch(walker, builder, n));
        match res {
            Ok(Some(b)) => Ok(Some(Batch::new(b))),
            Ok(None) => Ok(None),
            Err(e) => Err(to_py(py, e)),
        }
    }

    fn schema(&self) -> Schema {
        Schema::new(self.schema.clone())
    }

    /// The LSA the walk will read next (None once it is over).
    fn position(&self) -> Option<u64> {
        self.builder.carried().or_else(|| self.walker.position()).map(|l| l.to_key())
    }

    /// Encrypted page runs skipped so far.
    fn skipped<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        skipped_list(py, &self.walker.skipped)
    }

    /// Records on archived pages with a NULL forw_lsa, skipped with the rest of their page.
    fn unplaced(&self) -> Vec<u64> {
        self.walker.unplaced.iter().map(|l| l.to_key()).collect()
    }

    /// Readable records past a torn end of a crashed log, which the walk did not read.
    fn beyond_end<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        beyond_end_dict(py, self.walker.beyond_end)
    }

    fn end_lsa(&self) -> Option<u64> {
        self.walker.end_lsa.map(|l| l.to_key())
    }

    fn end_reason(&self) -> Option<&'static str> {
        self.walker.end_reason.map(|r| r.as_str())
    }
}

/// `(kind, class_oid, table, repid, batch)` of a batch by table.
type TableBatchTuple = (&'static str, Option<u64>, Option<String>, i32, Batch);
/// What finishes a change stream's events, for a whole log or a range: the options, and the
/// batch builder of `read_changes()`'s schema, or with `columns` (column dicts of
/// `schemas()`) of one table's typed changes; with `by_table` (the committed stream only), the
/// splitter of every table's typed changes. Typed output needs the values decoded.
pub(crate) fn finishing(
    py: Python<'_>,
    log: &PyLogSet,
    options: &PyChangeOptions,
    columns: Option<&Bound<'_, PyList>>,
    by_table: bool,
    batch_size: usize,
) -> PyResult<(ChangeOptions, Box<dyn EventBatchBuilder>, Option<TableSplitter>)> {
    let mut opts = options.inner.clone();
    if by_table && !opts.committed_only {
        let msg = "typed output by table reads the committed stream (committed_only=True)".into();
        return Err(to_py(py, walcdc_core::error::LogError::InvalidArgument { msg }));
    }
    let splitter = by_table.then(|| {
        opts.values = true;
        TableSplitter::new(log.inner.clone(), opts.mode, batch_size)
    });
    let builder: Box<dyn EventBatchBuilder> = match columns {
        Some(cols) => {
            opts.values = true;
            Box::new(TableChangesBuilder::new(&*log.inner, table_columns(cols)?, opts.mode))
        }
        None => Box::new(ChangesBuilder::new(&*log.inner)),
    };
    Ok((opts, builder, splitter))
}

/// Iterates over batches of change events.
#[pyclass(module = "walcdc._native")]
pub(crate) struct ChangeBatches {
    pub(crate) reader: ChangeReader,
    /// `read_changes()`'s columns, or one table's typed columns.
    pub(crate) builder: Box<dyn EventBatchBuilder>,
    /// Batches by table (`next_table`), when the stream was opened for them.
    pub(crate) splitter: Option<TableSplitter>,
    pub(crate) batch_size: usize,
}

/// What a change stream knows at a record boundary (catalog and open transactions), to start
/// another stream there without reading the log before it.
#[pyclass(name = "ReaderState", module = "walcdc._native", frozen)]
pub(crate) struct PyReaderState {
    pub(crate) inner: ReaderState,
}

#[pymethods]
impl PyReaderState {
    /// The LSA (u64) of the first record a stream started from this state reads.
    #[getter]
    fn position(&self) -> u64 {
        self.inner.position().to_key()
    }

    #[getter]
    fn open_transactions(&self) -> usize {
        self.inner.open_transactions()
    }

    #[getter]
    fn buffered_events(&self) -> usize {
        self.inner.buffered_events()
    }

    #[getter]
    fn db_creation(&self) -> i64 {
        self.inner.db_creation()
    }

    /// The state as bytes (`ReaderState.from_bytes` reads them back).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let bytes = py.detach(|| self.inner.to_bytes());
        PyBytes::new(py, &bytes)
    }

    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<PyReaderState> {
        py.detach(|| ReaderState::from_bytes(data)).map(|inner| PyReaderState { inner }).map_err(|e| to_py(py, e))
    }

    /// Pickling (Spark ships states to its executors this way).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let py = slf.py();
        let from_bytes = slf.get_type().getattr("from_bytes")?;
        Ok((from_bytes, (slf.borrow().to_bytes(py),)))
    }

    fn __repr__(&self) -> String {
        let p = self.inner.position();
        format!(
            "ReaderState(position={}|{}, open_transactions={}, buffered_events={})",
            p.pageid,
            p.offset,
            self.inner.open_transactions(),
            self.inner.buffered_events()
        )
    }
}

#[pymethods]
impl ChangeBatches {
    /// The reader's state once every event made so far was read (see `ReaderState`).
    fn state(&self, py: Python<'_>) -> PyResult<PyReaderState> {
        self.reader.state().map(|inner| PyReaderState { inner }).map_err(|e| to_py(py, e))
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Batch>> {
        let (reader, builder, n) = (&mut self.reader, &mut self.builder, self.batch_size);
        match py.detach(|| next_changes_batch(reader, builder.as_mut(), n)) {
            Ok(Some(b)) => Ok(Some(Batch::new(b))),
            Ok(None) => Ok(None),
            Err(e) => Err(to_py(py, e)),
        }
    }

    fn schema(&self) -> Schema {
        Schema::new(self.builder.schema())
    }

    /// The next batch by table, `(kind, class_oid, table, repid, batch)` (kind `"table"`,
    /// `"ddl"` or `"unknown_schema"`), or None at the end (streams opened `by_table`).
    fn next_table(&mut self, py: Python<'_>) -> PyResult<Option<TableBatchTuple>> {
        let reader = &mut self.reader;
        let Some(split) = self.splitter.as_mut() else {
            return Err(pyo3::exceptions::PyValueError::new_err("the stream was not opened by table"));
        };
        match py.detach(|| next_table_batch(reader, split)) {
            Ok(Some(t)) => {
                Ok(Some((t.kind.as_str(), t.class_oid.map(|o| o.to_cdc()), t.table, t.repid, Batch::new(t.batch))))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(to_py(py, e)),
        }
    }

    /// `(db_creation, restart_lsa, last_commit_lsa, txn_offset, position, engine)` for resuming after what was
    /// read so far.
    fn cursor(&self) -> CursorTuple {
        cursor_tuple(&self.reader.cursor())
    }

    /// What the class records said at or before `restart` (a cursor's restart point), as
    /// bytes to keep beside the cursor; None when the stream has none (user-given schemas).
    fn catalog_checkpoint<'py>(&self, py: Python<'py>, restart: u64) -> Option<Bound<'py, PyBytes>> {
        self.reader.catalog_checkpoint(Lsa::from_key(restart)).map(|c| PyBytes::new(py, &c.to_bytes()))
    }

    /// The tables of unknown schema seen so far, as class OIDs (CDC packing).
    fn unknown_schema_classes(&self) -> Vec<u64> {
        self.reader.unknown_schema_classes()
    }

    /// The supplemental records of the whole stream this reader ends (the tail of a stream
    /// read by ranges; see `ChangeReader::set_supplemental_records`).
    fn set_supplemental_records(&mut self, n: u64) {
        self.reader.set_supplemental_records(n);
    }

    fn is_done(&self) -> bool {
        self.reader.is_done()
    }

    /// Following a live log: goes on in `log`, a fresh snapshot of the same log set (the header
    /// read again, new archives found). Returns whether the stream had reached the end of what
    /// was written.
    fn refresh(&mut self, py: Python<'_>, log: PyRef<'_, crate::logset::PyLogSet>) -> PyResult<bool> {
        let (reader, builder, log) = (&mut self.reader, &mut self.builder, log.inner.clone());
        py.detach(|| -> walcdc_core::error::Result<bool> {
            let moved = reader.refresh(log)?;
            builder.set_volume_names(&reader.volume_names());
            Ok(moved)
        })
        .map_err(|e| to_py(py, e))
    }

    /// Where the walk stopped, and why (`"live_tail"` at the end of what a live log holds).
    fn end_reason(&self) -> Option<&'static str> {
        self.reader.end_reason().map(|r| r.as_str())
    }

    /// Encrypted page runs skipped so far.
    fn skipped<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        skipped_list(py, self.reader.skipped())
    }

    /// Records on archived pages with a NULL forw_lsa, skipped with the rest of their page.
    fn unplaced(&self) -> Vec<u64> {
        self.reader.unplaced().iter().map(|l| l.to_key()).collect()
    }

    /// Readable records past a torn end of a crashed log, which the stream did not read.
    fn beyond_end<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        beyond_end_dict(py, self.reader.beyond_end())
    }

    /// Transactions still open at the end of the stream.
    fn pending<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        pending_list(py, self.reader.pending())
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.reader.stats)
    }
}
