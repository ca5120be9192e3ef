"""Several streams in one read: options ``streams`` and ``streamPattern``, for
spark.read and spark.readStream, against a real nats-server and a local[2] session.

A streaming read of several streams keeps a position per stream in its checkpoint,
takes in streams that appear, drops or fails on streams that go (``failOnDataLoss``),
and shares ``maxMessagesPerTrigger`` among the streams by their backlogs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import jetstream_arrow as ja
from conftest_spark import (
    QUERY_TIMEOUT,
    SPARK_ERRORS,
    error_text,
    make_stream,
    publish,
    run_available_now,
    seqs,
    spark,
)
from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.spark import message_schema
from jetstream_arrow.spark.functions import read_fn
from jetstream_arrow.spark.options import parse_read_options
from jetstream_arrow.spark.reading import DataLossError
from jetstream_arrow.spark.stream_reader import JetStreamStreamReader
from jetstream_arrow.spark.triggers import share_by_backlog

from .test_spark_streaming import _fail_while, _messages, _write_stream

pytestmark = pytest.mark.spark
__all__ = ["spark"]


def _reader(spark: Any, url: str, streaming: bool, **options: Any) -> Any:
    reader = (spark.readStream if streaming else spark.read).format("jetstream")
    reader = reader.option("servers", url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _rows(df: Any) -> list[tuple[str, int, bytes]]:
    """(stream, seq, data) of every row, sorted."""
    return sorted((r.stream, r.seq, bytes(r.data)) for r in df.collect())


def _expected(name: str, first: int, last: int, offset: int = 0) -> list[tuple[str, int, bytes]]:
    """The rows ``publish`` stores in ``name`` as sequences ``first..last``, whose
    payloads count from ``offset``."""
    return [(name, seq, f"m{seq - 1 + offset}".encode()) for seq in range(first, last + 1)]


def _streams_with(url: str, prefix: str, counts: dict[str, int]) -> list[str]:
    """Streams ``<prefix>_<suffix>`` holding ``count`` messages each (by ``publish``)."""
    names = []
    for suffix, count in counts.items():
        name = f"{prefix}_{suffix}"
        make_stream(url, name)
        if count:
            publish(url, name, count)
        names.append(name)
    return names


class _Rows:
    """A foreachBatch function that keeps every (stream, seq, data) it is given, by
    micro-batch. A micro-batch that Spark runs again (a query stopped after the
    function ran but before Spark logged the micro-batch done: foreachBatch is at
    least once) must bring exactly the rows of its first run; it is kept once, as an
    idempotent sink keyed by batch id keeps it."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[str, int, bytes]]] = {}

    @property
    def rows(self) -> list[tuple[str, int, bytes]]:
        return [row for rows in self.batches.values() for row in rows]

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = sorted((r.stream, r.seq, bytes(r.data)) for r in df.collect())
        first_run = self.batches.setdefault(batch_id, rows)
        assert first_run == rows, f"micro-batch {batch_id} run again with other rows"


# -- options ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"stream": "A", "streams": "B,C"}, "'stream' and 'streams' exclude each other"),
        ({"streams": "B", "streamPattern": "B.*"}, "'streams' and 'streamPattern' exclude"),
        ({"kv": "cfg", "streamPattern": "B.*"}, "option 'kv' names one stream"),
        ({"streams": "A,B,A"}, "names 'A' twice"),
        ({"streams": "A,B.C"}, "streams"),
        ({"streams": ""}, "streams"),
        ({"streamPattern": "ORD(ERS"}, "'streamPattern' must be a regular expression"),
        ({"streams": "A,B", "startingSequence": "3"}, "'startingSequence' does not go with"),
        ({"streamPattern": "A.*", "endingSequence": "3"}, "'endingSequence' does not go with"),
        ({"streams": "A,B", "lastPerSubject": "true"}, "'lastPerSubject' does not go with"),
    ],
)
def test_bad_ways_of_naming_several_streams_name_the_option(
    options: dict[str, str], match: str
) -> None:
    with pytest.raises(BadInputError, match=match):
        parse_read_options(options)


