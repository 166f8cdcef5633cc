//! Thin PyO3 bindings over walcdc-core: log sets, record batches handed to Python through the
//! Arrow C data interface (PyCapsules, no copy), and typed errors.
//!
//! Modules:
//! - [`error`]: core errors as `walcdc.errors` exceptions;
//! - [`conversion`]: Python values to and from core types (positions, cursors, user schemas,
//!   option strings, result dicts);
//! - [`arrow`]: the Arrow C data interface (batch and schema export, batch import, JSON Lines);
//! - [`streams`]: the batch iterators (`RecordBatches`, `ChangeBatches`) and `ReaderState`;
//! - [`logset`]: `LogSet`, an opened set of log volumes;
//! - [`writer`]: the test log writer (`LogWriter`);
//! - [`functions`]: module-level functions (tables of the core, OIDs, redaction);
//! - [`testing_encode`]: encoders for `walcdc.testing`.

mod arrow;
mod conversion;
mod error;
mod functions;
mod logset;
mod streams;
mod testing_encode;
mod writer;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(functions::db_types, m)?)?;
    m.add_function(wrap_pyfunction!(functions::codesets, m)?)?;
    m.add_function(wrap_pyfunction!(functions::record_types, m)?)?;
    m.add_function(wrap_pyfunction!(functions::rcv_indexes, m)?)?;
    m.add_function(wrap_pyfunction!(functions::supplement_types, m)?)?;
    m.add_function(wrap_pyfunction!(functions::redact_secrets, m)?)?;
    m.add_function(wrap_pyfunction!(functions::oid_pack, m)?)?;
    m.add_function(wrap_pyfunction!(functions::oid_unpack, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::encode_jsonl, m)?)?;
    m.add_class::<logset::PyLogSet>()?;
    m.add_class::<streams::RecordBatches>()?;
    m.add_class::<streams::ChangeBatches>()?;
    m.add_class::<streams::PyReaderState>()?;
    m.add_class::<arrow::Batch>()?;
    m.add_class::<arrow::Schema>()?;
    m.add_class::<writer::PyLogWriter>()?;
    testing_encode::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
