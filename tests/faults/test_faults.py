"""Faults injected into real servers, each test counting what was lost or doubled:

- a publish with msg ids through three ``kill -9``s of a server whose store syncs
  every write, then a re-run of the rows it reported failed: every row stored once;
- a real overload: publishers with large windows against a memory stream whose
  server refuses part of them with ``429 Too Many Requests``: the publishers shrink
  their windows, and every row is stored once within the default retries;
- a server paused with ``SIGSTOP`` under each way of reading (a range read, a pull
  ``fetch``, a pull consumer's ``messages()``, a push consumer's ``messages()``): a
  typed error within two heartbeats, and a client that still closes at once;
- a reader paused (``SIGSTOP``) until the server drops it as a slow consumer, with
  the rest of its range in flight: it reconnects and reads every message once.

What other tests already prove is not repeated here:
``test_errors.py::test_ack_timeouts_are_retried_with_msg_ids`` (a publish across a
paused server), ``test_ordered.py::test_a_300k_read_across_a_server_restart_is_exact_and_in_order``
and ``test_a_read_that_cannot_resume_fails_within_its_resume_timeout`` (a read across a
restart, and one whose server stopped), ``test_push.py::test_a_paused_server_is_reported_within_two_heartbeats``
(a push consumer whose server was paused before anything was delivered) and
``test_push.py::test_flow_control_consumption_across_two_kill_9_restarts_delivers_every_message``
(consumption across ``kill -9``s). Each test prints one line of figures.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import jetstream_arrow as ja
from engine_helpers import as_dicts, read_all, runs_of, stream_state
from fault_helpers import Killer, stored_messages
from jetstream_arrow import _core
from jetstream_arrow.client import PublishResult
from jetstream_arrow.exceptions import MissedHeartbeatsError
from natsserver import NatsServer

# -- 1. kill -9 during a publish --------------------------------------------------------


#: How a publish treats rows whose ack was lost at a kill: the defaults retry them by
#: msg id; with no retries they are reported failed, and the re-run sends them again.
RETRIES = {"retried": _core.DEFAULT_MAX_RETRIES, "reported": 0}


@pytest.mark.fault
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("lost_acks", list(RETRIES))
def test_a_publish_through_three_kill_9s_stores_every_row_exactly_once(
    nats_server_factory: Callable[..., NatsServer], lost_acks: str
) -> None:
    # 200k rows: enough for three kills in the middle of one publish call while the
    # whole suite stays within CI time.
    n, kills, prefix = 200_000, 3, "k-"
    # The store syncs every write before its ack, the setting docs/publishing.md names for
    # single-node durability; a kill -9 loses what the process holds, never what it
    # wrote, so a memory-backed directory keeps the same promise at a fraction of
    # the disk's sync time.
    server = nats_server_factory(jetstream_extra="sync_interval: always", tmpfs=True)
    with ja.connect(server.url, max_reconnects=None, reconnect_delay=0.2) as client:
        # Re-runs are deduplicated only within the duplicate window: make it outlast
        # the test, whatever the machine's speed.
        client.create_stream("K", ["K.>"], duplicate_window=600.0)
        table = pa.table({"data": pa.array([f"row-{i}".encode() for i in range(n)])})

        def publish(start: int, stop: int) -> PublishResult:
            # Ids from the prefix and the row number: a re-run of rows start..stop
            # sends exactly the ids of the first run.
            return client.publish(
                table.slice(start, stop - start),
                subject="K.rows",
                msg_id_prefix=prefix,
                msg_id_start=start,
                max_retries=RETRIES[lost_acks],
                raise_on_error=False,
            )

        killer = Killer(server, n, kills, timeout=120.0)
        started = time.monotonic()
        killer.start()
        try:
            first = publish(0, n)
        finally:
            finished = time.monotonic()
            killer.done.set()
            killer.join(60)
        assert killer.error is None, killer.error
        assert len(killer.kills) == kills, f"only {len(killer.kills)} kills: {killer.kills}"
        assert all(at < finished and stored < n for stored, at, _ in killer.kills), (
            "a kill came after the publish",
            killer.kills,
        )
        assert first.rows == n
        assert first.stored + first.duplicates + first.failed == n

        failed = first.failed_rows().column("row").to_pylist()
        if lost_acks == "reported":
            # Some window was in flight at each kill: its rows must have been
            # reported, or the re-run below was not put to the test.
            assert failed, "no row was reported failed"
        reruns = [publish(start, stop) for start, stop in runs_of(failed)]
        assert sum(r.failed for r in reruns) == 0, [r.failed_rows().slice(0, 3) for r in reruns]
        stored = first.stored + sum(r.stored for r in reruns)
        duplicates = first.duplicates + sum(r.duplicates for r in reruns)
        elapsed = time.monotonic() - started

        assert stream_state(client, "K").messages == n
        back = read_all(client, "K", include_headers=True)
        ids = [h["Nats-Msg-Id"][0] for h in as_dicts(back.column("headers").to_pylist())]
        assert len(ids) == n
        assert len(set(ids)) == n, "a msg id was stored twice"
        assert set(ids) == {f"{prefix}{i}" for i in range(n)}
        # Every ack told the truth: the sequence it named holds that row, although
        # the server was killed after acknowledging it.
        by_seq = dict(zip(back.column("seq").to_pylist(), ids, strict=True))
        data = dict(zip(ids, back.column("data").to_pylist(), strict=True))
        for i, seq in enumerate(first.acks.column("seq").to_pylist()):
            if seq is not None:
                assert by_seq[seq] == f"{prefix}{i}", (i, seq)
        assert all(data[f"{prefix}{i}"] == f"row-{i}".encode() for i in range(n))

    print(
        f"{lost_acks}: {n} rows, {kills} kill -9s at {[s for s, _, _ in killer.kills]} stored "
        f"(down {', '.join(f'{d:.2f}' for _, _, d in killer.kills)} s): first run "
        f"{first.stored} stored, {first.duplicates} duplicates, {first.failed} failed; "
        f"re-run of {len(failed)} rows in {len(reruns)} calls: "
        f"{sum(r.stored for r in reruns)} stored, {sum(r.duplicates for r in reruns)} "
        f"duplicates; stream {len(ids)} messages, {len(set(ids))} ids: 0 lost, 0 "
        f"duplicated, stored + duplicates = {stored} + {duplicates} = {stored + duplicates} "
        f"in {elapsed:.1f} s"
    )
    assert stored + duplicates == n


@pytest.mark.fault
@pytest.mark.timeout(180)
def test_a_second_kill_as_the_first_kills_lost_acks_expire_stops_nothing(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    """The acks lost at one kill expire an ack timeout later; a second short outage at
    that moment is no reason to stop the publish: the rows are retried by msg id once
    the server is back, and every row is stored once."""
    n, ack_timeout, prefix = 60_000, 1.0, "e-"
    server = nats_server_factory(jetstream_extra="sync_interval: always", tmpfs=True)
    with ja.connect(server.url, max_reconnects=None, reconnect_delay=0.1) as client:
        client.create_stream("E", ["E.>"], duplicate_window=600.0)
        table = pa.table({"data": pa.array([f"row-{i}".encode() for i in range(n)])})
        kills: list[float] = []

        def kill_twice() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if (stored_messages(server) or 0) >= n // 4:
                    break
                time.sleep(0.005)
            for _ in range(2):
                kills.append(time.monotonic())
                server.kill()
                server.start()
                # The second kill lands when the first kill's in-flight rows expire.
                time.sleep(max(0.0, kills[0] + ack_timeout - 0.2 - time.monotonic()))

        killer = threading.Thread(target=kill_twice, daemon=True)
        killer.start()
        result = client.publish(
            table, subject="E.rows", msg_id_prefix=prefix, ack_timeout=ack_timeout
        )
        killer.join(60)
        assert len(kills) == 2, kills
        assert (result.stored + result.duplicates, result.failed) == (n, 0)
        assert stream_state(client, "E").messages == n
        print(
            f"kills {kills[1] - kills[0]:.2f} s apart: {result.stored} stored, "
            f"{result.duplicates} duplicates"
        )


# -- 2. a real overload: 429 Too Many Requests ------------------------------------------

#: The server's ingest queue per stream (``max_buffered_msgs``, default 100,000): below
#: the messages the publishers keep in flight, so the server must refuse some.
INGEST_QUEUE = 20_000


@pytest.mark.fault
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_an_overload_answered_with_429s_loses_and_doubles_nothing(
    nats_server_factory: Callable[..., NatsServer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jetstream_arrow")
    publishers, per, window = 4, 100_000, 32_768
    rows = publishers * per
    server = nats_server_factory(jetstream_extra=f"max_buffered_msgs: {INGEST_QUEUE}")
    with ja.connect(server.url) as client:
        client.create_stream("O", ["O.>"], storage="memory")
        tables = [
            pa.table({"data": pa.array([f"{k}-{i}".encode() for i in range(per)])})
            for k in range(publishers)
        ]
        results: list[PublishResult | None] = [None] * publishers
        errors: list[BaseException] = []
        # Each publisher its own connection, connected before counting what the
        # server receives, so that count is publishes only.
        connections = [ja.connect(server.url) for _ in range(publishers)]
        try:
            received_before = server.monitor("varz")["in_msgs"]

            def publish(k: int) -> None:
                try:
                    # No msg ids: a 429'd message the server had stored after all
                    # would be stored twice by its retry, and the stream would say so.
                    # A long ack timeout: acks come late under overload, and a row
                    # without a msg id whose ack is late is reported "may or may not be
                    # stored", which is not what this test is about.
                    results[k] = connections[k].publish(
                        tables[k],
                        subject=f"O.{k}",
                        window=window,
                        ack_timeout=30.0,
                        raise_on_error=False,
                    )
                except BaseException as err:
                    errors.append(err)

            threads = [threading.Thread(target=publish, args=(k,)) for k in range(publishers)]
            started = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(max(1.0, started + 150 - time.monotonic()))
            elapsed = time.monotonic() - started
            assert not any(t.is_alive() for t in threads), (
                f"publishers still busy after {elapsed:.0f} s"
            )
            received = server.monitor("varz")["in_msgs"] - received_before
        finally:
            for connection in connections:
                connection.close()
        assert not errors, errors
        done = [r for r in results if r is not None]
        assert len(done) == publishers

        # Every row is stored or reported failed, never neither, never both.
        for result in done:
            assert result.rows == per
            assert result.stored + result.failed == per
            assert result.duplicates == 0
            seq, error = result.acks.column("seq"), result.acks.column("error")
            assert seq.null_count == result.failed
            assert pc.all(pc.xor(seq.is_valid(), error.is_valid())).as_py()
        stored = sum(r.stored for r in done)
        failed = sum(r.failed for r in done)
        # Each message the server received beyond the rows is a resend, and only a 429
        # makes one here (the stream exists, acks are awaited 30 s, and a row without
        # msg id is never resent after a timeout): each 429 answer was followed by a
        # resend, or by the row being reported failed.
        resends = received - rows
        answered_429 = resends + failed
        assert resends > 0, "the server refused nothing: no overload happened"
        assert "excessive stream ingest rate" in server.log
        # The results count those resends, and the log says the server pushed back.
        assert sum(r.resends for r in done) == resends
        pushed_back = [
            r
            for r in caplog.records
            if r.name == "jetstream_arrow.publish" and "pushed back" in r.getMessage()
        ]
        assert pushed_back and all(r.levelno == logging.WARNING for r in pushed_back)
        # Each 429 halves a publisher's window, so the four settle below what the
        # server takes in, and no row runs out of its (default) retries.
        reasons = {e for r in done for e in r.failed_rows().column("error").to_pylist()}
        assert failed == 0, f"{failed} rows reported failed: {reasons}"

        # The stream holds exactly the rows reported stored, each once.
        assert stream_state(client, "O").messages == stored
        back = read_all(client, "O").column("data").to_pylist()
        expected = {
            f"{k}-{i}".encode()
            for k, r in enumerate(done)
            for i, s in enumerate(r.acks.column("seq").to_pylist())
            if s is not None
        }
        assert len(back) == len(set(back)) == stored == rows
        assert set(back) == expected

    print(
        f"{publishers} publishers x {per} rows, window {window}, server ingest queue "
        f"{INGEST_QUEUE}: {answered_429} 429 answers ({resends} resends), {stored} stored, "
        f"{failed} reported failed, 0 duplicates, stream {stored} in {elapsed:.1f} s: "
        "0 lost, 0 duplicated"
    )


# -- 3. a paused server under each kind of read -----------------------------------------

HEARTBEAT = 1.0
#: How long a range read tries to recreate its consumer before it gives up.
RESUME_TIMEOUT = 1.0
#: Scheduling on a busy two-core machine.
SLACK = 1.5


class Paused:
    """SIGSTOP the server now (``stop()``) or after some seconds (``later()``), and
    always SIGCONT it at the end, so its fixture can stop it."""

    def __init__(self, server: NatsServer) -> None:
        assert server.process is not None
        self.pid = server.process.pid
        self.at: float | None = None
        self.timer: threading.Timer | None = None

    def stop(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)
        self.at = time.monotonic()

    def later(self, after: float) -> None:
        self.timer = threading.Timer(after, self.stop)
        self.timer.start()

    def since(self) -> float:
        assert self.at is not None, "the server was never paused"
        return time.monotonic() - self.at

    def __enter__(self) -> Paused:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.cancel()
        os.kill(self.pid, signal.SIGCONT)


def read_range(client: ja.Client, paused: Paused) -> tuple[BaseException, int, Any]:
    """A range read of a large stream, paused once a quarter of it was read."""
    n = 200_000
    client.create_stream("R", ["R.>"])
    assert client.publish(pa.table({"data": pa.array([b"x" * 64] * n)}), subject="R.n").stored == n
    reader = client.read("R", batch_rows=10_000, heartbeat=HEARTBEAT, resume_timeout=RESUME_TIMEOUT)
    seen = 0
    error: MissedHeartbeatsError | None = None
    # The error keeps its class through pyarrow's RecordBatchReader: an application
    # catches it by that class.
    try:
        for batch in reader:
            seen += batch.num_rows
            if paused.at is None and seen >= n // 4:
                paused.stop()
    except ja.exceptions.MissedHeartbeatsError as err:
        error = err
    assert error is not None, f"the read ended without an error after {seen} rows"
    assert "resume_timeout" in str(error), error
    assert n // 4 <= seen < n
    return error, seen, reader


def fetch(client: ja.Client, paused: Paused) -> tuple[BaseException, int, Any]:
    """A fetch waiting for messages (a long poll with heartbeats), paused meanwhile."""
    client.create_stream("F", ["F.>"])
    client.create_consumer("F", durable_name="pull", ack_policy="explicit")
    consumer = client.pull_consumer("F", "pull")
    paused.later(0.5)
    with pytest.raises(MissedHeartbeatsError, match="two heartbeat periods") as raised:
        consumer.fetch(100, expires=30.0, heartbeat=HEARTBEAT)
    return raised.value, 0, None


def pull_messages(client: ja.Client, paused: Paused) -> tuple[BaseException, int, Any]:
    """Continuous pull consumption, paused after the first batch."""
    client.create_stream("M", ["M.>"])
    client.create_consumer("M", durable_name="pull", ack_policy="explicit")
    client.publish(pa.table({"data": pa.array([b"m"] * 100)}), subject="M.n")
    messages = client.pull_consumer("M", "pull").messages(heartbeat=HEARTBEAT)
    batch = next(messages)
    batch.ack()
    paused.stop()
    with pytest.raises(MissedHeartbeatsError, match="two heartbeat periods") as raised:
        next(messages)
    return raised.value, len(batch), messages


def push_messages(client: ja.Client, paused: Paused) -> tuple[BaseException, int, Any]:
    """Push consumption, paused after the first batch."""
    client.create_stream("U", ["U.>"])
    client.create_consumer(
        "U",
        durable_name="push",
        deliver_subject="deliver.U",
        ack_policy="explicit",
        idle_heartbeat=HEARTBEAT,
    )
    client.publish(pa.table({"data": pa.array([b"u"] * 100)}), subject="U.n")
    messages = client.push_consumer("U", "push").messages(batch_wait=0.2)
    batch = next(messages)
    batch.ack()
    paused.stop()
    with pytest.raises(MissedHeartbeatsError, match="two") as raised:
        next(messages)
    return raised.value, len(batch), messages


#: Each way of reading, and how long it may take to fail after the pause: two
#: heartbeats, and for a range read also its attempts to recreate its consumer.
READS = {
    "read": (read_range, 2 * HEARTBEAT + RESUME_TIMEOUT),
    "fetch": (fetch, 2 * HEARTBEAT),
    "pull-messages": (pull_messages, 2 * HEARTBEAT),
    "push-messages": (push_messages, 2 * HEARTBEAT),
}


@pytest.mark.fault
@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", list(READS))
def test_a_paused_server_raises_a_typed_error_in_time_and_the_client_closes(
    nats_server: NatsServer, how: str
) -> None:
    """SIGSTOP keeps the TCP connection open and silent, as a hung server or a black-hole
    network does: only the heartbeats can tell. Each read must fail with
    MissedHeartbeatsError within its bound, and the reader and the client must close
    at once although the server still answers nothing."""
    read, bound = READS[how]
    with Paused(nats_server) as paused:
        client = ja.connect(nats_server.url, request_timeout=2.0)
        try:
            error, delivered, reader = read(client, paused)
            waited = paused.since()
            started = time.monotonic()
            if reader is not None:
                reader.close()
            closed_reader = time.monotonic() - started
        finally:
            started = time.monotonic()
            client.close()
            closed_client = time.monotonic() - started
        assert client.is_closed()
        print(
            f"{how}: {type(error).__name__} {waited:.2f} s after SIGSTOP (bound {bound:.1f} s "
            f"+ {SLACK} s), {delivered} rows delivered before; reader closed in "
            f"{closed_reader:.3f} s, client in {closed_client:.3f} s, server still paused"
        )
    assert isinstance(error, TimeoutError)
    assert waited < bound + SLACK
    # Closing waits for nothing the silent server would have to answer.
    assert closed_reader < 1.0
    assert closed_client < 1.0


# -- 4. a paused reader dropped by the server as a slow consumer ----------------------

#: Readers that pause themselves (SIGSTOP) once they have their first batch: the rest
#: is then in flight to them, more than the sockets hold. Each prints how many rows it
#: got, how many distinct sequences, whether they came 1..n in order, and its error.
PAUSING_READERS = {
    # A range read: an ordered consumer (AckNone), which never sends a message again.
    "read": """
