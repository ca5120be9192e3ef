//! Rows into Protobuf payloads: each row written as protobuf's JSON mapping by
//! `arrow-json`, read by `prost-reflect` into a dynamic message, and encoded.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, BinaryArray, StructArray};
use arrow_json::writer::{make_encoder, EncoderFactory, EncoderOptions, NullableEncoder};
use arrow_schema::{ArrowError, DataType, Field, FieldRef};
use base64::Engine;
use prost::Message;
use prost_reflect::{DeserializeOptions, DynamicMessage, MessageDescriptor};

use super::left_out::{value_left_out, MinusZeros, RowsOf};
use super::{message_descriptor, Protobuf};
use crate::codec::json::ExactValues;
use crate::codec::{binary_from_parts, RowsEncoder};
use crate::error::{Error, Result};

/// Binary columns written as base64, as protobuf's JSON mapping writes `bytes`; the
/// values plain JSON would change (NaN and ±Inf, which the mapping writes as the
/// strings `"NaN"`, `"Infinity"`, `"-Infinity"`) as the JSON codec writes them.
#[derive(Debug)]
struct Base64Binary;

struct Base64Encoder<'a>(&'a BinaryArray);

impl arrow_json::Encoder for Base64Encoder<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.push(b'"');
        out.extend_from_slice(
            base64::engine::general_purpose::STANDARD
                .encode(self.0.value(idx))
                .as_bytes(),
        );
        out.push(b'"');
    }
}

/// A float32 written as the float64 it widens to: `prost-reflect` reads a JSON number
/// as a float64 and refuses one beyond float32's range, and float32's shortest text
/// of its largest value (`3.4028235e38`) reads as a float64 just beyond it.
struct WideFloat32<'a>(&'a arrow_array::Float32Array);

impl arrow_json::Encoder for WideFloat32<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        let wide = f64::from(self.0.value(idx));
        match crate::codec::json::non_finite(wide) {
            Some(text) => out.extend_from_slice(text.as_bytes()),
            // Debug is the shortest text that reads back as the same float64.
            None => out.extend_from_slice(format!("{wide:?}").as_bytes()),
        }
    }
}

impl EncoderFactory for Base64Binary {
    fn make_default_encoder<'a>(
        &self,
        field: &'a FieldRef,
        array: &'a dyn Array,
        options: &'a EncoderOptions,
    ) -> std::result::Result<Option<NullableEncoder<'a>>, ArrowError> {
        Ok(match array.data_type() {
            DataType::Binary => {
                let binary = array.as_binary::<i32>();
                Some(NullableEncoder::new(
                    Box::new(Base64Encoder(binary)),
                    binary.nulls().cloned(),
                ))
            }
            DataType::Float32 => {
                let floats = array.as_primitive::<arrow_array::types::Float32Type>();
                Some(NullableEncoder::new(
                    Box::new(WideFloat32(floats)),
                    floats.nulls().cloned(),
                ))
            }
            _ => ExactValues.make_default_encoder(field, array, options)?,
        })
    }
}

pub(super) struct ProtobufEncoder {
    message: MessageDescriptor,
}

impl ProtobufEncoder {
    pub fn new(settings: &Protobuf) -> Result<Self> {
        Ok(Self {
            message: message_descriptor(settings)?,
        })
    }
}

/// `values` with map keys as text: protobuf's JSON mapping writes every map key as a
/// string, and `arrow-json` writes maps with string keys only.
fn keys_as_text(values: &StructArray) -> Result<StructArray> {
    fn text_keys(t: &DataType) -> DataType {
        match t {
            DataType::Map(entries, sorted) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    return t.clone();
                };
                let key = Field::new(kv[0].name(), DataType::Utf8, false);
                let value = kv[1]
                    .as_ref()
                    .clone()
                    .with_data_type(text_keys(kv[1].data_type()));
                DataType::Map(
                    Arc::new(
                        entries
                            .as_ref()
                            .clone()
                            .with_data_type(DataType::Struct(vec![key, value].into())),
                    ),
                    *sorted,
                )
            }
            DataType::Struct(fields) => DataType::Struct(
                fields
                    .iter()
                    .map(|f| f.as_ref().clone().with_data_type(text_keys(f.data_type())))
                    .collect(),
            ),
            DataType::List(item) => DataType::List(Arc::new(
                item.as_ref()
                    .clone()
                    .with_data_type(text_keys(item.data_type())),
            )),
            other => other.clone(),
        }
    }
    let target = text_keys(values.data_type());
    if &target == values.data_type() {
        return Ok(values.clone());
    }
    let cast = arrow_cast::cast(values, &target)
        .map_err(|e| Error::bad_input(format!("encoding values as Protobuf: {e}")))?;
    Ok(cast.as_struct().clone())
}

impl RowsEncoder for ProtobufEncoder {
    fn encode(&mut self, values: &StructArray) -> Result<BinaryArray> {
        let values = keys_as_text(values)?;
        let rows: RowsOf = (0..values.len()).map(Some).collect();
        if let Some((column, row, left_out)) =
            value_left_out(&self.message, &values, &rows, "", true)
        {
            return Err(Error::bad_input(format!(
                "encoding row {row} as {}: column '{column}' {}",
                self.message.full_name(),
                left_out.why()
            )));
        }
        let minus_zeros = MinusZeros::of(&self.message, &values);
        let field = Arc::new(Field::new_struct("", values.fields().clone(), false));
        // Null fields left out: protobuf has no null, an absent field is its default.
        let options = EncoderOptions::default().with_encoder_factory(Arc::new(Base64Binary));
        let failed = |row: usize, e: &dyn std::fmt::Display| {
            Error::bad_input(format!(
                "encoding row {row} as {}: {e}",
                self.message.full_name()
            ))
        };
        let mut encoder = make_encoder(&field, &values, &options).map_err(|e| failed(0, &e))?;
        let strict = DeserializeOptions::new().deny_unknown_fields(true);
        let mut json = Vec::with_capacity(256);
        let mut bytes = Vec::with_capacity(values.len() * 64);
        let mut offsets = Vec::with_capacity(values.len() + 1);
        offsets.push(0);
        for row in 0..values.len() {
            json.clear();
            encoder.encode(row, &mut json);
            let mut reader = serde_json::Deserializer::from_slice(&json);
            let message = DynamicMessage::deserialize_with_options(
                self.message.clone(),
                &mut reader,
                &strict,
            )
            .map_err(|e| failed(row, &e))?;
            message.encode(&mut bytes).map_err(|e| failed(row, &e))?;
            minus_zeros.append(row, &mut bytes);
            offsets.push(bytes.len());
        }
        binary_from_parts(bytes, offsets)
    }
}
