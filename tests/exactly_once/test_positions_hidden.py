"""Exactly-once writers keep their positions in the stream they write, on subjects
under ``$JA.POS.``: every read path leaves those messages out (range reads by
consumer and by direct gets, latest per subject, the open-ended ordered read,
durable pull and push consumers), unless a read asks ``include_positions=True``.
A consumer acknowledges the position messages it leaves out, so none stays pending.

The stream and its messages are made with nats-py; what the stream holds and what
a consumer still owes are asked of nats-py too."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from nats.js.api import StreamConfig

import jetstream_arrow as ja
from jetstream_arrow import _core
from natspy import with_jetstream
from natsserver import NatsServer, wait_until

pytestmark = pytest.mark.timeout(90)

# What the stream holds, in order: data rows and position messages, interleaved; the
# first and the last message are positions, two follow each other, two writers.
LAYOUT = ["pos:w1", "a", "b", "pos:w1", "a", "b", "a", "pos:w1", "pos:w2", "b", "pos:w1"]


def position_subject(stream: str, writer: str) -> str:
    return f"{_core.POSITION_SUBJECT_PREFIX}{stream}.{writer}"


class Written:
    """What the stream was given: (seq, subject, payload) of every message, and of
    its data rows alone."""

    def __init__(self, stream: str, messages: list[tuple[int, str, bytes]]) -> None:
        self.stream = stream
        self.messages = messages
        self.data = [m for m in messages if not m[1].startswith("$JA.POS.")]
        self.positions = [m for m in messages if m[1].startswith("$JA.POS.")]


def publish_layout(url: str, stream: str, layout: list[str], *, rollup: bool) -> Written:
    async def work(js: Any) -> list[tuple[int, str, bytes]]:
        out = []
        for i, kind in enumerate(layout):
            if kind.startswith("pos:"):
                subject = position_subject(stream, kind[4:])
                payload = b'{"writer": "%s", "next": %d}' % (kind[4:].encode(), i)
                headers = {"Ja-Writer": kind[4:]}
                if rollup:
                    headers["Nats-Rollup"] = "sub"
                ack = await js.publish(subject, payload, headers=headers)
            else:
                subject, payload = f"{stream}.data.{kind}", f"row-{i}".encode()
                ack = await js.publish(subject, payload)
            out.append((ack.seq, subject, payload))
        return out

    return Written(stream, with_jetstream(url, work))


@pytest.fixture
def positioned(
    shared_nats_server: NatsServer, client: ja.Client, unique_name: Callable[[str], str]
) -> Iterator[Callable[..., Written]]:
    """``positioned(rollup=False)``: a fresh stream that holds positions (its own
    subjects and ``$JA.POS.<stream>.>``, rollups allowed, direct gets), made and
    filled by nats-py with LAYOUT, deleted after the test."""
    made: list[str] = []

    def make(*, rollup: bool = False, layout: list[str] = LAYOUT) -> Written:
        name = unique_name("POS")

        async def create(js: Any) -> None:
            await js.add_stream(
                StreamConfig(
                    name=name,
                    subjects=[f"{name}.>", f"{_core.POSITION_SUBJECT_PREFIX}{name}.>"],
                    allow_rollup_hdrs=True,
                    allow_direct=True,
                )
            )

        with_jetstream(shared_nats_server.url, create)
        made.append(name)
        return publish_layout(shared_nats_server.url, name, layout, rollup=rollup)

    yield make
    for name in made:
        client.delete_stream(name)


def stored(url: str, stream: str) -> list[tuple[int, str, bytes]]:
    """Every message the stream holds, by nats-py's direct gets of each sequence."""

    async def work(js: Any) -> list[tuple[int, str, bytes]]:
        info = await js.stream_info(stream)
        out = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                msg = await js.get_msg(stream, seq, direct=True)
            except Exception:  # a deleted sequence (rolled up)
                continue
            out.append((msg.seq, msg.subject, msg.data))
        return out

    return with_jetstream(url, work)


def triples(table: pa.Table | pa.RecordBatch) -> list[tuple[int, str, bytes]]:
    return list(
        zip(
            table.column("seq").to_pylist(),
            table.column("subject").to_pylist(),
            table.column("data").to_pylist(),
            strict=True,
        )
    )


def consumer_state(url: str, stream: str, name: str) -> tuple[int, int]:
    """(num_ack_pending, num_pending) of a consumer, as nats-py reads its info."""

    async def work(js: Any) -> tuple[int, int]:
        info = await js.consumer_info(stream, name)
        return info.num_ack_pending, info.num_pending

    return with_jetstream(url, work)


