"""Writers' positions stay out of the tables made of a stream: the lake sink's
(Delta and Parquet, read back with deltalake and pyarrow.dataset), a KV bucket's
entries (nats-py's own KV as the oracle) and an export. The stream is written the
way users write one: `load` into a stream made by `--create-stream`, which keeps
one position per file beside the rows."""

from __future__ import annotations

import asyncio
import json

import nats
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import jetstream_arrow as ja
from cli_helpers import cli
from jetstream_arrow.positions import POSITION_SUBJECT_PREFIX, position_subject

ROWS = 250


def _loaded(url: str, stream: str, tmp_path, capsys) -> None:
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"n": list(range(ROWS)), "k": ["a", "b"] * (ROWS // 2)}), path)
    run = cli(
        capsys,
        "load", str(path), "--stream", stream, "--subject", f"{stream}.rows",
        "--create-stream", "-s", url,
    )  # fmt: skip
    assert run.code == 0, run.err


def _stored_subjects(url: str, stream: str) -> dict[str, int]:
    async def run() -> dict[str, int]:
        nc = await nats.connect(url)
        try:
            info = await nc.jetstream().stream_info(stream, subjects_filter=">")
            return dict(info.state.subjects or {})
        finally:
            await nc.close()

    return asyncio.run(run())


@pytest.mark.parametrize("kind", ["delta", "parquet"])
def test_the_lake_sink_lands_rows_and_no_position(
    shared_nats_server, unique_name, tmp_path, capsys, kind
):
    url, stream = shared_nats_server.url, unique_name("POSSINK")
    _loaded(url, stream, tmp_path, capsys)
    # The oracle sees the position beside the rows: it is there to be left out.
    subjects = _stored_subjects(url, stream)
    assert subjects[f"{stream}.rows"] == ROWS
    assert sum(n for s, n in subjects.items() if s.startswith(POSITION_SUBJECT_PREFIX)) == 1

    where = tmp_path / kind
    target = ja.DeltaTarget(str(where)) if kind == "delta" else ja.ParquetTarget(where)
    with ja.connect(url) as client:
        report = ja.run_sink(client, [stream], target, codec="json")
    assert report.rows == ROWS
    if kind == "delta":
        from deltalake import DeltaTable

        table = DeltaTable(str(where)).to_pyarrow_table()
    else:
        table = ds.dataset(where, format="parquet", exclude_invalid_files=True).to_table()
    assert table.num_rows == ROWS
    assert set(table.column("subject").to_pylist()) == {f"{stream}.rows"}
    # Value fields land as columns of their own names.
    assert sorted(table.column("n").to_pylist()) == list(range(ROWS))


def test_an_export_leaves_positions_out(shared_nats_server, unique_name, tmp_path, capsys):
    url, stream = shared_nats_server.url, unique_name("POSEXP")
    _loaded(url, stream, tmp_path, capsys)
    out = tmp_path / "out.jsonl"
    run = cli(capsys, "export", stream, "-o", str(out), "--format", "jsonl", "-s", url)
    assert run.code == 0, run.err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == ROWS
    assert {line["subject"] for line in lines} == {f"{stream}.rows"}


def test_a_kv_table_of_a_bucket_holding_positions_lists_keys_only(shared_nats_server, unique_name):
    url, bucket = shared_nats_server.url, unique_name("POSKV")

    async def fill() -> dict[str, bytes]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            kv = await js.create_key_value(bucket=bucket, history=3)
            await kv.put("alpha", b"1")
            await kv.put("beta", b"2")
            return {key: (await kv.get(key)).value for key in await kv.keys()}
        finally:
            await nc.close()

    expected = asyncio.run(fill())
    with ja.connect(url) as client:
        client.enable_exactly_once(f"KV_{bucket}")
        # A writer's position in the bucket's stream, as an exactly-once writer leaves it.
        client.publish(
            pa.table(
                {
                    "subject": [position_subject(f"KV_{bucket}", "w")],
                    "data": [b'{"writer":"w","next":2,"open":false}'],
                }
            ),
            expected_stream=f"KV_{bucket}",
        )
        entries = client.read_kv(bucket).read_all()
        # And the latest-per-subject table of the whole stream, which no key filter
        # narrows: the position is still left out.
        latest = client.read(f"KV_{bucket}", last_per_subject=True).read_all()
    assert sorted(latest.column("subject").to_pylist()) == [
        f"$KV.{bucket}.alpha",
        f"$KV.{bucket}.beta",
    ]
    assert (
        dict(
            zip(entries.column("key").to_pylist(), entries.column("value").to_pylist(), strict=True)
        )
        == expected
    )
