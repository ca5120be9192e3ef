//! A range read ([`StreamReader`]): its choice of method (an ordered consumer or
//! batched direct gets) and the batching of either source's messages into Arrow
//! batches, owing every sequence the stream held in the range when it opened.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::api::types::{StreamAlternate, StreamInfo, StreamInfoWithAlternates};
use crate::api::{subjects, validate_name};
use crate::arrow::builder::BatchBuilder;
use crate::arrow::metadata::Delivered;
use crate::arrow::schema::SchemaOptions;
use crate::connection::Connection;
use crate::defaults;
use crate::error::{Error, Result};
use crate::read::completeness::{incomplete, Holding, Progress};
use crate::read::direct::{DirectRange, DirectStart};
use crate::read::ordered::{OrderedPull, Start};
use crate::read::value_schema::value_decoder;
use crate::read::{refuse_unmatched_filters, ReadMethod, ReadOptions};

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
            include_ttl: options.include_ttl,
            consumer_columns: false,
            payload_views: options.payload_views,
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
        let by_time = options.start_time.is_some() || options.end_time.is_some();
        let progress = Progress {
            start: options.start_time.is_none().then_some(start),
            last: owed_last,
            next: None,
            received: 0,
            // Other subjects' sequences, or times, leave holes a count cannot tell
            // from lost messages.
            count_checked: options.subjects.is_empty()
                && !by_time
                && Holding::from(&info).holds_every_sequence(start, owed_last),
        };
        let values = value_decoder(&conn, stream, &options, schema_options).await?;
        let decompression = conn.decompression;
        let mut reader = Self {
            conn,
            stream: stream.to_string(),
            method: ReadMethod::Consumer,
            source: None,
            builder: BatchBuilder::new(stream, schema_options)
                .with_values(values)
                .with_decompression(decompression)
                .with_positions(options.include_positions),
            end_seq,
            end_time_ns: options.end_time,
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
        let direct_start = match options.start_time {
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
            self.builder.append(&carried.message, &carried.meta)?;
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
            // Counted as read even when the builder leaves it out (a writer's
            // position): the read owes its sequence, not a row.
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
            self.builder.append(&delivered.message, &meta)?;
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
