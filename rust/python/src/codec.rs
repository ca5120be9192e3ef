//! A `jetstream_arrow.ValueCodec` into the core's codec spec, read by attribute as
//! the options are.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::Schema;
use jetstream_arrow_core::codec::{
    AvroFraming, CodecSpec, OnMalformed, ValueDecoder, ValueEncoder, ValueFormat,
};
use jetstream_arrow_core::option_values::opt_count;
use jetstream_arrow_core::read::{resolve_value_schema, ReadOptions};
use jetstream_arrow_core::{Connection, Error};
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
}

/// The spec of `codec` (a `ValueCodec`, or None for payloads as bytes).
pub fn codec_spec(codec: Option<&Bound<'_, PyAny>>) -> GlueResult<Option<CodecSpec>> {
    let Some(codec) = codec.filter(|c| !c.is_none()) else {
        return Ok(None);
    };
    let a: CodecArgs = codec
        .extract()
        .map_err(|e| Error::bad_input(format!("value codec: {e}")))?;
    let mut spec = CodecSpec::new(ValueFormat::parse(&a.format)?);
    spec.schema = a.schema.map(PySchema::into_inner);
    if let Some(mode) = a.on_malformed.as_deref() {
        spec.on_malformed = OnMalformed::parse(mode)?;
    }
    spec.flatten = a.flatten.unwrap_or(false);
    spec.avro_schema = a.avro_schema;
    if let Some(framing) = a.avro_framing.as_deref() {
        spec.avro_framing = AvroFraming::parse(framing)?;
    }
    for (id, schema) in a.avro_schemas_by_id.unwrap_or_default() {
        let id = opt_count::<u32>(Some(id), "avro_schemas_by_id")?.expect("given");
        spec.avro_schemas_by_id.push((id, schema));
    }
    spec.avro_schemas_by_id.sort();
    spec.avro_schema_id = opt_count(a.avro_schema_id, "avro_schema_id")?;
    spec.protobuf_descriptor = a.protobuf_descriptor;
    spec.protobuf_message = a.protobuf_message;
    if let Some(n) = opt_count(a.sample_rows, "sample_rows")? {
        spec.sample_rows = n;
    }
    Ok(Some(spec))
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

/// `batch` with its value columns encoded by `codec` into a `data` column, as a
/// publish would send them: for tools that need the payloads before publishing.
#[pyfunction]
pub fn encode_values(batch: PyRecordBatch, codec: &Bound<'_, PyAny>) -> GlueResult<PyRecordBatch> {
    let spec = codec_spec(Some(codec))?.ok_or_else(|| Error::bad_input("no codec given"))?;
    let encoded = ValueEncoder::new(&spec)?.encode(&batch.into_inner())?;
    Ok(PyRecordBatch::new(encoded))
}
