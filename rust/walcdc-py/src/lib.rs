//! Thin PyO3 bindings over walcdc-core: log sets, record batches handed to Python through the
//! Arrow C data interface (PyCapsules, no copy), and typed errors.

mod error;
mod testing_encode;

use error::to_py;

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, StructArray};
use arrow_data::ffi::FFI_ArrowArray;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{DataType, SchemaRef};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyCapsuleMethods, PyDict, PyList, PyTuple};

use walcdc_core::catalog::UserColumn;
use walcdc_core::changes::{self, ChangeOptions, ChangeReader, Cursor, ImageMode, OnError, Op, ReaderState};
use walcdc_core::changes_arrow::{changes_schema, next_changes_batch, ChangesBuilder};
use walcdc_core::records_arrow::{next_batch, records_schema, RecordsBuilder};
use walcdc_core::schema::Domain;
use walcdc_core::supplemental::Oid;
use walcdc_core::walker::{find_end, SkippedRange};
use walcdc_core::writer::{DataFields, LogWriter, WriterConfig};
use walcdc_core::{LogError, LogSet, Lsa, OnEncrypted, Walker};

fn key_to_lsa(v: Option<u64>) -> Option<Lsa> {
    v.map(Lsa::from_key)
}

fn schema_capsule<'py>(py: Python<'py>, schema: &SchemaRef) -> PyResult<Bound<'py, PyCapsule>> {
    let dt = DataType::Struct(schema.fields().clone());
    let ffi = FFI_ArrowSchema::try_from(&dt).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    PyCapsule::new_with_value(py, ffi, c"arrow_schema")
}

/// One record batch, exported on request through `__arrow_c_array__`.
#[pyclass(module = "walcdc._native")]
struct Batch {
    batch: Option<RecordBatch>,
}

#[pymethods]
impl Batch {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &mut self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let batch = self.batch.take().ok_or_else(|| PyRuntimeError::new_err("batch already exported"))?;
        let schema = batch.schema();
        let data = StructArray::from(batch).into_data();
        let array = FFI_ArrowArray::new(&data);
        let s = schema_capsule(py, &schema)?;
        let a = PyCapsule::new_with_value(py, array, c"arrow_array")?;
        PyTuple::new(py, [s.into_any(), a.into_any()])
    }

    fn num_rows(&self) -> usize {
        self.batch.as_ref().map(|b| b.num_rows()).unwrap_or(0)
    }
}

/// An Arrow schema, exported through `__arrow_c_schema__`.
#[pyclass(module = "walcdc._native", frozen)]
struct Schema {
    schema: SchemaRef,
}

#[pymethods]
impl Schema {
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, &self.schema)
    }
}

fn skipped_list<'py>(py: Python<'py>, s: &[SkippedRange]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for r in s {
        let d = PyDict::new(py);
        d.set_item("from_lsa", r.from_lsa.to_key())?;
        d.set_item("first_pageid", r.first_pageid)?;
        d.set_item("last_pageid", r.last_pageid)?;
        d.set_item("resume_lsa", r.resume_lsa.map(|l| l.to_key()))?;
        out.append(d)?;
    }
    Ok(out)
}

/// Iterates over record batches of a forward walk.
#[pyclass(module = "walcdc._native")]
struct RecordBatches {
    walker: Walker,
    builder: RecordsBuilder,
    batch_size: usize,
    schema: SchemaRef,
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
            Ok(Some(b)) => Ok(Some(Batch { batch: Some(b) })),
            Ok(None) => Ok(None),
            Err(e) => Err(to_py(py, e)),
        }
    }

    fn schema(&self) -> Schema {
        Schema { schema: self.schema.clone() }
    }

    /// The LSA the walk will read next (None once it is over).
    fn position(&self) -> Option<u64> {
        self.walker.position().map(|l| l.to_key())
    }

    /// Encrypted page runs skipped so far.
    fn skipped<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        skipped_list(py, &self.walker.skipped)
    }

    fn end_lsa(&self) -> Option<u64> {
        self.walker.end_lsa.map(|l| l.to_key())
    }

    fn end_reason(&self) -> Option<&'static str> {
        self.walker.end_reason.map(|r| r.as_str())
    }
}

