"""Spark writes (``df.write`` and ``df.writeStream`` with ``format("jetstream")``)
checked against nats-py: what the stream holds afterwards (``STREAM.MSG.GET`` of every
sequence, headers byte for byte: ``tests/oracle_histories.py``) is every row of the
DataFrame once, subject, payload bytes and every header value, each message with its
own ``Nats-Msg-Id``; never read back through Spark or the package.

Frames are generated (hypothesis): binary, empty and Unicode payloads, headers with
several values per name, rows repeated alike, spread over partitions by a shuffle.
One Spark session (the fixture of ``tests/conftest_spark.py``), few examples: batch 3,
streaming copy 2 (each runs two queries); about a minute on two cores, Spark's
start included.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from conftest_spark import SPARK_ERRORS, run_available_now, spark
from natsserver import NatsServer
from oracle_histories import Headers, PyNats, Stored, StreamShape
from oracle_tables import BYTES, HEADER_NAMES, HEADER_VALUES, TEXT

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]
__all__ = ["spark"]

UniqueName = Callable[[str], str]

TOKENS = ("a", "b.c", "ü")
SCHEMA = "subject string, data binary, headers map<string, array<string>>"


def examples(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@pytest.fixture
def py(shared_nats_server: NatsServer, unique_name: UniqueName) -> Iterator[PyNats]:
    """nats-py on the shared server, with a stream of its own kept for the test (the
    server removes its store's directory with its last stream)."""
    with PyNats(shared_nats_server.url) as conn:
        anchor = unique_name("SPW_ANCHOR")
        conn.create_stream(anchor, StreamShape())
        try:
            yield conn
        finally:
            conn.delete_stream(anchor)


Row = tuple[str, bytes, tuple[tuple[str, tuple[str, ...]], ...] | None]

rows_st = st.lists(
    st.tuples(
        st.sampled_from(TOKENS),
        st.one_of(BYTES, TEXT.map(str.encode)),
        st.none()
        | st.lists(
            st.tuples(
                st.sampled_from(HEADER_NAMES),
                st.lists(HEADER_VALUES, min_size=1, max_size=2).map(tuple),
            ),
            min_size=1,
            max_size=2,
            unique_by=lambda kv: kv[0],
        ).map(lambda kvs: tuple(sorted(kvs))),
    ),
    min_size=1,
    max_size=10,
)


def content(m: Stored, prefix: str) -> tuple[str, bytes, Headers]:
    """A stored message without its msg id (and the ``Nats-Expected-Stream`` a write
    naming its stream sends, which the server stores), its stream's name cut off."""
    headers = tuple(
        (k, v) for k, v in (m.headers or ()) if k not in ("Nats-Msg-Id", "Nats-Expected-Stream")
    )
    return (m.subject[len(prefix) :], m.data, headers or None)


def check_stored(py: PyNats, stream: str, want: Counter[Any]) -> None:
    stored = py.snapshot(stream)
    assert len(stored) == sum(want.values()), f"{len(stored)} stored, {sum(want.values())} rows"
    got = Counter(content(m, f"{stream}.") for m in stored)
    assert got == want, (got - want, want - got)
    ids = [dict(m.headers or ()).get("Nats-Msg-Id") for m in stored]
    assert all(ids), "a message without a msg id"
    assert len(set(ids)) == len(ids), "two messages share a msg id"


@examples(3)
@given(rows=rows_st, repeat=st.integers(1, 3), partitions=st.integers(1, 3))
def test_a_batch_write_stores_every_row_once_as_nats_py_reads_it(
    spark: Any,
    py: PyNats,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    rows: list[Row],
    repeat: int,
    partitions: int,
) -> None:
    """``df.write.format("jetstream")`` of a generated frame, each row repeated alike
    ``repeat`` times and shuffled over ``partitions``: every row stored once."""
    stream = unique_name("SPW")
    py.create_stream(stream, StreamShape())
    try:
        data = [
            (f"{stream}.{t}", bytearray(d), None if h is None else dict(h))
            for t, d, h in rows * repeat
        ]
        df = spark.createDataFrame(data, SCHEMA).repartition(partitions)
        df.write.format("jetstream").mode("append").option("servers", shared_nats_server.url).save()
        want = Counter((t, d, h) for t, d, h in rows * repeat)
        check_stored(py, stream, want)
    finally:
        py.delete_stream(stream)


@examples(2)
@given(rows=rows_st)
def test_a_streaming_copy_stores_every_message_once_as_nats_py_reads_it(
    spark: Any,
    py: PyNats,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[Row],
) -> None:
    """``readStream`` of a stream nats-py filled, ``writeStream.format("jetstream")``
    into another (``availableNow``, small micro-batches): the target holds every
    message of the source once, headers and payloads byte-equal; run again from the
    checkpoint, it adds nothing."""
    url, src, dst = shared_nats_server.url, unique_name("SPS"), unique_name("SPD")
    py.create_stream(src, StreamShape())
    py.create_stream(dst, StreamShape())
    checkpoint = tmp_path_factory.mktemp("ckpt")
    try:
        for t, d, h in rows:
            headers = [(k, v) for k, vs in h for v in vs] if h else None
            py.publish_sync(f"{src}.{t}", d, headers)
        source = Counter(content(m, f"{src}.") for m in py.snapshot(src))
        copy = (
            spark.readStream.format("jetstream")
            .option("servers", url)
            .option("stream", src)
            .option("includeHeaders", "true")
            .option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", 3)
            .load()
            .withColumn("subject", F.regexp_replace("subject", f"^{src}", dst))
        )
        writer = (
            copy.writeStream.format("jetstream")
            .option("servers", url)
            .option("stream", dst)
            .option("checkpointLocation", str(Path(checkpoint) / "c"))
        )
        run_available_now(writer)
        check_stored(py, dst, source)
        run_available_now(writer)
        check_stored(py, dst, source)
    finally:
        py.delete_stream(src)
        py.delete_stream(dst)


def test_alike_rows_of_an_exploded_read_repartitioned_are_all_stored(
    spark: Any, py: PyNats, shared_nats_server: NatsServer, unique_name: UniqueName
) -> None:
    """A batch read exploded into four alike rows per message, ``repartition(4)``,
    written as a copy: all eight rows stored, or the write fails; never a success
    with rows missing."""
    url, src, dst = shared_nats_server.url, unique_name("SPX"), unique_name("SPY")
    py.create_stream(src, StreamShape())
    py.create_stream(dst, StreamShape())
    try:
        py.publish_sync(f"{src}.a", b"same")
        py.publish_sync(f"{src}.a", b"other")
        read = spark.read.format("jetstream").option("servers", url).option("stream", src).load()
        exploded = (
            read.withColumn("n", F.explode(F.array_repeat(F.lit(1), 4)))
            .drop("n")
            .withColumn("subject", F.regexp_replace("subject", f"^{src}", dst))
            .repartition(4)
        )
        try:
            exploded.write.format("jetstream").mode("append").option("servers", url).save()
        except SPARK_ERRORS:
            # Refused when it commits (the server merged alike rows of tasks apart):
            # the write is reported failed, and what it stored is of the source.
            assert {m.data for m in py.snapshot(dst)} <= {b"same", b"other"}
            return
        stored = py.snapshot(dst)
        assert sorted(m.data for m in stored) == [b"other"] * 4 + [b"same"] * 4
    finally:
        py.delete_stream(src)
        py.delete_stream(dst)
