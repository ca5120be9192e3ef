//! Subjects of the JetStream API, after the prefix (`$JS.API`, `$JS.<domain>.API` or a
//! renamed import): one function per request kind, so a subject is spelt once.

pub fn stream_info(stream: &str) -> String {
    format!("STREAM.INFO.{stream}")
}

/// Batched reads without a consumer, answered by every replica of a stream with
/// `allow_direct`.
pub fn direct_get(stream: &str) -> String {
    format!("DIRECT.GET.{stream}")
}

pub fn consumer_create(stream: &str) -> String {
    format!("CONSUMER.CREATE.{stream}")
}

pub fn consumer_delete(stream: &str, consumer: &str) -> String {
    format!("CONSUMER.DELETE.{stream}.{consumer}")
}

pub fn consumer_info(stream: &str, consumer: &str) -> String {
    format!("CONSUMER.INFO.{stream}.{consumer}")
}

/// Moves a consumer's delivery back to its ack floor (empty body) or to `{"seq": N}`.
pub fn consumer_reset(stream: &str, consumer: &str) -> String {
    format!("CONSUMER.RESET.{stream}.{consumer}")
}

/// Where pull requests go; the only API subject (with `$JS.ACK.<stream>.<consumer>.>`)
/// that a client bound to an existing consumer needs.
pub fn consumer_msg_next(stream: &str, consumer: &str) -> String {
    format!("CONSUMER.MSG.NEXT.{stream}.{consumer}")
}
