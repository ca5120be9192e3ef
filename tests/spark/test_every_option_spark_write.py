"""The option probes of df.write and df.writeStream (the data source driven as Spark drives
it): each option changes what happens, or is refused naming it. tests/option_probes.py
says what a probe is and holds what the probes share; tests/project/test_every_option.py
checks that every option of every entry point has a probe."""

from __future__ import annotations

import dataclasses
import json
import struct
from typing import Any

import pyarrow as pa
import pytest

from conftest_spark import SPARK_ERRORS, spark
from jetstream_arrow.exceptions import (
    BadInputError,
    ConnectionFailedError,
    PublishError,
)
from jetstream_arrow.kv import KvColumns
from option_probes import (
    VALUE_AVRO,
    Ctx,
    ProbeTable,
    atomic_batch_sizes,
    ctx,
    data_source,
    key,
    msg_ids,
    must_refuse,
    native_spark_probes,
    parsed_options,
    probe_descriptor,
    raises,
    spark_connect_probes,
    spark_write,
    stored_encodings,
    stream_writer,
    table,
    write_schema,
)

__all__ = ["ctx", "spark"]  # fixtures, imported for pytest

probes = ProbeTable()


@probes.effect(("df.write", "servers"))
def _spark_write_servers(ctx: Ctx) -> None:
    name = ctx.stream()
    assert spark_write(ctx, table(name, 2)).stored == 2
    raises(lambda: spark_write(ctx, table(name, 2), servers="nats://127.0.0.1:1", connectTimeout=1))


@probes.effect(("df.writeStream", "servers"))
def _spark_stream_write_servers(ctx: Ctx) -> None:
    # The driver looks the stream up before the query starts: on the server given.
    name = ctx.stream()
    stream_writer(ctx, table(name, 1), stream=name)
    raises(
        lambda: stream_writer(
            ctx, table(name, 1), stream=name, servers="nats://127.0.0.1:1", connectTimeout=1
        ),
        ConnectionFailedError,
    )


@probes.effect(("df.write", "path"))
def _spark_save_path(ctx: Ctx) -> None:
    name = ctx.stream()
    spark = ctx.spark()
    df = spark.createDataFrame([(f"{name}.a", b"x")], "subject string, data binary")
    df.write.format("jetstream").option("servers", ctx.url).mode("append").save(name)
    assert ctx.client.stream_info(name).state.messages == 1
    with pytest.raises((BadInputError, *SPARK_ERRORS)) as raised:
        df.write.format("jetstream").option("servers", ctx.url).mode("append").save(f"{name}_NONE")
    assert f"{name}_NONE" in str(raised.value)


def _expected_stream_probe(entry: str, option: str) -> None:
    def run(ctx: Ctx) -> None:
        # The driver checks that the stream named exists; another name fails the write.
        name = ctx.stream()
        other = ctx.stream()
        rows = table(name, 1)
        if entry == "df.write":
            assert spark_write(ctx, rows, **{option: name}).stored == 1
            raises(lambda: spark_write(ctx, rows, **{option: other}), PublishError)
        else:
            stream_writer(ctx, rows, **{option: name})
        raises(
            lambda: (
                data_source(ctx, **{option: f"{name}_NONE"}).writer(write_schema(rows), False)
                if entry == "df.write"
                else stream_writer(ctx, rows, **{option: f"{name}_NONE"})
            ),
            BadInputError,
        )

    probes.register(entry, option, "effect", run)


for _entry in ("df.write", "df.writeStream"):
    _expected_stream_probe(_entry, "expectedStream")
    _expected_stream_probe(_entry, "stream")
    for _option, _bad in (
        ("ackWindow", 0),
        ("ackTimeout", 0),
        ("maxRetries", -1),
        ("retryBackoff", -1),
    ):
        probes.refused(
            _entry,
            _option,
            lambda ctx, e=_entry, o=_option, b=_bad: parsed_options(ctx, e, **{o: b}),
        )


