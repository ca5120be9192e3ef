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

use super::message_descriptor;
use crate::codec::json::ExactValues;
use crate::codec::{binary_from_parts, CodecSpec, RowsEncoder};
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

pub(in crate::codec) struct ProtobufEncoder {
    message: MessageDescriptor,
}

impl ProtobufEncoder {
    pub fn new(spec: &CodecSpec) -> Result<Self> {
        Ok(Self {
            message: message_descriptor(spec)?,
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

/// A float or double field without presence (proto3, not `optional`) whose value is
/// -0.0: `prost-reflect` takes it for the default (it equals 0.0) and leaves it out,
/// which reads back as 0.0; it is written after the message, as protobuf's own
/// runtimes write it (a later occurrence of a field is its value).
struct MinusZeros {
    /// Per top-level field of the kind: its column (as float64) and descriptor.
    fields: Vec<(arrow_array::Float64Array, prost_reflect::FieldDescriptor)>,
}

impl MinusZeros {
    fn of(message: &MessageDescriptor, values: &StructArray) -> Self {
        use prost_reflect::Kind;
        let fields = values
            .fields()
            .iter()
            .zip(values.columns())
            .filter_map(|(field, column)| {
                let proto = message
                    .get_field_by_name(field.name())
                    .or_else(|| message.get_field_by_json_name(field.name()))?;
                let float = matches!(proto.kind(), Kind::Float | Kind::Double);
                if !float || proto.is_list() || proto.is_map() || proto.supports_presence() {
                    return None;
                }
                let wide = arrow_cast::cast(column, &DataType::Float64).ok()?;
                Some((
                    wide.as_primitive::<arrow_array::types::Float64Type>()
                        .clone(),
                    proto,
                ))
            })
            .collect();
        Self { fields }
    }

    fn append(&self, row: usize, out: &mut Vec<u8>) {
        use prost::encoding::{encode_key, WireType};
        for (column, proto) in &self.fields {
            let v = column.value(row);
            if !column.is_valid(row) || v != 0.0 || v.is_sign_positive() {
                continue;
            }
            if proto.kind() == prost_reflect::Kind::Float {
                encode_key(proto.number(), WireType::ThirtyTwoBit, out);
                out.extend_from_slice(&(-0.0f32).to_le_bytes());
            } else {
                encode_key(proto.number(), WireType::SixtyFourBit, out);
                out.extend_from_slice(&(-0.0f64).to_le_bytes());
            }
        }
    }
}

/// Each element of a nested array: the input row it belongs to, or None under a null.
type RowsOf = Vec<Option<usize>>;

/// The elements of a list (or map) column, each with the row of its list.
fn rows_of_items(offsets: &[usize], valid: impl Fn(usize) -> bool, rows: &RowsOf) -> RowsOf {
    let mut items = vec![None; offsets.last().copied().unwrap_or(0)];
    for (i, row) in rows.iter().enumerate() {
        if row.is_some() && valid(i) {
            for item in &mut items[offsets[i]..offsets[i + 1]] {
                *item = *row;
            }
        }
    }
    items
}

/// A list or map column's items and their rows, whatever its offset width.
fn items_of(column: &dyn Array, rows: &RowsOf) -> Option<(arrow_array::ArrayRef, RowsOf)> {
    let (values, offsets): (_, Vec<usize>) = if let Some(list) = column.as_list_opt::<i32>() {
        let offsets = list.offsets().iter().map(|o| *o as usize).collect();
        (list.values().clone(), offsets)
    } else if let Some(list) = column.as_list_opt::<i64>() {
        let offsets = list.offsets().iter().map(|o| *o as usize).collect();
        (list.values().clone(), offsets)
    } else if let Some(map) = column.as_map_opt() {
        let offsets = map.offsets().iter().map(|o| *o as usize).collect();
        (
            Arc::new(map.entries().clone()) as arrow_array::ArrayRef,
            offsets,
        )
    } else {
        return None;
    };
    let items = rows_of_items(&offsets, |i| column.is_valid(i), rows);
    // The values of a sliced list start at its first offset.
    let first = offsets.first().copied().unwrap_or(0);
    let values = values.slice(first, items.len() - first);
    Some((values, items[first..].to_vec()))
}

/// The first row holding -0.0 where the encoder would leave it out: a float or double
/// field without presence inside a nested message (the top level's are written by
/// [`MinusZeros`]) or as a map's value. `prost-reflect` takes -0.0 for the default
/// there, and it reads back 0.0: such a row is refused, not changed.
fn dropped_minus_zero(
    message: &MessageDescriptor,
    values: &StructArray,
    rows: &RowsOf,
    path: &str,
    top: bool,
) -> Option<(String, usize)> {
    use prost_reflect::Kind;
    for (field, column) in values.fields().iter().zip(values.columns()) {
        let Some(proto) = message
            .get_field_by_name(field.name())
            .or_else(|| message.get_field_by_json_name(field.name()))
        else {
            continue;
        };
        let name = if path.is_empty() {
            field.name().clone()
        } else {
            format!("{path}.{}", field.name())
        };
        let rows: RowsOf = rows
            .iter()
            .enumerate()
            .map(|(i, r)| r.filter(|_| column.is_valid(i)))
            .collect();
        let found =
            match proto.kind() {
                Kind::Float | Kind::Double
                    if !top && !proto.is_list() && !proto.supports_presence() =>
                {
                    minus_zero_at(column.as_ref(), &rows).map(|row| (name, row))
                }
                Kind::Message(entry) if proto.is_map() => items_of(column.as_ref(), &rows)
                    .and_then(|(entries, items)| {
                        let values = entries.as_struct_opt()?.column(1).clone();
                        let values = values.as_ref();
                        match entry.map_entry_value_field().kind() {
                            Kind::Float | Kind::Double => {
                                minus_zero_at(values, &items).map(|row| (name.clone(), row))
                            }
                            Kind::Message(inner) => values.as_struct_opt().and_then(|v| {
                                dropped_minus_zero(&inner, v, &items, &format!("{name}[]"), false)
                            }),
                            _ => None,
                        }
                    }),
                Kind::Message(inner) if proto.is_list() => items_of(column.as_ref(), &rows)
                    .and_then(|(values, items)| {
                        dropped_minus_zero(
                            &inner,
                            values.as_struct_opt()?,
                            &items,
                            &format!("{name}[]"),
                            false,
                        )
                    }),
                Kind::Message(inner) => column
                    .as_struct_opt()
                    .and_then(|v| dropped_minus_zero(&inner, v, &rows, &name, false)),
                _ => None,
            };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The row of the first -0.0 of a float column among elements with a row.
fn minus_zero_at(column: &dyn Array, rows: &RowsOf) -> Option<usize> {
    let wide = arrow_cast::cast(column, &DataType::Float64).ok()?;
    let wide = wide.as_primitive::<arrow_array::types::Float64Type>();
    rows.iter().enumerate().find_map(|(i, row)| {
        let v = wide.value(i);
        (wide.is_valid(i) && v == 0.0 && v.is_sign_negative()).then_some(*row)?
    })
}

impl RowsEncoder for ProtobufEncoder {
    fn encode(&mut self, values: &StructArray) -> Result<BinaryArray> {
        let values = keys_as_text(values)?;
        let rows: RowsOf = (0..values.len()).map(Some).collect();
        if let Some((column, row)) = dropped_minus_zero(&self.message, &values, &rows, "", true) {
            return Err(Error::bad_input(format!(
                "encoding row {row} as {}: column '{column}' holds -0.0 in a float field \
                 without presence inside a message or as a map's value, which Protobuf's \
                 encoding leaves out as the default (it would read back 0.0); declare the \
                 field `optional` or write 0.0",
                self.message.full_name()
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
