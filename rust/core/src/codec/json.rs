//! JSON payloads: `arrow-json`'s decoder fed each payload in turn, and its encoders
//! writing each row.

use std::sync::Arc;

use arrow_array::{Array, BinaryArray, StructArray};
use arrow_json::reader::Decoder;
use arrow_json::writer::{make_encoder, EncoderOptions};
use arrow_json::ReaderBuilder;
use arrow_schema::{Field, Fields, SchemaRef};

use super::{binary_from_parts, concat_rows, RowsDecoder, RowsEncoder};
use crate::error::{Error, Result};

pub(super) struct JsonRows {
    schema: SchemaRef,
    batch_rows: usize,
    decoder: Decoder,
}

impl JsonRows {
    pub fn new(schema: SchemaRef, batch_rows: usize) -> Result<Self> {
        let decoder = Self::build(&schema, batch_rows)?;
        Ok(Self {
            schema,
            batch_rows,
            decoder,
        })
    }

    fn build(schema: &SchemaRef, batch_rows: usize) -> Result<Decoder> {
        ReaderBuilder::new(schema.clone())
            .with_batch_size(batch_rows)
            .build_decoder()
            .map_err(|e| Error::bad_input(format!("option 'schema': {e}")))
    }

    fn decode_rows(&mut self, payloads: &[&[u8]]) -> Result<StructArray, String> {
        let mut parts: Vec<StructArray> = Vec::new();
        for chunk in payloads.chunks(self.batch_rows) {
            for payload in chunk {
                let before = self.decoder.len();
                let read = self.decoder.decode(payload).map_err(|e| e.to_string())?;
                let rows = self.decoder.len() - before;
                if read != payload.len() || rows != 1 || self.decoder.has_partial_record() {
                    return Err(match rows {
                        0 if payload.iter().all(u8::is_ascii_whitespace) => {
                            "the payload is empty".to_string()
                        }
                        _ if self.decoder.has_partial_record() => {
                            "the payload ends inside a JSON value".to_string()
                        }
                        n => format!("the payload holds {n} JSON values, not one"),
                    });
                }
            }
            if let Some(batch) = self.decoder.flush().map_err(|e| e.to_string())? {
                parts.push(batch.into());
            }
        }
        concat_rows(self.schema.fields(), parts)
    }
}

impl RowsDecoder for JsonRows {
    fn value_fields(&self) -> Fields {
        self.schema.fields().clone()
    }

    fn try_decode(
        &mut self,
        payloads: &[&[u8]],
    ) -> Result<(StructArray, Option<Vec<u32>>), String> {
        Ok((self.decode_rows(payloads)?, None))
    }

    fn reset(&mut self) -> Result<(), String> {
        self.decoder = Self::build(&self.schema, self.batch_rows).map_err(|e| e.to_string())?;
        Ok(())
    }
}

pub(super) struct JsonEncoder;

impl RowsEncoder for JsonEncoder {
    fn encode(&mut self, values: &StructArray) -> Result<BinaryArray> {
        let field = Arc::new(Field::new_struct("", values.fields().clone(), false));
        // Every field in every object, null ones as `null`: an object says what the
        // row held, and a field null in every row is still there to be read back.
        let options = EncoderOptions::default().with_explicit_nulls(true);
        let mut encoder = make_encoder(&field, values, &options)
            .map_err(|e| Error::bad_input(format!("encoding values as JSON: {e}")))?;
        let mut bytes = Vec::with_capacity(values.len() * 64);
        let mut offsets = Vec::with_capacity(values.len() + 1);
        offsets.push(0);
        for row in 0..values.len() {
            encoder.encode(row, &mut bytes);
            offsets.push(bytes.len());
        }
        binary_from_parts(bytes, offsets)
    }
}
