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

/// Single-message gets answered by the stream's leader only (direct gets may be
/// answered by replicas and mirrors that trail it).
pub fn stream_msg_get(stream: &str) -> String {
    format!("STREAM.MSG.GET.{stream}")
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

/// Fast-ingest publishing keeps a batch's state in each message's reply subject:
/// `<inbox>.<batch id>.<flow>.<gap mode>.<batch seq>.<op>.$FI`, where `<inbox>.<batch id>`
/// is one fresh inbox per batch and `flow` the most messages per ack the client allows.
pub mod fast_batch {
    /// Starts a batch (batch sequence 1).
    pub const OP_START: u8 = 0;
    /// Appends to a batch (batch sequence 2 and on).
    pub const OP_APPEND: u8 = 1;
    /// Ends a batch without storing this message ("end of batch").
    pub const OP_COMMIT_EOB: u8 = 3;
    /// Asks for the latest flow ack (and any gap) without adding to the batch; carries
    /// the highest batch sequence sent.
    pub const OP_PING: u8 = 4;
    /// Any gap ends the batch, so an ack for batch sequence N means 1..=N are stored.
    pub const GAP_FAIL: &str = "fail";

    /// The reply subject of one message of the batch whose inbox is `batch_inbox`.
    pub fn reply(batch_inbox: &str, flow: u16, seq: u64, op: u8) -> String {
        format!("{batch_inbox}.{flow}.{GAP_FAIL}.{seq}.{op}.$FI")
    }
}
