//! The codecs on message batches built as reads build them, no server. One module:
//! every test builds its batches with the same helpers, as a read builds them.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::*;
use crate::arrow::builder::BatchBuilder;
use crate::arrow::metadata::MessageMetadata;
use crate::arrow::schema::SchemaOptions;
use crate::error::ErrorKind;

fn value_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("name", DataType::Utf8, true),
    ]))
}

fn json_spec(schema: SchemaRef) -> CodecSpec {
    CodecSpec::new(Codec::Json(Json {
        schema: Some(schema),
    }))
}

/// The JSON value schema a read would infer from `sample`.
fn inferred_json(sample: &[&[u8]]) -> Result<SchemaRef> {
    match CodecSpec::new(Codec::new(ValueFormat::Json))
        .inferred(sample)?
        .codec
    {
        Codec::Json(Json { schema }) => Ok(schema.expect("inferred")),
        other => unreachable!("{other:?}"),
    }
}

fn messages(payloads: &[&[u8]], values: Option<ValueDecoder>) -> Result<RecordBatch> {
    let mut b = BatchBuilder::new("S", SchemaOptions::default()).with_values(values);
    for (i, p) in payloads.iter().enumerate() {
        let message = async_nats::Message {
            subject: async_nats::Subject::from_static("s"),
            reply: None,
            payload: bytes::Bytes::copy_from_slice(p),
            headers: None,
            status: None,
            description: None,
            length: 0,
        };
        let meta = MessageMetadata {
            delivered: 1,
            stream_seq: 10 + i as u64,
            consumer_seq: 1 + i as u64,
            timestamp_ns: 0,
            pending: 0,
        };
        b.append(&message, &meta)?;
    }
    b.finish()
}

fn json(mode: OnMalformed, flatten: bool) -> ValueDecoder {
    let spec = CodecSpec {
        on_malformed: mode,
        flatten,
        ..json_spec(value_schema())
    };
    ValueDecoder::new(&spec, 4).unwrap()
}

fn ids(batch: &RecordBatch) -> Vec<Option<i32>> {
    let value = batch.column_by_name(VALUE).unwrap().as_struct();
    let ids = value.column(0).as_primitive::<Int32Type>();
    (0..value.len())
        .map(|i| value.is_valid(i).then(|| ids.value(i)))
        .collect()
}

