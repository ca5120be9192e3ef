"""The latest message of each subject against the full history of the same stream:
the time to get one row per subject (device twins, a KV bucket's entries) by
``client.read(last_per_subject=True)`` with direct gets and through a consumer, and by
reading every message of the stream (what a user without it does, keeping the last per
subject), on a nats-server this script starts.

    python benches/latest.py                                  # 1,000 subjects x 200 updates
    python benches/latest.py --subjects 5000 --updates 40 --size 256 --repeat 5

The stream is R1 with file storage and ``allow_direct``, filled with ``updates`` rounds of
one message per subject (``size`` bytes); every case must return exactly one row per
subject, holding the last round's payload. The cases alternate, and the figures are
each one's median over ``repeat`` runs of this run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

import jetstream_arrow as ja
from jetstream_arrow.embedded_server import EmbeddedServer


def full_history(client: ja.Client, stream: str) -> pa.Table:
    """Every message, then the last one per subject (a group-by on the client)."""
    table = client.read(stream).read_all()
    last = table.group_by("subject").aggregate([("seq", "max")])
    return table.filter(pc.is_in(table["seq"], last["seq_max"]))


def latest(method: str) -> Callable[[ja.Client, str], pa.Table]:
    def read(client: ja.Client, stream: str) -> pa.Table:
        return client.read(stream, last_per_subject=True, method=method).read_all()  # type: ignore[arg-type]

    return read


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--subjects", type=int, default=1_000)
    ap.add_argument("--updates", type=int, default=200)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cases = {
        "full history, last per subject on the client": full_history,
        "last_per_subject, direct gets (multi_last)": latest("direct"),
        "last_per_subject, consumer (DeliverLastPerSubject)": latest("consumer"),
    }
    with EmbeddedServer() as server, ja.connect(server.url) as client:
        stream = "LATEST"
        client.create_stream(stream, [f"{stream}.>"], allow_direct=True)
        n = args.subjects * args.updates
        subjects = pa.array([f"{stream}.dev{i % args.subjects}" for i in range(n)])
        payloads = pa.array(
            [f"{i // args.subjects:08d}".encode().ljust(args.size, b".") for i in range(n)]
        )
        client.publish(pa.table({"subject": subjects, "data": payloads}))
        last_round = f"{args.updates - 1:08d}".encode().ljust(args.size, b".")
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeat):
            for name, read in cases.items():
                began = time.perf_counter()
                rows = read(client, stream)
                times[name].append(time.perf_counter() - began)
                if rows.num_rows != args.subjects or set(rows["data"].to_pylist()) != {last_round}:
                    raise SystemExit(f"{name}: {rows.num_rows} rows, not the last of each subject")
        print(
            f"{args.subjects:,} subjects x {args.updates} updates = {n:,} messages of "
            f"{args.size} B; median of {args.repeat}\n"
        )
        print("| case | ms | vs full history |\n|---|---:|---:|")
        full = statistics.median(times["full history, last per subject on the client"])
        for name, runs in times.items():
            median = statistics.median(runs)
            print(f"| {name} | {median * 1e3:,.1f} | {full / median:.1f}x |")


if __name__ == "__main__":
    main()
