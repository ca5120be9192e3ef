"""A table loaded as JSON rows and exported back is the same table, types included:
the load encodes with the native core and records the table's Arrow schema in the
stream's metadata; the export decodes with it."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import jetstream_arrow as ja
from cli_helpers import cli
from jetstream_arrow.cli import value_schema
from natspy import data_messages, first_data_seq

pytestmark = pytest.mark.timeout(120)

ROWS = 1_200


def typed_table() -> pa.Table:
    """Every kind of column a Parquet file brings, with nulls; ``later`` is null in
    the whole first batch of an export (it has a value only near the end)."""
    n = ROWS
    return pa.table(
        {
            "id": pa.array(range(n), pa.int32()),
            "day": pa.array([date(2024, 1, 1 + i % 28) if i % 7 else None for i in range(n)]),
            "price": pa.array(
                [Decimal(f"{i}.{i % 100:02d}") if i % 5 else None for i in range(n)],
                pa.decimal128(12, 2),
            ),
            "at": pa.array(
                [datetime(2024, 3, 1, 12, i % 60, tzinfo=timezone.utc) for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "local": pa.array(
                [datetime(2024, 3, 1, 8, 30, i % 60) for i in range(n)], pa.timestamp("ms")
            ),
            "tags": pa.array(
                [[f"t{i % 3}", "x"] if i % 4 else None for i in range(n)], pa.list_(pa.string())
            ),
            "point": pa.array(
                [{"x": i, "y": -i} if i % 6 else None for i in range(n)],
                pa.struct([("x", pa.int64()), ("y", pa.int16())]),
            ),
            "ratio": pa.array([i / 8 for i in range(n)], pa.float32()),
            "ok": pa.array([i % 2 == 0 for i in range(n)]),
            "later": pa.array([None] * (n - 3) + ["a", "b", "c"], pa.string()),
        }
    )


def test_parquet_loaded_and_exported_comes_back_cell_for_cell(nats_server, tmp_path, capsys):
    table = typed_table()
    src = tmp_path / "typed.parquet"
    pq.write_table(table, src, row_group_size=500)
    run = cli(
        capsys,
        "load", str(src), "--stream", "TYPED", "--subject", "typed.in", "--create-stream",
        "--batch-rows", "400", "-s", nats_server.url,
    )  # fmt: skip
    assert run.code == 0, run.err

    with ja.connect(nats_server.url) as client:
        info = client.stream_info("TYPED")
        assert value_schema.recorded(info) == table.schema
        # the file's first row: after its first position message
        seq = first_data_seq(nats_server.url, "TYPED")
        first = client.read("TYPED", end_seq=seq).read_all().column("data")[0].as_py()
    # The payload is JSON of the row, encoded by the core: the date as a date.
    assert first.startswith(b'{"id":0,"day":null,') and b'"later":null' in first

    out = tmp_path / "back.parquet"
    run = cli(
        capsys,
        "export", "TYPED", "-o", str(out), "--data-as", "json",
        "--columns", ",".join(table.column_names), "--batch-rows", "300",
        "-s", nats_server.url,
    )  # fmt: skip
    assert run.code == 0, run.err
    back = pq.read_table(out)
    assert back.schema == table.schema
    for name in table.column_names:
        assert back.column(name).to_pylist() == table.column(name).to_pylist(), name


def test_an_export_without_a_recorded_schema_infers_one_from_a_sample(
    nats_server, tmp_path, capsys
):
    with ja.connect(nats_server.url) as client:
        client.create_stream("RAW", subjects=["raw.>"])
        payloads = [b'{"a": 1, "b": "x"}', b'{"a": 2, "b": null}', b'{"a": 3, "c": [1.5]}']
        client.publish(pa.table({"subject": ["raw.e"] * 3, "data": payloads}))
    out = tmp_path / "raw.parquet"
    run = cli(capsys, "export", "RAW", "-o", str(out), "--data-as", "json", "-s", nats_server.url)
    assert run.code == 0, run.err
    back = pq.read_table(out)
    assert back.column("a").to_pylist() == [1, 2, 3]
    assert back.column("c").to_pylist() == [None, None, [1.5]]


def test_a_user_who_may_not_update_the_stream_still_loads(nats_server_factory, tmp_path, capsys):
    # Publishing is allowed, updating the stream is not: the schema is not recorded,
    # the load says so and stores every row.
    permissions = {"publish": {"deny": ["$JS.API.STREAM.UPDATE.>"]}}
    server = nats_server_factory(
        "authorization { users = [ {user: admin, password: a}, "
        f"{{user: loader, password: l, permissions: {json.dumps(permissions)}}} ] }}"
    )
    with ja.connect(server.url, user="admin", password="a") as client:
        client.create_stream("KEPT", subjects=["kept.>"])
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32())}), src)
    run = cli(
        capsys,
        "load", str(src), "--stream", "KEPT", "--subject", "kept.in",
        "--user", "loader", "--password", "l", "-s", server.url,
    )  # fmt: skip
    assert run.code == 0, run.err
    assert "schema was not recorded" in run.err
    with ja.connect(server.url, user="admin", password="a") as client:
        info = client.stream_info("KEPT")
        assert info.state.messages == 2
        assert value_schema.recorded(info) is None


def test_a_second_load_adds_its_columns_to_the_recorded_schema(nats_server, tmp_path, capsys):
    first = pa.table({"a": pa.array([1, 2], pa.int32()), "b": ["x", None]})
    second = pa.table({"a": pa.array([3], pa.int32()), "c": pa.array([1.5], pa.float64())})
    for i, table in enumerate((first, second)):
        pq.write_table(table, tmp_path / f"t{i}.parquet")
        run = cli(
            capsys,
            "load", str(tmp_path / f"t{i}.parquet"), "--stream", "TWO", "--subject", "two.in",
            "--create-stream", "-s", nats_server.url,
        )  # fmt: skip
        assert run.code == 0, run.err
    with ja.connect(nats_server.url) as client:
        assert value_schema.recorded(client.stream_info("TWO")) == pa.schema(
            [("a", pa.int32()), ("b", pa.string()), ("c", pa.float64())]
        )
    out = tmp_path / "back.parquet"
    run = cli(capsys, "export", "TWO", "-o", str(out), "--data-as", "json", "-s", nats_server.url)
    assert run.code == 0, run.err
    back = pq.read_table(out)
    assert back.select(["a", "b", "c"]).to_pylist() == [
        {"a": 1, "b": "x", "c": None},
        {"a": 2, "b": None, "c": None},
        {"a": 3, "b": None, "c": 1.5},
    ]

    # A column another load gave another type: refused before anything is published.
    pq.write_table(pa.table({"a": ["text"]}), tmp_path / "t3.parquet")
    run = cli(
        capsys,
        "load", str(tmp_path / "t3.parquet"), "--stream", "TWO", "--subject", "two.in",
        "-s", nats_server.url,
    )  # fmt: skip
    assert run.code == 2, run.err
    assert "column 'a' is string here but int32 in the schema an earlier load recorded" in run.err
    assert data_messages(nats_server.url, "TWO") == 3
    # and not even a position: the stream holds the 3 rows and one position message
    # for each of the 2 files loaded before
    with ja.connect(nats_server.url) as client:
        assert client.stream_info("TWO").state.messages == 3 + 2


def test_nan_and_infinity_come_back_from_a_load_and_export(nats_server, tmp_path, capsys):
    table = pa.table(
        {
            "x": pa.array([1.5, float("nan"), float("inf"), float("-inf"), None]),
            "y": pa.array([float("nan"), 0.0, -0.0, 2.5, float("inf")], pa.float32()),
        }
    )
    pq.write_table(table, tmp_path / "f.parquet")
    run = cli(
        capsys,
        "load", str(tmp_path / "f.parquet"), "--stream", "FLOATS", "--subject", "floats.in",
        "--create-stream", "-s", nats_server.url,
    )  # fmt: skip
    assert run.code == 0, run.err
    out = tmp_path / "back.parquet"
    run = cli(
        capsys, "export", "FLOATS", "-o", str(out), "--data-as", "json", "-s", nats_server.url
    )
    assert run.code == 0, run.err
    back = pq.read_table(out).select(["x", "y"])
    assert back.schema == table.schema
    # NaN != NaN: compare the values' text.
    assert [[repr(v) for v in back.column(c).to_pylist()] for c in ("x", "y")] == [
        [repr(v) for v in table.column(c).to_pylist()] for c in ("x", "y")
    ]
