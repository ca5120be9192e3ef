//! The state of one publish call: acks classified, retries scheduled with backoff,
//! expired messages retried or reported, the expected-last gate, and the probes
//! that tell a row stored before from one whose expected-last check failed.
//!
//! One module because every ack passes the same classification and then changes the
//! same state (window, retries, outcome): split, each part would take all of it.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::outcome::PublishOutcome;
use super::window::{Congestion, InFlight, Window};
use super::{reply_token, PublishOptions};
use async_nats::header as nats_header;

use crate::api::types::PublishReply;
use crate::api::Status;
use crate::connection::Connection;
use crate::error::err_codes;
use crate::publish::input::OutgoingMessage;
use crate::retry::Backoff;

enum AckResult {
    Stored {
        seq: u64,
        duplicate: bool,
        /// A counter's new value (the ack's `val`).
        value: Option<String>,
    },
    /// Not stored, safe to send again (no stream leader yet).
    Retry(String),
    /// Not stored, safe to send again: the server takes in less than is sent (`429`).
    PushedBack(String),
    /// Not stored: an expected-last check found the stream elsewhere.
    Conflict(String),
    /// Not stored, for good; with the server's JetStream error code when it gave one.
    Failed(String, Option<u32>),
}

fn classify(message: &async_nats::Message, subject: &str) -> AckResult {
    if let Some(status) = Status::of(message) {
        return match status {
            Status::NoResponders => AckResult::Retry(format!(
                "no stream answers on subject {subject:?} (503 no responders): no stream \
                 captures this subject, or its leader is not elected yet"
            )),
            Status::TooManyRequests => AckResult::PushedBack(format!(
                "429 {}",
                message.description.as_deref().unwrap_or_default()
            )),
            other => AckResult::Failed(format!("status {other:?}"), None),
        };
    }
    match serde_json::from_slice::<PublishReply>(&message.payload) {
        Ok(PublishReply { error: Some(e), .. }) => {
            let hint = match e.err_code {
                err_codes::MESSAGE_TTL_DISABLED => {
                    ": a TTL of its own (column 'ttl', or a Nats-TTL header) needs a stream \
                     created with allow_msg_ttl"
                }
                err_codes::MESSAGE_TTL_INVALID => {
                    ": the server takes a TTL of whole seconds, at least 1, a duration such \
                     as '90s' or '1h', or 'never'"
                }
                err_codes::MESSAGE_INCR_DISABLED => {
                    ": a counter increment (column 'increment', or a Nats-Incr header) needs a \
                     stream created with allow_msg_counter (nats-server 2.12 or later)"
                }
                err_codes::MESSAGE_INCR_MISSING => {
                    ": a stream created with allow_msg_counter stores counter increments only \
                     (a table with an 'increment' column and no 'data' column)"
                }
                err_codes::MESSAGE_INCR_PAYLOAD => ": a counter increment has no payload",
                err_codes::MESSAGE_INCR_INVALID => {
                    ": Nats-Incr takes an integer ('+5', '-3') and goes without expected-last \
                     checks, expected_stream and rollups"
                }
                err_codes::MESSAGE_SCHEDULES_DISABLED => {
                    ": a schedule (columns 'schedule' and 'schedule_target', or a Nats-Schedule \
                     header) needs a stream created with allow_msg_schedules (nats-server 2.12 \
                     or later)"
                }
                err_codes::MESSAGE_SCHEDULES_PATTERN_INVALID => {
                    ": the server takes '@at <RFC 3339 instant>', '@every <duration of at \
                     least 1s>', a cron of six fields with seconds ('0 30 * * * *') or \
                     @hourly, @daily, @weekly, @monthly, @yearly"
                }
                err_codes::MESSAGE_SCHEDULES_TARGET_INVALID => {
                    ": a schedule's target is a subject of the same stream, not the \
                     schedule's own subject"
                }
                _ => "",
            };
            let why = format!(
                "{} (code {}, err_code {}){hint}",
                e.description, e.code, e.err_code
            );
            if e.code == 429 || e.err_code == err_codes::TOO_MANY_REQUESTS {
                AckResult::PushedBack(why)
            } else if e.code == 503 {
                AckResult::Retry(why)
            } else if matches!(
                e.err_code,
                err_codes::WRONG_LAST_SEQUENCE | err_codes::WRONG_LAST_MSG_ID
            ) {
                AckResult::Conflict(why)
            } else {
                AckResult::Failed(why, Some(e.err_code).filter(|&c| c != 0))
            }
        }
        Ok(PublishReply {
            seq,
            duplicate,
            val,
            ..
        }) if seq > 0 => AckResult::Stored {
            seq,
            duplicate,
            value: val,
        },
        _ => AckResult::Failed(
            format!(
                "unexpected publish reply: {}",
                String::from_utf8_lossy(&message.payload)
            ),
            None,
        ),
    }
}