# -- range reads ------------------------------------------------------------------------


@pytest.mark.parametrize("rollup", [False, True], ids=["every-position-kept", "rolled-up"])
def test_range_reads_leave_positions_out_unless_asked(
    shared_nats_server: NatsServer,
    client: ja.Client,
    positioned: Callable[..., Written],
    rollup: bool,
) -> None:
    written = positioned(rollup=rollup)
    stream = written.stream
    held = stored(shared_nats_server.url, stream)
    want = [m for m in held if not m[1].startswith("$JA.POS.")]
    assert want == written.data and len(want) == 6
    # With rollups the stream keeps each writer's latest position only.
    assert len(held) - len(want) == (2 if rollup else 5)
    for method in ("auto", "consumer", "direct"):
        for batch_rows in (1, 2, 1000):
            got = client.read(stream, method=method, batch_rows=batch_rows).read_all()
            assert triples(got) == want, (method, batch_rows)
            assert all(len(b) > 0 for b in client.read(stream, method=method, batch_rows=2))
        # A range that ends on a position, and one of nothing but positions, end
        # without a loss reported and without a row.
        last_pos = held[-1][0]
        got = client.read(stream, method=method, start_seq=2, end_seq=last_pos).read_all()
        assert triples(got) == [m for m in want if m[0] >= 2]
        assert held[-1][1].startswith("$JA.POS.")
        alone = client.read(stream, method=method, start_seq=last_pos, end_seq=last_pos)
        assert alone.read_all().num_rows == 0
        # Asked for, the positions are rows in their place.
        shown = client.read(stream, method=method, include_positions=True).read_all()
        assert triples(shown) == held, method
    options = ja.ReadOptions(include_positions=True)
    assert triples(client.read(stream, options=options).read_all()) == held


def test_a_range_read_with_a_codec_infers_and_decodes_only_the_data_rows(
    shared_nats_server: NatsServer, client: ja.Client, positioned: Callable[..., Written]
) -> None:
    # Positions are JSON of other fields: one left in would add "writer" and "next"
    # to the inferred schema, and a row.
    stream = positioned(layout=[]).stream

    async def work(js: Any) -> None:
        for i in range(3):
            await js.publish(position_subject(stream, "w1"), b'{"writer": "w1", "next": %d}' % i)
            await js.publish(f"{stream}.data.j", b'{"n": %d}' % i)
        await js.publish(position_subject(stream, "w1"), b'{"writer": "w1", "next": 3}')

    with_jetstream(shared_nats_server.url, work)
    for method in ("consumer", "direct"):
        table = client.read(stream, codec="json", method=method).read_all()
        assert table.column("value").to_pylist() == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert table.column("seq").to_pylist() == [2, 4, 6]
        # Asked for, positions are rows, and the inferred schema has their fields.
        shown = client.read(stream, codec="json", method=method, include_positions=True)
        table = shown.read_all()
        assert table.column("seq").to_pylist() == list(range(1, 8))
        fields = {f.name for f in table.schema.field("value").type}
        assert fields == {"n", "writer", "next"}


# -- latest per subject -----------------------------------------------------------------


def test_latest_per_subject_leaves_positions_out_unless_asked(
    shared_nats_server: NatsServer, client: ja.Client, positioned: Callable[..., Written]
) -> None:
    written = positioned(rollup=True)
    stream = written.stream
    held = stored(shared_nats_server.url, stream)
    latest: dict[str, tuple[int, str, bytes]] = {}
    for m in held:
        latest[m[1]] = m
    every = sorted(latest.values())
    data = [m for m in every if not m[1].startswith("$JA.POS.")]
    assert [m[1] for m in data] == [f"{stream}.data.a", f"{stream}.data.b"]
    for method in ("auto", "consumer", "direct"):
        got = client.read(stream, last_per_subject=True, method=method, batch_rows=1).read_all()
        assert triples(got) == data, method
        shown = client.read(
            stream, last_per_subject=True, method=method, include_positions=True
        ).read_all()
        assert triples(shown) == every, method


# -- the open-ended ordered read ---------------------------------------------------------


