//! Typed conversions between Python values and core types: positions (LSAs as order-preserving
//! u64 keys), cursors, user schemas, option strings, and the dicts and lists the bindings return.

use std::collections::HashSet;
use std::str::FromStr;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use walcdc_core::arrow::typed_arrow::TableColumn;
use walcdc_core::cdc::catalog::{Catalog, KeyMode, UserColumn};
use walcdc_core::cdc::changes::ChangeStats;
use walcdc_core::cdc::event::{Cursor, Op, Pending};
use walcdc_core::cdc::options::{ChangeOptions, DdlScope, ImageMode, OnError, OnPartial};
use walcdc_core::cdc::options::{UserSchema, READ_OPTIONS};
use walcdc_core::choice::Choice;
use walcdc_core::error::LogError;
use walcdc_core::format::lsa::Lsa;
use walcdc_core::format::schema::{Attribute, ClassSchema, Domain};
use walcdc_core::format::supplemental::Oid;
use walcdc_core::log::logset::LogSet;
use walcdc_core::log::record::Record;
use walcdc_core::log::walker::{EndOfLog, OnEncrypted, SkippedRange};
use walcdc_core::testkit::writer::WrittenLog;

use crate::error::to_py;

// ---------------------------------------------------------------------------------------------
// Positions

/// An LSA given as its u64 key.
pub(crate) fn key_to_lsa(v: Option<u64>) -> Option<Lsa> {
    v.map(Lsa::from_key)
}

/// The u64 key of an LSA, None for the null LSA.
pub(crate) fn lsa_opt(l: Lsa) -> Option<u64> {
    l.key_or_none()
}

// ---------------------------------------------------------------------------------------------
// Cursors

/// The tuple a cursor crosses the boundary as:
/// `(db_creation, restart_lsa, last_commit_lsa, txn_offset, position, engine)`.
pub(crate) type CursorTuple = (i64, u64, Option<u64>, u32, u64, bool);

/// A cursor given by Python (`walcdc.Cursor` fields, as a tuple):
/// `(db_creation, restart_lsa, last_commit_lsa, txn_offset, position, engine)`.
pub(crate) struct CursorArg(i64, u64, Option<u64>, u32, u64, bool);

// Extracted as the plain tuple rather than with `#[derive(FromPyObject)]`, which would wrap a
// bad field's error in "failed to extract field CursorArg.N": the messages stay the tuple's.
impl<'a, 'py> FromPyObject<'a, 'py> for CursorArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let (db_creation, restart_lsa, last_commit_lsa, txn_offset, position, engine) = obj.extract::<CursorTuple>()?;
        Ok(CursorArg(db_creation, restart_lsa, last_commit_lsa, txn_offset, position, engine))
    }
}

impl From<CursorArg> for Cursor {
    fn from(CursorArg(db_creation, restart_lsa, last_commit_lsa, txn_offset, position, engine): CursorArg) -> Self {
        Cursor {
            db_creation,
            restart_lsa: Lsa::from_key(restart_lsa),
            last_commit_lsa: key_to_lsa(last_commit_lsa),
            txn_offset,
            position: Lsa::from_key(position),
            engine,
        }
    }
}

/// A core cursor as the tuple `CursorArg` reads back.
pub(crate) fn cursor_tuple(c: &Cursor) -> CursorTuple {
    (
        c.db_creation,
        c.restart_lsa.to_key(),
        c.last_commit_lsa.map(|l| l.to_key()),
        c.txn_offset,
        c.position.to_key(),
        c.engine,
    )
}

// ---------------------------------------------------------------------------------------------
// User schemas

/// A table of a schema file: `(class OID, name, repid, columns)`, each column
/// `(name, def_order, type, precision, scale, codeset, primary key, enum labels)`.
pub(crate) type UserTable = (u64, String, Option<i32>, Vec<(String, i32, i32, i32, i32, i32, bool, Vec<String>)>);

