//! Typed payloads: each message's payload decoded into Arrow columns as a batch is
//! finished, and a table's columns encoded into one payload per row before a publish.
//!
//! The formats ([`ValueFormat`]) are each a well-kept crate's: `arrow-json`,
//! `arrow-avro` (raw datums, single-object encoding, the Confluent wire format) and
//! `arrow-ipc` (an IPC stream per message, which may hold many rows). This module
//! holds what is common to them: the spec a call gives ([`CodecSpec`]), where the
//! decoded values go in a batch ([`ValueDecoder`]), and what happens to a payload
//! that does not fit ([`OnMalformed`], Spark's JSON reader's modes and meanings).
//!
//! A batch is decoded in one pass; only a batch holding a bad payload is decoded
//! again payload by payload, to name or set aside the bad ones.

mod avro;
mod infer;
mod ipc;
mod json;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use arrow_array::builder::BinaryBuilder;
use arrow_array::cast::AsArray;
use arrow_array::{
    new_null_array, Array, ArrayRef, BinaryArray, BooleanArray, RecordBatch, StructArray,
    UInt32Array,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};

use crate::arrow::schema::{
    CONSUMER_SEQ, DATA, DELIVERED, HEADERS, MSG_ID, SEQ, STREAM, SUBJECT, TIMESTAMP,
};
use crate::error::{Error, ErrorKind, Result};

pub use infer::infer_value_schema;

/// The column holding decoded payloads (as a struct) when not flattened.
pub const VALUE: &str = "value";
/// The column holding the raw bytes of payloads that did not decode (`permissive`).
pub const CORRUPT_RECORD: &str = "_corrupt_record";

/// Columns of the message schema (and of publish input) that are never a value's.
pub const MESSAGE_COLUMNS: &[&str] = &[
    STREAM,
    SUBJECT,
    SEQ,
    TIMESTAMP,
    HEADERS,
    DATA,
    MSG_ID,
    DELIVERED,
    CONSUMER_SEQ,
    CORRUPT_RECORD,
];

/// How payloads are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueFormat {
    Json,
    Avro,
    /// An Arrow IPC stream per message: any number of rows in one payload.
    Arrow,
}

impl ValueFormat {
    pub const NAMES: &'static [&'static str] = &["json", "avro", "arrow"];

    pub fn parse(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "json" => Ok(Self::Json),
            "avro" => Ok(Self::Avro),
            "arrow" => Ok(Self::Arrow),
            _ => Err(Error::bad_input(format!(
                "option 'format' ({name:?}) must be one of {}",
                Self::NAMES.join(", ")
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Avro => "avro",
            Self::Arrow => "arrow",
        }
    }
}

/// What a payload that does not decode does (Spark's JSON reader's `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMalformed {
    /// Stop with an error naming the stream, the sequence and the field.
    FailFast,
    /// A null value and the payload's bytes in `_corrupt_record`.
    Permissive,
    /// Leave the message out, and count it.
    DropMalformed,
}

impl OnMalformed {
    pub const NAMES: &'static [&'static str] = &["failfast", "permissive", "dropmalformed"];

    pub fn parse(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "failfast" => Ok(Self::FailFast),
            "permissive" => Ok(Self::Permissive),
            "dropmalformed" => Ok(Self::DropMalformed),
            _ => Err(Error::bad_input(format!(
                "option 'on_malformed' ({name:?}) must be one of {}",
                Self::NAMES.join(", ")
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::FailFast => "failfast",
            Self::Permissive => "permissive",
            Self::DropMalformed => "dropmalformed",
        }
    }
}

/// How each Avro payload is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AvroFraming {
    /// The datum alone: every payload written with the one schema given.
    #[default]
    Raw,
    /// Avro's single-object encoding: `C3 01` and the schema's Rabin fingerprint.
    SingleObject,
    /// The Confluent wire format: a zero byte and a 4-byte schema id.
    Confluent,
}