/// Iterates over batches of change events.
#[pyclass(module = "walcdc._native")]
struct ChangeBatches {
    reader: ChangeReader,
    builder: ChangesBuilder,
    batch_size: usize,
}

/// What a change stream knows at a record boundary (catalog and open transactions), to start
/// another stream there without reading the log before it.
#[pyclass(name = "ReaderState", module = "walcdc._native", frozen)]
struct PyReaderState {
    inner: ReaderState,
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
        match py.detach(|| next_changes_batch(reader, builder, n)) {
            Ok(Some(b)) => Ok(Some(Batch { batch: Some(b) })),
            Ok(None) => Ok(None),
            Err(e) => Err(to_py(py, e)),
        }
    }

    fn schema(&self) -> Schema {
        Schema { schema: changes_schema() }
    }

    /// `(db_creation, restart_lsa, last_commit_lsa, txn_offset)` for resuming after what was
    /// read so far.
    fn cursor(&self) -> (i64, u64, Option<u64>, u32, u64, bool) {
        let c = self.reader.cursor();
        (
            c.db_creation,
            c.restart_lsa.to_key(),
            c.last_commit_lsa.map(|l| l.to_key()),
            c.txn_offset,
            c.position.to_key(),
            c.engine,
        )
    }

    fn is_done(&self) -> bool {
        self.reader.is_done()
    }

    /// Encrypted page runs skipped so far.
    fn skipped<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        skipped_list(py, self.reader.skipped())
    }

    /// Transactions still open at the end of the stream.
    fn pending<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for p in self.reader.pending() {
            let d = PyDict::new(py);
            d.set_item("trid", p.trid)?;
            d.set_item("first_lsa", p.first_lsa.to_key())?;
            d.set_item("last_lsa", p.last_lsa.to_key())?;
            d.set_item("events", p.events)?;
            d.set_item("user", p.user.as_deref())?;
            d.set_item("committed_with_postpone", p.committed_with_postpone)?;
            out.append(d)?;
        }
        Ok(out)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.reader.stats;
        let d = PyDict::new(py);
        d.set_item("records", s.records)?;
        d.set_item("supplemental_records", s.supplemental_records)?;
        d.set_item("events", s.events)?;
        d.set_item("committed_transactions", s.committed_transactions)?;
        d.set_item("aborted_transactions", s.aborted_transactions)?;
        d.set_item("undone_events", s.undone_events)?;
        d.set_item("spilled_events", s.spilled_events)?;
        d.set_item("peak_buffered_bytes", s.peak_buffered_bytes)?;
        Ok(d)
    }
}

fn domain_dict<'py>(py: Python<'py>, d: &walcdc_core::schema::Domain) -> PyResult<Bound<'py, PyDict>> {
    let o = PyDict::new(py);
    o.set_item("type", d.db_type)?;
    o.set_item("precision", d.precision)?;
    o.set_item("scale", d.scale)?;
    o.set_item("codeset", d.codeset)?;
    o.set_item("collation", d.collation)?;
    o.set_item("class_oid", d.class_oid.map(|c| c.to_cdc()))?;
    o.set_item("enum_labels", d.enum_labels.clone())?;
    let sets = PyList::empty(py);
    for s in &d.set_domains {
        sets.append(domain_dict(py, s)?)?;
    }
    o.set_item("set_domains", sets)?;
    Ok(o)
}

fn attribute_dict<'py>(py: Python<'py>, a: &walcdc_core::schema::Attribute) -> PyResult<Bound<'py, PyDict>> {
    let o = domain_dict(py, &a.domain)?;
    o.set_item("type_name", walcdc_core::schema::db_type_name(a.domain.db_type))?;
    let charset = walcdc_core::schema::CODESETS.iter().find(|c| c.0 == a.domain.codeset).map(|c| c.1);
    o.set_item("charset", charset)?;
    o.set_item("id", a.id)?;
    o.set_item("name", &a.name)?;
    o.set_item("def_order", a.def_order)?;
    o.set_item("primary_key", a.primary_key)?;
    o.set_item("default_json", a.default_value.as_deref())?;
    Ok(o)
}