#[test]
fn json_payloads_become_a_typed_value_column_in_place_of_data() {
    let rows: Vec<Vec<u8>> = (0..10)
        .map(|i| format!(r#"{{"id": {i}, "name": "n{i}", "extra": true}}"#).into_bytes())
        .collect();
    let refs: Vec<&[u8]> = rows.iter().map(|r| r.as_slice()).collect();
    let batch = messages(&refs, Some(json(OnMalformed::FailFast, false))).unwrap();
    let names: Vec<_> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["stream", "subject", "seq", "timestamp", "value"]);
    assert_eq!(ids(&batch), (0..10).map(Some).collect::<Vec<_>>());
    let flat = messages(&refs, Some(json(OnMalformed::FailFast, true))).unwrap();
    assert_eq!(
        flat.column_by_name("name")
            .unwrap()
            .as_string::<i32>()
            .value(3),
        "n3"
    );
}

#[test]
fn a_bad_payload_fails_fast_naming_stream_seq_and_field() {
    let payloads: &[&[u8]] = &[br#"{"id": 1}"#, br#"{"id": "x"}"#, br#"{"id": 3}"#];
    let err = messages(payloads, Some(json(OnMalformed::FailFast, false))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::MalformedPayload);
    let text = err.to_string();
    assert!(text.contains("stream 'S' seq 11"), "{text}");
    assert!(text.contains("id"), "{text}");
}

#[test]
fn a_field_the_schema_lacks_fails_the_batch_only_with_on_new_field_fail() {
    // Inferred from a sample that had no `extra` and only nulls in `note`.
    let schema = inferred_json(&[br#"{"id": 1, "note": null, "s": {}}"#]).unwrap();
    let payloads: &[&[u8]] = &[
        br#"{"id": 1, "s": {}}"#,
        br#"{"id": 2, "extra": true}"#,
        br#"{"id": 3, "s": {"late": 1}}"#,
    ];
    let decoder = |on_new_field, on_malformed| {
        let spec = CodecSpec {
            on_new_field,
            on_malformed,
            ..json_spec(schema.clone())
        };
        ValueDecoder::new(&spec, 4).unwrap()
    };
    let ignored = messages(
        payloads,
        Some(decoder(OnNewField::Ignore, OnMalformed::FailFast)),
    )
    .unwrap();
    assert_eq!(ignored.num_rows(), 3);
    // Whatever the malformed mode: the payload is not malformed, the schema is behind.
    for mode in [OnMalformed::FailFast, OnMalformed::Permissive] {
        let err = messages(payloads, Some(decoder(OnNewField::Fail, mode))).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NewField, "{err}");
        let at = err.new_field_at().unwrap();
        assert_eq!((at.seq, at.field.as_str()), (11, "extra"), "{err}");
    }
    let nested = messages(
        &[payloads[2]],
        Some(decoder(OnNewField::Fail, OnMalformed::FailFast)),
    )
    .unwrap_err();
    assert_eq!(nested.new_field_at().unwrap().field, "s.late");
    // A value where the sample had only nulls is a new field too, not a bad value.
    let valued = messages(
        &[br#"{"id": 4, "note": "now"}"#],
        Some(decoder(OnNewField::Fail, OnMalformed::FailFast)),
    )
    .unwrap_err();
    assert_eq!(valued.new_field_at().unwrap().field, "note");
    // A value of another type is still malformed.
    let bad = messages(
        &[br#"{"id": "x"}"#],
        Some(decoder(OnNewField::Fail, OnMalformed::FailFast)),
    )
    .unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::MalformedPayload, "{bad}");
}

#[test]
fn permissive_keeps_bad_payloads_bytes_and_dropmalformed_counts_them() {
    let payloads: &[&[u8]] = &[
        br#"{"id": 1}"#,
        b"{\"id\": 2",
        br#"{"id": 3}{"id": 4}"#,
        b"",
        br#"{"id": 5}"#,
    ];
    let batch = messages(payloads, Some(json(OnMalformed::Permissive, false))).unwrap();
    assert_eq!(ids(&batch), [Some(1), None, None, None, Some(5)]);
    let corrupt = batch
        .column_by_name(CORRUPT_RECORD)
        .unwrap()
        .as_binary::<i32>();
    assert_eq!(corrupt.value(1), b"{\"id\": 2");
    assert!(corrupt.is_null(0) && corrupt.is_valid(3));

    let batch = messages(payloads, Some(json(OnMalformed::DropMalformed, false))).unwrap();
    assert_eq!(ids(&batch), [Some(1), Some(5)]);
    assert!(batch.column_by_name(CORRUPT_REASON).is_none());
    let seqs = batch
        .column_by_name("seq")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert_eq!(seqs.values().to_vec(), vec![10, 14]);
}

#[test]
fn permissive_says_why_each_payload_did_not_decode_as_failfast_would() {
    let payloads: &[&[u8]] = &[
        br#"{"id": 1}"#,
        b"{not json",
        br#"[{"id": 2}]"#,
        br#"{"id": "x"}"#,
        br#"{"id": 2.5}"#,
        b"  ",
        br#"{"id": 5}"#,
    ];
    let batch = messages(payloads, Some(json(OnMalformed::Permissive, false))).unwrap();
    let reasons = batch
        .column_by_name(CORRUPT_REASON)
        .unwrap()
        .as_string::<i32>();
    assert!(reasons.is_null(0) && reasons.is_null(6));
    // Each is the error of a failfast read of that payload alone, without its advice.
    for (row, payload) in payloads.iter().enumerate().take(6).skip(1) {
        let alone = messages(&[payload], Some(json(OnMalformed::FailFast, false)));
        let failfast = alone
            .unwrap_err()
            .message()
            .replace("seq 10", &format!("seq {}", 10 + row));
        let advice = " (mode 'failfast'; 'permissive' or 'dropmalformed' keep reading)";
        assert_eq!(
            Some(reasons.value(row)),
            failfast.strip_suffix(advice),
            "row {row}"
        );
    }
    let expected = [
        "it is not JSON: key must be a string at line 1 column 2",
        "it is JSON but not an object: it is an array",
        "field 'id'",
        "field 'id': 2.5 is not an integer",
        "the payload is empty",
    ];
    for (row, words) in (1..6).zip(expected) {
        assert!(reasons
            .value(row)
            .starts_with(&format!("stream 'S' seq {}: ", 10 + row)));
        assert!(reasons.value(row).contains(words), "{}", reasons.value(row));
    }
    // A batch whose payloads all decode has both columns, null.
    let good = messages(&payloads[..1], Some(json(OnMalformed::Permissive, false))).unwrap();
    assert_eq!(good.column_by_name(CORRUPT_REASON).unwrap().null_count(), 1);
}

#[test]
fn a_payload_with_no_value_to_infer_from_is_told_why() {
    let spec = CodecSpec::new(Codec::new(ValueFormat::Json));
    assert_eq!(spec.no_value(br#"{"a": 1}"#), None);
    assert_eq!(
        spec.no_value(b"[1]").as_deref(),
        Some("it is JSON but not an object: it is an array")
    );
    assert!(spec
        .no_value(b"{x")
        .unwrap()
        .starts_with("it is not JSON: "));
    let arrow = CodecSpec::new(Codec::new(ValueFormat::Arrow));
    assert!(arrow
        .no_value(b"nope")
        .unwrap()
        .starts_with("not an Arrow IPC stream"));
}

fn input(values: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let mut columns: Vec<(&str, ArrayRef)> =
        vec![("subject", Arc::new(StringArray::from(vec!["a", "b", "c"])))];
    columns.extend(values);
    RecordBatch::try_from_iter(columns).unwrap()
}

fn round_trip(spec: CodecSpec) {
    let batch = input(vec![
        ("id", Arc::new(Int32Array::from(vec![1, 2, 3]))),
        (
            "name",
            Arc::new(StringArray::from(vec![Some("x"), None, Some("z")])),
        ),
    ]);
    let mut encoder = ValueEncoder::new(&spec).unwrap();
    let encoded = encoder.encode(&batch).unwrap();
    let names: Vec<_> = encoded
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["subject", "data"]);
    let data = encoded.column(1).as_binary::<i32>();
    let payloads: Vec<&[u8]> = data.iter().map(|p| p.unwrap()).collect();
    let decoder = ValueDecoder::new(&spec, 2).unwrap();
    let decoded = messages(&payloads, Some(decoder)).unwrap();
    let value = decoded.column_by_name(VALUE).unwrap().as_struct();
    assert_eq!(
        value
            .column(0)
            .as_primitive::<Int32Type>()
            .values()
            .to_vec(),
        vec![1, 2, 3]
    );
    let names = value.column(1).as_string::<i32>();
    assert_eq!(
        names.iter().collect::<Vec<_>>(),
        vec![Some("x"), None, Some("z")]
    );
}

const AVRO: &str = r#"{"type":"record","name":"E","fields":[
    {"name":"id","type":"int"},{"name":"name","type":["null","string"]}]}"#;

#[test]
fn every_format_round_trips_a_table() {
    round_trip(json_spec(value_schema()));
    round_trip(CodecSpec::new(Codec::Arrow(ArrowIpc {
        schema: Some(value_schema()),
    })));
    for framing in [AvroFraming::Raw, AvroFraming::SingleObject] {
        round_trip(CodecSpec::new(Codec::Avro(Avro {
            schema: Some(AVRO.to_string()),
            framing,
            ..Avro::default()
        })));
    }
    round_trip(CodecSpec::new(Codec::Avro(Avro {
        schemas_by_id: vec![(7, AVRO.to_string())],
        schema_id: Some(7),
        framing: AvroFraming::Confluent,
        ..Avro::default()
    })));
}

#[test]
fn an_arrow_payload_of_several_rows_repeats_its_message_columns() {
    let spec = CodecSpec::new(Codec::Arrow(ArrowIpc {
        schema: Some(value_schema()),
    }));
    let values = RecordBatch::try_new(
        value_schema(),
        vec![
            Arc::new(Int32Array::from(vec![1, 2])),
            Arc::new(StringArray::from(vec!["a", "b"])),
        ],
    )
    .unwrap();
    let mut payload = Vec::new();
    {
        let mut w =
            arrow_ipc::writer::StreamWriter::try_new(&mut payload, &value_schema()).unwrap();
        w.write(&values).unwrap();
        w.finish().unwrap();
    }
    let one = {
        let mut e = ValueEncoder::new(&spec).unwrap();
        let b = e.encode(&input(vec![
            ("id", Arc::new(Int32Array::from(vec![9, 9, 9]))),
            ("name", Arc::new(StringArray::from(vec!["c", "c", "c"]))),
        ]));
        b.unwrap().column(1).as_binary::<i32>().value(0).to_vec()
    };
    let batch = messages(
        &[&payload, &one],
        Some(ValueDecoder::new(&spec, 8).unwrap()),
    )
    .unwrap();
    assert_eq!(ids(&batch), [Some(1), Some(2), Some(9)]);
    let seqs = batch
        .column_by_name("seq")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert_eq!(seqs.values().to_vec(), vec![10, 10, 11]);
}

#[test]
fn an_arrow_payload_of_view_types_decodes_into_the_values_plain_types() {
    let spec = CodecSpec::new(Codec::Arrow(ArrowIpc {
        schema: Some(value_schema()),
    }));
    let views = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("name", DataType::Utf8View, true),
    ]));
    let values = RecordBatch::try_new(
        views.clone(),
        vec![
            Arc::new(Int32Array::from(vec![1, 2])),
            Arc::new(arrow_array::StringViewArray::from(vec![Some("a"), None])),
        ],
    )
    .unwrap();
    let mut payload = Vec::new();
    {
        let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut payload, &views).unwrap();
        w.write(&values).unwrap();
        w.finish().unwrap();
    }
    let batch = messages(&[&payload], Some(ValueDecoder::new(&spec, 8).unwrap())).unwrap();
    assert_eq!(ids(&batch), [Some(1), Some(2)]);
    let value = batch.column_by_name(VALUE).unwrap().as_struct();
    let names = value.column_by_name("name").unwrap().as_string::<i32>();
    assert_eq!(names.iter().collect::<Vec<_>>(), [Some("a"), None]);
    // A payload whose types differ by more than views is still refused.
    let ints = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("name", DataType::Int64, true),
    ]));
    let mut other = Vec::new();
    {
        let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut other, &ints).unwrap();
        w.finish().unwrap();
    }
    let decoder = ValueDecoder::new(&spec, 8).unwrap();
    assert!(messages(&[&other], Some(decoder)).is_err());
}

