//! The pull loop shared by reads and durable consumers: keeps pull requests
//! outstanding up to a bounded number of messages (and bytes), refills at a
//! threshold, watches idle heartbeats, and turns the server's status replies into
//! accounting or errors (404/408/409 replies carry Nats-Pending-*).
//!
//! One module for the continuous loop and the one-shot fetch: both speak the same
//! pull protocol and must treat each status alike.
//!
//! The client's subscription buffer is the prefetch buffer: the loop never asks for
//! more than `max_messages` beyond what it has handed out, so memory stays bounded
//! while the caller (Python) is busy with the previous batch.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_nats::{Statistics, Subscriber};
use futures::{FutureExt, StreamExt};
use tokio::time::Instant;

use crate::api::status::{Pending, Status};
use crate::api::subjects;
use crate::api::types::PullRequest;
use crate::arrow::metadata::parse_ack_subject;
use crate::connection::Connection;
use crate::error::{Error, ErrorKind, Result};

use crate::limits::MAX_BUFFERED_MESSAGES;
use crate::retry::{Backoff, Retry};

/// How often a loop looks for a reconnect of its client while no message comes.
const RECONNECT_POLL: Duration = Duration::from_millis(250);

/// What a loop does when its client has reconnected. Pull requests die with the
/// connection that sent them, and so do the deliveries it carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnReconnect {
    /// Forget what was outstanding and pull again (nats.go's pull consumers): a
    /// consumer that acks sends the lost deliveries again after `ack_wait`.
    PullAgain,
    /// Fail `next` with a connection error: a consumer that never sends a delivery
    /// again (AckNone) must be recreated where its reader stopped.
    Fail,
}

/// How much to keep requested and when to ask for more (nats.go's `PullMaxMessages`,
/// `PullThresholdMessages`, `PullExpiry`, `PullHeartbeat`).
#[derive(Debug, Clone)]
pub struct PullSettings {
    pub max_messages: usize,
    pub max_bytes: Option<usize>,
    pub threshold_messages: usize,
    pub threshold_bytes: Option<usize>,
    pub expires: Duration,
    pub heartbeat: Option<Duration>,
}

impl PullSettings {
    /// Settings with nats.go's defaults for thresholds (half) and a heartbeat.
    pub fn new(
        max_messages: usize,
        max_bytes: Option<usize>,
        expires: Duration,
        heartbeat: Option<Duration>,
    ) -> Self {
        Self {
            max_messages,
            max_bytes,
            threshold_messages: max_messages / 2,
            threshold_bytes: max_bytes.map(|b| b / 2),
            expires,
            heartbeat,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.max_messages == 0 || self.max_messages > MAX_BUFFERED_MESSAGES {
            return Err(Error::bad_input(format!(
                "option 'max_messages' must be between 1 and {MAX_BUFFERED_MESSAGES}, got {}",
                self.max_messages
            )));
        }
        if self.threshold_messages >= self.max_messages {
            return Err(Error::bad_input(
                "option 'threshold_messages' must be below 'max_messages'",
            ));
        }
        if self.expires < Duration::from_secs(1) {
            return Err(Error::bad_input(
                "option 'expires' must be at least 1 second",
            ));
        }
        if self.heartbeat.is_some_and(|hb| hb.is_zero()) {
            return Err(Error::bad_input(
                "option 'heartbeat' must be more than 0 seconds (None for no heartbeat)",
            ));
        }
        if self.max_bytes == Some(0) {
            return Err(Error::bad_input("option 'max_bytes' must be at least 1"));
        }
        match (self.threshold_bytes, self.max_bytes) {
            (Some(_), None) => {
                return Err(Error::bad_input(
                    "option 'threshold_bytes' needs 'max_bytes' (it is a part of it)",
                ))
            }
            (Some(t), Some(m)) if t >= m => {
                return Err(Error::bad_input(
                    "option 'threshold_bytes' must be below 'max_bytes'",
                ))
            }
            _ => {}
        }
        if let Some(hb) = self.heartbeat {
            if hb * 2 > self.expires {
                return Err(Error::bad_input(format!(
                    "option 'heartbeat' ({hb:?}) must be at most half of 'expires' ({:?})",
                    self.expires
                )));
            }
        }
        Ok(())
    }
}

use crate::arrow::metadata::Delivered;

/// The pin header a `pinned_client` priority group puts on what it delivers to the
/// pinned puller; the puller names it as `id` in its later pulls.
pub const PIN_ID: &str = "Nats-Pin-Id";

/// A pull's place in a priority group of its consumer (server 2.11+; `priority` 2.12+),
/// sent in every pull request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriorityGroup {
    /// One of the consumer's `priority_groups`.
    pub group: String,
    /// `overflow`: served only while the consumer has at least this many messages
    /// pending (not yet delivered).
    pub min_pending: Option<usize>,
    /// `overflow`: served only while at least this many deliveries await their ack.
    pub min_ack_pending: Option<usize>,
    /// `prioritized`: 0 (served first) to 9.
    pub priority: Option<usize>,
}

