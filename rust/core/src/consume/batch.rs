//! A batch of delivered messages as Arrow, with what is needed to acknowledge them:
//! all at once, by row, by double ack, or through flow control.
//!
//! One module: how a batch is built decides how it is acknowledged (rows mapped to
//! the messages they came from, payloads dropped as malformed terminated, writers'
//! positions left out and acknowledged with the rows, alone, or held by the
//! binding's [`AckLedger`]), and each ack form reads that same state.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use async_nats::Subject;
use bytes::Bytes;
use futures::StreamExt;
use tokio::time::Instant;

use crate::arrow::builder::BatchBuilder;
use crate::arrow::metadata::Delivered;
use crate::connection::Connection;
use crate::consume::flow_control::FlowControl;
use crate::consume::ledger::AckLedger;
use crate::error::{Error, Result};

/// The consumer's ack policy, when the caller knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckPolicy {
    None,
    All,
    Explicit,
    /// Acknowledged through flow-control answers (push consumers only).
    FlowControl,
}

impl AckPolicy {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(Self::None),
            "all" => Ok(Self::All),
            "explicit" => Ok(Self::Explicit),
            "flow_control" => Ok(Self::FlowControl),
            other => Err(Error::bad_input(format!(
                "option 'ack_policy' must be 'none', 'all', 'explicit' or 'flow_control', got \
                 {other:?}"
            ))),
        }
    }
}

/// What an ack message says.
#[derive(Debug, Clone, PartialEq)]
pub enum AckKind {
    Ack,
    Nak { delay: Option<Duration> },
    InProgress,
    Term { reason: Option<String> },
}

impl AckKind {
    fn body(&self) -> Bytes {
        match self {
            AckKind::Ack => Bytes::from_static(b"+ACK"),
            AckKind::InProgress => Bytes::from_static(b"+WPI"),
            AckKind::Nak { delay: None } => Bytes::from_static(b"-NAK"),
            AckKind::Nak { delay: Some(d) } => {
                Bytes::from(format!("-NAK {{\"delay\": {}}}", d.as_nanos()))
            }
            AckKind::Term { reason: None } => Bytes::from_static(b"+TERM"),
            AckKind::Term { reason: Some(r) } => Bytes::from(format!("+TERM {r}")),
        }
    }
}

/// What collects a consumer's batches, one a call: a durable consumer's message
/// stream, a push consumer.
pub(crate) trait CollectBatch: Send {
    /// The next batch of what was delivered, writers' positions only or not.
    fn collect_batch(&mut self) -> impl Future<Output = Result<ConsumedBatch>> + Send;
}

/// The first batch `consumer` collects that has something to hand out: a batch of
/// writers' positions only ([`ConsumedBatch::only_positions`]) is not handed out, and
/// the wait goes on. What a consumer's `next_batch` hands out.
pub(crate) async fn first_with_rows(consumer: &mut impl CollectBatch) -> Result<ConsumedBatch> {
    loop {
        let batch = consumer.collect_batch().await?;
        if !batch.only_positions() {
            return Ok(batch);
        }
    }
}

/// Messages delivered by a consumer, with what is needed to acknowledge them.
pub struct ConsumedBatch {
    conn: Connection,
    pub batch: RecordBatch,
    replies: Vec<Subject>,
    consumer_seqs: Vec<u64>,
    stream_seqs: Vec<u64>,
    /// (consumer seq, stream seq) of the last message, for flow-control release.
    last: (u64, u64),
    /// The consumer acks everything up to a message with one ack.
    ack_all: bool,
    /// Set for flow-control consumers, with the epoch the batch was delivered in: an
    /// ack releases the batch to the next answer.
    flow: Option<(Arc<FlowControl>, u64)>,
    /// Payloads of this batch that did not decode (dropped, or kept as
    /// `_corrupt_record`).
    pub malformed: u64,
    /// Writers' position messages the batch left out (reply subject, consumer seq,
    /// stream seq), still to acknowledge with its rows ([`Self::positions_acked_with`]).
    positions: Vec<(Subject, u64, u64)>,
    /// How many messages of the batch were writers' positions.
    left_out: usize,
    /// The binding's ledger, with ack policy `all` or an unknown one.
    ledger: Option<Arc<AckLedger>>,
}

