"""Durable push consumers against a real server, and flow-control acking: a WorkQueue
stream drained through an AckFlowControl consumer with a few dozen ack messages,
unreleased messages left unacknowledged, typed errors for a deleted consumer and a
paused server."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import (
    BadInputError,
    ConsumerDeletedError,
    JetStreamArrowError,
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


@pytest.mark.slow
def test_flow_control_consumption_across_two_kill_9_restarts_delivers_every_message(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    """Two ``kill -9``s of the server (store synced on every write) while a WorkQueue
    is drained through a flow-control consumer. Every message arrives; the ones whose
    window was in flight at a kill arrive again (at-least-once, `delivered` > 1). The
    server may keep messages it counts as acknowledged (below the consumer's ack
    floor) after such a kill; they are exactly those, and purging up to the ack floor
    empties the queue, as docs/consumers.md says."""
    server = nats_server_factory(jetstream_extra="sync_interval: always")
    n, kills, seen, errors = 12_000, 0, [], 0
    with ja.connect(server.url, max_reconnects=None, reconnect_delay=0.2) as client:
        client.create_stream("W", ["W.>"], retention="workqueue")
        # Every write is synced to disk: a smaller window, a patient ack timeout, and
        # msg ids so that a retried publish cannot store a job twice.
        data = pa.table({"data": pa.array([f"m{i}".encode() for i in range(n)])})
        stored = client.publish(
            data, subject="W.jobs", window=1_000, ack_timeout=30.0, msg_id_prefix="job-"
        )
        assert stored.stored == n
        flow_consumer(client, "W", max_ack_pending=1_500)

        def bind() -> ja.Messages:
            return client.push_consumer("W", "fc").messages(batch_rows=500, batch_wait=0.2)

        messages = bind()
        deadline = time.monotonic() + 120
        while len(set(seen)) < n:
            assert time.monotonic() < deadline, f"{len(set(seen))} of {n} after 120 s"
            try:
                batch = next(messages)
            except JetStreamArrowError:
                # The server went away (missed heartbeats): bind again once it is back.
                errors += 1
                time.sleep(0.5)
                try:
                    messages = bind()
                except JetStreamArrowError:
                    pass
                continue
            seen.extend(batch.data.column("seq").to_pylist())
            batch.ack()
            if kills < 2 and len(set(seen)) > (kills + 1) * n // 3:
                server.kill()
                server.start()
                kills += 1
        wait_until(
            lambda: client.consumer_info("W", "fc").ack_floor.stream_seq == n,
            20.0,
            "the consumer's ack floor to reach the last message",
        )
        info = client.consumer_info("W", "fc")
        state = client.stream_info("W").state
        left = state.messages
        print(
            f"{n} messages, {kills} kill -9s, {errors} rebinds: {len(set(seen))} distinct "
            f"delivered, {len(seen) - len(set(seen))} redelivered, 0 lost; "
            f"{messages.flow_control_answers} ack messages and {messages.consumer_resets} "
            "resets after the last rebind; "
            f"{left} acknowledged messages left in the queue by the server"
        )
        assert sorted(set(seen)) == list(range(1, n + 1))
        assert info.num_ack_pending == 0
        if left:
            assert state.last_seq <= info.ack_floor.stream_seq
            client.purge_stream("W", up_to_seq=info.ack_floor.stream_seq + 1)
        assert client.stream_info("W").state.messages == 0
        messages.close()
