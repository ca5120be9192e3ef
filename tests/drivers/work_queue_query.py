"""A Spark driver for the fault tests: a streaming query that drains a WorkQueue
stream through a durable consumer into another stream, until it is killed.

    python work_queue_query.py <url> <work queue> <consumer> <sink stream> <checkpoint>

Run as a process of its own so that a test can SIGKILL it (and its JVM) at any moment
and start it again from the same checkpoint.
"""

from __future__ import annotations

import os
import sys
import time


def main(url: str, queue: str, consumer: str, sink: str, checkpoint: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("work-queue-query")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    source = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", queue)
        .option("consumer", consumer)
        .option("maxMessagesPerTrigger", 1_000)
        .option("minPartitions", 2)
        .load()
    )
    moved = source.withColumn("subject", F.regexp_replace("subject", f"^{queue}", sink))
    query = (
        moved.writeStream.format("jetstream")
        .option("servers", url)
        .option("stream", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    print("query started", flush=True)
    while query.isActive:
        time.sleep(0.5)
    raise SystemExit(f"the query stopped: {query.exception()}")


if __name__ == "__main__":
    main(*sys.argv[1:6])
