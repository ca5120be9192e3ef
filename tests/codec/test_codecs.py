"""Typed payloads against a real server: JSON, Avro and Arrow values decoded into
columns on every read path, encoded on publish, and what each mode does with a
payload that does not fit. Producers other than this package write some of them
(nats-py JSON, fastavro Avro, Confluent framing)."""

from __future__ import annotations

import asyncio
import io
import json
import struct
import time
from collections.abc import Callable
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import fastavro
import nats
import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError, JetStreamArrowError, MalformedPayloadError
from natspy import with_jetstream
from natsserver import NatsServer, wait_until

pytestmark = pytest.mark.timeout(120)

VALUE = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("score", pa.float64()),
    ]
)


def rows(n: int) -> list[dict[str, object]]:
    return [{"id": i, "name": f"n{i}", "score": i / 4} for i in range(n)]


def publish_raw(client: ja.Client, subject: str, payloads: list[bytes]) -> None:
    table = pa.table({"subject": [subject] * len(payloads), "data": payloads})
    assert client.publish(table).stored == len(payloads)


def values(table: pa.Table) -> list[dict[str, object] | None]:
    return table.column("value").to_pylist()


def test_json_from_nats_py_reads_as_typed_columns_on_every_path(
    client: ja.Client, stream: str, shared_nats_server: object
) -> None:
    url = shared_nats_server.url  # type: ignore[attr-defined]

    async def produce() -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        for row in rows(300):
            await js.publish(f"{stream}.e", json.dumps(row).encode())
        await nc.close()

    asyncio.run(asyncio.wait_for(produce(), 60))
    codec = ja.ValueCodec("json", schema=VALUE)
    table = client.read(stream, codec=codec).read_all()
    assert table.schema.field("value").type == pa.struct(list(VALUE))
    assert table.column_names == ["stream", "subject", "seq", "timestamp", "value"]
    assert values(table) == rows(300)

    flat = client.read(stream, codec=ja.ValueCodec("json", schema=VALUE, flatten=True)).read_all()
    assert flat.column("id").to_pylist() == list(range(300))
    assert flat.schema.field("id").type == pa.int32()

    # Inferred from a sample: JSON numbers are int64 and float64.
    inferred = client.read(stream, codec="json").read_all()
    assert inferred.schema.field("value").type.field("id").type == pa.int64()
    assert [v["name"] for v in values(inferred)] == [r["name"] for r in rows(300)]

    client.create_consumer(stream, durable_name="pull", ack_policy="explicit")
    batch = client.pull_consumer(stream, "pull").fetch(300, expires=5, codec=codec)
    assert values(pa.table(batch.data)) == rows(300)
    batch.ack()

    client.create_consumer(stream, durable_name="more", ack_policy="explicit")
    with client.pull_consumer(stream, "more").messages(codec=codec, batch_rows=300) as messages:
        got: list[object] = []
        for b in messages:
            got.extend(pa.table(b.data).column("value").to_pylist())
            b.ack()
            if len(got) >= 300:
                break
    assert got == rows(300)

    follow = client.ordered_consumer(stream, codec=codec).messages(batch_wait=0.2)
    got = []
    for b in follow:
        got.extend(b.column("value").to_pylist())
        if len(got) >= 300:
            break
    follow.close()  # type: ignore[attr-defined]
    assert got == rows(300)


def test_a_bad_payload_fails_fast_naming_its_sequence_and_consumers_keep_it(
    client: ja.Client, stream: str
) -> None:
    payloads = [json.dumps(r).encode() for r in rows(5)]
    payloads[3] = b'{"id": "three"}'
    publish_raw(client, f"{stream}.e", payloads)
    codec = ja.ValueCodec("json", schema=VALUE)
    with pytest.raises(MalformedPayloadError, match=r"seq 4\b.*id"):
        client.read(stream, codec=codec).read_all()

    # A consumer's batch that fails is not acknowledged: the messages come again.
    client.create_consumer(stream, durable_name="c", ack_policy="explicit", ack_wait=1)
    consumer = client.pull_consumer(stream, "c")
    with pytest.raises(MalformedPayloadError, match=r"seq 4\b"):
        consumer.fetch(5, expires=5, codec=codec)
    again = consumer.fetch(5, expires=5)
    assert pa.table(again.data).column("seq").to_pylist() == [1, 2, 3, 4, 5]


