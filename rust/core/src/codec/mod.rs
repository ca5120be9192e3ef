//! Typed payloads: each message's payload decoded into Arrow columns as a batch is
//! finished, and a table's columns encoded into one payload per row before a publish.
//!
//! The formats ([`ValueFormat`]) are each a well-kept crate's: `arrow-json`,
//! `arrow-avro` (raw datums, single-object encoding, the Confluent wire format),
//! `arrow-ipc` (an IPC stream per message, which may hold many rows) and
//! `prost-reflect` (Protobuf by descriptor set and message name). This module
//! holds what is common to them: the spec a call gives ([`CodecSpec`]), where the
//! decoded values go in a batch ([`ValueDecoder`]), and what happens to a payload
//! that does not fit ([`OnMalformed`], Spark's JSON reader's modes and meanings).
//!
//! A batch is decoded in one pass; only a batch holding a bad payload is decoded
//! again payload by payload, to name or set aside the bad ones.

mod avro;
mod decode;
mod encode;
mod infer;
mod ipc;
mod json;
mod json_tokens;
mod protobuf;
#[cfg(test)]
mod tests;

use arrow_array::cast::AsArray;
use arrow_array::{Array, BinaryArray, StructArray};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{Fields, SchemaRef};

use crate::arrow::schema::{
    CONSUMER_SEQ, DATA, DELIVERED, EXPECTED_LAST_MSG_ID, EXPECTED_LAST_SUBJECT_SEQ, HEADERS,
    MSG_ID, SEQ, STREAM, SUBJECT, TIMESTAMP,
};
use crate::error::{Error, Result};

pub use decode::ValueDecoder;
pub use encode::ValueEncoder;
pub use infer::infer_value_schema;

use decode::RowsDecoder;
use encode::RowsEncoder;

/// The column holding decoded payloads (as a struct) when not flattened.
pub const VALUE: &str = "value";
/// The column holding the raw bytes of payloads that did not decode (`permissive`).
pub const CORRUPT_RECORD: &str = "_corrupt_record";

/// Columns of publish input that steer a message (where it goes, its id, its
/// checks): never a value's, whatever else the table holds.
pub const PUBLISH_COLUMNS: &[&str] = &[
    SUBJECT,
    HEADERS,
    DATA,
    MSG_ID,
    EXPECTED_LAST_SUBJECT_SEQ,
    EXPECTED_LAST_MSG_ID,
];

/// Columns a read adds beside the value: a value's only in a table that is not a
/// read (see [`crate::arrow::schema::is_read`]); in a read being copied they describe the source message.
pub const READ_COLUMNS: &[&str] = &[
    STREAM,
    SEQ,
    TIMESTAMP,
    DELIVERED,
    CONSUMER_SEQ,
    CORRUPT_RECORD,
];

/// Every column of the message schema: a decoded value's field may not take one of
/// these names when flattened beside them.
pub const MESSAGE_COLUMNS: &[&str] = &[
    STREAM,
    SUBJECT,
    SEQ,
    TIMESTAMP,
    HEADERS,
    DATA,
    MSG_ID,
    EXPECTED_LAST_SUBJECT_SEQ,
    EXPECTED_LAST_MSG_ID,
    DELIVERED,
    CONSUMER_SEQ,
    CORRUPT_RECORD,
];

/// An option's closed set of names: `parse` (any case, with aliases), `as_str` and
/// `NAMES`, the one place each name is spelled.
macro_rules! named_choices {
    ($ty:ident, $option:literal, { $($variant:ident => $name:literal $(| $alias:literal)*),+ $(,)? }) => {
        impl $ty {
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            pub fn parse(name: &str) -> Result<Self> {
                match name.to_ascii_lowercase().as_str() {
                    $($name $(| $alias)* => Ok(Self::$variant),)+
                    _ => Err(Error::bad_input(format!(
                        "option '{}' ({name:?}) must be one of {}",
                        $option,
                        Self::NAMES.join(", ")
                    ))),
                }
            }

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }
        }
    };
}

/// How payloads are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueFormat {
    Json,
    Avro,
    /// An Arrow IPC stream per message: any number of rows in one payload.
    Arrow,
    /// One Protobuf message per payload, read by a descriptor set.
    Protobuf,
}

named_choices!(ValueFormat, "format", {
    Json => "json",
    Avro => "avro",
    Arrow => "arrow",
    Protobuf => "protobuf" | "proto",
});