#[test]
fn an_arrow_payload_of_no_rows_gives_its_message_one_row_with_a_null_value() {
    let spec = CodecSpec::new(Codec::Arrow(ArrowIpc {
        schema: Some(value_schema()),
    }));
    let empty = {
        let mut payload = Vec::new();
        let mut w =
            arrow_ipc::writer::StreamWriter::try_new(&mut payload, &value_schema()).unwrap();
        w.write(&RecordBatch::new_empty(value_schema())).unwrap();
        w.finish().unwrap();
        drop(w);
        payload
    };
    let one = {
        let mut e = ValueEncoder::new(&spec).unwrap();
        let b = e.encode(&input(vec![
            ("id", Arc::new(Int32Array::from(vec![9, 9, 9]))),
            ("name", Arc::new(StringArray::from(vec!["c", "c", "c"]))),
        ]));
        b.unwrap().column(1).as_binary::<i32>().value(0).to_vec()
    };
    let batch = messages(
        &[&empty, &one, &empty],
        Some(ValueDecoder::new(&spec, 8).unwrap()),
    )
    .unwrap();
    assert_eq!(ids(&batch), [None, Some(9), None]);
    let seqs = batch
        .column_by_name("seq")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert_eq!(seqs.values().to_vec(), vec![10, 11, 12]);
    // Flattened, the row's fields are null (and so nullable, `id` too).
    let flat = CodecSpec {
        flatten: true,
        ..spec
    };
    let batch = messages(&[&empty], Some(ValueDecoder::new(&flat, 8).unwrap())).unwrap();
    assert_eq!(batch.num_rows(), 1);
    assert!(batch.column_by_name("id").unwrap().is_null(0));
    assert!(batch.schema().field_with_name("id").unwrap().is_nullable());
}

