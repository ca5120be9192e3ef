"""Helpers shared by the engine tests (publish, read, consumers, errors, fork, domains)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

import jetstream_arrow as ja

HEADERS_TYPE = pa.map_(pa.utf8(), pa.list_(pa.utf8()))


def rows(
    n: int,
    subject_prefix: str,
    *,
    start: int = 0,
    msg_ids: bool = True,
    headers: bool = True,
    subjects: int = 3,
) -> pa.Table:
    """``n`` rows in the publish schema: subject ``<prefix>.<i % subjects>``, data
    ``b"payload-<i>"``, headers ``{"X-Row": [i], "X-Multi": ["a", "b"] on even rows}``,
    msg_id ``id-<i>``. ``start`` offsets ``i``."""
    idx = range(start, start + n)
    columns: dict[str, Any] = {
        "subject": pa.array([f"{subject_prefix}.{i % subjects}" for i in idx], pa.utf8()),
        "data": pa.array([f"payload-{i}".encode() for i in idx], pa.binary()),
    }
    if headers:
        columns["headers"] = headers_column(idx)
    if msg_ids:
        columns["msg_id"] = pa.array([f"id-{i}" for i in idx], pa.utf8())
    return pa.table(columns)


def headers_column(idx: range) -> pa.MapArray:
    """map<utf8, list<utf8>>: every row has X-Row, even rows also a two-valued X-Multi."""
    offsets = [0]
    keys: list[str] = []
    values: list[list[str]] = []
    for i in idx:
        keys.append("X-Row")
        values.append([str(i)])
        if i % 2 == 0:
            keys.append("X-Multi")
            values.append(["a", "b"])
        offsets.append(len(keys))
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.array(keys, pa.utf8()),
        pa.array(values, pa.list_(pa.utf8())),
        type=HEADERS_TYPE,
    )


def expected_headers(i: int, msg_id: str | None) -> dict[str, list[str]]:
    out = {"X-Row": [str(i)]}
    if i % 2 == 0:
        out["X-Multi"] = ["a", "b"]
    if msg_id is not None:
        out["Nats-Msg-Id"] = [msg_id]
    return out


def as_dicts(headers: list[list[tuple[str, list[str]]] | None]) -> list[dict[str, list[str]]]:
    """A map column's to_pylist() as dicts (order of keys does not matter)."""
    return [dict(h or []) for h in headers]


def read_all(client: ja.Client, stream: str, **options: Any) -> pa.Table:
    reader = client.read(stream, **options)
    with reader:
        return reader.read_all()


def stream_state(client: ja.Client, stream: str) -> Any:
    return client.stream_info(stream).state


def stored_rows(result: Any) -> list[int]:
    """Indices of the rows a publish stored or found duplicate, from a PublishResult."""
    acks = (
        result.acks
        if isinstance(result.acks, pa.Table)
        else pa.table(pa.record_batch(result.acks()))
    )
    seqs = acks.column("seq").to_pylist()
    return [i for i, s in enumerate(seqs) if s is not None]


def runs_of(rows: list[int]) -> Iterator[tuple[int, int]]:
    """Consecutive row numbers as ``(start, stop)`` ranges."""
    start = prev = None
    for row in rows:
        if start is None or prev is None:
            start = prev = row
        elif row == prev + 1:
            prev = row
        else:
            yield start, prev + 1
            start = prev = row
    if start is not None and prev is not None:
        yield start, prev + 1
