//! The window of messages awaiting their ack, bounded by count and by payload bytes,
//! and how many messages it may hold while the server pushes back ([`Congestion`]).

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use crate::publish::input::OutgoingMessage;

pub(super) struct InFlight {
    pub row: usize,
    pub attempt: u32,
    pub message: OutgoingMessage,
    /// A probe of whether the row's msg id is stored, sent after its expected-last
    /// check failed: the conflict to report unless the probe finds it stored.
    pub conflict: Option<String>,
    deadline: Instant,
}

/// Messages awaiting their ack, in send order. Tokens are consecutive, so the slot
/// of token `t` is `t - base`: no hashing per message, and since the ack timeout is
/// constant the oldest deadline is always at the front.
pub(super) struct Window {
    base: u64,
    slots: VecDeque<Option<InFlight>>,
    len: usize,
    /// Payload bytes of the messages in flight.
    bytes: usize,
    /// Payload bytes in flight at most (the publisher's `max_bytes_in_flight`).
    max_bytes: usize,
}

impl Window {
    /// An empty window, full once `max_bytes` payload bytes are in flight.
    pub(super) fn new(max_bytes: usize) -> Self {
        Self {
            base: 0,
            slots: VecDeque::new(),
            len: 0,
            bytes: 0,
            max_bytes,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Whether another message may be sent: fewer than `window` messages and fewer
    /// than `max_bytes_in_flight` payload bytes in flight.
    pub(super) fn has_room(&self, window: usize) -> bool {
        self.len < window && self.bytes < self.max_bytes
    }

    /// Whether a new row may be sent: room in the window also for the messages
    /// waiting to be resent (`waiting`, `waiting_bytes`), which keep their places.
    pub(super) fn has_room_for_new(
        &self,
        window: usize,
        waiting: usize,
        waiting_bytes: usize,
    ) -> bool {
        self.len + waiting < window && self.bytes + waiting_bytes < self.max_bytes
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn push(
        &mut self,
        token: u64,
        row: usize,
        attempt: u32,
        message: OutgoingMessage,
        conflict: Option<String>,
        ack_timeout: Duration,
    ) {
        let entry = InFlight {
            row,
            attempt,
            message,
            conflict,
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

    pub(super) fn take(&mut self, token: u64) -> Option<InFlight> {
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

    pub(super) fn oldest_deadline(&self) -> Option<Instant> {
        self.slots
            .front()
            .and_then(|s| s.as_ref())
            .map(|e| e.deadline)
    }

    /// The oldest message, whatever its deadline.
    pub(super) fn pop_oldest(&mut self) -> Option<InFlight> {
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.base += 1;
        }
        self.slots.front()?;
        let token = self.base;
        self.take(token)
    }

    /// The oldest message if its deadline has passed.
    pub(super) fn pop_expired(&mut self, now: Instant) -> Option<InFlight> {
        if self.oldest_deadline()? > now {
            return None;
        }
        let token = self.base;
        self.take(token)
    }
}

/// The smallest window backpressure shrinks to: a few round trips' worth, so a
/// publisher that met a `429` still keeps the server busy.
const MIN_CONGESTION_WINDOW: usize = 32;

/// How many messages may be in flight: the configured window, halved when the server
/// answers `429 Too Many Requests`, and grown back by an eighth for each window's worth
/// of stored messages. Only a `429` for a message sent after the last halving halves
/// it again: the others were sent under the larger window. Without a `429` it stays
/// at the configured window. This is TCP's additive increase, multiplicative
/// decrease: publishers sharing a stream settle near what the server takes in,
/// instead of spending their retries on `429`s.
pub(super) struct Congestion {
    configured: usize,
    limit: usize,
    /// The first token whose `429` may halve the window again.
    recover_from: u64,
    /// Messages stored since the window last grew.
    stored: usize,
}

impl Congestion {
    pub(super) fn new(configured: usize) -> Self {
        Self {
            configured,
            limit: configured,
            recover_from: 0,
            stored: 0,
        }
    }

    /// The messages that may be in flight now.
    pub(super) fn limit(&self) -> usize {
        self.limit
    }

    /// The server answered `429` to the message sent with `token`; `next_token` is
    /// the one the next message will be sent with.
    pub(super) fn pushed_back(&mut self, token: u64, next_token: u64) {
        if token < self.recover_from {
            return;
        }
        self.limit = (self.limit / 2).max(MIN_CONGESTION_WINDOW.min(self.configured));
        self.recover_from = next_token;
        self.stored = 0;
    }

    /// A message was stored.
    pub(super) fn stored(&mut self) {
        if self.limit >= self.configured {
            return;
        }
        self.stored += 1;
        if self.stored >= self.limit {
            self.stored = 0;
            self.limit = (self.limit + (self.limit / 8).max(1)).min(self.configured);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::Subject;

    pub(super) fn push(w: &mut Window, token: u64, row: usize, size: usize) {
        let message = OutgoingMessage {
            subject: Subject::from("a"),
            headers: None,
            payload: bytes::Bytes::from(vec![b'x'; size]),
            has_msg_id: false,
            has_expectation: false,
        };
        w.push(token, row, 0, message, None, Duration::ZERO);
    }

    #[test]
    fn backpressure_halves_the_window_once_per_round_and_stored_messages_grow_it_back() {
        let mut c = Congestion::new(1024);
        c.pushed_back(10, 500);
        assert_eq!(c.limit(), 512);
        c.pushed_back(11, 501);
        assert_eq!(c.limit(), 512, "sent before the halving: no second halving");
        c.pushed_back(500, 900);
        assert_eq!(c.limit(), 256);
        for _ in 0..256 {
            c.stored();
        }
        assert_eq!(
            c.limit(),
            288,
            "an eighth more after a window of stored messages"
        );
        for _ in 0..100_000 {
            c.stored();
        }
        assert_eq!(c.limit(), 1024, "never above the configured window");
        for t in 0..10 {
            c.pushed_back(1_000_000 + t * 100, 1_000_000 + t * 100 + 1);
        }
        assert_eq!(c.limit(), 32, "never below 32");
        let mut small = Congestion::new(8);
        small.pushed_back(1, 2);
        assert_eq!(small.limit(), 8, "a window below 32 is not shrunk");
    }

    #[test]
    fn window_is_bounded_by_count_and_by_payload_bytes() {
        let max_bytes = crate::defaults::MAX_BYTES_IN_FLIGHT;
        let mut w = Window::new(max_bytes);
        push(&mut w, 7, 0, 10);
        push(&mut w, 8, 1, 10);
        assert!(w.has_room(3));
        assert!(!w.has_room(2), "two messages fill a window of two");
        let big = max_bytes - 20;
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