#[test]
fn json_schemas_are_inferred_from_a_sample() {
    let sample: &[&[u8]] = &[
        br#"{"a": 1, "b": "x"}"#,
        b"not json",
        br#"{"a": 2, "c": [1.5]}"#,
    ];
    let schema = inferred_json(sample).unwrap();
    assert_eq!(
        schema.field_with_name("a").unwrap().data_type(),
        &DataType::Int64
    );
    assert!(schema.field_with_name("c").is_ok());
    let err = inferred_json(&[b"1"]).unwrap_err();
    assert!(err.to_string().contains("1 messages sampled"), "{err}");
}

fn json_of(schema: Schema, mode: OnMalformed) -> ValueDecoder {
    let spec = CodecSpec {
        on_malformed: mode,
        ..json_spec(Arc::new(schema))
    };
    ValueDecoder::new(&spec, 4).unwrap()
}

fn refusal(schema: Schema, payload: &[u8]) -> String {
    let payloads: &[&[u8]] = &[payload];
    let err = messages(payloads, Some(json_of(schema, OnMalformed::FailFast))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::MalformedPayload, "{err}");
    err.to_string()
}

#[test]
fn json_tokens_that_would_change_a_value_are_malformed_naming_the_field() {
    let int = || Schema::new(vec![Field::new("qty", DataType::Int64, true)]);
    for (payload, said) in [
        (
            &br#"{"qty": 2.7}"#[..],
            "field 'qty': 2.7 is not an integer",
        ),
        (
            br#"{"qty": "12"}"#,
            "field 'qty': the string \"12\" is not an integer",
        ),
        (br#"{"qty": 1e3}"#, "field 'qty': 1e3 is not an integer"),
        (br#"{"qty": 2.0}"#, "field 'qty': 2.0 is not an integer"),
    ] {
        let text = refusal(int(), payload);
        assert!(text.contains(said), "{text}");
    }
    let float = Schema::new(vec![Field::new("x", DataType::Float64, true)]);
    assert!(refusal(float, br#"{"x": "1.5"}"#).contains("field 'x': the string \"1.5\""));
    let decimal = Schema::new(vec![Field::new("p", DataType::Decimal128(10, 2), true)]);
    let text = refusal(decimal, br#"{"p": 1.234}"#);
    assert!(
        text.contains("field 'p': 1.234 has 3 digits after the point"),
        "{text}"
    );
    let nested = Schema::new(vec![Field::new(
        "order",
        DataType::Struct(
            vec![Field::new(
                "lines",
                DataType::new_list(DataType::Int32, true),
                true,
            )]
            .into(),
        ),
        true,
    )]);
    let text = refusal(nested, br#"{"order": {"lines": [1, 2, 3.5]}}"#);
    assert!(
        text.contains("field 'order.lines[]': 3.5 is not an integer"),
        "{text}"
    );
}

#[test]
fn json_tokens_that_keep_their_value_are_read() {
    let schema = Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("u", DataType::UInt64, true),
        Field::new("x", DataType::Float64, true),
        Field::new("p", DataType::Decimal128(20, 2), true),
        Field::new("s", DataType::Utf8, true),
    ]);
    let payloads: &[&[u8]] = &[
        br#"{"i": -9223372036854775808, "u": 18446744073709551615, "x": 2, "p": 1.50, "s": "2.7"}"#,
        br#"{"i": null, "x": "NaN", "p": "12.34", "other": 2.7}"#,
        br#"{"x": "Infinity", "p": 1e1}"#,
        br#"{"x": "-Infinity", "p": -0.01}"#,
    ];
    let batch = messages(payloads, Some(json_of(schema, OnMalformed::FailFast))).unwrap();
    let value = batch.column_by_name(VALUE).unwrap().as_struct();
    let i = value.column(0).as_primitive::<Int64Type>();
    assert_eq!(i.value(0), i64::MIN);
    assert!(i.is_null(1));
    let u = value
        .column(1)
        .as_primitive::<arrow_array::types::UInt64Type>();
    assert_eq!(u.value(0), u64::MAX);
    let x = value
        .column(2)
        .as_primitive::<arrow_array::types::Float64Type>();
    assert_eq!(x.value(0), 2.0);
    assert!(x.value(1).is_nan());
    assert_eq!(x.value(2), f64::INFINITY);
    assert_eq!(x.value(3), f64::NEG_INFINITY);
    let p = value
        .column(3)
        .as_primitive::<arrow_array::types::Decimal128Type>();
    assert_eq!(
        (0..4).map(|r| p.value(r)).collect::<Vec<_>>(),
        [150, 1234, 1000, -1]
    );
}

#[test]
fn json_floats_that_are_not_finite_round_trip() {
    let values: Vec<f64> = vec![1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    let batch = RecordBatch::try_from_iter(vec![
        (
            "subject",
            Arc::new(StringArray::from(vec!["a"; 4])) as ArrayRef,
        ),
        (
            "x",
            Arc::new(arrow_array::Float64Array::from(values.clone())) as ArrayRef,
        ),
        (
            "y",
            Arc::new(arrow_array::Float32Array::from(vec![
                f32::NAN,
                0.5,
                f32::INFINITY,
                2.0,
            ])) as ArrayRef,
        ),
    ])
    .unwrap();
    let spec = CodecSpec::new(Codec::new(ValueFormat::Json));
    let encoded = ValueEncoder::new(&spec).unwrap().encode(&batch).unwrap();
    let data = encoded.column_by_name("data").unwrap().as_binary::<i32>();
    assert_eq!(data.value(1), br#"{"x":"NaN","y":0.5}"#);
    let payloads: Vec<&[u8]> = data.iter().map(|p| p.unwrap()).collect();
    let schema = Schema::new(vec![
        Field::new("x", DataType::Float64, true),
        Field::new("y", DataType::Float32, true),
    ]);
    let decoded = messages(&payloads, Some(json_of(schema, OnMalformed::FailFast))).unwrap();
    let value = decoded.column_by_name(VALUE).unwrap().as_struct();
    let x = value
        .column(0)
        .as_primitive::<arrow_array::types::Float64Type>();
    let back: Vec<f64> = x.values().to_vec();
    assert_eq!(back[0], 1.5);
    assert!(back[1].is_nan() && x.is_valid(1));
    assert_eq!(&back[2..], &[f64::INFINITY, f64::NEG_INFINITY]);
    let y = value
        .column(1)
        .as_primitive::<arrow_array::types::Float32Type>();
    assert!(y.value(0).is_nan());
    assert_eq!(y.value(2), f32::INFINITY);
}

#[test]
fn every_column_but_the_publish_columns_is_a_value_unless_the_table_is_a_read() {
    let encoded_names = |columns: Vec<(&str, ArrayRef)>| -> Vec<String> {
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let spec = CodecSpec::new(Codec::new(ValueFormat::Json));
        let encoded = ValueEncoder::new(&spec).unwrap().encode(&batch).unwrap();
        let data = encoded.column_by_name("data").unwrap().as_binary::<i32>();
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(data.value(0)).unwrap();
        object.keys().cloned().collect()
    };
    let one = |s: &str| Arc::new(StringArray::from(vec![s])) as ArrayRef;
    let n = || Arc::new(arrow_array::Int64Array::from(vec![7])) as ArrayRef;
    let mut names = encoded_names(vec![
        ("subject", one("a")),
        ("id", n()),
        ("timestamp", n()),
        ("seq", n()),
        ("delivered", n()),
        ("msg_id", one("m")),
        ("amount", n()),
    ]);
    names.sort();
    assert_eq!(names, ["amount", "delivered", "id", "seq", "timestamp"]);
    let mut names = encoded_names(vec![
        ("stream", one("S")),
        ("subject", one("a")),
        ("seq", n()),
        ("timestamp", n()),
        ("id", n()),
    ]);
    names.sort();
    assert_eq!(names, ["id"]);
}

#[test]
fn json_integers_outside_their_field_are_malformed_not_clamped() {
    let int = || Schema::new(vec![Field::new("i", DataType::Int64, true)]);
    let text = refusal(int(), br#"{"i": -9223372036854775809}"#);
    assert!(
        text.contains("field 'i': -9223372036854775809 is out of the field's range"),
        "{text}"
    );
    let small = Schema::new(vec![Field::new("b", DataType::UInt8, true)]);
    assert!(refusal(small, br#"{"b": 256}"#).contains("field 'b': 256 is out of"));
}

#[test]
fn json_escaped_characters_beyond_the_basic_plane_read_as_themselves() {
    let schema = Schema::new(vec![Field::new("s", DataType::Utf8, true)]);
    let payloads: &[&[u8]] = &[
        br#"{"s": "\ud840\udc00"}"#,
        br#"{"s": "a\udbff\udfffb \ud83d\ude00"}"#,
        br#"{"s": "\\ud840\\udc00"}"#,
        br#"{"s": "\u00e9\n"}"#,
    ];
    let batch = messages(payloads, Some(json_of(schema, OnMalformed::FailFast))).unwrap();
    let value = batch.column_by_name(VALUE).unwrap().as_struct();
    let s = value.column(0).as_string::<i32>();
    assert_eq!(s.value(0), "\u{20000}");
    assert_eq!(s.value(1), "a\u{10FFFF}b \u{1F600}");
    assert_eq!(s.value(2), "\\ud840\\udc00");
    assert_eq!(s.value(3), "\u{e9}\n");
}

#[test]
fn json_zoned_timestamps_keep_their_instant_where_the_offset_has_seconds() {
    let tz = "Asia/Kolkata";
    let values = vec![-62_135_510_400_i64, 1_700_000_000];
    let ts = arrow_array::TimestampSecondArray::from(values.clone()).with_timezone(tz);
    let batch = RecordBatch::try_from_iter(vec![
        (
            "subject",
            Arc::new(StringArray::from(vec!["a"; 2])) as ArrayRef,
        ),
        ("at", Arc::new(ts) as ArrayRef),
    ])
    .unwrap();
    let spec = CodecSpec::new(Codec::new(ValueFormat::Json));
    let encoded = ValueEncoder::new(&spec).unwrap().encode(&batch).unwrap();
    let data = encoded.column_by_name("data").unwrap().as_binary::<i32>();
    // Local mean time (+05:53:28) is written in UTC; a minute offset as it is.
    assert_eq!(data.value(0), br#"{"at":"0001-01-02T00:00:00Z"}"#);
    assert_eq!(data.value(1), br#"{"at":"2023-11-15T03:43:20+05:30"}"#);
    let payloads: Vec<&[u8]> = data.iter().map(|p| p.unwrap()).collect();
    let schema = Schema::new(vec![Field::new(
        "at",
        DataType::Timestamp(arrow_schema::TimeUnit::Second, Some(tz.into())),
        true,
    )]);
    let decoded = messages(&payloads, Some(json_of(schema, OnMalformed::FailFast))).unwrap();
    let value = decoded.column_by_name(VALUE).unwrap().as_struct();
    let back = value
        .column(0)
        .as_primitive::<arrow_array::types::TimestampSecondType>();
    assert_eq!(back.values().to_vec(), values);
}

#[test]
fn json_inference_takes_numbers_beside_non_finite_strings_for_floats() {
    let sample: Vec<&[u8]> = vec![
        br#"{"x": 1.5, "name": "NaN", "l": [1, "Infinity"]}"#,
        br#"{"x": "NaN", "name": "a", "l": null}"#,
        br#"{"x": "-Infinity"}"#,
    ];
    let schema = inferred_json(&sample).unwrap();
    let t = |n: &str| schema.field_with_name(n).unwrap().data_type().clone();
    assert_eq!(t("x"), DataType::Float64);
    assert_eq!(t("name"), DataType::Utf8);
    let DataType::List(item) = t("l") else {
        panic!("{:?}", t("l"))
    };
    assert_eq!(item.data_type(), &DataType::Float64);
}

#[test]
fn json_inference_takes_only_integer_literals_beyond_int64_for_decimals() {
    let t = |sample: &[&[u8]]| {
        inferred_json(sample)
            .unwrap()
            .field_with_name("f")
            .unwrap()
            .data_type()
            .clone()
    };
    // A float literal is a float whatever its value: 2^64 written with an exponent,
    // or with a point, or a whole number in exponent notation.
    for payload in [
        &br#"{"f": 1.8446744073709552e+19}"#[..],
        br#"{"f": 1.8446744073709552E19}"#,
        br#"{"f": 18446744073709551616.0}"#,
        br#"{"f": -1.8446744073709552e+19}"#,
        br#"{"f": 1e3}"#,
    ] {
        assert_eq!(t(&[payload]), DataType::Float64, "{payload:?}");
    }
    // Beside an integer literal beyond int64, a float literal keeps the field a float.
    assert_eq!(
        t(&[br#"{"f": 18446744073709551616}"#, br#"{"f": 1e3}"#]),
        DataType::Float64
    );
    // Integer literals beyond int64 (and within 38 digits) make a decimal.
    for payload in [
        &br#"{"f": 18446744073709551616}"#[..],
        br#"{"f": 9223372036854775808}"#,
        br#"{"f": -9223372036854775809}"#,
    ] {
        assert_eq!(
            t(&[payload, br#"{"f": 1}"#]),
            DataType::Decimal128(38, 0),
            "{payload:?}"
        );
    }
    // Beyond 38 digits a decimal would not hold it.
    let digits39 = format!(r#"{{"f": {}}}"#, "9".repeat(39));
    assert_eq!(t(&[digits39.as_bytes()]), DataType::Float64);
}

#[test]
fn json_decimals_of_negative_scale_are_refused_not_misread() {
    // arrow-json reads 12300 into decimal(5, -2) as 12300 hundreds.
    let schema = Schema::new(vec![Field::new("d", DataType::Decimal128(5, -2), true)]);
    let text = refusal(schema, br#"{"d": 12300}"#);
    assert!(
        text.contains("field 'd': a decimal of negative scale (-2)"),
        "{text}"
    );
}
