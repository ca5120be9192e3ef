//! What the core tells the application's log: the rare things a user wants to know
//! about after the fact (a reconnect, a read that resumed, a consumer recreated,
//! rows resent, the server pushing back, late replies dropped). Never one event per
//! message: the hot paths count, and a call reports its counts once.
//!
//! Each event is a `tracing` event whose target is a logger name under
//! `jetstream_arrow` (the Python module forwards them to `logging`); the messages
//! are written here, in one place.

use std::fmt::Display;
use std::time::Duration;

/// The connection: reconnects, the server's errors, lame duck mode, slow consumers.
pub const CONNECTION: &str = "jetstream_arrow.connection";
/// Reads of a range and ordered consumers.
pub const READ: &str = "jetstream_arrow.read";
/// Durable pull and push consumers.
pub const CONSUME: &str = "jetstream_arrow.consume";
/// Publishing.
pub const PUBLISH: &str = "jetstream_arrow.publish";

pub fn connection_event(event: &async_nats::Event) {
    use async_nats::Event;
    match event {
        Event::Connected => tracing::info!(target: CONNECTION, "connected to the server"),
        Event::Disconnected => tracing::warn!(
            target: CONNECTION,
            "disconnected from the server; reconnecting (reads resume and unacknowledged \
             rows are resent once it is back)"
        ),
        Event::LameDuckMode => tracing::warn!(
            target: CONNECTION,
            "the server is in lame duck mode (shutting down): the client moves to another"
        ),
        Event::SlowConsumer(sid) => tracing::warn!(
            target: CONNECTION,
            "subscription {sid} fell behind and the client dropped messages for it (slow \
             consumer)"
        ),
        Event::ServerError(e) => tracing::warn!(target: CONNECTION, "the server reported: {e}"),
        // Told at each failed reconnect attempt: the disconnect was the warning.
        Event::ClientError(e) => tracing::info!(target: CONNECTION, "client error: {e}"),
        Event::Draining | Event::Closed => {}
    }
}

/// An ordered consumer is recreated after `why`, to go on after `after_seq`.
pub fn read_resumed(stream: &str, after_seq: Option<u64>, why: &dyn Display) {
    match after_seq {
        Some(seq) => tracing::info!(
            target: READ,
            "read of stream {stream:?} resumes after seq {seq} with a new consumer ({why})"
        ),
        None => tracing::info!(
            target: READ,
            "read of stream {stream:?} resumes from its start with a new consumer ({why})"
        ),
    }
}

/// A durable consumer is reset to its ack floor after `why`.
pub fn consumer_reset(stream: &str, consumer: &str, why: &dyn Display) {
    tracing::info!(
        target: CONSUME,
        "consumer {consumer:?} of stream {stream:?} is reset to its ack floor ({why}); \
         unacknowledged messages come again"
    );
}

/// A pull or push consumer heard nothing, not even a heartbeat, for `silent`.
pub fn heartbeats_missed(what: &str, silent: Duration) {
    tracing::warn!(
        target: CONSUME,
        "{what}: no messages and no idle heartbeats for {silent:?}"
    );
}

/// A puller of a `pinned_client` priority group lost its pin (`423`): it expired or
/// was unpinned; the puller pulls on without it.
pub fn pin_lost(what: &str) {
    tracing::info!(
        target: CONSUME,
        "{what}: the priority group's pin moved to another client (423); pulling on as a candidate"
    );
}

/// The first row of a publish call that is resent, and why (the others are counted).
pub fn first_resend(row: usize, why: &str) {
    tracing::info!(
        target: PUBLISH,
        "row {row} is resent ({why}); other resends of this call are counted in its result"
    );
}

/// The server answered a publish with `429`/`503`: the window shrinks (once per call).
pub fn pushed_back(why: &str) {
    tracing::warn!(
        target: PUBLISH,
        "the server pushed back ({why}): fewer rows in flight, and the refused ones resent"
    );
}

/// What a publish call resent and dropped, once at its end.
pub fn publish_summary(rows: usize, resends: usize, late_replies: usize) {
    tracing::info!(
        target: PUBLISH,
        "published {rows} rows with {resends} resends; {late_replies} late acks dropped \
         (answers to messages resent or given up on)"
    );
}
