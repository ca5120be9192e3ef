//! How a publisher sends: its options, their bounds and their checks.

use std::time::Duration;

use crate::codec::CodecSpec;
use crate::defaults;
use crate::error::{Error, Result};
use crate::publish::input::{MessageDefaults, PublishBatch};

/// The largest window: acks must fit the client's subscription buffer (64 Ki).
pub const MAX_WINDOW: usize = 65_536;

/// Payload bytes in flight at most, whatever the window. With large messages the
/// count alone would hold window × size in memory (8192 × 16 KiB = 128 MiB), while
/// 32 MiB in flight already keeps a server busy: at 1 GB/s it allows 30 ms from
/// sending a message to its ack.
pub const MAX_BYTES_IN_FLIGHT: usize = 32 << 20;

/// The longest ack timeout honoured: a deadline is an instant, and one too far ahead
/// overflows it. Thirty years is "never" for a publish, and what tokio itself uses.
pub(super) const MAX_ACK_TIMEOUT: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// How a publisher sends.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// Unacknowledged messages in flight at most.
    pub window: usize,
    /// When the window is full: refuse the remaining rows instead of waiting.
    pub fail_when_full: bool,
    pub ack_timeout: Duration,
    /// Retries of a message after backpressure or an ack timeout.
    pub max_retries: u32,
    /// The first retry waits this long; each further one twice as long (at most 2 s).
    pub retry_backoff: Duration,
    pub defaults: MessageDefaults,
    /// The number generated msg ids start from.
    pub msg_id_start: u64,
    pub expected_last_seq: Option<u64>,
    pub expected_last_msg_id: Option<String>,
    pub expected_last_subject_seq: Option<u64>,
    /// Per-message acks, fast-ingest batches ([`super::fast`]) or atomic batches
    /// ([`super::atomic`]).
    pub mode: PublishMode,
    /// Atomic mode: rows per batch, each batch stored whole or not at all.
    pub batch_rows: usize,
    /// The input's value columns encoded into each row's payload (none: the input
    /// has a `data` column).
    pub values: Option<CodecSpec>,
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

impl OnFull {
    pub fn parse(value: &str) -> Result<Self> {
        match value {
            "wait" => Ok(Self::Wait),
            "fail" => Ok(Self::Fail),
            other => Err(Error::bad_input(format!(
                "option 'on_full' must be 'wait' or 'fail', got {other:?}"
            ))),
        }
    }
}

impl PublishMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Acked => "acked",
            Self::Fast => "fast",
            Self::Atomic => "atomic",
        }
    }

    pub fn parse(value: &str) -> Result<Self> {
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

impl Default for PublishOptions {
    fn default() -> Self {
        Self {
            window: defaults::WINDOW,
            fail_when_full: false,
            ack_timeout: defaults::ACK_TIMEOUT,
            max_retries: defaults::MAX_RETRIES,
            retry_backoff: defaults::RETRY_BACKOFF,
            defaults: MessageDefaults::default(),
            msg_id_start: 0,
            expected_last_seq: None,
            expected_last_msg_id: None,
            expected_last_subject_seq: None,
            mode: PublishMode::parse(defaults::PUBLISH_MODE).expect("the default mode is valid"),
            batch_rows: defaults::ATOMIC_BATCH_ROWS,
            values: None,
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
        if self.mode != PublishMode::Acked && self.fail_when_full {
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
            ("msg_id_prefix", &self.defaults.msg_id_prefix),
            ("expected_stream", &self.defaults.expected_stream),
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
        if input.is_increments()
            && (self.defaults.expected_stream.is_some() || self.has_expectations())
        {
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

    pub(crate) fn has_expectations(&self) -> bool {
        self.expected_last_seq.is_some()
            || self.expected_last_msg_id.is_some()
            || self.expected_last_subject_seq.is_some()
    }
}
