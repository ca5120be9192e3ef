//! Durable push consumers, and flow-control acking for `ack_policy: flow_control`.
//!
//! A push consumer delivers to its deliver subject; this module subscribes there and
//! turns deliveries into the same `ConsumedBatch`es as pull consumers. Idle heartbeats
//! are watched: two missed periods fail with `MissedHeartbeats`.
//!
//! One module for binding and the reading task: the task's liveness checks (heartbeats,
//! the silence probe) depend on how the consumer was bound.
//!
//! Flow-control requests and their answers live in [`crate::consume::flow_control`]; keeping
//! a flow-control consumer in step across lost deliveries and server restarts, in
//! [`crate::consume::resync`].

use std::sync::Arc;
use std::time::Duration;

use async_nats::{Subject, Subscriber};
use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::api::headers::{self, CONSUMER_STALLED, LAST_CONSUMER};
use crate::api::subjects;
use crate::api::types::{AckPolicy as WireAckPolicy, ConsumerInfo};
use crate::api::{validate_name, Status};
use crate::arrow::builder::BatchBuilder;
use crate::arrow::metadata::parse_ack_subject;
use crate::arrow::metadata::Delivered;
use crate::arrow::schema::SchemaOptions;
use crate::codec::{CodecSpec, ValueDecoder};
use crate::connection::Connection;
use crate::consume::batch::{first_with_rows, CollectBatch};
use crate::consume::durable::{AckLedger, AckPolicy, ConsumedBatch};
use crate::consume::flow_control::FlowControl;
use crate::consume::resync::{Resync, Verdict};
use crate::defaults;
use crate::error::{Error, ErrorKind, Result};

/// A durable push consumer, bound by name.
#[derive(Clone)]
pub struct PushConsumer {
    conn: Connection,
    pub stream: String,
    pub name: String,
    pub deliver_subject: String,
    deliver_group: Option<String>,
    ack_policy: Option<AckPolicy>,
    /// The consumer's idle heartbeat, if known.
    heartbeat: Option<Duration>,
    /// What this binding handed out and acknowledged, for positions delivered alone.
    ledger: Arc<AckLedger>,
}

crate::declare_options! {
    /// Options of push consumption. Every field but `values` is an option callers give
    /// by name (Python's `PushOptions`).
    #[derive(Debug, Clone)]
    pub struct PushOptions (none_is_default) {
        /// Rows per batch, at most.
        batch_rows: usize = defaults::CONSUME_BATCH_ROWS, min 1;
        /// After the first message of a batch, how long to wait for more.
        batch_wait: Duration = defaults::CONSUME_BATCH_WAIT;
        /// A headers column.
        include_headers: bool = false;
        /// The consumer's idle heartbeat when it was not looked up (no info request).
        heartbeat: Option<Duration>;
    }
    extra {
        /// Payloads decoded into typed columns, the schema resolved (none: `data` as bytes).
        values: Option<CodecSpec> = None;
    }
}

