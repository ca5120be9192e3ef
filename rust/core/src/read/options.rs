//! What a read takes ([`ReadOptions`]), checked before it opens, and how it reads a
//! range ([`ReadMethod`]).

use std::time::Duration;

use crate::api::subject_match;
use crate::api::types::StreamInfo;
use crate::codec::CodecSpec;
use crate::consume::pull::PullSettings;
use crate::defaults;
use crate::error::{Error, Result};
use crate::limits::MAX_BUFFERED_MESSAGES;
use crate::read::last::{AsOf, LastOptions};
use crate::read::ordered::Start;

/// What to read. Sequences are inclusive; times are nanoseconds since the epoch.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    pub start_seq: Option<u64>,
    /// Default: the stream's last sequence when the read starts.
    pub end_seq: Option<u64>,
    pub subjects: Vec<String>,
    pub start_time_ns: Option<i64>,
    pub end_time_ns: Option<i64>,
    pub include_headers: bool,
    /// `data` as `binary_view` over the received payloads, not copied.
    pub payload_views: bool,
    /// A `ttl` column: each message's `Nats-TTL` as the server reads it.
    pub include_ttl: bool,
    /// Exactly-once writers' position messages as rows too (by default they are
    /// left out: [`crate::arrow::builder::is_position`]).
    pub include_positions: bool,
    pub batch_rows: usize,
    /// Payload bytes per output batch and per pull request, at most.
    pub max_bytes: usize,
    pub heartbeat: Duration,
    /// How long to keep trying to recreate the read's consumer after losing it
    /// (direct reads: to get an answer).
    pub resume_timeout: Duration,
    pub method: ReadMethod,
    /// Payloads decoded into typed columns (none: `data` as bytes).
    pub values: Option<CodecSpec>,
    /// The latest message of each subject instead of a range ([`last`]), as of
    /// `as_of_seq` or `as_of_time_ns` if given.
    pub last_per_subject: bool,
    pub as_of_seq: Option<u64>,
    pub as_of_time_ns: Option<i64>,
}

/// How a range is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMethod {
    /// Direct gets for ranges of at most [`defaults::DIRECT_READ_MAX_MESSAGES`]
    /// messages where [`direct_reads_are_current`] holds, else a consumer.
    Auto,
    /// An ordered consumer, created for the read and deleted after it.
    Consumer,
    /// Batched direct gets: no consumer; the stream needs `allow_direct`.
    Direct,
}

impl ReadMethod {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "auto" => Ok(Self::Auto),
            "consumer" => Ok(Self::Consumer),
            "direct" => Ok(Self::Direct),
            other => Err(Error::bad_input(format!(
                "option 'method' must be 'auto', 'consumer' or 'direct', got {other:?}"
            ))),
        }
    }
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            start_seq: None,
            end_seq: None,
            subjects: Vec::new(),
            start_time_ns: None,
            end_time_ns: None,
            include_headers: false,
            payload_views: false,
            include_ttl: false,
            include_positions: false,
            batch_rows: defaults::READ_BATCH_ROWS,
            max_bytes: defaults::READ_MAX_BYTES,
            heartbeat: defaults::HEARTBEAT,
            resume_timeout: defaults::RESUME_TIMEOUT,
            method: ReadMethod::parse(defaults::READ_METHOD).expect("a known method"),
            values: None,
            last_per_subject: false,
            as_of_seq: None,
            as_of_time_ns: None,
        }
    }
}

impl ReadOptions {
    pub(super) fn validate(&self) -> Result<()> {
        if self.batch_rows == 0 {
            return Err(Error::bad_input("option 'batch_rows' must be at least 1"));
        }
        if self.max_bytes == 0 {
            return Err(Error::bad_input("option 'max_bytes' must be at least 1"));
        }
        if self.start_seq == Some(0) {
            return Err(Error::bad_input(
                "option 'start_seq': stream sequences start at 1",
            ));
        }
        if self.start_seq.is_some() && self.start_time_ns.is_some() {
            return Err(Error::bad_input(
                "options 'start_seq' and 'start_time' exclude each other",
            ));
        }
        if self.payload_views && self.values.is_some() {
            return Err(Error::bad_input(
                "option 'payload_views' shapes the data column, which a read with a codec \
                 replaces by its value columns: give one or the other",
            ));
        }
        if self.method == ReadMethod::Direct && self.subjects.len() > 1 {
            return Err(Error::bad_input(format!(
                "option 'subjects': a direct read (method 'direct') takes one subject \
                 filter (wildcards allowed), got {:?}",
                self.subjects
            )));
        }
        Ok(())
    }