pub(crate) fn user_table(t: UserTable) -> (Oid, String, Option<i32>, Vec<UserColumn>) {
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

// ---------------------------------------------------------------------------------------------
// Option strings

/// An option given as a string (`on_encrypted="raise"`, `mode="full"`, ...), parsed by the core;
/// a bad value raises the core's error.
pub(crate) fn parse_option<T: FromStr<Err = LogError>>(py: Python<'_>, s: &str) -> PyResult<T> {
    s.parse().map_err(|e| to_py(py, e))
}

/// The `ops` option: operation names, None for all.
pub(crate) fn parse_ops(py: Python<'_>, ops: Option<Vec<String>>) -> PyResult<Option<HashSet<Op>>> {
    match ops {
        Some(list) => Ok(Some(list.iter().map(|o| Op::parse(o)).collect::<Result<_, _>>().map_err(|e| to_py(py, e))?)),
        None => Ok(None),
    }
}

// ---------------------------------------------------------------------------------------------
// Read options (declared once in the core: walcdc_core::cdc::options)

/// A read option's value from Python, by the Rust type the declaration gives it.
trait Arg: Sized {
    fn from_py(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Self>;
}

macro_rules! extracted {
    ($($ty:ty),*) => {$(
        impl Arg for $ty {
            fn from_py(_py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Self> {
                v.extract()
            }
        }
    )*};
}
extracted!(bool, usize, u64, String);

macro_rules! by_name {
    ($($ty:ty),*) => {$(
        impl Arg for $ty {
            fn from_py(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Self> {
                <$ty as Choice>::parse(&v.extract::<String>()?).map_err(|e| to_py(py, e))
            }
        }
    )*};
}
by_name!(ImageMode, KeyMode, DdlScope, OnError, OnPartial, OnEncrypted);

impl Arg for Op {
    fn from_py(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Self> {
        Op::parse(&v.extract::<String>()?).map_err(|e| to_py(py, e))
    }
}

impl Arg for Cursor {
    fn from_py(_py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(v.extract::<CursorArg>()?.into())
    }
}

impl Arg for UserSchema {
    fn from_py(_py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(user_table(v.extract::<UserTable>()?))
    }
}

impl<T: Arg> Arg for Option<T> {
    fn from_py(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Self> {
        if v.is_none() {
            return Ok(None);
        }
        T::from_py(py, v).map(Some)
    }
}

impl<T: Arg> Arg for Vec<T> {
    fn from_py(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Self> {
        v.try_iter()?.map(|item| T::from_py(py, &item?)).collect()
    }
}

macro_rules! from_python {
    ($( $(#[doc = $doc:literal])* $name:ident : $ty:ty = $default:expr, $resolve:ident => |$o:ident, $v:ident| $set:expr ;)*) => {
        /// Sets the read options in `given` (keyword arguments, resolved: class OIDs, LSA keys,
        /// a cursor tuple, schema tables); a name that is not a read option is an error.
        pub(crate) fn set_read_options(py: Python<'_>, o: &mut ChangeOptions, given: &Bound<'_, PyDict>) -> PyResult<()> {
            for (key, value) in given.iter() {
                let key: String = key.extract()?;
                match key.as_str() {
                    $(stringify!($name) => {
                        let $v = <$ty as Arg>::from_py(py, &value).map_err(|e| in_option(py, stringify!($name), e))?;
                        let $o = &mut *o;
                        $set;
                    })*
                    other => {
                        let msg = format!("{other:?} is not a read option");
                        return Err(to_py(py, LogError::InvalidArgument { msg }));
                    }
                }
            }
            Ok(())
        }
    };
}
walcdc_core::for_each_read_option!(from_python);

/// A bad value's error, naming its option (type errors only: the core's own errors name it).
fn in_option(py: Python<'_>, name: &str, e: PyErr) -> PyErr {
    if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) {
        pyo3::exceptions::PyTypeError::new_err(format!("read option {name}: {}", e.value(py)))
    } else {
        e
    }
}

/// Every read option: `[{name, kind, resolve, default, choices, doc}]`, defaults as JSON text,
/// each doc one line.
pub(crate) fn read_options_list<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for o in READ_OPTIONS {
        let d = PyDict::new(py);
        d.set_item("name", o.name)?;
        d.set_item("kind", o.kind)?;
        d.set_item("resolve", o.resolve.as_str())?;
        d.set_item("default", (o.default)().to_string())?;
        d.set_item("choices", (o.choices)())?;
        d.set_item("doc", o.doc.lines().map(str::trim).collect::<Vec<_>>().join(" "))?;
        out.append(d)?;
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Dicts and lists

/// Encrypted page runs skipped: `[{from_lsa, first_pageid, last_pageid, resume_lsa}]`.
pub(crate) fn skipped_list<'py>(py: Python<'py>, s: &[SkippedRange]) -> PyResult<Bound<'py, PyList>> {
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

/// Transactions still open at the end of a stream.
pub(crate) fn pending_list<'py>(py: Python<'py>, pending: &[Pending]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for p in pending {
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

/// Readable records past a torn end: `{"end_lsa", "first_lsa", "pages"}`, or None.
pub(crate) fn beyond_end_dict<'py>(
    py: Python<'py>,
    b: Option<walcdc_core::log::walker::BeyondEnd>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(b) = b else { return Ok(None) };
    let d = PyDict::new(py);
    d.set_item("end_lsa", b.end_lsa.to_key())?;
    d.set_item("first_lsa", b.first_lsa.to_key())?;
    d.set_item("pages", b.pages)?;
    Ok(Some(d))
}

/// The counters of a change stream.
pub(crate) fn stats_dict<'py>(py: Python<'py>, s: &ChangeStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("records", s.records)?;
    d.set_item("supplemental_records", s.supplemental_records)?;
    d.set_item("events", s.events)?;
    d.set_item("committed_transactions", s.committed_transactions)?;
    d.set_item("aborted_transactions", s.aborted_transactions)?;
    d.set_item("undone_events", s.undone_events)?;
    d.set_item("spilled_events", s.spilled_events)?;
    d.set_item("peak_buffered_bytes", s.peak_buffered_bytes)?;
    d.set_item("restarted_transactions", s.restarted_transactions)?;
    d.set_item("abandoned_events", s.abandoned_events)?;
    d.set_item("pages_beyond_end", s.pages_beyond_end)?;
    d.set_item("random_reads", s.random_reads)?;
    d.set_item("partial_transactions", s.partial_transactions)?;
    d.set_item("partial_events", s.partial_events)?;
    d.set_item("unknown_schema_events", s.unknown_schema_events)?;
    d.set_item("unknown_schema_tables", s.unknown_schema_tables)?;
    Ok(d)
}

pub(crate) fn domain_dict<'py>(py: Python<'py>, d: &Domain) -> PyResult<Bound<'py, PyDict>> {
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

/// A domain from the dict [`domain_dict`] makes.
pub(crate) fn domain_from_dict(d: &Bound<'_, PyDict>) -> PyResult<Domain> {
    fn int(d: &Bound<'_, PyDict>, key: &str, default: i32) -> PyResult<i32> {
        match d.get_item(key)? {
            Some(v) if !v.is_none() => v.extract(),
            _ => Ok(default),
        }
    }
    let mut set_domains = Vec::new();
    if let Some(list) = d.get_item("set_domains")? {
        for item in list.try_iter()? {
            set_domains.push(domain_from_dict(item?.cast::<PyDict>()?)?);
        }
    }
    let class_oid = match d.get_item("class_oid")? {
        Some(v) if !v.is_none() => Some(Oid::from_cdc(v.extract()?)),
        _ => None,
    };
    let enum_labels = match d.get_item("enum_labels")? {
        Some(v) if !v.is_none() => v.extract()?,
        _ => Vec::new(),
    };
    Ok(Domain {
        db_type: int(d, "type", 0)?,
        precision: int(d, "precision", -1)?,
        scale: int(d, "scale", 0)?,
        codeset: int(d, "codeset", 0)?,
        collation: int(d, "collation", 0)?,
        class_oid,
        enum_labels,
        set_domains,
    })
}

/// A typed table's columns from column dicts of `LogSet.schemas()` (in the order given).
pub(crate) fn table_columns(columns: &Bound<'_, PyList>) -> PyResult<Vec<TableColumn>> {
    columns
        .iter()
        .map(|c| {
            let d = c.cast::<PyDict>()?;
            let req = |k: &str| -> PyResult<Bound<'_, PyAny>> {
                d.get_item(k)?.ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(k.to_string()))
            };
            Ok(TableColumn {
                id: req("id")?.extract()?,
                name: req("name")?.extract()?,
                domain: domain_from_dict(d)?,
                primary_key: d.get_item("primary_key")?.map(|v| v.is_truthy()).transpose()?.unwrap_or(false),
            })
        })
        .collect()
}

pub(crate) fn attribute_dict<'py>(py: Python<'py>, a: &Attribute) -> PyResult<Bound<'py, PyDict>> {
    let o = domain_dict(py, &a.domain)?;
    o.set_item("type_name", walcdc_core::format::schema::db_type_name(a.domain.db_type))?;
    let charset = walcdc_core::format::schema::CODESETS.iter().find(|c| c.0 == a.domain.codeset).map(|c| c.1);
    o.set_item("charset", charset)?;
    o.set_item("id", a.id)?;
    o.set_item("name", &a.name)?;
    o.set_item("def_order", a.def_order)?;
    o.set_item("primary_key", a.primary_key)?;
    o.set_item("default_json", a.default_value.as_deref())?;
    Ok(o)
}

/// A table schema as `LogSet.schemas()` reports it, with all its representations.
pub(crate) fn class_dict<'py>(py: Python<'py>, cat: &Catalog, c: &ClassSchema) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &c.name)?;
    d.set_item("names", cat.names(c.oid).iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
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
    Ok(d)
}

