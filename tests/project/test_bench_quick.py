"""The benchmark harness runs end to end (``benches/run.py --quick``), so it never rots.

Speed is not asserted here: only that every quick case ran, moved every message and
produced a figure. The harness starts its own nats-server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICK_CASES = [
    "native-publish",
    "native-publish-ids",
    "natspy-publish",
    "ja-publish",
    "ja-publish-ids",
    "ja-publish-fast",
    "ja-publish-fast-ids",
    "ja-publish-atomic-ids",
    "ja-publish-atomic",
    "ja-publish-exactly-once",
    "native-raw-publish-fast",
    "native-fetch",
    "native-raw-fetch",
    "natspy-fetch",
    "ja-read",
    "ja-read-direct",
    "ja-read-views",
    "ja-consume-batch-ack",
    "native-consume-flow-control",
    "ja-consume-flow-control",
]
# Not in the quick run: jetstream-extra's peers (extra-publish-fast, extra-publish-atomic,
# extra-get-batch) build a crate of their own on async-nats 0.48 (benches/extra), minutes
# of compiling that the test command does not pay; full runs and --only measure them.


@pytest.mark.slow
@pytest.mark.timeout(1200)  # may first build the native baseline with cargo
def test_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "quick"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benches" / "run.py"), "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"

    results = json.loads(out.with_suffix(".json").read_text())
    rows = {row["case"]: row for row in results["rows"]}
    assert sorted(rows) == sorted(QUICK_CASES)
    for case, row in rows.items():
        assert row.get("error") is None, (case, row)
        assert row["msg_per_s"] > 0, (case, row)
        assert row["cpu_s_per_million"] > 0, (case, row)
        assert row["msgs"] == results["meta"]["counts"]["128"], (case, row)
    assert results["meta"]["server_version"].startswith("v")
    assert "| native-publish |" in out.with_suffix(".md").read_text()


def test_the_message_ceiling_yields_what_spark_expects_of_a_read() -> None:
    # spark-read-ceiling-message stands for a read's hand-over only if its batches are
    # in exactly the Arrow schema Spark expects of the message schema.
    pytest.importorskip("pyspark")
    sys.path.insert(0, str(ROOT / "benches"))
    try:
        import spark_ceiling
    finally:
        sys.path.remove(str(ROOT / "benches"))
    from jetstream_arrow.spark.columns import arrow_schema, message_schema

    expected = arrow_schema(message_schema())
    assert spark_ceiling._batch(4, 8, "message").schema.equals(expected)
    # The declared DDL (parsing it needs a session): the same columns, all non-null.
    declared = [c.split() for c in spark_ceiling.SHAPES["message"].split(",")]
    assert [c[0] for c in declared] == message_schema().names
    assert all(c[-2:] == ["not", "null"] for c in declared)
    assert spark_ceiling._batch(4, 8).schema.names == ["subject", "seq", "data"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sink_bench_runs_every_case(tmp_path: Path) -> None:
    """``benches/sink.py`` on 5,000 messages, once: every case lands every message
    (the script fails otherwise) and gets a row."""
    out = tmp_path / "sink.md"
    script = str(ROOT / "benches" / "sink.py")
    proc = subprocess.run(
        [sys.executable, script, "--count", "5000", "--repeat", "1", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    table = out.read_text()
    for case in ("ja-read-json", "sink-delta", "sink-parquet", "sink-delta-workqueue"):
        assert f"| `{case}` |" in table, table


def test_the_extra_peers_use_the_publishers_bounds() -> None:
    # benches/extra cannot import the core (another async-nats), so it restates the
    # bounds the package's fast and atomic publishers use; they must not drift.
    import re

    def consts(path: str) -> dict[str, int]:
        text = (ROOT / path).read_text()
        found = re.findall(r"const (\w+): \w+ = ([0-9_]+)(?: << ([0-9]+))?;", text)
        return {k: int(v.replace("_", "")) << int(shift or 0) for k, v, shift in found}

    extra = consts("benches/extra/src/main.rs")
    core = consts("rust/core/src/defaults.rs") | consts("rust/core/src/publish/options.rs")
    for name in ("FAST_FLOW", "FAST_OUTSTANDING_ACKS", "MAX_BYTES_IN_FLIGHT", "ATOMIC_BATCH_ROWS"):
        assert extra[name] == core[name], name
