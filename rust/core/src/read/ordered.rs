//! Ordered consumption: every message of a stream (or of some subjects) exactly once,
//! in stream order, through failures.
//!
//! Mechanism (nats.go's ordered consumer): an ephemeral AckNone pull consumer in
//! memory, fed by the pull loop. It is recreated at the last delivered stream
//! sequence + 1 whenever continuity is in doubt: a hole in the consumer sequence
//! (deliveries lost on the way), missed heartbeats (server gone or restarted), the
//! consumer deleted, or nobody answering for it (a restarted server forgot it). A
//! new consumer starts where the old one stopped, so nothing is skipped or repeated.
//! Recovery is bounded in time: after `resume_timeout` without success the last
//! error is raised, with its kind (for a server that stays silent, the missed
//! heartbeats that started the recovery).
//!
//! A reconnect of the client is a doubt as well: an AckNone consumer never sends
//! again what the lost connection carried, and when that was the stream's last
//! message no later delivery would show the hole. After a reconnect the next message
//! is taken from the stream itself (`STREAM.MSG.GET`, whose JSON reply any client can
//! read) before the consumer is recreated after it. So a message the client cannot
//! receive as a delivery, which drops its connection every time (a subject with
//! white space other than the server's own separators), is still read, and the read
//! always moves on.
//!
//! One module because when to recreate, from where, and when recovery has lasted too
//! long are one state machine: split, each part would need the others' state.

use std::time::Duration;

use tokio::time::Instant;

use crate::api::subjects;
use crate::api::types::{AckPolicy, ConsumerConfig, ConsumerInfo, CreateConsumer, DeliverPolicy};
use crate::arrow::metadata::Delivered;
use crate::connection::Connection;
use crate::consume::pull::{PullLoop, PullSettings};
use crate::error::{Error, ErrorKind, Result};
use crate::events;
use crate::read::msg_get;
use crate::retry::{is_transient, Backoff, Retry};

/// Consumers of ours vanish by themselves this long after their process died.
const INACTIVE_THRESHOLD: Duration = Duration::from_secs(300);

/// Where an ordered consumer starts the first time.
#[derive(Debug, Clone)]
pub enum Start {
    All,
    Sequence(u64),
    /// Nanoseconds since the epoch.
    Time(i64),
    /// Only messages stored after the consumer is created.
    New,
    /// The last message of each subject, then what arrives. A recreated consumer
    /// starts over with the last messages (its reader skips what it handed out).
    LastPerSubject,
}

/// An ephemeral, self-healing, in-order consumer of one stream.
pub struct OrderedPull {
    conn: Connection,
    stream: String,
    subjects: Vec<String>,
    start: Start,
    settings: PullSettings,
    /// Recovery's pauses and budget (option `resume_timeout`), counted from the
    /// first failure since the last delivery.
    retry: Retry,
    /// When recovery last made a consumer: one that then served for a whole budget
    /// (an idle tail, say) was a success, and the next failure starts a new budget.
    recreated_at: Option<Instant>,
    consumer: Option<String>,
    /// The name of a consumer asked for and not (yet) confirmed: a create whose
    /// answer is never seen (its future dropped, the request timed out) may still have
    /// made it, so it is deleted in the background, never waited for.
    asking: Option<String>,
    pull: Option<PullLoop>,
    /// The stream sequence of the last message handed out.
    last_stream_seq: Option<u64>,
    /// The consumer sequence of the last delivery of the current consumer: an AckNone
    /// consumer numbers its deliveries 1, 2, 3, ..., so a hole means lost deliveries.
    last_consumer_seq: u64,
    /// The furthest delivery any of the consumers reached. A consumer of the last
    /// message per subject starts over at each recreation: a delivery is progress,
    /// which ends a failure, only past this (else a message that fails every
    /// consumer at the same place would be retried forever).
    reached: u64,
    /// How often the consumer was recreated.
    pub resets: u32,
    /// Where `Drop` deletes the consumer of an abandoned read.
    runtime: tokio::runtime::Handle,
}

/// A fresh name for a read's consumer: a process-wide count and the time, hashed with
/// the process's random keys.
fn consumer_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static MADE: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(MADE.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    hasher.write_u128(now.as_nanos());
    format!("ja_{:016x}", hasher.finish())
}

