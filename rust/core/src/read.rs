//! Replaying a range of a stream in sequence order as Arrow batches.
//!
//! Mechanism: an ephemeral pull consumer with AckNone (nothing to acknowledge, in
//! order, filtered by the server), kept fed by the pull loop. It is deleted when the
//! read ends or is closed, and has an inactivity threshold in case the process dies,
//! so a read leaves no state on the server.

use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::api::subjects;
use crate::api::types::{
    AckPolicy, ConsumerConfig, ConsumerInfo, CreateConsumer, DeliverPolicy, StreamInfo,
};
use crate::batch_builder::BatchBuilder;
use crate::connection::Connection;
use crate::defaults;
use crate::error::{Error, Result};
use crate::pull::{PullLoop, PullSettings, MAX_BUFFERED_MESSAGES};
use crate::schema::SchemaOptions;

/// What to read. Sequences are inclusive; times are nanoseconds since the epoch.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    pub start_seq: Option<u64>,
    /// Default: the stream's last sequence when the read starts.
    pub end_seq: Option<u64>,
    pub subjects: Vec<String>,
    pub start_time_ns: Option<i64>,
    pub end_time_ns: Option<i64>,
    pub include_headers: bool,
    pub batch_rows: usize,
    /// Payload bytes per output batch and per pull request, at most.
    pub max_bytes: usize,
    pub heartbeat: Duration,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            start_seq: None,
            end_seq: None,
            subjects: Vec::new(),
            start_time_ns: None,
            end_time_ns: None,
            include_headers: false,
            batch_rows: defaults::READ_BATCH_ROWS,
            max_bytes: defaults::READ_MAX_BYTES,
            heartbeat: defaults::HEARTBEAT,
        }
    }
}

/// An open read: yields batches until the end of the range.
pub struct StreamReader {
    conn: Connection,
    stream: String,
    consumer: Option<String>,
    pull: Option<PullLoop>,
    builder: BatchBuilder,
    end_seq: u64,
    end_time_ns: Option<i64>,
    batch_rows: usize,
    max_bytes: usize,
    done: bool,
    /// A message that did not fit the previous batch's byte budget.
    carry: Option<crate::pull::Delivered>,
    /// Where `Drop` deletes the consumer of a read that was abandoned.
    runtime: tokio::runtime::Handle,
    /// The consumer sequence of the last delivery. An AckNone consumer delivers
    /// each message once with consecutive consumer sequences, so a hole means the
    /// client lost messages: that must fail the read, never shorten it silently.
    last_consumer_seq: u64,
}

fn start_time(ns: i64) -> Result<time::OffsetDateTime> {
    time::OffsetDateTime::from_unix_timestamp_nanos(ns as i128)
        .map_err(|e| Error::bad_input(format!("option 'start_time': {e}")))
}

