"""Publishing Arrow data into JetStream: round trips, msg ids and deduplication, the
ack table, reused publishers, optimistic-concurrency expectations, a cluster failover."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import jetstream_arrow as ja
from engine_helpers import (
    as_dicts,
    expected_headers,
    read_all,
    rows,
    stream_state,
)
from jetstream_arrow.exceptions import BadInputError, PublishError
from natsserver import NatsCluster

pytestmark = pytest.mark.timeout(120)


def check_round_trip(back: pa.Table, sent: pa.Table, stream: str, t0: datetime) -> None:
    """``back`` (read with headers) holds exactly ``sent`` in order, seqs 1..n."""
    n = sent.num_rows
    assert back.num_rows == n
    assert back.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert back.schema.field("headers").type == pa.map_(pa.utf8(), pa.list_(pa.utf8()))
    assert back.schema.field("data").type == pa.binary()
    assert back.column("stream").to_pylist() == [stream] * n
    assert back.column("seq").to_pylist() == list(range(1, n + 1))
    assert back.column("subject").equals(sent.column("subject"))
    assert back.column("data").cast(pa.binary()).equals(sent.column("data").cast(pa.binary()))
    ids = sent.column("msg_id").to_pylist()
    got = as_dicts(back.column("headers").to_pylist())
    assert got == [expected_headers(int(i.removeprefix("id-")), i) for i in ids]
    ts = back.column("timestamp")
    t1 = datetime.now(timezone.utc)
    assert pc.min(ts).as_py() >= t0.replace(microsecond=0)
    assert pc.max(ts).as_py() <= t1
    # Microseconds kept (not truncated to seconds) and non-decreasing with seq.
    us = ts.cast(pa.int64()).to_pylist()
    assert all(a <= b for a, b in itertools.pairwise(us))
    assert any(u % 1_000_000 for u in us)


# -- round trips ------------------------------------------------------------------------


@pytest.mark.slow
def test_round_trip_200k_rows_table_with_headers_and_msg_ids(
    client: ja.Client, stream: str
) -> None:
    n = 200_000
    table = rows(n, stream)
    t0 = datetime.now(timezone.utc)
    result = client.publish(table)
    assert (result.rows, result.stored, result.duplicates, result.failed) == (n, n, 0, 0)
    assert result.acks.column("seq").to_pylist() == list(range(1, n + 1))
    assert stream_state(client, stream).messages == n

    back = read_all(client, stream, include_headers=True)
    check_round_trip(back, table, stream, t0)


def test_round_trip_record_batch(client: ja.Client, stream: str) -> None:
    table = rows(5_000, stream)
    t0 = datetime.now(timezone.utc)
    batch = table.combine_chunks().to_batches()[0]
    assert isinstance(batch, pa.RecordBatch)
    result = client.publish(batch)
    assert result.stored == 5_000
    check_round_trip(read_all(client, stream, include_headers=True), table, stream, t0)


def test_round_trip_record_batch_reader_of_several_batches(client: ja.Client, stream: str) -> None:
    table = rows(9_000, stream)
    t0 = datetime.now(timezone.utc)
    batches = table.to_batches(max_chunksize=1_000)
    assert len(batches) == 9
    reader = pa.RecordBatchReader.from_batches(table.schema, iter(batches))
    result = client.publish(reader)
    assert (result.rows, result.stored, result.failed) == (9_000, 9_000, 0)
    check_round_trip(read_all(client, stream, include_headers=True), table, stream, t0)


# The input's next batch is being made (in Python, on one of the engine's threads) when
# Ctrl-C comes; the generator takes the GIL back every millisecond for half a second.
_INTERRUPTED_PUBLISH = """
import sys, time
import pyarrow as pa
import jetstream_arrow as ja

def batches():
    while True:
        yield pa.record_batch({"data": [b"x"] * 100})
        print("pulled", flush=True)
        slow_until = time.monotonic() + 0.5
        while time.monotonic() < slow_until:
            time.sleep(0.001)

