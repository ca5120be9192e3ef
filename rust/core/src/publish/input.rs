//! Reading publish input: an Arrow record batch in the message schema becomes NATS
//! messages, validated row by row with errors that name the column and the row.
//!
//! A row's message is its subject and payload, then each control of the batch in
//! turn ([`Control`]: a column such as `headers`, `msg_id`, `expected_*`, `ttl`,
//! `increment`, `schedule`, or an option such as `expected_stream`, `compression`)
//! adding its headers; `message` iterates them.
//!
//! One module because every column kind (subject, data, headers, msg id) is read by
//! the same row accessor with the same error wording; split, they would repeat it.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{
    Array, ArrayRef, BinaryArray, GenericBinaryArray, MapArray, OffsetSizeTrait, PrimitiveArray,
    RecordBatch, StringArray,
};
use arrow_schema::DataType;
use async_nats::header::{HeaderName, HeaderValue};
use async_nats::{HeaderMap, Subject};
use bytes::Bytes;

use super::ahead::CompressedAhead;
use super::copy_identity::{copy_identity, CopyRepeats};
use super::counter::{IncrementColumn, NATS_INCR};
use super::schedule::{ScheduleColumns, NATS_SCHEDULE, NATS_SCHEDULE_TARGET};
use super::ttl::TtlColumn;
use crate::api::headers as header_names;
use crate::arrow::schema::{
    is_read, DATA, EXPECTED_LAST_MSG_ID, EXPECTED_LAST_SUBJECT_SEQ, HEADERS, INCREMENT, MSG_ID,
    SCHEDULE, SCHEDULE_TARGET, SEQ, STREAM, SUBJECT, TTL,
};
use crate::compression::{self, Compression};
use crate::error::{Error, Result};

/// One message ready to send.
#[derive(Debug, Clone)]
pub struct OutgoingMessage {
    pub subject: Subject,
    pub headers: Option<HeaderMap>,
    pub payload: Bytes,
    /// The `Nats-Msg-Id`, if any: a retry after an ack timeout is safe only with one.
    pub has_msg_id: bool,
    /// The row carries its own expected-last check (columns
    /// `expected_last_subject_seq`, `expected_last_msg_id`).
    pub has_expectation: bool,
}

impl OutgoingMessage {
    /// An empty message to `subject` that only steers (a fast batch's end or ping).
    pub fn control(subject: Subject) -> Self {
        Self {
            subject,
            headers: None,
            payload: Bytes::new(),
            has_msg_id: false,
            has_expectation: false,
        }
    }

    /// Whether the message is a counter increment (`Nats-Incr`).
    pub fn is_increment(&self) -> bool {
        self.headers
            .as_ref()
            .is_some_and(|h| h.get(super::counter::NATS_INCR).is_some())
    }

    /// This message as a question whether the stream holds its msg id: with an
    /// expectation no stream meets (`Nats-Expected-Last-Msg-Id` of an id never
    /// published, `impossible_last_id`) the server answers a msg id it holds as a
    /// duplicate, naming its sequence, and refuses anything else without storing it.
    /// The message's own expectations are left out: the single-server path checks
    /// them before it looks for a duplicate, so a stored row would be refused for
    /// them instead.
    pub fn msg_id_probe(&self, impossible_last_id: &str) -> Self {
        const DROPPED: &[&str] = &[
            "Nats-Expected-Last-Sequence",
            "Nats-Expected-Last-Subject-Sequence",
            "Nats-Expected-Last-Subject-Sequence-Subject",
            "Nats-Expected-Last-Msg-Id",
        ];
        let mut headers = HeaderMap::new();
        for (name, values) in self.headers.iter().flat_map(|h| h.iter()) {
            let name: &str = name.as_ref();
            if DROPPED.iter().any(|d| d.eq_ignore_ascii_case(name)) {
                continue;
            }
            for value in values {
                headers.append(name, value.clone());
            }
        }
        headers.insert(
            async_nats::header::NATS_EXPECTED_LAST_MESSAGE_ID,
            impossible_last_id,
        );
        Self {
            headers: Some(headers),
            ..self.clone()
        }
    }
}

/// Settings that shape every message of a publish.
#[derive(Debug, Clone, Default)]
pub struct MessageDefaults {
    /// A subject for rows when the batch has no `subject` column.
    pub subject: Option<String>,
    /// Rows without a `msg_id` get `<prefix><row number>`, or, in a batch that is a
    /// read of a stream (a copy), `<prefix><stream>:<seq>:<digest>` (with no prefix
    /// too, `<stream>:<seq>:<digest>`, in place of a `Nats-Msg-Id` header): the message
    /// it was read from and a digest of its subject and payload (see
    /// [`copy_identity`]). A retried or re-run copy then gives every message the
    /// id it had the first time, wherever it falls in the input after deletions
    /// upstream; rows made of one source message (an explode) differ by content,
    /// or, alike, by their order among its rows (see [`CopyRepeats`]).
    pub msg_id_prefix: Option<String>,
    pub expected_stream: Option<String>,
    /// Whether the `headers` column's control headers (`Nats-TTL`, `Nats-Rollup`,
    /// `Nats-Expected-*`, the server's `Nats-Stream`/`Nats-Sequence`, ...; see
    /// [`crate::api::headers::CONTROL`]) are published. None: as given, except in a
    /// batch that is a read of a stream (it has `stream` and `seq` columns), a copy,
    /// whose control headers would steer the stream it goes to.
    pub keep_control_headers: Option<bool>,
    /// Each payload compressed, after the codec encoded it, and marked
    /// `Content-Encoding` ([`crate::compression`]).
    pub compression: Option<Compression>,
}

/// The server's default `max_control_line`: it refuses a `PUB`/`HPUB` line whose
/// arguments (subject, reply subject, sizes) are longer, and closes the connection,
/// losing the acks in flight. The server does not announce its limit, so the default
/// is assumed.
pub const MAX_CONTROL_LINE: usize = 4096;

