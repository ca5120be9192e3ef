//! A value schema inferred from a sample of payloads, for reads given none.

use std::io::Cursor;
use std::sync::Arc;

use arrow_ipc::reader::StreamReader;
use arrow_schema::SchemaRef;

use super::ValueFormat;
use crate::error::{Error, Result};

/// The schema of `sample`'s payloads: for JSON, `arrow-json`'s inference over the
/// payloads that are JSON objects (others would fail the read later, by mode); for
/// Arrow, the first payload's own schema. Avro and Protobuf values carry no
/// inference: their schema is given.
pub fn infer_value_schema(format: ValueFormat, sample: &[&[u8]]) -> Result<SchemaRef> {
    let none = || {
        Error::bad_input(format!(
            "option 'schema': no schema was given and the {} messages sampled hold no {} \
             value to infer one from",
            sample.len(),
            format.as_str()
        ))
    };
    match format {
        ValueFormat::Json => {
            let objects: Vec<serde_json::Value> = sample
                .iter()
                .filter_map(|p| serde_json::from_slice::<serde_json::Value>(p).ok())
                .filter(serde_json::Value::is_object)
                .collect();
            if objects.is_empty() {
                return Err(none());
            }
            let schema =
                arrow_json::reader::infer_json_schema_from_iterator(objects.into_iter().map(Ok))
                    .map_err(|e| {
                        Error::bad_input(format!("inferring the JSON values' schema: {e}"))
                    })?;
            Ok(Arc::new(schema))
        }
        ValueFormat::Arrow => sample
            .iter()
            .find_map(|p| StreamReader::try_new(Cursor::new(p), None).ok())
            .map(|reader| reader.schema())
            .ok_or_else(none),
        ValueFormat::Avro => Err(Error::bad_input(
            "option 'avro_schema': Avro values are read with the schema they were written with",
        )),
        ValueFormat::Protobuf => Err(Error::bad_input(
            "option 'protobuf_descriptor': Protobuf values are read by their message's \
             descriptor",
        )),
    }
}