impl PushConsumer {
    /// The connection it consumes on.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Bind to `name`. With `deliver_to` (the deliver subject and, for a consumer
    /// shared by a queue group, its deliver group) nothing is looked up (a client
    /// allowed only its deliver subject and `$JS.ACK`/`$JS.FC` works); otherwise the
    /// consumer's info supplies the deliver subject, queue group, ack policy and
    /// heartbeat.
    pub async fn bind(
        conn: Connection,
        stream: &str,
        name: &str,
        deliver_to: Option<(String, Option<String>)>,
        ack_policy: Option<AckPolicy>,
    ) -> Result<Self> {
        validate_name(stream, "stream")?;
        validate_name(name, "name")?;
        if let Some((subject, group)) = deliver_to {
            if let Some(group) = &group {
                validate_name(group, "deliver_group")?;
            }
            return Ok(Self {
                conn,
                stream: stream.into(),
                name: name.into(),
                deliver_subject: subject,
                deliver_group: group.filter(|g| !g.is_empty()),
                ack_policy,
                heartbeat: None,
                ledger: Arc::default(),
            });
        }
        let info: ConsumerInfo = conn
            .api_get(&subjects::consumer_info(stream, name))
            .await
            .map_err(|e| e.context(format!("binding to push consumer {name:?}")))?;
        let config = info.config;
        let Some(subject) = config.deliver_subject.filter(|s| !s.is_empty()) else {
            return Err(Error::bad_input(format!(
                "consumer {name:?} of stream {stream:?} is a pull consumer (it has no \
                 deliver_subject): use pull_consumer()"
            )));
        };
        let policy = match config.ack_policy {
            WireAckPolicy::None => AckPolicy::None,
            WireAckPolicy::All => AckPolicy::All,
            WireAckPolicy::Explicit => AckPolicy::Explicit,
            WireAckPolicy::FlowControl => AckPolicy::FlowControl,
        };
        Ok(Self {
            conn,
            stream: stream.into(),
            name: name.into(),
            deliver_subject: subject,
            deliver_group: config.deliver_group.filter(|g| !g.is_empty()),
            ack_policy: Some(policy),
            heartbeat: Some(config.idle_heartbeat).filter(|h| !h.is_zero()),
            ledger: Arc::default(),
        })
    }

    pub async fn messages(&self, options: PushOptions) -> Result<PushStream> {
        if options.batch_rows == 0 {
            return Err(Error::bad_input("option 'batch_rows' must be at least 1"));
        }
        let resync = if self.ack_policy == Some(AckPolicy::FlowControl) {
            Resync::start(&self.conn, &self.stream, &self.name).await?
        } else {
            None
        };
        let client = &self.conn.client;
        let sub = match &self.deliver_group {
            Some(group) => {
                client
                    .queue_subscribe(self.deliver_subject.clone(), group.clone())
                    .await?
            }
            None => client.subscribe(self.deliver_subject.clone()).await?,
        };
        let values = options
            .values
            .as_ref()
            .map(|spec| ValueDecoder::new(spec, options.batch_rows))
            .transpose()?;
        Ok(PushStream::start(
            self.clone(),
            sub,
            resync,
            &options,
            values,
        ))
    }
}

/// What the reading task hands the stream.
enum Event {
    /// A delivery, with the flow-control epoch it arrived in.
    Delivered(Delivered, u64),
    Failed(Error),
}

/// Continuous push consumption: each call yields the next batch.
///
/// A task reads the deliver subject, so heartbeats, flow-control requests and stalls
/// are handled as they arrive, also while the application is busy or idle; it hands
/// deliveries on in order. What it holds is bounded by the server's window
/// (`max_ack_pending`, flow control), which opens only as batches are handed out or,
/// with flow-control acking, released.
pub struct PushStream {
    consumer: PushConsumer,
    events: mpsc::UnboundedReceiver<Event>,
    reader: tokio::task::JoinHandle<()>,
    builder: BatchBuilder,
    batch_rows: usize,
    batch_wait: Duration,
    flow: Arc<FlowControl>,
    /// A delivery taken from `events` that belongs to the next batch.
    held: Option<(Delivered, u64)>,
}

impl Drop for PushStream {
    fn drop(&mut self) {
        // Dropping the task drops the subscription: the client unsubscribes.
        self.reader.abort();
    }
}

