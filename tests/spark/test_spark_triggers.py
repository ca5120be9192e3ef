"""Trigger controls of streaming reads, with Kafka's meanings: ``minMessagesPerTrigger``
holds a micro-batch back until enough messages are there or ``maxTriggerDelay`` has
passed; ``maxBytesPerTrigger`` bounds a micro-batch by bytes. On both stream readers
(plain and through option ``consumer``), called as Spark calls them, and in a real
query with a processing-time trigger."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

import jetstream_arrow as ja
from conftest_spark import make_stream, publish, read_stream, seqs, spark
from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.spark import message_schema
from jetstream_arrow.spark.consumer_stream_reader import ConsumerStreamReader
from jetstream_arrow.spark.options import parse_read_options
from jetstream_arrow.spark.stream_reader import JetStreamStreamReader

pytestmark = pytest.mark.spark
__all__ = ["spark"]


def mean_size(url: str, name: str) -> float:
    with ja.connect(url) as client:
        state = client.stream_info(name).state
    return int(state.bytes) / int(state.messages)


def test_the_stream_reader_waits_for_enough_messages_or_the_delay(
    shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("TG")
    make_stream(url, name)
    publish(url, name, 30)

    def reader(**options: Any) -> JetStreamStreamReader:
        opts = parse_read_options({"servers": url, "stream": name, **options}, queries="stream")
        return JetStreamStreamReader(opts, message_schema())

    r = reader(minMessagesPerTrigger=50, maxTriggerDelay=1.0)
    # 30 of 50: held back (Spark sees no new data).
    assert seqs(r.latestOffset({"seq": 1}, ReadAllAvailable())) == {"seq": 1}
    publish(url, name, 25, start=30)
    assert seqs(r.latestOffset({"seq": 1}, ReadAllAvailable())) == {"seq": 56}
    publish(url, name, 5, start=55)
    # The delay counts from the last micro-batch: 5 wait, then go once it has passed.
    assert seqs(r.latestOffset({"seq": 56}, ReadAllAvailable())) == {"seq": 56}
    time.sleep(1.1)
    assert seqs(r.latestOffset({"seq": 56}, ReadAllAvailable())) == {"seq": 61}
    # maxMessagesPerTrigger still bounds a micro-batch the gate lets through.
    assert seqs(reader(minMessagesPerTrigger=10).latestOffset({"seq": 1}, ReadMaxRows(20))) == {
        "seq": 21
    }
    # trigger(availableNow=True) reads what is there and stops: never held back.
    now = reader(minMessagesPerTrigger=1_000)
    now.prepareForTriggerAvailableNow()
    assert seqs(now.latestOffset({"seq": 1}, ReadAllAvailable())) == {"seq": 61}

    mean = mean_size(url, name)
    ten = reader(maxBytesPerTrigger=int(mean * 10) + 1)
    assert seqs(ten.latestOffset({"seq": 1}, ReadAllAvailable())) == {"seq": 11}
    assert seqs(ten.latestOffset({"seq": 55}, ReadAllAvailable())) == {"seq": 61}
    # A bound below one message still reads one.
    assert seqs(reader(maxBytesPerTrigger=1).latestOffset({"seq": 1}, ReadAllAvailable())) == {
        "seq": 2
    }


def test_the_consumer_reader_holds_its_claimed_messages_until_enough(
    shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("TQ")
    make_stream(url, name, retention="workqueue", allow_direct=True)
    publish(url, name, 30)

    def reader(consumer: str, **options: Any) -> ConsumerStreamReader:
        opts = parse_read_options(
            {"servers": url, "stream": name, "consumer": consumer, **options}, queries="stream"
        )
        return ConsumerStreamReader(opts, message_schema())

    r = reader("gate", minMessagesPerTrigger=50, maxTriggerDelay=1.0)
    start = r.initialOffset()
    assert seqs(start) == {"seq": 1}
    limit = r.getDefaultReadLimit()
    assert limit == ReadMinRows(50)
    assert seqs(r.latestOffset(start, limit)) == {"seq": 1}
    publish(url, name, 25, start=30)
    assert seqs(r.latestOffset(start, limit)) == {"seq": 56}
    publish(url, name, 5, start=55)
    assert seqs(r.latestOffset({"seq": 56}, limit)) == {"seq": 56}
    # Spark passes ReadAllAvailable (never the default here) for trigger(once=True),
    # which reads what is there: not held back.
    assert seqs(r.latestOffset({"seq": 56}, ReadAllAvailable())) == {"seq": 61}
    r.stop()

    # A work queue takes one consumer without a filter: the bytes bound on another.
    name = unique_name("TB")
    make_stream(url, name, retention="workqueue", allow_direct=True)
    publish(url, name, 30)
    mean = mean_size(url, name)
    small = reader("bytes", maxBytesPerTrigger=int(mean * 10) + 1)
    assert seqs(small.latestOffset(small.initialOffset(), ReadAllAvailable())) == {"seq": 11}
    small.stop()


def test_a_processing_time_query_waits_for_min_messages(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, name = shared_nats_server.url, unique_name("TP")
    make_stream(url, name)
    sizes: list[int] = []
    df = read_stream(
        spark, url, name, startingOffsets="earliest", minMessagesPerTrigger=50, maxTriggerDelay=600
    )
    query = (
        df.writeStream.foreachBatch(lambda batch, _: sizes.append(batch.count()))
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        publish(url, name, 30)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # triggers come and go: 30 < 50 waits
            assert not [s for s in sizes if s], sizes
            time.sleep(0.2)
        publish(url, name, 30, start=30)
        deadline = time.monotonic() + 60
        while not [s for s in sizes if s]:
            assert time.monotonic() < deadline, "no micro-batch within 60 s of 60 messages"
            time.sleep(0.2)
    finally:
        query.stop()
    assert [s for s in sizes if s] == [60]


def test_the_consumer_reader_keeps_within_the_limits_of_a_consumer_the_user_made(
    shared_nats_server: Any, unique_name: Any
) -> None:
    """A durable with ``max_batch`` 500: claimed in pulls of 500 (a pull of more is
    refused by the server), at most ``max_ack_pending`` per micro-batch. One with ``max_ack_pending`` 100 never holds 500
    unacknowledged messages, so ``minMessagesPerTrigger=500`` is refused, naming both."""
    url, name = shared_nats_server.url, unique_name("TL")
    make_stream(url, name, allow_direct=True)
    publish(url, name, 1_200)
    with ja.connect(url) as client:
        # headers_only, as option 'consumer' requires of a consumer it did not make.
        client.create_consumer(
            name, durable_name="small", ack_policy="explicit", max_batch=500, headers_only=True
        )
        client.create_consumer(
            name,
            durable_name="narrow",
            ack_policy="explicit",
            max_ack_pending=100,
            headers_only=True,
        )

    def reader(consumer: str, **options: Any) -> ConsumerStreamReader:
        opts = parse_read_options(
            {"servers": url, "stream": name, "consumer": consumer, **options}, queries="stream"
        )
        return ConsumerStreamReader(opts, message_schema())

    r = reader("small")
    # Its max_ack_pending (the server's default, 1,000) bounds a micro-batch: a pull
    # past it is held by the server, not answered. Committed, the rest comes.
    first = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    assert seqs(first) == {"seq": 1_001}
    assert seqs(r.latestOffset(first, ReadAllAvailable())) == {"seq": 1_201}
    r.stop()
    with pytest.raises(
        BadInputError, match=r"'minMessagesPerTrigger' \(500\).*max_ack_pending, 100"
    ):
        reader("narrow", minMessagesPerTrigger=500).initialOffset()
