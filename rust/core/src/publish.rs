//! The publish engine: rows go out pipelined through a bounded window of
//! unacknowledged messages; acks come back on one wildcard inbox subscription.
//!
//! Each message's reply subject is `<inbox>.<token>`, so an ack names its message
//! without a per-request future or channel. Backpressure from the server
//! (`429 Too Many Requests`, `503 No Responders`) is retried with the same message
//! (same `Nats-Msg-Id`); an ack timeout is retried only when the message has a msg
//! id, because without one the server cannot tell a retry from a new message.
//! Every row ends stored, duplicate, or failed with its reason.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::builder::{BooleanBuilder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use async_nats::{HeaderMap, Subject, Subscriber};
use futures::{FutureExt, StreamExt};
use tokio::time::Instant;

use crate::api::types::PublishReply;
use crate::api::Status;
use crate::connection::Connection;
use crate::defaults;
use crate::error::{err_codes, Error, Result};
use crate::publish_input::{MessageDefaults, OutgoingMessage, PublishBatch};
use crate::schema::ack_schema;

/// The largest window: acks must fit the client's subscription buffer (64 Ki).
pub const MAX_WINDOW: usize = 65_536;

/// Payload bytes in flight at most, whatever the window. With large messages the
/// count alone would hold window × size in memory (8192 × 16 KiB = 128 MiB), while
/// 32 MiB in flight already keeps a server busy: at 1 GB/s it allows 30 ms from
/// sending a message to its ack.
pub const MAX_BYTES_IN_FLIGHT: usize = 32 << 20;
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// How a publisher sends.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// Unacknowledged messages in flight at most.
    pub window: usize,
    /// When the window is full: refuse the remaining rows instead of waiting.
    pub fail_when_full: bool,
    pub ack_timeout: Duration,
    /// Retries of a message after backpressure or an ack timeout.
    pub max_retries: u32,
    /// The first retry waits this long; each further one twice as long (at most 2 s).
    pub retry_backoff: Duration,
    pub defaults: MessageDefaults,
    /// The number generated msg ids start from.
    pub msg_id_start: u64,
    pub expected_last_seq: Option<u64>,
    pub expected_last_msg_id: Option<String>,
    pub expected_last_subject_seq: Option<u64>,
}

impl Default for PublishOptions {
    fn default() -> Self {
        Self {
            window: defaults::WINDOW,
            fail_when_full: false,
            ack_timeout: defaults::ACK_TIMEOUT,
            max_retries: defaults::MAX_RETRIES,
            retry_backoff: defaults::RETRY_BACKOFF,
            defaults: MessageDefaults::default(),
            msg_id_start: 0,
            expected_last_seq: None,
            expected_last_msg_id: None,
            expected_last_subject_seq: None,
        }
    }
}

impl PublishOptions {
    pub fn validate(&self) -> Result<()> {
        if self.window == 0 || self.window > MAX_WINDOW {
            return Err(Error::bad_input(format!(
                "option 'window' must be between 1 and {MAX_WINDOW}, got {}",
                self.window
            )));
        }
        if self.ack_timeout.is_zero() {
            return Err(Error::bad_input("option 'ack_timeout' must be positive"));
        }
        if let Some(prefix) = &self.defaults.msg_id_prefix {
            if prefix.contains(['\r', '\n']) {
                return Err(Error::bad_input(
                    "option 'msg_id_prefix' may not contain line breaks",
                ));
            }
        }
        Ok(())
    }

    fn has_expectations(&self) -> bool {
        self.expected_last_seq.is_some()
            || self.expected_last_msg_id.is_some()
            || self.expected_last_subject_seq.is_some()
    }
}

/// What happened to each row of one publish call.
#[derive(Debug, Default)]
pub struct PublishOutcome {
    /// Stream sequence per row; 0 while pending or when failed.
    seqs: Vec<u64>,
    duplicate: Vec<bool>,
    errors: HashMap<usize, String>,
    pub stored: usize,
    pub duplicates: usize,
}

impl PublishOutcome {
    pub fn rows(&self) -> usize {
        self.seqs.len()
    }

    pub fn failed(&self) -> usize {
        self.errors.len()
    }

    /// The error of `row`, if it failed.
    pub fn error(&self, row: usize) -> Option<&str> {
        self.errors.get(&row).map(String::as_str)
    }