/// The longest subject whose `HPUB` line fits [`MAX_CONTROL_LINE`] with a reply
/// subject of `reply_len` bytes and sizes up to `max_payload`.
pub fn max_subject_len(reply_len: usize, max_payload: usize) -> usize {
    let size_digits = max_payload.max(1).ilog10() as usize + 1;
    // "<subject> <reply> <header bytes> <total bytes>"
    MAX_CONTROL_LINE.saturating_sub(reply_len + 2 * size_digits + 3)
}

/// Checks a subject the way the server would, with a message a person can act on.
///
/// White space is any Unicode white space, not only the ASCII the server splits on:
/// the client delivering messages splits its control lines on all of it, so a
/// message stored under such a subject could not be read back.
pub fn validate_subject(subject: &str) -> std::result::Result<(), &'static str> {
    if subject.is_empty() {
        return Err("the subject is empty");
    }
    if subject.chars().any(char::is_whitespace) {
        return Err("the subject contains white space");
    }
    for token in subject.split('.') {
        match token {
            "" => return Err("the subject has an empty token (a leading, trailing or double '.')"),
            "*" | ">" => return Err(
                "the subject contains a wildcard ('*' or '>'); publish subjects must be literal",
            ),
            _ => {}
        }
    }
    Ok(())
}

enum SubjectColumn {
    Constant(Subject),
    Column(StringArray),
}

/// The `data` column, and its values buffer as `Bytes`: each payload is a slice of
/// the input's own memory, not a copy, kept alive until its message is acknowledged.
struct DataColumn {
    offsets: DataOffsets,
    values: Bytes,
}

enum DataOffsets {
    Binary(BinaryArray),
    LargeBinary(GenericBinaryArray<i64>),
}

/// An Arrow buffer as the owner of a `Bytes`.
struct ArrowOwned<T>(T);

impl<T: std::ops::Deref<Target = [u8]>> AsRef<[u8]> for ArrowOwned<T> {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl DataColumn {
    fn binary(array: BinaryArray) -> Self {
        let values = Bytes::from_owner(ArrowOwned(array.values().clone()));
        Self {
            offsets: DataOffsets::Binary(array),
            values,
        }
    }

    fn large_binary(array: GenericBinaryArray<i64>) -> Self {
        let values = Bytes::from_owner(ArrowOwned(array.values().clone()));
        Self {
            offsets: DataOffsets::LargeBinary(array),
            values,
        }
    }

    /// The payload of `row`; empty for a null.
    fn payload(&self, row: usize) -> Bytes {
        match &self.offsets {
            DataOffsets::Binary(a) => payload_slice(a, &self.values, row),
            DataOffsets::LargeBinary(a) => payload_slice(a, &self.values, row),
        }
    }
}

fn payload_slice<O: OffsetSizeTrait>(
    a: &GenericBinaryArray<O>,
    values: &Bytes,
    row: usize,
) -> Bytes {
    if a.is_null(row) {
        return Bytes::new();
    }
    let offsets = a.value_offsets();
    values.slice(offsets[row].as_usize()..offsets[row + 1].as_usize())
}

/// Headers as `map<utf8, list<utf8>>` or `map<utf8, utf8>`.
struct HeadersColumn {
    map: MapArray,
    keys: StringArray,
    values: HeaderValues,
}

enum HeaderValues {
    Single(StringArray),
    Lists {
        offsets: Vec<i64>,
        items: StringArray,
    },
}

impl HeadersColumn {
    fn new(array: &ArrayRef) -> Result<Self> {
        let DataType::Map(..) = array.data_type() else {
            return Err(Error::bad_input(format!(
                "column 'headers' must be map<utf8, list<utf8>> or map<utf8, utf8>, got {}",
                array.data_type()
            )));
        };
        let map = array.as_map().clone();
        let keys = to_utf8(map.keys(), "headers (keys)")?;
        let values = map.values();
        let values = match values.data_type() {
            DataType::List(_) | DataType::LargeList(_) => {
                let (offsets, items): (Vec<i64>, ArrayRef) = match values.data_type() {
                    DataType::List(_) => {
                        let l = values.as_list::<i32>();
                        (
                            l.offsets().iter().map(|&o| o as i64).collect(),
                            l.values().clone(),
                        )
                    }
                    _ => {
                        let l = values.as_list::<i64>();
                        (l.offsets().to_vec(), l.values().clone())
                    }
                };
                HeaderValues::Lists {
                    offsets,
                    items: to_utf8(&items, "headers (values)")?,
                }
            }
            _ => HeaderValues::Single(to_utf8(values, "headers (values)")?),
        };
        Ok(Self { map, keys, values })
    }

