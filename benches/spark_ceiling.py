"""The ceiling of any Python data source read on this machine: a Spark data source
that reads nothing and yields pre-built Arrow batches shaped like a jetstream read.

``spark-read-ceiling`` in ``cases.py`` reads it with the query of ``spark-read``; what
``spark-read`` reaches of it is what the jetstream reader leaves on the table, the rest
being Spark's hand-over from Python workers to the JVM. Spark's workers import this
module by name (``cases.py`` puts ``benches/`` on their PYTHONPATH).

Option ``shape`` picks the columns: ``narrow`` (the default) yields ``subject``, ``seq``
and ``data``; ``message`` yields exactly the jetstream message schema (``stream``,
``subject``, ``seq``, ``timestamp``, ``data``) in the Arrow types Spark expects for it,
so ``spark-read-ceiling-message`` shows what the schema itself costs in the hand-over.

Written to, it drops every batch: ``spark-write-ceiling`` is the ``spark-write`` query
into it, the hand-over from the JVM to a Python writer and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

#: Rows and payload bytes per yielded batch, at most: the jetstream reader's (its
#: options batchRows and maxBytes, 65 536 and 16 MiB by default).
BATCH_ROWS = 65_536
BATCH_BYTES = 16 << 20

NARROW_SCHEMA = "subject string, seq bigint, data binary"
# The jetstream message schema (jetstream_arrow.spark.columns.message_schema), spelled
# out so that the ceiling does not depend on the package under test.
MESSAGE_SCHEMA = (
    "stream string not null, subject string not null, seq bigint not null, "
    "timestamp timestamp not null, data binary not null"
)
SHAPES = {"narrow": NARROW_SCHEMA, "message": MESSAGE_SCHEMA}


class CeilingPartition(InputPartition):
    def __init__(self, rows: int) -> None:
        super().__init__(rows)
        self.rows = rows


class CeilingReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.rows = int(options["rows"])
        self.size = int(options["size"])
        self.partition_count = int(options.get("partitions", "2"))
        self.shape = _shape(options)

    def partitions(self) -> list[InputPartition]:  # type: ignore[override]
        share, extra = divmod(self.rows, self.partition_count)
        count = self.partition_count
        return [CeilingPartition(share + (1 if i < extra else 0)) for i in range(count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        rows = partition.rows  # type: ignore[attr-defined]
        # Built once, yielded again and again: the source itself costs nothing.
        per_batch = max(1, min(BATCH_ROWS, BATCH_BYTES // max(1, self.size)))
        full = _batch(per_batch, self.size, self.shape)
        while rows > 0:
            take = min(rows, per_batch)
            yield full if take == per_batch else full.slice(0, take)
            rows -= take


def _shape(options: dict[str, str]) -> str:
    shape = options.get("shape", "narrow")
    if shape not in SHAPES:
        raise ValueError(f"option 'shape' must be one of {', '.join(SHAPES)}, got {shape!r}")
    return shape


def _batch(rows: int, size: int, shape: str = "narrow") -> pa.RecordBatch:
    subject = pa.array(["bench.ceiling"] * rows, pa.utf8())
    seq = pa.array(range(1, rows + 1), pa.int64())
    data = pa.array([b"x" * size] * rows, pa.binary())
    if shape == "narrow":
        return pa.record_batch({"subject": subject, "seq": seq, "data": data})
    # What Spark expects for the message schema: non-null fields, timestamps in
    # microseconds and UTC (pyspark's to_arrow_schema with timezone "UTC").
    start = int(datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp() * 1_000_000)
    schema = pa.schema(
        [
            pa.field("stream", pa.utf8(), nullable=False),
            pa.field("subject", pa.utf8(), nullable=False),
            pa.field("seq", pa.int64(), nullable=False),
            pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("data", pa.binary(), nullable=False),
        ]
    )
    return pa.record_batch(
        [
            pa.array(["BENCH"] * rows, pa.utf8()),
            subject,
            seq,
            pa.array(range(start, start + rows), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            data,
        ],
        schema=schema,
    )


class CeilingWriter(DataSourceArrowWriter):
    """Takes each task's Arrow batches and drops them: what Spark's hand-over to any
    Python data source writer costs (``spark-write-ceiling``)."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()


class CeilingDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "jetstream_bench_ceiling"

    def schema(self) -> str:
        return SHAPES[_shape(dict(self.options))]

    def reader(self, schema: Any) -> DataSourceReader:
        return CeilingReader(dict(self.options))

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return CeilingWriter()
