//! How a publisher sends: its options, their bounds and their checks.

use std::time::Duration;

use crate::codec::CodecSpec;
use crate::compression::Compression;
use crate::defaults;
use crate::error::{Error, Result};
use crate::limits::MIN_SECONDS;
use crate::options::Choice;
use crate::publish::input::{MessageDefaults, PublishBatch};

/// The largest window: acks must fit the client's subscription buffer (64 Ki).
pub const MAX_WINDOW: usize = 65_536;

/// The longest ack timeout honoured: a deadline is an instant, and one too far ahead
/// overflows it. Thirty years is "never" for a publish, and what tokio itself uses.
pub(super) const MAX_ACK_TIMEOUT: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

crate::declare_options! {
    /// How a publisher sends. Every field but `values` is an option callers give by
    /// name (Python's `PublishOptions`).
    #[derive(Debug, Clone)]
    pub struct PublishOptions (none_is_default) {
        /// Every row goes to this subject (else each row's `subject` column).
        subject: Option<String>;
        /// Unacknowledged messages in flight at most.
        window: usize = defaults::WINDOW, min 1, max MAX_WINDOW;
        /// When the window is full: wait for acks, or refuse the call's remaining rows.
        on_full: OnFull = defaults::ON_FULL;
        /// How long a message waits for its ack before it is retried or failed.
        ack_timeout: Duration = defaults::ACK_TIMEOUT, min MIN_SECONDS;
        /// Retries of a message after backpressure or an ack timeout.
        max_retries: u32 = defaults::MAX_RETRIES;
        /// The first retry waits this long; each further one twice as long (at most 2 s).
        retry_backoff: Duration = defaults::RETRY_BACKOFF;
        /// Rows without a msg id get `<prefix><n>`, so a re-run is deduplicated.
        msg_id_prefix: Option<String>;
        /// The number generated msg ids start from.
        msg_id_start: u64 = defaults::MSG_ID_START;
        /// Every message expects to be stored by this stream.
        expected_stream: Option<String>;
        /// The first row of a call expects the stream's last sequence to be this.
        expected_last_seq: Option<u64>;
        /// The first row of a call expects the stream's last msg id to be this.
        expected_last_msg_id: Option<String>;
        /// The first row of a call expects its subject's last sequence to be this.
        expected_last_subject_seq: Option<u64>;
        /// An ack per message, fast-ingest batches, or atomic batches.
        mode: PublishMode = defaults::PUBLISH_MODE;
        /// Atomic mode: rows per batch, each batch stored whole or not at all.
        batch_rows: usize = defaults::ATOMIC_BATCH_ROWS, min 1;
        /// Whether a headers column's control headers are published (None: not in a copy).
        keep_control_headers: Option<bool>;
        /// Each payload compressed with this algorithm and marked Content-Encoding.
        compression: Option<Compression>;
        /// Payload bytes awaiting acks at most, whatever the window: bounds a publisher's memory.
        max_bytes_in_flight: usize = defaults::MAX_BYTES_IN_FLIGHT, min 1;
    }
    extra {
        /// The input's value columns encoded into each row's payload (none: the input
        /// has a `data` column).
        values: Option<CodecSpec> = None;
    }
}

/// How messages are acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PublishMode {
    /// Each message has its own ack; failed messages are retried one by one.
    #[default]
    Acked,
    /// Fast-ingest batches (streams with `allow_batched`): the server acks every N
    /// messages and steers N.
    Fast,
    /// Atomic batches (streams with `allow_atomic`): each batch of `batch_rows`
    /// rows is stored whole or not at all.
    Atomic,
}

/// What a publisher does when its window is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFull {
    /// Wait for acks to make room.
    Wait,
    /// Refuse the remaining rows of the call.
    Fail,
}

impl Choice for OnFull {
    const NAMES: &'static [&'static str] = &["wait", "fail"];

    fn parse(value: &str) -> Result<Self> {
        match value {
            "wait" => Ok(Self::Wait),
            "fail" => Ok(Self::Fail),
            other => Err(Error::bad_input(format!(
                "option 'on_full' must be 'wait' or 'fail', got {other:?}"
            ))),
        }
    }
}

crate::choice_option!(OnFull, PublishMode);

impl PublishMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Acked => "acked",
            Self::Fast => "fast",
            Self::Atomic => "atomic",
        }
    }

    pub fn parse(value: &str) -> Result<Self> {
        <Self as Choice>::parse(value)
    }
}