def test_several_streams_refuse_the_options_of_one_stream() -> None:
    with pytest.raises(BadInputError, match="'consumer' does not go with option 'streams'"):
        parse_read_options({"streams": "A,B", "consumer": "C"}, queries="stream")
    with pytest.raises(BadInputError, match="'streams' does not apply to read_fn"):
        read_fn(streams="A,B")
    opts = parse_read_options({"streams": " A , B "})
    assert (opts.streams, opts.stream, opts.several_streams) == (("A", "B"), "", True)
    assert parse_read_options({"stream": "A"}).several_streams is False


def test_trigger_bounds_are_shared_by_backlog() -> None:
    sizes = {"A": 10.0, "B": 10.0, "C": 10.0}
    assert share_by_backlog({"A": 30, "B": 10, "C": 0}, sizes, 8, None) == {"A": 6, "B": 2, "C": 0}
    assert share_by_backlog({"A": 30, "B": 10, "C": 0}, sizes, None, None) == {
        "A": 30,
        "B": 10,
        "C": 0,
    }
    # Largest remainders first: 7 of 1+1+1 messages.
    assert sum(share_by_backlog({"A": 5, "B": 5, "C": 5}, sizes, 7, None).values()) == 7
    # The same fraction of each backlog in bytes: 1,000 bytes of A, 5,000 of B.
    bytes_share = share_by_backlog({"A": 100, "B": 100}, {"A": 10.0, "B": 50.0}, None, 200)
    assert bytes_share == {"A": 3, "B": 3}
    # A message larger than the bound is still read.
    assert share_by_backlog({"A": 3, "B": 1}, {"A": 500.0, "B": 500.0}, None, 10) == {
        "A": 1,
        "B": 0,
    }


# -- batch reads --------------------------------------------------------------------------


