"""How far a streaming query is behind, as its progress shows it: each micro-batch's
source progress carries ``endOffset`` and ``latestOffset`` (``{"seq": ...}``), and
``latestOffset.seq - endOffset.seq`` is the lag after that micro-batch; the
``latestOffset`` also gives it as the Kafka source's metrics do (messages behind,
least, most and mean over the streams read, and the bytes behind). Real queries
against a real nats-server and a local[2] session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import jetstream_arrow as ja
from conftest_spark import make_stream, publish, read_stream, run_available_now, seqs, spark
from jetstream_arrow.spark import message_schema
from jetstream_arrow.spark.lag import behind_latest
from jetstream_arrow.spark.options import parse_read_options
from jetstream_arrow.spark.stream_reader import JetStreamStreamReader

pytestmark = pytest.mark.spark
__all__ = ["spark"]


def _seq(offset: str) -> int:
    seq = json.loads(offset)["seq"]
    assert isinstance(seq, int)
    return seq


def _batches(query: Any) -> list[tuple[int, int]]:
    """(endOffset.seq, latestOffset.seq) of each micro-batch that read rows.
    ``numInputRows`` is not compared: Spark counts input rows per scan, and a
    micro-batch may be scanned more than once."""
    return [
        (_seq(s["endOffset"]), _seq(s["latestOffset"]))
        for p in query.recentProgress
        if p["numInputRows"] > 0
        for s in p["sources"]
    ]


def _lag(progress: Any) -> int:
    """What a user computes from ``query.lastProgress``; the lag fields say the same."""
    source = progress["sources"][0]
    lag = _seq(source["latestOffset"]) - _seq(source["endOffset"])
    latest = json.loads(source["latestOffset"])
    assert latest["minMessagesBehindLatest"] == latest["maxMessagesBehindLatest"] == lag
    assert latest["avgMessagesBehindLatest"] == float(lag)
    return lag


def _bytes_behind(progress: Any) -> int:
    return int(
        json.loads(progress["sources"][0]["latestOffset"])["estimatedTotalBytesBehindLatest"]
    )


class _PublishDuringFirstBatch:
    """A foreachBatch function that keeps each micro-batch's ``seq`` values and, while
    micro-batch 0 runs, publishes ``count`` more messages."""

    def __init__(self, url: str, name: str, count: int, start: int) -> None:
        self.url, self.name, self.count, self.start = url, name, count, start
        self.seqs: list[int] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        # One scan of the micro-batch (a sort would scan it twice, and the progress
        # counts input rows per scan).
        self.seqs.extend(sorted(r.seq for r in df.select("seq").collect()))
        if batch_id == 0:
            publish(self.url, self.name, self.count, start=self.start)


def test_progress_shows_the_latest_sequence_and_the_lag_of_each_micro_batch(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, name = shared_nats_server.url, unique_name("PL")
    make_stream(url, name)
    publish(url, name, 250)
    checkpoint = str(tmp_path / "checkpoint")
    sink = _PublishDuringFirstBatch(url, name, 20, start=250)
    df = read_stream(spark, url, name, startingOffsets="earliest", maxMessagesPerTrigger=100)
    query = run_available_now(
        df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
    )
    assert sink.seqs == list(range(1, 251))
    # Micro-batch 0 was planned with 250 messages in the stream; 20 more arrived while
    # it ran. availableNow reads only the first 250, and the progress shows the rest.
    assert _batches(query) == [(101, 251), (201, 271), (251, 271)]
    assert [_lag(p) for p in query.recentProgress if p["numInputRows"] > 0] == [150, 70, 20]
    # Bytes behind at the stream's mean stored message size, as maxBytesPerTrigger counts.
    with ja.connect(url) as client:
        state = client.stream_info(name).state
    size = state.bytes / state.messages
    behind = [_bytes_behind(p) for p in query.recentProgress if p["numInputRows"] > 0]
    assert behind[2] == round(20 * size), (behind, size)
    assert behind[0] > behind[1] > behind[2] > 0

    # The next run reads what was left and has caught up.
    again = run_available_now(
        read_stream(spark, url, name, startingOffsets="earliest")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
    )
    assert sink.seqs == list(range(1, 271))
    assert _batches(again) == [(271, 271)]
    assert _lag(again.lastProgress) == 0
    assert _bytes_behind(again.lastProgress) == 0


def test_consumer_progress_counts_only_the_consumers_subjects(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, name = shared_nats_server.url, unique_name("PC")
    make_stream(url, name, retention="workqueue", allow_direct=True)
    # 150 messages on <name>.a (odd sequences 1..299), 150 on <name>.b (even, 2..300).
    publish(url, name, 300)
    df = read_stream(
        spark, url, name, consumer="only-a", subjects=f"{name}.a", maxMessagesPerTrigger=50
    )
    query = (
        df.writeStream.format("memory")
        .queryName(f"progress_{name.lower()}")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        batches = _batches(query)
        last = query.lastProgress
        first_sources = [
            s for p in query.recentProgress if p["numInputRows"] > 0 for s in p["sources"]
        ][:1]
    finally:
        query.stop()
    # Each micro-batch claims 50 messages on .a, ending after the 50th, 100th and 150th;
    # the last message on .a is 299. The stream's last message (300, on .b) is not
    # this query's to read: once everything on .a is claimed, the lag is 0.
    assert batches == [(100, 300), (200, 300), (300, 300)]
    assert _lag(last) == 0
    # While it ran, the consumer's pending messages were the lag: 100 after the first.
    assert [json.loads(s["latestOffset"])["maxMessagesBehindLatest"] for s in first_sources] == [
        100
    ]


def test_a_query_started_past_the_streams_end_is_not_behind(
    shared_nats_server: Any, unique_name: Any
) -> None:
    """The driver side, called as Spark calls it: latestOffset, then reportLatestOffset."""
    url, name = shared_nats_server.url, unique_name("PE")
    make_stream(url, name)
    publish(url, name, 30)

    def reader(**options: Any) -> JetStreamStreamReader:
        opts = parse_read_options({"servers": url, "stream": name, **options}, queries="stream")
        return JetStreamStreamReader(opts, message_schema())

    ahead = reader(startingSequence=100)
    assert seqs(ahead.latestOffset({"seq": 100}, ReadAllAvailable())) == {"seq": 100}
    report = ahead.reportLatestOffset()
    assert (report["seq"], report["maxMessagesBehindLatest"]) == (100, 0)
    assert report["estimatedTotalBytesBehindLatest"] == 0

    limited = reader(maxMessagesPerTrigger=8)
    assert seqs(limited.latestOffset({"seq": 1}, ReadMaxRows(8))) == {"seq": 9}
    report = limited.reportLatestOffset()
    assert (report["seq"], report["minMessagesBehindLatest"]) == (31, 22)
    with ja.connect(url) as client:
        state = client.stream_info(name).state
    assert report["estimatedTotalBytesBehindLatest"] == round(22 * state.bytes / state.messages)


def test_lag_over_several_streams_is_the_least_most_and_mean_and_the_bytes_in_all() -> None:
    assert behind_latest({"A": (10, 100.0), "B": (0, 50.0), "C": (5, 20.0)}) == {
        "minMessagesBehindLatest": 0,
        "maxMessagesBehindLatest": 10,
        "avgMessagesBehindLatest": 5.0,
        "estimatedTotalBytesBehindLatest": 10 * 100 + 5 * 20,
    }
    # A stream ahead of its end (a start past it) is not behind.
    assert behind_latest({"A": (-3, 10.0)})["maxMessagesBehindLatest"] == 0
    assert behind_latest({}) == {}
