//! Arrow payloads: each message an Arrow IPC stream (schema, then record batches),
//! as columnar producers write them; one payload may hold many rows.

use std::io::Cursor;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, BinaryArray, RecordBatch, StructArray};
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Fields, SchemaRef};

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

    /// The first payload's own schema.
    fn infer(&mut self, sample: &[&[u8]]) -> Result<()> {
        let schema = sample
            .iter()
            .find_map(|p| StreamReader::try_new(Cursor::new(p), None).ok())
            .map(|reader| reader.schema())
            .ok_or_else(|| nothing_to_infer_from(ValueFormat::Arrow, sample.len()))?;
        self.schema = Some(schema);
        Ok(())
    }
}

struct IpcRows {
    schema: SchemaRef,
}

impl IpcRows {
    fn read_one(&self, payload: &[u8], into: &mut Vec<RecordBatch>) -> Result<u32, String> {
        let reader = StreamReader::try_new(Cursor::new(payload), None)
            .map_err(|e| format!("not an Arrow IPC stream: {e}"))?;
        // Names and types must match, up to view types (a producer that writes
        // string_view where the value has utf8: the same values, cast); a field the
        // value allows nulls in may come from a payload that has none.
        let theirs = reader.schema();
        let mut cast = false;
        let fits = theirs.fields().len() == self.schema.fields().len()
            && theirs
                .fields()
                .iter()
                .zip(self.schema.fields())
                .all(|(a, b)| {
                    if a.name() != b.name() {
                        return false;
                    }
                    if a.data_type() == b.data_type() {
                        return true;
                    }
                    let alike = without_views(a.data_type()) == without_views(b.data_type())
                        && arrow_cast::can_cast_types(a.data_type(), b.data_type());
                    cast |= alike;
                    alike
                });
        if !fits {
            return Err(format!(
                "the payload's schema ({}) is not the value's ({})",
                reader.schema(),
                self.schema
            ));
        }
        let mut rows = 0u32;
        for batch in reader {
            let batch = batch.map_err(|e| format!("a broken Arrow IPC stream: {e}"))?;
            rows += batch.num_rows() as u32;
            let batch = if cast {
                let columns = batch
                    .columns()
                    .iter()
                    .zip(self.schema.fields())
                    .map(|(c, f)| arrow_cast::cast(c, f.data_type()))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| format!("its view types do not cast to the value's: {e}"))?;
                RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| e.to_string())?
            } else {
                batch
                    .with_schema(self.schema.clone())
                    .map_err(|e| e.to_string())?
            };
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
/// list, large list): what a payload's type is compared by, so that one whose
/// producer wrote views (pyarrow, Polars) decodes into a value of plain types.
fn without_views(t: &DataType) -> DataType {
    let field = |f: &Arc<Field>| {
        Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(without_views(f.data_type())),
        )
    };
    match t {
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
