"""A Parquet dataset partitioned by a subject token reads back the token as text,
``"007"`` and not the integer 7, through pyarrow, DuckDB and Spark, each as
docs/sink.md says to read it: the files the manifest lists (the partition columns are
in the files too), or the directory with the reader's option that keeps partition
values as text."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import jetstream_arrow as ja
from conftest_spark import spark
from jetstream_arrow.sink import dataset_files

#: The Spark session fixture, used by name.
__all__ = ["spark"]

#: Tokens that look like numbers: a reader that guessed their type from a directory's
#: name would make them integers.
TOKENS = ["007", "42", "007"]


@pytest.mark.spark
def test_numeric_looking_partition_values_read_back_as_text(
    shared_nats_server,
    unique_name,
    tmp_path,
    spark,
):
    stream = unique_name("P")
    root = tmp_path / "t"
    with ja.connect(shared_nats_server.url) as client:
        client.create_stream(stream, [f"{stream.lower()}.>"])
        subjects = [f"{stream.lower()}.{token}.x" for token in TOKENS]
        data = [b'{"i": %d}' % i for i in range(len(TOKENS))]
        client.publish(pa.table({"subject": subjects, "data": data}))
        ja.run_sink(
            client, [stream], ja.ParquetTarget(root), codec="json", partition_by=["subject_token_2"]
        )
    files = dataset_files(root)
    assert sorted(f.split("/")[-2] for f in files) == ["subject_token_2=007", "subject_token_2=42"]

    def tokens(rows: list[tuple[int, str]]) -> list[str]:
        return [token for _, token in sorted(rows)]

    # pyarrow: the manifest's files; the directory with the partition column's type.
    listed = ds.dataset(files).to_table(columns=["i", "subject_token_2"])
    assert tokens(list(zip(*listed.to_pydict().values(), strict=True))) == TOKENS
    as_text = ds.partitioning(pa.schema([("subject_token_2", pa.string())]), flavor="hive")
    whole = ds.dataset(str(root), partitioning=as_text).to_table(columns=["i", "subject_token_2"])
    assert tokens(list(zip(*whole.to_pydict().values(), strict=True))) == TOKENS

    # DuckDB: the files' own columns, on the files or a glob of the directory; or the
    # directory's names taken as text. (With autocast on, a column whose every name
    # reads back the same as a number, `10`, would be typed as an integer.)
    for options in (
        "hive_partitioning = false",
        "hive_partitioning = true, hive_types_autocast = false",
    ):
        query = f"SELECT i, subject_token_2 FROM read_parquet({{}}, {options})"
        assert tokens(duckdb.sql(query.format(repr(files))).fetchall()) == TOKENS
        glob = repr(f"{root}/**/*.parquet")
        assert tokens(duckdb.sql(query.format(glob)).fetchall()) == TOKENS

    # Spark: the files; the directory with partition type inference off.
    rows = spark.read.parquet(*files).select("i", "subject_token_2").collect()
    assert tokens([(r.i, r.subject_token_2) for r in rows]) == TOKENS
    key = "spark.sql.sources.partitionColumnTypeInference.enabled"
    spark.conf.set(key, "false")
    try:
        rows = spark.read.parquet(str(root)).select("i", "subject_token_2").collect()
    finally:
        spark.conf.unset(key)
    assert tokens([(r.i, r.subject_token_2) for r in rows]) == TOKENS
