//! A codec's value schema inferred from a sample of the stream, when it is not given.

use crate::codec::{infer_value_schema, CodecSpec};
use crate::connection::Connection;
use crate::error::Result;
use crate::read::{ReadOptions, StreamReader};

/// `spec` with its value schema: as given, or inferred from the first
/// `spec.sample_rows` messages that `sample` (a range, subjects) reads.
pub async fn resolve_value_schema(
    conn: &Connection,
    stream: &str,
    spec: &CodecSpec,
    sample: ReadOptions,
) -> Result<CodecSpec> {
    if !spec.needs_inference() {
        return Ok(spec.clone());
    }
    let want = spec.sample_rows.max(1);
    let options = ReadOptions {
        batch_rows: want,
        values: None,
        ..sample
    };
    let mut reader = Box::pin(StreamReader::open(conn.clone(), stream, options)).await?;
    let mut payloads: Vec<bytes::Bytes> = Vec::new();
    while payloads.len() < want {
        let Some(batch) = Box::pin(reader.next_batch()).await? else {
            break;
        };
        let data = batch
            .column_by_name(crate::arrow::schema::DATA)
            .expect("message batches have a data column");
        let data = arrow_array::cast::AsArray::as_binary::<i32>(data.as_ref());
        payloads.extend(
            data.iter()
                .take(want - payloads.len())
                .map(|p| bytes::Bytes::copy_from_slice(p.unwrap_or_default())),
        );
    }
    reader.finish().await;
    let sample: Vec<&[u8]> = payloads.iter().map(|p| p.as_ref()).collect();
    let schema = infer_value_schema(spec.format, &sample)
        .map_err(|e| e.context(format!("stream {stream:?}")))?;
    Ok(CodecSpec {
        schema: Some(schema),
        ..spec.clone()
    })
}