schema = pa.schema([("data", pa.binary())])
with ja.connect(sys.argv[1]) as client:
    try:
        client.publish(pa.RecordBatchReader.from_batches(schema, batches()), subject=sys.argv[2])
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
"""


def test_ctrl_c_while_a_generator_makes_the_next_batch_exits_cleanly(
    shared_nats_server, stream: str
) -> None:
    """Ctrl-C raises KeyboardInterrupt once the engine's thread has left the
    generator: the process exits with the code the program chose, never a crash of a
    thread that takes the GIL back from a finalizing interpreter."""
    for attempt in range(3):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(_INTERRUPTED_PUBLISH),
                shared_nats_server.url,
                f"{stream}.x",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            assert proc.stdout is not None
            for _ in range(2 + attempt):
                assert proc.stdout.readline() == "pulled\n", proc.stderr and proc.stderr.read()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, (proc.returncode, err)
        # (the engine may have asked for one more batch before the abort reached it)
        assert out.endswith("interrupted\n"), err


def test_headers_as_map_of_strings_are_accepted(client: ja.Client, stream: str) -> None:
    headers = pa.array(
        [[("A", "1"), ("B", "two")], None, [("A", "3")]],
        pa.map_(pa.utf8(), pa.utf8()),
    )
    table = pa.table(
        {
            "subject": [f"{stream}.x"] * 3,
            "data": [b"a", b"b", b"c"],
            "headers": headers,
        }
    )
    assert client.publish(table).stored == 3
    back = read_all(client, stream, include_headers=True)
    assert as_dicts(back.column("headers").to_pylist()) == [
        {"A": ["1"], "B": ["two"]},
        {},
        {"A": ["3"]},
    ]


def test_utf8_data_and_constant_subject_option(client: ja.Client, stream: str) -> None:
    table = pa.table({"data": pa.array(["é", "", "x" * 100], pa.utf8())})
    result = client.publish(table, subject=f"{stream}.const")
    assert result.stored == 3
    back = read_all(client, stream)
    assert back.column("subject").to_pylist() == [f"{stream}.const"] * 3
    assert back.column("data").to_pylist() == ["é".encode(), b"", b"x" * 100]


@pytest.mark.parametrize(
    "data_type", [pa.binary(), pa.large_binary(), pa.utf8(), pa.large_utf8(), pa.binary_view()]
)
def test_payloads_of_sliced_batches_are_the_sliced_rows(
    client: ja.Client, stream: str, data_type: pa.DataType
) -> None:
    # Payloads are slices of the input's values buffer: a batch sliced out of the
    # middle of a larger one (offsets not starting at 0), nulls and empty values must
    # come out exactly as their rows.
    values = [None if i % 7 == 3 else ("v" * (i % 5)) + str(i) for i in range(1_000)]
    values[10] = ""
    whole = pa.record_batch([pa.array(values, pa.utf8()).cast(data_type)], names=["data"])
    batches = [whole.slice(100, 300), whole.slice(550, 1), whole.slice(700, 250)]
    reader = pa.RecordBatchReader.from_batches(whole.schema, batches)
    assert client.publish(reader, subject=f"{stream}.s").stored == 551
    expected = [
        (v or "").encode()
        for start, n in ((100, 300), (550, 1), (700, 250))
        for v in values[start : start + n]
    ]
    assert read_all(client, stream).column("data").to_pylist() == expected


def test_read_publishes_straight_back(client: ja.Client, stream: str, unique_name) -> None:
    """A read's batches are valid publish input (stream copy)."""
    client.publish(rows(500, stream))
    copy = unique_name("COPY")
    client.create_stream(copy, [f"{copy}.>"])
    try:
        src = read_all(client, stream, include_headers=True)
        moved = src.set_column(
            src.schema.get_field_index("subject"),
            "subject",
            pc.replace_substring(src.column("subject"), stream, copy),
        )
        assert client.publish(moved).stored == 500
        dst = read_all(client, copy, include_headers=True)
        assert dst.column("data").equals(src.column("data"))
        # Headers as read, but the msg id: a copy's is its source message's identity.
        copied = as_dicts(dst.column("headers").to_pylist())
        ids = [h.pop("Nats-Msg-Id") for h in copied]
        assert [i[0].rsplit(":", 1)[0] for i in ids] == [
            f"{stream}:{seq}" for seq in src.column("seq").to_pylist()
        ]
        source = as_dicts(src.column("headers").to_pylist())
        assert copied == [{k: v for k, v in h.items() if k != "Nats-Msg-Id"} for h in source]
    finally:
        client.delete_stream(copy)


