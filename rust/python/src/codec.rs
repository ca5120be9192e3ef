//! A `jetstream_arrow.ValueCodec` into the core's codec spec, read by attribute as
//! the options are.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::Schema;
use jetstream_arrow_core::codec::settings::{
    ArrowSettings, AvroSettings, FormatSettings, JsonSettings, ProtobufSettings, SharedSettings,
};
use jetstream_arrow_core::codec::{
    malformed_reason, CodecSpec, ValueDecoder, ValueEncoder, ValueFormat,
};
use jetstream_arrow_core::options::values::count;
use jetstream_arrow_core::options::{Declared, OptionDecl};
use jetstream_arrow_core::read::{resolve_value_schema, ReadOptions};
use jetstream_arrow_core::{Connection, Error, ErrorKind};
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PySchema};

use crate::errors::GlueResult;
use crate::options::{check_fields, read_table};

/// Each format's own settings (see [`SharedSettings`] for what every format takes).
pub const FORMAT_TABLES: &[(ValueFormat, &[OptionDecl])] = &[
    (ValueFormat::Json, JsonSettings::TABLE),
    (ValueFormat::Avro, AvroSettings::TABLE),
    (ValueFormat::Arrow, ArrowSettings::TABLE),
    (ValueFormat::Protobuf, ProtobufSettings::TABLE),
];

/// The codec's fields that are no option values (an Arrow schema, a map of Avro
/// schemas), read beside the tables, and the formats that take each.
const VALUE_FIELDS: &[(&str, &[ValueFormat])] = &[
    ("schema", &[ValueFormat::Json, ValueFormat::Arrow]),
    ("avro_schemas_by_id", &[ValueFormat::Avro]),
];

/// The spec of `codec` (a `ValueCodec`, or None for payloads as bytes): its format's
/// settings read by their tables, a setting of another format refused.
pub fn codec_spec(codec: Option<&Bound<'_, PyAny>>) -> GlueResult<Option<CodecSpec>> {
    let Some(codec) = codec.filter(|c| !c.is_none()) else {
        return Ok(None);
    };
    let format: String = codec
        .getattr("format")?
        .extract()
        .map_err(|_| Error::bad_input("option 'format' must be a string"))?;
    let format = ValueFormat::parse(&format)?;
    let takes = takers();
    let mut known: Vec<&str> = vec!["format"];
    known.extend(SharedSettings::TABLE.iter().map(|d| d.name));
    known.extend(takes.iter().map(|(name, _)| *name));
    check_fields(codec, &known, "codec")?;
    refuse_settings_of_other_formats(codec, format, &takes)?;
    let settings = match format {
        ValueFormat::Json => FormatSettings::Json(read_table(codec)?),
        ValueFormat::Arrow => FormatSettings::Arrow(read_table(codec)?),
        ValueFormat::Avro => FormatSettings::Avro(read_table(codec)?),
        ValueFormat::Protobuf => FormatSettings::Protobuf(read_table(codec)?),
    };
    let schema: Option<PySchema> = codec.getattr("schema")?.extract().map_err(|_| {
        Error::bad_input("option 'schema' must be an Arrow schema (__arrow_c_schema__), or None")
    })?;
    let by_id: Option<HashMap<i128, String>> = codec
        .getattr("avro_schemas_by_id")?
        .extract()
        .map_err(|_| {
            Error::bad_input(
                "option 'avro_schemas_by_id' must map whole numbers to Avro schemas, or None",
            )
        })?;
    let mut schemas_by_id = Vec::new();
    for (id, schema) in by_id.unwrap_or_default() {
        schemas_by_id.push((count::<u32>(id, "avro_schemas_by_id")?, schema));
    }
    Ok(Some(CodecSpec::from_settings(
        read_table(codec)?,
        settings,
        schema.map(PySchema::into_inner),
        schemas_by_id,
    )))
}

/// Every setting some format takes, with the formats that take it.
fn takers() -> Vec<(&'static str, Vec<ValueFormat>)> {
    let mut takes: Vec<(&str, Vec<ValueFormat>)> = VALUE_FIELDS
        .iter()
        .map(|(name, formats)| (*name, formats.to_vec()))
        .collect();
    for (format, table) in FORMAT_TABLES {
        for decl in *table {
            match takes.iter_mut().find(|(name, _)| *name == decl.name) {
                Some((_, formats)) => formats.push(*format),
                None => takes.push((decl.name, vec![*format])),
            }
        }
    }
    takes
}

