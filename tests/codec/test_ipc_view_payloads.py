"""Arrow IPC payloads whose columns are view types (``string_view``, ``binary_view``,
as pyarrow and Polars write them) decode into a value of the plain types: in Python
with a given plain schema, and in Spark (which has no view types) with the schema
inferred. Values are checked against pyarrow's own reading of each payload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from conftest_spark import read_df, spark
from natspy import with_jetstream

__all__ = ["spark"]

#: Three payloads of view-typed columns, one of two rows.
TABLES = [
    pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array(names, pa.string_view()),
            "blob": pa.array(blobs, pa.binary_view()),
        }
    )
    for ids, names, blobs in [
        ([1], ["alpha"], [b"\x00\x01"]),
        ([2, 3], [None, "a longer text than twelve bytes"], [b"", None]),
        ([4], ["d"], [b"x" * 20]),
    ]
]
PLAIN = pa.schema([("id", pa.int64()), ("name", pa.string()), ("blob", pa.binary())])


def _payload(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _published(url: str, stream: str) -> list[dict[str, Any]]:
    """The payloads published with nats-py; the rows pyarrow reads from them, in order."""
    payloads = [_payload(t) for t in TABLES]

    async def work(js: Any) -> None:
        for p in payloads:
            await js.publish(f"{stream}.v", p)

    with_jetstream(url, work)
    rows = []
    for p in payloads:
        table = pa.ipc.open_stream(p).read_all()
        assert table.schema.field("name").type == pa.string_view()
        rows.extend(table.to_pylist())
    return rows


def test_view_typed_payloads_read_with_a_plain_schema(
    shared_nats_server: Any, client: ja.Client, new_stream: Callable[..., str]
) -> None:
    stream = new_stream("VIEWS")
    expected = _published(shared_nats_server.url, stream)
    table = client.read(stream, codec=ja.ValueCodec("arrow", schema=PLAIN)).read_all()
    value = table.column("value").combine_chunks()
    assert value.type == pa.struct(list(PLAIN))
    assert value.to_pylist() == expected
    assert table.column("seq").to_pylist() == [1, 2, 2, 3]


@pytest.mark.spark
def test_view_typed_payloads_read_in_spark(
    spark: Any, shared_nats_server: Any, new_stream: Callable[..., str]
) -> None:
    stream = new_stream("VIEWS_SPARK")
    expected = _published(shared_nats_server.url, stream)
    df = read_df(spark, shared_nats_server.url, stream, valueFormat="arrow")
    rows = [r.asDict(recursive=True) for r in df.orderBy("seq", "value.id").collect()]
    assert [r["value"] for r in rows] == [
        {**e, "blob": None if e["blob"] is None else bytearray(e["blob"])} for e in expected
    ]
    assert [r["seq"] for r in rows] == [1, 2, 2, 3]
