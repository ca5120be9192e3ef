//! Status messages of the server (`NATS/1.0 <code> <description>`, no payload), the
//! one classifier used by reads, fetches, continuous consumption, direct gets and
//! publishing.
//!
//! [`KNOWN`] lists every status nats-server (2.15) sends to a pull request, a push
//! subscription, a publish, a fast-ingest batch and a direct get, taken from its
//! source (`consumer.go`, `stream.go`, `jetstream.go`, `client.go`), each with what it
//! means here: keep going, the request is over (ask again), or an error that says
//! what to change. A status not in the table is an error naming code and text, never
//! a silent end of a request.
//!
//! One module because the table, the classification by it and the errors each
//! status means are read together when a new server version adds a status.

use async_nats::{HeaderMap, Message, StatusCode};

use crate::api::headers;
use crate::error::{ApiErrorCode, Error, ErrorKind};

/// What a status message means to the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// `100 Idle Heartbeat`: the server is alive and has nothing to send.
    IdleHeartbeat,
    /// `100 FlowControl Request`: a push consumer waits for a reply before sending more.
    FlowControlRequest,
    /// A pull request or direct get is over (`404 No Messages`, `408 Request Timeout`,
    /// a leadership change, a server shutting down, ...); what it did not deliver is
    /// no longer outstanding, and asking again is right.
    RequestEnded(Pending),
    /// `409 Message Size Exceeds MaxBytes`: the request's byte budget ran out.
    MaxBytesExceeded(Pending),
    /// `409 Exceeded MaxWaiting`: the consumer holds as many waiting pull requests as
    /// its `max_waiting` allows; this one was refused whole.
    TooManyWaiting,
    /// `409 Consumer Deleted`.
    ConsumerDeleted,
    /// `409 Consumer is push based`: a pull request sent to a push consumer.
    PushBased,
    /// A pull request over one of the consumer's request limits (`409 Exceeded
    /// MaxRequestBatch of 100`): `limit` is the consumer setting that refuses it.
    LimitExceeded {
        limit: ConsumerLimit,
        description: String,
    },
    /// `503 No Responders`: nobody listens on the subject (no stream, no consumer, or
    /// the wrong API prefix), or a stream leader is not elected yet.
    NoResponders,
    /// `429 Too Many Requests`: backpressure on a publish or a direct get.
    TooManyRequests,
    /// `204 EOB`: the end of a batched direct get.
    EndOfBatch,
    /// `423 Nats-Pin-Id mismatch` (a pull refused as it came) or `423 Nats-Wrong-Pin-Id`
    /// (a waiting pull turned away as the pin moved): the pull named a pin of a
    /// `pinned_client` priority group that is no longer the group's. The request is
    /// over; the puller forgets its pin and pulls again as a candidate (nats.go,
    /// async-nats).
    PinMismatch(Pending),
    /// A request the server refuses as malformed or unsupported (`400 Bad Request -
    /// ...`, `412 Required Api Level`, `413 Too Many Results`, `408 Malformed Request` to a direct get, `500`): asking again cannot help.
    Refused { code: u16, description: String },
    /// A status the table does not know, by code and description.
    Other { code: u16, description: String },
}

/// The consumer settings that bound a single pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerLimit {
    /// `max_batch`: messages per request.
    MaxBatch,
    /// `max_expires`: how long a request may wait.
    MaxExpires,
    /// `max_bytes`: bytes per request.
    MaxBytes,
}

impl ConsumerLimit {
    /// The consumer's setting, as `ConsumerConfig` names it.
    pub fn setting(self) -> &'static str {
        match self {
            Self::MaxBatch => "max_batch",
            Self::MaxExpires => "max_expires",
            Self::MaxBytes => "max_bytes",
        }
    }

    /// The option of this package whose value the request carried.
    pub fn option(self) -> &'static str {
        match self {
            Self::MaxBatch => "max_messages",
            Self::MaxExpires => "expires",
            Self::MaxBytes => "max_bytes",
        }
    }
}

/// What a known status means, before the headers of the message are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    IdleHeartbeat,
    FlowControlRequest,
    RequestEnded,
    MaxBytesExceeded,
    TooManyWaiting,
    ConsumerDeleted,
    PushBased,
    LimitExceeded(ConsumerLimit),
    NoResponders,
    TooManyRequests,
    EndOfBatch,
    PinMismatch,
    Refused,
}

