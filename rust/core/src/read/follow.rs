//! The open-ended read ([`OrderedStream`]): every message from the start, then every
//! new one, exactly once and in order.

use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::api::validate_name;
use crate::arrow::builder::BatchBuilder;
use crate::arrow::metadata::Delivered;
use crate::arrow::schema::SchemaOptions;
use crate::codec::CodecSpec;
use crate::connection::Connection;
use crate::defaults;
use crate::error::{Error, Result};
use crate::read::ordered::{OrderedPull, Start};
use crate::read::value_schema::value_decoder;
use crate::read::ReadOptions;

crate::declare_options! {
    /// What to follow with an open-ended ordered consumer. Every field but `values` is
    /// an option callers give by name (Python's `FollowOptions`).
    #[derive(Debug, Clone)]
    pub struct FollowOptions (none_is_default) {
        /// Only messages of these subject filters (default: every subject).
        subjects: Vec<String>;
        /// The first sequence to deliver (default: the first message).
        start_seq: Option<u64>;
        /// The first message stored at or after this time (instead of start_seq).
        start_time: Option<i64>;
        /// Only messages stored after the consumer is made (instead of a start).
        deliver_new: bool = false;
        /// A headers column.
        include_headers: bool = false;
        /// A `ttl` column: each message's `Nats-TTL` as the server reads it.
        include_ttl: bool = false;
        /// Exactly-once writers' position messages as rows too (by default left out).
        include_positions: bool = false;
        /// Rows per batch, at most.
        batch_rows: usize = defaults::READ_BATCH_ROWS, min 1;
        /// After the first message of a batch, how long to wait for more.
        batch_wait: Duration = defaults::FOLLOW_BATCH_WAIT;
        /// Payload bytes per batch and per pull request, at most.
        max_bytes: usize = defaults::READ_MAX_BYTES, min 1;
        /// The consumer's idle heartbeat; two missed ones fail.
        heartbeat: Duration = defaults::HEARTBEAT;
        /// How long to keep recreating the consumer after losing it.
        resume_timeout: Duration = defaults::RESUME_TIMEOUT;
    }
    extra {
        /// Payloads decoded into typed columns (none: `data` as bytes).
        values: Option<CodecSpec> = None;
    }
}

impl FollowOptions {
    /// Where the consumer starts: the start options exclude each other.
    pub fn start(&self) -> Result<Start> {
        match (self.start_seq, self.start_time, self.deliver_new) {
            (Some(0), _, _) => Err(Error::bad_input(
                "option 'start_seq': stream sequences start at 1",
            )),
            (Some(seq), None, false) => Ok(Start::Sequence(seq)),
            (None, Some(ns), false) => Ok(Start::Time(ns)),
            (None, None, true) => Ok(Start::New),
            (None, None, false) => Ok(Start::All),
            _ => Err(Error::bad_input(
                "options 'start_seq', 'start_time' and deliver='new' exclude each other",
            )),
        }
    }
}

/// An open-ended ordered consumer (nats.go's `OrderedConsumer`): every message from
/// the start, then every new one, exactly once and in order, as batches.
pub struct OrderedStream {
    ordered: OrderedPull,
    builder: BatchBuilder,
    batch_rows: usize,
    batch_wait: Duration,
    max_bytes: usize,
    carry: Option<Delivered>,
}

impl OrderedStream {
    pub async fn open(conn: Connection, stream: &str, options: FollowOptions) -> Result<Self> {
        validate_name(stream, "stream")?;
        if options.batch_rows == 0 {
            return Err(Error::bad_input("option 'batch_rows' must be at least 1"));
        }
        let start = options.start()?;
        // The read from `start` on, as a range read takes it: its pulls, and what its
        // values' sample reads.
        let read = ReadOptions {
            subjects: options.subjects.clone(),
            include_positions: options.include_positions,
            values: options.values.clone(),
            batch_rows: options.batch_rows,
            max_bytes: options.max_bytes,
            heartbeat: options.heartbeat,
            ..ReadOptions::default()
        };
        let schema_options = SchemaOptions {
            include_headers: options.include_headers,
            include_ttl: options.include_ttl,
            consumer_columns: false,
            payload_views: false,
        };
        let values = value_decoder(&conn, stream, &read, schema_options).await?;
        let decompression = conn.decompression;
        let (ordered, _) = OrderedPull::open(
            conn,
            stream,
            options.subjects,
            start,
            read.pull_settings(),
            options.resume_timeout,
        )
        .await?;
        Ok(Self {
            ordered,
            builder: BatchBuilder::new(stream, schema_options)
                .with_values(values)
                .with_decompression(decompression)
                .with_positions(options.include_positions),
            batch_rows: options.batch_rows,
            batch_wait: options.batch_wait,
            max_bytes: options.max_bytes,
            carry: None,
        })
    }

    pub fn schema(&self) -> SchemaRef {
        self.builder.schema()
    }

    /// Waits for at least one row, then takes what arrives within `batch_wait`,
    /// up to `batch_rows` rows and `max_bytes` payload bytes. A message the builder
    /// leaves out (a writer's position) is no row: the wait goes on past it.
    pub async fn next_batch(&mut self) -> Result<RecordBatch> {
        while self.builder.is_empty() {
            let first = match self.carry.take() {
                Some(carried) => carried,
                None => loop {
                    if let Some(d) = self.ordered.next(None).await? {
                        break d;
                    }
                },
            };
            self.builder.append(&first.message, &first.meta)?;
        }
        let until = tokio::time::Instant::now() + self.batch_wait;
        while self.builder.len() < self.batch_rows {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            let Some(delivered) = self.ordered.next(Some(left)).await? else {
                break;
            };
            let size = delivered.message.payload.len();
            if self.builder.data_bytes() + size > self.max_bytes {
                self.carry = Some(delivered);
                break;
            }
            self.builder.append(&delivered.message, &delivered.meta)?;
        }
        self.builder.finish()
    }

    pub fn resets(&self) -> u32 {
        self.ordered.resets
    }

    /// Payloads that did not decode so far (dropped, or kept as `_corrupt_record`).
    pub fn malformed(&self) -> u64 {
        self.builder.malformed()
    }

    pub async fn close(&mut self) {
        self.ordered.close().await;
    }
}
