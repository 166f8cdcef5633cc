//! Encoders for tests and benchmarks (`walcdc.testing`): class records and heap rows built from
//! column descriptions, values given in their CDC JSON text forms.
//!
//! A column is a dict with the keys `LogSet.schemas()` reports: `id`, `name`, `def_order`,
//! `type` (a `DB_TYPE` id or an SQL name such as `"VARCHAR"`), `precision`, `scale`, `codeset`,
//! `collation`, `class_oid`, `enum_labels`, `set_domains` (element domains, dicts with the domain
//! keys), `primary_key`, `default_json`. Only `type` is required (`id`/`name` for attributes);
//! the others default to what CUBRID stores for the type. A representation is given as its
//! columns in storage order (fixed-width first).

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use walcdc_core::format::row::{self, Value};
use walcdc_core::format::schema::{db_type, Attribute, ClassSchema, Domain, Representation};
use walcdc_core::format::supplemental::Oid;
use walcdc_core::testkit::encode;

fn get<'py, T: FromPyObjectOwned<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<T>> {
    match d.get_item(key)? {
        Some(v) if !v.is_none() => v
            .extract::<T>()
            .map(Some)
            .map_err(|e| PyValueError::new_err(format!("column key {key:?}: {}", Into::<PyErr>::into(e)))),
        _ => Ok(None),
    }
}

/// A `DB_TYPE` id from an int or an SQL type name.
fn type_of(d: &Bound<'_, PyDict>) -> PyResult<i32> {
    let v = d.get_item("type")?.ok_or_else(|| PyValueError::new_err("a column needs a \"type\""))?;
    if let Ok(t) = v.extract::<i32>() {
        return Ok(t);
    }
    let name: String = v.extract()?;
    encode::db_type_from_name(&name).ok_or_else(|| PyValueError::new_err(format!("unknown column type {name:?}")))
}

fn domain_of(d: &Bound<'_, PyDict>, depth: usize) -> PyResult<Domain> {
    if depth > 16 {
        return Err(PyValueError::new_err("element domains nested too deeply"));
    }
    let t = type_of(d)?;
    let string = matches!(t, db_type::CHAR | db_type::STRING | db_type::NCHAR | db_type::VARNCHAR);
    let bits = matches!(t, db_type::BIT | db_type::VARBIT);
    let default_precision = match t {
        db_type::CHAR | db_type::NCHAR | db_type::BIT => 1,
        db_type::STRING | db_type::VARNCHAR | db_type::VARBIT => 1_073_741_823,
        db_type::NUMERIC => 15,
        db_type::INTEGER => 10,
        db_type::SHORT => 5,
        db_type::BIGINT => 19,
        db_type::FLOAT => 7,
        db_type::DOUBLE | db_type::MONETARY => 15,
        _ => 0,
    };
    let codeset = get::<i32>(d, "codeset")?.unwrap_or(if string {
        5
    } else if bits {
        1
    } else {
        0
    });
    let collation = get::<i32>(d, "collation")?.unwrap_or(match (string, codeset) {
        (true, 5) => 1,
        (true, 4) => 8,
        _ => 0,
    });
    let mut set_domains = Vec::new();
    if let Some(list) = d.get_item("set_domains")?.filter(|v| !v.is_none()) {
        for e in list.cast::<PyList>()?.iter() {
            set_domains.push(domain_of(e.cast::<PyDict>()?, depth + 1)?);
        }
    }
    Ok(Domain {
        db_type: t,
        precision: get(d, "precision")?.unwrap_or(default_precision),
        scale: get(d, "scale")?.unwrap_or(if t == db_type::DATETIME { 3 } else { 0 }),
        codeset,
        collation,
        class_oid: get::<u64>(d, "class_oid")?.map(Oid::from_cdc),
        enum_labels: get(d, "enum_labels")?.unwrap_or_default(),
        set_domains,
    })
}

fn attribute_of(d: &Bound<'_, PyDict>) -> PyResult<Attribute> {
    let id: i32 = get(d, "id")?.ok_or_else(|| PyValueError::new_err("a column needs an \"id\""))?;
    Ok(Attribute {
        id,
        name: get(d, "name")?.unwrap_or_else(|| format!("attr#{id}")),
        def_order: get(d, "def_order")?.unwrap_or(id),
        domain: domain_of(d, 0)?,
        primary_key: get(d, "primary_key")?.unwrap_or(false),
        default_value: get(d, "default_json")?,
    })
}

