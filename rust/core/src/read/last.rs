//! The latest message of each subject of a stream, as of a sequence or a time: what a
//! KV bucket or a "last value per subject" stream holds as state, read as a table
//! without reading its history. One module because the requests, their paging, the
//! fallback to listed subjects and the consumer of streams without direct gets all
//! move one read's cursor.
//!
//! Mechanism: batched direct gets with `multi_last` (nats-server 2.11+, streams with
//! `allow_direct`): `<prefix>.DIRECT.GET.<stream>` with `{"multi_last": [filters],
//! "up_to_seq" | "up_to_time", "batch", "max_bytes", "seq"}` is answered by the last
//! message of every subject matching the filters at or below `up_to_seq`, in sequence
//! order, then `204 EOB` with `Nats-Num-Pending` (results left) and
//! `Nats-UpTo-Sequence`. No consumer is created. A page ends early at `batch` or
//! `max_bytes`; the next request starts after the last message received (`seq`), with
//! the `up_to_seq` the first page's end of batch reported, so every page answers for
//! the same state of the stream.
//!
//! The server answers at most 1,024 subjects per request and refuses more with
//! `413 Too Many Results`. Then the subjects are listed (`STREAM.INFO` with
//! `subjects_filter`, paged) and asked for in groups of 1,024: the listing is of the
//! stream as it is, so a read as of an earlier state does not see subjects whose every
//! message has since been removed.
//!
//! A request that gets no answer within the request timeout (a reconnect, a restarted
//! server) is sent again, for up to `resume_timeout`.
//!
//! A stream without `allow_direct` (or `method="consumer"`) is read through an
//! ephemeral consumer with `DeliverLastPerSubject` ([`Start::LastPerSubject`]), which
//! delivers the last message of each subject in sequence order and then what arrives;
//! the read ends at the first delivery with nothing pending. It reads the stream as it
//! is (a consumer has no "as of"). A consumer recreated after a failure starts over
//! with the last messages: those of subjects already handed out are skipped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use serde::{Deserialize, Serialize};

use crate::api::headers::{last_u64, NUM_PENDING};
use crate::api::types::StreamInfoWithAlternates;
use crate::api::{subjects, validate_name, Status};
use crate::arrow::builder::BatchBuilder;
use crate::arrow::metadata::Delivered;
use crate::arrow::schema::SchemaOptions;
use crate::connection::Connection;
use crate::consume::pull::PullSettings;
use crate::defaults;
use crate::error::{Error, ErrorKind, Result};
use crate::limits::MAX_BUFFERED_MESSAGES;
use crate::read::direct::{DirectReply, DirectRequests};
use crate::read::msg_get::rfc3339;
use crate::read::ordered::{OrderedPull, Start};
use crate::read::ReadMethod;

/// The most subjects one `multi_last` request may match (nats-server's
/// `maxAllowedResponses`).
pub const MULTI_LAST_MAX_SUBJECTS: usize = 1024;

/// The header of a `multi_last` end of batch naming the sequence it answered up to.
const UP_TO_SEQUENCE: &str = "Nats-UpTo-Sequence";

/// As of when the latest messages are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsOf {
    /// The stream's last sequence when the read opens.
    Now,
    /// Messages up to this sequence.
    Sequence(u64),
    /// Messages stored up to this time (nanoseconds since the epoch), its whole
    /// microsecond included: what a read's `timestamp` column says.
    Time(i64),
}

/// What a latest-per-subject read returns.
#[derive(Debug, Clone)]
pub struct LastOptions {
    /// Subject filters (wildcards allowed); none: every subject of the stream.
    pub subjects: Vec<String>,
    pub as_of: AsOf,
    pub include_headers: bool,
    /// `data` as `binary_view` over the received payloads.
    pub payload_views: bool,
    /// A `ttl` column: each message's `Nats-TTL` as the server reads it.
    pub include_ttl: bool,
    /// Exactly-once writers' latest positions as rows too (by default left out).
    pub include_positions: bool,
    pub batch_rows: usize,
    pub max_bytes: usize,
    pub heartbeat: Duration,
    pub resume_timeout: Duration,
    /// Direct gets (`Direct`), a consumer (`Consumer`), or direct gets where the
    /// stream allows them (`Auto`).
    pub method: ReadMethod,
}

