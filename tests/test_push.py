"""Durable push consumers against a real server, and flow-control acking: a WorkQueue
stream drained through an AckFlowControl consumer with a few dozen ack messages,
unreleased messages left unacknowledged, typed errors for a deleted consumer and a
paused server."""

from __future__ import annotations

import os
import signal
import time

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import (
    BadInputError,
    ConsumerDeletedError,
    MissedHeartbeatsError,
)
from natsserver import NatsServer, wait_until


def publish(client: ja.Client, subject: str, n: int, start: int = 0) -> None:
    data = pa.array([f"m{i}".encode() for i in range(start, start + n)])
    assert client.publish(pa.table({"data": data}), subject=subject).stored == n


@pytest.fixture
def work_queue(client: ja.Client, stream: str) -> str:
    """The test's stream, recreated as a WorkQueue."""
    client.delete_stream(stream)
    client.create_stream(stream, [f"{stream}.>"], retention="workqueue")
    return stream


def flow_consumer(client: ja.Client, stream: str, max_ack_pending: int = 10_000) -> str:
    client.create_consumer(
        stream,
        durable_name="fc",
        deliver_subject=f"deliver.{stream}",
        ack_policy="flow_control",
        max_ack_pending=max_ack_pending,
    )
    return "fc"


def test_a_work_queue_drains_through_flow_control_with_few_ack_messages(
    client: ja.Client, work_queue: str
) -> None:
    n = 100_000
    publish(client, f"{work_queue}.jobs", n)
    consumer = client.push_consumer(work_queue, flow_consumer(client, work_queue))
    seen: list[int] = []
    with consumer.messages(batch_rows=5_000) as messages:
        while len(seen) < n:
            batch = next(messages)
            seen.extend(batch.data.column("seq").to_pylist())
            batch.ack()
        # The last window is acknowledged by the server's next request or stall.
        wait_until(
            lambda: client.stream_info(work_queue).state.messages == 0,
            20.0,
            "the work queue to empty",
        )
        answers = messages.flow_control_answers
    print(f"{n} messages consumed with {answers} ack messages ({answers / n * 1000:.2f} per 1000)")
    assert seen == list(range(1, n + 1))
    assert 0 < answers <= 60


def test_unreleased_messages_stay_unacknowledged(client: ja.Client, work_queue: str) -> None:
    publish(client, f"{work_queue}.jobs", 3_000)
    consumer = client.push_consumer(work_queue, flow_consumer(client, work_queue, 1_000))
    with consumer.messages(batch_rows=1_000, batch_wait=0.5) as messages:
        held = [next(messages)]
        while sum(len(b) for b in held) < 1_000:
            held.append(next(messages))
        # The window (max_ack_pending 1000) is full and nothing is released: the
        # server must keep every message and send no more.
        time.sleep(3.0)
        info = client.consumer_info(work_queue, "fc")
        assert info.num_ack_pending == 1_000
        assert client.stream_info(work_queue).state.messages == 3_000
        for batch in held:
            batch.ack()
        rest = 0
        while rest < 2_000:
            batch = next(messages)
            rest += len(batch)
            batch.ack()
        wait_until(
            lambda: client.stream_info(work_queue).state.messages == 0,
            20.0,
            "the work queue to empty once everything was released",
        )


def test_flow_control_batches_refuse_per_row_acks(client: ja.Client, work_queue: str) -> None:
    publish(client, f"{work_queue}.jobs", 10)
    consumer = client.push_consumer(work_queue, flow_consumer(client, work_queue))
    with consumer.messages(batch_wait=0.2) as messages:
        batch = next(messages)
        with pytest.raises(BadInputError, match="flow-control consumer"):
            batch.nak()
        with pytest.raises(BadInputError, match="flow-control consumer"):
            batch.ack([0])
        with pytest.raises(BadInputError, match="flow-control consumer"):
            batch.ack_sync()


def test_an_explicit_push_consumer_acks_each_message(client: ja.Client, stream: str) -> None:
    publish(client, f"{stream}.a", 500)
    client.create_consumer(
        stream,
        durable_name="push",
        deliver_subject=f"deliver.{stream}",
        ack_policy="explicit",
        idle_heartbeat=1.0,
        flow_control=True,
    )
    consumer = client.push_consumer(stream, "push")
    assert consumer.deliver_subject == f"deliver.{stream}"
    seen: list[int] = []
    with consumer.messages(batch_rows=200) as messages:
        while len(seen) < 500:
            batch = next(messages)
            assert batch.data.column("delivered").to_pylist() == [1] * len(batch)
            seen.extend(batch.data.column("seq").to_pylist())
            batch.ack()
    assert seen == list(range(1, 501))
    wait_until(
        lambda: client.consumer_info(stream, "push").ack_floor.stream_seq == 500,
        10.0,
        "every ack to be applied",
    )


def test_binding_by_deliver_subject_needs_no_lookup(client: ja.Client, stream: str) -> None:
    publish(client, f"{stream}.a", 5)
    client.create_consumer(
        stream, durable_name="push", deliver_subject=f"deliver.{stream}", ack_policy="none"
    )
    consumer = client.push_consumer(
        stream, "push", deliver_subject=f"deliver.{stream}", ack_policy="none"
    )
    with consumer.messages(batch_wait=0.2) as messages:
        assert next(messages).data.column("seq").to_pylist() == [1, 2, 3, 4, 5]


def test_a_pull_consumer_is_not_bound_as_push(client: ja.Client, stream: str) -> None:
    client.create_consumer(stream, durable_name="pull", ack_policy="explicit")
    with pytest.raises(BadInputError, match="pull consumer"):
        client.push_consumer(stream, "pull")


def test_a_deleted_push_consumer_raises_its_error(client: ja.Client, stream: str) -> None:
    client.create_consumer(
        stream,
        durable_name="push",
        deliver_subject=f"deliver.{stream}",
        ack_policy="explicit",
        idle_heartbeat=1.0,
    )
    consumer = client.push_consumer(stream, "push")
    with consumer.messages() as messages:
        client.delete_consumer(stream, "push")
        with pytest.raises((ConsumerDeletedError, MissedHeartbeatsError)):
            next(messages)


def test_a_paused_server_is_reported_within_two_heartbeats(nats_server: NatsServer) -> None:
    with ja.connect(nats_server.url, ping_interval=60.0) as client:
        client.create_stream("P", ["P.>"])
        client.create_consumer(
            "P", durable_name="push", deliver_subject="deliver.P", idle_heartbeat=1.0
        )
        messages = client.push_consumer("P", "push").messages()
        assert nats_server.process is not None
        pid = nats_server.process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(MissedHeartbeatsError, match="two"):
                next(messages)
            waited = time.monotonic() - started
        finally:
            os.kill(pid, signal.SIGCONT)
        messages.close()
    print(f"missed heartbeats reported after {waited:.1f} s")
    assert waited < 5.0