impl PriorityGroup {
    pub fn validate(&self) -> Result<()> {
        if self.group.is_empty() {
            return Err(Error::bad_input(
                "option 'group' names one of the consumer's priority_groups; got ''",
            ));
        }
        if self.priority.is_some_and(|p| p > 9) {
            return Err(Error::bad_input(format!(
                "option 'priority' must be between 0 (served first) and 9, got {}",
                self.priority.unwrap_or_default()
            )));
        }
        for (value, option) in [
            (self.min_pending, "min_pending"),
            (self.min_ack_pending, "min_ack_pending"),
        ] {
            if value == Some(0) {
                return Err(Error::bad_input(format!(
                    "option '{option}' must be at least 1 (None: no minimum)"
                )));
            }
        }
        Ok(())
    }
}

/// The pin a `pinned_client` group gave a puller (from [`PIN_ID`] on its deliveries),
/// shared by every fetch and loop of one bound consumer; forgotten on a `423`.
pub type Pin = Arc<std::sync::Mutex<Option<String>>>;

/// A pull request's JSON: async-nats's `BatchConfig` with the group's fields and the
/// pin (`id`), which async-nats keeps private.
fn pull_body(mut request: PullRequest, priority: Option<&PriorityGroup>, pin: &Pin) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Body<'a> {
        #[serde(flatten)]
        batch: &'a PullRequest,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    }
    let mut id = None;
    if let Some(p) = priority {
        request.group = Some(p.group.clone());
        request.min_pending = p.min_pending;
        request.min_ack_pending = p.min_ack_pending;
        request.priority = p.priority;
        id = pin.lock().expect("pin lock").clone();
    }
    serde_json::to_vec(&Body {
        batch: &request,
        id,
    })
    .expect("JSON")
}

/// Keeps the pin a delivery carries, for a puller in a priority group.
fn keep_pin(message: &async_nats::Message, pin: &Pin) {
    if let Some(id) = message.headers.as_ref().and_then(|h| h.get(PIN_ID)) {
        let mut held = pin.lock().expect("pin lock");
        if held.as_deref() != Some(id.as_str()) {
            *held = Some(id.as_str().to_string());
        }
    }
}

/// An open pull subscription on one consumer.
pub struct PullLoop {
    conn: Connection,
    stream: String,
    consumer: String,
    next_subject: String,
    inbox: String,
    sub: Subscriber,
    settings: PullSettings,
    outstanding_messages: usize,
    outstanding_bytes: usize,
    /// Requests in a row ended by their byte budget with no message delivered.
    max_bytes_ends: u32,
    on_reconnect: OnReconnect,
    /// The client's counters, whose connect count tells a reconnect (held once: the
    /// client hands out a new `Arc` per call, and the loop looks per message).
    statistics: Arc<Statistics>,
    /// The connect count when the loop's pull requests were sent.
    connects_seen: u64,
    /// The priority group its pulls name, and the pin it holds there.
    priority: Option<PriorityGroup>,
    pin: Pin,
}

impl PullLoop {
    pub async fn new(
        conn: Connection,
        stream: &str,
        consumer: &str,
        settings: PullSettings,
    ) -> Result<Self> {
        settings.validate()?;
        let inbox = conn.client.new_inbox();
        let sub = conn.client.subscribe(inbox.clone()).await?;
        let statistics = conn.client.statistics();
        Ok(Self {
            next_subject: conn.api_subject(&subjects::consumer_msg_next(stream, consumer)),
            conn,
            stream: stream.to_string(),
            consumer: consumer.to_string(),
            inbox,
            sub,
            settings,
            outstanding_messages: 0,
            outstanding_bytes: 0,
            max_bytes_ends: 0,
            on_reconnect: OnReconnect::PullAgain,
            connects_seen: statistics.connects.load(Ordering::Relaxed),
            statistics,
            priority: None,
            pin: Pin::default(),
        })
    }

