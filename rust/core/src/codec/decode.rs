//! Where decoded values go in a message batch, and what each mode does with a
//! payload that does not decode.
//!
//! One module: a batch's one-pass decode, its payload-by-payload decode when a payload
//! does not fit (naming it, setting it aside, or telling a new field from a bad value)
//! and the assembly of the decoded batch share the decoder's state (the spec, the
//! count of malformed payloads, each row's message).

use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::{
    new_null_array, Array, ArrayRef, BinaryArray, BooleanArray, RecordBatch, StringArray,
    StructArray, UInt32Array,
};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};

use super::{
    CodecSpec, OnMalformed, ValueFormat, CORRUPT_REASON, CORRUPT_RECORD, MESSAGE_COLUMNS, VALUE,
};
use crate::arrow::builder::PayloadDecoder;
use crate::arrow::schema::{DATA, SEQ};
use crate::error::{Error, ErrorKind, NewFieldAt, Result};

/// One format's decoding of payloads into rows of a struct.
pub(super) trait RowsDecoder: Send {
    /// The struct every payload decodes to.
    fn value_fields(&self) -> Fields;
    /// Decodes every payload, or fails on the first that does not fit (saying why).
    /// Returns the rows, and how many rows each payload gave when that is not one.
    fn try_decode(&mut self, payloads: &[&[u8]])
        -> Result<(StructArray, Option<Vec<u32>>), String>;
    /// Starts afresh after a failed decode: a streaming decoder that failed part way
    /// may hold half a row, or wait for the rest of a body.
    fn reset(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// For a payload that failed to decode: the path of a field it holds that the
    /// value's schema lacks, when the decoder refuses such fields (`on_new_field`
    /// `fail`); None when it fails for another reason.
    fn new_field(&self, _payload: &[u8]) -> Option<String> {
        None
    }
    /// [`Self::try_decode`], ready for the next call whether it failed or not.
    fn decode(&mut self, payloads: &[&[u8]]) -> Result<(StructArray, Option<Vec<u32>>), String> {
        self.try_decode(payloads).or_else(|why| {
            self.reset()?;
            Err(why)
        })
    }
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
    /// The decoded schema of the last message schema seen: batches of a read share
    /// one, so it is derived once.
    schemas: Option<(SchemaRef, SchemaRef)>,
    /// Rows of the batch being built already known malformed (a payload that does
    /// not decompress), by index, with why: decoded as a payload that does not fit.
    marked: Vec<(usize, String)>,
}

/// Why the payload at `seq` of `stream` did not decode as `format`, `why` the
/// decoder's words: the `_corrupt_reason` of its row (`permissive`), and the error
/// of mode `failfast` before its advice on the modes.
pub fn malformed_reason(stream: &str, seq: i64, format: ValueFormat, why: &str) -> String {
    format!(
        "stream '{stream}' seq {seq}: the payload is not {} of the value's schema: {why}",
        format.as_str()
    )
}

/// The `(_corrupt_record, _corrupt_reason)` columns of a decoded batch.
type Corrupt = (BinaryArray, StringArray);

/// The builder decodes each batch it finishes with this decoder.
impl PayloadDecoder for ValueDecoder {
    fn schema(&self, message: &Schema) -> SchemaRef {
        ValueDecoder::schema(self, message)
    }

    fn tolerates_malformed(&self) -> bool {
        self.on_malformed() != OnMalformed::FailFast
    }

    fn mark_malformed(&mut self, row: usize, why: String) {
        ValueDecoder::mark_malformed(self, row, why)
    }

    fn clear_marked(&mut self) {
        ValueDecoder::clear_marked(self)
    }

    fn malformed(&self) -> u64 {
        ValueDecoder::malformed(self)
    }

    fn last_origins(&self) -> Option<&[u32]> {
        ValueDecoder::last_origins(self)
    }

