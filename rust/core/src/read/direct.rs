//! Reading a range of a stream with batched direct gets: `<prefix>.DIRECT.GET.<stream>`
//! with `{"seq", "batch", "next_by_subj", "max_bytes"}`, answered by the stream's
//! servers (it needs `allow_direct`) with the messages and a closing `204 EOB`.
//!
//! No consumer is created, so a direct read leaves no state on the server, costs no
//! consumer create/delete round trips, and works where no second consumer may exist:
//! a WorkQueue stream whose messages belong to a durable consumer can be re-read only
//! this way (acknowledged messages are gone; the unacknowledged ones are read).
//!
//! The server does not bound a batch by sequence (`up_to_seq` applies to `multi_last`
//! only), so each request asks for at most the rest of the range and anything past its
//! end is dropped. A batch may end early (the request's byte budget); the next request
//! starts after the last message received. A request that gets no answer within the
//! request timeout (a reconnect, a restarted server, a leader election) is sent again
//! from the same place, for up to the read's resume timeout.
//!
//! Replicas of the stream and mirrors with `mirror_direct` answer direct gets too, from
//! what they have applied so far, so "nothing more" may come from one that trails the
//! leader. A read told so before the end of its range asks the leader
//! (`STREAM.MSG.GET` with `next_by_subj`) whether a message is left in the range; if
//! one is, it asks again until an answer is current, so a direct read is never
//! silently short.
//!
//! One module because the requests, the replies' statuses and headers, and the
//! checks of who answered all move one cursor through the range.

use std::time::Duration;

use async_nats::{HeaderMap, Message, Subscriber};
use futures::StreamExt;
use serde::Serialize;
use time::format_description::well_known::Rfc3339;

use crate::api::headers::{
    last_u64, LAST_SEQUENCE, NUM_PENDING, SEQUENCE, STREAM, SUBJECT, TIME_STAMP,
};
use crate::api::{subjects, Status};
use crate::arrow::metadata::Delivered;
use crate::arrow::metadata::MessageMetadata;
use crate::connection::Connection;
use crate::error::{Error, ErrorKind, Result};
use crate::read::msg_get::{self, rfc3339};
use crate::retry::{is_transient, Backoff, Retry};

/// Headers the server adds to each message of a batched direct get (every request
/// of this module and of `last.rs` is batched). It appends them after the message's
/// own stored headers, so where a message stored a header of the same name (a copy
/// of a direct get's reply, say), the server's value is the last one of that name and
/// the ones before it are the message's.
const DIRECT_HEADERS: [&str; 6] = [
    STREAM,
    SUBJECT,
    SEQUENCE,
    TIME_STAMP,
    NUM_PENDING,
    LAST_SEQUENCE,
];

/// A batched direct get request.
#[derive(Debug, Serialize)]
struct DirectGetRequest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_time: Option<String>,
    batch: usize,
    max_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_by_subj: Option<&'a str>,
}

/// Where a direct read starts.
#[derive(Debug, Clone, Copy)]
pub enum DirectStart {
    Sequence(u64),
    /// Nanoseconds since the epoch.
    Time(i64),
}

/// An open direct read of `start..=end_seq`.
pub struct DirectRange {
    conn: Connection,
    stream: String,
    filter: Option<String>,
    start: DirectStart,
    end_seq: u64,
    batch: usize,
    max_bytes: usize,
    requests: DirectRequests,
    done: bool,
}

