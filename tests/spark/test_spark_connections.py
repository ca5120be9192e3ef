"""One connection per Python worker process, with worker reuse on and off."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

import jetstream_arrow as ja
from conftest_spark import SPARK_ERRORS, TESTS, make_stream, publish, read_df, spark
from jetstream_arrow.options import ConnectOptions
from jetstream_arrow.spark.connection_cache import cached_clients, get_client
from proc_helpers import connections_by_process, descendants

pytestmark = pytest.mark.spark
__all__ = ["spark"]


def _connections(server: Any, name: str) -> int:
    connz = server.monitor("connz?limit=1000")
    return sum(1 for c in connz.get("connections") or [] if c.get("name") == name)


def test_cache_gives_one_client_per_options(shared_nats_server: Any) -> None:
    opts = ConnectOptions(servers=shared_nats_server.url, name="cache-test")
    first = get_client(opts)
    assert get_client(ConnectOptions(servers=shared_nats_server.url, name="cache-test")) is first
    other = get_client(ConnectOptions(servers=shared_nats_server.url, name="cache-test-2"))
    assert other is not first
    assert cached_clients() >= 2
    first.close()
    assert get_client(opts) is not first  # a closed client is replaced


def test_workers_reuse_their_connection(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("CR")
    make_stream(url, name)
    publish(url, name, 800)
    conn_name = unique_name("conn")
    df = read_df(spark, url, name, minPartitions=8, name=conn_name)
    assert df.count() == 800
    assert df.count() == 800
    # 16 partitions were read by two executor workers (more when Spark starts one
    # while another is still being handed back) and the planning workers: each
    # process holds one connection for these options, and far fewer than 16 exist.
    connz = shared_nats_server.monitor("connz?limit=1000")
    ports = {c["port"] for c in connz.get("connections") or [] if c.get("name") == conn_name}
    held = connections_by_process(descendants(os.getpid()), ports)
    assert 1 <= len(ports) < 16, ports
    assert sum(held.values()) == len(ports), (held, ports)  # all held by Spark's workers
    assert set(held.values()) == {1}, held
    with ja.connect(url) as client:
        assert client.stream_info(name).state.consumer_count == 0


_NO_REUSE_JOB = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession, functions as F
url, name, conn_name = sys.argv[1:4]
spark = (SparkSession.builder.master("local[2]")
         .config("spark.python.worker.reuse", "false")
         .config("spark.ui.enabled", "false").config("spark.driver.memory", "512m")
         .getOrCreate())
df = spark.range(0, 1000, 1, 4).select(
    F.lit(name + ".x").alias("subject"), F.col("id").cast("string").alias("data"))
df.write.format("jetstream").mode("append").option("servers", url).option("name", conn_name).save()
back = (spark.read.format("jetstream").option("servers", url).option("stream", name)
        .option("name", conn_name).option("minPartitions", 4).load())
print("ROWS", back.count(), back.select("data").distinct().count())
spark.stop()
"""


@pytest.mark.slow
def test_without_worker_reuse_nothing_is_left_open(
    shared_nats_server: Any, unique_name: Any, tmp_path: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("NR")
    make_stream(url, name)
    conn_name = unique_name("conn")
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(_NO_REUSE_JOB))
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    )
    done = subprocess.run(
        [sys.executable, str(script), url, name, conn_name],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ROWS 1000 1000" in done.stdout
    deadline = time.monotonic() + 10
    while _connections(shared_nats_server, conn_name) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _connections(shared_nats_server, conn_name) == 0
    # Every read's consumer was deleted when its task ended.
    with ja.connect(url) as client:
        assert client.stream_info(name).state.consumer_count == 0


_FREEZE_CHECK = """
import gc, os, sys
from jetstream_arrow.spark.connection_cache import freeze_worker_heap
freeze_worker_heap()
first = gc.get_freeze_count()
gc.unfreeze()
freeze_worker_heap()  # once per process: nothing more is frozen
again = gc.get_freeze_count()
pid = os.fork()
if pid == 0:
    freeze_worker_heap()  # a forked worker freezes its own heap
    os._exit(0 if gc.get_freeze_count() > 0 else 1)
_, status = os.waitpid(pid, 0)
print("FROZEN", first, again, os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("reuse", ["1", None])
def test_reused_workers_freeze_their_heap_once(reuse: str | None) -> None:
    # In a child process: freezing this one would change the test run's own collector.
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REUSE_WORKER"}
    if reuse is not None:
        env["SPARK_REUSE_WORKER"] = reuse
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_FREEZE_CHECK)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    words = done.stdout.split()
    first, again, child = int(words[-3]), int(words[-2]), int(words[-1])
    if reuse:
        # The modules' objects are out of the per-task collection's reach.
        assert first > 10_000
        assert (again, child) == (0, 0)
    else:
        # A worker that is not reused ends after its task: nothing to spare.
        assert (first, again, child) == (0, 0, 1)


_TASK_GARBAGE_CHECK = """
import gc, sys, weakref
# A Spark worker imports the package when it unpickles its first task.
import jetstream_arrow.spark
from jetstream_arrow.options import ConnectOptions
from jetstream_arrow.spark.connection_cache import get_client
frozen_at_import = gc.get_freeze_count()

class TaskState:
    pass

state = TaskState()
state.itself = state  # a reference cycle, as task objects often are
alive = weakref.ref(state)
get_client(ConnectOptions(servers=sys.argv[1]))  # the task's first connection
del state
gc.collect()  # what a reused worker runs after each task
print("TASK", frozen_at_import, alive() is None)
"""


@pytest.mark.parametrize("freeze", [None, "0"])
def test_a_reused_worker_freezes_the_imported_modules_not_its_first_task(
    shared_nats_server: Any, freeze: str | None
) -> None:
    env = {**os.environ, "SPARK_REUSE_WORKER": "1"}
    env.pop("JETSTREAM_ARROW_GC_FREEZE", None)
    if freeze is not None:
        env["JETSTREAM_ARROW_GC_FREEZE"] = freeze
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_TASK_GARBAGE_CHECK), shared_nats_server.url],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    words = done.stdout.split()
    frozen, collected = int(words[-2]), words[-1] == "True"
    # The first task's cyclic garbage is collected like any later task's.
    assert collected
    if freeze is None:
        assert frozen > 10_000  # pyspark's, pyarrow's and the package's objects
    else:
        assert frozen == 0  # turned off


def test_cancelled_read_leaves_no_consumer(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url, name = shared_nats_server.url, unique_name("K")
    make_stream(url, name)
    publish(url, name, 20_000)
    sc = spark.sparkContext
    errors: list[BaseException] = []

    def run() -> None:
        sc.setJobGroup("cancel-me", "a read to cancel", interruptOnCancel=True)
        try:
            read_df(spark, url, name, batchRows=10).foreach(lambda row: time.sleep(0.01))
        except SPARK_ERRORS as err:
            errors.append(err)

    job = threading.Thread(target=run)
    job.start()
    with ja.connect(url) as client:
        deadline = time.monotonic() + 60
        while client.stream_info(name).state.consumer_count == 0:
            assert time.monotonic() < deadline, "the read never started"
            time.sleep(0.1)
        sc.cancelJobGroup("cancel-me")
        job.join(60)
        assert errors, "the job was not cancelled"
        deadline = time.monotonic() + 30
        while client.stream_info(name).state.consumer_count and time.monotonic() < deadline:
            time.sleep(0.2)
        # The cancelled task's reader deleted its consumer (it did not wait for the
        # server's 5-minute inactivity threshold).
        assert client.stream_info(name).state.consumer_count == 0