impl AvroFraming {
    pub const NAMES: &'static [&'static str] = &["raw", "single-object", "confluent"];

    pub fn parse(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "raw" => Ok(Self::Raw),
            "single-object" | "single_object" | "soe" => Ok(Self::SingleObject),
            "confluent" => Ok(Self::Confluent),
            _ => Err(Error::bad_input(format!(
                "option 'avro_framing' ({name:?}) must be one of {}",
                Self::NAMES.join(", ")
            ))),
        }
    }
}

/// A codec as a call gives it.
#[derive(Debug, Clone)]
pub struct CodecSpec {
    pub format: ValueFormat,
    /// The value's Arrow schema. Required to encode; for decoding JSON and Arrow it
    /// may be inferred from the stream first ([`infer_value_schema`]); Avro derives
    /// it from the Avro schema.
    pub schema: Option<SchemaRef>,
    pub on_malformed: OnMalformed,
    /// The value's fields as top-level columns instead of one struct column `value`.
    pub flatten: bool,
    /// The Avro schema (JSON) values are read as and written with.
    pub avro_schema: Option<String>,
    pub avro_framing: AvroFraming,
    /// Confluent framing: the writers' schemas by id.
    pub avro_schemas_by_id: Vec<(u32, String)>,
    /// Confluent framing: the id a publish frames its payloads with.
    pub avro_schema_id: Option<u32>,
    /// Messages sampled to infer a schema when none is given.
    pub sample_rows: usize,
}

impl CodecSpec {
    pub fn new(format: ValueFormat) -> Self {
        Self {
            format,
            schema: None,
            on_malformed: OnMalformed::parse(crate::defaults::ON_MALFORMED).expect("a known mode"),
            flatten: false,
            avro_schema: None,
            avro_framing: AvroFraming::default(),
            avro_schemas_by_id: Vec::new(),
            avro_schema_id: None,
            sample_rows: crate::defaults::VALUE_SAMPLE_ROWS,
        }
    }

    /// Whether decoding needs a schema inferred from the stream first.
    pub fn needs_inference(&self) -> bool {
        self.schema.is_none() && self.format != ValueFormat::Avro
    }

    fn schema_required(&self, what: &str) -> Result<SchemaRef> {
        self.schema.clone().ok_or_else(|| {
            Error::bad_input(format!(
                "option 'schema': {what} {} values needs their schema",
                self.format.as_str()
            ))
        })
    }
}

/// One format's decoding of payloads into rows of a struct.
trait RowsDecoder: Send {
    /// The struct every payload decodes to.
    fn value_fields(&self) -> Fields;
    /// Decodes every payload, or fails on the first that does not fit (saying why).
    /// Returns the rows, and how many rows each payload gave when that is not one.
    fn decode(&mut self, payloads: &[&[u8]]) -> Result<(StructArray, Option<Vec<u32>>), String>;
}

fn rows_decoder(spec: &CodecSpec, batch_rows: usize) -> Result<Box<dyn RowsDecoder>> {
    Ok(match spec.format {
        ValueFormat::Json => Box::new(json::JsonRows::new(
            spec.schema_required("decoding")?,
            batch_rows,
        )?),
        ValueFormat::Arrow => Box::new(ipc::IpcRows::new(spec.schema_required("decoding")?)),
        ValueFormat::Avro => Box::new(avro::AvroRows::new(spec, batch_rows)?),
    })
}

/// Turns the `data` column of finished message batches into value columns.
pub struct ValueDecoder {
    spec: CodecSpec,
    rows: Box<dyn RowsDecoder>,
    value_fields: Fields,
    malformed: u64,
    /// For each row of the last batch, the message it came from, when that is not
    /// the row's own index (messages dropped, or payloads of several rows).
    last_origins: Option<Vec<u32>>,
}

impl std::fmt::Debug for ValueDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueDecoder")
            .field("spec", &self.spec)
            .field("malformed", &self.malformed)
            .finish()
    }
}

