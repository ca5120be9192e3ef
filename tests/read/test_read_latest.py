"""The latest message of each subject as a table (``client.read(...,
last_per_subject=True)``) and KV buckets as tables (``client.read_kv``), against real
servers: batched ``multi_last`` direct gets (more subjects than one request answers,
pages, as of a sequence or a time), a consumer with ``DeliverLastPerSubject`` where
the stream has no direct gets, buckets made by nats-py, and a read through a
``kill -9`` of its server."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import nats.js.errors
import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError
from natspy import with_jetstream
from natsserver import NatsServer

SUBJECTS, ROUNDS = 1_500, 3  # more subjects than one multi_last request answers (1,024)


def fill(client: ja.Client, name: str, rounds: int = ROUNDS) -> dict[str, tuple[int, bytes]]:
    """``rounds`` updates of each subject ``<name>.k<i>``; the latest (seq, data) of each."""
    subjects = [f"{name}.k{i}" for r in range(rounds) for i in range(SUBJECTS)]
    data = [f"v{r}-{i}".encode() for r in range(rounds) for i in range(SUBJECTS)]
    client.publish(pa.table({"subject": subjects, "data": data}))
    return {s: (seq + 1, d) for seq, (s, d) in enumerate(zip(subjects, data, strict=True))}


def table_of(reader: pa.RecordBatchReader) -> dict[str, tuple[int, bytes]]:
    """A latest-per-subject read as {subject: (seq, data)}, each subject once."""
    got = reader.read_all()
    subjects = got.column("subject").to_pylist()
    assert len(subjects) == len(set(subjects)), "a subject came twice"
    return dict(
        zip(
            subjects,
            zip(got.column("seq").to_pylist(), got.column("data").to_pylist(), strict=True),
            strict=True,
        )
    )


def test_the_latest_message_of_each_subject_by_direct_gets_now_and_as_of_earlier(
    client: ja.Client, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("LAST")
    client.create_stream(name, [f"{name}.>"], allow_direct=True)
    latest = fill(client, name)
    # Small batches: many pages per group of subjects.
    assert table_of(client.read(name, last_per_subject=True, batch_rows=200)) == latest
    two = [f"{name}.k7", f"{name}.k1200"]
    assert table_of(client.read(name, last_per_subject=True, subjects=two)) == {
        s: latest[s] for s in two
    }
    assert table_of(client.read(name, last_per_subject=True, subjects=f"{name}.*")) == latest
    # As of the end of the first round: the first values, at their sequences.
    first_round = {f"{name}.k{i}": (i + 1, f"v0-{i}".encode()) for i in range(SUBJECTS)}
    assert table_of(client.read(name, last_per_subject=True, as_of_seq=SUBJECTS)) == first_round

    # As of a time: the time of the first round's last message, then of the last.
    def time_of(seq: int) -> Any:
        return client.read(name, start_seq=seq, end_seq=seq).read_all()["timestamp"][0].as_py()

    assert table_of(client.read(name, last_per_subject=True, as_of_time=time_of(SUBJECTS))) == (
        first_round
    )
    before = time_of(SUBJECTS * ROUNDS)
    time.sleep(0.01)
    client.publish(pa.table({"subject": [f"{name}.k0"], "data": [b"later"]}))
    assert table_of(client.read(name, last_per_subject=True, as_of_time=before)) == latest
    assert table_of(client.read(name, last_per_subject=True))[f"{name}.k0"][1] == b"later"


def test_a_stream_without_direct_gets_is_read_through_a_consumer_the_same(
    client: ja.Client, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("LASTC")
    client.create_stream(name, [f"{name}.>"])
    latest = fill(client, name)
    assert table_of(client.read(name, last_per_subject=True, batch_rows=500)) == latest
    assert client.consumer_names(name) == [], "the read left its consumer behind"
    with pytest.raises(BadInputError, match=r"'as_of_seq' and 'as_of_time' read .* direct gets"):
        client.read(name, last_per_subject=True, as_of_seq=10)
    with pytest.raises(BadInputError, match=r"option 'method': .* does not allow direct gets"):
        client.read(name, last_per_subject=True, method="direct")
    # A stream with direct gets, read through a consumer on request: the same table.
    direct = unique_name("LASTD")
    client.create_stream(direct, [f"{direct}.>"], allow_direct=True)
    fill(client, direct, rounds=2)
    by_consumer = table_of(client.read(direct, last_per_subject=True, method="consumer"))
    assert by_consumer == table_of(client.read(direct, last_per_subject=True))


def test_options_that_do_not_go_together_are_named(client: ja.Client, stream: str) -> None:
    with pytest.raises(BadInputError, match="'as_of_seq' is for reads of the latest"):
        client.read(stream, as_of_seq=3)
    with pytest.raises(BadInputError, match="'start_seq' does not go with last_per_subject"):
        client.read(stream, last_per_subject=True, start_seq=2)
    with pytest.raises(BadInputError, match="'as_of_seq' and 'as_of_time' exclude each other"):
        client.read(stream, last_per_subject=True, as_of_seq=1, as_of_time=0)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "consumer"])
def test_a_bucket_made_by_nats_py_reads_as_its_entries(
    client: ja.Client,
    shared_nats_server: NatsServer,
    unique_name: Callable[[str], str],
    direct: bool,
) -> None:
    bucket = unique_name("bk")

    async def make(js: Any) -> list[tuple[str, bytes | None, int, str]]:
        kv = await js.create_key_value(bucket=bucket, history=5, direct=direct)
        await kv.put("dev.1", b"a")
        await kv.put("dev.2", b"b")
        await kv.put("dev.1", b"a2")
        await kv.put("cfg", b"c")
        await kv.delete("dev.2")
        await kv.put("gone", b"x")
        await kv.purge("gone")

        async def history(key: str) -> Any:
            # nats-py's watcher, on a loaded machine, at times ends a key's history
            # before its first entry (NoKeysError for a key just put): asked again.
            for attempt in range(3):
                try:
                    return await kv.history(key)
                except nats.js.errors.NoKeysError:
                    if attempt == 2:
                        raise
                    await asyncio.sleep(0.2)

        out = []
        for key in ("dev.1", "dev.2", "cfg", "gone"):
            entry = (await history(key))[-1]
            op = str(entry.operation) if entry.operation else "PUT"
            out.append((key, entry.value or None, entry.revision, op.rsplit(".", 1)[-1]))
        return out

    url = shared_nats_server.url
    history = with_jetstream(url, make)
    try:
        every = client.read_kv(bucket, include_deletes=True).read_all()
        rows = sorted(
            zip(
                every.column("key").to_pylist(),
                every.column("value").to_pylist(),
                every.column("revision").to_pylist(),
                every.column("operation").to_pylist(),
                strict=True,
            )
        )
        assert rows == sorted(history)
        live = client.read_kv(bucket).read_all()
        assert sorted(live.column("key").to_pylist()) == ["cfg", "dev.1"]
        assert client.read_kv(bucket, "dev.*").read_all().column("value").to_pylist() == [b"a2"]
        if direct:
            # As of revision 2: dev.1 was a, dev.2 was b, nothing else existed.
            old = client.read_kv(bucket, as_of_seq=2).read_all()
            assert sorted(zip(old["key"].to_pylist(), old["value"].to_pylist(), strict=True)) == [
                ("dev.1", b"a"),
                ("dev.2", b"b"),
            ]
    finally:
        with_jetstream(url, lambda js: js.delete_key_value(bucket))


@pytest.mark.fault
@pytest.mark.timeout(120)
def test_a_read_through_a_kill_9_of_its_server_ends_complete(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    server = nats_server_factory(jetstream_extra="sync_interval: always", tmpfs=True)
    with ja.connect(server.url, max_reconnects=None, reconnect_delay=0.2) as client:
        client.create_stream("LK", ["LK.>"], allow_direct=True)
        latest = fill(client, "LK")
        reader = client.read("LK", last_per_subject=True, batch_rows=100, max_bytes=4096)
        first = reader.read_next_batch()
        killed = threading.Event()

        def kill() -> None:
            server.kill()
            server.start()
            killed.set()

        thread = threading.Thread(target=kill, daemon=True)
        thread.start()
        rest = [first, *reader]
        thread.join(60)
        assert killed.is_set()
        assert table_of(pa.RecordBatchReader.from_batches(first.schema, rest)) == latest


@pytest.mark.timeout(60)
@pytest.mark.parametrize("allow_direct", [True, False], ids=["direct", "consumer"])
def test_keys_the_server_expired_with_a_marker_read_as_purged_not_live(
    client: ja.Client,
    shared_nats_server: NatsServer,
    unique_name: Callable[[str], str],
    allow_direct: bool,
) -> None:
    """A bucket with ``subject_delete_marker_ttl``: when a key's last value expires
    (its per-message TTL here; a bucket's ``max_age`` the same) the server writes a
    marker (``Nats-Marker-Reason: MaxAge``, no ``KV-Operation``), which NATS's KV
    clients read as a purge. Checked against the markers themselves as nats-py's
    direct get returns them."""
    bucket = unique_name("exp")
    stream = f"KV_{bucket}"
    client.create_stream(
        stream,
        [f"$KV.{bucket}.>"],
        max_msgs_per_subject=1,
        allow_msg_ttl=True,
        subject_delete_marker_ttl=60.0,
        allow_rollup=True,
        allow_direct=allow_direct,
    )
    url = shared_nats_server.url
    try:
        ttl = pa.array([[("Nats-TTL", ["1s"])]] * 2, pa.map_(pa.utf8(), pa.list_(pa.utf8())))
        client.publish(
            pa.table(
                {
                    "subject": [f"$KV.{bucket}.a", f"$KV.{bucket}.b"],
                    "data": [b"1", b"2"],
                    "headers": ttl,
                }
            )
        )

        async def markers(js: Any) -> dict[str, dict[str, str] | None]:
            out: dict[str, dict[str, str] | None] = {}
            for key in ("a", "b"):
                msg = await js.get_last_msg(stream, f"$KV.{bucket}.{key}")
                out[key] = dict(msg.headers or {}) if not msg.data else None
            return out

        deadline = time.monotonic() + 30
        seen = with_jetstream(url, markers)
        while not all(seen.values()) and time.monotonic() < deadline:
            time.sleep(0.5)
            seen = with_jetstream(url, markers)
        assert all(h and h.get("Nats-Marker-Reason") == "MaxAge" for h in seen.values()), seen
        client.write_kv(bucket, pa.table({"key": ["c"], "value": [b"3"]}))

        live = client.read_kv(bucket).read_all()
        assert live.column("key").to_pylist() == ["c"]
        every = client.read_kv(bucket, include_deletes=True).read_all().sort_by("key")
        assert every.column("key").to_pylist() == ["a", "b", "c"]
        assert every.column("operation").to_pylist() == ["PURGE", "PURGE", "PUT"]
        assert every.column("value").to_pylist() == [None, None, b"3"]
    finally:
        client.delete_stream(stream)


def test_each_kv_operation_is_read_as_nats_kv_clients_read_it() -> None:
    """The operation of a message: its ``KV-Operation`` header (anything but DEL or
    PURGE is a put), else a server marker's reason, else a put."""
    from jetstream_arrow.kv import _operations

    rows = [
        None,
        [("KV-Operation", ["DEL"])],
        [("KV-Operation", ["PURGE"]), ("Nats-Rollup", ["sub"])],
        [("KV-Operation", ["OTHER"])],
        [("Nats-Marker-Reason", ["MaxAge"]), ("Nats-TTL", ["60s"])],
        [("Nats-Marker-Reason", ["Purge"])],
        [("Nats-Marker-Reason", ["Remove"])],
        [("Nats-Marker-Reason", ["Later"])],
        [("KV-Operation", ["DEL"]), ("Nats-Marker-Reason", ["MaxAge"])],
        [("Other", ["x"])],
    ]
    headers = pa.array(rows, pa.map_(pa.utf8(), pa.list_(pa.utf8())))
    assert _operations(headers).to_pylist() == [
        "PUT", "DEL", "PURGE", "PUT", "PURGE", "PURGE", "DEL", "PUT", "DEL", "PUT",
    ]  # fmt: skip
