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

/// A list-like column's values, and each element's row: the row of its list, or None
/// under a null list (or one outside every list).
fn items_of(column: &dyn Array, rows: &RowsOf) -> Option<(arrow_array::ArrayRef, RowsOf)> {
    // Each list's range of values.
    let (values, ranges): (arrow_array::ArrayRef, Vec<(usize, usize)>) =
        if let Some(list) = column.as_list_opt::<i32>() {
            let o = list.offsets();
            let ranges = o
                .windows(2)
                .map(|w| (w[0] as usize, w[1] as usize))
                .collect();
            (list.values().clone(), ranges)
        } else if let Some(list) = column.as_list_opt::<i64>() {
            let o = list.offsets();
            let ranges = o
                .windows(2)
                .map(|w| (w[0] as usize, w[1] as usize))
                .collect();
            (list.values().clone(), ranges)
        } else if let Some(list) = column.as_fixed_size_list_opt() {
            let n = list.value_length() as usize;
            let ranges = (0..list.len()).map(|i| (i * n, i * n + n)).collect();
            (list.values().clone(), ranges)
        } else if let Some(list) = column.as_list_view_opt::<i32>() {
            let ranges = (0..list.len())
                .map(|i| {
                    let start = list.value_offsets()[i] as usize;
                    (start, start + list.value_sizes()[i] as usize)
                })
                .collect();
            (list.values().clone(), ranges)
        } else if let Some(map) = column.as_map_opt() {
            let o = map.offsets();
            let ranges = o
                .windows(2)
                .map(|w| (w[0] as usize, w[1] as usize))
                .collect();
            (
                Arc::new(map.entries().clone()) as arrow_array::ArrayRef,
                ranges,
            )
        } else {
            return None;
        };
    let mut items = vec![None; values.len()];
    for (i, (row, (start, end))) in rows.iter().zip(ranges).enumerate() {
        if row.is_some() && column.is_valid(i) {
            for item in &mut items[start..end] {
                *item = *row;
            }
        }
    }
    Some((values, items))
}

/// A value the encoder would leave out of a payload: it is refused, not changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeftOut {
    /// -0.0 in a float or double field without presence inside a nested message (the
    /// top level's are written by [`MinusZeros`]) or as a map's value: `prost-reflect`
    /// takes it for the default there, and it reads back 0.0.
    MinusZero,
    /// A null as a map's value: a map entry holds a value, so the entry is left out.
    NullMapValue,
}

impl LeftOut {
    fn why(self) -> &'static str {
        match self {
            LeftOut::MinusZero => {
                "holds -0.0 in a float field without presence inside a message or as a \
                 map's value, which Protobuf's encoding leaves out as the default (it would \
                 read back 0.0); declare the field `optional` or write 0.0"
            }
            LeftOut::NullMapValue => {
                "holds a map entry whose value is null, which a Protobuf map cannot hold \
                 (the entry would be left out); give the entry a value or drop it"
            }
        }
    }
}

/// The first row holding a value the encoder would leave out ([`LeftOut`]), with
/// the column's path.
fn value_left_out(
    message: &MessageDescriptor,
    values: &StructArray,
    rows: &RowsOf,
    path: &str,
    top: bool,
) -> Option<(String, usize, LeftOut)> {
    use prost_reflect::Kind;
    // A null message (a list's item, a map's value) has no fields.
    let rows: RowsOf = rows
        .iter()
        .enumerate()
        .map(|(i, r)| r.filter(|_| values.is_valid(i)))
        .collect();
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
        let found = match proto.kind() {
            Kind::Float | Kind::Double
                if !top && !proto.is_list() && !proto.supports_presence() =>
            {
                minus_zero_at(column.as_ref(), &rows).map(|row| (name, row, LeftOut::MinusZero))
            }
            // A wrapper given as its bare value (protobuf's JSON mapping writes
            // `DoubleValue` and `FloatValue` as numbers): its `value` has no presence.
            Kind::Message(inner)
                if column.as_struct_opt().is_none()
                    && matches!(
                        inner.full_name(),
                        "google.protobuf.DoubleValue" | "google.protobuf.FloatValue"
                    ) =>
            {
                if proto.is_list() {
                    items_of(column.as_ref(), &rows).and_then(|(values, items)| {
                        minus_zero_at(values.as_ref(), &items)
                            .map(|row| (name.clone(), row, LeftOut::MinusZero))
                    })
                } else {
                    minus_zero_at(column.as_ref(), &rows).map(|row| (name, row, LeftOut::MinusZero))
                }
            }
            Kind::Message(entry) if proto.is_map() => {
                items_of(column.as_ref(), &rows).and_then(|(entries, items)| {
                    let values = entries.as_struct_opt()?.column(1).clone();
                    let values = values.as_ref();
                    let null_value = items
                        .iter()
                        .enumerate()
                        .find_map(|(i, row)| row.filter(|_| values.is_null(i)));
                    if let Some(row) = null_value {
                        return Some((name.clone(), row, LeftOut::NullMapValue));
                    }
                    match entry.map_entry_value_field().kind() {
                        Kind::Float | Kind::Double => minus_zero_at(values, &items)
                            .map(|row| (name.clone(), row, LeftOut::MinusZero)),
                        Kind::Message(inner) => values.as_struct_opt().and_then(|v| {
                            value_left_out(&inner, v, &items, &format!("{name}[]"), false)
                        }),
                        _ => None,
                    }
                })
            }
            Kind::Message(inner) if proto.is_list() => {
                items_of(column.as_ref(), &rows).and_then(|(values, items)| {
                    value_left_out(
                        &inner,
                        values.as_struct_opt()?,
                        &items,
                        &format!("{name}[]"),
                        false,
                    )
                })
            }
            Kind::Message(inner) => column
                .as_struct_opt()
                .and_then(|v| value_left_out(&inner, v, &rows, &name, false)),
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
    // Null values are not -0.0 (their slots may hold anything).
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