/// The expected-last checks a message carries, in words: "expected last subject
/// sequence 3", for the row's conflict report.
pub(super) fn expectations_of(message: &OutgoingMessage) -> Option<String> {
    let headers = message.headers.as_ref()?;
    let said: Vec<String> = [
        (
            nats_header::NATS_EXPECTED_LAST_SEQUENCE,
            "expected last sequence",
        ),
        (
            nats_header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
            "expected last subject sequence",
        ),
        (
            nats_header::NATS_EXPECTED_LAST_MESSAGE_ID,
            "expected last msg id",
        ),
    ]
    .into_iter()
    .filter_map(|(name, words)| headers.get(name).map(|v| format!("{words} {}", v.as_str())))
    .collect();
    (!said.is_empty()).then(|| said.join(", "))
}

pub(super) struct Retry {
    pub row: usize,
    pub attempt: u32,
    pub message: OutgoingMessage,
    /// See [`InFlight::conflict`].
    pub conflict: Option<String>,
}

/// Messages waiting to be sent again, by the time they are due (ties in arrival order).
///
/// A message waiting for its retry still holds its place in the window (see
/// [`Window::has_room_for_new`]): under backpressure (`429`) new rows then wait for
/// the retries instead of taking their places, so the load on the server falls and
/// retries succeed instead of running out of attempts.
#[derive(Default)]
pub(super) struct RetryQueue {
    due: BTreeMap<(Instant, u64), Retry>,
    arrivals: u64,
    /// Payload bytes of the messages waiting.
    bytes: usize,
}

impl RetryQueue {
    pub(super) fn push(&mut self, at: Instant, retry: Retry) {
        self.arrivals += 1;
        self.bytes += retry.message.payload.len();
        self.due.insert((at, self.arrivals), retry);
    }

    /// The earliest retry, if it is due by `now`.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<Retry> {
        let entry = self.due.first_entry()?;
        let retry = (entry.key().0 <= now).then(|| entry.remove())?;
        self.bytes -= retry.message.payload.len();
        Some(retry)
    }

    /// Any waiting retry, due or not.
    pub(super) fn pop_any(&mut self) -> Option<Retry> {
        let retry = self.due.pop_first()?.1;
        self.bytes -= retry.message.payload.len();
        Some(retry)
    }

    pub(super) fn len(&self) -> usize {
        self.due.len()
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn next_due(&self) -> Option<Instant> {
        self.due.first_key_value().map(|(k, _)| k.0)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.due.is_empty()
    }
}

/// The state of one publish call: what is in flight, what waits to be retried, and
/// what became of each row so far.
pub(super) struct PublishRun<'a> {
    pub options: &'a PublishOptions,
    pub conn: &'a Connection,
    /// The expectation of msg-id probes (see [`OutgoingMessage::msg_id_probe`]).
    pub probe_last_id: &'a str,
    pub in_flight: Window,
    /// How many messages `in_flight` may hold now.
    pub congestion: Congestion,
    pub retries: RetryQueue,
    /// With expected-last-* checks, the row that must be stored before any other is
    /// sent (the first); None once it was stored, or without checks.
    pub gate: Option<usize>,
    pub outcome: &'a mut PublishOutcome,
}