def test_the_ordered_consumer_leaves_positions_out(
    shared_nats_server: NatsServer, client: ja.Client, positioned: Callable[..., Written]
) -> None:
    written = positioned()
    stream = written.stream
    got: list[tuple[int, str, bytes]] = []
    messages = client.ordered_consumer(stream).messages(batch_rows=2, batch_wait=0.2)
    try:
        deadline = time.monotonic() + 20
        while len(got) < len(written.data):
            assert time.monotonic() < deadline, got
            batch = next(messages)
            assert batch.num_rows > 0
            got.extend(triples(batch))
        assert got == written.data
        # The stream ends with a position: the next batch is the next data row.
        more = publish_layout(shared_nats_server.url, stream, ["pos:w2", "a"], rollup=False)
        assert triples(next(messages)) == more.data
    finally:
        messages.close()  # type: ignore[attr-defined]


# -- durable consumers ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "bound_as"),
    [("explicit", "explicit"), ("explicit", None), ("all", "all"), ("all", None)],
    ids=["explicit", "explicit-unknown", "all", "all-unknown"],
)
def test_a_fetching_consumer_acknowledges_the_positions_it_leaves_out(
    shared_nats_server: NatsServer,
    client: ja.Client,
    positioned: Callable[..., Written],
    policy: str,
    bound_as: str | None,
) -> None:
    written = positioned()
    stream = written.stream
    client.create_consumer(stream, durable_name="work", ack_policy=policy, ack_wait=30.0)
    consumer = client.pull_consumer(stream, "work", ack_policy=bound_as)
    got: list[tuple[int, str, bytes]] = []
    deadline = time.monotonic() + 20
    fetches = 0
    while consumer_state(shared_nats_server.url, stream, "work")[1] > 0 or fetches == 0:
        assert time.monotonic() < deadline
        batch = consumer.fetch(3, expires=1.0)
        fetches += 1
        assert len(batch) == batch.data.num_rows
        got.extend(triples(batch.data))
        if fetches % 2:
            batch.ack()
        else:
            batch.ack(list(range(len(batch))))
    assert got == written.data
    wait_until(
        lambda: consumer_state(shared_nats_server.url, stream, "work") == (0, 0),
        10.0,
        "every delivery, positions too, to be acknowledged",
    )


@pytest.mark.parametrize("policy", ["explicit", "all"])
def test_a_consuming_consumer_acknowledges_the_positions_it_leaves_out(
    shared_nats_server: NatsServer,
    client: ja.Client,
    positioned: Callable[..., Written],
    policy: str,
) -> None:
    written = positioned()
    stream = written.stream
    client.create_consumer(stream, durable_name="work", ack_policy=policy, ack_wait=30.0)
    consumer = client.pull_consumer(stream, "work")
    got: list[tuple[int, str, bytes]] = []
    with consumer.messages(batch_rows=2, batch_wait=0.2) as messages:
        deadline = time.monotonic() + 20
        while len(got) < len(written.data):
            assert time.monotonic() < deadline
            batch = next(messages)
            assert len(batch) > 0
            got.extend(triples(batch.data))
            batch.ack()
        assert got == written.data
        # The stream ended with a position: it is taken (and acknowledged) on the way
        # to the next data row.
        more = publish_layout(shared_nats_server.url, stream, ["a"], rollup=False)
        batch = next(messages)
        assert triples(batch.data) == more.data
        batch.ack()
    wait_until(
        lambda: consumer_state(shared_nats_server.url, stream, "work") == (0, 0),
        10.0,
        "every delivery, positions too, to be acknowledged",
    )


def test_a_push_consumer_acknowledges_the_positions_it_leaves_out(
    shared_nats_server: NatsServer, client: ja.Client, positioned: Callable[..., Written]
) -> None:
    written = positioned()
    stream = written.stream
    client.create_consumer(
        stream,
        durable_name="push",
        deliver_subject=f"deliver.{stream}",
        ack_policy="explicit",
        ack_wait=30.0,
    )
    consumer = client.push_consumer(stream, "push")
    got: list[tuple[int, str, bytes]] = []
    with consumer.messages(batch_rows=2, batch_wait=0.2) as messages:
        deadline = time.monotonic() + 20
        while len(got) < len(written.data):
            assert time.monotonic() < deadline
            batch = next(messages)
            assert len(batch) > 0
            got.extend(triples(batch.data))
            batch.ack()
        assert got == written.data
        more = publish_layout(shared_nats_server.url, stream, ["b"], rollup=False)
        batch = next(messages)
        assert triples(batch.data) == more.data
        batch.ack()
    wait_until(
        lambda: consumer_state(shared_nats_server.url, stream, "push") == (0, 0),
        10.0,
        "every delivery, positions too, to be acknowledged",
    )
