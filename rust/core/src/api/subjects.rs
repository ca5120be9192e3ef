//! Subjects of the JetStream API, after the prefix (`$JS.API`, `$JS.<domain>.API` or a
//! renamed import). Each request kind's verb is spelt once, here; a subject is the
//! verb, then the stream, then the consumer (dot-separated). The verbs are exported to
//! Python (`_core.API_*`, built with `_core.api_subject`), so the management calls
//! written in Python send exactly these.

/// Creates a stream: `STREAM.CREATE.<stream>`.
pub const STREAM_CREATE: &str = "STREAM.CREATE";
/// Changes a stream's configuration: `STREAM.UPDATE.<stream>`.
pub const STREAM_UPDATE: &str = "STREAM.UPDATE";
/// A stream's configuration and state: `STREAM.INFO.<stream>`.
pub const STREAM_INFO: &str = "STREAM.INFO";
/// `STREAM.DELETE.<stream>`.
pub const STREAM_DELETE: &str = "STREAM.DELETE";
/// Removes messages (all, by subject, up to a sequence): `STREAM.PURGE.<stream>`.
pub const STREAM_PURGE: &str = "STREAM.PURGE";
/// Every stream's info, paged.
pub const STREAM_LIST: &str = "STREAM.LIST";
/// Every stream's name, paged.
pub const STREAM_NAMES: &str = "STREAM.NAMES";
/// Single-message gets answered by the stream's leader only (direct gets may be
/// answered by replicas and mirrors that trail it): `STREAM.MSG.GET.<stream>`.
pub const STREAM_MSG_GET: &str = "STREAM.MSG.GET";
/// `STREAM.MSG.DELETE.<stream>`.
pub const STREAM_MSG_DELETE: &str = "STREAM.MSG.DELETE";
/// Batched reads without a consumer, answered by every replica of a stream with
/// `allow_direct`: `DIRECT.GET.<stream>`.
pub const DIRECT_GET: &str = "DIRECT.GET";
/// `CONSUMER.CREATE.<stream>[.<consumer>[.<filter>]]`.
pub const CONSUMER_CREATE: &str = "CONSUMER.CREATE";
/// `CONSUMER.INFO.<stream>.<consumer>`.
pub const CONSUMER_INFO: &str = "CONSUMER.INFO";
/// `CONSUMER.DELETE.<stream>.<consumer>`.
pub const CONSUMER_DELETE: &str = "CONSUMER.DELETE";
/// Moves a consumer's delivery back to its ack floor (empty body) or to
/// `{"seq": N}`: `CONSUMER.RESET.<stream>.<consumer>`.
pub const CONSUMER_RESET: &str = "CONSUMER.RESET";
/// Every consumer's info on a stream, paged: `CONSUMER.LIST.<stream>`.
pub const CONSUMER_LIST: &str = "CONSUMER.LIST";
/// Every consumer's name on a stream, paged: `CONSUMER.NAMES.<stream>`.
pub const CONSUMER_NAMES: &str = "CONSUMER.NAMES";
/// Pauses a consumer until `{"pause_until": RFC 3339}`, or resumes it (no time):
/// `CONSUMER.PAUSE.<stream>.<consumer>` (server 2.11+).
pub const CONSUMER_PAUSE: &str = "CONSUMER.PAUSE";
/// Takes the pin of a `pinned_client` priority group (`{"group": G}`) from the client
/// that holds it: `CONSUMER.UNPIN.<stream>.<consumer>` (server 2.11+).
pub const CONSUMER_UNPIN: &str = "CONSUMER.UNPIN";
/// Where pull requests go; the only API subject (with `$JS.ACK.<stream>.<consumer>.>`)
/// that a client bound to an existing consumer needs: `CONSUMER.MSG.NEXT.<stream>.<consumer>`.
pub const CONSUMER_MSG_NEXT: &str = "CONSUMER.MSG.NEXT";

