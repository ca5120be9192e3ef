"""The asyncio facade (``jetstream_arrow.aio``) against nats-py: what an
``AsyncClient`` publishes is what nats-py then reads stored (``STREAM.MSG.GET`` of
every sequence, headers byte for byte: ``tests/oracle_histories.py``), and what it
reads and consumes is what nats-py published and sees stored, on generated inputs:
binary, empty and Unicode payloads, headers with repeated names, JSON values with
nulls and absent fields, interior deletes and purges of a subject.

The package's work runs on an event loop of its own (``asyncio.run``); nats-py's
before and after it, on another. Hypothesis examples (``max_examples``): publish 15,
read 15, consume 10; about 10 s.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jetstream_arrow as ja
from natsserver import NatsServer
from oracle_histories import Headers, PyNats, Stored, StreamShape
from oracle_tables import BYTES, HEADER_NAMES, HEADER_VALUES, TEXT

pytestmark = pytest.mark.timeout(240)

UniqueName = Callable[[str], str]

TOKENS = ("a", "b.c", "ü", "日本.x")
#: Seconds any one asyncio body may take.
BODY_TIMEOUT = 60


def examples(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def run(body: Callable[[], Any]) -> Any:
    return asyncio.run(asyncio.wait_for(body(), BODY_TIMEOUT))


@pytest.fixture
def py(shared_nats_server: NatsServer, unique_name: UniqueName) -> Iterator[PyNats]:
    """nats-py on the shared server, with a stream of its own kept for the test (the
    server removes its store's directory with its last stream)."""
    with PyNats(shared_nats_server.url) as conn:
        anchor = unique_name("AIO_ANCHOR")
        conn.create_stream(anchor, StreamShape())
        try:
            yield conn
        finally:
            conn.delete_stream(anchor)


@dataclass(frozen=True)
class Row:
    token: str
    data: bytes
    headers: tuple[tuple[str, tuple[str, ...]], ...] | None


rows_st = st.lists(
    st.builds(
        Row,
        token=st.sampled_from(TOKENS),
        data=st.one_of(BYTES, TEXT.map(str.encode)),
        headers=st.none()
        | st.lists(
            st.tuples(
                st.sampled_from(HEADER_NAMES),
                st.lists(HEADER_VALUES, min_size=1, max_size=3).map(tuple),
            ),
            min_size=1,
            max_size=3,
            unique_by=lambda kv: kv[0],
        ).map(tuple),
    ),
    min_size=1,
    max_size=12,
)


def headers_of(row: Row) -> Headers:
    if not row.headers:
        return None
    return tuple(sorted(row.headers))


def read_headers(value: Any) -> Headers:
    """A ``headers`` cell of the package's read as :data:`Headers`."""
    if not value:
        return None
    return tuple(sorted((k, tuple(v)) for k, v in value))


@pytest.mark.timeout(240)
@examples(15)
@given(rows=rows_st, mode=st.sampled_from(("acked", "fast", "atomic")))
def test_async_publish_stores_what_nats_py_reads(
    py: PyNats, shared_nats_server: NatsServer, unique_name: UniqueName, rows: list[Row], mode: str
) -> None:
    """``await client.publish(table)`` in each mode: every row stored once, in order,
    subject, payload bytes and every header value as nats-py reads them."""
    stream = unique_name("AIOP")
    shape = StreamShape()
    config = shape.config(stream)
    config["allow_atomic"] = config["allow_batched"] = True
    py.run(py.api(f"STREAM.CREATE.{stream}", config))
    table = pa.table(
        {
            "subject": [f"{stream}.{r.token}" for r in rows],
            "data": pa.array([r.data for r in rows], pa.binary()),
            "headers": pa.array(
                [None if r.headers is None else [(k, list(v)) for k, v in r.headers] for r in rows],
                pa.map_(pa.utf8(), pa.list_(pa.utf8())),
            ),
        }
    )

    async def body() -> ja.PublishResult:
        async with await ja.connect_async(shared_nats_server.url) as client:
            options: dict[str, Any] = {} if mode == "acked" else {"mode": mode}
            return await client.publish(table, **options)

    try:
        result = run(body)
        assert (result.rows, result.stored, result.failed) == (len(rows), len(rows), 0)
        stored = py.snapshot(stream)
        assert len(stored) == len(rows)
        for row, m in zip(rows, stored, strict=True):
            assert m.subject == f"{stream}.{row.token}"
            assert m.data == row.data
            # An atomic batch's messages keep the headers they were sent with.
            kept = tuple((k, v) for k, v in (m.headers or ()) if not k.startswith("Nats-Batch-"))
            assert (kept or None) == headers_of(row), (m.headers, row.headers)
    finally:
        py.delete_stream(stream)


@pytest.mark.timeout(240)
@examples(10)
@given(
    values=st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "i": st.none() | st.integers(-(2**63), 2**63 - 1),
                "s": st.none() | TEXT,
                "f": st.none() | st.floats(allow_nan=False, allow_infinity=False),
            },
        ),
        min_size=1,
        max_size=8,
    )
)
def test_async_publish_of_json_values_is_what_json_loads_reads(
    py: PyNats,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    values: list[dict[str, Any]],
) -> None:
    """Value columns encoded as JSON by ``await client.publish(..., codec="json")``:
    each payload is the row as ``json.loads`` reads it, every field present, nulls as
    ``null``."""
    stream = unique_name("AIOJ")
    py.create_stream(stream, StreamShape())
    schema = pa.schema([("i", pa.int64()), ("s", pa.string()), ("f", pa.float64())])
    table = pa.Table.from_pylist(values, schema=schema)
    table = table.append_column("subject", pa.array([f"{stream}.j"] * len(values)))

    async def body() -> ja.PublishResult:
        async with await ja.connect_async(shared_nats_server.url) as client:
            return await client.publish(table, codec="json")

    try:
        result = run(body)
        assert result.stored == len(values)
        stored = py.snapshot(stream)
        got = [json.loads(m.data) for m in stored]
        want = [{k: v.get(k) for k in ("i", "s", "f")} for v in values]
        assert got == want
    finally:
        py.delete_stream(stream)