def test_permissive_keeps_the_bytes_and_dropmalformed_terminates_the_message(
    client: ja.Client, stream: str, caplog: pytest.LogCaptureFixture
) -> None:
    payloads = [json.dumps(r).encode() for r in rows(6)]
    payloads[1] = b"not json"
    payloads[4] = b'{"id": 4'
    publish_raw(client, f"{stream}.e", payloads)

    permissive = client.read(
        stream, codec=ja.ValueCodec("json", schema=VALUE, on_malformed="permissive")
    ).read_all()
    got = values(permissive)
    assert got[1] is None and got[4] is None and got[5] == rows(6)[5]
    assert permissive.column("_corrupt_record").to_pylist() == [
        None,
        b"not json",
        None,
        None,
        b'{"id": 4',
        None,
    ]

    drop = ja.ValueCodec("json", schema=VALUE, on_malformed="dropmalformed")
    with caplog.at_level("WARNING", logger="jetstream_arrow"):
        dropped = client.read(stream, codec=drop).read_all()
    assert dropped.column("seq").to_pylist() == [1, 3, 4, 6]
    assert "2 payloads did not decode as json and were left out" in caplog.text

    client.create_consumer(stream, durable_name="d", ack_policy="explicit", ack_wait=1)
    consumer = client.pull_consumer(stream, "d")
    batch = consumer.fetch(6, expires=5, codec=drop)
    assert pa.table(batch.data).column("seq").to_pylist() == [1, 3, 4, 6]
    assert (len(batch), batch.malformed) == (4, 2)
    batch.ack()
    # The dropped ones were terminated: nothing comes again after the ack wait.
    later = consumer.fetch(6, expires=2)
    assert len(later) == 0
    info = client.consumer_info(stream, "d")
    assert info.num_ack_pending == 0


def test_a_table_published_as_json_reads_back_with_its_types(
    client: ja.Client, stream: str
) -> None:
    table = pa.table(
        {
            "subject": [f"{stream}.t"] * 3,
            "day": pa.array([date(2024, 1, 1), None, date(1999, 12, 31)], pa.date32()),
            "price": pa.array([Decimal("1.25"), Decimal("-3.50"), None], pa.decimal128(10, 2)),
            "at": pa.array(
                [datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc), None, None],
                pa.timestamp("us", tz="UTC"),
            ),
            "tags": pa.array([["a", "b"], [], None], pa.list_(pa.string())),
            "point": pa.array(
                [{"x": 1, "y": 2}, None, {"x": 3, "y": None}],
                pa.struct([("x", pa.int16()), ("y", pa.int16())]),
            ),
        }
    )
    schema = table.drop_columns(["subject"]).schema
    result = client.publish(table, codec=ja.ValueCodec("json", schema=schema))
    assert result.stored == 3
    raw = client.read(stream).read_all().column("data").to_pylist()
    assert json.loads(raw[0])["day"] == "2024-01-01"
    back = client.read(stream, codec=ja.ValueCodec("json", schema=schema, flatten=True))
    assert back.read_all().select(schema.names) == table.drop_columns(["subject"])


AVRO_SCHEMA = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "score", "type": "double"},
    ],
}


def fastavro_datum(row: dict[str, object]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO_SCHEMA), row)
    return out.getvalue()


def test_avro_written_by_fastavro_reads_raw_and_confluent_framed(
    client: ja.Client, stream: str
) -> None:
    data = rows(50)
    publish_raw(client, f"{stream}.raw", [fastavro_datum(r) for r in data])
    framed = [b"\x00" + struct.pack(">I", 42) + fastavro_datum(r) for r in data]
    publish_raw(client, f"{stream}.cf", framed)

    raw = client.read(
        stream,
        subjects=[f"{stream}.raw"],
        codec=ja.ValueCodec("avro", avro_schema=AVRO_SCHEMA),
    ).read_all()
    assert values(raw) == data
    confluent = client.read(
        stream,
        subjects=[f"{stream}.cf"],
        codec=ja.ValueCodec("avro", avro_framing="confluent", avro_schemas_by_id={42: AVRO_SCHEMA}),
    ).read_all()
    assert values(confluent) == data
    # An id nobody gave is a malformed payload, by sequence.
    with pytest.raises(MalformedPayloadError, match="seq 51"):
        client.read(
            stream,
            subjects=[f"{stream}.cf"],
            codec=ja.ValueCodec(
                "avro", avro_framing="confluent", avro_schemas_by_id={7: AVRO_SCHEMA}
            ),
        ).read_all()


