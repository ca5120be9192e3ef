//! Fast-ingest publishing (`mode="fast"`): rows go out as batches the server
//! acknowledges every N messages instead of one by one.
//!
//! Each batch has its own inbox; every message's reply subject under it carries the
//! batch state ([`fast_batch::reply`]). The first message waits for the server's
//! first reply, which says whether the stream takes fast batches and how often acks
//! will come; after that up to [`defaults::FAST_OUTSTANDING_ACKS`] acks' worth of
//! messages (and at most `window` messages, `max_bytes_in_flight` bytes) are in
//! flight. The gap mode is `fail`: any lost message ends the batch, so an ack for
//! batch sequence N means rows 1..=N of the batch are stored, and a batch that ends
//! early reports exactly the rows after its last ack. A batch ends with an
//! end-of-batch message that is not stored, answered by the final PubAck.
//!
//! Acks can be lost: while waiting, a ping every [`defaults::FAST_PING_INTERVAL`]
//! makes the server repeat its latest ack or report the gap. Nothing is resent
//! within a batch; with msg ids a re-run of the reported rows stores nothing twice.
//!
//! It is one module because one batch's state (its sequence, the flow the server set,
//! the acks outstanding, when it last heard from the server) is read and changed by
//! every step of the protocol; the last hundred lines are its unit tests.

use std::collections::VecDeque;
use std::time::Duration;

use arrow_array::RecordBatch;
use async_nats::{Message, Subject, Subscriber};
use futures::{FutureExt, StreamExt};
use tokio::time::Instant;

use super::outcome::PublishOutcome;
use super::rows::{refuse_all, RowSource};
use super::{send_with_reply, Publisher};
use crate::api::subjects::fast_batch;
use crate::api::types::FastBatchReply;
use crate::api::Status;
use crate::connection::Connection;
use crate::defaults;
use crate::error::{err_codes, ApiErrorCode, Error, Result};
use crate::publish::input::OutgoingMessage;

/// What a wait is for.
#[derive(Clone, Copy)]
enum Want {
    /// Room for one more message.
    Room { window: usize },
    /// The first reply of the batch.
    FirstReply,
    /// The final PubAck.
    End,
}

/// One fast-ingest batch: rows `first_row..first_row + sent` of the call.
struct Batch {
    /// `<inbox>.<batch id>`: the prefix of every reply subject of this batch.
    inbox: String,
    /// `<inbox>.<flow>.fail.`: what every message's reply subject starts with (built
    /// once, so a message's costs one write of its sequence and op).
    reply_prefix: String,
    replies: Subscriber,
    first_row: usize,
    /// The highest batch sequence sent.
    sent: u64,
    /// Batch sequences 1..=acked are stored.
    acked: u64,
    /// The server acks every `flow` messages.
    flow: u64,
    /// The messages per ack this batch asks for (see [`requested_flow`]).
    requested_flow: u16,
    /// Payload sizes of the messages after `acked`, in order.
    sizes: VecDeque<usize>,
    bytes_in_flight: usize,
    /// Payload bytes in flight at most (the publisher's `max_bytes_in_flight`).
    max_bytes_in_flight: usize,
    /// The subject of the last message, where pings and the end go.
    subject: Subject,
    first_reply: bool,
    last_reply: Instant,
    last_ping: Instant,
    /// Why the batch will end early (a gap or a failed message), before its end.
    trouble: Option<String>,
    /// The batch is over: every row sent is stored or failed.
    done: bool,
    /// Why it ended early; None when it ended as planned.
    failure: Option<String>,
}

/// The messages per flow ack to ask the server for: at most
/// [`defaults::FAST_FLOW`], and few enough that [`defaults::FAST_OUTSTANDING_ACKS`]
/// acks' worth fits the window and `max_bytes` in flight (messages sized like
/// `first_size`). The server acks only when a group is complete: a group larger than
/// what may be in flight would never be acked, and each batch would wait out its ack
/// timeout.
fn requested_flow(window: usize, max_bytes: usize, first_size: usize) -> u16 {
    let outstanding = defaults::FAST_OUTSTANDING_ACKS as usize;
    let by_window = window / outstanding;
    let by_bytes = (max_bytes / (outstanding * first_size.max(1))).saturating_sub(1);
    let flow = usize::from(defaults::FAST_FLOW)
        .min(by_window)
        .min(by_bytes);
    u16::try_from(flow.max(1)).unwrap_or(defaults::FAST_FLOW)
}

