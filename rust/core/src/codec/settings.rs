//! The settings a value codec takes, declared once per format (the tables the
//! bindings read a codec by and export as `_core.OPTION_TABLES["json"]`, ...): what
//! every format shares ([`SharedSettings`]), then each format's own. A setting of
//! another format than the codec's is refused by the bindings, naming it and the
//! formats it is for. The value's Arrow schema (JSON, Arrow) and Avro's writers'
//! schemas by id are no option values: the bindings hand them over beside these.

use arrow_schema::SchemaRef;

use super::{
    ArrowIpc, Avro, AvroFraming, Codec, CodecSpec, Json, OnMalformed, OnNewField, Protobuf,
};
use crate::defaults;

crate::declare_options! {
    /// What a codec of every format takes.
    #[derive(Debug, Clone)]
    pub struct SharedSettings (none_is_default) {
        /// What a payload that does not decode does.
        on_malformed: OnMalformed = defaults::ON_MALFORMED;
        /// The value's fields as top-level columns instead of one struct column value.
        flatten: bool = false;
    }
}

crate::declare_options! {
    /// A JSON codec's own settings.
    #[derive(Debug, Clone)]
    pub struct JsonSettings (none_is_default) {
        /// Messages sampled to infer the value's schema when none is given.
        sample_rows: usize = defaults::VALUE_SAMPLE_ROWS, min 1;
        /// What a payload holding a field the schema lacks does.
        on_new_field: OnNewField = defaults::ON_NEW_FIELD;
    }
}

crate::declare_options! {
    /// An Arrow IPC codec's own settings.
    #[derive(Debug, Clone)]
    pub struct ArrowSettings (none_is_default) {
        /// Messages sampled to infer the value's schema when none is given.
        sample_rows: usize = defaults::VALUE_SAMPLE_ROWS, min 1;
    }
}

crate::declare_options! {
    /// An Avro codec's own settings.
    #[derive(Debug, Clone)]
    pub struct AvroSettings (none_is_default) {
        /// The Avro schema (JSON text) values are read as and written with.
        avro_schema: Option<String>;
        /// How each payload is framed.
        avro_framing: AvroFraming = defaults::AVRO_FRAMING;
        /// Confluent framing: the schema id a publish writes.
        avro_schema_id: Option<u32>;
    }
}

crate::declare_options! {
    /// A Protobuf codec's own settings.
    #[derive(Debug, Clone)]
    pub struct ProtobufSettings (none_is_default) {
        /// The FileDescriptorSet describing the message (bytes).
        protobuf_descriptor: Option<Vec<u8>>;
        /// The message's full name (package.Message).
        protobuf_message: Option<String>;
    }
}

/// One format's own settings.
#[derive(Debug, Clone)]
pub enum FormatSettings {
    Json(JsonSettings),
    Arrow(ArrowSettings),
    Avro(AvroSettings),
    Protobuf(ProtobufSettings),
}

impl CodecSpec {
    /// The spec these settings make, with the value's schema (`schema`: JSON, Arrow)
    /// and Avro's writers' schemas by id (`schemas_by_id`), which are no option values.
    pub fn from_settings(
        shared: SharedSettings,
        settings: FormatSettings,
        schema: Option<SchemaRef>,
        mut schemas_by_id: Vec<(u32, String)>,
    ) -> Self {
        let mut spec = match settings {
            FormatSettings::Json(json) => {
                let mut spec = CodecSpec::new(Codec::Json(Json { schema }));
                spec.sample_rows = json.sample_rows;
                spec.on_new_field = json.on_new_field;
                spec
            }
            FormatSettings::Arrow(arrow) => {
                let mut spec = CodecSpec::new(Codec::Arrow(ArrowIpc { schema }));
                spec.sample_rows = arrow.sample_rows;
                spec
            }
            FormatSettings::Avro(avro) => {
                schemas_by_id.sort();
                CodecSpec::new(Codec::Avro(Avro {
                    schema: avro.avro_schema,
                    framing: avro.avro_framing,
                    schemas_by_id,
                    schema_id: avro.avro_schema_id,
                }))
            }
            FormatSettings::Protobuf(protobuf) => CodecSpec::new(Codec::Protobuf(Protobuf {
                descriptor: protobuf.protobuf_descriptor,
                message: protobuf.protobuf_message,
            })),
        };
        spec.on_malformed = shared.on_malformed;
        spec.flatten = shared.flatten;
        spec
    }
}
