"""``Client.publish(..., writer=...)`` publishes rows exactly once at any age: a re-run
after the stream's duplicate window (1 s here, re-runs >= 2 s later) stores only what
the stream lacks, a run SIGKILLed midway is completed by a re-run, a copy re-run stores
each source message once, and a second writer with the same identity is refused.
What the stream holds is read with nats-py, never with the package's own reads."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exactly_once import ExactlyOnceUnavailableWarning
from jetstream_arrow.exceptions import BadInputError, PublishError
from jetstream_arrow.positions import WriterFencedError
from natspy import with_jetstream

WINDOW = 1.0
#: Longer than the window: the server's dedupe cannot be what keeps a re-run exact.
AFTER_WINDOW = 2.5


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"data": pa.array([f"row-{i}".encode() for i in range(start, start + n)])})


def _stored(url: str, stream: str) -> list[tuple[str, bytes, str | None]]:
    """(subject, payload, msg id) of every message of ``stream`` but writers'
    positions, read with nats-py."""

    async def work(js: Any) -> list[tuple[str, bytes, str | None]]:
        info = await js.stream_info(stream)
        found = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                msg = await js.get_msg(stream, seq)
            except Exception:  # removed by a position's rollup
                continue
            if not msg.subject.startswith("$JA.POS."):
                found.append((msg.subject, msg.data, (msg.headers or {}).get("Nats-Msg-Id")))
        return found

    return with_jetstream(url, work)


def _payloads(url: str, stream: str) -> Counter[bytes]:
    return Counter(data for _, data, _ in _stored(url, stream))


def _exact_stream(client: ja.Client, name: str) -> str:
    client.create_stream(name, [f"{name}.>"], duplicate_window=WINDOW, exactly_once=True)
    return name


def test_a_rerun_after_the_window_completes_a_partial_run_and_stores_nothing_twice(
    client, shared_nats_server, unique_name
):
    stream = _exact_stream(client, unique_name("EO"))
    first = client.publish(_rows(120), f"{stream}.rows", writer="job-1")
    assert (first.rows, first.stored, first.duplicates) == (120, 120, 0)
    time.sleep(AFTER_WINDOW)
    rerun = client.publish(_rows(300), f"{stream}.rows", writer="job-1")
    # Every input row has its row in the result: the 120 the stream held are
    # duplicates with no sequence, the rest stored.
    assert (rerun.rows, rerun.stored, rerun.duplicates, rerun.failed) == (300, 180, 120, 0)
    acks = rerun.acks.to_pydict()
    assert acks["duplicate"] == [True] * 120 + [False] * 180
    assert acks["seq"][:120] == [None] * 120 and None not in acks["seq"][120:]
    assert _payloads(shared_nats_server.url, stream) == Counter(_rows(300)["data"].to_pylist())
    ids = sorted(i for _, _, i in _stored(shared_nats_server.url, stream))
    assert ids == sorted(f"ja.w.job-1:{n}" for n in range(300))
    time.sleep(AFTER_WINDOW)
    again = client.publish(_rows(300), f"{stream}.rows", writer="job-1")
    assert (again.stored, again.duplicates) == (0, 300)
    # Another writer's rows are its own.
    other = client.publish(_rows(5), f"{stream}.rows", writer="job-2")
    assert other.stored == 5
    expected = Counter(_rows(300)["data"].to_pylist()) + Counter(_rows(5)["data"].to_pylist())
    assert _payloads(shared_nats_server.url, stream) == expected


_SLOW_WRITER = textwrap.dedent(
    """
    import sys, time
    import pyarrow as pa
    import jetstream_arrow as ja

    url, stream, writer, lease, position_rows, batches = sys.argv[1:7]

    def rows():
        for b in range(int(batches)):
            yield pa.record_batch(
                {"data": pa.array([f"row-{b * 500 + i}".encode() for i in range(500)])}
            )
            time.sleep(0.1)

    reader = pa.RecordBatchReader.from_batches(next(rows()).schema, rows())
    with ja.connect(url) as client:
        print("publishing", flush=True)
        result = client.publish(
            reader, f"{stream}.rows", writer=writer, writer_lease=float(lease),
            position_rows=int(position_rows),
        )
        print("stored", result.stored, flush=True)
    """
)


def _slow_writer(
    url: str, stream: str, writer: str, lease: float, position_rows: int, batches: int
):
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _SLOW_WRITER,
            url,
            stream,
            writer,
            str(lease),
            str(position_rows),
            str(batches),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _messages(url: str, stream: str) -> int:
    async def work(js: Any) -> int:
        return int((await js.stream_info(stream)).state.messages)

    return with_jetstream(url, work)


def _wait_for_messages(url: str, stream: str, at_least: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while _messages(url, stream) < at_least:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the writer stored too little in 60 s"
        time.sleep(0.05)


def test_a_run_killed_midway_is_completed_by_a_rerun(client, shared_nats_server, unique_name):
    url = shared_nats_server.url
    stream = _exact_stream(client, unique_name("EOKILL"))
    batches = 30  # 15,000 rows, 500 a batch, one batch every 0.1 s
    proc = _slow_writer(url, stream, "killed", 2.0, 2_000, batches)
    try:
        _wait_for_messages(url, stream, 5_000, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    killed_at = len(_stored(url, stream))
    assert 0 < killed_at < batches * 500
    time.sleep(AFTER_WINDOW)
    every = pa.concat_tables([_rows(500, b * 500) for b in range(batches)])
    rerun = client.publish(every, f"{stream}.rows", writer="killed", writer_lease=2.0)
    assert rerun.rows == batches * 500 and rerun.failed == 0
    assert rerun.stored == batches * 500 - killed_at
    assert rerun.duplicates == killed_at
    assert _payloads(url, stream) == Counter(every["data"].to_pylist())


def test_a_second_writer_with_the_same_identity_is_refused(client, shared_nats_server, unique_name):
    url = shared_nats_server.url
    stream = _exact_stream(client, unique_name("EOFENCE"))
    batches = 40
    # Its position moves every 500 rows (every 0.1 s), within any lease.
    proc = _slow_writer(url, stream, "one-job", 3.0, 500, batches)
    try:
        _wait_for_messages(url, stream, 1_000, proc)
        with pytest.raises(WriterFencedError) as refused:
            client.publish(_rows(batches * 500), f"{stream}.rows", writer="one-job")
        assert refused.value.writer == "one-job" and refused.value.stream == stream
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"stored {batches * 500}" in out
    every = pa.concat_tables([_rows(500, b * 500) for b in range(batches)])
    assert _payloads(url, stream) == Counter(every["data"].to_pylist())


def test_a_copy_rerun_after_the_window_stores_each_source_message_once(
    client, shared_nats_server, unique_name
):
    url = shared_nats_server.url
    source = unique_name("SRC")
    client.create_stream(source, [f"{source}.>"])
    # Two alike payloads on one subject: a copy tells them apart by their sequence.
    client.publish(
        pa.table({"data": [b"same"] * 2 + [f"m{i}".encode() for i in range(198)]}), f"{source}.a"
    )
    target = _exact_stream(client, unique_name("COPY"))
    writer = f"copy of {source}"
    part = client.publish(client.read(source, end_seq=80), f"{target}.copied", writer=writer)
    assert part.stored == 80
    time.sleep(AFTER_WINDOW)
    whole = client.publish(client.read(source), f"{target}.copied", writer=writer)
    assert (whole.rows, whole.stored, whole.duplicates) == (200, 120, 80)
    time.sleep(AFTER_WINDOW)
    again = client.publish(client.read(source), f"{target}.copied", writer=writer)
    assert (again.rows, again.stored, again.duplicates) == (200, 0, 200)
    stored = _stored(url, target)
    assert Counter(data for _, data, _ in stored) == Counter(
        [b"same"] * 2 + [f"m{i}".encode() for i in range(198)]
    )
    assert all(i is not None and i.startswith(f"{source}:") for _, _, i in stored)


def test_a_copy_of_two_streams_or_out_of_order_is_refused(client, unique_name):
    target = _exact_stream(client, unique_name("COPYBAD"))
    copy = pa.table({"data": [b"a", b"b"], "stream": ["X", "Y"], "seq": [1, 2]})
    with pytest.raises(BadInputError, match="column 'stream'"):
        client.publish(copy, f"{target}.c", writer="w")
    back = pa.RecordBatchReader.from_batches(
        copy.schema,
        [
            pa.record_batch({"data": [b"a"], "stream": ["X"], "seq": [5]}, schema=copy.schema),
            pa.record_batch({"data": [b"b"], "stream": ["X"], "seq": [3]}, schema=copy.schema),
        ],
    )
    with pytest.raises(BadInputError, match="column 'seq'") as refused:
        client.publish(back, f"{target}.c", writer="w2")
    # The row before the refused one is reported.
    assert refused.value.result.rows == 1


def test_exactly_once_options_are_checked(client, shared_nats_server, new_stream, unique_name):
    plain = new_stream("PLAIN", duplicate_window=WINDOW)
    with pytest.raises(BadInputError, match=r"'exactly_once'.*enable-exactly-once"):
        client.publish(_rows(3), f"{plain}.x", writer="w", exactly_once=True)
    with pytest.raises(BadInputError, match="'writer'"):
        client.publish(_rows(3), f"{plain}.x", exactly_once=True)
    rows_with_subjects = _rows(2).append_column("subject", pa.array([f"{plain}.a"] * 2))
    with pytest.raises(BadInputError, match="'expected_stream'"):
        client.publish(rows_with_subjects, writer="w")
    assert _messages(shared_nats_server.url, plain) == 0
    # By default a stream that cannot hold positions is written within its window,
    # under the writer's ids, with one warning naming the command that enables it.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = client.publish(_rows(3), f"{plain}.x", writer="w")
    told = [w for w in caught if issubclass(w.category, ExactlyOnceUnavailableWarning)]
    assert len(told) == 1 and "enable-exactly-once" in str(told[0].message)
    assert told[0].filename == __file__
    assert result.stored == 3
    assert sorted(i for _, _, i in _stored(shared_nats_server.url, plain)) == [
        "ja.w.w:0",
        "ja.w.w:1",
        "ja.w.w:2",
    ]
    # With expected_stream, rows may name their subjects.
    exact = _exact_stream(client, unique_name("EOSUBJ"))
    rows = _rows(2).append_column("subject", pa.array([f"{exact}.a", f"{exact}.b"]))
    assert client.publish(rows, writer="w", expected_stream=exact).stored == 2


def test_the_asyncio_publish_takes_a_writer(client, shared_nats_server, unique_name):
    url = shared_nats_server.url
    stream = _exact_stream(client, unique_name("EOASYNC"))

    async def run() -> tuple[ja.PublishResult, ja.PublishResult]:
        async with await ja.connect_async(url) as aclient:
            first = await aclient.publish(_rows(40), f"{stream}.rows", writer="async")
            await asyncio.sleep(AFTER_WINDOW)
            again = await aclient.publish(_rows(50), f"{stream}.rows", writer="async")
            return first, again

    first, again = asyncio.run(run())
    assert (first.stored, again.stored, again.duplicates) == (40, 10, 40)
    assert _payloads(url, stream) == Counter(_rows(50)["data"].to_pylist())


def test_a_failed_row_stops_the_writer_and_a_rerun_sends_the_rest(
    client, shared_nats_server, unique_name
):
    stream = _exact_stream(client, unique_name("EOFAIL"))
    rows = _rows(10)
    # Row 5 expects its subject to be at sequence 999: it fails.
    checked = rows.append_column(
        "expected_last_subject_seq", pa.array([None] * 5 + [999] + [None] * 4, pa.int64())
    )
    # One row a batch: a writer's results (and positions) are of whole batches.
    one_by_one = pa.RecordBatchReader.from_batches(
        checked.schema, checked.to_batches(max_chunksize=1)
    )
    failed = client.publish(
        one_by_one, f"{stream}.rows", writer="fails", position_rows=3, raise_on_error=False
    )
    assert (failed.rows, failed.stored, failed.failed) == (10, 5, 5)
    errors = failed.acks.column("error").to_pylist()
    assert errors[:5] == [None] * 5 and errors[5] is not None
    assert all(e.startswith("not sent") for e in errors[6:])
    with pytest.raises(PublishError):
        client.publish(checked, f"{stream}.rows", writer="fails-too", position_rows=3)
    time.sleep(AFTER_WINDOW)
    # The writer freed its identity at the failed row: the re-run starts at once.
    started = time.monotonic()
    rerun = client.publish(rows, f"{stream}.rows", writer="fails", position_rows=3)
    assert time.monotonic() - started < 5
    assert (rerun.rows, rerun.stored, rerun.duplicates) == (10, 5, 5)
    stored = _payloads(shared_nats_server.url, stream)
    # "fails-too" sent its rows as one batch: every row but the failed one is stored.
    others = [d for i, d in enumerate(rows["data"].to_pylist()) if i != 5]
    assert stored == Counter(rows["data"].to_pylist()) + Counter(others)