impl ValueDecoder {
    /// A decoder for batches of about `batch_rows` messages.
    pub fn new(spec: &CodecSpec, batch_rows: usize) -> Result<Self> {
        let rows = rows_decoder(spec, batch_rows.clamp(1, 1 << 16))?;
        let value_fields = rows.value_fields();
        if spec.flatten {
            for f in value_fields.iter() {
                if MESSAGE_COLUMNS.contains(&f.name().as_str()) {
                    return Err(Error::bad_input(format!(
                        "option 'flatten': the value's field '{}' has the name of a message \
                         column; read it as the struct column 'value' instead",
                        f.name()
                    )));
                }
            }
        }
        Ok(Self {
            spec: spec.clone(),
            rows,
            value_fields,
            malformed: 0,
            last_origins: None,
        })
    }

    /// The value's fields, as decoded.
    pub fn value_fields(&self) -> &Fields {
        &self.value_fields
    }

    /// Messages left out as malformed so far (`dropmalformed`) or kept as
    /// `_corrupt_record` (`permissive`).
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// For each row of the last decoded batch, the index of its message, or None
    /// when row `i` is message `i`.
    pub fn last_origins(&self) -> Option<&[u32]> {
        self.last_origins.as_deref()
    }

    fn value_field(&self) -> Field {
        Field::new(VALUE, DataType::Struct(self.value_fields.clone()), true)
    }

    /// The schema of decoded batches, from the message schema.
    pub fn schema(&self, message: &Schema) -> SchemaRef {
        let mut fields: Vec<FieldRef> = Vec::new();
        for f in message.fields() {
            if f.name() != DATA {
                fields.push(f.clone());
                continue;
            }
            if self.spec.flatten {
                let nullable = self.spec.on_malformed == OnMalformed::Permissive;
                fields.extend(self.value_fields.iter().map(|v| {
                    if nullable {
                        Arc::new(v.as_ref().clone().with_nullable(true))
                    } else {
                        v.clone()
                    }
                }));
            } else {
                fields.push(Arc::new(self.value_field()));
            }
            if self.spec.on_malformed == OnMalformed::Permissive {
                fields.push(Arc::new(Field::new(CORRUPT_RECORD, DataType::Binary, true)));
            }
        }
        Arc::new(Schema::new(fields))
    }

    /// The batch with its `data` column decoded. `stream` names the stream in errors.
    pub fn decode(&mut self, stream: &str, batch: RecordBatch) -> Result<RecordBatch> {
        self.last_origins = None;
        let schema = self.schema(&batch.schema());
        if batch.num_rows() == 0 {
            return Ok(RecordBatch::new_empty(schema));
        }
        let data = batch
            .column_by_name(DATA)
            .expect("message batches have a data column")
            .as_binary::<i32>()
            .clone();
        let payloads: Vec<&[u8]> = data.iter().map(|p| p.unwrap_or_default()).collect();
        let (values, counts, kept, corrupt) = match self.rows.decode(&payloads) {
            Ok((values, counts)) => (values, counts, None, None),
            Err(_) => self.decode_one_by_one(stream, &batch, &payloads)?,
        };
        let mut messages = batch;
        let mut origins: Option<Vec<u32>> = None;
        if let Some(kept) = &kept {
            let mask = BooleanArray::from(kept.clone());
            messages = arrow_select::filter::filter_record_batch(&messages, &mask)
                .map_err(|e| Error::bad_input(e.to_string()))?;
            origins = Some(
                (0..kept.len() as u32)
                    .filter(|i| kept[*i as usize])
                    .collect(),
            );
        }
        if let Some(counts) = counts {
            // Each message's columns repeat for every row its payload holds.
            let base: Vec<u32> = origins
                .take()
                .unwrap_or_else(|| (0..messages.num_rows() as u32).collect());
            let mut take = Vec::with_capacity(values.len());
            let mut from = Vec::with_capacity(values.len());
            for (i, n) in counts.iter().enumerate() {
                for _ in 0..*n {
                    take.push(i as u32);
                    from.push(base[i]);
                }
            }
            messages = arrow_select::take::take_record_batch(&messages, &UInt32Array::from(take))
                .map_err(|e| Error::bad_input(e.to_string()))?;
            origins = Some(from);
        }
        self.last_origins = origins;
        self.assemble(schema, &messages, values, corrupt)
    }

