"""Reading streams as Arrow batches: subject filters, sequence and time bounds, the
default end, empty streams, batch sizes, and no consumer left behind."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import read_all, rows, stream_state
from jetstream_arrow.exceptions import BadInputError

pytestmark = pytest.mark.timeout(60)

READ_SCHEMA = pa.schema(
    [
        pa.field("stream", pa.utf8(), nullable=False),
        pa.field("subject", pa.utf8(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("data", pa.binary(), nullable=False),
    ]
)


def seqs(table: pa.Table) -> list[int]:
    return table.column("seq").to_pylist()


def wait_no_consumers(client: ja.Client, stream: str, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not client.consumer_names(stream) and stream_state(client, stream).consumer_count == 0:
            return
        time.sleep(0.05)
    names = client.consumer_names(stream)
    raise AssertionError(f"the read left consumers on {stream}: {names}")


def test_schema_without_and_with_headers(client: ja.Client, stream: str) -> None:
    client.publish(rows(3, stream))
    plain = read_all(client, stream)
    assert plain.schema.equals(READ_SCHEMA)
    with_headers = read_all(client, stream, include_headers=True)
    assert with_headers.schema.names == ["stream", "subject", "seq", "timestamp", "headers", "data"]
    assert with_headers.schema.field("headers").type == pa.map_(pa.utf8(), pa.list_(pa.utf8()))


def test_subject_filter_one_and_several(client: ja.Client, stream: str) -> None:
    client.publish(rows(300, stream, headers=False, subjects=3))  # subjects .0 .1 .2
    one = read_all(client, stream, subjects=f"{stream}.1")
    assert one.column("subject").unique().to_pylist() == [f"{stream}.1"]
    assert seqs(one) == list(range(2, 301, 3))
    several = read_all(client, stream, subjects=[f"{stream}.0", f"{stream}.2"])
    assert seqs(several) == [s for s in range(1, 301) if s % 3 != 2]
    wildcard = read_all(client, stream, subjects=[f"{stream}.*"])
    assert seqs(wildcard) == list(range(1, 301))
    nothing = read_all(client, stream, subjects=[f"{stream}.nomatch"])
    assert nothing.num_rows == 0
    assert nothing.schema.equals(READ_SCHEMA)


def test_subject_filter_with_sequence_bounds(client: ja.Client, stream: str) -> None:
    client.publish(rows(300, stream, headers=False, subjects=3))
    got = read_all(client, stream, subjects=f"{stream}.0", start_seq=50, end_seq=100)
    assert seqs(got) == [s for s in range(50, 101) if s % 3 == 1]
    # Only later messages match the filter: ends at end_seq, returns nothing.
    client.publish(pa.table({"subject": [f"{stream}.late"], "data": [b"x"]}))
    assert read_all(client, stream, subjects=f"{stream}.late", end_seq=300).num_rows == 0


def test_start_and_end_seq_bounds(client: ja.Client, stream: str) -> None:
    client.publish(rows(1_000, stream, headers=False))
    assert seqs(read_all(client, stream, start_seq=101, end_seq=200)) == list(range(101, 201))
    assert seqs(read_all(client, stream, start_seq=990)) == list(range(990, 1_001))
    assert seqs(read_all(client, stream, end_seq=5)) == [1, 2, 3, 4, 5]
    assert seqs(read_all(client, stream, start_seq=7, end_seq=7)) == [7]
    assert read_all(client, stream, start_seq=1_001).num_rows == 0
    assert read_all(client, stream, start_seq=500, end_seq=499).num_rows == 0
    assert seqs(read_all(client, stream, end_seq=5_000)) == list(range(1, 1_001))
    with pytest.raises(BadInputError, match="start_seq"):
        client.read(stream, start_seq=0)


def test_start_seq_below_first_seq_after_purge(client: ja.Client, stream: str) -> None:
    client.publish(rows(100, stream, headers=False))
    client.purge_stream(stream, up_to_seq=41)
    assert seqs(read_all(client, stream)) == list(range(41, 101))
    assert seqs(read_all(client, stream, start_seq=10, end_seq=45)) == list(range(41, 46))


def test_interior_and_last_deleted_messages(client: ja.Client, stream: str) -> None:
    client.publish(rows(20, stream, headers=False))
    for seq in (5, 6, 20):
        client.delete_message(stream, seq)
    assert seqs(read_all(client, stream)) == [s for s in range(1, 20) if s not in (5, 6)]
    assert seqs(read_all(client, stream, start_seq=5, end_seq=6)) == []


def test_default_end_is_the_last_seq_when_the_read_starts(client: ja.Client, stream: str) -> None:
    client.publish(rows(1_000, stream, headers=False))
    reader = client.read(stream, batch_rows=100)
    first = reader.read_next_batch()
    client.publish(rows(500, stream, start=1_000, headers=False))
    rest = reader.read_all()
    reader.close()
    got = [*first.column("seq").to_pylist(), *seqs(rest)]
    assert got == list(range(1, 1_001))
    # Also when nothing was read before the new messages came.
    reader = client.read(stream)
    client.publish(rows(10, stream, start=1_500, headers=False))
    assert seqs(reader.read_all()) == list(range(1, 1_501))


def test_time_bounds(client: ja.Client, stream: str) -> None:
    client.publish(rows(50, stream, headers=False))
    time.sleep(1.0)
    middle = datetime.now(timezone.utc)
    time.sleep(1.0)
    client.publish(rows(30, stream, start=50, headers=False))

    after = read_all(client, stream, start_time=middle)
    assert seqs(after) == list(range(51, 81))
    before = read_all(client, stream, end_time=middle)
    assert seqs(before) == list(range(1, 51))
    # ISO strings and epoch seconds mean the same instant.
    iso = middle.isoformat().replace("+00:00", "Z")
    assert seqs(read_all(client, stream, start_time=iso)) == list(range(51, 81))
    assert seqs(read_all(client, stream, end_time=middle.timestamp())) == list(range(1, 51))
    # Both bounds: a window with nothing in it, and one holding everything.
    assert (
        read_all(client, stream, start_time=middle, end_time=middle + timedelta(seconds=0.5))
    ).num_rows == 0
    everything = read_all(
        client,
        stream,
        start_time=middle - timedelta(hours=1),
        end_time=datetime.now(timezone.utc) + timedelta(hours=1),
    )
    assert seqs(everything) == list(range(1, 81))
    with pytest.raises(BadInputError, match="time zone"):
        client.read(stream, start_time=datetime(2026, 1, 1))
    with pytest.raises(BadInputError, match="start_seq"):
        client.read(stream, start_seq=3, start_time=middle)


def test_empty_stream(client: ja.Client, stream: str) -> None:
    t0 = time.monotonic()
    table = read_all(client, stream)
    assert table.num_rows == 0
    assert table.schema.equals(READ_SCHEMA)
    assert read_all(client, stream, start_seq=1, end_seq=100).num_rows == 0
    assert time.monotonic() - t0 < 5
    assert client.consumer_names(stream) == []


def test_batch_rows_is_respected(client: ja.Client, stream: str) -> None:
    client.publish(rows(2_500, stream, headers=False))
    reader = client.read(stream, batch_rows=300)
    sizes = [b.num_rows for b in reader]
    assert sum(sizes) == 2_500
    assert max(sizes) <= 300
    assert len(sizes) >= 9


def test_max_bytes_bounds_batch_payload(client: ja.Client, stream: str) -> None:
    n, size = 400, 1_000
    table = pa.table(
        {
            "subject": [f"{stream}.a"] * n,
            "data": pa.array([bytes([i % 256]) * size for i in range(n)], pa.binary()),
        }
    )
    client.publish(table)
    reader = client.read(stream, max_bytes=10_500)
    batches = list(reader)
    payloads = [sum(len(d) for d in b.column("data").to_pylist()) for b in batches]
    assert sum(b.num_rows for b in batches) == n
    assert max(payloads) <= 10_500, payloads[:5]
    assert len(batches) >= n * size // 10_500
    back = pa.Table.from_batches(batches)
    assert back.column("data").equals(table.column("data"))


def test_full_read_leaves_no_consumer(client: ja.Client, stream: str) -> None:
    client.publish(rows(5_000, stream, headers=False))
    assert read_all(client, stream, batch_rows=1_000).num_rows == 5_000
    wait_no_consumers(client, stream)
    assert read_all(client, stream, subjects=f"{stream}.1", end_seq=100).num_rows > 0
    wait_no_consumers(client, stream)


def test_read_closed_early_leaves_no_consumer(client: ja.Client, stream: str) -> None:
    client.publish(rows(5_000, stream, headers=False))
    with client.read(stream, batch_rows=100) as reader:
        assert reader.read_next_batch().num_rows == 100
        assert len(client.consumer_names(stream)) == 1  # the read is under way
    # pyarrow's close() keeps the batch source until the reader itself goes.
    del reader
    wait_no_consumers(client, stream)


def test_read_abandoned_early_leaves_no_consumer(client: ja.Client, stream: str) -> None:
    client.publish(rows(5_000, stream, headers=False))
    reader = client.read(stream, batch_rows=100)
    assert reader.read_next_batch().num_rows == 100
    del reader
    wait_no_consumers(client, stream)


def test_read_with_headers_of_messages_published_without(client: ja.Client, stream: str) -> None:
    client.publish(pa.table({"subject": [f"{stream}.a"] * 2, "data": [b"1", b"2"]}))
    table = read_all(client, stream, include_headers=True)
    headers = table.column("headers").to_pylist()
    assert all(h in (None, []) for h in headers), headers


def test_large_read_across_many_pulls(client: ja.Client, stream: str) -> None:
    """More messages than one pull buffers, with small payload and row limits."""
    client.publish(rows(30_000, stream, headers=False))
    reader = client.read(stream, batch_rows=4_096, max_bytes=64 * 1024)
    total = 0
    last = 0
    for batch in reader:
        s = batch.column("seq").to_pylist()
        assert s == list(range(last + 1, last + 1 + len(s)))
        last = s[-1]
        total += len(s)
    assert total == 30_000
    wait_no_consumers(client, stream)


@pytest.mark.parametrize("method", ["consumer", "direct", "last"])
def test_payload_views_hold_every_payload_as_it_arrived(
    client: ja.Client, new_stream: Any, method: str
) -> None:
    # Sizes around the 12 bytes a view holds inline and the 2 KiB from which a payload
    # is viewed where it arrived, and payloads of many KiB, with
    # their bytes all different (a view of the wrong buffer or offset shows).
    stream = new_stream("VIEWS", allow_direct=True)
    sizes = [0, 1, 11, 12, 13, 100, 1024, 2047, 2048, 16 * 1024 + 3, 12, 5, 70_000]
    payloads = [bytes((i * 7 + j) % 251 for j in range(n)) for i, n in enumerate(sizes)]
    subjects = [f"{stream}.{i}" for i in range(len(sizes))]
    client.publish(pa.table({"subject": subjects, "data": payloads}))
    read = (
        {"last_per_subject": True, "subjects": f"{stream}.>"}
        if method == "last"
        else {"method": method, "batch_rows": 4}
    )
    viewed = client.read(stream, payload_views=True, **read).read_all()
    copied = client.read(stream, **read).read_all()
    assert viewed.schema.field("data").type == pa.binary_view()
    assert viewed.column("data").to_pylist() == payloads
    assert viewed.drop_columns("data").equals(copied.drop_columns("data"))
    # What the batches hold outlives the reader and the client's later reads.
    client.publish(pa.table({"subject": subjects[:1], "data": [b"x" * 5000]}))
    assert viewed.column("data").to_pylist() == payloads


def test_payload_views_are_refused_where_there_is_no_data_column(
    client: ja.Client, stream: str
) -> None:
    client.publish(pa.table({"subject": [f"{stream}.a"], "data": [b'{"x": 1}']}))
    with pytest.raises(BadInputError, match=r"'payload_views'.*codec"):
        client.read(stream, payload_views=True, codec="json").read_all()
    with pytest.raises(BadInputError, match=r"'payload_views'.*read_kv gives its own table"):
        client.read_kv("ANY", payload_views=True)
