//! Avro payloads through `arrow-avro`: raw datums, single-object encoding, and the
//! Confluent wire format with the writers' schemas given by id.
//!
//! One module: the decoder and the encoder share the schema and its framing, and the
//! encoder's conversion of value columns to the schema's types is the schema's reading
//! of them (`arrow_schema_of` reads the schema as the decoder does).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int32Type};
use arrow_array::{
    Array, ArrayRef, BinaryArray, DictionaryArray, Int32Array, RecordBatch, StringArray,
    StructArray,
};
use arrow_avro::reader::{Decoder, ReaderBuilder};
use arrow_avro::schema::{
    AvroSchema, Fingerprint, FingerprintAlgorithm, FingerprintStrategy, SchemaStore,
    AVRO_ENUM_SYMBOLS_METADATA_KEY, SCHEMA_METADATA_KEY,
};
use arrow_avro::writer::format::{AvroBinaryFormat, AvroSoeFormat};
use arrow_avro::writer::{Encoder, WriterBuilder};
use arrow_cast::{can_cast_types, cast_with_options, CastOptions};
use arrow_schema::{DataType, Fields, Schema, SchemaRef};

use super::{binary_from_parts, AvroFraming, Format, RowsDecoder, RowsEncoder};
use crate::error::{Error, Result};

/// Avro's settings: the schema values are read as and written with, how each payload
/// is framed, and for Confluent framing the writers' schemas by id and the id a
/// publish writes. The value's Arrow schema is the Avro schema's.
#[derive(Debug, Clone)]
pub struct Avro {
    /// The Avro schema (JSON).
    pub schema: Option<String>,
    pub framing: AvroFraming,
    /// Confluent framing: the writers' schemas by id.
    pub schemas_by_id: Vec<(u32, String)>,
    /// Confluent framing: the id a publish frames its payloads with.
    pub schema_id: Option<u32>,
}

impl Default for Avro {
    fn default() -> Self {
        Self {
            schema: None,
            framing: AvroFraming::parse(crate::defaults::AVRO_FRAMING).expect("a known framing"),
            schemas_by_id: Vec::new(),
            schema_id: None,
        }
    }
}

impl Format for Avro {
    fn decoder(&self, batch_rows: usize) -> Result<Box<dyn RowsDecoder>> {
        Ok(Box::new(AvroRows::new(self, batch_rows)?))
    }

    fn encoder(&self) -> Result<Box<dyn RowsEncoder>> {
        Ok(Box::new(AvroEncoder::new(self)?))
    }
}

/// The prefix raw datums are given so the streaming decoder, which reads framed
/// payloads only, can read them: the Confluent magic byte and schema id 0.
const RAW_PREFIX: [u8; 5] = [0, 0, 0, 0, 0];

fn bad_schema(e: impl std::fmt::Display) -> Error {
    Error::bad_input(format!("option 'avro_schema': {e}"))
}

/// The Arrow schema an Avro schema's records are read as.
fn arrow_schema_of(schema_json: &str) -> Result<SchemaRef> {
    let schema = AvroSchema::new(schema_json.to_string());
    let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
    store
        .set(Fingerprint::Id(0), schema.clone())
        .map_err(bad_schema)?;
    let decoder = AvroRows::build(&store, &schema, 1)?;
    Ok(decoder.schema())
}

/// A text column under an Avro enum, as the writer takes it: a dictionary whose
/// values are the enum's symbols, in the schema's order. A value that is no symbol
/// is refused, naming its row.
fn enum_of(column: &ArrayRef, name: &str, symbols_json: &str) -> Result<ArrayRef> {
    let symbols: Vec<String> = serde_json::from_str(symbols_json)
        .map_err(|e| Error::bad_input(format!("option 'avro_schema': enum symbols: {e}")))?;
    let text = match column.data_type() {
        DataType::Utf8 => column.clone(),
        DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(..) => {
            cast_with_options(column, &DataType::Utf8, &CastOptions::default()).map_err(|_| {
                Error::bad_input(format!(
                    "column '{name}': an Avro enum is written from text, got {}",
                    column.data_type()
                ))
            })?
        }
        // Already the writer's dictionary (a read of the same enum), or not text:
        // the writer takes it or says why not.
        _ => return Ok(column.clone()),
    };
    let text = text.as_string::<i32>();
    let index: HashMap<&str, i32> = symbols
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i as i32))
        .collect();
    let mut keys = Vec::with_capacity(text.len());
    for (row, value) in text.iter().enumerate() {
        keys.push(match value {
            None => None,
            Some(v) => Some(*index.get(v).ok_or_else(|| {
                Error::bad_input(format!(
                    "column '{name}', row {row}: {v:?} is not a symbol of the Avro enum \
                     ({})",
                    symbols.join(", ")
                ))
            })?),
        });
    }
    let dictionary = DictionaryArray::<Int32Type>::try_new(
        Int32Array::from(keys),
        Arc::new(StringArray::from(symbols.clone())),
    )
    .map_err(|e| Error::bad_input(format!("column '{name}': {e}")))?;
    Ok(Arc::new(dictionary))
}

