"""Spark Structured Streaming over a WorkQueue stream through a durable consumer
(option ``consumer``): messages are acknowledged only after their micro-batch is
committed, the queue empties as the query progresses, and a driver SIGKILLed in the
middle of micro-batches and restarted from its checkpoint leaves each message exactly
once in the sink."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.streaming.datasource import ReadAllAvailable

import jetstream_arrow as ja
from conftest_spark import SPARK_ERRORS, make_stream, publish, spark
from fault_helpers import batch_ids, kill_driver_mid_batch
from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.spark import message_schema
from jetstream_arrow.spark.consumer_stream_reader import (
    ConsumerStreamReader,
    pinned_client,
    prepare_consumer,
)
from jetstream_arrow.spark.options import parse_read_options
from jetstream_arrow.spark.reading import DataLossError

pytestmark = pytest.mark.spark
__all__ = ["spark"]

DRIVER = Path(__file__).resolve().parents[1] / "drivers" / "work_queue_query.py"


def wait_for(what: str, condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.2)


def state(url: str, stream: str) -> Any:
    with ja.connect(url) as client:
        return client.stream_info(stream).state


def sink_data(url: str, stream: str) -> list[bytes]:
    with ja.connect(url) as client:
        return client.read(stream).read_all().column("data").to_pylist()


def work_queue(url: str, name: str) -> None:
    make_stream(url, name, retention="workqueue", allow_direct=True)


def test_a_query_drains_a_work_queue_through_its_consumer(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, queue, sink = shared_nats_server.url, unique_name("WQ"), unique_name("WQS")
    work_queue(url, queue)
    # Exactly once into the sink holds within its duplicate window (docs/spark.md):
    # longer than a killed driver takes to restart on a loaded machine.
    make_stream(url, sink, duplicate_window=600.0)
    publish(url, queue, 2_500)
    source = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", queue)
        .option("consumer", "drain")
        .option("maxMessagesPerTrigger", 1_000)
        .load()
    )
    moved = source.withColumn("subject", F.regexp_replace("subject", f"^{queue}", sink))
    query = (
        moved.writeStream.format("jetstream")
        .option("servers", url)
        .option("stream", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_for("the sink to hold 2,500 messages", lambda: state(url, sink).messages >= 2_500, 120)
        # The last micro-batch is acknowledged once Spark plans the next trigger.
        wait_for("the work queue to empty", lambda: state(url, queue).messages == 0, 30)
        publish(url, queue, 500, start=2_500)
        wait_for("the sink to hold 3,000", lambda: state(url, sink).messages >= 3_000, 60)
        wait_for("the work queue to empty again", lambda: state(url, queue).messages == 0, 30)
        batches = [p["numInputRows"] for p in query.recentProgress]
    finally:
        query.stop()
    data = sink_data(url, sink)
    assert sorted(data) == sorted(f"m{i}".encode() for i in range(3_000))
    # At most maxMessagesPerTrigger per micro-batch.
    assert max(batches) <= 1_000, batches
    with ja.connect(url) as client:
        info = client.consumer_info(queue, "drain")
        assert info.num_ack_pending == 0
        assert info.config.headers_only


def consumer_reader(url: str, queue: str, **options: Any) -> ConsumerStreamReader:
    """The driver's side of a query through option ``consumer``, as Spark calls it."""
    opts = parse_read_options({"servers": url, "stream": queue, **options}, queries="stream")
    return ConsumerStreamReader(opts, message_schema())


def read(source: ConsumerStreamReader, start: Any, end: Any) -> list[bytes]:
    """The payloads of the micro-batch from ``start`` to ``end``, read as executors do."""
    batches = [b for p in source.partitions(start, end) for b in source.read(p)]
    return pa.Table.from_batches(batches).column("data").to_pylist() if batches else []