/// What a payload that does not decode does (Spark's JSON reader's `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMalformed {
    /// Stop with an error naming the stream, the sequence and the field.
    FailFast,
    /// A null value and the payload's bytes in `_corrupt_record`.
    Permissive,
    /// Leave the message out, and count it.
    DropMalformed,
}

named_choices!(OnMalformed, "on_malformed", {
    FailFast => "failfast",
    Permissive => "permissive",
    DropMalformed => "dropmalformed",
});

/// How each Avro payload is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AvroFraming {
    /// The datum alone: every payload written with the one schema given.
    Raw,
    /// Avro's single-object encoding: `C3 01` and the schema's Rabin fingerprint.
    SingleObject,
    /// The Confluent wire format: a zero byte and a 4-byte schema id.
    Confluent,
}

named_choices!(AvroFraming, "avro_framing", {
    Raw => "raw",
    SingleObject => "single-object" | "single_object" | "soe",
    Confluent => "confluent",
});

/// A codec as a call gives it.
#[derive(Debug, Clone)]
pub struct CodecSpec {
    pub format: ValueFormat,
    /// The value's Arrow schema. Required to encode; for decoding JSON and Arrow it
    /// may be inferred from the stream first ([`infer_value_schema`]); Avro derives
    /// it from the Avro schema.
    pub schema: Option<SchemaRef>,
    pub on_malformed: OnMalformed,
    /// The value's fields as top-level columns instead of one struct column `value`.
    pub flatten: bool,
    /// The Avro schema (JSON) values are read as and written with.
    pub avro_schema: Option<String>,
    pub avro_framing: AvroFraming,
    /// Confluent framing: the writers' schemas by id.
    pub avro_schemas_by_id: Vec<(u32, String)>,
    /// Confluent framing: the id a publish frames its payloads with.
    pub avro_schema_id: Option<u32>,
    /// Protobuf: a `FileDescriptorSet` (as `protoc --include_imports
    /// --descriptor_set_out` writes it) holding the message and what it imports.
    pub protobuf_descriptor: Option<Vec<u8>>,
    /// Protobuf: the message's full name (`package.Message`).
    pub protobuf_message: Option<String>,
    /// Messages sampled to infer a schema when none is given.
    pub sample_rows: usize,
}

impl CodecSpec {
    pub fn new(format: ValueFormat) -> Self {
        Self {
            format,
            schema: None,
            on_malformed: OnMalformed::parse(crate::defaults::ON_MALFORMED).expect("a known mode"),
            flatten: false,
            avro_schema: None,
            avro_framing: AvroFraming::parse(crate::defaults::AVRO_FRAMING)
                .expect("a known framing"),
            avro_schemas_by_id: Vec::new(),
            avro_schema_id: None,
            protobuf_descriptor: None,
            protobuf_message: None,
            sample_rows: crate::defaults::VALUE_SAMPLE_ROWS,
        }
    }

    /// Whether decoding needs a schema inferred from the stream first: Avro and
    /// Protobuf values carry theirs in the schema or descriptor given.
    pub fn needs_inference(&self) -> bool {
        self.schema.is_none() && matches!(self.format, ValueFormat::Json | ValueFormat::Arrow)
    }

    fn schema_required(&self, what: &str) -> Result<SchemaRef> {
        self.schema.clone().ok_or_else(|| {
            Error::bad_input(format!(
                "option 'schema': {what} {} values needs their schema",
                self.format.as_str()
            ))
        })
    }
}

/// The rows of a streaming decoder's flushes as one struct of `fields`.
fn concat_rows(fields: &Fields, mut parts: Vec<StructArray>) -> Result<StructArray, String> {
    match parts.len() {
        0 => Ok(StructArray::new_null(fields.clone(), 0)),
        1 => Ok(parts.pop().expect("one part")),
        _ => {
            let arrays: Vec<&dyn Array> = parts.iter().map(|p| p as &dyn Array).collect();
            let all = arrow_select::concat::concat(&arrays).map_err(|e| e.to_string())?;
            Ok(all.as_struct().clone())
        }
    }
}

/// Offsets past `i32::MAX` do not fit a binary column: one batch's payloads stay
/// under 2 GiB.
fn binary_from_parts(bytes: Vec<u8>, offsets: Vec<usize>) -> Result<BinaryArray> {
    let offsets: Vec<i32> = offsets
        .into_iter()
        .map(i32::try_from)
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| {
            Error::bad_input("a batch's encoded payloads pass 2 GiB: send smaller batches")
        })?;
    Ok(BinaryArray::new(
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        Buffer::from_vec(bytes),
        None,
    ))
}
