"""`jetstream-arrow sink` lands a stream into a Delta Lake table or a partitioned
Parquet dataset exactly once: killed with SIGKILL at random points and started again
with no state of its own, it writes every message once; payloads that do not decode go
to a dead-letter stream, each once; bad options are refused naming them."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import jetstream_arrow as ja
from cli_helpers import cli
from jetstream_arrow.exceptions import BadInputError, OperationTimeoutError
from jetstream_arrow.sink import app_id, dataset_files, read_manifest

ROWS = 20_000
KILLS = 3
#: Every 100th message (1%) is not JSON.
MALFORMED_EVERY = 100


def _payload(i: int, malformed_every: int | None) -> bytes:
    if malformed_every and i % malformed_every == malformed_every - 1:
        return b"{not json " + str(i).encode()
    return json.dumps({"id": i, "name": f"row {i}", "score": i / 4}).encode()


def _fill(
    client: ja.Client,
    stream: str,
    rows: int,
    malformed_every: int | None = None,
    retention: str = "limits",
) -> None:
    client.create_stream(stream, [f"{stream.lower()}.>"], retention=retention)
    regions = ("eu", "us", "ap")
    client.publish(
        pa.table(
            {
                "subject": [f"{stream.lower()}.{regions[i % 3]}.new" for i in range(rows)],
                "data": [_payload(i, malformed_every) for i in range(rows)],
            }
        )
    )


def _start_sink(url: str, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "jetstream_arrow", "sink", *argv, "-s", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # A test run started in the background ignores SIGINT, and so would the sink.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _delta_position(path: Path, stream: str) -> int:
    if not DeltaTable.is_deltatable(str(path)):
        return 0
    return int(DeltaTable(str(path)).transaction_version(app_id(stream)) or 0)


def _parquet_position(path: Path, stream: str) -> int:
    manifest = read_manifest(path) if path.exists() else None
    return int(manifest["positions"].get(stream, 0)) if manifest else 0


def _kill_at_random_points(
    url: str, argv: list[str], position: Callable[[], int], rows: int, seed: int
) -> list[int]:
    """Start the sink, SIGKILL it once its position passes a random mark (plus a
    random pause, so some kills land inside a commit), ``KILLS`` times; the
    positions seen at each kill."""
    rng = random.Random(seed)
    marks = sorted(rng.randrange(rows // 10, rows * 8 // 10) for _ in range(KILLS))
    seen = []
    for mark in marks:
        proc = _start_sink(url, *argv)
        try:
            deadline = time.monotonic() + 30
            while position() < mark:
                if proc.poll() is not None:
                    out, err = proc.communicate()
                    raise AssertionError(f"the sink ended before sequence {mark}: {out}{err}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"waited 30 s for the sink to commit sequence {mark}")
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.05))
        finally:
            proc.kill()
            proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, "the sink ended before it was killed"
        seen.append(position())
    return seen


def _expected(client: ja.Client, stream: str) -> pa.Table:
    """The stream read by the client, decoded: what the lake must hold."""
    codec = ja.ValueCodec("json", on_malformed="dropmalformed", flatten=True)
    return client.read(stream, codec=codec).read_all().sort_by("seq")


def _same_rows(landed: pa.Table, expected: pa.Table) -> None:
    columns = ["stream", "subject", "seq", "timestamp", "id", "name", "score"]
    landed = landed.sort_by("seq")
    seqs = landed.column("seq").to_pylist()
    assert len(seqs) == len(set(seqs)), "a sequence landed twice"
    assert seqs == expected.column("seq").to_pylist(), "sequences missing or extra"
    for column in columns:
        assert landed.column(column).to_pylist() == expected.column(column).to_pylist(), column


@pytest.mark.slow
@pytest.mark.fault
def test_delta_sink_killed_three_times_lands_each_message_once(nats_server, tmp_path, capsys):
    table = tmp_path / "orders"
    with ja.connect(nats_server.url) as client:
        _fill(client, "ORDERS", ROWS)
        argv = ["ORDERS", "--delta", str(table), "--value-format", "json"]
        argv += ["--commit-rows", "1000", "--batch-rows", "250", "--partition-by", "date"]
        kills = _kill_at_random_points(
            nats_server.url, argv, lambda: _delta_position(table, "ORDERS"), ROWS, seed=7
        )
        assert all(0 < k < ROWS for k in kills), kills

        run = cli(capsys, "sink", *argv, "-s", nats_server.url)
        assert run.code == 0, run.err
        assert "caught up: ORDERS at 20000" in run.out, run.out

        delta = DeltaTable(str(table))
        assert delta.transaction_version(app_id("ORDERS")) == ROWS
        assert delta.metadata().partition_columns == ["date"]
        _same_rows(delta.to_pyarrow_table(), _expected(client, "ORDERS"))


@pytest.mark.slow
@pytest.mark.fault
def test_parquet_sink_killed_three_times_lands_each_message_once(nats_server, tmp_path, capsys):
    root = tmp_path / "orders"
    with ja.connect(nats_server.url) as client:
        _fill(client, "ORDERS", ROWS)
        argv = ["ORDERS", "--parquet", str(root), "--value-format", "json"]
        argv += ["--commit-rows", "1000", "--batch-rows", "250"]
        argv += ["--partition-by", "date,subject_token_2"]
        kills = _kill_at_random_points(
            nats_server.url, argv, lambda: _parquet_position(root, "ORDERS"), ROWS, seed=11
        )
        assert all(0 < k < ROWS for k in kills), kills

        run = cli(capsys, "sink", *argv, "-s", nats_server.url)
        assert run.code == 0, run.err
        assert read_manifest(root)["positions"] == {"ORDERS": ROWS}
        files = dataset_files(root)
        on_disk = {str(p) for p in root.rglob("*") if p.is_file() and p.suffix != ".json"}
        assert on_disk == set(files), "files not in the manifest were left behind"
        assert {Path(f).parent.parent.name for f in files} == {
            f"date={d}"
            for d in {t.date() for t in _expected(client, "ORDERS")["timestamp"].to_pylist()}
        }
        assert {Path(f).parent.name for f in files} == {
            "subject_token_2=eu",
            "subject_token_2=us",
            "subject_token_2=ap",
        }
        # DuckDB reads the files the manifest lists, their partitions from the paths.
        query = f"SELECT * FROM read_parquet({files!r}, hive_partitioning = true)"
        landed = pa.table(duckdb.sql(query).arrow())
        expected = _expected(client, "ORDERS")
        _same_rows(landed, expected)
        tokens = landed.sort_by("seq").column("subject_token_2").to_pylist()
        assert tokens == [s.split(".")[1] for s in expected.column("subject").to_pylist()]


@pytest.mark.slow
@pytest.mark.fault
def test_malformed_payloads_go_to_the_dead_letter_stream_once_across_a_kill(
    nats_server, tmp_path, capsys
):
    rows = 5_000
    table = tmp_path / "events"
    with ja.connect(nats_server.url) as client:
        _fill(client, "EVENTS", rows, malformed_every=MALFORMED_EVERY)
        client.create_stream("DEAD", ["dead.>"], duplicate_window=600)
        argv = ["EVENTS", "--delta", str(table), "--value-format", "json"]
        argv += ["--commit-rows", "500", "--batch-rows", "100", "--dead-letter-stream", "DEAD"]
        _kill_at_random_points(
            nats_server.url, argv, lambda: _delta_position(table, "EVENTS"), rows, seed=3
        )
        run = cli(capsys, "sink", *argv, "-s", nats_server.url)
        assert run.code == 0, run.err
        assert " dead letters" in run.out, run.out

        malformed = [i + 1 for i in range(rows) if _payload(i, MALFORMED_EVERY).startswith(b"{not")]
        assert len(malformed) == rows // MALFORMED_EVERY
        dead = client.read("DEAD", include_headers=True).read_all()
        headers = [dict(h) for h in dead.column("headers").to_pylist()]
        assert sorted(int(h["Jetstream-Arrow-Source-Seq"][0]) for h in headers) == malformed
        assert {h["Jetstream-Arrow-Source-Stream"][0] for h in headers} == {"EVENTS"}
        assert all("not JSON" in h["Jetstream-Arrow-Error"][0] for h in headers), headers[0]
        # <stream>:<seq>:<reader>, the reader the same for each run on this table.
        assert all(
            h["Nats-Msg-Id"][0].startswith(f"EVENTS:{h['Jetstream-Arrow-Source-Seq'][0]}:")
            for h in headers
        )
        assert len({h["Nats-Msg-Id"][0].rpartition(":")[2] for h in headers}) == 1
        first = headers[0]["Jetstream-Arrow-Source-Seq"][0]
        assert dead.column("data")[0].as_py() == _payload(int(first) - 1, MALFORMED_EVERY)

        landed = DeltaTable(str(table)).to_pyarrow_table()
        assert landed.num_rows == rows - len(malformed)
        assert set(landed.column("seq").to_pylist()) == set(range(1, rows + 1)) - set(malformed)
        _same_rows(landed, _expected(client, "EVENTS"))
        assert DeltaTable(str(table)).transaction_version(app_id("EVENTS")) == rows


def _wait_all_acked(client: ja.Client, stream: str, consumer: str) -> None:
    """The consumer's acks are applied (they travel on after the sink's flush)."""
    deadline = time.monotonic() + 10
    while True:
        info = client.consumer_info(stream, consumer)
        messages = client.stream_info(stream).state.messages
        if info.num_ack_pending == 0 and messages == 0:
            return
        assert time.monotonic() < deadline, (
            f"10 s on, {info.num_ack_pending} acks pending, {messages} messages queued"
        )
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.fault
def test_work_queue_sink_killed_three_times_lands_each_message_once(nats_server, tmp_path, capsys):
    rows = 10_000
    table = tmp_path / "jobs"
    with ja.connect(nats_server.url) as client:
        _fill(client, "JOBS", rows, retention="workqueue")
        expected = [f"jobs.{('eu', 'us', 'ap')[i % 3]}.new" for i in range(rows)]
        argv = ["JOBS", "--delta", str(table), "--value-format", "json", "--durable", "lake"]
        argv += ["--commit-rows", "500", "--batch-rows", "125"]
        kills = _kill_at_random_points(
            nats_server.url, argv, lambda: _delta_position(table, "JOBS"), rows, seed=5
        )
        assert all(0 < k < rows for k in kills), kills

        run = cli(capsys, "sink", *argv, "-s", nats_server.url)
        assert run.code == 0, run.err
        assert "caught up: JOBS at 10000" in run.out, run.out
        _wait_all_acked(client, "JOBS", "lake")

        delta = DeltaTable(str(table))
        assert delta.transaction_version(app_id("JOBS")) == rows
        landed = delta.to_pyarrow_table().sort_by("seq")
        assert landed.column("seq").to_pylist() == list(range(1, rows + 1))
        assert landed.column("id").to_pylist() == list(range(rows))
        assert landed.column("subject").to_pylist() == expected


class _CrashAfterCommit(Exception):
    """Raised from on_progress after a commit: the sink dies before its acks."""


def test_a_message_delivered_again_after_its_commit_is_acked_not_landed_twice(
    nats_server, tmp_path
):
    rows = 1_000
    table = tmp_path / "jobs"

    def crash_after_first_commit(state: ja.SinkProgress) -> None:
        if state.commits == 1:
            raise _CrashAfterCommit

    with ja.connect(nats_server.url) as client:
        _fill(client, "JOBS", rows, malformed_every=MALFORMED_EVERY, retention="workqueue")
        client.create_stream("DEAD", ["dead.>"], duplicate_window=600)
        options: dict[str, Any] = {
            "codec": "json",
            "durable": "lake",
            "commit_rows": 300,
            "dead_letter_stream": "DEAD",
        }
        with ja.connect(nats_server.url) as dying, pytest.raises(_CrashAfterCommit):
            ja.run_sink(
                dying,
                ["JOBS"],
                ja.DeltaTarget(table),
                on_progress=crash_after_first_commit,
                **options,
            )
        committed = _delta_position(table, "JOBS")
        assert committed == 300
        info = client.consumer_info("JOBS", "lake")
        assert info.num_ack_pending >= committed, "the commit's messages were acknowledged"

        report = ja.run_sink(client, ["JOBS"], ja.DeltaTarget(table), **options)
        assert report.positions == {"JOBS": rows}
        # The first commit's 300 messages came again and were acknowledged, not landed
        # (nor their 3 bad payloads sent again).
        assert (report.rows, report.dead_letters) == (693, 7), report
        _wait_all_acked(client, "JOBS", "lake")

        landed = DeltaTable(str(table)).to_pyarrow_table().sort_by("seq")
        malformed = {i + 1 for i in range(rows) if i % MALFORMED_EVERY == MALFORMED_EVERY - 1}
        assert landed.column("seq").to_pylist() == sorted(set(range(1, rows + 1)) - malformed)
        dead = client.read("DEAD", include_headers=True).read_all()
        sources = sorted(
            int(dict(h)["Jetstream-Arrow-Source-Seq"][0]) for h in dead["headers"].to_pylist()
        )
        assert sources == sorted(malformed), "a dead letter was stored twice or lost"


def test_a_work_queue_is_refused_without_durable_naming_it(nats_server, tmp_path, capsys):
    with ja.connect(nats_server.url) as client:
        _fill(client, "JOBS", 10, retention="interest")
        run = cli(capsys, "sink", "JOBS", "--delta", str(tmp_path / "t"), "-s", nats_server.url)
        assert run.code == 2 and "--durable" in run.err and "interest" in run.err, run.err
        with pytest.raises(BadInputError, match="'durable'"):
            ja.run_sink(client, ["JOBS"], ja.DeltaTarget(tmp_path / "t"))
        client.create_consumer(
            "JOBS", durable_name="few", ack_policy="explicit", max_ack_pending=10
        )
        with pytest.raises(BadInputError, match="max_ack_pending"):
            ja.run_sink(client, ["JOBS"], ja.DeltaTarget(tmp_path / "t"), durable="few")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_signal_stops_a_following_sink_after_its_commit(nats_server, tmp_path, signum):
    table = tmp_path / "t"
    with ja.connect(nats_server.url) as client:
        _fill(client, "LIVE", 300)
        proc = _start_sink(
            nats_server.url, "LIVE", "--parquet", str(table), "--follow", "--commit-seconds", "0.2"
        )
        try:
            deadline = time.monotonic() + 30
            while _parquet_position(table, "LIVE") < 300:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "waited 30 s for the sink to land 300 rows"
                time.sleep(0.02)
            # Messages stored while it follows land too.
            client.publish(pa.table({"subject": ["live.eu.new"], "data": [_payload(300, None)]}))
            while _parquet_position(table, "LIVE") < 301:
                assert time.monotonic() < deadline, "waited 30 s for the followed message"
                time.sleep(0.02)
            proc.send_signal(signum)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err
        assert "stopped: LIVE at 301" in out, out


def _landed(target: ja.DeltaTarget | ja.ParquetTarget) -> pa.Table:
    if isinstance(target, ja.DeltaTarget):
        return DeltaTable(target.path).to_pyarrow_table()
    tables = [pq.read_table(f) for f in dataset_files(target.root)]
    return pa.concat_tables(tables, promote_options="permissive")


def _position(target: ja.DeltaTarget | ja.ParquetTarget, stream: str) -> int:
    if isinstance(target, ja.DeltaTarget):
        return _delta_position(Path(target.path), stream)
    return _parquet_position(target.root, stream)


@pytest.mark.parametrize("kind", ["delta", "parquet"])
def test_a_new_column_is_merged_and_a_changed_type_refused(nats_server, tmp_path, kind):
    path = tmp_path / "t"
    target = ja.DeltaTarget if kind == "delta" else ja.ParquetTarget
    with ja.connect(nats_server.url) as client:
        client.create_stream("S", ["s.>"])

        def publish(*values: dict[str, object]) -> None:
            data = [json.dumps(v).encode() for v in values]
            client.publish(pa.table({"subject": ["s.x"] * len(data), "data": data}))

        publish({"a": 1})
        ja.run_sink(client, ["S"], target(path), codec="json")
        publish({"a": 2, "b": "new"})
        report = ja.run_sink(client, ["S"], target(path), codec="json")
        assert report.rows == 1 and report.positions == {"S": 2}
        landed = _landed(target(path)).sort_by("seq")
        assert landed.select(["a", "b"]).to_pylist() == [{"a": 1, "b": None}, {"a": 2, "b": "new"}]

        publish({"a": "text"})
        with pytest.raises(BadInputError, match="column 'a' arrives as string but is int64"):
            ja.run_sink(client, ["S"], target(path), codec="json")
        assert _position(target(path), "S") == 2


def test_stop_set_from_another_thread_ends_run_sink(nats_server, tmp_path):
    with ja.connect(nats_server.url) as client:
        _fill(client, "F", 10)
        stop = threading.Event()
        timer = threading.Timer(1.0, stop.set)
        timer.start()
        try:
            report = ja.run_sink(
                client, ["F"], ja.ParquetTarget(tmp_path / "f"), follow=True, stop=stop
            )
        finally:
            timer.cancel()
        assert report.stopped and report.positions == {"F": 10} and report.rows == 10


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--commit-rows", "0"], "--commit-rows"),
        (["--commit-rows", "20000000"], "--commit-rows"),
        (["--commit-seconds", "0"], "--commit-seconds"),
        (["--commit-seconds", "1e9"], "--commit-seconds"),
        (["--follow", "--until-caught-up"], "--until-caught-up"),
        (["--value-format", "xml"], "--value-format"),
        (["--partition-by", "hour"], "--partition-by"),
        (["--batch-rows", "0"], "--batch-rows"),
        (["--subject", "ORDERS"], "--subject"),
        (["--avro-schema", "{}"], "--avro-schema"),
        (["--value-format", "protobuf"], "--protobuf-descriptor"),
        (["--dead-letter-stream", "ORDERS"], "--dead-letter-stream"),
        (["--resume-timeout", "0"], "--resume-timeout"),
    ],
)
def test_bad_options_are_refused_naming_them(capsys, tmp_path, argv, named):
    run = cli(
        capsys, "sink", "ORDERS", "--delta", str(tmp_path / "t"), *argv, "-s", "nats://127.0.0.1:1"
    )
    assert run.code == 2, run
    assert named in run.err, run.err


def test_a_target_is_required_and_only_one(capsys, tmp_path):
    assert "--delta" in cli(capsys, "sink", "ORDERS").err
    both = cli(capsys, "sink", "ORDERS", "--delta", "a", "--parquet", "b")
    assert both.code == 2 and "--parquet" in both.err


def test_two_streams_land_in_one_table_each_with_its_position(nats_server, tmp_path):
    path = tmp_path / "t"
    with ja.connect(nats_server.url) as client:
        _fill(client, "EU", 300)
        _fill(client, "US", 200)
        report = ja.run_sink(
            client, ["EU", "US"], ja.DeltaTarget(path), codec="json", commit_rows=120
        )
        assert report.positions == {"EU": 300, "US": 200} and report.rows == 500
        one_more = pa.table({"subject": ["us.eu.new"], "data": [_payload(200, None)]})
        client.publish(one_more)
        again = ja.run_sink(client, ["EU", "US"], ja.DeltaTarget(path), codec="json")
        assert again.rows == 1 and again.positions == {"EU": 300, "US": 201}
        delta = DeltaTable(str(path))
        assert delta.transaction_version(app_id("EU")) == 300
        assert delta.transaction_version(app_id("US")) == 201
        landed = delta.to_pyarrow_table()
        for stream in ("EU", "US"):
            mine = landed.filter(pc.equal(landed.column("stream"), stream))
            _same_rows(mine, _expected(client, stream))


def test_messages_purged_before_the_position_are_skipped_not_waited_for(nats_server, tmp_path):
    root = tmp_path / "t"
    with ja.connect(nats_server.url) as client:
        _fill(client, "P", 10)
        ja.run_sink(client, ["P"], ja.ParquetTarget(root), commit_rows=4)
        client.publish(
            pa.table({"subject": ["p.eu.new"] * 5, "data": [_payload(i, None) for i in range(5)]})
        )
        client.purge_stream("P", keep=2)  # 11..13 go unread
        report = ja.run_sink(client, ["P"], ja.ParquetTarget(root))
        assert report.positions == {"P": 15} and report.rows == 2
        seqs = pa.concat_tables(
            [pq.read_table(f) for f in dataset_files(root)], promote_options="permissive"
        ).column("seq")
        assert sorted(seqs.to_pylist()) == [*range(1, 11), 14, 15]


class _FailsFirstCommit:
    """A Delta target whose first commit fails after the dead letters are published,
    as a sink killed between the two would leave things."""

    def __init__(self, path: Path) -> None:
        self.target = ja.DeltaTarget(path)
        self.failed = False

    @property
    def identity(self) -> str:
        return self.target.identity

    def positions(self, streams: list[str]) -> dict[str, int]:
        return self.target.positions(streams)

    def created(self, streams: list[str]) -> dict[str, int | None]:
        return self.target.created(streams)

    def commit(
        self,
        rows: pa.Table,
        positions: dict[str, int],
        partition_by: list[str],
        created: dict[str, int] | None = None,
    ) -> None:
        if not self.failed:
            self.failed = True
            raise OSError("the disk went away")
        self.target.commit(rows, positions, partition_by, created)


def test_dead_letters_published_again_after_a_failed_commit_are_stored_once(nats_server, tmp_path):
    with ja.connect(nats_server.url) as client:
        _fill(client, "E", 500, malformed_every=MALFORMED_EVERY)
        client.create_stream("DEAD", ["dead.>"])
        failing = _FailsFirstCommit(tmp_path / "t")
        with pytest.raises(OSError, match="disk went away"):
            ja.run_sink(client, ["E"], failing, codec="json", dead_letter_stream="DEAD")
        assert client.stream_info("DEAD").state.messages == 5  # published, not committed

        report = ja.run_sink(client, ["E"], failing, codec="json", dead_letter_stream="DEAD")
        assert report.dead_letters == 5 and report.positions == {"E": 500}
        dead = client.read("DEAD", include_headers=True).read_all()
        seqs = [int(dict(h)["Jetstream-Arrow-Source-Seq"][0]) for h in dead["headers"].to_pylist()]
        assert seqs == [100, 200, 300, 400, 500]


def test_a_stream_made_again_under_its_name_is_refused_not_skipped(nats_server, tmp_path):
    root = tmp_path / "t"
    with ja.connect(nats_server.url) as client:
        _fill(client, "R", 10)
        ja.run_sink(client, ["R"], ja.ParquetTarget(root))
        client.delete_stream("R")
        _fill(client, "R", 3)
        # Told by the creation time recorded with the position; a table that has none
        # (an older release's) by the position past the stream's last sequence.
        with pytest.raises(
            BadInputError, match=r"\(up to sequence 10\): the stream was deleted and made again"
        ):
            ja.run_sink(client, ["R"], ja.ParquetTarget(root))
        manifest = read_manifest(root)
        assert manifest is not None
        del manifest["created"]
        (root / "_jetstream_arrow_manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(
            BadInputError, match="up to sequence 10, but the stream's last sequence is 3"
        ):
            ja.run_sink(client, ["R"], ja.ParquetTarget(root))


def test_a_payload_that_parses_but_not_as_the_schema_has_the_decoders_error(nats_server, tmp_path):
    with ja.connect(nats_server.url) as client:
        client.create_stream("V", ["v.>"])
        client.create_stream("DEAD", ["dead.>"])
        data = [b'{"n": 1}', b'{"n": "one"}', b'{"n": 2.5}', b'{"n": 3}']
        client.publish(pa.table({"subject": ["v.x"] * 4, "data": data}))
        codec = ja.ValueCodec("json", schema=pa.schema([("n", pa.int64())]))
        report = ja.run_sink(
            client, ["V"], ja.ParquetTarget(tmp_path / "t"), codec=codec, dead_letter_stream="DEAD"
        )
        assert report.rows == 2 and report.dead_letters == 2
        dead = client.read("DEAD", include_headers=True).read_all()
        errors = [dict(h)["Jetstream-Arrow-Error"][0] for h in dead["headers"].to_pylist()]
        assert [e.split(":")[0] for e in errors] == ["stream 'V' seq 2", "stream 'V' seq 3"]
        assert all("field 'n'" in e and "failfast" not in e for e in errors), errors
        assert dead.column("data").to_pylist() == data[1:3]


def test_a_work_queue_whose_sample_does_not_decode_stops_and_acks_nothing(nats_server, tmp_path):
    """Without a dead-letter stream; with one, such payloads are dead letters
    (test_sink_queue_malformed.py)."""
    with ja.connect(nats_server.url) as client:
        client.create_stream("JOBS", ["jobs.>"], retention="workqueue")
        data = [b"bad1", b"bad2", *(json.dumps({"a": i, "b": "x"}).encode() for i in range(3))]
        client.publish(pa.table({"subject": ["jobs.x"] * 5, "data": data}))
        with pytest.raises(BadInputError, match=r"no payload of the first 2 .*ValueCodec\(schema"):
            ja.run_sink(
                client,
                ["JOBS"],
                ja.DeltaTarget(tmp_path / "t"),
                codec="json",
                durable="lake",
                batch_rows=2,
            )
        assert client.stream_info("JOBS").state.messages == 5, "a message was acknowledged"
        assert not DeltaTable.is_deltatable(str(tmp_path / "t"))


def test_a_parquet_sink_removes_only_its_own_unlisted_files(nats_server, tmp_path):
    root = tmp_path / "t"
    leftover = f"part-00000002-{'0' * 32}.parquet"
    others = [
        "part-00000-1f2e3d4c-c000.snappy.parquet",
        "part-notes.txt",
        "date=2026-01-01/part-00001-abc.snappy.parquet",
        f"other/{leftover}",
    ]
    ours = [leftover, f"date=2026-01-01/.{leftover}.tmp"]
    for name in others + ours:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"not the sink's")
    with ja.connect(nats_server.url) as client:
        _fill(client, "P", 10)
        # With no manifest yet, then with one.
        for _ in range(2):
            ja.run_sink(client, ["P"], ja.ParquetTarget(root))
            for name in ours:
                assert not (root / name).exists(), name
            for name in others:
                assert (root / name).exists(), f"{name} was removed"
            (root / leftover).write_bytes(b"left by a commit that did not finish")
        assert len(dataset_files(root)) == 1


def test_a_range_with_none_of_the_read_subjects_moves_the_position_on(nats_server, tmp_path):
    root = tmp_path / "t"
    with ja.connect(nats_server.url) as client:
        client.create_stream("S", ["s.>"])
        client.publish(pa.table({"subject": ["s.b"] * 3, "data": [b'{"x": 1}'] * 3}))
        options: dict[str, Any] = {"codec": "json", "subjects": {"S": "s.a"}}
        report = ja.run_sink(client, ["S"], ja.ParquetTarget(root), **options)
        assert report.positions == {"S": 3} and report.rows == 0
        client.purge_stream("S")
        client.publish(pa.table({"subject": ["s.a"], "data": [b'{"x": 2}']}))
        report = ja.run_sink(client, ["S"], ja.ParquetTarget(root), **options)
        assert report.positions == {"S": 4} and report.rows == 1


def test_a_sample_with_no_json_object_goes_to_dead_letters_or_stops(nats_server, tmp_path):
    with ja.connect(nats_server.url) as client:
        client.create_stream("S", ["s.>"])
        client.create_stream("DEAD", ["dead.>"])
        data = [b"bad", b"[1]", b'{"a": 1}', b'{"a": 2}']
        client.publish(pa.table({"subject": ["s.x"] * 4, "data": data}))
        # The read samples the first two payloads only: none is a JSON object.
        codec = ja.ValueCodec("json", sample_rows=2)
        with pytest.raises(BadInputError, match="stream 'S' seq 1: the payload is not") as e:
            ja.run_sink(client, ["S"], ja.DeltaTarget(tmp_path / "stops"), codec=codec)
        assert "'schema'" not in str(e.value)

        report = ja.run_sink(
            client, ["S"], ja.DeltaTarget(tmp_path / "t"), codec=codec, dead_letter_stream="DEAD"
        )
        assert (report.rows, report.dead_letters, report.positions) == (2, 2, {"S": 4})
        assert DeltaTable(str(tmp_path / "t")).to_pyarrow_table().column("a").to_pylist() == [1, 2]
        dead = client.read("DEAD", include_headers=True).read_all()
        assert dead.column("data").to_pylist() == data[:2]
        errors = [dict(h)["Jetstream-Arrow-Error"][0] for h in dead["headers"].to_pylist()]
        assert "not JSON" in errors[0] and "not an object: it is an array" in errors[1], errors


def test_a_following_sink_lands_a_json_field_first_seen_later(nats_server, tmp_path):
    root = tmp_path / "t"
    with ja.connect(nats_server.url) as client:
        client.create_stream("S", ["s.>"])

        def publish_and_wait(value: dict[str, object], seq: int) -> None:
            client.publish(pa.table({"subject": ["s.x"], "data": [json.dumps(value).encode()]}))
            deadline = time.monotonic() + 30
            while _parquet_position(root, "S") < seq:
                assert time.monotonic() < deadline, f"waited 30 s for sequence {seq}"
                time.sleep(0.02)

        stop = threading.Event()
        reports: list[ja.SinkReport] = []
        sink = threading.Thread(
            target=lambda: reports.append(
                ja.run_sink(
                    client,
                    ["S"],
                    ja.ParquetTarget(root),
                    codec="json",
                    follow=True,
                    commit_seconds=0.1,
                    stop=stop,
                )
            )
        )
        sink.start()
        try:
            publish_and_wait({"a": 1}, 1)
            publish_and_wait({"a": 2, "b": "new"}, 2)
        finally:
            stop.set()
            sink.join(timeout=30)
        assert reports and reports[0].rows == 2
        landed = _landed(ja.ParquetTarget(root)).sort_by("seq")
        assert landed.select(["a", "b"]).to_pylist() == [{"a": 1, "b": None}, {"a": 2, "b": "new"}]


def test_a_work_queue_logs_the_fields_it_inferred(nats_server, tmp_path, caplog):
    with ja.connect(nats_server.url) as client:
        _fill(client, "JOBS", 3, retention="workqueue")
        with caplog.at_level("INFO", logger="jetstream_arrow.sink"):
            report = ja.run_sink(
                client, ["JOBS"], ja.ParquetTarget(tmp_path / "t"), codec="json", durable="lake"
            )
        assert report.rows == 3
        assert "id int64, name string, score double" in caplog.text, caplog.text
        # Fields first seen later grow the schema (test_sink_new_fields.py): no warning.
        assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text


def test_a_work_queue_consumer_with_a_small_max_batch_is_pulled_within_it(nats_server, tmp_path):
    """The consumer refuses a pull of more than its max_batch: the sink asks for no
    more, and lands everything."""
    with ja.connect(nats_server.url) as client:
        _fill(client, "JOBS", 250, retention="workqueue")
        client.create_consumer("JOBS", durable_name="lake", ack_policy="explicit", max_batch=100)
        report = ja.run_sink(
            client,
            ["JOBS"],
            ja.ParquetTarget(tmp_path / "t"),
            codec=ja.ValueCodec("json", schema=pa.schema([("id", pa.int64())])),
            durable="lake",
            batch_rows=500,
            commit_rows=200,
        )
        assert report.rows == 250
        assert client.stream_info("JOBS").state.messages == 0
    assert sorted(_landed(ja.ParquetTarget(tmp_path / "t")).column("seq").to_pylist()) == list(
        range(1, 251)
    )


def test_a_paused_work_queue_consumer_fails_the_run_not_hangs(nats_server, tmp_path):
    with ja.connect(nats_server.url) as client:
        _fill(client, "JOBS", 5, retention="workqueue")
        client.create_consumer(
            "JOBS",
            durable_name="lake",
            ack_policy="explicit",
            pause_until=datetime.now(timezone.utc) + timedelta(hours=1),
        )
        started = time.monotonic()
        with pytest.raises(OperationTimeoutError, match=r"consumer 'lake' of stream JOBS .* 5 "):
            ja.run_sink(
                client,
                ["JOBS"],
                ja.ParquetTarget(tmp_path / "t"),
                codec=ja.ValueCodec("json", schema=pa.schema([("id", pa.int64())])),
                durable="lake",
                commit_rows=100,
                commit_seconds=1,
            )
        assert time.monotonic() - started < 15
        assert client.stream_info("JOBS").state.messages == 5


@pytest.mark.parametrize("kind", ["delta", "parquet"])
def test_a_first_commit_of_only_dead_letters_makes_a_partitioned_table(nats_server, tmp_path, kind):
    path = tmp_path / "t"
    target = ja.DeltaTarget if kind == "delta" else ja.ParquetTarget
    with ja.connect(nats_server.url) as client:
        client.create_stream("S", ["s.>"])
        client.create_stream("DEAD", ["dead.>"])
        good = [b'{"a": 1}', b'{"a": 2}']
        data = [b"{bad", b"{bad again", *good]
        client.publish(pa.table({"subject": ["s.eu.x"] * 4, "data": data}))
        options: dict[str, Any] = {
            "codec": ja.ValueCodec("json", schema=pa.schema([("a", pa.int64())])),
            "dead_letter_stream": "DEAD",
            "partition_by": ["date", "subject_token_2"],
            "commit_rows": 2,
        }
        first = ja.run_sink(client, ["S"], target(path), **options)
        assert (first.rows, first.dead_letters, first.positions) == (2, 2, {"S": 4})
        assert first.commits == 2
        landed = _landed(target(path)).sort_by("seq")
        assert landed.column("a").to_pylist() == [1, 2]
        if kind == "delta":
            assert DeltaTable(str(path)).metadata().partition_columns == ["date", "subject_token_2"]
            assert landed.column("subject_token_2").to_pylist() == ["eu", "eu"]


@pytest.mark.parametrize("column", ["date", "subject_token_1"])
def test_a_value_field_named_like_a_partition_column_is_refused(nats_server, tmp_path, column):
    with ja.connect(nats_server.url) as client:
        client.create_stream("S", ["s.>"])
        data = [json.dumps({column: "2020-01-01", "a": 1}).encode()]
        client.publish(pa.table({"subject": ["s.x"], "data": data}))
        with pytest.raises(BadInputError, match=f"'partition_by' '{column}': the value has a"):
            ja.run_sink(
                client, ["S"], ja.DeltaTarget(tmp_path / "t"), codec="json", partition_by=[column]
            )


@pytest.mark.parametrize(
    ("first", "second", "types"),
    [(1, 2.5, "double but (as|is) int64"), (2**53 + 1, "text", "string but (as|is) int64")],
)
@pytest.mark.parametrize("commit_rows", [1, 1000], ids=["two commits", "one commit"])
def test_a_type_conflict_within_a_run_is_refused(
    nats_server, tmp_path, first, second, types, commit_rows
):
    with ja.connect(nats_server.url) as client:
        for stream, value in (("A", first), ("B", second)):
            client.create_stream(stream, [f"{stream.lower()}.>"])
            data = [json.dumps({"n": value}).encode()]
            client.publish(pa.table({"subject": [f"{stream.lower()}.x"], "data": data}))
        target = ja.DeltaTarget(tmp_path / "t")
        with pytest.raises(BadInputError, match=f"column 'n' arrives as {types}"):
            ja.run_sink(client, ["A", "B"], target, codec="json", commit_rows=commit_rows)
        assert _delta_position(tmp_path / "t", "B") == 0
        assert _delta_position(tmp_path / "t", "A") == (1 if commit_rows == 1 else 0)


def test_rows_of_one_commit_take_a_type_over_null_and_missing_columns():
    from jetstream_arrow.sink.rows import concat_refusing_conflicts

    tables = [
        pa.table({"n": pa.array([None], pa.null())}),
        pa.table({"n": pa.array([7], pa.int64()), "m": ["x"]}),
        pa.table({"n": pa.array([None], pa.null())}),
    ]
    rows = concat_refusing_conflicts(tables, "stream S")
    assert rows.schema.field("n").type == pa.int64()
    assert rows.to_pylist() == [{"n": None, "m": None}, {"n": 7, "m": "x"}, {"n": None, "m": None}]


def test_a_work_queue_message_that_cannot_be_read_again_has_the_decoders_words(
    nats_server, tmp_path
):
    """A work queue's message cannot be read again alone; its dead letter's error is
    the decoder's own, from the read that set it aside (once told in general words)."""
    with ja.connect(nats_server.url) as client:
        client.create_stream("JOBS", ["jobs.>"], retention="workqueue")
        client.create_stream("DEAD", ["dead.>"])
        client.create_consumer("JOBS", durable_name="lake", ack_policy="explicit")
        client.publish(
            pa.table({"subject": ["jobs.x"] * 2, "data": [b'{"n": "one"}', b'{"n": 2}']})
        )
        codec = ja.ValueCodec("json", schema=pa.schema([("n", pa.int64())]))
        report = ja.run_sink(
            client,
            ["JOBS"],
            ja.ParquetTarget(tmp_path / "t"),
            codec=codec,
            durable="lake",
            dead_letter_stream="DEAD",
            commit_rows=100,
            batch_rows=10,
        )
        assert (report.rows, report.dead_letters) == (1, 1)
        dead = client.read("DEAD", include_headers=True).read_all()
        [error] = [dict(h)["Jetstream-Arrow-Error"][0] for h in dead["headers"].to_pylist()]
        assert error == (
            "stream 'JOBS' seq 1: the payload is not json of the value's schema: "
            "field 'n': the string \"one\" is not an integer"
        ), error