impl Batch {
    fn row(&self, seq: u64) -> usize {
        self.first_row + (seq as usize).saturating_sub(1)
    }

    fn has_room(&self, window: usize) -> bool {
        let in_flight = self.sent - self.acked;
        in_flight < self.flow * defaults::FAST_OUTSTANDING_ACKS
            && in_flight < window as u64
            && self.bytes_in_flight < self.max_bytes_in_flight
    }

    fn satisfied(&self, want: Want) -> bool {
        self.done
            || match want {
                Want::Room { window } => self.trouble.is_none() && self.has_room(window),
                Want::FirstReply => self.first_reply,
                Want::End => false,
            }
    }

    /// Batch sequences up to `seq` are stored. Their stream sequences are not known
    /// (the server acks ranges), so the rows are reported stored without one.
    fn ack_up_to(&mut self, seq: u64, outcome: &mut PublishOutcome) {
        let seq = seq.min(self.sent);
        while self.acked < seq {
            self.acked += 1;
            outcome.acked(self.row(self.acked), 0, false);
            if let Some(size) = self.sizes.pop_front() {
                self.bytes_in_flight -= size;
            }
        }
    }

    /// The batch is over; rows after the last ack failed for `why`.
    fn finish(&mut self, outcome: &mut PublishOutcome, why: Option<String>) {
        self.done = true;
        let why = why.or_else(|| self.trouble.take());
        if self.acked < self.sent {
            let why = why.clone().unwrap_or_else(|| {
                format!(
                    "the fast batch ended after row {} without acknowledging later rows",
                    self.row(self.acked.max(1))
                )
            });
            for seq in self.acked + 1..=self.sent {
                let row = self.row(seq);
                // A row the server named in an error keeps its own reason.
                if outcome.error(row).is_none() {
                    outcome.fail(row, format!("{why}; it may or may not be stored"));
                }
            }
        }
        self.failure = why;
    }

    fn on_reply(&mut self, message: &Message, outcome: &mut PublishOutcome) {
        self.last_reply = Instant::now();
        self.first_reply = true;
        if let Some(status) = Status::of(message) {
            let why = match status {
                Status::NoResponders => format!(
                    "no stream answers on subject {:?} (503 no responders)",
                    self.subject.as_str()
                ),
                other => format!("status {other:?}"),
            };
            self.finish(outcome, Some(why));
            return;
        }
        let reply = match serde_json::from_slice::<FastBatchReply>(&message.payload) {
            Ok(reply) => reply,
            Err(_) => {
                let why = format!(
                    "unexpected fast batch reply: {}",
                    String::from_utf8_lossy(&message.payload)
                );
                self.finish(outcome, Some(why));
                return;
            }
        };
        match reply.kind.as_deref() {
            Some("ack") => {
                self.ack_up_to(reply.seq, outcome);
                if reply.msgs > 0 {
                    self.flow = reply.msgs;
                }
            }
            Some("gap") => {
                // Informational and possibly out of order: the final PubAck says
                // what was stored.
                let why = format!(
                    "the server did not receive rows {}..{} of the fast batch (a lost message \
                     ends a batch)",
                    self.row(reply.last_seq),
                    self.row(reply.seq).saturating_sub(1)
                );
                self.trouble.get_or_insert(why);
            }
            Some("err") => {
                let row = self.row(reply.seq);
                let why = reply
                    .error
                    .as_ref()
                    .map_or_else(|| "refused".to_string(), describe);
                outcome.fail(row, why.clone());
                self.trouble
                    .get_or_insert_with(|| format!("the fast batch ended at row {row} ({why})"));
            }
            Some(_) => {}
            None => match reply.error {
                Some(e) => self.finish(outcome, Some(describe(&e))),
                None if reply.batch.is_some() => {
                    if reply.duplicate && self.acked == 0 {
                        // The first message was a duplicate: the server answers it
                        // as a plain publish and the batch is over.
                        self.acked = 1;
                        outcome.acked(self.first_row, reply.seq, true);
                        self.sizes.pop_front();
                    } else {
                        self.ack_up_to(reply.count, outcome);
                    }
                    self.finish(outcome, None);
                }
                None if reply.seq > 0 && self.acked == 0 => {
                    // A server without fast-ingest stores the first message as a
                    // plain publish.
                    self.acked = 1;
                    outcome.acked(self.first_row, reply.seq, reply.duplicate);
                    self.finish(
                        outcome,
                        Some(
                            "the server does not support fast publishing (mode='fast' needs \
                             nats-server 2.14 or later); row stored as a plain publish"
                                .into(),
                        ),
                    );
                }
                None => {}
            },
        }
    }
}

