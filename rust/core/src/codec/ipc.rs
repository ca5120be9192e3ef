//! Arrow payloads: each message an Arrow IPC stream (schema, then record batches),
//! as columnar producers write them; one payload may hold many rows.

use std::io::Cursor;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, BinaryArray, RecordBatch, StructArray};
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};

use super::{
    binary_from_parts, nothing_to_infer_from, schema_required, Format, RowsDecoder, RowsEncoder,
    ValueFormat,
};
use crate::error::{Error, Result};

/// Arrow's settings: the value's Arrow schema, which a read may take from the
/// stream's first payload instead (each payload carries its own).
#[derive(Debug, Clone, Default)]
pub struct ArrowIpc {
    pub schema: Option<SchemaRef>,
}

impl Format for ArrowIpc {
    fn decoder(&self, _batch_rows: usize) -> Result<Box<dyn RowsDecoder>> {
        let schema = schema_required(&self.schema, ValueFormat::Arrow, "decoding")?;
        Ok(Box::new(IpcRows { schema }))
    }

    fn encoder(&self) -> Result<Box<dyn RowsEncoder>> {
        Ok(Box::new(IpcEncoder))
    }

    fn needs_inference(&self) -> bool {
        self.schema.is_none()
    }

    /// The first payload's own schema, every field nullable: that its producer had
    /// no nulls in a field says nothing of the next producer, whose nulls would
    /// otherwise be refused.
    fn infer(&mut self, sample: &[&[u8]]) -> Result<()> {
        let schema = sample
            .iter()
            .find_map(|p| StreamReader::try_new(Cursor::new(p), None).ok())
            .map(|reader| reader.schema())
            .ok_or_else(|| nothing_to_infer_from(ValueFormat::Arrow, sample.len()))?;
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        self.schema = Some(Arc::new(Schema::new_with_metadata(
            fields,
            schema.metadata().clone(),
        )));
        Ok(())
    }

    fn no_value(&self, payload: &[u8]) -> Option<String> {
        StreamReader::try_new(Cursor::new(payload), None)
            .err()
            .map(not_a_stream)
    }
}

/// The decoder's words for a payload that is no Arrow IPC stream.
fn not_a_stream(e: arrow_schema::ArrowError) -> String {
    format!("not an Arrow IPC stream: {e}")
}

struct IpcRows {
    schema: SchemaRef,
}

impl IpcRows {
    fn read_one(&self, payload: &[u8], into: &mut Vec<RecordBatch>) -> Result<u32, String> {
        let reader = StreamReader::try_new(Cursor::new(payload), None).map_err(not_a_stream)?;
        // The value's fields are found by name, in any order, and each must hold the
        // same values: types equal up to view types (string_view for utf8),
        // dictionary encoding and nullability, at any depth. Such a column is cast to
        // the value's type, which loses nothing; a null under a field the value
        // declares non-nullable is refused, naming it. A field the value lacks, or
        // lacking one of its fields, is refused: it would be dropped, or filled.
        let theirs = reader.schema();
        let mismatch = || {
            format!(
                "the payload's schema ({theirs}) is not the value's ({}): its fields are \
                 matched by name, and their types up to view types, dictionary encoding \
                 and nullability",
                self.schema
            )
        };
        if theirs.fields().len() != self.schema.fields().len() {
            return Err(mismatch());
        }
        let mut columns = Vec::with_capacity(self.schema.fields().len());
        for field in self.schema.fields() {
            let (index, found) = theirs.column_with_name(field.name()).ok_or_else(mismatch)?;
            if found.data_type() != field.data_type()
                && !(same_values(found.data_type()) == same_values(field.data_type())
                    && arrow_cast::can_cast_types(found.data_type(), field.data_type()))
            {
                return Err(mismatch());
            }
            columns.push(index);
        }
        let mut rows = 0u32;
        for batch in reader {
            let batch = batch.map_err(|e| format!("a broken Arrow IPC stream: {e}"))?;
            rows += batch.num_rows() as u32;
            let arrays = self
                .schema
                .fields()
                .iter()
                .zip(&columns)
                .map(|(field, &index)| {
                    let column = batch.column(index);
                    if column.data_type() == field.data_type() {
                        return Ok(column.clone());
                    }
                    arrow_cast::cast(column, field.data_type()).map_err(|e| {
                        format!(
                            "field '{}' does not cast to the value's type: {e}",
                            field.name()
                        )
                    })
                })
                .collect::<std::result::Result<Vec<_>, String>>()?;
            let batch = RecordBatch::try_new(self.schema.clone(), arrays).map_err(|e| {
                format!("it does not fit the value's schema ({}): {e}", self.schema)
            })?;
            into.push(batch);
        }
        Ok(rows)
    }
}

