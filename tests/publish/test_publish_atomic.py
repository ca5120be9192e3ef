"""Atomic batch publishing (``mode="atomic"``) against real servers: batches stored
whole with their sequences, a refused batch storing none of its rows while the
batches around it are stored, re-runs reported as duplicates, a stream without
``allow_atomic``, the server's batch limit named, and a ``kill -9`` mid-batch after
which no batch is found in part and every row is stored once."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import as_dicts, read_all, rows, stream_state
from fault_helpers import Killer
from jetstream_arrow import _core
from jetstream_arrow.exceptions import BadInputError, PublishError
from natsserver import NatsServer


@pytest.fixture
def atomic_stream(new_stream: Callable[..., str]) -> str:
    """A fresh stream with ``allow_atomic`` on the shared server, deleted afterwards."""
    return new_stream("ATOM", allow_atomic=True, max_msg_size=4096)


def batches_in(back: pa.Table) -> dict[str, list[tuple[int, int, bool]]]:
    """The stored messages by ``Nats-Batch-Id``: (stream seq, batch seq, commit) each."""
    out: dict[str, list[tuple[int, int, bool]]] = defaultdict(list)
    for seq, headers in zip(
        back.column("seq").to_pylist(), as_dicts(back.column("headers").to_pylist()), strict=True
    ):
        out[headers["Nats-Batch-Id"][0]].append(
            (seq, int(headers["Nats-Batch-Sequence"][0]), "Nats-Batch-Commit" in headers)
        )
    return out


def assert_whole(batches: dict[str, list[tuple[int, int, bool]]]) -> None:
    """Every batch present is all there: batch sequences 1..k at consecutive stream
    sequences, the commit on k only."""
    for batch_id, members in batches.items():
        seqs = [m[0] for m in members]
        assert [m[1] for m in members] == list(range(1, len(members) + 1)), batch_id
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), batch_id
        assert [m[2] for m in members] == [False] * (len(members) - 1) + [True], batch_id


def test_atomic_batches_are_stored_whole_with_their_sequences(
    client: ja.Client, atomic_stream: str
) -> None:
    table = rows(2_500, atomic_stream)
    result = client.publish(table, mode="atomic", batch_rows=1_000)
    assert (result.rows, result.stored, result.duplicates, result.failed) == (2_500, 2_500, 0, 0)
    assert result.acks.column("seq").to_pylist() == list(range(1, 2_501))
    back = read_all(client, atomic_stream, include_headers=True)
    assert back.column("data").to_pylist() == table.column("data").to_pylist()
    batches = batches_in(back)
    assert sorted(len(m) for m in batches.values()) == [500, 1_000, 1_000]
    assert_whole(batches)
    ids = [h["Nats-Msg-Id"][0] for h in as_dicts(back.column("headers").to_pylist())]
    assert ids == table.column("msg_id").to_pylist()


def test_a_refused_batch_stores_none_of_its_rows_and_the_others_are_stored(
    client: ja.Client, atomic_stream: str
) -> None:
    # Row 14 is over the stream's max_msg_size: its batch (rows 10..19) is refused
    # at the commit, the batches before and after it are stored.
    table = rows(30, atomic_stream, msg_ids=False, headers=False)
    data = table.column("data").to_pylist()
    data[14] = b"x" * 5_000
    table = table.set_column(1, "data", pa.array(data, pa.binary()))
    with pytest.raises(PublishError) as info:
        client.publish(table, mode="atomic", batch_rows=10)
    result = info.value.result  # type: ignore[attr-defined]
    assert (result.stored, result.failed) == (20, 10)
    errors = result.acks.column("error").to_pylist()
    assert all(e is None for e in errors[:10] + errors[20:])
    assert all(
        e is not None and "atomic batch of rows 10..=19 not stored" in e for e in errors[10:20]
    )
    back = read_all(client, atomic_stream)
    assert back.column("data").to_pylist() == data[:10] + data[20:]
    assert stream_state(client, atomic_stream).messages == 20


def test_a_failed_expectation_stores_nothing_of_the_batch(
    client: ja.Client, atomic_stream: str
) -> None:
    client.publish(rows(3, atomic_stream), mode="atomic")
    with pytest.raises(PublishError, match="wrong last sequence: 3"):
        client.publish(rows(5, atomic_stream, start=3), mode="atomic", expected_last_seq=2)
    assert stream_state(client, atomic_stream).messages == 3
    result = client.publish(rows(5, atomic_stream, start=3), mode="atomic", expected_last_seq=3)
    assert (result.stored, result.failed) == (5, 0)


def test_a_rerun_reports_duplicates_and_stores_only_the_new_rows_of_a_batch(
    client: ja.Client, atomic_stream: str
) -> None:
    first = client.publish(rows(25, atomic_stream), mode="atomic", batch_rows=10)
    assert first.stored == 25
    again = client.publish(rows(25, atomic_stream), mode="atomic", batch_rows=10)
    assert (again.stored, again.duplicates, again.failed) == (0, 25, 0)
    assert again.acks.column("seq").to_pylist() == list(range(1, 26))
    # Rows 20..29 in one batch: 20..24 are stored already, 25..29 are new and are
    # stored together as a batch of their own.
    mixed = client.publish(rows(10, atomic_stream, start=20), mode="atomic", batch_rows=10)
    assert (mixed.stored, mixed.duplicates, mixed.failed) == (5, 5, 0)
    assert mixed.acks.column("duplicate").to_pylist() == [True] * 5 + [False] * 5
    assert mixed.acks.column("seq").to_pylist() == [21, 22, 23, 24, 25, 26, 27, 28, 29, 30]
    back = read_all(client, atomic_stream, include_headers=True)
    assert len(back) == 30
    assert_whole(batches_in(back))
    # Two rows of one batch with the same msg id: the server would refuse the batch.
    twice = rows(4, atomic_stream, start=100).set_column(
        3, "msg_id", pa.array(["a", "b", "a", "c"], pa.utf8())
    )
    with pytest.raises(PublishError, match="rows 0 and 2 of its atomic batch have the same msg id"):
        client.publish(twice, mode="atomic")
    assert stream_state(client, atomic_stream).messages == 30


def test_atomic_publish_into_a_stream_without_allow_atomic_fails_clearly(
    client: ja.Client, stream: str
) -> None:
    with pytest.raises(PublishError, match="allow_atomic") as info:
        client.publish(rows(25, stream), mode="atomic", batch_rows=10)
    result = info.value.result  # type: ignore[attr-defined]
    assert (result.rows, result.stored, result.failed) == (25, 0, 25)
    errors = result.acks.column("error").to_pylist()
    assert all("err_code 10174" in e for e in errors[:10])
    assert all(e.startswith("not sent: ") for e in errors[10:])
    assert stream_state(client, stream).messages == 0


def test_a_batch_over_the_servers_limit_is_refused_naming_the_limit(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    server = nats_server_factory(jetstream_extra="limits { batch { max_msgs: 10 } }")
    with ja.connect(server.url) as client:
        client.create_stream("L", ["L.>"], allow_atomic=True)
        with pytest.raises(PublishError) as info:
            client.publish(rows(30, "L"), mode="atomic", batch_rows=11)
        result = info.value.result  # type: ignore[attr-defined]
        assert (result.stored, result.failed) == (0, 30)
        why = result.acks.column("error").to_pylist()[0]
        assert "option 'batch_rows'" in why and "max_msgs" in why and "too large: 10" in why, why
        assert stream_state(client, "L").messages == 0
        result = client.publish(rows(30, "L"), mode="atomic", batch_rows=10)
        assert (result.stored, result.failed) == (30, 0)


def test_atomic_options_are_checked(client: ja.Client) -> None:
    assert _core.DEFAULT_ATOMIC_BATCH_ROWS == 1_000
    with pytest.raises(BadInputError, match="'batch_rows' must be at least 1"):
        client.publisher(mode="atomic", batch_rows=0)
    with pytest.raises(BadInputError, match="on_full='fail'"):
        client.publisher(mode="atomic", on_full="fail")
    with pytest.raises(
        BadInputError, match="'expected_last_msg_id' does not work with mode='atomic'"
    ):
        client.publisher(mode="atomic", expected_last_msg_id="x")


@pytest.mark.fault
@pytest.mark.timeout(180)
def test_a_kill_9_mid_batch_leaves_no_batch_in_part_and_every_row_stored_once(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    n, batch_rows, kills, prefix = 30_000, 500, 2, "a-"
    # Every write is synced before its ack, so a kill loses nothing acknowledged.
    server = nats_server_factory(jetstream_extra="sync_interval: always", tmpfs=True)
    with ja.connect(server.url, max_reconnects=None, reconnect_delay=0.2) as client:
        client.create_stream("A", ["A.>"], allow_atomic=True, duplicate_window=600.0)
        table = pa.table({"data": pa.array([f"row-{i}".encode() for i in range(n)])})
        killer = Killer(server, n, kills, timeout=120.0)
        killer.start()
        started = time.monotonic()
        result = client.publish(
            table,
            subject="A.rows",
            msg_id_prefix=prefix,
            mode="atomic",
            batch_rows=batch_rows,
            raise_on_error=False,
        )
        elapsed = time.monotonic() - started
        killer.done.set()
        killer.join(30)
        assert killer.error is None, killer.error
        assert len(killer.kills) == kills, ("a kill missed the publish", killer.kills)
        # Batches cut by a kill were sent again by msg id within the default retries.
        assert (result.rows, result.failed) == (n, 0), result.failed_rows().slice(0, 3)
        assert result.stored + result.duplicates == n

        back = read_all(client, "A", include_headers=True)
        headers = as_dicts(back.column("headers").to_pylist())
        ids = [h["Nats-Msg-Id"][0] for h in headers]
        assert len(ids) == len(set(ids)) == n, "a row was stored twice"
        assert set(ids) == {f"{prefix}{i}" for i in range(n)}
        data = dict(zip(ids, back.column("data").to_pylist(), strict=True))
        assert all(data[f"{prefix}{i}"] == f"row-{i}".encode() for i in range(n))
        batches = batches_in(back)
        assert_whole(batches)
        # Batches of the input are never split: each stored batch holds whole input
        # batches' rows (a re-sent batch may have lost its duplicates to an earlier one).
        assert all(len(m) <= batch_rows for m in batches.values())
    print(
        f"atomic publish of {n} rows in batches of {batch_rows} through kill -9s at "
        f"{[k[0] for k in killer.kills]} stored: {result.stored} stored, "
        f"{result.duplicates} duplicates, {len(batches)} batches, {elapsed:.1f} s"
    )


def test_a_row_that_fits_only_without_the_batch_headers_is_refused_naming_it(
    small_payload_nats_server: NatsServer,
) -> None:
    max_payload = 8192  # the fixture's server
    with ja.connect(small_payload_nats_server.url) as client:
        client.create_stream("P", ["P.>"], allow_atomic=True)
        # Fits the server's max_payload as a plain publish, not with a batch's headers.
        data = [b"a", b"x" * (max_payload - 100), b"b"]
        assert client.publish(pa.table({"data": data}), subject="P.x").stored == 3
        with pytest.raises(BadInputError, match=r"row 1: .* max_payload") as info:
            client.publish(pa.table({"data": data}), subject="P.x", mode="atomic")
        result = info.value.result  # type: ignore[attr-defined]
        assert (result.stored, result.failed) == (0, 1)
        assert stream_state(client, "P").messages == 3
