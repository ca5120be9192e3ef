"""What the lake sink lands, read by Spark: the Parquet files of a Delta table's
current version and of a partitioned dataset's manifest, equal to ``client.read`` of
the stream. (Spark's own Delta reader is a JVM package this test cannot fetch; the
files it would read are the ones read here.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import jetstream_arrow as ja
from conftest_spark import spark

from .test_cli_sink import _expected, _fill, _same_rows

pytestmark = pytest.mark.spark
__all__ = ["spark"]

ROWS = 2_000


def _spark_table(spark: Any, files: list[str]) -> pa.Table:
    """The files read by Spark, as Arrow (Spark's timestamps in UTC)."""
    df = spark.read.option("mergeSchema", "true").parquet(*files)
    rows = [r.asDict() for r in df.collect()]
    table = pa.Table.from_pylist(rows)
    return table.set_column(
        table.schema.get_field_index("timestamp"),
        "timestamp",
        table.column("timestamp").cast(pa.timestamp("us", tz="UTC")),
    )


def test_spark_reads_the_landed_delta_table_and_parquet_dataset_as_the_stream(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    stream = unique_name("LAKE")
    with ja.connect(shared_nats_server.url) as client:
        _fill(client, stream, ROWS)
        expected = _expected(client, stream)
        delta = ja.DeltaTarget(str(tmp_path / "delta"))
        parquet = ja.ParquetTarget(str(tmp_path / "parquet"))
        for target, partition_by in ((delta, ()), (parquet, ("date",))):
            report = ja.run_sink(
                client, [stream], target, codec="json", commit_rows=500, partition_by=partition_by
            )
            assert report.rows == ROWS and report.positions == {stream: ROWS}
    delta_files = DeltaTable(str(tmp_path / "delta")).file_uris()
    _same_rows(_spark_table(spark, delta_files), expected)
    parquet_files = ja.sink.dataset_files(tmp_path / "parquet")
    _same_rows(_spark_table(spark, parquet_files), expected)