impl ConsumedBatch {
    /// The batch of `delivered` messages, in delivery order.
    /// Messages whose payloads were dropped as malformed (`dropmalformed`) are
    /// terminated here, so they are not delivered again; a flow-control consumer
    /// releases them with the batch. A payload that fails the batch (`failfast`)
    /// leaves every message of it unacknowledged, to be delivered again.
    ///
    /// Writers' position messages the builder leaves out are no rows, but they were
    /// delivered and are acknowledged, so they do not come again: at once with ack
    /// policy `explicit` (an ack of one message acknowledges nothing else); with the
    /// batch's ack where it has rows ([`Self::positions_acked_with`]); and where it
    /// has nothing else, with `all` (or an unknown policy) as the binding's
    /// [`AckLedger`] allows, with flow control as [`FlowControl::release_positions`]
    /// does: there an ack of one message acknowledges every earlier one, so it must
    /// wait until no row handed out before is unacknowledged.
    pub(crate) async fn build(
        conn: &Connection,
        builder: &mut BatchBuilder,
        delivered: Vec<Delivered>,
        ack_policy: Option<AckPolicy>,
        flow: Option<(Arc<FlowControl>, u64)>,
        ledger: Option<&Arc<AckLedger>>,
    ) -> Result<Self> {
        let ledger = ledger
            .filter(|_| matches!(ack_policy, Some(AckPolicy::All) | None) && flow.is_none())
            .cloned();
        if let Some(ledger) = &ledger {
            ledger.seen(delivered.iter().map(|d| d.meta.consumer_seq));
        }
        let mut replies = Vec::with_capacity(delivered.len());
        let mut consumer_seqs = Vec::with_capacity(delivered.len());
        let mut stream_seqs = Vec::with_capacity(delivered.len());
        let mut positions = Vec::new();
        let mut last = (0, 0);
        let mut top_stream = 0;
        for d in &delivered {
            if d.meta.consumer_seq > last.0 {
                last = (d.meta.consumer_seq, d.meta.stream_seq);
            }
            top_stream = top_stream.max(d.meta.stream_seq);
        }
        // Messages delivered but not handed out (the batch failed) are not
        // acknowledged: no position alone may be acknowledged past them.
        let failed = |e: Error| {
            if let Some(ledger) = &ledger {
                ledger.handed(top_stream);
            }
            if let Some((flow, epoch)) = &flow {
                flow.handed_out_rows(*epoch, last.0);
            }
            e
        };
        for d in &delivered {
            let reply = d
                .message
                .reply
                .clone()
                .expect("deliveries have a reply subject");
            match builder.append(&d.message, &d.meta) {
                Ok(true) => {}
                Ok(false) => {
                    positions.push((reply, d.meta.consumer_seq, d.meta.stream_seq));
                    continue;
                }
                Err(e) => {
                    // The rows appended so far are not handed out: the builder starts
                    // the next batch empty (the messages come again after their ack
                    // wait).
                    builder.clear();
                    return Err(failed(e));
                }
            }
            replies.push(reply);
            consumer_seqs.push(d.meta.consumer_seq);
            stream_seqs.push(d.meta.stream_seq);
        }
        let malformed_before = builder.malformed();
        let batch = builder.finish().map_err(failed)?;
        let malformed = builder.malformed() - malformed_before;
        if let Some(origins) = builder.last_origins() {
            let mut has_rows = vec![false; replies.len()];
            for &o in origins {
                has_rows[o as usize] = true;
            }
            if flow.is_none() {
                let term = AckKind::Term {
                    reason: Some("malformed payload (dropmalformed)".to_string()),
                }
                .body();
                for (reply, _) in replies.iter().zip(&has_rows).filter(|(_, kept)| !**kept) {
                    conn.client.publish(reply.clone(), term.clone()).await?;
                }
            }
            // Rows acknowledge the message they came from.
            replies = origins
                .iter()
                .map(|&o| replies[o as usize].clone())
                .collect();
            consumer_seqs = origins.iter().map(|&o| consumer_seqs[o as usize]).collect();
            stream_seqs = origins.iter().map(|&o| stream_seqs[o as usize]).collect();
        }
        let mut out = Self {
            conn: conn.clone(),
            batch,
            replies,
            consumer_seqs,
            stream_seqs,
            last,
            ack_all: ack_policy == Some(AckPolicy::All),
            flow,
            malformed,
            left_out: positions.len(),
            positions,
            ledger,
        };
        if ack_policy == Some(AckPolicy::None) {
            out.positions.clear();
        } else if ack_policy == Some(AckPolicy::Explicit) {
            let body = AckKind::Ack.body();
            for (reply, _, _) in std::mem::take(&mut out.positions) {
                out.conn.client.publish(reply, body.clone()).await?;
            }
        } else if out.only_positions() {
            out.positions_alone().await?;
        } else {
            if let Some(ledger) = &out.ledger {
                ledger.handed(top_stream);
            }
            if let Some((flow, epoch)) = &out.flow {
                flow.handed_out_rows(*epoch, last.0);
            }
        }
        Ok(out)
    }