    pub fn seq(&self, row: usize) -> Option<u64> {
        Some(self.seqs[row]).filter(|&s| s > 0)
    }

    fn add_rows(&mut self, n: usize) {
        self.seqs.resize(self.seqs.len() + n, 0);
        self.duplicate.resize(self.duplicate.len() + n, false);
    }

    fn acked(&mut self, row: usize, seq: u64, duplicate: bool) {
        self.seqs[row] = seq;
        if duplicate {
            self.duplicate[row] = true;
            self.duplicates += 1;
        } else {
            self.stored += 1;
        }
    }

    fn fail(&mut self, row: usize, why: String) {
        self.errors.insert(row, why);
    }

    /// `seq` (int64, null unless acked), `duplicate` (bool), `error` (utf8, null when ok).
    pub fn to_record_batch(&self) -> RecordBatch {
        let n = self.rows();
        let mut seq = Int64Builder::with_capacity(n);
        let mut dup = BooleanBuilder::with_capacity(n);
        let mut err = StringBuilder::with_capacity(n, 0);
        for row in 0..n {
            match self.seqs[row] {
                0 => seq.append_null(),
                s => seq.append_value(s as i64),
            }
            dup.append_value(self.duplicate[row]);
            err.append_option(self.errors.get(&row));
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(seq.finish()),
            Arc::new(dup.finish()),
            Arc::new(err.finish()),
        ];
        RecordBatch::try_new(ack_schema(), columns).expect("ack columns match ack_schema")
    }
}

enum AckResult {
    Stored {
        seq: u64,
        duplicate: bool,
    },
    /// Not stored, safe to send again (backpressure, no stream leader yet).
    Retry(String),
    Failed(String),
}

fn classify(message: &async_nats::Message, subject: &str) -> AckResult {
    if let Some(status) = Status::of(message) {
        return match status {
            Status::NoResponders => AckResult::Retry(format!(
                "no stream answers on subject {subject:?} (503 no responders): no stream \
                 captures this subject, or its leader is not elected yet"
            )),
            Status::TooManyRequests => AckResult::Retry(format!(
                "429 {}",
                message.description.as_deref().unwrap_or_default()
            )),
            other => AckResult::Failed(format!("status {other:?}")),
        };
    }
    match serde_json::from_slice::<PublishReply>(&message.payload) {
        Ok(PublishReply { error: Some(e), .. }) => {
            let why = format!(
                "{} (code {}, err_code {})",
                e.description, e.code, e.err_code
            );
            if e.code == 429 || e.err_code == err_codes::TOO_MANY_REQUESTS || e.code == 503 {
                AckResult::Retry(why)
            } else {
                AckResult::Failed(why)
            }
        }
        Ok(PublishReply { seq, duplicate, .. }) if seq > 0 => AckResult::Stored { seq, duplicate },
        _ => AckResult::Failed(format!(
            "unexpected publish reply: {}",
            String::from_utf8_lossy(&message.payload)
        )),
    }
}

struct InFlight {
    row: usize,
    attempt: u32,
    message: OutgoingMessage,
    deadline: Instant,
}

/// Messages awaiting their ack, in send order. Tokens are consecutive, so the slot
/// of token `t` is `t - base`: no hashing per message, and since the ack timeout is
/// constant the oldest deadline is always at the front.
#[derive(Default)]
struct Window {
    base: u64,
    slots: VecDeque<Option<InFlight>>,
    len: usize,
    /// Payload bytes of the messages in flight.
    bytes: usize,
}

impl Window {
    fn len(&self) -> usize {
        self.len
    }

    /// Whether another message may be sent: fewer than `window` messages and fewer
    /// than [`MAX_BYTES_IN_FLIGHT`] payload bytes in flight.
    fn has_room(&self, window: usize) -> bool {
        self.len < window && self.bytes < MAX_BYTES_IN_FLIGHT
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn push(
        &mut self,
        token: u64,
        row: usize,
        attempt: u32,
        message: OutgoingMessage,
        ack_timeout: Duration,
    ) {
        let entry = InFlight {
            row,
            attempt,
            message,
            deadline: Instant::now() + ack_timeout,
        };
        if self.slots.is_empty() {
            self.base = token;
        }
        debug_assert_eq!(token, self.base + self.slots.len() as u64);
        self.bytes += entry.message.payload.len();
        self.slots.push_back(Some(entry));
        self.len += 1;
    }

    fn take(&mut self, token: u64) -> Option<InFlight> {
        let index = usize::try_from(token.checked_sub(self.base)?).ok()?;
        let entry = self.slots.get_mut(index)?.take()?;
        self.len -= 1;
        self.bytes -= entry.message.payload.len();
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.base += 1;
        }
        Some(entry)
    }

