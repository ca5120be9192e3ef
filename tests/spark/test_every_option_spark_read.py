"""The option probes of spark.read and spark.readStream (the data source driven as Spark
drives it): each option changes what happens, or is refused naming it.
tests/option_probes.py says what a probe is and holds what the probes share;
tests/project/test_every_option.py checks that every option of every entry point has a
probe."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest

from conftest_spark import seqs, spark
from jetstream_arrow.exceptions import (
    BadInputError,
    JetStreamArrowError,
)
from option_probes import (
    VALUE_AVRO,
    Ctx,
    ProbeTable,
    ctx,
    dead_letter_probes,
    json_stream,
    key,
    micro_batch,
    native_spark_probes,
    parsed_options,
    probe_descriptor,
    raises,
    rides_through_a_pause,
    seqs_of,
    spark_connect_probes,
    spark_read,
    stream_reader,
    timed_stream,
    value_ids,
)

__all__ = ["ctx", "spark"]  # fixtures, imported for pytest

probes = ProbeTable()


@probes.effect(("spark.read", "lastPerSubject"))
def _spark_last_per_subject(ctx: Ctx) -> None:
    # m0..m3 alternate between <name>.a and <name>.b: the last of each are m2 and m3.
    name = ctx.stream(count=4, allow_direct=True)
    parts, rows = spark_read(ctx, stream=name, lastPerSubject="true")
    assert len(parts) == 1 and rows.column("data").to_pylist() == [b"m2", b"m3"]
    raises(lambda: spark_read(ctx, stream=name, lastPerSubject="true", startingSequence=2))


@probes.effect(("spark.read", "asOfSequence"))
def _spark_as_of_sequence(ctx: Ctx) -> None:
    name = ctx.stream(count=4, allow_direct=True)
    _, rows = spark_read(ctx, stream=name, lastPerSubject="true", asOfSequence=2)
    assert rows.column("data").to_pylist() == [b"m0", b"m1"]
    raises(lambda: spark_read(ctx, stream=name, asOfSequence=2), BadInputError)


@probes.effect(("spark.read", "asOfTime"))
def _spark_as_of_time(ctx: Ctx) -> None:
    name = ctx.stream(count=2, allow_direct=True)
    when = ctx.rows(name).column("timestamp")[1].as_py().isoformat()
    ctx.fill(name, 2, start=2)
    _, rows = spark_read(ctx, stream=name, lastPerSubject="true", asOfTime=when)
    assert rows.column("data").to_pylist() == [b"m0", b"m1"]


@probes.effect(("spark.read", "kv"))
def _spark_kv_read(ctx: Ctx) -> None:
    bucket = ctx.name("kv").lower()
    ctx.client.create_stream(f"KV_{bucket}", [f"$KV.{bucket}.>"], allow_direct=True)
    ctx.made.append(f"KV_{bucket}")
    ctx.client.write_kv(bucket, pa.table({"key": ["k1", "k2", "k1"], "value": [b"a", b"b", b"c"]}))
    _, rows = spark_read(ctx, kv=bucket)
    assert rows.column_names == ["key", "value", "revision", "operation", "created"]
    assert sorted(zip(rows["key"].to_pylist(), rows["value"].to_pylist(), strict=True)) == [
        ("k1", b"c"),
        ("k2", b"b"),
    ]
    raises(lambda: spark_read(ctx, kv=bucket, subjects="x"), BadInputError)


@probes.effect(("spark.read", "streams"), ("spark.read", "streamPattern"))
def _spark_several_streams(ctx: Ctx) -> None:
    first, second = ctx.stream(count=2), ctx.stream(count=3)
    for options in ({"streams": f"{first},{second}"}, {"streamPattern": f"{first}|{second}"}):
        parts, rows = spark_read(ctx, **options)
        assert sorted({p.stream for p in parts}) == sorted([first, second])
        assert sorted(
            zip(rows["stream"].to_pylist(), rows["seq"].to_pylist(), strict=True)
        ) == sorted([(first, 1), (first, 2), (second, 1), (second, 2), (second, 3)])


@probes.effect(("spark.readStream", "streams"), ("spark.readStream", "streamPattern"))
def _spark_stream_of_several_streams(ctx: Ctx) -> None:
    first, second = ctx.stream(count=2), ctx.stream(count=3)
    for options in ({"streams": f"{first},{second}"}, {"streamPattern": f"{first}|{second}"}):
        start, end, _, got = micro_batch(ctx, startingOffsets="earliest", **options)
        assert seqs(start) == {"streams": {first: {"seq": 1}, second: {"seq": 1}}}
        assert {s: o["seq"] for s, o in end["streams"].items()} == {first: 3, second: 4}
        assert sorted(seqs_of(got)) == [1, 1, 2, 2, 3]


@probes.effect(("spark.read", "servers"))
def _spark_read_servers(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    assert spark_read(ctx, stream=name)[1].num_rows == 2
    raises(lambda: spark_read(ctx, stream=name, servers="nats://127.0.0.1:1", connectTimeout=1))


@probes.effect(("spark.readStream", "servers"))
def _spark_stream_servers(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    assert seqs(stream_reader(ctx, stream=name).initialOffset()) == {"seq": 3}
    dead = stream_reader(ctx, stream=name, servers="nats://127.0.0.1:1", connectTimeout=1)
    raises(dead.initialOffset)


def _read_kind_probes(entry: str) -> None:
    """The options a batch read and a streaming read share, shown on ``entry``."""

    def rows(ctx: Ctx, **options: Any) -> list[int]:
        if entry == "spark.read":
            return seqs_of(spark_read(ctx, **options)[1])
        return seqs_of(micro_batch(ctx, startingOffsets="earliest", **options)[3])

    def parts(ctx: Ctx, **options: Any) -> int:
        if entry == "spark.read":
            return len(spark_read(ctx, **options)[0])
        return len(micro_batch(ctx, startingOffsets="earliest", **options)[2])

    def batches(ctx: Ctx, **options: Any) -> list[pa.RecordBatch]:
        if entry == "spark.read":
            return spark_read(ctx, **options)[1].to_batches()
        return micro_batch(ctx, startingOffsets="earliest", **options)[3]

    def reg(option: str, kind: str = "effect") -> Callable[[Callable[[Ctx], None]], None]:
        def wrap(fn: Callable[[Ctx], None]) -> None:
            probes.register(entry, option, kind, fn)

        return wrap

    @reg("stream")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=3)
        ctx.stream(count=5)
        assert rows(ctx, stream=name) == [1, 2, 3]

    @reg("subjects")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        assert rows(ctx, stream=name, subjects=f"{name}.b") == [2, 4, 6]

    @reg("minPartitions")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        assert parts(ctx, stream=name) == 1
        assert parts(ctx, stream=name, minPartitions=3) == 3

    @reg("maxMessagesPerPartition")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        assert parts(ctx, stream=name, maxMessagesPerPartition=2) == 3

    @reg("includeHeaders")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=1)
        assert "headers" in batches(ctx, stream=name, includeHeaders=True)[0].schema.names
        assert "headers" not in batches(ctx, stream=name)[0].schema.names

    @reg("includeTtl")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=1)
        assert "ttl" in batches(ctx, stream=name, includeTtl=True)[0].schema.names
        assert "ttl" not in batches(ctx, stream=name)[0].schema.names
        # beside a decoded value: a message column, not a field of the value
        typed = ctx.stream(allow_msg_ttl=True)
        ctx.client.publish(
            pa.table(
                {
                    "subject": [f"{typed}.a"],
                    "data": [b'{"x": 1}'],
                    "ttl": pa.array([600], pa.duration("s")),
                }
            )
        )
        got = batches(ctx, stream=typed, includeTtl=True, valueFormat="json")[0]
        assert got.column("ttl").to_pylist() == [timedelta(seconds=600)]
        assert got.column("value").to_pylist() == [{"x": 1}]

    @reg("failOnDataLoss")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        ctx.client.purge_stream(name, up_to_seq=3)
        if entry == "spark.read":
            raises(lambda: rows(ctx, stream=name, startingSequence=1), JetStreamArrowError)
            assert rows(ctx, stream=name, startingSequence=1, failOnDataLoss=False) == [3, 4, 5, 6]
        else:
            reader = stream_reader(ctx, stream=name)
            raises(lambda: reader.partitions({"seq": 1}, {"seq": 7}), JetStreamArrowError)
            lenient = stream_reader(ctx, stream=name, failOnDataLoss=False)
            assert lenient.partitions({"seq": 1}, {"seq": 7})

    @reg("batchRows")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        assert [b.num_rows for b in batches(ctx, stream=name, batchRows=4)] == [4, 2]

    @reg("maxBytes")
    def _(ctx: Ctx) -> None:
        name = ctx.big_stream()
        assert len(batches(ctx, stream=name)) == 1
        assert len(batches(ctx, stream=name, maxBytes=300)) > 1

    probes.refused(entry, "heartbeat", lambda ctx: parsed_options(ctx, entry, heartbeat="0.01"))

    @reg("resumeTimeout")
    def _(ctx: Ctx) -> None:
        rides_through_a_pause(ctx, lambda name, **options: rows(ctx, stream=name, **options))

    @reg("startingSequence")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        if entry == "spark.read":
            assert rows(ctx, stream=name, startingSequence=4) == [4, 5, 6]
        else:
            assert seqs(stream_reader(ctx, stream=name, startingSequence=4).initialOffset()) == {
                "seq": 4
            }

    @reg("startingTime")
    def _(ctx: Ctx) -> None:
        name, middle = timed_stream(ctx)
        if entry == "spark.read":
            assert rows(ctx, stream=name, startingTime=middle.isoformat()) == [4, 5, 6]
        else:
            reader = stream_reader(ctx, stream=name, startingTime=middle.isoformat())
            assert seqs(reader.initialOffset()) == {"seq": 4}


_read_kind_probes("spark.read")
_read_kind_probes("spark.readStream")

probes.refused(
    "spark.read",
    "startingOffsets",
    lambda ctx: spark_read(ctx, stream=ctx.stream(count=1), startingOffsets="latest"),
)


@probes.effect(("spark.read", "endingSequence"))
def _spark_end_seq(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert seqs_of(spark_read(ctx, stream=name, endingSequence=2)[1]) == [1, 2]


@probes.effect(("spark.read", "endingTime"))
def _spark_end_time(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    assert seqs_of(spark_read(ctx, stream=name, endingTime=middle.isoformat())[1]) == [1, 2, 3]


@probes.effect(("spark.readStream", "startingOffsets"))
def _spark_starting_offsets(ctx: Ctx) -> None:
    name = ctx.stream(count=3)
    assert seqs(stream_reader(ctx, stream=name).initialOffset()) == {"seq": 4}
    assert seqs(stream_reader(ctx, stream=name, startingOffsets="earliest").initialOffset()) == {
        "seq": 1
    }


@probes.effect(("spark.readStream", "maxMessagesPerTrigger"))
def _spark_max_per_trigger(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    start, end, _, _ = micro_batch(
        ctx, stream=name, startingOffsets="earliest", maxMessagesPerTrigger=2
    )
    assert (start["seq"], end["seq"]) == (1, 3)


@probes.effect(("spark.readStream", "minMessagesPerTrigger"))
def _spark_min_per_trigger(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    _, held, _, _ = micro_batch(
        ctx, stream=name, startingOffsets="earliest", minMessagesPerTrigger=7
    )
    _, went, _, _ = micro_batch(
        ctx, stream=name, startingOffsets="earliest", minMessagesPerTrigger=6
    )
    assert (held["seq"], went["seq"]) == (1, 7)


@probes.effect(("spark.readStream", "maxTriggerDelay"))
def _spark_max_trigger_delay(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    # No delay: a micro-batch below minMessagesPerTrigger goes at once.
    _, end, _, _ = micro_batch(
        ctx, stream=name, startingOffsets="earliest", minMessagesPerTrigger=7, maxTriggerDelay=0
    )
    assert end["seq"] == 7


@probes.effect(("spark.readStream", "maxBytesPerTrigger"))
def _spark_max_bytes_per_trigger(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    _, end, _, _ = micro_batch(ctx, stream=name, startingOffsets="earliest", maxBytesPerTrigger=1)
    assert end["seq"] == 2  # at least one message


@probes.effect(("spark.readStream", "consumer"))
def _spark_consumer(ctx: Ctx) -> None:
    name = ctx.stream(count=3, allow_direct=True)
    _, end, _, got = micro_batch(ctx, stream=name, consumer="QUERY")
    assert ctx.client.consumer_names(name) == ["QUERY"]
    assert seqs_of(got) == [1, 2, 3] and seqs(end) == {"seq": 4}


@probes.effect(("spark.readStream", "consumerGroup"))
def _spark_consumer_group(ctx: Ctx) -> None:
    # Two queries of one group, as their drivers would run them: a is pinned, commits
    # a micro-batch, plans the next and stops (its driver killed); b stands by, and
    # once the pin timed out takes over from the ack floor: only a's unfinished batch.
    name = ctx.stream(count=6, allow_direct=True)
    group = {"stream": name, "consumer": "SHARED", "consumerGroup": "g", "maxMessagesPerTrigger": 3}
    a = stream_reader(ctx, **group, consumerPinTimeout=1)
    b = stream_reader(ctx, **group)
    a_start = a.initialOffset()
    first = a.latestOffset(a_start, a.getDefaultReadLimit())
    # b starts while a is pinned with a micro-batch in flight: a's acks still count.
    b_start = b.initialOffset()
    assert seqs_of([x for p in a.partitions(a_start, first) for x in a.read(p)]) == [1, 2, 3]
    a.commit(first)
    a.latestOffset(first, a.getDefaultReadLimit())  # claims 4..6, then a stops
    assert b.latestOffset(b_start, b.getDefaultReadLimit()) == b_start  # a holds the pin
    config = ctx.client.consumer_info(name, "SHARED").config
    assert (config.priority_groups, config.priority_policy) == (["g"], "pinned_client")
    time.sleep(2.5)  # past the pin timeout and the standby's next look
    end = b.latestOffset(b_start, b.getDefaultReadLimit())
    assert seqs(end) == {"seq": 7, "first": 4}
    assert seqs_of([x for p in b.partitions(b_start, end) for x in b.read(p)]) == [4, 5, 6]
    # a, back and no longer pinned, plans nothing of what it had claimed: b has it.
    assert a.latestOffset(first, a.getDefaultReadLimit()) == first


@probes.effect(("spark.readStream", "consumerPinTimeout"))
def _spark_consumer_pin_timeout(ctx: Ctx) -> None:
    name = ctx.stream(count=1, allow_direct=True)
    micro_batch(ctx, stream=name, consumer="PINNED", consumerGroup="g", consumerPinTimeout=5)
    assert ctx.client.consumer_info(name, "PINNED").config.priority_timeout == 5
    # Without it, a consumer the source creates moves its pin after 30 s.
    micro_batch(ctx, stream=name, consumer="DEFAULT", consumerGroup="g")
    assert ctx.client.consumer_info(name, "DEFAULT").config.priority_timeout == 30
    # An existing consumer keeps its own: another asked is refused, naming both.
    refused = raises(
        lambda: micro_batch(
            ctx, stream=name, consumer="PINNED", consumerGroup="g", consumerPinTimeout=9
        ),
        BadInputError,
    )
    assert "5" in str(refused) and "consumerPinTimeout" in str(refused)
    refused = raises(lambda: stream_reader(ctx, consumer="X", consumerPinTimeout=5), BadInputError)
    assert "consumerGroup" in str(refused)


@probes.effect(("spark.read", "path"))
def _spark_load_path(ctx: Ctx) -> None:
    name = ctx.stream(count=3)
    spark = ctx.spark()
    df = spark.read.format("jetstream").option("servers", ctx.url).load(name)
    assert sorted(r.seq for r in df.select("seq").collect()) == [1, 2, 3]


@probes.effect(("spark.readStream", "path"))
def _spark_stream_load_path(ctx: Ctx) -> None:
    # Spark hands load(path) to the source as option "path".
    name = ctx.stream(count=3)
    assert seqs(stream_reader(ctx, path=name).initialOffset()) == {"seq": 4}


def _spark_value_probes() -> None:
    id_int = (
        '{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}}]}'
    )
    for entry in ("spark.read", "spark.readStream"):

        def table_of(ctx: Ctx, entry: str = entry, **options: Any) -> pa.Table:
            if entry == "spark.read":
                return spark_read(ctx, **options)[1]
            got = micro_batch(ctx, startingOffsets="earliest", **options)[3]
            return pa.Table.from_batches(got)

        def format_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = json_stream(ctx)
            assert value_ids(table_of(ctx, stream=name, valueFormat="json")) == [0, 1, 2]
            assert "data" in table_of(ctx, stream=name).column_names

        def schema_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = json_stream(ctx)
            got = table_of(ctx, stream=name, valueFormat="json", valueSchema=id_int)
            assert got.schema.field("value").type == pa.struct([("id", pa.int32())])

        def mode_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = json_stream(ctx, [b'{"id": 1}', b"{bad"])
            got = table_of(
                ctx, stream=name, valueFormat="json", valueSchema=id_int, mode="permissive"
            )
            assert got.column("_corrupt_record").to_pylist() == [None, b"{bad"]
            got = table_of(
                ctx, stream=name, valueFormat="json", valueSchema=id_int, mode="dropmalformed"
            )
            assert got.column("seq").to_pylist() == [1]

        def avro_(ctx: Ctx, table_of: Any = table_of) -> None:
            import io

            import fastavro

            out = io.BytesIO()
            fastavro.schemaless_writer(out, fastavro.parse_schema(VALUE_AVRO), {"id": 5})
            name = json_stream(ctx, [b"\x00" + struct.pack(">I", 3) + out.getvalue()])
            got = table_of(
                ctx,
                stream=name,
                valueFormat="avro",
                avroFraming="confluent",
                avroSchemasById=json.dumps({"3": VALUE_AVRO}),
            )
            assert value_ids(got) == [5]

        def protobuf_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = json_stream(ctx, [b"\x08\x05"])
            got = table_of(
                ctx,
                stream=name,
                valueFormat="protobuf",
                valueSchema="probe.V",
                protobufDescriptorFile=probe_descriptor(),
            )
            assert value_ids(got) == [5]

        def avro_schema_(ctx: Ctx, table_of: Any = table_of) -> None:
            # A raw datum carries no schema: without the option there is none to read it as.
            name = json_stream(ctx, [b"\x0a"])  # the zig-zag varint of 5
            got = table_of(ctx, stream=name, valueFormat="avro", avroSchema=json.dumps(VALUE_AVRO))
            assert value_ids(got) == [5]

        def protobuf_message_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = json_stream(ctx, [b"\x08\x05"])
            got = table_of(
                ctx,
                stream=name,
                valueFormat="protobuf",
                protobufMessage="probe.V",
                protobufDescriptorFile=probe_descriptor(),
            )
            assert value_ids(got) == [5]

        probes.register(entry, "protobufDescriptorFile", "effect", protobuf_)
        probes.register(entry, "avroSchema", "effect", avro_schema_)
        probes.register(entry, "protobufMessage", "effect", protobuf_message_)
        probes.register(entry, "valueFormat", "effect", format_)
        probes.register(entry, "valueSchema", "effect", schema_)
        probes.register(entry, "mode", "effect", mode_)
        probes.register(entry, "avroFraming", "effect", avro_)
        probes.register(entry, "avroSchemasById", "effect", avro_)


_spark_value_probes()

spark_connect_probes(probes, ("spark.read", "spark.readStream"))
native_spark_probes(probes, ("spark.read", "spark.readStream"))
dead_letter_probes(probes, ("spark.read", "spark.readStream"))


@pytest.mark.parametrize("probe_key", probes.params(starting_spark={key("spark.read", "path")}))
def test_option(
    probe_key: str, ctx: Ctx, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    probes.run(probe_key, ctx, capsys, request)
