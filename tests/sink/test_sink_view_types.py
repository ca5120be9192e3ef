"""A file whose columns are Arrow view types (``string_view``, ``binary_view``, as
pyarrow and Polars write them) goes through every path that takes a recorded or given
schema: ``load`` records its schema, the lake sink lands it in Delta and in partitioned
Parquet, ``export`` writes it back as Parquet and CSV, and a KV write takes such
columns. Values are checked with pyarrow and deltalake against the file's own."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable

import jetstream_arrow as ja
from cli_helpers import cli
from jetstream_arrow.sink import dataset_files

VIEWS = pa.table(
    {
        "region": pa.array(["v.007.a", "v.eu.b", "v.007.c"], pa.string()),
        "name": pa.array(["alpha", None, "a longer text than twelve bytes"], pa.string_view()),
        "blob": pa.array([b"\x00\x01", b"", None], pa.binary_view()),
    }
)
#: What each reader gives back: the same values, as plain types.
EXPECTED = [
    {"region": r, "name": n, "blob": b}
    for r, n, b in zip(*(VIEWS.column(c).to_pylist() for c in VIEWS.column_names), strict=True)
]


def _loaded(capsys: Any, url: str, stream: str, tmp_path: Any) -> None:
    source = tmp_path / "views.parquet"
    pq.write_table(VIEWS, source)
    assert pq.read_schema(source).field("name").type == pa.string_view()
    run = cli(
        capsys,
        "load",
        str(source),
        "--stream",
        stream,
        "--create-stream",
        "--subject-column",
        "region",
        "--stream-subjects",
        "v.>",
        "-s",
        url,
    )
    assert run.code == 0, run.err


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.sort_by("seq").select(["region", "name", "blob"]).to_pylist()


def test_a_file_of_view_types_lands_and_exports_with_its_values(nats_server, tmp_path, capsys):
    url = nats_server.url
    _loaded(capsys, url, "V", tmp_path)

    parquet = tmp_path / "pq"
    run = cli(
        capsys,
        "sink",
        "V",
        "--parquet",
        str(parquet),
        "--partition-by",
        "subject_token_2",
        "--value-format",
        "json",
        "-s",
        url,
    )
    assert run.code == 0, run.err
    landed = ds.dataset(dataset_files(parquet)).to_table()
    assert landed.schema.field("name").type == pa.string()
    assert landed.schema.field("blob").type == pa.binary()
    assert _rows(landed) == EXPECTED
    assert sorted(landed.column("subject_token_2").to_pylist()) == ["007", "007", "eu"]

    delta = tmp_path / "delta"
    run = cli(capsys, "sink", "V", "--delta", str(delta), "--value-format", "json", "-s", url)
    assert run.code == 0, run.err
    assert _rows(DeltaTable(str(delta)).to_pyarrow_table()) == EXPECTED

    for fmt in ("parquet", "csv"):
        out = tmp_path / f"out.{fmt}"
        run = cli(capsys, "export", "V", "-o", str(out), "--data-as", "json", "-s", url)
        assert run.code == 0, run.err
        if fmt == "parquet":
            # As loaded: the file's own types, in sequence order.
            exported = pq.read_table(out)
            assert exported.schema.field("name").type == pa.string_view()
            assert exported.select(["region", "name", "blob"]).to_pylist() == EXPECTED
        else:
            options = pacsv.ConvertOptions(
                column_types={"name": pa.string(), "blob": pa.binary()},
                strings_can_be_null=True,
            )
            back = pacsv.read_csv(out, convert_options=options)
            # CSV has no null text apart from the empty one.
            assert _rows(back) == [{**row, "blob": row["blob"] or None} for row in EXPECTED]


def test_a_kv_write_takes_view_columns(shared_nats_server, unique_name):
    bucket = unique_name("kv")
    with ja.connect(shared_nats_server.url) as client:
        client.create_stream(
            f"KV_{bucket}",
            [f"$KV.{bucket}.>"],
            max_msgs_per_subject=1,
            allow_rollup=True,
            deny_delete=True,
            allow_direct=True,
        )
        rows = pa.table(
            {
                "key": pa.array(["a", "b"], pa.string_view()),
                "value": pa.array([b"\x00x", b"y"], pa.binary_view()),
            }
        )
        assert client.write_kv(bucket, rows).stored == 2
        back = client.read_kv(bucket).read_all().sort_by("key")
    assert back.select(["key", "value"]).to_pylist() == [
        {"key": "a", "value": b"\x00x"},
        {"key": "b", "value": b"y"},
    ]
