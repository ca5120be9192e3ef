//! Protobuf payloads, by descriptor set and message name: `prost-reflect` reads each
//! payload into a dynamic message, and `arrow-json`'s decoder, fed the message as serde
//! values, builds the columns; a publish goes the other way through `arrow-json`'s
//! encoders and `prost-reflect`'s protobuf-JSON reader.
//!
//! The value's Arrow schema follows the message's fields, under their `.proto` names:
//! scalars by width and sign, `bytes` binary, enums by value name, nested messages
//! structs, `repeated` lists, `map<K, V>` maps. Every column allows nulls (a message
//! field that is not set, a field with explicit presence that is absent); a proto3
//! scalar without presence reads as its default when absent, as protobuf defines.

mod decode;
mod encode;
mod left_out;

use decode::ProtobufRows;
use encode::ProtobufEncoder;

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};

use super::{Format, RowsDecoder, RowsEncoder};
use crate::error::{Error, Result};

/// Protobuf's settings: a `FileDescriptorSet` (as `protoc --include_imports
/// --descriptor_set_out` writes it) holding the message and what it imports, and
/// the message's full name (`package.Message`). The value's Arrow schema is the
/// message's.
#[derive(Debug, Clone, Default)]
pub struct Protobuf {
    pub descriptor: Option<Vec<u8>>,
    pub message: Option<String>,
}

impl Format for Protobuf {
    fn decoder(&self, batch_rows: usize) -> Result<Box<dyn RowsDecoder>> {
        Ok(Box::new(ProtobufRows::new(self, batch_rows)?))
    }

    fn encoder(&self) -> Result<Box<dyn RowsEncoder>> {
        Ok(Box::new(ProtobufEncoder::new(self)?))
    }
}

/// The well-known type of an instant: a column of zoned timestamps (nanoseconds, UTC),
/// not a struct of `seconds` and `nanos`, as Spark's and every JSON mapping read it.
const TIMESTAMP: &str = "google.protobuf.Timestamp";

pub(super) fn bad_descriptor(e: impl std::fmt::Display) -> Error {
    Error::bad_option(
        "protobuf_descriptor",
        format!("option 'protobuf_descriptor': {e}"),
    )
}

/// The message the settings name, from their descriptor set.
fn message_descriptor(settings: &Protobuf) -> Result<MessageDescriptor> {
    let set = settings.descriptor.as_deref().ok_or_else(|| {
        bad_descriptor(
            "Protobuf values need a descriptor set (protoc --include_imports \
             --descriptor_set_out=FILE)",
        )
    })?;
    let name = settings.message.as_deref().ok_or_else(|| {
        Error::bad_input("option 'protobuf_message': Protobuf values need the message's full name")
    })?;
    let pool = DescriptorPool::decode(set).map_err(bad_descriptor)?;
    pool.get_message_by_name(name.trim_start_matches('.'))
        .ok_or_else(|| {
            let known: Vec<String> = pool
                .all_messages()
                .filter(|m| !m.is_map_entry())
                .map(|m| m.full_name().to_string())
                .take(20)
                .collect();
            Error::bad_input(format!(
                "option 'protobuf_message': the descriptor set has no message {name:?} \
                 (it has: {})",
                known.join(", ")
            ))
        })
}

/// The Arrow fields of `message`, refusing a message that contains itself (a column
/// type cannot nest without end).
fn arrow_fields(message: &MessageDescriptor, outer: &mut Vec<String>) -> Result<Fields> {
    if outer.iter().any(|m| m == message.full_name()) {
        return Err(Error::bad_input(format!(
            "option 'protobuf_message': {} contains itself ({} -> {}); a recursive message \
             has no column type",
            outer[0],
            outer.join(" -> "),
            message.full_name()
        )));
    }
    outer.push(message.full_name().to_string());
    let fields = message
        .fields()
        .map(|f| Ok(Field::new(f.name(), field_type(&f, outer)?, true)))
        .collect::<Result<Vec<_>>>()?;
    outer.pop();
    Ok(fields.into())
}

fn field_type(field: &FieldDescriptor, outer: &mut Vec<String>) -> Result<DataType> {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            unreachable!("a map field's kind is its entry message")
        };
        let key = kind_type(&entry.map_entry_key_field().kind(), outer)?;
        let value = kind_type(&entry.map_entry_value_field().kind(), outer)?;
        let entries = Field::new_struct(
            "entries",
            vec![
                Field::new("key", key, false),
                Field::new("value", value, true),
            ],
            false,
        );
        return Ok(DataType::Map(Arc::new(entries), false));
    }
    let item = kind_type(&field.kind(), outer)?;
    Ok(if field.is_list() {
        DataType::new_list(item, true)
    } else {
        item
    })
}

fn kind_type(kind: &Kind, outer: &mut Vec<String>) -> Result<DataType> {
    Ok(match kind {
        Kind::Double => DataType::Float64,
        Kind::Float => DataType::Float32,
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => DataType::Int32,
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => DataType::Int64,
        Kind::Uint32 | Kind::Fixed32 => DataType::UInt32,
        Kind::Uint64 | Kind::Fixed64 => DataType::UInt64,
        Kind::Bool => DataType::Boolean,
        Kind::String | Kind::Enum(_) => DataType::Utf8,
        Kind::Bytes => DataType::Binary,
        Kind::Message(m) if m.full_name() == TIMESTAMP => {
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
        }
        Kind::Message(m) => DataType::Struct(arrow_fields(m, outer)?),
    })
}

/// The value's Arrow schema for the settings' message.
fn value_schema(settings: &Protobuf) -> Result<SchemaRef> {
    let message = message_descriptor(settings)?;
    Ok(Arc::new(Schema::new(arrow_fields(
        &message,
        &mut Vec::new(),
    )?)))
}
