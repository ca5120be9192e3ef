//! A JSON value's schema inferred from a sample of payloads, for reads given none.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use serde_json::value::RawValue;

use super::tokens::NON_FINITE;
use crate::codec::{nothing_to_infer_from, ValueFormat};
use crate::error::{Error, Result};

/// The schema of `sample`'s JSON values: `arrow-json`'s inference over the payloads
/// that are JSON objects (others would fail the read later, by mode).
pub(super) fn json_schema(sample: &[&[u8]]) -> Result<SchemaRef> {
    let objects: Vec<(serde_json::Value, Literal<'_>)> = sample
        .iter()
        .filter_map(|p| {
            let value = serde_json::from_slice::<serde_json::Value>(p).ok()?;
            let raw = serde_json::from_slice::<&RawValue>(p).ok()?;
            Some((value, Literal::of(raw)?))
        })
        .filter(|(value, _)| value.is_object())
        .collect();
    if objects.is_empty() {
        return Err(nothing_to_infer_from(ValueFormat::Json, sample.len()));
    }
    let schema = arrow_json::reader::infer_json_schema_from_iterator(
        objects.iter().map(|(value, _)| Ok(value.clone())),
    )
    .map_err(|e| Error::bad_input(format!("inferring the JSON values' schema: {e}")))?;
    let values: Vec<&Literal> = objects.iter().map(|(_, literal)| literal).collect();
    let DataType::Struct(fields) =
        floats_with_non_finite(&DataType::Struct(schema.fields().clone()), &values)
    else {
        unreachable!("a struct stays a struct")
    };
    Ok(Arc::new(Schema::new(fields)))
}

/// A JSON value with each number kept as the text it is written as: whether a
/// number is an integer literal or a float literal (a point or an exponent) is lost
/// in a `serde_json::Value`, which reads both `18446744073709551616` and
/// `1.8446744073709552e+19` as the same float.
enum Literal<'a> {
    Null,
    Other,
    Number(&'a str),
    String(String),
    Array(Vec<Literal<'a>>),
    Object(HashMap<String, Literal<'a>>),
}

impl<'a> Literal<'a> {
    /// `raw` read as a literal tree; None when it is not JSON (not met: `raw` was
    /// read as a JSON value first).
    fn of(raw: &'a RawValue) -> Option<Self> {
        let text = raw.get();
        Some(match text.trim_start().as_bytes().first()? {
            b'{' => Self::Object(
                // Duplicate keys: the last one counts, as in a `serde_json::Value`.
                serde_json::from_str::<HashMap<String, &'a RawValue>>(text)
                    .ok()?
                    .into_iter()
                    .map(|(k, v)| Some((k, Self::of(v)?)))
                    .collect::<Option<_>>()?,
            ),
            b'[' => Self::Array(
                serde_json::from_str::<Vec<&'a RawValue>>(text)
                    .ok()?
                    .into_iter()
                    .map(Self::of)
                    .collect::<Option<_>>()?,
            ),
            b'"' => Self::String(serde_json::from_str(text).ok()?),
            b'n' => Self::Null,
            b'-' | b'0'..=b'9' => Self::Number(text.trim()),
            _ => Self::Other,
        })
    }
}

/// `data_type` with each field inferred as a string whose sampled values are numbers
/// and the strings a float is written as when not finite (`"NaN"`, `"Infinity"`,
/// `"-Infinity"`, as the encoder writes them) made a float64: `arrow-json` takes the
/// mix for strings, and the read would then refuse the numbers. And each field
/// inferred as a float64 because an integer in the sample is beyond int64 made a
/// decimal of 38 digits and scale 0 (see [`whole_numbers_beyond_int64`]).
fn floats_with_non_finite(data_type: &DataType, values: &[&Literal]) -> DataType {
    match data_type {
        DataType::Struct(fields) => DataType::Struct(Fields::from(
            fields
                .iter()
                .map(|f| {
                    let inner: Vec<&Literal> = values
                        .iter()
                        .filter_map(|v| match v {
                            Literal::Object(map) => map.get(f.name()),
                            _ => None,
                        })
                        .collect();
                    let t = floats_with_non_finite(f.data_type(), &inner);
                    Field::new(f.name(), t, f.is_nullable()).with_metadata(f.metadata().clone())
                })
                .collect::<Vec<_>>(),
        )),
        DataType::List(item) => {
            let inner: Vec<&Literal> = values
                .iter()
                .filter_map(|v| match v {
                    Literal::Array(items) => Some(items),
                    _ => None,
                })
                .flatten()
                .collect();
            let t = floats_with_non_finite(item.data_type(), &inner);
            DataType::List(Arc::new(Field::new(item.name(), t, item.is_nullable())))
        }
        DataType::Utf8 => {
            let numbers = values
                .iter()
                .filter(|v| matches!(v, Literal::Number(_)))
                .count();
            let all_fit = values.iter().all(|v| match v {
                Literal::Null | Literal::Number(_) => true,
                Literal::String(s) => NON_FINITE.contains(&s.as_str()),
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

/// Whether the sampled numbers at one place are all integer literals within 38
/// digits and one is beyond int64 (an id above 2^63, say). `arrow-json` infers such
/// a field as a float64, which holds integers exactly only up to 2^53: every value
/// read would lose digits (9007199254740993 read as 9007199254740992), even those
/// that fit int64. As a decimal of scale 0 each is read exactly (a uint64 would not
/// do: Delta and Spark have no unsigned type), as Spark's JSON inference does too.
///
/// Only the literal's text tells: a number written with a point or an exponent is a
/// float, whatever its value (`1.8446744073709552e+19` is a float64 of 2^64, not the
/// integer 18446744073709552000), and keeps the field a float64.
fn whole_numbers_beyond_int64(values: &[&Literal]) -> bool {
    let numbers: Vec<&str> = values
        .iter()
        .filter_map(|v| match v {
            Literal::Number(text) => Some(*text),
            _ => None,
        })
        .collect();
    let whole = |text: &str| {
        let digits = text.strip_prefix('-').unwrap_or(text);
        digits.bytes().all(|b| b.is_ascii_digit()) && digits.len() <= usize::from(WHOLE_DIGITS)
    };
    let beyond_int64 = |text: &str| text.parse::<i64>().is_err();
    numbers.iter().any(|n| beyond_int64(n)) && numbers.iter().all(|n| whole(n))
}
