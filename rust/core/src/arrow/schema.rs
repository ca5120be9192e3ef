//! The message schema, one for both directions: what a read yields
//! and what a publish accepts.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

pub const STREAM: &str = "stream";
pub const SUBJECT: &str = "subject";
pub const SEQ: &str = "seq";
pub const TIMESTAMP: &str = "timestamp";
pub const HEADERS: &str = "headers";
pub const DATA: &str = "data";
pub const MSG_ID: &str = "msg_id";
/// Publish input only: per-row optimistic-concurrency checks (optional columns).
pub const EXPECTED_LAST_SUBJECT_SEQ: &str = "expected_last_subject_seq";
pub const EXPECTED_LAST_MSG_ID: &str = "expected_last_msg_id";
/// The row's own time to live (`Nats-TTL`): optional in publish input, and in a
/// read that asks for it (`include_ttl`).
pub const TTL: &str = "ttl";
/// Publish input only: a counter increment (`Nats-Incr`; a table of increments has it
/// and no `data` column).
pub const INCREMENT: &str = "increment";
/// Publish input only: when a row fires (`Nats-Schedule`) and to which subject
/// (`Nats-Schedule-Target`); a schedule only with both columns.
pub const SCHEDULE: &str = "schedule";
pub const SCHEDULE_TARGET: &str = "schedule_target";
pub const DELIVERED: &str = "delivered";
pub const CONSUMER_SEQ: &str = "consumer_seq";

/// Whether a table of publish input is a read of a stream (it has the read's
/// `stream` (text) and `seq` (integer) columns): a copy, whose read columns and
/// control headers describe the message it was read from, not the one to publish.
/// Columns of those names and other types are a table's own values.
pub fn is_read(schema: &Schema) -> bool {
    let text = |t: &DataType| {
        matches!(
            t,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(..)
        )
    };
    let stream = schema.field_with_name(STREAM).ok();
    let seq = schema.field_with_name(SEQ).ok();
    matches!((stream, seq), (Some(s), Some(q)) if text(s.data_type()) && q.data_type().is_integer())
}

/// Whether a column is publish input's TTL (`Nats-TTL`): named `ttl`, of a duration
/// type; a `ttl` column of text or numbers is a value's.
pub fn is_ttl_column(name: &str, data_type: &DataType) -> bool {
    name == TTL && matches!(data_type, DataType::Duration(_))
}

/// Whether publish input of `schema` schedules its rows: both columns are there.
pub fn is_schedule_input(schema: &Schema) -> bool {
    schema.index_of(SCHEDULE).is_ok() && schema.index_of(SCHEDULE_TARGET).is_ok()
}

/// Whether `name` is a column that steers a schedule in publish input of `schema`.
pub fn is_schedule_column(name: &str, schema: &Schema) -> bool {
    (name == SCHEDULE || name == SCHEDULE_TARGET) && is_schedule_input(schema)
}

/// `timestamp[us, tz=UTC]`: what Spark's TimestampType maps to.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// `map<utf8, list<utf8>>`: a NATS header may repeat, so each key maps to a list.
pub fn headers_type() -> DataType {
    let value = Field::new(
        "value",
        DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
        true,
    );
    let entries = Field::new(
        "entries",
        DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            value,
        ])),
        false,
    );
    DataType::Map(Arc::new(entries), false)
}

/// Which optional columns a read or consume produces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchemaOptions {
    pub include_headers: bool,
    /// Add `ttl`: each message's `Nats-TTL` as the server reads it ([`super::ttl`]).
    pub include_ttl: bool,
    /// Add `delivered` and `consumer_seq` (messages from a durable consumer).
    pub consumer_columns: bool,
    /// `data` as `binary_view` whose buffers are the received payloads, not copied
    /// (see [`crate::arrow::builder`]).
    pub payload_views: bool,
}

/// The schema of batches produced by reads and consumers.
pub fn message_schema(options: SchemaOptions) -> SchemaRef {
    let mut fields = vec![
        Field::new(STREAM, DataType::Utf8, false),
        Field::new(SUBJECT, DataType::Utf8, false),
        Field::new(SEQ, DataType::Int64, false),
        Field::new(TIMESTAMP, timestamp_type(), false),
    ];
    if options.include_headers {
        fields.push(Field::new(HEADERS, headers_type(), true));
    }
    if options.include_ttl {
        fields.push(Field::new(TTL, super::ttl::TTL_TYPE, true));
    }
    let data = if options.payload_views {
        DataType::BinaryView
    } else {
        DataType::Binary
    };
    fields.push(Field::new(DATA, data, false));
    if options.consumer_columns {
        fields.push(Field::new(DELIVERED, DataType::Int64, false));
        fields.push(Field::new(CONSUMER_SEQ, DataType::Int64, false));
    }
    Arc::new(Schema::new(fields))
}

/// The per-row result of a publish: `seq`, `duplicate`, `error`.
pub fn ack_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(SEQ, DataType::Int64, true),
        Field::new("duplicate", DataType::Boolean, false),
        Field::new("error", DataType::Utf8, true),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_has_the_documented_columns_in_order() {
        let s = message_schema(SchemaOptions {
            include_headers: true,
            include_ttl: true,
            consumer_columns: true,
            payload_views: false,
        });
        let names: Vec<_> = s.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "stream",
                "subject",
                "seq",
                "timestamp",
                "headers",
                "ttl",
                "data",
                "delivered",
                "consumer_seq"
            ]
        );
        assert_eq!(
            s.field_with_name("timestamp").unwrap().data_type(),
            &timestamp_type()
        );
        let plain = message_schema(SchemaOptions::default());
        assert!(plain.field_with_name("headers").is_err());
    }
}