/// Every status nats-server sends to this client's requests and subscriptions: code,
/// the start of the description (matched case-insensitively; empty matches any), and
/// its meaning. The first matching row wins, so specific rows come before a code's
/// catch-all.
pub const KNOWN: &[(u16, &str, Meaning)] = &[
    // Push deliveries and pull requests with a heartbeat.
    (100, "FlowControl Request", Meaning::FlowControlRequest),
    (100, "Idle Heartbeat", Meaning::IdleHeartbeat),
    // Direct gets: the end of a batch.
    (204, "", Meaning::EndOfBatch),
    // Pull requests refused as malformed ("Bad Request - <why>"), priority groups.
    (400, "Bad Request", Meaning::Refused),
    // Pull requests that ended without (more) messages; direct gets with no message
    // at or after the asked sequence ("No Results", "Message Not Found").
    (404, "No Messages", Meaning::RequestEnded),
    (404, "No Results", Meaning::RequestEnded),
    (404, "Message Not Found", Meaning::RequestEnded),
    (408, "Request Timeout", Meaning::RequestEnded),
    (408, "Interest Expired", Meaning::RequestEnded),
    (408, "Requests Pending", Meaning::RequestEnded),
    // Direct gets whose request body the server cannot read.
    (408, "Empty Request", Meaning::Refused),
    (408, "Malformed Request", Meaning::Refused),
    (408, "Bad Request", Meaning::Refused),
    (
        409,
        "Message Size Exceeds MaxBytes",
        Meaning::MaxBytesExceeded,
    ),
    (409, "Consumer Deleted", Meaning::ConsumerDeleted),
    (409, "Consumer is push based", Meaning::PushBased),
    (
        409,
        "Exceeded MaxRequestBatch",
        Meaning::LimitExceeded(ConsumerLimit::MaxBatch),
    ),
    (
        409,
        "Exceeded MaxRequestExpires",
        Meaning::LimitExceeded(ConsumerLimit::MaxExpires),
    ),
    (
        409,
        "Exceeded MaxRequestMaxBytes",
        Meaning::LimitExceeded(ConsumerLimit::MaxBytes),
    ),
    (409, "Exceeded MaxWaiting", Meaning::TooManyWaiting),
    (409, "Leadership Change", Meaning::RequestEnded),
    (409, "Server Shutdown", Meaning::RequestEnded),
    (409, "Batch Completed", Meaning::RequestEnded),
    // A request needing a newer JetStream API level than the server has.
    (412, "Required Api Level", Meaning::Refused),
    // A multi-subject direct get matching more subjects than the server answers.
    (413, "Too Many Results", Meaning::Refused),
    // Pinned-client priority groups: the pull's pin is not the group's (any more).
    (423, "", Meaning::PinMismatch),
    // Publishes and direct gets over what the server takes in.
    (429, "", Meaning::TooManyRequests),
    // A direct get whose message failed to load.
    (500, "", Meaning::Refused),
    (503, "", Meaning::NoResponders),
];

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
            messages: number(headers::PENDING_MESSAGES),
            bytes: number(headers::PENDING_BYTES),
        }
    }
}

