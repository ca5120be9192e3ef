//! JSON payloads: `arrow-json`'s decoder fed each payload in turn, and its encoders
//! writing each row.

use std::sync::{Arc, LazyLock};

use arrow_array::cast::AsArray;
use arrow_array::temporal_conversions::as_datetime_with_timezone;
use arrow_array::timezone::Tz;
use arrow_array::types::{
    ArrowTimestampType, Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type, Float16Type,
    Float32Type, Float64Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{Array, BinaryArray, StructArray};
use arrow_buffer::i256;
use arrow_json::reader::Decoder;
use arrow_json::writer::{make_encoder, Encoder, EncoderFactory, EncoderOptions, NullableEncoder};
use arrow_json::ReaderBuilder;
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Fields, SchemaRef, TimeUnit};

mod infer;
mod new_fields;
mod tokens;

use tokens::{TokenCheck, NON_FINITE};

use super::{
    binary_from_parts, concat_rows, schema_required, Format, RowsDecoder, RowsEncoder, ValueFormat,
};
use crate::error::{Error, Result};

/// JSON's settings: the value's Arrow schema, which a read may infer from the
/// stream's first payloads instead (`infer::json_schema`).
#[derive(Debug, Clone, Default)]
pub struct Json {
    pub schema: Option<SchemaRef>,
}

impl Json {
    /// A decoder of payloads into rows; with `new_fields` a payload holding a field
    /// the schema lacks fails to decode, and [`RowsDecoder::new_field`] names it.
    pub(super) fn rows(&self, batch_rows: usize, new_fields: bool) -> Result<Box<dyn RowsDecoder>> {
        let schema = schema_required(&self.schema, ValueFormat::Json, "decoding")?;
        Ok(Box::new(JsonRows::new(schema, batch_rows, new_fields)?))
    }
}

impl Format for Json {
    fn decoder(&self, batch_rows: usize) -> Result<Box<dyn RowsDecoder>> {
        self.rows(batch_rows, false)
    }

    fn encoder(&self) -> Result<Box<dyn RowsEncoder>> {
        Ok(Box::new(JsonEncoder))
    }

    fn needs_inference(&self) -> bool {
        self.schema.is_none()
    }

    fn infer(&mut self, sample: &[&[u8]]) -> Result<()> {
        self.schema = Some(infer::json_schema(sample)?);
        Ok(())
    }

    fn no_value(&self, payload: &[u8]) -> Option<String> {
        not_an_object(payload)
    }
}

/// Why `payload` is not a JSON object: it does not parse (where, in `serde_json`'s
/// words: line and column), or it is another kind of JSON value. None for an
/// object. Asked only of a payload that failed, so rows that decode pay nothing.
fn not_an_object(payload: &[u8]) -> Option<String> {
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Some("the payload is empty".to_string());
    }
    let value = match serde_json::from_slice::<serde::de::IgnoredAny>(payload) {
        Ok(_) => payload.iter().find(|b| !b.is_ascii_whitespace()),
        Err(e) => return Some(several_values(payload).unwrap_or(format!("it is not JSON: {e}"))),
    };
    let kind = match value {
        Some(b'{') => return None,
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    };
    Some(format!("it is JSON but not an object: it is {kind}"))
}

/// A payload of several whole JSON values one after the other (lines of NDJSON sent
/// as one message), said as such rather than as the syntax error a single value
/// finds after the first; None for a payload that is not that.
fn several_values(payload: &[u8]) -> Option<String> {
    let mut count = 0;
    for value in serde_json::Deserializer::from_slice(payload).into_iter::<serde::de::IgnoredAny>()
    {
        value.ok()?;
        count += 1;
    }
    (count > 1).then(|| format!("the payload holds {count} JSON values, not one"))
}

struct JsonRows {
    schema: SchemaRef,
    batch_rows: usize,
    decoder: Decoder,
    /// The tokens the schema's typed fields take, when any needs checking.
    check: Option<TokenCheck>,
    /// Whether a field the schema lacks fails a payload (`on_new_field` `fail`):
    /// `arrow-json`'s strict mode, which costs nothing where it is not met (the
    /// decoder looks every field up anyway); only a payload that fails is walked
    /// again, by [`new_fields::first_new_field`], to tell a new field from a bad value.
    new_fields: bool,
}

impl JsonRows {
    pub fn new(schema: SchemaRef, batch_rows: usize, new_fields: bool) -> Result<Self> {
        let decoder = Self::build(&schema, batch_rows, new_fields)?;
        let check = TokenCheck::for_type(&DataType::Struct(schema.fields().clone()));
        Ok(Self {
            schema,
            batch_rows,
            decoder,
            check,
            new_fields,
        })
    }

    fn build(schema: &SchemaRef, batch_rows: usize, strict: bool) -> Result<Decoder> {
        ReaderBuilder::new(schema.clone())
            .with_batch_size(batch_rows)
            .with_strict_mode(strict)
            .build_decoder()
            .map_err(|e| Error::bad_input(format!("option 'schema': {e}")))
    }

