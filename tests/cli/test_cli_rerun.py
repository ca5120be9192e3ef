"""A load killed halfway and run again stores every row exactly once."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.csv
import pyarrow.parquet as pq

import jetstream_arrow as ja
from cli_helpers import cli

ROWS = 20_000


def _messages(client: ja.Client, stream: str) -> int:
    return int(client.stream_info(stream).state.messages)


def _start_load(path, url, *extra):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jetstream_arrow",
            "load",
            str(path),
            "--stream",
            "RERUN",
            "--subject",
            "rerun.rows",
            "-s",
            url,
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A test run started in the background (`cmd &` in a script) ignores SIGINT,
        # and so would the load it starts; Ctrl-C must reach this one.
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_some(client, proc, at_least: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = _messages(client, "RERUN")
        if n >= at_least:
            return n
        assert proc.poll() is None, f"the load ended early: {proc.communicate()}"
        time.sleep(0.02)
    raise AssertionError(f"waited {timeout} s for {at_least} messages in RERUN")


def _check_each_row_once(client) -> None:
    reader = client.read("RERUN", include_headers=True)
    ids, data = [], []
    for batch in reader:
        ids.extend(h["Nats-Msg-Id"][0] for h in _headers(batch))
        data.extend(batch.column("data").to_pylist())
    assert len(ids) == ROWS
    assert len(set(ids)) == ROWS
    # a CSV cell is stored as its text ("7"), a Parquet integer as a number
    rows = sorted(int(json.loads(d)["id"]) for d in data)
    assert rows == list(range(ROWS))


def _headers(batch: pa.RecordBatch):
    for value in batch.column("headers").to_pylist():
        yield dict(value)


def test_rerun_after_kill_stores_each_row_once(nats_server, tmp_path, capsys):
    src = tmp_path / "big.parquet"
    table = pa.table({"id": range(ROWS), "text": [f"row {i}" for i in range(ROWS)]})
    pq.write_table(table, src, row_group_size=1000)
    with ja.connect(nats_server.url) as client:
        client.create_stream("RERUN", subjects=["rerun.>"], duplicate_window=600)
        # throttled, so the kill lands in the middle
        proc = _start_load(src, nats_server.url, "--max-rate", "4000")
        try:
            _wait_for_some(client, proc, ROWS // 5)
        finally:
            proc.kill()
            proc.communicate(timeout=30)
        stored_before = _messages(client, "RERUN")
        assert ROWS // 5 <= stored_before < ROWS

        run = cli(
            capsys,
            "load",
            str(src),
            "--stream",
            "RERUN",
            "--subject",
            "rerun.rows",
            "-s",
            nats_server.url,
        )
        assert run.code == 0, run.err
        assert f"{ROWS - stored_before:,} stored, {stored_before:,} duplicates" in run.out
        assert _messages(client, "RERUN") == ROWS
        _check_each_row_once(client)


def test_ctrl_c_then_rerun(nats_server, tmp_path, capsys):
    src = tmp_path / "big.csv"
    pa.csv.write_csv(pa.table({"id": range(ROWS), "v": [i * 2 for i in range(ROWS)]}), src)
    with ja.connect(nats_server.url) as client:
        client.create_stream("RERUN", subjects=["rerun.>"])
        proc = _start_load(src, nats_server.url, "--max-rate", "4000", "--batch-rows", "500")
        try:
            _wait_for_some(client, proc, ROWS // 5)
            os.kill(proc.pid, signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err
        assert "Run the same command again to finish" in err
        stored = _messages(client, "RERUN")
        assert stored < ROWS
        # Ctrl-C stops the load taking rows and waits for the acks of those it took:
        # what it reports is what the stream holds.
        reported = re.search(r"interrupted: ([\d,]+) rows were acknowledged", err)
        assert reported is not None, err
        assert int(reported.group(1).replace(",", "")) == stored, err

        run = cli(
            capsys,
            "load",
            str(src),
            "--stream",
            "RERUN",
            "--subject",
            "rerun.rows",
            "-s",
            nats_server.url,
        )
        assert run.code == 0, run.err
        assert _messages(client, "RERUN") == ROWS
        _check_each_row_once(client)


def test_same_content_elsewhere_is_the_same_file(nats_server, tmp_path, capsys):
    """--file-id content (default): a copy of the file at another path is not loaded twice."""
    table = pa.table({"id": range(300)})
    a, b = tmp_path / "a.parquet", tmp_path / "copy" / "b.parquet"
    b.parent.mkdir()
    pq.write_table(table, a)
    b.write_bytes(a.read_bytes())
    common = ["--stream", "C", "--subject", "c", "-s", nats_server.url]
    assert cli(capsys, "load", str(a), *common, "--create-stream").code == 0
    run = cli(capsys, "load", str(b), *common)
    assert run.code == 0, run.err
    assert "0 stored, 300 duplicates" in run.out
    # with --file-id quick the path is part of the id: a new file to the server
    run = cli(capsys, "load", str(b), *common, "--file-id", "quick")
    assert "300 stored, 0 duplicates" in run.out
