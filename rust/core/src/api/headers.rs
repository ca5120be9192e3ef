//! Header names of the JetStream protocol that this package reads or writes, and the
//! ones that steer how the server stores a message.
//!
//! async-nats names the common ones (`async_nats::header::NATS_MESSAGE_ID`, ...) as
//! `HeaderName` values, which a `const` (an atomic batch's header bytes), a match on
//! text and the direct-get bookkeeping cannot take; those are here as text, checked
//! equal to async-nats's by a test, beside the names it lacks.

/// The id the server deduplicates publishes by.
pub const MSG_ID: &str = "Nats-Msg-Id";
/// What a pull request's terminating status left undelivered.
pub const PENDING_MESSAGES: &str = "Nats-Pending-Messages";
pub const PENDING_BYTES: &str = "Nats-Pending-Bytes";
/// Direct gets: messages left after this one, and the sequence of the last one sent.
pub const NUM_PENDING: &str = "Nats-Num-Pending";
pub const LAST_SEQUENCE: &str = "Nats-Last-Sequence";
/// Direct gets: where the answered message is stored.
pub const STREAM: &str = "Nats-Stream";
pub const SEQUENCE: &str = "Nats-Sequence";
pub const TIME_STAMP: &str = "Nats-Time-Stamp";
pub const SUBJECT: &str = "Nats-Subject";
/// Flow-control push consumers: the consumer sequence of the last delivery, on idle
/// heartbeats, and the subject to answer a stalled consumer on.
pub const LAST_CONSUMER: &str = "Nats-Last-Consumer";
pub const CONSUMER_STALLED: &str = "Nats-Consumer-Stalled";
/// Flow-control acks: the stream sequence of the last delivery.
pub const LAST_STREAM: &str = "Nats-Last-Stream";
/// Atomic batches: the batch a message belongs to, its place in it (from 1), and on
/// the last message the commit (`1`: store this message and commit).
pub const BATCH_ID: &str = "Nats-Batch-Id";
pub const BATCH_SEQUENCE: &str = "Nats-Batch-Sequence";
pub const BATCH_COMMIT: &str = "Nats-Batch-Commit";
pub const BATCH_COMMIT_STORE: &str = "1";
/// The longest batch id the server accepts.
pub const BATCH_ID_MAX_LEN: usize = 64;

/// Headers that tell the server how to store a message (expectations, rollups, TTLs,
/// counters, atomic and fast batches, schedules) or that the server itself adds to
/// what it delivers (where a message came from, direct-get bookkeeping). A message
/// read from one stream carries them; published as they are into another, they would
/// steer that stream: a TTL it refuses, a rollup that purges its subject, an
/// expectation that fails. A name ending in `-` covers every header it begins.
/// From nats-server's `server/stream.go` (2.15).
///
/// Not among them: `Nats-Marker-Reason`, which the server adds to the marker it
/// leaves where it removed a subject's last message (`subject_delete_marker_ttl`:
/// `MaxAge`, `Purge`, `Remove`). It steers nothing (nats-server 2.15 stores it from a
/// client as given) and is what the marker means: KV clients read a key whose last
/// message has it as deleted or purged, so a copy without it would bring an expired
/// key back to life, with an empty value.
pub const CONTROL: &[&str] = &[
    "Nats-Expected-",
    "Nats-Rollup",
    "Nats-TTL",
    "Nats-Incr",
    "Nats-Counter-Sources",
    "Nats-Batch-",
    "Nats-Schedule",
    "Nats-Schedule-",
    "Nats-Scheduler",
    "Nats-Required-Api-Level",
    "Nats-Stream-Source",
    "Nats-Last-Consumer",
    "Nats-Last-Stream",
    "Nats-Consumer-Stalled",
    "Nats-Msg-Size",
    "Nats-Response-Type",
    "Nats-Stream",
    "Nats-Sequence",
    "Nats-Time-Stamp",
    "Nats-Subject",
    "Nats-Last-Sequence",
    "Nats-Num-Pending",
    "Nats-UpTo-Sequence",
];

/// Whether `name` is one of the [`CONTROL`] headers (names compared without case).
pub fn is_control(name: &str) -> bool {
    CONTROL.iter().any(|control| {
        if control.ends_with('-') {
            name.len() > control.len()
                && name
                    .get(..control.len())
                    .is_some_and(|start| start.eq_ignore_ascii_case(control))
        } else {
            name.eq_ignore_ascii_case(control)
        }
    })
}

/// Header `name` of `message` as a number: its last value, which is the server's where
/// it appends its own headers after a message's stored ones (a direct get's reply).
pub fn last_u64(message: &async_nats::Message, name: &str) -> Option<u64> {
    message
        .headers
        .as_ref()?
        .get_last(name)?
        .as_str()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_header_is_its_last_value() {
        // A direct get's reply of a message that stored a header of the server's name:
        // the server's value comes last.
        let mut headers = async_nats::HeaderMap::new();
        headers.append(NUM_PENDING, "7");
        headers.append(NUM_PENDING, "3");
        headers.append(SUBJECT, "orders.1");
        let message = async_nats::Message {
            subject: "reply".into(),
            reply: None,
            payload: bytes::Bytes::new(),
            headers: Some(headers),
            status: None,
            description: None,
            length: 0,
        };
        assert_eq!(last_u64(&message, NUM_PENDING), Some(3));
        assert_eq!(last_u64(&message, SUBJECT), None, "not a number");
        assert_eq!(last_u64(&message, SEQUENCE), None, "absent");
        let bare = async_nats::Message {
            headers: None,
            ..message
        };
        assert_eq!(last_u64(&bare, NUM_PENDING), None);
    }

    #[test]
    fn control_headers_are_told_from_the_users() {
        for name in [
            "Nats-TTL",
            "nats-ttl",
            "Nats-Rollup",
            "Nats-Expected-Last-Sequence",
            "Nats-Expected-Stream",
            "Nats-Batch-Id",
            "Nats-Schedule",
            "Nats-Schedule-TTL",
            "Nats-Stream",
            "Nats-Sequence",
            "Nats-Time-Stamp",
            "Nats-Incr",
        ] {
            assert!(is_control(name), "{name}");
        }
        for name in [
            "Nats-Msg-Id",
            "Nats-Marker-Reason",
            "KV-Operation",
            "Content-Type",
            "Nats-Expected-",
            "Nats-Streamer",
            "X-Nats-TTL",
            "trace-id",
        ] {
            assert!(!is_control(name), "{name}");
        }
    }

    #[test]
    fn the_names_async_nats_has_are_its_names() {
        use async_nats::header as nats;
        for (ours, theirs) in [
            (MSG_ID, &nats::NATS_MESSAGE_ID),
            (LAST_SEQUENCE, &nats::NATS_LAST_SEQUENCE),
            (STREAM, &nats::NATS_STREAM),
            (SEQUENCE, &nats::NATS_SEQUENCE),
            (TIME_STAMP, &nats::NATS_TIME_STAMP),
            (SUBJECT, &nats::NATS_SUBJECT),
            (LAST_CONSUMER, &nats::NATS_LAST_CONSUMER),
            (LAST_STREAM, &nats::NATS_LAST_STREAM),
            (BATCH_ID, &nats::NATS_BATCH_ID),
            (BATCH_SEQUENCE, &nats::NATS_BATCH_SEQUENCE),
            (BATCH_COMMIT, &nats::NATS_BATCH_COMMIT),
        ] {
            assert_eq!(ours, theirs.to_string());
        }
        assert_eq!(BATCH_COMMIT_STORE, nats::NATS_BATCH_COMMIT_FINAL);
    }
}