# -- msg ids and duplicates -------------------------------------------------------------


def test_republishing_same_msg_ids_yields_only_duplicates(client: ja.Client, stream: str) -> None:
    n = 2_000
    table = rows(n, stream)
    first = client.publish(table)
    assert first.stored == n
    again = client.publish(table)
    assert (again.rows, again.stored, again.duplicates, again.failed) == (n, 0, n, 0)
    assert again.acks.column("duplicate").to_pylist() == [True] * n
    assert again.acks.column("seq").to_pylist() == first.acks.column("seq").to_pylist()
    assert again.acks.column("error").null_count == n
    assert stream_state(client, stream).messages == n


def test_msg_id_prefix_second_publisher_stores_nothing_new(client: ja.Client, stream: str) -> None:
    table = rows(1_000, stream, msg_ids=False, headers=False)
    with client.publisher(msg_id_prefix="job7-") as pub:
        first = pub.publish(table)
    assert first.stored == 1_000
    with client.publisher(msg_id_prefix="job7-") as pub:
        second = pub.publish(table)
    assert (second.stored, second.duplicates) == (0, 1_000)
    assert second.acks.column("seq").to_pylist() == first.acks.column("seq").to_pylist()
    assert stream_state(client, stream).messages == 1_000
    back = read_all(client, stream, include_headers=True)
    ids = [h["Nats-Msg-Id"] for h in as_dicts(back.column("headers").to_pylist())]
    assert ids == [[f"job7-{i}"] for i in range(1_000)]


def test_msg_id_start_offsets_generated_ids(client: ja.Client, stream: str) -> None:
    table = rows(10, stream, msg_ids=False, headers=False)
    client.publish(table, msg_id_prefix="r-", msg_id_start=100)
    back = read_all(client, stream, include_headers=True)
    ids = [h["Nats-Msg-Id"][0] for h in as_dicts(back.column("headers").to_pylist())]
    assert ids == [f"r-{i}" for i in range(100, 110)]
    # Rows 105.. again, numbered from 105: all duplicates; rows 110.. are new.
    again = client.publish(
        rows(10, stream, msg_ids=False, headers=False), msg_id_prefix="r-", msg_id_start=105
    )
    assert (again.duplicates, again.stored) == (5, 5)
    assert again.acks.column("duplicate").to_pylist() == [True] * 5 + [False] * 5


def test_msg_id_column_wins_over_prefix(client: ja.Client, stream: str) -> None:
    table = pa.table(
        {
            "subject": [f"{stream}.a"] * 3,
            "data": [b"1", b"2", b"3"],
            "msg_id": ["own", None, "own"],
        }
    )
    result = client.publish(table, msg_id_prefix="gen-")
    assert result.acks.column("duplicate").to_pylist() == [False, False, True]
    back = read_all(client, stream, include_headers=True)
    ids = [h["Nats-Msg-Id"][0] for h in as_dicts(back.column("headers").to_pylist())]
    assert ids == ["own", "gen-1"]


# -- a publisher reused across calls ----------------------------------------------------


