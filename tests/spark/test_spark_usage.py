"""What a user of format("jetstream") is told: the path given to save() and load(), a
write into a stream that does not exist, an option named as in Spark's Kafka source
or misspelt, and the set-up check ``python -m jetstream_arrow.spark``."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from pyspark.sql import functions as F

from conftest_spark import SPARK_ERRORS, error_text, make_stream, publish, spark, stream_table
from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.spark.options import parse_read_options, parse_write_options

pytestmark = pytest.mark.spark
__all__ = ["spark"]


def _rows(spark: Any, name: str, count: int) -> Any:
    return spark.range(0, count, 1, 1).select(
        F.concat(F.lit(f"{name}."), F.lit("a")).alias("subject"),
        F.col("id").cast("string").alias("data"),
    )


def test_the_path_of_save_and_load_names_the_stream(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name, other = shared_nats_server.url, unique_name("P"), unique_name("PO")
    make_stream(url, name)
    make_stream(url, other)
    writer = _rows(spark, other, 5).write.format("jetstream").mode("append").option("servers", url)
    # The path is the stream every row must be stored in, checked before any task runs.
    missing = unique_name("PM")
    with pytest.raises(SPARK_ERRORS) as excinfo:
        writer.save(missing)
    assert f"no stream {missing!r}" in error_text(excinfo)
    writer.save(other)
    assert stream_table(url, other).num_rows == 5
    with pytest.raises(SPARK_ERRORS) as excinfo:
        writer.option("stream", other).save(name)
    text = error_text(excinfo)
    assert "'stream'" in text and name in text and other in text

    publish(url, name, 7)
    reader = spark.read.format("jetstream").option("servers", url)
    assert reader.load(name).count() == 7
    with pytest.raises(SPARK_ERRORS) as excinfo:
        reader.option("stream", other).load(name).count()
    text = error_text(excinfo)
    assert "'stream'" in text and name in text and other in text


def test_path_and_stream_options_agree_or_are_refused() -> None:
    assert parse_write_options({"path": "ORDERS"}).expected_stream == "ORDERS"
    assert parse_write_options({"path": "ORDERS", "stream": "ORDERS"}).expected_stream == "ORDERS"
    for options in (
        {"path": "ORDERS", "stream": "OTHER"},
        {"path": "ORDERS", "expectedStream": "OTHER"},
    ):
        with pytest.raises(BadInputError, match="save"):
            parse_write_options(options)
    with pytest.raises(BadInputError, match="'path'"):
        parse_write_options({"path": "a.b"})
    assert parse_read_options({"path": "ORDERS"}).stream == "ORDERS"
    with pytest.raises(BadInputError, match="load"):
        parse_read_options({"path": "ORDERS", "stream": "OTHER"})


def test_a_write_into_a_missing_stream_says_so_and_how_to_create_it(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name, missing = shared_nats_server.url, unique_name("M"), unique_name("MISSING")
    make_stream(url, name)
    for option in ("stream", "expectedStream"):
        with pytest.raises(SPARK_ERRORS) as excinfo:
            _rows(spark, name, 3).write.format("jetstream").mode("append").option(
                "servers", url
            ).option(option, missing).save()
        text = error_text(excinfo)
        assert f"no stream {missing!r}" in text, text[-3000:]
        assert "create_stream" in text
        assert "10060" not in text
    assert stream_table(url, name).num_rows == 0


@pytest.mark.parametrize(
    ("given", "advice"),
    [
        ({"maxOffsetsPerTrigger": "10"}, "'maxMessagesPerTrigger'"),
        ({"startingOffsetsByTimestamp": "{}"}, "'startingTime'"),
        ({"kafka.bootstrap.servers": "h:1"}, "'servers'"),
        ({"subscribe": "ORDERS"}, "'streams'"),
        ({"startingSequnce": "1"}, "'startingSequence'"),
        ({"maxmessagespertriger": "1"}, "'maxMessagesPerTrigger'"),
    ],
)
def test_an_unknown_read_option_names_the_one_to_use(given: dict[str, str], advice: str) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_read_options({"stream": "S", **given}, queries="stream")
    message = str(excinfo.value)
    assert repr(next(iter(given))) in message and advice in message


def test_an_unknown_write_option_names_the_one_to_use() -> None:
    with pytest.raises(BadInputError, match=r"'topic'.*'subject'"):
        parse_write_options({"topic": "orders"})
    with pytest.raises(BadInputError, match=r"'ackTimout'.*'ackTimeout'"):
        parse_write_options({"ackTimout": "3"})


def test_the_java_check_says_what_it_found() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jetstream_arrow.spark"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    import pyspark

    assert "Java" in lines[0] and f"pyspark {pyspark.__version__}" in lines[0]
