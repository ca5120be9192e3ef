"""What a user gets from ``pip install "jetstream-arrow[server,spark]"``.

``scripts/smoke.sh`` installs the built wheel into a fresh virtualenv and runs this
file from a directory outside the repository, with that virtualenv's interpreter and
no path into the source tree, so every import here is of the installed package.
Each check is one thing a new user does first.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import jetstream_arrow as ja
from jetstream_arrow.embedded_server import EmbeddedServer

pytestmark = pytest.mark.timeout(300)

#: The repository the wheel was built from; nothing may be imported from it.
SOURCE_TREE = Path(os.environ["JETSTREAM_ARROW_SOURCE_TREE"]).resolve()
VENV_BIN = Path(sys.executable).parent
CLI = str(VENV_BIN / "jetstream-arrow")


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedServer]:
    with EmbeddedServer() as embedded:
        yield embedded


@pytest.fixture
def client(server: EmbeddedServer) -> Iterator[ja.Client]:
    with ja.connect(server.url) as c:
        yield c


def rows(subject: str, count: int) -> pa.Table:
    return pa.table(
        {
            "subject": [subject] * count,
            "data": [f"m{i}".encode() for i in range(count)],
        }
    )


def test_the_installed_package_is_imported_not_the_source_tree() -> None:
    for module in (ja, ja._core):
        path = Path(module.__file__ or "").resolve()
        assert SOURCE_TREE / "python" not in path.parents, f"{module.__name__} came from {path}"
        assert Path(sys.prefix).resolve() in path.parents, path
    assert not any(Path(p).resolve() == SOURCE_TREE / "python" for p in sys.path if p)
    assert ja.__version__ == importlib.metadata.version("jetstream-arrow")


def test_publish_and_read_back(client: ja.Client) -> None:
    client.create_stream("SMOKE", subjects=["smoke.>"])
    table = rows("smoke.a", 10_000)
    result = client.publish(table)
    assert (result.stored, result.failed) == (10_000, 0)
    back = client.read("SMOKE").read_all()
    assert back.column("seq").to_pylist() == list(range(1, 10_001))
    assert back.column("data").equals(table.column("data"))


def test_a_pull_consumer_fetches_and_acks(client: ja.Client) -> None:
    client.create_stream("PULL", subjects=["pull.>"])
    client.publish(rows("pull.x", 100))
    client.create_consumer("PULL", durable_name="worker", ack_policy="explicit")
    consumer = client.pull_consumer("PULL", "worker")
    got = 0
    while got < 100:
        batch = consumer.fetch(100, expires=5.0)
        assert len(batch) > 0, "fetch returned nothing within 5 s"
        assert batch.data.column("data").to_pylist()[0] == f"m{got}".encode()
        batch.ack_sync()
        got += len(batch)
    assert got == 100
    assert client.consumer_info("PULL", "worker").num_ack_pending == 0


def test_the_command_line_loads_and_exports(server: EmbeddedServer, tmp_path: Path) -> None:
    version = subprocess.run([CLI, "--version"], capture_output=True, text=True, check=True)
    assert ja.__version__ in version.stdout
    source = tmp_path / "in.parquet"
    pq.write_table(rows("cli.in", 5_000), source)
    common = ["--servers", server.url]
    load = ["load", str(source), "--stream", "CLI", "--subject-column", "subject"]
    new_stream = ["--create-stream", "--stream-subjects", "cli.>"]
    subprocess.run(
        [CLI, *load, "--data-column", "data", *new_stream, *common],
        check=True,
        capture_output=True,
        timeout=120,
    )
    out = tmp_path / "out.parquet"
    subprocess.run([CLI, "export", "CLI", "-o", str(out), *common], check=True, capture_output=True)
    back = pq.read_table(out)
    assert back.num_rows == 5_000
    assert back.column("data").to_pylist() == [f"m{i}".encode() for i in range(5_000)]


# --- Spark, with only the "spark" extra ----------------------------------------------

MASTERS = ["local[2]", "local-cluster[2,1,1024]"]


@pytest.fixture(scope="module", params=MASTERS)
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A session whose workers run this interpreter. ``local-cluster`` starts two
    executors as separate JVMs, each with its own Python workers, as on a cluster."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(request.param)
        .appName("jetstream-arrow-smoke")
        .config("spark.ui.enabled", "false")
        .config("spark.executor.memory", "512m")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def test_spark_finds_the_format_without_register(
    spark: Any, client: ja.Client, server: EmbeddedServer
) -> None:
    master = spark.sparkContext.master
    name = "SPARK" + ("CLUSTER" if "cluster" in master else "LOCAL")
    client.create_stream(name, subjects=[f"{name}.>"])
    df = spark.range(0, 2_000, numPartitions=2).selectExpr(
        f"'{name}.x' AS subject", "CAST(CONCAT('r', CAST(id AS STRING)) AS BINARY) AS data"
    )
    df.write.format("jetstream").mode("append").option("servers", server.url).save()
    read = (
        spark.read.format("jetstream").option("servers", server.url).option("stream", name).load()
    )
    assert read.count() == 2_000
    assert read.selectExpr("count(DISTINCT data)").first()[0] == 2_000


def test_map_in_arrow_helpers(spark: Any, client: ja.Client, server: EmbeddedServer) -> None:
    from jetstream_arrow.spark import ACK_SCHEMA, message_schema, publish_fn, read_fn

    master = spark.sparkContext.master
    name = "MAP" + ("CLUSTER" if "cluster" in master else "LOCAL")
    client.create_stream(name, subjects=[f"{name}.>"])
    df = spark.range(0, 1_000, numPartitions=2).selectExpr(
        f"'{name}.x' AS subject", "CAST(CONCAT('r', CAST(id AS STRING)) AS BINARY) AS data"
    )
    acks = df.mapInArrow(publish_fn(servers=server.url), ACK_SCHEMA).collect()
    assert len(acks) == 1_000
    assert all(a.error is None for a in acks)
    ranges = spark.createDataFrame(
        [(name, 1, 500), (name, 501, None)], "stream string, start_seq bigint, end_seq bigint"
    )
    back = ranges.repartition(2).mapInArrow(read_fn(servers=server.url), message_schema())
    assert sorted(r.seq for r in back.collect()) == list(range(1, 1_001))


def test_workers_without_the_package_fail_at_once_in_one_line(tmp_path: Path) -> None:
    """The driver runs this interpreter, but Spark's workers would run ``python3`` from
    PATH, a bare interpreter: ``publish_fn`` refuses before any task starts."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    driver = tmp_path / "driver.py"
    driver.write_text(
        textwrap.dedent(
            """
            from pyspark.sql import SparkSession
            from jetstream_arrow.spark import publish_fn
            spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
            try:
                publish_fn(servers="nats://127.0.0.1:1")
            finally:
                spark.stop()
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    # python3 on PATH is the bare interpreter; java and the rest stay reachable.
    env["PATH"] = os.pathsep.join([str(bare / "bin"), env.get("PATH", "")])
    run = subprocess.run(
        [sys.executable, str(driver)], env=env, capture_output=True, text=True, timeout=240
    )
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("jetstream_arrow.exceptions.SparkSetupError: "), run.stderr[-2000:]
    assert str(bare / "bin" / "python3") in last
    assert "cannot import jetstream_arrow" in last
    assert "PYSPARK_PYTHON" in last