/// A representation from its columns in storage order (fixed-width columns first).
fn representation_of(repid: i32, columns: &Bound<'_, PyList>) -> PyResult<Representation> {
    let attributes = columns.iter().map(|c| attribute_of(c.cast::<PyDict>()?)).collect::<PyResult<Vec<_>>>()?;
    let n_fixed = attributes.iter().take_while(|a| !row::layout::is_variable_type(a.domain.db_type)).count();
    if let Some(a) = attributes[n_fixed..].iter().find(|a| !row::layout::is_variable_type(a.domain.db_type)) {
        return Err(PyValueError::new_err(format!(
            "representation {repid}: fixed-width column {:?} after a variable-width one (give storage order)",
            a.name
        )));
    }
    let n_var = attributes.len() - n_fixed;
    Ok(Representation::new(repid, attributes, n_fixed, n_var))
}

/// `encode_class_record(name, class_oid, current_repid, representations, subclasses=(), flags=0,
/// class_type=0) -> bytes`: the class record (REC_HOME bytes) of a table. `representations` is a
/// list of `(repid, columns)`, one of them the current one; the others are written as old
/// representations (their columns' names, definition orders and defaults are not stored there:
/// a class record names old columns through the current attributes with the same id).
#[pyfunction]
#[pyo3(signature = (name, class_oid, current_repid, representations, subclasses=Vec::new(), flags=0, class_type=0))]
#[allow(clippy::too_many_arguments)]
fn encode_class_record<'py>(
    py: Python<'py>,
    name: &str,
    class_oid: u64,
    current_repid: i32,
    representations: Vec<(i32, Bound<'py, PyList>)>,
    subclasses: Vec<u64>,
    flags: i32,
    class_type: i32,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut reps = HashMap::new();
    for (repid, cols) in &representations {
        reps.insert(*repid, representation_of(*repid, cols)?);
    }
    if !reps.contains_key(&current_repid) {
        return Err(PyValueError::new_err(format!("the current representation {current_repid} is not given")));
    }
    let schema = ClassSchema {
        oid: Oid::from_cdc(class_oid),
        name: name.to_string(),
        current_repid,
        representations: reps,
        subclasses: subclasses.into_iter().map(Oid::from_cdc).collect(),
        flags,
        class_type,
    };
    Ok(PyBytes::new(py, &encode::encode_class_record(&schema)))
}

/// The values of a row: a list of JSON texts (or None for NULL) in storage order, or a dict
/// from column name to JSON text (missing columns are NULL).
fn values_of(rep: &Representation, values: &Bound<'_, PyAny>) -> PyResult<Vec<Value>> {
    let texts: Vec<Option<String>> = if let Ok(d) = values.cast::<PyDict>() {
        for k in d.keys() {
            let k: String = k.extract()?;
            if !rep.attributes.iter().any(|a| a.name == k) {
                return Err(PyValueError::new_err(format!("no column {k:?} in representation {}", rep.repid)));
            }
        }
        rep.attributes.iter().map(|a| get::<String>(d, &a.name)).collect::<PyResult<_>>()?
    } else {
        values.extract()?
    };
    if texts.len() != rep.attributes.len() {
        return Err(PyValueError::new_err(format!(
            "{} values for the {} columns of representation {}",
            texts.len(),
            rep.attributes.len(),
            rep.repid
        )));
    }
    rep.attributes
        .iter()
        .zip(texts)
        .map(|(a, t)| match t {
            None => Ok(Value::Null),
            Some(t) => encode::value_from_json(&t, &a.domain)
                .map_err(|e| PyValueError::new_err(format!("column {:?}: {e}", a.name))),
        })
        .collect()
}

/// A log page (header and area) with its checksum recomputed, so an edit passes the check.
#[pyfunction]
fn page_with_checksum<'py>(py: Python<'py>, page: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    if page.len() < walcdc_core::format::page::PAGE_HEADER_SIZE || !page.len().is_power_of_two() {
        return Err(PyValueError::new_err(format!("{} bytes is not a log page", page.len())));
    }
    let mut out = page.to_vec();
    walcdc_core::format::page::set_checksum(&mut out);
    Ok(PyBytes::new(py, &out))
}

