"""Durable pull consumers: fetch, every ack kind on rows and whole batches (checked in
the server's consumer state), AckAll, continuous consumption, a deleted consumer, a
stalled server, and binding with nothing but MSG.NEXT and ACK permissions."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import rows
from jetstream_arrow.exceptions import (
    BadInputError,
    ConsumerDeletedError,
    MissedHeartbeatsError,
    OperationTimeoutError,
)
from natsserver import NatsServer, wait_until

pytestmark = pytest.mark.timeout(90)


def durable(client: ja.Client, stream: str, name: str = "work", **config: object) -> str:
    options: dict[str, object] = {"ack_policy": "explicit", "ack_wait": 2.0}
    options.update(config)
    client.create_consumer(stream, durable_name=name, **options)
    return name


def col(batch: ja.ConsumedBatch, name: str) -> list[object]:
    return batch.data.column(name).to_pylist()


# -- fetch ------------------------------------------------------------------------------


def test_fetch_schema_and_consumer_columns(client: ja.Client, stream: str) -> None:
    client.publish(rows(30, stream))
    consumer = client.pull_consumer(stream, durable(client, stream))
    assert (consumer.stream, consumer.name) == (stream, "work")
    batch = consumer.fetch(10, expires=2.0, include_headers=True)
    assert len(batch) == 10
    schema = batch.data.schema
    assert schema.names == [
        "stream",
        "subject",
        "seq",
        "timestamp",
        "headers",
        "data",
        "delivered",
        "consumer_seq",
    ]
    assert schema.field("delivered").type == pa.int64()
    assert schema.field("consumer_seq").type == pa.int64()
    assert schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert col(batch, "seq") == list(range(1, 11))
    assert col(batch, "consumer_seq") == list(range(1, 11))
    assert col(batch, "delivered") == [1] * 10
    assert col(batch, "data") == [f"payload-{i}".encode() for i in range(10)]
    assert dict(col(batch, "headers")[3])["Nats-Msg-Id"] == ["id-3"]
    batch.ack()
    rest = consumer.fetch(100, expires=1.0)
    assert col(rest, "seq") == list(range(11, 31))
    assert "headers" not in rest.data.schema.names


def test_fetch_on_empty_consumer(client: ja.Client, stream: str) -> None:
    consumer = client.pull_consumer(stream, durable(client, stream))
    t0 = time.monotonic()
    assert len(consumer.fetch(10, no_wait=True)) == 0
    assert time.monotonic() - t0 < 2
    t0 = time.monotonic()
    batch = consumer.fetch(10, expires=1.0)
    elapsed = time.monotonic() - t0
    assert len(batch) == 0
    assert 0.8 <= elapsed < 3, elapsed
    batch.ack()  # nothing to acknowledge: a no-op


def test_fetch_max_bytes(client: ja.Client, stream: str) -> None:
    table = pa.table({"subject": [f"{stream}.a"] * 20, "data": [b"x" * 1_000] * 20})
    client.publish(table)
    consumer = client.pull_consumer(stream, durable(client, stream))
    batch = consumer.fetch(100, max_bytes=5_500, expires=1.0)
    assert 1 <= len(batch) <= 5
    batch.ack()


def test_fetch_returns_what_is_there_before_expires(client: ja.Client, stream: str) -> None:
    client.publish(rows(3, stream, headers=False))
    consumer = client.pull_consumer(stream, durable(client, stream))
    t0 = time.monotonic()
    batch = consumer.fetch(100, expires=5.0, no_wait=True)
    assert len(batch) == 3
    assert time.monotonic() - t0 < 2


# -- acknowledgements -------------------------------------------------------------------


def test_ack_kinds_on_chosen_rows_and_consumer_state(client: ja.Client, stream: str) -> None:
    client.publish(rows(10, stream, headers=False))
    consumer = client.pull_consumer(stream, durable(client, stream, ack_wait=3.0))
    batch = consumer.fetch(10, expires=2.0)
    assert col(batch, "seq") == list(range(1, 11))

    batch.ack([0, 1, 2])
    batch.ack_sync([7, 8, 9])
    batch.term([5], reason="cannot parse")
    batch.nak([3])
    batch.nak([4], delay=30.0)
    batch.in_progress([6])

    # Pending acks: 4 (nak, redelivered next), 5 (nak with delay), 7 (in progress).
    # The term is not confirmed, so wait for the server to apply it.
    wait_until(lambda: client.consumer_info(stream, "work").num_ack_pending == 3, 5.0, "the term")
    info = client.consumer_info(stream, "work")
    assert info.ack_floor.stream_seq == 3
    assert info.delivered.stream_seq == 10

    again = consumer.fetch(10, expires=1.0)
    assert col(again, "seq") == [4]  # not 5 (delayed), 6 (terminated), 7 (in progress)
    assert col(again, "delivered") == [2]
    assert col(again, "consumer_seq") == [11]
    info = client.consumer_info(stream, "work")
    assert info.num_redelivered == 1
    again.ack_sync()
    batch.ack_sync([6])
    info = client.consumer_info(stream, "work")
    assert info.ack_floor.stream_seq == 4
    assert info.num_ack_pending == 1  # seq 5, still waiting out its nak delay


def test_nak_with_delay_redelivers_after_the_delay(client: ja.Client, stream: str) -> None:
    client.publish(rows(2, stream, headers=False))
    consumer = client.pull_consumer(stream, durable(client, stream, ack_wait=10.0))
    batch = consumer.fetch(2, expires=1.0)
    t0 = time.monotonic()
    batch.nak([0], delay=1.5)
    batch.nak([1])
    first = consumer.fetch(10, expires=0.5)
    assert col(first, "seq") == [2]
    first.ack()
    assert time.monotonic() - t0 < 1.4
    later = consumer.fetch(10, expires=3.0)
    assert col(later, "seq") == [1]
    assert col(later, "delivered") == [2]
    assert time.monotonic() - t0 >= 1.4
    later.ack()


def test_in_progress_holds_off_redelivery(client: ja.Client, stream: str) -> None:
    client.publish(rows(1, stream, headers=False))
    consumer = client.pull_consumer(stream, durable(client, stream, ack_wait=1.0))
    batch = consumer.fetch(1, expires=1.0)
    assert len(batch) == 1
    t0 = time.monotonic()
    while time.monotonic() - t0 < 2.5:  # past two ack waits, kept alive
        batch.in_progress()
        assert len(consumer.fetch(1, expires=0.3)) == 0
    # Without progress reports it comes back after ack_wait.
    redelivered = consumer.fetch(1, expires=3.0)
    assert col(redelivered, "seq") == [1]
    assert col(redelivered, "delivered") == [2]
    redelivered.ack()


def test_term_stops_redelivery(client: ja.Client, stream: str) -> None:
    client.publish(rows(3, stream, headers=False))
    consumer = client.pull_consumer(stream, durable(client, stream, ack_wait=0.5))
    batch = consumer.fetch(3, expires=1.0)
    batch.term(reason="poison message")
    assert len(consumer.fetch(3, expires=1.5)) == 0  # three ack waits: nothing back
    info = client.consumer_info(stream, "work")
    assert info.num_ack_pending == 0
    assert info.ack_floor.stream_seq == 3


def test_whole_batch_ack_nak_and_ack_sync(client: ja.Client, stream: str) -> None:
    client.publish(rows(300, stream, headers=False))
    consumer = client.pull_consumer(stream, durable(client, stream))
    first = consumer.fetch(100, expires=1.0)
    first.ack()
    second = consumer.fetch(100, expires=1.0)
    second.nak()
    # ack and nak are not confirmed: wait until the server applied the ack.
    wait_until(
        lambda: client.consumer_info(stream, "work").ack_floor.stream_seq == 100,
        5.0,
        "the ack of the first batch",
    )
    redelivered = consumer.fetch(100, expires=1.0)
    assert col(redelivered, "seq") == list(range(101, 201))
    assert col(redelivered, "delivered") == [2] * 100
    redelivered.ack_sync(timeout=5.0)
    third = consumer.fetch(100, expires=1.0)
    third.ack_sync()
    info = client.consumer_info(stream, "work")
    assert (info.ack_floor.stream_seq, info.num_ack_pending, info.num_pending) == (300, 0, 0)


def test_ack_row_out_of_range(client: ja.Client, stream: str) -> None:
    client.publish(rows(2, stream, headers=False))
    batch = client.pull_consumer(stream, durable(client, stream)).fetch(2, expires=1.0)
    with pytest.raises(BadInputError, match=r"row 5 is out of range"):
        batch.ack([5])
    with pytest.raises(BadInputError):
        batch.nak([2])


def test_ack_policy_all_one_ack_for_the_batch(client: ja.Client, stream: str) -> None:
    client.publish(rows(500, stream, headers=False))
    durable(client, stream, "everything", ack_policy="all")
    consumer = client.pull_consumer(stream, "everything", ack_policy="all")
    batch = consumer.fetch(200, expires=1.0)
    assert len(batch) == 200
    info = client.consumer_info(stream, "everything")
    assert info.num_ack_pending == 200
    batch.ack()
    # The ack is not confirmed: wait for the server to apply it.
    wait_until(
        lambda: client.consumer_info(stream, "everything").num_ack_pending == 0,
        5.0,
        "the AckAll of the batch",
    )
    info = client.consumer_info(stream, "everything")
    assert (info.ack_floor.stream_seq, info.ack_floor.consumer_seq) == (200, 200)
    rest = consumer.fetch(500, expires=1.0)
    assert col(rest, "seq") == list(range(201, 501))
    rest.ack_sync()
    info = client.consumer_info(stream, "everything")
    assert (info.ack_floor.stream_seq, info.num_ack_pending) == (500, 0)


# -- continuous consumption -------------------------------------------------------------


@pytest.mark.slow
def test_messages_50k_delivered_exactly_once(client: ja.Client, stream: str) -> None:
    n = 50_000
    client.publish(rows(n, stream, headers=False), window=16_384)
    consumer = client.pull_consumer(stream, durable(client, stream, ack_wait=30.0))
    seen: list[int] = []
    consumer_seqs: list[int] = []
    delivered: set[object] = set()
    batches = 0
    for batch in consumer.messages(max_messages=2_000, batch_rows=1_000, heartbeat=1.0):
        assert 1 <= len(batch) <= 1_000
        seen.extend(col(batch, "seq"))  # type: ignore[arg-type]
        consumer_seqs.extend(col(batch, "consumer_seq"))  # type: ignore[arg-type]
        delivered.update(col(batch, "delivered"))
        batch.ack()
        batches += 1
        if len(seen) >= n:
            break
    assert seen == list(range(1, n + 1))
    assert consumer_seqs == list(range(1, n + 1))
    assert delivered == {1}
    assert batches >= n // 1_000

    def all_acked() -> bool:
        info = client.consumer_info(stream, "work")
        return info.num_ack_pending == 0 and info.ack_floor.stream_seq == n

    wait_until(all_acked, 5.0, "every ack to reach the server")
    info = client.consumer_info(stream, "work")
    assert (info.num_pending, info.num_redelivered) == (0, 0)


def test_messages_waits_for_new_messages(client: ja.Client, stream: str) -> None:
    consumer = client.pull_consumer(stream, durable(client, stream))
    it = consumer.messages(heartbeat=0.5, expires=2.0)
    client.publish(rows(5, stream, headers=False))
    got: list[object] = []
    for batch in it:
        got.extend(col(batch, "seq"))
        batch.ack()
        if len(got) >= 5:
            break
    it.close()
    assert got == [1, 2, 3, 4, 5]


def test_deleting_the_consumer_mid_iteration_raises(client: ja.Client, stream: str) -> None:
    client.publish(rows(10, stream, headers=False))
    consumer = client.pull_consumer(stream, durable(client, stream))
    it = consumer.messages(heartbeat=0.5, expires=2.0, batch_rows=10)
    first = next(it)
    first.ack()
    assert col(first, "seq") == list(range(1, 11))
    assert client.delete_consumer(stream, "work")
    t0 = time.monotonic()
    with pytest.raises(ConsumerDeletedError) as info:
        next(it)
    assert time.monotonic() - t0 < 3
    assert "work" in str(info.value)
    it.close()


def test_paused_server_raises_missed_heartbeats(nats_server: NatsServer) -> None:
    assert nats_server.process is not None
    with ja.connect(nats_server.url, request_timeout=2.0) as client:
        client.create_stream("HB", ["hb.>"])
        client.create_consumer("HB", durable_name="work", ack_policy="explicit")
        client.publish(pa.table({"subject": ["hb.a"], "data": [b"x"]}))
        it = client.pull_consumer("HB", "work").messages(heartbeat=0.5, expires=2.0)
        next(it).ack()
        pid = nats_server.process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            with pytest.raises(MissedHeartbeatsError) as info:
                next(it)
            elapsed = time.monotonic() - t0
        finally:
            os.kill(pid, signal.SIGCONT)
        assert isinstance(info.value, OperationTimeoutError)
        assert isinstance(info.value, TimeoutError)
        assert elapsed < 2.5, elapsed
        assert "heartbeat" in str(info.value)
        it.close()


# -- binding with minimal permissions ---------------------------------------------------

MINIMAL = """
accounts {
    A: {
        jetstream: enabled
        users: [
            {user: admin, password: admin}
            {
                user: worker, password: worker,
                permissions: {
                    publish: {allow: ["$JS.API.CONSUMER.MSG.NEXT.S.C", "$JS.ACK.S.C.>"]}
                    subscribe: {allow: ["_INBOX.>"]}
                }
            }
        ]
    }
}
"""


def test_bind_and_consume_with_only_msg_next_and_ack_permissions(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    server = nats_server_factory(MINIMAL)
    with ja.connect(server.url, user="admin", password="admin") as admin:
        admin.create_stream("S", ["s.>"])
        admin.create_consumer("S", durable_name="C", ack_policy="explicit", ack_wait=2.0)
        admin.publish(rows(20, "s", headers=False))
        with ja.connect(server.url, user="worker", password="worker") as worker:
            consumer = worker.pull_consumer("S", "C")
            batch = consumer.fetch(5, expires=2.0)
            assert col(batch, "seq") == [1, 2, 3, 4, 5]
            batch.ack()
            batch2 = consumer.fetch(5, expires=2.0)
            batch2.ack_sync()
            batch3 = consumer.fetch(10, expires=2.0)
            batch3.nak([0])
            batch3.term([1])
            batch3.in_progress([2])
            batch3.ack(list(range(3, 10)))
            # Plain acks are not confirmed: the server applies them a moment later.
            wait_until(
                lambda: (
                    (info := admin.consumer_info("S", "C")).ack_floor.stream_seq == 10
                    and info.num_ack_pending == 2  # seq 11 (nak) and 13 (in progress)
                ),
                5.0,
                "ack floor 10 with seq 11 and 13 pending",
            )
            again = consumer.fetch(5, expires=1.0)
            assert col(again, "seq") == [11]
            again.ack()
            batch3.ack([2])
            assert len(consumer.fetch(5, no_wait=True)) == 0
            wait_until(
                lambda: (
                    (
                        (info := admin.consumer_info("S", "C")).num_ack_pending,
                        info.ack_floor.stream_seq,
                    )
                    == (0, 20)
                ),
                5.0,
                "everything acknowledged up to seq 20",
            )


@pytest.mark.parametrize(("threshold", "least_refill"), [(20, 80), (80, 20)])
def test_messages_refills_its_buffer_when_it_falls_to_the_threshold(
    client: ja.Client,
    stream: str,
    shared_nats_server: NatsServer,
    threshold: int,
    least_refill: int,
) -> None:
    """The pull requests themselves, seen by an independent nats-py subscriber on the
    consumer's ``MSG.NEXT`` subject: a buffer of 100 with ``threshold_messages`` T
    asks for more only when at most T are left, so every refill asks for about
    100 - T messages (the default threshold, half, would ask for 50)."""
    import asyncio
    import json as jsonlib
    import threading

    import nats

    n = 1_000
    client.publish(rows(n, stream, headers=False))
    name = durable(client, stream, ack_wait=30.0)
    requests: list[dict[str, object]] = []
    ready, stop = threading.Event(), threading.Event()

    def watch() -> None:
        async def run() -> None:
            nc = await nats.connect(shared_nats_server.url)
            sub = await nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}")
            await nc.flush()
            ready.set()
            while not stop.is_set():
                try:
                    msg = await sub.next_msg(timeout=0.2)
                except nats.errors.TimeoutError:
                    continue
                requests.append(jsonlib.loads(msg.data or b"{}"))
            await nc.close()

        asyncio.run(run())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert ready.wait(10), "the watching subscriber did not start"
    seen = 0
    consumer = client.pull_consumer(stream, name)
    for batch in consumer.messages(
        max_messages=100, threshold_messages=threshold, batch_rows=10, heartbeat=1.0
    ):
        seen += len(batch)
        batch.ack()
        if seen >= n:
            break
    # The watcher may trail the consumer on a loaded machine: let it see the pulls that
    # asked for what was consumed (bounded) before it stops.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if sum(int(r["batch"]) for r in list(requests)) >= n:  # type: ignore[call-overload]
            break
        time.sleep(0.05)
    stop.set()
    watcher.join(10)
    sizes = [int(r["batch"]) for r in requests]  # type: ignore[call-overload]
    assert sizes and sizes[0] == 100, sizes
    refills = sizes[1:]
    assert len(refills) >= (n - 100) // 100, sizes
    # Consumed 10 at a time, the buffer meets the threshold exactly or one batch below.
    assert all(least_refill <= size <= least_refill + 10 for size in refills), sizes
