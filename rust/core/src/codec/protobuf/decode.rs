//! Protobuf payloads into rows: each payload a dynamic message, handed to
//! `arrow-json`'s decoder as serde values.

use arrow_array::StructArray;
use arrow_json::reader::Decoder;
use arrow_json::ReaderBuilder;
use arrow_schema::{Fields, SchemaRef};
use prost_reflect::{DynamicMessage, Kind, MapKey, MessageDescriptor, ReflectMessage, Value};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::{bad_descriptor, message_descriptor, value_schema, Protobuf, TIMESTAMP};
use crate::codec::{concat_rows, RowsDecoder};
use crate::error::Result;

/// A decoded message as the JSON-like values `arrow-json` builds columns from:
/// field names as in the `.proto`, enums by name, bytes as hex (how `arrow-json`
/// reads binary), 64-bit integers as numbers.
struct AsRow<'a>(&'a DynamicMessage);

impl Serialize for AsRow<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let message = self.0;
        let descriptor = message.descriptor();
        let mut map = s.serialize_map(Some(descriptor.fields().len()))?;
        for field in descriptor.fields() {
            let present = message.has_field(&field);
            let absent_is_null = field.supports_presence() && !field.is_list() && !field.is_map();
            if absent_is_null && !present {
                map.serialize_entry(field.name(), &None::<()>)?;
            } else {
                let kind = field.kind();
                map.serialize_entry(field.name(), &AsValue(&message.get_field(&field), &kind))?;
            }
        }
        map.end()
    }
}

struct AsValue<'a>(&'a Value, &'a Kind);

impl Serialize for AsValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0 {
            Value::Bool(v) => s.serialize_bool(*v),
            Value::I32(v) => s.serialize_i32(*v),
            Value::I64(v) => s.serialize_i64(*v),
            Value::U32(v) => s.serialize_u32(*v),
            Value::U64(v) => s.serialize_u64(*v),
            // Not-a-number and infinities have no JSON number: their names, which
            // `arrow-json` parses back into the float.
            Value::F32(v) if !v.is_finite() => s.serialize_str(&v.to_string()),
            Value::F64(v) if !v.is_finite() => s.serialize_str(&v.to_string()),
            Value::F32(v) => s.serialize_f32(*v),
            Value::F64(v) => s.serialize_f64(*v),
            Value::String(v) => s.serialize_str(v),
            Value::Bytes(v) => {
                let mut hex = String::with_capacity(v.len() * 2);
                for b in v.iter() {
                    hex.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
                    hex.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
                }
                s.serialize_str(&hex)
            }
            Value::EnumNumber(n) => match self.1 {
                // A number the producer's newer schema knows and ours does not
                // stays a number, as text, rather than being lost.
                Kind::Enum(e) => match e.get_value(*n) {
                    Some(v) => s.serialize_str(v.name()),
                    None => s.serialize_str(&n.to_string()),
                },
                _ => s.serialize_i32(*n),
            },
            Value::Message(m) if m.descriptor().full_name() == TIMESTAMP => {
                let field = |name: &str| m.get_field_by_name(name).map(|v| v.into_owned());
                let seconds = field("seconds").and_then(|v| v.as_i64()).unwrap_or(0);
                let nanos = field("nanos").and_then(|v| v.as_i32()).unwrap_or(0);
                let ns = seconds
                    .checked_mul(1_000_000_000)
                    .and_then(|n| n.checked_add(i64::from(nanos)))
                    .ok_or_else(|| {
                        serde::ser::Error::custom(format!(
                            "the timestamp {seconds}s {nanos}ns is outside the years 1677-2262 \
                             that nanoseconds since 1970 can hold"
                        ))
                    })?;
                s.serialize_i64(ns)
            }
            Value::Message(m) => AsRow(m).serialize(s),
            Value::List(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&AsValue(item, self.1))?;
                }
                seq.end()
            }
            Value::Map(entries) => {
                let value_kind = match self.1 {
                    Kind::Message(entry) => entry.map_entry_value_field().kind(),
                    other => other.clone(),
                };
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    let key = match key {
                        MapKey::Bool(k) => k.to_string(),
                        MapKey::I32(k) => k.to_string(),
                        MapKey::I64(k) => k.to_string(),
                        MapKey::U32(k) => k.to_string(),
                        MapKey::U64(k) => k.to_string(),
                        MapKey::String(k) => k.clone(),
                    };
                    map.serialize_entry(&key, &AsValue(value, &value_kind))?;
                }
                map.end()
            }
        }
    }
}

pub(super) struct ProtobufRows {
    message: MessageDescriptor,
    schema: SchemaRef,
    batch_rows: usize,
    decoder: Decoder,
}

impl ProtobufRows {
    pub fn new(settings: &Protobuf, batch_rows: usize) -> Result<Self> {
        let message = message_descriptor(settings)?;
        let schema = value_schema(settings)?;
        let decoder = Self::build(&schema, batch_rows)?;
        Ok(Self {
            message,
            schema,
            batch_rows,
            decoder,
        })
    }

    fn build(schema: &SchemaRef, batch_rows: usize) -> Result<Decoder> {
        ReaderBuilder::new(schema.clone())
            .with_batch_size(batch_rows)
            .build_decoder()
            .map_err(bad_descriptor)
    }
}

impl RowsDecoder for ProtobufRows {
    fn value_fields(&self) -> Fields {
        self.schema.fields().clone()
    }

    fn try_decode(
        &mut self,
        payloads: &[&[u8]],
    ) -> Result<(StructArray, Option<Vec<u32>>), String> {
        let mut parts: Vec<StructArray> = Vec::new();
        for chunk in payloads.chunks(self.batch_rows) {
            let messages = chunk
                .iter()
                .map(|p| DynamicMessage::decode(self.message.clone(), *p))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| format!("not a {} message: {e}", self.message.full_name()))?;
            let rows: Vec<AsRow<'_>> = messages.iter().map(AsRow).collect();
            self.decoder.serialize(&rows).map_err(|e| e.to_string())?;
            if let Some(batch) = self.decoder.flush().map_err(|e| e.to_string())? {
                parts.push(batch.into());
            }
        }
        let values = concat_rows(self.schema.fields(), parts)?;
        Ok((values, None))
    }

    fn reset(&mut self) -> Result<(), String> {
        self.decoder = Self::build(&self.schema, self.batch_rows).map_err(|e| e.to_string())?;
        Ok(())
    }
}
