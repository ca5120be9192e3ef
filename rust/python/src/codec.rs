//! A `jetstream_arrow.ValueCodec` into the core's codec spec, read by attribute as
//! the options are.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::Schema;
use jetstream_arrow_core::codec::{
    ArrowIpc, Avro, AvroFraming, Codec, CodecSpec, Json, OnMalformed, OnNewField, Protobuf,
    ValueDecoder, ValueEncoder, ValueFormat,
};
use jetstream_arrow_core::options::values::opt_count;
use jetstream_arrow_core::read::{resolve_value_schema, ReadOptions};
use jetstream_arrow_core::{Connection, Error, ErrorKind};
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PySchema};

use crate::errors::GlueResult;

#[derive(FromPyObject)]
struct CodecArgs {
    #[pyo3(attribute)]
    format: String,
    #[pyo3(attribute)]
    schema: Option<PySchema>,
    #[pyo3(attribute)]
    on_malformed: Option<String>,
    #[pyo3(attribute)]
    flatten: Option<bool>,
    #[pyo3(attribute)]
    avro_schema: Option<String>,
    #[pyo3(attribute)]
    avro_framing: Option<String>,
    #[pyo3(attribute)]
    avro_schemas_by_id: Option<HashMap<i128, String>>,
    #[pyo3(attribute)]
    avro_schema_id: Option<i128>,
    #[pyo3(attribute)]
    protobuf_descriptor: Option<Vec<u8>>,
    #[pyo3(attribute)]
    protobuf_message: Option<String>,
    #[pyo3(attribute)]
    sample_rows: Option<i128>,
    #[pyo3(attribute)]
    on_new_field: Option<String>,
}

/// The spec of `codec` (a `ValueCodec`, or None for payloads as bytes).
pub fn codec_spec(codec: Option<&Bound<'_, PyAny>>) -> GlueResult<Option<CodecSpec>> {
    let Some(codec) = codec.filter(|c| !c.is_none()) else {
        return Ok(None);
    };
    let a: CodecArgs = codec
        .extract()
        .map_err(|e| Error::bad_input(format!("value codec: {e}")))?;
    let format = ValueFormat::parse(&a.format)?;
    refuse_settings_of_other_formats(&a, format)?;
    let on_malformed = a
        .on_malformed
        .as_deref()
        .map(OnMalformed::parse)
        .transpose()?;
    let flatten = a.flatten.unwrap_or(false);
    let sample_rows = opt_count(a.sample_rows, "sample_rows")?;
    let on_new_field = a
        .on_new_field
        .as_deref()
        .map(OnNewField::parse)
        .transpose()?;
    let mut spec = CodecSpec::new(format_settings(a, format)?);
    spec.flatten = flatten;
    if let Some(mode) = on_malformed {
        spec.on_malformed = mode;
    }
    if let Some(n) = sample_rows {
        spec.sample_rows = n;
    }
    if let Some(on_new_field) = on_new_field {
        spec.on_new_field = on_new_field;
    }
    Ok(Some(spec))
}

/// The settings of `format` that `a` gives.
fn format_settings(a: CodecArgs, format: ValueFormat) -> GlueResult<Codec> {
    Ok(match format {
        ValueFormat::Json => Codec::Json(Json {
            schema: a.schema.map(PySchema::into_inner),
        }),
        ValueFormat::Arrow => Codec::Arrow(ArrowIpc {
            schema: a.schema.map(PySchema::into_inner),
        }),
        ValueFormat::Avro => {
            let mut avro = Avro {
                schema: a.avro_schema,
                schema_id: opt_count(a.avro_schema_id, "avro_schema_id")?,
                ..Avro::default()
            };
            if let Some(framing) = a.avro_framing.as_deref() {
                avro.framing = AvroFraming::parse(framing)?;
            }
            for (id, schema) in a.avro_schemas_by_id.unwrap_or_default() {
                let id = opt_count::<u32>(Some(id), "avro_schemas_by_id")?.expect("given");
                avro.schemas_by_id.push((id, schema));
            }
            avro.schemas_by_id.sort();
            Codec::Avro(avro)
        }
        ValueFormat::Protobuf => Codec::Protobuf(Protobuf {
            descriptor: a.protobuf_descriptor,
            message: a.protobuf_message,
        }),
    })
}

/// A setting given for another format than the codec's would be ignored: it is
/// refused instead, naming it and the format it is for.
fn refuse_settings_of_other_formats(a: &CodecArgs, format: ValueFormat) -> GlueResult<()> {
    use ValueFormat::{Arrow, Avro, Json, Protobuf};
    let given: [(&str, bool, &[ValueFormat]); 9] = [
        ("schema", a.schema.is_some(), &[Json, Arrow]),
        // It sizes the sample a schema is inferred from, which only these formats do.
        ("sample_rows", a.sample_rows.is_some(), &[Json, Arrow]),
        // The other formats' payloads carry no field their schema lacks.
        ("on_new_field", a.on_new_field.is_some(), &[Json]),
        ("avro_schema", a.avro_schema.is_some(), &[Avro]),
        ("avro_framing", a.avro_framing.is_some(), &[Avro]),
        (
            "avro_schemas_by_id",
            a.avro_schemas_by_id.is_some(),
            &[Avro],
        ),
        ("avro_schema_id", a.avro_schema_id.is_some(), &[Avro]),
        (
            "protobuf_descriptor",
            a.protobuf_descriptor.is_some(),
            &[Protobuf],
        ),
        (
            "protobuf_message",
            a.protobuf_message.is_some(),
            &[Protobuf],
        ),
    ];
    for (name, is_given, formats) in given {
        if is_given && !formats.contains(&format) {
            let takes: Vec<&str> = formats.iter().map(|f| f.as_str()).collect();
            let instead = match format {
                Avro => "; Avro values have the schema of option 'avro_schema'",
                Protobuf => {
                    "; Protobuf values have the schema of their message (options \
                     'protobuf_descriptor', 'protobuf_message')"
                }
                Json | Arrow => "",
            };
            return Err(Error::bad_input(format!(
                "option '{name}' is for format {} and the codec's format is {}{instead}",
                takes.join(" or "),
                format.as_str()
            ))
            .into());
        }
    }
    Ok(())
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

/// `batch` with its value columns encoded by `codec` into a `data` column, as a
/// publish would send them: for tools that need the payloads before publishing.
#[pyfunction]
pub fn encode_values(batch: PyRecordBatch, codec: &Bound<'_, PyAny>) -> GlueResult<PyRecordBatch> {
    let spec = codec_spec(Some(codec))?.ok_or_else(|| Error::bad_input("no codec given"))?;
    let encoded = ValueEncoder::new(&spec)?.encode(&batch.into_inner())?;
    Ok(PyRecordBatch::new(encoded))
}
