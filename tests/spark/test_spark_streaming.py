"""spark.readStream / df.writeStream.format("jetstream") against a real nats-server and
a local[2] session. Queries run with trigger(availableNow=True) on small streams."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

import jetstream_arrow as ja
from conftest_spark import (
    SPARK_ERRORS,
    error_text,
    make_stream,
    publish,
    read_df,
    read_stream,
    run_available_now,
    seqs,
    spark,
    stream_table,
)
from jetstream_arrow.exceptions import BadInputError, JetStreamArrowError
from jetstream_arrow.spark import message_schema
from jetstream_arrow.spark.columns import PublishColumns
from jetstream_arrow.spark.options import parse_read_options, parse_write_options
from jetstream_arrow.spark.reading import DataLossError
from jetstream_arrow.spark.stream_reader import JetStreamStreamReader
from jetstream_arrow.spark.stream_writer import JetStreamStreamWriter, StreamCommitMessage

pytestmark = pytest.mark.spark
__all__ = ["spark"]


class _Batches:
    """A foreachBatch function that keeps, per micro-batch, the ``seq`` and ``data``
    values in the order the micro-batch holds them."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[int, bytes]]] = {}

    def __call__(self, df: Any, batch_id: int) -> None:
        self.batches[batch_id] = [(r.seq, bytes(r.data)) for r in df.collect()]

    def seqs(self) -> list[int]:
        return [seq for batch_id in sorted(self.batches) for seq, _ in self.batches[batch_id]]


def _count(url: str, name: str) -> int:
    with ja.connect(url) as client:
        return int(client.stream_info(name).state.messages)


def _messages(url: str, name: str) -> pa.Table:
    with ja.connect(url) as client:
        return client.read(name, include_headers=True).read_all()


def _msg_ids(table: pa.Table) -> list[str]:
    return [dict(h)["Nats-Msg-Id"][0] for h in table.column("headers").to_pylist()]


def _sources(ids: list[str]) -> list[str]:
    """Copies' ids without their content digest: ``<prefix><stream>:<seq>``."""
    return [i.rsplit(":", 1)[0] for i in ids]


# -- reading -----------------------------------------------------------------------------


def test_read_stream_reads_every_message_in_order_once_across_runs(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, name = shared_nats_server.url, unique_name("RS")
    make_stream(url, name)
    publish(url, name, 300)
    checkpoint = str(tmp_path / "checkpoint")

    def run() -> _Batches:
        sink = _Batches()
        df = read_stream(spark, url, name, startingOffsets="earliest")
        run_available_now(
            df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
        )
        return sink

    first = run()
    assert first.seqs() == list(range(1, 301))
    assert first.batches[0][0] == (1, b"m0") and first.batches[0][-1] == (300, b"m299")

    publish(url, name, 200, start=300)
    second = run()
    # Only what arrived after the first run, in a batch numbered after the first run's.
    assert second.seqs() == list(range(301, 501))
    assert min(second.batches) > max(first.batches)
    assert [data for _, data in second.batches[min(second.batches)]][:2] == [b"m300", b"m301"]

    # Nothing new: a third run reads nothing.
    assert run().seqs() == []


def test_read_stream_starts_at_the_latest_message_by_default(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, name = shared_nats_server.url, unique_name("RL")
    make_stream(url, name)
    publish(url, name, 50)
    checkpoint = str(tmp_path / "checkpoint")
    sink = _Batches()
    writer = (
        read_stream(spark, url, name)
        .writeStream.foreachBatch(sink)
        # The memory of where the first run started is the checkpoint.
        .option("checkpointLocation", checkpoint)
    )
    run_available_now(writer)
    assert sink.seqs() == []
    publish(url, name, 20, start=50)
    run_available_now(writer)
    assert sink.seqs() == list(range(51, 71))


def test_max_messages_per_trigger_bounds_each_micro_batch(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, name = shared_nats_server.url, unique_name("RM")
    make_stream(url, name)
    publish(url, name, 250)
    sink = _Batches()
    df = read_stream(
        spark, url, name, startingSequence=11, maxMessagesPerTrigger=100, minPartitions=2
    )
    query = run_available_now(
        df.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "c"))
    )
    assert [len(sink.batches[b]) for b in sorted(sink.batches)] == [100, 100, 40]
    assert sink.seqs() == list(range(11, 251))
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in progress] == [100, 100, 40]
    sources = [p["sources"][0] for p in progress]
    assert [seqs(json.loads(s["endOffset"])) for s in sources] == [
        {"seq": 111},
        {"seq": 211},
        {"seq": 251},
    ]
    # (Spark reports the start of a query's first micro-batch as null.)
    assert [seqs(json.loads(s["startOffset"])) for s in sources[1:]] == [{"seq": 111}, {"seq": 211}]
    latest = json.loads(progress[-1]["sources"][0]["latestOffset"])
    assert (latest["seq"], latest["maxMessagesBehindLatest"]) == (251, 0)