    /// Pulls that name `priority`'s group, keeping the group's pin in `pin`.
    pub fn with_priority(mut self, priority: Option<PriorityGroup>, pin: Pin) -> Result<Self> {
        if let Some(p) = &priority {
            p.validate()?;
        }
        self.priority = priority;
        self.pin = pin;
        Ok(self)
    }

    /// `next` fails with a connection error once the client has reconnected, instead
    /// of pulling again. For consumers that never redeliver (AckNone): what the server
    /// sent on the lost connection is gone, and if it was the stream's last message,
    /// no later delivery would reveal the hole.
    pub fn fail_on_reconnect(&mut self) {
        self.on_reconnect = OnReconnect::Fail;
    }

    /// Whether the client reconnected since the loop's pull requests were sent.
    pub fn reconnected(&self) -> bool {
        self.connects() != self.connects_seen
    }

    /// After a reconnect: fail, or forget what the old connection's requests had
    /// outstanding, so the next refill asks again on the new one.
    fn on_reconnected(&mut self) -> Result<()> {
        if self.on_reconnect == OnReconnect::Fail {
            return Err(self.reconnected_error());
        }
        self.connects_seen = self.connects();
        self.outstanding_messages = 0;
        self.outstanding_bytes = 0;
        self.max_bytes_ends = 0;
        Ok(())
    }

    fn connects(&self) -> u64 {
        self.statistics.connects.load(Ordering::Relaxed)
    }

    fn missed_heartbeats_error(&self) -> Error {
        Error::new(
            ErrorKind::MissedHeartbeats,
            format!(
                "{}: no messages and no idle heartbeats for {:?} (two heartbeat periods); \
                 the server or the consumer may be gone",
                self.consumer_label(),
                self.settings.heartbeat.unwrap_or_default() * 2
            ),
        )
    }

    fn reconnected_error(&self) -> Error {
        Error::connection(format!(
            "{}: the connection to the server was re-established; what was delivered on \
             the old one may be lost",
            self.consumer_label()
        ))
    }

    /// What the next pull request should ask for, if one is due: when what is
    /// outstanding fell to a threshold, and only with a worthwhile byte budget (a
    /// request with a few bytes left would end at once with "exceeds MaxBytes").
    fn refill_size(&self) -> Option<(usize, Option<usize>)> {
        let s = &self.settings;
        let batch = s.max_messages.saturating_sub(self.outstanding_messages);
        if batch == 0 {
            return None;
        }
        let low_messages = self.outstanding_messages <= s.threshold_messages;
        match s.max_bytes {
            None => low_messages.then_some((batch, None)),
            Some(max) => {
                let budget = max.saturating_sub(self.outstanding_bytes);
                let low_bytes = s
                    .threshold_bytes
                    .is_some_and(|t| self.outstanding_bytes <= t);
                ((low_messages || low_bytes) && budget >= max / 2).then_some((batch, Some(budget)))
            }
        }
    }

    async fn refill(&mut self) -> Result<()> {
        let Some((batch, bytes)) = self.refill_size() else {
            return Ok(());
        };
        let request = PullRequest {
            batch,
            expires: Some(self.settings.expires),
            max_bytes: bytes.unwrap_or(0),
            idle_heartbeat: self.settings.heartbeat.unwrap_or_default(),
            ..Default::default()
        };
        self.outstanding_bytes += bytes.unwrap_or(0);
        self.conn
            .client
            .publish_with_reply(
                self.next_subject.clone(),
                self.inbox.clone(),
                pull_body(request, self.priority.as_ref(), &self.pin).into(),
            )
            .await?;
        self.outstanding_messages += batch;
        Ok(())
    }

    /// A pull request ended early: what it did not deliver is no longer outstanding.
    fn request_ended(&mut self, pending: Pending) {
        match pending.messages {
            Some(messages) => {
                self.outstanding_messages = self.outstanding_messages.saturating_sub(messages);
                let bytes = pending.bytes.unwrap_or(0);
                self.outstanding_bytes = self.outstanding_bytes.saturating_sub(bytes);
                if self.outstanding_messages == 0 {
                    self.outstanding_bytes = 0;
                }
            }
            // A request refused as a whole (e.g. max waiting exceeded) says nothing
            // of what is outstanding; start the accounting over.
            None => {
                self.outstanding_messages = 0;
                self.outstanding_bytes = 0;
            }
        }
    }

