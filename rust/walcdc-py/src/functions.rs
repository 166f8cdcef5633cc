//! Module-level functions: the core's tables (types, character sets, record types, recovery
//! indexes, read options), OID packing and statement redaction.

use pyo3::prelude::*;
use walcdc_core::format::supplemental::Oid;

/// The column types: `(DB_TYPE id, catalog name, other SQL names)`.
#[pyfunction]
pub(crate) fn db_types() -> Vec<(i32, &'static str, Vec<&'static str>)> {
    walcdc_core::format::schema::DB_TYPES.iter().map(|(id, name, aliases)| (*id, *name, aliases.to_vec())).collect()
}

/// The record types: `(number, name)` (one table in the core).
#[pyfunction]
pub(crate) fn record_types() -> Vec<(i32, &'static str)> {
    walcdc_core::format::rectype::RECORD_TYPES.iter().map(|r| (r.id, r.name)).collect()
}

/// The kinds of the facts a range reports (`range_facts`): `(code, name)`, the row that
/// carries a range's counts last (`"counts"`).
#[pyfunction]
pub(crate) fn fact_kinds() -> Vec<(i8, &'static str)> {
    use walcdc_core::cdc::parallel::FactKind;
    let mut kinds: Vec<(i8, &'static str)> = FactKind::ALL.iter().map(|&(k, n)| (k as i8, n)).collect();
    kinds.push((walcdc_core::arrow::parallel_arrow::COUNTS_KIND, "counts"));
    kinds
}

/// The read options of a change stream (one declaration in the core):
/// `[{name, kind, resolve, default, choices, doc}]`, each default as JSON text.
#[pyfunction]
pub(crate) fn read_options(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyList>> {
    crate::conversion::read_options_list(py)
}

/// The supplemental record types, by number.
#[pyfunction]
pub(crate) fn supplement_types() -> Vec<(i32, &'static str)> {
    walcdc_core::format::rectype::SUPPLEMENT_NAMES.iter().enumerate().map(|(i, n)| (i as i32, *n)).collect()
}

/// The recovery indexes: `(number, name)`.
#[pyfunction]
pub(crate) fn rcv_indexes() -> Vec<(i32, &'static str)> {
    walcdc_core::format::rcvindex::RCVINDEX_NAMES.iter().enumerate().map(|(i, n)| (i as i32, *n)).collect()
}

/// Character sets: `(INTL_CODESET id, name)`.
#[pyfunction]
pub(crate) fn codesets() -> Vec<(i32, &'static str)> {
    walcdc_core::format::schema::CODESETS.to_vec()
}

/// `pageid|offset` of an LSA given as its order-preserving u64.
#[pyfunction]
pub(crate) fn lsa_text(key: u64) -> String {
    walcdc_core::format::lsa::Lsa::from_key(key).to_string()
}

/// CUBRID's CDC packing of an OID `(volid, pageid, slotid)`.
#[pyfunction]
pub(crate) fn oid_pack(volid: i16, pageid: i32, slotid: i16) -> u64 {
    Oid { pageid, slotid, volid }.to_cdc()
}

/// `(volid, pageid, slotid)` of a CDC-packed OID.
#[pyfunction]
pub(crate) fn oid_unpack(packed: u64) -> (i16, i32, i16) {
    let o = Oid::from_cdc(packed);
    (o.volid, o.pageid, o.slotid)
}

/// `statement` with the passwords it holds replaced by `***`.
#[pyfunction]
pub(crate) fn redact_secrets(statement: &str) -> String {
    walcdc_core::cdc::redact::redact_secrets(statement).into_owned()
}
