# One module: one bench run, read top to bottom (payloads, cases, rounds, table).
"""Typed payloads, measured: reads that decode JSON against plain binary reads and
against nats-py + ``json.loads``; publishes that encode JSON against binary publishes
of the same bytes; Spark's ``valueFormat json`` against ``from_json`` over the binary
read. Payloads are JSON objects of 8 fields, about 200 bytes each.

    python benches/codecs.py                  # 200k messages, median of 3, Spark too
    python benches/codecs.py --count 20000 --repeat 1 --no-spark

Every case runs in its own process (its peak RSS is its own) against one nats-server
this script starts; rounds are interleaved. Results are printed and written to
``bench-results/codecs-<stamp>.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent

#: The value: 8 fields of the kinds events carry.
SCHEMA = pa.schema(
    [
        ("event_id", pa.int64()),
        ("user", pa.string()),
        ("kind", pa.string()),
        ("amount", pa.float64()),
        ("count", pa.int32()),
        ("ok", pa.bool_()),
        ("region", pa.string()),
        ("note", pa.string()),
    ]
)

CASES = [
    "native-raw-fetch",
    "ja-read",
    "ja-read-json",
    "natspy-fetch-json",
    "ja-publish",
    "ja-publish-json",
    "spark-read-from-json",
    "spark-read-valueformat",
    "spark-agg-from-json",
    "spark-agg-valueformat",
]
#: ``read``: every typed column used (an aggregate of a hash of them all), what a job
#: that uses the table pays. ``agg``: one aggregate over one field, where Spark's optimizer
#: prunes ``from_json`` to that field; a Python data source is told no required
#: columns, so ``valueFormat`` still decodes and hands over all of them.
SPARK_CASES = {
    "spark-read-from-json",
    "spark-read-valueformat",
    "spark-agg-from-json",
    "spark-agg-valueformat",
}
READS = {"native-raw-fetch", "ja-read", "ja-read-json", "natspy-fetch-json", *SPARK_CASES}
#: The JSON payloads' size, for the raw reader's pull batch (as benches/run.py sizes it).
PAYLOAD_BYTES = 200


def values(n: int) -> pa.Table:
    """``n`` rows of the value schema; as JSON each is about 200 bytes."""
    return pa.table(
        {
            "event_id": pa.array(range(n), pa.int64()),
            "user": [f"user-{i % 9973:05d}@example.org" for i in range(n)],
            "kind": [("purchase", "refund", "view", "signup")[i % 4] for i in range(n)],
            "amount": [round(i * 0.37 % 1000, 2) for i in range(n)],
            "count": pa.array([i % 17 for i in range(n)], pa.int32()),
            "ok": [i % 3 != 0 for i in range(n)],
            "region": [("eu-west-1", "us-east-2", "ap-south-1")[i % 3] for i in range(n)],
            "note": [f"order {i} shipped to warehouse {i % 31}" for i in range(n)],
        },
        schema=SCHEMA,
    )


# -- the cases, each in its own process ---------------------------------------------------


def _ja_read(p: dict[str, Any], codec: Any) -> tuple[int, int]:
    import jetstream_arrow as ja

    msgs = nbytes = 0
    with ja.connect(p["url"]) as client:
        t0 = time.perf_counter()
        for batch in client.read(p["stream"], codec=codec):
            msgs += batch.num_rows
            nbytes += batch.nbytes
        p["seconds"] = time.perf_counter() - t0
    return msgs, nbytes


async def _natspy(p: dict[str, Any]) -> tuple[int, int]:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    nc = await nats.connect(p["url"])
    js = nc.jetstream()
    sub = await js.pull_subscribe(
        ">",
        stream=p["stream"],
        config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL),
    )
    msgs = fields = 0
    t0 = time.perf_counter()
    while msgs < p["n"]:
        try:
            got = await sub.fetch(min(1000, p["n"] - msgs), timeout=5)
        except nats.errors.TimeoutError:
            continue
        for m in got:
            fields += len(json.loads(m.data))
        msgs += len(got)
    p["seconds"] = time.perf_counter() - t0
    await nc.close()
    return msgs, fields


def _ja_publish(p: dict[str, Any], encode: bool) -> tuple[int, int]:
    import jetstream_arrow as ja

    table = values(p["n"])
    if not encode:
        # The same bytes the codec writes, made before the clock starts.
        payloads = [json.dumps(r, separators=(",", ":")).encode() for r in table.to_pylist()]
        table = pa.table({"data": payloads})
    with ja.connect(p["url"]) as client:
        t0 = time.perf_counter()
        result = client.publish(
            table, subject=p["subject"], window=8192, codec="json" if encode else None
        )
        p["seconds"] = time.perf_counter() - t0
    return result.stored, 0


def _spark(p: dict[str, Any], valueformat: bool, whole: bool) -> tuple[int, int]:
    from pyspark.sql import functions as F

    from cases import _spark as spark_session  # the harness's session: workers, registration

    spark = spark_session()
    ddl = "event_id BIGINT, user STRING, kind STRING, amount DOUBLE, count INT, ok BOOLEAN, region STRING, note STRING"

    def query() -> int:
        reader = spark.read.format("jetstream").option("servers", p["url"])
        reader = reader.option("stream", p["stream"])
        if valueformat:
            df = reader.option("valueFormat", "json").schema(f"seq LONG, {ddl}").load()
        else:
            df = (
                reader.load()
                .select("seq", F.from_json(F.col("data").cast("string"), ddl).alias("v"))
                .select("seq", "v.*")
            )
        # Every column feeds the hash, so none can be pruned.
        used = F.hash(*[F.col(c) for c in df.columns]) if whole else F.col("amount")
        return int(df.agg(F.count("*").alias("n"), F.sum(used).alias("a")).first()["n"])

    query()  # warm up: planning, worker start
    t0 = time.perf_counter()
    n = query()
    p["seconds"] = time.perf_counter() - t0
    spark.stop()
    return n, 0


def _raw_fetch(p: dict[str, Any]) -> tuple[int, int]:
    """The read limit: the native baseline's raw-socket pull client (see run.py)."""
    from run import case_command, native_binary

    command = case_command(
        "native-raw-fetch",
        native_binary(build=False),
        p["url"],
        p["stream"],
        p["subject"],
        p["n"],
        PAYLOAD_BYTES,
    )
    out = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    p["seconds"] = result["seconds"]
    return int(result["msgs"]), int(result["bytes"])


