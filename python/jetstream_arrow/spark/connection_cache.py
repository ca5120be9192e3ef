"""One NATS connection per Python worker process, keyed by the connection options.

With ``spark.python.worker.reuse`` on (Spark's default) a worker process runs many
tasks, and each task would otherwise pay a connect (and a TLS handshake). With reuse
off the process ends after its task and the connection ends with it.

PySpark forks its workers from a daemon; a connection made before a fork belongs to
the parent, so the cache is keyed by process id too and a child starts empty (it never
closes what it inherited: that would close the parent's socket).
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from ..client import Client, connect
from ..options import ConnectOptions

_lock = threading.Lock()
_pid = os.getpid()
_clients: dict[tuple[Any, ...], Client] = {}


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