    fn consumer_label(&self) -> String {
        format!("consumer {:?} of stream {:?}", self.consumer, self.stream)
    }

    /// The next message. With `wait`, gives None when nothing came in that time.
    /// Fails after two idle-heartbeat periods with neither messages nor heartbeats.
    pub async fn next(&mut self, wait: Option<Duration>) -> Result<Option<Delivered>> {
        // The clock is read only when a wait is armed: most calls find a message
        // already buffered, and a clock read (or a timer) per message costs more than
        // the message. `started` is when this call first waited; `last_activity`,
        // when it last heard from the server (unset: "just now", as a message or a
        // status was the last thing it did).
        let mut started: Option<Instant> = None;
        let mut last_activity: Option<Instant> = None;
        loop {
            if self.reconnected() {
                self.on_reconnected()?;
                last_activity = Some(Instant::now());
            }
            self.refill().await?;
            let next = match self.sub.next().now_or_never() {
                Some(next) => next,
                None => {
                    let now = Instant::now();
                    let start = *started.get_or_insert(now);
                    let active = *last_activity.get_or_insert(now);
                    let wait_until = wait.map(|w| start + w);
                    let heartbeat_deadline = self.settings.heartbeat.map(|hb| active + hb * 2);
                    let deadline = [wait_until, heartbeat_deadline]
                        .into_iter()
                        .flatten()
                        .fold(now + RECONNECT_POLL, Instant::min);
                    match tokio::time::timeout_at(deadline, self.sub.next()).await {
                        Ok(next) => next,
                        Err(_) => {
                            let now = Instant::now();
                            if self.reconnected() {
                                continue; // the top of the loop deals with it
                            }
                            if heartbeat_deadline.is_some_and(|hb| hb <= now) {
                                crate::events::heartbeats_missed(
                                    &self.consumer_label(),
                                    self.settings.heartbeat.unwrap_or_default() * 2,
                                );
                                return Err(self.missed_heartbeats_error());
                            }
                            if wait_until.is_some_and(|w| w <= now) {
                                return Ok(None);
                            }
                            continue; // only the reconnect poll was due
                        }
                    }
                }
            };
            let Some(message) = next else {
                return Err(Error::connection(format!(
                    "{}: the subscription closed (connection closed)",
                    self.consumer_label()
                )));
            };
            last_activity = None;
            if let Some(status) = Status::of(&message) {
                self.on_status(status)?;
                continue;
            }
            let Some(meta) = message.reply.as_deref().and_then(parse_ack_subject) else {
                continue; // not a JetStream delivery; nothing on this inbox should be
            };
            if self.priority.is_some() {
                keep_pin(&message, &self.pin);
            }
            self.max_bytes_ends = 0;
            self.outstanding_messages = self.outstanding_messages.saturating_sub(1);
            self.outstanding_bytes = self.outstanding_bytes.saturating_sub(message.length);
            if self.outstanding_messages == 0 {
                // The server sizes messages a little differently from the client:
                // with nothing requested any more, nothing is outstanding.
                self.outstanding_bytes = 0;
            }
            return Ok(Some(Delivered { message, meta }));
        }
    }