impl RowsDecoder for IpcRows {
    fn value_fields(&self) -> Fields {
        self.schema.fields().clone()
    }

    /// A payload of no rows (a producer's empty batch, or a stream of a schema alone)
    /// gives one row whose value is null: a message is never left without a row, so a
    /// read, a consumer and the lake sink all show that it was there.
    fn try_decode(
        &mut self,
        payloads: &[&[u8]],
    ) -> Result<(StructArray, Option<Vec<u32>>), String> {
        let mut parts: Vec<StructArray> = Vec::with_capacity(payloads.len());
        let mut counts = Vec::with_capacity(payloads.len());
        let mut batches = Vec::new();
        for payload in payloads {
            let rows = self.read_one(payload, &mut batches)?;
            parts.extend(batches.drain(..).map(StructArray::from));
            if rows == 0 {
                parts.push(StructArray::new_null(self.schema.fields().clone(), 1));
            }
            counts.push(rows.max(1));
        }
        let all = if parts.is_empty() {
            StructArray::new_null(self.schema.fields().clone(), 0)
        } else {
            let arrays: Vec<&dyn Array> = parts.iter().map(|p| p as &dyn Array).collect();
            arrow_select::concat::concat(&arrays)
                .map_err(|e| e.to_string())?
                .as_struct()
                .clone()
        };
        let one_each = counts.iter().all(|n| *n == 1);
        Ok((all, (!one_each).then_some(counts)))
    }
}

struct IpcEncoder;

impl RowsEncoder for IpcEncoder {
    fn encode(&mut self, values: &StructArray) -> Result<BinaryArray> {
        let batch = RecordBatch::from(values.clone());
        let schema = batch.schema();
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(values.len() + 1);
        offsets.push(0);
        let failed = |e: arrow_schema::ArrowError| {
            Error::bad_input(format!("encoding values as Arrow IPC: {e}"))
        };
        for row in 0..values.len() {
            let mut writer = StreamWriter::try_new(&mut bytes, &schema).map_err(failed)?;
            writer.write(&batch.slice(row, 1)).map_err(failed)?;
            writer.finish().map_err(failed)?;
            drop(writer);
            offsets.push(bytes.len());
        }
        binary_from_parts(bytes, offsets)
    }
}

/// ``t`` with each view type, at any depth, made its plain counterpart (utf8, binary,
/// list, large list), each dictionary its value type and every field nullable and
/// without metadata: what a payload's type is compared by, so that one whose producer
/// wrote views (pyarrow, Polars), dictionaries or other nullability decodes into a
/// value of the same values.
fn same_values(t: &DataType) -> DataType {
    let field = |f: &Arc<Field>| Arc::new(Field::new(f.name(), same_values(f.data_type()), true));
    match t {
        DataType::Dictionary(_, values) => same_values(values),
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        DataType::ListView(f) | DataType::List(f) => DataType::List(field(f)),
        DataType::LargeListView(f) | DataType::LargeList(f) => DataType::LargeList(field(f)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
        DataType::Struct(fs) => DataType::Struct(fs.iter().map(field).collect()),
        DataType::Map(f, sorted) => DataType::Map(field(f), *sorted),
        other => other.clone(),
    }
}
