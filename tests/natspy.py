"""nats-py, the independent client tests compare the package with: one way to run a
piece of its asyncio code from a synchronous test."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import nats

T = TypeVar("T")


def with_jetstream(url: str, work: Callable[[Any], Awaitable[T]], timeout: float = 60.0) -> T:
    """``await work(js)`` with the JetStream context of a fresh nats-py connection to
    ``url``, on its own event loop, within ``timeout`` seconds; the connection is
    closed after."""

    async def run() -> T:
        nc = await nats.connect(url)
        try:
            return await asyncio.wait_for(work(nc.jetstream()), timeout)
        finally:
            await nc.close()

    return asyncio.run(run())
