"""A Spark driver for the fault tests: a streaming query that copies a stream, read
from its checkpointed offsets (no durable consumer), into Spark's parquet file sink
or into another stream, until it is killed.

    python stream_copy_query.py <url> <source stream> parquet <sink directory> <checkpoint>
    python stream_copy_query.py <url> <source stream> jetstream <sink stream> <checkpoint>

Run as a process of its own so that a test can SIGKILL it (and its JVM) at any moment
and start it again from the same checkpoint. (One query per process: two streaming
queries sharing a SparkContext can fail a micro-batch with Spark's "Task
serialization failed: Illegal size ... of collection", a race of Spark's own.)
"""

from __future__ import annotations

import sys

from driver_session import run_until_killed, spark_session


def main(url: str, source: str, kind: str, sink: str, checkpoint: str) -> None:
    from pyspark.sql import functions as F

    spark = spark_session(f"stream-copy-{kind}")
    messages = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", 1_000)
        .option("minPartitions", 2)
        .load()
    )
    if kind == "parquet":
        writer = (
            messages.select("seq", "subject", "data")
            .writeStream.format("parquet")
            .option("path", sink)
        )
    elif kind == "jetstream":
        moved = messages.withColumn("subject", F.regexp_replace("subject", f"^{source}", sink))
        writer = moved.writeStream.format("jetstream").option("servers", url).option("stream", sink)
    else:
        raise SystemExit(f"unknown sink {kind!r}: parquet or jetstream")
    run_until_killed(writer, checkpoint)


if __name__ == "__main__":
    main(*sys.argv[1:6])
