"""Durable sourcing and mirroring (nats-server 2.14+): a stream that sources from, or
mirrors, a WorkQueue origin through an AckFlowControl consumer of the origin
(``StreamSource.consumer``), with the server killed (``kill -9``, store synced on every
write) and restarted mid-way. Every message arrives exactly once, and the origin
empties as the copy stores them."""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.management import SourceConsumer, StreamSource
from natsserver import NatsServer, wait_until

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("kind", ["source", "mirror"])
def test_a_durable_copy_of_a_work_queue_survives_a_kill_9_with_every_message_once(
    nats_server_factory: Callable[..., NatsServer], kind: str
) -> None:
    server = nats_server_factory(jetstream_extra="sync_interval: always")
    n, half = 20_000, 10_000
    with ja.connect(server.url, max_reconnects=None, reconnect_delay=0.2) as client:
        client.create_stream("ORIGIN", ["jobs.>"], retention="workqueue")
        client.create_consumer(
            "ORIGIN",
            durable_name="copier",
            deliver_subject="deliver.copier",
            ack_policy="flow_control",
            max_ack_pending=2_000,
        )
        through = StreamSource("ORIGIN", consumer=SourceConsumer("copier", "deliver.copier"))
        if kind == "source":
            client.create_stream("COPY", sources=[through])
        else:
            client.create_stream("COPY", mirror=through)

        def publish(start: int, count: int) -> None:
            rows = range(start, start + count)
            data = pa.table({"data": [f"m{i}".encode() for i in rows]})
            done = client.publish(
                data, subject="jobs.x", window=1_000, ack_timeout=30.0, msg_id_prefix=f"job{start}-"
            )
            assert done.stored + done.duplicates == count

        publish(0, half)
        wait_until(
            lambda: client.stream_info("COPY").state.messages > half // 2,
            60.0,
            "the copy to store half of the first messages",
        )
        copied_at_kill = client.stream_info("COPY").state.messages
        server.kill()
        server.start()
        publish(half, n - half)
        wait_until(
            lambda: client.stream_info("COPY").state.messages >= n,
            120.0,
            f"the {kind} to store all {n} messages",
        )
        time.sleep(1)  # anything more would come now
        copy = client.read("COPY").read_all()
        origin = client.stream_info("ORIGIN").state
        floor = client.consumer_info("ORIGIN", "copier").ack_floor.stream_seq
        data = copy.column("data").to_pylist()
        print(
            f"{kind}: {n} messages, 1 kill -9 with {copied_at_kill} copied: "
            f"{len(set(data))} distinct in the copy, {len(data) - len(set(data))} "
            f"duplicated; origin left with {origin.messages} (ack floor {floor})"
        )
        assert sorted(data) == sorted(f"m{i}".encode() for i in range(n))
        # The origin empties as the copy stores (acknowledged by flow control);
        # what a crash leaves below the ack floor is done work (see docs/consumers.md).
        wait_until(
            lambda: client.consumer_info("ORIGIN", "copier").ack_floor.stream_seq == n,
            30.0,
            "the origin's ack floor to reach the last message",
        )
        left = client.stream_info("ORIGIN").state
        if left.messages:
            assert left.last_seq <= n
            client.purge_stream("ORIGIN", up_to_seq=n + 1)
        assert client.stream_info("ORIGIN").state.messages == 0