def test_avro_published_by_the_codec_is_read_by_fastavro(client: ja.Client, stream: str) -> None:
    table = pa.table(
        {
            "subject": [f"{stream}.a"] * 20,
            "id": pa.array(range(20), pa.int32()),
            "name": [f"n{i}" for i in range(20)],
            "score": [i / 4 for i in range(20)],
        }
    )
    codec = ja.ValueCodec(
        "avro", avro_framing="confluent", avro_schema=AVRO_SCHEMA, avro_schema_id=9
    )
    assert client.publish(table, codec=codec).stored == 20
    payloads = client.read(stream).read_all().column("data").to_pylist()
    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    decoded = []
    for p in payloads:
        assert p[:5] == b"\x00" + struct.pack(">I", 9)
        decoded.append(fastavro.schemaless_reader(io.BytesIO(p[5:]), parsed, parsed))
    assert decoded == rows(20)


def test_arrow_ipc_payloads_of_several_rows_each(client: ja.Client, stream: str) -> None:
    def ipc(batch: pa.RecordBatch) -> bytes:
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, batch.schema) as w:
            w.write_batch(batch)
        return sink.getvalue()

    first = pa.record_batch({"k": ["a", "b", "c"], "v": [1, 2, 3]})
    second = pa.record_batch({"k": ["d"], "v": [4]})
    publish_raw(client, f"{stream}.x", [ipc(first), ipc(second)])
    table = client.read(stream, codec="arrow").read_all()
    assert table.column("seq").to_pylist() == [1, 1, 1, 2]
    assert [v["k"] for v in values(table)] == ["a", "b", "c", "d"]


def test_codec_mistakes_name_the_option(
    client: ja.Client, stream: str, unique_name: Callable[[str], str]
) -> None:
    publish_raw(client, f"{stream}.e", [b'{"a": 1}'])
    with pytest.raises(BadInputError, match="option 'format'"):
        client.read(stream, codec="yaml").read_all()
    with pytest.raises(BadInputError, match="option 'on_malformed'"):
        client.read(stream, codec=ja.ValueCodec("json", on_malformed="lenient")).read_all()
    with pytest.raises(BadInputError, match="option 'avro_schema'"):
        client.read(stream, codec="avro").read_all()
    with pytest.raises(BadInputError, match="'data' column"):
        client.publish(
            pa.table({"subject": [f"{stream}.e"], "data": [b"x"], "a": [1]}), codec="json"
        )
    with pytest.raises(BadInputError, match="no value columns"):
        client.publish(pa.table({"subject": [f"{stream}.e"]}), codec="json")


@pytest.mark.parametrize(
    ("setting", "value", "formats"),
    [
        ("schema", VALUE, ("avro", "protobuf")),
        ("sample_rows", 5, ("avro", "protobuf")),
        ("avro_schema", '{"type": "int"}', ("json", "arrow", "protobuf")),
        ("avro_framing", "confluent", ("json", "arrow", "protobuf")),
        ("avro_schemas_by_id", {1: '{"type": "int"}'}, ("json", "arrow", "protobuf")),
        ("avro_schema_id", 1, ("json", "arrow", "protobuf")),
        ("protobuf_descriptor", b"", ("json", "arrow", "avro")),
        ("protobuf_message", "p.M", ("json", "arrow", "avro")),
    ],
)
def test_a_setting_of_another_format_is_refused_not_ignored(
    client: ja.Client, stream: str, setting: str, value: object, formats: tuple[str, ...]
) -> None:
    """A codec's settings are its format's: one given for another format would be
    ignored, so reads, publishes and planners refuse it, naming it and both formats."""
    publish_raw(client, f"{stream}.e", [b'{"id": 1}'])
    for fmt in formats:
        codec = ja.ValueCodec(fmt, **{setting: value})  # type: ignore[arg-type]
        expected = rf"option '{setting}' is for format .* and the codec's format is {fmt}"
        with pytest.raises(BadInputError, match=expected):
            codec.value_schema()
        with pytest.raises(BadInputError, match=expected):
            client.read(stream, codec=codec).read_all()
        with pytest.raises(BadInputError, match=expected):
            client.publish(pa.table({"subject": [f"{stream}.e"], "id": [2]}), codec=codec)
    assert client.stream_info(stream).state.messages == 1