/// Whether the next row may have to come from a new input batch (the current one is
/// used up, or there is none yet).
fn may_pull<I>(source: &RowSource<I>) -> bool {
    source
        .current
        .as_ref()
        .is_none_or(|(batch, next)| *next >= batch.num_rows())
}

/// [`send_with_reply`] for a row: the message handed to the connection at once when it
/// has room (the common case, no timer made), else within `within` as there.
async fn send_soon(
    conn: &Connection,
    message: &OutgoingMessage,
    reply: Subject,
    within: Duration,
) -> Result<()> {
    let mut sending = std::pin::pin!(super::send_now(conn, message, reply));
    if let Some(sent) = sending.as_mut().now_or_never() {
        return sent.map_err(Error::from);
    }
    match tokio::time::timeout(within, sending).await {
        Ok(sent) => sent.map_err(Error::from),
        Err(_) => Err(Error::connection(format!(
            "the connection took no message for {within:?} (option 'ack_timeout'): the \
             server is unreachable and the client is still reconnecting"
        ))),
    }
}

/// A batch error in words, with the server's own description and codes.
fn describe(e: &ApiErrorCode) -> String {
    let meaning = match e.err_code {
        err_codes::BATCH_PUBLISH_DISABLED => {
            "the stream does not allow fast publishing: mode='fast' needs a stream with \
             allow_batched (nats-server 2.14 or later); enable it or publish with mode='acked'"
        }
        err_codes::BATCH_PUBLISH_INVALID_PATTERN => {
            "the server refused the fast batch's reply subject"
        }
        err_codes::BATCH_PUBLISH_INVALID_ID => "the server refused the fast batch's id",
        err_codes::BATCH_PUBLISH_UNKNOWN_ID => {
            "the server no longer knows this fast batch (it restarted, changed leader, or \
             abandoned the batch after its idle timeout)"
        }
        _ => "",
    };
    let codes = format!(
        "{} (code {}, err_code {})",
        e.description, e.code, e.err_code
    );
    if meaning.is_empty() {
        codes
    } else {
        format!("{meaning}: {codes}")
    }
}

impl Publisher {
    /// [`Publisher::publish`] in fast mode: batch after batch until the input ends or a
    /// batch ends early; then the rows not sent are refused with that batch's reason.
    pub(super) async fn run_fast<I>(
        &mut self,
        source: &mut RowSource<I>,
        outcome: &mut PublishOutcome,
    ) -> Result<()>
    where
        I: Iterator<Item = Result<RecordBatch>>,
    {
        let id_base = self.rows_before + self.options.msg_id_start;
        let window = self.options.window;
        let mut batch: Option<Batch> = None;
        let mut stop: Option<Error> = None;
        let mut halted: Option<String> = None;
        loop {
            // Rows of an input batch already taken come at once; only the next input
            // batch can keep the open fast batch waiting (the previous row was sent
            // just before this), so only then is the clock read.
            let pulled_at = (batch.is_some() && may_pull(source)).then(Instant::now);
            let (index, message) = match self.next_message(source, outcome, id_base) {
                Ok(Some(next)) => next,
                Ok(None) => break,
                Err(e) => {
                    stop = Some(e);
                    break;
                }
            };
            // A batch whose input paused would be abandoned by the server: end it
            // while it is known, and start a new one.
            if let Some(mut b) = batch.take() {
                if pulled_at.is_none_or(|t| t.elapsed() < defaults::FAST_MAX_IDLE) {
                    batch = Some(b);
                } else {
                    self.end_batch(&mut b, outcome).await?;
                    if let Some(why) = b.failure {
                        halted = Some(why);
                    }
                }
            }
            if halted.is_none() {
                if let Some(b) = batch.as_mut() {
                    self.wait(b, Want::Room { window }, outcome).await?;
                    if b.done || b.trouble.is_some() {
                        if !b.done {
                            self.wait(b, Want::End, outcome).await?;
                        }
                        halted = b
                            .failure
                            .clone()
                            .or(Some("the fast batch ended early".to_string()));
                    }
                }
            }
            if let Some(why) = &halted {
                let why = format!("not sent: {why}");
                outcome.fail(index, why.clone());
                refuse_all(source, outcome, &why)?;
                return stop.map_or(Ok(()), Err);
            }
            match batch.as_mut() {
                Some(b) => self.send(b, &message, outcome).await?,
                None => {
                    let mut b = self.open_batch(index, &message).await?;
                    self.send(&mut b, &message, outcome).await?;
                    self.wait(&mut b, Want::FirstReply, outcome).await?;
                    if b.done {
                        // Refused, or answered as a single publish (a duplicate):
                        // with a reason nothing more is sent; without, the next row
                        // starts a new batch.
                        halted = b.failure.take();
                    } else {
                        batch = Some(b);
                    }
                }
            }
        }
        if let Some(mut b) = batch {
            self.end_batch(&mut b, outcome).await?;
        }
        stop.map_or(Ok(()), Err)
    }