/// The meaning [`KNOWN`] gives `code` with `description`, if it lists them.
pub fn meaning(code: u16, description: &str) -> Option<Meaning> {
    let description = description.trim();
    KNOWN
        .iter()
        .find(|(c, start, _)| {
            *c == code
                && description
                    .get(..start.len())
                    .is_some_and(|d| d.eq_ignore_ascii_case(start))
        })
        .map(|&(_, _, meaning)| meaning)
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
        let code = code.as_u16();
        let Some(meaning) = meaning(code, description) else {
            return Self::Other {
                code,
                description: description.to_string(),
            };
        };
        match meaning {
            Meaning::IdleHeartbeat => Self::IdleHeartbeat,
            Meaning::FlowControlRequest => Self::FlowControlRequest,
            Meaning::RequestEnded => Self::RequestEnded(Pending::of(headers)),
            Meaning::MaxBytesExceeded => Self::MaxBytesExceeded(Pending::of(headers)),
            Meaning::TooManyWaiting => Self::TooManyWaiting,
            Meaning::ConsumerDeleted => Self::ConsumerDeleted,
            Meaning::PushBased => Self::PushBased,
            Meaning::LimitExceeded(limit) => Self::LimitExceeded {
                limit,
                description: description.to_string(),
            },
            Meaning::NoResponders => Self::NoResponders,
            Meaning::TooManyRequests => Self::TooManyRequests,
            Meaning::EndOfBatch => Self::EndOfBatch,
            Meaning::PinMismatch => Self::PinMismatch(Pending::of(headers)),
            Meaning::Refused => Self::Refused {
                code,
                description: description.to_string(),
            },
        }
    }

    /// The typed error a status that ends a pull request of `consumer` of `stream`
    /// with a failure means, naming what to change; `subject` is where the request
    /// went.
    pub fn pull_error(&self, stream: &str, consumer: &str, subject: &str) -> Error {
        let label = format!("consumer {consumer:?} of stream {stream:?}");
        match self {
            Self::ConsumerDeleted => {
                Error::new(ErrorKind::ConsumerDeleted, format!("{label} was deleted"))
            }
            Self::NoResponders => Error::new(
                ErrorKind::NotFound,
                format!(
                    "{label}: nobody answers pull requests on {subject} (the consumer does \
                     not exist, or the domain / api_prefix is wrong)"
                ),
            ),
            Self::PushBased => Error::bad_input(format!(
                "{label} is a push consumer (it has a deliver_subject), which takes no pull \
                 requests (409 Consumer is push based): use push_consumer()"
            )),
            Self::LimitExceeded { limit, description } => Error::api(
                &label,
                ApiErrorCode {
                    code: 409,
                    err_code: 0,
                    description: format!(
                        "the consumer's {} refuses this pull request ({description}); ask \
                         for less with option '{}', or raise the consumer's {}",
                        limit.setting(),
                        limit.option(),
                        limit.setting()
                    ),
                },
            ),
            Self::TooManyWaiting => Error::api(
                &label,
                ApiErrorCode {
                    code: 409,
                    err_code: 0,
                    description: "the consumer already holds as many waiting pull requests \
                                  as its max_waiting allows (409 Exceeded MaxWaiting); fewer \
                                  readers at once, or raise the consumer's max_waiting"
                        .to_string(),
                },
            ),
            other => other.unexpected(&label),
        }
    }

    /// The error of a status the receiver cannot go on after, for `what`.
    pub fn unexpected(&self, what: &str) -> Error {
        match self {
            Self::Refused { code, description } | Self::Other { code, description } => Error::api(
                what,
                ApiErrorCode {
                    code: *code,
                    err_code: 0,
                    description: format!("the server answered status {code} {description}"),
                },
            ),
            other => Error::new(
                ErrorKind::Api,
                format!("{what}: unexpected status {other:?}"),
            ),
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
    fn every_row_of_the_table_is_reachable() {
        // A row hidden behind an earlier, broader one would never be used.
        for &(code, start, expected) in KNOWN {
            assert_eq!(meaning(code, start), Some(expected), "{code} {start:?}");
        }
    }

    #[test]
    fn descriptions_with_values_are_matched_by_their_start() {
        assert_eq!(
            status(409, "Exceeded MaxRequestBatch of 100", None),
            Status::LimitExceeded {
                limit: ConsumerLimit::MaxBatch,
                description: "Exceeded MaxRequestBatch of 100".into()
            }
        );
        assert!(matches!(
            status(409, "Exceeded MaxRequestExpires of 1s", None),
            Status::LimitExceeded {
                limit: ConsumerLimit::MaxExpires,
                ..
            }
        ));
        assert!(matches!(
            status(400, "Bad Request - heartbeat value too large", None),
            Status::Refused { code: 400, .. }
        ));
        assert_eq!(
            status(423, "Nats-Pin-Id mismatch", Some(("10", "0"))),
            Status::PinMismatch(Pending {
                messages: Some(10),
                bytes: Some(0)
            })
        );
        assert!(matches!(
            status(423, "Nats-Wrong-Pin-Id", None),
            Status::PinMismatch(_)
        ));
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
        assert_eq!(
            status(409, "Consumer is push based", None),
            Status::PushBased
        );
        assert_eq!(
            status(409, "Exceeded MaxWaiting", None),
            Status::TooManyWaiting
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
        assert_eq!(status(204, "EOB", None), Status::EndOfBatch);
        // An unknown 409 is no longer taken for the end of a request.
        assert!(matches!(
            status(409, "Something New", None),
            Status::Other { code: 409, .. }
        ));
    }

    #[test]
    fn limit_errors_name_the_setting_and_the_option() {
        let err = status(409, "Exceeded MaxRequestBatch of 100", None).pull_error(
            "S",
            "C",
            "$JS.API.CONSUMER.MSG.NEXT.S.C",
        );
        assert_eq!(err.kind(), ErrorKind::Api);
        assert!(err.message().contains("max_batch"), "{}", err.message());
        assert!(
            err.message().contains("'max_messages'"),
            "{}",
            err.message()
        );
        assert!(err.message().contains("of 100"), "{}", err.message());
    }
}
