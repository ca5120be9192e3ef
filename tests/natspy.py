"""nats-py, the independent client tests compare the package with: one way to run a
piece of its asyncio code from a synchronous test."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import nats
from nats.js.errors import NotFoundError

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


def data_messages(url: str, stream: str) -> int:
    """How many data messages ``stream`` holds, as nats-py counts them: the stream's
    message count less the writers' position messages (``$JA.POS.<stream>.<digest>``,
    one kept per writer), which no read shows."""

    async def work(js: Any) -> int:
        info = await js.stream_info(stream, subjects_filter="$JA.POS.>")
        positions = sum((info.state.subjects or {}).values())
        return int(info.state.messages) - positions

    return with_jetstream(url, work)


def first_data_seq(url: str, stream: str) -> int:
    """The sequence of the first message of ``stream`` that is not a writer's position
    message (in a stream made by ``load --create-stream`` a file's first position
    comes before its first row)."""

    async def work(js: Any) -> int:
        info = await js.stream_info(stream)
        seq = int(info.state.first_seq)
        while seq <= info.state.last_seq:
            try:
                msg = await js.get_msg(stream, seq)
            except NotFoundError:  # a position removed by a rollup
                seq += 1
                continue
            if not msg.subject.startswith("$JA.POS."):
                return seq
            seq += 1
        raise AssertionError(f"stream {stream!r} holds no data message")

    return with_jetstream(url, work)