    /// The slow path of a batch holding a bad payload: each payload alone.
    #[allow(clippy::type_complexity)]
    fn decode_one_by_one(
        &mut self,
        stream: &str,
        batch: &RecordBatch,
        payloads: &[&[u8]],
    ) -> Result<(
        StructArray,
        Option<Vec<u32>>,
        Option<Vec<bool>>,
        Option<BinaryArray>,
    )> {
        let mut good: Vec<&[u8]> = Vec::with_capacity(payloads.len());
        let mut bad: Vec<bool> = Vec::with_capacity(payloads.len());
        for (row, payload) in payloads.iter().enumerate() {
            match self.rows.decode(&[payload]) {
                Ok(_) => {
                    good.push(payload);
                    bad.push(false);
                }
                Err(why) => {
                    if self.spec.on_malformed == OnMalformed::FailFast {
                        let seq = batch
                            .column_by_name(SEQ)
                            .expect("message batches have a seq column")
                            .as_primitive::<arrow_array::types::Int64Type>()
                            .value(row);
                        return Err(Error::new(
                            ErrorKind::MalformedPayload,
                            format!(
                                "stream '{stream}' seq {seq}: the payload is not {} of the \
                                 value's schema: {why} (mode 'failfast'; 'permissive' or \
                                 'dropmalformed' keep reading)",
                                self.spec.format.as_str()
                            ),
                        ));
                    }
                    self.malformed += 1;
                    bad.push(true);
                }
            }
        }
        let (good_values, counts) = if good.is_empty() {
            let none = new_null_array(&DataType::Struct(self.value_fields.clone()), 0);
            (none.as_struct().clone(), None)
        } else {
            self.rows
                .decode(&good)
                .map_err(|why| Error::bad_input(format!("decoding payloads again: {why}")))?
        };
        match self.spec.on_malformed {
            OnMalformed::DropMalformed => {
                let kept = bad.iter().map(|b| !b).collect();
                Ok((good_values, counts, Some(kept), None))
            }
            _ => {
                // Null rows where payloads were bad; their bytes kept beside.
                let nulls = new_null_array(&DataType::Struct(self.value_fields.clone()), 1);
                let mut next = 0usize;
                let mut indices = Vec::with_capacity(payloads.len());
                let mut counts_all = counts.as_ref().map(|_| Vec::new());
                let mut corrupt = BinaryBuilder::new();
                let mut row_in_good = 0usize;
                for (i, is_bad) in bad.iter().enumerate() {
                    if *is_bad {
                        indices.push((1, 0));
                        corrupt.append_value(payloads[i]);
                        if let Some(c) = &mut counts_all {
                            c.push(1);
                        }
                    } else {
                        let n = counts.as_ref().map_or(1, |c| c[row_in_good] as usize);
                        for _ in 0..n {
                            indices.push((0, next));
                            next += 1;
                            corrupt.append_null();
                        }
                        if let Some(c) = &mut counts_all {
                            c.push(n as u32);
                        }
                        row_in_good += 1;
                    }
                }
                let values = arrow_select::interleave::interleave(
                    &[&good_values as &dyn Array, nulls.as_ref()],
                    &indices,
                )
                .map_err(|e| Error::bad_input(e.to_string()))?;
                // The corrupt column is per row of output; with multi-row payloads
                // it is rebuilt per message below instead.
                let corrupt = corrupt.finish();
                Ok((values.as_struct().clone(), counts_all, None, Some(corrupt)))
            }
        }
    }

    fn assemble(
        &self,
        schema: SchemaRef,
        messages: &RecordBatch,
        values: StructArray,
        corrupt: Option<BinaryArray>,
    ) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        let n = messages.num_rows();
        for (f, column) in messages.schema().fields().iter().zip(messages.columns()) {
            if f.name() != DATA {
                columns.push(column.clone());
                continue;
            }
            if self.spec.flatten {
                columns.extend(values.columns().iter().cloned());
            } else {
                columns.push(Arc::new(values.clone()));
            }
            if self.spec.on_malformed == OnMalformed::Permissive {
                columns.push(match &corrupt {
                    Some(c) => Arc::new(c.clone()),
                    None => new_null_array(&DataType::Binary, n),
                });
            }
        }
        RecordBatch::try_new(schema, columns).map_err(|e| {
            Error::bad_input(format!(
                "the decoded values do not fit the value schema: {e}"
            ))
        })
    }
}