def test_publisher_reused_keeps_numbering_and_acks_in_input_order(
    client: ja.Client, stream: str
) -> None:
    seen: list[int] = []
    with client.publisher(msg_id_prefix="p-", window=64) as pub:
        for call in range(20):
            part = rows(250, stream, start=call * 250, msg_ids=False)
            result = pub.publish(part)
            assert (result.rows, result.stored, result.failed) == (250, 250, 0)
            assert result.acks.num_rows == 250
            assert result.acks.schema.names == ["seq", "duplicate", "error"]
            seqs = result.acks.column("seq").to_pylist()
            assert seqs == list(range(call * 250 + 1, call * 250 + 251))
            seen.extend(seqs)
    assert seen == list(range(1, 5_001))
    back = read_all(client, stream, include_headers=True)
    got = as_dicts(back.column("headers").to_pylist())
    assert [h["Nats-Msg-Id"][0] for h in got] == [f"p-{i}" for i in range(5_000)]
    assert [h["X-Row"][0] for h in got] == [str(i) for i in range(5_000)]
    # A second run of the same calls through a new publisher stores nothing.
    with client.publisher(msg_id_prefix="p-") as pub:
        dup = sum(
            pub.publish(rows(250, stream, start=c * 250, msg_ids=False)).duplicates
            for c in range(20)
        )
    assert dup == 5_000
    assert stream_state(client, stream).messages == 5_000


def test_publish_batches_groups_rows_keeps_order_and_ids(client: ja.Client, stream: str) -> None:
    batches = [rows(300, stream, start=i * 300, msg_ids=False).to_batches()[0] for i in range(10)]
    with client.publisher(msg_id_prefix="g-", window=128) as pub:
        results = list(pub.publish_batches(iter(batches), rows_per_result=1_000))
    # Whole batches per result, as many as fit in rows_per_result.
    assert [r.rows for r in results] == [900, 900, 900, 300]
    seqs = [s for r in results for s in r.acks.column("seq").to_pylist()]
    assert seqs == list(range(1, 3_001))
    back = read_all(client, stream, include_headers=True)
    got = as_dicts(back.column("headers").to_pylist())
    assert [h["Nats-Msg-Id"][0] for h in got] == [f"g-{i}" for i in range(3_000)]
    assert [h["X-Row"][0] for h in got] == [str(i) for i in range(3_000)]


def test_publish_batches_raises_the_source_error_after_the_rows_before_it(
    client: ja.Client, stream: str
) -> None:
    def source() -> Iterator[pa.RecordBatch]:
        for i in range(3):
            yield rows(100, stream, start=i * 100, msg_ids=False).to_batches()[0]
        raise OSError("the input file went away")

    with client.publisher(msg_id_prefix="s-") as pub:
        results = pub.publish_batches(source(), rows_per_result=10_000)
        first = next(results)
        with pytest.raises(OSError, match="the input file went away"):
            next(results)
    assert (first.rows, first.stored) == (300, 300)
    assert stream_state(client, stream).messages == 300


def test_publish_batches_rejects_a_bad_group_size(client: ja.Client, stream: str) -> None:
    with client.publisher() as pub, pytest.raises(BadInputError, match="'rows_per_result'"):
        next(pub.publish_batches([], rows_per_result=0))


def test_ack_table_mixes_stored_duplicate_rows_in_order(client: ja.Client, stream: str) -> None:
    client.publish(pa.table({"subject": [f"{stream}.a"], "data": [b"x"], "msg_id": ["b"]}))
    table = pa.table(
        {
            "subject": [f"{stream}.a"] * 4,
            "data": [b"1", b"2", b"3", b"4"],
            "msg_id": ["a", "b", "c", "a"],
        }
    )
    result = client.publish(table)
    assert result.acks.to_pylist() == [
        {"seq": 2, "duplicate": False, "error": None},
        {"seq": 1, "duplicate": True, "error": None},
        {"seq": 3, "duplicate": False, "error": None},
        {"seq": 2, "duplicate": True, "error": None},
    ]
    assert (result.stored, result.duplicates) == (2, 2)


# -- expectations -----------------------------------------------------------------------


def test_expected_stream_matches(client: ja.Client, stream: str) -> None:
    result = client.publish(rows(100, stream), expected_stream=stream)
    assert result.stored == 100


