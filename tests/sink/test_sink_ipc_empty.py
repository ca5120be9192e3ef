"""An Arrow IPC payload of no rows leaves its message a row: the lake sink lands it
with a null value, so the table read back with ``deltalake`` has every sequence
nats-py published (docs/payloads.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import jetstream_arrow as ja
from natspy import with_jetstream
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(120)

SCHEMA = pa.schema([("n", pa.int64(), False), ("s", pa.string())])


def ipc(rows: list[int]) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SCHEMA) as writer:
        writer.write_table(pa.table({"n": rows, "s": [str(r) for r in rows]}, schema=SCHEMA))
    return sink.getvalue().to_pybytes()


def test_a_payload_of_no_rows_lands_one_row_with_a_null_value(
    shared_nats_server: NatsServer, client: ja.Client, stream: str, tmp_path: Path
) -> None:
    payloads = [ipc([1, 2]), ipc([]), ipc([3]), ipc([])]

    async def work(js: Any) -> None:
        for p in payloads:
            await js.publish(f"{stream}.x", p)

    with_jetstream(shared_nats_server.url, work)
    report = ja.run_sink(client, [stream], ja.DeltaTarget(tmp_path), codec="arrow")
    assert report.positions == {stream: 4}
    rows = sorted(
        DeltaTable(str(tmp_path)).to_pyarrow_table().to_pylist(),
        key=lambda r: (r["seq"], r["n"] is None, r["n"]),
    )
    assert [(r["seq"], r["n"], r["s"]) for r in rows] == [
        (1, 1, "1"),
        (1, 2, "2"),
        (2, None, None),
        (3, 3, "3"),
        (4, None, None),
    ]
    assert report.rows == 5
