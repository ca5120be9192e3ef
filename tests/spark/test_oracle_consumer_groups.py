"""Spark streaming queries reading a work queue through a durable consumer (option
``consumer``), checked against nats-py: what the sink stream holds afterwards
(``STREAM.MSG.GET`` of every sequence: ``tests/oracle_histories.py``) is every
message published to the queue exactly once, and the queue is left empty with
nothing unacknowledged.

- Handover: two queries of one consumer group (option ``consumerGroup``), each with
  its own checkpoint, in one Spark session; the active one is stopped while messages
  keep coming, the standby takes over.
- A consumer the user made, with the server's defaults (``max_ack_pending`` 1,000)
  but ``headers_only`` (which the source needs), drained with
  ``trigger(availableNow=True)``: the query ends only once it moved every message
  available when it started.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from conftest_spark import QUERY_TIMEOUT, run_available_now, spark
from natsserver import NatsServer
from oracle_histories import PyNats, StreamShape

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]
__all__ = ["spark"]

UniqueName = Callable[[str], str]


@pytest.fixture
def py(shared_nats_server: NatsServer, unique_name: UniqueName) -> Iterator[PyNats]:
    """nats-py on the shared server, with a stream of its own kept for the test (the
    server removes its store's directory with its last stream)."""
    with PyNats(shared_nats_server.url) as conn:
        anchor = unique_name("CG_ANCHOR")
        conn.create_stream(anchor, StreamShape())
        try:
            yield conn
        finally:
            conn.delete_stream(anchor)


def work_queue(py: PyNats, name: str) -> None:
    config = StreamShape().config(name)
    config["retention"] = "workqueue"
    py.run(py.api(f"STREAM.CREATE.{name}", config))


def publish(py: PyNats, stream: str, first: int, count: int) -> list[bytes]:
    """``count`` messages ``m<i>`` on ``<stream>.q``, published with nats-py."""
    payloads = [f"m{i}".encode() for i in range(first, first + count)]

    async def go() -> None:
        for i in range(0, count, 500):
            acks = [py.js.publish(f"{stream}.q", p) for p in payloads[i : i + 500]]
            for ack in acks:
                await ack

    py.run(go())
    return payloads


def wait_for(what: str, condition: Callable[[], bool], timeout: float = QUERY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.2)


def sink_payloads(py: PyNats, sink: str) -> Counter[bytes]:
    return Counter(m.data for m in py.snapshot(sink))


def query_of(spark: Any, url: str, queue: str, sink: str, checkpoint: Path, **options: Any) -> Any:
    reader = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", queue)
        .option("consumer", "shared")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    moved = reader.load().withColumn("subject", F.regexp_replace("subject", f"^{queue}", sink))
    return (
        moved.writeStream.format("jetstream")
        .option("servers", url)
        .option("stream", sink)
        .option("checkpointLocation", str(checkpoint))
    )


def test_two_queries_of_a_group_hand_over_and_land_each_message_once(
    spark: Any,
    py: PyNats,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    tmp_path: Path,
) -> None:
    """Query A (pinned) moves the first messages; query B joins as a standby; A is
    stopped while more arrive; B takes over. The sink holds each message once, the
    queue is empty and its consumer has nothing unacknowledged."""
    url, queue, sink = shared_nats_server.url, unique_name("CGQ"), unique_name("CGS")
    work_queue(py, queue)
    sink_config = StreamShape().config(sink)
    sink_config["duplicate_window"] = 600 * 1_000_000_000
    py.run(py.api(f"STREAM.CREATE.{sink}", sink_config))
    group = {"consumerGroup": "g", "maxMessagesPerTrigger": 200, "consumerPinTimeout": 5}
    sent = publish(py, queue, 0, 600)
    a = (
        query_of(spark, url, queue, sink, tmp_path / "a", **group)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    b = None
    try:
        wait_for("query A to move messages", lambda: py.stream_state(sink)["messages"] > 0)
        b = (
            query_of(spark, url, queue, sink, tmp_path / "b", **group)
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        sent += publish(py, queue, 600, 600)
        a.stop()
        sent += publish(py, queue, 1200, 600)
        wait_for(
            "the sink to hold every message and the queue to empty",
            lambda: (
                py.stream_state(sink)["messages"] >= len(sent)
                and py.stream_state(queue)["messages"] == 0
            ),
        )
        assert b.exception() is None and a.exception() is None
    finally:
        a.stop()
        if b is not None:
            b.stop()
    stored = py.snapshot(sink)
    got = Counter(m.data for m in stored)
    twice = sorted({m.data for m in stored if got[m.data] > 1})[:1]
    ids = [dict(m.headers or ()).get("Nats-Msg-Id") for m in stored if m.data in twice]
    assert got == Counter(sent), (
        f"{sum(got.values()) - len(sent)} messages landed twice, e.g. {twice} with ids {ids}"
    )
    info = py.consumer_info(queue, "shared")
    assert info["num_ack_pending"] == 0, info
    assert py.stream_state(queue)["messages"] == 0
    py.delete_stream(queue)
    py.delete_stream(sink)


def test_available_now_through_a_user_consumer_with_server_defaults_moves_everything(
    spark: Any,
    py: PyNats,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    tmp_path: Path,
) -> None:
    """3,000 messages, a consumer the user made (server defaults: ``max_ack_pending``
    1,000), ``trigger(availableNow=True)``: the query ends having moved all 3,000,
    each once, and the queue is empty once Spark committed the last micro-batch."""
    url, queue, sink = shared_nats_server.url, unique_name("CGU"), unique_name("CGUS")
    work_queue(py, queue)
    py.create_stream(sink, StreamShape())
    py.create_consumer(
        queue, {"durable_name": "shared", "ack_policy": "explicit", "headers_only": True}
    )
    sent = publish(py, queue, 0, 3_000)
    try:
        run_available_now(query_of(spark, url, queue, sink, tmp_path / "c"))
        got = sink_payloads(py, sink)
        assert got == Counter(sent), f"{sum(got.values())} of {len(sent)} moved"
        wait_for(
            "the queue to empty (every micro-batch acknowledged)",
            lambda: py.stream_state(queue)["messages"] == 0,
            30,
        )
    finally:
        py.delete_stream(queue)
        py.delete_stream(sink)
