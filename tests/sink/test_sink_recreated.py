"""A stream deleted and made again under its name is not the stream a table holds,
even once it has grown past the table's position: the sink refuses it, naming the
stream and both creation times, and lands nothing. A table of an older release, which
recorded no creation time, is taken and records one from then on. The tables are read
back with ``deltalake`` and the Parquet manifest's JSON."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError, NotFoundError
from jetstream_arrow.sink import app_id
from jetstream_arrow.sink.parquet import MANIFEST


def _fill(client: ja.Client, stream: str, start: int, count: int) -> None:
    data = [json.dumps({"i": i}).encode() for i in range(start, start + count)]
    client.publish(pa.table({"subject": [f"{stream.lower()}.x"] * count, "data": data}))


def _created_text(client: ja.Client, stream: str) -> str:
    """The stream's creation time as the server wrote it, to 9 digits, in UTC."""
    raw = client.stream_info(stream).raw["created"]
    assert raw.endswith("Z"), raw
    base, _, fraction = raw[:-1].partition(".")
    return f"{base}.{fraction.ljust(9, '0')}Z"


def _created_ns(client: ja.Client, stream: str) -> int:
    from datetime import datetime, timezone

    text = _created_text(client, stream)
    whole = datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return int(whole.timestamp()) * 1_000_000_000 + int(text[20:29])


def _held(kind: str, path: Path) -> Any:
    """What the table holds, by its own reader: Delta's version and rows; the Parquet
    manifest's text."""
    if kind == "delta":
        table = DeltaTable(str(path))
        return table.version(), table.to_pyarrow_table().sort_by("seq").to_pylist()
    return (path / MANIFEST).read_text()


@pytest.mark.parametrize("kind", ["delta", "parquet"])
def test_a_stream_made_again_and_grown_past_the_position_is_refused_by_name(
    shared_nats_server, unique_name, tmp_path, kind
):
    stream = unique_name("R")
    path = tmp_path / "t"
    target = ja.DeltaTarget if kind == "delta" else ja.ParquetTarget
    with ja.connect(shared_nats_server.url) as client:
        client.create_stream(stream, [f"{stream.lower()}.>"])
        _fill(client, stream, 0, 10)
        old = _created_text(client, stream)
        assert ja.run_sink(client, [stream], target(path), codec="json").rows == 10
        client.delete_stream(stream)
        client.create_stream(stream, [f"{stream.lower()}.>"])
        _fill(client, stream, 100, 20)
        new = _created_text(client, stream)
        assert new != old
        before = _held(kind, path)
        with pytest.raises(BadInputError) as refused:
            ja.run_sink(client, [stream], target(path), codec="json")
        text = str(refused.value)
        assert f"stream {stream} was created at {new}" in text, text
        assert f"created at {old}" in text and "new table" in text, text
    assert _held(kind, path) == before
    if kind == "delta":
        landed = DeltaTable(str(path)).to_pyarrow_table()
        assert sorted(landed.column("i").to_pylist()) == list(range(10))


def test_a_following_sink_stops_when_its_stream_is_made_again(
    shared_nats_server, unique_name, tmp_path
):
    stream = unique_name("F")
    path = tmp_path / "t"
    with ja.connect(shared_nats_server.url) as client:
        client.create_stream(stream, [f"{stream.lower()}.>"])
        _fill(client, stream, 0, 10)
        stop = threading.Event()
        outcome: dict[str, Any] = {}
        seen = threading.Event()

        def progress(state: ja.sink.SinkProgress) -> None:
            if state.positions.get(stream) == 10:
                seen.set()

        def sink() -> None:
            try:
                ja.run_sink(
                    client,
                    [stream],
                    ja.DeltaTarget(path),
                    follow=True,
                    codec="json",
                    commit_seconds=0.1,
                    stop=stop,
                    on_progress=progress,
                )
            except BaseException as e:
                outcome["error"] = e

        thread = threading.Thread(target=sink, daemon=True)
        thread.start()
        try:
            assert seen.wait(30), "the sink did not land 10 messages within 30 s"
            client.delete_stream(stream)
            client.create_stream(stream, [f"{stream.lower()}.>"])
            _fill(client, stream, 100, 20)
            thread.join(30)
        finally:
            stop.set()
            thread.join(30)
        assert not thread.is_alive()
    error = outcome.get("error")
    # Found deleted (between the two calls above) or made again: either way it stops.
    assert isinstance(error, (BadInputError, NotFoundError)), repr(error)
    table = DeltaTable(str(path))
    assert table.transaction_version(app_id(stream)) == 10
    assert sorted(table.to_pyarrow_table().column("i").to_pylist()) == list(range(10))


@pytest.mark.parametrize("kind", ["delta", "parquet"])
def test_a_table_without_a_creation_time_is_taken_and_gets_one(
    shared_nats_server, unique_name, tmp_path, kind
):
    stream = unique_name("O")
    path = tmp_path / "t"
    with ja.connect(shared_nats_server.url) as client:
        client.create_stream(stream, [f"{stream.lower()}.>"])
        _fill(client, stream, 0, 5)
        if kind == "delta":
            # As an older release made it: the rows and the position only.
            rows = client.read(stream).read_all()
            write_deltalake(
                str(path),
                rows,
                commit_properties=CommitProperties(
                    app_transactions=[Transaction(app_id(stream), 5)]
                ),
            )
        else:
            ja.run_sink(client, [stream], ja.ParquetTarget(path))
            manifest = json.loads((path / MANIFEST).read_text())
            del manifest["created"]
            (path / MANIFEST).write_text(json.dumps(manifest))
        _fill(client, stream, 5, 3)
        target = ja.DeltaTarget if kind == "delta" else ja.ParquetTarget
        report = ja.run_sink(client, [stream], target(path))
        assert report.rows == 3 and report.positions == {stream: 8}
        created = _created_ns(client, stream)
    if kind == "delta":
        table = DeltaTable(str(path))
        assert table.transaction_version(f"jetstream-arrow-created:{stream}") == created
        assert sorted(table.to_pyarrow_table().column("seq").to_pylist()) == list(range(1, 9))
    else:
        manifest = json.loads((path / MANIFEST).read_text())
        assert manifest["created"] == {stream: created}
