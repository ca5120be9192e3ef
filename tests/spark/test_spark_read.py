"""spark.read.format("jetstream") against a real nats-server and a local[2] session."""

from __future__ import annotations

import time
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
    pushdown,
    read_df,
    spark,
    stream_table,
)
from jetstream_arrow.spark import message_schema, register
from jetstream_arrow.spark.columns import arrow_schema
from jetstream_arrow.spark.options import parse_read_options
from jetstream_arrow.spark.reading import DataLossError, read_range

pytestmark = pytest.mark.spark
__all__ = ["pushdown", "spark"]  # fixtures, imported for pytest


def test_format_is_registered_automatically_and_reads_everything(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("R")
    make_stream(url, name)
    publish(url, name, 1000)
    # No register() call: Spark found pyspark_jetstream.DefaultSource by itself.
    df = read_df(spark, url, name)
    assert df.schema == message_schema()
    rows = df.orderBy("seq").collect()
    assert [r.seq for r in rows] == list(range(1, 1001))
    assert rows[0].stream == name
    assert rows[0].subject == f"{name}.a" and rows[1].subject == f"{name}.b"
    assert rows[41].data == b"m41"
    assert rows[0].timestamp.year >= 2024


def test_register_explicitly_and_read_empty_stream(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    register(spark)
    url, name = shared_nats_server.url, unique_name("E")
    make_stream(url, name)
    assert read_df(spark, url, name).count() == 0
    assert read_df(spark, url, name, startingSequence=5).count() == 0


def test_subject_filtered_read(spark: Any, shared_nats_server: Any, unique_name: Any) -> None:
    url, name = shared_nats_server.url, unique_name("F")
    make_stream(url, name)
    publish(url, name, 300, subjects=("a", "b", "c"))
    df = read_df(spark, url, name, subjects=f"{name}.a")
    assert df.count() == 100
    assert {r.subject for r in df.select("subject").distinct().collect()} == {f"{name}.a"}
    both = read_df(spark, url, name, subjects=f"{name}.a, {name}.c", minPartitions=3)
    assert both.count() == 200
    assert both.filter(F.col("subject") == f"{name}.b").count() == 0


def test_sequence_range(spark: Any, shared_nats_server: Any, unique_name: Any) -> None:
    url, name = shared_nats_server.url, unique_name("Q")
    make_stream(url, name)
    publish(url, name, 500)
    df = read_df(spark, url, name, startingSequence=100, endingSequence=199, minPartitions=3)
    seqs = sorted(r.seq for r in df.select("seq").collect())
    assert seqs == list(range(100, 200))
    # An ending sequence past the end reads what there is when the query is planned.
    assert read_df(spark, url, name, startingSequence=451, endingSequence=10**6).count() == 50


def test_time_range(spark: Any, shared_nats_server: Any, unique_name: Any) -> None:
    url, name = shared_nats_server.url, unique_name("T")
    make_stream(url, name)
    publish(url, name, 100)
    time.sleep(0.05)
    publish(url, name, 50, start=100)
    table = stream_table(url, name)
    boundary = table.column("timestamp")[100].as_py()  # first message of the second batch
    iso = boundary.isoformat()
    later = read_df(spark, url, name, startingTime=iso)
    assert sorted(r.seq for r in later.select("seq").collect()) == list(range(101, 151))
    earlier = read_df(spark, url, name, endingTime=iso)
    assert sorted(r.seq for r in earlier.select("seq").collect()) == list(range(1, 101))
    epoch = str(boundary.timestamp())
    assert read_df(spark, url, name, startingTime=epoch).count() == 50
    assert read_df(spark, url, name, startingTime="2999-01-01T00:00:00Z").count() == 0


def test_min_partitions_and_max_messages_per_partition(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("P")
    make_stream(url, name)
    publish(url, name, 1000)
    df = read_df(spark, url, name, minPartitions=7)
    assert df.rdd.getNumPartitions() == 7
    assert df.count() == 1000
    assert df.select("seq").distinct().count() == 1000
    assert read_df(spark, url, name, maxMessagesPerPartition=100).rdd.getNumPartitions() == 10
    assert read_df(spark, url, name).rdd.getNumPartitions() == 1


def test_include_headers(spark: Any, shared_nats_server: Any, unique_name: Any) -> None:
    url, name = shared_nats_server.url, unique_name("H")
    make_stream(url, name)
    headers = pa.array(
        [[("k", ["v1", "v2"])], None, [("x", ["y"])]],
        pa.map_(pa.utf8(), pa.list_(pa.utf8())),
    )
    table = pa.table({"subject": [f"{name}.a"] * 3, "data": [b"1", b"2", b"3"], "headers": headers})
    with ja.connect(url) as client:
        client.publish(table)
    df = read_df(spark, url, name, includeHeaders=True)
    assert df.schema == message_schema(include_headers=True)
    rows = df.orderBy("seq").collect()
    assert rows[0].headers == {"k": ["v1", "v2"]}
    assert rows[2].headers == {"x": ["y"]}
    assert not rows[1].headers


def _counts_by_filter(df: Any, name: str, boundary: Any) -> dict[str, int]:
    return {
        "seq_range": df.filter("seq >= 101 AND seq <= 200").count(),
        "seq_gt_lt": df.filter((F.col("seq") > 100) & (F.col("seq") < 106)).count(),
        "seq_eq": df.filter(F.col("seq") == 7).count(),
        "seq_in": df.filter(F.col("seq").isin(3, 5, 900)).count(),
        "subject_eq": df.filter(F.col("subject") == f"{name}.a").count(),
        "subject_in": df.filter(F.col("subject").isin(f"{name}.a", f"{name}.c")).count(),
        "subject_prefix": df.filter(F.col("subject").startswith(f"{name}.")).count(),
        "subject_and": df.filter(
            (F.col("subject") == f"{name}.a") & (F.col("subject") == f"{name}.b")
        ).count(),
        "time_ge": df.filter(F.col("timestamp") >= F.lit(boundary)).count(),
        "time_lt": df.filter(F.col("timestamp") < F.lit(boundary)).count(),
        "mixed": df.filter(
            (F.col("seq") <= 300) & (F.col("subject") == f"{name}.b") & (F.col("data") != b"m1")
        ).count(),
    }


def test_filters_give_the_same_results_with_and_without_pushdown(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("D")
    make_stream(url, name)
    publish(url, name, 400, subjects=("a", "b"))
    time.sleep(0.05)
    publish(url, name, 100, subjects=("c",), start=400)
    boundary = stream_table(url, name).column("timestamp")[400].as_py()
    expected = {
        "seq_range": 100,
        "seq_gt_lt": 5,
        "seq_eq": 1,
        "seq_in": 2,
        "subject_eq": 200,
        "subject_in": 300,
        "subject_prefix": 500,
        "subject_and": 0,
        "time_ge": 100,
        "time_lt": 400,
        "mixed": 149,
    }
    df = read_df(spark, url, name, maxMessagesPerPartition=100)
    assert _counts_by_filter(df, name, boundary) == expected
    # Without pushdown Spark filters a full scan.
    assert df.filter("seq >= 101 AND seq <= 200").rdd.getNumPartitions() == 5

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = read_df(spark, url, name, maxMessagesPerPartition=100)
        assert _counts_by_filter(df, name, boundary) == expected
        # With pushdown the read itself is narrowed to the sequences asked for.
        assert df.filter("seq >= 101 AND seq <= 200").rdd.getNumPartitions() == 1
        assert df.filter("seq > 450").rdd.getNumPartitions() == 1
        assert df.filter(F.col("timestamp") >= F.lit(boundary)).rdd.getNumPartitions() == 1
        plan = df.filter("seq >= 101")._jdf.queryExecution().optimizedPlan().toString()
        assert "seq" not in plan.split("RelationV2")[0]  # no Filter left above the scan
        # With option subjects given, subject predicates stay with Spark.
        opt = read_df(spark, url, name, subjects=f"{name}.a,{name}.b")
        assert opt.filter(F.col("subject") == f"{name}.a").count() == 200
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


def test_fail_on_data_loss_after_purge(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("L")
    make_stream(url, name)
    publish(url, name, 100)
    with ja.connect(url) as client:
        client.purge_stream(name, keep=30)  # sequences 1..70 are gone
    with pytest.raises(SPARK_ERRORS) as excinfo:
        read_df(spark, url, name, startingSequence=1).count()
    text = error_text(excinfo)
    assert "failOnDataLoss" in text
    assert "1..70" in text
    df = read_df(spark, url, name, startingSequence=1, failOnDataLoss=False)
    assert sorted(r.seq for r in df.select("seq").collect()) == list(range(71, 101))
    # From the stream's start (no starting sequence asked for) nothing is lost.
    assert read_df(spark, url, name).count() == 30
    # A range entirely inside what is left is fine either way.
    assert read_df(spark, url, name, startingSequence=71).count() == 30

    with ja.connect(url) as client:
        client.purge_stream(name)
    publish(url, name, 10, start=100)  # sequences 101..110
    with pytest.raises(SPARK_ERRORS) as excinfo:
        read_df(spark, url, name, startingSequence=90).count()
    assert "90..100" in error_text(excinfo)
    assert read_df(spark, url, name, startingSequence=90, failOnDataLoss="false").count() == 10


def _read_into(seqs: list[int], batches: Any) -> None:
    for batch in batches:
        seqs += batch.column("seq").to_pylist()


@pytest.mark.parametrize("allow_direct", [False, True])
def test_messages_removed_while_a_partition_is_read_fail_it(
    shared_nats_server: Any, unique_name: Any, allow_direct: bool
) -> None:
    """A partition's read (as an executor runs it, without Spark) that the stream's
    head overtakes: the messages it had not read yet are named, not skipped. The
    stream allows direct gets or not, so both of the engine's ways of reading a
    short range are covered."""
    url, name = shared_nats_server.url, unique_name("LR")
    make_stream(url, name, allow_direct=allow_direct)
    # More than the engine reads ahead of a paused consumer read (1,024 messages and more).
    publish(url, name, 5_000)
    opts = parse_read_options({"servers": url, "stream": name, "batchRows": 100})
    target = arrow_schema(message_schema())
    with ja.connect(url) as client:
        # A message deleted before the read is skipped, as Kafka skips compacted offsets.
        client.delete_message(name, 3)
        whole = read_range(client, opts, name, 1, 5_000, None, target)
        assert [s for b in whole for s in b.column("seq").to_pylist()] == [1, 2, *range(4, 5_001)]

        batches = read_range(client, opts, name, 1, 5_000, None, target)
        read = next(batches).column("seq").to_pylist()
        # Sequences 1..4000 go (a purge, or the stream's limits) while the read is paused.
        client.purge_stream(name, up_to_seq=4_001)
        with pytest.raises(DataLossError) as excinfo:
            _read_into(read, batches)
    err = excinfo.value
    # What the engine had read ahead before the purge is read (without a hole), the
    # rest named: nothing is skipped silently.
    assert read == [1, 2, *range(4, read[-1] + 1)]
    assert read[-1] < err.first < 3_500 and err.last == 4_000
    assert f"{err.first}..4000" in str(err) and "failOnDataLoss" in str(err)


def test_bad_options_name_the_option(spark: Any, shared_nats_server: Any, unique_name: Any) -> None:
    url = shared_nats_server.url
    with pytest.raises(SPARK_ERRORS) as excinfo:
        spark.read.format("jetstream").option("servers", url).load().count()
    assert "'stream'" in error_text(excinfo)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        read_df(spark, url, unique_name("MISSING")).count()
    text = error_text(excinfo)
    assert "'stream'" in text and "no stream" in text
    name = unique_name("B")
    make_stream(url, name)
    for option, value in (
        ("startingSequence", "first"),
        ("endingSequence", "-4"),
        ("minPartitions", "0"),
        ("failOnDataLoss", "sometimes"),
        ("startingSequnce", "1"),
    ):
        with pytest.raises(SPARK_ERRORS) as excinfo:
            read_df(spark, url, name, **{option: value}).count()
        # Spark hands options over with lower-cased names.
        assert f"'{option.lower()}'" in error_text(excinfo).lower(), option
    with pytest.raises(SPARK_ERRORS) as excinfo:
        spark.read.format("jetstream").schema("x int").option("servers", url).option(
            "stream", name
        ).load().count()
    assert "schema" in error_text(excinfo)


def test_secrets_stay_out_of_errors_and_explain(
    spark: Any, nats_server_factory: Any, unique_name: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server = nats_server_factory("authorization { user: alice, password: right-SECRET-pw }")
    name = unique_name("S")
    with ja.connect(server.url, user="alice", password="right-SECRET-pw") as client:
        client.create_stream(name, subjects=[f"{name}.>"])
        client.publish(pa.table({"subject": [f"{name}.a"], "data": [b"x"]}))
    df = read_df(spark, server.url, name, user="alice", password="right-SECRET-pw")
    assert df.count() == 1
    df.filter("seq > 0").explain(True)
    df.explain("formatted")
    assert "SECRET" not in capsys.readouterr().out
    with pytest.raises(SPARK_ERRORS) as excinfo:
        read_df(spark, server.url, name, user="alice", password="wrong-SECRET-pw").count()
    text = error_text(excinfo)
    assert "SECRET" not in text
    with pytest.raises(SPARK_ERRORS) as excinfo:
        read_df(
            spark, server.url, name, token="tok-SECRET", nkeySeed="SUA-SECRET", bogus="1"
        ).count()
    text = error_text(excinfo)
    assert "'bogus'" in text and "SECRET" not in text


def test_the_latest_message_per_subject_and_a_kv_bucket_read_as_tables(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("LP")
    make_stream(url, name, allow_direct=True)
    # 30 messages on <name>.a and <name>.b in turn: the last of each are 29 and 30.
    publish(url, name, 30)
    latest = read_df(spark, url, name, lastPerSubject="true")
    assert sorted((r.subject, r.seq) for r in latest.collect()) == [
        (f"{name}.a", 29),
        (f"{name}.b", 30),
    ]
    as_of = read_df(spark, url, name, lastPerSubject="true", asOfSequence=10)
    assert sorted(r.seq for r in as_of.collect()) == [9, 10]
    # A filter applies to the latest messages, not to which are the latest.
    assert latest.filter(F.col("seq") < 30).count() == 1

    bucket = unique_name("sk").lower()
    with ja.connect(url) as client:
        client.create_stream(f"KV_{bucket}", [f"$KV.{bucket}.>"])  # no direct gets
        client.write_kv(
            bucket,
            pa.table(
                {
                    "key": ["x", "y", "x", "z"],
                    "value": [b"1", b"2", b"3", None],
                    "operation": ["PUT", "PUT", "PUT", "DEL"],
                }
            ),
        )
    entries = spark.read.format("jetstream").option("servers", url).option("kv", bucket).load()
    assert entries.columns == ["key", "value", "revision", "operation", "created"]
    assert sorted((r.key, r.value, r.revision) for r in entries.collect()) == [
        ("x", b"3", 3),
        ("y", b"2", 2),
    ]


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "consumer"])
def test_a_read_of_an_interest_stream_leaves_its_messages_to_their_consumers(
    spark: Any, shared_nats_server: Any, unique_name: Any, direct: bool
) -> None:
    """On a stream with interest retention a message stays until every consumer with
    interest acknowledged it. A batch read (by direct gets, or by a consumer of its
    own where the stream allows none) gives every message and takes none away from
    the stream's durable consumer."""
    url, name = shared_nats_server.url, unique_name("INT")
    make_stream(url, name, retention="interest", allow_direct=direct)
    with ja.connect(url) as client:
        client.create_consumer(name, durable_name="app", ack_policy="explicit")
    publish(url, name, 300)
    rows = read_df(spark, url, name, minPartitions=3).select("seq", "data").collect()
    assert sorted((r.seq, r.data) for r in rows) == [(i + 1, f"m{i}".encode()) for i in range(300)]
    with ja.connect(url) as client:
        assert client.stream_info(name).state.messages == 300
        info = client.consumer_info(name, "app")
        assert (info.num_pending, info.num_ack_pending) == (300, 0)
