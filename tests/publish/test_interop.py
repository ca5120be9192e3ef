"""Arrow producers and consumers other than pyarrow: polars and DuckDB results are
published through the Arrow PyCapsule interface, and a read goes straight into them."""

from __future__ import annotations

import duckdb
import polars as pl
import pyarrow as pa
import pytest

import jetstream_arrow as ja

pytestmark = pytest.mark.timeout(120)


def test_a_polars_dataframe_is_published_and_read_back_into_polars(
    client: ja.Client, stream: str
) -> None:
    frame = pl.DataFrame(
        {
            "subject": [f"{stream}.p{i % 3}" for i in range(2_000)],
            "data": [f"row {i}".encode() for i in range(2_000)],
            "msg_id": [f"p-{i}" for i in range(2_000)],
        }
    )
    assert isinstance(frame, pl.DataFrame) and hasattr(frame, "__arrow_c_stream__")
    result = client.publish(frame)
    assert (result.stored, result.duplicates, result.failed) == (2_000, 0, 0)
    # The same frame again: every row carries its id, so nothing is stored twice.
    assert client.publish(frame).duplicates == 2_000

    back = pl.from_arrow(client.read(stream).read_all())
    assert isinstance(back, pl.DataFrame)
    assert back["seq"].to_list() == list(range(1, 2_001))
    assert back["subject"].to_list() == frame["subject"].to_list()
    assert back["data"].to_list() == frame["data"].to_list()


def test_a_duckdb_result_is_published_and_queried_back_in_duckdb(
    client: ja.Client, stream: str
) -> None:
    con = duckdb.connect()
    relation = con.sql(
        f"SELECT '{stream}.d.' || (i % 4) AS subject, ('value ' || i)::BLOB AS data "
        "FROM range(5000) t(i) ORDER BY i"
    )
    result = client.publish(relation)
    assert (result.stored, result.failed) == (5_000, 0)

    reader = client.read(stream)
    assert isinstance(reader, pa.RecordBatchReader)
    con.register("messages", reader)
    counts = con.sql(
        "SELECT subject, count(*) AS n, min(seq) AS first, max(seq) AS last "
        "FROM messages GROUP BY subject ORDER BY subject"
    ).fetchall()
    assert counts == [(f"{stream}.d.{k}", 1_250, k + 1, 4_997 + k) for k in range(4)]
    # Payloads come through intact: DuckDB scans a second read as a table.
    con.register("again", client.read(stream))
    payloads = con.sql("SELECT data FROM again ORDER BY seq").fetchall()
    assert [p for (p,) in payloads] == [f"value {i}".encode() for i in range(5_000)]
