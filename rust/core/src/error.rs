//! One error type for the core, with a kind per cause so the Python layer can map
//! each to its exception class without parsing messages.

use std::fmt;

/// What went wrong, by cause. The Python glue maps each kind to one exception class.
// Not `#[non_exhaustive]`: the Python glue matches every kind, so a new kind cannot
// reach Python as the base class unnoticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The server could not be reached or the connection broke.
    Connection,
    /// Credentials refused or a subject not permitted.
    Authorization,
    /// A wait ran out of time.
    Timeout,
    /// Two idle heartbeats were missed on a pull request.
    MissedHeartbeats,
    /// The JetStream API answered with an error.
    Api,
    /// A stream, consumer or message does not exist.
    NotFound,
    /// Nobody answers the JetStream API at the configured prefix.
    JetStreamNotEnabled,
    /// The consumer was deleted while being read.
    ConsumerDeleted,
    /// Input that cannot be sent as asked (column, row, option).
    BadInput,
    /// A payload that does not decode with the value's format and schema.
    MalformedPayload,
    /// A payload holding a field the value's schema lacks (or a value where the
    /// schema, inferred from payloads that had only nulls there, has none), read with
    /// `on_new_field` `fail`: the caller may grow its schema and read from that message.
    NewField,
    /// A read given no value schema found no payload in its sample to infer one
    /// from (input that cannot be read as asked, like [`ErrorKind::BadInput`]).
    NothingToInfer,
}

/// An error of the core: a kind, a message that names what is at fault, and for
/// API errors the server's codes.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    api: Option<ApiErrorCode>,
    /// What is at fault by name, when the error says: boxed, so that a `Result` of
    /// the core stays small where errors are rare.
    at_fault: Option<Box<AtFault>>,
}

/// What an error names as at fault, for callers that act on it without reading the
/// message.
#[derive(Debug, Clone, Default)]
struct AtFault {
    /// The message and field of a [`ErrorKind::NewField`] error.
    new_field: Option<NewFieldAt>,
    /// The input column at fault, by the name the message gives it.
    column: Option<String>,
    /// The options at fault, by their names (Python's spelling), in the order the
    /// message names them.
    options: Vec<String>,
}

/// Where a payload holds a field its value schema lacks: the message's stream
/// sequence, and the field's path (`a.b`, `items[].c`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFieldAt {
    pub seq: u64,
    pub field: String,
}

/// The error object of a JetStream API reply.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ApiErrorCode {
    pub code: u16,
    #[serde(default)]
    pub err_code: u32,
    #[serde(default)]
    pub description: String,
}