/// `encode_row(repid, columns, values, mvcc_insid=None, delid=None, prev_version=False, chn=0)
/// -> bytes`: a heap record written with representation `repid` (`columns` in storage order).
/// `values`: JSON texts in the CDC forms (None = NULL), a list in storage order or a dict by
/// column name. `mvcc_insid` gives the 16-byte header of a fresh MVCC insert; `prev_version`
/// adds the (NULL) previous-version LSA an MVCC update's logged after image has.
#[pyfunction]
#[pyo3(signature = (repid, columns, values, mvcc_insid=None, delid=None, prev_version=false, chn=0))]
#[allow(clippy::too_many_arguments)]
fn encode_row<'py>(
    py: Python<'py>,
    repid: i32,
    columns: Bound<'py, PyList>,
    values: Bound<'py, PyAny>,
    mvcc_insid: Option<u64>,
    delid: Option<u64>,
    prev_version: bool,
    chn: i32,
) -> PyResult<Bound<'py, PyBytes>> {
    RowEncoder::new(repid, columns)?.encode(py, values, mvcc_insid, delid, prev_version, chn)
}

/// `RowEncoder(repid, columns)`: `encode_row` with the representation read once, for writers of
/// many rows (the benchmark workload).
#[pyclass(module = "walcdc._native", frozen)]
struct RowEncoder {
    rep: Representation,
}

#[pymethods]
impl RowEncoder {
    #[new]
    fn new(repid: i32, columns: Bound<'_, PyList>) -> PyResult<Self> {
        Ok(RowEncoder { rep: representation_of(repid, &columns)? })
    }

    /// `encode(values, mvcc_insid=None, delid=None, prev_version=False, chn=0) -> bytes`, as
    /// `encode_row`.
    #[pyo3(signature = (values, mvcc_insid=None, delid=None, prev_version=false, chn=0))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        values: Bound<'py, PyAny>,
        mvcc_insid: Option<u64>,
        delid: Option<u64>,
        prev_version: bool,
        chn: i32,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let values = values_of(&self.rep, &values)?;
        let header =
            encode::RowHeader { chn, insid: mvcc_insid, delid, prev_version_lsa: prev_version.then_some(u64::MAX) };
        let rec = encode::encode_row_with_header(&self.rep, &values, &header).map_err(PyValueError::new_err)?;
        Ok(PyBytes::new(py, &rec))
    }
}

/// `decode_row(repid, columns, record) -> list[str]`: the record's values as CDC JSON texts, in
/// storage order (the decoder the change stream uses).
#[pyfunction]
fn decode_row(repid: i32, columns: Bound<'_, PyList>, record: &[u8]) -> PyResult<Vec<String>> {
    let rep = representation_of(repid, &columns)?;
    let values = row::decode_row(&rep, record).map_err(PyValueError::new_err)?;
    Ok(rep.attributes.iter().zip(&values).map(|(a, v)| row::text::value_json(v, &a.domain)).collect())
}

/// `canonical_json(column, text) -> str`: a value's CDC JSON text as the decoder shows it (e.g.
/// a JSON document compacted, members in document order).
#[pyfunction]
fn canonical_json(column: Bound<'_, PyDict>, text: &str) -> PyResult<String> {
    let d = domain_of(&column, 0)?;
    let v = encode::value_from_json(text, &d).map_err(PyValueError::new_err)?;
    Ok(row::text::value_json(&v, &d))
}

/// `storage_order(columns) -> list[int]`: the storage order CUBRID gives `columns` (the previous
/// representation's columns in storage order followed by the added ones; for CREATE TABLE the
/// columns in reverse definition order), as indexes into `columns`.
#[pyfunction]
fn storage_order(columns: Bound<'_, PyList>) -> PyResult<Vec<usize>> {
    let domains = columns.iter().map(|c| domain_of(c.cast::<PyDict>()?, 0)).collect::<PyResult<Vec<_>>>()?;
    Ok(encode::storage_order(&domains))
}

/// Adds the encoders to `walcdc._native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_class_record, m)?)?;
    m.add_function(wrap_pyfunction!(page_with_checksum, m)?)?;
    m.add_function(wrap_pyfunction!(encode_row, m)?)?;
    m.add_class::<RowEncoder>()?;
    m.add_function(wrap_pyfunction!(decode_row, m)?)?;
    m.add_function(wrap_pyfunction!(canonical_json, m)?)?;
    m.add_function(wrap_pyfunction!(storage_order, m)?)?;
    Ok(())
}
