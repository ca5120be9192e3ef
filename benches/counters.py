"""Counter increments (ADR-49) against plain acked publishes of the same rows: the
rate at which ``client.publish`` moves a table of ``(subject, increment)`` into a
stream with ``allow_msg_counter`` (each row a ``Nats-Incr`` with no payload, the
server reading the subject's last value and storing the sum, each ack carrying the
new value) and a table of ``(subject, data)`` of 8-byte payloads into a plain
stream, with and without msg ids, on a nats-server this script starts.

    python benches/counters.py                          # 200,000 rows on 1,000 subjects
    python benches/counters.py --rows 500000 --subjects 100 --repeat 3

Every case must store exactly ``rows`` messages; counters must end at the sums of
their increments. The figures are each case's median over ``repeat`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from decimal import Decimal

import pyarrow as pa

import jetstream_arrow as ja
from jetstream_arrow.embedded_server import EmbeddedServer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--subjects", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    n, k = args.rows, args.subjects
    with EmbeddedServer() as server, ja.connect(server.url) as client:
        times: dict[str, list[float]] = {}
        for run in range(args.repeat):
            for case in ("plain", "plain, msg ids", "counter", "counter, msg ids"):
                stream = f"B{run}_{case.replace(' ', '').replace(',', '_')}"
                counter = case.startswith("counter")
                client.create_stream(stream, [f"{stream}.>"], allow_msg_counter=counter)
                subjects = pa.array([f"{stream}.c{i % k}" for i in range(n)])
                if counter:
                    table = pa.table({"subject": subjects, "increment": pa.array([1] * n)})
                else:
                    table = pa.table({"subject": subjects, "data": pa.array([b"00000001"] * n)})
                ids = {"msg_id_prefix": f"{stream}-"} if "ids" in case else {}
                began = time.perf_counter()
                result = client.publish(table, **ids)
                times.setdefault(case, []).append(time.perf_counter() - began)
                if result.stored != n:
                    raise SystemExit(f"{case}: {result.stored} of {n} stored")
                if counter:
                    values = client.read_counters(stream)["value"].to_pylist()
                    if len(values) != k or set(values) != {Decimal(n // k)}:
                        raise SystemExit(f"{case}: counters are not {n // k} each")
                client.delete_stream(stream)
        print(f"{n:,} rows on {k:,} subjects; median of {args.repeat}\n")
        print("| case | msg/s | vs plain |\n|---|---:|---:|")
        plain = statistics.median(times["plain"])
        for case, runs in times.items():
            t = statistics.median(runs)
            print(f"| {case} | {n / t:,.0f} | {plain / t:.2f} |")


if __name__ == "__main__":
    main()