/// JetStream error codes the package reacts to; Python sees each as
/// `jetstream_arrow._core.ERR_<NAME>`.
pub mod err_codes {
    pub const CONSUMER_NOT_FOUND: u32 = 10014;
    /// A publish's `Nats-Expected-Stream` names another stream than the one that
    /// stores its subject.
    pub const STREAM_NOT_MATCH: u32 = 10060;
    /// `CONSUMER.RESET` refused: the consumer's deliver policy does not allow it.
    pub const CONSUMER_INVALID_RESET: u32 = 10204;
    pub const NO_MESSAGE_FOUND: u32 = 10037;
    pub const STREAM_NAME_IN_USE: u32 = 10058;
    pub const STREAM_NOT_FOUND: u32 = 10059;
    pub const TOO_MANY_REQUESTS: u32 = 10167;
    /// Fast-ingest publishing into a stream without `allow_batched`.
    pub const BATCH_PUBLISH_DISABLED: u32 = 10205;
    /// A fast-ingest reply subject the server does not accept.
    pub const BATCH_PUBLISH_INVALID_PATTERN: u32 = 10206;
    /// A fast-ingest batch id over 64 characters.
    pub const BATCH_PUBLISH_INVALID_ID: u32 = 10207;
    /// A fast-ingest batch the server does not know (any more): abandoned after its
    /// idle timeout, or lost in a restart or a leader change.
    pub const BATCH_PUBLISH_UNKNOWN_ID: u32 = 10208;
    /// Atomic publishing into a stream without `allow_atomic`.
    pub const ATOMIC_PUBLISH_DISABLED: u32 = 10174;
    /// An atomic batch the server abandoned unstored: a message of it never arrived,
    /// arrived out of order, or came after the batch's idle timeout.
    pub const ATOMIC_PUBLISH_INCOMPLETE: u32 = 10176;
    /// An atomic batch with a header the server refuses in batches.
    pub const ATOMIC_PUBLISH_UNSUPPORTED_HEADER: u32 = 10177;
    /// An atomic batch id over 64 characters.
    pub const ATOMIC_PUBLISH_INVALID_ID: u32 = 10179;
    /// An atomic batch longer than the server's limit (`max_msgs`, 1,000 by default).
    pub const ATOMIC_PUBLISH_TOO_LARGE: u32 = 10199;
    /// An atomic batch with a msg id the stream already holds (or twice within it).
    pub const ATOMIC_PUBLISH_DUPLICATE_MSG_ID: u32 = 10201;
    /// More atomic batches open on the stream or the server than it allows.
    pub const ATOMIC_PUBLISH_TOO_MANY_INFLIGHT: u32 = 10210;
    /// A `Nats-TTL` the server does not take (under a second, or not a duration).
    pub const MESSAGE_TTL_INVALID: u32 = 10165;
    /// A `Nats-TTL` sent to a stream without `allow_msg_ttl`.
    pub const MESSAGE_TTL_DISABLED: u32 = 10166;
    /// A `Nats-Incr` sent to a stream without `allow_msg_counter`.
    pub const MESSAGE_INCR_DISABLED: u32 = 10168;
    /// A message without `Nats-Incr` sent to a counter stream.
    pub const MESSAGE_INCR_MISSING: u32 = 10169;
    /// A counter increment with a payload.
    pub const MESSAGE_INCR_PAYLOAD: u32 = 10170;
    /// A `Nats-Incr` that is not an integer, or sent with expected-last or rollup headers.
    pub const MESSAGE_INCR_INVALID: u32 = 10171;
    /// The subject's last message on a counter stream is not a counter value.
    pub const MESSAGE_COUNTER_BROKEN: u32 = 10172;
    /// A `Nats-Schedule` sent to a stream without `allow_msg_schedules`.
    pub const MESSAGE_SCHEDULES_DISABLED: u32 = 10188;
    /// A `Nats-Schedule` the server cannot read.
    pub const MESSAGE_SCHEDULES_PATTERN_INVALID: u32 = 10189;
    /// A `Nats-Schedule-Target` that is not a subject of the stream (or is the
    /// schedule's own).
    pub const MESSAGE_SCHEDULES_TARGET_INVALID: u32 = 10190;
    /// `Nats-Expected-Last-Msg-Id` did not match the stream's last msg id.
    pub const WRONG_LAST_MSG_ID: u32 = 10070;
    /// An expected last sequence (of the stream or of the subject) did not match.
    pub const WRONG_LAST_SEQUENCE: u32 = 10071;

