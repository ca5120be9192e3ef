"""The lake sink's one merge rule for both targets: a struct's field added in a later
commit joins the table's schema (Delta's log, a Parquet dataset's manifest) at any
depth, and a field that comes again with another type is refused, naming it. Checked
against independent oracles: the payloads nats-py published, read back with
``json.loads``, against what ``deltalake``, ``pyarrow.dataset`` and DuckDB read from the
targets.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.sink import dataset_files, read_manifest
from natspy import with_jetstream
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(180)


def publish(url: str, subject: str, values: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each value published as one JSON payload with nats-py; the values as
    ``json.loads`` reads the payloads back."""
    payloads = [json.dumps(v).encode() for v in values]

    async def work(js: Any) -> None:
        for p in payloads:
            await js.publish(subject, p)

    with_jetstream(url, work)
    return [json.loads(p) for p in payloads]


def manifest_schema(path: Path) -> pa.Schema:
    manifest = read_manifest(path)
    assert manifest is not None
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(manifest["schema"])))


def target(kind: str, path: Path) -> ja.DeltaTarget | ja.ParquetTarget:
    return ja.DeltaTarget(path) if kind == "delta" else ja.ParquetTarget(path)


def test_a_parquet_manifest_holds_a_field_added_inside_a_struct(
    shared_nats_server: NatsServer, client: ja.Client, stream: str, tmp_path: Path
) -> None:
    """Two commits, the second's struct with a field the first's lacked: the
    manifest's schema has it, and reading the files with it (as docs/sink.md advises)
    gives every value as published; DuckDB's union_by_name agrees."""
    published = publish(shared_nats_server.url, f"{stream}.x", [{"o": {"x": i}} for i in range(5)])
    ja.run_sink(client, [stream], ja.ParquetTarget(tmp_path), codec="json")
    published += publish(
        shared_nats_server.url, f"{stream}.x", [{"o": {"x": 9, "y": "new"}, "top": 1}]
    )
    report = ja.run_sink(client, [stream], ja.ParquetTarget(tmp_path), codec="json")
    assert report.rows == 1
    schema = manifest_schema(tmp_path)
    assert schema.field("o").type == pa.struct([("x", pa.int64()), ("y", pa.string())])
    assert schema.field("top").type == pa.int64()
    files = dataset_files(tmp_path)
    assert len(files) == 2
    rows = sorted(ds.dataset(files, schema=schema).to_table().to_pylist(), key=lambda r: r["seq"])
    expected = [
        {"o": {"x": v["o"]["x"], "y": v["o"].get("y")}, "top": v.get("top")} for v in published
    ]
    assert [{"o": r["o"], "top": r["top"]} for r in rows] == expected
    by_duckdb = duckdb.sql(
        f"select o from read_parquet({files!r}, union_by_name=true) order by seq"
    ).fetchall()
    assert [r[0] for r in by_duckdb] == [e["o"] for e in expected]


@pytest.mark.parametrize("kind", ["delta", "parquet"])
def test_a_struct_field_that_comes_with_another_type_is_refused(
    shared_nats_server: NatsServer, client: ja.Client, stream: str, tmp_path: Path, kind: str
) -> None:
    """Three runs: ``o:{x}``, then ``o.y`` a string, then ``o.y`` an integer. The
    third is refused naming ``o.y`` by both targets, before anything lands: the
    target holds the first two values, as published, and the position of the second."""
    subject = f"{stream}.x"
    published = publish(shared_nats_server.url, subject, [{"o": {"x": 0}}])
    ja.run_sink(client, [stream], target(kind, tmp_path), codec="json")
    published += publish(shared_nats_server.url, subject, [{"o": {"x": 1, "y": "text"}}])
    ja.run_sink(client, [stream], target(kind, tmp_path), codec="json")
    publish(shared_nats_server.url, subject, [{"o": {"x": 2, "y": 5}}])
    with pytest.raises(BadInputError, match=r"'o\.y' arrives as int64 but is string"):
        ja.run_sink(client, [stream], target(kind, tmp_path), codec="json")
    if kind == "delta":
        table = DeltaTable(str(tmp_path)).to_pyarrow_table()
    else:
        table = ds.dataset(dataset_files(tmp_path), schema=manifest_schema(tmp_path)).to_table()
    rows = sorted(table.to_pylist(), key=lambda r: r["seq"])
    assert [r["seq"] for r in rows] == [1, 2]
    assert [r["o"] for r in rows] == [{"x": 0, "y": None}, {"x": 1, "y": "text"}]
    assert [{"x": v["o"]["x"], "y": v["o"].get("y")} for v in published] == [r["o"] for r in rows]
    assert target(kind, tmp_path).positions([stream]) == {stream: 2}