    fn oldest_deadline(&self) -> Option<Instant> {
        self.slots
            .front()
            .and_then(|s| s.as_ref())
            .map(|e| e.deadline)
    }

    /// The oldest message if its deadline has passed.
    fn pop_expired(&mut self, now: Instant) -> Option<InFlight> {
        if self.oldest_deadline()? > now {
            return None;
        }
        let token = self.base;
        self.take(token)
    }
}

struct Retry {
    row: usize,
    attempt: u32,
    message: OutgoingMessage,
}

/// Messages waiting to be sent again, by the time they are due (ties in arrival order).
#[derive(Default)]
struct RetryQueue {
    due: BTreeMap<(Instant, u64), Retry>,
    arrivals: u64,
}

impl RetryQueue {
    fn push(&mut self, at: Instant, retry: Retry) {
        self.arrivals += 1;
        self.due.insert((at, self.arrivals), retry);
    }

    /// The earliest retry, if it is due by `now`.
    fn pop_due(&mut self, now: Instant) -> Option<Retry> {
        let entry = self.due.first_entry()?;
        (entry.key().0 <= now).then(|| entry.remove())
    }

    fn next_due(&self) -> Option<Instant> {
        self.due.first_key_value().map(|(k, _)| k.0)
    }

    fn is_empty(&self) -> bool {
        self.due.is_empty()
    }
}

/// The state of one publish call: what is in flight, what waits to be retried, and
/// what became of each row so far.
struct PublishRun<'a> {
    options: &'a PublishOptions,
    conn: &'a Connection,
    in_flight: Window,
    retries: RetryQueue,
    /// With expected-last-* checks, the row that must be stored before any other is
    /// sent (the first); None once it was stored, or without checks.
    gate: Option<usize>,
    outcome: &'a mut PublishOutcome,
}

impl PublishRun<'_> {
    fn on_ack(&mut self, ack: async_nats::Message) {
        let token = ack
            .subject
            .rsplit('.')
            .next()
            .and_then(|t| t.parse::<u64>().ok());
        // An ack for a message already timed out and resent (or from an earlier
        // call) has no entry: the resend's own ack decides.
        let Some(entry) = token.and_then(|t| self.in_flight.take(t)) else {
            return;
        };
        match classify(&ack, entry.message.subject.as_str()) {
            AckResult::Stored { seq, duplicate } => {
                self.outcome.acked(entry.row, seq, duplicate);
                if self.gate == Some(entry.row) {
                    self.gate = None;
                }
            }
            AckResult::Retry(why) => self.retry_or_fail(entry, why),
            AckResult::Failed(why) => self.outcome.fail(entry.row, why),
        }
    }

    fn retry_or_fail(&mut self, entry: InFlight, why: String) {
        if entry.attempt >= self.options.max_retries {
            self.outcome.fail(
                entry.row,
                format!(
                    "{why}; gave up after {} retries (option 'max_retries')",
                    entry.attempt
                ),
            );
            return;
        }
        let backoff = self
            .options
            .retry_backoff
            .saturating_mul(1u32 << entry.attempt.min(16))
            .min(MAX_BACKOFF);
        self.retries.push(
            Instant::now() + backoff,
            Retry {
                row: entry.row,
                attempt: entry.attempt + 1,
                message: entry.message,
            },
        );
    }

    /// Messages whose ack did not come in time: retried when a msg id makes that
    /// safe, reported otherwise.
    fn expire(&mut self) {
        let now = Instant::now();
        while let Some(entry) = self.in_flight.pop_expired(now) {
            let subject = entry.message.subject.to_string();
            if let Some(violation) = self.conn.server_errors.permission_violation_for(&subject) {
                self.outcome
                    .fail(entry.row, format!("permission denied: {violation}"));
                continue;
            }
            let why = format!(
                "no ack within {:?} (option 'ack_timeout')",
                self.options.ack_timeout
            );
            if entry.message.has_msg_id && self.gate != Some(entry.row) {
                self.retry_or_fail(entry, why);
            } else {
                // Without a msg id the server cannot recognise a resend, so a retry
                // could store the row twice; report it instead.
                self.outcome.fail(
                    entry.row,
                    format!(
                        "{why}; not retried because the row has no msg id, so it may or may not \
                         be stored (give rows a msg_id or use msg_id_prefix to make retries safe)"
                    ),
                );
            }
        }
    }

    /// When to wake up if no ack comes: the oldest deadline or the next retry.
    fn next_wake(&self) -> Instant {
        [self.in_flight.oldest_deadline(), self.retries.next_due()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or_else(|| Instant::now() + self.options.ack_timeout)
    }

    fn is_idle(&self) -> bool {
        self.in_flight.is_empty() && self.retries.is_empty()
    }
}