def test_expected_stream_mismatch_fails_every_row_and_stores_nothing(
    client: ja.Client, stream: str
) -> None:
    result = client.publish(rows(50, stream), expected_stream="OTHER", raise_on_error=False)
    assert (result.stored, result.failed) == (0, 50)
    errors = result.acks.column("error").to_pylist()
    assert all(e and "stream" in e.lower() for e in errors), errors[:3]
    assert result.acks.column("seq").null_count == 50
    assert stream_state(client, stream).messages == 0
    with pytest.raises(PublishError, match="50 of 50 rows were not stored") as info:
        client.publish(rows(50, stream), expected_stream="OTHER")
    assert info.value.result.failed == 50
    assert stream_state(client, stream).messages == 0


def test_expected_last_seq_mismatch_stores_no_row_of_the_call(
    client: ja.Client, stream: str
) -> None:
    client.publish(rows(10, stream))
    result = client.publish(rows(500, stream, start=10), expected_last_seq=3, raise_on_error=False)
    assert (result.stored, result.duplicates, result.failed) == (0, 0, 500)
    first = result.acks.column("error")[0].as_py()
    assert first and "sequence" in first.lower(), first
    state = stream_state(client, stream)
    assert (state.messages, state.last_seq) == (10, 10)


def test_expected_last_seq_match_stores_all(client: ja.Client, stream: str) -> None:
    client.publish(rows(10, stream))
    result = client.publish(rows(500, stream, start=10), expected_last_seq=10)
    assert (result.stored, result.failed) == (500, 0)
    assert result.acks.column("seq").to_pylist() == list(range(11, 511))
    assert stream_state(client, stream).last_seq == 510


def test_expected_last_seq_is_checked_per_call_on_a_reused_publisher(
    client: ja.Client, stream: str
) -> None:
    """The check applies to the first row of each call: the second call's expectation
    (last seq 0) no longer holds, so it stores nothing."""
    with client.publisher(expected_last_seq=0, raise_on_error=False) as pub:
        assert pub.publish(rows(5, stream)).stored == 5
        again = pub.publish(rows(5, stream, start=5))
    assert (again.stored, again.failed) == (0, 5)
    assert stream_state(client, stream).messages == 5


# -- a cluster failover -----------------------------------------------------------------


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_cluster_publish_while_a_server_restarts_loses_and_duplicates_nothing(
    nats_cluster: NatsCluster,
) -> None:
    n = 20_000
    with ja.connect(nats_cluster.url) as client:
        info = client.create_stream("R3", ["r3.>"], replicas=3)
        leader = info.cluster.leader if info.cluster else None
        assert leader
        # Restart the stream leader while the publish runs.
        victim = next(s for s in nats_cluster.servers if s.name == leader)
        table = rows(n, "r3", headers=False)
        restarted = threading.Event()

        marks: dict[str, float] = {}

        def restart() -> None:
            # Once part of the input is stored, so the restart lands mid-publish
            # however fast the publish runs.
            with ja.connect(nats_cluster.url) as watcher:
                deadline = time.monotonic() + 30
                while watcher.stream_info("R3").state.messages < n // 10:
                    if time.monotonic() > deadline:
                        return  # the assertions below report it
                    time.sleep(0.005)
            marks["restart"] = time.monotonic()
            victim.restart(wait=False)
            restarted.set()

        thread = threading.Thread(target=restart)
        thread.start()
        try:
            result = client.publish(
                table,
                window=512,
                ack_timeout=2.0,
                max_retries=20,
                retry_backoff=0.1,
                raise_on_error=False,
            )
            marks["done"] = time.monotonic()
        finally:
            thread.join(30)
        assert restarted.is_set()
        assert marks["restart"] < marks["done"], "the restart came after the publish"
        nats_cluster.wait_ready()
        acks = result.acks
        assert acks.num_rows == n
        seq = acks.column("seq")
        err = acks.column("error")
        # Every row: stored/duplicate (a seq) or failed (an error), never neither.
        for i in range(n):
            assert (seq[i].is_valid) != (err[i].is_valid), i
        assert result.stored + result.duplicates + result.failed == n

        back = read_all(client, "R3", include_headers=True)
        ids = [h["Nats-Msg-Id"][0] for h in as_dicts(back.column("headers").to_pylist())]
        assert len(ids) == len(set(ids)), "a msg id was stored twice"
        assert set(ids) <= {f"id-{i}" for i in range(n)}
        # Each acknowledged row is in the stream at the sequence its ack named.
        by_seq = dict(zip(back.column("seq").to_pylist(), ids, strict=True))
        for i, s in enumerate(seq.to_pylist()):
            if s is not None:
                assert by_seq.get(s) == f"id-{i}", (i, s)
        assert len(ids) >= result.stored + result.duplicates - _dups_of_retries(acks)


