"""The client in forked processes (PySpark forks its Python workers): a child connects
again and works; a connection inherited through fork fails clearly instead of hanging."""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import read_all, rows
from jetstream_arrow.exceptions import ConnectionFailedError
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(60)

CHILD_TIMEOUT = 30.0


def run_in_child(body: Callable[[int], int]) -> tuple[int, str]:
    """Fork; the child runs ``body(write_fd)`` and exits with its return value (99 on an
    exception, whose text goes to the pipe). Returns (exit status, what the child wrote).
    The child is killed if it runs longer than CHILD_TIMEOUT."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        status = 98
        try:
            os.close(read_fd)
            status = body(write_fd)
        except BaseException as err:
            try:
                os.write(write_fd, f"{type(err).__name__}: {err}".encode())
            finally:
                status = 99
        finally:
            os._exit(status)
    os.close(write_fd)
    out = b""
    deadline = time.monotonic() + CHILD_TIMEOUT
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("the forked child did not finish (a hang)")
            ready, _, _ = select.select([read_fd], [], [], left)
            if ready:
                chunk = os.read(read_fd, 65536)
                if not chunk:
                    break
                out += chunk
        _, wait_status = os.waitpid(pid, 0)
        pid = 0
    finally:
        os.close(read_fd)
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(wait_status), out.decode(errors="replace")


def test_child_connects_again_publishes_and_reads(
    client: ja.Client, stream: str, shared_nats_server: NatsServer
) -> None:
    # The parent has used the client (and so the runtime) before the fork.
    assert client.publish(rows(100, stream, headers=False)).stored == 100
    assert read_all(client, stream).num_rows == 100
    url = shared_nats_server.url

    def child(out: int) -> int:
        with ja.connect(url) as own:
            result = own.publish(rows(50, stream, start=100, headers=False))
            back = read_all(own, stream, start_seq=101)
            os.write(out, f"{result.stored} {back.num_rows}".encode())
            ok = result.stored == 50 and back.column("seq").to_pylist() == list(range(101, 151))
            return 0 if ok else 1

    status, out = run_in_child(child)
    assert (status, out) == (0, "50 50")
    # The parent's connection still works after the child is gone.
    assert client.publish(rows(10, stream, start=150, headers=False)).stored == 10
    back = read_all(client, stream)
    assert back.column("seq").to_pylist() == list(range(1, 161))
    assert back.column("data").to_pylist() == [f"payload-{i}".encode() for i in range(160)]


def test_two_children_in_turn(
    client: ja.Client, stream: str, shared_nats_server: NatsServer
) -> None:
    url = shared_nats_server.url
    for n in range(2):

        def child(out: int, n: int = n) -> int:
            with ja.connect(url) as own:
                table = pa.table({"subject": [f"{stream}.c{n}"], "data": [b"x"]})
                return 0 if own.publish(table).stored == 1 else 1

        assert run_in_child(child) == (0, "")
        client.publish(pa.table({"subject": [f"{stream}.p{n}"], "data": [b"y"]}))
    assert read_all(client, stream).column("subject").to_pylist() == [
        f"{stream}.c0",
        f"{stream}.p0",
        f"{stream}.c1",
        f"{stream}.p1",
    ]


def test_parent_client_used_in_child_raises_clearly(client: ja.Client, stream: str) -> None:
    client.publish(rows(5, stream, headers=False))

    def child(out: int) -> int:
        t0 = time.monotonic()
        try:
            client.publish(rows(1, stream, start=5, headers=False))
        except ConnectionFailedError as err:
            os.write(out, str(err).encode())
            return 0 if time.monotonic() - t0 < 5 else 2
        return 1

    status, out = run_in_child(child)
    assert status == 0, out
    assert "fork" in out and "connect again" in out, out

    def child_read(out: int) -> int:
        try:
            client.read(stream)
        except ConnectionFailedError:
            return 0
        return 1

    assert run_in_child(child_read)[0] == 0
    # Nothing of the child's attempts reached the stream; the parent carries on.
    assert client.stream_info(stream).state.messages == 5
    assert client.publish(rows(1, stream, start=5, headers=False)).stored == 1