/// Headers and volumes of a log set, as `LogSet.header_info()` reports them.
pub(crate) fn header_dict<'py>(py: Python<'py>, log: &LogSet) -> PyResult<Bound<'py, PyDict>> {
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
        v.set_item("file", &log.volumes()[a.vol].name)?;
        v.set_item("path", log.volumes()[a.vol].path.display().to_string())?;
        v.set_item("size", log.volumes()[a.vol].len())?;
        v.set_item("kind", "active")?;
        v.set_item("pages", h.npages)?;
        vols.append(v)?;
    }
    let arcs = PyList::empty(py);
    for a in &log.archives {
        let v = PyDict::new(py);
        v.set_item("file", &log.volumes()[a.vol].name)?;
        v.set_item("path", log.volumes()[a.vol].path.display().to_string())?;
        v.set_item("size", log.volumes()[a.vol].len())?;
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

/// One record with its undo/redo images, as `LogSet.record()` reports it.
pub(crate) fn record_dict<'py>(
    py: Python<'py>,
    log: &LogSet,
    rec: &Record,
    undo: &[u8],
    redo: &[u8],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("lsa", rec.lsa.to_key())?;
    d.set_item("forw_lsa", lsa_opt(rec.forw_lsa))?;
    d.set_item("back_lsa", lsa_opt(rec.back_lsa))?;
    d.set_item("prev_tranlsa", lsa_opt(rec.prev_tranlsa))?;
    d.set_item("trid", rec.trid)?;
    d.set_item("type", rec.type_name())?;
    d.set_item("rcvindex", rec.rcvindex())?;
    d.set_item("rcvindex_name", rec.rcvindex().and_then(walcdc_core::format::rcvindex::rcvindex_name))?;
    d.set_item("undo_zipped", rec.undo.zipped)?;
    d.set_item("redo_zipped", rec.redo.zipped)?;
    d.set_item("supplement_type", rec.supplement_type())?;
    d.set_item("at_time", rec.at_time())?;
    d.set_item("file", &log.volumes()[rec.vol as usize].name)?;
    d.set_item("data_header", PyBytes::new(py, rec.data_header()))?;
    d.set_item("undo", PyBytes::new(py, undo))?;
    d.set_item("redo", PyBytes::new(py, redo))?;
    Ok(d)
}

/// The true end of a log, as `LogSet.end_of_log()` reports it.
pub(crate) fn end_dict<'py>(py: Python<'py>, end: &EndOfLog) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("end_lsa", end.end_lsa.map(|l| l.to_key()))?;
    d.set_item("end_reason", end.reason.as_str())?;
    d.set_item("last_lsa", end.last_lsa.map(|l| l.to_key()))?;
    d.set_item("skipped", skipped_list(py, &end.skipped)?)?;
    Ok(d)
}

/// What the test log writer wrote, as `LogWriter.finish()` reports it.
pub(crate) fn written_dict<'py>(py: Python<'py>, out: &WrittenLog) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("active", out.active.display().to_string())?;
    d.set_item("archives", out.archives.iter().map(|p| p.display().to_string()).collect::<Vec<_>>())?;
    d.set_item("end_lsa", out.end_lsa.to_key())?;
    d.set_item("records", out.records.iter().map(|l| l.to_key()).collect::<Vec<_>>())?;
    Ok(d)
}
