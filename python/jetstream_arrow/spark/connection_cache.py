"""One NATS connection per Python worker process, keyed by the connection options.

With ``spark.python.worker.reuse`` on (Spark's default) a worker process runs many
tasks, and each task would otherwise pay a connect (and a TLS handshake). With reuse
off the process ends after its task and the connection ends with it.

PySpark forks its workers from a daemon; a connection made before a fork belongs to
the parent, so the cache is keyed by process id too and a child starts empty (it never
closes what it inherited: that would close the parent's socket).

The same reused worker also runs a full garbage collection after every task, which
:func:`freeze_worker_heap` makes cheap; ``jetstream_arrow.spark`` calls it once its
modules are imported, before the worker runs anything of a task.
"""

from __future__ import annotations

import atexit
import gc
import os
import threading
from typing import Any

from ..client import Client, connect
from ..options import ConnectOptions

_lock = threading.Lock()
_pid = os.getpid()
_clients: dict[tuple[Any, ...], Client] = {}
# The process whose heap freeze_worker_heap froze (a forked child has its own heap).
_frozen_pid: int | None = None


def get_client(options: ConnectOptions) -> Client:
    """The cached client for these options in this process, connecting on first use."""
    global _pid
    key = options.cache_key()
    with _lock:
        if os.getpid() != _pid:
            # Forked: the inherited clients are the parent's; forget, never close, them.
            _clients.clear()
            _pid = os.getpid()
        client = _clients.get(key)
        if client is not None and not client.is_closed():
            return client
        client = connect(options=options)
        _clients[key] = client
        return client


def drop_client(options: ConnectOptions) -> None:
    """Close and forget the cached client (after it failed in a way a reconnect fixes)."""
    with _lock:
        client = _clients.pop(options.cache_key(), None)
    if client is not None and os.getpid() == _pid:
        try:
            client.close()
        except Exception:
            pass


def cached_clients() -> int:
    """How many connections this process holds (for tests and diagnostics)."""
    with _lock:
        return len(_clients) if os.getpid() == _pid else 0


@atexit.register
def close_all() -> None:
    """Close every cached connection (at interpreter exit, flushing what is pending)."""
    with _lock:
        clients = list(_clients.values()) if os.getpid() == _pid else []
        _clients.clear()
    for client in clients:
        try:
            client.close()
        except Exception:
            pass


#: The environment variable that turns :func:`freeze_worker_heap` off when set to
#: ``0`` (for the executors: Spark conf ``spark.executorEnv.JETSTREAM_ARROW_GC_FREEZE``).
GC_FREEZE_VARIABLE = "JETSTREAM_ARROW_GC_FREEZE"


def freeze_worker_heap() -> None:
    """Move the objects alive now out of the cyclic garbage collector's reach, once per
    reused Python worker. Called when ``jetstream_arrow.spark`` is imported, so what is
    alive is the imported modules (pyspark, pyarrow, this package) and what the worker
    had read of its first task's command when unpickling it imported the package.

    A reused worker (``spark.python.worker.reuse``, Spark's default) runs
    ``gc.collect()`` after every task, before it takes the next one. A full collection
    visits every tracked object, some 50 000 once pyspark and pyarrow are imported,
    which took 15-220 ms per task on a loaded 2-core machine: CPU taken from the reads
    still running, and a delay before the worker's next task. Frozen objects are
    skipped, so the collection only visits what tasks created since. The cost is that
    cyclic garbage among the frozen objects is never collected: long-lived module
    state, and no object a task creates once it runs. A worker that is not reused ends
    after its task and collects nothing, so it is left alone; ``JETSTREAM_ARROW_GC_FREEZE=0``
    in the workers' environment turns the freeze off.
    """
    global _frozen_pid
    # The variable Spark's daemon reads to decide on reuse, read the same way.
    if not os.environ.get("SPARK_REUSE_WORKER") or _frozen_pid == os.getpid():
        return
    if os.environ.get(GC_FREEZE_VARIABLE, "").strip() == "0":
        return
    _frozen_pid = os.getpid()
    gc.freeze()
