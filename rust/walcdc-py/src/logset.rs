//! `LogSet`: an opened set of log volumes, and the walks and streams started from it.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use walcdc_core::arrow::records_arrow::RecordsBuilder;
use walcdc_core::cdc::catalog::CatalogCheckpoint;
use walcdc_core::cdc::changes::ChangeReader;
use walcdc_core::cdc::options::{ChangeOptions, Narrowing};
use walcdc_core::format::lsa::Lsa;
use walcdc_core::log::logset::LogSet;
use walcdc_core::log::remote::{self, StoreOptions};
use walcdc_core::log::walker::find_end_from;
use walcdc_core::log::walker::OnEncrypted;
use walcdc_core::log::walker::Walker;

use crate::conversion::{
    class_dict, end_dict, header_dict, key_to_lsa, parse_ops, parse_option, record_dict, set_read_options,
};
use crate::error::to_py;
use crate::streams::{finishing, ChangeBatches, PyReaderState, RecordBatches};
use walcdc_core::log::payload::ReadPayloads;
use walcdc_core::log::record::ReadRecords;

/// The checked options of a change stream.
#[pyclass(name = "ChangeOptions", module = "walcdc._native", frozen)]
pub(crate) struct PyChangeOptions {
    pub(crate) inner: ChangeOptions,
}

/// An opened set of log volumes.
#[pyclass(name = "LogSet", module = "walcdc._native", frozen)]
pub(crate) struct PyLogSet {
    pub(crate) inner: Arc<LogSet>,
}

#[pymethods]
impl PyLogSet {
    /// `paths`: directories, volume files, or URLs of object storage; `storage_options`: how
    /// to reach object storage (`(key, value)` pairs, see `StoreOptions`).
    #[new]
    #[pyo3(signature = (paths, storage_options=None))]
    fn new(py: Python<'_>, paths: Vec<PathBuf>, storage_options: Option<Vec<(String, String)>>) -> PyResult<Self> {
        let options = StoreOptions::new(storage_options.unwrap_or_default());
        let log = py.detach(|| LogSet::open_with(&paths, &options)).map_err(|e| to_py(py, e))?;
        Ok(PyLogSet { inner: Arc::new(log) })
    }

    /// The log set as it is now, for a followed log's next poll: `LogSet::refreshed` (the
    /// archives already open kept), or opened anew when it lives in object storage.
    #[pyo3(signature = (paths, storage_options=None))]
    fn refreshed(
        &self,
        py: Python<'_>,
        paths: Vec<PathBuf>,
        storage_options: Option<Vec<(String, String)>>,
    ) -> PyResult<Self> {
        let log = self.inner.clone();
        let fresh = py
            .detach(|| {
                let texts: Vec<Option<&str>> = paths.iter().map(|p| p.to_str()).collect();
                if log.is_remote() || texts.iter().flatten().any(|t| remote::is_remote_url(t)) {
                    let options = StoreOptions::new(storage_options.unwrap_or_default());
                    return LogSet::open_with(&paths, &options);
                }
                let local: Vec<PathBuf> =
                    paths.iter().zip(&texts).map(|(p, t)| t.map_or_else(|| p.clone(), remote::local_path)).collect();
                log.refreshed(&local)
            })
            .map_err(|e| to_py(py, e))?;
        Ok(PyLogSet { inner: Arc::new(fresh) })
    }

