"""Typed payloads in Spark: ``valueFormat`` on spark.read, spark.readStream and
df.write, against a real nats-server and a local[2] session. Typed columns reach
Spark with no ``from_json``."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

import jetstream_arrow as ja
from conftest_spark import (
    SPARK_ERRORS,
    error_text,
    make_stream,
    read_df,
    run_available_now,
    spark,
)
from proto_compile import compile_proto

pytestmark = pytest.mark.spark
__all__ = ["spark"]


def publish_json(url: str, name: str, n: int, bad: dict[int, bytes] | None = None) -> None:
    payloads = [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(n)]
    for i, payload in (bad or {}).items():
        payloads[i] = payload
    with ja.connect(url) as client:
        client.publish(pa.table({"subject": [f"{name}.e"] * n, "data": payloads}))


def read_with_schema(spark: Any, url: str, name: str, schema: str, **options: Any) -> Any:
    reader = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", name)
        .option("valueFormat", "json")
        .schema(schema)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_json_values_come_as_a_typed_struct_or_as_the_columns_a_schema_names(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("VJ")
    make_stream(url, name)
    publish_json(url, name, 500)

    inferred = read_df(spark, url, name, valueFormat="json")
    value = inferred.schema["value"].dataType
    assert value == StructType(
        [StructField("id", LongType(), True), StructField("name", StringType(), True)]
    )
    rows = inferred.orderBy("seq").select("seq", "value.id", "value.name").collect()
    assert [(r.seq, r.id, r.name) for r in rows] == [(i + 1, i, f"n{i}") for i in range(500)]

    value_type = StructType(
        [StructField("id", IntegerType(), True), StructField("name", StringType(), True)]
    )
    given = read_df(spark, url, name, valueFormat="json", valueSchema=value_type.json())
    assert given.schema["value"].dataType == value_type
    assert given.filter("value.id >= 490").count() == 10
    ddl = read_with_schema(spark, url, name, "seq LONG, value STRUCT<id: INT, name: STRING>")
    assert ddl.filter("value.id < 5").count() == 5

    flat = read_with_schema(spark, url, name, "seq LONG, id INT, name STRING")
    assert flat.columns == ["seq", "id", "name"]
    assert flat.orderBy("seq").first().asDict() == {"seq": 1, "id": 0, "name": "n0"}


def test_modes_failfast_permissive_dropmalformed(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("VM")
    make_stream(url, name)
    publish_json(url, name, 20, bad={7: b"{oops", 12: b'{"id": "twelve"}'})
    schema = "seq LONG, value STRUCT<id: INT, name: STRING>"

    with pytest.raises(SPARK_ERRORS) as failed:
        read_with_schema(spark, url, name, schema).collect()
    assert "seq 8" in error_text(failed)

    permissive = read_with_schema(
        spark, url, name, schema + ", _corrupt_record BINARY", mode="PERMISSIVE"
    ).orderBy("seq")
    bad = permissive.filter("value IS NULL").select("seq", "_corrupt_record").collect()
    assert [(r.seq, bytes(r._corrupt_record)) for r in bad] == [
        (8, b"{oops"),
        (13, b'{"id": "twelve"}'),
    ]

    dropped = read_with_schema(spark, url, name, schema, mode="dropmalformed")
    assert sorted(r.seq for r in dropped.select("seq").collect()) == [
        s for s in range(1, 21) if s not in (8, 13)
    ]


def test_a_dataframe_written_as_avro_reads_back_and_fastavro_reads_it(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("VA")
    make_stream(url, name)
    avro = {
        "type": "record",
        "name": "E",
        "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
    }
    df = spark.range(300).selectExpr(
        f"concat('{name}.', cast(id % 3 as string)) AS subject", "id", "concat('n', id) AS name"
    )
    (
        df.write.format("jetstream")
        .mode("append")
        .option("servers", url)
        .option("valueFormat", "avro")
        .option("valueSchema", json.dumps(avro))
        .save()
    )
    with ja.connect(url) as client:
        payloads = client.read(name).read_all().column("data").to_pylist()
    parsed = fastavro.parse_schema(avro)
    decoded = sorted(
        fastavro.schemaless_reader(io.BytesIO(p), parsed, parsed)["id"] for p in payloads
    )
    assert decoded == list(range(300))

    back = read_df(spark, url, name, valueFormat="avro", valueSchema=json.dumps(avro))
    assert sorted(r.id for r in back.select("value.id").collect()) == list(range(300))


READING_PROTO = """
syntax = "proto3";
package iot;
message Reading {
  string device = 1;
  double temp = 2;
  int64 at = 3;
  repeated string tags = 4;
}
"""


def test_a_dataframe_written_as_protobuf_parses_in_the_runtime_and_reads_back(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Any
) -> None:
    descriptor, pb = compile_proto(tmp_path, "reading", READING_PROTO)
    url, name = shared_nats_server.url, unique_name("VP")
    make_stream(url, name)
    df = spark.range(120).selectExpr(
        f"'{name}.r' AS subject",
        "concat('d', id % 4) AS device",
        "CAST(id AS DOUBLE) / 8 AS temp",
        "id * 1000000000000 AS at",
        "array('a', concat('t', id)) AS tags",
    )
    proto_options = {
        "valueFormat": "protobuf",
        "valueSchema": "iot.Reading",
        "protobufDescriptorFile": str(descriptor),
    }
    df.write.format("jetstream").mode("append").option("servers", url).options(
        **proto_options
    ).save()
    with ja.connect(url) as client:
        payloads = client.read(name).read_all().column("data").to_pylist()
    parsed = sorted((pb.Reading.FromString(p) for p in payloads), key=lambda r: r.at)
    assert [(r.device, r.temp, r.at, list(r.tags)) for r in parsed] == [
        (f"d{i % 4}", i / 8, i * 10**12, ["a", f"t{i}"]) for i in range(120)
    ]

    back = read_df(spark, url, name, **proto_options)
    got = sorted(back.select("value.at", "value.device").collect())
    assert got == sorted((i * 10**12, f"d{i % 4}") for i in range(120))
    with pytest.raises(SPARK_ERRORS) as missing:
        read_df(spark, url, name, valueFormat="protobuf", valueSchema="iot.Reading").collect()
    assert "protobufDescriptorFile" in error_text(missing)


def test_a_json_write_then_a_streaming_read_with_the_schema(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("VS")
    make_stream(url, name)
    df = spark.range(200).selectExpr(f"'{name}.x' AS subject", "CAST(id AS INT) AS id")
    df.write.format("jetstream").mode("append").option("servers", url).option(
        "valueFormat", "json"
    ).save()

    stream = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", name)
        .option("valueFormat", "json")
        .option("startingOffsets", "earliest")
        .schema("seq LONG, value STRUCT<id: INT>")
        .load()
    )
    run_available_now(
        stream.select("seq", "value.id")
        .writeStream.format("memory")
        .queryName(f"q_{name}")
        .option("checkpointLocation", str(tmp_path / "cp"))
    )
    got = spark.sql(f"SELECT id FROM q_{name}").collect()
    assert sorted(r.id for r in got) == list(range(200))


def test_value_options_are_checked_by_name(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("VO")
    make_stream(url, name)
    publish_json(url, name, 3)
    with pytest.raises(SPARK_ERRORS) as wrong:
        read_df(spark, url, name, valueFormat="xml").collect()
    assert "valueFormat" in error_text(wrong)
    with pytest.raises(SPARK_ERRORS) as schema:
        read_df(spark, url, name, valueFormat="json", valueSchema="id INT").collect()
    assert "valueSchema" in error_text(schema)
    df = spark.createDataFrame([(f"{name}.e", b"x", 1)], "subject STRING, data BINARY, id INT")
    with pytest.raises(SPARK_ERRORS) as data:
        df.write.format("jetstream").mode("append").option("servers", url).option(
            "valueFormat", "json"
        ).save()
    assert "'data' column" in error_text(data)
    # What the core refuses to encode is refused on the driver, before any task runs,
    # in the core's words: here a DataFrame with nothing to encode.
    nothing = spark.createDataFrame([(f"{name}.e", "m")], "subject STRING, msg_id STRING")
    with pytest.raises(SPARK_ERRORS) as empty:
        nothing.write.format("jetstream").mode("append").option("servers", url).option(
            "valueFormat", "json"
        ).save()
    assert "no value columns to encode as json" in error_text(empty)
    with ja.connect(url) as client:
        assert client.stream_info(name).state.messages == 3


def test_avro_schema_writes_and_reads_avro_values(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("VAS")
    make_stream(url, name)
    # "double": the columns' own schema would write the long column as an Avro long.
    avro = {"type": "record", "name": "E", "fields": [{"name": "id", "type": "double"}]}
    df = spark.range(3).selectExpr(f"'{name}.e' AS subject", "id")
    df.write.format("jetstream").mode("append").option("servers", url).option(
        "valueFormat", "avro"
    ).option("avroSchema", json.dumps(avro)).save()
    with ja.connect(url) as client:
        payloads = client.read(name).read_all().column("data").to_pylist()
    parsed = fastavro.parse_schema(avro)
    assert sorted(
        fastavro.schemaless_reader(io.BytesIO(p), parsed, parsed)["id"] for p in payloads
    ) == [
        0.0,
        1.0,
        2.0,
    ]

    back = read_df(spark, url, name, valueFormat="avro", avroSchema=json.dumps(avro))
    assert sorted(r.id for r in back.select("value.id").collect()) == [0.0, 1.0, 2.0]


def test_protobuf_message_writes_and_reads_protobuf_values(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Any
) -> None:
    descriptor, pb = compile_proto(tmp_path, "reading", READING_PROTO)
    url, name = shared_nats_server.url, unique_name("VPM")
    make_stream(url, name)
    df = spark.range(3).selectExpr(f"'{name}.r' AS subject", "concat('d', id) AS device")
    proto_options = {
        "valueFormat": "protobuf",
        "protobufMessage": "iot.Reading",
        "protobufDescriptorFile": str(descriptor),
    }
    df.write.format("jetstream").mode("append").option("servers", url).options(
        **proto_options
    ).save()
    with ja.connect(url) as client:
        payloads = client.read(name).read_all().column("data").to_pylist()
    assert sorted(pb.Reading.FromString(p).device for p in payloads) == ["d0", "d1", "d2"]

    back = read_df(spark, url, name, **proto_options)
    assert sorted(r.device for r in back.select("value.device").collect()) == ["d0", "d1", "d2"]
    with pytest.raises(SPARK_ERRORS) as missing:
        read_df(
            spark, url, name, valueFormat="protobuf", protobufDescriptorFile=str(descriptor)
        ).collect()
    assert "protobufMessage" in error_text(missing)


def test_format_options_are_refused_with_another_format_or_with_value_schema(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("VF")
    make_stream(url, name)
    publish_json(url, name, 1)
    avro = json.dumps({"type": "record", "name": "E", "fields": [{"name": "id", "type": "int"}]})

    with pytest.raises(SPARK_ERRORS) as both:
        read_df(spark, url, name, valueFormat="avro", valueSchema=avro, avroSchema=avro).collect()
    assert "'valueSchema' and 'avroSchema'" in error_text(both)
    with pytest.raises(SPARK_ERRORS) as mismatch:
        read_df(spark, url, name, valueFormat="json", avroFraming="confluent").collect()
    assert "option 'avroFraming' is for valueFormat avro; valueFormat is json" in error_text(
        mismatch
    )

    df = spark.createDataFrame([(f"{name}.e", 1)], "subject STRING, id INT")
    with pytest.raises(SPARK_ERRORS) as none_given:
        df.write.format("jetstream").mode("append").option("servers", url).option(
            "protobufMessage", "iot.Reading"
        ).save()
    assert "option 'protobufMessage' is for valueFormat protobuf; no valueFormat is given" in (
        error_text(none_given)
    )
    with pytest.raises(SPARK_ERRORS) as both_written:
        df.write.format("jetstream").mode("append").option("servers", url).options(
            valueFormat="protobuf", valueSchema="iot.Reading", protobufMessage="iot.Reading"
        ).save()
    assert "'valueSchema' and 'protobufMessage'" in error_text(both_written)
    with ja.connect(url) as client:
        assert client.stream_info(name).state.messages == 1