@probes.effect(("df.writeStream", "path"))
def _spark_start_path(ctx: Ctx) -> None:
    # Spark hands start(path) to the sink as option "path": the stream it must exist.
    name = ctx.stream()
    assert stream_writer(ctx, table(name, 1), path=name).opts.expected_stream == name
    raises(lambda: stream_writer(ctx, table(name, 1), path=f"{name}_NONE"), BadInputError)


@probes.effect(("df.write", "subject"))
def _spark_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(ctx, pa.table({"data": [b"x"]}), subject=f"{name}.given")
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.given"]


@probes.effect(("df.write", "msgIdColumn"))
def _spark_msg_id_column(ctx: Ctx) -> None:
    name = ctx.stream()
    rows = table(name, 2).append_column("key", pa.array(["k0", "k1"]))
    spark_write(ctx, rows, msgIdColumn="key")
    assert msg_ids(ctx, name) == ["k0", "k1"]


@probes.effect(("df.write", "writeId"))
def _spark_write_id(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(ctx, table(name, 2), writeId="probe-write")
    assert all(i.startswith("probe-write-") for i in msg_ids(ctx, name))


@probes.effect(("df.write", "exactlyOnce"), ("df.writeStream", "exactlyOnce"))
def _spark_exactly_once(ctx: Ctx) -> None:
    # Into a stream that holds positions a task keeps one (by default, and when
    # asked); with false none. Into a stream that cannot, true is refused.
    rows_of = {}
    for given in ({}, {"exactlyOnce": "true"}, {"exactlyOnce": "false"}):
        name = ctx.stream(exactly_once=True)
        assert spark_write(ctx, table(name, 2), stream=name, writeId="eo", **given).stored == 2
        rows_of[given.get("exactlyOnce", "default")] = ctx.client.stream_info(name).state.messages
        kept = stream_writer(ctx, table(name, 1), stream=name, **given).exactly_once
        assert kept is (given.get("exactlyOnce") != "false")
    # Two rows, and with a position the writer's one (rolled up to its newest).
    assert rows_of == {"default": 3, "true": 3, "false": 2}
    plain = ctx.stream()
    for entry in ("df.write", "df.writeStream"):
        must_refuse(
            lambda e=entry: parsed_options(ctx, e, stream=plain, exactlyOnce="true"),
            "exactlyOnce",
            "exactly once into a stream without positions",
        )


@probes.effect(("df.write", "writerLease"), ("df.writeStream", "writerLease"))
def _spark_writer_lease(ctx: Ctx) -> None:
    import json

    from jetstream_arrow.positions import position_subject

    name = ctx.stream(exactly_once=True)
    spark_write(ctx, table(name, 2), stream=name, writeId="lease", writerLease=7)
    # The task's position (writer "lease-0-": its msg id prefix) carries the lease.
    position = ctx.client.get_message(name, last_by_subject=position_subject(name, "lease-0-"))
    assert json.loads(position.data)["lease"] == 7.0
    assert parsed_options(ctx, "df.writeStream", stream=name, writerLease=7).writer_lease == 7.0
    for entry in ("df.write", "df.writeStream"):
        raises(lambda e=entry: parsed_options(ctx, e, stream=name, writerLease=0), BadInputError)


@probes.effect(("df.write", "publishMode"))
def _spark_publish_mode(ctx: Ctx) -> None:
    name = ctx.stream()
    assert spark_write(ctx, table(name, 2)).stored == 2
    raises(lambda: spark_write(ctx, table(name, 2), publishMode="fast"), PublishError)
    raises(lambda: spark_write(ctx, table(name, 2), publishMode="atomic"), PublishError)


@probes.effect(("df.write", "compression"))
def _spark_compression(ctx: Ctx) -> None:
    name = ctx.stream()
    rows = pa.table({"subject": [f"{name}.a"], "data": [b"compressible " * 40]})
    assert spark_write(ctx, rows, compression="gzip").stored == 1
    assert stored_encodings(ctx, name, 1) == ["gzip"]
    read = ctx.rows(name)
    assert read.column("data").to_pylist() == [b"compressible " * 40]
    raises(lambda: spark_write(ctx, rows, compression="lz4"), BadInputError)


@probes.effect(("df.write", "kv"))
def _spark_kv(ctx: Ctx) -> None:
    bucket = ctx.name("kv").lower()
    ctx.client.create_stream(f"KV_{bucket}", [f"$KV.{bucket}.>"])
    ctx.made.append(f"KV_{bucket}")
    rows = pa.table({"key": ["k1", "k2"], "value": [b"1", b"2"]})
    assert spark_write(ctx, rows, kv=bucket).stored == 2
    assert ctx.rows(f"KV_{bucket}").column("subject").to_pylist() == [
        f"$KV.{bucket}.k1",
        f"$KV.{bucket}.k2",
    ]
    raises(
        lambda: data_source(ctx, kv=bucket, subject="x").writer(write_schema(rows), False),
        BadInputError,
    )
    # No KV client decompresses a value.
    raises(
        lambda: data_source(ctx, kv=bucket, compression="zstd").writer(write_schema(rows), False),
        BadInputError,
    )


@probes.effect(("df.write", "atomicBatchRows"))
def _spark_atomic_batch_rows(ctx: Ctx) -> None:
    name = ctx.stream(allow_atomic=True)
    spark_write(ctx, table(name, 5), publishMode="atomic", atomicBatchRows=2)
    assert atomic_batch_sizes(ctx, name) == [2, 2, 1]


def _stream_write_delegated(option: str, value: Any) -> None:
    def run(ctx: Ctx) -> None:
        # A streaming write's task publishes like a batch write's (publish_task) with
        # the options parsed the same way: shown on df.write.
        name = ctx.stream()
        rows = pa.table({"subject": [f"{name}.a"], "data": [b"x"], "key": ["k"]})
        batch = data_source(ctx, **{option: value}).writer(write_schema(rows), False)
        stream = stream_writer(ctx, rows, **{option: value})
        assert stream.opts.publisher_kwargs() == batch.opts.publisher_kwargs()
        assert (stream.opts.subject, stream.opts.msg_id_column) == (
            batch.opts.subject,
            batch.opts.msg_id_column,
        )
        assert stream.columns == batch.columns
        del name

    probes.register("df.writeStream", option, "delegated", run)


_stream_write_delegated("subject", "probe.subject")
_stream_write_delegated("msgIdColumn", "key")
_stream_write_delegated("publishMode", "fast")
_stream_write_delegated("atomicBatchRows", 7)
_stream_write_delegated("compression", "zstd")


@probes.effect(("df.writeStream", "kv"))
def _stream_write_kv(ctx: Ctx) -> None:
    bucket = ctx.name("kv").lower()
    ctx.client.create_stream(f"KV_{bucket}", [f"$KV.{bucket}.>"])
    ctx.made.append(f"KV_{bucket}")
    rows = pa.table({"key": ["k"], "value": [b"v"]})
    writer = stream_writer(ctx, rows, kv=bucket)
    assert (writer.opts.kv, writer.opts.expected_stream) == (bucket, f"KV_{bucket}")
    assert isinstance(writer.columns, KvColumns) and writer.columns.bucket == bucket


def _value_rows(name: str) -> pa.Table:
    return pa.table({"subject": [f"{name}.v"] * 2, "id": pa.array([1, 2], pa.int32())})


@probes.effect(("df.write", "valueFormat"))
def _write_value_format(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(ctx, _value_rows(name), valueFormat="json")
    assert ctx.rows(name).column("data").to_pylist() == [b'{"id":1}', b'{"id":2}']


@probes.effect(
    ("df.write", "valueSchema"), ("df.write", "avroFraming"), ("df.write", "avroSchemaId")
)
def _write_avro(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(
        ctx,
        _value_rows(name),
        valueFormat="avro",
        valueSchema=json.dumps(VALUE_AVRO),
        avroFraming="confluent",
        avroSchemaId=11,
    )
    payloads = ctx.rows(name).column("data").to_pylist()
    # A zero byte, the id, then the zig-zag varint of the int.
    assert payloads == [b"\x00\x00\x00\x00\x0b\x02", b"\x00\x00\x00\x00\x0b\x04"]


@probes.effect(("df.write", "avroSchema"))
def _write_avro_schema(ctx: Ctx) -> None:
    # The columns' own schema would write the int column as an Avro int (a varint);
    # the schema given writes it as a double.
    name = ctx.stream()
    double = {**VALUE_AVRO, "fields": [{"name": "id", "type": "double"}]}
    spark_write(ctx, _value_rows(name), valueFormat="avro", avroSchema=json.dumps(double))
    payloads = ctx.rows(name).column("data").to_pylist()
    assert payloads == [struct.pack("<d", 1.0), struct.pack("<d", 2.0)]


@probes.effect(("df.write", "protobufMessage"))
def _write_protobuf_message(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(
        ctx,
        _value_rows(name),
        valueFormat="protobuf",
        protobufMessage="probe.V",
        protobufDescriptorFile=probe_descriptor(),
    )
    assert ctx.rows(name).column("data").to_pylist() == [b"\x08\x01", b"\x08\x02"]


@probes.effect(("df.write", "protobufDescriptorFile"))
def _write_protobuf(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(
        ctx,
        _value_rows(name),
        valueFormat="protobuf",
        valueSchema="probe.V",
        protobufDescriptorFile=probe_descriptor(),
    )
    # Field 1 as a varint: the tag byte 0x08, then the value.
    assert ctx.rows(name).column("data").to_pylist() == [b"\x08\x01", b"\x08\x02"]


def _stream_write_value_delegated(option: str, value: Any, **beside: Any) -> None:
    """``beside``: the options the value format needs beside ``option`` (default: an
    Avro write, which needs none)."""

    def run(ctx: Ctx) -> None:
        # A streaming write's task encodes like a batch write's: the same parsed options.
        rows = _value_rows("probe")
        given = {"valueFormat": "avro", **beside, option: value() if callable(value) else value}
        given = {k: v() if callable(v) else v for k, v in given.items()}
        batch = data_source(ctx, **given).writer(write_schema(rows), False)
        stream = stream_writer(ctx, rows, **given)
        assert stream.opts == dataclasses.replace(batch.opts, write_id=stream.opts.write_id)
        assert stream.columns == batch.columns

    probes.register("df.writeStream", option, "delegated", run)


_stream_write_value_delegated("valueFormat", "avro")
_stream_write_value_delegated("valueSchema", json.dumps(VALUE_AVRO))
_stream_write_value_delegated("avroSchema", json.dumps(VALUE_AVRO))
_stream_write_value_delegated("avroFraming", "single-object")
_stream_write_value_delegated("avroSchemaId", 4)
_stream_write_value_delegated(
    "protobufDescriptorFile", probe_descriptor, valueFormat="protobuf", protobufMessage="probe.V"
)
# An option of one value format given with another is refused when the query is
# planned, as any option the codec would not use (its arrival in the stream writer is
# shown above, beside protobufDescriptorFile).
probes.refused(
    "df.writeStream",
    "protobufMessage",
    lambda ctx: stream_writer(
        ctx, _value_rows("probe"), valueFormat="avro", protobufMessage="probe.V"
    ),
)

spark_connect_probes(probes, ("df.write", "df.writeStream"))
native_spark_probes(probes, ("df.write", "df.writeStream"))


@pytest.mark.parametrize("probe_key", probes.params(starting_spark={key("df.write", "path")}))
def test_option(
    probe_key: str, ctx: Ctx, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    probes.run(probe_key, ctx, capsys, request)
