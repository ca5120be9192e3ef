//! Every default of the package, in one place.
//!
//! The core's option structs take their defaults from here, and the Python module
//! exports each one as `jetstream_arrow._core.DEFAULT_<NAME>` (see [`EXPORTED`]), which
//! the facade, the Spark option table, the CLI and the README's tables use. A default
//! changed here changes everywhere; a test checks the README tables against these.

use std::time::Duration;

// -- connecting ---------------------------------------------------------------------
pub const SERVERS: &str = "nats://127.0.0.1:4222";
/// The connection name the server shows (`connz`), so operators can tell who we are.
pub const CLIENT_NAME: &str = "jetstream-arrow";
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// nats.go's default: with the reconnect delay, about two minutes of trying.
pub const MAX_RECONNECTS: usize = 60;
pub const RECONNECT_DELAY: Duration = Duration::from_secs(2);
pub const PING_INTERVAL: Duration = Duration::from_secs(60);
/// The most bytes one compressed payload may decompress to on any read of the
/// connection (`Content-Encoding`, [`crate::compression`]): 64 MiB, the
/// largest `max_payload` nats-server accepts, so every value that could be stored
/// plain can be stored compressed and read back, while a payload that expands past
/// anything a server could have held plain (a zip bomb) is refused, naming its seq.
pub const MAX_DECOMPRESSED_BYTES: usize = 64 << 20;

// -- publishing ---------------------------------------------------------------------
/// Unacknowledged publishes in flight. Measured: 5k-20k keeps a server busy without
/// its `429 Too Many Requests`.
pub const WINDOW: usize = 8192;
pub const ACK_TIMEOUT: Duration = Duration::from_secs(5);
pub const MAX_RETRIES: u32 = 5;
pub const RETRY_BACKOFF: Duration = Duration::from_millis(50);
/// Payload bytes in flight at most, whatever the window. With large messages the
/// count alone would hold window × size in memory (8192 × 16 KiB = 128 MiB), while
/// 32 MiB in flight already keeps a server busy: at 1 GB/s it allows 30 ms from
/// sending a message to its ack.
pub const MAX_BYTES_IN_FLIGHT: usize = 32 << 20;
/// When the window is full: "wait" for acks, or "fail" the call's remaining rows.
pub const ON_FULL: &str = "wait";
/// The number generated msg ids (`msg_id_prefix`) start from.
pub const MSG_ID_START: u64 = 0;
/// How rows are sent: "acked" (an ack per message), "fast" (fast-ingest batches,
/// acked every N messages; the stream needs `allow_batched`, nats-server 2.14+) or
/// "atomic" (batches stored whole or not at all; `allow_atomic`, nats-server 2.12+).
pub const PUBLISH_MODE: &str = "acked";
/// Fast publishing: the most messages per ack the client allows. The server steers
/// the actual number below it (2.15 starts at and caps it at 500).
pub const FAST_FLOW: u16 = 500;
/// Fast publishing: flow acks awaited at most before sending waits. Two lets the
/// server store one group while the next is on its way.
pub const FAST_OUTSTANDING_ACKS: u64 = 2;
/// Fast publishing: while waiting, no reply for this long sends a ping, which makes
/// the server repeat its latest flow ack (or report a gap): acks can be lost.
pub const FAST_PING_INTERVAL: Duration = Duration::from_secs(1);
/// Fast publishing: the server abandons a batch idle for 10 s, so a batch whose
/// input paused this long is ended first and the next row starts a new one.
pub const FAST_MAX_IDLE: Duration = Duration::from_secs(4);
/// Atomic publishing: rows per batch. The server's own limit (its
/// `jetstream.limits.batch.max_msgs`) is 1,000 unless configured lower.
pub const ATOMIC_BATCH_ROWS: usize = 1_000;
/// Rows per result of `Publisher.publish_batches`: bounds the memory of the acks.
pub const ROWS_PER_RESULT: usize = 1_000_000;

// -- exactly once at any age (writer positions) ---------------------------------------
/// An exactly-once writer records its position after at most this many rows. On a
/// restart it reads back what the stream took after its last position, so this bounds
/// that read for a stream it writes alone; the window drains once per this many rows.
pub const POSITION_ROWS: usize = 100_000;
/// How long a writer's position claims its identity: another writer with the same
/// identity waits this long after the last position before it takes over (a writer
/// that died), and is refused when the position moved meanwhile (a writer at work).
pub const WRITER_LEASE: Duration = Duration::from_secs(30);

