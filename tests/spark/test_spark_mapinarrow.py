"""jetstream_arrow.spark.publish_fn / read_fn with df.mapInArrow."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F

import jetstream_arrow as ja
from conftest_spark import SPARK_ERRORS, error_text, make_stream, publish, spark, stream_table
from jetstream_arrow.spark import ACK_SCHEMA, message_schema, publish_fn, read_fn

pytestmark = pytest.mark.spark
__all__ = ["spark"]


def test_publish_fn_yields_an_ack_per_row(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("PF")
    make_stream(url, name)
    df = spark.range(0, 3000, 1, 3).select(
        F.concat(F.lit(f"{name}."), (F.col("id") % 3).cast("string")).alias("subject"),
        F.col("id").cast("string").alias("data"),
    )
    acks = df.mapInArrow(publish_fn(servers=url), ACK_SCHEMA).collect()
    assert len(acks) == 3000
    assert all(a.error is None and a.duplicate is False for a in acks)
    assert sorted(a.seq for a in acks) == list(range(1, 3001))
    assert stream_table(url, name).num_rows == 3000

    # Rows a subject the stream does not take fail row by row, in the acks.
    bad = spark.range(2).select(
        F.lit("nobody.listens.here").alias("subject"), F.lit("x").alias("data")
    )
    failed = bad.mapInArrow(publish_fn(servers=url, max_retries=0, ack_timeout=1), ACK_SCHEMA)
    rows = failed.collect()
    assert len(rows) == 2 and all(r.error and r.seq is None for r in rows)


def test_publish_fn_with_write_id_is_idempotent(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("PI")
    make_stream(url, name)
    df = spark.range(0, 100, 1, 2).select(
        F.lit(f"{name}.x").alias("subject"), F.col("id").cast("string").alias("data")
    )
    fn = publish_fn(servers=url, write_id="load-1")
    first = df.mapInArrow(fn, ACK_SCHEMA).collect()
    again = df.mapInArrow(fn, ACK_SCHEMA).collect()
    assert not any(a.duplicate for a in first)
    assert all(a.duplicate for a in again)
    assert sorted(a.seq for a in again) == sorted(a.seq for a in first)
    assert stream_table(url, name).num_rows == 100


def test_read_fn_reads_ranges(spark: Any, shared_nats_server: Any, unique_name: Any) -> None:
    url, name = shared_nats_server.url, unique_name("RF")
    make_stream(url, name)
    publish(url, name, 200)
    ranges = spark.createDataFrame(
        [(name, 1, 50), (name, 51, 120), (name, 181, None)],
        "stream string, start_seq bigint, end_seq bigint",
    ).repartition(2)
    df = ranges.mapInArrow(read_fn(servers=url), message_schema())
    seqs = sorted(r.seq for r in df.select("seq").collect())
    assert seqs == list(range(1, 121)) + list(range(181, 201))
    one = spark.createDataFrame([(1, 10)], "start_seq bigint, end_seq bigint")
    with_headers = one.mapInArrow(
        read_fn(servers=url, stream=name, include_headers=True, subjects=f"{name}.a"),
        message_schema(include_headers=True),
    ).collect()
    assert [r.seq for r in with_headers] == [1, 3, 5, 7, 9]
    assert all(r.subject == f"{name}.a" for r in with_headers)


def test_read_fn_fail_on_data_loss(spark: Any, shared_nats_server: Any, unique_name: Any) -> None:
    url, name = shared_nats_server.url, unique_name("RL")
    make_stream(url, name)
    publish(url, name, 100)
    with ja.connect(url) as client:
        client.purge_stream(name, up_to_seq=41)  # removes 1..40
    ranges = spark.createDataFrame(
        [(name, 1, 60)], "stream string, start_seq bigint, end_seq bigint"
    )
    with pytest.raises(SPARK_ERRORS) as excinfo:
        ranges.mapInArrow(read_fn(servers=url), message_schema()).collect()
    assert "1..40" in error_text(excinfo) and "failOnDataLoss" in error_text(excinfo)
    rows = ranges.mapInArrow(
        read_fn(servers=url, fail_on_data_loss=False), message_schema()
    ).collect()
    assert sorted(r.seq for r in rows) == list(range(41, 61))


def test_read_fn_names_missing_columns(spark: Any, shared_nats_server: Any) -> None:
    df = spark.createDataFrame([(1,)], "start_seq bigint")
    with pytest.raises(SPARK_ERRORS) as excinfo:
        df.mapInArrow(read_fn(servers=shared_nats_server.url), message_schema()).collect()
    assert "'end_seq'" in error_text(excinfo)
