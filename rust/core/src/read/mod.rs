//! Replaying a range of a stream in sequence order as Arrow batches.
//!
//! Mechanism: an ordered consumer ([`crate::read::ordered`]): an ephemeral AckNone pull
//! consumer, recreated where it stopped when a server restarts, a leader changes or
//! deliveries are lost, so the range comes out exactly once and in order. It is
//! deleted when the read ends or is closed, and has an inactivity threshold in case
//! the process dies, so a read leaves no state on the server.
//!
//! Or, with [`ReadMethod::Direct`], batched direct gets ([`crate::read::direct`]): no
//! consumer at all, on streams with `allow_direct`. [`ReadMethod::Auto`] (the
//! default) takes direct gets for short ranges, where a consumer's create and delete
//! round trips cost more than the read, when they are sure to see every message.
//!
//! Either way the read owes the sequences its stream held in the range when it opened
//! ([`crate::read::completeness`]): a source that says nothing is pending before the
//! range's end is opened again after the last message read, and a read of every
//! subject counts what it got at its end. (Failures while reading are each source's
//! own to recover: both retry for `resume_timeout`.)
//!
//! [`OrderedStream`] is the open-ended form: it follows the stream as it grows.
//!
//! One module because a read's options, its choice of method and the batching of
//! either source's messages are one thing to follow through.

pub mod completeness;
pub mod direct;
pub mod last;
pub mod ordered;
pub mod stored;

use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::api::types::{StreamAlternate, StreamInfo, StreamInfoWithAlternates};
use crate::api::{subject_match, subjects, validate_name};
use crate::arrow::builder::BatchBuilder;
use crate::arrow::metadata::Delivered;
use crate::arrow::schema::SchemaOptions;
use crate::codec::{infer_value_schema, CodecSpec, ValueDecoder};
use crate::connection::Connection;
use crate::consume::pull::PullSettings;
use crate::defaults;
use crate::error::{Error, Result};
use crate::limits::MAX_BUFFERED_MESSAGES;
use crate::read::completeness::{incomplete, Holding, Progress};
use crate::read::direct::{DirectRange, DirectStart};
use crate::read::last::{AsOf, LastOptions};
use crate::read::ordered::{OrderedPull, Start};

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
    fn validate(&self) -> Result<()> {
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
            batch_rows: self.batch_rows,
            max_bytes: self.max_bytes,
            heartbeat: self.heartbeat,
            resume_timeout: self.resume_timeout,
            method: self.method,
        }))
    }

    fn start(&self) -> Start {
        match (self.start_seq, self.start_time_ns) {
            (Some(seq), _) => Start::Sequence(seq),
            (None, Some(ns)) => Start::Time(ns),
            (None, None) => Start::All,
        }
    }

    /// Pull sizes: two batches' worth requested, so the next batch is on its way
    /// while Python works on this one.
    fn pull_settings(&self) -> PullSettings {
        PullSettings::new(
            (self.batch_rows * 2).clamp(1024, MAX_BUFFERED_MESSAGES),
            Some(self.max_bytes.saturating_mul(2)),
            Duration::from_secs(30).max(self.heartbeat * 4),
            Some(self.heartbeat),
        )
    }
}

