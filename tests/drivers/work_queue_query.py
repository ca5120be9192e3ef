"""A Spark driver for the fault tests: a streaming query that drains a WorkQueue
stream through a durable consumer into another stream, until it is killed.

    python work_queue_query.py <url> <work queue> <consumer> <sink stream> <checkpoint> [<group>]

With a group, the query joins that pinned priority group of the consumer (option
``consumerGroup``, pin timeout 3 s): drivers of one group run as one active, others
standing by. Run as a process of its own so that a test can SIGKILL it (and its JVM) at any moment
and start it again from the same checkpoint.
"""

from __future__ import annotations

import sys

from driver_session import run_until_killed, spark_session


def main(
    url: str, queue: str, consumer: str, sink: str, checkpoint: str, group: str | None = None
) -> None:
    from pyspark.sql import functions as F

    spark = spark_session("work-queue-query")
    source = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", queue)
        .option("consumer", consumer)
        .option("maxMessagesPerTrigger", 1_000)
        .option("minPartitions", 2)
    )
    if group is not None:
        source = source.option("consumerGroup", group).option("consumerPinTimeout", 3)
    source = source.load()
    moved = source.withColumn("subject", F.regexp_replace("subject", f"^{queue}", sink))
    writer = moved.writeStream.format("jetstream").option("servers", url).option("stream", sink)
    run_until_killed(writer, checkpoint)


if __name__ == "__main__":
    main(*sys.argv[1:7])
