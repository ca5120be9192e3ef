"""Registers Spark's format ``"jetstream"``.

PySpark (4.0 and later) imports every top-level module whose name starts with
``pyspark_`` and registers its ``DefaultSource`` under ``DefaultSource.name()``. The
implementation lives in :mod:`jetstream_arrow.spark`.
"""

from jetstream_arrow.spark.datasource import JetStreamDataSource as DefaultSource

__all__ = ["DefaultSource"]
