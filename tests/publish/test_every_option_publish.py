"""The option probes of Client.publisher, Client.publish and a Publisher's calls: each
option changes what happens, or is refused naming it. tests/option_probes.py says what a
probe is and holds what the probes share; tests/project/test_every_option.py checks that
every option of every entry point has a probe."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import (
    BadInputError,
    PublishError,
)
from option_probes import (
    Ctx,
    ProbeTable,
    atomic_batch_sizes,
    ctx,
    msg_ids,
    raises,
    stored_encodings,
    table,
)

__all__ = ["ctx"]  # a fixture, imported for pytest

probes = ProbeTable()


# == Python: publishing ========================================================================


def _publish(ctx: Ctx, entry: str, data: Any, **options: Any) -> ja.PublishResult:
    """Publish through ``Client.publish`` or through a ``Client.publisher``."""
    if entry == "Client.publish":
        return ctx.client.publish(data, **options)
    with ctx.client.publisher(**options) as publisher:
        return publisher.publish(data)


def _publisher_probes(entry: str) -> None:
    def reg(option: str) -> Callable[[Callable[[Ctx, str], None]], None]:
        def wrap(fn: Callable[[Ctx, str], None]) -> None:
            probes.register(entry, option, "effect", lambda ctx: fn(ctx, entry))

        return wrap

    @reg("subject")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        _publish(ctx, entry, pa.table({"data": [b"x"]}), subject=f"{name}.given")
        assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.given"]

    @reg("window")
    def _(ctx: Ctx, entry: str) -> None:
        # With on_full="fail" the window is what is let through before the first ack.
        name = ctx.stream()
        small = _publish(
            ctx, entry, table(name, 50), window=1, on_full="fail", raise_on_error=False
        )
        large = _publish(ctx, entry, table(name, 50), on_full="fail", raise_on_error=False)
        assert small.failed > 0 and large.failed == 0, (small, large)
        raises(lambda: _publish(ctx, entry, table(name, 1), window=0), BadInputError)

    @reg("options")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        options = ja.PublishOptions(subject=f"{name}.given", msg_id_prefix="O-")
        _publish(ctx, entry, table(name, 2).drop_columns(["subject"]), options=options)
        _publish(ctx, entry, table(name, 2).drop_columns(["subject"]), options=options)
        assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.given"] * 2
        # A keyword is set over the object.
        _publish(
            ctx,
            entry,
            table(name, 1).drop_columns(["subject"]),
            options=options,
            msg_id_prefix="Q-",
        )
        assert ctx.rows(name).num_rows == 3

    @reg("on_full")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        waits = _publish(ctx, entry, table(name, 50), window=1)
        fails = _publish(
            ctx, entry, table(name, 50), window=1, on_full="fail", raise_on_error=False
        )
        assert waits.stored == 50 and fails.failed > 0, (waits, fails)

    # max_bytes_in_flight's effect is watched on the wire by test_publish_bytes_in_flight.py.
    for option, bad in (
        ("ack_timeout", 0),
        ("max_retries", -1),
        ("retry_backoff", -1),
        ("max_bytes_in_flight", 0),
    ):
        probes.refused(
            entry, option, lambda ctx, o=option, b=bad: _publish(ctx, entry, None, **{o: b})
        )

    @reg("msg_id_prefix")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        _publish(ctx, entry, table(name, 2), msg_id_prefix="P-")
        _publish(ctx, entry, table(name, 2))
        assert msg_ids(ctx, name) == ["P-0", "P-1", None, None]

    @reg("msg_id_start")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        _publish(ctx, entry, table(name, 2), msg_id_prefix="P-", msg_id_start=7)
        assert msg_ids(ctx, name) == ["P-7", "P-8"]

    def expectation(option: str, wrong: Any) -> None:
        @reg(option)
        def _(ctx: Ctx, entry: str) -> None:
            name = ctx.stream(count=1)
            result = _publish(ctx, entry, table(name, 1), raise_on_error=False, **{option: wrong})
            assert result.failed == 1, result
            assert _publish(ctx, entry, table(name, 1)).stored == 1

    expectation("expected_stream", "NOT_THIS_ONE")
    expectation("expected_last_seq", 99)
    expectation("expected_last_msg_id", "no-such-id")
    expectation("expected_last_subject_seq", 99)

    @reg("mode")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream(allow_batched=True)
        fast = _publish(ctx, entry, table(name, 3), mode="fast")
        acked = _publish(ctx, entry, table(name, 3))
        assert fast.stored == 3 and fast.acks.column("seq").null_count == 3
        assert acked.acks.column("seq").to_pylist() == [4, 5, 6]
        # Atomic batches need allow_atomic: refused whole by this stream.
        atomic = _publish(ctx, entry, table(name, 3), mode="atomic", raise_on_error=False)
        assert atomic.failed == 3 and "allow_atomic" in atomic.acks.column("error")[0].as_py()

    @reg("batch_rows")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream(allow_atomic=True)
        _publish(ctx, entry, table(name, 5), mode="atomic", batch_rows=2)
        _publish(ctx, entry, table(name, 5), mode="atomic")
        assert atomic_batch_sizes(ctx, name) == [2, 2, 1, 5]
        raises(lambda: _publish(ctx, entry, None, mode="atomic", batch_rows=0), BadInputError)

    @reg("keep_control_headers")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream(count=1)
        rows = pa.table(
            {
                "subject": [f"{name}.a"],
                "data": [b"x"],
                "headers": pa.array(
                    [[("Nats-Expected-Last-Sequence", ["99"])]],
                    pa.map_(pa.string(), pa.list_(pa.string())),
                ),
            }
        )
        kept = _publish(ctx, entry, rows, raise_on_error=False)
        dropped = _publish(ctx, entry, rows, keep_control_headers=False)
        assert kept.failed == 1 and dropped.stored == 1, (kept, dropped)

    @reg("compression")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        rows = pa.table({"subject": [f"{name}.a"], "data": [b"compressible " * 40]})
        _publish(ctx, entry, rows, compression="zstd")
        _publish(ctx, entry, rows)
        assert stored_encodings(ctx, name, 2) == ["zstd", None]
        read = ctx.rows(name)
        assert read.column("data").to_pylist() == [b"compressible " * 40] * 2
        raises(lambda: _publish(ctx, entry, rows, compression="lz4"), BadInputError)

    @reg("raise_on_error")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream(count=1)
        raises(lambda: _publish(ctx, entry, table(name, 1), expected_last_seq=99), PublishError)
        result = _publish(ctx, entry, table(name, 1), expected_last_seq=99, raise_on_error=False)
        assert result.failed == 1


_publisher_probes("Client.publisher")
_publisher_probes("Client.publish")


@probes.effect(("Publisher.publish", "subject"))
def _publisher_publish_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    with ctx.client.publisher(f"{name}.first") as publisher:
        publisher.publish(pa.table({"data": [b"x"]}))
        publisher.publish(pa.table({"data": [b"y"]}), subject=f"{name}.second")
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.first", f"{name}.second"]


@probes.effect(("Publisher.publish_batches", "subject"))
def _publish_batches_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    with ctx.client.publisher() as publisher:
        list(publisher.publish_batches(pa.table({"data": [b"x"]}).to_batches(), f"{name}.s"))
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.s"]


@probes.effect(("Publisher.publish_batches", "rows_per_result"))
def _rows_per_result(ctx: Ctx) -> None:
    name = ctx.stream()
    batches = [b for i in range(3) for b in table(name, 2).to_batches()]
    with ctx.client.publisher() as publisher:
        assert len(list(publisher.publish_batches(batches))) == 1
        assert len(list(publisher.publish_batches(batches, rows_per_result=2))) == 3


def _exact_stream(ctx: Ctx) -> str:
    """A new stream that holds exactly-once writers' positions."""
    name = ctx.stream(exactly_once=True)
    return name