/// What a failure means to an ordered consumer: recreate and go on, or give up.
fn recoverable(err: &Error) -> bool {
    matches!(
        err.kind(),
        ErrorKind::MissedHeartbeats
            | ErrorKind::ConsumerDeleted
            | ErrorKind::NotFound
            | ErrorKind::Timeout
            | ErrorKind::Connection
            | ErrorKind::JetStreamNotEnabled
    )
}

impl OrderedPull {
    /// Create the first consumer. Returns the consumer and how many messages it has
    /// pending (0: nothing to read yet).
    pub async fn open(
        conn: Connection,
        stream: &str,
        subjects: Vec<String>,
        start: Start,
        settings: PullSettings,
        resume_timeout: Duration,
    ) -> Result<(Self, u64)> {
        settings.validate()?;
        let mut ordered = Self {
            conn,
            stream: stream.to_string(),
            subjects,
            start,
            settings,
            // The opening is the first attempt: its budget starts now, so an opening
            // that fails (or asks `first_seq_at` patiently) and then recovers takes
            // `resume_timeout` in all, not twice that.
            retry: Retry::from_now(Backoff::RESUME, resume_timeout),
            recreated_at: None,
            consumer: None,
            asking: None,
            pull: None,
            last_stream_seq: None,
            last_consumer_seq: 0,
            reached: 0,
            resets: 0,
            runtime: tokio::runtime::Handle::current(),
        };
        let pending = match ordered.create().await {
            Ok(pending) => {
                ordered.retry.succeeded();
                pending
            }
            // No answer, a lost connection or no leader yet (an election, a restarting
            // server): keep trying for `resume_timeout`, as a read under way does. A
            // missing stream or a refused request fails at once.
            Err(e) if is_transient(&e) => ordered.recover(e).await?,
            Err(e) => return Err(e),
        };
        Ok((ordered, pending))
    }

    /// The stream sequence of the last message handed out.
    pub fn last_stream_seq(&self) -> Option<u64> {
        self.last_stream_seq
    }

    fn deliver_policy(&self) -> Result<DeliverPolicy> {
        if let Start::LastPerSubject = self.start {
            return Ok(DeliverPolicy::LastPerSubject);
        }
        if let Some(last) = self.last_stream_seq {
            return Ok(DeliverPolicy::ByStartSequence {
                start_sequence: last + 1,
            });
        }
        Ok(match self.start {
            Start::All => DeliverPolicy::All,
            Start::New => DeliverPolicy::New,
            Start::Sequence(seq) => DeliverPolicy::ByStartSequence {
                start_sequence: seq,
            },
            Start::Time(ns) => DeliverPolicy::ByStartTime {
                start_time: time::OffsetDateTime::from_unix_timestamp_nanos(ns as i128)
                    .map_err(|e| Error::bad_input(format!("option 'start_time': {e}")))?,
            },
            Start::LastPerSubject => DeliverPolicy::LastPerSubject,
        })
    }

