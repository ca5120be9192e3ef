//! Durable pull consumers: bound by name with no info lookup (a client that may
//! only use `CONSUMER.MSG.NEXT` and `$JS.ACK` works), fetched or consumed as Arrow
//! batches ([`ConsumedBatch`]), acknowledged per batch or per row.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::api::validate_name;
use crate::arrow::builder::BatchBuilder;
use crate::arrow::schema::SchemaOptions;
use crate::codec::{CodecSpec, ValueDecoder};
use crate::connection::Connection;
use crate::consume::batch::{first_with_rows, CollectBatch};
use crate::consume::pull::{fetch_once, FetchRequest, Pin, PriorityGroup, PullLoop, PullSettings};
use crate::defaults;
use crate::error::{Error, Result};
use crate::limits::MAX_BUFFERED_MESSAGES;

/// A durable pull consumer, by name.
#[derive(Clone)]
pub struct DurableConsumer {
    conn: Connection,
    pub stream: String,
    pub name: String,
    ack_policy: Option<AckPolicy>,
    /// The priority group every pull of this binding names (server 2.11+).
    priority: Option<PriorityGroup>,
    /// The group's pin, while this binding holds it: one puller, however many
    /// fetches and loops it runs.
    pin: Pin,
    /// What this binding handed out and acknowledged, for positions delivered alone.
    ledger: Arc<AckLedger>,
}

crate::declare_options! {
    /// Options of continuous consumption (nats.go's `Messages()` options). Every field
    /// but `values` is an option callers give by name (Python's `ConsumeOptions`).
    #[derive(Debug, Clone)]
    pub struct ConsumeOptions (none_is_default) {
        /// Messages kept requested at most.
        max_messages: usize = defaults::CONSUME_MAX_MESSAGES, min 1, max MAX_BUFFERED_MESSAGES;
        /// Payload bytes kept requested at most (default: no bound).
        max_bytes: Option<usize>;
        /// A new pull is sent when the messages requested fall to this (default: half).
        threshold_messages: Option<usize>;
        /// A new pull is sent when the bytes requested fall to this (default: half).
        threshold_bytes: Option<usize>;
        /// How long each pull request lasts.
        expires: Duration = defaults::CONSUME_EXPIRES;
        /// Each pull request's idle heartbeat; two missed ones fail.
        heartbeat: Duration = defaults::HEARTBEAT;
        /// Rows per batch, at most.
        batch_rows: usize = defaults::CONSUME_BATCH_ROWS, min 1;
        /// After the first message of a batch, how long to wait for more.
        batch_wait: Duration = defaults::CONSUME_BATCH_WAIT;
        /// A headers column.
        include_headers: bool = false;
    }
    extra {
        /// Payloads decoded into typed columns, the schema resolved (none: `data` as bytes).
        values: Option<CodecSpec> = None;
    }
}

impl ConsumeOptions {
    /// The pull loop's settings: thresholds default to half the buffer, as in nats.go.
    pub fn pull_settings(&self) -> PullSettings {
        let mut pull = PullSettings::new(
            self.max_messages,
            self.max_bytes,
            self.expires,
            Some(self.heartbeat),
        );
        if let Some(t) = self.threshold_messages {
            pull.threshold_messages = t;
        }
        if let Some(t) = self.threshold_bytes {
            pull.threshold_bytes = Some(t);
        }
        pull
    }
}

crate::declare_options! {
    /// One pull request of a durable consumer (nats.go's `Fetch` options): every field
    /// is an option callers give by name (Python's `FetchOptions`).
    #[derive(Debug, Clone)]
    pub struct FetchOptions (none_is_default) {
        /// Messages the request asks for, at most.
        max_messages: usize = defaults::FETCH_MAX_MESSAGES, min 1;
        /// Payload bytes the request asks for, at most (default: no bound).
        max_bytes: Option<usize>;
        /// How long the request lasts.
        expires: Duration = defaults::FETCH_EXPIRES;
        /// End at once when nothing is there.
        no_wait: bool = false;
        /// The request's idle heartbeat (default: none).
        heartbeat: Option<Duration>;
        /// A headers column.
        include_headers: bool = false;
    }
}

impl FetchOptions {
    /// The pull request these options make (the binding adds its priority group).
    pub fn request(&self) -> FetchRequest {
        FetchRequest {
            max_messages: self.max_messages,
            max_bytes: self.max_bytes,
            expires: self.expires,
            no_wait: self.no_wait,
            heartbeat: self.heartbeat,
            priority: None,
            pin: Pin::default(),
        }
    }
}