/// Pulls rows out of the input batches one at a time.
struct RowSource<I> {
    batches: I,
    current: Option<(PublishBatch, usize)>,
    subject: Option<String>,
    /// Rows taken so far in this call.
    taken: usize,
    exhausted: bool,
}

impl<I: Iterator<Item = Result<RecordBatch>>> RowSource<I> {
    /// The next row as (row index within the call, its batch, row within the batch).
    /// New rows are registered in `outcome` as they are reached.
    fn next_row(
        &mut self,
        outcome: &mut PublishOutcome,
    ) -> Result<Option<(usize, &PublishBatch, usize)>> {
        loop {
            if self.exhausted {
                return Ok(None);
            }
            let needs_batch = match &self.current {
                Some((batch, next)) => *next >= batch.num_rows(),
                None => true,
            };
            if needs_batch {
                match self.batches.next() {
                    None => {
                        self.exhausted = true;
                        return Ok(None);
                    }
                    Some(batch) => {
                        let batch = batch.map_err(|e| e.context("reading the input"))?;
                        let checked = PublishBatch::new(&batch, self.subject.as_deref())?;
                        outcome.add_rows(checked.num_rows());
                        self.current = Some((checked, 0));
                    }
                }
                continue;
            }
            let (batch, next) = self.current.as_mut().expect("a current batch");
            let row = *next;
            *next += 1;
            let index = self.taken;
            self.taken += 1;
            return Ok(Some((index, batch, row)));
        }
    }
}

/// A publisher: one ack inbox and one window, reused across many publish calls.
pub struct Publisher {
    conn: Connection,
    options: PublishOptions,
    inbox_prefix: String,
    acks: Subscriber,
    next_token: u64,
    /// Rows published by earlier calls: generated msg ids keep counting across calls.
    rows_before: u64,
    max_payload: usize,
}

impl Publisher {
    pub async fn new(conn: Connection, options: PublishOptions) -> Result<Self> {
        options.validate()?;
        let inbox = conn.client.new_inbox();
        let acks = conn.client.subscribe(format!("{inbox}.*")).await?;
        let max_payload = conn.max_payload();
        Ok(Self {
            conn,
            options,
            inbox_prefix: format!("{inbox}."),
            acks,
            next_token: 0,
            rows_before: 0,
            max_payload,
        })
    }

    /// Publish every row of `batches`. Returns the outcome of every row read, and
    /// the error that stopped reading input early, if any (bad input, lost
    /// connection). Messages already in flight are always seen to the end first,
    /// so the outcome says exactly which rows were stored.
    pub async fn publish<I>(
        &mut self,
        batches: I,
        subject: Option<String>,
    ) -> (PublishOutcome, Option<Error>)
    where
        I: Iterator<Item = Result<RecordBatch>>,
    {
        let mut outcome = PublishOutcome::default();
        let mut source = RowSource {
            batches,
            current: None,
            subject: subject.or_else(|| self.options.defaults.subject.clone()),
            taken: 0,
            exhausted: false,
        };
        let result = self.run(&mut source, &mut outcome).await;
        self.rows_before += source.taken as u64;
        (outcome, result.err())
    }

