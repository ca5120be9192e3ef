"""Faults injected into Spark jobs, each test counting what was lost or doubled:

- the stream leader of an R3 stream killed (``kill -9``) and restarted on the same
  port and store during ``df.write.format("jetstream")``: every row stored once (a
  task whose publishes give up during the election is retried by Spark with the same
  message ids; docs/spark.md "Writing");
- the same during ``spark.read.format("jetstream")``: every message read once, and no
  task fails (each partition's read recreates its consumer after the lost server and
  retries its requests through the election; docs/spark.md "Reading");
- a streaming query (jetstream source, from its checkpointed offsets) in a driver
  process SIGKILLed three times, each time in the middle of a micro-batch, and
  restarted from its checkpoint, with messages published before and during the run,
  into Spark's parquet file sink and, in a second driver killed alike, into the
  jetstream sink: every source message once in each sink (the file sink's contents
  are the files its log commits, as Spark reads them; a killed attempt's files stay
  beside them, counted apart).

What other tests already prove is not repeated here:
``test_spark_work_queue.py::test_a_driver_killed_three_times_leaves_each_message_once_and_the_queue_empty``
(a driver killed while reading through a durable consumer, option ``consumer``),
``test_spark_write.py::test_retried_task_stores_every_row_exactly_once`` (a write task
failing after it published), ``test_spark_streaming.py::test_restarted_query_re_runs_its_failed_micro_batch_without_duplicates``
(a micro-batch failing in a live driver), ``test_ordered.py::test_a_read_across_a_leader_change_on_r3_is_exact``
(an engine read across a leader stepdown) and
``test_publish.py::test_cluster_publish_while_a_server_restarts_loses_and_duplicates_nothing``
(an engine publish across a graceful restart of the leader). Each test prints one
line of figures. The cluster and driver harnesses stay beside the tests they serve,
so this is one module.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

import jetstream_arrow as ja
from conftest_spark import SPARK_ERRORS, make_stream, publish, read_df, spark
from fault_helpers import batch_ids, kill_driver_mid_batch
from jetstream_arrow.exceptions import JetStreamArrowError
from natsserver import NatsCluster, NatsServer, wait_until

pytestmark = [pytest.mark.fault, pytest.mark.spark, pytest.mark.slow]
__all__ = ["spark"]

DRIVER = Path(__file__).resolve().parents[1] / "drivers" / "stream_copy_query.py"

# -- an R3 stream whose leader is killed -------------------------------------------------


def cluster_client(cluster: NatsCluster) -> ja.Client:
    """A client of the test itself, that outlives any one server going down."""
    return ja.connect(cluster.url, max_reconnects=None, reconnect_delay=0.2)


def r3_stream(cluster: NatsCluster, name: str) -> str:
    """Create an R3 stream on ``<name>.>``; return its leader's server name."""
    with cluster_client(cluster) as client:

        def created() -> bool:
            try:
                # Answered with "no responders" until the meta group places it.
                client.create_stream(name, [f"{name}.>"], replicas=3)
                return True
            except JetStreamArrowError:
                return False

        wait_until(created, 60.0, f"the R3 stream {name} to be created")
        leader: list[str] = []

        def elected() -> bool:
            cluster_info = client.stream_info(name).cluster
            if cluster_info is None or not cluster_info.leader:
                return False
            leader.append(cluster_info.leader)
            return True

        wait_until(elected, 60.0, f"the R3 stream {name} to elect a leader")
    return leader[-1]


def replicas_current(client: ja.Client, name: str) -> bool:
    """Whether the leader reports both other replicas current (caught up)."""
    cluster_info = client.stream_info(name).cluster
    replicas = cluster_info.replicas if cluster_info else []
    return len(replicas) == 2 and all(r.get("current") for r in replicas)


