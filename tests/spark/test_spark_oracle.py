"""Spark's reads of streams with a history, against an independent oracle: what nats-py's
``STREAM.MSG.GET`` of every sequence sees (``tests/oracle_histories.py``).

Two streams get seeded random histories applied with nats-py (publishes with random
payloads and headers, bursts, interior deletes, purges of a subject and keeping N,
rollups; one stream with a per-subject limit and starting at sequence 1,000), then
``spark.read`` of one stream and of both (option ``streams``), with and without
partitions, and a ``spark.readStream`` of both with ``trigger(availableNow=True)`` are
compared with the oracle row by row: sequence, subject, payload bytes, every header
value, the timestamp's microseconds. Seeds 1-3: six histories a run, about 40 s.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from conftest_spark import read_df, run_available_now, spark
from oracle_histories import (
    SUBJECTS,
    Burst,
    Delete,
    History,
    Op,
    Publish,
    PurgeKeep,
    PurgeSubject,
    PyNats,
    Rollup,
    Stored,
    StreamShape,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]
__all__ = ["spark"]

HEADER_NAMES = ("K", "k", "Trace-Id", "X-Multi")


def random_history(rng: random.Random, shape: StreamShape, ops: int = 25) -> History:
    """A history of ``ops`` operations drawn from ``rng``."""
    drawn: list[Op] = []
    for _ in range(ops):
        kind = rng.choices(
            ["publish", "burst", "delete", "purge", "keep", "rollup"], [10, 3, 4, 1, 1, 1]
        )[0]
        subject = rng.choice(SUBJECTS)
        if kind == "publish":
            headers = None
            if rng.random() < 0.6:
                headers = tuple(
                    (rng.choice(HEADER_NAMES), f"v{rng.randrange(100)}")
                    for _ in range(rng.randrange(0, 4))
                )
            size = rng.choice([0, 1, 17, 300, 3000])
            drawn.append(Publish(subject, rng.randbytes(size), headers))
        elif kind == "burst":
            drawn.append(Burst(subject, rng.randrange(5, 60)))
        elif kind == "delete":
            drawn.append(Delete(rng.random()))
        elif kind == "purge":
            drawn.append(PurgeSubject(subject))
        elif kind == "keep":
            drawn.append(PurgeKeep(rng.randrange(3, 30)))
        else:
            drawn.append(Rollup(subject, b"rolled-up"))
    return History(shape, tuple(drawn))


def oracle_rows(stored: list[Stored]) -> list[tuple[Any, ...]]:
    return [m.row(True) for m in stored]


def spark_rows(df: Any) -> dict[str, list[tuple[Any, ...]]]:
    """A DataFrame of messages as rows per stream, as the oracle's, in sequence order."""
    picked = df.select(
        "stream", "seq", "subject", "data", "headers", F.unix_micros("timestamp").alias("ts")
    )
    out: dict[str, list[tuple[Any, ...]]] = {}
    for r in picked.collect():
        headers = None
        if r.headers is not None:
            headers = tuple(sorted((k, tuple(v)) for k, v in r.headers.items()))
        row = (r.seq, r.subject, bytes(r.data), headers, r.ts)
        out.setdefault(r.stream, []).append(row)
    return {s: sorted(rows) for s, rows in out.items()}


def normalised(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The oracle's rows with headers sorted as Spark's map gives them back (a map has
    no order; an empty header block is an empty map)."""
    out = []
    for seq, subject, data, headers, ts in rows:
        if headers is not None:
            headers = tuple(sorted(headers))
        out.append((seq, subject, data, headers, ts))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_spark_reads_of_streams_with_a_history_equal_the_oracle(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path, seed: int
) -> None:
    url = shared_nats_server.url
    rng = random.Random(seed)
    names = [unique_name(f"SO{seed}A"), unique_name(f"SO{seed}B")]
    shapes = [StreamShape(), StreamShape(max_msgs_per_subject=3, first_seq=1_000)]
    with PyNats(url) as py:
        try:
            for name, shape in zip(names, shapes, strict=True):
                py.apply(name, random_history(rng, shape))
            want = {name: normalised(oracle_rows(py.snapshot(name))) for name in names}

            for name in names:
                for options in ({}, {"minPartitions": 3}):
                    got = spark_rows(read_df(spark, url, name, includeHeaders=True, **options))
                    assert got.get(name, []) == want[name], (name, options)

            both = (
                spark.read.format("jetstream")
                .option("servers", url)
                .option("streams", ",".join(names))
                .option("includeHeaders", True)
                .option("minPartitions", 2)
                .load()
            )
            got = spark_rows(both)
            assert {s: got.get(s, []) for s in names} == want

            stream_df = (
                spark.readStream.format("jetstream")
                .option("servers", url)
                .option("streams", ",".join(names))
                .option("includeHeaders", True)
                .option("startingOffsets", "earliest")
                .option("maxMessagesPerTrigger", 40)
                .load()
            )
            sink = tmp_path / "sink"
            run_available_now(
                stream_df.writeStream.format("parquet")
                .option("path", str(sink))
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
            )
            got = spark_rows(spark.read.parquet(str(sink)))
            assert {s: got.get(s, []) for s in names} == want
        finally:
            for name in names:
                py.delete_stream(name)
