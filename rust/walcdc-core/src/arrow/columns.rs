//! Columns filled one row at a time into plain vectors that become Arrow buffers without a
//! copy: cheaper per value than Arrow's builders (whose appends are calls), with a validity
//! bitmap kept only once a null appears. A record or an event fills twenty or more of them.

use arrow_array::types::ArrowPrimitiveType;
use arrow_array::{BinaryArray, BooleanArray, PrimitiveArray, StringArray};
use arrow_buffer::{BooleanBuffer, Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};

/// Rows reserved in each column when a batch starts (at most: a caller's batch size is not an
/// allocation), so that a batch's columns are not copied as they grow; a short batch gives
/// back what it did not use when it is taken.
pub(crate) const RESERVED_ROWS: usize = 1 << 16;

/// A column that can make room for rows ahead of a batch.
pub(crate) trait Reserve {
    fn reserve(&mut self, rows: usize);
}

/// One primitive column being filled.
pub(crate) struct Column<T: ArrowPrimitiveType> {
    pub(crate) values: Vec<T::Native>,
    nulls: NullBufferBuilder,
}

impl<T: ArrowPrimitiveType> Column<T> {
    pub(crate) fn new() -> Self {
        Column { values: Vec::new(), nulls: NullBufferBuilder::new(0) }
    }

    #[inline(always)]
    pub(crate) fn push(&mut self, v: T::Native) {
        self.values.push(v);
        self.nulls.append_non_null();
    }

    #[inline(always)]
    pub(crate) fn push_option(&mut self, v: Option<T::Native>) {
        match v {
            Some(v) => self.push(v),
            None => {
                self.values.push(T::Native::default());
                self.nulls.append_null();
            }
        }
    }

    pub(crate) fn finish(&mut self) -> PrimitiveArray<T> {
        let mut values = std::mem::take(&mut self.values);
        // The batch keeps its buffer: a short batch (a small range, the last of a walk) must
        // not hold the room reserved for a full one.
        if values.capacity() > 2 * values.len() {
            values.shrink_to_fit();
        }
        PrimitiveArray::new(ScalarBuffer::from(values), self.nulls.finish())
    }
}

impl<T: ArrowPrimitiveType> Reserve for Column<T> {
    fn reserve(&mut self, rows: usize) {
        self.values.reserve(rows);
    }
}

impl Reserve for Vec<bool> {
    fn reserve(&mut self, rows: usize) {
        Vec::reserve(self, rows);
    }
}

/// A boolean column's values as an array (no nulls); the vector is emptied.
pub(crate) fn booleans(values: &mut Vec<bool>) -> BooleanArray {
    let array = BooleanArray::new(BooleanBuffer::collect_bool(values.len(), |i| values[i]), None);
    values.clear();
    array
}

/// A variable-length column: each row's bytes end at its offset in one values vector.
struct Var {
    offsets: Vec<i32>,
    values: Vec<u8>,
    nulls: NullBufferBuilder,
}

impl Var {
    fn new() -> Self {
        Var { offsets: vec![0], values: Vec::new(), nulls: NullBufferBuilder::new(0) }
    }

    #[inline(always)]
    fn end_row(&mut self) {
        // A batch ends after at most one event past 8 MiB (a row is at most 1 GiB), as
        // Arrow's own builders assume of their 32-bit offsets.
        let end = i32::try_from(self.values.len()).expect("a batch's column holds under 2 GiB");
        self.offsets.push(end);
    }

    #[inline(always)]
    fn push(&mut self, v: &[u8]) {
        self.values.extend_from_slice(v);
        self.end_row();
        self.nulls.append_non_null();
    }

    #[inline(always)]
    fn push_null(&mut self) {
        self.end_row();
        self.nulls.append_null();
    }

    /// The column's buffers; the next batch's values start with `room` bytes.
    fn take(&mut self, room: usize) -> (OffsetBuffer<i32>, Buffer, Option<arrow_buffer::NullBuffer>) {
        let rows = self.offsets.len() - 1;
        let mut offsets = std::mem::replace(&mut self.offsets, Vec::with_capacity(rows + 1));
        self.offsets.push(0);
        let mut values = std::mem::replace(&mut self.values, Vec::with_capacity(room));
        if offsets.capacity() > 2 * offsets.len() {
            offsets.shrink_to_fit();
        }
        if values.capacity() > 2 * values.len() {
            values.shrink_to_fit();
        }
        // Offsets pushed in order from 0, each the values' length then: monotonic.
        let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
        (offsets, Buffer::from_vec(values), self.nulls.finish())
    }
}

/// A text (`Utf8`) column: only `&str`s go in, so its bytes are valid UTF-8.
pub(crate) struct Text(Var);

impl Text {
    pub(crate) fn new() -> Self {
        Text(Var::new())
    }

    #[inline(always)]
    pub(crate) fn push_option(&mut self, v: Option<&str>) {
        match v {
            Some(s) => self.0.push(s.as_bytes()),
            None => self.0.push_null(),
        }
    }

    #[inline(always)]
    pub(crate) fn push_null(&mut self) {
        self.0.push_null()
    }

    /// Bytes in the batch being built.
    pub(crate) fn bytes(&self) -> usize {
        self.0.values.len()
    }

    pub(crate) fn finish(&mut self, room: usize) -> StringArray {
        let (offsets, values, nulls) = self.0.take(room);
        // SAFETY: every value was appended from a `&str` (`push_option`), so the values are
        // UTF-8 and each offset falls between two of them.
        unsafe { StringArray::new_unchecked(offsets, values, nulls) }
    }
}

/// A binary column.
pub(crate) struct Bytes(Var);

impl Bytes {
    pub(crate) fn new() -> Self {
        Bytes(Var::new())
    }

    #[inline(always)]
    pub(crate) fn push_option(&mut self, v: Option<&[u8]>) {
        match v {
            Some(b) => self.0.push(b),
            None => self.0.push_null(),
        }
    }

    /// Bytes in the batch being built.
    pub(crate) fn bytes(&self) -> usize {
        self.0.values.len()
    }

    pub(crate) fn finish(&mut self, room: usize) -> BinaryArray {
        let (offsets, values, nulls) = self.0.take(room);
        BinaryArray::new(offsets, values, nulls)
    }
}

impl Reserve for Text {
    fn reserve(&mut self, rows: usize) {
        self.0.offsets.reserve(rows);
    }
}

impl Reserve for Bytes {
    fn reserve(&mut self, rows: usize) {
        self.0.offsets.reserve(rows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn text_and_bytes_columns_are_the_arrays_of_what_went_in() {
        let rows = [Some("a"), None, Some(""), Some("ünï"), None];
        let (mut text, mut bytes) = (Text::new(), Bytes::new());
        for _ in 0..2 {
            for r in rows {
                text.push_option(r);
                bytes.push_option(r.map(str::as_bytes));
            }
            let (t, b) = (text.finish(16), bytes.finish(16));
            assert_eq!(t, StringArray::from(rows.to_vec()));
            assert_eq!(b, BinaryArray::from(rows.iter().map(|r| r.map(str::as_bytes)).collect::<Vec<_>>()));
            assert_eq!((t.null_count(), text.bytes(), bytes.bytes()), (2, 0, 0));
        }
        // A column without a null has no validity bitmap.
        text.push_option(Some("x"));
        assert!(text.finish(0).nulls().is_none());
    }
}
