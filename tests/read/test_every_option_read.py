"""The option probes of Client.read, Client.first_seq_at, Client.read_counters and ordered
consumers: each option changes what happens, or is refused naming it.
tests/option_probes.py says what a probe is and holds what the probes share;
tests/project/test_every_option.py checks that every option of every entry point has a
probe."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow import (
    OrderedConsumer,
    _core,
)
from jetstream_arrow.exceptions import (
    BadInputError,
)
from option_probes import (
    Ctx,
    ProbeTable,
    ctx,
    heartbeat_zero_refused,
    json_stream,
    raises,
    timed_stream,
    value_ids,
)

__all__ = ["ctx"]  # a fixture, imported for pytest

probes = ProbeTable()


# == Python: reading ===========================================================================


@probes.effect(("Client.read", "options"))
def _read_options(ctx: Ctx) -> None:
    name = ctx.stream(6)
    options = ja.ReadOptions(start_seq=3, batch_rows=2)
    assert ctx.rows(name, options=options).column("seq").to_pylist() == [3, 4, 5, 6]
    assert ctx.rows(name, options=options, end_seq=4).column("seq").to_pylist() == [3, 4]


@probes.effect(("Client.read", "start_seq"))
def _read_start(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert ctx.rows(name, start_seq=4).column("seq").to_pylist() == [4, 5, 6]


@probes.effect(("Client.read", "end_seq"))
def _read_end(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert ctx.rows(name, end_seq=2).column("seq").to_pylist() == [1, 2]


@probes.effect(("Client.read", "subjects"))
def _read_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert ctx.rows(name, subjects=f"{name}.b").column("seq").to_pylist() == [2, 4, 6]


@probes.effect(("Client.read", "start_time"))
def _read_start_time(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    assert ctx.rows(name, start_time=middle).column("seq").to_pylist() == [4, 5, 6]


@probes.effect(("Client.read", "end_time"))
def _read_end_time(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    assert ctx.rows(name, end_time=middle).column("seq").to_pylist() == [1, 2, 3]


@probes.effect(("Client.read", "include_headers"))
def _read_headers(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    assert "headers" not in ctx.rows(name).column_names
    assert "headers" in ctx.rows(name, include_headers=True).column_names


@probes.effect(("Client.read", "payload_views"))
def _read_payload_views(ctx: Ctx) -> None:
    name = ctx.stream(count=3)
    copied, viewed = ctx.rows(name), ctx.rows(name, payload_views=True)
    assert copied.schema.field("data").type == pa.binary()
    assert viewed.schema.field("data").type == pa.binary_view()
    assert viewed.column("data").to_pylist() == copied.column("data").to_pylist()


@probes.effect(("Client.read", "include_ttl"))
def _read_ttl(ctx: Ctx) -> None:
    name = ctx.stream(allow_msg_ttl=True)
    ctx.client.publish(
        pa.table(
            {"subject": [f"{name}.a"], "data": [b"x"], "ttl": pa.array([60], pa.duration("s"))}
        )
    )
    assert "ttl" not in ctx.rows(name).column_names
    assert ctx.rows(name, include_ttl=True).column("ttl").to_pylist()[0].total_seconds() == 60


@probes.effect(("Client.read", "include_positions"))
def _read_positions(ctx: Ctx) -> None:
    name = ctx.name()
    position = f"{_core.POSITION_SUBJECT_PREFIX}{name}.w1"
    ctx.client.create_stream(name, [f"{name}.>", f"{_core.POSITION_SUBJECT_PREFIX}{name}.>"])
    ctx.made.append(name)
    ctx.client.publish(pa.table({"subject": [f"{name}.a", position], "data": [b"x", b"{}"]}))
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.a"]
    shown = ctx.rows(name, include_positions=True).column("subject").to_pylist()
    assert shown == [f"{name}.a", position]


@probes.effect(("Client.read", "batch_rows"))
def _read_batch_rows(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert [b.num_rows for b in ctx.client.read(name, batch_rows=4)] == [4, 2]


@probes.effect(("Client.read", "max_bytes"))
def _read_max_bytes(ctx: Ctx) -> None:
    name = ctx.big_stream()
    sizes = [b.num_rows for b in ctx.client.read(name, max_bytes=300, method="consumer")]
    assert len(sizes) > 1 and sum(sizes) == 6, sizes
    assert [b.num_rows for b in ctx.client.read(name, method="consumer")] == [6]


probes.refused("Client.read", "heartbeat", lambda ctx: ctx.client.read(ctx.stream(), heartbeat=-1))
probes.refused(
    "Client.read", "resume_timeout", lambda ctx: ctx.client.read(ctx.stream(), resume_timeout=-1)
)


@probes.effect(("Client.read", "method"))
def _read_method(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    assert ctx.rows(name, method="consumer").num_rows == 2
    raises(lambda: ctx.rows(name, method="direct"), BadInputError)


@probes.effect(("Client.read", "last_per_subject"))
def _read_last_per_subject(ctx: Ctx) -> None:
    # m0..m3 alternate between <name>.a and <name>.b: the last of each are m2 and m3.
    name = ctx.stream(count=4, allow_direct=True)
    assert ctx.rows(name, last_per_subject=True).column("data").to_pylist() == [b"m2", b"m3"]
    raises(lambda: ctx.rows(name, last_per_subject=True, start_seq=1), BadInputError)


@probes.effect(("Client.read", "as_of_seq"))
def _read_as_of_seq(ctx: Ctx) -> None:
    name = ctx.stream(count=4, allow_direct=True)
    rows = ctx.rows(name, last_per_subject=True, as_of_seq=2)
    assert rows.column("data").to_pylist() == [b"m0", b"m1"]
    raises(lambda: ctx.rows(name, as_of_seq=2), BadInputError)


@probes.effect(("Client.read", "as_of_time"))
def _read_as_of_time(ctx: Ctx) -> None:
    name = ctx.stream(count=2, allow_direct=True)
    when = ctx.rows(name).column("timestamp")[1].as_py()
    ctx.fill(name, 2, start=2)
    rows = ctx.rows(name, last_per_subject=True, as_of_time=when)
    assert rows.column("data").to_pylist() == [b"m0", b"m1"]
    raises(lambda: ctx.rows(name, as_of_time=when), BadInputError)


# Its deadline under a paused server: tests/faults/test_deadlines.py ("first_seq_at").
probes.refused(
    "Client.first_seq_at",
    "resume_timeout",
    lambda ctx: ctx.client.first_seq_at(ctx.stream(), 0, resume_timeout=-1),
)


@probes.effect(("Client.first_seq_at", "subjects"))
def _first_seq_at_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert ctx.client.first_seq_at(name, 0) == 1
    assert ctx.client.first_seq_at(name, 0, subjects=f"{name}.b") == 2


@probes.effect(("Client.read_counters", "subjects"))
def _read_counters_subjects(ctx: Ctx) -> None:
    name = ctx.stream(allow_msg_counter=True)
    ctx.client.publish(
        pa.table({"subject": [f"{name}.a", f"{name}.b"], "increment": pa.array([2, 3])})
    )
    every = ctx.client.read_counters(name)
    assert every.column("subject").to_pylist() == [f"{name}.a", f"{name}.b"]
    only_b = ctx.client.read_counters(name, subjects=f"{name}.b")
    assert only_b.column("value").to_pylist() == [3]


def _first_batch(ordered: OrderedConsumer, **options: Any) -> pa.RecordBatch:
    batches = ordered.messages(batch_wait=0.2, **options)
    try:
        return next(batches)
    finally:
        batches.close()  # type: ignore[attr-defined]


@probes.effect(("Client.ordered_consumer", "subjects"))
def _ordered_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    got = _first_batch(ctx.client.ordered_consumer(name, f"{name}.b"))
    assert got.column("seq").to_pylist() == [2, 4]


@probes.effect(("Client.ordered_consumer", "start_seq"))
def _ordered_start_seq(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert (
        _first_batch(ctx.client.ordered_consumer(name, start_seq=3)).column("seq")[0].as_py() == 3
    )


@probes.effect(("Client.ordered_consumer", "start_time"))
def _ordered_start_time(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    first = _first_batch(ctx.client.ordered_consumer(name, start_time=middle))
    assert first.column("seq")[0].as_py() == 4


@probes.effect(("Client.ordered_consumer", "deliver"))
def _ordered_deliver(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    batches = ctx.client.ordered_consumer(name, deliver="new").messages(batch_wait=0.2)
    try:
        ctx.fill(name, 1, start=2)
        assert next(batches).column("seq").to_pylist() == [3]
    finally:
        batches.close()  # type: ignore[attr-defined]


def _ordered_heartbeat(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    raises(lambda: ctx.client.ordered_consumer(name, heartbeat=-1).messages(), BadInputError)
    heartbeat_zero_refused(
        lambda: _first_batch(ctx.client.ordered_consumer(name, heartbeat=0, resume_timeout=0))
    )


probes.register("Client.ordered_consumer", "heartbeat", "refusal", _ordered_heartbeat)
probes.refused(
    "Client.ordered_consumer",
    "resume_timeout",
    lambda ctx: ctx.client.ordered_consumer(ctx.stream(), resume_timeout=-1).messages(),
)


@probes.effect(("OrderedConsumer.messages", "batch_rows"))
def _ordered_batch_rows(ctx: Ctx) -> None:
    name = ctx.stream(count=5)
    assert _first_batch(ctx.client.ordered_consumer(name), batch_rows=2).num_rows == 2


probes.refused(
    "OrderedConsumer.messages",
    "batch_wait",
    lambda ctx: ctx.client.ordered_consumer(ctx.stream()).messages(batch_wait=-1),
)


@probes.effect(("OrderedConsumer.messages", "max_bytes"))
def _ordered_max_bytes(ctx: Ctx) -> None:
    name = ctx.big_stream()
    assert _first_batch(ctx.client.ordered_consumer(name)).num_rows == 6
    assert _first_batch(ctx.client.ordered_consumer(name), max_bytes=300).num_rows < 6


@probes.effect(("OrderedConsumer.messages", "include_headers"))
def _ordered_headers(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    got = _first_batch(ctx.client.ordered_consumer(name), include_headers=True)
    assert "headers" in got.schema.names
    assert "headers" not in _first_batch(ctx.client.ordered_consumer(name)).schema.names


@probes.effect(("Client.read", "codec"))
def _read_codec(ctx: Ctx) -> None:
    name = json_stream(ctx)
    assert value_ids(ctx.client.read(name, codec="json").read_all()) == [0, 1, 2]
    assert "value" not in ctx.rows(name).column_names


@probes.effect(("Client.ordered_consumer", "codec"))
def _ordered_codec(ctx: Ctx) -> None:
    name = json_stream(ctx)
    assert value_ids(_first_batch(ctx.client.ordered_consumer(name, codec="json"))) == [0, 1, 2]


@pytest.mark.parametrize("probe_key", probes.params())
def test_option(
    probe_key: str, ctx: Ctx, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    probes.run(probe_key, ctx, capsys, request)