    /// A batch of nothing but positions, which is not handed out: its positions are
    /// acknowledged (released) now if that acknowledges no row handed out before and
    /// not yet acknowledged, else held until it does ([`AckLedger`],
    /// [`FlowControl::release_positions`]).
    async fn positions_alone(&mut self) -> Result<()> {
        let positions = std::mem::take(&mut self.positions);
        if let Some((flow, epoch)) = &self.flow {
            return flow
                .release_positions(*epoch, self.last.0, self.last.1)
                .await;
        }
        let Some(ledger) = &self.ledger else {
            return Ok(());
        };
        let now = ledger.positions_alone(
            positions.into_iter().map(|(reply, _, seq)| (reply, seq)),
            self.ack_all,
        );
        let body = AckKind::Ack.body();
        for reply in now {
            self.conn.client.publish(reply, body.clone()).await?;
        }
        Ok(())
    }

    /// After an ack of messages up to `stream_seq`: the positions the ledger held
    /// that may be acknowledged now.
    async fn release_held(&self, stream_seq: Option<u64>) -> Result<()> {
        let (Some(ledger), Some(seq)) = (&self.ledger, stream_seq) else {
            return Ok(());
        };
        let body = AckKind::Ack.body();
        for reply in ledger.acked(seq, self.ack_all) {
            self.conn.client.publish(reply, body.clone()).await?;
        }
        Ok(())
    }

    /// Whether every message of the batch was a writer's position: nothing to hand
    /// out (they are acknowledged already, or held until that is safe).
    pub fn only_positions(&self) -> bool {
        self.is_empty() && self.malformed == 0 && self.left_out > 0
    }

    /// The position messages an ack of `rows` (all when None) acknowledges too: those
    /// delivered before the last row acked, and those after every row once the
    /// batch's last row is acked. (With ack policy `all`, an ack of a row covers
    /// every earlier delivery anyway; a position after the last row is acked only
    /// with that row, so no row is acked before the application acks it.)
    fn positions_acked_with(&self, rows: Option<&[usize]>) -> Vec<(Subject, u64, u64)> {
        if self.positions.is_empty() {
            return Vec::new();
        }
        let last_row = self.consumer_seqs.iter().copied().max().unwrap_or(0);
        let bound = match rows {
            None => u64::MAX,
            Some(rows) => {
                let acked = rows
                    .iter()
                    .filter_map(|&r| self.consumer_seqs.get(r).copied())
                    .max()
                    .unwrap_or(0);
                if acked == last_row {
                    u64::MAX
                } else {
                    acked
                }
            }
        };
        self.positions
            .iter()
            .filter(|(_, seq, _)| *seq <= bound)
            .cloned()
            .collect()
    }

    /// The consumer sequence of the last message of the batch.
    pub fn last_delivered(&self) -> u64 {
        self.last.0
    }

