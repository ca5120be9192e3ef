"""Spark writes exactly once at any age (option ``exactlyOnce``, docs/spark.md
"Exactly once at any age"): each write task keeps its position in the target stream,
so a re-run or restart long after the stream's duplicate window skips what is stored.

Every target stream here has a duplicate window of 1 s and every re-run starts at
least 2 s after the failure, so the window cannot be what keeps the counts exact.
What the target holds is read with nats-py (its data subjects only, so the writers'
position messages are not counted), as a multiset of payloads.

- a batch write with a ``writeId`` whose task fails mid-way on every attempt (the
  write aborts), run again after the window: every row once; the same for a batch
  copy of a stream (the read's ``stream`` and ``seq`` kept);
- the same with ``exactlyOnce=false``: the re-run stores the failed task's rows
  again (what the option prevents, shown to happen);
- a streaming copy from a jetstream source whose driver is SIGKILLed three times in
  the middle of a micro-batch, once part of it is stored, and restarted from its
  checkpoint after the window: every source message once (the driver-kill harness of
  ``test_spark_faults.py``);
- ``exactlyOnce=true`` into a stream that cannot hold positions is refused before
  any task runs, naming the option and the command; the default there warns once
  and writes as before;
- Spark's batch and streaming reads of a stream with positions first, between rows
  and last (no deleted message) show the rows only;
- a streaming write of rows numbered by position over several micro-batches and two
  runs keeps one position per partition, its rows numbered on across micro-batches.

Run as a script (``python test_spark_exactly_once.py driver ...``) this module is the
driver process of the kill test.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import jetstream_arrow as ja
from conftest_spark import (
    SPARK_ERRORS,
    TESTS,
    error_text,
    make_stream,
    read_df,
    read_stream,
    run_available_now,
    spark,
)
from jetstream_arrow.exactly_once import ExactlyOnceUnavailableWarning
from jetstream_arrow.positions import PositionedWriter
from jetstream_arrow.spark.datasource import JetStreamDataSource
from jetstream_arrow.spark.stream_writer import ROWS_PER_MICRO_BATCH
from natspy import with_jetstream

__all__ = ["spark"]  # a fixture, imported for pytest

#: The duplicate window of every target stream, and the least wait before a re-run.
WINDOW = 1.0
AFTER_WINDOW = 2.0 * WINDOW
#: Lease of the writers' positions: a task killed mid-way holds its identity that
#: long, and its retry or restart waits out what is left of it.
LEASE = "1"
PAYLOAD = 256


def data_payloads(url: str, stream: str) -> Counter[bytes]:
    """The payloads of ``stream``'s messages on its data subjects (``<stream>.>``), by
    nats-py: an ephemeral pull consumer with that filter, so no position counts."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    async def work(js: Any) -> Counter[bytes]:
        sub = await js.pull_subscribe(
            f"{stream}.>",
            stream=stream,
            config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL),
        )
        pending = (await sub.consumer_info()).num_pending
        out: Counter[bytes] = Counter()
        while sum(out.values()) < pending:
            for msg in await sub.fetch(min(1_000, pending - sum(out.values())), timeout=10):
                out[msg.data] += 1
        await sub.unsubscribe()
        return out

    return with_jetstream(url, work)


def settled_count(url: str, stream: str, timeout: float = 30.0) -> tuple[int, float]:
    """(data messages in ``stream``, when that count was last seen to change): once
    it has not changed for a second."""
    deadline = time.monotonic() + timeout
    count, since = sum(data_payloads(url, stream).values()), time.monotonic()
    while time.monotonic() - since < 1.0:
        if time.monotonic() > deadline:
            raise AssertionError(f"stream {stream} kept growing for {timeout} s")
        time.sleep(0.25)
        now = sum(data_payloads(url, stream).values())
        if now != count:
            count, since = now, time.monotonic()
    return count, since


def make_exactly_once_stream(url: str, name: str) -> None:
    with ja.connect(url) as client:
        client.create_stream(
            name, subjects=[f"{name}.>"], exactly_once=True, duplicate_window=WINDOW
        )