def test_a_stopped_query_of_a_group_gives_up_its_pin(
    shared_nats_server: Any, unique_name: Any
) -> None:
    """query.stop() unpins: the standby takes over at its next look, not after the
    pin timeout (a minute here), with what the stopped one had claimed."""
    url, queue = shared_nats_server.url, unique_name("WQP")
    work_queue(url, queue)
    publish(url, queue, 6)
    group = {"consumer": "shared", "consumerGroup": "g", "maxMessagesPerTrigger": 3}
    a = consumer_reader(url, queue, **group, consumerPinTimeout=60)
    b = consumer_reader(url, queue, **group)
    a_start = a.initialOffset()
    assert read(a, a_start, a.latestOffset(a_start, a.getDefaultReadLimit())) == [
        b"m0",
        b"m1",
        b"m2",
    ]
    b_start = b.initialOffset()
    assert b.latestOffset(b_start, b.getDefaultReadLimit()) == b_start  # a holds the pin
    a.stop()
    with ja.connect(url) as client:
        assert pinned_client(client, queue, "shared") is None
    time.sleep(1.2)  # past the standby's next look
    end = b.latestOffset(b_start, b.getDefaultReadLimit())
    assert read(b, b_start, end) == [b"m0", b"m1", b"m2"]  # a committed nothing


def test_a_checkpoint_of_a_queue_deleted_and_created_again_acknowledges_nothing_unread(
    shared_nats_server: Any, unique_name: Any
) -> None:
    """The new queue's messages below the checkpoint's position are not committed
    ones: the query fails naming the loss, or with failOnDataLoss=false reads the new
    queue from its first message; the checkpoint's last micro-batch, run again, reads
    nothing of the new queue."""
    url, queue = shared_nats_server.url, unique_name("WQR")
    work_queue(url, queue)
    publish(url, queue, 30)

    def reader(**options: str) -> ConsumerStreamReader:
        return consumer_reader(url, queue, consumer="jobs", **options)

    first = reader()
    start = first.initialOffset()
    end = first.latestOffset(start, ReadAllAvailable())
    assert sorted(read(first, start, end)) == sorted(f"m{i}".encode() for i in range(30))
    first.commit(end)
    first.stop()
    assert state(url, queue).messages == 0
    with ja.connect(url) as client:
        client.delete_stream(queue)
    work_queue(url, queue)
    publish(url, queue, 12, start=100)

    with pytest.raises(DataLossError, match=f"stream '{queue}' was deleted and created again"):
        reader().partitions(start, end)
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        reader().latestOffset(end, ReadAllAvailable())
    assert state(url, queue).messages == 12  # nothing acknowledged

    # As Spark calls it: the checkpoint's last micro-batch run again and committed,
    # the next planned, then the one before it committed, then the next run.
    lenient = reader(failOnDataLoss="false")
    assert lenient.partitions(start, end) == []  # the old queue's micro-batch
    lenient.commit(end)
    new_end = lenient.latestOffset(end, ReadAllAvailable())
    assert new_end["first"] == 1
    lenient.commit(end)
    assert state(url, queue).messages == 12  # the old queue's end acknowledges nothing
    assert sorted(read(lenient, end, new_end)) == sorted(f"m{i}".encode() for i in range(100, 112))
    publish(url, queue, 3, start=200)
    later = lenient.latestOffset(new_end, ReadAllAvailable())
    lenient.commit(new_end)
    assert state(url, queue).messages == 3
    assert sorted(read(lenient, new_end, later)) == [b"m200", b"m201", b"m202"]


def test_a_queue_and_its_consumer_created_again_while_the_driver_runs_fail_the_query(
    shared_nats_server: Any, unique_name: Any
) -> None:
    """The consumer made again (by another query of the group, or by hand) after its
    stream was deleted and created again: the running driver's next trigger does not
    take the new messages below its position for committed."""
    url, queue = shared_nats_server.url, unique_name("WQM")
    work_queue(url, queue)
    publish(url, queue, 20)
    running = consumer_reader(url, queue, consumer="jobs")
    start = running.initialOffset()
    end = running.latestOffset(start, ReadAllAvailable())
    assert len(read(running, start, end)) == 20
    with ja.connect(url) as client:
        client.delete_stream(queue)
    work_queue(url, queue)
    publish(url, queue, 8, start=100)
    consumer_reader(url, queue, consumer="jobs").initialOffset()  # makes the consumer
    with pytest.raises(DataLossError, match="deleted and created again"):
        running.latestOffset(end, ReadAllAvailable())
    assert state(url, queue).messages == 8


