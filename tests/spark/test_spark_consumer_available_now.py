"""trigger(availableNow=True) through option ``consumer``, with a consumer the user
made: the query reads everything the stream held for the consumer when it started,
in as many micro-batches as the consumer's ``max_ack_pending`` needs, and leaves the
work queue empty and nothing unacknowledged. Checked with nats-py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from conftest_spark import SPARK_ERRORS, make_stream, publish, read_stream, run_available_now, spark
from natspy import with_jetstream

pytestmark = pytest.mark.spark
__all__ = ["spark"]


def add_consumer(url: str, stream: str, name: str, **config: Any) -> None:
    """A durable pull consumer made by nats-py, with the server's defaults
    (max_ack_pending 1,000) for everything not given."""

    async def work(js: Any) -> None:
        cfg = ConsumerConfig(durable_name=name, ack_policy=AckPolicy.EXPLICIT, **config)
        await js.add_consumer(stream, config=cfg)

    with_jetstream(url, work)


def consumer_and_stream(url: str, stream: str, name: str) -> tuple[Any, Any]:
    async def work(js: Any) -> tuple[Any, Any]:
        return await js.consumer_info(stream, name), await js.stream_info(stream)

    return with_jetstream(url, work)


def test_available_now_reads_all_a_user_made_consumer_holds_and_acknowledges_it(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, queue = shared_nats_server.url, unique_name("WQN")
    make_stream(url, queue, retention="workqueue", allow_direct=True)
    add_consumer(url, queue, "made", headers_only=True)
    info, before = consumer_and_stream(url, queue, "made")
    assert info.config.max_ack_pending == 1_000  # the server's default
    publish(url, queue, 3_000)
    info, before = consumer_and_stream(url, queue, "made")
    assert (before.state.messages, before.state.first_seq, before.state.last_seq) == (
        3_000,
        1,
        3_000,
    )

    table = f"consumer_available_now_{queue.lower()}"
    df = read_stream(spark, url, queue, consumer="made")
    query = run_available_now(
        df.select("seq", "data")
        .writeStream.format("memory")
        .queryName(table)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    rows = spark.table(table).collect()
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    seqs = [r["seq"] for r in rows]
    assert len(seqs) == 3_000, batches
    assert sorted(seqs) == list(range(1, 3_001))
    assert sorted(r["data"] for r in rows) == sorted(f"m{i}".encode() for i in range(3_000))
    # The consumer delivers at most max_ack_pending unacknowledged messages, and a
    # micro-batch's are acknowledged once it is committed.
    assert len(batches) >= 3 and max(batches) <= 1_000, batches

    # The last micro-batch too is acknowledged before the query ends: the work
    # queue is empty, nothing is pending.
    info, after = consumer_and_stream(url, queue, "made")
    assert (info.num_ack_pending, info.num_pending) == (0, 0)
    assert info.ack_floor.stream_seq == 3_000
    assert after.state.messages == 0


def test_available_now_acknowledges_its_last_micro_batch_before_it_ends(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    """Spark commits a source's offsets only when it plans the next micro-batch: the
    look that ends an availableNow query acknowledges the last one. The bound of
    maxMessagesPerTrigger holds as it does for Kafka's availableNow."""
    url, queue = shared_nats_server.url, unique_name("WQL")
    make_stream(url, queue, retention="workqueue", allow_direct=True)
    publish(url, queue, 300)
    table = f"consumer_last_batch_{queue.lower()}"
    df = read_stream(spark, url, queue, consumer="drain", maxMessagesPerTrigger=100)
    query = run_available_now(
        df.select("seq")
        .writeStream.format("memory")
        .queryName(table)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    info, state = consumer_and_stream(url, queue, "drain")
    assert (state.state.messages, info.num_ack_pending, info.ack_floor.stream_seq) == (0, 0, 300)
    assert sorted(r["seq"] for r in spark.table(table).collect()) == list(range(1, 301))
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert batches == [100, 100, 100]


def test_a_user_made_consumer_that_delivers_payloads_is_refused(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    """The driver claims every message to plan micro-batches: a consumer without
    headers_only would ship every payload to it. Refused, naming the option and the
    setting, before anything is claimed."""
    url, queue = shared_nats_server.url, unique_name("WQH")
    make_stream(url, queue, retention="workqueue", allow_direct=True)
    add_consumer(url, queue, "payloads")
    publish(url, queue, 10)
    df = read_stream(spark, url, queue, consumer="payloads")
    writer = (
        df.writeStream.format("memory")
        .queryName(f"consumer_payloads_{queue.lower()}")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    with pytest.raises(SPARK_ERRORS, match=r"option 'consumer'.*headers_only"):
        run_available_now(writer)
    info, state = consumer_and_stream(url, queue, "payloads")
    assert (info.delivered.stream_seq, info.num_ack_pending) == (0, 0)
    assert state.state.messages == 10