    /// Requests made to object storage and bytes fetched from it so far.
    fn fetched<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (requests, bytes) = self.inner.fetched();
        let d = PyDict::new(py);
        d.set_item("requests", requests)?;
        d.set_item("bytes", bytes)?;
        Ok(d)
    }

    /// Headers and volumes (no walk).
    fn header_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        header_dict(py, &self.inner)
    }

    /// Records of a forward walk; `range`: `start` is the start of one of `ranges()` (see
    /// `Walker::for_range`); `columns`: only these columns (None: all).
    #[pyo3(signature = (start=None, end=None, on_encrypted="raise", payloads=false, batch_size=65536, range=false, columns=None))]
    #[allow(clippy::too_many_arguments)]
    fn records(
        &self,
        py: Python<'_>,
        start: Option<u64>,
        end: Option<u64>,
        on_encrypted: &str,
        payloads: bool,
        batch_size: usize,
        range: bool,
        columns: Option<Vec<String>>,
    ) -> PyResult<RecordBatches> {
        let policy: OnEncrypted = parse_option(py, on_encrypted)?;
        let builder =
            RecordsBuilder::with_columns(&*self.inner, payloads, columns.as_deref()).map_err(|e| to_py(py, e))?;
        let schema = builder.schema();
        let log = self.inner.clone();
        let (start, end) = (key_to_lsa(start), key_to_lsa(end));
        let walker = py
            .detach(|| {
                if range {
                    Walker::for_range(log, start, end, policy)
                } else {
                    Walker::checked(log, start, end, policy)
                }
            })
            .map_err(|e| to_py(py, e))?;
        Ok(RecordBatches { walker, builder, batch_size: batch_size.max(1), schema })
    }

    /// Random access: the record at an LSA, with its undo/redo images.
    fn record<'py>(&self, py: Python<'py>, lsa: u64) -> PyResult<Bound<'py, PyDict>> {
        let log = &self.inner;
        let at = Lsa::from_key(lsa);
        let (rec, undo, redo) = py
            .detach(|| -> walcdc_core::error::Result<_> {
                walcdc_core::log::walker::validate_record_start(&**log, at)?;
                let rec = log.record_at(at)?;
                let (mut u, mut r) = (Vec::new(), Vec::new());
                log.images(&rec, &mut u, &mut r)?;
                Ok((rec, u, r))
            })
            .map_err(|e| to_py(py, e))?;
        record_dict(py, log, &rec, &undo, &redo)
    }

    /// Walks to the true end of the log (from the last checkpoint when the header has one).
    #[pyo3(signature = (start=None))]
    fn end_of_log<'py>(&self, py: Python<'py>, start: Option<u64>) -> PyResult<Bound<'py, PyDict>> {
        let log = self.inner.clone();
        let from = start.map(Lsa::from_key);
        let end = py.detach(|| find_end_from(&log, from)).map_err(|e| to_py(py, e))?;
        end_dict(py, &end)
    }

    /// The options of a change stream, checked once: the read options by name (declared in
    /// `walcdc_core::cdc::options`, values resolved by `walcdc.changes._native_options`), and
    /// what the Python layer adds (following, cursors' catalog checkpoints, pushed filters).
    #[pyo3(signature = (follow=false, checkpoint=None, checkpoint_every=64<<20, narrow_tables=None, narrow_ops=None, **options))]
    #[allow(clippy::too_many_arguments)]
    fn change_options(
        &self,
        py: Python<'_>,
        follow: bool,
        checkpoint: Option<&[u8]>,
        checkpoint_every: u64,
        narrow_tables: Option<Vec<u64>>,
        narrow_ops: Option<Vec<String>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyChangeOptions> {
        let mut inner = ChangeOptions::default();
        if let Some(options) = options {
            set_read_options(py, &mut inner, options)?;
        }
        inner.follow = follow;
        inner.checkpoint =
            checkpoint.map(|b| CatalogCheckpoint::from_bytes(b).map(Arc::new)).transpose().map_err(|e| to_py(py, e))?;
        inner.checkpoint_every = checkpoint_every;
        inner.narrow =
            Narrowing { tables: narrow_tables.map(|t| t.into_iter().collect()), ops: parse_ops(py, narrow_ops)? };
        Ok(PyChangeOptions { inner })
    }

    /// Change events (see `walcdc.read_changes`); with `columns` (column dicts of
    /// `schemas()`), one table's changes with typed `before` / `after` structs of those columns;
    /// with `by_table`, every table's typed changes (`ChangeBatches.next_table`).
    #[pyo3(signature = (options, batch_size=65536, state=None, columns=None, by_table=false))]
    fn changes(
        &self,
        py: Python<'_>,
        options: PyRef<'_, PyChangeOptions>,
        batch_size: usize,
        state: Option<PyRef<'_, PyReaderState>>,
        columns: Option<Bound<'_, PyList>>,
        by_table: bool,
    ) -> PyResult<ChangeBatches> {
        let batch_size = batch_size.max(1);
        let (opts, builder, splitter) = finishing(py, self, &options, columns.as_ref(), by_table, batch_size)?;
        let log = self.inner.clone();
        let state = state.map(|s| s.inner.clone());
        let reader = py
            .detach(|| match state {
                Some(state) => ChangeReader::from_state(log, opts, state),
                None => ChangeReader::new(log, opts),
            })
            .map_err(|e| to_py(py, e))?;
        Ok(ChangeBatches { reader, builder, splitter, batch_size })
    }

    /// Time (Unix seconds) to LSA, as CUBRID's `cdc_find_lsa`: `(lsa, adjusted)`.
    fn find_lsa(&self, py: Python<'_>, time: i64) -> PyResult<(u64, bool)> {
        let log = self.inner.clone();
        let (lsa, adjusted) =
            py.detach(|| walcdc_core::log::positions::find_lsa(&log, time)).map_err(|e| to_py(py, e))?;
        Ok((lsa.to_key(), adjusted))
    }

    /// Every table schema the log's class records define (committed), with all representations.
    #[pyo3(signature = (on_encrypted="skip", checkpoint=None))]
    fn schemas<'py>(
        &self,
        py: Python<'py>,
        on_encrypted: &str,
        checkpoint: Option<&[u8]>,
    ) -> PyResult<Bound<'py, PyList>> {
        let policy: OnEncrypted = parse_option(py, on_encrypted)?;
        let log = self.inner.clone();
        let checkpoint = checkpoint.map(CatalogCheckpoint::from_bytes).transpose().map_err(|e| to_py(py, e))?;
        let cat = py
            .detach(|| match checkpoint {
                // What the class records say from the checkpoint to the end of the log.
                Some(cp) => {
                    cp.check(&*log, cp.at)?;
                    cp.learn_until(&log, None, policy).map(|learned| learned.0)
                }
                None => walcdc_core::cdc::catalog::learn(&log, policy),
            })
            .map_err(|e| to_py(py, e))?;
        let mut classes: Vec<_> = cat.classes().collect();
        classes.sort_by(|a, b| a.name.cmp(&b.name));
        let out = PyList::empty(py);
        for c in classes {
            out.append(class_dict(py, &cat, c)?)?;
        }
        Ok(out)
    }

    /// Record-aligned ranges of about `pages` pages each, from page headers alone:
    /// `[(start, end)]` as LSA keys, None for the first record / the end of the log.
    #[pyo3(signature = (pages, start=None))]
    fn ranges(&self, py: Python<'_>, pages: i64, start: Option<u64>) -> Vec<(Option<u64>, Option<u64>)> {
        // Page headers are read (from object storage, perhaps): without holding the GIL.
        let ranges = py.detach(|| walcdc_core::log::ranges::split_from(&self.inner, start.map(Lsa::from_key), pages));
        ranges.into_iter().map(|r| (r.start.map(|l| l.to_key()), r.end.map(|l| l.to_key()))).collect()
    }

    /// The oldest archive number still needed to restart at `restart_lsa`.
    fn min_archive_needed(&self, py: Python<'_>, restart_lsa: u64) -> Option<i64> {
        py.detach(|| walcdc_core::log::positions::min_archive_needed(&self.inner, Lsa::from_key(restart_lsa)))
    }

    /// Remembers the pages below `pageid` fetched from now on (`watched_pages`).
    fn watch_below(&self, pageid: i64) {
        self.inner.watch_below(pageid)
    }

    /// Records read by random access so far (chases, overflow rows, the catalog's writes).
    fn random_reads(&self) -> u64 {
        self.inner.random_reads()
    }

    /// Drops every page of the set from this process's resident memory (`LogSet::release_all`).
    fn release_all(&self, py: Python<'_>) {
        py.detach(|| self.inner.release_all())
    }

    fn watched_pages(&self) -> Vec<i64> {
        self.inner.watched_pages()
    }

    fn __len__(&self) -> usize {
        self.inner.volumes().len()
    }
}
