//! The pieces of a change stream read in parallel (`walcdc.spark`): a range's facts and
//! catalog reduction, the catalog versions built from class-record writes, and a range's
//! events read once.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use walcdc_core::arrow::parallel_arrow::facts_batch;
use walcdc_core::cdc::catalog::CatalogCheckpoint;
use walcdc_core::cdc::changes::{ChainMemo, ChangeReader, RangeSpec};
use walcdc_core::cdc::parallel::{self, CatalogInput, CatalogVersions, RangeCatalog};
use walcdc_core::format::lsa::Lsa;
use walcdc_core::log::walker::OnEncrypted;

use crate::arrow::{Batch, Schema};
use crate::conversion::{beyond_end_dict, key_to_lsa, parse_option, skipped_list, table_columns};
use crate::error::to_py;
use crate::logset::{PyChangeOptions, PyLogSet};
use crate::streams::{finishing, ChangeBatches};

/// The facts of the records in `[start, end)`, one batch.
#[pyfunction]
#[pyo3(signature = (log, start=None, end=None, on_encrypted="raise"))]
pub(crate) fn range_facts(
    py: Python<'_>,
    log: PyRef<'_, PyLogSet>,
    start: Option<u64>,
    end: Option<u64>,
    on_encrypted: &str,
) -> PyResult<Batch> {
    let range_start = start.unwrap_or(0) as i64;
    let policy: OnEncrypted = parse_option(py, on_encrypted)?;
    let log = log.inner.clone();
    let facts = py
        .detach(|| parallel::range_facts(&log, key_to_lsa(start), key_to_lsa(end), policy))
        .map_err(|e| to_py(py, e))?;
    Ok(Batch::new(facts_batch(&facts, range_start)))
}

/// What the range `[start, end)` tells the catalog's builder (`RangeCatalog`, as bytes) and
/// how many supplemental records it holds.
#[pyfunction]
#[pyo3(signature = (log, start=None, end=None, on_encrypted="raise"))]
pub(crate) fn range_catalog<'py>(
    py: Python<'py>,
    log: PyRef<'_, PyLogSet>,
    start: Option<u64>,
    end: Option<u64>,
    on_encrypted: &str,
) -> PyResult<(Bound<'py, PyBytes>, u64)> {
    let policy: OnEncrypted = parse_option(py, on_encrypted)?;
    let log = log.inner.clone();
    let summary = py
        .detach(|| parallel::range_facts(&log, key_to_lsa(start), key_to_lsa(end), policy))
        .map(|facts| RangeCatalog::from_facts(&facts))
        .map_err(|e| to_py(py, e))?;
    Ok((PyBytes::new(py, &summary.to_bytes()), summary.supplemental_records))
}

/// The catalog's inputs `(restart, trid, lsa, end)` in log order from the ranges' `RangeCatalog`
/// bytes (in log order, covering their span); `seed_trids`: the transactions with class work
/// staged at the catalog checkpoint the ranges start at. A record's `trid` is 0.
#[pyfunction]
#[pyo3(signature = (ranges, seed_trids=Vec::new()))]
pub(crate) fn catalog_inputs_of(
    py: Python<'_>,
    ranges: Vec<Vec<u8>>,
    seed_trids: Vec<i32>,
) -> PyResult<Vec<InputTuple>> {
    let ranges = ranges.iter().map(|b| RangeCatalog::from_bytes(b)).collect::<walcdc_core::error::Result<Vec<_>>>();
    let ranges = ranges.map_err(|e| to_py(py, e))?;
    Ok(parallel::catalog_inputs(&ranges, &seed_trids)
        .into_iter()
        .map(|i| match i {
            CatalogInput::Restart { trid, lsa } => (true, trid, lsa.to_key(), Some(lsa.to_key())),
            CatalogInput::Record { lsa, end } => (false, 0, lsa.to_key(), end.map(|e| e.to_key())),
        })
        .collect())
}

