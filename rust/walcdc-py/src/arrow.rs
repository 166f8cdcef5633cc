//! The Arrow C data interface: record batches and schemas exported to Python as PyCapsules (no
//! copy), and batches imported from objects with `__arrow_c_array__`.

use arrow_array::{Array, RecordBatch, StructArray};
use arrow_data::ffi::FFI_ArrowArray;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{DataType, SchemaRef};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyCapsuleMethods, PyTuple};

pub(crate) fn schema_capsule<'py>(py: Python<'py>, schema: &SchemaRef) -> PyResult<Bound<'py, PyCapsule>> {
    let dt = DataType::Struct(schema.fields().clone());
    let ffi = FFI_ArrowSchema::try_from(&dt).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    PyCapsule::new_with_value(py, ffi, c"arrow_schema")
}

/// One record batch, exported on request through `__arrow_c_array__`.
#[pyclass(module = "walcdc._native")]
pub(crate) struct Batch {
    batch: Option<RecordBatch>,
}

impl Batch {
    pub(crate) fn new(batch: RecordBatch) -> Self {
        Batch { batch: Some(batch) }
    }
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
pub(crate) struct Schema {
    schema: SchemaRef,
}

impl Schema {
    pub(crate) fn new(schema: SchemaRef) -> Self {
        Schema { schema }
    }
}

#[pymethods]
impl Schema {
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, &self.schema)
    }
}

/// One record batch from an object with `__arrow_c_array__` (a `pyarrow.RecordBatch`).
pub(crate) fn import_batch(obj: &Bound<'_, PyAny>) -> PyResult<RecordBatch> {
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
pub(crate) fn encode_jsonl<'py>(
    py: Python<'py>,
    batch: &Bound<'py, PyAny>,
    raw_json: Vec<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    let batch = import_batch(batch)?;
    let mut out = Vec::with_capacity(batch.get_array_memory_size());
    py.detach(|| walcdc_core::arrow::jsonl::encode_jsonl(&batch, &raw_json, &mut out))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyBytes::new(py, &out))
}
