//! The publish engine: rows go out pipelined through a bounded window of
//! unacknowledged messages; acks come back on one wildcard inbox subscription.
//!
//! Each message's reply subject is `<inbox>.<token>`, so an ack names its message
//! without a per-request future or channel. Backpressure from the server
//! (`429 Too Many Requests`, `503 No Responders`) is retried with the same message
//! (same `Nats-Msg-Id`); an ack timeout is retried only when the message has a msg
//! id, because without one the server cannot tell a retry from a new message.
//! Every row ends stored, duplicate, or failed with its reason.
//!
//! [`input`] turns the caller's columns into messages, [`window`] holds the messages
//! awaiting acks, [`acks`] the state of one call (ack classification, retries,
//! expiry), [`outcome`] what became of each row, [`options`] how a publisher sends.
//! The three ways of sending are a room each: `acked.rs` (an ack per message: the
//! loop of filling, waiting and expiring, read in one place), `fast.rs` (fast-ingest
//! batches acked every N messages) and `atomic.rs` (batches stored whole or not at
//! all). This module reads the input, checks its columns before any row, and sends.

mod acked;
mod acks;
mod ahead;
mod atomic;
pub mod copy_identity;
pub mod counter;
mod fast;
pub mod input;
mod options;
mod outcome;
mod rows;
pub mod schedule;
pub mod ttl;
mod window;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use async_nats::header::{self as nats_header, HeaderValue};
use async_nats::{HeaderMap, Subject, Subscriber};
use std::time::Duration;

use crate::codec::ValueEncoder;
use crate::connection::Connection;
use crate::error::{Error, ErrorKind, Result};
use crate::publish::copy_identity::CopyRepeats;
use crate::publish::input::{max_subject_len, MessageDefaults, OutgoingMessage, PublishBatch};

use options::MAX_ACK_TIMEOUT;
pub use options::{OnFull, PublishMode, PublishOptions, MAX_WINDOW};
pub use outcome::PublishOutcome;
use rows::RowSource;

/// A publisher: one ack inbox and one window, reused across many publish calls.
pub struct Publisher {
    conn: Connection,
    options: PublishOptions,
    /// What the options say of every message, taken out once.
    message_defaults: MessageDefaults,
    inbox_prefix: String,
    acks: Subscriber,
    next_token: u64,
    /// Rows published by earlier calls: generated msg ids keep counting across calls.
    rows_before: u64,
    /// Atomic batch ids handed out (each attempt of a batch has its own).
    batches_opened: u64,
    /// A msg id never published, which no stream's last msg id can be: the
    /// expectation of a probe whether a row's msg id is stored (see
    /// [`OutgoingMessage::msg_id_probe`]).
    probe_last_id: String,
    max_payload: usize,
    /// The longest subject a message may have (see [`max_subject_len`]).
    max_subject: usize,
    /// Repeats of alike rows of a copy, counted across calls (see [`CopyRepeats`]).
    copy_repeats: std::sync::Mutex<CopyRepeats>,
}

impl Publisher {
    pub async fn new(conn: Connection, mut options: PublishOptions) -> Result<Self> {
        options.validate()?;
        options.ack_timeout = options.ack_timeout.min(MAX_ACK_TIMEOUT);
        let inbox = conn.client.new_inbox();
        let acks = conn.client.subscribe(format!("{inbox}.*")).await?;
        let max_payload = conn.max_payload();
        let inbox_prefix = format!("{inbox}.");
        let probe_last_id = format!("{inbox}.no-such-msg-id");
        // Reply subjects are the inbox prefix and at most 64 more bytes (a token of up
        // to 20 digits; in fast mode, the batch state).
        let max_subject = max_subject_len(inbox_prefix.len() + 64, max_payload);
        Ok(Self {
            conn,
            message_defaults: options.message_defaults(),
            options,
            inbox_prefix,
            acks,
            next_token: 0,
            rows_before: 0,
            batches_opened: 0,
            probe_last_id,
            max_payload,
            max_subject,
            copy_repeats: Default::default(),
        })
    }

