//! A table's value columns encoded into the `data` column of publish input.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, BinaryArray, RecordBatch, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};

use super::{CodecSpec, ValueFormat, PUBLISH_COLUMNS, READ_COLUMNS, VALUE};
use crate::arrow::schema::{is_read, is_schedule_column, is_ttl_column, DATA};
use crate::error::{Error, Result};

/// One format's encoding of a struct's rows, one payload each.
pub(super) trait RowsEncoder: Send {
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
        Ok(Self {
            format: spec.format(),
            rows: spec.encoder()?,
        })
    }

    /// The batch with its value columns replaced by their payloads in `data`. The
    /// value is a struct column `value` if there is one, or else every column that
    /// is not a publish column ([`PUBLISH_COLUMNS`]) nor, in a table that is a read
    /// (a copy), one of the read's own columns ([`READ_COLUMNS`]).
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let schema = batch.schema();
        if schema.index_of(DATA).is_ok() {
            return Err(Error::bad_input(format!(
                "the input has a 'data' column and a value format ({}) is given: give the \
                 value's columns, or no format",
                self.format.as_str()
            )));
        }
        let copy = is_read(&schema);
        let is_value = |field: &Field| match schema.index_of(VALUE) {
            Ok(_) => field.name() == VALUE,
            Err(_) => {
                let name = field.name().as_str();
                let steers = PUBLISH_COLUMNS.contains(&name)
                    || is_ttl_column(name, field.data_type())
                    || is_schedule_column(name, &schema);
                let describes_source = copy && READ_COLUMNS.contains(&name);
                !(steers || describes_source)
            }
        };
        let mut kept_fields = Vec::new();
        let mut kept_columns = Vec::new();
        let mut value_fields = Vec::new();
        let mut value_columns = Vec::new();
        for (f, c) in schema.fields().iter().zip(batch.columns()) {
            if is_value(f) {
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