impl DirectRange {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        conn: Connection,
        stream: &str,
        filter: Option<String>,
        start: DirectStart,
        end_seq: u64,
        batch: usize,
        max_bytes: usize,
        resume_timeout: Duration,
    ) -> Self {
        Self {
            requests: DirectRequests::new(
                &conn,
                stream,
                format!("direct read of stream {stream:?}"),
                resume_timeout,
            ),
            conn,
            stream: stream.to_string(),
            filter,
            start,
            end_seq,
            batch: batch.max(1),
            max_bytes: max_bytes.max(1),
            done: false,
        }
    }

    /// The next message of the range in sequence order; None at its end.
    pub async fn next(&mut self) -> Result<Option<Delivered>> {
        loop {
            if self.done {
                return Ok(None);
            }
            if !self.requests.in_flight {
                self.send_request().await?;
            }
            let delivered = match self.requests.next().await? {
                DirectReply::Message(delivered) => delivered,
                DirectReply::EndOfBatch(end) => {
                    // The batch is over: ask for the rest, unless nothing is left.
                    if last_u64(&end, NUM_PENDING) == Some(0) {
                        self.end_unless_trailing().await?;
                    }
                    continue;
                }
                DirectReply::NoResults => {
                    // No message at or after the cursor.
                    self.end_unless_trailing().await?;
                    continue;
                }
                DirectReply::SendAgain => continue,
                DirectReply::Other(status) => return Err(self.requests.unexpected(&status)),
            };
            let seq = delivered.meta.stream_seq;
            if seq > self.end_seq {
                self.done = true;
                continue;
            }
            self.start = DirectStart::Sequence(seq + 1);
            if seq == self.end_seq {
                self.done = true;
            }
            return Ok(Some(delivered));
        }
    }

    async fn send_request(&mut self) -> Result<()> {
        let (seq, start_time, left) = match self.start {
            DirectStart::Sequence(seq) if seq > self.end_seq => {
                self.done = true;
                return Ok(());
            }
            DirectStart::Sequence(seq) => (Some(seq), None, self.end_seq - seq + 1),
            DirectStart::Time(ns) => (None, Some(rfc3339(ns)?), u64::MAX),
        };
        let request = DirectGetRequest {
            seq,
            start_time,
            batch: usize::try_from(left).unwrap_or(usize::MAX).min(self.batch),
            max_bytes: self.max_bytes,
            next_by_subj: self.filter.as_deref(),
        };
        let body = serde_json::to_vec(&request).expect("a request body serializes");
        self.requests.send(body).await
    }

    /// A responder said nothing is left at or after the cursor. End the read, unless
    /// the stream's leader still has a message of the range there: then the responder
    /// trails (a replica or a `mirror_direct` mirror), and the request is sent again.
    async fn end_unless_trailing(&mut self) -> Result<()> {
        let from = match self.start {
            DirectStart::Sequence(seq) if seq > self.end_seq => {
                self.done = true;
                return Ok(());
            }
            DirectStart::Sequence(seq) => msg_get::Position::Sequence(seq),
            DirectStart::Time(ns) => msg_get::Position::Time(ns),
        };
        let next =
            msg_get::first_at_or_after(&self.conn, &self.stream, from, self.filter.as_slice())
                .await;
        match next {
            Ok(Some(stored)) if stored.meta.stream_seq <= self.end_seq => {
                let why = format!(
                    "the servers answering its direct gets lack message {}, which the \
                     stream's leader has (read with method 'consumer')",
                    stored.meta.stream_seq
                );
                self.requests.unanswered_then_pause(why).await?;
            }
            Ok(_) => self.done = true,
            // A leader being elected answers `503` at once: pause before asking again.
            Err(e) if is_transient(&e) => {
                let why = format!("asking the stream's leader for its next message: {e}");
                self.requests.unanswered_then_pause(why).await?;
            }
            Err(e) => {
                return Err(e.context(format!(
                    "direct read of stream {:?}: checking the end of the range with its leader",
                    self.stream
                )))
            }
        }
        Ok(())
    }

    /// Stop reading.
    pub async fn close(&mut self) {
        self.done = true;
        self.requests.close().await;
    }
}

/// A reply to a read's latest direct get, as the read acts on it.
pub(crate) enum DirectReply {
    /// A message of the stream, answered by the stream itself.
    Message(Delivered),
    /// `204 EOB`: the request's batch is over; the reply, for its headers
    /// (`Nats-Num-Pending`: results left).
    EndOfBatch(Message),
    /// `404 No Results`: nothing at or after the request's cursor.
    NoResults,
    /// Nothing to act on: the request is to be sent again (no reply in time, the
    /// responders pushed back, or only mirrors answered).
    SendAgain,
    /// Another status, the read's own to handle or to report
    /// ([`DirectRequests::unexpected`]).
    Other(Status),
}