class LeaderKiller(threading.Thread):
    """Once ``ready()`` is true, kills the stream leader with SIGKILL by the PID of the
    process the test started, keeps it down ``down`` seconds (a new leader is elected
    meanwhile) and starts it again on the same ports and store."""

    def __init__(
        self,
        cluster: NatsCluster,
        leader: str,
        ready: Callable[[ja.Client], bool],
        down: float = 2.0,
        timeout: float = 120.0,
    ) -> None:
        super().__init__(name="leader-killer", daemon=True)
        self.cluster, self.ready, self.down, self.timeout = cluster, ready, down, timeout
        self.victim: NatsServer = next(s for s in cluster.servers if s.name == leader)
        self.killed_at: float | None = None
        self.restarted_at: float | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            with cluster_client(self.cluster) as client:
                deadline = time.monotonic() + self.timeout
                while not self.ready(client):
                    if self.done.is_set() or time.monotonic() > deadline:
                        return  # the test's assertions say the kill is missing
                    time.sleep(0.01)
            process = self.victim.process
            assert process is not None, f"{self.victim.name} is not running"
            os.kill(process.pid, signal.SIGKILL)
            self.killed_at = time.monotonic()
            self.victim.kill()  # reaps the process the signal ended
            time.sleep(self.down)
            self.victim.start()
            self.restarted_at = time.monotonic()
        except BaseException as err:  # reported by the test, not lost in the thread
            self.error = err

    def finish(self) -> None:
        self.done.set()
        self.join(120)
        if self.error is not None:
            raise self.error
        assert not self.is_alive(), "the killer thread did not end"


