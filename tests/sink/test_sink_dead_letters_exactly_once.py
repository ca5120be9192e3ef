"""The lake sink's dead letters are stored once at any age: a sink SIGKILLed between
publishing its dead letters and committing the table, restarted after the dead-letter
stream's duplicate window (1 s here, restarted >= 2 s later), publishes none of them
again. A dead-letter stream that cannot hold writers' positions is written as before,
with one warning. Letters are read with nats-py."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections import Counter
from typing import Any

import pytest

import jetstream_arrow as ja
from jetstream_arrow.exactly_once import ExactlyOnceUnavailableWarning
from natspy import with_jetstream

WINDOW = 1.0
AFTER_WINDOW = 2.5
LEASE = 2.0


def _publish(url: str, stream: str, payloads: list[bytes]) -> None:
    async def work(js: Any) -> None:
        try:
            await js.stream_info(stream)
        except Exception:
            await js.add_stream(name=stream, subjects=[f"{stream}.>"])
        for payload in payloads:
            await js.publish(f"{stream}.x", payload)

    with_jetstream(url, work)


def _letters(url: str, dead: str) -> Counter[int]:
    """How many letters the dead-letter stream holds per source sequence (writers'
    positions left out)."""

    async def work(js: Any) -> Counter[int]:
        info = await js.stream_info(dead)
        found: Counter[int] = Counter()
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                msg = await js.get_msg(dead, seq)
            except Exception:  # removed by a position's rollup
                continue
            if not msg.subject.startswith("$JA.POS."):
                found[int((msg.headers or {})["Jetstream-Arrow-Source-Seq"])] += 1
        return found

    return with_jetstream(url, work)


#: A sink that stops for good after its dead letters, where the test kills it: at its
#: first commit ("commit": the letters' position is recorded), or before it records
#: the letters' position ("position": the restart finds them by reading back).
_STUCK_SINK = textwrap.dedent(
    """
    import sys, time
    import jetstream_arrow as ja
    from jetstream_arrow.sink.dead_letters import DeadLetterPositions

    url, stream, dead, path, lease, where = sys.argv[1:7]

    def stuck(*args, **kwargs):
        print("stuck", flush=True)
        time.sleep(600)

    class Target(ja.ParquetTarget):
        if where == "commit":
            commit = stuck

    if where == "position":
        DeadLetterPositions.advance = stuck

    with ja.connect(url) as client:
        ja.run_sink(
            client, [stream], Target(path), codec="json",
            dead_letter_stream=dead, dead_letter_lease=float(lease),
        )
    """
)

GOOD = b'{"a": 1}'


@pytest.mark.parametrize("where", ["commit", "position"])
def test_a_sink_killed_before_its_commit_leaves_each_dead_letter_once(
    client, shared_nats_server, unique_name, tmp_path, where
):
    url, stream, dead = shared_nats_server.url, unique_name("SRC"), unique_name("DEAD")
    # Seqs 2, 5 and 8 do not decode.
    _publish(url, stream, [b"not json" if i in (2, 5, 8) else GOOD for i in range(1, 11)])
    client.create_stream(dead, [f"{dead}.>"], duplicate_window=WINDOW, exactly_once=True)
    path = tmp_path / "lake"
    proc = subprocess.Popen(
        [sys.executable, "-c", _STUCK_SINK, url, stream, dead, str(path), str(LEASE), where],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, f"the sink did not reach its {where} in 60 s"
        line = proc.stdout.readline()
        assert line.strip() == "stuck", proc.stderr.read() if proc.stderr else ""
        assert _letters(url, dead) == Counter({2: 1, 5: 1, 8: 1})
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(AFTER_WINDOW)
    # The table holds nothing: the restarted sink reads every message again.
    report = ja.run_sink(
        client,
        [stream],
        ja.ParquetTarget(path),
        codec="json",
        dead_letter_stream=dead,
        dead_letter_lease=LEASE,
    )
    assert report.rows == 7 and report.positions == {stream: 10}
    assert _letters(url, dead) == Counter({2: 1, 5: 1, 8: 1})
    # New letters after a clean end go on from the position, at once (no lease).
    _publish(url, stream, [b"[1]", GOOD])
    time.sleep(AFTER_WINDOW)
    started = time.monotonic()
    again = ja.run_sink(
        client, [stream], ja.ParquetTarget(path), codec="json", dead_letter_stream=dead
    )
    assert again.rows == 1 and again.dead_letters == 1
    assert time.monotonic() - started < LEASE
    assert _letters(url, dead) == Counter({2: 1, 5: 1, 8: 1, 11: 1})


def test_a_dead_letter_stream_without_positions_warns_once(
    client, shared_nats_server, unique_name, tmp_path
):
    url, stream, dead = shared_nats_server.url, unique_name("SRC"), unique_name("DEAD")
    _publish(url, stream, [b"x", GOOD, b"y"])
    client.create_stream(dead, [f"{dead}.>"], duplicate_window=WINDOW)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = ja.run_sink(
            client,
            [stream],
            ja.ParquetTarget(tmp_path / "t"),
            codec="json",
            dead_letter_stream=dead,
        )
    told = [w for w in caught if issubclass(w.category, ExactlyOnceUnavailableWarning)]
    assert len(told) == 1 and f"enable-exactly-once {dead}" in str(told[0].message)
    assert report.dead_letters == 2 and report.rows == 1
    assert _letters(url, dead) == Counter({1: 1, 3: 1})