def _write(df: Any, url: str, name: str, **options: Any) -> None:
    writer = (
        df.write.format("jetstream").mode("append").option("servers", url).option("stream", name)
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def _rows(spark: Any, name: str, count: int, partitions: int = 2) -> Any:
    from pyspark.sql import functions as F

    return spark.range(0, count, 1, partitions).select(
        F.concat(F.lit(f"{name}."), (F.col("id") % 3).cast("string")).alias("subject"),
        # Payloads of 256 bytes: Spark hands a write task its input through a 64 KiB
        # buffer, which a few hundred small rows would not fill before the failure.
        F.lpad(F.col("id").cast("string"), PAYLOAD, "x").cast("binary").alias("data"),
    )


def payload(i: int) -> bytes:
    return str(i).rjust(PAYLOAD, "x").encode()


def _fail_while_flagged(url: str, name: str, flag: str, threshold: int) -> Any:
    """A mapInArrow step: while file ``flag`` exists, partition 0 fails on every
    attempt after its fifth batch, once ``threshold`` messages are in the stream (the
    write task downstream has published part of its rows), so the write aborts with
    that task half done. Without the flag, rows pass through."""

    def step(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        failing = ctx.partitionId() == 0 and os.path.exists(flag)
        for i, batch in enumerate(batches):
            yield batch
            if failing and i == 4:
                deadline = time.monotonic() + 60
                with ja.connect(url) as client:
                    while client.stream_info(name).state.messages < threshold:
                        if time.monotonic() > deadline:
                            raise AssertionError("the write task published nothing")
                        time.sleep(0.05)
                raise RuntimeError("injected failure after a partial publish")

    return step


@pytest.fixture
def small_batches(spark: Any) -> Iterator[Any]:
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, "200")
    try:
        yield spark
    finally:
        spark.conf.set(key, old)


def _aborted_then_rerun(
    spark: Any, url: str, name: str, tmp_path: Path, n: int, df: Any = None, **options: Any
) -> tuple[Counter[bytes], int, float]:
    """A write of ``n`` rows (``df``, else :func:`_rows`) in two partitions, whose
    partition 0 fails mid-way on all its attempts, then the same write (same
    ``writeId``) run again more than the window later: (the target's payloads, the
    data messages after the failed run, seconds waited)."""
    flag = tmp_path / "fail"
    flag.write_text("fail")
    df = _rows(spark, name, n) if df is None else df
    # Partition 1 alone stores at most n / 2: more means partition 0 published too.
    flaky = df.mapInArrow(_fail_while_flagged(url, name, str(flag), n // 2 + 100), df.schema)
    if options.get("exactlyOnce") != "false":  # refused where no position is kept
        options = {**options, "writerLease": LEASE}
    with pytest.raises(SPARK_ERRORS):
        _write(flaky, url, name, writeId="nightly-1", **options)
    # Spark reports the failure while the last attempt's writer may still be sending
    # what it was handed: the run has ended when the count stops moving.
    after_failure, failed_at = settled_count(url, name)
    flag.unlink()
    time.sleep(max(0.0, AFTER_WINDOW - (time.monotonic() - failed_at)))
    waited = time.monotonic() - failed_at
    _write(flaky, url, name, writeId="nightly-1", **options)
    return data_payloads(url, name), after_failure, waited


@pytest.mark.spark
def test_a_write_rerun_after_the_window_stores_each_row_once(
    small_batches: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, name, n = shared_nats_server.url, unique_name("EOW"), 4_000
    make_exactly_once_stream(url, name)
    started = time.monotonic()
    payloads, after_failure, waited = _aborted_then_rerun(small_batches, url, name, tmp_path, n)
    print(
        f"exactly-once write of {n} rows: {after_failure} stored by the failed run, re-run "
        f"{waited:.1f} s after it (window {WINDOW} s): {sum(payloads.values())} messages, "
        f"{len(payloads)} distinct ({time.monotonic() - started:.1f} s)"
    )
    assert n // 2 < after_failure < n
    assert payloads == Counter(payload(i) for i in range(n))


def _positions(url: str, stream: str) -> int:
    """How many position messages ``stream`` holds, by nats-py."""

    async def work(js: Any) -> int:
        info = await js.stream_info(stream, subjects_filter="$JA.POS.>")
        return sum((info.state.subjects or {}).values())

    return with_jetstream(url, work)


@pytest.mark.spark
def test_a_write_without_a_write_id_leaves_no_position_behind(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    """A write under a random writeId can never be run again: once it commits, its
    tasks' positions are removed, so frequent writes do not pile them up. With a
    writeId they stay (one per task), for a re-run at any age."""
    url, name = shared_nats_server.url, unique_name("EOFORGET")
    make_exactly_once_stream(url, name)
    _write(_rows(spark, name, 300, partitions=3), url, name)
    assert sum(data_payloads(url, name).values()) == 300
    assert _positions(url, name) == 0
    _write(_rows(spark, name, 300, partitions=3), url, name, writeId="kept")
    assert _positions(url, name) == 3


@pytest.mark.spark
def test_a_copy_rerun_after_the_window_stores_each_message_once(
    small_batches: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    # A batch copy (the read's stream and seq kept): each task the writer of its part
    # of the source, its position the next source sequence.
    url, n = shared_nats_server.url, 2_000
    source, name = unique_name("EOC"), unique_name("EOD")
    make_stream(url, source)
    with ja.connect(url) as client:
        client.publish(
            pa.table(
                {
                    "subject": [f"{source}.a"] * n,
                    "data": pa.array([payload(i) for i in range(n)], pa.binary()),
                }
            )
        )
    make_exactly_once_stream(url, name)
    copy = read_df(small_batches, url, source, minPartitions=2).withColumn(
        "subject", F.regexp_replace("subject", f"^{source}", name)
    )
    payloads, after_failure, waited = _aborted_then_rerun(
        small_batches, url, name, tmp_path, n, copy
    )
    print(
        f"exactly-once copy of {n} messages: {after_failure} stored by the failed run, "
        f"re-run {waited:.1f} s after it: {sum(payloads.values())} messages"
    )
    assert n // 2 < after_failure < n
    assert payloads == Counter(payload(i) for i in range(n))
    with ja.connect(url) as client:
        headers = client.read(name, include_headers=True).read_all().column("headers")
    ids = {dict(h)["Nats-Msg-Id"][0] for h in headers.to_pylist()}
    assert {i.rsplit(":", 2)[0] for i in ids} == {f"nightly-1-{source}"}  # copies' ids


@pytest.mark.spark
def test_without_exactly_once_the_same_rerun_stores_rows_twice(
    small_batches: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    # The control of the test above: same stream, same failure, same wait, the option
    # off. The duplicate window has passed, so the re-run stores every row again.
    url, name, n = shared_nats_server.url, unique_name("EOX"), 4_000
    make_exactly_once_stream(url, name)
    payloads, after_failure, _ = _aborted_then_rerun(
        small_batches, url, name, tmp_path, n, exactlyOnce="false"
    )
    assert set(payloads) == {payload(i) for i in range(n)}
    assert sum(payloads.values()) == after_failure + n


@pytest.mark.spark
def test_exactly_once_into_a_stream_without_positions_is_refused_and_the_default_warns(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("EON")
    make_stream(url, name, duplicate_window=WINDOW)
    df = _rows(spark, name, 100)
    with pytest.raises(SPARK_ERRORS) as excinfo:
        _write(df, url, name, exactlyOnce="true")
    text = error_text(excinfo)
    assert "option 'exactlyOnce'" in text
    assert f"jetstream-arrow streams enable-exactly-once {name}" in text
    assert sum(data_payloads(url, name).values()) == 0
    # The default: planned (on the driver, as Spark does) with one warning naming how
    # to enable it, and the write stores its rows as before.
    source = JetStreamDataSource({"servers": url, "stream": name})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = source.writer(df.schema, False)
    said = [w for w in caught if issubclass(w.category, ExactlyOnceUnavailableWarning)]
    assert len(said) == 1, [str(w.message) for w in caught]
    assert f"enable-exactly-once {name}" in str(said[0].message)
    assert writer.exactly_once is False
    _write(df, url, name)
    assert data_payloads(url, name) == Counter(payload(i) for i in range(100))


@pytest.mark.spark
def test_spark_reads_of_an_exactly_once_stream_show_no_position(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    # Positions first, between the rows and last, none rolled up (two writers, one
    # claim each): the stream has no deleted message, and every range of the batch
    # read's three partitions and of the streaming read holds a position's sequence.
    url, name = shared_nats_server.url, unique_name("EOR")
    make_exactly_once_stream(url, name)
    rows = pa.table({"subject": [f"{name}.a"] * 3, "data": [b"r0", b"r1", b"r2"]})
    with ja.connect(url) as client:
        PositionedWriter(client, name, "first").claim()
        client.publish(rows)
        PositionedWriter(client, name, "second").claim()
        client.publish(rows)
        PositionedWriter(client, name, "third").claim()
        state = client.stream_info(name).state
    assert (state.messages, state.num_deleted, state.last_seq) == (9, 0, 9)
    want = sorted([b"r0", b"r1", b"r2"] * 2)
    batch = read_df(spark, url, name, minPartitions=3).select("subject", "data").collect()
    assert sorted(r["data"] for r in batch) == want
    assert {r["subject"] for r in batch} == {f"{name}.a"}
    out = tmp_path / "out"
    run_available_now(
        read_stream(spark, url, name, startingOffsets="earliest", maxMessagesPerTrigger=2)
        .select("subject", "data")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    streamed = spark.read.parquet(str(out)).collect()
    assert sorted(r["data"] for r in streamed) == want
    assert {r["subject"] for r in streamed} == {f"{name}.a"}


@pytest.mark.spark
def test_a_streaming_write_keeps_one_position_per_partition(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    # Rows numbered by position (the copy's columns selected away), several
    # micro-batches of two partitions, in two runs of the query on one checkpoint:
    # every row once, numbered on across micro-batches, and one position per partition.
    from conftest_spark import publish

    url, source, sink = shared_nats_server.url, unique_name("EOQ"), unique_name("EOP")
    make_stream(url, source)
    make_exactly_once_stream(url, sink)
    for run, count in enumerate((300, 200)):
        publish(url, source, count, start=300 * run)
        rows = read_stream(
            spark, url, source, startingOffsets="earliest", maxMessagesPerTrigger=100
        ).select(F.concat(F.lit(f"{sink}."), F.col("seq").cast("string")).alias("subject"), "data")
        run_available_now(
            rows.repartition(2)
            .writeStream.format("jetstream")
            .option("servers", url)
            .option("stream", sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
        )
    assert data_payloads(url, sink) == Counter(f"m{i}".encode() for i in range(500))
    with ja.connect(url) as client:
        stored = client.read(sink, include_headers=True).read_all()
        state = client.stream_info(sink).state
    ids = [dict(h)["Nats-Msg-Id"][0] for h in stored.column("headers").to_pylist()]
    numbers = [int(i.rsplit("-", 1)[1]) for i in ids]
    # Batch b's rows are numbered from b * ROWS_PER_MICRO_BATCH: five micro-batches
    # or more.
    assert len({n // ROWS_PER_MICRO_BATCH for n in numbers}) >= 5
    assert {i.rsplit("-", 2)[1] for i in ids} == {"0", "1"}
    assert state.messages == 500 + 2


# -- a streaming copy whose driver is killed ------------------------------------------


def copy_driver(url: str, source: str, sink: str, checkpoint: str) -> None:
    """The driver process of the kill test: a streaming query copying ``source`` into
    ``sink`` (subjects renamed, ``stream`` and ``seq`` kept: a copy) exactly once, from
    its checkpoint, until it is killed."""
    from pyspark.sql import functions as F

    from drivers.driver_session import run_until_killed, spark_session

    spark = spark_session("exactly-once-copy")
    messages = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", 200)
        .option("minPartitions", 2)
        .load()
    )
    moved = messages.withColumn("subject", F.regexp_replace("subject", f"^{source}", sink))
    writer = (
        moved.writeStream.format("jetstream")
        .option("servers", url)
        .option("stream", sink)
        .option("exactlyOnce", "true")
        .option("writerLease", LEASE)
    )
    run_until_killed(writer, checkpoint)


def kill_after_a_publish(
    driver: Any, checkpoint: Path, url: str, sink: str, describe: Any, timeout: float = 20.0
) -> int | None:
    """SIGKILL the process group of ``driver`` at a moment its streaming query has a
    micro-batch planned, not committed, and part or all of it stored in ``sink`` (so
    the re-run must skip what is stored), and return that batch's id; None when no
    such moment came within ``timeout`` seconds (the driver is left running).

    The group is frozen (SIGSTOP) when the sink holds more than the committed
    micro-batches copied, and killed if the checkpoint still shows the batch
    uncommitted and the sink still ahead of it; else it runs on."""
    from fault_helpers import planned_batch

    from .test_spark_faults import committed_end

    def ahead(client: ja.Client) -> bool:
        # The sink's messages besides its positions (at most one per partition: two)
        # beyond the source messages the committed micro-batches copied.
        copied = int(client.stream_info(sink).state.messages) - 2
        return planned_batch(checkpoint) is not None and copied > committed_end(checkpoint) - 1

    deadline = time.monotonic() + timeout
    with ja.connect(url) as client:
        while time.monotonic() < deadline:
            if driver.poll() is not None:
                raise AssertionError(f"the driver ended\n{describe()}")
            if ahead(client):
                os.killpg(driver.pid, signal.SIGSTOP)
                time.sleep(0.1)
                batch = planned_batch(checkpoint)
                if batch is not None and ahead(client):
                    os.killpg(driver.pid, signal.SIGKILL)
                    driver.wait(30)
                    return batch
                os.killpg(driver.pid, signal.SIGCONT)
            time.sleep(0.02)
    return None


@pytest.mark.spark
@pytest.mark.fault
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_streaming_copy_killed_three_times_mid_batch_stores_each_message_once(
    shared_nats_server: Any, unique_name: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .test_spark_faults import Killer

    # The driver is this file run as a script, from tests/spark/: the helpers it imports
    # are at the top of tests/.
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(TESTS), path) if p))
    url, source, sink = shared_nats_server.url, unique_name("EOS"), unique_name("EOT")
    n, kills = 2_000, 3
    make_exactly_once_stream(url, sink)

    class ExactlyOnceKiller(Killer):
        """The fault tests' driver killer, running :func:`copy_driver` and starting it
        again only after the sink's duplicate window has passed since the kill."""

        def __init__(self) -> None:
            super().__init__("jetstream", url, source, sink, tmp_path, n, kills)
            self.args = [sys.executable, __file__, "driver", url, source, sink]
            self.args.append(str(self.checkpoint))

        def kill_mid_batch(self) -> None:
            assert self.process is not None
            batch = kill_after_a_publish(self.process, self.checkpoint, url, sink, self.tail)
            if batch is None:
                super().kill_mid_batch()  # the moment did not come: anywhere mid-batch
            else:
                self.interrupted.append(batch)
                self.kills.append(self.committed())
            time.sleep(AFTER_WINDOW)

    started = time.monotonic()
    killer = ExactlyOnceKiller()
    killer.start()
    killer.finish()
    payloads = data_payloads(url, sink)
    # Rows a re-run found stored and skipped: the reports of committed micro-batches
    # count them as duplicates (a kill after the publish, before the commit).
    log = killer.log.read_text(errors="replace")
    skipped = sum(int(m) for m in re.findall(r"committed: .*?(\d+) duplicates", log))
    print(
        f"exactly-once streaming copy of {n} messages, {kills} SIGKILLs mid-batch "
        f"(committed offsets at the kills {killer.kills}, in micro-batches "
        f"{killer.interrupted}), each restart {AFTER_WINDOW} s after (window {WINDOW} s): "
        f"{sum(payloads.values())} messages, {len(payloads)} distinct, {skipped} rows "
        f"found stored by re-runs ({time.monotonic() - started:.1f} s)"
    )
    assert len(killer.kills) == kills
    assert payloads == Counter(f"m{i}".encode() for i in range(n))
    # The kills fell after part of their micro-batch was stored, which the re-runs
    # found and skipped (long after the window): the positions were put to work.
    assert skipped > 0


if __name__ == "__main__" and sys.argv[1:2] == ["driver"]:
    copy_driver(*sys.argv[2:6])


# A batch copy's task is named by its partition: a re-run of the same read whose
# partition lost its first source message meanwhile is still the same writer.
@pytest.mark.spark
def test_a_spark_copy_rerun_after_its_first_source_message_is_gone_copies_once(
    spark, shared_nats_server, unique_name
):
    from pyspark.sql import functions as F

    from conftest_spark import read_df

    url = shared_nats_server.url
    with ja.connect(url) as client:
        source = unique_name("SRC")
        client.create_stream(source, [f"{source}.>"])
        client.publish(pa.table({"data": [f"m{i}".encode() for i in range(20)]}), f"{source}.x")
        target = unique_name("T")
        make_exactly_once_stream(url, target)

        def copy() -> None:
            df = read_df(
                spark, url, source, startingSequence="1", endingSequence="20", minPartitions="2"
            ).withColumn("subject", F.lit(f"{target}.x"))
            (
                df.write.format("jetstream")
                .mode("append")
                .option("servers", url)
                .option("stream", target)
                .option("writeId", "nightly")
                .option("writerLease", "1")
                .save()
            )

        copy()
        assert sum(data_payloads(url, target).values()) == 20
        # The first message of partition 1 (sequences 11..20) is deleted.
        client.delete_message(source, 11)
        time.sleep(AFTER_WINDOW)
        copy()  # the same write again: every message it reads is stored already
    payloads = data_payloads(url, target)
    assert payloads == Counter(f"m{i}".encode() for i in range(20)), payloads


@pytest.mark.spark
def test_spark_writer_lease_without_positions_is_refused_naming_it(
    spark, shared_nats_server, unique_name
):
    url, target = shared_nats_server.url, unique_name("T")
    make_exactly_once_stream(url, target)
    df = spark.createDataFrame([(f"{target}.x", b"a")], "subject string, data binary")
    with pytest.raises(SPARK_ERRORS, match="writerLease"):
        (
            df.write.format("jetstream")
            .mode("append")
            .option("servers", url)
            .option("stream", target)
            .option("exactlyOnce", "false")
            .option("writerLease", "5")
            .save()
        )