/// `column` as `to`, refused (naming the column and the row) unless every value
/// converts and converts back to itself. Narrowing a double to Avro's float rounds, as
/// the schema's type says, but a finite value is never made infinite. A timestamp keeps
/// its own time zone: the schema decides the unit, the instant stays the same.
fn convert_exactly(column: &ArrayRef, name: &str, to: &DataType) -> Result<ArrayRef> {
    let from = column.data_type();
    let to = match (from, to) {
        (DataType::Timestamp(_, zone), DataType::Timestamp(unit, _)) => {
            DataType::Timestamp(*unit, zone.clone())
        }
        _ => to.clone(),
    };
    if from == &to || !can_cast_types(from, &to) {
        // The writer takes the column as it is, or says why it cannot.
        return Ok(column.clone());
    }
    let strict = CastOptions {
        safe: false,
        ..Default::default()
    };
    let refused = |row: usize, why: &dyn std::fmt::Display| {
        Error::bad_input(format!(
            "column '{name}', row {row}: the value cannot be written as the Avro schema's \
             type ({to} in Arrow, from {from}): {why}"
        ))
    };
    let first_bad_row = |is_bad: &dyn Fn(&ArrayRef) -> bool| {
        (0..column.len())
            .find(|&i| is_bad(&column.slice(i, 1)))
            .unwrap_or(0)
    };
    let converted = match cast_with_options(column, &to, &strict) {
        Ok(converted) => converted,
        Err(e) => {
            let row = first_bad_row(&|one| cast_with_options(one, &to, &strict).is_err());
            return Err(refused(row, &e));
        }
    };
    if matches!((from, &to), (DataType::Float64, DataType::Float32)) {
        let (given, narrowed) = (
            column.as_primitive::<Float64Type>(),
            converted.as_primitive::<Float32Type>(),
        );
        if let Some(row) = (0..given.len()).find(|&i| {
            given.is_valid(i) && given.value(i).is_finite() && narrowed.value(i).is_infinite()
        }) {
            return Err(refused(row, &"beyond float's range"));
        }
        return Ok(converted);
    }
    let changed = |one: &ArrayRef| {
        !cast_with_options(one, &to, &strict)
            .and_then(|c| cast_with_options(&c, from, &strict))
            .is_ok_and(|back| back.to_data() == one.to_data())
    };
    let back = cast_with_options(&converted, from, &strict);
    if !back.is_ok_and(|back| back.to_data() == column.to_data()) {
        return Err(refused(
            first_bad_row(&changed),
            &"it would not be the value given",
        ));
    }
    Ok(converted)
}

/// The schema payloads are read as: the one given, or the only writer's.
fn reader_schema(settings: &Avro) -> Result<String> {
    match (&settings.schema, settings.schemas_by_id.as_slice()) {
        (Some(schema), _) => Ok(schema.clone()),
        (None, [(_, only)]) => Ok(only.clone()),
        (None, []) => Err(bad_schema("Avro values need their Avro schema")),
        (None, _) => Err(bad_schema(
            "the writers' schemas are several: give the schema to read them as",
        )),
    }
}

struct AvroRows {
    framing: AvroFraming,
    store: SchemaStore,
    reader: AvroSchema,
    batch_rows: usize,
    decoder: Decoder,
    schema: SchemaRef,
    framed: Vec<u8>,
}

