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
use crate::error::{Error, Result};
use crate::read::ordered::{OrderedPull, Start};
use crate::read::value_schema::value_decoder;
use crate::read::ReadOptions;

/// What to follow with an open-ended ordered consumer.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    pub subjects: Vec<String>,
    pub start: Start,
    pub include_headers: bool,
    /// A `ttl` column: each message's `Nats-TTL` as the server reads it.
    pub include_ttl: bool,
    /// Exactly-once writers' position messages as rows too (by default left out).
    pub include_positions: bool,
    pub batch_rows: usize,
    /// After the first message of a batch, how long to wait for more.
    pub batch_wait: Duration,
    pub max_bytes: usize,
    pub heartbeat: Duration,
    pub resume_timeout: Duration,
    /// Payloads decoded into typed columns (none: `data` as bytes).
    pub values: Option<CodecSpec>,
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
            options.start,
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