impl PublishRun<'_> {
    /// Take the ack of the message sent with its subject's token; `next_token` is the
    /// token the next message will be sent with.
    pub(super) fn on_ack(&mut self, ack: async_nats::Message, next_token: u64) {
        let Some(token) = reply_token(&ack) else {
            return;
        };
        // An ack for a message already timed out and resent (or from an earlier
        // call) has no entry: the resend's own ack decides.
        let Some(entry) = self.in_flight.take(token) else {
            self.outcome.late_reply();
            return;
        };
        if let Some(conflict) = entry.conflict.clone() {
            self.on_probe_ack(&ack, entry, conflict, token, next_token);
            return;
        }
        match classify(&ack, entry.message.subject.as_str()) {
            AckResult::Stored {
                seq,
                duplicate,
                value,
            } => {
                self.congestion.stored();
                self.outcome.acked(entry.row, seq, duplicate);
                if let Some(value) = value.filter(|_| !duplicate) {
                    self.outcome.counted(entry.row, value);
                }
                if self.gate == Some(entry.row) {
                    self.gate = None;
                }
            }
            AckResult::Retry(why) => self.retry_or_fail(entry, why),
            AckResult::PushedBack(why) => {
                self.congestion.pushed_back(token, next_token);
                self.outcome.pushed_back(&why);
                self.retry_or_fail(entry, why);
            }
            AckResult::Conflict(why) => {
                let conflict = format!(
                    "conflict: {} ({why})",
                    expectations_of(&entry.message).unwrap_or_else(|| "an expectation".into())
                );
                if entry.message.has_msg_id {
                    // A resend of a stored row (after an ack timeout, or a re-run)
                    // fails its own check: ask whether its msg id is stored.
                    self.retries.push(
                        Instant::now(),
                        Retry {
                            row: entry.row,
                            attempt: entry.attempt,
                            message: entry.message.msg_id_probe(self.probe_last_id),
                            conflict: Some(conflict),
                        },
                    );
                } else {
                    self.outcome.fail(entry.row, conflict);
                }
            }
            AckResult::Failed(why, err_code) => {
                self.outcome.fail_with_code(entry.row, why, err_code)
            }
        }
    }

    /// The answer to a probe of a row whose check failed: a duplicate is the row,
    /// stored before; anything else leaves the conflict standing.
    fn on_probe_ack(
        &mut self,
        ack: &async_nats::Message,
        entry: InFlight,
        conflict: String,
        token: u64,
        next_token: u64,
    ) {
        match classify(ack, entry.message.subject.as_str()) {
            AckResult::Stored { seq, .. } => {
                self.congestion.stored();
                self.outcome.acked(entry.row, seq, true);
            }
            AckResult::Retry(why) => self.retry_or_fail(entry, why),
            AckResult::PushedBack(why) => {
                self.congestion.pushed_back(token, next_token);
                self.outcome.pushed_back(&why);
                self.retry_or_fail(entry, why);
            }
            AckResult::Conflict(_) | AckResult::Failed(..) => {
                self.outcome.fail(entry.row, conflict)
            }
        }
    }

    pub(super) fn retry_or_fail(&mut self, entry: InFlight, why: String) {
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
        let backoff = Backoff::publish(self.options.retry_backoff).delay(entry.attempt);
        self.outcome.resent(entry.row, 1, &why);
        self.retries.push(
            Instant::now() + backoff,
            Retry {
                row: entry.row,
                attempt: entry.attempt + 1,
                message: entry.message,
                conflict: entry.conflict,
            },
        );
    }

    /// A row that could not be handed to the connection: never sent by this attempt.
    pub(super) fn fail_unsent(&mut self, row: usize, why: &crate::error::Error) {
        self.outcome.fail(row, format!("not sent: {why}"));
    }

    /// The connection is gone: every row awaiting its ack or its resend is reported,
    /// since nothing more will be learnt of it.
    pub(super) fn abandon(&mut self, why: &crate::error::Error) {
        let why = |increment: bool| {
            let what = if increment {
                "its increment may or may not be counted (with a msg id, publishing it again \
                 counts it at most once)"
            } else {
                "it may or may not be stored (with a msg id, publishing it again stores it at \
                 most once)"
            };
            format!("no ack before the publish ended ({why}); {what}")
        };
        while let Some(entry) = self.in_flight.pop_oldest() {
            let why = why(entry.message.is_increment());
            self.outcome.fail(entry.row, why);
        }
        while let Some(retry) = self.retries.pop_any() {
            let why = why(retry.message.is_increment());
            self.outcome.fail(retry.row, why);
        }
    }

    /// Messages whose ack did not come in time: retried when a msg id makes that
    /// safe, reported otherwise. Whether any row was given up (reported failed).
    pub(super) fn expire(&mut self) -> bool {
        let now = Instant::now();
        let failed_before = self.outcome.failed();
        while let Some(entry) = self.in_flight.pop_expired(now) {
            let subject = entry.message.subject.to_string();
            if let Some(violation) = self.conn.server_errors.permission_violation_for(&subject) {
                self.outcome
                    .fail(entry.row, format!("permission denied: {violation}"));
                continue;
            }
            if let Some(why) = self.conn.inbox_refused() {
                // No ack can ever arrive: retrying would only wait again.
                self.outcome
                    .fail(entry.row, format!("permission denied: no ack: {why}"));
                continue;
            }
            let why = format!(
                "no ack within {:?} (option 'ack_timeout')",
                self.options.ack_timeout
            );
            // A probe can never be stored: resending it is always safe. A row with
            // its own check is resent like any other with a msg id; should it have
            // been stored, its check fails and a probe finds its msg id.
            if entry.conflict.is_some()
                || (entry.message.has_msg_id && self.gate != Some(entry.row))
            {
                self.retry_or_fail(entry, why);
            } else {
                // Without a msg id the server cannot recognise a resend, so a retry
                // could store the row twice (count an increment twice); report it instead.
                let what = if entry.message.is_increment() {
                    "its increment may or may not be counted (a retry could count it twice)"
                } else {
                    "it may or may not be stored"
                };
                self.outcome.fail(
                    entry.row,
                    format!(
                        "{why}; not retried because the row has no msg id, so {what} (give rows \
                         a msg_id or use msg_id_prefix to make retries safe)"
                    ),
                );
            }
        }
        self.outcome.failed() > failed_before
    }

    /// When to wake up if no ack comes: the oldest deadline or the next retry.
    pub(super) fn next_wake(&self) -> Instant {
        [self.in_flight.oldest_deadline(), self.retries.next_due()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or_else(|| Instant::now() + self.options.ack_timeout)
    }

    pub(super) fn is_idle(&self) -> bool {
        self.in_flight.is_empty() && self.retries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::Subject;

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
                duplicate: false,
                value: None,
            }
        ));
        assert!(matches!(
            classify(
                &message(None, r#"{"stream":"S","seq":7,"duplicate":true}"#),
                "a"
            ),
            AckResult::Stored {
                seq: 7,
                duplicate: true,
                value: None,
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
            AckResult::PushedBack(_)
        ));
        match classify(
            &message(
                None,
                r#"{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"}}"#,
            ),
            "a",
        ) {
            AckResult::Conflict(why) => assert!(why.contains("wrong last sequence"), "{why}"),
            _ => panic!("a failed expectation is a conflict"),
        }
        match classify(
            &message(
                None,
                r#"{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}"#,
            ),
            "a",
        ) {
            AckResult::Failed(why, code) => {
                assert!(why.contains("10054"), "{why}");
                assert_eq!(code, Some(10054));
            }
            _ => panic!("a 400 is final"),
        }
    }
}