    fn decode_rows(&mut self, payloads: &[&[u8]]) -> Result<StructArray, String> {
        let mut parts: Vec<StructArray> = Vec::new();
        for chunk in payloads.chunks(self.batch_rows) {
            for payload in chunk {
                let fixed = surrogate_pairs_as_utf8(payload);
                let payload: &[u8] = fixed.as_deref().unwrap_or(payload);
                if let Some(check) = &self.check {
                    check.check(payload)?;
                }
                let before = self.decoder.len();
                // The decoder's own words for a payload that is an object; for one
                // that is not, what it is instead (the decoder would speak of its tape).
                let read = self
                    .decoder
                    .decode(payload)
                    .map_err(|e| not_an_object(payload).unwrap_or_else(|| e.to_string()))?;
                let rows = self.decoder.len() - before;
                if read != payload.len() || rows != 1 || self.decoder.has_partial_record() {
                    return Err(match not_an_object(payload) {
                        Some(why) => why,
                        None if self.decoder.has_partial_record() => {
                            "the payload ends inside a JSON value".to_string()
                        }
                        None => format!("the payload holds {rows} JSON values, not one"),
                    });
                }
            }
            // A value that is no object fails only here, where the decoder reads its
            // rows: a payload decoded alone is told what it is instead.
            let flushed = self.decoder.flush().map_err(|e| match chunk {
                [payload] => not_an_object(payload).unwrap_or_else(|| e.to_string()),
                _ => e.to_string(),
            })?;
            if let Some(batch) = flushed {
                parts.push(batch.into());
            }
        }
        concat_rows(self.schema.fields(), parts)
    }
}

/// `payload` with each escaped UTF-16 surrogate pair (`\\uD840\\uDC00`) written as
/// its character's UTF-8 bytes; None when it has none. arrow-json 59 joins a pair's
/// halves with `|` where it should add (`reader/tape.rs`, `char_from_surrogate_pair`),
/// so every character from U+20000 up read as another (U+20000 as U+10000). A
/// character written as UTF-8 is the same JSON string. Hand-written: a scan of the
/// string escapes only, where a parse and re-serialisation would rewrite numbers.
fn surrogate_pairs_as_utf8(payload: &[u8]) -> Option<Vec<u8>> {
    if !payload.contains(&b'\\') {
        return None;
    }
    let mut out: Option<Vec<u8>> = None;
    let (mut i, mut copied, mut in_string) = (0, 0, false);
    while i < payload.len() {
        match (in_string, payload[i]) {
            (false, b'"') => {
                in_string = true;
                i += 1;
            }
            (true, b'"') => {
                in_string = false;
                i += 1;
            }
            (true, b'\\') => match surrogate_pair_at(&payload[i..]) {
                Some(c) => {
                    let out = out.get_or_insert_with(|| Vec::with_capacity(payload.len()));
                    out.extend_from_slice(&payload[copied..i]);
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                    i += 12;
                    copied = i;
                }
                // Any other escape: its second byte is never the string's end.
                None => i += 2,
            },
            _ => i += 1,
        }
    }
    out.map(|mut out| {
        out.extend_from_slice(&payload[copied.min(payload.len())..]);
        out
    })
}

/// The character of the escaped surrogate pair `\\uHHHH\\uLLLL` at the start of `s`.
fn surrogate_pair_at(s: &[u8]) -> Option<char> {
    let hex = |digits: &[u8]| -> Option<u32> {
        digits
            .iter()
            .all(u8::is_ascii_hexdigit)
            .then(|| u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok())?
    };
    if s.len() < 12 || &s[..2] != b"\\u" || &s[6..8] != b"\\u" {
        return None;
    }
    let (high, low) = (hex(&s[2..6])?, hex(&s[8..12])?);
    if !(0xD800..=0xDBFF).contains(&high) || !(0xDC00..=0xDFFF).contains(&low) {
        return None;
    }
    char::from_u32(0x1_0000 + ((high - 0xD800) << 10) + (low - 0xDC00))
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
        self.decoder = Self::build(&self.schema, self.batch_rows, self.new_fields)
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    fn new_field(&self, payload: &[u8]) -> Option<String> {
        if !self.new_fields {
            return None;
        }
        let fixed = surrogate_pairs_as_utf8(payload);
        new_fields::first_new_field(&self.schema, fixed.as_deref().unwrap_or(payload))
    }
}

struct JsonEncoder;

