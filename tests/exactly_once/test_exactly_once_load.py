"""`jetstream-arrow load` exactly once at any age: a load killed (SIGKILL, by the PID
the test started) several times and run again after the stream's duplicate window
(1 s here) stores every row of the file exactly once; nats-py is the oracle.

The window is too short to catch anything across the restarts (each waits longer
than it), so only the file's position in the stream, and the read-back of what the
stream took after it, can keep the count exact."""

from __future__ import annotations

import asyncio
import collections
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nats
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import jetstream_arrow as ja
from jetstream_arrow.positions import POSITION_SUBJECT_PREFIX

# Enough rows for several positions (one per 100,000 rows) and a load that runs for
# a few seconds, so that each kill lands mid-file.
ROWS = 250_000
KILLS = 4
DUPLICATE_WINDOW = "1"
LEASE = "1"
DEADLINE = 240.0


def _file(tmp_path: Path, rows: int) -> Path:
    table = pa.table({"n": pa.array(range(rows), pa.int64()), "pad": ["x" * 16] * rows})
    path = tmp_path / "rows.parquet"
    pq.write_table(table, path, row_group_size=20_000)
    return path


def _load(url: str, path: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "jetstream_arrow", "load", str(path),
            "--stream", "LOADED", "--subject", "loaded.rows", "--create-stream",
            "--duplicate-window", DUPLICATE_WINDOW, "--writer-lease", LEASE,
            "--batch-rows", "5000", "--quiet", "-s", url, *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip


def _stored_messages(url: str) -> int:
    with ja.connect(url) as client:
        try:
            return int(client.stream_info("LOADED").state.messages)
        except ja.exceptions.NotFoundError:
            return 0


def _oracle(url: str) -> tuple[collections.Counter[tuple[int, str]], int]:
    """Every data message as nats-py reads it: how often each (row number, payload
    digest) is stored, and how many position messages there are."""

    async def run() -> tuple[collections.Counter[tuple[int, str]], int]:
        import json

        nc = await nats.connect(url)
        js = nc.jetstream()
        info = await js.stream_info("LOADED")
        rows: collections.Counter[tuple[int, str]] = collections.Counter()
        positions = 0
        sub = await js.subscribe(">", stream="LOADED", ordered_consumer=True)
        seen = 0
        while seen < info.state.messages:
            msg = await sub.next_msg(timeout=10)
            seen += 1
            if msg.subject.startswith(POSITION_SUBJECT_PREFIX):
                positions += 1
                continue
            rows[(json.loads(msg.data)["n"], hashlib.sha256(msg.data).hexdigest())] += 1
        await sub.unsubscribe()
        await nc.close()
        return rows, positions

    return asyncio.run(run())


@pytest.mark.slow
def test_a_load_killed_again_and_again_stores_each_row_once(nats_server, tmp_path):
    path = _file(tmp_path, ROWS)
    deadline = time.monotonic() + DEADLINE
    kills = 0
    while kills < KILLS:
        before = _stored_messages(nats_server.url)
        load = _load(nats_server.url, path)
        # Kill it once it stored more rows, before it ends (a load that finished
        # first leaves nothing to resume: the loop then kills the next one earlier).
        while time.monotonic() < deadline and load.poll() is None:
            if _stored_messages(nats_server.url) > before + 20_000:
                break
            time.sleep(0.02)
        assert time.monotonic() < deadline, "the load never got going"
        if load.poll() is not None:
            pytest.fail(f"the load ended before it was killed: {load.stderr.read().decode()}")
        os.kill(load.pid, signal.SIGKILL)
        load.wait(timeout=30)
        kills += 1
        # Longer than the duplicate window and the writer's lease.
        time.sleep(2.0)
    final = _load(nats_server.url, path)
    _out, err = final.communicate(timeout=max(10.0, deadline - time.monotonic()))
    assert final.returncode == 0, err.decode()

    rows, positions = _oracle(nats_server.url)
    assert positions == 1  # rolled up: one per writer (the file)
    doubled = {n: c for n, c in rows.items() if c != 1}
    assert not doubled, f"rows stored more than once: {list(doubled.items())[:10]}"
    assert sorted(n for n, _ in rows) == list(range(ROWS))


def test_a_load_run_again_after_the_window_stores_nothing_twice(nats_server, tmp_path):
    path = _file(tmp_path, 3_000)
    first = _load(nats_server.url, path)
    assert first.wait(timeout=60) == 0, first.stderr.read().decode()
    time.sleep(2.0)
    again = _load(nats_server.url, path)
    _out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err.decode()
    rows, positions = _oracle(nats_server.url)
    assert positions == 1 and set(rows.values()) == {1}
    assert sorted(n for n, _ in rows) == list(range(3_000))


def test_exactly_once_refused_into_a_stream_without_positions(nats_server, tmp_path):
    path = _file(tmp_path, 10)
    with ja.connect(nats_server.url) as client:
        client.create_stream("LOADED", ["loaded.>"])
    run = _load(nats_server.url, path, "--exactly-once")
    _out, err = run.communicate(timeout=60)
    assert run.returncode != 0
    assert "exactly_once" in err.decode() and "enable-exactly-once LOADED" in err.decode()
    assert _stored_messages(nats_server.url) == 0


def test_a_default_load_into_a_stream_without_positions_warns_and_loads(nats_server, tmp_path):
    path = _file(tmp_path, 10)
    with ja.connect(nats_server.url) as client:
        client.create_stream("LOADED", ["loaded.>"])
    run = subprocess.run(
        [
            sys.executable, "-m", "jetstream_arrow", "load", str(path), "--stream", "LOADED",
            "--subject", "loaded.rows", "-s", nats_server.url,
        ],
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr.decode()
    warnings = [ln for ln in run.stderr.decode().splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "enable-exactly-once LOADED" in warnings[0]
    assert _stored_messages(nats_server.url) == 10