@probes.effect(("Client.publish", "writer"))
def _publish_writer(ctx: Ctx) -> None:
    name = _exact_stream(ctx)
    rows = pa.table({"data": [b"a", b"b", b"c"]})
    assert ctx.client.publish(rows.slice(0, 2), f"{name}.w", writer="w").stored == 2
    again = ctx.client.publish(rows, f"{name}.w", writer="w")
    # The two rows the stream holds are skipped by the writer's position, not sent.
    assert (again.stored, again.duplicates) == (1, 2)
    assert again.acks.column("seq").to_pylist()[:2] == [None, None]
    assert ctx.rows(name).column("data").to_pylist() == [b"a", b"b", b"c"]


probes.refused(
    "Client.publish",
    "exactly_once",
    lambda ctx: ctx.client.publish(
        pa.table({"data": [b"a"]}), f"{ctx.stream()}.x", writer="w", exactly_once=True
    ),
)
# Their effects (a second writer waits out the lease; positions every N rows) are
# tests/exactly_once/test_exactly_once_publish.py's.
probes.refused(
    "Client.publish",
    "writer_lease",
    lambda ctx: ctx.client.publish(
        pa.table({"data": [b"a"]}), f"{_exact_stream(ctx)}.x", writer="w", writer_lease=0
    ),
)
probes.refused(
    "Client.publish",
    "position_rows",
    lambda ctx: ctx.client.publish(
        pa.table({"data": [b"a"]}), f"{_exact_stream(ctx)}.x", writer="w", position_rows=0
    ),
)


@probes.effect(("Client.publish", "codec"), ("Client.publisher", "codec"))
def _publish_codec(ctx: Ctx) -> None:
    name = ctx.stream()
    rows = pa.table({"subject": [f"{name}.j"], "id": [7]})
    ctx.client.publish(rows, codec="json")
    with ctx.client.publisher(codec="json") as publisher:
        publisher.publish(rows)
    assert ctx.rows(name).column("data").to_pylist() == [b'{"id":7}'] * 2


@pytest.mark.parametrize("probe_key", probes.params())
def test_option(
    probe_key: str, ctx: Ctx, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    probes.run(probe_key, ctx, capsys, request)
