"""A Spark driver on ``local-cluster[2,1,1024]`` that runs jobs the executor-loss tests
ask for, one at a time, while the test kills executor JVMs under it.

    python local_cluster_jobs.py <run directory>

``local-cluster`` runs a master and two workers inside the driver's JVM; each worker
starts one executor as a JVM process of its own (a child of the driver's JVM), with
its own Python workers, as on a cluster, and the master starts a new executor when
one is lost. The pytest process already holds a ``local[2,4]`` SparkContext (one per
process), so this driver is a process of its own.

Protocol, one JSON object per line: the driver reads commands on stdin
(``{"op": "write" | "read" | "stream_copy" | "work_queue" | "executors" | "stop", ...}``)
and answers on stdout with lines ``READY <json>`` once both executors are up,
``PROGRESS <json>`` every 0.1 s while a job runs (its tasks: scheduled so far,
completed, failed, running), then ``DONE <json>`` or ``FAILED <json>``. Spark's own
output goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq
from driver_session import spark_session as shared_spark_session

import jetstream_arrow as ja

#: Seconds the driver waits for its executors to register.
EXECUTORS_TIMEOUT = 120.0
#: Seconds a streaming query may run before the command fails.
QUERY_TIMEOUT = 240.0

_out_lock = threading.Lock()


def say(kind: str, body: dict[str, Any]) -> None:
    with _out_lock:
        sys.stdout.write(f"{kind} {json.dumps(body)}\n")
        sys.stdout.flush()


def spark_session() -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return shared_spark_session(
        "jetstream-arrow-executor-loss",
        "local-cluster[2,1,1024]",
        **{"spark.executor.memory": "512m"},
    )


def executors(spark: Any) -> list[dict[str, Any]]:
    """The executors the driver knows as alive (not the driver itself), with the
    number of tasks each is running."""
    store = spark.sparkContext._jsc.sc().statusStore()
    found = store.executorList(True)  # active executors only
    out = []
    for i in range(found.size()):
        summary = found.apply(i)
        if summary.id() != "driver":
            out.append({"id": summary.id(), "active_tasks": summary.activeTasks()})
    return sorted(out, key=lambda e: int(e["id"]))


def wait_for_executors(spark: Any, count: int, timeout: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        found = executors(spark)
        if len(found) >= count:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(found)} of {count} executors registered in {timeout} s")
        time.sleep(0.2)


class JobWatch:
    """Reports the tasks of the jobs in some job groups while a command runs."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.groups: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="job-watch", daemon=True)

    def tasks(self) -> dict[str, int]:
        tracker = self.spark.sparkContext.statusTracker()
        total = completed = failed = active = 0
        for group in list(self.groups):
            for job in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(job)
                for stage in info.stageIds if info else []:
                    stage_info = tracker.getStageInfo(stage)
                    if stage_info is None:
                        continue
                    total += stage_info.numTasks
                    completed += stage_info.numCompletedTasks
                    failed += stage_info.numFailedTasks
                    active += stage_info.numActiveTasks
        # The tasks each executor runs, as the driver knows them: a test that froze an
        # executor (SIGSTOP) reads here whether it holds a task before killing it.
        running = {e["id"]: e["active_tasks"] for e in executors(self.spark)}
        return {
            "tasks": total,
            "completed": completed,
            "failed": failed,
            "active": active,
            "running": running,
        }

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            try:
                say("PROGRESS", self.tasks())
            except Exception as err:  # the JVM is busy or shutting down: skip one report
                say("PROGRESS", {"error": repr(err)})

    def __enter__(self) -> JobWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def in_group(spark: Any, group: str, watch: JobWatch, action: Callable[[], Any]) -> Any:
    context = spark.sparkContext
    context.setJobGroup(group, group)
    watch.groups.append(group)
    try:
        return action()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)


def batch_write(spark: Any, watch: JobWatch, cmd: dict[str, Any]) -> dict[str, Any]:
    """``n`` rows into ``stream``, each with the msg id ``row-<i>`` and payload ``<i>``."""
    from pyspark.sql import functions as F

    name, n = cmd["stream"], cmd["n"]
    rows = spark.range(0, n, 1, cmd["partitions"]).select(
        F.concat(F.lit(f"{name}."), (F.col("id") % 4).cast("string")).alias("subject"),
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("msg_id"),
        F.col("id").cast("string").alias("data"),
    )
    writer = (
        rows.write.format("jetstream")
        .mode("append")
        .option("servers", cmd["url"])
        .option("ackWindow", cmd["ack_window"])
    )
    in_group(spark, cmd["group"], watch, writer.save)
    return {}