/// A setting given for another format than the codec's would be ignored: it is
/// refused instead, naming it and the format it is for.
fn refuse_settings_of_other_formats(
    codec: &Bound<'_, PyAny>,
    format: ValueFormat,
    takes: &[(&str, Vec<ValueFormat>)],
) -> GlueResult<()> {
    for (name, formats) in takes {
        if formats.contains(&format) || codec.getattr(*name)?.is_none() {
            continue;
        }
        let takers: Vec<&str> = formats.iter().map(|f| f.as_str()).collect();
        let instead = match format {
            ValueFormat::Avro => "; Avro values have the schema of option 'avro_schema'",
            ValueFormat::Protobuf => {
                "; Protobuf values have the schema of their message (options \
                 'protobuf_descriptor', 'protobuf_message')"
            }
            ValueFormat::Json | ValueFormat::Arrow => "",
        };
        return Err(Error::bad_option(
            name,
            format!(
                "option '{name}' is for format {} and the codec's format is {}{instead}",
                takers.join(" or "),
                format.as_str()
            ),
        )
        .into());
    }
    Ok(())
}

/// Each format's table as Python sees it: what every format shares, then its own.
pub fn format_tables() -> Vec<(&'static str, Vec<OptionDecl>)> {
    FORMAT_TABLES
        .iter()
        .map(|(format, table)| {
            let rows = SharedSettings::TABLE.iter().chain(table.iter()).copied();
            (format.as_str(), rows.collect())
        })
        .collect()
}

/// The codec spec of a consumer of `stream`: a schema not given is inferred from the
/// first messages of the stream (a consumer's own would be taken from it).
pub async fn resolve_consumer_codec(
    conn: &Connection,
    stream: &str,
    spec: Option<CodecSpec>,
) -> Result<Option<CodecSpec>, Error> {
    match spec {
        Some(spec) if spec.needs_inference() => Ok(Some(
            resolve_value_schema(conn, stream, &spec, ReadOptions::default()).await?,
        )),
        spec => Ok(spec),
    }
}

/// The Arrow schema `codec` decodes values into (given, or derived from its Avro
/// schema or Protobuf descriptor), without reading: for planners that declare a read's schema first.
#[pyfunction]
pub fn value_schema(codec: &Bound<'_, PyAny>) -> GlueResult<PySchema> {
    let spec = codec_spec(Some(codec))?.ok_or_else(|| Error::bad_input("no codec given"))?;
    let decoder = ValueDecoder::new(&spec, 1)?;
    Ok(PySchema::new(Arc::new(Schema::new(
        decoder.value_fields().clone(),
    ))))
}

/// The value schema `codec` (a JSON or Arrow codec given no schema) infers from
/// `payloads`, as a read infers it from the payloads it samples (the same core
/// code): for consumers that sample payloads themselves (a sink's work queue). None
/// when no payload holds a value to infer from (JSON: none is an object); a payload
/// that is None counts as empty. A codec given its schema, or of another format,
/// has its own schema.
#[pyfunction]
pub fn infer_value_schema(
    codec: &Bound<'_, PyAny>,
    payloads: Vec<Option<Vec<u8>>>,
) -> GlueResult<Option<PySchema>> {
    let spec = codec_spec(Some(codec))?.ok_or_else(|| Error::bad_input("no codec given"))?;
    let sample: Vec<&[u8]> = payloads
        .iter()
        .map(|p| p.as_deref().unwrap_or(&[]))
        .collect();
    let inferred = match spec.inferred(&sample) {
        Ok(spec) => spec,
        Err(e) if matches!(e.kind(), ErrorKind::NothingToInfer) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let decoder = ValueDecoder::new(&inferred, 1)?;
    Ok(Some(PySchema::new(Arc::new(Schema::new(
        decoder.value_fields().clone(),
    )))))
}

/// For each of the payloads a consumer sampled itself (`seqs` of `stream`), why it
/// holds no value a schema could be inferred from (JSON: it is not an object), in
/// the words of a read's `_corrupt_reason`; None for one that holds a value.
#[pyfunction]
pub fn no_value_reasons(
    codec: &Bound<'_, PyAny>,
    stream: &str,
    seqs: Vec<i64>,
    payloads: Vec<Option<Vec<u8>>>,
) -> GlueResult<Vec<Option<String>>> {
    let spec = codec_spec(Some(codec))?.ok_or_else(|| Error::bad_input("no codec given"))?;
    if seqs.len() != payloads.len() {
        return Err(Error::bad_input(format!(
            "{} sequences for {} payloads",
            seqs.len(),
            payloads.len()
        ))
        .into());
    }
    Ok(seqs
        .iter()
        .zip(&payloads)
        .map(|(seq, payload)| {
            let why = spec.no_value(payload.as_deref().unwrap_or(&[]))?;
            Some(malformed_reason(stream, *seq, spec.format(), &why))
        })
        .collect())
}

/// `batch` with its value columns encoded by `codec` into a `data` column, as a
/// publish would send them: for tools that need the payloads before publishing.
#[pyfunction]
pub fn encode_values(batch: PyRecordBatch, codec: &Bound<'_, PyAny>) -> GlueResult<PyRecordBatch> {
    let spec = codec_spec(Some(codec))?.ok_or_else(|| Error::bad_input("no codec given"))?;
    let encoded = ValueEncoder::new(&spec)?.encode(&batch.into_inner())?;
    Ok(PyRecordBatch::new(encoded))
}