impl Default for LastOptions {
    fn default() -> Self {
        Self {
            subjects: Vec::new(),
            as_of: AsOf::Now,
            include_headers: false,
            payload_views: false,
            include_ttl: false,
            include_positions: false,
            batch_rows: defaults::READ_BATCH_ROWS,
            max_bytes: defaults::READ_MAX_BYTES,
            heartbeat: defaults::HEARTBEAT,
            resume_timeout: defaults::RESUME_TIMEOUT,
            method: ReadMethod::Auto,
        }
    }
}

#[derive(Debug, Serialize)]
struct MultiLastRequest<'a> {
    multi_last: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    up_to_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    up_to_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    batch: usize,
    max_bytes: usize,
}

/// `STREAM.INFO` asked for the stream's subjects matching a filter, a page at a time.
#[derive(Debug, Serialize)]
struct SubjectsRequest<'a> {
    subjects_filter: &'a str,
    offset: usize,
}

#[derive(Debug, Deserialize)]
struct SubjectsPage {
    #[serde(default)]
    total: usize,
    state: SubjectsState,
}

#[derive(Debug, Deserialize)]
struct SubjectsState {
    #[serde(default)]
    subjects: Option<HashMap<String, u64>>,
}

/// An open latest-per-subject read: yields batches until every subject is read.
pub struct LastPerSubject {
    conn: Connection,
    stream: String,
    options: LastOptions,
    /// Groups of subject filters still to read, each one request's `multi_last`.
    groups: VecDeque<Vec<String>>,
    /// The group being read, and where its next page starts.
    current: Option<Vec<String>>,
    next_seq: Option<u64>,
    /// Fixed by the first end of batch, so later pages answer for the same state.
    up_to_seq: Option<u64>,
    /// Whether the group being read is the caller's filters (not listed subjects):
    /// only those may be expanded into listed subjects.
    expandable: bool,
    builder: BatchBuilder,
    carry: Option<Delivered>,
    requests: DirectRequests,
    /// The consumer of a stream read without direct gets, and the subjects it handed
    /// out (a recreated consumer delivers them again).
    consumer: Option<Box<OrderedPull>>,
    handed_out: HashSet<String>,
}