impl RowsEncoder for JsonEncoder {
    fn encode(&mut self, values: &StructArray) -> Result<BinaryArray> {
        let field = Arc::new(Field::new_struct("", values.fields().clone(), false));
        // Every field in every object, null ones as `null`: an object says what the
        // row held, and a field null in every row is still there to be read back.
        let options = EncoderOptions::default()
            .with_explicit_nulls(true)
            .with_encoder_factory(Arc::new(ExactValues));
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

/// Where arrow-json's writer would change a value, the value written exactly:
/// - floats that are not finite as the strings Spark and Jackson write (`"NaN"`,
///   `"Infinity"`, `"-Infinity"`), which the decoder takes back: arrow-json writes
///   them as `null`, which would read back as a null;
/// - a zoned timestamp whose zone's offset at that instant has seconds (local mean
///   time before 1900, as `Asia/Kolkata`'s +05:53:28) in UTC (`...Z`): arrow-json
///   writes the offset in minutes, which names another instant;
/// - a zero decimal of negative scale as `0`: arrow-json writes `00` (scale -2).
#[derive(Debug)]
pub(in crate::codec) struct ExactValues;

/// arrow-json's own encoders, for every other value.
static PLAIN: LazyLock<EncoderOptions> = LazyLock::new(EncoderOptions::default);

/// A value's own JSON text where arrow-json's would change it; None for the others.
type Exact<'a> = Box<dyn Fn(usize) -> Option<String> + 'a>;

impl EncoderFactory for ExactValues {
    fn make_default_encoder<'a>(
        &self,
        field: &'a FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> std::result::Result<Option<NullableEncoder<'a>>, ArrowError> {
        let exact: Exact<'a> = match array.data_type() {
            DataType::Float16 => {
                let a = array.as_primitive::<Float16Type>();
                Box::new(move |i| non_finite(a.value(i).to_f64()))
            }
            DataType::Float32 => {
                let a = array.as_primitive::<Float32Type>();
                Box::new(move |i| non_finite(f64::from(a.value(i))))
            }
            DataType::Float64 => {
                let a = array.as_primitive::<Float64Type>();
                Box::new(move |i| non_finite(a.value(i)))
            }
            DataType::Timestamp(unit, Some(zone)) => {
                let tz: Tz = zone.parse()?;
                match unit {
                    TimeUnit::Second => zoned::<TimestampSecondType>(array, tz),
                    TimeUnit::Millisecond => zoned::<TimestampMillisecondType>(array, tz),
                    TimeUnit::Microsecond => zoned::<TimestampMicrosecondType>(array, tz),
                    TimeUnit::Nanosecond => zoned::<TimestampNanosecondType>(array, tz),
                }
            }
            // arrow-json pads a zero of negative scale with the scale's zeros ("00"
            // for scale -2), which is no JSON number.
            DataType::Decimal32(_, scale) if *scale < 0 => {
                let a = array.as_primitive::<Decimal32Type>();
                Box::new(move |i| (a.value(i) == 0).then(|| "0".to_string()))
            }
            DataType::Decimal64(_, scale) if *scale < 0 => {
                let a = array.as_primitive::<Decimal64Type>();
                Box::new(move |i| (a.value(i) == 0).then(|| "0".to_string()))
            }
            DataType::Decimal128(_, scale) if *scale < 0 => {
                let a = array.as_primitive::<Decimal128Type>();
                Box::new(move |i| (a.value(i) == 0).then(|| "0".to_string()))
            }
            DataType::Decimal256(_, scale) if *scale < 0 => {
                let a = array.as_primitive::<Decimal256Type>();
                Box::new(move |i| (a.value(i) == i256::ZERO).then(|| "0".to_string()))
            }
            _ => return Ok(None),
        };
        let plain = make_encoder(field, array, &PLAIN)?;
        Ok(Some(NullableEncoder::new(
            Box::new(ExactEncoder { exact, plain }),
            array.nulls().cloned(),
        )))
    }
}

pub(in crate::codec) fn non_finite(v: f64) -> Option<String> {
    let name = if v.is_nan() {
        NON_FINITE[0]
    } else if v == f64::INFINITY {
        NON_FINITE[1]
    } else if v == f64::NEG_INFINITY {
        NON_FINITE[2]
    } else {
        return None;
    };
    Some(format!("\"{name}\""))
}

fn zoned<'a, T: ArrowTimestampType>(array: &'a dyn Array, tz: Tz) -> Exact<'a> {
    let a = array.as_primitive::<T>();
    Box::new(move |i| {
        let at = as_datetime_with_timezone::<T>(a.value(i), tz)?;
        let offset = (at.naive_local() - at.naive_utc()).num_seconds();
        (offset % 60 != 0)
            .then(|| format!("\"{}Z\"", at.naive_utc().format("%Y-%m-%dT%H:%M:%S%.f")))
    })
}

struct ExactEncoder<'a> {
    exact: Exact<'a>,
    plain: NullableEncoder<'a>,
}

impl Encoder for ExactEncoder<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        match (self.exact)(idx) {
            Some(text) => out.extend_from_slice(text.as_bytes()),
            None => self.plain.encode(idx, out),
        }
    }
}