    /// The options of a latest-per-subject read, when these ask for one (None: a
    /// range read); options that belong to the other kind are refused, named.
    pub fn last_options(&self) -> Result<Option<LastOptions>> {
        if !self.last_per_subject {
            for (given, option) in [
                (self.as_of_seq.is_some(), "as_of_seq"),
                (self.as_of_time_ns.is_some(), "as_of_time"),
            ] {
                if given {
                    return Err(Error::bad_input(format!(
                        "option '{option}' is for reads of the latest message per subject: \
                         give last_per_subject=True too"
                    )));
                }
            }
            return Ok(None);
        }
        for (given, option) in [
            (self.start_seq.is_some(), "start_seq"),
            (self.end_seq.is_some(), "end_seq"),
            (self.start_time_ns.is_some(), "start_time"),
            (self.end_time_ns.is_some(), "end_time"),
            (self.values.is_some(), "codec"),
        ] {
            if given {
                return Err(Error::bad_input(format!(
                    "option '{option}' does not go with last_per_subject=True, which reads \
                     the latest message of each subject (as of as_of_seq or as_of_time)"
                )));
            }
        }
        let as_of = match (self.as_of_seq, self.as_of_time_ns) {
            (Some(_), Some(_)) => {
                return Err(Error::bad_input(
                    "options 'as_of_seq' and 'as_of_time' exclude each other",
                ))
            }
            (Some(seq), None) => AsOf::Sequence(seq),
            (None, Some(ns)) => AsOf::Time(ns),
            (None, None) => AsOf::Now,
        };
        Ok(Some(LastOptions {
            subjects: self.subjects.clone(),
            as_of,
            include_headers: self.include_headers,
            payload_views: self.payload_views,
            include_ttl: self.include_ttl,
            include_positions: self.include_positions,
            batch_rows: self.batch_rows,
            max_bytes: self.max_bytes,
            heartbeat: self.heartbeat,
            resume_timeout: self.resume_timeout,
            method: self.method,
        }))
    }

    pub(super) fn start(&self) -> Start {
        match (self.start_seq, self.start_time_ns) {
            (Some(seq), _) => Start::Sequence(seq),
            (None, Some(ns)) => Start::Time(ns),
            (None, None) => Start::All,
        }
    }

    /// Pull sizes: two batches' worth requested, so the next batch is on its way
    /// while Python works on this one.
    pub(super) fn pull_settings(&self) -> PullSettings {
        PullSettings::new(
            (self.batch_rows * 2).clamp(1024, MAX_BUFFERED_MESSAGES),
            Some(self.max_bytes.saturating_mul(2)),
            Duration::from_secs(30).max(self.heartbeat * 4),
            Some(self.heartbeat),
        )
    }
}

/// A read's filter that none of the stream's subjects can match would read nothing
/// whatever the stream holds: a typo, or the wrong stream. Streams that take their
/// messages from mirrors or sources (no subjects of their own) are not checked.
pub(crate) fn refuse_unmatched_filters(
    stream: &str,
    filters: &[String],
    info: &StreamInfo,
) -> Result<()> {
    let own = &info.config.subjects;
    if own.is_empty() {
        return Ok(());
    }
    match subject_match::unmatched(filters, own).as_slice() {
        [] => Ok(()),
        none => Err(Error::bad_input(format!(
            "option 'subjects': {none:?} match no subject of stream {stream:?}, whose \
             subjects are {own:?}"
        ))),
    }
}