def test_a_batch_read_of_several_streams_by_name_pattern_and_subjects(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url = shared_nats_server.url
    prefix = unique_name("MB")
    a, b, other = f"{prefix}_A", f"{prefix}_B", f"{prefix}X"
    for name in (a, b, other):
        make_stream(url, name)
    publish(url, a, 30)
    publish(url, b, 20, subjects=("c",))
    publish(url, other, 5)

    both = _expected(a, 1, 30) + _expected(b, 1, 20)
    assert _rows(_reader(spark, url, False, streams=f"{a},{b}")) == both
    assert _rows(_reader(spark, url, False, streamPattern=f"{prefix}_.*")) == both
    # The pattern matches whole names: the prefix alone matches none.
    assert _reader(spark, url, False, streamPattern=prefix).count() == 0
    # Streams chosen by the subjects they store, and only those subjects read.
    by_subject = _reader(spark, url, False, streamPattern=".*", subjects=f"{b}.c,{other}.b")
    assert _rows(by_subject) == sorted(
        _expected(b, 1, 20) + [r for r in _expected(other, 1, 5) if r[1] % 2 == 0]
    )
    # Named streams are each read with the subjects they store.
    by_name = _reader(spark, url, False, streams=f"{a},{other}", subjects=f"{other}.b")
    assert _rows(by_name) == [r for r in _expected(other, 1, 5) if r[1] % 2 == 0]
    # minPartitions is shared among the streams by their length.
    parts = _reader(spark, url, False, streams=f"{a},{b}", minPartitions=5)
    assert parts.rdd.getNumPartitions() == 5  # 3 for 30 messages, 2 for 20
    assert sorted(parts.groupBy("stream").count().collect()) == [(a, 30), (b, 20)]
    # A time bound holds in each stream; a named stream that is missing is an error.
    assert (
        _reader(spark, url, False, streams=f"{a},{b}", startingTime="2999-01-01T00:00:00Z").count()
        == 0
    )
    with pytest.raises(SPARK_ERRORS) as excinfo:
        _reader(spark, url, False, streams=f"{a},{prefix}_NONE").count()
    assert f"there is no stream '{prefix}_NONE'" in error_text(excinfo)


def test_filters_on_several_streams_give_the_same_rows_with_and_without_pushdown(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    """Pushed-down subject filters choose the streams of a pattern as option
    ``subjects`` does, and each stream is read with the filters it stores."""
    url = shared_nats_server.url
    prefix = unique_name("MF")
    a, b = f"{prefix}_A", f"{prefix}_B"
    make_stream(url, a)
    make_stream(url, b)
    publish(url, a, 20)
    publish(url, b, 10)
    filters = {
        "seq": F.col("seq") <= 3,
        "subject": F.col("subject") == f"{a}.b",
        "subjects": F.col("subject").isin(f"{a}.a", f"{b}.b"),
        "prefix": F.col("subject").startswith(f"{b}."),
    }
    expected = {
        "seq": _expected(a, 1, 3) + _expected(b, 1, 3),
        "subject": [r for r in _expected(a, 1, 20) if r[1] % 2 == 0],
        "subjects": sorted(
            [r for r in _expected(a, 1, 20) if r[1] % 2 == 1]
            + [r for r in _expected(b, 1, 10) if r[1] % 2 == 0]
        ),
        "prefix": _expected(b, 1, 10),
    }
    key = "spark.sql.python.filterPushdown.enabled"
    for pushed in ("false", "true"):
        spark.conf.set(key, pushed)
        try:
            df = _reader(spark, url, False, streamPattern=f"{prefix}_.*")
            got = {what: _rows(df.filter(cond)) for what, cond in filters.items()}
            assert got == expected, pushed
        finally:
            spark.conf.set(key, "false")


# -- the driver side of a streaming read ----------------------------------------------------


def test_stream_offsets_of_several_streams_come_and_go(
    shared_nats_server: Any, unique_name: Any
) -> None:
    url = shared_nats_server.url
    prefix = unique_name("MO")
    a, b = _streams_with(url, prefix, {"A": 30, "B": 10})
    c = f"{prefix}_C"

    def reader(**options: Any) -> JetStreamStreamReader:
        opts = parse_read_options(
            {"servers": url, "streamPattern": f"{prefix}_.*", **options}, queries="stream"
        )
        return JetStreamStreamReader(opts, message_schema())

    r = reader(startingOffsets="earliest")
    initial = r.initialOffset()
    assert seqs(initial) == {"streams": {a: {"seq": 1}, b: {"seq": 1}}}
    # 8 messages shared 30:10; the first micro-batch records where it began.
    first = r.latestOffset(initial, ReadMaxRows(8))
    assert seqs(first) == {"streams": {a: {"seq": 7, "first": 1}, b: {"seq": 3, "first": 1}}}
    parts = r.partitions(initial, first)
    assert sorted((p.stream, p.start, p.end) for p in parts) == [(a, 1, 6), (b, 1, 2)]
    read = [(p.stream, s) for p in parts for batch in r.read(p) for s in batch["seq"].to_pylist()]
    assert sorted(read) == [(a, s) for s in range(1, 7)] + [(b, 1), (b, 2)]
    report = r.reportLatestOffset()
    assert report["streams"] == {a: {"seq": 31}, b: {"seq": 11}}
    assert (report["minMessagesBehindLatest"], report["maxMessagesBehindLatest"]) == (8, 24)

    # A stream that appears starts where startingOffsets says, recorded in the offset.
    make_stream(url, c)
    publish(url, c, 4)
    after = {"streams": {a: {"seq": 31}, b: {"seq": 11}}}
    assert seqs(r.latestOffset(after, ReadAllAvailable())) == {
        "streams": {a: {"seq": 31}, b: {"seq": 11}, c: {"seq": 5, "first": 1}}
    }
    # From the latest message, the new stream joins with nothing read yet: its place
    # is kept all the same, so what arrives in it next is read.
    latest = reader().latestOffset(after, ReadAllAvailable())
    assert seqs(latest) == {"streams": {a: {"seq": 31}, b: {"seq": 11}, c: {"seq": 5, "first": 5}}}
    assert reader().partitions(after, latest) == []
    everything = {"streams": {a: {"seq": 31}, b: {"seq": 11}, c: {"seq": 5}}}
    assert seqs(r.latestOffset(everything, ReadAllAvailable())) == everything

    # A stream that goes fails the query, or is dropped and named in the progress.
    with ja.connect(url) as client:
        client.delete_stream(b)
    with pytest.raises(DataLossError, match=f"stream '{b}'.*is gone"):
        reader().latestOffset(everything, ReadAllAvailable())
    with pytest.raises(DataLossError, match=f"stream '{b}'"):
        reader().partitions(after, {"streams": {a: {"seq": 31}, b: {"seq": 12}}})
    lenient = reader(failOnDataLoss="false")
    dropped = lenient.latestOffset(everything, ReadAllAvailable())
    assert seqs(dropped) == {"streams": {a: {"seq": 31}, c: {"seq": 5}}}
    assert lenient.reportLatestOffset()["streamsGone"] == [b]
    assert lenient.partitions(after, {"streams": {a: {"seq": 31}, b: {"seq": 12}}}) == []

    # An offset of the other shape is refused, naming what wrote it.
    with pytest.raises(BadInputError, match="several streams"):
        lenient.latestOffset({"seq": 3}, ReadAllAvailable())
    single = JetStreamStreamReader(
        parse_read_options({"servers": url, "stream": a}, queries="stream"), message_schema()
    )
    with pytest.raises(BadInputError, match="several streams"):
        single.latestOffset(everything, ReadAllAvailable())


def test_a_query_of_one_stream_whose_stream_is_deleted_loses_its_messages_loudly_or_reads_on(
    shared_nats_server: Any, unique_name: Any
) -> None:
    """As a stream of several: with failOnDataLoss the query fails naming the loss (not
    as if the stream had never been there), else it waits, and reads a stream created
    again under the name from its first message."""
    url, name = shared_nats_server.url, unique_name("ONE")
    make_stream(url, name)
    publish(url, name, 3)

    def reader(**options: Any) -> JetStreamStreamReader:
        opts = parse_read_options(
            {"servers": url, "stream": name, "startingOffsets": "earliest", **options},
            queries="stream",
        )
        return JetStreamStreamReader(opts, message_schema())

    strict, lenient = reader(), reader(failOnDataLoss="false")
    start = strict.initialOffset()
    planned = strict.latestOffset(start, ReadMaxRows(2))
    lenient_start = lenient.initialOffset()
    lenient_end = lenient.latestOffset(lenient_start, ReadMaxRows(2))
    with ja.connect(url) as client:
        client.delete_stream(name)
    with pytest.raises(DataLossError, match=f"stream '{name}'.*is gone"):
        strict.latestOffset(planned, ReadAllAvailable())
    with pytest.raises(DataLossError, match=f"stream '{name}'.*is gone"):
        strict.partitions(start, planned)
    assert lenient.latestOffset(lenient_end, ReadAllAvailable()) == lenient_end
    assert lenient.partitions(lenient_start, lenient_end) == []
    assert lenient.reportLatestOffset()["seq"] == seqs(lenient_end)["seq"]
    make_stream(url, name)
    publish(url, name, 2)
    again = lenient.latestOffset(lenient_end, ReadAllAvailable())
    assert (seqs(again)["seq"], seqs(again)["first"]) == (3, 1)
    rows = [
        s
        for p in lenient.partitions(lenient_end, again)
        for b in lenient.read(p)
        for s in b["seq"].to_pylist()
    ]
    assert rows == [1, 2]


# -- streaming queries ----------------------------------------------------------------------


def test_a_streaming_query_reads_each_stream_once_as_streams_come_and_go(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    """trigger(availableNow=True), run after run from one checkpoint: every message of
    every matching stream once, a stream created between runs read from its start
    (startingOffsets earliest), a deleted one failing the query until failOnDataLoss
    is false."""
    url = shared_nats_server.url
    prefix = unique_name("MQ")
    a, b = _streams_with(url, prefix, {"A": 40, "B": 25})
    c = f"{prefix}_C"
    checkpoint = str(tmp_path / "checkpoint")

    def run(**options: Any) -> list[tuple[str, int, bytes]]:
        sink = _Rows()
        df = _reader(
            spark,
            url,
            True,
            streamPattern=f"{prefix}_.*",
            startingOffsets="earliest",
            maxMessagesPerTrigger=20,
            **options,
        )
        run_available_now(
            df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
        )
        return sorted(sink.rows)

    assert run() == _expected(a, 1, 40) + _expected(b, 1, 25)
    publish(url, a, 5, start=40)
    make_stream(url, c)
    publish(url, c, 7)
    assert run() == _expected(a, 41, 45) + _expected(c, 1, 7)
    assert run() == []

    with ja.connect(url) as client:
        client.delete_stream(b)
    publish(url, c, 3, start=7)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        run()
    assert f"stream '{b}', which the query reads, is gone" in error_text(excinfo)
    assert run(failOnDataLoss="false") == _expected(c, 8, 10, offset=0)


def test_a_processing_time_query_of_several_streams_restarts_exactly(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    """A query on a processing-time trigger reads messages published into two streams
    while it runs; stopped and started again from its checkpoint, it goes on where it
    stood: every message once."""
    url = shared_nats_server.url
    prefix = unique_name("MP")
    a, b = f"{prefix}_A", f"{prefix}_B"
    make_stream(url, a)
    make_stream(url, b)
    checkpoint = str(tmp_path / "checkpoint")
    sink = _Rows()

    def start() -> Any:
        df = _reader(spark, url, True, streams=f"{a},{b}", maxMessagesPerTrigger=25)
        return (
            df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    def wait_for(count: int, query: Any) -> None:
        deadline = time.monotonic() + QUERY_TIMEOUT
        while len(sink.rows) < count:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, f"{len(sink.rows)} of {count} rows read"
            time.sleep(0.2)

    query = start()
    try:
        # The query starts at the streams' ends: wait until it has planned its first
        # micro-batch, so what is published next is after its start.
        deadline = time.monotonic() + QUERY_TIMEOUT
        while query.lastProgress is None:
            assert time.monotonic() < deadline, "the query planned no micro-batch"
            time.sleep(0.2)
        publish(url, a, 30)
        publish(url, b, 20)
        wait_for(50, query)
    finally:
        query.stop()
    publish(url, a, 10, start=30)
    publish(url, b, 15, start=20)
    query = start()
    try:
        wait_for(75, query)
        time.sleep(1)  # more triggers: nothing is read twice
    finally:
        query.stop()
    assert sorted(sink.rows) == _expected(a, 1, 40) + _expected(b, 1, 35)
    latest = json.loads(query.lastProgress["sources"][0]["latestOffset"])
    assert latest["streams"] == {a: {"seq": 41}, b: {"seq": 36}}
    assert latest["maxMessagesBehindLatest"] == 0


def test_a_re_run_micro_batch_of_several_streams_reads_what_it_first_planned(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    """A micro-batch that fails after part of it was written into the sink is re-run
    from its logged offsets after a restart: the partitions of every stream are the
    ones first planned, so each row keeps its message id and none is stored twice."""
    url = shared_nats_server.url
    prefix = unique_name("MR")
    a, b, dst = f"{prefix}_A", f"{prefix}_B", f"{prefix}D"
    for name in (a, b, dst):
        make_stream(url, name)
    publish(url, a, 150)
    publish(url, b, 50)
    marker = tmp_path / "fail"
    marker.touch()
    df = _reader(spark, url, True, streams=f"{a},{b}", startingOffsets="earliest", minPartitions=2)
    copy = df.withColumn("subject", F.concat(F.lit(f"{dst}."), F.col("stream"), F.lit(".m")))
    flaky = copy.mapInArrow(_fail_while(str(marker), url, dst, 50), copy.schema)
    writer = _write_stream(flaky, url, tmp_path / "checkpoint", stream=dst)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        run_available_now(writer)
    assert "injected failure" in error_text(excinfo)
    assert _messages(url, dst).num_rows > 0

    marker.unlink()
    run_available_now(writer)
    table = _messages(url, dst)
    stored = sorted(zip(table["subject"].to_pylist(), table["data"].to_pylist(), strict=True))
    assert stored == sorted(
        [(f"{dst}.{a}.m", f"m{i}".encode()) for i in range(150)]
        + [(f"{dst}.{b}.m", f"m{i}".encode()) for i in range(50)]
    )