def _dups_of_retries(acks: pa.Table) -> int:
    """Duplicate acks name a seq another row of the same call may also name; count
    the seqs that more than one row claims (0 unless a retry raced its first send)."""
    seqs = [s for s in acks.column("seq").to_pylist() if s is not None]
    return len(seqs) - len(set(seqs))


# -- publisher options ------------------------------------------------------------------


def test_on_full_fail_refuses_rows_beyond_the_window(client: ja.Client, stream: str) -> None:
    result = client.publish(
        rows(1_000, stream, headers=False), window=10, on_full="fail", raise_on_error=False
    )
    assert result.rows == 1_000
    assert result.stored + result.failed == 1_000
    assert 10 <= result.stored < 1_000
    refused = result.failed_rows()
    assert all("window" in e and "on_full" in e for e in refused.column("error").to_pylist())
    # Refused rows are the tail of the input; the stored ones are in the stream.
    assert refused.column("row").to_pylist() == list(range(result.stored, 1_000))
    assert stream_state(client, stream).messages == result.stored


@pytest.mark.parametrize("window", [0, 10**9])
def test_window_out_of_range(client: ja.Client, stream: str, window: int) -> None:
    with pytest.raises(ValueError, match="window"):
        client.publish(rows(1, stream), window=window)


def test_closed_publisher(client: ja.Client, stream: str) -> None:
    pub = client.publisher()
    pub.close()
    with pytest.raises(ValueError, match="closed"):
        pub.publish(rows(1, stream))
    assert stream_state(client, stream).messages == 0


def test_payloads_backed_by_python_bytes_are_published_and_released(
    client: ja.Client, stream: str
) -> None:
    # The last payload slice may be dropped on one of the engine's threads; a buffer
    # that wraps a Python object needs the GIL to be released, which it must get.
    blob = b"".join(str(i).encode() for i in range(2_000))
    offsets = pa.array(
        list(itertools.accumulate((len(str(i)) for i in range(2_000)), initial=0)), pa.int32()
    )
    data = pa.Array.from_buffers(
        pa.binary(), 2_000, [None, offsets.buffers()[1], pa.py_buffer(blob)]
    )
    for _ in range(3):
        result = client.publish(pa.table({"data": data}), subject=f"{stream}.b", window=64)
        assert result.stored == 2_000
    back = read_all(client, stream).column("data").to_pylist()
    assert back == [str(i).encode() for i in range(2_000)] * 3


_ITEM = pa.struct([("x", pa.int64()), ("s", pa.string())])
_NESTED_COLUMNS = {
    "fixed": pa.list_(_ITEM, 2),
    "listed": pa.list_(_ITEM),
    "outer": pa.struct([("inner", pa.struct([("items", pa.list_(_ITEM))]))]),
    "mapped": pa.map_(pa.string(), _ITEM),
}