    async fn open_batch(&self, first_row: usize, message: &OutgoingMessage) -> Result<Batch> {
        let inbox = self.conn.client.new_inbox();
        let replies = self.conn.client.subscribe(format!("{inbox}.>")).await?;
        let now = Instant::now();
        let max_bytes_in_flight = self.options.max_bytes_in_flight;
        let flow = requested_flow(
            self.options.window,
            max_bytes_in_flight,
            message.payload.len(),
        );
        Ok(Batch {
            reply_prefix: fast_batch::reply_prefix(&inbox, flow),
            inbox,
            replies,
            first_row,
            sent: 0,
            acked: 0,
            flow: u64::from(flow),
            requested_flow: flow,
            sizes: VecDeque::new(),
            bytes_in_flight: 0,
            max_bytes_in_flight,
            subject: message.subject.clone(),
            first_reply: false,
            last_reply: now,
            last_ping: now,
            trouble: None,
            done: false,
            failure: None,
        })
    }

    async fn send(
        &self,
        b: &mut Batch,
        message: &OutgoingMessage,
        outcome: &mut PublishOutcome,
    ) -> Result<()> {
        let seq = b.sent + 1;
        let op = if seq == 1 {
            fast_batch::OP_START
        } else {
            fast_batch::OP_APPEND
        };
        let reply = Subject::from(fast_batch::reply_after(&b.reply_prefix, seq, op));
        if let Err(e) = send_soon(&self.conn, message, reply, self.options.ack_timeout).await {
            let e = e.context(format!("row {}", b.row(seq)));
            outcome.fail(b.row(seq), e.to_string());
            b.finish(outcome, Some(e.to_string()));
            return Err(e);
        }
        b.sent = seq;
        b.sizes.push_back(message.payload.len());
        b.bytes_in_flight += message.payload.len();
        // Compared rather than cloned: a clone is two atomic operations per row.
        if b.subject != message.subject {
            b.subject = message.subject.clone();
        }
        Ok(())
    }

    /// End the batch with an end-of-batch message (not stored) and wait for the
    /// final PubAck, which says how many rows the batch stored.
    async fn end_batch(&self, b: &mut Batch, outcome: &mut PublishOutcome) -> Result<()> {
        if !b.done && b.trouble.is_none() {
            self.control_or_finish(b, b.sent + 1, fast_batch::OP_COMMIT_EOB, outcome)
                .await?;
        }
        self.wait(b, Want::End, outcome).await
    }

    /// A message that only steers the batch (end of batch, ping): empty, to the
    /// subject of the last row, so the same stream receives it.
    async fn control(&self, b: &Batch, seq: u64, op: u8) -> Result<()> {
        let reply = Subject::from(fast_batch::reply(&b.inbox, b.requested_flow, seq, op));
        let control = OutgoingMessage::control(b.subject.clone());
        send_with_reply(&self.conn, &control, reply, self.options.ack_timeout).await
    }

    /// [`Self::control`]; when it cannot be sent the batch is over, its unacknowledged
    /// rows reported.
    async fn control_or_finish(
        &self,
        b: &mut Batch,
        seq: u64,
        op: u8,
        outcome: &mut PublishOutcome,
    ) -> Result<()> {
        let sent = self.control(b, seq, op).await;
        if let Err(e) = &sent {
            b.finish(outcome, Some(e.to_string()));
        }
        sent
    }

