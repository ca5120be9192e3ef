"""Writers' position messages and the consumers that leave them out: with ack policy
"all" an ack of one message acknowledges every earlier delivery, so positions that
arrive with no row are acknowledged on their own only when that acknowledges no row
the application still holds; and a position sourced into another stream under a
subject transform (``agg.$JA.POS....``) is still a position. Real servers; what a
consumer still owes is asked of nats-py."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from natspy import with_jetstream
from natsserver import wait_until

pytestmark = pytest.mark.timeout(90)


def _exact_stream(client: ja.Client, name: str) -> str:
    client.create_stream(name, [f"{name}.>"], duplicate_window=1.0, exactly_once=True)
    return name


def _ack_all_consumer(url: str, stream: str, name: str, ack_wait: float) -> None:
    async def make(js: Any) -> None:
        from nats.js.api import AckPolicy, ConsumerConfig

        await js.add_consumer(
            stream, ConsumerConfig(durable_name=name, ack_policy=AckPolicy.ALL, ack_wait=ack_wait)
        )

    with_jetstream(url, make)


def _consumer_state(url: str, stream: str, name: str) -> tuple[int, int, int]:
    """(num_ack_pending, num_pending, ack floor stream seq), as nats-py reads them."""

    async def work(js: Any) -> tuple[int, int, int]:
        info = await js.consumer_info(stream, name)
        return int(info.num_ack_pending), int(info.num_pending), int(info.ack_floor.stream_seq)

    return with_jetstream(url, work)


@pytest.mark.parametrize("binding", ["same", "another"])
def test_an_ack_all_consumer_loses_no_unacked_rows_to_a_batch_of_only_positions(
    client: ja.Client, shared_nats_server: Any, unique_name: Any, binding: str
) -> None:
    url = shared_nats_server.url
    stream = _exact_stream(client, unique_name("ACKALL"))
    client.publish(
        pa.table({"data": [b"r0", b"r1", b"r2"]}), f"{stream}.rows", writer="w", position_rows=3
    )
    # The stream: 3 rows, and the writer's position after them.
    _ack_all_consumer(url, stream, "c", ack_wait=2)
    consumer = client.pull_consumer(stream, "c", ack_policy="all")
    rows = consumer.fetch(3, expires=2)
    assert rows.data["data"].to_pylist() == [b"r0", b"r1", b"r2"]
    # Not acknowledged (the application is still writing them out); it fetches on,
    # on the same binding or (a second process) another one.
    fetcher = consumer if binding == "same" else client.pull_consumer(stream, "c")
    only_positions = fetcher.fetch(3, expires=1)
    assert len(only_positions) == 0
    only_positions.ack()  # nothing to acknowledge: it held no row
    floor = _consumer_state(url, stream, "c")[2]
    assert floor < rows.data["seq"][0].as_py(), "the rows were acknowledged"
    # The application dies without acknowledging the rows; after the ack wait they
    # come again.
    time.sleep(3)
    again = client.pull_consumer(stream, "c", ack_policy="all")
    redelivered = again.fetch(3, expires=2)
    assert redelivered.data["data"].to_pylist() == [b"r0", b"r1", b"r2"]
    assert redelivered.data["delivered"].to_pylist() == [2, 2, 2]


def test_ack_all_positions_held_behind_unacked_rows_go_with_their_ack(
    client: ja.Client, shared_nats_server: Any, unique_name: Any
) -> None:
    url = shared_nats_server.url
    stream = _exact_stream(client, unique_name("HELD"))
    client.publish(
        pa.table({"data": [b"r0", b"r1", b"r2"]}), f"{stream}.rows", writer="w", position_rows=3
    )
    _ack_all_consumer(url, stream, "c", ack_wait=30)
    consumer = client.pull_consumer(stream, "c", ack_policy="all")
    rows = consumer.fetch(3, expires=2)
    assert rows.data["data"].to_pylist() == [b"r0", b"r1", b"r2"]
    # The position after the rows comes alone: not acknowledged while the rows are
    # not (all four pending).
    assert len(consumer.fetch(3, expires=1)) == 0
    pending, _, floor = _consumer_state(url, stream, "c")
    assert (pending, floor < rows.data["seq"][0].as_py()) == (4, True)
    # The rows' ack takes the held position along: the consumer owes nothing, with
    # no ack wait and no later row.
    rows.ack()
    wait_until(
        lambda: _consumer_state(url, stream, "c")[:2] == (0, 0), 10.0, "every delivery acked"
    )
    # A `messages()` loop waits past positions for the next row.
    client.publish(pa.table({"data": [b"r3"]}), f"{stream}.more")
    with consumer.messages(batch_rows=3, batch_wait=0.2) as messages:
        batch = next(messages)
        assert batch.data["data"].to_pylist() == [b"r3"]
        batch.ack()
    wait_until(
        lambda: _consumer_state(url, stream, "c")[:2] == (0, 0), 10.0, "every delivery acked"
    )


def test_ack_all_positions_alone_are_acked_at_once_when_no_row_is_outstanding(
    client: ja.Client, shared_nats_server: Any, unique_name: Any
) -> None:
    # A consumer drained by one binding that acknowledges as it goes owes nothing at
    # the end, though the stream ends with a position (max_ack_pending 1: a position
    # left pending would stop every later delivery).
    url = shared_nats_server.url
    stream = _exact_stream(client, unique_name("DRAIN"))
    client.publish(
        pa.table({"data": [b"r0", b"r1", b"r2"]}), f"{stream}.rows", writer="w", position_rows=3
    )

    async def make(js: Any) -> None:
        from nats.js.api import AckPolicy, ConsumerConfig

        await js.add_consumer(
            stream,
            ConsumerConfig(
                durable_name="c", ack_policy=AckPolicy.ALL, ack_wait=30, max_ack_pending=1
            ),
        )

    with_jetstream(url, make)
    consumer = client.pull_consumer(stream, "c", ack_policy="all")
    got: list[bytes] = []
    with consumer.messages(batch_rows=1, batch_wait=0.1) as messages:
        for _ in range(3):
            batch = next(messages)
            got.extend(batch.data["data"].to_pylist())
            batch.ack()
        client.publish(pa.table({"data": [b"r3"]}), f"{stream}.more")
        batch = next(messages)
        got.extend(batch.data["data"].to_pylist())
        batch.ack()
    assert got == [b"r0", b"r1", b"r2", b"r3"]
    wait_until(
        lambda: _consumer_state(url, stream, "c")[:2] == (0, 0), 10.0, "every delivery acked"
    )


def test_positions_sourced_under_a_subject_transform_stay_out_of_reads(
    client: ja.Client, shared_nats_server: Any, unique_name: Any
) -> None:
    url = shared_nats_server.url
    stream = _exact_stream(client, unique_name("SRCX"))
    aggregate = unique_name("AGG")

    async def make(js: Any) -> None:
        from nats.js.api import StreamConfig, StreamSource, SubjectTransform

        source = StreamSource(
            name=stream, subject_transforms=[SubjectTransform(src=">", dest="agg.>")]
        )
        await js.add_stream(StreamConfig(name=aggregate, subjects=[], sources=[source]))

    with_jetstream(url, make)
    try:
        client.publish(pa.table({"data": [b"a", b"b"]}), f"{stream}.rows", writer="w")

        async def subjects(js: Any) -> list[str]:
            info = await js.stream_info(aggregate)
            out = []
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                try:
                    out.append((await js.get_msg(aggregate, seq)).subject)
                except Exception:  # rolled up
                    continue
            return out

        wait_until(
            lambda: (
                any(".$JA.POS." in s for s in with_jetstream(url, subjects))
                and len(with_jetstream(url, subjects)) >= 3
            ),
            10.0,
            "the rows and a position sourced into the aggregate",
        )
        held = with_jetstream(url, subjects)
        assert any(s.startswith(f"agg.$JA.POS.{stream}.") for s in held), held
        read = client.read(aggregate).read_all()
        assert read["data"].to_pylist() == [b"a", b"b"], read["subject"].to_pylist()
        shown = client.read(aggregate, include_positions=True).read_all()
        assert sorted(shown["subject"].to_pylist()) == sorted(held)
    finally:
        client.delete_stream(aggregate)
