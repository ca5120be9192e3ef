"""load and export through the command line against a real nats-server."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest

from cli_helpers import cli
from natspy import data_messages, first_data_seq

ROWS = 2_500


def sample_table(rows: int = ROWS) -> pa.Table:
    names = ["plain", 'with "quotes"', "comma, inside", "Zürich ✓", "back\\slash", ""]
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "name": pa.array([f"{names[i % len(names)]}-{i}" for i in range(rows)]),
            "score": pa.array([i * 0.25 + 0.125 for i in range(rows)], pa.float64()),
            "flag": pa.array([i % 3 == 0 for i in range(rows)]),
        }
    )


def write(table: pa.Table, path: Path, fmt: str) -> None:
    if fmt == "parquet":
        pq.write_table(table, path, row_group_size=700)
    elif fmt == "csv":
        pacsv.write_csv(table, path)
    elif fmt == "jsonl":
        path.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in table.to_pylist())
        )
    else:
        with ipc.new_file(path, table.schema) as w:
            for batch in table.to_batches(max_chunksize=600):
                w.write_batch(batch)


def read(path: Path, fmt: str) -> pa.Table:
    if fmt == "parquet":
        return pq.read_table(path)
    if fmt == "csv":
        return pacsv.read_csv(path)
    if fmt == "jsonl":
        return pajson.read_json(path)
    with ipc.open_file(path) as r:
        return r.read_all()


def stream_messages(url: str, stream: str) -> int:
    """The data messages of ``stream`` (a load keeps one position message per file in
    a stream it made, which is not a row)."""
    return data_messages(url, stream)


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl", "arrow"])
def test_round_trip_rows_as_json(nats_server, tmp_path, capsys, fmt):
    table = sample_table()
    src = tmp_path / f"rows.{fmt}"
    write(table, src, fmt)

    run = cli(
        capsys,
        "load",
        str(src),
        "--stream",
        "ROWS",
        "--subject",
        "rows.in",
        "--create-stream",
        "--batch-rows",
        "1000",
        "-s",
        nats_server.url,
    )
    assert run.code == 0, run.err
    assert f"loaded {ROWS:,} rows" in run.out
    assert f"{ROWS:,} stored, 0 duplicates" in run.out
    assert stream_messages(nats_server.url, "ROWS") == ROWS

    out = tmp_path / f"out.{fmt}"
    run = cli(
        capsys,
        "export",
        "ROWS",
        "-o",
        str(out),
        "--data-as",
        "json",
        "--columns",
        "id,name,score,flag",
        "--batch-rows",
        "900",
        "-s",
        nats_server.url,
    )
    assert run.code == 0, run.err
    assert f"exported {ROWS:,} messages" in run.out
    back = read(out, fmt)
    assert back.equals(table), (back.schema, back.slice(0, 3).to_pylist())
    assert not list(tmp_path.glob(".out.*partial*"))


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl", "arrow"])
def test_round_trip_subject_and_data_columns(nats_server, tmp_path, capsys, fmt):
    rows = 1_200
    table = pa.table(
        {
            "topic": [f"events.{('a', 'b', 'c')[i % 3]}" for i in range(rows)],
            "payload": [f'{{"n": {i}, "text": "line {i}"}}' for i in range(rows)],
        }
    )
    src = tmp_path / f"events.{fmt}"
    write(table, src, fmt)
    run = cli(
        capsys,
        "load",
        str(src),
        "--stream",
        "EVENTS",
        "--subject-column",
        "topic",
        "--data-column",
        "payload",
        "--create-stream",
        "--stream-subjects",
        "events.>",
        "-s",
        nats_server.url,
    )
    assert run.code == 0, run.err

    out = tmp_path / f"out.{fmt}"
    run = cli(capsys, "export", "EVENTS", "-o", str(out), "-s", nats_server.url)
    assert run.code == 0, run.err
    back = read(out, fmt)
    assert back.column("subject").to_pylist() == table.column("topic").to_pylist()
    data = back.column("data").to_pylist()
    if fmt in ("parquet", "arrow"):
        data = [d.decode() for d in data]  # binary by default in these formats
    assert data == table.column("payload").to_pylist()
    # one message per row, in the file's order: the rows follow the file's first
    # position message
    first = first_data_seq(nats_server.url, "EVENTS")
    assert back.column("seq").to_pylist() == list(range(first, first + rows))


def test_export_filters_and_ranges(nats_server, tmp_path, capsys):
    src = tmp_path / "events.parquet"
    pq.write_table(
        pa.table({"s": [f"f.{i % 2}" for i in range(100)], "d": [str(i) for i in range(100)]}), src
    )
    assert (
        cli(
            capsys,
            "load",
            str(src),
            "--stream",
            "F",
            "--subject-column",
            "s",
            "--data-column",
            "d",
            "--create-stream",
            "--stream-subjects",
            "f.>",
            "-s",
            nats_server.url,
        ).code
        == 0
    )

    out = tmp_path / "odd.jsonl"
    run = cli(capsys, "export", "F", "-o", str(out), "--subjects", "f.1", "-s", nats_server.url)
    assert run.code == 0, run.err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["data"] for r in rows] == [str(i) for i in range(1, 100, 2)]
    assert {r["subject"] for r in rows} == {"f.1"}

    out = tmp_path / "range.csv"
    run = cli(
        capsys,
        "export",
        "F",
        "-o",
        str(out),
        "--start-seq",
        "11",
        "--end-seq",
        "20",
        "-s",
        nats_server.url,
    )
    assert run.code == 0, run.err
    assert pacsv.read_csv(out).column("seq").to_pylist() == list(range(11, 21))

    out = tmp_path / "future.parquet"
    run = cli(
        capsys,
        "export",
        "F",
        "-o",
        str(out),
        "--since",
        "2200-01-01T00:00:00Z",
        "-s",
        nats_server.url,
    )
    assert run.code == 0, run.err
    assert pq.read_table(out).num_rows == 0

    out = tmp_path / "recent.parquet"
    run = cli(capsys, "export", "F", "-o", str(out), "--since", "10m", "-s", nats_server.url)
    assert run.code == 0, run.err
    assert pq.read_table(out).num_rows == 100


def test_headers_and_msg_id_columns(nats_server, tmp_path, capsys):
    src = tmp_path / "h.csv"
    src.write_text(
        "key,body,meta\n"
        'k1,hello,"{""Trace-Id"": ""t1""}"\n'
        'k2,world,"{""Trace-Id"": ""t2"", ""Tags"": [""a"", ""b""]}"\n'
        'k1,again,"{""Trace-Id"": ""t3""}"\n'
    )
    run = cli(
        capsys,
        "load",
        str(src),
        "--stream",
        "H",
        "--subject",
        "h.x",
        "--data-column",
        "body",
        "--headers-column",
        "meta",
        "--msg-id-column",
        "key",
        "--create-stream",
        "-s",
        nats_server.url,
    )
    assert run.code == 0, run.err
    # k1 twice: the second is a duplicate of the first by its msg id
    assert "2 stored, 1 duplicates" in run.out

    out = tmp_path / "h.jsonl"
    run = cli(capsys, "export", "H", "-o", str(out), "--include-headers", "-s", nats_server.url)
    assert run.code == 0, run.err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["data"] for r in rows] == ["hello", "world"]
    assert rows[0]["headers"]["Nats-Msg-Id"] == ["k1"]
    assert rows[0]["headers"]["Trace-Id"] == ["t1"]
    assert rows[1]["headers"]["Tags"] == ["a", "b"]


def test_progress_line(nats_server, tmp_path, capsys):
    src = tmp_path / "p.parquet"
    pq.write_table(sample_table(500), src)
    run = cli(
        capsys,
        "load",
        str(src),
        "--stream",
        "P",
        "--subject",
        "p",
        "--create-stream",
        "--progress",
        "-s",
        nats_server.url,
    )
    assert run.code == 0, run.err
    assert "rows/s" in run.err and "MB/s" in run.err