impl LastPerSubject {
    pub async fn open(conn: Connection, stream: &str, options: LastOptions) -> Result<Self> {
        validate_name(stream, "stream")?;
        if options.batch_rows == 0 {
            return Err(Error::bad_input("option 'batch_rows' must be at least 1"));
        }
        if options.max_bytes == 0 {
            return Err(Error::bad_input("option 'max_bytes' must be at least 1"));
        }
        if options.as_of == AsOf::Sequence(0) {
            return Err(Error::bad_input(
                "option 'as_of_seq': stream sequences start at 1",
            ));
        }
        let StreamInfoWithAlternates { info, .. } = conn
            .api_get_patiently(&subjects::stream_info(stream), options.resume_timeout)
            .await
            .map_err(|e| e.context(format!("reading the latest messages of stream {stream:?}")))?;
        let direct = match options.method {
            ReadMethod::Consumer => false,
            ReadMethod::Auto => info.config.allow_direct,
            ReadMethod::Direct if info.config.allow_direct => true,
            ReadMethod::Direct => {
                return Err(Error::bad_input(format!(
                    "option 'method': stream {stream:?} does not allow direct gets \
                     (allow_direct is false); read its latest messages with method \
                     'consumer' or 'auto', or update the stream with allow_direct=True"
                )))
            }
        };
        if !direct && options.as_of != AsOf::Now {
            return Err(Error::bad_input(format!(
                "options 'as_of_seq' and 'as_of_time' read the latest messages with direct \
                 gets, and stream {stream:?} is read through a consumer (allow_direct is \
                 false, or method 'consumer'), which reads the stream as it is; update the \
                 stream with allow_direct=True"
            )));
        }
        super::refuse_unmatched_filters(stream, &options.subjects, &info)?;
        let up_to_seq = match options.as_of {
            AsOf::Now => Some(info.state.last_sequence),
            AsOf::Sequence(seq) => Some(seq.min(info.state.last_sequence)),
            AsOf::Time(_) => None,
        };
        let filters = if options.subjects.is_empty() {
            vec![">".to_string()]
        } else {
            options.subjects.clone()
        };
        let schema_options = SchemaOptions {
            include_headers: options.include_headers,
            include_ttl: options.include_ttl,
            consumer_columns: false,
            payload_views: options.payload_views,
        };
        let empty = info.state.messages == 0 || up_to_seq == Some(0);
        let consumer = if direct || empty {
            None
        } else {
            let settings = PullSettings::new(
                (options.batch_rows * 2).clamp(1024, MAX_BUFFERED_MESSAGES),
                Some(options.max_bytes.saturating_mul(2)),
                defaults::CONSUME_EXPIRES.max(options.heartbeat * 4),
                Some(options.heartbeat),
            );
            // The server wants a filter with DeliverLastPerSubject; `>` is every subject.
            let filters = if options.subjects.is_empty() {
                vec![">".to_string()]
            } else {
                options.subjects.clone()
            };
            let (ordered, pending) = OrderedPull::open(
                conn.clone(),
                stream,
                filters,
                Start::LastPerSubject,
                settings,
                options.resume_timeout,
            )
            .await?;
            (pending > 0).then(|| Box::new(ordered))
        };
        let decompression = conn.decompression;
        Ok(Self {
            requests: DirectRequests::new(
                &conn,
                stream,
                format!("reading the latest messages of stream {stream:?}"),
                options.resume_timeout,
            ),
            conn,
            stream: stream.to_string(),
            groups: if empty || !direct {
                VecDeque::new()
            } else {
                VecDeque::from([filters])
            },
            current: None,
            next_seq: None,
            up_to_seq,
            expandable: true,
            builder: BatchBuilder::new(stream, schema_options)
                .with_decompression(decompression)
                .with_positions(options.include_positions),
            carry: None,
            consumer,
            handed_out: HashSet::new(),
            options,
        })
    }

    pub fn schema(&self) -> SchemaRef {
        self.builder.schema()
    }

