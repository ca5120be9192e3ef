"""The lake sink given no value schema lands every JSON field, whenever it first
appears: after the read's sample (1,000 messages), nested in a struct that gains it,
in objects that were empty at first, or with a value where the sample had only nulls.
Checked against independent oracles: the payloads nats-py published, read back with
``json.loads``, against what ``deltalake`` and ``pyarrow.dataset`` read from the
targets. The package's own ``client.read`` is not the oracle.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import jetstream_arrow as ja
from jetstream_arrow.exceptions import NewFieldError, NothingToInferError
from jetstream_arrow.sink import dataset_files
from natspy import with_jetstream
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(180)


def publish(url: str, subject: str, values: list[dict[str, Any]]) -> list[bytes]:
    """Each value published as one JSON payload with nats-py, in order; the payloads."""
    payloads = [json.dumps(v).encode() for v in values]

    async def work(js: Any) -> None:
        for p in payloads:
            await js.publish(subject, p)

    with_jetstream(url, work)
    return payloads


def landed(kind: str, path: Path) -> list[dict[str, Any]]:
    """The rows the target holds, by sequence, as its own format's reader reads them."""
    if kind == "delta":
        table = DeltaTable(str(path)).to_pyarrow_table()
    else:
        # The files' schemas unified: a file written before a field appeared lacks it.
        files = dataset_files(path)
        schema = pa.unify_schemas([pq.read_schema(f) for f in files], promote_options="permissive")
        table = ds.dataset(files, schema=schema, format="parquet").to_table()
    return sorted(table.to_pylist(), key=lambda r: r["seq"])


def same_value(stored: Any, published: Any) -> bool:
    """A published JSON value as the table holds it: an object as a struct whose fields
    the object lacks are null; an object with no fields, and an empty list before any
    list of the field had an item, as null (docs/sink.md)."""
    if published == {} or published == []:
        # An object with no fields, or a list with no items of a type seen so far.
        return (
            stored is None
            or stored == published
            or (isinstance(stored, dict) and all(v is None for v in stored.values()))
        )
    if isinstance(published, dict):
        return (
            isinstance(stored, dict)
            and all(same_value(stored.get(k), v) for k, v in published.items())
            and all(v is None for k, v in stored.items() if k not in published)
        )
    if isinstance(published, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(published)
            and all(same_value(s, p) for s, p in zip(stored, published, strict=True))
        )
    return bool(stored == published)


def check(kind: str, path: Path, payloads: list[bytes]) -> None:
    rows = landed(kind, path)
    assert [r["seq"] for r in rows] == list(range(1, len(payloads) + 1))
    message_columns = {"stream", "subject", "seq", "timestamp"}
    for row, payload in zip(rows, payloads, strict=True):
        value = {k: v for k, v in row.items() if k not in message_columns}
        published = json.loads(payload)
        assert same_value(value, published), (row["seq"], value, published)


HISTORIES: dict[str, list[dict[str, Any]]] = {
    # A field first seen after the read's sample of 1,000.
    "late": [{"a": i} for i in range(1500)] + [{"a": i, "discount": 0.5} for i in range(10)],
    # Objects empty for the whole sample.
    "empty_first": [{} for _ in range(1000)] + [{"a": i, "s": "x"} for i in range(5)],
    # A struct that gains a field, and a list of objects that gains one.
    "nested": [{"a": i, "s": {"x": i}, "l": [{"p": 1}]} for i in range(1100)]
    + [{"a": 1, "s": {"x": 1, "y": "late"}, "l": [{"p": 2, "q": True}]} for _ in range(3)],
    # A struct empty for the whole sample gains a field.
    "was_empty_struct": [{"a": i, "s": {}} for i in range(1000)] + [{"a": 1, "s": {"z": 7}}],
    # Null (and empty lists) for the whole sample, then values.
    "was_null": [{"a": i, "n": None, "l": []} for i in range(1000)]
    + [{"a": 1, "n": 2.5, "l": ["x"]}],
}


#: Commits of rows before and after the field appeared; or one commit holding both.
LAYOUTS = {"commits": {"commit_rows": 700}, "one_commit": {"batch_rows": 300}}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("kind", ["delta", "parquet"])
@pytest.mark.parametrize("history", sorted(HISTORIES))
def test_a_field_first_seen_after_the_sample_is_landed(
    shared_nats_server: NatsServer,
    client: ja.Client,
    new_stream: Callable[..., str],
    tmp_path: Path,
    kind: str,
    history: str,
    layout: str,
) -> None:
    stream = new_stream(history)
    payloads = publish(shared_nats_server.url, f"{stream}.x", HISTORIES[history])
    path = tmp_path / kind
    target = ja.DeltaTarget(path) if kind == "delta" else ja.ParquetTarget(path)
    report = ja.run_sink(client, [stream], target, codec="json", **LAYOUTS[layout])
    assert report.rows == len(payloads)
    assert report.positions == {stream: len(payloads)}
    check(kind, path, payloads)
    # A second run has nothing more to land.
    again = ja.DeltaTarget(path) if kind == "delta" else ja.ParquetTarget(path)
    assert ja.run_sink(client, [stream], again, codec="json").rows == 0


