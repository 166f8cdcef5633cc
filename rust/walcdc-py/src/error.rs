//! Core errors as Python exceptions: the one place that knows the names of the classes in
//! `walcdc.errors`.

use pyo3::prelude::*;
use walcdc_core::error::LogError;

/// The `walcdc.errors` class of a core error.
fn class_name(e: &LogError) -> &'static str {
    match e {
        LogError::Io { .. } => "LogIOError",
        LogError::BadHeader { .. } => "BadHeaderError",
        LogError::Mismatch { .. } => "MismatchedLogSetError",
        LogError::Checksum { .. } => "ChecksumError",
        LogError::Truncated { .. } => "TruncatedLogError",
        LogError::MissingArchive { .. } => "MissingArchiveError",
        LogError::Encrypted { .. } => "EncryptedPageError",
        LogError::CorruptRecord { .. } => "CorruptRecordError",
        LogError::NoSupplementalLog { .. } => "NoSupplementalLogError",
        LogError::InvalidArgument { .. } | LogError::BadPosition { .. } => "InvalidArgumentError",
    }
}

/// Raises the matching `walcdc.errors` exception, with `file` and `lsa` attributes.
pub fn to_py(py: Python<'_>, e: LogError) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = py.import("walcdc.errors")?;
        let class = module.getattr(class_name(&e))?;
        let lsa = e.lsa().map(|l| l.to_key());
        let inst = class.call1((e.to_string(), e.file().map(str::to_string), lsa))?;
        Ok(PyErr::from_value(inst))
    };
    build().unwrap_or_else(|err| err)
}