    /// Create a consumer that starts where the last one stopped; returns its pending
    /// count.
    async fn create(&mut self) -> Result<u64> {
        // An attempt given up on (a recovery's deadline) may have made its consumer.
        self.discard();
        let (filter_subject, filter_subjects) = match self.subjects.as_slice() {
            [one] => (one.clone(), Vec::new()),
            many => (String::new(), many.to_vec()),
        };
        let mut deliver_policy = self.deliver_policy()?;
        if let (DeliverPolicy::ByStartTime { .. }, Start::Time(ns), true) =
            (&deliver_policy, &self.start, self.subjects.len() > 1)
        {
            // nats-server (2.15) starts a consumer by time with several filters past
            // the first messages at that time; the sequence found by a message get per
            // filter is where it starts instead.
            let found = msg_get::first_seq_at(
                &self.conn,
                &self.stream,
                *ns,
                &self.subjects,
                self.retry.left(),
            )
            .await?;
            if let Some(start_sequence) = found {
                deliver_policy = DeliverPolicy::ByStartSequence { start_sequence };
            }
        }
        // Named here and known before the request goes out: a create whose answer is
        // never seen (the read's task cancelled, its future dropped, the request timed
        // out) may still make the consumer, which `close`, `discard` and `Drop` then
        // delete by this name instead of leaving it for the inactivity threshold.
        let name = consumer_name();
        let config = ConsumerConfig {
            name: Some(name.clone()),
            deliver_policy,
            ack_policy: AckPolicy::None,
            memory_storage: true,
            num_replicas: 1,
            inactive_threshold: INACTIVE_THRESHOLD,
            filter_subject,
            filter_subjects,
            ..Default::default()
        };
        self.asking = Some(name.clone());
        let created: Result<ConsumerInfo> = self
            .conn
            .api_json(
                &format!("{}.{name}", subjects::consumer_create(&self.stream)),
                &CreateConsumer {
                    stream_name: &self.stream,
                    config: &config,
                },
            )
            .await;
        let created = match created {
            Ok(created) => {
                self.asking = None;
                self.consumer = Some(name);
                created
            }
            Err(e) => {
                // Unanswered, the consumer may have been made; answered with an
                // error, none was.
                if matches!(e.kind(), ErrorKind::Timeout | ErrorKind::Connection) {
                    self.discard();
                } else {
                    self.asking = None;
                }
                return Err(e.context(format!("reading stream {:?}", self.stream)));
            }
        };
        self.last_consumer_seq = 0;
        let mut pull = PullLoop::new(
            self.conn.clone(),
            &self.stream,
            &created.name,
            self.settings.clone(),
        )
        .await?;
        pull.fail_on_reconnect();
        self.pull = Some(pull);
        Ok(created.num_pending)
    }

    /// Drop the current consumer. Deleting it on the server is best effort and runs
    /// in the background: during an outage nobody may answer, and recovery must not
    /// wait for that.
    fn discard(&mut self) {
        self.pull = None;
        for name in [self.consumer.take(), self.asking.take()]
            .into_iter()
            .flatten()
        {
            self.delete_in_background(name);
        }
    }

    fn delete_in_background(&self, name: String) {
        let conn = self.conn.clone();
        let subject = subjects::consumer_delete(&self.stream, &name);
        self.runtime.spawn(async move {
            let _ = conn.api_request(&subject, bytes::Bytes::new(), None).await;
        });
    }

    /// After `err`, recreate the consumer (after a pause), or give up once recovery
    /// has failed for `resume_timeout`.
    /// Returns what the new consumer has pending.
    async fn recover(&mut self, err: Error) -> Result<u64> {
        if !recoverable(&err) && !is_transient(&err) {
            return Err(err);
        }
        // A consumer made by the last recovery that then lived longer than a whole
        // budget worked (a quiet stream delivers nothing for as long): this failure
        // is a new one. One that failed sooner (a message that fails every consumer
        // at the same place) keeps the budget running, so recovery ends.
        if self
            .recreated_at
            .is_some_and(|at| at.elapsed() >= self.retry.within())
        {
            self.retry.succeeded();
        }
        let deadline = self.retry.give_up_at();
        self.discard();
        let mut last = err;
        loop {
            if !self.retry.pause().await {
                return Err(last.context(format!(
                    "ordered read of stream {:?} could not resume within {:?} (option \
                     'resume_timeout')",
                    self.stream,
                    self.retry.within()
                )));
            }
            self.resets += 1;
            events::read_resumed(&self.stream, self.last_stream_seq, &last);
            // Each attempt gets what is left of the budget, not the request timeout.
            match tokio::time::timeout_at(deadline, self.create()).await {
                Ok(Ok(pending)) => {
                    self.recreated_at = Some(Instant::now());
                    return Ok(pending);
                }
                Ok(Err(e)) if recoverable(&e) || is_transient(&e) => last = e,
                Ok(Err(e)) => return Err(e),
                // No answer at all: the server is as silent as when heartbeats were
                // missed, and saying so (with that class) tells more than a timeout.
                Err(_) if last.kind() == ErrorKind::MissedHeartbeats => {}
                Err(_) => last = Error::timeout("recreating the consumer took too long"),
            }
        }
    }

