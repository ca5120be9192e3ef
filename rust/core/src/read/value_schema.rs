//! A codec's value schema inferred from a sample of the stream, when it is not given.

use arrow_array::cast::AsArray;
use arrow_array::{Array, MapArray};

use crate::arrow::schema::{message_schema, SchemaOptions, DATA, HEADERS};
use crate::codec::{CodecSpec, ValueDecoder};
use crate::compression::{self, Compression};
use crate::connection::Connection;
use crate::error::Result;
use crate::read::{ReadOptions, StreamReader};

/// The decoder of `read`'s payloads into its `values` columns (None without them),
/// beside the message columns of `schema_options`, for batches of up to its
/// `batch_rows` rows. The value schema is as given or inferred
/// ([`resolve_value_schema`]) from a sample of the rows the read will decode: its
/// range, subjects and positions.
pub async fn value_decoder(
    conn: &Connection,
    stream: &str,
    read: &ReadOptions,
    schema_options: SchemaOptions,
) -> Result<Option<ValueDecoder>> {
    let Some(spec) = &read.values else {
        return Ok(None);
    };
    let sample = ReadOptions {
        start_seq: read.start_seq,
        end_seq: read.end_seq,
        subjects: read.subjects.clone(),
        start_time: read.start_time,
        end_time: read.end_time,
        include_positions: read.include_positions,
        ..ReadOptions::default()
    };
    let spec = resolve_value_schema(conn, stream, spec, sample).await?;
    let decoder = ValueDecoder::new(&spec, read.batch_rows)?;
    Ok(Some(decoder.beside(&message_schema(schema_options))?))
}

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
        include_headers: true,
        ..sample
    };
    // The sample decompresses its payloads itself: one that does not decompress is
    // left out of it, as a malformed payload is left out of what the schema is
    // inferred from, for the read (and its `on_malformed`) to meet.
    let mut raw = conn.clone();
    raw.decompression.enabled = false;
    let decompression = conn.decompression;
    let mut reader = Box::pin(StreamReader::open(raw, stream, options)).await?;
    let mut payloads: Vec<bytes::Bytes> = Vec::new();
    while payloads.len() < want {
        let Some(batch) = Box::pin(reader.next_batch()).await? else {
            break;
        };
        let data = batch
            .column_by_name(DATA)
            .expect("message batches have a data column");
        let data = data.as_binary::<i32>();
        let headers = batch
            .column_by_name(HEADERS)
            .expect("the sample reads headers")
            .as_map();
        for row in 0..batch.num_rows() {
            if payloads.len() == want {
                break;
            }
            let payload = if data.is_valid(row) {
                data.value(row)
            } else {
                &[]
            };
            let encoding = decompression
                .enabled
                .then(|| encoding_of(headers, row))
                .flatten();
            match encoding {
                None => payloads.push(bytes::Bytes::copy_from_slice(payload)),
                Some(c) => {
                    if let Ok(plain) = c.decompress(payload, decompression.max_payload) {
                        payloads.push(bytes::Bytes::from(plain));
                    }
                }
            }
        }
    }
    reader.finish().await;
    let sample: Vec<&[u8]> = payloads.iter().map(|p| p.as_ref()).collect();
    spec.inferred(&sample)
        .map_err(|e| e.context(format!("stream {stream:?}")))
}

/// The compression row `row`'s headers name (`Content-Encoding`, as a read goes by it).
fn encoding_of(headers: &MapArray, row: usize) -> Option<Compression> {
    if headers.is_null(row) {
        return None;
    }
    let entries = headers.value(row);
    let names = entries.column(0).as_string::<i32>();
    let values = entries.column(1).as_list::<i32>();
    (0..entries.len())
        .find(|&i| names.value(i) == compression::HEADER)
        .and_then(|i| {
            let given = values.value(i);
            let given = given.as_string::<i32>();
            (!given.is_empty()).then(|| Compression::from_header(given.value(0)))?
        })
}
