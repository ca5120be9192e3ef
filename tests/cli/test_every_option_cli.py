"""The option probes of the command line (jetstream-arrow, load, export, server, demo; the
flags of sink are in tests/sink/), and the options taken where they do nothing: each
option changes what happens, or is refused naming it. tests/option_probes.py says what a
probe is and holds what the probes share; tests/project/test_every_option.py checks that
every option of every entry point has a probe."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import jetstream_arrow as ja
from cli_helpers import cli_process
from conftest_spark import spark
from jetstream_arrow.cli import build_parser
from jetstream_arrow.positions import POSITION_SUBJECT_PREFIX
from natspy import data_messages, first_data_seq
from natsserver import NatsServer
from option_probes import (
    SAMPLE_CSV,
    Ctx,
    ProbeTable,
    connection_probes,
    ctx,
    headers_of,
    key,
    msg_ids,
    raises,
    start_configured_server,
    stored_encodings,
    timed_stream,
    write_csv,
)

__all__ = ["ctx", "spark"]  # fixtures, imported for pytest

probes = ProbeTable()


# == CLI ========================================================================================


def load(ctx: Ctx, *argv: str, csv: str = SAMPLE_CSV, stream: str | None = None) -> tuple[Any, str]:
    """``jetstream-arrow load`` of a small CSV file into a new stream (or ``stream``)."""
    name = stream or ctx.stream()
    run = ctx.cli("load", write_csv(ctx, csv), "--stream", name, "-s", ctx.url, *argv)
    if "--subject" not in argv and "--subject-column" not in argv:
        raise AssertionError("give --subject or --subject-column")
    return run, name


def payloads(ctx: Ctx, name: str) -> list[Any]:
    return [json.loads(d) for d in ctx.rows(name).column("data").to_pylist()]


def _load_probe(option: str) -> Callable[[Callable[[Ctx], None]], None]:
    def wrap(fn: Callable[[Ctx], None]) -> None:
        probes.register("jetstream-arrow load", option, "effect", fn)

    return wrap


@_load_probe("--stream")
def _cli_stream(ctx: Ctx) -> None:
    name = ctx.stream()
    run, _ = load(ctx, "--subject", f"{name}.x", stream=name)
    assert run.code == 0, run.err
    assert ctx.client.stream_info(name).state.messages == 2


@_load_probe("--subject")
def _cli_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    load(ctx, "--subject", f"{name}.given", stream=name)
    assert set(ctx.rows(name).column("subject").to_pylist()) == {f"{name}.given"}


@_load_probe("--subject-column")
def _cli_subject_column(ctx: Ctx) -> None:
    name = ctx.stream()
    run, _ = load(
        ctx, "--subject-column", "subj", stream=name, csv=f"subj,v\n{name}.p,1\n{name}.q,2\n"
    )
    assert run.code == 0, run.err
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.p", f"{name}.q"]


@_load_probe("--format")
def _cli_format(ctx: Ctx) -> None:
    name = ctx.stream()
    path = write_csv(ctx, SAMPLE_CSV, suffix=".txt")
    base = ("load", path, "--stream", name, "-s", ctx.url, "--subject", f"{name}.x")
    assert ctx.cli(*base).code == 2
    run = ctx.cli(*base, "--format", "csv")
    assert run.code == 0, run.err
    assert ctx.client.stream_info(name).state.messages == 2


@_load_probe("--data-column")
def _cli_data_column(ctx: Ctx) -> None:
    name = ctx.stream()
    load(ctx, "--subject", f"{name}.x", "--data-column", "kind", stream=name)
    assert ctx.rows(name).column("data").to_pylist() == [b"a", b"b"]


@_load_probe("--headers-column")
def _cli_headers_column(ctx: Ctx) -> None:
    name = ctx.stream()
    csv = 'h,v\n"{""X-Probe"": ""one""}",1\n"{""X-Probe"": ""two""}",2\n'
    run, _ = load(ctx, "--subject", f"{name}.x", "--headers-column", "h", stream=name, csv=csv)
    assert run.code == 0, run.err
    assert [h.get("X-Probe") for h in headers_of(ctx, name)] == [["one"], ["two"]]


@_load_probe("--msg-id-column")
def _cli_msg_id_column(ctx: Ctx) -> None:
    name = ctx.stream()
    load(ctx, "--subject", f"{name}.x", "--msg-id-column", "zip", stream=name)
    assert msg_ids(ctx, name) == ["02134", "10001"]


@_load_probe("--file-id")
def _cli_file_id(ctx: Ctx) -> None:
    name = ctx.stream()
    path = write_csv(ctx, SAMPLE_CSV)
    base = ("load", path, "--stream", name, "-s", ctx.url, "--subject", f"{name}.x")
    ctx.cli(*base)
    ctx.cli(*base, "--file-id", "quick")
    ids = msg_ids(ctx, name)
    assert len(ids) == 4 and ids[0] != ids[2], ids


@_load_probe("--msg-id-prefix")
def _cli_msg_id_prefix(ctx: Ctx) -> None:
    name = ctx.stream()
    load(ctx, "--subject", f"{name}.x", "--msg-id-prefix", "P", stream=name)
    assert msg_ids(ctx, name) == ["P0", "P1"]


def _created(ctx: Ctx, *argv: str, subjects: str | None = None) -> Any:
    """A load with --create-stream (and ``argv``); the new stream's info. ``subjects``
    ("{name}" for the stream's name) is given as --stream-subjects."""
    name = ctx.name()
    ctx.made.append(name)
    more = ["--stream-subjects", subjects.format(name=name)] if subjects else []
    run = ctx.cli(
        "load",
        write_csv(ctx, SAMPLE_CSV),
        "--stream",
        name,
        "-s",
        ctx.url,
        "--subject",
        f"{name}.x",
        "--create-stream",
        *more,
        *argv,
    )
    assert run.code == 0, run.err
    return ctx.client.stream_info(name)


@_load_probe("--create-stream")
def _cli_create_stream(ctx: Ctx) -> None:
    name = ctx.name()
    run = ctx.cli(
        "load",
        write_csv(ctx, SAMPLE_CSV),
        "--stream",
        name,
        "-s",
        ctx.url,
        "--subject",
        f"{name}.x",
    )
    assert run.code == 1 and "--create-stream" in run.err
    # the file's 2 rows (its position message, kept in a stream the load made, is not one)
    assert data_messages(ctx.url, _created(ctx).config.name) == 2


@_load_probe("--stream-subjects")
def _cli_stream_subjects(ctx: Ctx) -> None:
    # The subjects given (or the load's subject), and the writers' positions' subjects
    # that --create-stream adds to every stream it makes.
    info = _created(ctx, subjects="{name}.*")
    name = info.config.name
    assert info.config.subjects == [f"{name}.*", f"{POSITION_SUBJECT_PREFIX}{name}.>"]
    plain = _created(ctx)
    name = plain.config.name
    assert plain.config.subjects == [f"{name}.x", f"{POSITION_SUBJECT_PREFIX}{name}.>"]


@_load_probe("--storage")
def _cli_storage(ctx: Ctx) -> None:
    assert _created(ctx, "--storage", "memory").config.storage == "memory"
    assert _created(ctx).config.storage == "file"


@_load_probe("--duplicate-window")
def _cli_duplicate_window(ctx: Ctx) -> None:
    assert _created(ctx, "--duplicate-window", "30").config.duplicate_window == 30.0
    assert _created(ctx).config.duplicate_window != 30.0


@_load_probe("--ttl")
def _cli_ttl(ctx: Ctx) -> None:
    info = _created(ctx, "--ttl", "90s")
    assert info.config.allow_msg_ttl is True
    # the file's first row: after its first position message
    first = first_data_seq(ctx.url, info.config.name)
    stored = ctx.client.get_message(info.config.name, first)
    assert stored.headers.get("Nats-TTL") == ["90s"], stored.headers
    assert _created(ctx).config.allow_msg_ttl is not True


@_load_probe("--delimiter")
def _cli_delimiter(ctx: Ctx) -> None:
    name = ctx.stream()
    load(ctx, "--subject", f"{name}.x", "--delimiter", ";", stream=name, csv="a;b\n1;2\n")
    assert payloads(ctx, name) == [{"a": "1", "b": "2"}]


@_load_probe("--csv-types")
def _cli_csv_types(ctx: Ctx) -> None:
    as_text, inferred = ctx.stream(), ctx.stream()
    load(ctx, "--subject", f"{as_text}.x", stream=as_text)
    load(ctx, "--subject", f"{inferred}.x", "--csv-types", "infer", stream=inferred)
    assert [p["zip"] for p in payloads(ctx, as_text)] == ["02134", "10001"]
    assert [p["zip"] for p in payloads(ctx, inferred)] == [2134, 10001]


def _load_argv(ctx: Ctx, *argv: str) -> list[str]:
    name = ctx.stream()
    return [
        "load",
        write_csv(ctx, SAMPLE_CSV),
        "--stream",
        name,
        "-s",
        ctx.url,
        "--subject",
        f"{name}.x",
        *argv,
    ]


@_load_probe("--compression")
def _cli_load_compression(ctx: Ctx) -> None:
    name = ctx.stream()
    text = "compressible " * 40
    run, _ = load(
        ctx, "--subject", f"{name}.x", "--compression", "zlib", stream=name, csv=f"id,t\n1,{text}\n"
    )
    assert run.code == 0, run.err
    assert stored_encodings(ctx, name, 1) == ["zlib"]
    assert payloads(ctx, name) == [{"id": "1", "t": text}]
    bad = ctx.cli(*_load_argv(ctx, "--compression", "lz4"))
    assert bad.code == 2 and "--compression" in bad.err


@_load_probe("--exactly-once")
def _cli_load_exactly_once(ctx: Ctx) -> None:
    name = ctx.stream(exactly_once=True)
    run, _ = load(ctx, "--subject", f"{name}.x", "--exactly-once", stream=name)
    assert run.code == 0, run.err
    # The two rows and the file's position, which reads leave out.
    assert ctx.client.stream_info(name).state.messages == 3
    assert len(payloads(ctx, name)) == 2
    # Into a stream that cannot hold positions: refused, naming how to enable it.
    refused = ctx.cli(*_load_argv(ctx, "--exactly-once"))
    assert refused.code == 2 and "--exactly-once" in refused.err, refused.err
    assert "enable-exactly-once" in refused.err


@_load_probe("--no-exactly-once")
def _cli_load_no_exactly_once(ctx: Ctx) -> None:
    name = ctx.stream(exactly_once=True)
    run, _ = load(ctx, "--subject", f"{name}.x", "--no-exactly-once", stream=name)
    assert run.code == 0, run.err
    assert ctx.client.stream_info(name).state.messages == 2  # no position


@_load_probe("--writer-lease")
def _cli_load_writer_lease(ctx: Ctx) -> None:
    name = ctx.stream(exactly_once=True)
    run, _ = load(ctx, "--subject", f"{name}.x", "--writer-lease", "7.5", stream=name)
    assert run.code == 0, run.err
    # The file's last position (closed) is the last message of the stream.
    last = ctx.client.stream_info(name).state.last_seq
    position = json.loads(ctx.client.get_message(name, seq=last).data)
    assert position["lease"] == 7.5
    refused = ctx.cli(*_load_argv(ctx, "--writer-lease", "0"))
    assert refused.code == 2 and "--writer-lease" in refused.err, refused.err


for _flag_name, _value in (
    ("--batch-rows", "0"),
    ("--window", "0"),
    ("--ack-timeout", "0"),
    ("--max-rate", "0"),
):
    probes.cli_refused(
        "jetstream-arrow load",
        _flag_name,
        lambda ctx, f=_flag_name, v=_value: _load_argv(ctx, f, v),
    )


def _export_argv(
    ctx: Ctx, *argv: str, name: str | None = None, out: str | None = None
) -> list[str]:
    name = name or ctx.stream(count=6)
    out = out or str(ctx.tmp / f"{uuid.uuid4().hex[:8]}.parquet")
    return ["export", name, "-o", out, "-s", ctx.url, *argv]


def export(ctx: Ctx, *argv: str, name: str | None = None) -> pa.Table:
    out = str(ctx.tmp / f"{uuid.uuid4().hex[:8]}.parquet")
    run = ctx.cli(*_export_argv(ctx, *argv, name=name, out=out))
    assert run.code == 0, run.err
    return pq.read_table(out)


def _export_probe(option: str) -> Callable[[Callable[[Ctx], None]], None]:
    def wrap(fn: Callable[[Ctx], None]) -> None:
        probes.register("jetstream-arrow export", option, "effect", fn)

    return wrap


@_export_probe("--output")
def _cli_output(ctx: Ctx) -> None:
    out = ctx.tmp / "given-name.arrow"
    assert ctx.cli(*_export_argv(ctx, out=str(out))).code == 0
    assert out.exists()


@_export_probe("--format")
def _cli_export_format(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    run = ctx.cli("export", name, "-o", "-", "--format", "jsonl", "-s", ctx.url)
    assert run.code == 0 and len(run.out.splitlines()) == 2, run


@_export_probe("--no-decompress")
def _cli_no_decompress(ctx: Ctx) -> None:
    name = ctx.stream()
    plain = b"compressible " * 40
    ctx.client.publish(pa.table({"subject": [f"{name}.a"], "data": [plain]}), compression="gzip")
    assert export(ctx, name=name).column("data").to_pylist() == [plain]
    stored = export(ctx, "--no-decompress", name=name).column("data").to_pylist()
    assert len(stored[0]) < len(plain) and gzip.decompress(stored[0]) == plain


@_export_probe("--start-seq")
def _cli_start_seq(ctx: Ctx) -> None:
    assert export(ctx, "--start-seq", "4").column("seq").to_pylist() == [4, 5, 6]


@_export_probe("--end-seq")
def _cli_end_seq(ctx: Ctx) -> None:
    assert export(ctx, "--end-seq", "2").column("seq").to_pylist() == [1, 2]


@_export_probe("--since")
def _cli_since(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    got = export(ctx, "--since", middle.isoformat(), name=name)
    assert got.column("seq").to_pylist() == [4, 5, 6]


@_export_probe("--until")
def _cli_until(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    got = export(ctx, "--until", middle.isoformat(), name=name)
    assert got.column("seq").to_pylist() == [1, 2, 3]


@_export_probe("--subjects")
def _cli_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert export(ctx, "--subjects", f"{name}.b", name=name).column("seq").to_pylist() == [2, 4, 6]


@_export_probe("--include-headers")
def _cli_include_headers(ctx: Ctx) -> None:
    assert "headers" in export(ctx, "--include-headers").column_names
    assert "headers" not in export(ctx).column_names


@_export_probe("--data-as")
def _cli_data_as(ctx: Ctx) -> None:
    assert export(ctx, "--data-as", "text").column("data").to_pylist()[0] == "m0"
    assert export(ctx).column("data").to_pylist()[0] == b"m0"


@_export_probe("--columns")
def _cli_columns(ctx: Ctx) -> None:
    assert export(ctx, "--columns", "seq,subject").column_names == ["seq", "subject"]


@_export_probe("--compression")
def _cli_compression(ctx: Ctx) -> None:
    out = str(ctx.tmp / f"{uuid.uuid4().hex[:8]}.parquet")
    assert ctx.cli(*_export_argv(ctx, "--compression", "snappy", out=out)).code == 0
    assert pq.ParquetFile(out).metadata.row_group(0).column(0).compression == "SNAPPY"
    # Where the format has no compression, the flag is refused, not dropped.
    csv = str(ctx.tmp / f"{uuid.uuid4().hex[:8]}.csv")
    run = ctx.cli(*_export_argv(ctx, "--compression", "gzip", out=csv))
    assert run.code == 2 and "--compression" in run.err, (
        f"export to CSV with --compression gzip: exit {run.code}, stderr {run.err!r}"
    )


@_export_probe("--batch-rows")
def _cli_export_batch_rows(ctx: Ctx) -> None:
    out = str(ctx.tmp / f"{uuid.uuid4().hex[:8]}.parquet")
    assert ctx.cli(*_export_argv(ctx, "--batch-rows", "2", out=out)).code == 0
    assert pq.ParquetFile(out).metadata.num_row_groups == 3


# -- connection and output flags, per command (sink's: tests/sink/) -------------------------


connection_probes(probes, "load")
connection_probes(probes, "export")


@probes.effect(("jetstream-arrow", "--version"))
def _cli_version(ctx: Ctx) -> None:
    run = ctx.cli("--version")
    assert run.code == 0 and run.out.startswith("jetstream-arrow "), run


probes.cli_refused(
    "jetstream-arrow server", "--port", lambda ctx: ["server", "--port", "70000"], code=1
)


@probes.effect(("jetstream-arrow server", "--debug"))
def _cli_server_debug(ctx: Ctx) -> None:
    from jetstream_arrow.cli.errors import CliError

    assert ctx.cli("server", "--port", "70000").code == 1
    raises(lambda: ctx.cli("server", "--port", "70000", "--debug"), CliError)


def started_server(ctx: Ctx) -> tuple[str, Path, str]:
    """``jetstream-arrow server --port 0 --store-dir D --domain X`` in its own process:
    the URL it printed, D, X (run once, stopped with SIGTERM)."""
    if "cli-server" not in ctx.extra_servers:
        store = ctx.tmp / "cli-store"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jetstream_arrow",
                "server",
                "--port",
                "0",
                "--store-dir",
                str(store),
                "--domain",
                "probedomain",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("nats://"), (url, proc.stderr.read() if proc.stderr else "")
            with ja.connect(url, domain="probedomain", request_timeout=5) as c:
                c.create_stream("CLIPROBE", ["cliprobe.>"])
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise AssertionError(
                    "jetstream-arrow server did not stop within 20 s of SIGTERM"
                ) from None
        ctx.extra_servers["cli-server"] = (url, store, "probedomain")
    found: tuple[str, Path, str] = ctx.extra_servers["cli-server"]
    return found


@probes.effect(("jetstream-arrow server", "--store-dir"))
def _cli_store_dir(ctx: Ctx) -> None:
    _, store, _ = started_server(ctx)
    assert list(store.rglob("CLIPROBE")), list(store.rglob("*"))


@probes.effect(("jetstream-arrow server", "--domain"))
def _cli_server_domain(ctx: Ctx) -> None:
    # The stream was created through the domain's API prefix ($JS.probedomain.API).
    _, store, domain = started_server(ctx)
    assert list(store.rglob("CLIPROBE")) and domain == "probedomain"


# -- demo: one run with the flags that shape it, and runs that fail early -----------------------

DEMO_ROWS = 300


def demo_server(ctx: Ctx) -> NatsServer:
    """A server of its own for each demo run: a demo's stream stores ``demo.>``, which
    another demo's stream (or another test's) on the same server would overlap."""
    server = start_configured_server(ctx, "")
    ctx.extra_servers[f"demo-server-{len(ctx.extra_servers)}"] = server
    return server


def demo_run(ctx: Ctx) -> tuple[Any, str, ja.Client]:
    """One demo, kept stream and all (run once), and a client of its server."""
    if "demo" not in ctx.extra_servers:
        name = ctx.name("DEMO")
        server = demo_server(ctx)
        run = cli_process(
            "demo",
            "--servers",
            server.url,
            "--rows",
            str(DEMO_ROWS),
            "--partitions",
            "3",
            "--stream",
            name,
            "--keep-stream",
            "--master",
            "local[1]",
            "--step-timeout",
            "240",
            "--quiet",
            timeout=300,
        )
        ctx.extra_servers["demo"] = (run, name, ja.connect(server.url))
    found: tuple[Any, str, ja.Client] = ctx.extra_servers["demo"]
    return found


def _demo_probe(option: str) -> Callable[[Callable[[Ctx], None]], Callable[[Ctx], None]]:
    def wrap(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
        probes.register("jetstream-arrow demo", option, "effect", fn)
        return fn

    return wrap


def _demo_ok(ctx: Ctx) -> tuple[ja.Client, str]:
    run, name, client = demo_run(ctx)
    assert run.code == 0, run.err
    return client, name


@_demo_probe("--servers")
@_demo_probe("--stream")
@_demo_probe("--keep-stream")
def _cli_demo_stream(ctx: Ctx) -> None:
    client, name = _demo_ok(ctx)
    assert client.stream_info(name).state.messages == DEMO_ROWS


@_demo_probe("--rows")
def _cli_demo_rows(ctx: Ctx) -> None:
    client, name = _demo_ok(ctx)
    assert client.read(name).read_all().num_rows == DEMO_ROWS


@_demo_probe("--partitions")
def _cli_demo_partitions(ctx: Ctx) -> None:
    # A Spark write's message ids are <write id>-<partition>-<row>.
    client, name = _demo_ok(ctx)
    headers = client.read(name, include_headers=True).read_all().column("headers").to_pylist()
    ids = [dict(h)["Nats-Msg-Id"][0] for h in headers]
    assert len({i.rsplit("-", 2)[1] for i in ids}) == 3, ids[:5]


@_demo_probe("--quiet")
def _cli_demo_quiet(ctx: Ctx) -> None:
    run = demo_run(ctx)[0]
    assert run.code == 0
    assert not run.out.strip() and not run.err.strip(), (
        f"demo --quiet printed (stdout) {run.out!r} and (stderr) {run.err[:300]!r}"
    )


@_demo_probe("--master")
def _cli_demo_master(ctx: Ctx) -> None:
    run = cli_process(
        "demo",
        "--servers",
        demo_server(ctx).url,
        "--rows",
        "10",
        "--master",
        "nonsense-master",
        timeout=120,
    )
    assert run.code == 1 and "nonsense-master" in run.err, run.err


@_demo_probe("--step-timeout")
def _cli_demo_step_timeout(ctx: Ctx) -> None:
    # The demo bounds each Spark step with this deadline (demo._timed). A step whose
    # deadline passes before its Spark job starts must fail as one past the deadline.
    # Shown in this process on the session's Spark: a demo process spends a JVM start
    # first, and with the deadline missed it runs the whole demo.
    from jetstream_arrow.cli import demo
    from jetstream_arrow.cli.errors import CliError

    assert build_parser().parse_args(["demo", "--step-timeout", "0.001"]).step_timeout == 0.001
    spark = ctx.spark()

    def step() -> int:
        time.sleep(0.2)
        return int(spark.range(10).count())

    try:
        got = demo._timed(spark, 0.001, "the probe step", step)
    except CliError as err:
        message = str(err)
    else:
        pytest.fail(f"a step that outlived --step-timeout 0.001 by 0.2 s returned {got}")
    assert "--step-timeout" in message, message


def _demo_delegated(flag: str) -> None:
    """demo connects with the flags as load does (the same connection module): the
    ConnectOptions parsed from them are the same; their effect is shown on load."""

    def run(ctx: Ctx) -> None:
        from jetstream_arrow.cli.connection import connect_options

        value = {"--tls-first": None, "--connect-timeout": "3"}.get(flag, f"{ctx.tmp}/probe")
        flags = [flag] if value is None else [flag, value]
        if flag == "--user":
            flags += ["--password", "p"]
        if flag == "--password":
            flags = ["--user", "u", flag, "p"]
        if flag in ("--tls-cert", "--tls-key"):
            flags = ["--tls-cert", str(ctx.tmp / "c.pem"), "--tls-key", str(ctx.tmp / "k.pem")]
        for f in (ctx.tmp / "c.pem", ctx.tmp / "k.pem", ctx.tmp / "probe"):
            f.write_text("{}" if f.name == "probe" else "x")
        parser = build_parser()
        demo = parser.parse_args(["demo", *flags])
        loading = parser.parse_args(["load", "f.csv", "--stream", "S", "--subject", "s", *flags])
        assert connect_options(demo) == connect_options(loading)

    probes.register("jetstream-arrow demo", flag, "delegated", run)


for _flag_name in (
    "--context",
    "--creds",
    "--user",
    "--password",
    "--token",
    "--nkey",
    "--tls-cert",
    "--tls-key",
    "--tls-ca",
    "--tls-first",
    "--domain",
    "--api-prefix",
    "--connect-timeout",
):
    _demo_delegated(_flag_name)


@_demo_probe("--debug")
def _cli_demo_debug(ctx: Ctx) -> None:
    from jetstream_arrow.cli.errors import CliError

    assert ctx.cli("demo", "--rows", "0", "-s", ctx.url).code == 1
    raises(lambda: ctx.cli("demo", "--rows", "0", "-s", ctx.url, "--debug"), CliError)


# == options accepted where they do nothing =========================================================
#
# Each option above has an effect somewhere; these are combinations in which one is
# taken and then does nothing. Each must be refused naming it, as `load --csv-types`
# is refused when no file is CSV.


def _parquet(ctx: Ctx) -> str:
    path = ctx.tmp / f"{uuid.uuid4().hex[:8]}.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), path)
    return str(path)


IGNORED_IN_COMBINATION: dict[str, tuple[str, Callable[[Ctx], list[str]]]] = {
    "load --delimiter without a CSV file": (
        "--delimiter",
        lambda ctx: _load_argv_file(ctx, _parquet(ctx), "--delimiter", ";"),
    ),
    "load --storage without --create-stream": (
        "--storage",
        lambda ctx: _load_argv_file(ctx, _parquet(ctx), "--storage", "memory"),
    ),
    "load --duplicate-window without --create-stream": (
        "--duplicate-window",
        lambda ctx: _load_argv_file(ctx, _parquet(ctx), "--duplicate-window", "5"),
    ),
    "load --stream-subjects without --create-stream": (
        "--stream-subjects",
        lambda ctx: _load_argv_file(ctx, _parquet(ctx), "--stream-subjects", "other.>"),
    ),
    "sink --dead-letter-lease without --dead-letter-stream": (
        "--dead-letter-lease",
        lambda ctx: [
            *["sink", "S", "--parquet", str(ctx.tmp / "no"), "-s", ctx.url],
            *["--dead-letter-lease", "5"],
        ],
    ),
}


def _load_argv_file(ctx: Ctx, path: str, *argv: str) -> list[str]:
    name = ctx.stream()
    return ["load", path, "--stream", name, "-s", ctx.url, "--subject", f"{name}.x", *argv]


#: The demo's probes start Spark (a JVM): marked, so `-m "not spark"` leaves them out.
DEMO_STARTS_SPARK = {
    key("jetstream-arrow demo", f)
    for f in (
        "--servers",
        "--stream",
        "--keep-stream",
        "--rows",
        "--partitions",
        "--quiet",
        "--master",
        "--step-timeout",
    )
}


@pytest.mark.parametrize("probe_key", probes.params(starting_spark=DEMO_STARTS_SPARK))
def test_option(
    probe_key: str, ctx: Ctx, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    probes.run(probe_key, ctx, capsys, request)


@pytest.mark.parametrize("case", sorted(IGNORED_IN_COMBINATION))
def test_option_ignored_in_combination(
    case: str, ctx: Ctx, capsys: pytest.CaptureFixture[str]
) -> None:
    flag, argv = IGNORED_IN_COMBINATION[case]
    ctx.capsys = capsys
    run = ctx.cli(*argv(ctx))
    assert run.code == 2 and flag in run.err, (
        f"{case}: exit {run.code}, the flag was taken and did nothing (stderr {run.err!r})"
    )
