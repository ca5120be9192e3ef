//! Typed payloads: each message's payload decoded into Arrow columns as a batch is
//! finished, and a table's columns encoded into one payload per row before a publish.
//!
//! The formats ([`ValueFormat`]) are each a well-kept crate's: `arrow-json`,
//! `arrow-avro` (raw datums, single-object encoding, the Confluent wire format),
//! `arrow-ipc` (an IPC stream per message, which may hold many rows) and
//! `prost-reflect` (Protobuf by descriptor set and message name). Each format is one
//! module implementing `Format` for its own settings, one variant of [`Codec`].
//! This module holds what is common to them: the spec a call gives ([`CodecSpec`]),
//! where the decoded values go in a batch ([`ValueDecoder`]), and what happens to a
//! payload that does not fit ([`OnMalformed`], Spark's JSON reader's modes and
//! meanings).
//!
//! A batch is decoded in one pass; only a batch holding a bad payload is decoded
//! again payload by payload, to name or set aside the bad ones.

mod avro;
mod decode;
mod encode;
mod ipc;
mod json;
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

pub use decode::{malformed_reason, ValueDecoder};
pub use encode::ValueEncoder;

use decode::RowsDecoder;
use encode::RowsEncoder;

/// The column holding decoded payloads (as a struct) when not flattened.
pub const VALUE: &str = "value";
/// The column holding the raw bytes of payloads that did not decode (`permissive`).
pub const CORRUPT_RECORD: &str = "_corrupt_record";
/// The column holding, beside `_corrupt_record`, why each of those payloads did not
/// decode: the decoder's own words, as mode `failfast` would have raised them.
pub const CORRUPT_REASON: &str = "_corrupt_reason";

/// Columns of publish input that steer a message (where it goes, its id, its
/// checks): never a value's, whatever else the table holds. So is a `ttl` column of
/// durations ([`crate::arrow::schema::is_ttl_column`]).
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
    CORRUPT_REASON,
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
    CORRUPT_REASON,
];

pub mod settings;

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
    /// A null value, the payload's bytes in `_corrupt_record` and why it did not
    /// decode in `_corrupt_reason`.
    Permissive,
    /// Leave the message out, and count it.
    DropMalformed,
}

named_choices!(OnMalformed, "on_malformed", {
    FailFast => "failfast",
    Permissive => "permissive",
    DropMalformed => "dropmalformed",
});

/// What a JSON payload holding a field the value's schema lacks does. A schema
/// inferred from a sample lacks the fields first seen after it; `arrow-json` skips a
/// field its schema lacks, and a field null in every sampled payload is typed null.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnNewField {
    /// The field is left out (a value where the schema has only nulls is malformed).
    Ignore,
    /// The batch fails with an [`crate::ErrorKind::NewField`] error naming the
    /// message's sequence and the field, whatever `on_malformed` says: the caller
    /// grows its schema and reads on from that message (the lake sink does).
    Fail,
}