/// Whether only `info`'s stream leader answers its direct gets. Replicas and mirrors
/// with `mirror_direct` answer them too, from what they have applied so far; a direct
/// read then waits for them or asks again ([`crate::read::direct`]), where a consumer,
/// served by the leader, need not. (A standalone server lists no `alternates`; a
/// mirror's answers are then refused by the read.)
fn direct_reads_are_current(info: &StreamInfo, alternates: &[StreamAlternate]) -> bool {
    info.config.allow_direct
        && info.config.num_replicas <= 1
        && alternates.iter().all(|a| a.name == info.config.name)
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

/// Where a read's messages come from.
enum Source {
    Ordered(Box<OrderedPull>),
    Direct(Box<DirectRange>),
}

/// An open read: yields batches until the end of the range.
pub struct StreamReader {
    conn: Connection,
    stream: String,
    /// What the read was opened with: a resumed read opens its source again with them.
    options: ReadOptions,
    /// [`ReadMethod::Consumer`] or [`ReadMethod::Direct`], as chosen when it opened.
    method: ReadMethod,
    source: Option<Source>,
    builder: BatchBuilder,
    end_seq: u64,
    end_time_ns: Option<i64>,
    batch_rows: usize,
    max_bytes: usize,
    /// A message that did not fit the previous batch's byte budget.
    carry: Option<Delivered>,
    progress: Progress,
    /// The source said nothing is pending before the end of the range: it is opened
    /// again there before the read ends.
    ended_early: bool,
    /// Stopped by its caller ([`Self::finish`]): the count is not checked.
    closed: bool,
    /// Consumer resets of sources that are gone.
    earlier_resets: u32,
}

impl StreamReader {
    pub async fn open(conn: Connection, stream: &str, options: ReadOptions) -> Result<Self> {
        validate_name(stream, "stream")?;
        options.validate()?;
        if options.last_options()?.is_some() {
            return Err(Error::bad_input(
                "a read with last_per_subject=True is opened by read::last::LastPerSubject",
            ));
        }
        let schema_options = SchemaOptions {
            include_headers: options.include_headers,
            consumer_columns: false,
        };
        // A read opened as a server restarts waits for it, as the read itself would.
        let StreamInfoWithAlternates { info, alternates } = conn
            .api_get_patiently(&subjects::stream_info(stream), options.resume_timeout)
            .await
            .map_err(|e| e.context(format!("reading stream {stream:?}")))?;
        refuse_unmatched_filters(stream, &options.subjects, &info)?;
        let end_seq = options.end_seq.unwrap_or(info.state.last_sequence);
        let start = options
            .start_seq
            .unwrap_or(1)
            .max(info.state.first_sequence);
        let owed_last = end_seq.min(info.state.last_sequence);
        let by_time = options.start_time_ns.is_some() || options.end_time_ns.is_some();
        let progress = Progress {
            start: options.start_time_ns.is_none().then_some(start),
            last: owed_last,
            next: None,
            received: 0,
            // Other subjects' sequences, or times, leave holes a count cannot tell
            // from lost messages.
            count_checked: options.subjects.is_empty()
                && !by_time
                && Holding::from(&info).holds_every_sequence(start, owed_last),
        };
        let values = match &options.values {
            Some(spec) => {
                let sample = ReadOptions {
                    start_seq: options.start_seq,
                    end_seq: options.end_seq,
                    subjects: options.subjects.clone(),
                    start_time_ns: options.start_time_ns,
                    end_time_ns: options.end_time_ns,
                    ..ReadOptions::default()
                };
                let spec = resolve_value_schema(&conn, stream, spec, sample).await?;
                Some(ValueDecoder::new(&spec, options.batch_rows)?)
            }
            None => None,
        };
        let mut reader = Self {
            conn,
            stream: stream.to_string(),
            method: ReadMethod::Consumer,
            source: None,
            builder: BatchBuilder::new(stream, schema_options).with_values(values),
            end_seq,
            end_time_ns: options.end_time_ns,
            batch_rows: options.batch_rows,
            max_bytes: options.max_bytes,
            carry: None,
            progress,
            ended_early: false,
            closed: false,
            earlier_resets: 0,
            options,
        };
        if reader.options.method == ReadMethod::Direct && !info.config.allow_direct {
            // Refused whatever the stream holds now, so an empty stream answers as a
            // full one does.
            return Err(Error::bad_input(format!(
                "option 'method': stream {stream:?} does not allow direct gets \
                 (allow_direct is false); read it with method 'consumer', or update \
                 the stream with allow_direct=True"
            )));
        }
        if info.state.messages == 0 || end_seq < start {
            return Ok(reader);
        }
        let options = &reader.options;
        reader.method = match options.method {
            ReadMethod::Auto
                if end_seq - start < defaults::DIRECT_READ_MAX_MESSAGES
                    && options.subjects.len() <= 1
                    && direct_reads_are_current(&info, &alternates) =>
            {
                ReadMethod::Direct
            }
            ReadMethod::Auto => ReadMethod::Consumer,
            chosen => chosen,
        };
        let ordered_start = options.start();
        let direct_start = match options.start_time_ns {
            Some(ns) => DirectStart::Time(ns),
            None => DirectStart::Sequence(start),
        };
        if !reader.open_source(ordered_start, direct_start).await? {
            reader.end_source().await;
        }
        Ok(reader)
    }

    /// Open the read's source at `ordered_start` (a consumer) or `direct_start`
    /// (direct gets); false when a consumer has nothing pending there.
    async fn open_source(
        &mut self,
        ordered_start: Start,
        direct_start: DirectStart,
    ) -> Result<bool> {
        let options = &self.options;
        if self.method == ReadMethod::Direct {
            self.source = Some(Source::Direct(Box::new(DirectRange::new(
                self.conn.clone(),
                &self.stream,
                options.subjects.first().cloned(),
                direct_start,
                self.end_seq,
                options.batch_rows,
                options.max_bytes,
                options.resume_timeout,
            ))));
            return Ok(true);
        }
        let (ordered, pending) = OrderedPull::open(
            self.conn.clone(),
            &self.stream,
            options.subjects.clone(),
            ordered_start,
            options.pull_settings(),
            options.resume_timeout,
        )
        .await?;
        self.source = Some(Source::Ordered(Box::new(ordered)));
        Ok(pending > 0)
    }

    pub fn schema(&self) -> SchemaRef {
        self.builder.schema()
    }

    /// The next batch, or None at the end of the range. A batch holds at most
    /// `batch_rows` rows and `max_bytes` payload bytes (or one larger message).
    pub async fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if let Some(carried) = self.carry.take() {
            self.builder.append(&carried.message, &carried.meta);
        }
        while self.builder.len() < self.batch_rows {
            let delivered = match self.source.as_mut() {
                // What was read is handed out before the read resumes.
                None if self.ended_early && self.builder.is_empty() => {
                    self.resume_early_end().await?;
                    continue;
                }
                None => break,
                Some(Source::Ordered(ordered)) => match ordered.next(None).await? {
                    Some(delivered) => delivered,
                    None => continue,
                },
                Some(Source::Direct(direct)) => match direct.next().await? {
                    Some(delivered) => delivered,
                    None => {
                        self.end_source().await;
                        break;
                    }
                },
            };
            let meta = delivered.meta;
            let past_time = self.end_time_ns.is_some_and(|end| meta.timestamp_ns > end);
            if meta.stream_seq > self.end_seq || past_time {
                self.end_source().await;
                break;
            }
            self.progress.delivered(meta.stream_seq);
            if meta.stream_seq >= self.end_seq {
                self.end_source().await;
            } else if meta.pending == 0 {
                self.end_source().await;
                self.ended_early = self.progress.resume_at().is_some();
            }
            let size = delivered.message.payload.len();
            if !self.builder.is_empty() && self.builder.data_bytes() + size > self.max_bytes {
                self.carry = Some(delivered);
                break;
            }
            self.builder.append(&delivered.message, &meta);
        }
        if self.builder.is_empty() {
            self.check_count().await?;
            return Ok(None);
        }
        Ok(Some(self.builder.finish()?))
    }

    /// The source said nothing is pending before the end of the range: true when the
    /// rest was deleted or is of other subjects, but a consumer that lived through a
    /// leader change, or a replica answering direct gets, may say so early. Open the
    /// source again after the last message read, as the read itself may (a consumer
    /// it creates, direct gets it sends): what the new one has pending is the answer.
    /// The opening retries for `resume_timeout`; a resumed source that delivers moves
    /// the read past what it owes or ends it again, so this does not repeat without
    /// progress.
    async fn resume_early_end(&mut self) -> Result<()> {
        self.ended_early = false;
        let Some(from) = self.progress.resume_at() else {
            return Ok(());
        };
        if !self
            .open_source(Start::Sequence(from), DirectStart::Sequence(from))
            .await?
        {
            self.end_source().await;
        }
        Ok(())
    }

    /// At the end of a read of every subject whose stream held every sequence of
    /// the range when it opened: fewer messages than that is an error, unless the
    /// stream has lost some since (asked only then).
    async fn check_count(&mut self) -> Result<()> {
        let checked = std::mem::take(&mut self.progress.count_checked);
        let (Some(start), false) = (self.progress.start, self.closed) else {
            return Ok(());
        };
        let (last, received) = (self.progress.last, self.progress.received);
        if !checked || received == last - start + 1 {
            return Ok(());
        }
        let info: StreamInfo = self
            .conn
            .api_get_patiently(
                &subjects::stream_info(&self.stream),
                self.options.resume_timeout,
            )
            .await
            .map_err(|e| {
                e.context(format!(
                    "checking the end of a read of stream {:?}",
                    self.stream
                ))
            })?;
        match incomplete(&self.stream, start, last, received, Holding::from(&info)) {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// How often the read recreated its consumer to get past a failure.
    /// Payloads that did not decode so far (dropped, or kept as `_corrupt_record`).
    pub fn malformed(&self) -> u64 {
        self.builder.malformed()
    }

    pub fn resets(&self) -> u32 {
        self.earlier_resets
            + match &self.source {
                Some(Source::Ordered(ordered)) => ordered.resets,
                _ => 0,
            }
    }

    /// Stop reading and delete the consumer.
    pub async fn finish(&mut self) {
        self.closed = true;
        self.ended_early = false;
        self.end_source().await;
    }

    /// Close the current source (its consumer is deleted).
    async fn end_source(&mut self) {
        match self.source.take() {
            Some(Source::Ordered(mut ordered)) => {
                // Kept, so a finished read can still say that it recovered.
                self.earlier_resets += ordered.resets;
                ordered.close().await
            }
            Some(Source::Direct(mut direct)) => direct.close().await,
            None => {}
        }
    }
}

/// What to follow with an open-ended ordered consumer.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    pub subjects: Vec<String>,
    pub start: Start,
    pub include_headers: bool,
    pub batch_rows: usize,
    /// After the first message of a batch, how long to wait for more.
    pub batch_wait: Duration,
    pub max_bytes: usize,
    pub heartbeat: Duration,
    pub resume_timeout: Duration,
    /// Payloads decoded into typed columns (none: `data` as bytes).
    pub values: Option<CodecSpec>,
}

/// An open-ended ordered consumer (nats.go's `OrderedConsumer`): every message from
/// the start, then every new one, exactly once and in order, as batches.
pub struct OrderedStream {
    ordered: OrderedPull,
    builder: BatchBuilder,
    batch_rows: usize,
    batch_wait: Duration,
    max_bytes: usize,
    carry: Option<Delivered>,
}

impl OrderedStream {
    pub async fn open(conn: Connection, stream: &str, options: FollowOptions) -> Result<Self> {
        validate_name(stream, "stream")?;
        if options.batch_rows == 0 {
            return Err(Error::bad_input("option 'batch_rows' must be at least 1"));
        }
        let read = ReadOptions {
            batch_rows: options.batch_rows,
            max_bytes: options.max_bytes,
            heartbeat: options.heartbeat,
            ..ReadOptions::default()
        };
        let values = match &options.values {
            Some(spec) => {
                let sample = ReadOptions {
                    subjects: options.subjects.clone(),
                    ..ReadOptions::default()
                };
                let spec = resolve_value_schema(&conn, stream, spec, sample).await?;
                Some(ValueDecoder::new(&spec, options.batch_rows)?)
            }
            None => None,
        };
        let (ordered, _) = OrderedPull::open(
            conn,
            stream,
            options.subjects,
            options.start,
            read.pull_settings(),
            options.resume_timeout,
        )
        .await?;
        Ok(Self {
            ordered,
            builder: BatchBuilder::new(
                stream,
                SchemaOptions {
                    include_headers: options.include_headers,
                    consumer_columns: false,
                },
            )
            .with_values(values),
            batch_rows: options.batch_rows,
            batch_wait: options.batch_wait,
            max_bytes: options.max_bytes,
            carry: None,
        })
    }

    pub fn schema(&self) -> SchemaRef {
        self.builder.schema()
    }

    /// Waits for at least one message, then takes what arrives within `batch_wait`,
    /// up to `batch_rows` rows and `max_bytes` payload bytes.
    pub async fn next_batch(&mut self) -> Result<RecordBatch> {
        let first = match self.carry.take() {
            Some(carried) => carried,
            None => loop {
                if let Some(d) = self.ordered.next(None).await? {
                    break d;
                }
            },
        };
        self.builder.append(&first.message, &first.meta);
        let until = tokio::time::Instant::now() + self.batch_wait;
        while self.builder.len() < self.batch_rows {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            let Some(delivered) = self.ordered.next(Some(left)).await? else {
                break;
            };
            let size = delivered.message.payload.len();
            if self.builder.data_bytes() + size > self.max_bytes {
                self.carry = Some(delivered);
                break;
            }
            self.builder.append(&delivered.message, &delivered.meta);
        }
        self.builder.finish()
    }

    pub fn resets(&self) -> u32 {
        self.ordered.resets
    }

    /// Payloads that did not decode so far (dropped, or kept as `_corrupt_record`).
    pub fn malformed(&self) -> u64 {
        self.builder.malformed()
    }

    pub async fn close(&mut self) {
        self.ordered.close().await;
    }
}

/// `spec` with its value schema: as given, or inferred from the first
/// `spec.sample_rows` messages that `sample` (a range, subjects) reads.
pub async fn resolve_value_schema(
    conn: &Connection,
    stream: &str,
    spec: &CodecSpec,
    sample: ReadOptions,
) -> Result<CodecSpec> {
    if !spec.needs_inference() {
        return Ok(spec.clone());
    }
    let want = spec.sample_rows.max(1);
    let options = ReadOptions {
        batch_rows: want,
        values: None,
        ..sample
    };
    let mut reader = Box::pin(StreamReader::open(conn.clone(), stream, options)).await?;
    let mut payloads: Vec<bytes::Bytes> = Vec::new();
    while payloads.len() < want {
        let Some(batch) = Box::pin(reader.next_batch()).await? else {
            break;
        };
        let data = batch
            .column_by_name(crate::arrow::schema::DATA)
            .expect("message batches have a data column");
        let data = arrow_array::cast::AsArray::as_binary::<i32>(data.as_ref());
        payloads.extend(
            data.iter()
                .take(want - payloads.len())
                .map(|p| bytes::Bytes::copy_from_slice(p.unwrap_or_default())),
        );
    }
    reader.finish().await;
    let sample: Vec<&[u8]> = payloads.iter().map(|p| p.as_ref()).collect();
    let schema = infer_value_schema(spec.format, &sample)
        .map_err(|e| e.context(format!("stream {stream:?}")))?;
    Ok(CodecSpec {
        schema: Some(schema),
        ..spec.clone()
    })
}