    /// Publish every row of `batches`, all of them in `schema`. Returns the outcome
    /// of every row read, and the error that stopped reading input early, if any (bad
    /// input, lost connection). Messages already in flight are always seen to the end
    /// first, so the outcome says exactly which rows were stored.
    pub async fn publish<I>(
        &mut self,
        schema: SchemaRef,
        batches: I,
        subject: Option<String>,
    ) -> (PublishOutcome, Option<Error>)
    where
        I: Iterator<Item = Result<RecordBatch>>,
    {
        let mut outcome = PublishOutcome::default();
        let subject = subject.or_else(|| self.options.subject.clone());
        // Value columns become payloads batch by batch, as the rows are taken.
        let mut encoder = match self.options.values.as_ref().map(ValueEncoder::new) {
            Some(Ok(encoder)) => Some(encoder),
            Some(Err(e)) => return (outcome, Some(e)),
            None => None,
        };
        let schema = match &mut encoder {
            Some(encoder) => match encoder.schema(&schema) {
                Ok(schema) => schema,
                Err(e) => return (outcome, Some(e)),
            },
            None => schema,
        };
        let batches = batches.map(move |batch| match &mut encoder {
            Some(encoder) => batch.and_then(|b| encoder.encode(&b)),
            None => batch,
        });
        // The columns are checked before any row, so an input is refused for a
        // missing or mistyped column whether or not it has rows.
        let empty = RecordBatch::new_empty(schema);
        match PublishBatch::new(&empty, subject.as_deref(), self.max_subject) {
            Ok(columns) => {
                if let Err(e) = self.options.check_expectation_columns(&columns) {
                    return (outcome, Some(e));
                }
                if columns.is_increments() {
                    outcome.count_values();
                }
            }
            Err(e) => return (outcome, Some(e)),
        }
        let mut source = RowSource {
            batches,
            current: None,
            subject,
            max_subject: self.max_subject,
            compression: self.options.compression,
            taken: 0,
            exhausted: false,
        };
        let result = match self.options.mode {
            PublishMode::Acked => self.run_acked(&mut source, &mut outcome).await,
            PublishMode::Fast => self.run_fast(&mut source, &mut outcome).await,
            PublishMode::Atomic => self.run_atomic(&mut source, &mut outcome).await,
        };
        match &result {
            // Bad input stops at the row it names; the result reports the rows
            // before it, as the error says.
            Err(e) if e.kind() == ErrorKind::BadInput => {}
            // A lost connection: rows read with their batch but never sent fail too,
            // so the outcome names every row of the input it has seen.
            Err(e) => outcome.fail_unresolved(&format!("not sent: {e}")),
            Ok(()) => {}
        }
        self.rows_before += source.taken as u64;
        outcome.tell_summary();
        (outcome, result.err())
    }

    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

/// The optimistic-concurrency headers of the first row of a call.
impl Publisher {
    /// The next row of `source` as a message: its msg id numbered from `id_base`, the
    /// expectations on the call's first row; None at the end of the input. An error
    /// is bad input naming the column and row, after which no row may be taken.
    fn next_message<I: Iterator<Item = Result<RecordBatch>>>(
        &self,
        source: &mut RowSource<I>,
        outcome: &mut PublishOutcome,
        id_base: u64,
    ) -> Result<Option<(usize, OutgoingMessage)>> {
        let Some((index, batch, row)) = source.next_row(outcome)? else {
            return Ok(None);
        };
        // An atomic batch's headers are added to each message when it is sent.
        let max_payload = match self.options.mode {
            PublishMode::Atomic => self.max_payload.saturating_sub(atomic::BATCH_HEADERS_LEN),
            _ => self.max_payload,
        };
        let mut message = batch.message(
            row,
            index as u64,
            id_base + index as u64,
            &self.message_defaults,
            max_payload,
            // Only this publisher's own task takes rows: never contended.
            &mut self
                .copy_repeats
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )?;
        if index == 0 {
            add_expectations(&self.options, &mut message);
        }
        Ok(Some((index, message)))
    }
}

fn add_expectations(options: &PublishOptions, message: &mut OutgoingMessage) {
    if !options.has_expectations() {
        return;
    }
    let headers = message.headers.get_or_insert_with(HeaderMap::new);
    if let Some(seq) = options.expected_last_seq {
        headers.insert(
            nats_header::NATS_EXPECTED_LAST_SEQUENCE,
            HeaderValue::from(seq),
        );
    }
    if let Some(id) = &options.expected_last_msg_id {
        // Free of line breaks (`PublishOptions::validate`), so this cannot fail.
        if let Ok(id) = id.parse::<HeaderValue>() {
            headers.insert(nats_header::NATS_EXPECTED_LAST_MESSAGE_ID, id);
        }
    }
    if let Some(seq) = options.expected_last_subject_seq {
        headers.insert(
            nats_header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
            HeaderValue::from(seq),
        );
    }
}

/// The token of the message an ack answers: the last token of its subject,
/// `<inbox>.<token>` (None for a subject that is not one of the publisher's).
fn reply_token(ack: &async_nats::Message) -> Option<u64> {
    ack.subject.rsplit('.').next()?.parse().ok()
}

/// Send `message` with the reply subject `<inbox>.<token>`; returns the token its ack
/// will carry.
async fn send(
    conn: &Connection,
    inbox_prefix: &str,
    next_token: &mut u64,
    message: &OutgoingMessage,
    within: Duration,
) -> Result<u64> {
    let token = *next_token;
    *next_token += 1;
    let reply = Subject::from(format!("{inbox_prefix}{token}"));
    send_with_reply(conn, message, reply, within).await?;
    Ok(token)
}

/// Send `message` with `reply` as its reply subject, with its headers if it has any.
///
/// The client queues what it sends; the queue is full only while the connection is
/// down and the client reconnects, which may last forever (`max_reconnects=None`).
/// Waiting for room is bounded by `within` (the ack timeout), so a publish ends with
/// a connection error instead of waiting for a server that does not come back.
async fn send_with_reply(
    conn: &Connection,
    message: &OutgoingMessage,
    reply: Subject,
    within: Duration,
) -> Result<()> {
    match tokio::time::timeout(within, send_now(conn, message, reply)).await {
        Ok(sent) => sent.map_err(Error::from),
        Err(_) => Err(Error::connection(format!(
            "the connection took no message for {within:?} (option 'ack_timeout'): the \
             server is unreachable and the client is still reconnecting"
        ))),
    }
}

async fn send_now(
    conn: &Connection,
    message: &OutgoingMessage,
    reply: Subject,
) -> std::result::Result<(), async_nats::client::PublishError> {
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
                .await
        }
        None => {
            client
                .publish_with_reply(message.subject.clone(), reply, message.payload.clone())
                .await
        }
    }
}
