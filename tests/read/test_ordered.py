"""Ordered reads keep their promise through failures: every message of the range
exactly once and in order, although the server restarts, the stream's leader moves,
the read's consumer is deleted or deliveries are lost. Each test injects the fault
while the read is in the middle of the range."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import nats
import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import as_dicts, read_all
from jetstream_arrow.exceptions import JetStreamArrowError
from natsserver import NatsCluster, NatsServer, wait_until


def publish_numbers(client: ja.Client, stream: str, n: int, chunk: int = 100_000) -> None:
    """Messages 1..n on subject ``<stream>.n`` with data ``str(i)``, so seq i carries i."""
    for start in range(1, n + 1, chunk):
        stop = min(start + chunk, n + 1)
        table = pa.table({"data": pa.array([str(i).encode() for i in range(start, stop)])})
        result = client.publish(table, subject=f"{stream}.n", msg_id_prefix=f"{stream}-{start}-")
        assert result.stored == stop - start


def seqs_of(batches: Iterator[pa.RecordBatch], on_batch: Callable[[int], None]) -> list[int]:
    """The sequences of every batch, calling ``on_batch(last seq so far)`` after each."""
    seen: list[int] = []
    for batch in batches:
        seen.extend(batch.column("seq").to_pylist())
        data = batch.column("data").to_pylist()
        assert [int(d) for d in data] == batch.column("seq").to_pylist()
        on_batch(seen[-1])
    return seen


def once_past(threshold: int, fault: Callable[[], None]) -> Callable[[int], None]:
    """A callback that runs ``fault`` once, after the read passed ``threshold``."""
    done = threading.Event()

    def check(last: int) -> None:
        if last >= threshold and not done.is_set():
            done.set()
            fault()

    return check


@pytest.mark.slow
def test_a_300k_read_across_a_server_restart_is_exact_and_in_order(
    nats_server: NatsServer,
) -> None:
    n = 300_000
    with ja.connect(nats_server.url, max_reconnects=None, reconnect_delay=0.2) as client:
        client.create_stream("ORD", ["ORD.>"])
        publish_numbers(client, "ORD", n)
        reader = client.read("ORD", batch_rows=10_000, heartbeat=1.0)
        restarts = []

        def restart() -> None:
            nats_server.restart()
            restarts.append(time.monotonic())

        seen = seqs_of(iter(reader), once_past(n // 3, restart))
    print(f"read {len(seen)} of {n} messages across {len(restarts)} server restart(s)")
    assert restarts, "the fault was never injected"
    assert seen == list(range(1, n + 1))


def test_a_read_survives_its_consumer_being_deleted(client: ja.Client, stream: str) -> None:
    n = 50_000
    publish_numbers(client, stream, n)
    reader = client.read(stream, batch_rows=2_000, heartbeat=1.0)

    def delete_the_reads_consumer() -> None:
        names = client.consumer_names(stream)
        assert len(names) == 1, names
        client.delete_consumer(stream, names[0])

    seen = seqs_of(iter(reader), once_past(n // 2, delete_the_reads_consumer))
    assert seen == list(range(1, n + 1))
    wait_until(lambda: not client.consumer_names(stream), 10.0, "the read's consumer to go")


@pytest.mark.cluster
@pytest.mark.slow
def test_a_read_across_a_leader_change_on_r3_is_exact(nats_cluster: NatsCluster) -> None:
    n = 100_000
    with ja.connect(nats_cluster.url, max_reconnects=None, reconnect_delay=0.2) as client:
        wait_until(
            lambda: _created(client), 60.0, "an R3 stream to be created with a leader elected"
        )
        publish_numbers(client, "R3", n)
        leaders = []

        def step_down() -> None:
            before = client.stream_info("R3").cluster
            client._api_json("STREAM.LEADER.STEPDOWN.R3")
            leaders.append(before.leader if before else None)

        seen = seqs_of(
            iter(client.read("R3", batch_rows=5_000, heartbeat=1.0)),
            once_past(n // 2, step_down),
        )
    assert leaders, "the leader never stepped down"
    assert seen == list(range(1, n + 1))


def _created(client: ja.Client) -> bool:
    try:
        client.create_stream("R3", ["R3.>"], replicas=3)
        return True
    except JetStreamArrowError:
        return False


def test_the_ordered_consumer_follows_the_stream_through_a_restart(
    nats_server: NatsServer,
) -> None:
    with ja.connect(nats_server.url, max_reconnects=None, reconnect_delay=0.2) as client:
        client.create_stream("FOLLOW", ["FOLLOW.>"])
        publish_numbers(client, "FOLLOW", 1_000)
        messages = client.ordered_consumer("FOLLOW", heartbeat=1.0).messages(batch_rows=300)
        seen: list[int] = []
        while len(seen) < 1_000:
            seen.extend(next(messages).column("seq").to_pylist())
        nats_server.restart()
        # Published after the restart, from a new connection: the consumer must find
        # them although the server forgot its (in-memory) consumer.
        with ja.connect(nats_server.url) as other:
            table = pa.table({"data": pa.array([str(i).encode() for i in range(1_001, 1_501)])})
            assert other.publish(table, subject="FOLLOW.n").stored == 500
        while len(seen) < 1_500:
            seen.extend(next(messages).column("seq").to_pylist())
        messages.close()
    assert seen == list(range(1, 1_501))


def test_a_quiet_ordered_consumer_recovers_from_a_second_restart_after_its_budget(
    nats_server: NatsServer,
) -> None:
    """Recovery's budget (``resume_timeout``) counts failing time, not quiet time: a
    consumer made again after one restart, that then delivers nothing for longer than
    the budget (a quiet stream), recovers from the next restart too, and delivers
    what comes after it exactly once."""
    budget = 2.0
    with ja.connect(nats_server.url, max_reconnects=None, reconnect_delay=0.2) as client:
        client.create_stream("QUIET", ["QUIET.>"])
        publish_numbers(client, "QUIET", 100)
        consumer = client.ordered_consumer("QUIET", heartbeat=0.5, resume_timeout=budget)
        messages = consumer.messages(batch_rows=100)
        seen: list[int] = []
        failure: list[BaseException] = []

        def follow() -> None:
            try:
                while len(seen) < 200:
                    seen.extend(next(messages).column("seq").to_pylist())
            except BaseException as err:
                failure.append(err)

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        wait_until(lambda: len(seen) >= 100, 10.0, "the first 100 messages")
        nats_server.restart()
        # Nothing to deliver for twice the budget after the consumer is made again.
        time.sleep(2 * budget + 2 * 0.5 * 2)
        assert not failure, failure
        nats_server.restart()
        time.sleep(1.0)
        with ja.connect(nats_server.url) as other:
            table = pa.table({"data": pa.array([str(i).encode() for i in range(101, 201)])})
            assert other.publish(table, subject="QUIET.n").stored == 100
        reader.join(30.0)
        assert not failure, failure
        assert not reader.is_alive(), f"{len(seen)} of 200 messages after the second restart"
        messages.close()
    assert seen == list(range(1, 201))


def test_the_ordered_consumer_can_start_at_new_messages(client: ja.Client, stream: str) -> None:
    publish_numbers(client, stream, 10)
    messages = client.ordered_consumer(stream, deliver="new").messages(batch_wait=0.05)
    table = pa.table({"data": pa.array([b"11", b"12"])})
    client.publish(table, subject=f"{stream}.n")
    first = next(messages)
    messages.close()
    assert first.column("seq").to_pylist() == [11, 12]


def test_ordered_consumer_options_are_checked(client: ja.Client, stream: str) -> None:
    with pytest.raises(ja.exceptions.BadInputError, match="'deliver'"):
        client.ordered_consumer(stream, deliver="last")  # type: ignore[arg-type]
    with pytest.raises(ja.exceptions.BadInputError, match="exclude each other"):
        next(client.ordered_consumer(stream, start_seq=3, deliver="new").messages())


def test_a_read_that_cannot_resume_fails_within_its_resume_timeout(
    nats_server: NatsServer,
) -> None:
    with ja.connect(nats_server.url, max_reconnects=None, reconnect_delay=0.2) as client:
        client.create_stream("GONE", ["GONE.>"])
        publish_numbers(client, "GONE", 20_000)
        reader = client.read("GONE", batch_rows=1_000, heartbeat=0.5, resume_timeout=3.0)
        first = reader.read_next_batch()
        assert first.num_rows == 1_000
        nats_server.stop()
        started = time.monotonic()
        # The error keeps its class through pyarrow's reader.
        with pytest.raises(JetStreamArrowError, match="resume_timeout") as raised:
            reader.read_all()
        waited = time.monotonic() - started
    print(f"gave up after {waited:.1f} s: {type(raised.value).__name__}: {raised.value}")
    assert isinstance(raised.value, (ja.exceptions.OperationTimeoutError, ConnectionError))
    assert waited < 10, "recovery must stop at resume_timeout (3 s), plus a heartbeat or two"


# The server splits its protocol lines on ASCII space and tab only, so another client
# may store subjects with other white space; this client's reader splits on all of it
# and drops the connection on each delivery of such a message.
ODD_SUBJECTS = {1: "a\u00a0b", 100: "c\u2003d", 101: "e\u3000f", 150: "g\u0085h", 300: "i\u00a0j"}


def _store_odd_subjects(url: str, stream: str) -> list[str]:
    """Messages 1..300 from another client; some of them on ``ODD_SUBJECTS``. Returns
    the subjects in stream order."""

    async def store() -> list[str]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            subjects = []
            for i in range(1, 301):
                subject = f"{stream}.{ODD_SUBJECTS.get(i, 'n')}"
                await js.publish(subject, str(i).encode(), headers={"X-Row": str(i)})
                subjects.append(subject)
            return subjects
        finally:
            await nc.close()

    return asyncio.run(store())


@pytest.mark.parametrize("method", ["consumer", "direct"])
def test_a_read_gets_messages_whose_subject_drops_the_connection(
    nats_server: NatsServer, method: str
) -> None:
    with ja.connect(nats_server.url, reconnect_delay=0.1) as client:
        client.create_stream("ODD", ["ODD.>"], allow_direct=True)
        subjects = _store_odd_subjects(nats_server.url, "ODD")
        table = read_all(
            client, "ODD", method=method, batch_rows=64, include_headers=True, resume_timeout=10
        )
        assert table.column("seq").to_pylist() == list(range(1, 301))
        assert table.column("subject").to_pylist() == subjects
        assert [int(d) for d in table.column("data").to_pylist()] == list(range(1, 301))
        headers = as_dicts(table.column("headers").to_pylist())
        assert headers == [{"X-Row": [str(i)]} for i in range(1, 301)]
        # Filtered: two filters, the last message of the range on an odd subject.
        filters = ["ODD.c\u2003d", "ODD.i\u00a0j"]
        table = read_all(client, "ODD", method="consumer", subjects=filters)
        assert table.column("seq").to_pylist() == [100, 300]


def test_the_ordered_consumer_gets_messages_whose_subject_drops_the_connection(
    nats_server: NatsServer,
) -> None:
    with ja.connect(nats_server.url, reconnect_delay=0.1) as client:
        client.create_stream("ODDF", ["ODDF.>"])
        subjects = _store_odd_subjects(nats_server.url, "ODDF")
        messages = client.ordered_consumer("ODDF").messages(batch_rows=50, batch_wait=0.2)
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while len(seen) < 300 and time.monotonic() < deadline:
            seen.extend(next(messages).column("subject").to_pylist())
        messages.close()
    assert seen == subjects
