"""A Spark read whose JSON value schema was inferred when the query was planned, and a
payload holding a field that schema lacks: Spark cannot widen a query's schema, so the
read fails naming the stream, the message and the field, and a work queue's messages
stay in the queue (nothing of the batch is acknowledged); given the schema, they land
with the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from conftest_spark import (
    SPARK_ERRORS,
    error_text,
    make_stream,
    read_df,
    read_stream,
    run_available_now,
    spark,
)
from natspy import with_jetstream

pytestmark = pytest.mark.spark
__all__ = ["spark"]

LATE = [{"a": 3, "late": "precious"}, {"a": 4, "late": "precious"}]


def publish_json(url: str, stream: str, values: list[dict[str, Any]]) -> None:
    async def work(js: Any) -> None:
        for v in values:
            await js.publish(f"{stream}.x", json.dumps(v).encode())

    with_jetstream(url, work)


def stored(url: str, stream: str) -> list[dict[str, Any]]:
    """Every payload the stream holds, in order, read with nats-py."""

    async def work(js: Any) -> list[dict[str, Any]]:
        state = (await js.stream_info(stream)).state
        if not state.messages:
            return []
        out = []
        for seq in range(state.first_seq, state.last_seq + 1):
            out.append(json.loads((await js.get_msg(stream, seq)).data))
        return out

    return with_jetstream(url, work)


def test_a_work_queue_read_with_an_inferred_schema_fails_on_a_new_field_and_keeps_it(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, queue = shared_nats_server.url, unique_name("WQNF")
    make_stream(url, queue, retention="workqueue", allow_direct=True)
    publish_json(url, queue, [{"a": i} for i in range(3)])
    # The value schema is inferred here, from the three messages: struct<a: bigint>.
    source = read_stream(spark, url, queue, consumer="c", valueFormat="json")
    assert source.schema["value"].dataType.simpleString() == "struct<a:bigint>"
    publish_json(url, queue, LATE)
    out = tmp_path / "out"
    with pytest.raises(SPARK_ERRORS) as excinfo:
        run_available_now(
            source.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(tmp_path / "cp"))
        )
    text = error_text(excinfo)
    assert "NewFieldError" in text, text
    assert "'valueSchema'" in text and repr(queue) in text and "'late'" in text, text
    assert "seq 4" in text, text
    # Nothing of the failed micro-batch was acknowledged: every message is still queued.
    assert stored(url, queue) == [{"a": i} for i in range(3)] + LATE

    # Given the schema (the opt-out), the same consumer lands them, with the field.
    given = StructType([StructField("a", LongType()), StructField("late", StringType())])
    source = read_stream(
        spark, url, queue, consumer="c", valueFormat="json", valueSchema=given.json()
    )
    run_available_now(
        source.select("value.*")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out2"))
        .option("checkpointLocation", str(tmp_path / "cp2"))
    )
    rows = ds.dataset(tmp_path / "out2", format="parquet").to_table().to_pylist()
    assert sorted(rows, key=lambda r: r["a"]) == [{"a": i, "late": None} for i in range(3)] + LATE
    # availableNow acknowledges its last micro-batch: the queue is empty.
    assert stored(url, queue) == []


def test_a_batch_read_with_an_inferred_schema_fails_on_a_new_field(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("NF")
    make_stream(url, name)
    publish_json(url, name, [{"a": i} for i in range(3)])
    df = read_df(spark, url, name, valueFormat="json")
    publish_json(url, name, LATE)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        df.collect()
    text = error_text(excinfo)
    assert "NewFieldError" in text and "'late'" in text and "seq 4" in text, text
    # A schema the user gives leaves the field out, as they asked.
    rows = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", name)
        .option("valueFormat", "json")
        .schema("seq LONG, a LONG")
        .load()
        .collect()
    )
    assert sorted((r.seq, r.a) for r in rows) == [(i + 1, i) for i in range(5)]
