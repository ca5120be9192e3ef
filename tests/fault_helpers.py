"""Fault injection shared by the tests that kill servers while data moves: the stored
message count read from the monitoring port, and a thread that kills a server with
``kill -9`` (and starts it again on the same port and store) as the count passes
given marks."""

from __future__ import annotations

import threading
import time

from natsserver import NatsServer


def stored_messages(server: NatsServer) -> int | None:
    """The messages the server stores, or None while it is down: read on the
    monitoring port, not by a NATS client, which would need reconnecting."""
    try:
        return int(server.monitor("jsz").get("messages", 0))
    except (OSError, ValueError):
        return None


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
