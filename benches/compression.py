# One module: one bench run, read top to bottom (payloads, cases, table).
"""Payload compression, measured: publishes with ``compression`` and reads of what they
stored (decompressed by the header) against the same JSON uncompressed, at 1 KiB and
16 KiB, with the bytes the stream stores (its ``state.bytes``: payload, subject and
headers as the server keeps them, what crossed the wire from the publisher).

    python benches/compression.py                       # 1 KiB and 16 KiB, once
    python benches/compression.py --count 5000 --sizes 1024 --algorithms zstd

Payloads are JSON objects of realistic, repetitive fields (ids, names, tags, nested
lines) cut to about the size asked: compressible as event data is, not runs of one
byte. Each case runs in its own process against one nats-server this script starts;
each publish writes a fresh stream, which its read then reads whole. Results are
printed and written to ``bench-results/compression-<stamp>.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ALGORITHMS = ("zstd", "gzip", "zlib", "s2")


def _doc(i: int, lines: int) -> bytes:
    return json.dumps(
        {
            "order_id": i,
            "customer": {"id": i % 9973, "name": f"customer {i % 9973}", "tier": "gold"},
            "status": ("new", "paid", "shipped")[i % 3],
            "lines": [
                {
                    "sku": f"SKU-{(i * 7 + n) % 10007:05d}",
                    "qty": (i + n) % 9 + 1,
                    "price": round(((i * 31 + n * 17) % 10000) / 100, 2),
                    "warehouse": ("eu-west-1", "us-east-2", "ap-south-1")[(i + n) % 3],
                    "note": f"line {n} of order {i}",
                }
                for n in range(lines)
            ],
        },
        separators=(",", ":"),
    ).encode()


def payloads(n: int, size: int) -> list[bytes]:
    """``n`` JSON objects of about ``size`` bytes (order lines added until the first is
    that long), whose fields vary with their index: 1,000 distinct ones, repeated (each
    message is compressed alone, so a repeat gains nothing from the one before)."""
    lines = 1
    while len(_doc(0, lines)) < size:
        lines += 1
    distinct = [_doc(i, lines) for i in range(min(n, 1000))]
    return [distinct[i % len(distinct)] for i in range(n)]


def _table(n: int, size: int) -> Any:
    import pyarrow as pa

    return pa.table({"data": pa.array(payloads(n, size), pa.binary())})


def case(p: dict[str, Any]) -> dict[str, Any]:
    """One publish of ``n`` messages and one read of them; runs in its own process."""
    import jetstream_arrow as ja

    out: dict[str, Any] = {}
    with ja.connect(p["url"]) as client:
        name = p["stream"]
        client.create_stream(name, [f"{name}.>"], storage="file")
        table = _table(p["n"], p["size"])
        raw_bytes = sum(len(b) for b in table.column("data").to_pylist())
        options = {"compression": p["compression"]} if p["compression"] else {}
        t0 = time.perf_counter()
        result = client.publish(table, subject=f"{name}.a", window=8192, ack_timeout=60, **options)
        out["publish_s"] = time.perf_counter() - t0
        assert result.stored == p["n"], result
        info = client.stream_info(name)
        out["stored_bytes"] = int(info.state.bytes)
        out["payload_bytes"] = raw_bytes
        msgs = nbytes = 0
        t0 = time.perf_counter()
        for batch in client.read(name, start_seq=1):
            msgs += batch.num_rows
            nbytes += batch.column("data").nbytes
        out["read_s"] = time.perf_counter() - t0
        # Every payload came back whole (decompressed): the data column holds them all.
        assert msgs == p["n"] and nbytes >= raw_bytes, (msgs, nbytes, raw_bytes)
        client.delete_stream(name)
    return out


def run_case(p: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--case", json.dumps(p)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"case {p} failed:\n{proc.stderr[-4000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,16384")
    parser.add_argument("--count", type=int, default=100_000, help="messages at 1 KiB")
    parser.add_argument(
        "--max-mb", type=int, default=512, help="payload megabytes per case, at most"
    )
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(case(json.loads(args.case))))
        return 0

    from jetstream_arrow.embedded_server import EmbeddedServer

    algorithms: list[str | None] = [None, *args.algorithms.split(",")]
    rows = []
    with EmbeddedServer(name="ja-bench-compression") as server:
        for size in (int(s) for s in args.sizes.split(",")):
            n = min(args.count, args.max_mb * (1 << 20) // size)
            for k, algorithm in enumerate(algorithms):
                p = {
                    "url": server.url,
                    "stream": f"Z{size}_{k}",
                    "n": n,
                    "size": size,
                    "compression": algorithm,
                }
                r = run_case(p)
                rows.append((size, algorithm or "none", n, r))
                print(
                    f"{size:>6} {algorithm or 'none':>5}: publish {n / r['publish_s']:>9,.0f} msg/s, "
                    f"read {n / r['read_s']:>9,.0f} msg/s, stored {r['stored_bytes'] / n:>8,.0f} "
                    f"B/msg (payload {r['payload_bytes'] / n:,.0f})",
                    flush=True,
                )
    lines = [
        "| size | compression | messages | publish msg/s | vs none | read msg/s | vs none "
        "| stored bytes / msg | vs none |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    base: dict[int, dict[str, Any]] = {}
    for size, algorithm, n, r in rows:
        if algorithm == "none":
            base[size] = r
        b = base[size]
        lines.append(
            f"| {size} | {algorithm} | {n:,} | {n / r['publish_s']:,.0f} "
            f"| {b['publish_s'] / r['publish_s']:.2f} | {n / r['read_s']:,.0f} "
            f"| {b['read_s'] / r['read_s']:.2f} | {r['stored_bytes'] / n:,.0f} "
            f"| {r['stored_bytes'] / b['stored_bytes']:.2f} |"
        )
    table = "\n".join(lines)
    print(table)
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    (out / f"compression-{stamp}.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
