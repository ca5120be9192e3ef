//! One message as the stream's leader stores it, asked with `STREAM.MSG.GET`: for
//! reads that must know what the leader has. A direct read checks that the server
//! answering its direct gets was current; an ordered read, after a reconnect, takes
//! the next message this way before it recreates its consumer. The reply is JSON
//! with the subject inside, so it arrives whatever the subject holds, where a
//! delivery of a subject with Unicode white space breaks the client's reader.

use std::time::Duration;

use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::stream::RawMessage;
use time::format_description::well_known::Rfc3339;

use crate::api::types::{NextMessageRequest, StoredMessageReply};
use crate::api::{subjects, validate_name};
use crate::arrow::metadata::Delivered;
use crate::arrow::metadata::MessageMetadata;
use crate::connection::Connection;
use crate::error::{err_codes, Error, ErrorKind, Result};
use crate::retry::{retry_transient, Backoff};

/// Where to look for the next message.
#[derive(Debug, Clone, Copy)]
pub enum Position {
    Sequence(u64),
    /// Nanoseconds since the epoch.
    Time(i64),
}

/// The first message at or after `from` on any of `filters` (all subjects when
/// empty), as a delivery; None when the stream has none there. One request per
/// filter: the lowest sequence wins. Its pending count is left at 0 for the caller.
pub async fn first_at_or_after(
    conn: &Connection,
    stream: &str,
    from: Position,
    filters: &[String],
) -> Result<Option<Delivered>> {
    let (seq, start_time) = match from {
        Position::Sequence(seq) => (Some(seq), None),
        Position::Time(ns) => (None, Some(rfc3339(ns)?)),
    };
    let filters: Vec<&str> = match filters {
        [] => vec![">"],
        many => many.iter().map(String::as_str).collect(),
    };
    let mut first: Option<RawMessage> = None;
    for filter in filters {
        let request = NextMessageRequest {
            seq,
            start_time: start_time.clone(),
            next_by_subj: filter,
        };
        let reply: Result<StoredMessageReply> = conn
            .api_json(&subjects::stream_msg_get(stream), &request)
            .await;
        match reply {
            Ok(reply) => {
                if first
                    .as_ref()
                    .is_none_or(|f| reply.message.sequence < f.sequence)
                {
                    first = Some(reply.message);
                }
            }
            // No message there; a missing stream is an error.
            Err(e)
                if e.kind() == ErrorKind::NotFound
                    && e.api_code()
                        .is_none_or(|c| c.err_code == err_codes::NO_MESSAGE_FOUND) => {}
            Err(e) => return Err(e),
        }
    }
    first.map(|raw| into_delivered(raw, stream)).transpose()
}

/// The sequence of the first message stored at or after `time_ns` on any of `filters`
/// (all subjects when empty); None when the stream has none there. Planning a read by
/// time needs this one number: one request per filter, not a read. Asked again
/// while the answer is what a restarting server gives, for up to `within`.
pub async fn first_seq_at(
    conn: &Connection,
    stream: &str,
    time_ns: i64,
    filters: &[String],
    within: Duration,
) -> Result<Option<u64>> {
    validate_name(stream, "stream")?;
    let found = retry_transient(within, Backoff::API, || {
        first_at_or_after(conn, stream, Position::Time(time_ns), filters)
    })
    .await?;
    Ok(found.map(|d| d.meta.stream_seq))
}

/// A time stamp in nanoseconds since the epoch as the API's RFC 3339 text.
pub fn rfc3339(ns: i64) -> Result<String> {
    time::OffsetDateTime::from_unix_timestamp_nanos(ns.into())
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .ok_or_else(|| Error::bad_input(format!("option 'start_time': {ns} ns is out of range")))
}

fn into_delivered(raw: RawMessage, stream: &str) -> Result<Delivered> {
    let message = StreamMessage::try_from(raw).map_err(|e| {
        Error::new(
            ErrorKind::Api,
            format!("a stored message of stream {stream:?} could not be decoded: {e}"),
        )
    })?;
    let timestamp_ns = message.time.unix_timestamp_nanos() as i64;
    let length = message.payload.len();
    Ok(Delivered {
        message: async_nats::Message {
            subject: message.subject,
            reply: None,
            payload: message.payload,
            headers: (!message.headers.is_empty()).then_some(message.headers),
            status: None,
            description: None,
            length,
        },
        meta: MessageMetadata {
            delivered: 1,
            stream_seq: message.sequence,
            consumer_seq: 0,
            timestamp_ns,
            pending: 0,
        },
    })
}