    /// The next batch, or None once every subject is read. A batch holds at most
    /// `batch_rows` rows and `max_bytes` payload bytes (or one larger message).
    pub async fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if let Some(carried) = self.carry.take() {
            self.builder.append(&carried.message, &carried.meta)?;
        }
        while self.builder.len() < self.options.batch_rows {
            let Some(delivered) = self.next_message().await? else {
                break;
            };
            let size = delivered.message.payload.len();
            if !self.builder.is_empty() && self.builder.data_bytes() + size > self.options.max_bytes
            {
                self.carry = Some(delivered);
                break;
            }
            self.builder.append(&delivered.message, &delivered.meta)?;
        }
        if self.builder.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.builder.finish()?))
    }

    /// The next latest message, or None at the end.
    async fn next_message(&mut self) -> Result<Option<Delivered>> {
        if self.consumer.is_some() {
            return self.next_consumed().await;
        }
        loop {
            if self.current.is_none() {
                match self.groups.pop_front() {
                    Some(group) => {
                        self.current = Some(group);
                        self.next_seq = None;
                    }
                    None => return Ok(None),
                }
            }
            if !self.requests.in_flight {
                self.send_request().await?;
            }
            let delivered = match self.requests.next().await? {
                DirectReply::Message(delivered) => delivered,
                DirectReply::EndOfBatch(end) => {
                    if self.up_to_seq.is_none() {
                        self.up_to_seq = last_u64(&end, UP_TO_SEQUENCE);
                    }
                    if last_u64(&end, NUM_PENDING) == Some(0) {
                        self.current = None;
                    }
                    continue;
                }
                DirectReply::NoResults => {
                    // No subject of the group has a message in range.
                    self.current = None;
                    continue;
                }
                DirectReply::Other(Status::Refused { code: 413, .. }) if self.expandable => {
                    self.requests.in_flight = false;
                    let filters = self.current.take().unwrap_or_default();
                    self.expand(&filters).await?;
                    continue;
                }
                DirectReply::SendAgain => continue,
                DirectReply::Other(status) => return Err(self.requests.unexpected(&status)),
            };
            self.next_seq = Some(delivered.meta.stream_seq + 1);
            return Ok(Some(delivered));
        }
    }

    /// The next last message from the consumer; None once it has nothing pending.
    async fn next_consumed(&mut self) -> Result<Option<Delivered>> {
        while let Some(consumer) = self.consumer.as_mut() {
            let Some(delivered) = consumer.next(None).await? else {
                continue;
            };
            if delivered.meta.pending == 0 {
                if let Some(mut done) = self.consumer.take() {
                    done.close().await;
                }
            }
            if self
                .handed_out
                .insert(delivered.message.subject.to_string())
            {
                return Ok(Some(delivered));
            }
        }
        Ok(None)
    }

    async fn send_request(&mut self) -> Result<()> {
        let up_to_time = match (self.up_to_seq, self.options.as_of) {
            // The server reads messages stored before `up_to_time`; a read's times
            // are microseconds, so "as of T" takes T's whole microsecond in.
            (None, AsOf::Time(ns)) => Some(rfc3339(ns - ns.rem_euclid(1_000) + 1_000)?),
            _ => None,
        };
        // Serialized here, so no borrow of the reader lives across the send.
        let body = serde_json::to_vec(&MultiLastRequest {
            multi_last: self.current.as_deref().unwrap_or_default(),
            up_to_seq: self.up_to_seq,
            up_to_time,
            seq: self.next_seq,
            batch: self.options.batch_rows,
            max_bytes: self.options.max_bytes,
        })
        .expect("a request body serializes");
        self.requests.send(body).await
    }

    /// More subjects match `filters` than one request answers: list them and read
    /// them in groups of [`MULTI_LAST_MAX_SUBJECTS`].
    async fn expand(&mut self, filters: &[String]) -> Result<()> {
        self.expandable = false;
        let mut listed: Vec<String> = Vec::new();
        for filter in filters {
            listed.extend(list_subjects(&self.conn, &self.stream, filter).await?);
        }
        listed.sort();
        listed.dedup();
        for group in listed.chunks(MULTI_LAST_MAX_SUBJECTS) {
            self.groups.push_back(group.to_vec());
        }
        Ok(())
    }

    /// Stop reading.
    pub async fn close(&mut self) {
        self.groups.clear();
        self.current = None;
        if let Some(mut consumer) = self.consumer.take() {
            consumer.close().await;
        }
        self.requests.close().await;
    }
}

/// The stream's subjects matching `filter`, every page of them.
async fn list_subjects(conn: &Connection, stream: &str, filter: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    loop {
        let body = serde_json::to_vec(&SubjectsRequest {
            subjects_filter: filter,
            offset: out.len(),
        })
        .expect("a request body serializes");
        let raw = conn
            .api_request(&subjects::stream_info(stream), body.into(), None)
            .await
            .map_err(|e| {
                e.context(format!(
                    "listing the subjects of stream {:?} matching {filter:?}",
                    stream
                ))
            })?;
        let page: SubjectsPage = serde_json::from_slice(&raw).map_err(|e| {
            Error::new(
                ErrorKind::Api,
                format!(
                    "listing the subjects of stream {:?}: unexpected reply ({e})",
                    stream
                ),
            )
        })?;
        let subjects = page.state.subjects.unwrap_or_default();
        if subjects.is_empty() {
            return Ok(out);
        }
        out.extend(subjects.into_keys());
        if out.len() >= page.total {
            return Ok(out);
        }
    }
}