def test_a_read_fails_on_a_new_field_only_when_asked(
    shared_nats_server: NatsServer, client: ja.Client, stream: str
) -> None:
    """``on_new_field="fail"`` names the message and the field; the default leaves the
    field out, as before."""
    publish(shared_nats_server.url, f"{stream}.x", [{"a": 1}, {"a": 2, "s": {"y": 1}}, [1], 2])
    schema = pa.schema([("a", pa.int64()), ("s", pa.struct([("x", pa.int64())]))])
    ignored = client.read(stream, codec=ja.ValueCodec("json", schema=schema), end_seq=2).read_all()
    assert ignored.column("value").to_pylist() == [
        {"a": 1, "s": None},
        {"a": 2, "s": {"x": None}},
    ]
    strict = ja.ValueCodec("json", schema=schema, on_new_field="fail", on_malformed="permissive")
    with pytest.raises(NewFieldError) as raised:
        client.read(stream, codec=strict, end_seq=2).read_all()
    assert (raised.value.seq, raised.value.field) == (2, "s.y")
    with pytest.raises(ja.exceptions.BadInputError, match="on_new_field"):
        client.read(stream, codec=ja.ValueCodec("arrow", on_new_field="fail")).read_all()
    # A sample with no object to infer from is its own class (the sink goes by it).
    with pytest.raises(NothingToInferError):
        client.read(stream, codec="json", start_seq=3).read_all()


#: A work queue's late fields: after the consumer's first sample, one top level, one
#: nested in a struct the sample knew.
QUEUED = [{"a": i, "s": {"x": i}} for i in range(1500)] + [
    {"a": i, "s": {"x": i, "late": f"l{i}"}, "discount": 0.5 + i} for i in range(10)
]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_work_queue_lands_a_field_first_seen_after_its_sample(
    shared_nats_server: NatsServer,
    client: ja.Client,
    new_stream: Callable[..., str],
    tmp_path: Path,
    layout: str,
) -> None:
    """Consumed through a durable, a pull whose batch holds a new field is acknowledged
    by no one: its messages come again and land with the grown schema, each once, and
    the work queue is empty after."""
    stream = new_stream("QUEUE_LATE", retention="workqueue")
    payloads = publish(shared_nats_server.url, f"{stream}.x", QUEUED)
    path = tmp_path / "delta"
    report = ja.run_sink(
        client, [stream], ja.DeltaTarget(path), codec="json", durable="lake", **LAYOUTS[layout]
    )
    assert report.rows == len(payloads)
    assert report.positions == {stream: len(payloads)}
    # Every sequence once, each value as published (the late fields too).
    check("delta", path, payloads)
    rows = landed("delta", path)
    assert [r["discount"] for r in rows[-10:]] == [0.5 + i for i in range(10)]
    assert [r["s"]["late"] for r in rows[-10:]] == [f"l{i}" for i in range(10)]

    async def left(js: Any) -> int:
        # The sink flushed its acks; the server removes what they acknowledge from
        # the work queue right after, so a loaded machine may show them a moment.
        for _ in range(100):
            messages = int((await js.stream_info(stream)).state.messages)
            if messages == 0:
                break
            await asyncio.sleep(0.1)
        return messages

    assert with_jetstream(shared_nats_server.url, left) == 0


def test_a_delta_column_of_the_null_type_takes_the_type_a_value_gives_it(
    shared_nats_server: NatsServer,
    client: ja.Client,
    new_stream: Callable[..., str],
    tmp_path: Path,
) -> None:
    """A table an earlier sink made holds columns of the null type (fields always null
    then, at the top and nested); deltalake's merge retypes such a column, so the sink
    lands values that type it, and the earlier rows read as null."""
    from deltalake import write_deltalake

    path = tmp_path / "delta"
    s_old = pa.struct([("x", pa.int64()), ("n", pa.null())])
    write_deltalake(
        str(path),
        pa.table({"a": pa.array([-1], pa.int64()), "n": pa.nulls(1), "s": pa.array([None], s_old)}),
    )
    assert DeltaTable(str(path)).to_pyarrow_table().schema.field("n").type == pa.null()
    stream = new_stream("NULL_TYPED")
    payloads = publish(
        shared_nats_server.url,
        f"{stream}.x",
        [{"a": i, "n": 1.5 * i, "s": {"x": i, "n": f"v{i}"}} for i in range(3)],
    )
    report = ja.run_sink(client, [stream], ja.DeltaTarget(path), codec="json")
    assert report.rows == 3
    table = DeltaTable(str(path)).to_pyarrow_table()
    assert table.schema.field("n").type == pa.float64()
    assert table.schema.field("s").type.field("n").type in (pa.string(), pa.large_string())
    rows = table.to_pylist()
    assert [r for r in rows if r["seq"] is None] == [
        {
            "a": -1,
            "n": None,
            "s": None,
            "stream": None,
            "subject": None,
            "seq": None,
            "timestamp": None,
        }
    ]
    landed_rows = sorted((r for r in rows if r["seq"] is not None), key=lambda r: r["seq"])
    assert [r["seq"] for r in landed_rows] == [1, 2, 3]
    for row, payload in zip(landed_rows, payloads, strict=True):
        value = {k: row[k] for k in ("a", "n", "s")}
        assert same_value(value, json.loads(payload)), (row, payload)