/// One format's encoding of a struct's rows, one payload each.
trait RowsEncoder: Send {
    fn encode(&mut self, values: &StructArray) -> Result<BinaryArray>;
}

/// Encodes a table's value columns into the `data` column of publish input.
pub struct ValueEncoder {
    format: ValueFormat,
    rows: Box<dyn RowsEncoder>,
}

impl std::fmt::Debug for ValueEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueEncoder")
            .field("format", &self.format)
            .finish()
    }
}

impl ValueEncoder {
    pub fn new(spec: &CodecSpec) -> Result<Self> {
        let rows: Box<dyn RowsEncoder> = match spec.format {
            ValueFormat::Json => Box::new(json::JsonEncoder),
            ValueFormat::Arrow => Box::new(ipc::IpcEncoder),
            ValueFormat::Avro => Box::new(avro::AvroEncoder::new(spec)?),
        };
        Ok(Self {
            format: spec.format,
            rows,
        })
    }

    /// The batch with its value columns (a struct column `value`, or else every
    /// column that is not a message column) replaced by their payloads in `data`.
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let schema = batch.schema();
        if schema.index_of(DATA).is_ok() {
            return Err(Error::bad_input(format!(
                "the input has a 'data' column and a value format ({}) is given: give the \
                 value's columns, or no format",
                self.format.as_str()
            )));
        }
        let is_value = |name: &str| match schema.index_of(VALUE) {
            Ok(_) => name == VALUE,
            Err(_) => !MESSAGE_COLUMNS.contains(&name),
        };
        let mut kept_fields = Vec::new();
        let mut kept_columns = Vec::new();
        let mut value_fields = Vec::new();
        let mut value_columns = Vec::new();
        for (f, c) in schema.fields().iter().zip(batch.columns()) {
            if is_value(f.name()) {
                value_fields.push(f.clone());
                value_columns.push(c.clone());
            } else {
                kept_fields.push(f.clone());
                kept_columns.push(c.clone());
            }
        }
        if value_fields.is_empty() {
            return Err(Error::bad_input(format!(
                "the input has no value columns to encode as {} (columns: {})",
                self.format.as_str(),
                schema
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let values = match (value_fields.len(), value_columns[0].data_type()) {
            (1, DataType::Struct(_)) if value_fields[0].name() == VALUE => {
                value_columns[0].as_struct().clone()
            }
            _ => StructArray::try_new(Fields::from(value_fields), value_columns, None)
                .map_err(|e| Error::bad_input(e.to_string()))?,
        };
        if let Some(row) = (0..values.len()).find(|i| values.is_null(*i)) {
            return Err(Error::bad_input(format!(
                "row {row}: column 'value' is null; a message needs a value to encode"
            )));
        }
        let data = self.rows.encode(&values)?;
        kept_fields.push(Arc::new(Field::new(DATA, DataType::Binary, false)));
        kept_columns.push(Arc::new(data));
        RecordBatch::try_new(Arc::new(Schema::new(kept_fields)), kept_columns)
            .map_err(|e| Error::bad_input(e.to_string()))
    }

    /// The schema of encoded batches, from the input's.
    pub fn schema(&mut self, input: &Schema) -> Result<SchemaRef> {
        Ok(self
            .encode(&RecordBatch::new_empty(Arc::new(input.clone())))?
            .schema())
    }
}

/// Offsets past `i32::MAX` do not fit a binary column: one batch's payloads stay
/// under 2 GiB.
fn binary_from_parts(bytes: Vec<u8>, offsets: Vec<usize>) -> Result<BinaryArray> {
    let offsets: Vec<i32> = offsets
        .into_iter()
        .map(i32::try_from)
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| {
            Error::bad_input("a batch's encoded payloads pass 2 GiB: send smaller batches")
        })?;
    Ok(BinaryArray::new(
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        Buffer::from_vec(bytes),
        None,
    ))
}