@dataclass(frozen=True)
class History:
    rows: list[Row]
    deletes: list[float]
    purge: str | None


histories = st.builds(
    History,
    rows=rows_st,
    deletes=st.lists(st.floats(0, 1), max_size=3),
    purge=st.none() | st.sampled_from(TOKENS),
)


def apply(py: PyNats, stream: str, history: History) -> list[Stored]:
    py.create_stream(stream, StreamShape())
    for r in history.rows:
        headers = [(k, v) for k, vs in r.headers for v in vs] if r.headers else None
        py.publish_sync(f"{stream}.{r.token}", r.data, headers)
    for w in history.deletes:
        live = py.live_seqs(stream)
        if live:
            assert py.run(py.js.delete_msg(stream, live[min(int(w * len(live)), len(live) - 1)]))
    if history.purge is not None:
        py.run(py.js.purge_stream(stream, subject=f"{stream}.{history.purge}"))
    return py.snapshot(stream)


@pytest.mark.timeout(240)
@examples(15)
@given(history=histories, method=st.sampled_from(("consumer", "direct")))
def test_async_read_returns_what_nats_py_stored(
    py: PyNats,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    history: History,
    method: str,
) -> None:
    """``async for batch in client.read(...)``: every stored message once, in order,
    with its sequence, subject, payload, headers and timestamp (microseconds)."""
    stream = unique_name("AIOR")
    try:
        stored = apply(py, stream, history)

        async def body() -> pa.Table:
            async with await ja.connect_async(shared_nats_server.url) as client:
                batches = [
                    b
                    async for b in client.read(
                        stream, include_headers=True, method=method, batch_rows=3
                    )
                ]
                schema = batches[0].schema if batches else None
                return pa.Table.from_batches(batches, schema=schema) if batches else None

        table = run(body)
        if not stored:
            assert table is None or table.num_rows == 0
            return
        got = [
            (r["seq"], r["subject"], r["data"], read_headers(r["headers"]))
            for r in table.to_pylist()
        ]
        assert got == [(m.seq, m.subject, m.data, m.headers) for m in stored]
        ts = table.column("timestamp").cast(pa.int64()).to_pylist()
        assert ts == [m.ts_us for m in stored]
    finally:
        py.delete_stream(stream)


@pytest.mark.timeout(240)
@examples(10)
@given(history=histories, how=st.sampled_from(("fetch", "messages")))
def test_async_consumer_delivers_each_stored_message_once_and_acks_it(
    py: PyNats,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    history: History,
    how: str,
) -> None:
    """A durable pull consumer the user made with nats-py (server defaults, explicit
    acks), consumed with ``fetch`` or ``messages()`` of an ``AsyncPullConsumer``:
    every stored message once, in order, and nothing left pending or unacknowledged
    once each batch is acknowledged with ``ack_sync``."""
    stream, durable = unique_name("AIOC"), "worker"
    try:
        stored = apply(py, stream, history)
        py.create_consumer(stream, {"durable_name": durable, "ack_policy": "explicit"})

        async def body() -> list[tuple[Any, ...]]:
            out: list[tuple[Any, ...]] = []
            async with await ja.connect_async(shared_nats_server.url) as client:
                consumer = client.pull_consumer(stream, durable)
                if how == "fetch":
                    while len(out) < len(stored):
                        batch = await consumer.fetch(4, expires=2, include_headers=True)
                        if not len(batch):
                            break
                        out += [
                            (r["seq"], r["subject"], r["data"], read_headers(r["headers"]))
                            for r in batch.data.to_pylist()
                        ]
                        await batch.ack_sync()
                elif stored:
                    async with consumer.messages(max_messages=4, include_headers=True) as it:
                        async for batch in it:
                            out += [
                                (r["seq"], r["subject"], r["data"], read_headers(r["headers"]))
                                for r in batch.data.to_pylist()
                            ]
                            await batch.ack_sync()
                            if len(out) >= len(stored):
                                break
            return out

        got = run(body)
        assert got == [(m.seq, m.subject, m.data, m.headers) for m in stored]
        info = py.consumer_info(stream, durable)
        assert (info["num_pending"], info["num_ack_pending"]) == (0, 0), info
    finally:
        py.delete_stream(stream)
