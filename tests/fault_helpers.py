"""Fault injection shared by the tests that kill servers or Spark drivers while data
moves: the stored message count read from the monitoring port, a thread that kills a
server with ``kill -9`` (and starts it again on the same port and store) as the count
passes given marks, a server paused for some seconds (SIGSTOP, then SIGCONT), and a
SIGKILL of a streaming query's driver in the middle of a micro-batch, told by the
query's checkpoint."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from natsserver import NatsServer


def stored_messages(server: NatsServer) -> int | None:
    """The messages the server stores, or None while it is down: read on the
    monitoring port, not by a NATS client, which would need reconnecting."""
    try:
        return int(server.monitor("jsz").get("messages", 0))
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def paused_server(server: NatsServer, seconds: float) -> Iterator[None]:
    """``server`` paused (SIGSTOP) and resumed ``seconds`` later whatever the body
    does meanwhile; the body's end waits for the resume."""
    assert server.process is not None
    pid = server.process.pid
    os.kill(pid, signal.SIGSTOP)
    resume = threading.Timer(seconds, os.kill, (pid, signal.SIGCONT))
    resume.start()
    try:
        yield
    finally:
        resume.join()
        os.kill(pid, signal.SIGCONT)


class Killer(threading.Thread):
    """Kills the server (SIGKILL) and starts it again on the same port and store each
    time the stream has stored the next fraction of ``n`` rows, so every kill lands in
    the middle of the publish however fast it runs."""

    def __init__(self, server: NatsServer, n: int, kills: int, timeout: float) -> None:
        super().__init__(name="killer", daemon=True)
        self.server, self.n, self.wanted, self.timeout = server, n, kills, timeout
        #: (messages stored when killed, monotonic time of the kill, seconds down)
        self.kills: list[tuple[int, float, float]] = []
        self.done = threading.Event()
        self.error: BaseException | None = None

    def stored(self) -> int | None:
        return stored_messages(self.server)

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            while len(self.kills) < self.wanted and not self.done.is_set():
                if time.monotonic() > deadline:
                    return  # the test's assertions say which kill is missing
                stored = self.stored()
                if stored is not None and stored >= self.n * (len(self.kills) + 1) // (
                    self.wanted + 1
                ):
                    killed = time.monotonic()
                    self.server.kill()
                    self.server.start()
                    self.kills.append((stored, killed, time.monotonic() - killed))
                time.sleep(0.005)
        except BaseException as err:  # reported by the test, not lost in the thread
            self.error = err


# -- a streaming query's driver, killed in the middle of a micro-batch -----------------


def batch_ids(log: Path) -> list[int]:
    """The batch ids a checkpoint log (``offsets`` or ``commits``) holds."""
    return [int(p.name) for p in log.glob("*") if p.name.isdigit()]


def planned_batch(checkpoint: Path) -> int | None:
    """The micro-batch planned (its offsets logged) and not yet committed, if any: a
    driver killed then re-runs it when it starts again."""
    planned = max(batch_ids(checkpoint / "offsets"), default=-1)
    return planned if planned > max(batch_ids(checkpoint / "commits"), default=-1) else None


#: Long enough for a SIGSTOP to reach the processes of a driver's group (the Python
#: driver and its JVM; Spark's Python workers have a group of their own and stop
#: writing the checkpoint's files with the JVM), far shorter than a micro-batch.
_STOP_SETTLE = 0.1


def kill_driver_mid_batch(
    driver: subprocess.Popen[bytes], checkpoint: Path, timeout: float, describe: Callable[[], str]
) -> int:
    """SIGKILL the process group of ``driver`` (started with ``start_new_session``)
    at a moment its streaming query has a micro-batch planned and not committed, and
    return that batch's id.

    The group is frozen (SIGSTOP) once the checkpoint shows a planned micro-batch; if
    it still shows it uncommitted, the group is killed there, else it runs on to the
    next one. A test shows the kill interrupted the batch by finding, after restarts,
    the same batch id committed: the query re-ran it. ``describe()`` adds the
    driver's log to a timeout's error."""
    deadline = time.monotonic() + timeout
    while True:
        while planned_batch(checkpoint) is None:
            if driver.poll() is not None:
                raise AssertionError(f"the driver ended\n{describe()}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"waited {timeout} s for the query to plan a micro-batch\n{describe()}"
                )
            time.sleep(0.05)
        os.killpg(driver.pid, signal.SIGSTOP)
        time.sleep(_STOP_SETTLE)
        batch = planned_batch(checkpoint)
        if batch is not None:
            break
        os.killpg(driver.pid, signal.SIGCONT)  # committed meanwhile: wait for the next
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(30)
    return batch
