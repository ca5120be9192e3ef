"""A copy of a KV bucket keeps what its markers mean: a key the server expired (its
``Nats-Marker-Reason`` marker), deleted or purged (``KV-Operation``) in the source is
not live in the copy. The bucket is made and changed with nats-py, copied with
``client.read(..., include_headers=True)`` then ``client.publish`` into a bucket of
another server, and the copy is read back with nats-py only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow.compute as pc
import pytest
from nats.js.errors import KeyNotFoundError, NoKeysError

import jetstream_arrow as ja
from natspy import with_jetstream
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(120)

MARKER = "Nats-Marker-Reason"


def make_bucket(url: str, bucket: str, fill: bool) -> None:
    async def work(js: Any) -> None:
        # A marker TTL makes the server leave a marker where a key's TTL ran out (it
        # raises a shorter TTL to it: the key lives 3 s, the marker 3 s more).
        await js.create_key_value(bucket=bucket, history=5, limit_marker_ttl=3)
        if not fill:
            return
        kv = await js.key_value(bucket)
        await kv.put("kept", b"v")
        await kv.put("deleted", b"x")
        await kv.delete("deleted")
        await kv.put("purged", b"y")
        await kv.purge("purged")
        await kv.create("expired", b"z", msg_ttl=1)

    with_jetstream(url, work)


def live_keys(url: str, bucket: str) -> list[str]:
    """The keys nats-py's KV reads as live (its watcher takes a marker as a purge)."""

    async def work(js: Any) -> list[str]:
        kv = await js.key_value(bucket)
        try:
            return sorted(await kv.keys())
        except NoKeysError:
            return []

    return with_jetstream(url, work)


def last_headers(url: str, bucket: str, key: str) -> dict[str, str]:
    async def work(js: Any) -> dict[str, str]:
        msg = await js.get_msg(f"KV_{bucket}", subject=f"$KV.{bucket}.{key}")
        return dict(msg.headers or {})

    return with_jetstream(url, work)


def test_a_copied_bucket_keeps_expired_deleted_and_purged_keys_gone(
    shared_nats_server: NatsServer,
    nats_server: NatsServer,
    unique_name: Callable[[str], str],
) -> None:
    bucket = unique_name("kv")
    make_bucket(shared_nats_server.url, bucket, fill=True)
    make_bucket(nats_server.url, bucket, fill=False)
    deadline = time.monotonic() + 20
    while MARKER not in last_headers(shared_nats_server.url, bucket, "expired"):
        assert time.monotonic() < deadline, "the server left no marker within 20 s"
        time.sleep(0.2)
    assert live_keys(shared_nats_server.url, bucket) == ["kept"]

    with ja.connect(shared_nats_server.url) as source, ja.connect(nats_server.url) as target:
        read = source.read(f"KV_{bucket}", include_headers=True).read_all()
        result = target.publish(read)
    assert (result.stored, result.failed) == (read.num_rows, 0)

    # The copy has what the source has, as nats-py reads it.
    assert live_keys(nats_server.url, bucket) == ["kept"]
    marker = last_headers(nats_server.url, bucket, "expired")
    assert marker[MARKER] == last_headers(shared_nats_server.url, bucket, "expired")[MARKER]
    for key, operation in (("deleted", "DEL"), ("purged", "PURGE")):
        assert last_headers(nats_server.url, bucket, key)["KV-Operation"] == operation

    async def get_deleted(js: Any) -> None:
        kv = await js.key_value(bucket)
        for key in ("deleted", "purged"):
            with pytest.raises(KeyNotFoundError):
                await kv.get(key)

    with_jetstream(nats_server.url, get_deleted)
    # Subjects unchanged, payloads as stored: the marker's is empty.
    copied = pc.equal(read.column("subject"), f"$KV.{bucket}.expired")
    assert read.filter(copied).column("data").to_pylist()[-1] == b""
