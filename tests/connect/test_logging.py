"""The core's events reach Python's ``logging``, each made to happen against a real
server: a reconnect, a read that resumes with a new consumer, rows resent after an ack
timeout and the late acks dropped, heartbeats missed by pull and push consumers. (The
server pushing back with ``429`` is told in test_faults.py's overload test.) Each
event is a record of a ``jetstream_arrow.*`` logger; publish results count resends
and late acks too."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import MissedHeartbeatsError
from natsserver import NatsServer, wait_until


def records(caplog: pytest.LogCaptureFixture, logger: str, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and text in r.getMessage()]


@pytest.fixture
def caplog(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Records of every ``jetstream_arrow`` logger from INFO up."""
    caplog.set_level(logging.INFO, logger="jetstream_arrow")
    return caplog


def test_a_reconnect_is_told(nats_server: NatsServer, caplog: pytest.LogCaptureFixture) -> None:
    with ja.connect(nats_server.url, max_reconnects=None, reconnect_delay=0.1) as client:
        client.create_stream("R", ["r.>"])
        nats_server.restart()
        wait_until(
            lambda: records(caplog, "jetstream_arrow.connection", "connected to the server"),
            20.0,
            "a record of the reconnect",
        )
        (gone,) = records(caplog, "jetstream_arrow.connection", "disconnected")
        assert gone.levelno == logging.WARNING
        assert client.publish(pa.table({"data": [b"x"]}), subject="r.a").stored == 1


def test_a_read_whose_consumer_is_deleted_resumes_and_says_so(
    client: ja.Client, stream: str, caplog: pytest.LogCaptureFixture
) -> None:
    n = 300
    # Payloads of 1 KiB and pulls of 20 KiB: most of the stream is still on the server
    # when the consumer goes.
    data = [f"{i:04d}".encode() * 256 for i in range(n)]
    client.publish(pa.table({"data": data}), subject=f"{stream}.a")
    reader = client.read(stream, batch_rows=20, max_bytes=20 * 1024, method="consumer")
    first = reader.read_next_batch()
    for name in client.consumer_names(stream):
        client.delete_consumer(stream, name)
    seqs = first.column("seq").to_pylist() + reader.read_all().column("seq").to_pylist()
    assert seqs == list(range(1, n + 1)), "each message once, in order"
    (resumed,) = records(caplog, "jetstream_arrow.read", "resumes after seq")
    assert f"read of stream {stream!r}" in resumed.getMessage().replace('"', "'")
    assert records(caplog, "jetstream_arrow.read", "resumed 1 times")


@pytest.mark.fault
def test_rows_resent_after_an_ack_timeout_are_counted_and_told(
    nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The server paused past the ack timeout: rows are resent (with msg ids, stored
    once), and the first attempts' acks, coming after it resumes, are dropped late."""
    assert nats_server.process is not None
    pid = nats_server.process.pid
    n = 200
    with ja.connect(nats_server.url) as client:
        client.create_stream("L", ["l.>"])
        table = pa.table({"data": [f"m{i}".encode() for i in range(n)]})
        os.kill(pid, signal.SIGSTOP)
        resume = threading.Timer(1.5, os.kill, (pid, signal.SIGCONT))
        resume.start()
        try:
            result = client.publish(
                table, subject="l.a", msg_id_prefix="l-", ack_timeout=0.5, retry_backoff=0.1
            )
        finally:
            resume.join()
            os.kill(pid, signal.SIGCONT)
        assert result.stored + result.duplicates == n and result.failed == 0
        assert client.stream_info("L").state.messages == n
        assert result.resends >= n, result
        assert result.late_replies > 0, result
        (first,) = records(caplog, "jetstream_arrow.publish", "is resent")
        assert "ack_timeout" in first.getMessage()
        (summary,) = records(caplog, "jetstream_arrow.publish", "late acks dropped")
        assert f"with {result.resends} resends; {result.late_replies} late" in summary.getMessage()


@pytest.mark.fault
def test_missed_heartbeats_are_told_before_they_are_raised(
    nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    assert nats_server.process is not None
    pid = nats_server.process.pid
    with ja.connect(nats_server.url, request_timeout=2.0, ping_interval=60.0) as client:
        client.create_stream("HB", ["hb.>"])
        client.create_consumer("HB", durable_name="pull", ack_policy="explicit")
        client.create_consumer(
            "HB", durable_name="push", deliver_subject="d.HB", idle_heartbeat=0.5
        )
        pulled = client.pull_consumer("HB", "pull").messages(heartbeat=0.5, expires=2.0)
        pushed = client.push_consumer("HB", "push").messages()
        os.kill(pid, signal.SIGSTOP)
        try:
            for messages in (pulled, pushed):
                started = time.monotonic()
                with pytest.raises(MissedHeartbeatsError):
                    next(messages)
                assert time.monotonic() - started < 5.0
        finally:
            os.kill(pid, signal.SIGCONT)
        pulled.close()
        pushed.close()
    told = records(caplog, "jetstream_arrow.consume", "no messages and no idle heartbeats")
    assert len(told) == 2, [r.getMessage() for r in told]
    assert all(r.levelno == logging.WARNING for r in told)
    assert any('"pull"' in r.getMessage() for r in told)
    assert any('"push"' in r.getMessage() for r in told)


_EXIT_RIGHT_AFTER_CONNECTING = """
import sys
import time

import jetstream_arrow as ja


class SlowToGo:
    # Cleared with this module while the interpreter finalizes; its sleep lets
    # other threads take the GIL then.
    def __del__(self):
        time.sleep(0.2)


# The main thread keeps the GIL until it waits, so the connection's first event
# (told from a runtime thread once connected) often waits for the GIL until the
# interpreter is finalizing.
sys.setswitchinterval(60)
client = ja.connect(sys.argv[1])
slow = SlowToGo()
print("CONNECTED")
"""


def test_an_event_told_while_the_interpreter_exits_does_not_crash_it(
    shared_nats_server: NatsServer,
) -> None:
    # A runtime thread that takes the GIL once Python finalizes is ended by CPython
    # mid-frame, which crashed the process (SIGSEGV) in about one exit in three of this
    # script. Twelve exits, four at a time.
    def exit_once(_: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _EXIT_RIGHT_AFTER_CONNECTING, shared_nats_server.url],
            capture_output=True,
            text=True,
            timeout=60,
        )

    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(exit_once, range(12)))
    assert [(r.returncode, r.stdout.strip()) for r in runs] == [(0, "CONNECTED")] * 12, [
        r.stderr[-2000:] for r in runs if r.returncode
    ]
