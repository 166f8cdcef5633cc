//! Thin PyO3 bindings over walcdc-core: log sets, record batches handed to Python through the
//! Arrow C data interface (PyCapsules, no copy), and typed errors.
//!
//! Modules:
//! - [`error`]: core errors as `walcdc.errors` exceptions;
//! - [`conversion`]: Python values to and from core types (positions, cursors, user schemas,
//!   option strings, result dicts);
//! - [`arrow`]: the Arrow C data interface (batch and schema export, batch import, JSON Lines);
//! - [`streams`]: the batch iterators (`RecordBatches`, `ChangeBatches`) and `ReaderState`;
//! - [`logset`]: `LogSet`, an opened set of log volumes, and checked change-stream options;
//! - [`parallel`]: the pieces of a change stream read in parallel (`walcdc.spark`);
//! - [`writer`]: the test log writer (`LogWriter`);
//! - [`functions`]: module-level functions (tables of the core, OIDs, redaction);
//! - [`testing_encode`]: encoders for `walcdc.testing`.

mod arrow;
mod conversion;
mod error;
mod functions;
mod logset;
mod parallel;
mod streams;
mod testing_encode;
mod writer;

use pyo3::prelude::*;

/// Arrow batches are large, short-lived allocations: an allocator that keeps and reuses freed
/// memory spares every batch the page faults of fresh memory.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` (mimalloc.h): how long freed memory waits before it is returned to
/// the system, in milliseconds. A quarter of a second: the next batches reuse it instead of
/// faulting fresh memory in (3-5 % faster than mimalloc's 10 ms), and it is still returned soon
/// enough that resident memory does not creep up over a long log (never returning it, the
/// allocator's holdings grew by a third from a 1 GB log to a 4 GB one as batch sizes vary).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const PURGE_DELAY_MS: std::ffi::c_long = 250;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // SAFETY: sets a documented allocator option; no memory is touched.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    m.add_function(wrap_pyfunction!(functions::db_types, m)?)?;
    m.add_function(wrap_pyfunction!(functions::codesets, m)?)?;
    m.add_function(wrap_pyfunction!(functions::record_types, m)?)?;
    m.add_function(wrap_pyfunction!(functions::read_options, m)?)?;
    m.add_function(wrap_pyfunction!(functions::fact_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(functions::rcv_indexes, m)?)?;
    m.add_function(wrap_pyfunction!(functions::supplement_types, m)?)?;
    m.add_function(wrap_pyfunction!(functions::redact_secrets, m)?)?;
    m.add_function(wrap_pyfunction!(functions::oid_pack, m)?)?;
    m.add_function(wrap_pyfunction!(functions::lsa_text, m)?)?;
    m.add_function(wrap_pyfunction!(functions::oid_unpack, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::encode_jsonl, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::range_facts, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::catalog_versions, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::catalog_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::checkpoint_info, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::range_changes, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::range_catalog, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::catalog_inputs_of, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::left_out, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::open_at_end, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::no_supplemental_log_error, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::facts_schema, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::changes_schema, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::table_changes_schema, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::check_cursor, m)?)?;
    m.add_class::<logset::PyLogSet>()?;
    m.add_class::<parallel::PyChainMemo>()?;
    m.add_class::<logset::PyChangeOptions>()?;
    m.add_class::<streams::RecordBatches>()?;
    m.add_class::<streams::ChangeBatches>()?;
    m.add_class::<streams::PyReaderState>()?;
    m.add_class::<arrow::Batch>()?;
    m.add_class::<arrow::Schema>()?;
    m.add_class::<writer::PyLogWriter>()?;
    testing_encode::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_UNKNOWN_TABLES", walcdc_core::cdc::changes::MAX_UNKNOWN_TABLES)?;
    Ok(())
}
