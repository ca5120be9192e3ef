"""Fast-ingest publishing (``mode="fast"``) against real servers: a large publish in
order, a stream without ``allow_batched``, a ``kill -9`` of the server mid-publish,
and bad input named by column and row."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import jetstream_arrow as ja
from engine_helpers import as_dicts, read_all, rows, runs_of, stream_state
from jetstream_arrow.client import PublishResult
from jetstream_arrow.exceptions import BadInputError, PublishError
from natsserver import NatsServer


@pytest.fixture
def fast_stream(new_stream: Callable[..., str]) -> str:
    """A fresh stream with ``allow_batched`` on the shared server, deleted afterwards."""
    return new_stream("FAST", allow_batched=True)


def ok_rows(result: PublishResult) -> list[int]:
    """Rows stored or found duplicate: fast acks cover ranges, so they carry no seq."""
    errors = result.acks.column("error").to_pylist()
    return [i for i, e in enumerate(errors) if e is None]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_1m_row_fast_publish_stores_every_row_once_in_order(
    client: ja.Client, fast_stream: str
) -> None:
    n = 1_000_000
    data = pc.cast(pa.array(range(n), pa.int64()), pa.utf8()).cast(pa.binary())
    table = pa.table({"data": data})
    started = time.monotonic()
    result = client.publish(table, subject=f"{fast_stream}.rows", mode="fast")
    elapsed = time.monotonic() - started
    assert (result.rows, result.stored, result.failed) == (n, n, 0)
    state = stream_state(client, fast_stream)
    assert (state.messages, state.first_seq, state.last_seq) == (n, 1, n)
    back = read_all(client, fast_stream)
    assert back.column("seq").to_pylist() == list(range(1, n + 1))
    assert back.column("data").combine_chunks().equals(data)
    print(f"fast publish of {n} rows in {elapsed:.2f} s ({n / elapsed:,.0f} rows/s)")


def test_fast_publish_into_a_stream_without_allow_batched_fails_clearly(
    client: ja.Client, stream: str
) -> None:
    table = rows(50, stream, headers=False)
    with pytest.raises(PublishError, match="allow_batched") as info:
        client.publish(table, mode="fast")
    result = info.value.result  # type: ignore[attr-defined]
    assert (result.rows, result.stored, result.failed) == (50, 0, 50)
    errors = result.acks.column("error").to_pylist()
    assert "10205" in errors[0] and "mode='acked'" in errors[0], errors[0]
    assert all(e.startswith("not sent: ") for e in errors[1:]), errors[1]
    assert stream_state(client, stream).messages == 0


def test_an_unknown_mode_and_on_full_fail_are_refused(client: ja.Client) -> None:
    with pytest.raises(BadInputError, match="'mode' must be 'acked', 'fast' or 'atomic'"):
        client.publisher(mode="quick")  # type: ignore[arg-type]
    with pytest.raises(BadInputError, match="on_full='fail'"):
        client.publisher(mode="fast", on_full="fail")


def test_fast_publish_with_msg_ids_rerun_stores_nothing_twice(
    client: ja.Client, fast_stream: str
) -> None:
    table = rows(5_000, fast_stream, headers=False)
    first = client.publish(table, mode="fast")
    assert (first.stored, first.failed) == (5_000, 0)
    # The server drops every row of the re-run as a duplicate; a fast ack covers a
    # range without telling duplicates apart, so they count among the acked rows.
    again = client.publish(table, mode="fast")
    assert (again.rows, again.failed) == (5_000, 0)
    assert stream_state(client, fast_stream).messages == 5_000


def test_bad_input_in_a_fast_publish_names_column_and_row(
    client: ja.Client, fast_stream: str
) -> None:
    table = rows(10_000, fast_stream, headers=False)
    subjects = table.column("subject").to_pylist()
    subjects[7_321] = None
    table = table.set_column(0, "subject", pa.array(subjects, pa.utf8()))
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(1_000))
    with pytest.raises(BadInputError, match=r"column 'subject', row 7321") as info:
        client.publish(reader, mode="fast")
    result = info.value.result  # type: ignore[attr-defined]
    assert (result.stored, result.failed) == (7_321, 0)
    assert ok_rows(result)[:7_321] == list(range(7_321))
    state = stream_state(client, fast_stream)
    assert (state.messages, state.last_seq) == (7_321, 7_321)
    back = read_all(client, fast_stream)
    assert back.column("data").to_pylist() == [f"payload-{i}".encode() for i in range(7_321)]


@pytest.mark.fault
@pytest.mark.timeout(300)
def test_a_kill_9_mid_fast_publish_ends_with_every_row_stored_once_after_a_rerun(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    n, prefix = 200_000, "f-"
    # Every write is synced before its ack, so the kill loses no acknowledged row.
    server = nats_server_factory(jetstream_extra="sync_interval: always", tmpfs=True)
    with ja.connect(server.url, max_reconnects=None, reconnect_delay=0.2) as client:
        client.create_stream("F", ["F.>"], allow_batched=True, duplicate_window=600.0)
        table = pa.table({"data": pa.array([f"row-{i}".encode() for i in range(n)])})

        def publish(start: int, stop: int) -> PublishResult:
            return client.publish(
                table.slice(start, stop - start),
                subject="F.rows",
                msg_id_prefix=prefix,
                msg_id_start=start,
                mode="fast",
                raise_on_error=False,
            )

        kill: dict[str, float] = {}

        def killer() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    stored = int(server.monitor("jsz").get("messages", 0))
                except (OSError, ValueError):
                    stored = 0
                if stored >= n // 3:
                    process = server.process
                    assert process is not None
                    kill["stored"], kill["at"] = stored, time.monotonic()
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait(10)
                    server.kill()  # forget the dead process before starting again
                    server.start()
                    return
                time.sleep(0.005)

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        first = publish(0, n)
        done = time.monotonic()
        thread.join(90)
        assert "at" in kill and kill["at"] < done, ("the kill missed the publish", kill)
        assert kill["stored"] < n
        assert first.rows == n
        assert first.stored + first.duplicates + first.failed == n
        failed = first.failed_rows().column("row").to_pylist()
        assert failed, "the kill should have cut the batch"
        # In gap-fail mode the stored rows are a prefix: the failures are one run.
        assert failed == list(range(failed[0], n))
        reruns = [publish(start, stop) for start, stop in runs_of(failed)]
        assert sum(r.failed for r in reruns) == 0, [r.failed_rows().slice(0, 3) for r in reruns]

        assert stream_state(client, "F").messages == n
        back = read_all(client, "F", include_headers=True)
        ids = [h["Nats-Msg-Id"][0] for h in as_dicts(back.column("headers").to_pylist())]
        assert len(set(ids)) == len(ids) == n, "a row was stored twice"
        assert set(ids) == {f"{prefix}{i}" for i in range(n)}
        data = dict(zip(ids, back.column("data").to_pylist(), strict=True))
        assert all(data[f"{prefix}{i}"] == f"row-{i}".encode() for i in range(n))
    print(
        f"kill -9 at {int(kill['stored'])} stored: first run {first.stored} acked, "
        f"{first.failed} reported from row {failed[0]}; re-run "
        f"{sum(r.stored for r in reruns)} acked, {sum(r.duplicates for r in reruns)} "
        f"duplicates; stream {n} messages, {len(set(ids))} ids"
    )


def test_a_fast_publish_whose_input_pauses_ends_its_batch_and_starts_another(
    client: ja.Client, fast_stream: str, shared_nats_server: NatsServer
) -> None:
    # The server abandons a batch idle for 10 s; the publisher ends a batch whose input
    # paused past defaults.rs FAST_MAX_IDLE (4 s) and starts a new one. A plain
    # subscriber on the subject sees each message's reply subject, which names its
    # batch and its sequence in it: `<inbox>.<flow>.fail.<seq>.<op>.$FI`.
    import asyncio

    import nats

    subject = f"{fast_stream}.rows"
    seen: list[str] = []
    ready, done = threading.Event(), threading.Event()

    async def sniff() -> None:
        nc = await nats.connect(shared_nats_server.url)
        try:

            async def on(msg: nats.aio.msg.Msg) -> None:
                seen.append(msg.reply)

            await nc.subscribe(subject, cb=on)
            await nc.flush()
            ready.set()
            while not done.is_set():
                await asyncio.sleep(0.05)
            await nc.flush()
        finally:
            await nc.close()

    sniffer = threading.Thread(target=lambda: asyncio.run(sniff()), daemon=True)
    sniffer.start()
    assert ready.wait(10)
    one = pa.record_batch([pa.array([b"a", b"b", b"c"], pa.binary())], names=["data"])

    def paused() -> Iterator[pa.RecordBatch]:
        yield one
        time.sleep(4.5)
        yield one

    reader = pa.RecordBatchReader.from_batches(one.schema, paused())
    result = client.publish(reader, subject=subject, mode="fast")
    done.set()
    sniffer.join(10)
    assert (result.rows, result.stored, result.failed) == (6, 6, 0)
    assert stream_state(client, fast_stream).messages == 6
    data = [r for r in seen if r.split(".")[-2] in ("0", "1")]  # start, append
    assert len(data) == 6, seen
    batches = [r.rsplit(".", 5)[0] for r in data]
    seqs = [int(r.split(".")[-3]) for r in data]
    assert seqs == [1, 2, 3, 1, 2, 3], data
    assert batches[0] == batches[2] != batches[3] == batches[5], data
