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
use crate::options::Choice;
use crate::read::last::{AsOf, LastOptions};
use crate::read::ordered::Start;

crate::declare_options! {
    /// What to read. Sequences are inclusive; times are nanoseconds since the epoch.
    /// Every field but `values` is an option callers give by name (Python's
    /// `ReadOptions`).
    #[derive(Debug, Clone)]
    pub struct ReadOptions (none_is_default) {
        /// The first sequence to read (default: the first message).
        start_seq: Option<u64>;
        /// The last sequence to read (default: the stream's last when the read opens).
        end_seq: Option<u64>;
        /// Only messages of these subject filters (default: every subject).
        subjects: Vec<String>;
        /// The first message stored at or after this time (instead of start_seq).
        start_time: Option<i64>;
        /// No message stored after this time.
        end_time: Option<i64>;
        /// A headers column.
        include_headers: bool = false;
        /// `data` as `binary_view` over the received payloads, not copied.
        payload_views: bool = false;
        /// A `ttl` column: each message's `Nats-TTL` as the server reads it.
        include_ttl: bool = false;
        /// Exactly-once writers' position messages as rows too (by default left out).
        include_positions: bool = false;
        /// Rows per output batch, at most.
        batch_rows: usize = defaults::READ_BATCH_ROWS, min 1;
        /// Payload bytes per output batch and per pull request, at most.
        max_bytes: usize = defaults::READ_MAX_BYTES, min 1;
        /// The read consumer's idle heartbeat; two missed ones fail.
        heartbeat: Duration = defaults::HEARTBEAT;
        /// How long to keep recreating the read's consumer after losing it.
        resume_timeout: Duration = defaults::RESUME_TIMEOUT;
        /// How a range is read: by direct gets where they are current, a consumer, or direct gets.
        method: ReadMethod = defaults::READ_METHOD;
        /// The latest message of each subject instead of a range.
        last_per_subject: bool = false;
        /// A latest-per-subject read as of this sequence.
        as_of_seq: Option<u64>;
        /// A latest-per-subject read as of this time.
        as_of_time: Option<i64>;
    }
    extra {
        /// Payloads decoded into typed columns (none: `data` as bytes).
        values: Option<CodecSpec> = None;
    }
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

crate::choice_option!(ReadMethod);

impl ReadMethod {
    pub fn parse(name: &str) -> Result<Self> {
        <Self as Choice>::parse(name)
    }
}

impl Choice for ReadMethod {
    const NAMES: &'static [&'static str] = &["auto", "consumer", "direct"];

    fn parse(name: &str) -> Result<Self> {
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
        if self.start_seq.is_some() && self.start_time.is_some() {
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
                (self.as_of_time.is_some(), "as_of_time"),
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
            (self.start_time.is_some(), "start_time"),
            (self.end_time.is_some(), "end_time"),
            (self.values.is_some(), "codec"),
        ] {
            if given {
                return Err(Error::bad_input(format!(
                    "option '{option}' does not go with last_per_subject=True, which reads \
                     the latest message of each subject (as of as_of_seq or as_of_time)"
                )));
            }
        }
        let as_of = match (self.as_of_seq, self.as_of_time) {
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
        match (self.start_seq, self.start_time) {
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