def batch_read(spark: Any, watch: JobWatch, cmd: dict[str, Any]) -> dict[str, Any]:
    """The whole stream's ``seq`` and ``data``, collected on the driver and written to
    the parquet file ``out`` for the test to count."""
    df = (
        spark.read.format("jetstream")
        .option("servers", cmd["url"])
        .option("stream", cmd["stream"])
        .option("maxMessagesPerPartition", cmd["per_partition"])
        .load()
        .select("seq", "data")
    )
    table = in_group(spark, cmd["group"], watch, df.toArrow)
    pq.write_table(table, cmd["out"])
    return {"rows": table.num_rows}


def stream_copy(spark: Any, watch: JobWatch, cmd: dict[str, Any]) -> dict[str, Any]:
    """Copy stream ``source`` into stream ``sink`` with trigger(availableNow=True)."""
    from pyspark.sql import functions as F

    source, sink = cmd["source"], cmd["sink"]
    messages = (
        spark.readStream.format("jetstream")
        .option("servers", cmd["url"])
        .option("stream", source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", cmd["per_trigger"])
        .option("minPartitions", cmd["tasks_per_batch"])
        .load()
    )
    moved = messages.withColumn("subject", F.regexp_replace("subject", f"^{source}", sink))
    query = (
        moved.writeStream.format("jetstream")
        .option("servers", cmd["url"])
        .option("stream", sink)
        .option("ackWindow", cmd["ack_window"])
        .option("checkpointLocation", cmd["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    # Spark runs a query's jobs in the job group of its run id.
    watch.groups.append(str(query.runId))
    try:
        if not query.awaitTermination(QUERY_TIMEOUT):
            raise TimeoutError(f"the availableNow query did not finish in {QUERY_TIMEOUT} s")
        return {"batches": [p["numInputRows"] for p in query.recentProgress]}
    finally:
        query.stop()


def work_queue(spark: Any, watch: JobWatch, cmd: dict[str, Any]) -> dict[str, Any]:
    """Drain WorkQueue stream ``queue`` through durable consumer ``consumer`` into
    stream ``sink`` until the sink holds ``n`` messages and the queue is empty."""
    from pyspark.sql import functions as F

    url, queue, sink, n = cmd["url"], cmd["queue"], cmd["sink"], cmd["n"]
    source = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", queue)
        .option("consumer", cmd["consumer"])
        .option("maxMessagesPerTrigger", cmd["per_trigger"])
        .option("minPartitions", cmd["tasks_per_batch"])
        .load()
    )
    moved = source.withColumn("subject", F.regexp_replace("subject", f"^{queue}", sink))
    query = (
        moved.writeStream.format("jetstream")
        .option("servers", url)
        .option("stream", sink)
        .option("ackWindow", cmd["ack_window"])
        .option("checkpointLocation", cmd["checkpoint"])
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    watch.groups.append(str(query.runId))
    try:
        deadline = time.monotonic() + QUERY_TIMEOUT
        with ja.connect(url) as client:
            while True:
                in_sink = client.stream_info(sink).state.messages
                left = client.stream_info(queue).state.messages
                # The last micro-batch is acknowledged when the next trigger is planned.
                if in_sink >= n and left == 0:
                    break
                if not query.isActive:
                    raise RuntimeError(f"the query stopped: {query.exception()}")
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"waited {QUERY_TIMEOUT} s for the sink to hold {n} messages and "
                        f"the queue to empty: {in_sink} in the sink, {left} in the queue"
                    )
                time.sleep(0.1)
        return {"batches": [p["numInputRows"] for p in query.recentProgress]}
    finally:
        query.stop()


JOBS = {
    "write": batch_write,
    "read": batch_read,
    "stream_copy": stream_copy,
    "work_queue": work_queue,
}


def main() -> None:
    spark = spark_session()
    say("READY", {"executors": wait_for_executors(spark, 2, EXECUTORS_TIMEOUT)})
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "stop":
            break
        if op == "executors":
            say("DONE", {"executors": executors(spark)})
            continue
        started = time.monotonic()
        try:
            with JobWatch(spark) as watch:
                result = JOBS[op](spark, watch, cmd)
                tasks = watch.tasks()
        except Exception as err:
            say(
                "FAILED", {"error": f"{type(err).__name__}: {err}", "trace": traceback.format_exc()}
            )
            continue
        say("DONE", {**result, **tasks, "seconds": time.monotonic() - started})
    spark.stop()


if __name__ == "__main__":
    main()