def test_stream_reader_offsets_limits_and_data_loss(
    shared_nats_server: Any, unique_name: Any
) -> None:
    """The driver side of a streaming read, called as Spark calls it."""
    url, name = shared_nats_server.url, unique_name("RO")
    make_stream(url, name)

    def reader(**options: Any) -> JetStreamStreamReader:
        opts = parse_read_options({"servers": url, "stream": name, **options}, queries="stream")
        return JetStreamStreamReader(opts, message_schema())

    assert seqs(reader(startingOffsets="earliest").initialOffset()) == {"seq": 1}
    publish(url, name, 30)
    assert seqs(reader().initialOffset()) == {"seq": 31}  # latest
    assert seqs(reader(startingOffsets="earliest").initialOffset()) == {"seq": 1}
    assert seqs(reader(startingSequence=7).initialOffset()) == {"seq": 7}
    assert seqs(reader(startingTime="2999-01-01T00:00:00Z").initialOffset()) == {"seq": 31}

    r = reader(maxMessagesPerTrigger=8)
    assert r.getDefaultReadLimit() == ReadMaxRows(8)
    assert reader().getDefaultReadLimit() == ReadAllAvailable()
    # Nothing planned yet: the whole stream is behind.
    report = reader().reportLatestOffset()
    assert (report["seq"], report["maxMessagesBehindLatest"]) == (31, 30)
    assert seqs(r.latestOffset({"seq": 1}, ReadMaxRows(8))) == {"seq": 9}
    assert seqs(r.latestOffset({"seq": 25}, ReadMaxRows(8))) == {"seq": 31}
    # Spark's limit wins over the option (availableNow without a limit, for one).
    assert seqs(r.latestOffset({"seq": 1}, ReadAllAvailable())) == {"seq": 31}
    assert seqs(r.latestOffset({"seq": 31}, ReadAllAvailable())) == {"seq": 31}
    assert seqs(r.latestOffset({"seq": 25}, ReadMinRows(10))) == {"seq": 25}
    assert seqs(r.latestOffset({"seq": 20}, ReadMinRows(10))) == {"seq": 31}
    report = r.reportLatestOffset()
    assert (report["seq"], report["maxMessagesBehindLatest"]) == (31, 0)

    r.prepareForTriggerAvailableNow()
    publish(url, name, 5, start=30)
    assert seqs(r.latestOffset({"seq": 1}, ReadAllAvailable())) == {"seq": 31}
    assert seqs(reader().latestOffset({"seq": 1}, ReadAllAvailable())) == {"seq": 36}

    ranges = r.partitions({"seq": 1}, {"seq": 36})
    assert [(p.start, p.end) for p in ranges] == [(1, 35)]
    assert r.partitions({"seq": 36}, {"seq": 36}) == []
    split = reader(minPartitions=3).partitions({"seq": 1}, {"seq": 31})
    assert [(p.start, p.end) for p in split] == [(1, 10), (11, 20), (21, 30)]
    batches = list(r.read(split[1]))
    assert [s for b in batches for s in b.column("seq").to_pylist()] == list(range(11, 21))

    with pytest.raises(BadInputError, match="offset"):
        r.latestOffset({"offset": 3}, ReadAllAvailable())

    with ja.connect(url) as client:
        client.purge_stream(name, up_to_seq=11)  # removes 1..10
    with pytest.raises(DataLossError, match="failOnDataLoss") as excinfo:
        reader().partitions({"seq": 5}, {"seq": 20})
    assert (excinfo.value.first, excinfo.value.last) == (5, 10)
    lenient = reader(failOnDataLoss="false")
    # The limit counts the messages still there, not the removed sequences, and the
    # end offset records where the micro-batch's reads begin.
    assert seqs(reader().latestOffset({"seq": 5}, ReadMaxRows(4))) == {"seq": 15}
    planned = lenient.latestOffset({"seq": 5}, ReadMaxRows(4))
    assert seqs(planned) == {"seq": 15, "first": 11}
    assert [(p.start, p.end) for p in lenient.partitions({"seq": 5}, planned)] == [(11, 14)]
    # A query's first micro-batch, from a start the stream's state gave, records it too:
    # Spark asks initialOffset again when it re-runs that micro-batch after a restart.
    first_run = reader(startingOffsets="earliest", failOnDataLoss="false")
    initial = first_run.initialOffset()
    assert seqs(initial) == {"seq": 11}
    first_batch = first_run.latestOffset(initial, ReadMaxRows(4))
    assert seqs(first_batch) == {"seq": 15, "first": 11}
    # Partitions follow from the offsets alone, so a micro-batch re-run after a restart
    # is split as it was the first time, whatever the stream removed since.
    with ja.connect(url) as client:
        client.purge_stream(name, up_to_seq=13)
    assert [(p.start, p.end) for p in lenient.partitions({"seq": 5}, planned)] == [(11, 14)]
    restarted = reader(startingOffsets="earliest", failOnDataLoss="false")
    assert seqs(restarted.initialOffset()) == {"seq": 13}
    assert [(p.start, p.end) for p in restarted.partitions({"seq": 13}, first_batch)] == [(11, 14)]
    with pytest.raises(DataLossError) as excinfo:
        reader(startingOffsets="earliest").partitions({"seq": 13}, first_batch)
    assert (excinfo.value.first, excinfo.value.last) == (11, 12)
    assert [(p.start, p.end) for p in lenient.partitions({"seq": 5}, {"seq": 20})] == [(5, 19)]
    assert [(p.start, p.end) for p in lenient.partitions(planned, planned)] == []
    assert seqs(lenient.latestOffset(planned, ReadMaxRows(4))) == {"seq": 19}
    # Nothing new: the start offset as given, so Spark sees no new data.
    assert seqs(lenient.latestOffset({"seq": 36, "first": 30}, ReadAllAvailable())) == {
        "seq": 36,
        "first": 30,
    }


