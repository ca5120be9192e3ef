"""The lake sink, measured: JSON objects of 8 fields (about 200 bytes) landed into a
Delta table and a partitioned Parquet dataset with a commit every 100,000 rows, from
a limits stream (read by range) and from a WorkQueue (a durable consumer, acked after
each commit), against ``client.read`` of the same stream decoding the same JSON.

    python benches/sink.py                        # 500k messages, median of 3
    python benches/sink.py --count 20000 --repeat 1
    python benches/sink.py --kills 5 --count 1000000   # exactly once across kill -9s

Every case runs in its own process (its peak RSS is its own) against one nats-server
this script starts; rounds are interleaved. Results are printed and written to
``bench-results/sink-<stamp>.md`` (or ``--out``). With ``--kills``, no timing table: the sink
command lands a limits stream into Delta, the same into partitioned Parquet, and a
WorkQueue into Delta, each while it is killed with SIGKILL that many times at random
points; the run fails unless each target holds one row per sequence and the position
recorded is the last sequence.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

CASES = ["ja-read-json", "sink-delta", "sink-parquet", "sink-delta-workqueue"]
#: Cases that consume their stream, which is filled again (untimed) for each.
QUEUES = {"sink-delta-workqueue"}
COMMIT_ROWS = 100_000


def _payload_module() -> Any:
    """benches/codecs.py, for its 8-field value (its name would shadow the stdlib's)."""
    spec = importlib.util.spec_from_file_location("bench_codecs", ROOT / "benches" / "codecs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the cases, each in its own process ---------------------------------------------------


class _TimedTarget:
    """A sink target whose commits are timed."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.commit_seconds: list[float] = []

    @property
    def identity(self) -> str:
        return str(self.target.identity)

    def positions(self, streams: Any) -> dict[str, int]:
        return dict(self.target.positions(streams))

    def created(self, streams: Any) -> dict[str, int | None]:
        return dict(self.target.created(streams))

    def commit(self, rows: Any, positions: Any, partition_by: Any, created: Any = None) -> None:
        t0 = time.perf_counter()
        self.target.commit(rows, positions, partition_by, created)
        self.commit_seconds.append(time.perf_counter() - t0)


def run_case(case: str, p: dict[str, Any]) -> dict[str, Any]:
    import jetstream_arrow as ja

    codec = ja.ValueCodec("json", schema=_payload_module().SCHEMA)
    result: dict[str, Any] = {}
    with ja.connect(p["url"]) as client:
        if case == "ja-read-json":
            msgs = 0
            t0 = time.perf_counter()
            for batch in client.read(p["stream"], codec=codec):
                msgs += batch.num_rows
            result["seconds"] = time.perf_counter() - t0
        else:
            where = Path(p["dir"]) / case
            target = _TimedTarget(
                ja.ParquetTarget(where) if case == "sink-parquet" else ja.DeltaTarget(where)
            )
            t0 = time.perf_counter()
            report = ja.run_sink(
                client,
                [p["stream"]],
                target,
                codec=codec,
                commit_rows=COMMIT_ROWS,
                partition_by=["date"] if case == "sink-parquet" else [],
                durable="lake" if case in QUEUES else None,
            )
            result["seconds"] = time.perf_counter() - t0
            msgs = report.rows
            result["commits"] = report.commits
            result["commit_s"] = statistics.median(target.commit_seconds)
            if report.positions[p["stream"]] != p["n"]:
                raise SystemExit(f"{case} ended at {report.positions}, not {p['n']}")
    result["msgs"] = msgs
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


# -- the run ------------------------------------------------------------------------------


def fill(url: str, stream: str, n: int, retention: str = "limits") -> None:
    import jetstream_arrow as ja

    values = _payload_module().values
    with ja.connect(url) as client:
        client.create_stream(stream, subjects=[f"{stream}.>"], retention=retention)
        for start in range(0, n, 50_000):
            part = values(min(50_000, n - start))
            client.publish(part, subject=f"{stream}.e", codec="json", window=8192)


def _commit_bound_mb(n_rows: int) -> float:
    """The Arrow size of one commit's rows: what the sink holds at most."""
    import pyarrow as pa

    values = _payload_module().values(n_rows)
    message = pa.table(
        {
            "stream": ["READ"] * n_rows,
            "subject": ["READ.e"] * n_rows,
            "seq": pa.array(range(n_rows), pa.int64()),
            "timestamp": pa.array([0] * n_rows, pa.timestamp("us", tz="UTC")),
        }
    )
    for name in values.column_names:
        message = message.append_column(name, values.column(name))
    return float(message.nbytes / 2**20)


def bench(args: argparse.Namespace) -> int:
    import jetstream_arrow as ja
    from jetstream_arrow.embedded_server import EmbeddedServer

    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CASES}
    with EmbeddedServer(name="ja-bench-sink") as server, tempfile.TemporaryDirectory() as tmp:
        fill(server.url, "READ", args.count)
        for round_no in range(1, args.repeat + 1):
            for case in CASES:
                stream = "READ"
                if case in QUEUES:
                    stream = f"Q{round_no}"
                    fill(server.url, stream, args.count, retention="workqueue")
                params = {"url": server.url, "stream": stream, "n": args.count}
                params["dir"] = str(Path(tmp) / f"round{round_no}")
                out = subprocess.run(
                    [sys.executable, __file__, "--case", case, "--params", json.dumps(params)],
                    capture_output=True,
                    text=True,
                    timeout=900,
                    check=False,
                )
                if out.returncode != 0:
                    raise SystemExit(f"{case} failed:\n{out.stderr[-3000:]}")
                result = json.loads(out.stdout.strip().splitlines()[-1])
                if result["msgs"] != args.count:
                    raise SystemExit(f"{case} moved {result['msgs']} of {args.count} messages")
                runs[case].append(result)
                print(
                    f"  [round {round_no}] {case}: {result['msgs'] / result['seconds']:,.0f} msg/s"
                )
                if case in QUEUES:
                    with ja.connect(server.url) as client:
                        # The server applies the acks after the sink has sent them.
                        deadline = time.monotonic() + 60
                        while left := client.stream_info(stream).state.messages:
                            if time.monotonic() > deadline:
                                raise SystemExit(f"{case} left {left} messages in its queue")
                            time.sleep(0.1)
                        client.delete_stream(stream)
        with ja.connect(server.url) as client:
            version = client.server_info().get("version", "?")

    rate = {c: statistics.median(r["msgs"] / r["seconds"] for r in runs[c]) for c in CASES}
    bound = _commit_bound_mb(min(COMMIT_ROWS, args.count))
    lines = [
        f"sink bench, {dt.datetime.now().isoformat(timespec='minutes')}, nats-server {version}: "
        f"{args.count:,} JSON objects of 8 fields (~200 B), commits every {COMMIT_ROWS:,} "
        f"rows, median of {args.repeat}; one commit's rows in Arrow: {bound:,.0f} MB",
        "",
        "| case | rows/s | vs `ja-read-json` | commits | s per commit | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for case in CASES:
        rss = max(r["peak_rss_mb"] for r in runs[case])
        if case == "ja-read-json":
            lines.append(f"| `{case}` | {rate[case]:,.0f} | 1.00 | | | {rss:,.0f} |")
            continue
        commits = runs[case][0]["commits"]
        per_commit = statistics.median(r["commit_s"] for r in runs[case])
        ratio = rate[case] / rate["ja-read-json"]
        lines.append(
            f"| `{case}` | {rate[case]:,.0f} | {ratio:.2f} | {commits} | {per_commit:.2f} "
            f"| {rss:,.0f} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        out = Path(args.out)
    else:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = ROOT / "bench-results" / f"sink-{stamp}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table + "\n")
    return 0


# -- exactly once across kills --------------------------------------------------------------


def _delta_position(path: Path, stream: str) -> int:
    from deltalake import DeltaTable

    from jetstream_arrow.sink import app_id

    if not DeltaTable.is_deltatable(str(path)):
        return 0
    return int(DeltaTable(str(path)).transaction_version(app_id(stream)) or 0)


def _parquet_position(path: Path, stream: str) -> int:
    from jetstream_arrow.sink import read_manifest

    manifest = read_manifest(path) if path.exists() else None
    return int(manifest["positions"].get(stream, 0)) if manifest else 0


def _landed_seqs(target: str, path: Path) -> Any:
    """The ``seq`` column of everything landed at ``path``."""
    if target == "parquet":
        import pyarrow.parquet as pq

        from jetstream_arrow.sink import dataset_files

        # The partition columns are in the files: none is inferred from the paths.
        files = dataset_files(path)
        return pq.ParquetDataset(files, partitioning=None).read(columns=["seq"]).column("seq")
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pyarrow_table(columns=["seq"]).column("seq")


#: The kill runs: (name, stream retention, target flag).
KILL_RUNS = [
    ("delta", "limits", "--delta"),
    ("parquet", "limits", "--parquet"),
    ("delta-workqueue", "workqueue", "--delta"),
]


def kills(args: argparse.Namespace) -> int:
    """Land ``--count`` messages with the sink command, killing it with SIGKILL
    ``--kills`` times at random points, once for each of ``KILL_RUNS``: a limits
    stream into Delta, into partitioned Parquet, and a WorkQueue into Delta. Fail
    unless each target holds one row per sequence and records the last sequence as
    its position (and the queue ends empty)."""
    failed = 0
    for name, retention, flag in KILL_RUNS:
        failed += _kill_run(args, name, retention, flag)
    return 1 if failed else 0


def _kill_run(args: argparse.Namespace, name: str, retention: str, flag: str) -> int:
    import pyarrow.compute as pc

    import jetstream_arrow as ja
    from jetstream_arrow.embedded_server import EmbeddedServer

    rng = random.Random(args.seed)
    n = args.count
    marks = sorted(rng.randrange(n // 10, n * 9 // 10) for _ in range(args.kills))
    target = "parquet" if flag == "--parquet" else "delta"
    position = _parquet_position if target == "parquet" else _delta_position
    started = time.monotonic()
    with EmbeddedServer(name="ja-bench-sink-kills") as server, tempfile.TemporaryDirectory() as tmp:
        fill(server.url, "JOBS", n, retention=retention)
        filled = time.monotonic()
        path = Path(tmp) / "jobs"
        argv = [sys.executable, "-m", "jetstream_arrow", "sink", "JOBS", flag, str(path)]
        argv += ["--value-format", "json", "-s", server.url, "--quiet"]
        argv += ["--commit-rows", str(args.commit_rows)]
        if retention == "workqueue":
            argv += ["--durable", "lake"]
        if target == "parquet":
            argv += ["--partition-by", "date"]
        print(f"{name}:")
        for mark in marks:
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 600
            try:
                while position(path, "JOBS") < mark:
                    if proc.poll() is not None:
                        raise SystemExit(f"the sink ended before {mark}: {proc.stderr.read()}")  # type: ignore[union-attr]
                    if time.monotonic() > deadline:
                        raise SystemExit(f"waited 600 s for the sink to commit {mark}")
                    time.sleep(0.01)
                time.sleep(rng.uniform(0, 0.5))
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)
            print(f"  killed at position {position(path, 'JOBS'):,}")
        final = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
        if final.returncode != 0:
            raise SystemExit(f"the last sink failed: {final.stderr[-3000:]}")
        landed = time.monotonic()
        seqs = _landed_seqs(target, path)
        distinct = pc.count_distinct(seqs).as_py()
        recorded = position(path, "JOBS")
        with ja.connect(server.url) as client:
            deadline = time.monotonic() + 30
            while retention == "workqueue" and client.stream_info("JOBS").state.messages:
                if time.monotonic() > deadline:
                    raise SystemExit("the queue still holds messages 30 s after the last sink")
                time.sleep(0.1)
        ok = (
            len(seqs) == n
            and distinct == n
            and pc.min(seqs).as_py() == 1
            and pc.max(seqs).as_py() == n
            and recorded == n
        )
        print(
            f"  {n:,} messages, {args.kills} kills: {len(seqs):,} rows, {distinct:,} distinct "
            f"sequences, position {recorded:,}; fill {filled - started:.1f} s, landing with "
            f"kills {landed - filled:.1f} s; {'exactly once' if ok else 'FAILED'}"
        )
        return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kills", type=int, help="check exactly once across N kill -9s")
    parser.add_argument("--commit-rows", type=int, default=COMMIT_ROWS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="the markdown table's path (default bench-results/)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(run_case(args.case, json.loads(args.params))))
        return 0
    if args.kills:
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        return kills(args)
    return bench(args)


if __name__ == "__main__":
    raise SystemExit(main())
