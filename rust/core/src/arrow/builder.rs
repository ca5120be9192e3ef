//! Building Arrow record batches straight from delivered NATS messages, column by
//! column, with no intermediate rows; payloads decoded into typed columns when a
//! codec is given (by a [`PayloadDecoder`]: the codec's, which names the formats
//! this module does not); a payload marked `Content-Encoding` decompressed as it is
//! appended ([`crate::compression`]). The `data` column is built by
//! [`crate::arrow::payloads`].
//!
//! Every read path and consumer appends its messages here, so this is where the
//! messages of exactly-once writers' positions (subjects under
//! [`POSITION_SUBJECT_PREFIX`], or holding it after a `.`: [`is_position`]) are left out, unless the read asks for them: they
//! are the writers' bookkeeping, not the stream's data.
//!
//! One module: appending a message is one step (decompress, then every column of
//! its row, its headers without the encoding it no longer has), and its tests build
//! batches through that step.

use std::sync::Arc;

use arrow_array::builder::{
    DurationSecondBuilder, Int64Builder, ListBuilder, MapBuilder, MapFieldNames, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::api::subjects::POSITION_SUBJECT_PREFIX;
use crate::arrow::metadata::MessageMetadata;
use crate::arrow::payloads::Payloads;
use crate::arrow::schema::{message_schema, SchemaOptions, DATA};
use crate::arrow::ttl::parse_stored;
use crate::compression::{self, Compression, Decompression, Failure};
use crate::error::Result;

type HeadersBuilder = MapBuilder<StringBuilder, ListBuilder<StringBuilder>>;

/// What the builder asks of the decoder that turns `data` into value columns as a
/// batch is finished (the codec's `ValueDecoder` is the one). A trait, so that the
/// messages' columns are built here without naming a payload format, and the codec
/// builds on the message schema, not the other way round.
pub trait PayloadDecoder: Send {
    /// The schema of decoded batches, from the message schema.
    fn schema(&self, message: &Schema) -> SchemaRef;
    /// Whether a payload that does not decode is a row the batch keeps or drops
    /// (`permissive`, `dropmalformed`), rather than an error (`failfast`).
    fn tolerates_malformed(&self) -> bool;
    /// Row `row` of the batch being built is malformed whatever its bytes (`why`:
    /// it does not decompress), as a payload that does not decode is.
    fn mark_malformed(&mut self, row: usize, why: String);
    /// Forgets the rows marked malformed: the batch they were of is dropped.
    fn clear_marked(&mut self);
    /// Payloads that did not decode, so far.
    fn malformed(&self) -> u64;
    /// For each row of the last decoded batch, the index of its message, or None
    /// when row `i` is message `i`.
    fn last_origins(&self) -> Option<&[u32]>;
    /// The batch with its `data` column decoded. `stream` names the stream in errors.
    fn decode(&mut self, stream: &str, batch: RecordBatch) -> Result<RecordBatch>;
}

/// Accumulates messages into the columns of the message schema.
pub struct BatchBuilder {
    schema: SchemaRef,
    stream: String,
    subject: StringBuilder,
    seq: Int64Builder,
    timestamp: TimestampMicrosecondBuilder,
    headers: Option<HeadersBuilder>,
    ttl: Option<DurationSecondBuilder>,
    data: Payloads,
    delivered: Option<Int64Builder>,
    consumer_seq: Option<Int64Builder>,
    rows: usize,
    data_bytes: usize,
    /// Decodes `data` into value columns as each batch is finished.
    values: Option<Box<dyn PayloadDecoder>>,
    /// Whether and how far compressed payloads are decompressed.
    decompression: Decompression,
    /// Whether writers' position messages become rows (else they are left out).
    include_positions: bool,
}

/// Whether `subject` is an exactly-once writer's position: under
/// [`POSITION_SUBJECT_PREFIX`], or holding it after a `.` (`agg.$JA.POS.<stream>.<w>`),
/// as a stream that sources (or mirrors into) another with a subject transform
/// prefixing a token stores it. Made for every message, so it is cheap: one compare
/// of the first bytes, then one scan for `$` (which ordinary subjects seldom hold)
/// and a compare where one follows a `.`; no allocation. The subject decides, not the
/// `Ja-Writer` header the positions carry: a header lookup hashes a name per
/// message, every read path has the subject (a `headers` column is optional), and
/// an application's own message may carry any header. A transform that reorders
/// the tokens (`$JA.POS.*.*` to `x.{{wildcard(2)}}`) hides a position from this
/// test; a transform that keeps its tokens in order does not.
pub fn is_position(subject: &str) -> bool {
    let s = subject.as_bytes();
    let p = POSITION_SUBJECT_PREFIX.as_bytes();
    if s.starts_with(p) {
        return true;
    }
    s.iter()
        .enumerate()
        .skip(1)
        .any(|(i, &b)| b == b'$' && s[i - 1] == b'.' && s[i..].starts_with(p))
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
            ttl: options.include_ttl.then(DurationSecondBuilder::new),
            data: Payloads::new(options.payload_views),
            delivered: options.consumer_columns.then(Int64Builder::new),
            consumer_seq: options.consumer_columns.then(Int64Builder::new),
            rows: 0,
            data_bytes: 0,
            values: None,
            decompression: Decompression::default(),
            include_positions: false,
        }
    }

    /// Writers' position messages as rows too (`include_positions`); by default
    /// [`Self::append`] leaves them out.
    pub fn with_positions(mut self, include_positions: bool) -> Self {
        self.include_positions = include_positions;
        self
    }

    /// Compressed payloads decompressed (or not) as `decompression` says (the
    /// connection's `decompress` and `max_decompressed_bytes`).
    pub fn with_decompression(mut self, decompression: Decompression) -> Self {
        self.decompression = decompression;
        self
    }

    /// Batches with their payloads decoded by `values`.
    pub fn with_values<D: PayloadDecoder + 'static>(mut self, values: Option<D>) -> Self {
        if values.is_some() && !self.data.views() {
            self.schema = self.schema_with_views();
            self.data = Payloads::new(true);
        }
        self.values = values.map(|v| Box::new(v) as Box<dyn PayloadDecoder>);
        self
    }

    /// The message schema with `data` as `binary_view`.
    fn schema_with_views(&self) -> SchemaRef {
        let fields = self.schema.fields().iter().map(|f| {
            if f.name() == DATA {
                Arc::new(f.as_ref().clone().with_data_type(DataType::BinaryView))
            } else {
                f.clone()
            }
        });
        Arc::new(arrow_schema::Schema::new(fields.collect::<Vec<_>>()))
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
        self.values
            .as_deref()
            .and_then(PayloadDecoder::last_origins)
    }

    /// Payloads that did not decode, so far.
    pub fn malformed(&self) -> u64 {
        self.values.as_deref().map_or(0, PayloadDecoder::malformed)
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

    /// Appends `message`. A payload marked compressed (`Content-Encoding`) is
    /// decompressed first (unless decompression is off), and its `headers` row then
    /// leaves that header out: the row holds the payload plain, and a copy of it
    /// stores it plain. One that decompresses past the limit is an error naming its
    /// seq; one that does not
    /// decompress is malformed (an error naming its seq, or the codec's
    /// `permissive`/`dropmalformed` row, its stored bytes as `_corrupt_record`, its
    /// header kept). Nothing is appended when it fails.
    ///
    /// False when `message` is a writer's position and the builder leaves those out:
    /// no row, nothing decoded. The caller still counts it as read (a range read owes
    /// its sequence) and a consumer acknowledges it, so it is not delivered again.
    pub fn append(
        &mut self,
        message: &async_nats::Message,
        meta: &MessageMetadata,
    ) -> Result<bool> {
        if !self.include_positions && is_position(&message.subject) {
            return Ok(false);
        }
        let limit = self.decompression.max_payload;
        let compressed = match self.decompression.enabled {
            true => Compression::of(message.headers.as_ref()),
            false => None,
        };
        let decompressed = match compressed {
            None => None,
            Some(c) => match c.decompress(&message.payload, limit) {
                Ok(payload) => Some(bytes::Bytes::from(payload)),
                Err(Failure::TooLarge) => {
                    return Err(compression::too_large(
                        &self.stream,
                        meta.stream_seq,
                        c,
                        limit,
                    ));
                }
                Err(Failure::Corrupt(why)) => match &mut self.values {
                    Some(values) if values.tolerates_malformed() => {
                        // Its reason is the error mode `failfast` gives.
                        let failfast = compression::corrupt(&self.stream, meta.stream_seq, c, &why);
                        values.mark_malformed(self.rows, failfast.message().to_string());
                        None
                    }
                    _ => return Err(compression::corrupt(&self.stream, meta.stream_seq, c, &why)),
                },
            },
        };
        let payload = decompressed.as_ref().unwrap_or(&message.payload);
        self.subject.append_value(message.subject.as_str());
        self.seq.append_value(meta.stream_seq as i64);
        self.timestamp
            .append_value(meta.timestamp_ns.div_euclid(1000));
        self.data.append(payload);
        self.data_bytes += payload.len();
        if let Some(h) = &mut self.headers {
            match &message.headers {
                Some(map) if !map.is_empty() => {
                    // The client keeps headers in a hash map, whose order changes
                    // from message to message: sorted by name, the same message
                    // always reads the same.
                    let mut entries: Vec<_> = map
                        .iter()
                        // Only the header this read decompressed by (its exact name,
                        // as `compression::encoding` reads it): a `content-encoding`
                        // of another spelling still describes the payload.
                        .filter(|(name, _)| {
                            decompressed.is_none()
                                || AsRef::<str>::as_ref(*name) != compression::HEADER
                        })
                        .collect();
                    if entries.is_empty() {
                        h.append(false).expect("a null map is always valid");
                    } else {
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
                }
                _ => h.append(false).expect("a null map is always valid"),
            }
        }
        if let Some(t) = &mut self.ttl {
            let ttl = message
                .headers
                .as_ref()
                .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_TTL))
                .and_then(|v| parse_stored(v.as_str()).column_value());
            t.append_option(ttl);
        }
        if let (Some(d), Some(c)) = (&mut self.delivered, &mut self.consumer_seq) {
            d.append_value(meta.delivered as i64);
            c.append_value(meta.consumer_seq as i64);
        }
        self.rows += 1;
        Ok(true)
    }

    /// Drops the rows so far: the builder starts over empty, as after `finish`.
    pub fn clear(&mut self) {
        let mut values = self.values.take();
        if let Some(v) = &mut values {
            v.clear_marked();
        }
        let _ = self.finish();
        self.values = values;
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
        if let Some(t) = &mut self.ttl {
            columns.push(Arc::new(t.finish()));
        }
        columns.push(self.data.finish());
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
    use crate::arrow::payloads::VIEW_FROM;
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
                include_ttl: false,
                consumer_columns: true,
                payload_views: false,
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
        b.append(&msg("a.b", b"xy", Some(h)), &meta).unwrap();
        b.append(
            &msg("a.c", b"", None),
            &MessageMetadata {
                stream_seq: 6,
                ..meta
            },
        )
        .unwrap();
        let batch = b.finish().unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(
            batch.schema(),
            message_schema(SchemaOptions {
                include_headers: true,
                include_ttl: false,
                consumer_columns: true,
                payload_views: false,
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

    #[test]
    fn writers_positions_are_left_out_unless_asked_for() {
        let meta = |seq| MessageMetadata {
            delivered: 1,
            stream_seq: seq,
            consumer_seq: seq,
            timestamp_ns: 0,
            pending: 0,
        };
        let messages = [
            msg("data.a", b"1", None),
            msg("$JA.POS.S.w1", b"{}", None),
            // Only the exact prefix marks a position.
            msg("$JA.POSX.S.w1", b"2", None),
            msg("$JA.pos.S.w1", b"3", None),
            msg("data.b", b"4", None),
        ];
        for (include, kept, bytes) in [
            (false, vec![1i64, 3, 4, 5], 4),
            (true, vec![1, 2, 3, 4, 5], 6),
        ] {
            let mut b = BatchBuilder::new("S", SchemaOptions::default()).with_positions(include);
            let appended: Vec<bool> = messages
                .iter()
                .zip(1u64..)
                .map(|(m, seq)| b.append(m, &meta(seq)).unwrap())
                .collect();
            let want: Vec<bool> = (1..=5).map(|seq| kept.contains(&seq)).collect();
            assert_eq!(appended, want);
            assert_eq!((b.len(), b.data_bytes()), (kept.len(), bytes));
            let batch = b.finish().unwrap();
            let seq = batch
                .column_by_name("seq")
                .unwrap()
                .as_primitive::<arrow_array::types::Int64Type>();
            assert_eq!(seq.values().to_vec(), kept);
        }
        assert!(is_position("$JA.POS.S.abc") && !is_position("$JA.PO"));
    }

    #[test]
    fn positions_sourced_under_a_transform_that_prefixes_a_token_are_positions() {
        for subject in [
            "$JA.POS.S.abc",
            "agg.$JA.POS.S.abc",
            "a.b.$JA.POS.S.abc",
            "x.$JA.POSY.$JA.POS.S.w",
        ] {
            assert!(is_position(subject), "{subject}");
        }
        for subject in [
            "",
            "$",
            "agg.$JA.POS",
            "agg$JA.POS.S.abc",
            "agg.x$JA.POS.S.abc",
            "agg.$JA.POSX.S.abc",
            "agg.$JA.pos.S.abc",
            "orders.$JA.PO",
            "$JA.PO.$JA",
        ] {
            assert!(!is_position(subject), "{subject}");
        }
        // A read leaves the transformed one out too.
        let meta = MessageMetadata {
            delivered: 1,
            stream_seq: 1,
            consumer_seq: 1,
            timestamp_ns: 0,
            pending: 0,
        };
        let mut b = BatchBuilder::new("AGG", SchemaOptions::default());
        assert!(!b
            .append(&msg("agg.$JA.POS.S.w", b"{}", None), &meta)
            .unwrap());
        assert!(b.append(&msg("agg.S.rows", b"r", None), &meta).unwrap());
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn views_hold_each_payload_with_short_ones_copied_into_one_exact_block() {
        let options = SchemaOptions {
            payload_views: true,
            ..SchemaOptions::default()
        };
        let mut b = BatchBuilder::new("S", options);
        // Sizes alternate around the inline limit and VIEW_FROM, every byte different.
        let sizes = [
            0,
            12,
            13,
            4096,
            100,
            VIEW_FROM - 1,
            VIEW_FROM,
            5,
            70_000,
            2047,
        ];
        let payloads: Vec<bytes::Bytes> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| ((i * 31 + j) % 251) as u8).collect())
            .collect();
        for (i, p) in payloads.iter().enumerate() {
            let mut m = msg("a.b", b"", None);
            m.payload = p.clone();
            let meta = MessageMetadata {
                delivered: 1,
                stream_seq: i as u64 + 1,
                consumer_seq: i as u64 + 1,
                timestamp_ns: 0,
                pending: 0,
            };
            b.append(&m, &meta).unwrap();
        }
        let batch = b.finish().unwrap();
        let data = batch.column_by_name("data").unwrap().as_binary_view();
        let got: Vec<&[u8]> = data.iter().map(Option::unwrap).collect();
        let want: Vec<&[u8]> = payloads.iter().map(|p| p.as_ref()).collect();
        assert_eq!(got, want);
        let copied: usize = sizes.iter().filter(|&&n| n > 12 && n < VIEW_FROM).sum();
        let viewed = sizes.iter().filter(|&&n| n >= VIEW_FROM).count();
        assert_eq!(data.data_buffers().len(), 1 + viewed);
        assert_eq!(data.data_buffers()[0].len(), copied);
        // A viewed payload's block is the very buffer it arrived in.
        let big = payloads.iter().find(|p| p.len() == 70_000).unwrap();
        assert!(data
            .data_buffers()
            .iter()
            .any(|buf| buf.as_ptr() == big.as_ptr()));
    }
}
