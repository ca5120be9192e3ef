"""Rows written into KV buckets (``client.write_kv``) against real servers, checked
with nats-py's own KV API: puts, deletes and purges as a KV client sees them, revisions
as the rows' sequences, compare-and-set conflicts reported per row, re-runs stored
once, and bad keys, operations and buckets named."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from nats.js.errors import KeyNotFoundError

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError, NotFoundError
from natspy import with_jetstream
from natsserver import NatsServer


def entries(url: str, bucket: str, keys: list[str]) -> dict[str, tuple[bytes, int] | None]:
    """Each key's value and revision as nats-py's KV reads them (None: no entry)."""

    async def work(js: Any) -> dict[str, tuple[bytes, int] | None]:
        kv = await js.key_value(bucket)
        out: dict[str, tuple[bytes, int] | None] = {}
        for key in keys:
            try:
                entry = await kv.get(key)
                out[key] = (entry.value, entry.revision)
            except KeyNotFoundError:
                out[key] = None
        return out

    return with_jetstream(url, work)  # type: ignore[no-any-return]


@pytest.fixture
def bucket(shared_nats_server: NatsServer, unique_name: Callable[[str], str]) -> Iterator[str]:
    """A KV bucket made by nats-py (history 10) holding ``a = a0`` at revision 1."""
    name = unique_name("cfg")

    async def make(js: Any) -> None:
        kv = await js.create_key_value(bucket=name, history=10)
        await kv.put("a", b"a0")

    with_jetstream(shared_nats_server.url, make)
    yield name
    with_jetstream(shared_nats_server.url, lambda js: js.delete_key_value(name))


def test_puts_deletes_and_purges_are_what_a_kv_client_reads(
    client: ja.Client, shared_nats_server: NatsServer, bucket: str
) -> None:
    url = shared_nats_server.url
    put = client.write_kv(
        bucket, pa.table({"key": ["a", "b", "c.d", "e"], "value": [b"a1", b"b1", "c1", b"e1"]})
    )
    assert put.acks.column("seq").to_pylist() == [2, 3, 4, 5]
    assert entries(url, bucket, ["a", "b", "c.d", "e"]) == {
        "a": (b"a1", 2),
        "b": (b"b1", 3),
        "c.d": (b"c1", 4),
        "e": (b"e1", 5),
    }
    changes = pa.table(
        {
            "key": ["a", "c.d", "e"],
            "value": [b"a2", b"ignored", None],
            "operation": ["put", "DEL", "Purge"],
        }
    )
    client.write_kv(bucket, changes)
    assert entries(url, bucket, ["a", "b", "c.d", "e"]) == {
        "a": (b"a2", 6),
        "b": (b"b1", 3),
        "c.d": None,
        "e": None,
    }

    async def history(js: Any) -> dict[str, list[tuple[str | None, bytes]]]:
        kv = await js.key_value(bucket)
        out = {}
        for key in ("c.d", "e"):
            out[key] = [
                (str(e.operation) if e.operation else None, e.value or b"")
                for e in await kv.history(key)
            ]
        return out

    # A delete keeps the history with a marker; a purge leaves only its marker.
    seen = with_jetstream(url, history)
    assert seen["c.d"] == [(None, b"c1"), ("DEL", b"")], seen
    assert seen["e"] == [("PURGE", b"")], seen


def test_compare_and_set_conflicts_are_reported_per_row_and_a_rerun_stores_nothing_twice(
    client: ja.Client, shared_nats_server: NatsServer, bucket: str
) -> None:
    url = shared_nats_server.url
    # Another writer moves a to revision 2 after this one read it at 1.
    with_jetstream(url, lambda js: _put(js, bucket, "a", b"theirs"))
    table = pa.table(
        {
            "key": ["a", "b", "c"],
            "value": [b"mine", b"b1", b"c1"],
            # a: expected at 1 (stale); b: must not exist yet; c: no check.
            "expected_revision": pa.array([1, 0, None], pa.int64()),
            "msg_id": ["w-a", "w-b", "w-c"],
        }
    )
    first = client.write_kv(bucket, table, raise_on_error=False)
    errors = first.acks.column("error").to_pylist()
    assert errors[0] is not None and errors[0].startswith(
        "conflict: expected last subject sequence 1 (wrong last sequence: 2"
    ), errors[0]
    assert errors[1:] == [None, None]
    assert entries(url, bucket, ["a", "b", "c"]) == {
        "a": (b"theirs", 2),
        "b": (b"b1", 3),
        "c": (b"c1", 4),
    }
    # The same rows again: b's check fails now (b is at 3) but its msg id is stored,
    # so it is a duplicate; c is a duplicate; a still conflicts.
    again = client.write_kv(bucket, table, raise_on_error=False)
    assert again.acks.column("duplicate").to_pylist() == [False, True, True]
    assert again.acks.column("seq").to_pylist() == [None, 3, 4]
    assert again.failed == 1
    assert client.stream_info(f"KV_{bucket}").state.messages == 4


async def _put(js: Any, bucket: str, key: str, value: bytes) -> None:
    kv = await js.key_value(bucket)
    await kv.put(key, value)


def test_bad_keys_operations_columns_and_buckets_are_named(
    client: ja.Client, bucket: str, unique_name: Callable[[str], str]
) -> None:
    schema = pa.schema([("key", pa.utf8()), ("value", pa.binary())])
    batches = [
        pa.record_batch([pa.array(["x", "y"]), pa.array([b"1", b"2"])], schema=schema),
        pa.record_batch([pa.array(["z", "bad key"]), pa.array([b"3", b"4"])], schema=schema),
    ]
    with pytest.raises(
        BadInputError, match=r"column 'key', row 3: 'bad key' is not a KV key"
    ) as info:
        client.write_kv(bucket, pa.RecordBatchReader.from_batches(schema, batches))
    # The batches before the one holding the bad key were stored.
    assert info.value.result.stored == 2  # type: ignore[attr-defined]
    for key in (".a", "a.", "a*", ">"):
        with pytest.raises(BadInputError, match="is not a KV key"):
            client.write_kv(bucket, pa.table({"key": [key], "value": [b"v"]}))
    with pytest.raises(
        BadInputError, match=r"column 'operation', row 1: 'REMOVE' is not a KV operation"
    ):
        client.write_kv(bucket, pa.table({"key": ["p", "q"], "operation": ["del", "remove"]}))
    with pytest.raises(BadInputError, match="needs a 'key' column"):
        client.write_kv(bucket, pa.table({"value": [b"v"]}))
    with pytest.raises(
        BadInputError, match="column 'expected_revision' of a KV write must be an integer"
    ):
        client.write_kv(
            bucket, pa.table({"key": ["k"], "value": [b"v"], "expected_revision": ["1"]})
        )
    with pytest.raises(NotFoundError, match="KV_no_such_bucket"):
        client.write_kv("no_such_bucket", pa.table({"key": ["k"], "value": [b"v"]}))
    with pytest.raises(BadInputError, match="a KV bucket name"):
        client.write_kv("a.b", pa.table({"key": ["k"], "value": [b"v"]}))
    # A stream named like a bucket that does not take the bucket's subjects.
    impostor = unique_name("imp")
    client.create_stream(f"KV_{impostor}", [f"{impostor}.>"])
    try:
        with pytest.raises(BadInputError, match="is not a KV bucket"):
            client.write_kv(impostor, pa.table({"key": ["k"], "value": [b"v"]}))
    finally:
        client.delete_stream(f"KV_{impostor}")


def test_compression_is_refused_as_no_kv_client_would_read_the_values(
    client: ja.Client, shared_nats_server: NatsServer, bucket: str
) -> None:
    # A KV client reads a value as stored: a compressed one would be zstd bytes to it.
    with pytest.raises(
        BadInputError, match=r"write_kv and option 'compression' exclude each other"
    ):
        client.write_kv(
            bucket, pa.table({"key": ["a", "z"], "value": [b"v" * 100] * 2}), compression="zstd"
        )
    with pytest.raises(
        BadInputError, match=r"write_kv and option 'compression' exclude each other"
    ):
        client.write_kv(
            bucket,
            pa.table({"key": ["z"], "value": [b"v"]}),
            options=ja.PublishOptions(compression="s2"),
        )
    assert entries(shared_nats_server.url, bucket, ["a", "z"]) == {"a": (b"a0", 1), "z": None}