    /// Append the headers of `row` (of this batch), without the control headers
    /// unless `keep_control` ; errors name `global_row`.
    fn append_row(
        &self,
        row: usize,
        global_row: u64,
        keep_control: bool,
        headers: &mut HeaderMap,
    ) -> Result<()> {
        if self.map.is_null(row) {
            return Ok(());
        }
        let offsets = self.map.value_offsets();
        for entry in offsets[row] as usize..offsets[row + 1] as usize {
            let key = self.keys.value(entry);
            // async-nats's own rule (printable ASCII but ':'), and not empty; its
            // infallible conversions panic on anything else, so only checked values
            // reach it.
            let name: HeaderName = Some(key)
                .filter(|k| !k.is_empty())
                .and_then(|k| k.parse().ok())
                .ok_or_else(|| {
                    Error::bad_input(format!(
                        "column 'headers', row {global_row}: {key:?} is not a valid header \
                         name (one or more printable ASCII characters other than ':')"
                    ))
                })?;
            if !keep_control && header_names::is_control(key) {
                continue;
            }
            match &self.values {
                HeaderValues::Single(values) => {
                    if values.is_valid(entry) {
                        let value = header_value(values.value(entry), "headers", global_row)?;
                        headers.append(name.clone(), value);
                    }
                }
                HeaderValues::Lists { offsets, items } => {
                    for item in offsets[entry] as usize..offsets[entry + 1] as usize {
                        if items.is_valid(item) {
                            let value = header_value(items.value(item), "headers", global_row)?;
                            headers.append(name.clone(), value);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// `value` of column `column`, row `row`, as a header value: anything but a line
/// break. The error does not show the value (headers may carry credentials).
fn header_value(value: &str, column: &str, row: u64) -> Result<HeaderValue> {
    value.parse().map_err(|_| {
        Error::bad_input(format!(
            "column '{column}', row {row}: a header value may not contain a line break"
        ))
    })
}

fn to_utf8(array: &ArrayRef, column: &str) -> Result<StringArray> {
    utf8_of(array, column).map_err(|e| e.in_column(column))
}

fn utf8_of(array: &ArrayRef, column: &str) -> Result<StringArray> {
    match array.data_type() {
        DataType::Utf8 => Ok(array.as_string::<i32>().clone()),
        DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(..) => {
            let cast = arrow_cast::cast(array, &DataType::Utf8).map_err(|e| {
                Error::bad_input(format!("column '{column}': cannot read as utf8: {e}"))
            })?;
            Ok(cast.as_string::<i32>().clone())
        }
        other => Err(Error::bad_input(format!(
            "column '{column}' must be utf8 (string), got {other}"
        ))),
    }
}

/// An integer column of stream sequences (nulls: no check); a negative value is
/// refused where its row is read, which knows the row's number in the call.
fn to_sequences(array: &ArrayRef, column: &str) -> Result<PrimitiveArray<Int64Type>> {
    sequences_of(array, column).map_err(|e| e.in_column(column))
}

fn sequences_of(array: &ArrayRef, column: &str) -> Result<PrimitiveArray<Int64Type>> {
    if !array.data_type().is_integer() {
        return Err(Error::bad_input(format!(
            "column '{column}' must be an integer (a stream sequence), got {}",
            array.data_type()
        )));
    }
    // Strict: a uint64 beyond int64 is an error naming its value, not a null.
    let strict = arrow_cast::CastOptions {
        safe: false,
        ..Default::default()
    };
    let cast = arrow_cast::cast_with_options(array, &DataType::Int64, &strict).map_err(|e| {
        Error::bad_input(format!(
            "column '{column}': cannot read as stream sequences (at most 2^63-1): {e}"
        ))
    })?;
    Ok(cast.as_primitive::<Int64Type>().clone())
}

fn to_data(array: &ArrayRef) -> Result<DataColumn> {
    match array.data_type() {
        DataType::Binary => Ok(DataColumn::binary(array.as_binary::<i32>().clone())),
        DataType::LargeBinary => Ok(DataColumn::large_binary(array.as_binary::<i64>().clone())),
        // utf8 shares its buffers with binary: no copy.
        DataType::Utf8 => Ok(DataColumn::binary(BinaryArray::from(
            array.as_string::<i32>().clone(),
        ))),
        DataType::LargeUtf8 => Ok(DataColumn::large_binary(GenericBinaryArray::<i64>::from(
            array.as_string::<i64>().clone(),
        ))),
        DataType::BinaryView | DataType::Utf8View | DataType::FixedSizeBinary(_) => {
            let cast = arrow_cast::cast(array, &DataType::LargeBinary)?;
            Ok(DataColumn::large_binary(cast.as_binary::<i64>().clone()))
        }
        other => Err(Error::bad_input(format!(
            "column 'data' must be binary or utf8, got {other}"
        ))),
    }
}

/// The `stream` and `seq` columns of a batch that is a read: where each row was
/// read from.
struct SourceColumns {
    stream: StringArray,
    seq: PrimitiveArray<Int64Type>,
}

impl SourceColumns {
    fn identity(&self, row: usize) -> Option<(&str, i64)> {
        (self.stream.is_valid(row) && self.seq.is_valid(row))
            .then(|| (self.stream.value(row), self.seq.value(row)))
    }
}

/// A record batch checked against the message schema, ready to yield messages.
pub struct PublishBatch {
    subject: SubjectColumn,
    data: DataColumn,
    /// What steers each row's message beside its subject and payload, in the order
    /// each adds its part (the first a row fails is the error it reports).
    controls: Vec<Control>,
    rows: usize,
    max_subject: usize,
    /// Each row's payload compressed ahead ([`Self::precompress`]): None for a row
    /// sent plain (empty, or it would not shrink).
    packed: Option<CompressedAhead>,
}

/// A row's message as its controls build it ([`PublishBatch::message`]): subject and
/// payload first, then the headers each control adds.
impl OutgoingMessage {
    /// The headers, made when the first control adds one: a row with none sends
    /// none, and costs no map.
    fn headers_mut(&mut self) -> &mut HeaderMap {
        self.headers.get_or_insert_with(HeaderMap::new)
    }

    /// Adds the header a column of the table stands for (`ttl`, `increment`,
    /// `schedule`), refusing the row when its `headers` column already has it: which
    /// of the two the user meant is theirs to say, not ours to guess.
    fn insert_column_header(
        &mut self,
        name: &str,
        value: HeaderValue,
        column: &str,
        global_row: u64,
    ) -> Result<()> {
        let headers = self.headers_mut();
        if headers.get(name).is_some() {
            return Err(Error::bad_input(format!(
                "row {global_row}: column '{column}' and the row's headers both give {name}; \
                 give one"
            )));
        }
        headers.insert(name, value);
        Ok(())
    }

    /// The message, if it fits the server's `max_payload` with subject and headers.
    fn within(self, global_row: u64, max_payload: usize) -> Result<Self> {
        let headers = self.headers.as_ref().map_or(0, header_size);
        let size = self.payload.len() + self.subject.len() + headers;
        if size > max_payload {
            return Err(Error::bad_input(format!(
                "row {global_row}: the message is {size} bytes with subject and headers, over \
                 the server's max_payload of {max_payload} bytes"
            )));
        }
        Ok(self)
    }
}

/// Which row a control reads, and what of the call it needs.
struct RowCall<'a> {
    row: usize,
    /// The row's number in the whole input of the call (named in errors).
    global_row: u64,
    /// What a generated msg id ends with.
    id_number: u64,
    defaults: &'a MessageDefaults,
    repeats: &'a mut CopyRepeats,
    packed: Option<&'a CompressedAhead>,
}

/// One control of a row's message beside its subject and payload: a column of the
/// input (`headers`, `msg_id`, `expected_*`, `ttl`, `increment`, `schedule`), or an
/// option every row follows (`expected_stream`, `compression`). A batch holds only
/// the column controls its input has; each adds its part of a row's message in
/// [`Control::apply`].
enum Control {
    /// The `headers` column; in a copy, without its control headers unless asked.
    Headers { column: HeadersColumn, copy: bool },
    /// The `Nats-Msg-Id`.
    MsgId(MsgIds),
    /// The stream's last sequence on the row's subject, that the row must find to be
    /// stored.
    ExpectedLastSubjectSeq(PrimitiveArray<Int64Type>),
    /// The stream's last msg id, that the row must find to be stored.
    ExpectedLastMsgId(StringArray),
    /// Each row's own time to live.
    Ttl(TtlColumn),
    /// A table of counter increments: each row's (see [`super::counter`]).
    Increment(IncrementColumn),
    /// When each row fires, and to which subject (see [`super::schedule`]).
    Schedule(ScheduleColumns),
    /// Option `expected_stream`.
    ExpectedStream,
    /// Option `compression`: last, as it compresses the payload the others saw.
    Compression,
}

impl Control {
    fn apply(&self, at: &mut RowCall<'_>, message: &mut OutgoingMessage) -> Result<()> {
        let (row, global_row) = (at.row, at.global_row);
        match self {
            Self::Headers { column, copy } => {
                let mut map = HeaderMap::new();
                let keep_control = at.defaults.keep_control_headers.unwrap_or(!copy);
                // A read leaves `Content-Encoding` out of the headers of the payloads
                // it decompressed: a header still there marks a payload as stored,
                // which a copy stores as it is.
                column.append_row(row, global_row, keep_control, &mut map)?;
                if !map.is_empty() {
                    message.headers = Some(map);
                }
            }
            Self::MsgId(ids) => ids.apply(at, message)?,
            Self::ExpectedLastSubjectSeq(seqs) if seqs.is_valid(row) => {
                let Ok(seq) = u64::try_from(seqs.value(row)) else {
                    return Err(Error::bad_input(format!(
                        "column '{EXPECTED_LAST_SUBJECT_SEQ}', row {global_row}: a stream \
                         sequence cannot be negative, got {}",
                        seqs.value(row)
                    )));
                };
                message.has_expectation = true;
                message.headers_mut().insert(
                    async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
                    HeaderValue::from(seq),
                );
            }
            Self::ExpectedLastMsgId(ids) if ids.is_valid(row) => {
                message.has_expectation = true;
                let id = header_value(ids.value(row), EXPECTED_LAST_MSG_ID, global_row)?;
                message
                    .headers_mut()
                    .insert(async_nats::header::NATS_EXPECTED_LAST_MESSAGE_ID, id);
            }
            Self::Ttl(ttl) => {
                if let Some(ttl) = ttl.header(row, global_row)? {
                    let name = async_nats::header::NATS_MESSAGE_TTL;
                    message.insert_column_header(name.as_ref(), ttl, TTL, global_row)?;
                }
            }
            Self::Increment(increment) => {
                let incr = increment.header(row, global_row)?;
                message.insert_column_header(NATS_INCR, incr, INCREMENT, global_row)?;
            }
            Self::Schedule(schedule) => {
                if let Some((when, target)) = schedule.headers(row, global_row)? {
                    message.insert_column_header(NATS_SCHEDULE, when, SCHEDULE, global_row)?;
                    let (name, column) = (NATS_SCHEDULE_TARGET, SCHEDULE_TARGET);
                    message.insert_column_header(name, target, column, global_row)?;
                }
            }
            Self::ExpectedStream => {
                if let Some(stream) = &at.defaults.expected_stream {
                    // Checked for line breaks by `PublishOptions::validate`.
                    let stream = header_value(stream, "expected_stream", global_row)?;
                    message
                        .headers_mut()
                        .insert(async_nats::header::NATS_EXPECTED_STREAM, stream);
                }
            }
            Self::Compression => {
                if let Some(compression) = at.defaults.compression {
                    compress(compression, at, message)?;
                }
            }
            // A null expectation: no check for the row.
            Self::ExpectedLastSubjectSeq(_) | Self::ExpectedLastMsgId(_) => {}
        }
        Ok(())
    }
}

/// Where a row's `Nats-Msg-Id` comes from: the `msg_id` column (an empty or null
/// value: none of its own), else `<msg_id_prefix><row number>`, or in a copy the
/// identity of the message it was read from.
struct MsgIds {
    column: Option<StringArray>,
    /// The batch came from a read (it has the read's `stream` and `seq` columns):
    /// each row's source message is its identity.
    source: Option<SourceColumns>,
}

impl MsgIds {
    fn apply(&self, at: &mut RowCall<'_>, message: &mut OutgoingMessage) -> Result<()> {
        let (row, global_row) = (at.row, at.global_row);
        let msg_id = match self
            .column
            .as_ref()
            .filter(|ids| ids.is_valid(row) && !ids.value(row).is_empty())
        {
            Some(ids) => Some(header_value(ids.value(row), MSG_ID, global_row)?),
            // The prefix has no line break (`PublishOptions::validate`).
            None => match (&at.defaults.msg_id_prefix, &self.source) {
                (None, None) => None,
                (Some(p), None) => {
                    let id = format!("{p}{}", at.id_number);
                    Some(header_value(&id, MSG_ID, global_row)?)
                }
                // A copy is always under its source message's identity, with no
                // prefix given too: the `Nats-Msg-Id` its headers carry is no
                // identity of it, since the source's duplicate window already judged
                // it (two events published under one id further apart than that
                // window are two messages there, which that id would make one here).
                (p, Some(source)) => {
                    let p = p.as_deref().unwrap_or("");
                    let (stream, seq) = source.identity(row).ok_or_else(|| {
                        Error::bad_input(format!(
                            "row {global_row}: its 'stream' or 'seq' is null, and a table with \
                             the read's 'stream' and 'seq' columns is published as a copy, each \
                             message under its source's identity; fill them, or drop the \
                             columns to number rows by position"
                        ))
                    })?;
                    let (subject, payload) = (&message.subject, &message.payload);
                    let identity =
                        copy_identity(stream, seq, subject, payload, message.headers.as_ref());
                    let id = format!("{p}{}", at.repeats.id(stream, seq, identity));
                    Some(header_value(&id, MSG_ID, global_row)?)
                }
            },
        };
        // An id that came in the headers column (a message read from another
        // stream) is the row's msg id as much as one from the msg_id column: the
        // server deduplicates by it, so resending after an ack timeout is safe.
        message.has_msg_id = msg_id.is_some()
            || message
                .headers
                .as_ref()
                .is_some_and(|h| h.get(header_names::MSG_ID).is_some());
        if let Some(id) = msg_id {
            message
                .headers_mut()
                .insert(async_nats::header::NATS_MESSAGE_ID, id);
        }
        Ok(())
    }
}

/// The row's payload compressed and marked `Content-Encoding`. An empty payload
/// stays empty (a KV delete); one that does not shrink is sent plain: a reader goes
/// by each message's header.
fn compress(
    compression: Compression,
    at: &RowCall<'_>,
    message: &mut OutgoingMessage,
) -> Result<()> {
    // Any spelling: a payload marked encoded for any reader is not wrapped in
    // another encoding that a reader would undo first.
    if let Some((name, _)) = message.headers.as_ref().and_then(|h| {
        h.iter()
            .find(|(name, _)| AsRef::<str>::as_ref(*name).eq_ignore_ascii_case(compression::HEADER))
    }) {
        return Err(Error::bad_input(format!(
            "row {}: its headers say {} already, and option 'compression' would compress it \
             again; drop the header or the option",
            at.global_row,
            AsRef::<str>::as_ref(name)
        )));
    }
    let packed = match at.packed {
        Some(packed) => packed.row(at.row)?,
        None if message.payload.is_empty() => None,
        None => {
            let packed = compression.compress(&message.payload)?;
            (packed.len() < message.payload.len()).then(|| Bytes::from(packed))
        }
    };
    if let Some(packed) = packed {
        message.payload = packed;
        message
            .headers_mut()
            .insert(compression::HEADER, compression.as_str());
    }
    Ok(())
}

/// A subject over `max` bytes (see [`max_subject_len`]), as the reason of an error.
fn subject_too_long(subject: &str, max: usize) -> Option<String> {
    (subject.len() > max).then(|| {
        format!(
            "the subject is {} bytes, over the {max} that fit the server's control line of \
             {MAX_CONTROL_LINE} bytes with the reply subject",
            subject.len()
        )
    })
}

impl PublishBatch {
    /// Check the columns of `batch`; `subject` (the call's constant) wins over the defaults'.
    /// Subjects may be `max_subject` bytes long at most.
    pub fn new(batch: &RecordBatch, subject: Option<&str>, max_subject: usize) -> Result<Self> {
        let schema = batch.schema();
        let column = |name: &str| schema.index_of(name).ok().map(|i| batch.column(i).clone());
        let subject = match (column(SUBJECT), subject) {
            (_, Some(constant)) => {
                validate_subject(constant)
                    .map_err(str::to_string)
                    .and_then(|()| subject_too_long(constant, max_subject).map_or(Ok(()), Err))
                    .map_err(|why| {
                        let shown = shown_subject(constant);
                        Error::bad_option("subject", format!("option 'subject' {shown}: {why}"))
                    })?;
                SubjectColumn::Constant(Subject::from(constant))
            }
            (Some(array), None) => SubjectColumn::Column(to_utf8(&array, SUBJECT)?),
            (None, None) => {
                return Err(Error::bad_input(format!(
                    "the input has no 'subject' column and no 'subject' option was given \
                     (columns: {})",
                    column_names(batch)
                )))
            }
        };
        let increment = match (column(INCREMENT), column(DATA)) {
            (Some(a), None) => Some(IncrementColumn::new(&a).map_err(|e| e.in_column(INCREMENT))?),
            _ => None,
        };
        let schedule = match (column(SCHEDULE), column(SCHEDULE_TARGET)) {
            (Some(when), Some(target)) => Some(ScheduleColumns::new(&when, &target)?),
            _ => None,
        };
        let data = match column(DATA) {
            Some(array) => to_data(&array).map_err(|e| e.in_column(DATA))?,
            // A counter increment has no payload.
            None if increment.is_some() => {
                DataColumn::binary(BinaryArray::new_null(batch.num_rows()))
            }
            None => {
                return Err(Error::bad_input(format!(
                    "the input has no 'data' column (columns: {})",
                    column_names(batch)
                )))
            }
        };
        let headers = column(HEADERS)
            .map(|a| HeadersColumn::new(&a))
            .transpose()
            .map_err(|e| e.in_column(HEADERS))?;
        let msg_id = column(MSG_ID).map(|a| to_utf8(&a, MSG_ID)).transpose()?;
        let expected_last_subject_seq = column(EXPECTED_LAST_SUBJECT_SEQ)
            .map(|a| to_sequences(&a, EXPECTED_LAST_SUBJECT_SEQ))
            .transpose()?;
        let expected_last_msg_id = column(EXPECTED_LAST_MSG_ID)
            .map(|a| to_utf8(&a, EXPECTED_LAST_MSG_ID))
            .transpose()?;
        let ttl = match column(TTL) {
            Some(a) => TtlColumn::new(&a).map_err(|e| e.in_column(TTL))?,
            None => None,
        };
        let source = is_read(&schema)
            .then(|| -> Result<SourceColumns> {
                Ok(SourceColumns {
                    stream: to_utf8(&column(STREAM).expect("a read has a stream column"), STREAM)?,
                    seq: to_sequences(&column(SEQ).expect("a read has a seq column"), SEQ)?,
                })
            })
            .transpose()?;
        let column_controls = [
            headers.map(|column| Control::Headers {
                column,
                copy: source.is_some(),
            }),
            Some(Control::MsgId(MsgIds {
                column: msg_id,
                source,
            })),
            expected_last_subject_seq.map(Control::ExpectedLastSubjectSeq),
            expected_last_msg_id.map(Control::ExpectedLastMsgId),
            ttl.map(Control::Ttl),
            increment.map(Control::Increment),
            schedule.map(Control::Schedule),
        ];
        let options = [Control::ExpectedStream, Control::Compression];
        let controls = column_controls
            .into_iter()
            .flatten()
            .chain(options)
            .collect();
        Ok(Self {
            subject,
            data,
            controls,
            rows: batch.num_rows(),
            max_subject,
            packed: None,
        })
    }

    /// Compress every row's payload ahead of sending it ([`CompressedAhead`]): on a
    /// thread of its own, overlapping the sends, when the batch holds enough bytes to
    /// be worth it; a publish sends from one task, which would otherwise compress one
    /// payload at a time between sends.
    pub fn precompress(&mut self, compression: Compression) -> Result<()> {
        let payloads: Vec<Bytes> = (0..self.rows).map(|row| self.data.payload(row)).collect();
        self.packed = Some(CompressedAhead::start(compression, payloads)?);
        Ok(())
    }

    pub fn num_rows(&self) -> usize {
        self.rows
    }

    fn has_control(&self, which: impl Fn(&Control) -> bool) -> bool {
        self.controls.iter().any(which)
    }

    /// Whether the input has a column of per-row expectations.
    pub fn has_expectation_columns(&self) -> bool {
        self.has_control(|c| {
            matches!(
                c,
                Control::ExpectedLastSubjectSeq(_) | Control::ExpectedLastMsgId(_)
            )
        })
    }

    /// Whether the input is a table of counter increments.
    pub fn is_increments(&self) -> bool {
        self.has_control(|c| matches!(c, Control::Increment(_)))
    }

    /// Whether the input has the `expected_last_msg_id` column.
    pub fn has_expected_last_msg_id_column(&self) -> bool {
        self.has_control(|c| matches!(c, Control::ExpectedLastMsgId(_)))
    }

    /// The message of row `row`: its subject and payload, then what each control
    /// adds. `global_row` is the row's number in the whole input of the call (named
    /// in errors); `id_number` is what a generated msg id ends with.
    pub fn message(
        &self,
        row: usize,
        global_row: u64,
        id_number: u64,
        defaults: &MessageDefaults,
        max_payload: usize,
        repeats: &mut CopyRepeats,
    ) -> Result<OutgoingMessage> {
        let mut message = OutgoingMessage {
            subject: self.row_subject(row, global_row)?,
            payload: self.data.payload(row),
            headers: None,
            has_msg_id: false,
            has_expectation: false,
        };
        let mut at = RowCall {
            row,
            global_row,
            id_number,
            defaults,
            repeats,
            packed: self.packed.as_ref(),
        };
        for control in &self.controls {
            control.apply(&mut at, &mut message)?;
        }
        message.within(global_row, max_payload)
    }

    /// The subject of `row`, checked as the server would.
    fn row_subject(&self, row: usize, global_row: u64) -> Result<Subject> {
        let col = match &self.subject {
            SubjectColumn::Constant(s) => return Ok(s.clone()),
            SubjectColumn::Column(col) => col,
        };
        if col.is_null(row) {
            return Err(Error::bad_input(format!(
                "column 'subject', row {global_row}: the subject is null"
            )));
        }
        let s = col.value(row);
        validate_subject(s)
            .map_err(str::to_string)
            .and_then(|()| subject_too_long(s, self.max_subject).map_or(Ok(()), Err))
            .map_err(|why| {
                let shown = shown_subject(s);
                Error::bad_input(format!(
                    "column 'subject', row {global_row} ({shown}): {why}"
                ))
            })?;
        Ok(Subject::from(s))
    }
}

/// The encoded size of a header block (`NATS/1.0\r\n` + `k: v\r\n`... + `\r\n`).
fn header_size(headers: &HeaderMap) -> usize {
    let mut size = 12;
    for (name, values) in headers.iter() {
        for v in values {
            size += AsRef::<[u8]>::as_ref(name).len() + 2 + v.as_str().len() + 2;
        }
    }
    size
}

/// A subject as an error message shows it: quoted, and cut short when long.
fn shown_subject(subject: &str) -> String {
    const SHOWN: usize = 80;
    match subject.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{:?}...", &subject[..end]),
        None => format!("{subject:?}"),
    }
}

fn column_names(batch: &RecordBatch) -> String {
    batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn subjects_are_validated_like_the_server() {
        assert!(validate_subject("orders.new").is_ok());
        assert!(validate_subject("a*b.c>").is_ok());
        for bad in [
            "",
            "a b",
            "a..b",
            ".a",
            "a.",
            "a.*",
            "a.>",
            "tab\there",
            "a\u{b}b",
            "a\u{a0}b",
            "a\u{2028}b",
        ] {
            assert!(validate_subject(bad).is_err(), "{bad:?} should be refused");
        }
    }

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    #[test]
    fn rows_become_messages_with_ids_and_errors_name_the_row() {
        let b = batch(vec![
            (
                "subject",
                Arc::new(StringArray::from(vec![Some("a.b"), None])) as ArrayRef,
            ),
            (
                "data",
                Arc::new(StringArray::from(vec!["x", "y"])) as ArrayRef,
            ),
        ]);
        let input = PublishBatch::new(&b, None, 4000).unwrap();
        let defaults = MessageDefaults {
            msg_id_prefix: Some("w-".into()),
            ..Default::default()
        };
        let m = input
            .message(0, 10, 10, &defaults, 1 << 20, &mut CopyRepeats::default())
            .unwrap();
        assert_eq!(m.subject.as_str(), "a.b");
        assert_eq!(&m.payload[..], b"x");
        assert_eq!(
            m.headers.unwrap().get("Nats-Msg-Id").unwrap().as_str(),
            "w-10"
        );
        let err = input
            .message(1, 11, 11, &defaults, 1 << 20, &mut CopyRepeats::default())
            .unwrap_err();
        assert!(err.message().contains("column 'subject', row 11"), "{err}");
    }

    #[test]
    fn a_copy_takes_its_ids_from_the_messages_it_was_read_from() {
        let headers = MapArray::new_from_strings(
            ["Nats-Msg-Id", "Nats-TTL", "app"].into_iter(),
            &StringArray::from(vec!["original", "1h", "x"]),
            &[0, 3, 3, 3],
        )
        .unwrap();
        let b = batch(vec![
            (
                "stream",
                Arc::new(StringArray::from(vec!["SRC", "SRC", "SRC"])) as ArrayRef,
            ),
            (
                "subject",
                Arc::new(StringArray::from(vec!["a", "a", "a"])) as ArrayRef,
            ),
            (
                "seq",
                Arc::new(arrow_array::Int64Array::from(vec![Some(7), Some(7), None])) as ArrayRef,
            ),
            (
                "data",
                Arc::new(StringArray::from(vec!["x", "y", "z"])) as ArrayRef,
            ),
            ("headers", Arc::new(headers) as ArrayRef),
        ]);
        let input = PublishBatch::new(&b, None, 4000).unwrap();
        let defaults = MessageDefaults {
            msg_id_prefix: Some("w-".into()),
            ..Default::default()
        };
        let mut repeats = CopyRepeats::default();
        let mut message = |row: usize| input.message(row, 5, 5, &defaults, 1 << 20, &mut repeats);
        let first = message(0).unwrap();
        let h = first.headers.unwrap();
        let id = h.get("Nats-Msg-Id").unwrap().to_string();
        let mut app = HeaderMap::new();
        app.insert("app", "x");
        assert_eq!(
            id,
            format!("w-{}", copy_identity("SRC", 7, "a", b"x", Some(&app)))
        );
        assert!(
            id.starts_with("w-SRC:7:") && id.len() == "w-SRC:7:".len() + 16,
            "{id}"
        );
        assert!(
            h.get("Nats-TTL").is_none(),
            "a copy's control headers are left out"
        );
        assert_eq!(h.get("app").unwrap().as_str(), "x");
        // With no prefix, the source's identity all the same, not the `Nats-Msg-Id`
        // header the source stored it with.
        let bare = input
            .message(
                0,
                5,
                5,
                &MessageDefaults::default(),
                1 << 20,
                &mut CopyRepeats::default(),
            )
            .unwrap();
        assert_eq!(
            bare.headers.unwrap().get("Nats-Msg-Id").unwrap().as_str(),
            copy_identity("SRC", 7, "a", b"x", Some(&app))
        );
        // Two rows of one source message (an explode) differ by what they carry.
        let second = message(1).unwrap().headers.unwrap();
        assert_ne!(second.get("Nats-Msg-Id").unwrap().to_string(), id);
        // A row of a copy without its source is refused, not numbered into another's id.
        let err = message(2).unwrap_err();
        assert!(
            err.message()
                .contains("row 5: its 'stream' or 'seq' is null"),
            "{err}"
        );
        // Columns of those names and other types are values, not a read's.
        let b = batch(vec![
            (
                "stream",
                Arc::new(StringArray::from(vec!["SRC"])) as ArrayRef,
            ),
            (
                "subject",
                Arc::new(StringArray::from(vec!["a"])) as ArrayRef,
            ),
            ("seq", Arc::new(StringArray::from(vec!["7"])) as ArrayRef),
            ("data", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
        ]);
        let input = PublishBatch::new(&b, None, 4000).unwrap();
        let m = input
            .message(0, 3, 3, &defaults, 1 << 20, &mut CopyRepeats::default())
            .unwrap();
        assert_eq!(
            m.headers.unwrap().get("Nats-Msg-Id").unwrap().as_str(),
            "w-3"
        );
    }

    #[test]
    fn compressed_ahead_on_threads_or_one_at_a_time_rows_are_the_same_messages() {
        // 300 rows of 8 KiB of JSON: past the threshold, so compressed ahead on
        // threads, in chunks of 1 MiB dealt round.
        let big = format!("[{}]", r#"{"k":"value","n":12345},"#.repeat(330));
        let mut data: Vec<&[u8]> = vec![big.as_bytes(); 300];
        data[1] = b"".as_slice();
        data[2] = b"{}".as_slice();
        let b = batch(vec![(
            "data",
            Arc::new(arrow_array::BinaryArray::from(data.clone())) as ArrayRef,
        )]);
        let defaults = MessageDefaults {
            compression: Some(Compression::Zstd),
            ..Default::default()
        };
        let one_at_a_time = PublishBatch::new(&b, Some("s"), 4000).unwrap();
        let mut ahead = PublishBatch::new(&b, Some("s"), 4000).unwrap();
        ahead.precompress(Compression::Zstd).unwrap();
        for (row, plain) in data.iter().enumerate() {
            let mut repeats = CopyRepeats::default();
            let a = one_at_a_time
                .message(row, row as u64, 0, &defaults, 1 << 20, &mut repeats)
                .unwrap();
            let b = ahead
                .message(row, row as u64, 0, &defaults, 1 << 20, &mut repeats)
                .unwrap();
            assert_eq!(a.payload, b.payload, "row {row}");
            let marked = Compression::of(b.headers.as_ref());
            if plain.len() < 100 {
                // Empty, or too small to shrink: sent plain, unmarked.
                assert_eq!((marked, &b.payload[..]), (None, *plain), "row {row}");
            } else {
                assert_eq!(marked, Some(Compression::Zstd));
                let back = Compression::Zstd.decompress(&b.payload, 1 << 20).unwrap();
                assert_eq!(back, *plain);
            }
        }
    }

    #[test]
    fn payloads_are_slices_of_the_input_not_copies() {
        let data = BinaryArray::from(vec![&b"first"[..], b"second", b""]);
        let strings = StringArray::from(vec!["x", "yz", "w"]);
        let base = data.values().as_ptr() as usize;
        let text_base = strings.values().as_ptr() as usize;
        for (column, base, offsets) in [
            (Arc::new(data.clone()) as ArrayRef, base, [0usize, 5]),
            (Arc::new(strings.clone()) as ArrayRef, text_base, [0, 1]),
        ] {
            let b = batch(vec![
                (
                    "subject",
                    Arc::new(StringArray::from(vec!["a"; 3])) as ArrayRef,
                ),
                ("data", column),
            ]);
            let input = PublishBatch::new(&b, None, 4000).unwrap();
            let defaults = MessageDefaults::default();
            for (row, offset) in offsets.into_iter().enumerate() {
                let m = input
                    .message(row, 0, 0, &defaults, 1 << 20, &mut CopyRepeats::default())
                    .unwrap();
                assert_eq!(
                    m.payload.as_ptr() as usize,
                    base + offset,
                    "row {row} was copied"
                );
            }
        }
    }

    #[test]
    fn missing_and_mistyped_columns_are_named() {
        let b = batch(vec![(
            "data",
            Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
        )]);
        let err = PublishBatch::new(&b, None, 4000).err().unwrap();
        assert!(err.message().contains("no 'subject' column"), "{err}");
        let b = batch(vec![
            (
                "subject",
                Arc::new(StringArray::from(vec!["a"])) as ArrayRef,
            ),
            (
                "data",
                Arc::new(arrow_array::Int64Array::from(vec![1])) as ArrayRef,
            ),
        ]);
        let err = PublishBatch::new(&b, None, 4000).err().unwrap();
        assert!(
            err.message()
                .contains("column 'data' must be binary or utf8"),
            "{err}"
        );
    }

    #[test]
    fn oversized_rows_are_refused_before_sending() {
        let b = batch(vec![(
            "data",
            Arc::new(BinaryArray::from(vec![&[0u8; 100][..]])) as ArrayRef,
        )]);
        let input = PublishBatch::new(&b, Some("s"), 4000).unwrap();
        let err = input
            .message(
                0,
                0,
                0,
                &MessageDefaults::default(),
                50,
                &mut CopyRepeats::default(),
            )
            .unwrap_err();
        assert!(err.message().contains("max_payload"), "{err}");
    }

    #[test]
    fn subjects_longer_than_the_control_line_allows_are_refused() {
        let max = max_subject_len("_INBOX.abcdefghijklmnopqrstuv.".len() + 20, 1 << 20);
        assert_eq!(max, MAX_CONTROL_LINE - 30 - 20 - 2 * 7 - 3);
        let ok = "a".repeat(max);
        let long = "a".repeat(max + 1);
        let b = batch(vec![
            (
                "subject",
                Arc::new(StringArray::from(vec![ok.as_str(), long.as_str()])) as ArrayRef,
            ),
            (
                "data",
                Arc::new(StringArray::from(vec!["x", "y"])) as ArrayRef,
            ),
        ]);
        let input = PublishBatch::new(&b, None, max).unwrap();
        let defaults = MessageDefaults::default();
        assert!(input
            .message(0, 0, 0, &defaults, 1 << 20, &mut CopyRepeats::default())
            .is_ok());
        let err = input
            .message(1, 1, 1, &defaults, 1 << 20, &mut CopyRepeats::default())
            .unwrap_err();
        assert!(err.message().contains("column 'subject', row 1"), "{err}");
        assert!(err.message().contains("control line"), "{err}");
        let err = PublishBatch::new(&b, Some(&long), max).err().unwrap();
        assert!(err.message().contains("option 'subject'"), "{err}");
    }

    #[test]
    fn header_names_and_ids_the_client_cannot_send_are_bad_input_not_panics() {
        let headers = MapArray::new_from_strings(
            ["ok", "é", "nul\0", "K", ""].into_iter(),
            &StringArray::from(vec!["1", "2", "3", "line\nbreak", "5"]),
            &[0, 1, 2, 3, 4, 5],
        )
        .unwrap();
        let b = batch(vec![
            (
                "subject",
                Arc::new(StringArray::from(vec!["a"; 5])) as ArrayRef,
            ),
            (
                "data",
                Arc::new(StringArray::from(vec!["x"; 5])) as ArrayRef,
            ),
            ("headers", Arc::new(headers) as ArrayRef),
            (
                "msg_id",
                Arc::new(StringArray::from(vec!["id\r\n", "b", "c", "d", "e"])) as ArrayRef,
            ),
        ]);
        let input = PublishBatch::new(&b, None, 4000).unwrap();
        let defaults = MessageDefaults::default();
        for (row, named) in [
            (0, "column 'msg_id', row 10"),
            (1, "column 'headers', row 11"),
        ] {
            let err = input
                .message(
                    row,
                    row as u64 + 10,
                    0,
                    &defaults,
                    1 << 20,
                    &mut CopyRepeats::default(),
                )
                .unwrap_err();
            assert!(err.message().contains(named), "{err}");
            assert!(!err.message().contains(&format!("row {row}:")), "{err}");
        }
        for row in 2..5 {
            let err = input
                .message(row, 0, 0, &defaults, 1 << 20, &mut CopyRepeats::default())
                .unwrap_err();
            assert!(err.message().contains("column 'headers'"), "{err}");
        }
    }
}
