//! Building Arrow record batches straight from delivered NATS messages, column by
//! column, with no intermediate rows; payloads decoded into typed columns when a
//! codec is given.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Int64Builder, ListBuilder, MapBuilder, MapFieldNames, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, SchemaRef};

use crate::arrow::metadata::MessageMetadata;
use crate::arrow::schema::{message_schema, SchemaOptions};
use crate::codec::ValueDecoder;
use crate::error::Result;

type HeadersBuilder = MapBuilder<StringBuilder, ListBuilder<StringBuilder>>;

/// Accumulates messages into the columns of the message schema.
pub struct BatchBuilder {
    schema: SchemaRef,
    stream: String,
    subject: StringBuilder,
    seq: Int64Builder,
    timestamp: TimestampMicrosecondBuilder,
    headers: Option<HeadersBuilder>,
    data: BinaryBuilder,
    delivered: Option<Int64Builder>,
    consumer_seq: Option<Int64Builder>,
    rows: usize,
    data_bytes: usize,
    /// Decodes `data` into value columns as each batch is finished.
    values: Option<ValueDecoder>,
}

fn headers_builder() -> HeadersBuilder {
    let names = MapFieldNames {
        entry: "entries".into(),
        key: "key".into(),
        value: "value".into(),
    };
    MapBuilder::new(
        Some(names),
        StringBuilder::new(),
        ListBuilder::new(StringBuilder::new()),
    )
    .with_values_field(Arc::new(Field::new(
        "value",
        DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
        true,
    )))
}

impl BatchBuilder {
    pub fn new(stream: &str, options: SchemaOptions) -> Self {
        Self {
            schema: message_schema(options),
            stream: stream.to_string(),
            subject: StringBuilder::new(),
            seq: Int64Builder::new(),
            timestamp: TimestampMicrosecondBuilder::new().with_timezone("UTC"),
            headers: options.include_headers.then(headers_builder),
            data: BinaryBuilder::new(),
            delivered: options.consumer_columns.then(Int64Builder::new),
            consumer_seq: options.consumer_columns.then(Int64Builder::new),
            rows: 0,
            data_bytes: 0,
            values: None,
        }
    }

    /// Batches with their payloads decoded by `values`.
    pub fn with_values(mut self, values: Option<ValueDecoder>) -> Self {
        self.values = values;
        self
    }

    /// The schema of finished batches.
    pub fn schema(&self) -> SchemaRef {
        match &self.values {
            Some(values) => values.schema(&self.schema),
            None => self.schema.clone(),
        }
    }

    /// For each row of the last finished batch, the index of the message it came
    /// from, when row `i` is not message `i` (malformed messages dropped, or Arrow
    /// payloads of several rows).
    pub fn last_origins(&self) -> Option<&[u32]> {
        self.values.as_ref().and_then(ValueDecoder::last_origins)
    }

    /// Payloads that did not decode, so far.
    pub fn malformed(&self) -> u64 {
        self.values.as_ref().map_or(0, ValueDecoder::malformed)
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Payload bytes held so far.
    pub fn data_bytes(&self) -> usize {
        self.data_bytes
    }

    pub fn append(&mut self, message: &async_nats::Message, meta: &MessageMetadata) {
        self.subject.append_value(message.subject.as_str());
        self.seq.append_value(meta.stream_seq as i64);
        self.timestamp
            .append_value(meta.timestamp_ns.div_euclid(1000));
        self.data.append_value(&message.payload);
        self.data_bytes += message.payload.len();
        if let Some(h) = &mut self.headers {
            match &message.headers {
                Some(map) if !map.is_empty() => {
                    // The client keeps headers in a hash map, whose order changes
                    // from message to message: sorted by name, the same message
                    // always reads the same.
                    let mut entries: Vec<_> = map.iter().collect();
                    entries.sort_unstable_by(|a, b| {
                        AsRef::<str>::as_ref(a.0).cmp(AsRef::<str>::as_ref(b.0))
                    });
                    for (name, values) in entries {
                        h.keys().append_value(AsRef::<str>::as_ref(name));
                        let list = h.values();
                        for v in values {
                            list.values().append_value(v.as_str());
                        }
                        list.append(true);
                    }
                    h.append(true)
                        .expect("keys and values were appended together");
                }
                _ => h.append(false).expect("a null map is always valid"),
            }
        }
        if let (Some(d), Some(c)) = (&mut self.delivered, &mut self.consumer_seq) {
            d.append_value(meta.delivered as i64);
            c.append_value(meta.consumer_seq as i64);
        }
        self.rows += 1;
    }

    /// The rows so far as one batch, payloads decoded if a codec is given; the
    /// builder starts over empty. A payload that does not decode (mode `failfast`)
    /// fails the batch, naming its message.
    pub fn finish(&mut self) -> Result<RecordBatch> {
        let n = self.rows;
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                self.stream.as_str(),
                n,
            ))),
            Arc::new(self.subject.finish()),
            Arc::new(self.seq.finish()),
            Arc::new(self.timestamp.finish()),
        ];
        if let Some(h) = &mut self.headers {
            columns.push(Arc::new(h.finish()));
        }
        columns.push(Arc::new(self.data.finish()));
        if let (Some(d), Some(c)) = (&mut self.delivered, &mut self.consumer_seq) {
            columns.push(Arc::new(d.finish()));
            columns.push(Arc::new(c.finish()));
        }
        self.rows = 0;
        self.data_bytes = 0;
        let batch = RecordBatch::try_new(self.schema.clone(), columns)
            .expect("builders match the message schema");
        match &mut self.values {
            Some(values) => values.decode(&self.stream, batch),
            None => Ok(batch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    use async_nats::{HeaderMap, Subject};

    fn msg(
        subject: &'static str,
        payload: &'static [u8],
        headers: Option<HeaderMap>,
    ) -> async_nats::Message {
        async_nats::Message {
            subject: Subject::from_static(subject),
            reply: None,
            payload: bytes::Bytes::from_static(payload),
            headers,
            status: None,
            description: None,
            length: 0,
        }
    }

    #[test]
    fn builds_the_message_schema_with_headers_and_consumer_columns() {
        let mut b = BatchBuilder::new(
            "S",
            SchemaOptions {
                include_headers: true,
                consumer_columns: true,
            },
        );
        let mut h = HeaderMap::new();
        h.append("k", "v1");
        h.append("k", "v2");
        let meta = MessageMetadata {
            delivered: 1,
            stream_seq: 5,
            consumer_seq: 2,
            timestamp_ns: 1_500,
            pending: 0,
        };
        b.append(&msg("a.b", b"xy", Some(h)), &meta);
        b.append(
            &msg("a.c", b"", None),
            &MessageMetadata {
                stream_seq: 6,
                ..meta
            },
        );
        let batch = b.finish().unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(
            batch.schema(),
            message_schema(SchemaOptions {
                include_headers: true,
                consumer_columns: true
            })
        );
        let seq = batch
            .column_by_name("seq")
            .unwrap()
            .as_primitive::<arrow_array::types::Int64Type>();
        assert_eq!(seq.values().to_vec(), vec![5, 6]);
        let headers = batch.column_by_name("headers").unwrap().as_map();
        assert!(headers.is_valid(0) && headers.is_null(1));
        let ts = batch
            .column_by_name("timestamp")
            .unwrap()
            .as_primitive::<arrow_array::types::TimestampMicrosecondType>();
        assert_eq!(ts.value(0), 1);
        assert!(b.is_empty());
    }
}
