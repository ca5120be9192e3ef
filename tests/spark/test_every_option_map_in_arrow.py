"""The option probes of the mapInArrow helpers read_fn and publish_fn: each option changes
what happens, or is refused naming it. tests/option_probes.py says what a probe is and
holds what the probes share; tests/project/test_every_option.py checks that every option
of every entry point has a probe."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from jetstream_arrow.exceptions import (
    JetStreamArrowError,
)
from jetstream_arrow.options import ConnectOptions
from option_probes import (
    CONNECT_COMPANIONS,
    CONNECT_SAMPLES,
    READ_FN,
    VALUE_AVRO,
    Ctx,
    ProbeTable,
    atomic_batch_sizes,
    call_read_fn,
    ctx,
    dead_letter_probes,
    msg_ids,
    native_spark_probes,
    probe_descriptor,
    raises,
    rides_through_a_pause,
    stored_encodings,
    table,
)

__all__ = ["ctx"]  # a fixture, imported for pytest

probes = ProbeTable()


# -- mapInArrow helpers: read_fn and publish_fn, called as Spark calls them on a worker ---


def _publish_fn(ctx: Ctx, rows: pa.Table, **options: Any) -> pa.Table:
    from jetstream_arrow.spark.functions import publish_fn

    fn = publish_fn(servers=ctx.url, **options)
    return pa.Table.from_batches(list(fn(iter(rows.to_batches()))))


def _closure_opts(fn: Callable[..., Any]) -> Any:
    return inspect.getclosurevars(fn).nonlocals["opts"]


def _map_in_arrow_connect_probes() -> None:
    from jetstream_arrow.spark.functions import publish_fn, read_fn
    from jetstream_arrow.spark.option_specs import CONNECT_SPECS

    for name, make in (("read_fn", read_fn), ("publish_fn", publish_fn)):
        for spec in CONNECT_SPECS:
            if spec.python == "servers":
                continue

            def run(ctx: Ctx, make: Callable[..., Any] = make, python: str = spec.python) -> None:
                given = {python: CONNECT_SAMPLES[python]}
                if python in CONNECT_COMPANIONS:
                    given[CONNECT_COMPANIONS[python]] = CONNECT_SAMPLES[CONNECT_COMPANIONS[python]]
                opts = _closure_opts(make(servers=ctx.url, **given))
                assert opts.connect == ConnectOptions(servers=ctx.url, **given)

            probes.register(f"spark.functions.{name}", spec.python, "delegated", run)


_map_in_arrow_connect_probes()
_PUBLISH_FN = "spark.functions.publish_fn"


@probes.effect((READ_FN, "servers"))
def _read_fn_servers(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    assert call_read_fn(ctx, [(name, 1, None)]).num_rows == 2
    raises(
        lambda: call_read_fn(
            ctx, [(name, 1, None)], servers="nats://127.0.0.1:1", connect_timeout=1
        )
    )


@probes.effect((READ_FN, "stream"))
def _read_fn_stream(ctx: Ctx) -> None:
    from jetstream_arrow.spark.functions import read_fn

    name = ctx.stream(count=3)
    fn = read_fn(servers=ctx.url, stream=name)
    ranges = pa.table(
        {"start_seq": pa.array([2], pa.int64()), "end_seq": pa.array([3], pa.int64())}
    )
    got = pa.Table.from_batches(list(fn(iter(ranges.to_batches()))))
    assert got.column("seq").to_pylist() == [2, 3]


@probes.effect((READ_FN, "subjects"))
def _read_fn_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    got = call_read_fn(ctx, [(name, 1, None)], subjects=f"{name}.b")
    assert got.column("seq").to_pylist() == [2, 4, 6]


@probes.effect((READ_FN, "include_headers"))
def _read_fn_headers(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    assert "headers" in call_read_fn(ctx, [(name, 1, None)], include_headers=True).column_names
    assert "headers" not in call_read_fn(ctx, [(name, 1, None)]).column_names


@probes.effect((READ_FN, "include_ttl"))
def _read_fn_ttl(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    assert "ttl" in call_read_fn(ctx, [(name, 1, None)], include_ttl=True).column_names
    assert "ttl" not in call_read_fn(ctx, [(name, 1, None)]).column_names


@probes.effect((READ_FN, "resume_timeout"))
def _read_fn_resume_timeout(ctx: Ctx) -> None:
    def seqs_read(name: str, **options: Any) -> list[int]:
        return call_read_fn(ctx, [(name, 1, None)], **options).column("seq").to_pylist()

    rides_through_a_pause(ctx, seqs_read)


@probes.effect((READ_FN, "batch_rows"))
def _read_fn_batch_rows(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    got = call_read_fn(ctx, [(name, 1, None)], batch_rows=4)
    assert [b.num_rows for b in got.to_batches()] == [4, 2]


@probes.effect((READ_FN, "max_bytes"))
def _read_fn_max_bytes(ctx: Ctx) -> None:
    name = ctx.big_stream()
    assert len(call_read_fn(ctx, [(name, 1, None)]).to_batches()) == 1
    assert len(call_read_fn(ctx, [(name, 1, None)], max_bytes=300).to_batches()) > 1


@probes.effect((READ_FN, "fail_on_data_loss"))
def _read_fn_data_loss(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    ctx.client.purge_stream(name, up_to_seq=3)
    raises(lambda: call_read_fn(ctx, [(name, 1, None)]), JetStreamArrowError)
    got = call_read_fn(ctx, [(name, 1, None)], fail_on_data_loss=False)
    assert got.column("seq").to_pylist() == [3, 4, 5, 6]


probes.refused(READ_FN, "heartbeat", lambda ctx: call_read_fn(ctx, [], heartbeat=0.01))
for _option, _value in (
    ("starting_offsets", "earliest"),
    ("start_seq", 1),
    ("end_seq", 1),
    ("start_time", "2030-01-01T00:00:00+00:00"),
    ("end_time", "2030-01-01T00:00:00+00:00"),
    # Each input row is one range, read by the task that holds it: nothing splits it.
    ("min_partitions", 2),
    ("max_messages_per_partition", 10),
    # A read of the latest message per subject is not a range.
    ("last_per_subject", True),
    ("as_of_seq", 1),
    ("as_of_time", "2030-01-01T00:00:00+00:00"),
    ("kv", "bucket"),
    # Each input row names its stream.
    ("streams", "A,B"),
    ("stream_pattern", "A.*"),
):
    probes.refused(
        READ_FN, _option, lambda ctx, o=_option, v=_value: call_read_fn(ctx, [], **{o: v})
    )


@probes.effect((_PUBLISH_FN, "servers"))
def _publish_fn_servers(ctx: Ctx) -> None:
    name = ctx.stream()
    assert _publish_fn(ctx, table(name, 2)).num_rows == 2
    raises(
        lambda: _publish_fn(ctx, table(name, 2), servers="nats://127.0.0.1:1", connect_timeout=1)
    )


@probes.effect((_PUBLISH_FN, "subject"))
def _publish_fn_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    _publish_fn(ctx, pa.table({"data": [b"x"]}), subject=f"{name}.given")
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.given"]


@probes.effect((_PUBLISH_FN, "msg_id_column"))
def _publish_fn_msg_id_column(ctx: Ctx) -> None:
    name = ctx.stream()
    _publish_fn(
        ctx, table(name, 2).append_column("key", pa.array(["k0", "k1"])), msg_id_column="key"
    )
    assert msg_ids(ctx, name) == ["k0", "k1"]


@probes.effect((_PUBLISH_FN, "write_id"))
def _publish_fn_write_id(ctx: Ctx) -> None:
    name = ctx.stream()
    _publish_fn(ctx, table(name, 2), write_id="probe-write")
    assert msg_ids(ctx, name) == ["probe-write-0-0", "probe-write-0-1"]


# publish_fn acks every input row, so it keeps no position: refused, naming the option.
probes.refused(
    _PUBLISH_FN,
    "exactly_once",
    lambda ctx: _publish_fn(ctx, table(ctx.stream(exactly_once=True), 1), exactly_once=True),
)
probes.refused(
    _PUBLISH_FN,
    "writer_lease",
    lambda ctx: _publish_fn(ctx, table(ctx.stream(exactly_once=True), 1), writer_lease=5),
)


@probes.effect((_PUBLISH_FN, "publish_mode"))
def _publish_fn_mode(ctx: Ctx) -> None:
    name = ctx.stream(allow_batched=True)
    assert _publish_fn(ctx, table(name, 2)).column("seq").to_pylist() == [1, 2]
    assert _publish_fn(ctx, table(name, 2), publish_mode="fast").column("seq").null_count == 2


@probes.effect((_PUBLISH_FN, "compression"))
def _publish_fn_compression(ctx: Ctx) -> None:
    name = ctx.stream()
    rows = pa.table({"subject": [f"{name}.a"], "data": [b"compressible " * 40]})
    assert _publish_fn(ctx, rows, compression="s2").column("seq").to_pylist() == [1]
    assert stored_encodings(ctx, name, 1) == ["s2"]


@probes.effect((_PUBLISH_FN, "kv"))
def _publish_fn_kv(ctx: Ctx) -> None:
    bucket = ctx.name("kv").lower()
    ctx.client.create_stream(f"KV_{bucket}", [f"$KV.{bucket}.>"])
    ctx.made.append(f"KV_{bucket}")
    acks = _publish_fn(ctx, pa.table({"key": ["k"], "value": [b"v"]}), kv=bucket)
    assert acks.column("seq").to_pylist() == [1]


@probes.effect((_PUBLISH_FN, "atomic_batch_rows"))
def _publish_fn_atomic_batch_rows(ctx: Ctx) -> None:
    name = ctx.stream(allow_atomic=True)
    acks = _publish_fn(ctx, table(name, 3), publish_mode="atomic", atomic_batch_rows=2)
    assert acks.column("seq").to_pylist() == [1, 2, 3]
    assert atomic_batch_sizes(ctx, name) == [2, 1]


@probes.effect((_PUBLISH_FN, "expected_stream"), (_PUBLISH_FN, "stream"))
def _publish_fn_expected_stream(ctx: Ctx) -> None:
    name, other = ctx.stream(), ctx.stream()
    for option in ("expected_stream", "stream"):
        assert _publish_fn(ctx, table(name, 1), **{option: name}).column("error").null_count == 1
        acks = _publish_fn(ctx, table(name, 1), **{option: other})
        assert acks.column("error").null_count == 0, acks


def _spark_name(python: str) -> str:
    from jetstream_arrow.spark.option_specs import WRITE_SPECS

    return next(s.spark for s in WRITE_SPECS if s.python == python)


# The helpers take both spellings; an error may name the option in either.
for _option, _bad in (
    ("window", 0),
    ("ack_timeout", 0),
    ("max_retries", -1),
    ("retry_backoff", -1),
):
    probes.refused(
        _PUBLISH_FN,
        _option,
        lambda ctx, o=_option, b=_bad: _publish_fn(ctx, pa.table({}), **{o: b}),
        names=(_option, _spark_name(_option)),
    )


def _map_in_arrow_value_options(spec: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The options of the value format an option of the mapInArrow helpers is for,
    beside it: its own format's (its declaration's ``formats``), else Avro's."""
    if spec.formats == ("protobuf",):
        return {
            "value_format": "protobuf",
            "protobuf_message": values["protobuf_message"],
            "protobuf_descriptor_file": values["protobuf_descriptor_file"](),
        }
    if spec.python == "avro_schema":
        return {"value_format": "avro"}  # valueSchema is its earlier spelling: not both
    return {"value_format": "avro", "value_schema": values["value_schema"]}