/// What a read over ranges leaves out, from their `RangeCatalog` bytes (consecutive ranges in
/// log order, each decoded once) and the read's window `ranges[window_start..window_end]`:
/// `(begun, walk, restarted)`. `begun`: with `from_first` (the ranges start at the log set's
/// first record), the transactions begun before it, `(trid, first_lsa, end)` with `end`
/// `(how, lsa)`, `how` one of "commit", "abort", "abandoned", None while open. `walk`: what the
/// window's walks skipped, as a stream reports it, `(skipped, unplaced, beyond_end)`.
/// `restarted`: the transactions cut short in the window by a restart of their trid.
#[pyfunction]
pub(crate) fn left_out<'py>(
    py: Python<'py>,
    ranges: Vec<Vec<u8>>,
    window_start: usize,
    window_end: usize,
    from_first: bool,
) -> PyResult<(Vec<BegunTuple>, WalkNotesTuple<'py>, u64)> {
    use walcdc_core::cdc::parallel::Fate;
    let ranges = ranges.iter().map(|b| RangeCatalog::from_bytes(b)).collect::<walcdc_core::error::Result<Vec<_>>>();
    let ranges = ranges.map_err(|e| to_py(py, e))?;
    let window = window_start.min(ranges.len())..window_end.min(ranges.len());
    let begun = if from_first { parallel::begun_before(&ranges) } else { Vec::new() };
    let begun = begun
        .into_iter()
        .map(|(trid, first, fate)| {
            let end = fate.map(|f| match f {
                Fate::Committed(l) => ("commit", l.to_key()),
                Fate::Aborted(l) => ("abort", l.to_key()),
                Fate::Abandoned(l) => ("abandoned", l.to_key()),
            });
            (trid, first.to_key(), end)
        })
        .collect();
    let mut skipped: Vec<walcdc_core::log::walker::SkippedRange> = Vec::new();
    let mut unplaced = Vec::new();
    let mut beyond = None;
    for r in &ranges[window.clone()] {
        for run in &r.walk.skipped {
            // A range that starts on an encrypted page skips on from there: the run the range
            // before it already reported (it looks past its end), or its continuation.
            match skipped.last_mut() {
                Some(prev)
                    if prev.first_pageid <= run.from_lsa.pageid && run.from_lsa.pageid <= prev.last_pageid + 1 =>
                {
                    prev.last_pageid = prev.last_pageid.max(run.last_pageid);
                    prev.resume_lsa = run.resume_lsa;
                }
                _ => skipped.push(run.clone()),
            }
        }
        unplaced.extend(r.walk.unplaced.iter().map(|l| l.to_key()));
        beyond = r.walk.beyond_end.or(beyond);
    }
    let walk = (skipped_list(py, &skipped)?, unplaced, beyond_end_dict(py, beyond)?);
    Ok((begun, walk, parallel::restarted(&ranges, window)))
}

/// The transactions open at the end of the last of `ranges` (`RangeCatalog` bytes of
/// consecutive ranges in log order): `(trid, first_lsa)`, oldest first, as a one-pass reader
/// over the same records holds them at its end.
#[pyfunction]
pub(crate) fn open_at_end(py: Python<'_>, ranges: Vec<Vec<u8>>) -> PyResult<Vec<(i32, u64)>> {
    let ranges = ranges.iter().map(|b| RangeCatalog::from_bytes(b)).collect::<walcdc_core::error::Result<Vec<_>>>();
    let ranges = ranges.map_err(|e| to_py(py, e))?;
    Ok(parallel::open_at_end(&ranges).into_iter().map(|(t, l)| (t, l.to_key())).collect())
}

type WalkNotesTuple<'py> = (Bound<'py, PyList>, Vec<u64>, Option<Bound<'py, PyDict>>);