reader = client.read(stream, batch_rows=65_536, max_bytes=32 << 20)
seqs = reader.read_next_batch().column("seq").to_pylist()
pause()
for batch in reader:
    seqs.extend(batch.column("seq").to_pylist())
""",
    # A durable pull consumer's messages(), acking each batch: its pull requests die
    # with the connection, so it must pull again on the new one.
    "durable-messages": """
messages = client.pull_consumer(stream, "W").messages(
    max_messages=131_072, max_bytes=128 << 20, batch_rows=4_096, heartbeat=1.0
)
seqs = []
while len(set(seqs)) < n:
    batch = next(messages)
    first = not seqs
    seqs.extend(batch.data.column("seq").to_pylist())
    if first:
        pause()
    batch.ack_sync()
""",
}

PAUSING_READER = """
import json, os, signal, sys
import jetstream_arrow as ja
url, stream, n = sys.argv[1], sys.argv[2], int(sys.argv[3])

def pause():
    print("pausing", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)

error = None
with ja.connect(url, reconnect_delay=0.1) as client:
    try:
{body}
    except Exception as err:
        error = f"{{type(err).__name__}}: {{err}}"
print(json.dumps({{"rows": len(seqs), "distinct": len(set(seqs)),
    "in_order": seqs == list(range(1, len(seqs) + 1)), "error": error}}))
