//! JSON Lines from Arrow batches: one object per row (arrow-json's writer), with the columns
//! that already hold JSON text (a row's `before`/`after`, its `key`) written as JSON, not as
//! strings.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch, StringArray};
use arrow_json::writer::{
    make_encoder, Encoder, EncoderFactory, EncoderOptions, LineDelimited, NullableEncoder, WriterBuilder,
};
use arrow_schema::{ArrowError, DataType, FieldRef};

/// Field metadata key marking a string column whose values are JSON texts.
pub const JSON_METADATA_KEY: &str = "walcdc.json";

/// Writes the string values as they are (they are JSON texts already).
struct RawJson<'a>(&'a StringArray);

impl Encoder for RawJson<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(self.0.value(idx).as_bytes());
    }
}

/// Picks [`RawJson`] for top-level string fields that are marked as JSON or named in `raw`.
#[derive(Debug)]
struct RawJsonFactory {
    raw: Vec<String>,
}

impl EncoderFactory for RawJsonFactory {
    fn make_default_encoder<'a>(
        &self,
        field: &'a FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        let marked = field.metadata().get(JSON_METADATA_KEY).is_some_and(|v| v == "true")
            || self.raw.iter().any(|n| n == field.name());
        if !marked || *array.data_type() != DataType::Utf8 || *field.data_type() != DataType::Utf8 {
            return Ok(None);
        }
        let strings = array.as_string::<i32>();
        Ok(Some(NullableEncoder::new(Box::new(RawJson(strings)), strings.nulls().cloned())))
    }
}

/// Appends the rows of `batch` to `out` as JSON Lines; nulls are written as `null`. String
/// columns marked with [`JSON_METADATA_KEY`] or named in `raw_json` are written as the JSON they
/// hold.
pub fn encode_jsonl(batch: &RecordBatch, raw_json: &[String], out: &mut Vec<u8>) -> Result<(), ArrowError> {
    // Fail early (not mid-line) if a column cannot be encoded.
    let opts = EncoderOptions::default();
    for (field, col) in batch.schema().fields().iter().zip(batch.columns()) {
        let _ = make_encoder(field, col.as_ref(), &opts)?;
    }
    let mut writer = WriterBuilder::new()
        .with_explicit_nulls(true)
        .with_encoder_factory(Arc::new(RawJsonFactory { raw: raw_json.to_vec() }))
        .build::<_, LineDelimited>(out);
    writer.write(batch)?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int32Array, StringArray};
    use arrow_schema::{Field, Schema};
    use std::collections::HashMap;

    #[test]
    fn json_columns_are_written_as_json() {
        let marked = Field::new("after", DataType::Utf8, true)
            .with_metadata(HashMap::from([(JSON_METADATA_KEY.to_string(), "true".to_string())]));
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int32, false),
            marked,
            Field::new("s", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some(r#"{"a":[1,"x"]}"#), None])),
                Arc::new(StringArray::from(vec![Some("{not json}"), Some("q\"")])),
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        encode_jsonl(&batch, &[], &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"n\":1,\"after\":{\"a\":[1,\"x\"]},\"s\":\"{not json}\"}\n{\"n\":2,\"after\":null,\"s\":\"q\\\"\"}\n"
        );
    }
}