/// A transaction begun before a log set, as Python holds it: `(trid, first_lsa, end)`.
type BegunTuple = (i32, u64, Option<(&'static str, u64)>);

/// A catalog input as Python holds it: `(restart, trid, lsa, end)`.
type InputTuple = (bool, i32, u64, Option<u64>);

/// Catalog inputs as Python gives them: `(restart, trid, lsa, end)` in log order.
fn catalog_inputs(inputs: Vec<(bool, i32, u64, Option<u64>)>) -> Vec<CatalogInput> {
    inputs
        .into_iter()
        .map(|(restart, trid, lsa, end)| {
            let lsa = Lsa::from_key(lsa);
            if restart {
                CatalogInput::Restart { trid, lsa }
            } else {
                CatalogInput::Record { lsa, end: end.map(Lsa::from_key) }
            }
        })
        .collect()
}

fn checkpoint_from(py: Python<'_>, bytes: Option<&[u8]>) -> PyResult<Option<CatalogCheckpoint>> {
    bytes.map(CatalogCheckpoint::from_bytes).transpose().map_err(|e| to_py(py, e))
}

/// Catalog versions from `(restart, trid, lsa, end)` inputs in log order, from the catalog
/// checkpoint `seed` on when given: `(bytes, commits)`.
#[pyfunction]
#[pyo3(signature = (log, inputs, seed=None))]
pub(crate) fn catalog_versions<'py>(
    py: Python<'py>,
    log: PyRef<'_, PyLogSet>,
    inputs: Vec<(bool, i32, u64, Option<u64>)>,
    seed: Option<&[u8]>,
) -> PyResult<(Bound<'py, PyBytes>, usize)> {
    let inputs = catalog_inputs(inputs);
    let seed = checkpoint_from(py, seed)?;
    let log = log.inner.clone();
    let versions =
        py.detach(|| CatalogVersions::build_from(&*log, &inputs, seed.as_ref())).map_err(|e| to_py(py, e))?;
    Ok((PyBytes::new(py, &versions.to_bytes()), versions.commits()))
}

/// The catalog checkpoint at `at` (a cursor's restart point) from the same inputs.
#[pyfunction]
#[pyo3(signature = (log, inputs, at, seed=None))]
pub(crate) fn catalog_checkpoint<'py>(
    py: Python<'py>,
    log: PyRef<'_, PyLogSet>,
    inputs: Vec<(bool, i32, u64, Option<u64>)>,
    at: u64,
    seed: Option<&[u8]>,
) -> PyResult<Bound<'py, PyBytes>> {
    let inputs = catalog_inputs(inputs);
    let seed = checkpoint_from(py, seed)?;
    let log = log.inner.clone();
    let cp = py
        .detach(|| CatalogVersions::checkpoint(&*log, &inputs, seed.as_ref(), Lsa::from_key(at)))
        .map_err(|e| to_py(py, e))?;
    Ok(PyBytes::new(py, &cp.to_bytes()))
}

/// A catalog checkpoint's LSA and the transactions with class work staged there.
#[pyfunction]
pub(crate) fn checkpoint_info(py: Python<'_>, checkpoint: &[u8]) -> PyResult<(u64, Vec<i32>)> {
    let cp = CatalogCheckpoint::from_bytes(checkpoint).map_err(|e| to_py(py, e))?;
    Ok((cp.at.to_key(), cp.open_trids()))
}

/// The catalog versions of the last bytes read back: a task reads one plan's versions for
/// range after range (compared byte for byte: no hash can pass off another plan's).
static LAST_VERSIONS: std::sync::Mutex<Option<(Vec<u8>, Arc<CatalogVersions>)>> = std::sync::Mutex::new(None);

fn versions_from(py: Python<'_>, bytes: &[u8]) -> PyResult<Arc<CatalogVersions>> {
    let mut last = LAST_VERSIONS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((kept, v)) = last.as_ref() {
        if kept.as_slice() == bytes {
            return Ok(v.clone());
        }
    }
    let v = CatalogVersions::from_bytes(bytes).map(Arc::new).map_err(|e| to_py(py, e))?;
    *last = Some((bytes.to_vec(), v.clone()));
    Ok(v)
}