impl DurableConsumer {
    /// The connection it consumes on.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    pub fn bind(
        conn: Connection,
        stream: &str,
        name: &str,
        ack_policy: Option<AckPolicy>,
    ) -> Result<Self> {
        validate_name(stream, "stream")?;
        validate_name(name, "name")?;
        Ok(Self {
            conn,
            stream: stream.into(),
            name: name.into(),
            ack_policy,
            priority: None,
            pin: Pin::default(),
            ledger: Arc::default(),
        })
    }

    /// Every pull names `priority`'s group (checked here).
    pub fn with_priority(mut self, priority: Option<PriorityGroup>) -> Result<Self> {
        if let Some(p) = &priority {
            p.validate()?;
        }
        self.priority = priority;
        Ok(self)
    }

    /// The pin this binding holds in its priority group (`pinned_client`), if any.
    pub fn pin_id(&self) -> Option<String> {
        self.pin.lock().expect("pin lock").clone()
    }

    fn schema_options(include_headers: bool) -> SchemaOptions {
        SchemaOptions {
            include_headers,
            include_ttl: false,
            consumer_columns: true,
            payload_views: false,
        }
    }

    pub async fn fetch(
        &self,
        request: &FetchRequest,
        include_headers: bool,
        values: Option<&CodecSpec>,
    ) -> Result<ConsumedBatch> {
        let request = FetchRequest {
            priority: self.priority.clone(),
            pin: self.pin.clone(),
            ..request.clone()
        };
        let delivered = fetch_once(&self.conn, &self.stream, &self.name, &request).await?;
        let values = values
            .map(|spec| ValueDecoder::new(spec, delivered.len()))
            .transpose()?;
        let mut builder = BatchBuilder::new(&self.stream, Self::schema_options(include_headers))
            .with_values(values)
            .with_decompression(self.conn.decompression);
        ConsumedBatch::build(
            &self.conn,
            &mut builder,
            delivered,
            self.ack_policy,
            None,
            Some(&self.ledger),
        )
        .await
    }

    pub async fn messages(&self, options: ConsumeOptions) -> Result<MessageStream> {
        if options.batch_rows == 0 {
            return Err(Error::bad_input("option 'batch_rows' must be at least 1"));
        }
        let pull = PullLoop::new(
            self.conn.clone(),
            &self.stream,
            &self.name,
            options.pull_settings(),
        )
        .await?
        .with_priority(self.priority.clone(), self.pin.clone())?;
        let values = options
            .values
            .as_ref()
            .map(|spec| ValueDecoder::new(spec, options.batch_rows))
            .transpose()?;
        Ok(MessageStream {
            consumer: self.clone(),
            builder: BatchBuilder::new(&self.stream, Self::schema_options(options.include_headers))
                .with_values(values)
                .with_decompression(self.conn.decompression),
            pull,
            batch_rows: options.batch_rows,
            batch_wait: options.batch_wait,
        })
    }
}

/// Continuous, pre-buffered consumption: each call yields the next batch.
pub struct MessageStream {
    consumer: DurableConsumer,
    builder: BatchBuilder,
    pull: PullLoop,
    batch_rows: usize,
    batch_wait: Duration,
}

impl MessageStream {
    /// Waits for at least one message, then takes what arrives within
    /// `batch_wait`, up to `batch_rows`. Messages that were all writers' positions
    /// (acknowledged, or held while that could acknowledge a row not yet
    /// acknowledged: [`AckLedger`]; no rows) are not handed out: the wait goes on.
    pub async fn next_batch(&mut self) -> Result<ConsumedBatch> {
        first_with_rows(self).await
    }
}

impl CollectBatch for MessageStream {
    async fn collect_batch(&mut self) -> Result<ConsumedBatch> {
        let mut delivered = Vec::new();
        let first = loop {
            if let Some(d) = self.pull.next(None).await? {
                break d;
            }
        };
        delivered.push(first);
        let until = Instant::now() + self.batch_wait;
        while delivered.len() < self.batch_rows {
            let left = until.saturating_duration_since(Instant::now());
            match self.pull.next(Some(left)).await? {
                Some(d) => delivered.push(d),
                None => break,
            }
        }
        ConsumedBatch::build(
            &self.consumer.conn,
            &mut self.builder,
            delivered,
            self.consumer.ack_policy,
            None,
            Some(&self.consumer.ledger),
        )
        .await
    }
}

pub use crate::consume::batch::{AckKind, AckPolicy, ConsumedBatch};
pub use crate::consume::ledger::AckLedger;