    /// Every code above by its exported name.
    pub const EXPORTED: &[(&str, u32)] = &[
        ("CONSUMER_NOT_FOUND", CONSUMER_NOT_FOUND),
        ("STREAM_NOT_MATCH", STREAM_NOT_MATCH),
        ("MESSAGE_TTL_INVALID", MESSAGE_TTL_INVALID),
        ("MESSAGE_TTL_DISABLED", MESSAGE_TTL_DISABLED),
        ("MESSAGE_INCR_DISABLED", MESSAGE_INCR_DISABLED),
        ("MESSAGE_INCR_MISSING", MESSAGE_INCR_MISSING),
        ("MESSAGE_INCR_PAYLOAD", MESSAGE_INCR_PAYLOAD),
        ("MESSAGE_INCR_INVALID", MESSAGE_INCR_INVALID),
        ("MESSAGE_COUNTER_BROKEN", MESSAGE_COUNTER_BROKEN),
        ("MESSAGE_SCHEDULES_DISABLED", MESSAGE_SCHEDULES_DISABLED),
        (
            "MESSAGE_SCHEDULES_PATTERN_INVALID",
            MESSAGE_SCHEDULES_PATTERN_INVALID,
        ),
        (
            "MESSAGE_SCHEDULES_TARGET_INVALID",
            MESSAGE_SCHEDULES_TARGET_INVALID,
        ),
        ("CONSUMER_INVALID_RESET", CONSUMER_INVALID_RESET),
        ("NO_MESSAGE_FOUND", NO_MESSAGE_FOUND),
        ("STREAM_NAME_IN_USE", STREAM_NAME_IN_USE),
        ("STREAM_NOT_FOUND", STREAM_NOT_FOUND),
        ("TOO_MANY_REQUESTS", TOO_MANY_REQUESTS),
        ("BATCH_PUBLISH_DISABLED", BATCH_PUBLISH_DISABLED),
        (
            "BATCH_PUBLISH_INVALID_PATTERN",
            BATCH_PUBLISH_INVALID_PATTERN,
        ),
        ("BATCH_PUBLISH_INVALID_ID", BATCH_PUBLISH_INVALID_ID),
        ("BATCH_PUBLISH_UNKNOWN_ID", BATCH_PUBLISH_UNKNOWN_ID),
        ("ATOMIC_PUBLISH_DISABLED", ATOMIC_PUBLISH_DISABLED),
        ("ATOMIC_PUBLISH_INCOMPLETE", ATOMIC_PUBLISH_INCOMPLETE),
        (
            "ATOMIC_PUBLISH_UNSUPPORTED_HEADER",
            ATOMIC_PUBLISH_UNSUPPORTED_HEADER,
        ),
        ("ATOMIC_PUBLISH_INVALID_ID", ATOMIC_PUBLISH_INVALID_ID),
        ("ATOMIC_PUBLISH_TOO_LARGE", ATOMIC_PUBLISH_TOO_LARGE),
        (
            "ATOMIC_PUBLISH_DUPLICATE_MSG_ID",
            ATOMIC_PUBLISH_DUPLICATE_MSG_ID,
        ),
        (
            "ATOMIC_PUBLISH_TOO_MANY_INFLIGHT",
            ATOMIC_PUBLISH_TOO_MANY_INFLIGHT,
        ),
        ("WRONG_LAST_MSG_ID", WRONG_LAST_MSG_ID),
        ("WRONG_LAST_SEQUENCE", WRONG_LAST_SEQUENCE),
    ];
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            api: None,
            at_fault: None,
        }
    }

    /// A [`ErrorKind::BadInput`] error of option `option`, which `message` names.
    pub fn bad_option(option: &str, message: impl Into<String>) -> Self {
        Self::bad_options(&[option], message)
    }

    /// A [`ErrorKind::BadInput`] error of `options` together (two that exclude each
    /// other, one that needs another), which `message` names.
    pub fn bad_options(options: &[&str], message: impl Into<String>) -> Self {
        Self {
            at_fault: Some(Box::new(AtFault {
                options: options.iter().map(|o| o.to_string()).collect(),
                ..AtFault::default()
            })),
            ..Self::bad_input(message)
        }
    }

    /// The options at fault, when the error is of options.
    pub fn options(&self) -> &[String] {
        self.at_fault.as_ref().map_or(&[], |f| &f.options)
    }

    /// This error as one of input column `column`, which its message names as
    /// `'<column>'`.
    pub fn in_column(mut self, column: &str) -> Self {
        self.at_fault.get_or_insert_default().column = Some(column.to_string());
        self
    }

    /// The input column at fault, when the error is of a column.
    pub fn column(&self) -> Option<&str> {
        self.at_fault.as_ref()?.column.as_deref()
    }

    /// This error with its column called `name`, as the caller calls it (a column
    /// taken under another name for the publish): the message names it so.
    pub fn column_named(mut self, name: &str) -> Self {
        if let Some(column) = self.at_fault.as_mut().and_then(|f| f.column.as_mut()) {
            self.message = self
                .message
                .replace(&format!("'{column}'"), &format!("'{name}'"));
            *column = name.to_string();
        }
        self
    }

    /// A [`ErrorKind::NewField`] error at `at`.
    pub fn new_field(at: NewFieldAt, message: impl Into<String>) -> Self {
        Self {
            at_fault: Some(Box::new(AtFault {
                new_field: Some(at),
                ..AtFault::default()
            })),
            ..Self::new(ErrorKind::NewField, message)
        }
    }

    /// Where a [`ErrorKind::NewField`] error's payload is.
    pub fn new_field_at(&self) -> Option<&NewFieldAt> {
        self.at_fault.as_ref()?.new_field.as_ref()
    }

    /// An error reply of the JetStream API to `what` (e.g. "stream info of ORDERS").
    pub fn api(what: &str, code: ApiErrorCode) -> Self {
        let kind = match (code.code, code.err_code) {
            (404, _)
            | (_, err_codes::STREAM_NOT_FOUND)
            | (_, err_codes::CONSUMER_NOT_FOUND)
            | (_, err_codes::NO_MESSAGE_FOUND) => ErrorKind::NotFound,
            _ => ErrorKind::Api,
        };
        Self {
            kind,
            message: format!(
                "{what}: {} (code {}, err_code {})",
                code.description, code.code, code.err_code
            ),
            api: Some(code),
            at_fault: None,
        }
    }

    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadInput, message)
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, message)
    }

    pub fn connection(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Connection, message)
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn api_code(&self) -> Option<&ApiErrorCode> {
        self.api.as_ref()
    }

    /// The same error with more context in front of its message.
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<async_nats::ConnectError> for Error {
    fn from(err: async_nats::ConnectError) -> Self {
        use async_nats::ConnectErrorKind as K;
        let kind = match err.kind() {
            K::Authentication | K::AuthorizationViolation => ErrorKind::Authorization,
            K::ServerParse => ErrorKind::BadInput,
            K::TimedOut => ErrorKind::Timeout,
            _ => ErrorKind::Connection,
        };
        Error::new(kind, err.to_string())
    }
}