/// A table of a schema file: `(class OID, name, repid, columns)`, each column
/// `(name, def_order, type, precision, scale, codeset, primary key, enum labels)`.
type UserTable = (u64, String, Option<i32>, Vec<(String, i32, i32, i32, i32, i32, bool, Vec<String>)>);

fn user_table(t: UserTable) -> (Oid, String, Option<i32>, Vec<UserColumn>) {
    let (oid, name, repid, cols) = t;
    let columns = cols
        .into_iter()
        .map(|(name, def_order, db_type, precision, scale, codeset, primary_key, enum_labels)| UserColumn {
            name,
            def_order,
            domain: Domain { db_type, precision, scale, codeset, enum_labels, ..Domain::default() },
            primary_key,
        })
        .collect();
    (Oid::from_cdc(oid), name, repid, columns)
}

/// An opened set of log volumes.
#[pyclass(name = "LogSet", module = "walcdc._native", frozen)]
struct PyLogSet {
    inner: Arc<LogSet>,
}

fn lsa_opt(l: Lsa) -> Option<u64> {
    l.key_or_none()
}

#[pymethods]
impl PyLogSet {
    #[new]
    fn new(py: Python<'_>, paths: Vec<PathBuf>) -> PyResult<Self> {
        let log = py.detach(|| LogSet::open(&paths)).map_err(|e| to_py(py, e))?;
        Ok(PyLogSet { inner: Arc::new(log) })
    }

