"""The ceiling of any Python data source read on this machine: a Spark data source
that reads nothing and yields pre-built Arrow batches shaped like a jetstream read.

``spark-read-ceiling`` in ``cases.py`` reads it with the query of ``spark-read``; what
``spark-read`` reaches of it is what the jetstream reader leaves on the table, the rest
being Spark's hand-over from Python workers to the JVM. Spark's workers import this
module by name (``cases.py`` puts ``benches/`` on their PYTHONPATH).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

#: Rows per yielded batch: the jetstream reader's batches are at most this many rows too.
BATCH_ROWS = 8192


class CeilingPartition(InputPartition):
    def __init__(self, rows: int) -> None:
        super().__init__(rows)
        self.rows = rows


class CeilingReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.rows = int(options["rows"])
        self.size = int(options["size"])
        self.partition_count = int(options.get("partitions", "2"))

    def partitions(self) -> list[InputPartition]:  # type: ignore[override]
        share, extra = divmod(self.rows, self.partition_count)
        count = self.partition_count
        return [CeilingPartition(share + (1 if i < extra else 0)) for i in range(count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        rows = partition.rows  # type: ignore[attr-defined]
        # Built once, yielded again and again: the source itself costs nothing.
        full = _batch(BATCH_ROWS, self.size)
        while rows > 0:
            take = min(rows, BATCH_ROWS)
            yield full if take == BATCH_ROWS else full.slice(0, take)
            rows -= take


def _batch(rows: int, size: int) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "subject": pa.array(["bench.ceiling"] * rows, pa.utf8()),
            "seq": pa.array(range(1, rows + 1), pa.int64()),
            "data": pa.array([b"x" * size] * rows, pa.binary()),
        }
    )


class CeilingDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "jetstream_bench_ceiling"

    def schema(self) -> str:
        return "subject string, seq bigint, data binary"

    def reader(self, schema: Any) -> DataSourceReader:
        return CeilingReader(dict(self.options))
