"""The option probes of the lake sink: jetstream-arrow sink and run_sink: each option
changes what happens, or is refused naming it. tests/option_probes.py says what a probe
is and holds what the probes share; tests/project/test_every_option.py checks that every
option of every entry point has a probe."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import (
    BadInputError,
)
from option_probes import (
    VALUE_AVRO,
    Ctx,
    ProbeTable,
    connection_probes,
    ctx,
    probe_descriptor,
)

__all__ = ["ctx"]  # a fixture, imported for pytest

probes = ProbeTable()


# -- jetstream-arrow sink and run_sink ---------------------------------------------------


def _sink_stream_of(ctx: Ctx, *payloads: bytes) -> str:
    """A new stream of ``payloads`` on ``<name>.a`` and ``<name>.b`` in turn (default:
    six JSON objects ``{"n": i}``)."""
    name = ctx.stream()
    data = list(payloads) or [json.dumps({"n": i}).encode() for i in range(6)]
    subjects = [f"{name}.{'ab'[i % 2]}" for i in range(len(data))]
    ctx.client.publish(pa.table({"subject": subjects, "data": data}))
    return name


def sink(ctx: Ctx, name: str, *argv: str) -> tuple[Any, pa.Table]:
    """``jetstream-arrow sink`` of ``name`` into a new Parquet dataset; the run and the
    rows landed."""
    from jetstream_arrow.sink import dataset_files

    root = ctx.tmp / f"sink-{uuid.uuid4().hex[:8]}"
    run = ctx.cli("sink", name, "--parquet", str(root), "-s", ctx.url, *argv)
    assert run.code == 0, run.err
    files = dataset_files(root)
    got = pq.ParquetDataset(files, partitioning=None).read() if files else pa.table({})
    return run, got


def _sink_probe(option: str) -> Callable[[Callable[[Ctx], None]], None]:
    def wrap(fn: Callable[[Ctx], None]) -> None:
        probes.register("jetstream-arrow sink", option, "effect", fn)

    return wrap


@_sink_probe("--parquet")
def _cli_sink_parquet(ctx: Ctx) -> None:
    _, got = sink(ctx, ctx.stream(count=3))
    assert got.column("seq").to_pylist() == [1, 2, 3]


@_sink_probe("--delta")
def _cli_sink_delta(ctx: Ctx) -> None:
    from deltalake import DeltaTable

    name, path = ctx.stream(count=3), ctx.tmp / f"delta-{uuid.uuid4().hex[:8]}"
    assert ctx.cli("sink", name, "--delta", str(path), "-s", ctx.url).code == 0
    assert sorted(DeltaTable(str(path)).to_pyarrow_table().column("seq").to_pylist()) == [1, 2, 3]


@_sink_probe("--until-caught-up")
def _cli_sink_until_caught_up(ctx: Ctx) -> None:
    run, got = sink(ctx, ctx.stream(count=3), "--until-caught-up")
    assert "caught up" in run.out and got.num_rows == 3
    both = ctx.cli("sink", "X", "--parquet", "x", "--until-caught-up", "--follow")
    assert both.code == 2 and "--until-caught-up" in both.err


@_sink_probe("--follow")
def _cli_sink_follow(ctx: Ctx) -> None:
    from jetstream_arrow.sink import read_manifest

    name, root = ctx.stream(count=2), ctx.tmp / f"follow-{uuid.uuid4().hex[:8]}"
    argv = ["sink", name, "--parquet", str(root), "-s", ctx.url, "--commit-seconds", "0.1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetstream_arrow", *argv, "--follow"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ctx.fill(name, 1, start=2)  # stored while the sink runs: a following sink lands it
        deadline = time.monotonic() + 30
        while not (root.exists() and (read_manifest(root) or {}).get("positions") == {name: 3}):
            assert proc.poll() is None, "a following sink ended by itself"
            assert time.monotonic() < deadline, "waited 30 s for the sink to land message 3"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and f"stopped: {name} at 3" in out, out


@_sink_probe("--subject")
def _cli_sink_subject(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    _, got = sink(ctx, name, "--subject", f"{name}={name}.b")
    assert got.column("seq").to_pylist() == [2, 4, 6]


@_sink_probe("--commit-rows")
def _cli_sink_commit_rows(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert "in 3 commits" in sink(ctx, name, "--commit-rows", "2")[0].out
    assert "in 1 commits" in sink(ctx, name)[0].out


@_sink_probe("--value-format")
def _cli_sink_value_format(ctx: Ctx) -> None:
    name = _sink_stream_of(ctx)
    assert sink(ctx, name, "--value-format", "json")[1].column("n").to_pylist() == list(range(6))
    assert "n" not in sink(ctx, name)[1].column_names


@_sink_probe("--include-headers")
def _cli_sink_include_headers(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    assert "headers" in sink(ctx, name, "--include-headers")[1].column_names
    assert "headers" not in sink(ctx, name)[1].column_names


@_sink_probe("--partition-by")
def _cli_sink_partition_by(ctx: Ctx) -> None:
    from jetstream_arrow.sink import dataset_files

    name, root = ctx.stream(count=4), ctx.tmp / f"parts-{uuid.uuid4().hex[:8]}"
    argv = ["sink", name, "--parquet", str(root), "-s", ctx.url]
    assert ctx.cli(*argv, "--partition-by", "subject_token_2").code == 0
    dirs = sorted({Path(f).parent.name for f in dataset_files(root)})
    assert dirs == ["subject_token_2=a", "subject_token_2=b"], dirs


@_sink_probe("--dead-letter-stream")
def _cli_sink_dead_letter_stream(ctx: Ctx) -> None:
    name = _sink_stream_of(ctx, b'{"n": 1}', b"not json", b'{"n": 3}')
    dead = ctx.stream()
    _, got = sink(ctx, name, "--value-format", "json", "--dead-letter-stream", dead)
    assert got.column("seq").to_pylist() == [1, 3]
    assert ctx.rows(dead).column("data").to_pylist() == [b"not json"]
    failed = ctx.cli(
        "sink", name, "--parquet", str(ctx.tmp / "x"), "-s", ctx.url, "--value-format", "json"
    )
    assert failed.code == 1 and "seq 2" in failed.err, failed


@_sink_probe("--durable")
def _cli_sink_durable(ctx: Ctx) -> None:
    name = ctx.stream(count=3, retention="workqueue")
    needed = ctx.cli("sink", name, "--parquet", str(ctx.tmp / "x"), "-s", ctx.url)
    assert needed.code == 2 and "--durable" in needed.err, needed
    _, got = sink(ctx, name, "--durable", "lake")
    assert got.column("seq").to_pylist() == [1, 2, 3]
    assert ctx.client.stream_info(name).state.messages == 0, "landed messages stay queued"
    limits = ctx.stream(count=1)
    refused_run = ctx.cli(
        "sink", limits, "--parquet", str(ctx.tmp / "y"), "-s", ctx.url, "--durable", "lake"
    )
    assert refused_run.code == 2 and "--durable" in refused_run.err, refused_run


@_sink_probe("--avro-schema")
def _cli_sink_avro_schema(ctx: Ctx) -> None:
    import io

    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(VALUE_AVRO), {"id": 5})
    name = _sink_stream_of(ctx, out.getvalue())
    schema = json.dumps(VALUE_AVRO)
    _, got = sink(ctx, name, "--value-format", "avro", "--avro-schema", schema)
    assert got.column("id").to_pylist() == [5]
    # Given for another format, it is refused rather than ignored.
    run = ctx.cli(
        "sink",
        name,
        "--parquet",
        str(ctx.tmp / "x"),
        "--value-format",
        "json",
        "--avro-schema",
        schema,
        "-s",
        ctx.url,
    )
    assert run.code == 2 and "--avro-schema" in run.err, run


def _cli_sink_protobuf(ctx: Ctx) -> None:
    name = _sink_stream_of(ctx, b"\x08\x05")  # field 1 (id) = 5
    descriptor, message = probe_descriptor(), "probe.V"
    _, got = sink(
        ctx,
        name,
        "--value-format",
        "protobuf",
        "--protobuf-descriptor",
        descriptor,
        "--protobuf-message",
        message,
    )
    assert got.column("id").to_pylist() == [5]
    for flag, value in (("--protobuf-descriptor", descriptor), ("--protobuf-message", message)):
        run = ctx.cli(
            "sink",
            name,
            "--parquet",
            str(ctx.tmp / "x"),
            "--value-format",
            "protobuf",
            flag,
            value,
            "-s",
            ctx.url,
        )
        other = "--protobuf-message" if flag == "--protobuf-descriptor" else "--protobuf-descriptor"
        assert run.code == 2 and other in run.err, run


probes.register("jetstream-arrow sink", "--protobuf-descriptor", "effect", _cli_sink_protobuf)
probes.register("jetstream-arrow sink", "--protobuf-message", "effect", _cli_sink_protobuf)


for _flag_name, _argv in (
    ("--commit-seconds", ["--commit-seconds", "0"]),
    ("--batch-rows", ["--batch-rows", "0"]),
    ("--resume-timeout", ["--resume-timeout", "0"]),
    # Its effect, a restarted sink waiting out a dead one's lease, is run_sink's
    # (tests/sink/test_sink_dead_letters_exactly_once.py).
    ("--dead-letter-lease", ["--dead-letter-stream", "D", "--dead-letter-lease", "0"]),
):
    probes.cli_refused(
        "jetstream-arrow sink",
        _flag_name,
        lambda ctx, a=_argv: ["sink", "S", "--parquet", str(ctx.tmp / "no"), "-s", ctx.url, *a],
    )


def _run_sink(ctx: Ctx, name: str, **options: Any) -> tuple[Any, pa.Table]:
    """``run_sink`` of ``name`` into a new Parquet dataset: its report and rows."""
    from jetstream_arrow.sink import dataset_files

    root = ctx.tmp / f"api-{uuid.uuid4().hex[:8]}"
    report = ja.run_sink(ctx.client, [name], ja.ParquetTarget(root), **options)
    files = dataset_files(root)
    # The partition columns are in the files: none is inferred from the directories
    # (a Hive one would guess its type, and clash with the file's).
    return report, pq.ParquetDataset(files, partitioning=None).read() if files else pa.table({})


@probes.effect(("run_sink", "follow"), ("run_sink", "stop"))
def _api_sink_follow(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    stop = threading.Event()
    later = threading.Timer(0.5, lambda: ctx.fill(name, 1, start=2))
    stopping = threading.Timer(2.0, stop.set)
    later.start()
    stopping.start()
    try:
        report, got = _run_sink(ctx, name, follow=True, stop=stop, commit_seconds=0.1)
    finally:
        later.cancel()
        stopping.cancel()
    assert report.stopped and got.column("seq").to_pylist() == [1, 2, 3]
    assert not _run_sink(ctx, name)[0].stopped


@probes.effect(("run_sink", "subjects"))
def _api_sink_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    got = _run_sink(ctx, name, subjects={name: f"{name}.a"})[1]
    assert got.column("seq").to_pylist() == [1, 3]


@probes.effect(("run_sink", "codec"))
def _api_sink_codec(ctx: Ctx) -> None:
    name = _sink_stream_of(ctx)
    assert _run_sink(ctx, name, codec="json")[1].column("n").to_pylist() == list(range(6))
    assert "data" in _run_sink(ctx, name)[1].column_names


@probes.effect(("run_sink", "include_headers"))
def _api_sink_include_headers(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    assert "headers" in _run_sink(ctx, name, include_headers=True)[1].column_names


@probes.effect(("run_sink", "partition_by"))
def _api_sink_partition_by(ctx: Ctx) -> None:
    assert "date" in _run_sink(ctx, ctx.stream(count=1), partition_by=["date"])[1].column_names


@probes.effect(("run_sink", "commit_rows"))
def _api_sink_commit_rows(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert _run_sink(ctx, name, commit_rows=2)[0].commits == 3
    assert _run_sink(ctx, name)[0].commits == 1


@probes.effect(("run_sink", "dead_letter_stream"))
def _api_sink_dead_letter_stream(ctx: Ctx) -> None:
    name, dead = _sink_stream_of(ctx, b'{"n": 1}', b"oops"), ctx.stream()
    report, _ = _run_sink(ctx, name, codec="json", dead_letter_stream=dead)
    assert report.dead_letters == 1 and ctx.rows(dead).column("data").to_pylist() == [b"oops"]


@probes.effect(("run_sink", "durable"))
def _api_sink_durable(ctx: Ctx) -> None:
    name = ctx.stream(count=4, retention="workqueue")
    with pytest.raises(BadInputError, match="'durable'"):
        _run_sink(ctx, name)
    report, got = _run_sink(ctx, name, durable="lake", commit_rows=3)
    assert report.commits == 2 and got.column("seq").to_pylist() == [1, 2, 3, 4]
    assert ctx.client.consumer_info(name, "lake").num_ack_pending == 0
    with pytest.raises(BadInputError, match="'durable'"):
        _run_sink(ctx, ctx.stream(count=1), durable="lake")


@probes.effect(("run_sink", "on_progress"))
def _api_sink_on_progress(ctx: Ctx) -> None:
    seen: list[Any] = []
    name = ctx.stream(count=3)
    _run_sink(ctx, name, on_progress=seen.append)
    assert seen and seen[-1].rows == 3 and seen[-1].lag == {name: 0}


probes.refused(
    "run_sink",
    "commit_seconds",
    lambda ctx: _run_sink(ctx, ctx.stream(count=1), commit_seconds=0),
)
probes.refused(
    "run_sink", "batch_rows", lambda ctx: _run_sink(ctx, ctx.stream(count=1), batch_rows=0)
)
# Its effect, each dead letter once after a kill past the window, is
# tests/sink/test_sink_dead_letters_exactly_once.py's.
probes.refused(
    "run_sink",
    "dead_letter_lease",
    lambda ctx: _run_sink(ctx, ctx.stream(count=1), dead_letter_lease=0),
)
# Its effect, a sink outliving a server's outage, is tests/sink/test_sink_outage.py's.
probes.refused(
    "run_sink",
    "resume_timeout",
    lambda ctx: _run_sink(ctx, ctx.stream(count=1), resume_timeout=0),
)

connection_probes(probes, "sink")


@pytest.mark.parametrize("probe_key", probes.params())
def test_option(
    probe_key: str, ctx: Ctx, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    probes.run(probe_key, ctx, capsys, request)