/// Every verb by its name, for export.
pub const EXPORTED: [(&str, &str); 19] = [
    ("STREAM_CREATE", STREAM_CREATE),
    ("STREAM_UPDATE", STREAM_UPDATE),
    ("STREAM_INFO", STREAM_INFO),
    ("STREAM_DELETE", STREAM_DELETE),
    ("STREAM_PURGE", STREAM_PURGE),
    ("STREAM_LIST", STREAM_LIST),
    ("STREAM_NAMES", STREAM_NAMES),
    ("STREAM_MSG_GET", STREAM_MSG_GET),
    ("STREAM_MSG_DELETE", STREAM_MSG_DELETE),
    ("DIRECT_GET", DIRECT_GET),
    ("CONSUMER_CREATE", CONSUMER_CREATE),
    ("CONSUMER_INFO", CONSUMER_INFO),
    ("CONSUMER_DELETE", CONSUMER_DELETE),
    ("CONSUMER_RESET", CONSUMER_RESET),
    ("CONSUMER_LIST", CONSUMER_LIST),
    ("CONSUMER_NAMES", CONSUMER_NAMES),
    ("CONSUMER_PAUSE", CONSUMER_PAUSE),
    ("CONSUMER_UNPIN", CONSUMER_UNPIN),
    ("CONSUMER_MSG_NEXT", CONSUMER_MSG_NEXT),
];

/// The subject of `verb` for `tokens` (stream, then consumer, ...): `VERB.t1.t2`.
pub fn subject(verb: &str, tokens: &[&str]) -> String {
    let mut subject = String::from(verb);
    for token in tokens {
        subject.push('.');
        subject.push_str(token);
    }
    subject
}

pub fn stream_info(stream: &str) -> String {
    subject(STREAM_INFO, &[stream])
}

pub fn direct_get(stream: &str) -> String {
    subject(DIRECT_GET, &[stream])
}

pub fn stream_msg_get(stream: &str) -> String {
    subject(STREAM_MSG_GET, &[stream])
}

pub fn consumer_create(stream: &str) -> String {
    subject(CONSUMER_CREATE, &[stream])
}

pub fn consumer_delete(stream: &str, consumer: &str) -> String {
    subject(CONSUMER_DELETE, &[stream, consumer])
}

pub fn consumer_info(stream: &str, consumer: &str) -> String {
    subject(CONSUMER_INFO, &[stream, consumer])
}

pub fn consumer_reset(stream: &str, consumer: &str) -> String {
    subject(CONSUMER_RESET, &[stream, consumer])
}

pub fn consumer_msg_next(stream: &str, consumer: &str) -> String {
    subject(CONSUMER_MSG_NEXT, &[stream, consumer])
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
        reply_after(&reply_prefix(batch_inbox, flow), seq, op)
    }

    /// What every reply subject of a batch starts with: `<batch inbox>.<flow>.fail.`.
    pub fn reply_prefix(batch_inbox: &str, flow: u16) -> String {
        format!("{batch_inbox}.{flow}.{GAP_FAIL}.")
    }

    /// [`reply`] from the batch's [`reply_prefix`]: one allocation, no formatting
    /// machinery (it is made for every row).
    pub fn reply_after(prefix: &str, seq: u64, op: u8) -> String {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = seq;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let mut s = String::with_capacity(prefix.len() + (digits.len() - at) + 7);
        s.push_str(prefix);
        // ASCII digits.
        s.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
        s.push('.');
        s.push(char::from(b'0' + op % 10));
        s.push_str(".$FI");
        s
    }
}

/// Where exactly-once writers keep their positions in the stream they write: one
/// subject per writer, `$JA.POS.<stream>.<writer digest>`. A stream holds positions
/// when its subjects take `$JA.POS.<stream>.>` (no two streams can, as subjects may
/// not overlap); reads leave these messages out unless asked for them.
pub const POSITION_SUBJECT_PREFIX: &str = "$JA.POS.";