impl AvroRows {
    fn new(settings: &Avro, batch_rows: usize) -> Result<Self> {
        let reader = AvroSchema::new(reader_schema(settings)?);
        let store = match settings.framing {
            AvroFraming::Raw => {
                let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
                store
                    .set(Fingerprint::Id(0), reader.clone())
                    .map_err(bad_schema)?;
                store
            }
            AvroFraming::SingleObject => {
                let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Rabin);
                store.register(reader.clone()).map_err(bad_schema)?;
                store
            }
            AvroFraming::Confluent => {
                if settings.schemas_by_id.is_empty() {
                    return Err(Error::bad_input(
                        "option 'avro_schemas_by_id': Confluent framing needs the writers' \
                         schemas by id",
                    ));
                }
                let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
                for (id, schema) in &settings.schemas_by_id {
                    store
                        .set(Fingerprint::Id(*id), AvroSchema::new(schema.clone()))
                        .map_err(bad_schema)?;
                }
                store
            }
        };
        let decoder = Self::build(&store, &reader, batch_rows)?;
        let schema = decoder.schema();
        Ok(Self {
            framing: settings.framing,
            store,
            reader,
            batch_rows,
            decoder,
            schema,
            framed: Vec::new(),
        })
    }

    fn build(store: &SchemaStore, reader: &AvroSchema, batch_rows: usize) -> Result<Decoder> {
        ReaderBuilder::new()
            .with_writer_schema_store(store.clone())
            .with_reader_schema(reader.clone())
            .with_batch_size(batch_rows)
            .build_decoder()
            .map_err(bad_schema)
    }

    fn flush(&mut self, into: &mut Vec<RecordBatch>) -> Result<(), String> {
        if let Some(batch) = self.decoder.flush().map_err(|e| e.to_string())? {
            into.push(batch);
        }
        Ok(())
    }

    fn decode_rows(&mut self, payloads: &[&[u8]]) -> Result<StructArray, String> {
        let mut parts = Vec::new();
        let mut scratch = std::mem::take(&mut self.framed);
        for payload in payloads {
            let framed: &[u8] = match self.framing {
                AvroFraming::Raw => {
                    scratch.clear();
                    scratch.extend_from_slice(&RAW_PREFIX);
                    scratch.extend_from_slice(payload);
                    &scratch
                }
                _ => payload,
            };
            let (mut read, mut rows) = (0, 0);
            loop {
                if self.decoder.batch_is_full() {
                    // A full batch, or a new writer schema: the rows so far go first.
                    self.flush(&mut parts)?;
                }
                let before = self.decoder.capacity();
                let n = self
                    .decoder
                    .decode(&framed[read..])
                    .map_err(|e| e.to_string())?;
                rows += before - self.decoder.capacity();
                read += n;
                if read == framed.len() || (n == 0 && !self.decoder.batch_is_full()) {
                    break;
                }
            }
            if read != framed.len() || rows != 1 {
                let prefix = framed.len() - payload.len();
                return Err(format!(
                    "the payload is not one Avro record ({} of its {} bytes read)",
                    read.saturating_sub(prefix),
                    payload.len()
                ));
            }
        }
        self.framed = scratch;
        self.flush(&mut parts)?;
        let all = arrow_select::concat::concat_batches(&self.schema, &parts)
            .map_err(|e| e.to_string())?;
        Ok(all.into())
    }
}

impl RowsDecoder for AvroRows {
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
        self.decoder =
            Self::build(&self.store, &self.reader, self.batch_rows).map_err(|e| e.to_string())?;
        Ok(())
    }
}

struct AvroEncoder {
    framing: AvroFraming,
    schema_json: Option<String>,
    schema_id: Option<u32>,
    /// The Arrow types the given schema's fields are read as: each value column is
    /// converted to its field's type before it is written, because the writer encodes a
    /// column by its Arrow type (a float64 under "float" would be written as 8 bytes).
    conformed_to: Option<SchemaRef>,
    /// Built for the first input's columns, again when they change.
    encoder: Option<(SchemaRef, Encoder)>,
}

