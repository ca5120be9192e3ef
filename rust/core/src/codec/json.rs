//! JSON payloads: `arrow-json`'s decoder fed each payload in turn, and its encoders
//! writing each row.

use std::sync::{Arc, LazyLock};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float16Type, Float32Type, Float64Type};
use arrow_array::{Array, BinaryArray, StructArray};
use arrow_json::reader::Decoder;
use arrow_json::writer::{make_encoder, Encoder, EncoderFactory, EncoderOptions, NullableEncoder};
use arrow_json::ReaderBuilder;
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Fields, SchemaRef};

use super::json_tokens::{TokenCheck, NON_FINITE};
use super::{binary_from_parts, concat_rows, RowsDecoder, RowsEncoder};
use crate::error::{Error, Result};

pub(super) struct JsonRows {
    schema: SchemaRef,
    batch_rows: usize,
    decoder: Decoder,
    /// The tokens the schema's typed fields take, when any needs checking.
    check: Option<TokenCheck>,
}

impl JsonRows {
    pub fn new(schema: SchemaRef, batch_rows: usize) -> Result<Self> {
        let decoder = Self::build(&schema, batch_rows)?;
        let check = TokenCheck::for_type(&DataType::Struct(schema.fields().clone()));
        Ok(Self {
            schema,
            batch_rows,
            decoder,
            check,
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
                if let Some(check) = &self.check {
                    check.check(payload)?;
                }
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
        let options = EncoderOptions::default()
            .with_explicit_nulls(true)
            .with_encoder_factory(Arc::new(NonFiniteAsStrings));
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

/// Floats that are not finite written as the strings Spark and Jackson write
/// (`"NaN"`, `"Infinity"`, `"-Infinity"`), which the decoder takes back: arrow-json
/// writes them as `null`, which would read back as a null.
#[derive(Debug)]
struct NonFiniteAsStrings;

/// arrow-json's own encoders, for the finite values.
static PLAIN: LazyLock<EncoderOptions> = LazyLock::new(EncoderOptions::default);

impl EncoderFactory for NonFiniteAsStrings {
    fn make_default_encoder<'a>(
        &self,
        field: &'a FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> std::result::Result<Option<NullableEncoder<'a>>, ArrowError> {
        let as_f64: Box<dyn Fn(usize) -> f64 + 'a> = match array.data_type() {
            DataType::Float16 => {
                let a = array.as_primitive::<Float16Type>();
                Box::new(move |i| a.value(i).to_f64())
            }
            DataType::Float32 => {
                let a = array.as_primitive::<Float32Type>();
                Box::new(move |i| f64::from(a.value(i)))
            }
            DataType::Float64 => {
                let a = array.as_primitive::<Float64Type>();
                Box::new(move |i| a.value(i))
            }
            _ => return Ok(None),
        };
        let finite = make_encoder(field, array, &PLAIN)?;
        Ok(Some(NullableEncoder::new(
            Box::new(FloatEncoder { as_f64, finite }),
            array.nulls().cloned(),
        )))
    }
}

struct FloatEncoder<'a> {
    as_f64: Box<dyn Fn(usize) -> f64 + 'a>,
    finite: NullableEncoder<'a>,
}

impl Encoder for FloatEncoder<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        let v = (self.as_f64)(idx);
        let name = if v.is_nan() {
            NON_FINITE[0]
        } else if v == f64::INFINITY {
            NON_FINITE[1]
        } else if v == f64::NEG_INFINITY {
            NON_FINITE[2]
        } else {
            return self.finite.encode(idx, out);
        };
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.push(b'"');
    }
}