/// Read the deliver subject until it fails or the stream is dropped.
async fn read_deliveries(
    mut sub: Subscriber,
    conn: Connection,
    label: String,
    heartbeat: Option<Duration>,
    flow: Arc<FlowControl>,
    mut resync: Option<Resync>,
    events: mpsc::UnboundedSender<Event>,
) {
    let failed = loop {
        // A message already buffered needs no heartbeat timer (at full speed, most).
        let ready = sub.next().now_or_never();
        let next = match (ready, heartbeat) {
            (Some(next), _) => next,
            (None, Some(hb)) => match tokio::time::timeout(hb * 2, sub.next()).await {
                Ok(next) => next,
                Err(_) => {
                    crate::events::heartbeats_missed(&label, hb * 2);
                    break Error::new(
                        ErrorKind::MissedHeartbeats,
                        format!(
                            "{label}: no messages and no idle heartbeats for {:?} (two \
                             heartbeat periods); the server or the consumer may be gone",
                            hb * 2
                        ),
                    );
                }
            },
            (None, None) => match tokio::time::timeout(defaults::SILENCE_PROBE, sub.next()).await {
                Ok(next) => next,
                Err(_) => {
                    // No heartbeat tells a quiet stream from a server gone silent
                    // (paused, partitioned): ask the server itself.
                    if conn.flush(None).await.is_ok() {
                        continue;
                    }
                    break Error::timeout(format!(
                        "{label}: no messages for {:?} and the server did not answer a ping \
                         within {:?} (option 'request_timeout'); the server may be paused or \
                         unreachable (give the consumer an idle heartbeat to be told sooner)",
                        defaults::SILENCE_PROBE,
                        conn.request_timeout
                    ));
                }
            },
        };
        let Some(message) = next else {
            break Error::connection(format!(
                "{label}: the subscription closed (connection closed)"
            ));
        };
        match Status::of(&message) {
            None => {}
            Some(status @ (Status::FlowControlRequest | Status::IdleHeartbeat)) => {
                if let (Status::IdleHeartbeat, Some(resync), Some(last)) = (
                    status,
                    resync.as_mut(),
                    headers::last_u64(&message, LAST_CONSUMER),
                ) {
                    if resync.sequence.on_heartbeat(last) == Verdict::Gap {
                        let why = format!("an idle heartbeat names delivery {last}, not received");
                        if let Err(e) = resync.reset(&flow, &why).await {
                            break e.context(&label);
                        }
                        continue;
                    }
                }
                let stalled = message
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(CONSUMER_STALLED))
                    .map(|v| Subject::from(v.as_str()));
                let request = message.reply.clone().filter(|r| !r.is_empty());
                if let Some(subject) = request.or(stalled) {
                    if let Err(e) = flow.requested(subject).await {
                        break e;
                    }
                }
                continue;
            }
            Some(Status::ConsumerDeleted) => {
                break Error::new(ErrorKind::ConsumerDeleted, format!("{label} was deleted"))
            }
            Some(other) => break other.unexpected(&label),
        }
        let Some(meta) = message.reply.as_deref().and_then(parse_ack_subject) else {
            continue; // not a JetStream delivery
        };
        if let Some(resync) = resync.as_mut() {
            match resync.sequence.on_delivery(meta.consumer_seq) {
                Verdict::Accept => {}
                Verdict::Stale => continue,
                Verdict::Gap => {
                    let why = format!("delivery {} came out of sequence", meta.consumer_seq);
                    if let Err(e) = resync.reset(&flow, &why).await {
                        break e.context(&label);
                    }
                    continue;
                }
            }
        }
        let epoch = flow.delivered(meta.consumer_seq, meta.stream_seq);
        if events
            .send(Event::Delivered(Delivered { message, meta }, epoch))
            .is_err()
        {
            return; // the stream is gone
        }
    };
    let _ = events.send(Event::Failed(failed));
}

impl PushStream {
    fn start(
        consumer: PushConsumer,
        sub: Subscriber,
        resync: Option<Resync>,
        options: &PushOptions,
        values: Option<ValueDecoder>,
    ) -> Self {
        let flow_acks = consumer.ack_policy == Some(AckPolicy::FlowControl);
        let flow = Arc::new(FlowControl::new(consumer.conn.clone(), flow_acks));
        let (sender, events) = mpsc::unbounded_channel();
        let label = format!(
            "push consumer {:?} of stream {:?}",
            consumer.name, consumer.stream
        );
        let reader = tokio::spawn(read_deliveries(
            sub,
            consumer.conn.clone(),
            label,
            consumer.heartbeat.or(options.heartbeat),
            flow.clone(),
            resync,
            sender,
        ));
        Self {
            builder: BatchBuilder::new(
                &consumer.stream,
                SchemaOptions {
                    include_headers: options.include_headers,
                    include_ttl: false,
                    consumer_columns: true,
                    payload_views: false,
                },
            )
            .with_values(values)
            .with_decompression(consumer.conn.decompression),
            consumer,
            events,
            reader,
            batch_rows: options.batch_rows,
            batch_wait: options.batch_wait,
            flow,
            held: None,
        }
    }

