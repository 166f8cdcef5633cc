//! `LogWriter`: the CUBRID-format log writer behind `walcdc.testing` (tests, benchmarks).

use std::path::PathBuf;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use walcdc_core::format::lsa::Lsa;
use walcdc_core::testkit::writer::{DataFields, LogWriter, WriterConfig};

use crate::conversion::written_dict;

/// The CUBRID-format log writer (tests, benchmarks): `walcdc.testing.LogWriter` wraps it.
#[pyclass(name = "LogWriter", module = "walcdc._native")]
pub(crate) struct PyLogWriter {
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
    #[pyo3(signature = (page_size=4096, active_pages=64, archive_pages=16, db_creation=1_700_000_000, prefix="walcdc", release="11.4.0", stream_to=None, resume=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        page_size: usize,
        active_pages: i32,
        archive_pages: i64,
        db_creation: i64,
        prefix: &str,
        release: &str,
        stream_to: Option<PathBuf>,
        resume: bool,
    ) -> PyResult<Self> {
        let cfg = WriterConfig {
            page_size,
            active_pages,
            archive_pages,
            db_creation,
            prefix: prefix.to_string(),
            release: release.to_string(),
        };
        let w = match stream_to {
            Some(dir) if resume => LogWriter::resume(cfg, &dir),
            Some(dir) => LogWriter::streaming(cfg, &dir),
            None if resume => Err("resume needs stream_to (the log's directory)".to_string()),
            None => LogWriter::new(cfg),
        }
        .map_err(PyValueError::new_err)?;
        Ok(PyLogWriter { inner: Some(w) })
    }

    /// Transactions with records and no end record (after a resume: those the crash left
    /// open).
    fn open_transactions(&self) -> Vec<i32> {
        self.inner.as_ref().map_or_else(Vec::new, |w| w.open_transactions())
    }

    /// Bytes of log pages the writer holds in memory.
    fn buffered_bytes(&self) -> usize {
        self.inner.as_ref().map_or(0, |w| w.buffered_bytes())
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

    /// Live writing (a streaming writer): writes what was appended since the last flush into
    /// the active volume as a running server flushes its log (see `LogWriter::flush`).
    #[pyo3(signature = (torn=None))]
    fn flush(&mut self, py: Python<'_>, torn: Option<usize>) -> PyResult<()> {
        let w = self.writer()?;
        py.detach(|| w.flush(torn)).map_err(|e| PyOSError::new_err(e.to_string()))
    }

    /// Writes the volumes into `directory`, as after a clean shutdown.
    fn finish<'py>(&mut self, py: Python<'py>, directory: PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let w = self.inner.take().ok_or_else(|| PyRuntimeError::new_err("the writer has already finished"))?;
        let out = py.detach(|| w.finish(&directory)).map_err(|e| PyOSError::new_err(e.to_string()))?;
        written_dict(py, &out)
    }
}
