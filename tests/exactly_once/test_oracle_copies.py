"""A read published into another stream (a copy), checked against nats-py.

The source stream's history is applied with nats-py (publishes with binary, empty and
Unicode payloads and headers with repeated names, interior deletes, purges of a
subject); the oracle is what nats-py then sees stored in the source
(``STREAM.MSG.GET`` of every sequence, ``tests/oracle_histories.py``) and, after the
copy, in the target. The package only reads the source (``client.read(...,
include_headers=True)``, itself checked by ``tests/read/test_oracle_readers.py``) and
publishes the copy; what the target holds is never read back with the package.

The copy is transformed the way a user transforms a read before publishing it: rows
exploded (each source message repeated, the repeats alike in everything), shuffled,
subjects moved to the target. docs/publishing.md promises, with ``msg_id_prefix``:
every row of the input stored once under its id, each on its subject with its payload
and headers (less the control headers, the msg id being the copy's own
``<prefix><stream>:<seq>:<digest>``, with ``:<n>`` for the n-th of alike rows next to
each other), rows sharing an id (alike rows a shuffle moved apart) reported as
duplicates, and a copy run again, after the source changed, stores only the rows
whose ids are new.

KV buckets: a copy of a bucket's stream into another bucket's stream keeps every key's
state as nats-py's KV watcher reads it: a key deleted, purged, or expired by the
server (a ``Nats-Marker-Reason`` marker) is not live in the copy.

Hypothesis examples (``max_examples``): copies of generated histories 15; the module
takes about 15 s.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nats.js.errors import NoKeysError

import jetstream_arrow as ja
from jetstream_arrow.exceptions import JetStreamArrowError
from natsserver import NatsServer
from oracle_histories import PyNats, Stored, StreamShape
from oracle_tables import BYTES, HEADER_NAMES, HEADER_VALUES, TEXT

pytestmark = pytest.mark.timeout(240)

UniqueName = Callable[[str], str]

#: Subject tokens of a source message (after the stream's name).
TOKENS = ("a", "b.c", "ü", "日本.x")

#: What a copy's ids start with (``msg_id_prefix``).
PREFIX = "cp-"


def examples(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@pytest.fixture
def py(shared_nats_server: NatsServer, unique_name: UniqueName) -> Iterator[PyNats]:
    """nats-py on the shared server, with a stream of its own kept for the test: the
    server removes its store's directory with its last stream, and a stream made
    meanwhile fails (10049), which the streams of each example, made and deleted in
    turn, would run into."""
    with PyNats(shared_nats_server.url) as conn:
        anchor = unique_name("CPY_ANCHOR")
        conn.create_stream(anchor, StreamShape())
        try:
            yield conn
        finally:
            conn.delete_stream(anchor)


# -- generated sources and copies ---------------------------------------------------------


@dataclass(frozen=True)
class Message:
    token: str
    data: bytes
    headers: tuple[tuple[str, str], ...] | None  # repeated names allowed, in order


@dataclass(frozen=True)
class CopyCase:
    first: list[Message]  # published before the first copy
    deletes: list[float]  # interior deletes (0..1 of the live ones) before it
    purge: str | None  # a subject token purged before it
    later: list[Message]  # published between the first copy and the second
    later_deletes: list[float]  # deleted between the two copies
    repeats: list[int]  # how many rows each source message becomes (by position in the read)
    shuffle: bool  # the rows shuffled (alike rows no longer next to each other)
    seed: int  # of the shuffle


def _payloads() -> st.SearchStrategy[bytes]:
    return st.one_of(BYTES, TEXT.map(str.encode))


messages = st.builds(
    Message,
    token=st.sampled_from(TOKENS),
    data=_payloads(),
    headers=st.none()
    | st.lists(st.tuples(st.sampled_from(HEADER_NAMES), HEADER_VALUES), min_size=1, max_size=4).map(
        tuple
    ),
)


@st.composite
def copy_cases(draw: st.DrawFn) -> CopyCase:
    first = draw(st.lists(messages, min_size=1, max_size=8))
    later = draw(st.lists(messages, max_size=4))
    n = len(first) + len(later)
    return CopyCase(
        first=first,
        deletes=draw(st.lists(st.floats(0, 1), max_size=2)),
        purge=draw(st.none() | st.sampled_from(TOKENS)),
        later=later,
        later_deletes=draw(st.lists(st.floats(0, 1), max_size=2)),
        repeats=draw(st.lists(st.integers(1, 3), min_size=n, max_size=n)),
        shuffle=draw(st.booleans()),
        seed=draw(st.integers(0, 2**32)),
    )


def _publish(py: PyNats, stream: str, batch: list[Message]) -> None:
    for m in batch:
        py.publish_sync(f"{stream}.{m.token}", m.data, list(m.headers) if m.headers else None)


def _delete(py: PyNats, stream: str, where: list[float]) -> None:
    for w in where:
        live = py.live_seqs(stream)
        if live:
            seq = live[min(int(w * len(live)), len(live) - 1)]
            assert py.run(py.js.delete_msg(stream, seq))


def _copy_table(
    client: ja.Client,
    src: str,
    dst: str,
    case: CopyCase,
) -> tuple[pa.Table, list[int]]:
    """The source read (by the package), exploded, maybe shuffled, its subjects moved
    to ``dst``; and the source sequence of each row."""
    read = client.read(src, include_headers=True).read_all()
    seqs = read.column("seq").to_pylist()
    take: list[int] = []
    for i, seq in enumerate(seqs):
        # The repeats of a message are drawn by its sequence, so the second copy
        # explodes each message as the first did.
        take += [i] * case.repeats[(seq - 1) % len(case.repeats)]
    if case.shuffle:
        random.Random(case.seed).shuffle(take)
    table = read.take(pa.array(take, pa.int64()))
    moved = pc.replace_substring_regex(table.column("subject"), f"^{src}\\.", f"{dst}.")
    table = table.set_column(table.schema.get_field_index("subject"), "subject", moved)
    return table, [seqs[t] for t in take]


def _content(m: Stored, src: str, dst: str) -> tuple[Any, ...]:
    """A stored message as a copy must reproduce it: subject (moved), payload, headers
    without the msg id."""
    headers = tuple((k, v) for k, v in (m.headers or ()) if k != "Nats-Msg-Id")
    return (m.subject.replace(f"{dst}.", f"{src}.", 1), m.data, headers or None)


def _check_copy(
    py: PyNats, src: str, dst: str, expected: Counter[tuple[Any, ...]], rows: int
) -> list[Stored]:
    stored = py.snapshot(dst)
    assert len(stored) == rows, f"{len(stored)} messages in the copy for {rows} rows"
    got = Counter(_content(m, src, dst) for m in stored)
    assert got == expected, (got - expected, expected - got)
    ids = [dict(m.headers or ()).get("Nats-Msg-Id") for m in stored]
    assert all(i is not None and i[0].startswith(f"{PREFIX}{src}:") for i in ids), ids
    assert len({i[0] for i in ids if i}) == len(ids), "two messages of the copy share an id"
    return stored


def copy_keys(row_seqs: list[int]) -> list[tuple[int, int]]:
    """docs/publishing.md's numbering of a copy's rows: a row is its source message
    and, among alike rows, its order in the run of consecutive rows of that message
    (``:<n>`` after the id). Here every row of a message is alike (an explode of it),
    so the key is ``(seq, n)``; rows of one key share an id, and the server keeps the
    first of them."""
    keys = []
    for i, seq in enumerate(row_seqs):
        n = keys[-1][1] + 1 if i and row_seqs[i - 1] == seq else 0
        keys.append((seq, n))
    return keys


@pytest.mark.timeout(300)
@examples(15)
@given(case=copy_cases())
def test_a_copy_stores_each_numbered_row_once_with_its_payload_and_headers(
    client: ja.Client, py: PyNats, unique_name: UniqueName, case: CopyCase
) -> None:
    """An exploded (and maybe shuffled) copy of a read: each row stored once under its
    id, subject, payload bytes and every header value as nats-py reads the source,
    and rows sharing an id (alike rows a shuffle moved apart) reported as duplicates,
    none failed; a copy run again after the source grew and lost messages stores
    exactly the rows whose ids are new."""
    src, dst = unique_name("CPS"), unique_name("CPD")
    py.create_stream(src, StreamShape())
    py.create_stream(dst, StreamShape())
    try:
        _publish(py, src, case.first)
        _delete(py, src, case.deletes)
        if case.purge is not None:
            py.run(py.js.purge_stream(src, subject=f"{src}.{case.purge}"))
        source = {m.seq: m for m in py.snapshot(src)}

        table, row_seqs = _copy_table(client, src, dst, case)
        assert sorted(set(row_seqs)) == sorted(source), "the read is not the source"
        result = client.publish(table, msg_id_prefix=PREFIX)
        keys = set(copy_keys(row_seqs))
        assert (result.rows, result.stored, result.duplicates, result.failed) == (
            len(row_seqs),
            len(keys),
            len(row_seqs) - len(keys),
            0,
        )
        expected = Counter(_content(source[seq], src, src) for seq, _ in keys)
        _check_copy(py, src, dst, expected, len(keys))

        # The source grows and loses messages; the whole of it is copied again.
        _publish(py, src, case.later)
        _delete(py, src, case.later_deletes)
        now = {m.seq: m for m in py.snapshot(src)}
        again, again_seqs = _copy_table(client, src, dst, case)
        result = client.publish(again, msg_id_prefix=PREFIX)
        again_keys = copy_keys(again_seqs)
        new = set(again_keys) - keys
        assert (result.rows, result.stored, result.duplicates, result.failed) == (
            len(again_seqs),
            len(new),
            len(again_seqs) - len(new),
            0,
        )
        expected += Counter(_content(now[seq], src, src) for seq, _ in new)
        _check_copy(py, src, dst, expected, len(keys) + len(new))
    finally:
        py.delete_stream(src)
        py.delete_stream(dst)


def test_a_copy_without_a_prefix_keeps_messages_the_source_stored_under_one_msg_id(
    client: ja.Client, py: PyNats, unique_name: UniqueName
) -> None:
    """A source with a 1 s duplicate window stores two events published under one
    ``Nats-Msg-Id`` 1.5 s apart: two messages. A copy without ``msg_id_prefix``
    stores both (under their source messages' ``<stream>:<seq>:<digest>``, not the
    header the source's window already judged, which made the second a duplicate),
    and a copy run again stores none."""
    src, dst = unique_name("CPW"), unique_name("CPX")
    window = {**StreamShape().config(src), "duplicate_window": 1_000_000_000}
    py.run(py.api(f"STREAM.CREATE.{src}", window))
    py.create_stream(dst, StreamShape())
    try:
        py.publish_sync(f"{src}.a", b"order 1 v1", [("Nats-Msg-Id", "order-1")])
        time.sleep(1.5)
        py.publish_sync(f"{src}.a", b"order 1 v2", [("Nats-Msg-Id", "order-1")])
        source = py.snapshot(src)
        assert [m.data for m in source] == [b"order 1 v1", b"order 1 v2"]

        table, _ = _copy_table(client, src, dst, CopyCase([], [], None, [], [], [1], False, 0))
        first = client.publish(table)
        assert (first.stored, first.duplicates, first.failed) == (2, 0, 0)
        again = client.publish(table)
        assert (again.stored, again.duplicates, again.failed) == (0, 2, 0)
        stored = py.snapshot(dst)
        assert [(m.subject, m.data) for m in stored] == [
            (f"{dst}.a", b"order 1 v1"),
            (f"{dst}.a", b"order 1 v2"),
        ]
        ids = [dict(m.headers or ())["Nats-Msg-Id"][0] for m in stored]
        assert [i.rsplit(":", 1)[0] for i in ids] == [f"{src}:{m.seq}" for m in source]
    finally:
        py.delete_stream(src)
        py.delete_stream(dst)


def test_alike_rows_apart_share_an_id_and_are_reported_duplicates(
    client: ja.Client, py: PyNats, unique_name: UniqueName
) -> None:
    """The smallest case: one message exploded into four alike rows, interleaved with
    another message's two (as a shuffle leaves them): the rows numbered alike are one
    message, the others reported as duplicates of it, none lost without a word."""
    src, dst = unique_name("CPS"), unique_name("CPD")
    py.create_stream(src, StreamShape())
    py.create_stream(dst, StreamShape())
    try:
        py.publish_sync(f"{src}.a", b"same")
        py.publish_sync(f"{src}.a", b"other")
        read = client.read(src, include_headers=True).read_all()
        table = read.take(pa.array([0, 1, 0, 1, 0, 0]))
        moved = pc.replace_substring(table.column("subject"), f"{src}.", f"{dst}.")
        table = table.set_column(table.schema.get_field_index("subject"), "subject", moved)
        result = client.publish(table, msg_id_prefix=PREFIX)
        # Keys (1, 0), (2, 0), (1, 0), (2, 0), (1, 0), (1, 1): three messages.
        assert copy_keys([1, 2, 1, 2, 1, 1]) == [(1, 0), (2, 0), (1, 0), (2, 0), (1, 0), (1, 1)]
        assert (result.stored, result.duplicates, result.failed) == (3, 3, 0)
        stored = py.snapshot(dst)
        assert sorted(m.data for m in stored) == [b"other", b"same", b"same"]
    finally:
        py.delete_stream(src)
        py.delete_stream(dst)


# -- KV buckets -----------------------------------------------------------------------------


def _kv_state(py: PyNats, bucket: str) -> dict[str, bytes]:
    """The live keys of ``bucket`` and their values, as nats-py's KV API reads them:
    ``keys()`` (its watcher, which takes a server marker as a purge), then each key's
    latest value."""

    async def go() -> dict[str, bytes]:
        kv = await py.js.key_value(bucket)
        try:
            keys = await kv.keys()
        except NoKeysError:
            return {}
        return {k: (await kv.get(k)).value or b"" for k in keys}

    return py.run(go())  # type: ignore[no-any-return]


@pytest.mark.timeout(120)
def test_a_copy_of_a_bucket_keeps_deleted_purged_and_expired_keys_gone(
    client: ja.Client, py: PyNats, unique_name: UniqueName
) -> None:
    """A bucket whose keys were put, deleted, purged and expired by a per-message TTL
    (the server leaves a ``Nats-Marker-Reason: MaxAge`` marker), copied into another
    bucket's stream: nats-py's KV API reads the same live keys and values in both."""
    src, dst = unique_name("kvsrc"), unique_name("kvdst")

    async def make() -> None:
        for bucket in (src, dst):
            # The server raises a shorter TTL to the marker's, which the marker keeps:
            # it lives 3 s, within which the copy reads it.
            await py.js.create_key_value(bucket=bucket, history=5, limit_marker_ttl=3)
        kv = await py.js.key_value(src)
        await kv.put("kept", b"v1")
        await kv.put("kept", b"v2")
        await kv.put("deleted", b"x")
        await kv.delete("deleted")
        await kv.put("purged", b"y")
        await kv.purge("purged")
        await kv.create("expired", b"z", msg_ttl=1)
        await kv.put("empty", b"")

    try:
        py.run(make())
        stream = f"KV_{src}"
        deadline = time.monotonic() + 20
        while True:
            marked = [
                m for m in py.snapshot(stream) if "Nats-Marker-Reason" in dict(m.headers or ())
            ]
            if marked:
                break
            assert time.monotonic() < deadline, "the server wrote no marker within 20 s"
            time.sleep(0.1)
        read = client.read(stream, include_headers=True).read_all()
        source = _kv_state(py, src)
        assert source == {"kept": b"v2", "empty": b""}, source
        headers = [dict(h or []) for h in read.column("headers").to_pylist()]
        assert any("Nats-Marker-Reason" in h for h in headers), "the marker went before the read"
        moved = pc.replace_substring(read.column("subject"), f"$KV.{src}.", f"$KV.{dst}.")
        table = read.set_column(read.schema.get_field_index("subject"), "subject", moved)
        try:
            client.publish(table, msg_id_prefix=PREFIX)
        except JetStreamArrowError:
            # A copy that refuses what it cannot carry stores nothing; one that changes
            # the bucket's state is wrong.
            assert py.stream_state(f"KV_{dst}")["messages"] == 0
            return
        assert _kv_state(py, dst) == source
    finally:
        for bucket in (src, dst):
            with contextlib.suppress(Exception):
                py.run(py.js.delete_key_value(bucket))
