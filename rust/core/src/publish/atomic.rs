//! Atomic batch publishing (`mode="atomic"`): rows go out in batches of `batch_rows`
//! that the stream stores whole or not at all (streams with `allow_atomic`,
//! nats-server 2.12+).
//!
//! Every message of a batch carries `Nats-Batch-Id` and its `Nats-Batch-Sequence`;
//! the last one also `Nats-Batch-Commit: 1`. The server stages the messages, answers
//! each with an empty reply, and on the commit checks and stores the whole batch under
//! one lock, answering with a PubAck of the last sequence and the batch's `count`; the
//! batch's rows hold the `count` sequences up to it. Any refusal abandons the batch:
//! none of its rows is stored.
//!
//! A batch's rows are taken from the input before its first message is sent, so a
//! slow input never leaves a batch idle on the server (which abandons it after 10 s).
//! One batch is open at a time, its messages pipelined within the publisher's window;
//! batches are stored in input order.
//!
//! What may be sent again: a batch the server abandoned (`incomplete`), refused for
//! load (`429`, too many open batches) or that no stream answered (`503`) stored
//! nothing, so it is sent again under a new id, with or without msg ids. A batch whose
//! commit went unanswered may or may not be stored: it is sent again only when every
//! row has a msg id. If it was stored, the server refuses the new attempt for
//! holding a msg id it already has (`10201`, which does not say which). Each row with
//! a msg id is then asked about alone, with an expectation no stream can meet
//! (`Nats-Expected-Last-Msg-Id` of a fresh random id): the server answers a msg id it
//! holds as a duplicate before it looks at expectations, and refuses any other
//! without storing it. The duplicates are reported as such (what a re-run of stored
//! rows reports in acked mode); the batch's other rows are sent again, together, as a
//! batch.
//!
//! It is one module because a batch's attempts, its verdicts and the probe of its
//! duplicates are one protocol, read in one place; the tail is its unit tests.

use std::collections::HashMap;

use arrow_array::RecordBatch;
use async_nats::header::{self as nats_header, HeaderValue};
use async_nats::Message;
use futures::{FutureExt, StreamExt};
use tokio::time::Instant;

use super::acks::expectations_of;
use super::outcome::PublishOutcome;
use super::rows::RowSource;
use super::{reply_token, send, Publisher};
use crate::api::headers::{
    BATCH_COMMIT, BATCH_COMMIT_STORE, BATCH_ID, BATCH_ID_MAX_LEN, BATCH_SEQUENCE,
};
use crate::api::types::FastBatchReply;
use crate::api::Status;
use crate::error::{err_codes, Error, Result};
use crate::publish::input::OutgoingMessage;
use crate::retry::Backoff;

/// The most bytes the batch headers add to a message: `NATS/1.0` when it had no
/// headers, the id (at most 64 bytes), a sequence of up to 20 digits and the commit.
pub(super) const BATCH_HEADERS_LEN: usize = "NATS/1.0\r\n\r\n".len()
    + BATCH_ID.len()
    + 2
    + BATCH_ID_MAX_LEN
    + 2
    + BATCH_SEQUENCE.len()
    + 2
    + 20
    + 2
    + BATCH_COMMIT.len()
    + 2
    + BATCH_COMMIT_STORE.len()
    + 2;

/// One batch of the call: rows in input order with their messages, kept until the
/// batch is resolved so that it can be sent again.
struct AtomicBatch {
    rows: Vec<(usize, OutgoingMessage)>,
}

impl AtomicBatch {
    fn first_row(&self) -> usize {
        self.rows.first().map_or(0, |(row, _)| *row)
    }

    fn last_row(&self) -> usize {
        self.rows.last().map_or(0, |(row, _)| *row)
    }

    /// "rows 3..7" or "row 3", as errors name the batch.
    fn describe(&self) -> String {
        match (self.first_row(), self.last_row()) {
            (first, last) if first == last => format!("row {first}"),
            (first, last) => format!("rows {first}..={last}"),
        }
    }