    /// Headers and volumes (no walk).
    fn header_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let log = &self.inner;
        let d = PyDict::new(py);
        d.set_item("page_size", log.page_size)?;
        d.set_item("db_creation", log.db_creation)?;
        d.set_item("first_pageid", log.first_pageid)?;
        let vols = PyList::empty(py);
        if let Some(a) = &log.active {
            let h = &a.header;
            d.set_item("release", &h.db_release)?;
            d.set_item("compatibility", h.db_compatibility)?;
            d.set_item("prefix", &h.prefix_name)?;
            d.set_item("is_shutdown", h.is_shutdown)?;
            d.set_item("next_trid", h.next_trid)?;
            d.set_item("active_pages", h.npages)?;
            d.set_item("header_append_lsa", lsa_opt(h.append_lsa))?;
            d.set_item("header_eof_lsa", lsa_opt(h.eof_lsa))?;
            d.set_item("chkpt_lsa", lsa_opt(h.chkpt_lsa))?;
            d.set_item("nxarv_pageid", h.nxarv_pageid)?;
            d.set_item("nxarv_num", h.nxarv_num)?;
            d.set_item("last_deleted_arv_num", h.last_deleted_arv_num)?;
            let v = PyDict::new(py);
            v.set_item("file", log.volume_name(a.vol))?;
            v.set_item("path", log.volumes()[a.vol].path.display().to_string())?;
            v.set_item("kind", "active")?;
            v.set_item("pages", h.npages)?;
            vols.append(v)?;
        }
        let arcs = PyList::empty(py);
        for a in &log.archives {
            let v = PyDict::new(py);
            v.set_item("file", log.volume_name(a.vol))?;
            v.set_item("path", log.volumes()[a.vol].path.display().to_string())?;
            v.set_item("kind", "archive")?;
            v.set_item("number", a.num)?;
            v.set_item("first_pageid", a.fpageid)?;
            v.set_item("last_pageid", a.last_pageid())?;
            v.set_item("pages", a.npages)?;
            arcs.append(v.clone())?;
            vols.append(v)?;
        }
        d.set_item("archives", arcs)?;
        d.set_item("volumes", vols)?;
        Ok(d)
    }

    #[pyo3(signature = (start=None, end=None, on_encrypted="raise", payloads=false, batch_size=65536))]
    fn records(
        &self,
        py: Python<'_>,
        start: Option<u64>,
        end: Option<u64>,
        on_encrypted: &str,
        payloads: bool,
        batch_size: usize,
    ) -> PyResult<RecordBatches> {
        let policy: OnEncrypted = on_encrypted.parse().map_err(|e| to_py(py, e))?;
        let log = self.inner.clone();
        let walker =
            py.detach(|| Walker::checked(log, key_to_lsa(start), key_to_lsa(end), policy)).map_err(|e| to_py(py, e))?;
        Ok(RecordBatches {
            walker,
            builder: RecordsBuilder::new(&self.inner, payloads),
            batch_size: batch_size.max(1),
            schema: records_schema(payloads),
        })
    }

    /// Random access: the record at an LSA, with its undo/redo images.
    fn record<'py>(&self, py: Python<'py>, lsa: u64) -> PyResult<Bound<'py, PyDict>> {
        let log = &self.inner;
        let at = Lsa::from_key(lsa);
        let (rec, undo, redo) = py
            .detach(|| -> walcdc_core::Result<_> {
                walcdc_core::walker::validate_record_start(log, at)?;
                let rec = log.record_at(at)?;
                let (mut u, mut r) = (Vec::new(), Vec::new());
                log.images(&rec, &mut u, &mut r)?;
                Ok((rec, u, r))
            })
            .map_err(|e| to_py(py, e))?;
        let d = PyDict::new(py);
        d.set_item("lsa", rec.lsa.to_key())?;
        d.set_item("forw_lsa", lsa_opt(rec.forw_lsa))?;
        d.set_item("back_lsa", lsa_opt(rec.back_lsa))?;
        d.set_item("prev_tranlsa", lsa_opt(rec.prev_tranlsa))?;
        d.set_item("trid", rec.trid)?;
        d.set_item("type", rec.type_name())?;
        d.set_item("rcvindex", rec.rcvindex())?;
        d.set_item("rcvindex_name", rec.rcvindex().and_then(walcdc_core::rcvindex::rcvindex_name))?;
        d.set_item("undo_zipped", rec.undo.zipped)?;
        d.set_item("redo_zipped", rec.redo.zipped)?;
        d.set_item("supplement_type", rec.supplement_type())?;
        d.set_item("at_time", rec.at_time())?;
        d.set_item("file", log.volume_name(rec.vol as usize))?;
        d.set_item("data_header", PyBytes::new(py, rec.data_header()))?;
        d.set_item("undo", PyBytes::new(py, &undo))?;
        d.set_item("redo", PyBytes::new(py, &redo))?;
        Ok(d)
    }

    /// Walks to the true end of the log (from the last checkpoint when the header has one).
    fn end_of_log<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let log = self.inner.clone();
        let end = py.detach(|| find_end(&log)).map_err(|e| to_py(py, e))?;
        let d = PyDict::new(py);
        d.set_item("end_lsa", end.end_lsa.map(|l| l.to_key()))?;
        d.set_item("end_reason", end.reason.as_str())?;
        d.set_item("last_lsa", end.last_lsa.map(|l| l.to_key()))?;
        d.set_item("skipped", skipped_list(py, &end.skipped)?)?;
        Ok(d)
    }

    /// Change events (see `walcdc.read_changes`).
    #[pyo3(signature = (start=None, end=None, committed_only=true, mode="full", tables=None, exclude_tables=None,
        users=None, ops=None, include_trigger=true, cursor=None, memory_limit=256<<20, on_error="raise",
        on_encrypted="raise", batch_size=65536, decode=true, user_schemas=None, keys="name_then", include_ddl="matching", redact=true,
        state=None))]
    #[allow(clippy::too_many_arguments)]
    fn changes(
        &self,
        py: Python<'_>,
        start: Option<u64>,
        end: Option<u64>,
        committed_only: bool,
        mode: &str,
        tables: Option<Vec<u64>>,
        exclude_tables: Option<Vec<u64>>,
        users: Option<Vec<String>>,
        ops: Option<Vec<String>>,
        include_trigger: bool,
        cursor: Option<(i64, u64, Option<u64>, u32, u64, bool)>,
        memory_limit: usize,
        on_error: &str,
        on_encrypted: &str,
        batch_size: usize,
        decode: bool,
        user_schemas: Option<Vec<UserTable>>,
        keys: &str,
        include_ddl: &str,
        redact: bool,
        state: Option<PyRef<'_, PyReaderState>>,
    ) -> PyResult<ChangeBatches> {
        let err = |e| to_py(py, e);
        let ops = match ops {
            Some(list) => Some(list.iter().map(|o| Op::parse(o)).collect::<Result<_, _>>().map_err(err)?),
            None => None,
        };
        let opts = ChangeOptions {
            start: key_to_lsa(start),
            end: key_to_lsa(end),
            committed_only,
            mode: mode.parse::<ImageMode>().map_err(err)?,
            tables: tables.map(|t| t.into_iter().collect()),
            exclude_tables: exclude_tables.unwrap_or_default().into_iter().collect(),
            users,
            ops,
            include_trigger,
            cursor: cursor.map(|(db, r, l, k, p, engine)| Cursor {
                db_creation: db,
                restart_lsa: Lsa::from_key(r),
                last_commit_lsa: l.map(Lsa::from_key),
                txn_offset: k,
                position: Lsa::from_key(p),
                engine,
            }),
            memory_limit,
            on_error: on_error.parse::<OnError>().map_err(err)?,
            on_encrypted: on_encrypted.parse::<OnEncrypted>().map_err(err)?,
            decode,
            user_schemas: user_schemas.unwrap_or_default().into_iter().map(user_table).collect(),
            keys: keys.parse().map_err(|msg| err(LogError::InvalidArgument { msg }))?,
            include_ddl: include_ddl.parse().map_err(err)?,
            redact,
        };
        let log = self.inner.clone();
        let state = state.map(|s| s.inner.clone());
        let reader = py
            .detach(|| match state {
                Some(state) => ChangeReader::from_state(log, opts, state),
                None => ChangeReader::new(log, opts),
            })
            .map_err(err)?;
        let builder = ChangesBuilder::new(&self.inner);
        Ok(ChangeBatches { reader, builder, batch_size: batch_size.max(1) })
    }

    /// Time (Unix seconds) to LSA, as CUBRID's `cdc_find_lsa`: `(lsa, adjusted)`.
    fn find_lsa(&self, py: Python<'_>, time: i64) -> PyResult<(u64, bool)> {
        let log = self.inner.clone();
        let (lsa, adjusted) = py.detach(|| changes::find_lsa(&log, time)).map_err(|e| to_py(py, e))?;
        Ok((lsa.to_key(), adjusted))
    }

    /// Every table schema the log's class records define (committed), with all representations.
    #[pyo3(signature = (on_encrypted="skip"))]
    fn schemas<'py>(&self, py: Python<'py>, on_encrypted: &str) -> PyResult<Bound<'py, PyList>> {
        let policy: OnEncrypted = on_encrypted.parse().map_err(|e| to_py(py, e))?;
        let log = self.inner.clone();
        let cat = py.detach(|| walcdc_core::catalog::learn(&log, policy)).map_err(|e| to_py(py, e))?;
        let mut classes: Vec<_> = cat.classes().collect();
        classes.sort_by(|a, b| a.name.cmp(&b.name));
        let out = PyList::empty(py);
        for c in classes {
            let d = PyDict::new(py);
            d.set_item("name", &c.name)?;
            d.set_item("names", cat.names(c.oid).to_vec())?;
            d.set_item("class_oid", c.oid.to_cdc())?;
            d.set_item("class_oid_text", c.oid.to_string())?;
            d.set_item("current_repid", c.current_repid)?;
            d.set_item("flags", c.flags)?;
            d.set_item("class_type", c.class_type)?;
            d.set_item("dropped", cat.is_dropped(c.oid))?;
            d.set_item("subclasses", c.subclasses.iter().map(|o| o.to_cdc()).collect::<Vec<_>>())?;
            let reps = PyList::empty(py);
            let mut ids: Vec<_> = c.representations.keys().copied().collect();
            ids.sort();
            for id in ids {
                let r = &c.representations[&id];
                let rd = PyDict::new(py);
                rd.set_item("repid", r.repid)?;
                rd.set_item("n_fixed", r.n_fixed)?;
                rd.set_item("n_var", r.n_var)?;
                let cols = PyList::empty(py);
                for a in &r.attributes {
                    cols.append(attribute_dict(py, a)?)?;
                }
                rd.set_item("columns", cols)?;
                reps.append(rd)?;
            }
            d.set_item("representations", reps)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// The oldest archive number still needed to restart at `restart_lsa`.
    fn min_archive_needed(&self, restart_lsa: u64) -> Option<i64> {
        changes::min_archive_needed(&self.inner, Lsa::from_key(restart_lsa))
    }

    /// Remembers the pages below `pageid` fetched from now on (`watched_pages`).
    fn watch_below(&self, pageid: i64) {
        self.inner.watch_below(pageid)
    }

    fn watched_pages(&self) -> Vec<i64> {
        self.inner.watched_pages()
    }

    fn __len__(&self) -> usize {
        self.inner.volumes().len()
    }
}