@contextlib.contextmanager
def job_group(spark: Any, group: str) -> Iterator[Callable[[], int]]:
    """Run Spark jobs in ``group``; yields a function counting their failed task
    attempts (each one retried by Spark, up to the session's four attempts)."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    tracker = context.statusTracker()

    def failed_tasks() -> int:
        failed = 0
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else []:
                stage_info = tracker.getStageInfo(stage)
                failed += stage_info.numFailedTasks if stage_info else 0
        return failed

    try:
        yield failed_tasks
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)


@pytest.mark.cluster
@pytest.mark.timeout(300)
def test_a_batch_write_through_a_leader_kill_9_stores_every_row_once(
    spark: Any, nats_cluster: NatsCluster
) -> None:
    n, name = 40_000, "SW"
    leader = r3_stream(nats_cluster, name)
    rows = spark.range(0, n, 1, 4).select(
        F.concat(F.lit(f"{name}."), (F.col("id") % 4).cast("string")).alias("subject"),
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("msg_id"),
        F.col("id").cast("string").alias("data"),
    )

    def a_third_stored(client: ja.Client) -> bool:
        return int(client.stream_info(name).state.messages) >= n // 3

    def write() -> None:
        rows.write.format("jetstream").mode("append").option("servers", nats_cluster.url).save()

    reruns: list[str] = []  # why the write was run again
    killer = LeaderKiller(nats_cluster, leader, a_third_stored)
    killer.start()
    try:
        with job_group(spark, "fault-write") as failed_tasks:
            try:
                write()
            except SPARK_ERRORS as err:
                # A task whose four attempts all met the election (each gives up after
                # the publisher's retries) fails the job: the Spark guide's way to finish
                # it is to run it again, and the rows' msg ids keep that from storing
                # anything twice.
                reruns.append(str(err))
                killer.join(60)
                nats_cluster.wait_ready()
                write()
        ended = time.monotonic()
    finally:
        killer.finish()
    assert killer.killed_at is not None, "the leader was never killed"
    assert killer.killed_at < ended, "the kill came after the write"

    with cluster_client(nats_cluster) as client:
        wait_until(
            lambda: replicas_current(client, name), 60.0, "the restarted replica to catch up"
        )
        state = client.stream_info(name).state
        table = client.read(name, include_headers=True).read_all()
    ids = [dict(h)["Nats-Msg-Id"][0] for h in table.column("headers").to_pylist()]
    distinct = len(set(ids))
    print(
        f"{n} rows, 1 leader kill -9 ({leader} down {killer.down:.0f} s): "
        f"{distinct} distinct stored, {n - distinct} lost, {table.num_rows - distinct} "
        f"duplicated; {failed_tasks()} task attempts failed and were retried by Spark, "
        f"{len(reruns)} re-runs of the write"
    )
    assert all("PublishError" in why for why in reruns), reruns
    assert int(state.messages) == table.num_rows == n
    assert distinct == n
    assert set(ids) == {f"row-{i}" for i in range(n)}
    assert set(table.column("data").to_pylist()) == {str(i).encode() for i in range(n)}


@pytest.mark.cluster
@pytest.mark.timeout(300)
def test_a_batch_read_through_a_leader_kill_9_reads_every_message_once(
    spark: Any, nats_cluster: NatsCluster
) -> None:
    n, name = 200_000, "SR"
    leader = r3_stream(nats_cluster, name)
    publish(nats_cluster.url, name, n)

    def reading(client: ja.Client) -> bool:
        # A read's consumers exist only while its partitions are being read.
        return bool(client.consumer_names(name))

    killer = LeaderKiller(nats_cluster, leader, reading)
    killer.start()
    started = time.monotonic()
    try:
        df = read_df(spark, nats_cluster.url, name, minPartitions=2, heartbeat=1.0)
        with job_group(spark, "fault-read") as failed_tasks:
            seqs = df.select("seq").toArrow().column("seq")
        ended = time.monotonic()
    finally:
        killer.finish()
    assert killer.killed_at is not None, "the leader was never killed"
    assert killer.killed_at < ended, "the kill came after the read"

    distinct, failed = len(pc.unique(seqs)), failed_tasks()
    lo, hi = pc.min(seqs).as_py(), pc.max(seqs).as_py()
    print(
        f"{n} messages, 1 leader kill -9 ({leader} down {killer.down:.0f} s, "
        f"{killer.killed_at - started:.1f} s into a {ended - started:.1f} s read): "
        f"{len(seqs)} read, {distinct} distinct, seq {lo}..{hi}, {n - distinct} lost, "
        f"{len(seqs) - distinct} duplicated; {failed} task attempts failed"
    )
    assert (len(seqs), distinct, lo, hi) == (n, n, 1, n)
    # Each partition's read recovered by itself (docs/spark.md "Reading"), no task retry.
    assert failed == 0


# -- a streaming query's driver SIGKILLed --------------------------------------------------


def committed_end(checkpoint: Path) -> int:
    """The source offset (next sequence to read) after the last micro-batch the query
    committed; 1 before the first."""
    commits = batch_ids(checkpoint / "commits")
    if not commits:
        return 1
    # offsets/<batch>: a version line, the batch's metadata, then one offset per source.
    lines = (checkpoint / "offsets" / str(max(commits))).read_text().splitlines()
    return int(json.loads(lines[-1])["seq"])


def file_sink_files(path: Path) -> tuple[list[Path], list[Path]]:
    """(files the file sink's log commits, other data files in the directory).

    Spark's file sink is exactly once through its log (``_spark_metadata``): a killed
    attempt leaves files that no log entry lists, and Spark's readers skip them."""
    committed: set[Path] = set()
    for entry in (path / "_spark_metadata").iterdir():
        if entry.name.startswith("."):
            continue  # checksums of the log's files
        for line in entry.read_text().splitlines()[1:]:  # after the version line
            record = json.loads(line)
            assert record["action"] == "add", record
            committed.add(Path(urllib.parse.urlparse(record["path"]).path))
    present = set(path.glob("*.parquet"))
    return sorted(committed), sorted(present - committed)


def orphan_rows(files: list[Path]) -> tuple[int, int]:
    """(rows, unreadable files) of files outside the sink's log: a task killed while
    writing leaves a file without its footer."""
    rows = unreadable = 0
    for f in files:
        try:
            rows += pq.ParquetFile(f).metadata.num_rows
        except (OSError, pa.ArrowInvalid):
            unreadable += 1
    return rows, unreadable


def parquet_rows(files: list[Path]) -> pa.Table:
    tables = [pq.read_table(f, columns=["seq", "data"]) for f in files]
    if not tables:
        return pa.table({"seq": pa.array([], pa.int64()), "data": pa.array([], pa.binary())})
    return pa.concat_tables(tables)


def trickle(url: str, stream: str, start: int, count: int) -> None:
    """Publish ``count`` messages numbered from ``start`` in ten steps over ~3 s."""
    step = count // 10
    for i in range(10):
        size = step if i < 9 else count - 9 * step
        publish(url, stream, size, start=start + i * step)
        time.sleep(0.3)


#: Seeds the random moments of the driver kills; FAULT_SEED=<seed> repeats a run's.
seed = int(os.environ.get("FAULT_SEED", time.time_ns() % 1_000_000))


class Killer(threading.Thread):
    """Runs one query (``drivers/stream_copy_query.py``) from a source stream of its
    own into one kind of sink, in a driver process it SIGKILLs ``kills`` times, each
    time in the middle of a micro-batch, and starts again from the checkpoint.

    ``n`` messages go into the source: half before the first start, an equal part of
    the rest at each kill, while the driver restarts, so that each run has a backlog
    of several micro-batches. A random moment after the run's first commit, the
    driver is frozen (SIGSTOP to its process group) once a micro-batch is planned; if
    the checkpoint still shows it uncommitted, the driver is killed there (reading,
    writing or committing it), else it runs on until the next one. So every kill
    interrupts a micro-batch, which a kill at a random moment does only by chance."""

    def __init__(
        self, kind: str, url: str, source: str, sink: str, workdir: Path, n: int, kills: int
    ) -> None:
        super().__init__(name=f"kill-{kind}", daemon=True)
        self.kind, self.url, self.source, self.n, self.wanted = kind, url, source, n, kills
        self.checkpoint, self.log = workdir / kind, workdir / f"{kind}.log"
        self.args = [sys.executable, str(DRIVER), url, self.source, kind, sink]
        self.args.append(str(self.checkpoint))
        self.rng = random.Random(f"{seed}-{kind}")
        self.process: subprocess.Popen[bytes] | None = None
        #: The committed offset at each kill, and the micro-batch each kill
        #: interrupted (planned, not committed).
        self.kills: list[int] = []
        self.interrupted: list[int] = []
        self.published = n // 2
        self.error: BaseException | None = None
        make_stream(url, self.source)
        publish(url, self.source, self.published)

    def start_driver(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.args,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its JVM dies with it; Spark's Python workers, with the JVM
            )

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL to the driver's process group, by the PID this test started."""
        if self.running():
            assert self.process is not None
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def committed(self) -> int:
        return committed_end(self.checkpoint)

    def kill_mid_batch(self) -> None:
        """SIGKILL the driver while a micro-batch is planned and not committed."""
        assert self.process is not None
        self.interrupted.append(
            kill_driver_mid_batch(self.process, self.checkpoint, 120, self.tail)
        )
        self.kills.append(self.committed())

    def tail(self) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.kind} driver log:\n{text[-3000:]}"

    def wait_for(self, what: str, condition: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout} s for {what}\n{self.tail()}")
            if not self.running():
                raise AssertionError(f"the {self.kind} driver ended\n{self.tail()}")
            time.sleep(0.1)

    def run(self) -> None:
        try:
            chunk = (self.n - self.published) // self.wanted
            self.start_driver()
            while len(self.kills) < self.wanted:
                base = self.committed()
                # Once this run has committed a micro-batch, the query is past its
                # start-up.
                self.wait_for(
                    f"the {self.kind} query to commit", lambda b=base: self.committed() > b, 300
                )
                time.sleep(self.rng.uniform(0.0, 0.5))
                self.kill_mid_batch()
                self.start_driver()
                count = chunk if len(self.kills) < self.wanted else self.n - self.published
                trickle(self.url, self.source, self.published, count)
                self.published += count
            self.wait_for(
                f"the {self.kind} query to commit all {self.n} messages",
                lambda: self.committed() > self.n,
                240,
            )
        except BaseException as err:  # reported by the test, not lost in the thread
            self.error = err
        finally:
            self.kill()

    def finish(self) -> None:
        self.join(600)
        if self.error is not None:
            raise self.error
        assert not self.is_alive(), f"the {self.kind} killer did not end"