    /// Flow-control answers sent so far.
    pub fn flow_control_answers(&self) -> u64 {
        self.flow.answers()
    }

    /// Resets of the consumer to its ack floor after it fell out of step.
    pub fn consumer_resets(&self) -> u64 {
        self.flow.epoch()
    }

    /// The next delivery and its epoch; None when `until` passed first.
    async fn next(&mut self, until: Option<Instant>) -> Result<Option<(Delivered, u64)>> {
        if let Some(held) = self.held.take() {
            return Ok(Some(held));
        }
        // What is queued already needs no timer (most deliveries, at full speed).
        let event = match self.events.try_recv() {
            Ok(event) => Some(event),
            Err(mpsc::error::TryRecvError::Disconnected) => None,
            Err(mpsc::error::TryRecvError::Empty) => match until {
                Some(until) => match tokio::time::timeout_at(until, self.events.recv()).await {
                    Ok(event) => event,
                    Err(_) => return Ok(None),
                },
                None => self.events.recv().await,
            },
        };
        match event {
            Some(Event::Delivered(d, epoch)) => Ok(Some((d, epoch))),
            Some(Event::Failed(e)) => Err(e),
            None => Err(Error::connection("the push consumer's reader stopped")),
        }
    }

    /// Waits for at least one message, then takes what arrives within `batch_wait`,
    /// up to `batch_rows`; with a flow-control request waiting for releases, only what
    /// has already arrived.
    ///
    /// A batch holds deliveries of one epoch. Deliveries of an epoch before the
    /// consumer's last reset are dropped, and so is a batch whose epoch ended while
    /// it was collected: the reset sends them again, numbered afresh (handing them
    /// out would only add duplicates whose release is ignored). The first delivery
    /// of a newer epoch waits for the next batch. Deliveries that were all writers'
    /// positions (acknowledged or released, or held while that could acknowledge a
    /// row handed out before: no rows) are not handed out: the wait goes on.
    pub async fn next_batch(&mut self) -> Result<ConsumedBatch> {
        first_with_rows(self).await
    }
}

impl CollectBatch for PushStream {
    async fn collect_batch(&mut self) -> Result<ConsumedBatch> {
        let (delivered, epoch) = loop {
            let Some((first, epoch)) = self.next(None).await? else {
                continue;
            };
            if epoch != self.flow.epoch() {
                continue;
            }
            let mut delivered = vec![first];
            let until = Instant::now() + self.batch_wait;
            while delivered.len() < self.batch_rows {
                // While a flow-control request waits for releases, the server sends
                // little or nothing more until this batch is released: waiting out
                // `batch_wait` would stall the flow once per window. Take what has
                // arrived and hand it out.
                let deadline = if self.flow.awaits_release() {
                    Instant::now()
                } else {
                    until
                };
                match self.next(Some(deadline)).await? {
                    Some((d, e)) if e == epoch => delivered.push(d),
                    Some(newer) => {
                        self.held = Some(newer);
                        break;
                    }
                    None => break,
                }
            }
            if epoch == self.flow.epoch() {
                break (delivered, epoch);
            }
        };
        let flow = self.flow.acks.then(|| (self.flow.clone(), epoch));
        let last_delivered = delivered
            .iter()
            .map(|d| d.meta.consumer_seq)
            .max()
            .unwrap_or(0);
        let batch = ConsumedBatch::build(
            &self.consumer.conn,
            &mut self.builder,
            delivered,
            self.consumer.ack_policy,
            flow,
            Some(&self.consumer.ledger),
        )
        .await;
        if !self.flow.acks {
            // Without flow-control acks, a request is answered once it is handed out
            // (a batch that failed to decode too: its messages come again after
            // their ack wait).
            self.flow.handed_out(last_delivered).await?;
        }
        batch
    }
}