/// The CUBRID-format log writer (tests, benchmarks): `walcdc.testing.LogWriter` wraps it.
#[pyclass(name = "LogWriter", module = "walcdc._native")]
struct PyLogWriter {
    inner: Option<LogWriter>,
}

impl PyLogWriter {
    fn writer(&mut self) -> PyResult<&mut LogWriter> {
        self.inner.as_mut().ok_or_else(|| PyRuntimeError::new_err("the writer has already finished"))
    }
}

#[pymethods]
impl PyLogWriter {
    #[new]
    #[pyo3(signature = (page_size=4096, active_pages=64, archive_pages=16, db_creation=1_700_000_000, prefix="walcdc", release="11.4.0"))]
    fn new(
        page_size: usize,
        active_pages: i32,
        archive_pages: i64,
        db_creation: i64,
        prefix: &str,
        release: &str,
    ) -> PyResult<Self> {
        let cfg = WriterConfig {
            page_size,
            active_pages,
            archive_pages,
            db_creation,
            prefix: prefix.to_string(),
            release: release.to_string(),
        };
        let w = LogWriter::new(cfg).map_err(PyValueError::new_err)?;
        Ok(PyLogWriter { inner: Some(w) })
    }

    /// Appends one record; returns its LSA (order-preserving u64).
    #[pyo3(signature = (trid, rectype, *, undo=b"".to_vec(), redo=b"".to_vec(), zip_undo=false, zip_redo=false,
        rcvindex=0, volid=0, pageid=0, offset=0, mvccid=0, supplement_type=0, at_time=0, lsa=None, sysop_type=0, ha_state=0))]
    #[allow(clippy::too_many_arguments)]
    fn append(
        &mut self,
        trid: i32,
        rectype: i32,
        undo: Vec<u8>,
        redo: Vec<u8>,
        zip_undo: bool,
        zip_redo: bool,
        rcvindex: i32,
        volid: i16,
        pageid: i32,
        offset: i16,
        mvccid: u64,
        supplement_type: i32,
        at_time: i64,
        lsa: Option<u64>,
        sysop_type: i32,
        ha_state: i32,
    ) -> PyResult<u64> {
        let fields = DataFields {
            rcvindex,
            volid,
            pageid,
            offset,
            mvccid,
            supplement_type,
            at_time,
            lsa: lsa.map(Lsa::from_key),
            sysop_type,
            ha_state,
        };
        let at = self
            .writer()?
            .append(trid, rectype, &fields, &undo, &redo, zip_undo, zip_redo)
            .map_err(PyValueError::new_err)?;
        Ok(at.to_key())
    }

    /// Where the next record would go.
    fn end_lsa(&mut self) -> PyResult<u64> {
        Ok(self.writer()?.end_lsa().to_key())
    }

    /// Writes the volumes into `directory`, as after a clean shutdown.
    fn finish<'py>(&mut self, py: Python<'py>, directory: PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let w = self.inner.take().ok_or_else(|| PyRuntimeError::new_err("the writer has already finished"))?;
        let out = py.detach(|| w.finish(&directory)).map_err(|e| PyOSError::new_err(e.to_string()))?;
        let d = PyDict::new(py);
        d.set_item("active", out.active.display().to_string())?;
        d.set_item("archives", out.archives.iter().map(|p| p.display().to_string()).collect::<Vec<_>>())?;
        d.set_item("end_lsa", out.end_lsa.to_key())?;
        d.set_item("records", out.records.iter().map(|l| l.to_key()).collect::<Vec<_>>())?;
        Ok(d)
    }
}

