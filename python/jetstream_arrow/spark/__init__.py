"""Spark integration: the ``"jetstream"`` data source and mapInArrow helpers.

Installing the package registers the format automatically (Spark finds the top-level
module ``pyspark_jetstream`` and its ``DefaultSource``); [`register`][] does it
explicitly:

    import jetstream_arrow.spark as js
    js.register(spark)
    df = spark.read.format("jetstream").option("servers", url).option("stream", "ORDERS").load()
    df.write.format("jetstream").mode("append").option("servers", url).save()
    orders = spark.readStream.format("jetstream").option("servers", url).load("ORDERS")
    query = (
        orders.writeStream.format("jetstream")
        .option("servers", url)
        .option("subject", "archive.orders")
        .option("checkpointLocation", path)
        .start()
    )

Needs ``pyspark>=4.2`` on the driver and the executors.
"""

from __future__ import annotations

from typing import Any

from .batch_reader import JetStreamReader
from .batch_writer import JetStreamWriter
from .columns import ACK_SCHEMA, message_schema
from .connection_cache import freeze_worker_heap
from .datasource import JetStreamDataSource
from .functions import publish_fn, read_fn
from .options import ReadOptions, WriteOptions, parse_read_options, parse_write_options
from .partitions import SequenceRange
from .preflight import check_java, check_worker_python
from .reading import DataLossError
from .stream_reader import JetStreamStreamReader
from .stream_writer import JetStreamStreamWriter


def register(spark: Any) -> None:
    """Register format ``"jetstream"`` with this SparkSession (needed only where the
    automatic registration through ``pyspark_jetstream`` is not available).

    Raises [`SparkSetupError`][jetstream_arrow.exceptions.SparkSetupError] when Spark's Python
    workers cannot import this package."""
    check_worker_python(spark)
    spark.dataSource.register(JetStreamDataSource)


__all__ = [
    "ACK_SCHEMA",
    "DataLossError",
    "JetStreamDataSource",
    "JetStreamReader",
    "JetStreamStreamReader",
    "JetStreamStreamWriter",
    "JetStreamWriter",
    "ReadOptions",
    "SequenceRange",
    "WriteOptions",
    "check_java",
    "check_worker_python",
    "message_schema",
    "parse_read_options",
    "parse_write_options",
    "publish_fn",
    "read_fn",
    "register",
]

# Last, once every module a task of this package needs is imported: in a reused Spark
# worker, their objects leave the per-task garbage collection (see freeze_worker_heap).
freeze_worker_heap()