impl StreamReader {
    pub async fn open(conn: Connection, stream: &str, options: ReadOptions) -> Result<Self> {
        if options.batch_rows == 0 {
            return Err(Error::bad_input("option 'batch_rows' must be at least 1"));
        }
        if options.max_bytes == 0 {
            return Err(Error::bad_input("option 'max_bytes' must be at least 1"));
        }
        if options.start_seq == Some(0) {
            return Err(Error::bad_input(
                "option 'start_seq': stream sequences start at 1",
            ));
        }
        if options.start_seq.is_some() && options.start_time_ns.is_some() {
            return Err(Error::bad_input(
                "options 'start_seq' and 'start_time' exclude each other",
            ));
        }
        let schema_options = SchemaOptions {
            include_headers: options.include_headers,
            consumer_columns: false,
        };
        let info: StreamInfo = conn
            .api_get(&subjects::stream_info(stream))
            .await
            .map_err(|e| e.context(format!("reading stream {stream:?}")))?;
        let end_seq = options.end_seq.unwrap_or(info.state.last_sequence);
        let start = options
            .start_seq
            .unwrap_or(1)
            .max(info.state.first_sequence);
        let mut reader = Self {
            builder: BatchBuilder::new(stream, schema_options),
            conn: conn.clone(),
            stream: stream.to_string(),
            consumer: None,
            pull: None,
            end_seq,
            end_time_ns: options.end_time_ns,
            batch_rows: options.batch_rows,
            max_bytes: options.max_bytes,
            done: info.state.messages == 0 || end_seq < start,
            carry: None,
            runtime: tokio::runtime::Handle::current(),
            last_consumer_seq: 0,
        };
        if reader.done {
            return Ok(reader);
        }

        let deliver_policy = match (options.start_seq, options.start_time_ns) {
            (Some(seq), _) => DeliverPolicy::ByStartSequence {
                start_sequence: seq,
            },
            (None, Some(ns)) => DeliverPolicy::ByStartTime {
                start_time: start_time(ns)?,
            },
            (None, None) => DeliverPolicy::All,
        };
        let (filter_subject, filter_subjects) = match options.subjects.as_slice() {
            [one] => (one.clone(), Vec::new()),
            many => (String::new(), many.to_vec()),
        };
        let config = ConsumerConfig {
            deliver_policy,
            ack_policy: AckPolicy::None,
            memory_storage: true,
            num_replicas: 1,
            // A safety net: the consumer goes away by itself if this process dies.
            inactive_threshold: Duration::from_secs(300),
            filter_subject,
            filter_subjects,
            ..Default::default()
        };
        let created: ConsumerInfo = conn
            .api_json(
                &subjects::consumer_create(stream),
                &CreateConsumer {
                    stream_name: stream,
                    config: &config,
                },
            )
            .await
            .map_err(|e| e.context(format!("starting a read of stream {stream:?}")))?;
        reader.consumer = Some(created.name.clone());
        if created.num_pending == 0 {
            reader.finish().await;
            return Ok(reader);
        }
        let max_messages = (options.batch_rows * 2).clamp(1024, MAX_BUFFERED_MESSAGES);
        let settings = PullSettings::new(
            max_messages,
            Some(options.max_bytes.saturating_mul(2)),
            Duration::from_secs(30).max(options.heartbeat * 4),
            Some(options.heartbeat),
        );
        reader.pull = Some(PullLoop::new(conn, stream, &created.name, settings).await?);
        Ok(reader)
    }

    pub fn schema(&self) -> SchemaRef {
        self.builder.schema()
    }

    /// The next batch, or None at the end of the range. A batch holds at most
    /// `batch_rows` rows and `max_bytes` payload bytes (or one larger message).
    pub async fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if let Some(carried) = self.carry.take() {
            self.builder.append(&carried.message, &carried.meta);
        }
        while !self.done && self.builder.len() < self.batch_rows {
            let pull = self.pull.as_mut().expect("an open read has a pull loop");
            let Some(delivered) = pull.next(None).await? else {
                continue;
            };
            let meta = delivered.meta;
            if meta.consumer_seq != self.last_consumer_seq + 1 {
                let expected = self.last_consumer_seq + 1;
                self.finish().await;
                return Err(Error::connection(format!(
                    "read of stream {:?}: deliveries {expected}..{} were lost on the way to this \
                     client (consumer sequence jumped); the read stopped instead of returning \
                     an incomplete range",
                    self.stream,
                    meta.consumer_seq - 1
                )));
            }
            self.last_consumer_seq = meta.consumer_seq;
            let past_time = self.end_time_ns.is_some_and(|end| meta.timestamp_ns > end);
            if meta.stream_seq > self.end_seq || past_time {
                self.finish().await;
                break;
            }
            let last = meta.stream_seq >= self.end_seq || meta.pending == 0;
            if last {
                self.finish().await;
            }
            let size = delivered.message.payload.len();
            if !self.builder.is_empty() && self.builder.data_bytes() + size > self.max_bytes {
                self.carry = Some(delivered);
                break;
            }
            self.builder.append(&delivered.message, &meta);
        }
        if self.builder.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.builder.finish()))
    }

    /// Stop reading and delete the consumer (best effort; the inactivity
    /// threshold removes it otherwise).
    pub async fn finish(&mut self) {
        self.done = true;
        self.pull = None;
        if let Some(name) = self.consumer.take() {
            let subject = subjects::consumer_delete(&self.stream, &name);
            let _ = self
                .conn
                .api_request(&subject, bytes::Bytes::new(), None)
                .await;
        }
    }
}

impl Drop for StreamReader {
    fn drop(&mut self) {
        // An abandoned read (closed early, garbage-collected, interrupted) still
        // removes its consumer; the inactivity threshold is the last resort.
        if let Some(name) = self.consumer.take() {
            let conn = self.conn.clone();
            let subject = subjects::consumer_delete(&self.stream, &name);
            self.runtime.spawn(async move {
                let _ = conn.api_request(&subject, bytes::Bytes::new(), None).await;
            });
        }
    }
}