/// The column types: `(DB_TYPE id, catalog name, other SQL names)`.
#[pyfunction]
fn db_types() -> Vec<(i32, &'static str, Vec<&'static str>)> {
    walcdc_core::schema::DB_TYPES.iter().map(|(id, name, aliases)| (*id, *name, aliases.to_vec())).collect()
}

/// Character sets: `(INTL_CODESET id, name)`.
#[pyfunction]
fn codesets() -> Vec<(i32, &'static str)> {
    walcdc_core::schema::CODESETS.to_vec()
}

/// One record batch from an object with `__arrow_c_array__` (a `pyarrow.RecordBatch`).
fn import_batch(obj: &Bound<'_, PyAny>) -> PyResult<RecordBatch> {
    let pair = obj.call_method0("__arrow_c_array__")?;
    let (schema, array): (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>) = pair.extract()?;
    let schema_ptr = schema.pointer_checked(Some(c"arrow_schema"))?.as_ptr() as *const FFI_ArrowSchema;
    let array_ptr = array.pointer_checked(Some(c"arrow_array"))?.as_ptr() as *mut FFI_ArrowArray;
    // SAFETY: the capsules hold the C data interface structs their names say; the array is
    // moved out (its release callback now belongs to us) and an empty one left in its place.
    let data = unsafe {
        let array = std::ptr::replace(array_ptr, FFI_ArrowArray::empty());
        arrow_array::ffi::from_ffi(array, &*schema_ptr)
    }
    .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(RecordBatch::from(StructArray::from(data)))
}