/// The requests of one direct read and their replies. Each request goes out with the
/// reply subject `<inbox>.<request number>`, so the late replies of an earlier
/// request (one sent again after a timeout) are told apart and dropped.
///
/// A request unanswered (no reply, nobody or only mirrors answering, a full queue, a
/// trailing responder) is sent again for up to `resume_timeout` since the first of
/// them, pausing where the responders need time; a reply starts that budget anew.
pub(crate) struct DirectRequests {
    conn: Connection,
    stream: String,
    /// `<prefix>.DIRECT.GET.<stream>`.
    pub subject: String,
    inbox: String,
    sub: Option<Subscriber>,
    request: u64,
    /// Whether the latest request may still be answered (its batch is not over).
    pub in_flight: bool,
    /// The read, as its errors name it.
    what: String,
    resends: Retry,
}

impl DirectRequests {
    pub fn new(conn: &Connection, stream: &str, what: String, resume_timeout: Duration) -> Self {
        Self {
            conn: conn.clone(),
            stream: stream.to_string(),
            subject: conn.api_subject(&subjects::direct_get(stream)),
            inbox: conn.client.new_inbox(),
            sub: None,
            request: 0,
            in_flight: false,
            what,
            resends: Retry::after_first_failure(Backoff::API, resume_timeout),
        }
    }

    /// A reply of the stream came: unanswered requests from now on start a new budget.
    pub fn answered(&mut self) {
        self.resends.succeeded();
    }

    /// The latest request went unanswered (`why`): it is to be sent again, unless
    /// `resume_timeout` has passed since requests began to go unanswered.
    pub fn unanswered(&mut self, why: String) -> Result<()> {
        self.in_flight = false;
        if self.resends.may_try_again() {
            Ok(())
        } else {
            Err(self.gave_up(&why))
        }
    }

    /// [`Self::unanswered`], and a pause before the request is sent again (the
    /// responders are busy, not there yet, or trailing).
    pub async fn unanswered_then_pause(&mut self, why: String) -> Result<()> {
        self.unanswered(why.clone())?;
        if self.resends.pause().await {
            Ok(())
        } else {
            Err(self.gave_up(&why))
        }
    }

    /// The responders pushed back (`503`: nobody answers, as while a server restarts;
    /// `429`: the stream's direct-get queue is full): the request is sent again after a
    /// pause, unless `resume_timeout` has passed.
    pub async fn pushed_back(&mut self, status: &Status) -> Result<()> {
        let why = match status {
            Status::TooManyRequests => "429 Too Many Requests to its direct gets".to_string(),
            _ => format!(
                "nobody answers direct gets on {} (the stream needs allow_direct=True, and \
                 must exist)",
                self.subject
            ),
        };
        self.unanswered_then_pause(why).await
    }

    fn gave_up(&self, why: &str) -> Error {
        Error::timeout(format!(
            "{}: {why}; gave up after {:?} (option 'resume_timeout')",
            self.what,
            self.resends.within()
        ))
    }

    /// Send a request with `body`; replies to earlier ones are dropped from now on.
    pub async fn send(&mut self, body: Vec<u8>) -> Result<()> {
        if self.sub.is_none() {
            self.sub = Some(
                self.conn
                    .client
                    .subscribe(format!("{}.*", self.inbox))
                    .await?,
            );
        }
        self.request += 1;
        self.conn
            .client
            .publish_with_reply(
                self.subject.clone(),
                format!("{}.{}", self.inbox, self.request),
                body.into(),
            )
            .await?;
        self.in_flight = true;
        Ok(())
    }