    fn on_status(&mut self, status: Status) -> Result<()> {
        match status {
            Status::IdleHeartbeat | Status::FlowControlRequest => Ok(()), // alive
            Status::RequestEnded(pending) => {
                // Leadership change, max waiting exceeded, expiry, ...: this request
                // is over; the next refill asks again.
                self.request_ended(pending);
                Ok(())
            }
            Status::PinMismatch(pending) => {
                // The group's pin moved (it expired, or was unpinned): this request
                // is over, and the next pulls go without a pin, as a candidate for
                // the next one (nats.go's and async-nats's pull consumers do so).
                *self.pin.lock().expect("pin lock") = None;
                crate::events::pin_lost(&self.consumer_label());
                self.request_ended(pending);
                Ok(())
            }
            Status::MaxBytesExceeded(pending) => {
                // The request's byte budget ran out before the next message: a normal
                // end. Only when it keeps happening with nothing delivered is a single
                // message bigger than the whole budget.
                self.request_ended(pending);
                self.max_bytes_ends += 1;
                if self.max_bytes_ends >= 3 {
                    return Err(Error::bad_input(format!(
                        "{}: a message is larger than a pull's max_bytes ({} bytes); raise 'max_bytes'",
                        self.consumer_label(),
                        self.settings.max_bytes.unwrap_or_default()
                    )));
                }
                Ok(())
            }
            // Refused requests, limits, a deleted consumer: asking again would
            // only be refused again.
            other => Err(other.pull_error(&self.stream, &self.consumer, &self.next_subject)),
        }
    }

    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

/// One pull request (nats.go's `Fetch`): up to `max_messages` / `max_bytes`,
/// ending at `expires`, at once with `no_wait` when nothing is there.
#[derive(Debug, Clone)]
pub struct FetchRequest {
    pub max_messages: usize,
    pub max_bytes: Option<usize>,
    pub expires: Duration,
    pub no_wait: bool,
    pub heartbeat: Option<Duration>,
    /// The priority group the pull names, and the pin it holds there.
    pub priority: Option<PriorityGroup>,
    pub pin: Pin,
}

/// Send one pull request and collect what it delivers.
pub async fn fetch_once(
    conn: &Connection,
    stream: &str,
    consumer: &str,
    fetch: &FetchRequest,
) -> Result<Vec<Delivered>> {
    let FetchRequest {
        max_messages,
        max_bytes,
        expires,
        no_wait,
        heartbeat,
        priority,
        pin,
    } = fetch.clone();
    if let Some(p) = &priority {
        p.validate()?;
    }
    if max_messages == 0 {
        return Err(Error::bad_input("option 'max_messages' must be at least 1"));
    }
    if max_bytes == Some(0) {
        return Err(Error::bad_input("option 'max_bytes' must be at least 1"));
    }
    if !no_wait && expires.is_zero() {
        return Err(Error::bad_input(
            "option 'expires' must be more than 0 seconds (or use no_wait=True)",
        ));
    }
    if heartbeat.is_some_and(|hb| hb.is_zero() || hb * 2 > expires) && !no_wait {
        return Err(Error::bad_input(format!(
            "option 'heartbeat' must be more than 0 and at most half of 'expires' ({expires:?})"
        )));
    }
    let inbox = conn.client.new_inbox();
    let mut sub = conn.client.subscribe(inbox.clone()).await?;
    let request = PullRequest {
        batch: max_messages,
        expires: (!no_wait).then_some(expires),
        no_wait,
        max_bytes: max_bytes.unwrap_or(0),
        idle_heartbeat: heartbeat.unwrap_or_default(),
        ..Default::default()
    };
    let subject = conn.api_subject(&subjects::consumer_msg_next(stream, consumer));
    let body: bytes::Bytes = pull_body(request, priority.as_ref(), &pin).into();
    conn.client
        .publish_with_reply(subject.clone(), inbox.clone(), body.clone())
        .await?;
    // The server ends the request itself at `expires`; the margin covers a server
    // that never answers, so this cannot hang.
    let started = Instant::now();
    let deadline = started
        + if no_wait {
            conn.request_timeout
        } else {
            expires + Duration::from_secs(2)
        };
    let mut out = Vec::new();
    let mut bytes = 0usize;
    let mut consumer_loading = Retry::from_now(Backoff::CONSUMER_LOADING, deadline - started);
    // With a heartbeat the server speaks at least once per period while the request
    // is open; two silent periods mean it is gone (paused, partitioned), which must
    // be said then, not at `expires`.
    let mut last_activity = Instant::now();
    while out.len() < max_messages && max_bytes.is_none_or(|m| bytes < m) {
        let silent_until = heartbeat.map(|hb| last_activity + hb * 2);
        let wake = silent_until.map_or(deadline, |s| s.min(deadline));
        let message = match tokio::time::timeout_at(wake, sub.next()).await {
            Ok(Some(m)) => m,
            Ok(None) => return Err(Error::connection("fetch: the connection closed")),
            Err(_) if wake < deadline => {
                // Messages already delivered are handed out; the next call fails
                // the same way if the server is still silent.
                if !out.is_empty() {
                    break;
                }
                crate::events::heartbeats_missed(
                    &format!("fetch from consumer {consumer:?} of stream {stream:?}"),
                    heartbeat.unwrap_or_default() * 2,
                );
                return Err(Error::new(
                    ErrorKind::MissedHeartbeats,
                    format!(
                        "fetch from consumer {consumer:?} of stream {stream:?}: no messages \
                         and no idle heartbeats for {:?} (two heartbeat periods); the server \
                         or the consumer may be gone",
                        heartbeat.unwrap_or_default() * 2
                    ),
                ));
            }
            Err(_) if !out.is_empty() => break,
            Err(_) => {
                // The server ends every request by `expires` with a status; silence
                // past it means the server is not answering, not that nothing waits.
                return Err(Error::timeout(format!(
                    "fetch from consumer {consumer:?} of stream {stream:?}: no reply from \
                     {subject} within {:?}; the server may be paused or unreachable",
                    deadline - started
                )));
            }
        };
        last_activity = Instant::now();
        match Status::of(&message) {
            None => {}
            Some(Status::IdleHeartbeat | Status::FlowControlRequest) => continue,
            Some(Status::RequestEnded(_)) => break,
            Some(status @ Status::NoResponders) if out.is_empty() => {
                // Right after a server restart the consumer is not loaded yet: ask
                // again until the request's own deadline, then say nobody answers.
                if !consumer_loading.pause().await {
                    return Err(status.pull_error(stream, consumer, &subject));
                }
                conn.client
                    .publish_with_reply(subject.clone(), inbox.clone(), body.clone())
                    .await?;
                continue;
            }
            Some(Status::MaxBytesExceeded(_)) if out.is_empty() => {
                // Not even the first message fitted the request's byte budget: every
                // later fetch would end the same way, empty.
                return Err(Error::bad_input(format!(
                    "fetch from consumer {consumer:?} of stream {stream:?}: the next message \
                     is larger than option 'max_bytes' ({} bytes); raise it",
                    max_bytes.unwrap_or_default()
                )));
            }
            Some(Status::MaxBytesExceeded(_)) => break,
            Some(Status::PinMismatch(_)) => {
                // The group's pin moved: the fetch ends with what it has, and the
                // next one pulls without a pin, a candidate for the next.
                *pin.lock().expect("pin lock") = None;
                crate::events::pin_lost(&format!(
                    "fetch from consumer {consumer:?} of stream {stream:?}"
                ));
                break;
            }
            Some(other) => return Err(other.pull_error(stream, consumer, &subject)),
        }
        if priority.is_some() {
            keep_pin(&message, &pin);
        }
        if let Some(meta) = message.reply.as_deref().and_then(parse_ack_subject) {
            bytes += message.length;
            out.push(Delivered { message, meta });
        }
    }
    let _ = sub.unsubscribe().await;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(priority: Option<&PriorityGroup>, pin: Option<&str>) -> serde_json::Value {
        let pin = Pin::new(std::sync::Mutex::new(pin.map(str::to_string)));
        let request = PullRequest {
            batch: 10,
            expires: Some(Duration::from_secs(5)),
            ..Default::default()
        };
        serde_json::from_slice(&pull_body(request, priority, &pin)).unwrap()
    }

    #[test]
    fn a_pull_names_its_group_and_pin_as_the_server_reads_them() {
        // nats-server's JSApiConsumerGetNextRequest embeds PriorityGroup: group,
        // min_pending, min_ack_pending, id, priority at the top level.
        let group = PriorityGroup {
            group: "G".into(),
            min_pending: Some(100),
            min_ack_pending: Some(5),
            priority: Some(2),
        };
        let body = json(Some(&group), Some("PIN1"));
        assert_eq!(body["batch"], 10);
        assert_eq!(body["group"], "G");
        assert_eq!(body["min_pending"], 100);
        assert_eq!(body["min_ack_pending"], 5);
        assert_eq!(body["priority"], 2);
        assert_eq!(body["id"], "PIN1");
        // Without a pin, no id; without a group, neither (a pin is only a group's).
        assert!(json(Some(&group), None).get("id").is_none());
        let plain = json(None, Some("PIN1"));
        assert!(plain.get("id").is_none());
        assert!(plain["group"].is_null());
    }

    #[test]
    fn group_options_are_checked() {
        let ok = PriorityGroup {
            group: "G".into(),
            ..Default::default()
        };
        assert!(ok.validate().is_ok());
        for bad in [
            PriorityGroup::default(),
            PriorityGroup {
                priority: Some(10),
                ..ok.clone()
            },
            PriorityGroup {
                min_pending: Some(0),
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