def _map_in_arrow_value_probes() -> None:
    from jetstream_arrow.spark.functions import publish_fn, read_fn
    from jetstream_arrow.spark.option_specs import READ_SPECS, WRITE_SPECS

    values = {
        "value_format": "avro",
        "value_schema": json.dumps(VALUE_AVRO),
        "on_malformed": "permissive",
        "avro_schema": json.dumps(VALUE_AVRO),
        "avro_framing": "confluent",
        "avro_schemas_by_id": json.dumps({"1": VALUE_AVRO}),
        "avro_schema_id": 1,
        "protobuf_message": "probe.V",
        "protobuf_descriptor_file": probe_descriptor,
    }
    for name, make, specs, fields in (
        (
            "read_fn",
            read_fn,
            READ_SPECS,
            (
                "value_format",
                "value_schema",
                "on_malformed",
                "avro_schema",
                "avro_framing",
                "avro_schemas_by_id",
                "protobuf_message",
                "protobuf_descriptor_file",
            ),
        ),
        (
            "publish_fn",
            publish_fn,
            WRITE_SPECS,
            (
                "value_format",
                "value_schema",
                "avro_schema",
                "avro_framing",
                "avro_schema_id",
                "protobuf_message",
                "protobuf_descriptor_file",
            ),
        ),
    ):
        for python in fields:
            spec = next(s for s in specs if s.python == python)

            def run(
                ctx: Ctx, make: Callable[..., Any] = make, python: str = python, spec: Any = spec
            ) -> None:
                # The helper holds the options the data source would: its tasks read
                # and write through the same read_range and publish_batches.
                want = values[python]
                want = want() if callable(want) else want
                given = _map_in_arrow_value_options(spec, values)
                given[python] = want
                if given.get("avro_framing") == "confluent" and make is read_fn:
                    given["avro_schemas_by_id"] = values["avro_schemas_by_id"]
                opts = _closure_opts(make(servers=ctx.url, **given))
                assert getattr(opts, python) == want

            probes.register(f"spark.functions.{name}", python, "delegated", run)


_map_in_arrow_value_probes()

dead_letter_probes(probes, (READ_FN,))


native_spark_probes(probes, ("spark.functions.read_fn", "spark.functions.publish_fn"))


@pytest.mark.parametrize("probe_key", probes.params())
def test_option(
    probe_key: str, ctx: Ctx, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    probes.run(probe_key, ctx, capsys, request)