    /// The rows' expected-last checks, as a refusal names them ("" without any).
    fn checks(&self) -> String {
        const SHOWN: usize = 5;
        let checked: Vec<String> = self
            .rows
            .iter()
            .filter(|(_, m)| m.has_expectation)
            .filter_map(|(row, m)| expectations_of(m).map(|e| format!("row {row}: {e}")))
            .collect();
        match checked.len() {
            0 => String::new(),
            n if n <= SHOWN => format!("; the batch's checks: {}", checked.join("; ")),
            n => format!(
                "; the batch's checks: {}; and {} more",
                checked[..SHOWN].join("; "),
                n - SHOWN
            ),
        }
    }

    fn all_have_msg_ids(&self) -> bool {
        self.rows.iter().all(|(_, m)| m.has_msg_id)
    }

    fn fail(&self, outcome: &mut PublishOutcome, why: &str) {
        for (row, _) in &self.rows {
            outcome.fail(*row, why.to_string());
        }
    }
}

/// What became of one attempt of a batch.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Stored whole: its last message at `last_seq`, `count` messages.
    Stored { last_seq: u64, count: u64 },
    /// Nothing stored; sending it again is safe.
    NotStored(String),
    /// The server holds a msg id of the batch already; nothing of it stored.
    HoldsMsgId(String),
    /// No answer to the commit: stored or not.
    Unknown(String),
    /// Refused for good; `halt`: every later batch would be refused too.
    Refused { why: String, halt: bool },
}

/// The verdict an answer to batch message `seq` of `len` gives, if it ends the
/// attempt (None: a message was staged).
fn verdict_of(message: &Message, seq: u64, len: u64, subject: &str) -> Option<Verdict> {
    if let Some(status) = Status::of(message) {
        return Some(match status {
            Status::NoResponders => Verdict::NotStored(format!(
                "no stream answers on subject {subject:?} (503 no responders)"
            )),
            Status::TooManyRequests => Verdict::NotStored(format!(
                "429 {}",
                message.description.as_deref().unwrap_or_default()
            )),
            other => Verdict::Refused {
                why: format!("status {other:?}"),
                halt: false,
            },
        });
    }
    if message.payload.is_empty() {
        // A staged message. Only the commit's answer ends a batch that goes well.
        return None;
    }
    let reply = match serde_json::from_slice::<FastBatchReply>(&message.payload) {
        Ok(reply) => reply,
        Err(_) => {
            return Some(Verdict::Refused {
                why: format!(
                    "unexpected atomic batch reply: {}",
                    String::from_utf8_lossy(&message.payload)
                ),
                halt: false,
            })
        }
    };
    if let Some(e) = reply.error {
        let codes = format!(
            "{} (code {}, err_code {})",
            e.description, e.code, e.err_code
        );
        return Some(match e.err_code {
            err_codes::ATOMIC_PUBLISH_INCOMPLETE | err_codes::ATOMIC_PUBLISH_TOO_MANY_INFLIGHT => {
                Verdict::NotStored(codes)
            }
            _ if e.code == 429 || e.code == 503 || e.err_code == err_codes::TOO_MANY_REQUESTS => {
                Verdict::NotStored(codes)
            }
            err_codes::ATOMIC_PUBLISH_DUPLICATE_MSG_ID => Verdict::HoldsMsgId(codes),
            err_codes::WRONG_LAST_SEQUENCE | err_codes::WRONG_LAST_MSG_ID => Verdict::Refused {
                why: format!("conflict: an expected-last check of the batch failed ({codes})"),
                halt: false,
            },
            err_codes::ATOMIC_PUBLISH_DISABLED => Verdict::Refused {
                why: format!(
                    "the stream does not allow atomic publishing: mode='atomic' needs a stream \
                     with allow_atomic (nats-server 2.12 or later); enable it or publish with \
                     mode='acked': {codes}"
                ),
                halt: true,
            },
            err_codes::ATOMIC_PUBLISH_TOO_LARGE => Verdict::Refused {
                why: format!(
                    "a batch of {len} rows is more than the server takes in one atomic batch \
                     (its limit jetstream.limits.batch.max_msgs, given in the error): lower \
                     option 'batch_rows': {codes}"
                ),
                halt: true,
            },
            err_codes::ATOMIC_PUBLISH_INVALID_ID => Verdict::Refused {
                why: format!("the server refused the atomic batch's id: {codes}"),
                halt: true,
            },
            _ => Verdict::Refused {
                why: codes,
                halt: false,
            },
        });
    }
    if seq == len && reply.seq > 0 {
        // The commit's PubAck. A server that does not know atomic batches stores the
        // first message as a plain publish: its ack names no batch.
        if reply.batch.is_none() {
            return Some(Verdict::Refused {
                why: "the server does not support atomic publishing (mode='atomic' needs \
                      nats-server 2.12 or later); rows may have been stored one by one"
                    .into(),
                halt: true,
            });
        }
        return Some(Verdict::Stored {
            last_seq: reply.seq,
            count: reply.count,
        });
    }
    // A PubAck before the commit: not how a batch is answered.
    Some(Verdict::Refused {
        why: format!(
            "unexpected atomic batch reply to message {seq} of {len}: {}",
            String::from_utf8_lossy(&message.payload)
        ),
        halt: false,
    })
}