def _nested_rows(n: int) -> pa.Table:
    def item(i: int, j: int) -> dict[str, Any]:
        return {"x": i * 10 + j, "s": f"r{i}.{j}"}

    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "fixed": pa.array(
                [[item(i, 0), item(i, 1)] for i in range(n)], _NESTED_COLUMNS["fixed"]
            ),
            "listed": pa.array(
                [[item(i, j) for j in range(i % 3)] for i in range(n)], _NESTED_COLUMNS["listed"]
            ),
            "outer": pa.array(
                [{"inner": {"items": [item(i, j) for j in range(1 + i % 2)]}} for i in range(n)],
                _NESTED_COLUMNS["outer"],
            ),
            "mapped": pa.array(
                [[(f"k{i}", item(i, 0))] for i in range(n)], _NESTED_COLUMNS["mapped"]
            ),
        }
    )


def test_sliced_nested_columns_are_published_as_their_rows(client: ja.Client, stream: str) -> None:
    # A slice of a nested column is exported with an offset that arrow-rs applied twice
    # to a struct inside a list: the publish failed with an internal panic.
    table = _nested_rows(9)
    sliced = table.slice(1, 4)
    batches = [table.slice(5, 2).to_batches()[0], table.slice(7, 2).to_batches()[0]]
    json = ja.ValueCodec("json")
    assert client.publish(sliced, subject=f"{stream}.a", codec=json).stored == 4
    with client.publisher(f"{stream}.a", codec=json) as publisher:
        stored = sum(r.stored for r in publisher.publish_batches(batches))
    assert stored == 4
    got = client.read(
        stream, codec=ja.ValueCodec("json", schema=table.schema, flatten=True)
    ).read_all()
    expected = table.slice(1, 8)
    assert got.select(table.column_names).to_pylist() == expected.to_pylist()


class _StreamProducer:
    """Arrow data offered only as a C stream (as polars, DuckDB or nanoarrow offer it)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.table.__arrow_c_stream__(requested_schema)


class _ArrayProducer:
    """Arrow data offered only as the C array of one batch."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __arrow_c_array__(self, requested_schema: object = None) -> object:
        return self.table.combine_chunks().to_batches()[0].__arrow_c_array__(requested_schema)


@pytest.mark.parametrize("producer", [_StreamProducer, _ArrayProducer])
def test_sliced_nested_columns_of_other_arrow_producers_are_published_as_their_rows(
    client: ja.Client, stream: str, producer: type[_StreamProducer | _ArrayProducer]
) -> None:
    table = _nested_rows(9).slice(1, 4)
    json = ja.ValueCodec("json")
    assert client.publish(producer(table), subject=f"{stream}.a", codec=json).stored == 4
    got = client.read(
        stream, codec=ja.ValueCodec("json", schema=table.schema, flatten=True)
    ).read_all()
    assert got.select(table.column_names).to_pylist() == table.to_pylist()


class _Wrapped(pa.ExtensionType):
    def __init__(self, storage: pa.DataType) -> None:
        super().__init__(storage, "jetstream_arrow.tests.wrapped")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage: pa.DataType, serialized: bytes) -> _Wrapped:
        return cls(storage)


@pytest.mark.parametrize("shape", ["in a struct", "in an extension type", "run-end encoded"])
def test_sliced_columns_of_every_shape_are_published_as_their_rows(
    client: ja.Client, stream: str, shape: str
) -> None:
    listed = _nested_rows(6).column("listed").chunk(0)
    if shape == "in a struct":  # the parent whole, its child sliced
        column = pa.StructArray.from_arrays([listed.slice(2, 3)], names=["w"])
        want = [{"w": v} for v in listed.slice(2, 3).to_pylist()]
    elif shape == "in an extension type":
        column = pa.ExtensionArray.from_storage(_Wrapped(listed.type), listed).slice(2, 3)
        want = listed.slice(2, 3).to_pylist()
    else:  # not a nested column: passed on as it is
        column = pc.run_end_encode(pa.array([1, 1, 2, 2, 2, 3])).slice(2, 3)
        want = [2, 2, 2]
    table = pa.table({"id": [0, 1, 2], "v": column})
    assert client.publish(table, subject=f"{stream}.a", codec=ja.ValueCodec("json")).stored == 3
    got = [json.loads(p)["v"] for p in client.read(stream).read_all().column("data").to_pylist()]
    assert got == want
