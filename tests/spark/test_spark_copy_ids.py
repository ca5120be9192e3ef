"""Spark copies of a stream checked with nats-py: rows alike in everything made from
one source message and spread over tasks are never merged into one message with a
write that reports success, and a copy of a KV bucket keeps its expired and deleted
keys gone (the same core path as ``client.publish`` of a read)."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from nats.js.errors import KeyNotFoundError, NoKeysError
from pyspark.sql import functions as F

import jetstream_arrow as ja
from conftest_spark import SPARK_ERRORS, error_text, make_stream, read_df, spark
from jetstream_arrow.spark.copy_ids import alike_rows_merged
from jetstream_arrow.spark.options import parse_write_options
from jetstream_arrow.spark.writing import JetStreamCommitMessage, publish_task, write_columns
from natspy import with_jetstream

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]
__all__ = ["spark"]

#: Each source message exploded into this many rows alike in everything.
REPEATS = 4
SOURCE = [b"one", b"two", b"three"]


def _write(df: Any, url: str, **options: Any) -> None:
    writer = df.write.format("jetstream").mode("append").option("servers", url)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def _stored(url: str, stream: str) -> list[bytes]:
    """Every payload ``stream`` holds, as nats-py gets them by sequence."""

    async def work(js: Any) -> list[bytes]:
        info = await js.stream_info(stream)
        out = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            out.append((await js.get_msg(stream, seq)).data or b"")
        assert len(out) == info.state.messages
        return out

    return with_jetstream(url, work)


def _source(spark: Any, url: str, unique_name: Any) -> tuple[str, Any]:
    src = unique_name("SRC")
    make_stream(url, src)

    async def fill(js: Any) -> None:
        for payload in SOURCE:
            await js.publish(f"{src}.x", payload)

    with_jetstream(url, fill)
    return src, read_df(spark, url, src)


def test_alike_rows_spread_over_tasks_fail_the_write_instead_of_merging(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url = shared_nats_server.url
    src, df = _source(spark, url, unique_name)
    dst = unique_name("DST")
    make_stream(url, dst)
    exploded = (
        df.withColumn("k", F.explode(F.array_repeat(F.lit(1), REPEATS)))
        .drop("k")
        .withColumn("subject", F.regexp_replace("subject", f"^{src}", dst))
        .repartition(4)
    )
    with pytest.raises(SPARK_ERRORS) as raised:
        _write(exploded, url, writeId="alike")
    assert "share one msg id" in error_text(raised)


def test_a_duplicate_of_another_writers_copy_is_not_taken_for_merged_rows(
    shared_nats_server: Any, unique_name: Any
) -> None:
    """Two writers copying the same source messages at once (streaming queries of one
    consumer group whose pin moved while a micro-batch ran) send them under the same
    ids. This write's task 0 stores message 1's copy, the other writer then message
    2's, and this write's task 1 sends message 2's: a duplicate of a message stored
    after this write's first one, but not by this write, so no rows were merged. A
    duplicate of task 0's message is."""
    url = shared_nats_server.url
    src, dst = unique_name("SRC"), unique_name("DST")
    make_stream(url, src)
    make_stream(url, dst)

    async def fill(js: Any) -> None:
        for payload in SOURCE[:2]:
            await js.publish(f"{src}.x", payload)

    with_jetstream(url, fill)
    with ja.connect(url) as client:
        read = client.read(src).read_all()
    subjects = pc.replace_substring_regex(read.column("subject"), f"^{src}", dst)
    copy = read.set_column(read.schema.get_field_index("subject"), "subject", subjects)
    opts = parse_write_options({"servers": url, "stream": dst})
    columns = write_columns(opts, copy.schema)

    def task(partition: int, rows: pa.Table) -> JetStreamCommitMessage:
        tally = publish_task(opts, columns, iter(rows.to_batches()), "", f"task {partition}")
        return JetStreamCommitMessage(partition, 0, **asdict(tally))

    first = task(0, copy.slice(0, 1))
    other = task(0, copy.slice(1, 1))  # the other writer's
    second = task(1, copy.slice(1, 1))
    assert (first.stored, other.stored, second.duplicates) == (1, 1, 1)
    assert alike_rows_merged(columns, [first, second]) is None

    again = task(2, copy.slice(0, 1))
    assert again.duplicates == 1
    assert alike_rows_merged(columns, [first, second, again]) is again
    assert _stored(url, dst) == SOURCE[:2]


def test_alike_rows_with_ids_of_their_own_are_each_stored_once(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    """What the error advises: each row's id from its source and its place in the
    explode; a re-run with the same writeId stores nothing."""
    url = shared_nats_server.url
    src, df = _source(spark, url, unique_name)
    dst = unique_name("DST")
    make_stream(url, dst)
    exploded = (
        df.select("*", F.posexplode(F.array_repeat(F.lit(1), REPEATS)).alias("pos", "k"))
        .withColumn("msg_id", F.concat_ws(":", "stream", "seq", "pos"))
        .drop("k", "pos")
        .withColumn("subject", F.regexp_replace("subject", f"^{src}", dst))
        .repartition(4)
    )
    _write(exploded, url, writeId="own-ids")
    expected = sorted(p for p in SOURCE for _ in range(REPEATS))
    assert sorted(_stored(url, dst)) == expected
    _write(exploded, url, writeId="own-ids")
    assert sorted(_stored(url, dst)) == expected


def test_a_spark_copy_of_a_bucket_keeps_expired_and_deleted_keys_gone(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url = shared_nats_server.url
    src, dst = unique_name("kvsrc"), unique_name("kvdst")

    async def make(js: Any) -> None:
        for bucket in (src, dst):
            # The key's TTL is raised to the marker TTL: it lives 8 s, its marker 8 s
            # more, within which Spark reads it.
            await js.create_key_value(bucket=bucket, history=5, limit_marker_ttl=8)
        kv = await js.key_value(src)
        await kv.put("kept", b"v")
        await kv.put("deleted", b"x")
        await kv.delete("deleted")
        await kv.create("expired", b"z", msg_ttl=1)

    with_jetstream(url, make)

    async def marked(js: Any) -> bool:
        msg = await js.get_msg(f"KV_{src}", subject=f"$KV.{src}.expired")
        return "Nats-Marker-Reason" in (msg.headers or {})

    deadline = time.monotonic() + 20
    while not with_jetstream(url, marked):
        assert time.monotonic() < deadline, "the server left no marker within 20 s"
        time.sleep(0.2)
    copy = read_df(spark, url, f"KV_{src}", includeHeaders=True).withColumn(
        "subject", F.regexp_replace("subject", rf"^\$KV\.{src}\.", f"\\$KV.{dst}.")
    )
    _write(copy, url, stream=f"KV_{dst}")

    async def state(js: Any) -> list[str]:
        kv = await js.key_value(dst)
        with pytest.raises(KeyNotFoundError):
            await kv.get("deleted")
        try:
            return sorted(await kv.keys())
        except NoKeysError:
            return []

    assert with_jetstream(url, state) == ["kept"]

    async def copied_marker(js: Any) -> dict[str, str]:
        msg = await js.get_msg(f"KV_{dst}", subject=f"$KV.{dst}.expired")
        return dict(msg.headers or {})

    assert with_jetstream(url, copied_marker)["Nats-Marker-Reason"] == "MaxAge"