# -- writing -----------------------------------------------------------------------------


def _copy_of(spark: Any, url: str, src: str, dst: str, **options: Any) -> Any:
    """A streaming read of ``src`` with its subjects moved to ``dst``."""
    return read_stream(spark, url, src, startingOffsets="earliest", **options).withColumn(
        "subject", F.regexp_replace("subject", f"^{src}", dst)
    )


def _write_stream(df: Any, url: str, checkpoint: Path, **options: Any) -> Any:
    writer = (
        df.writeStream.format("jetstream")
        .option("servers", url)
        .option("checkpointLocation", str(checkpoint))
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer


@pytest.mark.parametrize("publish_mode", ["acked", "fast"])
def test_write_stream_stores_every_row_once_with_ids_per_micro_batch(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path, publish_mode: str
) -> None:
    url, src, dst = shared_nats_server.url, unique_name("WS"), unique_name("WD")
    make_stream(url, src)
    make_stream(url, dst, allow_batched=publish_mode == "fast")
    publish(url, src, 250)
    copy = _copy_of(spark, url, src, dst, maxMessagesPerTrigger=100, minPartitions=2)
    writer = _write_stream(copy, url, tmp_path / "checkpoint", stream=dst, publishMode=publish_mode)
    query = run_available_now(writer)

    table = _messages(url, dst)
    assert table.num_rows == 250
    assert sorted(table.column("data").to_pylist(), key=lambda d: int(d[1:])) == [
        f"m{i}".encode() for i in range(250)
    ]
    ids = _msg_ids(table)
    # A copy: <stream>:<seq>:<digest> of each source message, whichever of the three
    # micro-batches and two partitions carried it, and whichever query.
    assert sorted(_sources(ids)) == sorted(f"{src}:{seq}" for seq in range(1, 251))

    # A second run from the checkpoint publishes only what is new.
    run_available_now(writer)
    assert _count(url, dst) == 250
    publish(url, src, 30, start=250)
    again = run_available_now(writer)
    assert again.id == query.id
    assert _count(url, dst) == 280

    # A new query (another checkpoint) copying the same messages sends the same ids:
    # inside the target's duplicate window it stores nothing.
    anew = _write_stream(copy, url, tmp_path / "other", stream=dst, publishMode=publish_mode)
    assert run_available_now(anew).id != query.id
    assert _count(url, dst) == 280


def _fail_while(marker: str, url: str, stream: str, published: int) -> Any:
    """A mapInArrow step: while the file ``marker`` exists, partition 0 passes its
    rows on, waits until ``stream`` holds ``published`` messages (the other write
    tasks have published theirs), then fails, in every attempt. Without the file it
    passes rows through. (Partition 0's own rows are not published before it fails:
    a few small rows stay in the Python worker's output buffer until the task ends.)"""

    def step(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        yield from batches
        ctx = TaskContext.get()
        if ctx is None or ctx.partitionId() != 0 or not os.path.exists(marker):
            return
        deadline = time.monotonic() + 60
        with ja.connect(url) as client:
            while client.stream_info(stream).state.messages < published:
                if time.monotonic() > deadline:
                    raise AssertionError("the other write tasks published nothing")
                time.sleep(0.05)
        raise RuntimeError("injected failure after the micro-batch's rows were published")

    return step


def test_restarted_query_re_runs_its_failed_micro_batch_without_duplicates(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, src, dst = shared_nats_server.url, unique_name("FS"), unique_name("FD")
    make_stream(url, src)
    make_stream(url, dst)
    publish(url, src, 400)
    marker = tmp_path / "fail"
    marker.touch()
    copy = _copy_of(spark, url, src, dst, minPartitions=2)
    flaky = copy.mapInArrow(_fail_while(str(marker), url, dst, 200), copy.schema)
    writer = _write_stream(flaky, url, tmp_path / "checkpoint", stream=dst)

    with pytest.raises(SPARK_ERRORS) as excinfo:
        run_available_now(writer)
    assert "injected failure" in error_text(excinfo)
    # Partition 1 stored its rows, but micro-batch 0 failed: the checkpoint has no commit.
    first_ids = _msg_ids(_messages(url, dst))
    assert len(first_ids) == 200

    marker.unlink()
    run_available_now(writer)
    # The re-run of batch 0 sent every row, partition 1's under the first run's ids.
    table = _messages(url, dst)
    assert table.num_rows == 400
    assert len(set(table.column("data").to_pylist())) == 400
    ids = _msg_ids(table)
    assert ids[:200] == first_ids
    assert sorted(_sources(ids)) == sorted(f"{src}:{seq}" for seq in range(1, 401))


def test_a_re_run_micro_batch_reads_the_ranges_first_planned_though_its_head_was_removed(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    """failOnDataLoss=false: the source's first messages go while a failed query is
    down. The re-run of its micro-batch reads the partitions planned the first time
    (minus what is gone), so each row keeps its message id in the sink."""
    url, src, dst = shared_nats_server.url, unique_name("LS"), unique_name("LD")
    make_stream(url, src)
    make_stream(url, dst)
    publish(url, src, 400)
    marker = tmp_path / "fail"
    marker.touch()
    copy = _copy_of(spark, url, src, dst, minPartitions=2, failOnDataLoss="false")
    flaky = copy.mapInArrow(_fail_while(str(marker), url, dst, 200), copy.schema)
    writer = _write_stream(flaky, url, tmp_path / "checkpoint", stream=dst)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        run_available_now(writer)
    assert "injected failure" in error_text(excinfo)
    first = _messages(url, dst)
    assert sorted(first.column("data").to_pylist()) == sorted(
        f"m{i}".encode() for i in range(200, 400)
    )

    with ja.connect(url) as client:
        client.purge_stream(src, up_to_seq=101)  # m0..m99 are gone
    marker.unlink()
    run_available_now(writer)
    table = _messages(url, dst)
    data = table.column("data").to_pylist()
    # Partition 1 (m200..m399) was stored the first time and is dropped as duplicates
    # now; partition 0 stores what is left of it, m100..m199.
    assert sorted(data, key=lambda d: int(d[1:])) == [f"m{i}".encode() for i in range(100, 400)]
    ids = _msg_ids(table)
    assert ids[:200] == _msg_ids(first)
    assert sorted(_sources(ids[200:]), key=lambda i: int(i.rsplit(":", 1)[1])) == [
        f"{src}:{seq}" for seq in range(101, 201)
    ]


def test_stream_writer_outside_a_micro_batch_and_reports(
    caplog: pytest.LogCaptureFixture,
) -> None:
    writer = JetStreamStreamWriter(
        parse_write_options({"password": "pw-SECRET", "user": "u"}, queries="stream"),
        PublishColumns(subject="subject", data="data", headers=None, msg_id=None),
    )
    with pytest.raises(JetStreamArrowError, match="micro-batch"):
        writer.write(iter(()))
    done = [
        StreamCommitMessage(0, 0, 100, 100, 0, 1, 100, query_id="q-1"),
        StreamCommitMessage(1, 1, 50, 20, 30, 101, 150, query_id="q-1"),
    ]
    with caplog.at_level(logging.INFO, logger="jetstream_arrow.spark"):
        writer.commit(done, 7)
        writer.abort([done[0], None], 8)
    commit, abort = (r.getMessage() for r in caplog.records)
    assert "streaming query q-1 batch 7 committed" in commit
    assert "150 rows: 120 stored, 30 duplicates, sequences 1..150" in commit
    assert "batch 8 failed" in abort and "1 of 2 task(s)" in abort
    assert "re-runs batch 8 with the same message ids" in abort
    assert "SECRET" not in commit + abort + repr(writer)


# -- options -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "queries", "named"),
    [
        ({"endingSequence": "9"}, "stream", "'endingSequence'"),
        ({"endingTime": "2026-01-31T12:00:00Z"}, "stream", "'endingTime'"),
        ({"maxMessagesPerTrigger": "10"}, "batch", "'maxMessagesPerTrigger'"),
        ({"maxMessagesPerTrigger": "0"}, "stream", "'maxMessagesPerTrigger'"),
        ({"maxMessagesPerTrigger": "many"}, "stream", "'maxMessagesPerTrigger'"),
        ({"startingOffsets": "oldest"}, "stream", "'startingOffsets'"),
        ({"startingOffsets": "latest"}, "batch", "'startingOffsets'"),
        ({"startingOffsets": "earliest", "startingSequence": "3"}, "stream", "'startingOffsets'"),
        ({"startingOffsets": "latest", "startingTime": "0"}, "stream", "'startingOffsets'"),
    ],
)
def test_bad_streaming_read_options_name_the_option(
    options: dict[str, str], queries: str, named: str
) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_read_options({"stream": "S", **options}, queries=queries)
    assert named in str(excinfo.value)


def test_streaming_option_values() -> None:
    opts = parse_read_options(
        {"stream": "S", "STARTINGOFFSETS": "Earliest", "max_messages_per_trigger": "500"},
        queries="stream",
    )
    assert (opts.starting_offsets, opts.max_messages_per_trigger) == ("earliest", 500)
    assert parse_read_options({"stream": "S", "startingOffsets": "earliest"}).start_seq is None
    # Spark passes the checkpoint location to a streaming sink; it is Spark's option.
    write = parse_write_options(
        {"checkpointLocation": "/tmp/x", "ackWindow": "10"}, queries="stream"
    )
    assert write.window == 10 and write.write_id == ""
    with pytest.raises(BadInputError, match="'checkpointLocation'"):
        parse_write_options({"checkpointLocation": "/tmp/x"})
    with pytest.raises(BadInputError, match=r"'writeId'.*query id"):
        parse_write_options({"writeId": "w"}, queries="stream")


def test_bad_options_fail_the_streaming_query_naming_the_option(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, name = shared_nats_server.url, unique_name("BO")
    make_stream(url, name)
    publish(url, name, 5)

    def fails(writer: Any) -> str:
        with pytest.raises(SPARK_ERRORS) as excinfo:
            run_available_now(writer)
        return error_text(excinfo)

    ending = read_stream(spark, url, name, endingSequence=3)
    text = fails(
        ending.writeStream.format("console").option("checkpointLocation", str(tmp_path / "a"))
    )
    assert "'endingSequence'" in text and "spark.readStream" in text

    with pytest.raises(SPARK_ERRORS) as excinfo:
        read_stream(spark, url, name, maxMessagesPerTrigger=0)
    assert "'maxMessagesPerTrigger'" in error_text(excinfo)

    with pytest.raises(SPARK_ERRORS) as excinfo:
        read_df(spark, url, name, maxMessagesPerTrigger=10).count()
    assert "'maxMessagesPerTrigger'" in error_text(excinfo)

    source = read_stream(spark, url, name, startingOffsets="earliest")
    text = fails(_write_stream(source, url, tmp_path / "b", writeId="w"))
    assert "'writeId'" in text and "df.writeStream" in text

    counts = source.groupBy("subject").count().selectExpr("subject", "string(count) as data")
    text = fails(_write_stream(counts, url, tmp_path / "c").outputMode("complete"))
    assert "outputMode('complete') is not supported" in text
    assert _count(url, name) == 5


def test_a_micro_batch_re_run_after_its_stream_was_created_again_reads_no_new_message(
    shared_nats_server: Any, unique_name: Any
) -> None:
    """Spark re-runs an unfinished micro-batch from its logged offsets, without planning
    it again. When the stream was deleted and created again meanwhile (empty yet, or
    refilled), those sequences name the new stream's messages, or will: with failOnDataLoss the re-run
    fails naming the stream and range, without it the range is left out and the next
    micro-batch reads the new stream from its first message, each message once."""
    url, name = shared_nats_server.url, unique_name("RR")
    make_stream(url, name)
    publish(url, name, 30)

    def reader(**options: Any) -> JetStreamStreamReader:
        opts = parse_read_options(
            {"servers": url, "stream": name, "startingOffsets": "earliest", **options},
            queries="stream",
        )
        return JetStreamStreamReader(opts, message_schema())

    def data(r: JetStreamStreamReader, start: Any, end: Any) -> list[bytes]:
        parts = r.partitions(start, end)
        return [v for p in parts for b in r.read(p) for v in b.column("data").to_pylist()]

    first_run = reader()
    start = first_run.initialOffset()
    end = first_run.latestOffset(start, ReadMaxRows(10))
    assert seqs(end) == {"seq": 11, "first": 1} and isinstance(end["created"], int)
    assert data(first_run, start, end) == [f"m{i}".encode() for i in range(10)]

    with ja.connect(url) as client:
        client.delete_stream(name)
    make_stream(url, name)
    # Created again and still empty: its sequences would name the new messages
    # published before the executors read them.
    lenient = reader(failOnDataLoss="false")
    for empty_or_refilled in range(2):
        with pytest.raises(DataLossError, match=f"stream '{name}' was deleted and created") as e:
            reader().partitions(start, end)
        assert (e.value.first, e.value.last) == (1, 10)
        assert lenient.partitions(start, end) == []
        if not empty_or_refilled:
            publish(url, name, 30, start=100)
    after = lenient.latestOffset(end, ReadAllAvailable())
    assert seqs(after) == {"seq": 31, "first": 1} and after["created"] != end["created"]
    assert data(lenient, end, after) == [f"m{100 + i}".encode() for i in range(30)]


def test_only_a_stream_holding_no_message_older_than_its_creation_was_created_again() -> None:
    """A new creation time alone is not a new stream: one restored from a snapshot into
    a cluster reports the restore's time (each replica its own), and servers before
    2.14.5 gave a stream created again with the same config a new one; those keep
    their older messages. The server's zero time is no creation time."""
    from types import SimpleNamespace

    from jetstream_arrow.spark.stream_lookup import ChosenStream, created_ns, recreated_since

    def stream(created: int, first_message: int | None) -> ChosenStream:
        return ChosenStream(None, None, created, first_message)

    assert not recreated_since(None, stream(5_000, 6_000))  # an offset of an older version
    assert not recreated_since(5_000, stream(5_000, 6_000))
    assert recreated_since(5_000, stream(7_000, 7_000))  # made anew, filled after
    assert not recreated_since(5_000, stream(7_000, 6_000))  # restored: older messages
    assert not recreated_since(5_000, stream(7_000, None))  # empty: its end tells
    info = SimpleNamespace(raw={"created": "2026-11-26T21:04:36.123456789+01:00"})
    assert created_ns(info) == 1_795_723_476_123_456_789
    assert created_ns(SimpleNamespace(raw={"created": "2026-11-26T20:04:36.1234567Z"})) == (
        1_795_723_476_123_456_700
    )
    assert created_ns(SimpleNamespace(raw={"created": "0001-01-01T00:00:00Z"})) is None
    assert created_ns(SimpleNamespace(raw={})) is None


def test_a_stream_that_went_backwards_fails_the_query_or_is_read_again(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    """The stream a query reads is deleted and recreated with fewer messages than the
    query had read (it ends before the query's position), then with more (only its
    creation time, kept in the offsets, tells). With failOnDataLoss the query fails
    naming it; without, it reads the new stream from its first message (it planned
    nothing and reported lag 0 for ever before, or skipped the new stream's head)."""
    url, src = shared_nats_server.url, unique_name("BK")
    make_stream(url, src)
    publish(url, src, 30)

    def reader(**options: Any) -> JetStreamStreamReader:
        opts = parse_read_options({"servers": url, "stream": src, **options}, queries="stream")
        return JetStreamStreamReader(opts, message_schema())

    assert seqs(reader().latestOffset({"seq": 1}, ReadAllAvailable())) == {"seq": 31}
    # A query started past the end (startingSequence) waits; it did not go back.
    assert seqs(reader(startingSequence=40).latestOffset({"seq": 40}, ReadAllAvailable())) == {
        "seq": 40
    }

    sink = tmp_path / "sink"
    checkpoints = {mode: tmp_path / f"checkpoint-{mode}" for mode in ("strict", "lenient")}

    def run(mode: str) -> Any:
        df = read_stream(
            spark,
            url,
            src,
            startingOffsets="earliest",
            failOnDataLoss=str(mode == "strict").lower(),
        ).select("seq", "data")
        writer = (
            df.writeStream.format("parquet")
            .option("path", str(sink / mode))
            .option("checkpointLocation", str(checkpoints[mode]))
        )
        return run_available_now(writer)

    run("strict")
    run("lenient")
    with ja.connect(url) as client:
        client.delete_stream(src)
    make_stream(url, src)
    publish(url, src, 5, start=100)

    with pytest.raises(DataLossError, match=f"stream '{src}' ends at sequence 5"):
        reader().latestOffset({"seq": 31}, ReadAllAvailable())
    lenient = reader(failOnDataLoss="false")
    planned = lenient.latestOffset({"seq": 31}, ReadAllAvailable())
    assert seqs(planned) == {"seq": 6, "first": 1}
    assert [(p.start, p.end) for p in lenient.partitions({"seq": 31}, planned)] == [(1, 5)]

    # The queries' offsets keep when the stream was created: they know it is another.
    with pytest.raises(SPARK_ERRORS) as excinfo:
        run("strict")
    assert f"stream '{src}' was deleted and created again" in error_text(excinfo)
    run("lenient")

    def lenient_rows() -> list[tuple[int, bytes]]:
        rows = spark.read.parquet(str(sink / "lenient")).collect()
        return sorted((r.seq, r.data) for r in rows)

    first_two = [(i + 1, f"m{i}".encode()) for i in range(30)] + [
        (i + 1, f"m{100 + i}".encode()) for i in range(5)
    ]
    assert lenient_rows() == sorted(first_two)

    # Recreated again and refilled past where both queries stand (31 and 6): its end
    # does not tell, only its creation time does. Before, the strict query read
    # sequences 31..40 of the new stream and the lenient one 6..40, each without a word.
    with ja.connect(url) as client:
        client.delete_stream(src)
    make_stream(url, src)
    publish(url, src, 40, start=200)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        run("strict")
    assert f"stream '{src}' was deleted and created again" in error_text(excinfo)
    assert "read it up to sequence 30" in error_text(excinfo)
    run("lenient")
    assert lenient_rows() == sorted(
        first_two + [(i + 1, f"m{200 + i}".encode()) for i in range(40)]
    )


def test_a_streaming_copy_keeps_ttls_with_include_ttl_and_drops_them_without(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    """readStream(includeTtl) → writeStream: each message's Nats-TTL comes along in the
    `ttl` interval column (never as -1 s); without the option the copy has none."""
    url = shared_nats_server.url
    src, kept, dropped = unique_name("TS"), unique_name("TK"), unique_name("TD")
    for name in (src, kept, dropped):
        make_stream(url, name, allow_msg_ttl=True)
    texts = ["90s", "never", None, "1h"]
    with ja.connect(url) as client:
        client.publish(
            pa.table(
                {
                    "subject": [f"{src}.{i}" for i in range(4)],
                    "data": [b"m%d" % i for i in range(4)],
                    "headers": pa.array(
                        [[] if t is None else [("Nats-TTL", t)] for t in texts],
                        pa.map_(pa.string(), pa.string()),
                    ),
                }
            ),
            keep_control_headers=True,
        )
    with_ttl = _copy_of(spark, url, src, kept, includeTtl="true")
    assert dict(with_ttl.dtypes)["ttl"] == "interval day to second"
    run_available_now(_write_stream(with_ttl, url, tmp_path / "kept", stream=kept))
    run_available_now(
        _write_stream(_copy_of(spark, url, src, dropped), url, tmp_path / "dropped", stream=dropped)
    )

    def ttls(name: str) -> dict[bytes, list[str] | None]:
        table = stream_table(url, name, include_headers=True)
        return {
            row["data"]: dict(row["headers"] or []).get("Nats-TTL")
            for row in table.select(["data", "headers"]).to_pylist()
        }

    assert ttls(kept) == {b"m0": ["90s"], b"m1": ["never"], b"m2": None, b"m3": ["3600s"]}
    assert ttls(dropped) == {b"m0": None, b"m1": None, b"m2": None, b"m3": None}
    batch = read_df(spark, url, src, includeTtl="true").orderBy("seq").collect()
    assert [None if r["ttl"] is None else r["ttl"].total_seconds() for r in batch] == [
        90,
        -1,
        None,
        3600,
    ]