/// The events of `[start, end)`, read in one walk of the range (see
/// `walcdc_core::cdc::changes::ChangeReader::for_range`): in the committed stream those of the
/// transactions that commit in it, in CUBRID's the changes and markers that lie in it. Batches of
/// `read_changes()`'s schema, or with `columns` (column dicts of `schemas()`) of one table's
/// typed changes; with `by_table`, every table's typed changes (`ChangeBatches.next_table`).
/// `chain_memo`: a `ChainMemo` shared by the readers of one stream's ranges.
/// What an earlier run emitted (when the options hold no cursor): the commits
/// up to `skip_commits_upto`, the markers before `skip_before`, and `skip_events` events of
/// the first transaction committed after `skip_commits_upto` (for the range holding it).
#[pyfunction]
#[pyo3(signature = (log, options, versions, start=None, end=None, skip_commits_upto=None, skip_before=None,
    skip_events=0, columns=None, batch_size=65536, by_table=false, chain_memo=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn range_changes(
    py: Python<'_>,
    log: PyRef<'_, PyLogSet>,
    options: PyRef<'_, PyChangeOptions>,
    versions: &[u8],
    start: Option<u64>,
    end: Option<u64>,
    skip_commits_upto: Option<u64>,
    skip_before: Option<u64>,
    skip_events: u32,
    columns: Option<Bound<'_, PyList>>,
    batch_size: usize,
    by_table: bool,
    chain_memo: Option<PyRef<'_, PyChainMemo>>,
) -> PyResult<ChangeBatches> {
    let versions = versions_from(py, versions)?;
    let batch_size = batch_size.max(1);
    let (opts, builder, splitter) = finishing(py, &log, &options, columns.as_ref(), by_table, batch_size)?;
    let range = RangeSpec {
        start: key_to_lsa(start),
        end: key_to_lsa(end),
        versions,
        skip_commits_upto: key_to_lsa(skip_commits_upto),
        skip_before: key_to_lsa(skip_before),
        skip_events,
        chain_memo: chain_memo.map(|m| m.inner.clone()),
    };
    let set = log.inner.clone();
    let reader = py.detach(|| ChangeReader::for_range(set, opts, range)).map_err(|e| to_py(py, e))?;
    Ok(ChangeBatches { reader, builder, splitter, batch_size })
}

/// What the readers of one stream's ranges learn reading transactions back, shared by them
/// (`walcdc_core::cdc::changes::ChainMemo`): give one to every `range_changes` of a stream.
#[pyclass(module = "walcdc._native", name = "ChainMemo", frozen)]
pub(crate) struct PyChainMemo {
    inner: Arc<ChainMemo>,
}

#[pymethods]
impl PyChainMemo {
    #[new]
    fn new() -> Self {
        PyChainMemo { inner: Arc::new(ChainMemo::default()) }
    }
}

/// The error a change stream raises when the log holds no supplemental records.
#[pyfunction]
pub(crate) fn no_supplemental_log_error(py: Python<'_>, log: PyRef<'_, PyLogSet>) -> Py<PyAny> {
    let e = walcdc_core::error::LogError::NoSupplementalLog { file: log.inner.set_name() };
    to_py(py, e).into_value(py).into_any()
}

/// The schema of a range's facts.
#[pyfunction]
pub(crate) fn facts_schema() -> Schema {
    Schema::new(walcdc_core::arrow::parallel_arrow::facts_schema())
}

/// The schema of one table's typed changes (`columns`: column dicts of `schemas()`).
#[pyfunction]
pub(crate) fn table_changes_schema(columns: Bound<'_, PyList>) -> PyResult<Schema> {
    Ok(Schema::new(walcdc_core::arrow::typed_arrow::table_changes_schema(&table_columns(&columns)?)))
}

/// The schema of `read_changes()`.
#[pyfunction]
pub(crate) fn changes_schema() -> Schema {
    Schema::new(walcdc_core::arrow::changes_arrow::changes_schema())
}

/// Checks the options' cursor against the log set (its database, its kind of stream).
#[pyfunction]
pub(crate) fn check_cursor(
    py: Python<'_>,
    log: PyRef<'_, PyLogSet>,
    options: PyRef<'_, PyChangeOptions>,
) -> PyResult<()> {
    match options.inner.cursor {
        Some(c) => c.check(&*log.inner, options.inner.committed_only).map_err(|e| to_py(py, e)),
        None => Ok(()),
    }
}
