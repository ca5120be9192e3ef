"""jetstream-arrow server: starts, serves JetStream, stops cleanly on Ctrl-C and SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.embedded_server import EmbeddedServer


def _port_open(url: str) -> bool:
    host, port = url.rsplit("/", 1)[1].split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


def _start(*argv: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetstream_arrow", "server", "--port", "0", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()  # the first line is the URL
    assert url.startswith("nats://127.0.0.1:"), (url, proc.poll())
    return proc, url


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_server_starts_and_stops_cleanly(tmp_path, sig):
    store = tmp_path / "store"
    proc, url = _start("--store-dir", str(store), "--domain", "edge")
    try:
        with ja.connect(url, domain="edge") as client:
            client.create_stream("KEEP", subjects=["keep.>"])
            client.publish(pa.table({"data": [b"x", b"y"]}), subject="keep.it")
            assert client.stream_info("KEEP").state.messages == 2
        os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "listening on" in err
    assert not _port_open(url)
    assert any(store.rglob("*.blk")), "the given store dir is kept"

    # the kept store serves the same stream again
    with (
        EmbeddedServer(store_dir=store, domain="edge") as server,
        ja.connect(server.url, domain="edge") as client,
    ):
        assert client.stream_info("KEEP").state.messages == 2


def test_embedded_server_temporary_store_is_removed():
    server = EmbeddedServer().start()
    try:
        store = server.store_dir
        assert store.exists() and server.is_running()
        with ja.connect(server.url) as client:
            assert client.server_info().get("jetstream")
    finally:
        server.stop()
    assert not server.is_running()
    assert not store.exists()
    server.stop()  # twice is fine


def _server_on(port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jetstream_arrow", "server", "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_port_taken_by_another_server_is_refused():
    """Another nats-server on the port answers a readiness probe as this one would:
    the command must not print that server's URL as its own."""
    with EmbeddedServer() as other:
        port = int(other.url.rsplit(":", 1)[1])
        started = time.monotonic()
        proc = _server_on(port)
        elapsed = time.monotonic() - started
        assert other.is_running()
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == "", "no URL is printed"
    assert f"port {port}" in proc.stderr and "already in use" in proc.stderr, proc.stderr
    print(f"refused in {elapsed:.2f} s")
    assert elapsed < 10


def test_port_taken_by_any_socket_is_refused_at_once():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        proc = _server_on(port)
        elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert f"port {port}" in proc.stderr and "already in use" in proc.stderr, proc.stderr
    # refused before a nats-server is started, not after it gave up
    assert "nats-server exited" not in proc.stderr, proc.stderr
    print(f"refused in {elapsed:.2f} s")


def test_server_start_waits_with_a_timeout(tmp_path):
    """A server that never becomes ready: start() gives up, says what it waited for,
    and leaves no process behind."""
    silent = tmp_path / "silent-server"
    silent.write_text("#!/bin/sh\nexec sleep 60\n")
    silent.chmod(0o755)
    server = EmbeddedServer(binary=str(silent), start_timeout=1.0)
    start = time.monotonic()
    with pytest.raises(ja.exceptions.OperationTimeoutError, match="waited for its ports file"):
        server.start()
    assert time.monotonic() - start < 10
    assert not server.is_running()


def test_server_that_exits_is_reported(tmp_path):
    failing = tmp_path / "failing-server"
    failing.write_text("#!/bin/sh\necho 'bad config line 1' >&2\nexit 3\n")
    failing.chmod(0o755)
    with pytest.raises(ja.exceptions.JetStreamArrowError, match="exited with code 3") as info:
        EmbeddedServer(binary=str(failing)).start()
    assert "bad config line 1" in str(info.value)