// -- typed payloads -----------------------------------------------------------------
/// What a payload that does not decode does: "failfast", "permissive" or
/// "dropmalformed" (Spark's JSON reader's modes).
pub const ON_MALFORMED: &str = "failfast";
/// What a JSON payload holding a field its schema lacks does: "ignore" (left out) or
/// "fail" (an error naming the message and the field).
pub const ON_NEW_FIELD: &str = "ignore";
/// Messages sampled from the stream to infer a JSON value schema when none is given.
pub const VALUE_SAMPLE_ROWS: usize = 1_000;
/// How each Avro payload is framed: "raw" (the datum alone), "single-object" or
/// "confluent".
pub const AVRO_FRAMING: &str = "raw";

// -- reading a range ----------------------------------------------------------------
pub const READ_BATCH_ROWS: usize = 65_536;
/// Payload bytes per output batch and per pull request.
pub const READ_MAX_BYTES: usize = 16 << 20;
/// Idle heartbeat of reads and continuous consumption; two missed ones fail.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// How long an ordered read keeps recreating its consumer after losing it (a server
/// restart or a leader election takes seconds).
pub const RESUME_TIMEOUT: Duration = Duration::from_secs(30);
/// How a range is read: "auto", "consumer" (an ordered consumer) or "direct"
/// (batched direct gets, on streams with `allow_direct`).
pub const READ_METHOD: &str = "auto";
/// The longest range that method "auto" reads by direct gets. Below it, the consumer's
/// create and delete round trips dominate; above it, a consumer's pushed deliveries
/// beat request-by-request gets. Measured here (R1 file store, one client): direct
/// took 0.26-0.57 of the consumer read's time at 10-100 messages, 0.55-0.81 at 1,000,
/// 0.99-1.07 at 3,000 and 1.21-1.38 at 10,000, alike at 128 B, 1 KiB and 16 KiB.
pub const DIRECT_READ_MAX_MESSAGES: u64 = 2_000;
/// After the first message of a followed (open-ended) batch, how long to wait for more.
pub const FOLLOW_BATCH_WAIT: Duration = Duration::from_millis(100);

// -- consumers ----------------------------------------------------------------------
pub const FETCH_MAX_MESSAGES: usize = 100;
pub const FETCH_EXPIRES: Duration = Duration::from_secs(5);
pub const CONSUME_MAX_MESSAGES: usize = 4096;
pub const CONSUME_EXPIRES: Duration = Duration::from_secs(30);
pub const CONSUME_BATCH_ROWS: usize = 4096;
/// After the first message of a consumed batch, how long to wait for more.
pub const CONSUME_BATCH_WAIT: Duration = Duration::from_millis(50);
pub const ACK_SYNC_TIMEOUT: Duration = Duration::from_secs(5);
/// A push consumer with no idle heartbeat (none configured, or bound by its deliver
/// subject without `heartbeat=`) cannot tell a quiet stream from a server gone
/// silent: after this long without a message it pings the server, and fails if the
/// server does not answer within the request timeout.
pub const SILENCE_PROBE: Duration = Duration::from_secs(10);