"""


@pytest.mark.fault
@pytest.mark.slow
@pytest.mark.timeout(540)
@pytest.mark.parametrize("how", list(PAUSING_READERS))
def test_a_reader_paused_until_the_server_drops_it_reads_every_message(
    nats_server_factory: Callable[..., NatsServer], how: str
) -> None:
    """The server closes a client that takes nothing for ``write_deadline`` while it
    has messages for it: its pull requests and what it had sent on that connection
    are gone. The reader reconnects and must go on: a range read returns the range
    exactly once and in order; a durable consumer (acks, ``ack_wait`` 10 s) gets
    every message and leaves nothing unacknowledged."""
    server = nats_server_factory('write_deadline: "1s"')
    n = 100_000
    with ja.connect(server.url) as client:
        client.create_stream("SLOW", ["SLOW.>"], storage="memory")
        data = pa.array([i.to_bytes(4, "big") * 256 for i in range(n)])
        assert client.publish(pa.table({"data": data}), subject="SLOW.n").stored == n
        client.create_consumer(
            "SLOW", durable_name="W", ack_policy="explicit", ack_wait=10.0, max_ack_pending=n
        )
    body = "\n".join("        " + line for line in PAUSING_READERS[how].strip().splitlines())
    # Whether the server has more for the paused reader than its socket holds depends
    # on what the reader had pulled ahead when it stopped (on a loaded machine it may
    # have everything of the range in hand): the fault is made again, three times at
    # most, and every attempt must read every message.
    for _ in range(3):
        dropped, result, returncode = _pause_reader_until_dropped(server, body, n)
        print(f"{how}: the server dropped the paused reader {dropped} time(s); it read {result}")
        assert result["error"] is None
        assert result["distinct"] == n
        if how == "read":
            assert result == {"rows": n, "distinct": n, "in_order": True, "error": None}
        else:
            with ja.connect(server.url) as client:
                info = client.consumer_info("SLOW", "W")
            assert (info.num_pending, info.num_ack_pending) == (0, 0)
        assert returncode == 0
        if dropped >= 1:
            break
        if how != "read":
            with ja.connect(server.url) as client:
                client.reset_consumer("SLOW", "W", seq=1)  # every message again
    assert dropped >= 1, "the server never dropped the paused reader: the fault did not happen"


def _pause_reader_until_dropped(server: NatsServer, body: str, n: int) -> tuple[int, Any, int]:
    """Run a pausing reader; SIGCONT it once the server dropped it (or after 30 s).
    Returns how many times the server dropped it, what it read, its exit code."""
    slow_before = int(server.monitor("varz").get("slow_consumers", 0))
    child = subprocess.Popen(
        [sys.executable, "-c", PAUSING_READER.format(body=body), server.url, "SLOW", str(n)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "pausing"
        # The child stops itself right after printing.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if int(server.monitor("varz").get("slow_consumers", 0)) > slow_before:
                break
            time.sleep(0.1)
        dropped = int(server.monitor("varz").get("slow_consumers", 0)) - slow_before
        os.kill(child.pid, signal.SIGCONT)
        out, _ = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.wait()
    return dropped, json.loads(out.strip().splitlines()[-1]), child.returncode