/// The rows of a record batch as JSON Lines (bytes); the string columns marked as JSON (or
/// named in `raw_json`) are written as the JSON they hold.
#[pyfunction]
#[pyo3(signature = (batch, raw_json=Vec::new()))]
fn encode_jsonl<'py>(
    py: Python<'py>,
    batch: &Bound<'py, PyAny>,
    raw_json: Vec<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    let batch = import_batch(batch)?;
    let mut out = Vec::with_capacity(batch.get_array_memory_size());
    py.detach(|| walcdc_core::jsonl::encode_jsonl(&batch, &raw_json, &mut out))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyBytes::new(py, &out))
}

/// CUBRID's CDC packing of an OID `(volid, pageid, slotid)`.
#[pyfunction]
fn oid_pack(volid: i16, pageid: i32, slotid: i16) -> u64 {
    Oid { pageid, slotid, volid }.to_cdc()
}

/// `(volid, pageid, slotid)` of a CDC-packed OID.
#[pyfunction]
fn oid_unpack(packed: u64) -> (i16, i32, i16) {
    let o = Oid::from_cdc(packed);
    (o.volid, o.pageid, o.slotid)
}

/// `statement` with the passwords it holds replaced by `***`.
#[pyfunction]
fn redact_secrets(statement: &str) -> String {
    walcdc_core::redact::redact_secrets(statement).into_owned()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(db_types, m)?)?;
    m.add_function(wrap_pyfunction!(codesets, m)?)?;
    m.add_function(wrap_pyfunction!(redact_secrets, m)?)?;
    m.add_function(wrap_pyfunction!(oid_pack, m)?)?;
    m.add_function(wrap_pyfunction!(oid_unpack, m)?)?;
    m.add_function(wrap_pyfunction!(encode_jsonl, m)?)?;
    m.add_class::<PyLogSet>()?;
    m.add_class::<RecordBatches>()?;
    m.add_class::<ChangeBatches>()?;
    m.add_class::<PyReaderState>()?;
    m.add_class::<Batch>()?;
    m.add_class::<Schema>()?;
    m.add_class::<PyLogWriter>()?;
    testing_encode::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
