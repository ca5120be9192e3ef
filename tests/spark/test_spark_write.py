"""df.write.format("jetstream") against a real nats-server and a local[2] session."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import jetstream_arrow as ja
from conftest_spark import (
    SPARK_ERRORS,
    error_text,
    make_stream,
    publish,
    read_df,
    spark,
    stream_table,
)
from jetstream_arrow.spark.batch_writer import JetStreamWriter
from jetstream_arrow.spark.options import parse_write_options
from jetstream_arrow.spark.writing import JetStreamCommitMessage

pytestmark = pytest.mark.spark
__all__ = ["spark"]


def _rows(spark: Any, name: str, count: int, partitions: int = 4) -> Any:
    """``count`` rows: subject <name>.<id % 4>, 128-byte payload that encodes the id."""
    return spark.range(0, count, 1, partitions).select(
        F.concat(F.lit(f"{name}."), (F.col("id") % 4).cast("string")).alias("subject"),
        F.lpad(F.col("id").cast("string"), 128, "x").cast("binary").alias("data"),
    )


def _write(df: Any, url: str, **options: Any) -> None:
    writer = df.write.format("jetstream").mode("append").option("servers", url)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def _count(url: str, name: str) -> int:
    with ja.connect(url) as client:
        return int(client.stream_info(name).state.messages)


@pytest.mark.slow
def test_round_trip_200k_rows(spark: Any, shared_nats_server: Any, unique_name: Any) -> None:
    url, name = shared_nats_server.url, unique_name("RT")
    make_stream(url, name)
    written = _rows(spark, name, 200_000)
    _write(written, url)
    assert _count(url, name) == 200_000
    back = read_df(spark, url, name, minPartitions=4)
    assert back.count() == 200_000
    mine = back.select("subject", "data")
    assert written.exceptAll(mine).count() == 0
    assert mine.exceptAll(written).count() == 0
    # Every message carries a Nats-Msg-Id, all different.
    ids = read_df(spark, url, name, includeHeaders=True).select(
        F.col("headers")["Nats-Msg-Id"][0].alias("id")
    )
    assert ids.filter(F.col("id").isNull()).count() == 0
    assert ids.distinct().count() == 200_000


def test_constant_subject_string_data_and_msg_id_column(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("C")
    make_stream(url, name)
    df = spark.range(100).select(
        F.concat(F.lit("order-"), F.col("id").cast("string")).alias("order_id"),
        F.col("id").cast("string").alias("data"),
        F.lit("ignored").alias("comment"),
    )
    _write(df, url, subject=f"{name}.orders", msgIdColumn="order_id")
    _write(df, url, subject=f"{name}.orders", msgIdColumn="order_id")  # all duplicates
    assert _count(url, name) == 100
    table = stream_table(url, name, include_headers=True)
    assert set(table.column("subject").to_pylist()) == {f"{name}.orders"}
    assert sorted(table.column("data").to_pylist(), key=int) == [
        str(i).encode() for i in range(100)
    ]
    ids = {dict(h)["Nats-Msg-Id"][0] for h in table.column("headers").to_pylist()}
    assert ids == {f"order-{i}" for i in range(100)}


def test_a_ttl_column_gives_each_row_its_own_nats_ttl(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    """A Spark interval column `ttl` is each row's `Nats-TTL`, in whole seconds; a null
    gives the row none, and a fraction of a second fails the write naming the row."""
    url, name = shared_nats_server.url, unique_name("TTL")
    make_stream(url, name, allow_msg_ttl=True)
    df = spark.range(3).selectExpr(
        f"'{name}.a' AS subject",
        "cast(id AS string) AS data",
        "CASE WHEN id = 1 THEN NULL ELSE make_dt_interval(0, 0, 0, 60 * (id + 1)) END AS ttl",
    )
    _write(df, url)
    table = stream_table(url, name, include_headers=True)
    ttls = {
        row["data"]: dict(row["headers"] or []).get("Nats-TTL")
        for row in table.select(["data", "headers"]).to_pylist()
    }
    assert ttls == {b"0": ["60s"], b"1": None, b"2": ["180s"]}
    fraction = spark.range(1).selectExpr(
        f"'{name}.a' AS subject", "'x' AS data", "make_dt_interval(0, 0, 0, 1.5) AS ttl"
    )
    with pytest.raises(SPARK_ERRORS) as excinfo:
        _write(fraction, url)
    assert "column 'ttl', row 0" in error_text(excinfo)
    assert _count(url, name) == 3


def test_headers_column_and_read_write_copy(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url = shared_nats_server.url
    src, dst = unique_name("SRC"), unique_name("DST")
    make_stream(url, src)
    make_stream(url, dst)
    df = spark.range(10).select(
        F.concat(F.lit(f"{src}.x")).alias("subject"),
        F.col("id").cast("string").cast("binary").alias("data"),
        F.create_map(F.lit("k"), F.array(F.col("id").cast("string"))).alias("headers"),
    )
    _write(df, url)
    # A read can be written straight back: only subject, data and headers are used.
    copy = (
        read_df(spark, url, src, includeHeaders=True)
        .withColumn("subject", F.regexp_replace("subject", f"^{src}", dst))
        .drop("headers")
    )
    _write(copy, url, stream=dst)
    # Partitions are written concurrently, so the stream's order is not the input's.
    table = stream_table(url, src, include_headers=True)
    data, headers = table.column("data").to_pylist(), table.column("headers").to_pylist()
    pairs = zip(data, headers, strict=True)
    assert sorted((d, dict(h)["k"]) for d, h in pairs) == sorted(
        (str(i).encode(), [str(i)]) for i in range(10)
    )
    assert sorted(stream_table(url, dst).column("data").to_pylist()) == sorted(
        str(i).encode() for i in range(10)
    )


def test_same_write_id_makes_a_rerun_a_no_op(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("W")
    make_stream(url, name)
    df = _rows(spark, name, 5_000)
    _write(df, url, writeId="nightly-2026-01-31")
    _write(df, url, writeId="nightly-2026-01-31")
    assert _count(url, name) == 5_000
    _write(df, url)  # a new write: new ids, stored again
    assert _count(url, name) == 10_000


def _fail_once_after_publishing(url: str, name: str, threshold: int) -> Any:
    """A mapInArrow step: partition 0's first attempt waits until ``threshold``
    messages are in the stream (so the write task downstream has published part of
    its rows), then fails. Every other attempt passes rows through."""

    def step(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        failing = ctx.partitionId() == 0 and ctx.attemptNumber() == 0
        for i, batch in enumerate(batches):
            yield batch
            if failing and i == 2:
                deadline = time.monotonic() + 60
                with ja.connect(url) as client:
                    while client.stream_info(name).state.messages < threshold:
                        if time.monotonic() > deadline:
                            raise AssertionError("the write task published nothing")
                        time.sleep(0.05)
                raise RuntimeError("injected failure after a partial publish")

    return step


@pytest.mark.slow
@pytest.mark.parametrize("publish_mode", ["acked", "fast", "atomic"])
def test_retried_task_stores_every_row_exactly_once(
    spark: Any, shared_nats_server: Any, unique_name: Any, publish_mode: str
) -> None:
    # In fast mode the failed task's open batch is not resent within it: the retry
    # sends the same ids and the server keeps what it already had. In atomic mode the
    # retry's batches that the first attempt stored are found to be duplicates.
    url, name = shared_nats_server.url, unique_name("X")
    make_stream(
        url, name, allow_batched=publish_mode == "fast", allow_atomic=publish_mode == "atomic"
    )
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, "500")
    try:
        df = _rows(spark, name, 20_000, partitions=2)
        # Partition 1 alone stores at most 10_000: more means partition 0 published too.
        flaky = df.mapInArrow(_fail_once_after_publishing(url, name, 10_500), df.schema)
        # Atomic batches of 100: partition 0's batches are whole (and stored) before
        # its input stops.
        sizes = {"atomicBatchRows": 100} if publish_mode == "atomic" else {}
        _write(flaky, url, publishMode=publish_mode, **sizes)
    finally:
        spark.conf.set(key, old)
    table = stream_table(url, name)
    assert table.num_rows == 20_000
    expected = {str(i).rjust(128, "x").encode() for i in range(20_000)}
    assert set(table.column("data").to_pylist()) == expected


@pytest.mark.slow
def test_increments_written_through_a_task_retry_sum_as_group_by_does(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    """A DataFrame of counter increments (subject, increment; no data) whose task fails
    after publishing part of its rows: the retry sends the same msg ids, the server
    counts each increment once, and the counters equal groupBy(subject).sum()."""
    url, name = shared_nats_server.url, unique_name("CTR")
    make_stream(url, name, allow_msg_counter=True)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, "500")
    try:
        df = spark.range(0, 8_000, 1, 2).select(
            F.concat(F.lit(f"{name}."), (F.col("id") % 7).cast("string")).alias("subject"),
            ((F.col("id") % 13) - 5).cast("long").alias("increment"),
        )
        # Partition 1 alone stores at most 4_000: more means partition 0 published too.
        flaky = df.mapInArrow(_fail_once_after_publishing(url, name, 4_300), df.schema)
        _write(flaky, url, stream=name)  # named, as a user names the stream
    finally:
        spark.conf.set(key, old)
    expected = {
        row["subject"]: row["total"]
        for row in df.groupBy("subject").agg(F.sum("increment").alias("total")).collect()
    }
    with ja.connect(url) as client:
        counters = client.read_counters(name)
        assert client.stream_info(name).state.messages == 8_000
    got = {
        s: int(v)
        for s, v in zip(counters["subject"].to_pylist(), counters["value"].to_pylist(), strict=True)
    }
    assert got == expected


def test_a_dataframe_with_schedule_columns_fires_each_row_to_its_target(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    """A timestamp column `schedule` with `schedule_target`: each row stored as a
    schedule (`@at` its instant) that the server fires to the target."""
    url, name = shared_nats_server.url, unique_name("SCW")
    make_stream(url, name, allow_msg_schedules=True)
    df = spark.range(0, 20, 1, 2).select(
        F.concat(F.lit(f"{name}.sched."), F.col("id").cast("string")).alias("subject"),
        F.col("id").cast("string").alias("data"),
        (F.current_timestamp() + F.expr("INTERVAL 3 SECONDS")).alias("schedule"),
        F.lit(f"{name}.fired").alias("schedule_target"),
    )
    _write(df, url)
    with ja.connect(url) as client:

        def fired() -> list[bytes]:
            table = client.read(name, subjects=[f"{name}.fired"]).read_all()
            return sorted(table.column("data").to_pylist())

        deadline = time.monotonic() + 20
        while len(fired()) < 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert fired() == sorted(str(i).encode() for i in range(20))


def test_fast_publish_mode_stores_every_row_once_and_a_rerun_nothing(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("FW")
    make_stream(url, name, allow_batched=True)
    df = _rows(spark, name, 30_000, partitions=3)
    _write(df, url, publishMode="fast", writeId="fast-1")
    _write(df, url, publishMode="fast", writeId="fast-1")
    table = stream_table(url, name, include_headers=True)
    assert table.num_rows == 30_000
    ids = [h["Nats-Msg-Id"][0] for h in map(dict, table.column("headers").to_pylist())]
    assert len(set(ids)) == 30_000
    # A task's rows go out as one fast batch each: in order within the partition.
    row_ids = [int(d.lstrip(b"x")) for d in table.column("data").to_pylist()]
    for partition in range(3):
        mine = [i for i in row_ids if i * 3 // 30_000 == partition]
        assert mine == sorted(mine) and len(mine) == 10_000


def test_atomic_publish_mode_stores_whole_batches_of_each_task_and_a_rerun_nothing(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("AW")
    make_stream(url, name, allow_atomic=True)
    df = _rows(spark, name, 3_000, partitions=2)
    options = {"publishMode": "atomic", "atomicBatchRows": 400, "writeId": "atomic-1"}
    _write(df, url, **options)
    _write(df, url, **options)
    table = stream_table(url, name, include_headers=True)
    assert table.num_rows == 3_000
    headers = [dict(h) for h in table.column("headers").to_pylist()]
    assert len({h["Nats-Msg-Id"][0] for h in headers}) == 3_000
    # Each task's 1,500 rows in batches of 400, 400, 400, 300, all of one task.
    batches: dict[str, list[str]] = {}
    for h in headers:
        batches.setdefault(h["Nats-Batch-Id"][0], []).append(h["Nats-Msg-Id"][0])
    assert sorted(len(ids) for ids in batches.values()) == [300, 300] + [400] * 6
    for ids in batches.values():
        assert len({i.rsplit("-", 1)[0] for i in ids}) == 1, "a batch spans two tasks"


def test_per_row_expectations_store_the_rows_whose_checks_pass_and_name_a_conflict(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("EW")
    make_stream(url, name)
    schema = "subject string, data string, expected_last_subject_seq long"
    first = spark.createDataFrame([(f"{name}.a", "a1", 0), (f"{name}.b", "b1", 0)], schema)
    _write(first.coalesce(1), url)
    assert _count(url, name) == 2
    # b moved on to 2: its update expecting 0 conflicts, and the write fails naming it.
    stale = spark.createDataFrame([(f"{name}.a", "a2", 1), (f"{name}.b", "b2", 0)], schema)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        _write(stale.coalesce(1), url)
    assert "conflict: expected last subject sequence 0" in error_text(excinfo)
    data = stream_table(url, name).column("data").to_pylist()
    assert data == [b"a1", b"b1", b"a2"]


def test_a_dataframe_written_into_a_kv_bucket_is_what_a_kv_client_reads(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, bucket = shared_nats_server.url, unique_name("sparkkv")
    with ja.connect(url) as client:
        # The stream a KV client makes for a bucket: KV_<bucket> on $KV.<bucket>.>.
        client.create_stream(f"KV_{bucket}", [f"$KV.{bucket}.>"], max_msgs_per_subject=5)
    rows = [(f"device.{i}", f"v{i}") for i in range(40)]
    _write(spark.createDataFrame(rows, "key string, value string").repartition(2), url, kv=bucket)
    table = stream_table(url, f"KV_{bucket}")
    assert sorted(table.column("subject").to_pylist()) == sorted(
        f"$KV.{bucket}.{k}" for k, _ in rows
    )
    # A compare-and-set of device.0 at a revision it is not at fails the job naming it.
    revision = dict(
        zip(table.column("subject").to_pylist(), table.column("seq").to_pylist(), strict=True)
    )
    cas = spark.createDataFrame(
        [("device.1", "w1", revision[f"$KV.{bucket}.device.1"]), ("device.0", "w0", 999)],
        "key string, value string, expected_revision long",
    )
    with pytest.raises(SPARK_ERRORS) as excinfo:
        _write(cas.coalesce(1), url, kv=bucket)
    assert "conflict: expected last subject sequence 999" in error_text(excinfo)
    # The row whose check passed was stored once, through the task's retries.
    after = stream_table(url, f"KV_{bucket}")
    assert after.num_rows == 41
    assert after.column("data").to_pylist()[-1] == b"w1"


def test_fast_publish_mode_into_a_stream_without_allow_batched_fails_storing_nothing(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("FN")
    make_stream(url, name)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        _write(_rows(spark, name, 100, partitions=1), url, publishMode="fast")
    assert "allow_batched" in error_text(excinfo)
    assert _count(url, name) == 0


def test_overwrite_is_refused(spark: Any, shared_nats_server: Any, unique_name: Any) -> None:
    url, name = shared_nats_server.url, unique_name("O")
    make_stream(url, name)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        _rows(spark, name, 10).write.format("jetstream").mode("overwrite").option(
            "servers", url
        ).save()
    text = error_text(excinfo)
    assert "overwrite" in text and "not a table" in text
    assert _count(url, name) == 0


@pytest.mark.parametrize(
    ("columns", "options", "named"),
    [
        (["cast(id as string) as data"], {}, "'subject'"),
        (["'s.x' as subject", "id as data"], {}, "'data'"),
        (["'s.x' as subject"], {}, "'data'"),
        (["'s.x' as subject", "'d' as data", "id as headers"], {}, "'headers'"),
        (["'s.x' as subject", "'d' as data"], {"msgIdColumn": "nope"}, "'msgIdColumn'"),
        (["'s.x' as subject", "'d' as data", "id as key"], {"msgIdColumn": "key"}, "'key'"),
        (["'s.x' as subject", "'d' as data"], {"ackTimeout": "soon"}, "'ackTimeout'"),
        # The core judges the types at planning, naming the column as the DataFrame does.
        (["id as Subject", "'d' as data"], {}, "column 'Subject' must be utf8"),
        (
            ["'s.x' as subject", "'d' as data", "'7' as expected_last_subject_seq"],
            {},
            "column 'expected_last_subject_seq' must be an integer",
        ),
        (["'d' as data"], {"subject": "s.*"}, "option 'subject'"),
    ],
)
def test_wrong_columns_and_options_are_named(
    spark: Any, shared_nats_server: Any, columns: list[str], options: dict[str, str], named: str
) -> None:
    df = spark.range(3).selectExpr(*columns)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        _write(df, shared_nats_server.url, **options)
    assert named in error_text(excinfo)


def test_expected_stream_mismatch_fails(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name, another = shared_nats_server.url, unique_name("ES"), unique_name("ANOTHER")
    make_stream(url, name)
    make_stream(url, another)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        _write(_rows(spark, name, 10, partitions=1), url, expectedStream=another, maxRetries=0)
    text = error_text(excinfo)
    assert "expected stream does not match" in text
    # The server's words name neither stream; the error names the one expected.
    assert f"expects every row in stream {another!r}" in text
    assert _count(url, name) == 0
    _write(_rows(spark, name, 10, partitions=1), url, stream=name)
    assert _count(url, name) == 10


def test_commit_and_abort_reports(caplog: pytest.LogCaptureFixture) -> None:
    from jetstream_arrow.spark.columns import PublishColumns

    writer = JetStreamWriter(
        parse_write_options({"writeId": "w1", "password": "pw-SECRET", "user": "u"}),
        PublishColumns(subject="subject", data="data", headers=None, msg_id=None),
    )
    done = [
        JetStreamCommitMessage(0, 0, 100, 100, 0, 1, 100),
        JetStreamCommitMessage(1, 1, 50, 20, 30, 101, 150),
    ]
    with caplog.at_level(logging.INFO, logger="jetstream_arrow.spark"):
        writer.commit(done)
        writer.abort([done[0], None])
    commit, abort = (r.getMessage() for r in caplog.records)
    assert "write w1 committed" in commit
    assert "150 rows: 120 stored, 30 duplicates, sequences 1..150" in commit
    assert "1 of 2 task(s)" in abort and "100 stored" in abort
    assert "writeId=w1" in abort and "may have stored part" in abort
    assert "SECRET" not in commit + abort


def test_a_copy_leaves_out_the_control_headers_of_the_messages_it_copies(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    """Source messages stored with ``Nats-TTL`` and ``Nats-Rollup``: a copy that keeps
    the read's columns is recognised (its ``stream`` and ``seq``), and what steered
    the source steers nothing in the target (which allows neither: with the headers
    sent, every attempt failed with "per-message TTL is disabled")."""
    url = shared_nats_server.url
    src, dst = unique_name("SRC"), unique_name("DST")
    make_stream(url, src, allow_msg_ttl=True, allow_rollup=True)
    make_stream(url, dst)
    control = pa.map_(pa.utf8(), pa.list_(pa.utf8()))
    with ja.connect(url) as client:
        client.publish(
            pa.table(
                {
                    "subject": [f"{src}.t{i}" for i in range(20)],
                    "data": [f"m{i}".encode() for i in range(20)],
                    "headers": pa.array(
                        [[("Nats-TTL", ["1h"]), ("app", [str(i)])] for i in range(19)]
                        + [[("Nats-Rollup", ["sub"]), ("app", ["19"])]],
                        control,
                    ),
                }
            )
        )
    copy = read_df(spark, url, src, includeHeaders=True).withColumn(
        "subject", F.regexp_replace("subject", f"^{src}", dst)
    )
    _write(copy, url, stream=dst)
    stored = stream_table(url, dst, include_headers=True)
    assert sorted(stored.column("data").to_pylist()) == sorted(f"m{i}".encode() for i in range(20))
    for headers in stored.column("headers").to_pylist():
        names = {k for k, _ in headers}
        assert "app" in names and not names & {"Nats-TTL", "Nats-Rollup"}, headers


@pytest.mark.timeout(300)
def test_a_rerun_copy_after_deletions_upstream_copies_each_message_once(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    """A copy's ids are its source messages' (``<writeId>-<stream>:<seq>``), not
    positions: the source loses a message from the middle and receives 50 more, and
    the same job run again (same writeId) stores exactly the 50 new ones, the one
    that moved into the deleted message's place included."""
    url = shared_nats_server.url
    src, dst = unique_name("SRC"), unique_name("DST")
    make_stream(url, src)
    make_stream(url, dst)
    publish(url, src, 150)

    def copy() -> None:
        df = read_df(spark, url, src, minPartitions=3).withColumn(
            "subject", F.regexp_replace("subject", f"^{src}", dst)
        )
        _write(df, url, stream=dst, writeId="copy-w")

    copy()
    assert _count(url, dst) == 150
    with ja.connect(url) as client:
        client.delete_message(src, 120)
    publish(url, src, 50, start=150)
    copy()
    data = stream_table(url, dst).column("data").to_pylist()
    assert len(data) == 200
    assert sorted(data) == sorted(f"m{i}".encode() for i in range(200))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_copy_whose_task_fails_after_publishing_stores_each_source_message_once(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    """A copy of a stream with a history (interior deletes) whose task fails after
    part of its rows were stored: the retry finds every stored message by its source
    identity, and the target ends with each source message once."""
    url = shared_nats_server.url
    src, dst = unique_name("SRC"), unique_name("DST")
    make_stream(url, src)
    make_stream(url, dst)
    publish(url, src, 3_000)
    with ja.connect(url) as client:
        for seq in range(7, 3_000, 97):
            client.delete_message(src, seq)
        left = client.stream_info(src).state.messages
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, "300")
    try:
        copy = read_df(spark, url, src, minPartitions=2).withColumn(
            "subject", F.regexp_replace("subject", f"^{src}", dst)
        )
        # Partition 1 alone stores about half: more means partition 0 published too.
        flaky = copy.mapInArrow(_fail_once_after_publishing(url, dst, left // 2 + 300), copy.schema)
        _write(flaky, url, stream=dst, writeId="copy-retried")
    finally:
        spark.conf.set(key, old)
    source = stream_table(url, src)
    target = stream_table(url, dst, include_headers=True)
    assert target.num_rows == left
    assert sorted(target.column("data").to_pylist()) == sorted(source.column("data").to_pylist())
    # <writeId>-<stream>:<seq>:<digest of subject and payload>
    ids = [dict(h)["Nats-Msg-Id"][0] for h in target.column("headers").to_pylist()]
    assert sorted(i.rsplit(":", 1)[0] for i in ids) == sorted(
        f"copy-retried-{src}:{s}" for s in source.column("seq").to_pylist()
    )
