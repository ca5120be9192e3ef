//! Request and reply bodies of the JetStream API. async-nats's own types where they
//! fit (stream and consumer info, consumer config, pull requests, publish acks); ours
//! only where async-nats has none.

use serde::{Deserialize, Serialize};

use crate::error::ApiErrorCode;

pub use async_nats::jetstream::consumer::pull::BatchConfig as PullRequest;
pub use async_nats::jetstream::consumer::{
    AckPolicy, Config as ConsumerConfig, DeliverPolicy, Info as ConsumerInfo,
};
pub use async_nats::jetstream::stream::ConsumerResetResponse as ConsumerReset;
pub use async_nats::jetstream::stream::Info as StreamInfo;

/// `STREAM.INFO`'s reply with `alternates`, which async-nats's `Info` leaves out.
#[derive(Debug, Deserialize)]
pub struct StreamInfoWithAlternates {
    #[serde(flatten)]
    pub info: StreamInfo,
    /// The stream and those of its mirrors that answer its direct gets
    /// (`mirror_direct`); empty when no mirror does.
    #[serde(default)]
    pub alternates: Vec<StreamAlternate>,
}

/// One entry of [`StreamInfoWithAlternates::alternates`].
#[derive(Debug, Deserialize)]
pub struct StreamAlternate {
    pub name: String,
}

/// `CONSUMER.CREATE.<stream>`'s body.
#[derive(Debug, Serialize)]
pub struct CreateConsumer<'a> {
    pub stream_name: &'a str,
    pub config: &'a ConsumerConfig,
}

/// The reply to a publish: a PubAck or an error. Decoded once per published message,
/// so it is ours rather than async-nats's `Response<PublishAck>`: that one buffers
/// the reply for its untagged enum and allocates the stream name, both per message.
#[derive(Debug, Deserialize)]
pub struct PublishReply {
    #[serde(default)]
    pub seq: u64,
    #[serde(default)]
    pub duplicate: bool,
    /// A counter stream's new value after the increment (ADR-49), decimal text.
    #[serde(default)]
    pub val: Option<String>,
    pub error: Option<ApiErrorCode>,
}

/// A reply on a fast-ingest batch's inbox: a flow ack (`"type":"ack"`: batch
/// sequences up to `seq` are stored, acks now come every `msgs` messages), a gap
/// (`"type":"gap"`: sequences `last_seq..seq` never reached the server), a failed
/// message (`"type":"err"` with `seq` and `error`), or, without a type, a PubAck: the
/// batch's end (`batch`, `count` stored) or its refusal (`error`).
#[derive(Debug, Deserialize)]
pub struct FastBatchReply {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub seq: u64,
    #[serde(default)]
    pub msgs: u64,
    #[serde(default)]
    pub last_seq: u64,
    pub batch: Option<String>,
    #[serde(default)]
    pub count: u64,
    #[serde(default)]
    pub duplicate: bool,
    pub error: Option<ApiErrorCode>,
}

/// A `STREAM.MSG.GET` request for the first message at or after `seq` (or
/// `start_time`) on `next_by_subj`. Answered by the stream's leader only.
#[derive(Debug, Serialize)]
pub struct NextMessageRequest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    pub next_by_subj: &'a str,
}

/// `STREAM.MSG.GET`'s reply: the stored message, its payload and headers in base64.
#[derive(Debug, Deserialize)]
pub struct StoredMessageReply {
    pub message: async_nats::jetstream::stream::RawMessage,
}
