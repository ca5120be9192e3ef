//! Status messages of the server (`NATS/1.0 <code> <description>`, no payload), the
//! one classifier used by reads, fetches, continuous consumption and publishing.

use async_nats::{HeaderMap, Message, StatusCode};

/// What a status message means to the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// `100 Idle Heartbeat`: the server is alive and has nothing to send.
    IdleHeartbeat,
    /// `100 FlowControl Request`: a push consumer waits for a reply before sending more.
    FlowControlRequest,
    /// A pull request is over (`404 No Messages`, `408 Request Timeout`, and `409`s
    /// such as a leadership change or max waiting exceeded); what it did not deliver is
    /// no longer outstanding.
    RequestEnded(Pending),
    /// `409 Message Size Exceeds MaxBytes`: the request's byte budget ran out.
    MaxBytesExceeded(Pending),
    /// `409 Consumer Deleted`.
    ConsumerDeleted,
    /// `503 No Responders`: nobody listens on the subject (no stream, no consumer, or
    /// the wrong API prefix), or a stream leader is not elected yet.
    NoResponders,
    /// `429 Too Many Requests`: backpressure on a publish.
    TooManyRequests,
    /// `204 EOB`: the end of a batched direct get.
    EndOfBatch,
    /// Anything else, by code and description.
    Other { code: u16, description: String },
}

/// The `Nats-Pending-Messages` / `Nats-Pending-Bytes` a terminating status carries:
/// what the ended pull request had left undelivered. None when the server did not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pending {
    pub messages: Option<usize>,
    pub bytes: Option<usize>,
}

impl Pending {
    fn of(headers: Option<&HeaderMap>) -> Self {
        let number = |name: &str| {
            headers
                .and_then(|h| h.get(name))
                .and_then(|v| v.as_str().parse::<usize>().ok())
        };
        Self {
            messages: number("Nats-Pending-Messages"),
            bytes: number("Nats-Pending-Bytes"),
        }
    }
}

impl Status {
    /// The meaning of `message`, or None when it is not a status message.
    pub fn of(message: &Message) -> Option<Self> {
        let code = message.status?;
        // A flow-control request is the one `100` that expects an answer.
        if code.as_u16() == 100 && message.reply.as_ref().is_some_and(|r| !r.is_empty()) {
            return Some(Self::FlowControlRequest);
        }
        let description = message.description.as_deref().unwrap_or_default();
        Some(Self::classify(code, description, message.headers.as_ref()))
    }

    fn classify(code: StatusCode, description: &str, headers: Option<&HeaderMap>) -> Self {
        let lower = description.to_ascii_lowercase();
        match code.as_u16() {
            100 if lower.contains("flowcontrol") || lower.contains("flow control") => {
                Self::FlowControlRequest
            }
            100 => Self::IdleHeartbeat,
            404 | 408 => Self::RequestEnded(Pending::of(headers)),
            409 if lower.contains("consumer deleted") => Self::ConsumerDeleted,
            409 if lower.contains("exceeds maxbytes") => {
                Self::MaxBytesExceeded(Pending::of(headers))
            }
            409 => Self::RequestEnded(Pending::of(headers)),
            204 => Self::EndOfBatch,
            429 => Self::TooManyRequests,
            503 => Self::NoResponders,
            code => Self::Other {
                code,
                description: description.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, description: &str, pending: Option<(&str, &str)>) -> Status {
        let headers = pending.map(|(m, b)| {
            let mut h = HeaderMap::new();
            h.insert("Nats-Pending-Messages", m);
            h.insert("Nats-Pending-Bytes", b);
            h
        });
        Status::classify(
            StatusCode::from_u16(code).unwrap(),
            description,
            headers.as_ref(),
        )
    }

    #[test]
    fn statuses_are_classified() {
        assert_eq!(status(100, "Idle Heartbeat", None), Status::IdleHeartbeat);
        assert_eq!(
            status(100, "FlowControl Request", None),
            Status::FlowControlRequest
        );
        assert_eq!(
            status(408, "Request Timeout", Some(("7", "700"))),
            Status::RequestEnded(Pending {
                messages: Some(7),
                bytes: Some(700)
            })
        );
        assert_eq!(
            status(404, "No Messages", None),
            Status::RequestEnded(Pending::default())
        );
        assert_eq!(
            status(409, "Consumer Deleted", None),
            Status::ConsumerDeleted
        );
        assert!(matches!(
            status(409, "Message Size Exceeds MaxBytes", Some(("1", "2"))),
            Status::MaxBytesExceeded(_)
        ));
        assert!(matches!(
            status(409, "Leadership Change", None),
            Status::RequestEnded(_)
        ));
        assert_eq!(status(503, "", None), Status::NoResponders);
        assert_eq!(
            status(429, "Too Many Requests", None),
            Status::TooManyRequests
        );
        assert!(matches!(
            status(400, "Bad Request", None),
            Status::Other { code: 400, .. }
        ));
    }
}
