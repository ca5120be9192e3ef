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
/// mix for strings, and the read would then refuse the numbers. And each field
/// inferred as a float64 because an integer in the sample is beyond int64 made a
/// decimal of 38 digits and scale 0 (see [`whole_numbers_beyond_int64`]).
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
        DataType::Float64 if whole_numbers_beyond_int64(values) => {
            DataType::Decimal128(WHOLE_DIGITS, 0)
        }
        other => other.clone(),
    }
}

/// The digits of the decimal an integer field beyond int64 is inferred as: the most a
/// 128-bit decimal holds, and what Delta, Parquet and Spark take.
const WHOLE_DIGITS: u8 = 38;

/// Whether the sampled numbers at one place are all integer literals and one is
/// beyond int64 (an id above 2^63, say). `arrow-json` infers such a field as a
/// float64, which holds integers exactly only up to 2^53: every value read would
/// lose digits (9007199254740993 read as 9007199254740992), even those that fit
/// int64. As a decimal of scale 0 each is read exactly (a uint64 would not do: Delta
/// and Spark have no unsigned type), as Spark's JSON inference does too.
///
/// serde_json reads an integer literal within 64 bits as an integer, and only one
/// with a point or an exponent, or beyond 64 bits, as a float: so a float under
/// 2^64 came from a float literal and keeps the field a float64, and one at or
/// above 2^64 must be whole and within the decimal's 38 digits.
fn whole_numbers_beyond_int64(values: &[&serde_json::Value]) -> bool {
    let numbers: Vec<&serde_json::Number> = values.iter().filter_map(|v| v.as_number()).collect();
    let beyond_int64 = |n: &serde_json::Number| !n.is_i64();
    let whole = |n: &serde_json::Number| {
        n.is_i64()
            || n.is_u64()
            || n.as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f.abs() >= 2f64.powi(64) && f.abs() < 1e38)
    };
    numbers.iter().any(|n| beyond_int64(n)) && numbers.iter().all(|n| whole(n))
}