// -- Spark --------------------------------------------------------------------------
/// Rows per Arrow batch a Spark read hands Spark (its payload bytes are bounded by
/// `READ_MAX_BYTES` too). Larger than Spark's own `maxRecordsPerBatch` (10,000), which
/// does not apply to batches a Python data source yields: at 65,536 the JVM, the
/// Python workers and the server each spent less CPU per message, and a 500k x 128 B
/// read ran 12% faster, than at 10,000 (interleaved runs on 2 cores).
pub const SPARK_BATCH_ROWS: usize = 65_536;
/// At most this many sequences per partition, so mid-sized reads use every core.
pub const SPARK_MAX_MESSAGES_PER_PARTITION: usize = 100_000;
/// With `minMessagesPerTrigger`: the longest a streaming read holds back a micro-batch
/// that has fewer messages (Kafka's `maxTriggerDelay`, with its default).
pub const SPARK_MAX_TRIGGER_DELAY: Duration = Duration::from_secs(15 * 60);
/// With `consumerGroup`: the seconds without a pull after which the server moves the
/// pin to a standby query (the consumer's `priority_timeout`). A driver pulls at every
/// trigger, so a stopped one is noticed after this long; longer than the pause between
/// triggers of a busy driver.
pub const SPARK_CONSUMER_PIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A default as the bindings export it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Exported {
    Int(i64),
    Seconds(Duration),
    Str(&'static str),
}

/// Every default by its exported name (`DEFAULT_<name>` in Python).
pub const EXPORTED: &[(&str, Exported)] = &[
    ("SERVERS", Exported::Str(SERVERS)),
    ("CLIENT_NAME", Exported::Str(CLIENT_NAME)),
    ("CONNECT_TIMEOUT", Exported::Seconds(CONNECT_TIMEOUT)),
    ("REQUEST_TIMEOUT", Exported::Seconds(REQUEST_TIMEOUT)),
    ("MAX_RECONNECTS", Exported::Int(MAX_RECONNECTS as i64)),
    ("RECONNECT_DELAY", Exported::Seconds(RECONNECT_DELAY)),
    ("PING_INTERVAL", Exported::Seconds(PING_INTERVAL)),
    (
        "MAX_DECOMPRESSED_BYTES",
        Exported::Int(MAX_DECOMPRESSED_BYTES as i64),
    ),
    ("WINDOW", Exported::Int(WINDOW as i64)),
    ("ACK_TIMEOUT", Exported::Seconds(ACK_TIMEOUT)),
    ("MAX_RETRIES", Exported::Int(MAX_RETRIES as i64)),
    ("RETRY_BACKOFF", Exported::Seconds(RETRY_BACKOFF)),
    (
        "MAX_BYTES_IN_FLIGHT",
        Exported::Int(MAX_BYTES_IN_FLIGHT as i64),
    ),
    ("ROWS_PER_RESULT", Exported::Int(ROWS_PER_RESULT as i64)),
    ("PUBLISH_MODE", Exported::Str(PUBLISH_MODE)),
    ("POSITION_ROWS", Exported::Int(POSITION_ROWS as i64)),
    ("WRITER_LEASE", Exported::Seconds(WRITER_LEASE)),
    ("ATOMIC_BATCH_ROWS", Exported::Int(ATOMIC_BATCH_ROWS as i64)),
    ("ON_MALFORMED", Exported::Str(ON_MALFORMED)),
    ("ON_NEW_FIELD", Exported::Str(ON_NEW_FIELD)),
    ("VALUE_SAMPLE_ROWS", Exported::Int(VALUE_SAMPLE_ROWS as i64)),
    ("AVRO_FRAMING", Exported::Str(AVRO_FRAMING)),
    ("READ_BATCH_ROWS", Exported::Int(READ_BATCH_ROWS as i64)),
    ("READ_MAX_BYTES", Exported::Int(READ_MAX_BYTES as i64)),
    ("HEARTBEAT", Exported::Seconds(HEARTBEAT)),
    ("RESUME_TIMEOUT", Exported::Seconds(RESUME_TIMEOUT)),
    ("READ_METHOD", Exported::Str(READ_METHOD)),
    ("FOLLOW_BATCH_WAIT", Exported::Seconds(FOLLOW_BATCH_WAIT)),
    (
        "FETCH_MAX_MESSAGES",
        Exported::Int(FETCH_MAX_MESSAGES as i64),
    ),
    ("FETCH_EXPIRES", Exported::Seconds(FETCH_EXPIRES)),
    (
        "CONSUME_MAX_MESSAGES",
        Exported::Int(CONSUME_MAX_MESSAGES as i64),
    ),
    ("CONSUME_EXPIRES", Exported::Seconds(CONSUME_EXPIRES)),
    (
        "CONSUME_BATCH_ROWS",
        Exported::Int(CONSUME_BATCH_ROWS as i64),
    ),
    ("CONSUME_BATCH_WAIT", Exported::Seconds(CONSUME_BATCH_WAIT)),
    ("ACK_SYNC_TIMEOUT", Exported::Seconds(ACK_SYNC_TIMEOUT)),
    ("SILENCE_PROBE", Exported::Seconds(SILENCE_PROBE)),
    ("SPARK_BATCH_ROWS", Exported::Int(SPARK_BATCH_ROWS as i64)),
    (
        "SPARK_MAX_MESSAGES_PER_PARTITION",
        Exported::Int(SPARK_MAX_MESSAGES_PER_PARTITION as i64),
    ),
    (
        "SPARK_MAX_TRIGGER_DELAY",
        Exported::Seconds(SPARK_MAX_TRIGGER_DELAY),
    ),
    (
        "SPARK_CONSUMER_PIN_TIMEOUT",
        Exported::Seconds(SPARK_CONSUMER_PIN_TIMEOUT),
    ),
];
