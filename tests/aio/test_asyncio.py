"""The asyncio facade against a real server: results as the sync API's, an event loop
that keeps running while a call waits, cancellation that cleans up after itself
(a read's consumer deleted, a publish's result reported and safe to retry), errors
of the package's classes and a timeout on every wait. Each test runs its own loop
(``asyncio.run``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats
import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import rows
from jetstream_arrow.exceptions import (
    BadInputError,
    ConnectionFailedError,
    NotFoundError,
    PublishError,
)
from natsserver import NatsServer


def run(body: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(body(), timeout=20))


class Ticker:
    """A task that counts its ticks, to show the loop is free while a call waits."""

    def __init__(self, period: float = 0.005) -> None:
        self.ticks = 0
        self._period = period
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._period)
            self.ticks += 1

    async def __aenter__(self) -> Ticker:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def consumers_left(client: ja.AsyncClient, stream: str) -> list[str]:
    return await client.consumer_names(stream)


def test_publish_read_round_trip(shared_nats_server: NatsServer, stream: str) -> None:
    table = rows(1500, stream)

    async def body() -> None:
        async with await ja.connect_async(shared_nats_server.url) as client:
            result = await client.publish(table)
            assert isinstance(result, ja.PublishResult)
            assert (result.rows, result.stored, result.failed) == (1500, 1500, 0)
            seen = []
            async for batch in client.read(stream, method="consumer", batch_rows=400):
                assert isinstance(batch, pa.RecordBatch)
                seen.append(batch)
            assert [len(b) for b in seen] == [400, 400, 400, 300]
            got = pa.Table.from_batches(seen)
            assert got["seq"].to_pylist() == list(range(1, 1501))
            assert got["data"].to_pylist() == table["data"].to_pylist()
            # read_all.
            again = await client.read(stream, start_seq=1001).read_all()
            assert again["seq"].to_pylist() == list(range(1001, 1501))
            assert await consumers_left(client, stream) == []
        assert client.is_closed()

    run(body)


def test_the_loop_runs_while_a_read_waits(client: ja.Client, stream: str) -> None:
    client.publish(rows(3, stream))

    async def body() -> None:
        async with await ja.connect_async(client.options.servers) as aclient:
            # An ordered consumer waits for the message published 0.5 s later.
            async def publish_later() -> None:
                await asyncio.sleep(0.5)
                await aclient.publish(rows(1, stream, start=3))

            reader = aclient.ordered_consumer(stream).messages(batch_wait=0.05)
            late = asyncio.create_task(publish_later())
            got = 0
            async with Ticker() as ticker:
                async for batch in reader:
                    got += len(batch)
                    if got == 4:
                        break
            await reader.aclose()
            await late
            assert ticker.ticks >= 40, ticker.ticks
            # A fetch that waits out its expiry keeps the loop free as well.
            await aclient.create_consumer(stream, durable_name="idle", ack_policy="explicit")
            consumer = aclient.pull_consumer(stream, "idle")
            drained = await consumer.fetch(10, expires=1.0)
            await drained.ack_sync()
            async with Ticker() as ticker:
                started = time.monotonic()
                empty = await consumer.fetch(10, expires=0.6)
                waited = time.monotonic() - started
            assert len(empty) == 0
            assert 0.5 <= waited < 3.0
            assert ticker.ticks >= 40, ticker.ticks

    run(body)


def test_a_long_read_beside_a_ticker(client: ja.Client, stream: str) -> None:
    client.publish(rows(20_000, stream, headers=False))

    async def body() -> None:
        async with await ja.connect_async(client.options.servers) as aclient:
            async with Ticker(0.001) as ticker:
                total = 0
                async for batch in aclient.read(stream, method="consumer", batch_rows=500):
                    total += len(batch)
            assert total == 20_000
            assert ticker.ticks >= 3, ticker.ticks

    run(body)


def test_a_cancelled_read_deletes_its_consumer(client: ja.Client, stream: str) -> None:
    client.publish(rows(5000, stream, headers=False))

    async def body() -> None:
        async with await ja.connect_async(client.options.servers) as aclient:
            # A task cancelled while it reads a range.
            first = asyncio.Event()

            async def read_slowly() -> None:
                async for _batch in aclient.read(stream, method="consumer", batch_rows=100):
                    first.set()
                    await asyncio.sleep(0.2)

            task = asyncio.create_task(read_slowly())
            await first.wait()
            assert len(await consumers_left(aclient, stream)) == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # Cancelled in a step, the read deletes its consumer before the error
            # propagates; cancelled in the loop's body (the sleep), the iterator is
            # dropped with the task and deletes it soon after (docs/asyncio.md).
            deadline = time.monotonic() + 5.0
            while await consumers_left(aclient, stream):
                assert time.monotonic() < deadline, "the read's consumer outlived it by 5 s"
                await asyncio.sleep(0.05)

            # A task cancelled while a step waits (an ordered consumer at the end).
            follower = aclient.ordered_consumer(stream, deliver="new").messages()
            waiting = asyncio.create_task(follower.__anext__())
            await asyncio.sleep(0.3)
            assert len(await consumers_left(aclient, stream)) == 1
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert await consumers_left(aclient, stream) == []
            # The cancelled iterator is over.
            with pytest.raises(StopAsyncIteration):
                await follower.__anext__()

            # An iterator closed early.
            reader = aclient.read(stream, method="consumer", batch_rows=100)
            async for _batch in reader:
                break
            assert len(await consumers_left(aclient, stream)) == 1
            await reader.aclose()
            assert await consumers_left(aclient, stream) == []

            # An iterator closed by one task while another waits in a step on an idle
            # stream: the close ends that step (it returns no batch) and deletes the
            # consumer, without waiting for a message.
            idle = aclient.ordered_consumer(stream, deliver="new").messages()
            stepping = asyncio.create_task(idle.__anext__())
            await asyncio.sleep(0.3)
            assert len(await consumers_left(aclient, stream)) == 1
            await asyncio.wait_for(idle.aclose(), 5.0)
            with pytest.raises(StopAsyncIteration):
                await asyncio.wait_for(stepping, 5.0)
            assert await consumers_left(aclient, stream) == []

    run(body)


def test_a_read_cancelled_at_any_moment_has_deleted_its_consumer_when_the_error_comes(
    shared_nats_server: NatsServer, stream: str
) -> None:
    """Cancelled while it opens, reads, or ends (its last step deleting the consumer),
    by ``task.cancel()`` or ``asyncio.wait_for``'s timeout, 40 times: as nats-py sees
    the stream, no consumer of these reads is left. A create or a delete dropped
    midway used to leave it for its 300 s inactivity threshold."""
    url = shared_nats_server.url

    async def body() -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        try:
            async with await ja.connect_async(url) as aclient:
                await aclient.publish(rows(20_000, stream, headers=False))

                async def consume() -> int:
                    n = 0
                    async for batch in aclient.read(stream, method="consumer", batch_rows=500):
                        n += batch.num_rows
                    return n

                for delay in [0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12] * 2:
                    task = asyncio.create_task(consume())
                    await asyncio.sleep(delay)
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        assert await task == 20_000
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(consume(), delay + 0.001)
                # A delete a dropped request left to the background is answered at
                # once; 3 s is nothing next to the threshold the leaks waited for.
                deadline = time.monotonic() + 3.0
                while (await js.stream_info(stream)).state.consumer_count:
                    assert time.monotonic() < deadline, await js.consumers_info(stream)
                    await asyncio.sleep(0.05)
        finally:
            await nc.close()

    asyncio.run(asyncio.wait_for(body(), timeout=60))


def test_a_publish_cancelled_before_it_sent_anything_reports_no_rows(
    client: ja.Client, stream: str
) -> None:
    """Cancelled at its first await (making its publisher), a publish still raises the
    ``CancelledError`` with ``.result``: 0 rows, so ``table.slice(result.rows)`` is
    the whole input, and publishing that stores every row once."""
    table = rows(1_000, stream, headers=False)

    async def body() -> None:
        async with await ja.connect_async(client.options.servers) as aclient:
            task = asyncio.create_task(aclient.publish(table))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError) as cancelled:
                await task
            result = cancelled.value.result  # type: ignore[attr-defined]
            assert (result.rows, result.stored, result.acks.num_rows) == (0, 0, 0)
            rest = await aclient.publish(table.slice(result.rows))
            assert (rest.stored, rest.duplicates) == (1_000, 0)

    run(body)
    assert client.stream_info(stream).state.messages == 1_000


def test_a_cancelled_publish_reports_its_rows_and_a_retry_stores_none_twice(
    client: ja.Client, stream: str
) -> None:
    table = rows(60_000, stream, headers=False)

    async def body() -> None:
        async with await ja.connect_async(client.options.servers) as aclient:
            task = asyncio.create_task(aclient.publish(table, window=256))
            while (await aclient.stream_info(stream)).state.messages == 0:
                await asyncio.sleep(0.005)
            task.cancel()
            with pytest.raises(asyncio.CancelledError) as cancelled:
                await task
            partial = cancelled.value.result  # type: ignore[attr-defined]
            assert isinstance(partial, ja.PublishResult)
            # Every row taken is accounted for: the acks in flight were awaited.
            assert partial.failed == 0
            assert partial.stored == partial.rows < 60_000
            stored = (await aclient.stream_info(stream)).state.messages
            assert stored == partial.stored
            assert partial.acks["seq"].to_pylist() == list(range(1, partial.rows + 1))

            # The same rows again: those stored are duplicates, none is stored twice.
            again = await aclient.publish(table)
            assert again.duplicates == partial.stored
            assert again.stored == 60_000 - partial.stored
            assert (await aclient.stream_info(stream)).state.messages == 60_000

            # A timeout is a cancellation too: the result is the cause's.
            publisher = await aclient.publisher(window=64)
            more = rows(60_000, stream, start=60_000, headers=False)
            with pytest.raises(TimeoutError) as timed_out:
                await asyncio.wait_for(publisher.publish(more), 0.05)
            result = timed_out.value.__cause__.result  # type: ignore[union-attr]
            assert result.rows < 60_000
            assert (await aclient.stream_info(stream)).state.messages == 60_000 + result.stored
            # The publisher goes on with the rest.
            rest = await publisher.publish(more.slice(result.rows))
            assert rest.stored == 60_000 - result.rows
            publisher.close()

    run(body)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_errors_keep_their_classes(shared_nats_server: NatsServer, stream: str) -> None:
    async def body() -> None:
        with pytest.raises(ConnectionFailedError):
            await ja.connect_async(f"nats://127.0.0.1:{free_port()}", connect_timeout=0.5)
        async with await ja.connect_async(shared_nats_server.url) as client:
            with pytest.raises(NotFoundError):
                await client.stream_info("NO_SUCH_STREAM")
            with pytest.raises(NotFoundError):
                async for _batch in client.read("NO_SUCH_STREAM"):
                    pass
            with pytest.raises(BadInputError):
                await client.publish(pa.table({"data": [b"x"]}))  # no subject
            await client.publish(rows(2, stream))
            with pytest.raises(PublishError) as failed:
                await client.publish(rows(2, stream, start=2), expected_last_seq=1)
            assert failed.value.result.failed == 2
            assert failed.value.result.stored == 0
            with pytest.raises(BadInputError):
                client.read(stream, no_such_option=1)

    run(body)


def test_durable_consumers_fetch_iterate_and_ack(client: ja.Client, stream: str) -> None:
    client.publish(rows(250, stream))
    client.create_consumer(stream, durable_name="work", ack_policy="explicit", ack_wait=30.0)

    async def body() -> None:
        async with await ja.connect_async(client.options.servers) as aclient:
            consumer = aclient.pull_consumer(stream, "work")
            first = await consumer.fetch(50, expires=2.0)
            assert isinstance(first, ja.AsyncConsumedBatch)
            assert first.data["consumer_seq"].to_pylist() == list(range(1, 51))
            await first.ack_sync()
            got = 50
            async for batch in consumer:
                await batch.ack()
                got += len(batch)
                if got == 250:
                    break
            info = await aclient.consumer_info(stream, "work")
            deadline = time.monotonic() + 5
            while info.num_ack_pending and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                info = await aclient.consumer_info(stream, "work")
            assert (info.num_ack_pending, info.num_pending) == (0, 0)

            # Nak and term reach the server too.
            await aclient.publish(rows(2, stream, start=250))
            batch = await consumer.fetch(2, expires=2.0)
            await batch.nak([0])
            await batch.term([1])
            again = await consumer.fetch(2, expires=1.0)
            assert again.data["seq"].to_pylist() == [251]
            await again.ack_sync()

            # A push consumer, bound with its info looked up.
            await aclient.create_consumer(
                stream,
                durable_name="pushed",
                deliver_subject=f"deliver.{stream}",
                ack_policy="explicit",
            )
            pushed = await aclient.push_consumer(stream, "pushed")
            seen = 0
            async with pushed.messages(batch_wait=0.05) as messages:
                async for delivered in messages:
                    await delivered.ack()
                    seen += len(delivered)
                    if seen == 252:
                        break
            assert seen == 252

    run(body)


def test_publish_batches_keeps_one_window(client: ja.Client, stream: str) -> None:
    table = rows(900, stream)

    async def body() -> None:
        async with await ja.connect_async(client.options.servers) as aclient:
            async with await aclient.publisher() as publisher:
                results = [
                    r
                    async for r in publisher.publish_batches(
                        table.to_batches(max_chunksize=100), rows_per_result=300
                    )
                ]
            assert [r.stored for r in results] == [300, 300, 300]
            names = await aclient.stream_names()
            assert stream in names

    run(body)