impl From<async_nats::PublishError> for Error {
    fn from(err: async_nats::PublishError) -> Self {
        match err.kind() {
            async_nats::client::PublishErrorKind::MaxPayloadExceeded => {
                Error::bad_input(err.to_string())
            }
            _ => Error::connection(format!("publish failed: {err}")),
        }
    }
}

impl From<async_nats::SubscribeError> for Error {
    fn from(err: async_nats::SubscribeError) -> Self {
        Error::connection(format!("subscribe failed: {err}"))
    }
}

impl From<arrow_schema::ArrowError> for Error {
    fn from(err: arrow_schema::ArrowError) -> Self {
        Error::bad_input(format!("arrow: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_error_names_the_column_as_the_caller_calls_it() {
        let err = Error::bad_input("column 'msg_id' must be utf8 (string), got int64")
            .in_column("msg_id")
            .column_named("order_id");
        assert_eq!(err.column(), Some("order_id"));
        assert_eq!(
            err.message(),
            "column 'order_id' must be utf8 (string), got int64"
        );
        // An error of no column is left as it is.
        let plain = Error::bad_input("column 'x' is wrong").column_named("y");
        assert_eq!(
            (plain.column(), plain.message()),
            (None, "column 'x' is wrong")
        );
    }

    #[test]
    fn option_errors_name_their_options() {
        let err = Error::bad_options(&["user", "password"], "option 'user' needs 'password'");
        assert_eq!(err.kind(), ErrorKind::BadInput);
        assert_eq!(err.options(), ["user", "password"]);
        assert!(Error::bad_input("x").options().is_empty());
    }
}
