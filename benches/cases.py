"""The Python bench cases, each run in its own process by ``benches/run.py``.

``python benches/cases.py CASE '{"url": ..., "stream": ..., "subject": ..., "n": ..., "size": ..., "window": ...}'``

``window`` is the one publish window of every publisher measured (the package's
default, chosen by ``run.py``), so the comparison is fair.

Everything a case needs (connection, input data, consumer) is set up before the clock
starts; the timed region is only the data movement. The last line on stdout is one
JSON object: ``msgs``, ``bytes``, ``seconds``, ``cpu_seconds`` (the client side's CPU
in the timed region: every process of the case's session, see ``session_cpu_seconds``),
``rss_base_mb`` (resident memory just before the timed region) and ``rss_peak_mb``
(this process's high-water mark).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

Params = dict[str, Any]
Result = dict[str, Any]


def _status_mb(field: str) -> float:
    """A ``VmRSS``/``VmHWM`` line of /proc/self/status, in MB (10^6 bytes)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def session_cpu_seconds() -> float:
    """User + system CPU seconds used so far by every process of this case's session.

    ``run.py`` starts each case as a session leader, so the session is the case's
    interpreter and, for Spark, its JVM and Spark's Python workers (none of them starts
    a session of its own); nats-server runs in the harness's session and is not counted.
    A process's reaped children count through its ``cutime``/``cstime``, so work done
    by short-lived processes is kept once they are waited for.
    """
    sid = os.getsid(0)
    ticks = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:  # gone since the scan
            continue
        # Fields after "(comm)": state, ppid, pgrp, session, ..., utime (14th field of
        # the line), stime, cutime, cstime.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == sid:
            ticks += sum(int(v) for v in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


class Clock:
    """Marks the timed region: its wall time, the client side's CPU in it, and the
    memory at its start."""

    def __init__(self) -> None:
        self.rss_base_mb = 0.0
        self.started = 0.0
        self.seconds = 0.0
        self.cpu_started = 0.0
        self.cpu_seconds = 0.0

    def start(self) -> None:
        self.rss_base_mb = _status_mb("VmRSS")
        self.cpu_started = session_cpu_seconds()
        self.started = time.perf_counter()

    def stop(self) -> None:
        self.seconds = time.perf_counter() - self.started
        self.cpu_seconds = session_cpu_seconds() - self.cpu_started


# -- nats-py: the peer ---------------------------------------------------------------


async def _natspy_publish(p: Params, clock: Clock) -> Result:
    import nats

    nc = await nats.connect(p["url"], max_reconnect_attempts=0, connect_timeout=10)
    js = nc.jetstream(publish_async_max_pending=p["window"])
    payload = b"x" * p["size"]
    n = p["n"]
    counts = {"stored": 0, "failed": 0}

    def done(fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            counts["failed"] += 1
        else:
            counts["stored"] += 1

    subject = p["subject"]
    clock.start()
    remaining = n
    # publish_async bounds what is in flight by a semaphore; a 429 or a timeout fails
    # its future, and those messages are sent again so the count stored is exact.
    for _attempt in range(10):
        for _ in range(remaining):
            # No wait_stall: with a timeout, nats-py wraps every call in a task (3x slower).
            fut = await js.publish_async(subject, payload)
            fut.add_done_callback(done)
        await asyncio.wait_for(js.publish_async_completed(), timeout=120)
        remaining = n - counts["stored"]
        if remaining == 0:
            break
        counts["failed"] = 0
    clock.stop()
    await nc.close()
    return {"msgs": counts["stored"], "bytes": counts["stored"] * p["size"]}


async def _natspy_fetch(p: Params, clock: Clock) -> Result:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    nc = await nats.connect(p["url"], max_reconnect_attempts=0, connect_timeout=10)
    js = nc.jetstream()
    # AckNone: the cheapest way nats-py can read a stream (no ack per message).
    sub = await js.pull_subscribe(
        p["subject"],
        stream=p["stream"],
        config=ConsumerConfig(
            ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL, inactive_threshold=60
        ),
    )
    batch = p.get("batch", 1000)
    n = p["n"]
    msgs = 0
    nbytes = 0
    clock.start()
    deadline = time.monotonic() + p.get("timeout", 600)
    while msgs < n and time.monotonic() < deadline:
        try:
            got = await sub.fetch(min(batch, n - msgs), timeout=5)
        except nats.errors.TimeoutError:
            continue
        msgs += len(got)
        nbytes += sum(len(m.data) for m in got)
    clock.stop()
    await sub.unsubscribe()
    await nc.close()
    return {"msgs": msgs, "bytes": nbytes}


def natspy_publish(p: Params, clock: Clock) -> Result:
    return asyncio.run(_natspy_publish(p, clock))


def natspy_fetch(p: Params, clock: Clock) -> Result:
    return asyncio.run(_natspy_fetch(p, clock))


# -- this package ----------------------------------------------------------------------


def _input_reader(n: int, size: int) -> Any:
    """N rows of one binary column ``data``, as a stream of batches that all share one
    buffer of about 8 MB: the input costs no memory and no time inside the timed region."""
    import pyarrow as pa

    rows = max(1, min(65_536, (8 << 20) // size, n))
    one = pa.record_batch([pa.array([b"x" * size] * rows, pa.binary())], names=["data"])

    def batches() -> Iterator[Any]:
        left = n
        while left > 0:
            k = min(rows, left)
            yield one if k == rows else one.slice(0, k)
            left -= k

    return pa.RecordBatchReader.from_batches(one.schema, batches())


def _payload_bytes(data: Any) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc

    if data.type != pa.binary_view():
        return int(pc.sum(pc.binary_length(data)).as_py() or 0)
    # pyarrow has no binary_length for views: each 16-byte view starts with its length.
    import numpy as np

    total = 0
    for chunk in data.chunks if isinstance(data, pa.ChunkedArray) else [data]:
        views = np.frombuffer(chunk.buffers()[1], dtype=np.int32).reshape(-1, 4)
        total += int(views[chunk.offset : chunk.offset + len(chunk), 0].sum())
    return total


def _consume(messages: Iterable[Any], n: int) -> tuple[int, int]:
    """Messages and payload bytes of consumed batches, each acked, until ``n`` messages."""
    msgs = 0
    nbytes = 0
    for batch in messages:
        msgs += len(batch)
        nbytes += _payload_bytes(batch.data.column("data"))
        batch.ack()
        if msgs >= n:
            break
    return msgs, nbytes


def _ja_publish(p: Params, clock: Clock, msg_id_prefix: str | None, mode: str = "acked") -> Result:
    import jetstream_arrow as ja

    data = _input_reader(p["n"], p["size"])
    with ja.connect(p["url"]) as client:
        clock.start()
        res = client.publish(
            data,
            subject=p["subject"],
            window=p["window"],
            msg_id_prefix=msg_id_prefix,
            mode=mode,  # type: ignore[arg-type]
        )
        clock.stop()
    return {"msgs": res.stored, "bytes": res.stored * p["size"], "duplicates": res.duplicates}


def ja_publish(p: Params, clock: Clock) -> Result:
    return _ja_publish(p, clock, msg_id_prefix=None)


def ja_publish_ids(p: Params, clock: Clock) -> Result:
    """``ja_publish`` with a message id on every row (``msg_id_prefix``), the way the
    Spark writer and the loader publish so that a re-run stores nothing twice."""
    return _ja_publish(p, clock, msg_id_prefix="bench-")


def ja_publish_fast(p: Params, clock: Clock) -> Result:
    """``ja_publish`` with ``mode="fast"``: fast-ingest batches, acked every N messages
    (the harness creates the stream with ``allow_batched``)."""
    return _ja_publish(p, clock, msg_id_prefix=None, mode="fast")


def ja_publish_fast_ids(p: Params, clock: Clock) -> Result:
    """``ja_publish_fast`` with a message id on every row."""
    return _ja_publish(p, clock, msg_id_prefix="bench-", mode="fast")


def ja_publish_atomic_ids(p: Params, clock: Clock) -> Result:
    """``ja_publish_ids`` with ``mode="atomic"``: batches of 1,000 rows, each stored
    whole or not at all (the harness creates the stream with ``allow_atomic``)."""
    return _ja_publish(p, clock, msg_id_prefix="bench-", mode="atomic")


def ja_publish_atomic(p: Params, clock: Clock) -> Result:
    """``ja_publish_atomic_ids`` without msg ids: the atomic batches jetstream-extra's
    ``BatchPublish`` can send (it refuses a ``Nats-Msg-Id`` in a batch)."""
    return _ja_publish(p, clock, msg_id_prefix=None, mode="atomic")


def ja_publish_exactly_once(p: Params, clock: Clock) -> Result:
    """``ja_publish_ids`` exactly once at any age: one writer's numbered rows
    (``NumberedRows``), its position recorded in the stream after every
    ``DEFAULT_POSITION_ROWS`` rows once they are acknowledged (the window drains
    there), into a stream that holds positions (the harness makes it so)."""
    import jetstream_arrow as ja
    from jetstream_arrow.exactly_once import NumberedRows

    data = _input_reader(p["n"], p["size"])
    with ja.connect(p["url"]) as client:
        clock.start()
        writer = NumberedRows(
            client, p["stream"], "bench", "bench-", subject=p["subject"], window=p["window"]
        )
        stored = duplicates = 0
        for sent in writer.publish(data):
            stored += sent.result.stored
            duplicates += sent.result.duplicates
        clock.stop()
    return {"msgs": stored, "bytes": stored * p["size"], "duplicates": duplicates}


def ja_read(p: Params, clock: Clock, method: str = "consumer", views: bool = False) -> Result:
    import jetstream_arrow as ja

    n = p["n"]
    msgs = 0
    nbytes = 0
    with ja.connect(p["url"]) as client:
        clock.start()
        reader = client.read(
            p["stream"],
            start_seq=1,
            method=method,  # type: ignore[arg-type]
            payload_views=views,
        )
        for batch in reader:
            msgs += batch.num_rows
            nbytes += _payload_bytes(batch.column("data"))
            if msgs >= n:
                break
        clock.stop()
        reader.close()
    return {"msgs": msgs, "bytes": nbytes}


def ja_read_views(p: Params, clock: Clock) -> Result:
    """``ja_read`` with ``payload_views``: payloads as views of the received buffers."""
    return ja_read(p, clock, views=True)


def ja_read_direct(p: Params, clock: Clock) -> Result:
    """``ja_read`` by batched direct gets: no consumer."""
    return ja_read(p, clock, method="direct")


def ja_consume_batch_ack(p: Params, clock: Clock) -> Result:
    import jetstream_arrow as ja

    n = p["n"]
    size = p["size"]
    name = f"bench_{os.getpid()}"
    buffered = 16_384
    # At most 32 MB requested at once: half of the server's per-client outbound limit
    # (64 MB by default), which a starved client must not let the server reach, or the
    # server cuts it off as a slow consumer (seen as missed heartbeats).
    max_bytes = min(32 << 20, buffered * (size + 256))
    with ja.connect(p["url"]) as client:
        # AckAll: one ack per batch acknowledges every message up to its last one.
        client.create_consumer(
            p["stream"],
            durable_name=name,
            ack_policy="all",
            deliver_policy="all",
            max_ack_pending=4 * buffered,
        )
        cons = client.pull_consumer(p["stream"], name, ack_policy="all")
        try:
            clock.start()
            msgs, nbytes = _consume(
                cons.messages(max_messages=buffered, max_bytes=max_bytes, batch_rows=4096), n
            )
            client.flush(timeout=30)
            clock.stop()
        finally:
            client.delete_consumer(p["stream"], name)
    return {"msgs": msgs, "bytes": nbytes}


def ja_consume_flow_control(p: Params, clock: Clock) -> Result:
    """A durable push consumer with ``ack_policy="flow_control"``: each batch is
    released with ``ack()``, and acks travel only in flow-control answers."""
    import jetstream_arrow as ja

    n = p["n"]
    name = f"bench_fc_{os.getpid()}"
    with ja.connect(p["url"]) as client:
        client.create_consumer(
            p["stream"],
            durable_name=name,
            deliver_subject=f"bench.deliver.{name}",
            ack_policy="flow_control",
            max_ack_pending=65_536,
        )
        consumer = client.push_consumer(p["stream"], name)
        try:
            with consumer.messages(batch_rows=4096) as messages:
                clock.start()
                msgs, nbytes = _consume(messages, n)
                clock.stop()
                answers = messages.flow_control_answers
        finally:
            client.delete_consumer(p["stream"], name)
    return {"msgs": msgs, "bytes": nbytes, "ack_messages_per_1000": answers * 1000 / max(msgs, 1)}


# -- Spark through the data source ---------------------------------------------------------


def _spark() -> Any:
    from pyspark.sql import SparkSession

    # Spark's Python workers must run this interpreter (the one with the package), and
    # import spark_ceiling from benches/.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    benches = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (benches, os.environ.get("PYTHONPATH", "")) if p
    )
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("jetstream-arrow-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        # Registers format "jetstream" explicitly in case auto-registration is not set up.
        from jetstream_arrow import spark as ja_spark

        source = getattr(ja_spark, "JetStreamDataSource", None)
        if source is not None:
            spark.dataSource.register(source)
    except ImportError:
        pass
    return spark


# A fresh Spark session's first query pays for JIT compilation and for starting and
# importing its Python workers: seconds that would dwarf the data movement at these
# sizes and that a long-running job pays once. Each Spark case therefore runs the same
# operation once on a few messages, untimed, before the measured one.
WARM_UP_MESSAGES = 20_000


def _spark_write(df: Any, url: str, stream: str, subject: str, **options: Any) -> None:
    writer = (
        df.write.format("jetstream")
        .option("servers", url)
        .option("stream", stream)
        .option("subject", subject)
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def spark_write_ceiling(p: Params, clock: Clock) -> Result:
    """``spark-write``'s DataFrame written into a data source that drops every batch:
    what any Python data source writer costs here (``benches/spark_ceiling.py``)."""
    from pyspark.sql import functions as F

    from spark_ceiling import CeilingDataSource

    spark = _spark()
    try:
        spark.dataSource.register(CeilingDataSource)
        hex_payload = "78" * p["size"]
        df = spark.range(p["n"], numPartitions=2).select(F.unhex(F.lit(hex_payload)).alias("data"))
        df.cache().count()
        ceiling = CeilingDataSource.name()
        df.limit(WARM_UP_MESSAGES).write.format(ceiling).mode("append").save()
        clock.start()
        df.write.format(ceiling).mode("append").save()
        clock.stop()
    finally:
        spark.stop()
    # Nothing is stored: run.py checks no stream for this case.
    return {"msgs": p["n"], "bytes": p["n"] * p["size"]}


def _spark_count(spark: Any, p: Params, **options: Any) -> Any:
    """The row with ``n`` (messages) and ``b`` (payload bytes) of the stream read."""
    from pyspark.sql import functions as F

    reader = spark.read.format("jetstream").option("servers", p["url"])
    for key, value in {"stream": p["stream"], **options}.items():
        reader = reader.option(key, value)
    df = reader.load()
    return df.agg(F.count("*").alias("n"), F.sum(F.length("data")).alias("b")).collect()[0]


def spark_write(p: Params, clock: Clock, **options: Any) -> Result:
    from pyspark.sql import functions as F

    import jetstream_arrow as ja

    batched = options.get("publishMode") == "fast"
    spark = _spark()
    try:
        hex_payload = "78" * p["size"]
        df = spark.range(p["n"], numPartitions=2).select(F.unhex(F.lit(hex_payload)).alias("data"))
        df.cache().count()
        warm = p["stream"] + "_WARM"  # the warm-up's own stream
        with ja.connect(p["url"]) as client:
            client.create_stream(
                warm,
                [warm + ".>"],
                allow_batched=batched or None,
                exactly_once="exactlyOnce" in options,
            )
            try:
                _spark_write(df.limit(WARM_UP_MESSAGES), p["url"], warm, warm + ".warm", **options)
            finally:
                client.delete_stream(warm)
        clock.start()
        _spark_write(df, p["url"], p["stream"], p["subject"], **options)
        clock.stop()
    finally:
        spark.stop()
    # The stream's message count is checked by run.py.
    return {"msgs": p["n"], "bytes": p["n"] * p["size"], "verified_by_parent": True}


def spark_write_fast(p: Params, clock: Clock) -> Result:
    """``spark-write`` with option ``publishMode`` ``fast`` (the harness creates the
    stream with ``allow_batched``)."""
    return spark_write(p, clock, publishMode="fast")


def spark_write_exactly_once(p: Params, clock: Clock) -> Result:
    """``spark-write`` exactly once at any age (option ``exactlyOnce``): each task
    keeps its position in the stream (the harness makes it one that holds them)."""
    return spark_write(p, clock, exactlyOnce="true")


def spark_read(p: Params, clock: Clock) -> Result:
    spark = _spark()
    try:
        _spark_count(spark, p, endingSequence=WARM_UP_MESSAGES)  # the warm-up
        clock.start()
        row = _spark_count(spark, p)
        clock.stop()
    finally:
        spark.stop()
    return {"msgs": int(row["n"]), "bytes": int(row["b"] or 0)}


def _spark_read_ceiling(p: Params, clock: Clock, shape: str) -> Result:
    from pyspark.sql import functions as F

    from spark_ceiling import CeilingDataSource

    spark = _spark()
    try:
        spark.dataSource.register(CeilingDataSource)

        def count(rows: int) -> Any:
            df = (
                spark.read.format(CeilingDataSource.name())
                .option("rows", rows)
                .option("size", p["size"])
                .option("shape", shape)
                .load()
            )
            return df.agg(F.count("*").alias("n"), F.sum(F.length("data")).alias("b")).collect()[0]

        count(WARM_UP_MESSAGES)
        clock.start()
        row = count(p["n"])
        clock.stop()
    finally:
        spark.stop()
    return {"msgs": int(row["n"]), "bytes": int(row["b"] or 0)}


def spark_read_ceiling(p: Params, clock: Clock) -> Result:
    """``spark-read``'s query over a source that yields pre-built batches of three
    columns: what any Python data source can hand Spark here."""
    return _spark_read_ceiling(p, clock, "narrow")


def spark_read_ceiling_message(p: Params, clock: Clock) -> Result:
    """The same with batches in the jetstream message schema (five columns, with the
    constant ``stream`` and the ``timestamp``): what a source yielding that schema can
    hand Spark here."""
    return _spark_read_ceiling(p, clock, "message")


CASES: dict[str, Callable[[Params, Clock], Result]] = {
    "natspy-publish": natspy_publish,
    "natspy-fetch": natspy_fetch,
    "ja-publish": ja_publish,
    "ja-publish-ids": ja_publish_ids,
    "ja-publish-fast": ja_publish_fast,
    "ja-publish-fast-ids": ja_publish_fast_ids,
    "ja-publish-atomic-ids": ja_publish_atomic_ids,
    "ja-publish-atomic": ja_publish_atomic,
    "ja-publish-exactly-once": ja_publish_exactly_once,
    "ja-read": ja_read,
    "ja-read-views": ja_read_views,
    "ja-read-direct": ja_read_direct,
    "ja-consume-batch-ack": ja_consume_batch_ack,
    "ja-consume-flow-control": ja_consume_flow_control,
    "spark-write": spark_write,
    "spark-write-fast": spark_write_fast,
    "spark-write-exactly-once": spark_write_exactly_once,
    "spark-write-ceiling": spark_write_ceiling,
    "spark-read": spark_read,
    "spark-read-ceiling": spark_read_ceiling,
    "spark-read-ceiling-message": spark_read_ceiling_message,
}


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in CASES:
        print(f"usage: cases.py {{{','.join(CASES)}}} JSON-PARAMS", file=sys.stderr)
        return 2
    params = json.loads(argv[2])
    clock = Clock()
    result = CASES[argv[1]](params, clock)
    result.update(
        seconds=clock.seconds,
        cpu_seconds=round(clock.cpu_seconds, 3),
        rss_base_mb=round(clock.rss_base_mb, 1),
        rss_peak_mb=round(_status_mb("VmHWM"), 1),
    )
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