    /// Handle replies until `want` holds. Without replies: ping every
    /// [`defaults::FAST_PING_INTERVAL`]; after `ack_timeout` the batch is over.
    async fn wait(&self, b: &mut Batch, want: Want, outcome: &mut PublishOutcome) -> Result<()> {
        let ack_timeout = self.options.ack_timeout;
        // Read when the first check finds the wait unmet: a row with room costs no clock.
        let mut since: Option<Instant> = None;
        loop {
            while let Some(Some(reply)) = b.replies.next().now_or_never() {
                b.on_reply(&reply, outcome);
            }
            if b.satisfied(want) {
                return Ok(());
            }
            let now = Instant::now();
            let since = *since.get_or_insert(now);
            let quiet_since = b.last_reply.max(since);
            if now >= quiet_since + ack_timeout {
                let why = self.no_ack_reason(b, ack_timeout);
                b.finish(outcome, Some(why));
                return Ok(());
            }
            let ping_due = quiet_since.max(b.last_ping) + defaults::FAST_PING_INTERVAL;
            if now >= ping_due {
                // The sequence is the highest sent, so the ping itself is no gap.
                self.control_or_finish(b, b.sent, fast_batch::OP_PING, outcome)
                    .await?;
                b.last_ping = now;
                continue;
            }
            let wake = ping_due.min(quiet_since + ack_timeout);
            tokio::select! {
                reply = b.replies.next() => match reply {
                    Some(reply) => b.on_reply(&reply, outcome),
                    None => {
                        let why = "the reply subscription closed: the connection was closed";
                        b.finish(outcome, Some(why.into()));
                        return Err(Error::connection(why));
                    }
                },
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    fn no_ack_reason(&self, b: &Batch, ack_timeout: Duration) -> String {
        let conn: &Connection = &self.conn;
        if let Some(violation) = conn
            .server_errors
            .permission_violation_for(b.subject.as_str())
        {
            return format!("permission denied: {violation}");
        }
        if let Some(why) = conn.inbox_refused() {
            return format!("permission denied: no ack: {why}");
        }
        format!("no ack within {ack_timeout:?} (option 'ack_timeout')")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_subjects_carry_the_batch_state() {
        assert_eq!(
            fast_batch::reply("_INBOX.abc", 500, 7, fast_batch::OP_APPEND),
            "_INBOX.abc.500.fail.7.1.$FI"
        );
        // The per-row form writes the same subject from the batch's prefix.
        let prefix = fast_batch::reply_prefix("_INBOX.abc", 500);
        for seq in [0, 1, 9, 10, 1_234_567, u64::MAX] {
            assert_eq!(
                fast_batch::reply_after(&prefix, seq, fast_batch::OP_COMMIT_EOB),
                format!("_INBOX.abc.500.fail.{seq}.3.$FI")
            );
        }
    }

    #[test]
    fn the_requested_flow_fits_the_window_and_the_bytes_in_flight() {
        let max_bytes = defaults::MAX_BYTES_IN_FLIGHT;
        assert_eq!(
            requested_flow(defaults::WINDOW, max_bytes, 128),
            defaults::FAST_FLOW
        );
        assert_eq!(requested_flow(16, max_bytes, 128), 8);
        assert_eq!(requested_flow(1, max_bytes, 128), 1);
        let big = max_bytes / 8;
        assert!(
            usize::from(requested_flow(defaults::WINDOW, max_bytes, big))
                * big
                * (defaults::FAST_OUTSTANDING_ACKS as usize)
                < max_bytes
        );
        // A smaller bound asks for smaller groups.
        assert_eq!(requested_flow(defaults::WINDOW, 1_000, 100), 4);
    }

    #[test]
    fn batch_errors_are_explained() {
        let e = ApiErrorCode {
            code: 400,
            err_code: err_codes::BATCH_PUBLISH_DISABLED,
            description: "batch publish is disabled".into(),
        };
        let why = describe(&e);
        assert!(
            why.contains("allow_batched") && why.contains("10205"),
            "{why}"
        );
    }

    #[test]
    fn replies_are_told_apart() {
        let ack: FastBatchReply =
            serde_json::from_str(r#"{"type":"ack","seq":500,"msgs":250}"#).unwrap();
        assert_eq!(
            (ack.kind.as_deref(), ack.seq, ack.msgs),
            (Some("ack"), 500, 250)
        );
        let end: FastBatchReply =
            serde_json::from_str(r#"{"stream":"S","seq":9,"batch":"x","count":3}"#).unwrap();
        assert_eq!(
            (end.kind, end.batch.as_deref(), end.count),
            (None, Some("x"), 3)
        );
    }
}
