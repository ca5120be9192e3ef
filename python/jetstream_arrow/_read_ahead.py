"""Reading an iterator in a thread, a bounded number of items ahead of its consumer.

A loader's input (a Parquet file being decoded, Spark handing a Python worker its
Arrow batches over a socket) and the publishing of what was already read each take
time; one after the other, the slower of the two waits for the faster. Reading in a
thread overlaps them: both mostly run without the GIL (file and socket I/O, Arrow
decoding, the native publisher).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

_DONE = object()


class ReadAhead(Generic[T]):
    """Iterates ``source`` in a thread; at most ``depth`` items wait for the consumer,
    so memory stays bounded. An exception raised by ``source`` is raised by this
    iterator, after the items that came before it. :meth:`close` stops the thread (it
    ends at the next item it would hand over)."""

    def __init__(self, source: Iterator[T], depth: int = 2, name: str = "read-ahead") -> None:
        self._source = source
        self._queue: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for item in self._source:
                if not self._put(item):
                    return
            self._put(_DONE)
        except BaseException as e:  # handed over to the consuming thread
            self._put(e)

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        item = self._queue.get()
        if item is _DONE:
            self._queue.put(_DONE)  # stays exhausted
            raise StopIteration
        if isinstance(item, BaseException):
            self._queue.put(_DONE)
            raise item
        return item  # type: ignore[return-value]

    def close(self, timeout: float = 5.0) -> None:
        """Stop reading; wait up to ``timeout`` seconds for the thread to end."""
        self._stop.set()
        self._thread.join(timeout=timeout)

    def __enter__(self) -> ReadAhead[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