    /// The next reply to the latest request (the read sends one whenever none is
    /// [`Self::in_flight`]). After an end of batch or no results no request is in
    /// flight; whatever leaves the request unanswered counts against
    /// `resume_timeout`, and a message of the stream starts that budget anew.
    pub async fn next(&mut self) -> Result<DirectReply> {
        let Some(message) = self.next_reply().await? else {
            return Ok(DirectReply::SendAgain);
        };
        match Status::of(&message) {
            None => {}
            Some(Status::EndOfBatch) => {
                self.in_flight = false;
                return Ok(DirectReply::EndOfBatch(message));
            }
            Some(Status::RequestEnded(_)) => {
                self.in_flight = false;
                return Ok(DirectReply::NoResults);
            }
            Some(status @ (Status::NoResponders | Status::TooManyRequests)) => {
                self.pushed_back(&status).await?;
                return Ok(DirectReply::SendAgain);
            }
            Some(other) => return Ok(DirectReply::Other(other)),
        }
        if !answered_by(&message, &self.stream) {
            // A `mirror_direct` mirror: its copy may start later, keep less or trail,
            // so its gaps cannot be told from deletions. Ask again (the rest of this
            // batch is dropped as a reply to an older request).
            self.unanswered("only mirrors of it answered its direct gets".into())?;
            return Ok(DirectReply::SendAgain);
        }
        self.answered();
        into_delivered(message, &self.stream).map(DirectReply::Message)
    }

    /// The error of a status the read cannot go on after.
    pub fn unexpected(&self, status: &Status) -> Error {
        status.unexpected(&self.what)
    }

    /// The next reply to the latest request; None when none came within the request
    /// timeout, and the request is to be sent again ([`Self::unanswered`]).
    async fn next_reply(&mut self) -> Result<Option<Message>> {
        let ours = format!(".{}", self.request);
        loop {
            let sub = self.sub.as_mut().expect("subscribed by send");
            match tokio::time::timeout(self.conn.request_timeout, sub.next()).await {
                Ok(Some(message)) if message.subject.as_str().ends_with(&ours) => {
                    return Ok(Some(message))
                }
                Ok(Some(_)) => continue, // a late reply to an earlier request
                Ok(None) => {
                    return Err(Error::connection(format!(
                        "{}: the connection closed",
                        self.what
                    )))
                }
                Err(_) => {
                    let why = format!(
                        "no reply within {:?} (option 'request_timeout')",
                        self.conn.request_timeout
                    );
                    self.unanswered(why)?;
                    return Ok(None);
                }
            }
        }
    }

    pub async fn close(&mut self) {
        if let Some(mut sub) = self.sub.take() {
            let _ = sub.unsubscribe().await;
        }
    }
}

/// Whether a direct get reply comes from `stream` itself (its leader or a replica),
/// not from a mirror answering for it.
fn answered_by(message: &Message, stream: &str) -> bool {
    message
        .headers
        .as_ref()
        .and_then(|h| h.get_last(STREAM))
        .is_none_or(|name| name.as_str() == stream)
}

/// A direct get reply as a delivery: the stored subject and headers back in place,
/// the sequence and time stamp as metadata.
fn into_delivered(mut message: Message, stream: &str) -> Result<Delivered> {
    let malformed = |what: &str| {
        Error::new(
            ErrorKind::Api,
            format!("direct get of stream {stream:?}: a reply without a valid {what} header"),
        )
    };
    let headers = message.headers.take().ok_or_else(|| malformed(SEQUENCE))?;
    let value = |name: &str| headers.get_last(name).map(|v| v.as_str());
    let stream_seq = value(SEQUENCE)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| malformed(SEQUENCE))?;
    let timestamp_ns = value(TIME_STAMP)
        .and_then(|v| time::OffsetDateTime::parse(v, &Rfc3339).ok())
        .map(|t| t.unix_timestamp_nanos() as i64)
        .ok_or_else(|| malformed(TIME_STAMP))?;
    let subject = value(SUBJECT).ok_or_else(|| malformed(SUBJECT))?;
    message.subject = subject.into();
    let pending = value(NUM_PENDING).and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut own = HeaderMap::new();
    for (name, values) in headers.iter() {
        let name: &str = name.as_ref();
        let stored = if DIRECT_HEADERS.contains(&name) {
            &values[..values.len().saturating_sub(1)]
        } else {
            &values[..]
        };
        for v in stored {
            own.append(name, v.as_str());
        }
    }
    message.headers = (!own.is_empty()).then_some(own);
    Ok(Delivered {
        message,
        meta: MessageMetadata {
            delivered: 1,
            stream_seq,
            consumer_seq: 0,
            timestamp_ns,
            pending,
        },
    })
}