named_choices!(OnNewField, "on_new_field", {
    Ignore => "ignore",
    Fail => "fail",
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

/// What a format is: each format's module implements it for its own settings
/// (a variant of [`Codec`]), so adding a format is one module and one variant.
trait Format {
    /// A decoder of payloads into rows, for batches of about `batch_rows` messages.
    fn decoder(&self, batch_rows: usize) -> Result<Box<dyn RowsDecoder>>;
    /// An encoder of rows into payloads, one each.
    fn encoder(&self) -> Result<Box<dyn RowsEncoder>>;
    /// Whether a read must infer the value's schema from the stream before
    /// decoding: only where the settings lack it and the payloads show it.
    fn needs_inference(&self) -> bool {
        false
    }
    /// Fills in the value schema `sample`'s payloads show (called only when
    /// [`Self::needs_inference`]).
    fn infer(&mut self, _sample: &[&[u8]]) -> Result<()> {
        Ok(())
    }
    /// Why `payload` shows no value to infer a schema from (JSON: it is not an
    /// object), in the decoder's words; None when it shows one, or the format infers
    /// nothing.
    fn no_value(&self, _payload: &[u8]) -> Option<String> {
        None
    }
}

/// A payload format with the settings only it takes.
#[derive(Debug, Clone)]
pub enum Codec {
    Json(json::Json),
    Avro(avro::Avro),
    Protobuf(protobuf::Protobuf),
    /// An Arrow IPC stream per message: any number of rows in one payload.
    Arrow(ipc::ArrowIpc),
}

pub use avro::Avro;
pub use ipc::ArrowIpc;
pub use json::Json;
pub use protobuf::Protobuf;

impl Codec {
    /// `format` with its settings by default.
    pub fn new(format: ValueFormat) -> Self {
        match format {
            ValueFormat::Json => Self::Json(Json::default()),
            ValueFormat::Avro => Self::Avro(Avro::default()),
            ValueFormat::Protobuf => Self::Protobuf(Protobuf::default()),
            ValueFormat::Arrow => Self::Arrow(ArrowIpc::default()),
        }
    }

    /// The format's name.
    pub fn format(&self) -> ValueFormat {
        match self {
            Self::Json(_) => ValueFormat::Json,
            Self::Avro(_) => ValueFormat::Avro,
            Self::Protobuf(_) => ValueFormat::Protobuf,
            Self::Arrow(_) => ValueFormat::Arrow,
        }
    }

    fn as_format(&self) -> &dyn Format {
        match self {
            Self::Json(f) => f,
            Self::Avro(f) => f,
            Self::Protobuf(f) => f,
            Self::Arrow(f) => f,
        }
    }

    fn as_format_mut(&mut self) -> &mut dyn Format {
        match self {
            Self::Json(f) => f,
            Self::Avro(f) => f,
            Self::Protobuf(f) => f,
            Self::Arrow(f) => f,
        }
    }
}

/// A codec as a call gives it: the format with its settings, and what every
/// format shares.
#[derive(Debug, Clone)]
pub struct CodecSpec {
    pub codec: Codec,
    pub on_malformed: OnMalformed,
    /// The value's fields as top-level columns instead of one struct column `value`.
    pub flatten: bool,
    /// Messages sampled to infer a schema when none is given.
    pub sample_rows: usize,
    /// A JSON payload's field the schema lacks: left out, or an error.
    pub on_new_field: OnNewField,
}

impl CodecSpec {
    pub fn new(codec: Codec) -> Self {
        Self {
            codec,
            on_malformed: OnMalformed::parse(crate::defaults::ON_MALFORMED).expect("a known mode"),
            flatten: false,
            sample_rows: crate::defaults::VALUE_SAMPLE_ROWS,
            on_new_field: OnNewField::parse(crate::defaults::ON_NEW_FIELD).expect("a known mode"),
        }
    }

    pub fn format(&self) -> ValueFormat {
        self.codec.format()
    }

    /// Whether decoding needs a schema inferred from the stream first: Avro and
    /// Protobuf values carry theirs in the schema or descriptor given.
    pub fn needs_inference(&self) -> bool {
        self.codec.as_format().needs_inference()
    }

    /// Why `payload` shows no value a schema could be inferred from (see
    /// [`Self::inferred`]), in the decoder's words; None when it shows one.
    pub fn no_value(&self, payload: &[u8]) -> Option<String> {
        self.codec.as_format().no_value(payload)
    }

    /// This spec with the value schema `sample`'s payloads show filled in, where
    /// [`Self::needs_inference`].
    pub fn inferred(&self, sample: &[&[u8]]) -> Result<Self> {
        let mut spec = self.clone();
        if spec.needs_inference() {
            spec.codec.as_format_mut().infer(sample)?;
        }
        Ok(spec)
    }

    fn decoder(&self, batch_rows: usize) -> Result<Box<dyn RowsDecoder>> {
        match &self.codec {
            Codec::Json(json) => json.rows(batch_rows, self.on_new_field == OnNewField::Fail),
            other => other.as_format().decoder(batch_rows),
        }
    }

    fn encoder(&self) -> Result<Box<dyn RowsEncoder>> {
        self.codec.as_format().encoder()
    }
}

/// The value schema a format that is given its schema (JSON, Arrow) needs to `what`.
fn schema_required(
    schema: &Option<SchemaRef>,
    format: ValueFormat,
    what: &str,
) -> Result<SchemaRef> {
    schema.clone().ok_or_else(|| {
        Error::bad_input(format!(
            "option 'schema': {what} {} values needs their schema",
            format.as_str()
        ))
    })
}

/// What a sample of payloads lacking a value to infer a schema from is told.
fn nothing_to_infer_from(format: ValueFormat, sampled: usize) -> Error {
    Error::new(
        crate::error::ErrorKind::NothingToInfer,
        format!(
            "option 'schema': no schema was given and the {sampled} messages sampled hold \
             no {} value to infer one from",
            format.as_str()
        ),
    )
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