    fn decode(&mut self, stream: &str, batch: RecordBatch) -> Result<RecordBatch> {
        ValueDecoder::decode(self, stream, batch)
    }
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
        let rows = spec.decoder(batch_rows.clamp(1, 1 << 16))?;
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
            schemas: None,
            marked: Vec::new(),
        })
    }

    /// What a payload that does not decode does.
    pub fn on_malformed(&self) -> OnMalformed {
        self.spec.on_malformed
    }

    /// Row `row` of the batch being built is malformed whatever its bytes, as a
    /// payload that does not decode is; `reason` (it does not decompress) is its
    /// `_corrupt_reason`.
    pub fn mark_malformed(&mut self, row: usize, reason: String) {
        self.marked.push((row, reason));
    }

    /// Forgets the rows marked malformed: the batch they were of is dropped.
    pub fn clear_marked(&mut self) {
        self.marked.clear();
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

    /// Refuses flattening a value field beside a column of `message` with the same
    /// name: the read's optional columns (`ttl`) are not in [`MESSAGE_COLUMNS`], and a
    /// batch with two columns of one name hides one of them from most readers.
    pub fn beside(self, message: &Schema) -> Result<Self> {
        if self.spec.flatten {
            if let Some(f) = self
                .value_fields
                .iter()
                .find(|f| f.name() != DATA && message.field_with_name(f.name()).is_ok())
            {
                return Err(Error::bad_input(format!(
                    "option 'flatten': the value's field '{}' has the name of a column of \
                     the read; read it as the struct column 'value' instead",
                    f.name()
                )));
            }
        }
        Ok(self)
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
                // A null value (a payload kept as `_corrupt_record`, an Arrow
                // payload of no rows) is a row of nulls when flattened.
                let nullable = self.spec.on_malformed == OnMalformed::Permissive
                    || self.spec.format() == super::ValueFormat::Arrow;
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
                fields.push(Arc::new(Field::new(CORRUPT_REASON, DataType::Utf8, true)));
            }
        }
        Arc::new(Schema::new(fields))
    }

    /// The batch with its `data` column decoded. `stream` names the stream in errors.
    pub fn decode(&mut self, stream: &str, batch: RecordBatch) -> Result<RecordBatch> {
        self.last_origins = None;
        let message = batch.schema();
        let schema = match &self.schemas {
            Some((seen, decoded)) if Arc::ptr_eq(seen, &message) || seen == &message => {
                decoded.clone()
            }
            _ => {
                let decoded = self.schema(&message);
                self.schemas = Some((message, decoded.clone()));
                decoded
            }
        };
        let marked = std::mem::take(&mut self.marked);
        if batch.num_rows() == 0 {
            return Ok(RecordBatch::new_empty(schema));
        }
        let data = batch
            .column_by_name(DATA)
            .expect("message batches have a data column")
            .clone();
        // Payloads are viewed where they arrived (the builder's choice for decoded
        // reads), or copied into `binary` by an earlier step.
        let payloads: Vec<&[u8]> = match data.data_type() {
            DataType::BinaryView => data
                .as_binary_view()
                .iter()
                .map(|p| p.unwrap_or_default())
                .collect(),
            _ => data
                .as_binary::<i32>()
                .iter()
                .map(|p| p.unwrap_or_default())
                .collect(),
        };
        let (values, counts, kept, corrupt) = if !marked.is_empty() {
            self.decode_one_by_one(stream, &batch, &payloads, &marked)?
        } else {
            match self.rows.decode(&payloads) {
                Ok((values, counts)) => (values, counts, None, None),
                Err(_) => self.decode_one_by_one(stream, &batch, &payloads, &[])?,
            }
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
        marked: &[(usize, String)],
    ) -> Result<(
        StructArray,
        Option<Vec<u32>>,
        Option<Vec<bool>>,
        Option<Corrupt>,
    )> {
        let mut good: Vec<&[u8]> = Vec::with_capacity(payloads.len());
        // Per message: None when it decoded, else why not.
        let mut bad: Vec<Option<String>> = Vec::with_capacity(payloads.len());
        let seqs = batch
            .column_by_name(SEQ)
            .expect("message batches have a seq column")
            .as_primitive::<arrow_array::types::Int64Type>()
            .clone();
        for (row, payload) in payloads.iter().enumerate() {
            if let Some((_, reason)) = marked.iter().find(|(r, _)| *r == row) {
                self.malformed += 1;
                bad.push(Some(reason.clone()));
                continue;
            }
            match self.rows.decode(&[payload]) {
                Ok(_) => {
                    good.push(payload);
                    bad.push(None);
                }
                Err(why) => {
                    let seq = seqs.value(row);
                    if let Some(field) = self.rows.new_field(payload) {
                        // Not malformed: the schema is behind the stream. The whole
                        // batch fails, as with `failfast`, so a consumer acknowledges
                        // none of it.
                        return Err(Error::new_field(
                            NewFieldAt {
                                seq: seq as u64,
                                field: field.clone(),
                            },
                            format!(
                                "stream '{stream}' seq {seq}: the payload holds field \
                                 '{field}', which the value's schema lacks (option \
                                 'on_new_field' is 'fail'; read from this message with a \
                                 schema that has it)"
                            ),
                        ));
                    }
                    let reason = malformed_reason(stream, seq, self.spec.format(), &why);
                    if self.spec.on_malformed == OnMalformed::FailFast {
                        return Err(Error::new(
                            ErrorKind::MalformedPayload,
                            format!(
                                "{reason} (mode 'failfast'; 'permissive' or 'dropmalformed' \
                                 keep reading)"
                            ),
                        ));
                    }
                    self.malformed += 1;
                    bad.push(Some(reason));
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
                let kept = bad.iter().map(Option::is_none).collect();
                Ok((good_values, counts, Some(kept), None))
            }
            _ => {
                // Null rows where payloads were bad; their bytes kept beside.
                let nulls = new_null_array(&DataType::Struct(self.value_fields.clone()), 1);
                let mut next = 0usize;
                let mut indices = Vec::with_capacity(payloads.len());
                let mut counts_all = counts.as_ref().map(|_| Vec::new());
                let mut corrupt = BinaryBuilder::new();
                let mut reasons = StringBuilder::new();
                let mut row_in_good = 0usize;
                for (i, reason) in bad.iter().enumerate() {
                    if let Some(reason) = reason {
                        indices.push((1, 0));
                        corrupt.append_value(payloads[i]);
                        reasons.append_value(reason);
                        if let Some(c) = &mut counts_all {
                            c.push(1);
                        }
                    } else {
                        let n = counts.as_ref().map_or(1, |c| c[row_in_good] as usize);
                        for _ in 0..n {
                            indices.push((0, next));
                            next += 1;
                            corrupt.append_null();
                            reasons.append_null();
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
                let corrupt = (corrupt.finish(), reasons.finish());
                Ok((values.as_struct().clone(), counts_all, None, Some(corrupt)))
            }
        }
    }

    fn assemble(
        &self,
        schema: SchemaRef,
        messages: &RecordBatch,
        values: StructArray,
        corrupt: Option<Corrupt>,
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
                // A batch whose payloads all decoded has both columns null, made
                // without a look at its rows.
                match &corrupt {
                    Some((record, reason)) => {
                        columns.push(Arc::new(record.clone()));
                        columns.push(Arc::new(reason.clone()));
                    }
                    None => {
                        columns.push(new_null_array(&DataType::Binary, n));
                        columns.push(new_null_array(&DataType::Utf8, n));
                    }
                }
            }
        }
        RecordBatch::try_new(schema, columns).map_err(|e| {
            Error::bad_input(format!(
                "the decoded values do not fit the value schema: {e}"
            ))
        })
    }
}