    async fn run<I>(
        &mut self,
        source: &mut RowSource<I>,
        outcome: &mut PublishOutcome,
    ) -> Result<()>
    where
        I: Iterator<Item = Result<RecordBatch>>,
    {
        let window = self.options.window;
        let mut run = PublishRun {
            options: &self.options,
            conn: &self.conn,
            in_flight: Window::default(),
            retries: RetryQueue::default(),
            // With expected-last-* checks, the first row goes alone; the rest follows
            // only if it was stored, so a failed expectation stores nothing.
            gate: self.options.has_expectations().then_some(0),
            outcome,
        };
        let mut stop: Option<Error> = None;
        let id_base = self.rows_before + self.options.msg_id_start;

        loop {
            // 1. Fill the window: due retries first, then new rows.
            let now = Instant::now();
            while run.in_flight.has_room(window) {
                if let Some(r) = run.retries.pop_due(now) {
                    let token = send(
                        &self.conn,
                        &self.inbox_prefix,
                        &mut self.next_token,
                        &r.message,
                    )
                    .await
                    .map_err(|e| e.context(format!("row {}", r.row)))?;
                    run.in_flight.push(
                        token,
                        r.row,
                        r.attempt,
                        r.message,
                        self.options.ack_timeout,
                    );
                    continue;
                }
                if stop.is_some() || run.gate.is_some_and(|g| g < source.taken) {
                    break;
                }
                let next = match source.next_row(run.outcome) {
                    Ok(next) => next,
                    Err(e) => {
                        stop = Some(e);
                        break;
                    }
                };
                let Some((index, batch, row)) = next else {
                    break;
                };
                let mut message = match batch.message(
                    row,
                    index as u64,
                    id_base + index as u64,
                    &self.options.defaults,
                    self.max_payload,
                ) {
                    Ok(m) => m,
                    Err(e) => {
                        stop = Some(e);
                        break;
                    }
                };
                if index == 0 {
                    add_expectations(&self.options, &mut message);
                }
                let token = send(
                    &self.conn,
                    &self.inbox_prefix,
                    &mut self.next_token,
                    &message,
                )
                .await
                .map_err(|e| e.context(format!("row {index}")))?;
                run.in_flight
                    .push(token, index, 0, message, self.options.ack_timeout);
            }
            if self.options.fail_when_full && run.in_flight.len() >= window && stop.is_none() {
                refuse_rest(source, run.outcome, window)?;
            }
            let input_done = source.exhausted || stop.is_some();
            if run.is_idle() && input_done {
                break;
            }
            if run.is_idle() {
                if let Some(g) = run.gate {
                    // The gated first row failed: nothing else may be sent.
                    let why = format!(
                        "not sent: row {g} failed its expected-last check ({})",
                        run.outcome.error(g).unwrap_or("?")
                    );
                    refuse_all(source, run.outcome, &why)?;
                    break;
                }
            }

            // 2. Wait for acks, the oldest deadline, or the next retry.
            let wake = run.next_wake();
            tokio::select! {
                ack = self.acks.next() => match ack {
                    Some(ack) => run.on_ack(ack),
                    None => return Err(Error::connection("the ack subscription closed: the connection was closed")),
                },
                _ = tokio::time::sleep_until(wake) => {}
            }
            // Take every ack already here before sending more.
            while let Some(Some(ack)) = self.acks.next().now_or_never() {
                run.on_ack(ack);
            }
            run.expire();
        }
        match stop {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

/// The optimistic-concurrency headers of the first row of a call.
fn add_expectations(options: &PublishOptions, message: &mut OutgoingMessage) {
    if !options.has_expectations() {
        return;
    }
    let headers = message.headers.get_or_insert_with(HeaderMap::new);
    if let Some(seq) = options.expected_last_seq {
        headers.insert("Nats-Expected-Last-Sequence", seq.to_string().as_str());
    }
    if let Some(id) = &options.expected_last_msg_id {
        headers.insert("Nats-Expected-Last-Msg-Id", id.as_str());
    }
    if let Some(seq) = options.expected_last_subject_seq {
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence",
            seq.to_string().as_str(),
        );
    }
}

/// Send `message` with the reply subject `<inbox>.<token>`; returns the token its ack
/// will carry.
async fn send(
    conn: &Connection,
    inbox_prefix: &str,
    next_token: &mut u64,
    message: &OutgoingMessage,
) -> Result<u64> {
    let token = *next_token;
    *next_token += 1;
    let reply = Subject::from(format!("{inbox_prefix}{token}"));
    let client = &conn.client;
    match &message.headers {
        Some(h) => {
            client
                .publish_with_reply_and_headers(
                    message.subject.clone(),
                    reply,
                    h.clone(),
                    message.payload.clone(),
                )
                .await?
        }
        None => {
            client
                .publish_with_reply(message.subject.clone(), reply, message.payload.clone())
                .await?
        }
    }
    Ok(token)
}

fn refuse_rest<I: Iterator<Item = Result<RecordBatch>>>(
    source: &mut RowSource<I>,
    outcome: &mut PublishOutcome,
    window: usize,
) -> Result<()> {
    let why = format!("not sent: the ack window of {window} messages was full (on_full='fail')");
    refuse_all(source, outcome, &why)
}

fn refuse_all<I: Iterator<Item = Result<RecordBatch>>>(
    source: &mut RowSource<I>,
    outcome: &mut PublishOutcome,
    why: &str,
) -> Result<()> {
    while let Some((index, _, _)) = source.next_row(outcome)? {
        outcome.fail(index, why.to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(status: Option<u16>, payload: &str) -> async_nats::Message {
        async_nats::Message {
            subject: Subject::from("_INBOX.x.1"),
            reply: None,
            payload: bytes::Bytes::from(payload.to_string()),
            headers: None,
            status: status.map(|s| async_nats::StatusCode::from_u16(s).unwrap()),
            description: None,
            length: 0,
        }
    }

    #[test]
    fn acks_are_classified() {
        assert!(matches!(
            classify(&message(None, r#"{"stream":"S","seq":7}"#), "a"),
            AckResult::Stored {
                seq: 7,
                duplicate: false
            }
        ));
        assert!(matches!(
            classify(
                &message(None, r#"{"stream":"S","seq":7,"duplicate":true}"#),
                "a"
            ),
            AckResult::Stored {
                seq: 7,
                duplicate: true
            }
        ));
        assert!(matches!(
            classify(&message(Some(503), ""), "a"),
            AckResult::Retry(_)
        ));
        assert!(matches!(
            classify(
                &message(
                    None,
                    r#"{"error":{"code":429,"err_code":10167,"description":"too many"}}"#
                ),
                "a"
            ),
            AckResult::Retry(_)
        ));
        match classify(
            &message(
                None,
                r#"{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"}}"#,
            ),
            "a",
        ) {
            AckResult::Failed(why) => assert!(why.contains("wrong last sequence"), "{why}"),
            _ => panic!("a 400 is final"),
        }
    }

    #[test]
    fn outcome_reports_each_row() {
        let mut o = PublishOutcome::default();
        o.add_rows(3);
        o.acked(0, 5, false);
        o.acked(2, 4, true);
        o.fail(1, "bad".into());
        let b = o.to_record_batch();
        assert_eq!(b.num_rows(), 3);
        assert_eq!((o.stored, o.duplicates, o.failed()), (1, 1, 1));
        assert_eq!(o.seq(1), None);
        assert_eq!(o.error(1), Some("bad"));
    }

    fn push(w: &mut Window, token: u64, row: usize, size: usize) {
        let message = OutgoingMessage {
            subject: Subject::from("a"),
            headers: None,
            payload: bytes::Bytes::from(vec![b'x'; size]),
            has_msg_id: false,
        };
        w.push(token, row, 0, message, Duration::ZERO);
    }

    #[test]
    fn window_is_bounded_by_count_and_by_payload_bytes() {
        let mut w = Window::default();
        push(&mut w, 7, 0, 10);
        push(&mut w, 8, 1, 10);
        assert!(w.has_room(3));
        assert!(!w.has_room(2), "two messages fill a window of two");
        let big = MAX_BYTES_IN_FLIGHT - 20;
        push(&mut w, 9, 2, big);
        assert!(!w.has_room(100), "the payload bound is reached");
        assert_eq!(w.take(9).map(|e| e.row), Some(2));
        assert!(w.has_room(100));
        assert_eq!(w.take(7).map(|e| e.row), Some(0));
        assert_eq!((w.len(), w.bytes, w.base), (1, 10, 8));
        assert!(
            w.take(7).is_none(),
            "an ack for a token already taken is ignored"
        );
    }
}
