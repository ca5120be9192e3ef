"""Short range reads: the time of one ``client.read`` of N messages, by a consumer
(created and deleted per read) and by direct gets, on a nats-server this script
starts. It sets ``DIRECT_READ_MAX_MESSAGES``, the longest range that
``method="auto"`` reads by direct gets.

    python benches/small_reads.py                  # 128 B, 1 KiB, 16 KiB
    python benches/small_reads.py --sizes 128 --lengths 100,1000,3000

Reads of each length start at scattered sequences of one filled stream (R1, file
storage, ``allow_direct``); the methods alternate, and the figure is each one's
median time per read in this run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import pyarrow as pa

import jetstream_arrow as ja
from jetstream_arrow._core import DIRECT_READ_MAX_MESSAGES
from jetstream_arrow.embedded_server import EmbeddedServer

#: Payload bytes per stream: large payloads get fewer messages.
STREAM_BYTES = 64 << 20


def measure(client: ja.Client, size: int, lengths: list[int]) -> None:
    stream = f"SMALL_{size}"
    count = max(2 * max(lengths), min(200_000, STREAM_BYTES // size))
    client.create_stream(stream, [f"{stream}.>"], allow_direct=True)
    try:
        payload = pa.array([b"x" * size] * count, pa.binary())
        client.publish(pa.record_batch({"data": payload}), subject=f"{stream}.a")
        for length in lengths:
            times: dict[str, list[float]] = {"consumer": [], "direct": []}
            reads = max(5, min(40, 400_000 // length))
            for i in range(reads):
                start = 1 + (i * 7919 * length) % (count - length)
                order = ("consumer", "direct") if i % 2 else ("direct", "consumer")
                for method in order:
                    began = time.perf_counter()
                    reader = client.read(
                        stream, start_seq=start, end_seq=start + length - 1, method=method
                    )
                    got = sum(batch.num_rows for batch in reader)
                    times[method].append(time.perf_counter() - began)
                    if got != length:
                        raise SystemExit(f"{method} read {got} of {length} messages")
            consumer = statistics.median(times["consumer"])
            direct = statistics.median(times["direct"])
            chosen = "direct" if length <= DIRECT_READ_MAX_MESSAGES else "consumer"
            print(
                f"| {size:>6} B | {length:>7} | {consumer * 1e3:9.2f} | {direct * 1e3:9.2f} "
                f"| {direct / consumer:5.2f} | {chosen} |",
                flush=True,
            )
    finally:
        client.delete_stream(stream)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="128,1024,16384", help="payload sizes in bytes")
    parser.add_argument("--lengths", default="10,100,1000,3000,10000", help="messages per read")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    lengths = [int(n) for n in args.lengths.split(",")]
    print("| size | messages per read | consumer ms | direct ms | direct / consumer | auto |")
    print("|---:|---:|---:|---:|---:|---|")
    with EmbeddedServer() as server, ja.connect(server.url) as client:
        for size in sizes:
            measure(client, size, lengths)


if __name__ == "__main__":
    main()
