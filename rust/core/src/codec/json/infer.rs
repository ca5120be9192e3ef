//! A JSON value's schema inferred from a sample of payloads, for reads given none.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};

use super::tokens::NON_FINITE;
use crate::codec::{nothing_to_infer_from, ValueFormat};
use crate::error::{Error, Result};

/// The schema of `sample`'s JSON values: `arrow-json`'s inference over the payloads
/// that are JSON objects (others would fail the read later, by mode).
pub(super) fn json_schema(sample: &[&[u8]]) -> Result<SchemaRef> {
    let objects: Vec<serde_json::Value> = sample
        .iter()
        .filter_map(|p| serde_json::from_slice::<serde_json::Value>(p).ok())
        .filter(serde_json::Value::is_object)
        .collect();
    if objects.is_empty() {
        return Err(nothing_to_infer_from(ValueFormat::Json, sample.len()));
    }
    let schema =
        arrow_json::reader::infer_json_schema_from_iterator(objects.iter().cloned().map(Ok))
            .map_err(|e| Error::bad_input(format!("inferring the JSON values' schema: {e}")))?;
    let values: Vec<&serde_json::Value> = objects.iter().collect();
    let DataType::Struct(fields) =
        floats_with_non_finite(&DataType::Struct(schema.fields().clone()), &values)
    else {
        unreachable!("a struct stays a struct")
    };
    Ok(Arc::new(Schema::new(fields)))
}

/// `data_type` with each field inferred as a string whose sampled values are numbers
/// and the strings a float is written as when not finite (`"NaN"`, `"Infinity"`,
/// `"-Infinity"`, as the encoder writes them) made a float64: `arrow-json` takes the
/// mix for strings, and the read would then refuse the numbers.
fn floats_with_non_finite(data_type: &DataType, values: &[&serde_json::Value]) -> DataType {
    use serde_json::Value;
    match data_type {
        DataType::Struct(fields) => DataType::Struct(Fields::from(
            fields
                .iter()
                .map(|f| {
                    let inner: Vec<&Value> =
                        values.iter().filter_map(|v| v.get(f.name())).collect();
                    let t = floats_with_non_finite(f.data_type(), &inner);
                    Field::new(f.name(), t, f.is_nullable()).with_metadata(f.metadata().clone())
                })
                .collect::<Vec<_>>(),
        )),
        DataType::List(item) => {
            let inner: Vec<&Value> = values
                .iter()
                .filter_map(|v| v.as_array())
                .flatten()
                .collect();
            let t = floats_with_non_finite(item.data_type(), &inner);
            DataType::List(Arc::new(Field::new(item.name(), t, item.is_nullable())))
        }
        DataType::Utf8 => {
            let numbers = values.iter().filter(|v| v.is_number()).count();
            let all_fit = values.iter().all(|v| match v {
                Value::Null | Value::Number(_) => true,
                Value::String(s) => NON_FINITE.contains(&s.as_str()),
                _ => false,
            });
            if numbers > 0 && all_fit {
                DataType::Float64
            } else {
                DataType::Utf8
            }
        }
        other => other.clone(),
    }
}