/// Two rows of a batch with the same msg id: the server would refuse the batch.
fn repeated_msg_id(batch: &AtomicBatch) -> Option<(usize, usize)> {
    let mut seen: HashMap<&[u8], usize> = HashMap::new();
    for (row, message) in &batch.rows {
        let Some(id) = message
            .headers
            .as_ref()
            .and_then(|h| h.get(nats_header::NATS_MESSAGE_ID))
        else {
            continue;
        };
        if let Some(first) = seen.insert(id.as_str().as_bytes(), *row) {
            return Some((first, *row));
        }
    }
    None
}

/// `message` as a member of batch `id` at `seq` of `len`.
fn batch_member(message: &OutgoingMessage, id: &str, seq: u64, len: u64) -> OutgoingMessage {
    let mut headers = message.headers.clone().unwrap_or_default();
    headers.insert(BATCH_ID, id);
    headers.insert(BATCH_SEQUENCE, HeaderValue::from(seq));
    if seq == len {
        headers.insert(BATCH_COMMIT, BATCH_COMMIT_STORE);
    }
    OutgoingMessage {
        headers: Some(headers),
        ..message.clone()
    }
}

impl Publisher {
    /// [`Publisher::publish`] in atomic mode: batch after batch, each resolved (stored,
    /// or failed with its reason) before the next is sent.
    pub(super) async fn run_atomic<I>(
        &mut self,
        source: &mut RowSource<I>,
        outcome: &mut PublishOutcome,
    ) -> Result<()>
    where
        I: Iterator<Item = Result<RecordBatch>>,
    {
        let id_base = self.rows_before + self.options.msg_id_start;
        let mut halted: Option<String> = None;
        loop {
            let mut batch = AtomicBatch { rows: Vec::new() };
            let mut bad_input: Option<Error> = None;
            while batch.rows.len() < self.options.batch_rows {
                match self.next_message(source, outcome, id_base) {
                    Ok(Some(next)) => batch.rows.push(next),
                    Ok(None) => break,
                    Err(e) => {
                        bad_input = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = bad_input {
                // The batch the bad row belongs to is not sent: it cannot be whole.
                batch.fail(
                    outcome,
                    &format!("not sent: its atomic batch holds a row that is bad input ({e})"),
                );
                return Err(e);
            }
            if batch.rows.is_empty() {
                return Ok(());
            }
            if let Some(why) = &halted {
                batch.fail(outcome, &format!("not sent: {why}"));
                continue;
            }
            if let Some((first, second)) = repeated_msg_id(&batch) {
                batch.fail(
                    outcome,
                    &format!(
                        "not sent: rows {first} and {second} of its atomic batch have the same msg \
                         id, which the server refuses in one batch"
                    ),
                );
                continue;
            }
            if let Some(why) = self.publish_batch(batch, outcome).await? {
                halted = Some(why);
            }
        }
    }

    /// Send `batch` until it is resolved; every row ends stored, duplicate or failed.
    /// Returns why no later batch can be stored, if so.
    async fn publish_batch(
        &mut self,
        mut batch: AtomicBatch,
        outcome: &mut PublishOutcome,
    ) -> Result<Option<String>> {
        let mut attempt = 0u32;
        loop {
            let verdict = self.attempt(&batch).await?;
            let retry_why = match verdict {
                Verdict::Stored { last_seq, count } => {
                    let n = batch.rows.len() as u64;
                    if count != n {
                        // Not expected from a server that answers as ADR-50 says.
                        let why = format!(
                            "the server stored {count} messages for an atomic batch of {n} rows \
                             (last sequence {last_seq})"
                        );
                        batch.fail(outcome, &why);
                        return Ok(None);
                    }
                    let first_seq = last_seq + 1 - n;
                    for (i, (row, _)) in batch.rows.iter().enumerate() {
                        outcome.acked(*row, first_seq + i as u64, false);
                    }
                    return Ok(None);
                }
                Verdict::Refused { why, halt } => {
                    let why = format!(
                        "atomic batch of {} not stored: {why}{}",
                        batch.describe(),
                        batch.checks()
                    );
                    batch.fail(outcome, &why);
                    return Ok(halt.then_some(why));
                }
                Verdict::NotStored(why) => why,
                Verdict::Unknown(why) if batch.all_have_msg_ids() => why,
                Verdict::Unknown(why) => {
                    batch.fail(
                        outcome,
                        &format!(
                            "atomic batch of {}: {why}; not sent again because not every row \
                             has a msg id, so it may or may not be stored (give rows a msg_id or \
                             use msg_id_prefix to make retries safe)",
                            batch.describe()
                        ),
                    );
                    return Ok(None);
                }
                Verdict::HoldsMsgId(why) => {
                    let before = batch.rows.len();
                    batch = self.take_duplicates(batch, outcome).await?;
                    if batch.rows.is_empty() {
                        return Ok(None);
                    }
                    if batch.rows.len() == before {
                        // The server named a msg id no row was found to have.
                        let why = format!("atomic batch of {} not stored: {why}", batch.describe());
                        batch.fail(outcome, &why);
                        return Ok(None);
                    }
                    // The rest is a new batch, sent at once.
                    continue;
                }
            };
            if attempt >= self.options.max_retries {
                batch.fail(
                    outcome,
                    &format!(
                        "atomic batch of {} not stored: {retry_why}; gave up after {attempt} \
                         retries (option 'max_retries')",
                        batch.describe()
                    ),
                );
                return Ok(None);
            }
            if retry_why.starts_with("429") || retry_why.contains("code 429") {
                outcome.pushed_back(&retry_why);
            }
            outcome.resent(batch.rows[0].0, batch.rows.len(), &retry_why);
            Backoff::publish(self.options.retry_backoff)
                .wait(attempt)
                .await;
            attempt += 1;
        }
    }

    /// One attempt of `batch` under a new batch id: its messages pipelined within the
    /// window, then the answers until one decides. A lost connection is an error;
    /// the batch's rows are then failed by the caller as unresolved.
    async fn attempt(&mut self, batch: &AtomicBatch) -> Result<Verdict> {
        let id = self.next_batch_id();
        let len = batch.rows.len() as u64;
        let first_token = self.next_token;
        let subject = batch.rows[0].1.subject.to_string();
        let ack_timeout = self.options.ack_timeout;
        let window = self.options.window as u64;
        let mut answered = 0u64;
        let mut sent = 0u64;
        let mut last_heard = Instant::now();
        while sent < len || answered < len {
            // Send while the window has room.
            while sent < len && sent - answered < window {
                let (row, message) = &batch.rows[sent as usize];
                self.send_row(*row, &batch_member(message, &id, sent + 1, len))
                    .await?;
                sent += 1;
                last_heard = Instant::now();
            }
            let deadline = last_heard + ack_timeout;
            let reply = tokio::select! {
                reply = self.acks.next() => reply,
                _ = tokio::time::sleep_until(deadline) => {
                    let why = if sent == len {
                        format!("no answer to its commit within {ack_timeout:?} (option 'ack_timeout')")
                    } else {
                        format!("no answer within {ack_timeout:?} (option 'ack_timeout')")
                    };
                    return Ok(if sent < len {
                        // Its commit was never sent: nothing of it can be stored.
                        Verdict::NotStored(why)
                    } else {
                        Verdict::Unknown(why)
                    });
                }
            };
            let Some(reply) = reply else {
                return Err(Error::connection(
                    "the connection was closed for good (see option 'max_reconnects')",
                ));
            };
            let mut replies = vec![reply];
            while let Some(Some(more)) = self.acks.next().now_or_never() {
                replies.push(more);
            }
            for reply in replies {
                let Some(token) = reply_token(&reply) else {
                    continue;
                };
                // Answers to earlier attempts (after their verdict) are past.
                if token < first_token || token >= first_token + sent {
                    continue;
                }
                last_heard = Instant::now();
                answered += 1;
                let seq = token - first_token + 1;
                if let Some(verdict) = verdict_of(&reply, seq, len, &subject) {
                    return Ok(verdict);
                }
            }
        }
        // Every message answered as staged, the commit included: not how a commit is
        // answered.
        Ok(Verdict::Unknown(
            "the commit was answered as a staged message".into(),
        ))
    }

    /// Send `message`, of row `row`, with the next reply token; returns the token.
    async fn send_row(&mut self, row: usize, message: &OutgoingMessage) -> Result<u64> {
        send(
            &self.conn,
            &self.inbox_prefix,
            &mut self.next_token,
            message,
            self.options.ack_timeout,
        )
        .await
        .map_err(|e| e.context(format!("row {row}")))
    }

    /// A new batch id: the publisher's inbox token (unique per connection) and a count.
    fn next_batch_id(&mut self) -> String {
        self.batches_opened += 1;
        let unique = self
            .inbox_prefix
            .trim_end_matches('.')
            .rsplit('.')
            .next()
            .unwrap_or("b");
        let mut id = format!("{unique}-{}", self.batches_opened);
        id.truncate(BATCH_ID_MAX_LEN);
        id
    }

    /// Ask about each row of `batch` with a msg id whether the stream holds it; the
    /// ones it holds are reported duplicates. Returns the rest, to be sent again.
    async fn take_duplicates(
        &mut self,
        batch: AtomicBatch,
        outcome: &mut PublishOutcome,
    ) -> Result<AtomicBatch> {
        let first_token = self.next_token;
        let ack_timeout = self.options.ack_timeout;
        let mut asked: Vec<Option<u64>> = Vec::with_capacity(batch.rows.len());
        for (row, message) in &batch.rows {
            if !message.has_msg_id {
                asked.push(None);
                continue;
            }
            let probe = message.msg_id_probe(&self.probe_last_id);
            asked.push(Some(self.send_row(*row, &probe).await?));
        }
        let expected = asked.iter().flatten().count();
        let mut duplicate_seq: HashMap<u64, u64> = HashMap::new();
        let mut answered = 0usize;
        let deadline = Instant::now() + ack_timeout;
        while answered < expected {
            let reply = tokio::select! {
                reply = self.acks.next() => reply,
                // Unanswered rows are sent again with the rest.
                _ = tokio::time::sleep_until(deadline) => break,
            };
            let Some(reply) = reply else {
                return Err(Error::connection(
                    "the connection was closed for good (see option 'max_reconnects')",
                ));
            };
            let Some(token) = reply_token(&reply) else {
                continue;
            };
            if token < first_token || token >= self.next_token {
                continue;
            }
            answered += 1;
            if let Ok(ack) = serde_json::from_slice::<FastBatchReply>(&reply.payload) {
                if ack.duplicate && ack.seq > 0 {
                    duplicate_seq.insert(token, ack.seq);
                }
            }
        }
        let mut rest = Vec::with_capacity(batch.rows.len());
        for ((row, message), token) in batch.rows.into_iter().zip(asked) {
            match token.and_then(|t| duplicate_seq.get(&t)) {
                Some(&seq) => outcome.acked(row, seq, true),
                None => rest.push((row, message)),
            }
        }
        Ok(AtomicBatch { rows: rest })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::{HeaderMap, Subject};
    use bytes::Bytes;

    fn reply(status: Option<u16>, payload: &str) -> Message {
        Message {
            subject: Subject::from("_INBOX.x.1"),
            reply: None,
            payload: Bytes::from(payload.to_string()),
            headers: None,
            status: status.map(|s| async_nats::StatusCode::from_u16(s).unwrap()),
            description: None,
            length: 0,
        }
    }

    fn message(id: Option<&str>) -> OutgoingMessage {
        let headers = id.map(|id| {
            let mut h = HeaderMap::new();
            h.insert(nats_header::NATS_MESSAGE_ID, id);
            h
        });
        OutgoingMessage {
            subject: Subject::from("s"),
            headers,
            payload: Bytes::from_static(b"x"),
            has_msg_id: id.is_some(),
            has_expectation: false,
        }
    }

    #[test]
    fn answers_decide_an_attempt() {
        assert_eq!(verdict_of(&reply(None, ""), 1, 3, "s"), None);
        assert_eq!(
            verdict_of(
                &reply(None, r#"{"stream":"S","seq":9,"batch":"b","count":3}"#),
                3,
                3,
                "s"
            ),
            Some(Verdict::Stored {
                last_seq: 9,
                count: 3
            })
        );
        assert!(matches!(
            verdict_of(&reply(Some(503), ""), 1, 3, "s"),
            Some(Verdict::NotStored(_))
        ));
        let error = |code: u16, err_code: u32| {
            reply(
                None,
                &format!(
                    r#"{{"error":{{"code":{code},"err_code":{err_code},"description":"d"}}}}"#
                ),
            )
        };
        assert!(matches!(
            verdict_of(&error(400, 10176), 2, 3, "s"),
            Some(Verdict::NotStored(_))
        ));
        assert!(matches!(
            verdict_of(&error(429, 10210), 1, 3, "s"),
            Some(Verdict::NotStored(_))
        ));
        assert!(matches!(
            verdict_of(&error(400, 10201), 3, 3, "s"),
            Some(Verdict::HoldsMsgId(_))
        ));
        match verdict_of(&error(400, 10199), 3, 3, "s") {
            Some(Verdict::Refused { why, halt: true }) => {
                assert!(
                    why.contains("'batch_rows'") && why.contains("max_msgs"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
        match verdict_of(&error(400, 10174), 1, 3, "s") {
            Some(Verdict::Refused { why, halt: true }) => {
                assert!(why.contains("allow_atomic"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            verdict_of(&error(400, 10071), 3, 3, "s"),
            Some(Verdict::Refused { halt: false, .. })
        ));
        // A plain PubAck to a commit: the server stored it as a single publish.
        assert!(matches!(
            verdict_of(&reply(None, r#"{"stream":"S","seq":4}"#), 1, 1, "s"),
            Some(Verdict::Refused { halt: true, .. })
        ));
    }

    #[test]
    fn batches_are_marked_and_checked() {
        let batch = AtomicBatch {
            rows: vec![
                (4, message(Some("a"))),
                (5, message(None)),
                (6, message(Some("a"))),
            ],
        };
        assert_eq!(repeated_msg_id(&batch), Some((4, 6)));
        assert_eq!(batch.describe(), "rows 4..=6");
        assert!(!batch.all_have_msg_ids());
        let last = batch_member(&batch.rows[2].1, "id-1", 3, 3);
        let h = last.headers.unwrap();
        assert_eq!(h.get(BATCH_ID).unwrap().as_str(), "id-1");
        assert_eq!(h.get(BATCH_SEQUENCE).unwrap().as_str(), "3");
        assert_eq!(h.get(BATCH_COMMIT).unwrap().as_str(), "1");
        assert_eq!(h.get(nats_header::NATS_MESSAGE_ID).unwrap().as_str(), "a");
        let middle = batch_member(&batch.rows[1].1, "id-1", 2, 3);
        assert!(middle.headers.unwrap().get(BATCH_COMMIT).is_none());
        let probe = batch.rows[0].1.msg_id_probe("never");
        assert_eq!(
            probe
                .headers
                .unwrap()
                .get(nats_header::NATS_EXPECTED_LAST_MESSAGE_ID)
                .unwrap()
                .as_str(),
            "never"
        );
    }
}