@pytest.mark.timeout(900)
def test_streaming_drivers_killed_three_times_mid_batch_leave_each_message_once_in_their_sinks(
    shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, sink_stream, sink_dir = shared_nats_server.url, unique_name("SKS"), tmp_path / "sink"
    # Three kills, each proven to interrupt a micro-batch (the checkpoint says so),
    # and backlogs of three micro-batches or more (maxMessagesPerTrigger 1,000) at
    # every start, so each kill has a batch to land in.
    n, kills = 18_000, 3
    # The re-run of a killed micro-batch is deduplicated inside the sink's duplicate
    # window: make it outlast the test, whatever the machine's speed.
    make_stream(url, sink_stream, duplicate_window=600.0)
    # Both queries run at once, each in its own driver, so that their restarts (a JVM
    # and Spark start apiece) overlap.
    killers = [
        Killer("parquet", url, unique_name("SKP"), str(sink_dir), tmp_path, n, kills),
        Killer("jetstream", url, unique_name("SKJ"), sink_stream, tmp_path, n, kills),
    ]
    for killer in killers:
        killer.start()
    for killer in killers:
        killer.finish()

    expected = {f"m{i}".encode() for i in range(n)}
    files, orphans = file_sink_files(sink_dir)
    in_files = parquet_rows(files)
    file_seqs = in_files.column("seq")
    in_files_distinct = len(pc.unique(file_seqs))
    orphaned, unreadable = orphan_rows(orphans)
    with ja.connect(url) as client:
        in_stream = client.read(sink_stream, include_headers=True).read_all()
    ids = {dict(h)["Nats-Msg-Id"][0] for h in in_stream.column("headers").to_pylist()}
    in_stream_distinct = len(set(in_stream.column("data").to_pylist()))
    print(
        f"{n} messages into each query ({n // 2} before the run), {kills} SIGKILLs of each "
        f"driver (seed {seed}; committed offsets at the kills {killers[0].kills} and "
        f"{killers[1].kills}, in micro-batches {killers[0].interrupted} and "
        f"{killers[1].interrupted}): parquet sink {in_files.num_rows} rows, "
        f"{in_files_distinct} distinct seqs, {n - in_files_distinct} lost, "
        f"{in_files.num_rows - in_files_distinct} duplicated ({len(orphans)} files of "
        f"killed attempts outside the sink's log: {orphaned} rows, {unreadable} "
        f"unreadable); jetstream sink {in_stream.num_rows} messages, {in_stream_distinct} "
        f"distinct, {n - in_stream_distinct} lost, {in_stream.num_rows - in_stream_distinct} "
        f"duplicated, {len(ids)} distinct msg ids"
    )
    assert [len(k.kills) for k in killers] == [kills, kills]
    # Each kill fell inside a micro-batch, which the restarted query ran again and
    # committed under the same id.
    for killer in killers:
        committed = set(batch_ids(killer.checkpoint / "commits"))
        assert set(killer.interrupted) <= committed, (killer.kind, killer.interrupted)
    assert in_files.num_rows == in_files_distinct == n
    assert (pc.min(file_seqs).as_py(), pc.max(file_seqs).as_py()) == (1, n)
    assert set(in_files.column("data").to_pylist()) == expected
    assert in_stream.num_rows == in_stream_distinct == len(ids) == n
    assert set(in_stream.column("data").to_pylist()) == expected
