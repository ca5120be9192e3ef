"""query.stop() of a query reading through option ``consumer``: Spark ends the
source's planner process with SIGTERM, without calling the reader's ``stop``; the
reader still gives up its consumer group's pin, so that a standby takes over at once
rather than after the pin timeout. Checked with nats-py's view of the consumer."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import nats
import pytest

from conftest_spark import make_stream, publish, read_stream, spark

pytestmark = pytest.mark.spark
__all__ = ["spark"]


def consumer_info(url: str, stream: str, name: str) -> dict[str, Any]:
    """The server's CONSUMER.INFO reply, as nats-py receives it."""

    async def ask() -> dict[str, Any]:
        nc = await nats.connect(url)
        try:
            reply = await nc.request(f"$JS.API.CONSUMER.INFO.{stream}.{name}", b"", timeout=10)
            return dict(json.loads(reply.data))
        finally:
            await nc.close()

    return asyncio.run(ask())


def pin(info: dict[str, Any]) -> str | None:
    groups = info.get("priority_groups") or []
    return next((g["pinned_client_id"] for g in groups if g.get("pinned_client_id")), None)


def wait_for(what: str, condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.2)


def test_query_stop_gives_up_the_consumer_groups_pin(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, queue = shared_nats_server.url, unique_name("WQS")
    make_stream(url, queue, retention="workqueue", allow_direct=True)
    publish(url, queue, 50)
    df = read_stream(
        spark, url, queue, consumer="grouped", consumerGroup="g", consumerPinTimeout=120
    )
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        # The first micro-batch is acknowledged at the next trigger.
        wait_for(
            "the query to acknowledge its first micro-batch",
            # (an error reply, without ack_floor, until the query made the consumer)
            lambda: (
                consumer_info(url, queue, "grouped").get("ack_floor", {}).get("stream_seq") == 50
            ),
            120,
        )
        assert pin(consumer_info(url, queue, "grouped")) is not None
    finally:
        query.stop()
    # Well within the pin timeout (120 s): the stopped query unpinned.
    wait_for("the pin to go", lambda: pin(consumer_info(url, queue, "grouped")) is None, 15)
    info = consumer_info(url, queue, "grouped")
    assert (info["num_ack_pending"], info["num_pending"]) == (0, 0)