def run_case(case: str, p: dict[str, Any]) -> dict[str, Any]:
    from jetstream_arrow import ValueCodec

    if case == "native-raw-fetch":
        msgs, _ = _raw_fetch(p)
    elif case == "ja-read":
        msgs, _ = _ja_read(p, None)
    elif case == "ja-read-json":
        msgs, _ = _ja_read(p, ValueCodec("json", schema=SCHEMA))
    elif case == "natspy-fetch-json":
        msgs, _ = asyncio.run(_natspy(p))
    elif case == "ja-publish":
        msgs, _ = _ja_publish(p, encode=False)
    elif case == "ja-publish-json":
        msgs, _ = _ja_publish(p, encode=True)
    else:
        msgs, _ = _spark(
            p, valueformat=case.endswith("valueformat"), whole=case.startswith("spark-read")
        )
    # The raw reader is a child process: its own peak, not this wrapper's.
    who = resource.RUSAGE_CHILDREN if case == "native-raw-fetch" else resource.RUSAGE_SELF
    rss = resource.getrusage(who).ru_maxrss / 1024
    return {"msgs": msgs, "seconds": p["seconds"], "peak_rss_mb": rss}


# -- the run ------------------------------------------------------------------------------


def fill(url: str, stream: str, n: int) -> None:
    import jetstream_arrow as ja

    with ja.connect(url) as client:
        client.create_stream(stream, subjects=[f"{stream}.>"])
        for start in range(0, n, 50_000):
            part = values(min(50_000, n - start))
            client.publish(part, subject=f"{stream}.e", codec="json", window=8192)
        size = client.stream_info(stream).state.bytes / n
    print(f"filled {stream}: {n} messages, {size:.0f} B each with subject and headers")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(run_case(args.case, json.loads(args.params))))
        return 0

    from jetstream_arrow.embedded_server import EmbeddedServer

    cases = [c for c in CASES if not (args.no_spark and c in SPARK_CASES)]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in cases}
    with EmbeddedServer(name="ja-bench-codecs") as server:
        fill(server.url, "READ", args.count)
        import jetstream_arrow as ja

        for round_no in range(1, args.repeat + 1):
            for case in cases:
                stream = "READ" if case in READS else f"W{round_no}{case.replace('-', '')}"
                if case not in READS:
                    with ja.connect(server.url) as client:
                        client.create_stream(stream, subjects=[f"{stream}.>"])
                params = {"url": server.url, "stream": stream, "subject": f"{stream}.e"}
                params["n"] = args.count
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
                rate = result["msgs"] / result["seconds"]
                print(f"  [round {round_no}] {case}: {rate:,.0f} msg/s")
                if case not in READS:
                    with ja.connect(server.url) as client:
                        client.delete_stream(stream)

    rate = {c: statistics.median(r["msgs"] / r["seconds"] for r in runs[c]) for c in cases}
    versus = {
        "ja-read": ("native-raw-fetch",),
        "ja-read-json": ("native-raw-fetch", "ja-read", "natspy-fetch-json"),
        "natspy-fetch-json": ("ja-read",),
        "ja-publish-json": ("ja-publish",),
        "spark-read-valueformat": ("spark-read-from-json",),
        "spark-agg-valueformat": ("spark-agg-from-json",),
    }
    lines = [
        f"codecs bench, {dt.datetime.now().isoformat(timespec='minutes')}: {args.count} "
        f"JSON objects of 8 fields, median of {args.repeat}",
        "",
        "| case | msg/s | peak RSS MB | ratios |",
        "|---|---:|---:|---|",
    ]
    for case in cases:
        ratios = ", ".join(
            f"{rate[case] / rate[other]:.2f}x {other}"
            for other in versus.get(case, ())
            if other in rate
        )
        rss = max(r["peak_rss_mb"] for r in runs[case])
        lines.append(f"| `{case}` | {rate[case]:,.0f} | {rss:,.0f} | {ratios} |")
    table = "\n".join(lines)
    print(table)
    out_dir = ROOT / "bench-results"
    out_dir.mkdir(exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    (out_dir / f"codecs-{stamp}.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