    /// The next message in stream order; with `wait`, None when nothing came in that
    /// time.
    pub async fn next(&mut self, wait: Option<Duration>) -> Result<Option<Delivered>> {
        loop {
            let Some(pull) = self.pull.as_mut() else {
                let gone = Error::new(ErrorKind::ConsumerDeleted, "the consumer is gone");
                self.recover(gone).await?;
                continue;
            };
            let delivered = match pull.next(wait).await {
                Ok(Some(d)) => d,
                Ok(None) => return Ok(None),
                Err(e) if pull.reconnected() => match self.stored_next().await {
                    Ok(Some(stored)) => {
                        events::read_resumed(&self.stream, self.last_stream_seq, &e);
                        return self.hand_out_stored(stored).await.map(Some);
                    }
                    // Nothing there, or the server cannot say yet (it restarted):
                    // the consumer, recreated, tells.
                    Ok(None) | Err(_) => {
                        self.recover(e).await?;
                        continue;
                    }
                },
                Err(e) => {
                    self.recover(e).await?;
                    continue;
                }
            };
            let meta = delivered.meta;
            if meta.consumer_seq != self.last_consumer_seq + 1 {
                let lost = Error::new(
                    ErrorKind::ConsumerDeleted,
                    format!(
                        "deliveries {}..{} were lost on the way to this client",
                        self.last_consumer_seq + 1,
                        meta.consumer_seq - 1
                    ),
                );
                self.recover(lost).await?;
                continue;
            }
            self.last_consumer_seq = meta.consumer_seq;
            self.last_stream_seq = Some(meta.stream_seq);
            let starts_over = matches!(self.start, Start::LastPerSubject);
            if !starts_over || meta.consumer_seq > self.reached {
                self.retry.succeeded();
            }
            self.reached = self.reached.max(meta.consumer_seq);
            return Ok(Some(delivered));
        }
    }

    /// The first message of the read after the last one handed out, asked of the
    /// stream's leader. None when there is none, or when the read starts at new
    /// messages and has handed out none yet (there is no position to ask from).
    async fn stored_next(&self) -> Result<Option<Delivered>> {
        let from = match (self.last_stream_seq, &self.start) {
            // No single message comes next: the recreated consumer tells.
            (_, Start::LastPerSubject) => return Ok(None),
            (Some(last), _) => msg_get::Position::Sequence(last + 1),
            (None, Start::All) => msg_get::Position::Sequence(1),
            (None, Start::Sequence(seq)) => msg_get::Position::Sequence(*seq),
            (None, Start::Time(ns)) => msg_get::Position::Time(*ns),
            (None, Start::New) => return Ok(None),
        };
        msg_get::first_at_or_after(&self.conn, &self.stream, from, &self.subjects).await
    }

    /// Hand out a message taken from the stream, and recreate the consumer after it;
    /// what that consumer has pending is the message's pending count, as a delivery
    /// would carry it (a read of a range ends on 0).
    async fn hand_out_stored(&mut self, mut stored: Delivered) -> Result<Delivered> {
        self.last_stream_seq = Some(stored.meta.stream_seq);
        self.retry.succeeded();
        self.discard();
        self.resets += 1;
        stored.meta.pending = match self.create().await {
            Ok(pending) => pending,
            Err(e) => self.recover(e).await?,
        };
        Ok(stored)
    }

    /// Stop and delete the consumer (best effort; its inactivity threshold removes it
    /// otherwise).
    pub async fn close(&mut self) {
        self.pull = None;
        if let Some(name) = self.asking.take() {
            self.delete_in_background(name);
        }
        // The name is kept until the delete is answered: a close dropped midway (its
        // asyncio task cancelled) leaves it to `Drop`, which deletes it again.
        if let Some(name) = self.consumer.clone() {
            let subject = subjects::consumer_delete(&self.stream, &name);
            let _ = self
                .conn
                .api_request(&subject, bytes::Bytes::new(), None)
                .await;
            self.consumer = None;
        }
    }
}

impl Drop for OrderedPull {
    fn drop(&mut self) {
        // An abandoned read (closed early, garbage-collected, interrupted) still
        // removes its consumer; the inactivity threshold is the last resort.
        self.discard();
    }
}