def test_consumer_option_needs_direct_gets_and_a_matching_consumer(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, plain, queue = shared_nats_server.url, unique_name("WQP"), unique_name("WQC")
    make_stream(url, plain, retention="workqueue")
    work_queue(url, queue)
    with ja.connect(url) as client:
        client.create_consumer(
            queue, durable_name="pusher", deliver_subject="x.y", ack_policy="explicit"
        )

    def start(stream: str, consumer: str) -> None:
        df = (
            spark.readStream.format("jetstream")
            .option("servers", url)
            .option("stream", stream)
            .option("consumer", consumer)
            .load()
        )
        query = (
            df.writeStream.format("memory")
            .queryName(f"q_{stream}_{consumer}")
            .option("checkpointLocation", str(tmp_path / f"{stream}-{consumer}"))
            .start()
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()

    with pytest.raises(SPARK_ERRORS, match="allow_direct"):
        start(plain, "c")
    with pytest.raises(SPARK_ERRORS, match="is a push consumer"):
        start(queue, "pusher")


def test_the_allow_direct_advice_keeps_the_streams_other_settings(
    shared_nats_server: Any, unique_name: Any
) -> None:
    """The error names the call that turns on direct gets; run as given, it changes
    nothing else of the stream."""
    url, name = shared_nats_server.url, unique_name("WQA")
    make_stream(url, name, retention="workqueue", max_msgs=500, max_age=3600)
    opts = parse_read_options(
        {"servers": url, "stream": name, "consumer": "advised"}, queries="stream"
    )
    with ja.connect(url) as client:
        before = client.stream_info(name).config
        with pytest.raises(BadInputError) as excinfo:
            prepare_consumer(client, opts)
        advice = str(excinfo.value).split("update it: ", 1)[1]
        eval(advice, {"client": client})  # the error's own advice, run as a user would
        after = client.stream_info(name).config
        assert after.allow_direct
        assert (after.subjects, after.retention, after.max_msgs, after.max_age) == (
            before.subjects,
            before.retention,
            500,
            before.max_age,
        )
        assert prepare_consumer(client, opts).name == "advised"


@pytest.mark.timeout(900)
@pytest.mark.slow
@pytest.mark.fault
def test_a_driver_killed_three_times_leaves_each_message_once_and_the_queue_empty(
    shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, queue, sink = shared_nats_server.url, unique_name("WQK"), unique_name("WQKS")
    # Micro-batches of 1,000 (the driver's maxMessagesPerTrigger): each kill comes once
    # the sink has passed the next quarter of n, at the next micro-batch in flight, so
    # there are always batches left to land in.
    n, kills, interrupted = 8_000, 0, []
    work_queue(url, queue)
    # Exactly once into the sink holds within its duplicate window (docs/spark.md):
    # longer than a killed driver takes to restart on a loaded machine.
    make_stream(url, sink, duplicate_window=600.0)
    publish(url, queue, n)
    checkpoint = str(tmp_path / "checkpoint")
    log = tmp_path / "driver.log"

    def start_driver() -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen(
                [sys.executable, str(DRIVER), url, queue, "drain", sink, checkpoint],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its JVM dies with it; Spark's Python workers, with the JVM
            )

    driver = start_driver()
    try:
        while kills < 3:
            target = (kills + 1) * n // 4

            def passed(target: int = target, driver: subprocess.Popen[bytes] = driver) -> bool:
                return state(url, sink).messages >= target or driver.poll() is not None

            wait_for(f"the sink to pass {target} messages (driver log {log})", passed, 180)
            assert driver.poll() is None, log.read_text()[-3000:]
            interrupted.append(
                kill_driver_mid_batch(
                    driver, Path(checkpoint), 120, lambda: log.read_text()[-3000:]
                )
            )
            kills += 1
            driver = start_driver()
        wait_for(
            f"the sink to hold {n} messages and the queue to empty (driver log {log})",
            lambda: state(url, sink).messages >= n and state(url, queue).messages == 0,
            240,
        )
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
    data = sink_data(url, sink)
    duplicates = len(data) - len(set(data))
    print(
        f"{n} messages, {kills} driver SIGKILLs (in micro-batches {interrupted}): "
        f"{len(set(data))} distinct in the sink, "
        f"{duplicates} duplicated, {n - len(set(data))} lost; work queue left with "
        f"{state(url, queue).messages}"
    )
    # Each kill fell inside a micro-batch, which the restarted query ran again and
    # committed under the same id.
    assert set(interrupted) <= set(batch_ids(Path(checkpoint) / "commits")), interrupted
    assert sorted(data) == sorted(f"m{i}".encode() for i in range(n))
    assert state(url, queue).messages == 0


def test_two_queries_of_one_consumer_group_hand_over_when_the_active_driver_is_killed(
    shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    """Two drivers share the work queue's consumer through its pinned priority group
    (option consumerGroup): one is pinned and moves the messages, the other stands by.
    The pinned one is SIGKILLed in the middle of a micro-batch; after the pin timeout
    the other takes over from the consumer's ack floor, gets what the killed one had
    claimed, and every message reaches the sink once; the queue empties."""
    url, queue, sink = shared_nats_server.url, unique_name("WQG"), unique_name("WQGS")
    n = 4_000
    work_queue(url, queue)
    make_stream(url, sink, duplicate_window=600.0)
    publish(url, queue, n // 2)
    checkpoints = {d: tmp_path / f"checkpoint-{d}" for d in ("a", "b")}
    logs = {d: tmp_path / f"driver-{d}.log" for d in ("a", "b")}

    def start_driver(d: str) -> subprocess.Popen[bytes]:
        with logs[d].open("ab") as out:
            return subprocess.Popen(
                [sys.executable, str(DRIVER), url, queue, "shared", sink, str(checkpoints[d]), "g"],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def tail(d: str) -> Callable[[], str]:
        return lambda: logs[d].read_text()[-3000:]

    drivers = {"a": start_driver("a")}
    try:
        wait_for(
            f"driver a to move messages (log {logs['a']})",
            lambda: state(url, sink).messages > 0 or drivers["a"].poll() is not None,
            180,
        )
        assert drivers["a"].poll() is None, tail("a")()
        drivers["b"] = start_driver("b")
        wait_for(
            f"driver b's query to start (log {logs['b']})",
            lambda: (checkpoints["b"] / "metadata").exists() or drivers["b"].poll() is not None,
            180,
        )
        assert drivers["b"].poll() is None, tail("b")()
        time.sleep(2)  # b pulls as a standby
        publish(url, queue, n // 2, start=n // 2)
        interrupted = kill_driver_mid_batch(drivers["a"], checkpoints["a"], 120, tail("a"))
        wait_for(
            f"the sink to hold {n} messages and the queue to empty (log {logs['b']})",
            lambda: state(url, sink).messages >= n and state(url, queue).messages == 0,
            240,
        )
    finally:
        for driver in drivers.values():
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait(30)
    data = sink_data(url, sink)
    print(
        f"{n} messages, driver a killed in micro-batch {interrupted}: {len(set(data))} "
        f"distinct in the sink, {len(data) - len(set(data))} duplicated; driver b "
        f"committed micro-batches {batch_ids(checkpoints['b'] / 'commits')}"
    )
    assert batch_ids(checkpoints["b"] / "commits"), "driver b never took over"
    assert sorted(data) == sorted(f"m{i}".encode() for i in range(n))
    assert state(url, queue).messages == 0