impl Choice for PublishMode {
    const NAMES: &'static [&'static str] = &["acked", "fast", "atomic"];

    fn parse(value: &str) -> Result<Self> {
        match value {
            "acked" => Ok(Self::Acked),
            "fast" => Ok(Self::Fast),
            "atomic" => Ok(Self::Atomic),
            other => Err(Error::bad_input(format!(
                "option 'mode' must be 'acked', 'fast' or 'atomic', got {other:?}"
            ))),
        }
    }
}

impl PublishOptions {
    pub fn validate(&self) -> Result<()> {
        if self.window == 0 || self.window > MAX_WINDOW {
            return Err(Error::bad_input(format!(
                "option 'window' must be between 1 and {MAX_WINDOW}, got {}",
                self.window
            )));
        }
        if self.ack_timeout.is_zero() {
            return Err(Error::bad_input("option 'ack_timeout' must be positive"));
        }
        if self.mode != PublishMode::Acked && self.on_full == OnFull::Fail {
            // A batch cannot drop rows from its middle: any gap ends it.
            return Err(Error::bad_input(
                "option on_full='fail' works with mode='acked' only",
            ));
        }
        if self.batch_rows == 0 {
            return Err(Error::bad_input("option 'batch_rows' must be at least 1"));
        }
        if self.mode == PublishMode::Atomic && self.expected_last_msg_id.is_some() {
            // The server refuses the header in an atomic batch (err_code 10177).
            return Err(Error::bad_input(
                "option 'expected_last_msg_id' does not work with mode='atomic': the server \
                 refuses Nats-Expected-Last-Msg-Id in an atomic batch; use expected_last_seq \
                 or expected_last_subject_seq",
            ));
        }
        // These become header values, which cannot hold a line break.
        for (option, value) in [
            ("msg_id_prefix", &self.msg_id_prefix),
            ("expected_stream", &self.expected_stream),
            ("expected_last_msg_id", &self.expected_last_msg_id),
        ] {
            if value.as_ref().is_some_and(|v| v.contains(['\r', '\n'])) {
                return Err(Error::bad_input(format!(
                    "option '{option}' may not contain line breaks"
                )));
            }
        }
        Ok(())
    }

    /// Refuse per-row expectation columns that cannot work with these options.
    pub(crate) fn check_expectation_columns(&self, input: &PublishBatch) -> Result<()> {
        if input.has_expectation_columns() && self.has_expectations() {
            return Err(Error::bad_input(
                "the input has a column of per-row expectations (expected_last_subject_seq or \
                 expected_last_msg_id) and the call has an expected_last_* option: give the \
                 checks as columns or as the option, not both",
            ));
        }
        if input.has_expected_last_msg_id_column() && self.mode == PublishMode::Atomic {
            return Err(Error::bad_input(
                "column 'expected_last_msg_id' does not work with mode='atomic': the server \
                 refuses Nats-Expected-Last-Msg-Id in an atomic batch; use column \
                 expected_last_subject_seq",
            ));
        }
        if input.is_increments() && self.mode != PublishMode::Acked {
            return Err(Error::bad_input(format!(
                "column 'increment' (counter increments) works with mode='acked', where each \
                 ack carries the counter's new value; got mode='{}'",
                self.mode.as_str()
            )));
        }
        if input.is_increments() && (self.expected_stream.is_some() || self.has_expectations()) {
            // nats-server refuses every Nats-Incr with an expectation header (10171).
            return Err(Error::bad_input(
                "column 'increment' (counter increments) takes no expected_stream or \
                 expected_last_* option: the server refuses an increment with any expectation \
                 header",
            ));
        }
        if input.has_expectation_columns() && self.mode == PublishMode::Fast {
            return Err(Error::bad_input(
                "columns expected_last_subject_seq and expected_last_msg_id work with \
                 mode='acked' or mode='atomic': a failed check would end a fast batch",
            ));
        }
        Ok(())
    }

    /// What shapes every message of a publish.
    pub(crate) fn message_defaults(&self) -> MessageDefaults {
        MessageDefaults {
            subject: self.subject.clone(),
            msg_id_prefix: self.msg_id_prefix.clone(),
            expected_stream: self.expected_stream.clone(),
            keep_control_headers: self.keep_control_headers,
            compression: self.compression,
        }
    }

    pub(crate) fn has_expectations(&self) -> bool {
        self.expected_last_seq.is_some()
            || self.expected_last_msg_id.is_some()
            || self.expected_last_subject_seq.is_some()
    }
}