    /// Flow-control consumers acknowledge cumulatively, through flow control only.
    fn flow_only(&self, what: &str) -> Result<()> {
        if self.flow.is_some() {
            return Err(Error::bad_input(format!(
                "{what} is not available on a flow-control consumer: it acknowledges \
                 cumulatively, through ack() of whole batches"
            )));
        }
        Ok(())
    }
    pub fn len(&self) -> usize {
        self.replies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    /// The reply subjects the chosen rows are acknowledged on, with their stream
    /// sequences; an `Ack` takes the position messages it covers along
    /// ([`Self::positions_acked_with`]).
    fn targets(&self, rows: Option<&[usize]>, kind: &AckKind) -> Result<Vec<(Subject, u64)>> {
        let positions = match kind {
            AckKind::Ack => self.positions_acked_with(rows),
            _ => Vec::new(),
        };
        let positions = positions.into_iter().map(|(reply, _, seq)| (reply, seq));
        let rows_with_seqs = self
            .replies
            .iter()
            .cloned()
            .zip(self.stream_seqs.iter().copied());
        match rows {
            None if self.ack_all && *kind == AckKind::Ack => {
                // One AckAll covers the batch: the server acknowledges by stream
                // sequence, so the ack of the highest one (not of the last delivered,
                // which may be an earlier message delivered again).
                Ok(rows_with_seqs
                    .chain(positions)
                    .max_by_key(|(_, seq)| *seq)
                    .into_iter()
                    .collect())
            }
            None => Ok(rows_with_seqs.chain(positions).collect()),
            Some(rows) => rows
                .iter()
                .map(|&r| match (self.replies.get(r), self.stream_seqs.get(r)) {
                    (Some(reply), Some(seq)) => Ok((reply.clone(), *seq)),
                    _ => Err(Error::bad_input(format!(
                        "row {r} is out of range: the batch has {} rows",
                        self.len()
                    ))),
                })
                .chain(positions.map(Ok))
                .collect(),
        }
    }

    /// Send `kind` for the chosen rows (all when None), pipelined, then flush.
    pub async fn acknowledge(&self, rows: Option<&[usize]>, kind: AckKind) -> Result<()> {
        if self.only_positions() {
            // Never handed out; its positions are the ledger's (or flow control's).
            return Ok(());
        }
        if let Some((flow, epoch)) = &self.flow {
            if kind != AckKind::Ack || rows.is_some() {
                self.flow_only("acknowledging chosen rows, nak, term or in_progress")?;
            }
            return flow.release(*epoch, self.last.0, self.last.1).await;
        }
        let body = kind.body();
        let targets = self.targets(rows, &kind)?;
        let acked = targets.iter().map(|(_, seq)| *seq).max();
        for (reply, _) in targets {
            self.conn.client.publish(reply, body.clone()).await?;
        }
        if kind == AckKind::Ack {
            self.release_held(acked).await?;
        }
        tokio::time::timeout(self.conn.request_timeout, self.conn.client.flush())
            .await
            .map_err(|_| Error::timeout("flushing acks: the server did not answer the flush"))?
            .map_err(|e| Error::connection(format!("flushing acks: {e}")))?;
        Ok(())
    }

    /// Double ack: each ack is sent as a request; unconfirmed ones are sent again
    /// until the server confirmed all of them or `timeout` passed. A repeated ack
    /// is a no-op on the server, so retrying is safe.
    pub async fn ack_sync(&self, rows: Option<&[usize]>, timeout: Duration) -> Result<()> {
        self.flow_only("a double ack (ack_sync)")?;
        let targets = self.targets(rows, &AckKind::Ack)?;
        if targets.is_empty() {
            return Ok(());
        }
        let acked = targets.iter().map(|(_, seq)| *seq).max();
        let targets: Vec<Subject> = targets.into_iter().map(|(reply, _)| reply).collect();
        let inbox = self.conn.client.new_inbox();
        let mut sub = self.conn.client.subscribe(format!("{inbox}.*")).await?;
        let deadline = Instant::now() + timeout;
        let attempt_wait = (timeout / 4).max(Duration::from_millis(250));
        let mut pending: HashMap<usize, Subject> = targets.into_iter().enumerate().collect();
        let body = AckKind::Ack.body();
        while !pending.is_empty() {
            if Instant::now() >= deadline {
                return Err(Error::timeout(format!(
                    "double ack: {} acks not confirmed by the server within {timeout:?}",
                    pending.len()
                )));
            }
            for (token, reply) in &pending {
                self.conn
                    .client
                    .publish_with_reply(reply.clone(), format!("{inbox}.{token}"), body.clone())
                    .await?;
            }
            let round_end = (Instant::now() + attempt_wait).min(deadline);
            while !pending.is_empty() {
                match tokio::time::timeout_at(round_end, sub.next()).await {
                    Ok(Some(m)) => {
                        if m.status.is_some_and(|s| s.as_u16() == 503) {
                            continue; // nobody took it: resend next round
                        }
                        if let Some(t) = m.subject.rsplit('.').next().and_then(|t| t.parse().ok()) {
                            pending.remove(&t);
                        }
                    }
                    Ok(None) => return Err(Error::connection("double ack: the connection closed")),
                    Err(_) => break,
                }
            }
        }
        let _ = sub.unsubscribe().await;
        self.release_held(acked).await
    }
}