impl AvroEncoder {
    fn new(settings: &Avro) -> Result<Self> {
        let schema_id = settings.schema_id;
        let by_id: HashMap<u32, &String> = settings
            .schemas_by_id
            .iter()
            .map(|(i, s)| (*i, s))
            .collect();
        let schema_json = match (&settings.schema, schema_id) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(id)) => by_id.get(&id).map(|s| s.to_string()),
            (None, None) => None,
        };
        if settings.framing == AvroFraming::Confluent && schema_id.is_none() {
            return Err(Error::bad_input(
                "option 'avro_schema_id': Confluent framing writes the schema id each \
                 payload starts with",
            ));
        }
        let conformed_to = schema_json.as_deref().map(arrow_schema_of).transpose()?;
        Ok(Self {
            framing: settings.framing,
            schema_json,
            schema_id,
            conformed_to,
            encoder: None,
        })
    }

    /// The value columns as the schema's fields: a column the schema does not name is
    /// refused (the writer would leave it out), a column of another type is converted
    /// when every value comes back from the conversion as given.
    fn conform(&self, values: &StructArray) -> Result<StructArray> {
        let Some(target) = &self.conformed_to else {
            return Ok(values.clone());
        };
        let mut fields = Vec::with_capacity(values.num_columns());
        let mut columns = Vec::with_capacity(values.num_columns());
        for (field, column) in values.fields().iter().zip(values.columns()) {
            let Ok(wanted) = target.field_with_name(field.name()) else {
                return Err(Error::bad_input(format!(
                    "column '{}' is not a field of the Avro schema (option 'avro_schema'): \
                     its values would not be written",
                    field.name()
                )));
            };
            if !wanted.is_nullable() && column.null_count() > 0 {
                let row = (0..column.len()).find(|&i| column.is_null(i)).unwrap_or(0);
                return Err(Error::bad_input(format!(
                    "column '{}', row {row}: null, and the Avro schema's field is not \
                     nullable (a union with \"null\" is)",
                    field.name()
                )));
            }
            let column = match wanted.metadata().get(AVRO_ENUM_SYMBOLS_METADATA_KEY) {
                Some(symbols) => enum_of(column, field.name(), symbols)?,
                None => convert_exactly(column, field.name(), wanted.data_type())?,
            };
            fields.push(
                field
                    .as_ref()
                    .clone()
                    .with_data_type(column.data_type().clone()),
            );
            columns.push(column);
        }
        StructArray::try_new(fields.into(), columns, values.nulls().cloned())
            .map_err(|e| Error::bad_input(format!("encoding values as Avro: {e}")))
    }

    fn build(&self, fields: &Fields) -> Result<Encoder> {
        let mut metadata = HashMap::new();
        if let Some(json) = &self.schema_json {
            metadata.insert(SCHEMA_METADATA_KEY.to_string(), json.clone());
        }
        let schema = Schema::new_with_metadata(fields.clone(), metadata);
        let builder = WriterBuilder::new(schema);
        let built = match self.framing {
            AvroFraming::Raw => builder.build_encoder::<AvroBinaryFormat>(),
            AvroFraming::SingleObject => builder
                .with_fingerprint_strategy(FingerprintStrategy::Rabin)
                .build_encoder::<AvroSoeFormat>(),
            AvroFraming::Confluent => builder
                .with_fingerprint_strategy(FingerprintStrategy::Id(
                    self.schema_id.expect("checked when built"),
                ))
                .build_encoder::<AvroSoeFormat>(),
        };
        built.map_err(|e| Error::bad_input(format!("encoding values as Avro: {e}")))
    }
}

impl RowsEncoder for AvroEncoder {
    fn encode(&mut self, values: &StructArray) -> Result<BinaryArray> {
        let values = &self.conform(values)?;
        let schema = Arc::new(Schema::new(values.fields().clone()));
        if self.encoder.as_ref().is_none_or(|(s, _)| s != &schema) {
            self.encoder = Some((schema.clone(), self.build(values.fields())?));
        }
        let (_, encoder) = self.encoder.as_mut().expect("built above");
        let batch = RecordBatch::from(values.clone());
        encoder
            .encode(&batch)
            .map_err(|e| Error::bad_input(format!("encoding values as Avro: {e}")))?;
        let rows = encoder.flush();
        let offsets = rows.offsets().to_vec();
        binary_from_parts(rows.bytes().to_vec(), offsets)
    }
}