def test_decoded_reads_and_consumers_go_on_through_a_kill_9(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    """Decoding runs as each batch is finished, on the machinery that heals reads and
    consumers: a JSON-decoded range read across a ``kill -9`` and restart comes out
    exactly once and in order, and a decoded durable consumer ends with every message
    delivered and acknowledged."""
    server = nats_server_factory(jetstream_extra="sync_interval: always")
    n = 10_000
    codec = ja.ValueCodec("json", schema=VALUE)
    with ja.connect(server.url, max_reconnects=None, reconnect_delay=0.2) as client:
        client.create_stream("DEC", ["DEC.>"])
        # Every write synced to disk is slow to acknowledge: a small window, a long wait.
        payloads = pa.array([json.dumps(r).encode() for r in rows(n)], pa.binary())
        stored = client.publish(
            pa.table({"data": payloads}),
            subject="DEC.e",
            msg_id_prefix="dec-",
            window=256,
            ack_timeout=30,
        ).stored
        assert stored == n

        def crash() -> None:
            server.kill()
            server.start()

        seen: list[int] = []
        crashed = False
        for batch in client.read("DEC", codec=codec, batch_rows=1_000, heartbeat=1.0):
            seqs = batch.column("seq").to_pylist()
            assert [v["id"] + 1 for v in batch.column("value").to_pylist()] == seqs
            seen.extend(seqs)
            if not crashed and len(seen) >= n // 3:
                crash()
                crashed = True
        assert crashed
        assert seen == list(range(1, n + 1))

        client.create_consumer("DEC", durable_name="D", ack_policy="explicit", ack_wait=3)
        consumer = client.pull_consumer("DEC", "D")
        got: set[int] = set()
        crashed = False
        deadline = time.monotonic() + 90
        while len(got) < n and time.monotonic() < deadline:
            try:
                batch = consumer.fetch(1_000, expires=2, codec=codec)
                ids = [v["id"] for v in pa.table(batch.data).column("value").to_pylist()]
                batch.ack_sync(timeout=5)
            except JetStreamArrowError:
                continue  # the server is down or its answer was lost: fetch again
            got.update(ids)
            if not crashed and len(got) >= n // 2:
                crash()
                crashed = True
        assert crashed
        assert got == set(range(n)), f"{n - len(got)} messages never came"
        wait_until(
            lambda: client.consumer_info("DEC", "D").num_ack_pending == 0,
            30.0,
            "every message of consumer D to be acknowledged",
        )
        assert client.consumer_info("DEC", "D").num_pending == 0


def test_a_json_number_that_would_change_is_malformed_naming_its_field(
    client: ja.Client, stream: str
) -> None:
    """1,500 payloads ``{"qty": 1}`` then ``{"qty": 2.7}``: the schema inferred from
    the first 1,000 says int64, and the decoder underneath would truncate 2.7 to 2.
    Each way of reading says which field instead; with a float schema the value is
    read as sent. A quoted number in an integer field is refused the same way."""
    payloads = [b'{"qty": 1}'] * 1_500 + [b'{"qty": 2.7}']
    client.publish(pa.table({"subject": [f"{stream}.q"] * len(payloads), "data": payloads}))
    with pytest.raises(
        MalformedPayloadError, match=r"seq 1501.*field 'qty': 2\.7 is not an integer"
    ):
        client.read(stream, codec="json").read_all()
    explicit = ja.ValueCodec("json", schema=pa.schema([("qty", pa.int64())]))
    with pytest.raises(MalformedPayloadError, match="field 'qty'"):
        client.read(stream, codec=explicit).read_all()
    dropped = client.read(
        stream, codec=ja.ValueCodec("json", schema=explicit.schema, on_malformed="dropmalformed")
    )
    assert dropped.read_all().num_rows == 1_500
    floats = ja.ValueCodec("json", schema=pa.schema([("qty", pa.float64())]), flatten=True)
    assert client.read(stream, codec=floats).read_all().column("qty").to_pylist()[-2:] == [1.0, 2.7]

    client.publish(pa.table({"subject": [f"{stream}.q"], "data": [b'{"qty": "12"}']}))
    with pytest.raises(MalformedPayloadError, match=r"field 'qty': the string \"12\""):
        client.read(stream, codec=explicit, start_seq=1_502).read_all()


def test_every_value_column_is_encoded_and_nan_and_infinity_come_back(
    client: ja.Client, stream: str
) -> None:
    """Value columns named like message columns (``timestamp``, ``seq``) are values
    of a table that is not a read; NaN and ±Inf are written as JSON strings and read
    back as floats. Checked with Python's own ``json`` on the payloads."""
    when = pa.array([1, 2, 3], pa.timestamp("us", tz="UTC"))
    amount = [1.5, float("nan"), float("-inf")]
    table = pa.table(
        {"subject": [f"{stream}.v"] * 3, "id": [1, 2, 3], "timestamp": when,
         "seq": [7, 8, 9], "amount": amount}
    )  # fmt: skip
    client.publish(table, codec="json")
    stored = client.read(stream).read_all().column("data").to_pylist()
    objects = [json.loads(p) for p in stored]
    assert [sorted(o) for o in objects] == [["amount", "id", "seq", "timestamp"]] * 3
    assert [o["amount"] for o in objects] == [1.5, "NaN", "-Infinity"]
    schema = table.schema.remove(0)
    back = client.read(stream, codec=ja.ValueCodec("json", schema=schema)).read_all()
    values = back.column("value").combine_chunks()
    got = values.field("amount").to_pylist()
    assert got[0] == 1.5 and got[1] != got[1] and got[2] == float("-inf")
    assert values.field("timestamp").to_pylist() == when.to_pylist()
    assert values.field("seq").to_pylist() == [7, 8, 9]


def test_json_integers_beyond_int64_are_read_exactly_and_never_rounded(
    client: ja.Client, stream: str, shared_nats_server: NatsServer
) -> None:
    """Ids beyond int64 in the inference sample: ``arrow-json`` alone infers float64,
    and every id (even 9007199254740993, which fits int64) lost digits. The field is
    inferred as decimal(38, 0), each value as ``json`` reads it. An integer literal a
    float field would round is malformed, naming the field, as ``2.7`` into an
    integer field is."""
    payloads = [
        b'{"id": 9007199254740993}',
        b'{"id": 12345678901234567891}',
        b'{"id": 18446744073709551615}',
        b'{"id": -5}',
        b'{"id": 1}',
    ]

    async def publish(js: Any) -> None:
        for p in payloads:
            await js.publish(f"{stream}.ids", p)

    with_jetstream(shared_nats_server.url, publish)
    read = client.read(stream, codec=ja.ValueCodec("json", flatten=True)).read_all()
    assert read.schema.field("id").type == pa.decimal128(38, 0)
    assert [int(v) for v in read.column("id").to_pylist()] == [
        json.loads(p)["id"] for p in payloads
    ]

    floats = ja.ValueCodec("json", schema=pa.schema([("id", pa.float64())]))
    with pytest.raises(
        MalformedPayloadError, match=r"seq 1\b.*field 'id': the integer 9007199254740993"
    ):
        client.read(stream, codec=floats).read_all()
    # 2^53 and 2^64 are floats exactly: taken.
    whole_floats = [b'{"id": 9007199254740992}', b'{"id": 18446744073709551616}']
    client.publish(pa.table({"subject": [f"{stream}.ids"] * 2, "data": whole_floats}))
    exact = client.read(stream, codec=floats, start_seq=6).read_all()
    assert exact.column("value").to_pylist() == [{"id": 2.0**53}, {"id": 2.0**64}]


def test_json_float_literals_infer_float64_whatever_their_value(
    client: ja.Client, stream: str, shared_nats_server: NatsServer
) -> None:
    """A number written with a point or an exponent is a float, even a whole one at or
    beyond 2^64: ``1.8446744073709552e+19`` once inferred decimal(38, 0) and read as
    18446744073709552000. Only integer literals beyond int64 make a decimal. Each
    payload is read alone (its own subject), so the sample holds only it."""
    payloads = [b'{"f": 1.8446744073709552e+19}', b'{"f": 1e3}']

    async def publish(js: Any) -> None:
        for i, p in enumerate(payloads):
            await js.publish(f"{stream}.floats.{i}", p)

    with_jetstream(shared_nats_server.url, publish)
    for i, p in enumerate(payloads):
        read = client.read(stream, codec="json", subjects=f"{stream}.floats.{i}").read_all()
        assert read.num_rows == 1
        assert read.schema.field("value").type.field("f").type == pa.float64(), p
        got = read.column("value").to_pylist()[0]["f"]
        assert type(got) is float and got == json.loads(p)["f"], p
