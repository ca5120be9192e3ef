"""How long a sink's calls wait for the server: a server restarting, a network cut or
a leader election fails the calls it meets with a transient error (no reply within
``request_timeout``, a lost connection, a ``503``), and a sink documented to run
until stopped must not end on one. Each call waits up to ``resume_timeout`` seconds
of such failures, as the sink's reads do.

The pauses are the core's (its one retry home): a stream's info is asked for with the
client's patient request, and any other call that fails transiently waits for the
server through that same request, then is made again. Every call made again here may
be: an info, a consumer made with the config it has, a reset to the ack floor, a pull
(what a lost one delivered comes again after the consumer's ack wait, and is skipped
if landed), a flush, dead letters published under their msg ids.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..exceptions import JetStreamArrowError

_log = logging.getLogger("jetstream_arrow.sink")

T = TypeVar("T")


class Patience:
    """The calls of one sink to ``client``, each waiting up to ``resume_timeout``
    seconds of transient failures; an outage is logged once when it starts and once
    when it ends."""

    def __init__(self, client: Any, resume_timeout: float) -> None:
        self.client = client
        self.resume_timeout = resume_timeout
        # When the outage now under way was first met (None: the server answers).
        self._down_since: float | None = None

    def stream_info(self, stream: str) -> Any:
        """The stream's info, asked for patiently."""
        return self.call(stream, f"stream {stream} info", lambda: self.client.stream_info(stream))

    def call(
        self,
        stream: str,
        what: str,
        make: Callable[[], T],
        before_again: Callable[[], object] | None = None,
    ) -> T:
        """``make()``, made again after the server answers ``stream``'s info again
        while it fails transiently, for up to ``resume_timeout`` seconds from its first
        failure; then its last error is raised. ``before_again`` is called before each
        new attempt (what a failed one may have left to set right)."""
        deadline: float | None = None
        while True:
            started = time.monotonic()
            try:
                result = make()
            except JetStreamArrowError as e:
                if not e.transient:
                    raise
                now = time.monotonic()
                deadline = deadline if deadline is not None else now + self.resume_timeout
                if now >= deadline:
                    raise
                self._outage(what, e, started)
                try:
                    # Returns once the server answers again: the core pauses between
                    # its attempts, and gives up at the deadline.
                    self.client.stream_info(stream, resume_timeout=deadline - now)
                except JetStreamArrowError as waited:
                    if not waited.transient:
                        raise
                    raise e from waited
                if before_again is not None:
                    before_again()
                continue
            self._over()
            return result

    def _outage(self, what: str, error: JetStreamArrowError, since: float) -> None:
        if self._down_since is not None:
            return
        self._down_since = since
        _log.warning(
            "sink: %s failed (%s); waiting up to %g s (resume_timeout) for the server",
            what,
            error,
            self.resume_timeout,
        )

    def _over(self) -> None:
        if self._down_since is None:
            return
        _log.warning(
            "sink: the server answers again after %.1f s; going on",
            time.monotonic() - self._down_since,
        )
        self._down_since = None
