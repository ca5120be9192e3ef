"""format("jetstream") and the mapInArrow helpers through Spark Connect.

A local Spark Connect server (Spark's own ``SparkConnectServer`` on ``local[2]``, bound
to loopback on a free port, with a token) runs in a process of its own for the whole
module, as a Spark Connect endpoint does for its clients; its Python workers run this
interpreter. The tests talk to it through a client session of
``sc://localhost:<port>``, which a classic SparkSession of this process (the other
Spark tests' ``spark`` fixture) does not get in the way of: what the data source and
the helpers do runs server-side, as on a shared cluster. One test runs
``SparkSession.builder.remote("local[2]")`` itself, in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conftest_spark import TESTS, make_stream, publish, run_available_now, stream_table
from jetstream_arrow.spark import ACK_SCHEMA, message_schema, publish_fn, read_fn

pytestmark = pytest.mark.spark

#: Seconds the server may take to accept connections (a JVM start on a busy machine).
SERVER_START_TIMEOUT = 180


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ConnectServer:
    """``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``
    with ``local[2]``, in a process group of its own (its Python workers included)."""

    def __init__(self, workdir: Path, port: int) -> None:
        import pyspark

        self.port = port
        self.token = uuid.uuid4().hex
        self.log_path = workdir / f"connect-server-{port}.log"
        spark_home = Path(pyspark.__file__).parent
        env = dict(os.environ)
        for var in ("SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
            env.pop(var, None)
        path = env.get("PYTHONPATH", "")
        env.update(
            SPARK_HOME=str(spark_home),
            PYSPARK_PYTHON=sys.executable,
            PYTHONPATH=os.pathsep.join(p for p in (str(TESTS), path) if p),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_CONNECT_AUTHENTICATE_TOKEN=self.token,
        )
        conf = {
            "spark.master": "local[2,4]",
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.memory": "1g",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.session.timeZone": "UTC",
            "spark.pyspark.python": sys.executable,
            "spark.local.dir": str(workdir),
        }
        args = [str(spark_home / "bin" / "spark-submit")]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        args += [
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "spark-internal",
        ]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                args,
                env=env,
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        # Its own log says it listens: a port taken meanwhile by another process would
        # accept connections as well (the server then exits with a BindException).
        started = f"Spark Connect server started at: 127.0.0.1:{self.port}"
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if started in self.log_text():
                return
            if self.process.poll() is not None:
                raise ServerStartError(
                    f"the Spark Connect server exited with {self.process.returncode}:\n"
                    + self.log_tail(),
                    port_taken="java.net.BindException" in self.log_text(),
                )
            time.sleep(0.25)
        raise ServerStartError(
            f"the Spark Connect server did not start within {SERVER_START_TIMEOUT} s:\n"
            + self.log_tail()
        )

    @property
    def url(self) -> str:
        # "localhost" (not an address): the client then sends the token over a local
        # channel without TLS.
        return f"sc://localhost:{self.port}/;token={self.token}"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:]) or "(no log)"

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(30)


class ServerStartError(AssertionError):
    def __init__(self, message: str, port_taken: bool = False) -> None:
        super().__init__(message)
        self.port_taken = port_taken


def start_connect_server(workdir: Path, attempts: int = 3) -> ConnectServer:
    """A ConnectServer on a free port; another port when one was taken before the
    server bound it."""
    for attempt in range(attempts):
        try:
            return ConnectServer(workdir, _free_port())
        except ServerStartError as e:
            if not e.port_taken or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def connect_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark Connect client session of a local server, for the module."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    server = start_connect_server(tmp_path_factory.mktemp("spark-connect"))
    # pyspark.sql.functions build Connect columns while this is set (the classic
    # builder sets it for a remote session; the Connect builder, used here because a
    # classic session of this process may exist, does not).
    mode = "SPARK_CONNECT_MODE_ENABLED"
    was = os.environ.get(mode)
    os.environ[mode] = "1"
    session = None
    try:
        session = ConnectSession.builder.remote(server.url).create()
        yield session
    finally:
        if session is not None:
            session.stop()
        if was is None:
            os.environ.pop(mode, None)
        else:
            os.environ[mode] = was
        server.stop()


#: Run in a fresh interpreter by the test below: ``remote("local[2]")`` starts the
#: server inside the calling process, which refuses to while a classic session runs
#: there (``SESSION_ALREADY_EXIST``), as the other Spark tests' session may in this one.
#: SPARK_TESTING makes pyspark bind the server to a free port rather than 15002.
_REMOTE_LOCAL_JOB = """
import json, sys
from pyspark.sql import SparkSession, functions as F
from jetstream_arrow.spark import ACK_SCHEMA, publish_fn

url, source, target = sys.argv[1:4]
spark = (
    SparkSession.builder.remote("local[2]")
    .config("spark.connect.grpc.binding.address", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
read = spark.read.format("jetstream").option("servers", url).load(source)
rows = [[r.seq, r.subject, bytes(r.data).decode()] for r in read.collect()]
out = spark.range(0, 8, 1, 2).select(
    F.lit(target + ".x").alias("subject"), F.col("id").cast("string").alias("data")
)
out.write.format("jetstream").option("servers", url).mode("append").save()
acks = out.mapInArrow(publish_fn(servers=url, subject=target + ".y"), ACK_SCHEMA).collect()
print("RESULT " + json.dumps({
    "session": type(spark).__module__, "rows": rows, "acks": sorted(a.seq for a in acks)
}))
spark.stop()
"""


@pytest.mark.slow
def test_remote_local_in_a_fresh_interpreter(
    shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url, source, target = shared_nats_server.url, unique_name("CL"), unique_name("CO")
    make_stream(url, source)
    make_stream(url, target)
    publish(url, source, 12)
    env = dict(os.environ)
    for var in ("SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        env.pop(var, None)
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_TESTING="1", SPARK_LOCAL_IP="127.0.0.1")
    job = subprocess.run(
        [sys.executable, "-c", _REMOTE_LOCAL_JOB, url, source, target],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        # Less than pytest's own timeout, so that a hang shows the job's output.
        timeout=240,
    )
    found = [line for line in job.stdout.splitlines() if line.startswith("RESULT ")]
    assert job.returncode == 0 and found, job.stdout[-3000:] + job.stderr[-5000:]
    result = json.loads(found[-1][len("RESULT ") :])
    assert result["session"] == "pyspark.sql.connect.session"
    assert sorted(result["rows"]) == [
        [i + 1, f"{source}.{'ab'[i % 2]}", f"m{i}"] for i in range(12)
    ]
    assert result["acks"] == list(range(9, 17))
    stored = stream_table(url, target).to_pylist()
    assert Counter((m["subject"], m["data"]) for m in stored) == Counter(
        [(f"{target}.x", str(i).encode()) for i in range(8)]
        + [(f"{target}.y", str(i).encode()) for i in range(8)]
    )


def _is_connect(session: Any) -> None:
    assert type(session).__module__ == "pyspark.sql.connect.session"


def test_batch_read_returns_every_message(
    connect_spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    from pyspark.sql import functions as F

    url, name = shared_nats_server.url, unique_name("CR")
    make_stream(url, name)
    publish(url, name, 40)
    table = stream_table(url, name)
    published = table.to_pylist()
    # Epoch microseconds, whatever time zone the client or the server is in.
    micros = table.column("timestamp").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    _is_connect(connect_spark)

    df = (
        connect_spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", name)
        .option("minPartitions", 3)
        .load()
    )
    assert df.schema.simpleString() == message_schema().simpleString()
    rows = sorted(df.withColumn("ts", F.unix_micros("timestamp")).collect(), key=lambda r: r.seq)
    assert len(rows) == 40
    for row, message, ts in zip(rows, published, micros.to_pylist(), strict=True):
        assert row.stream == name
        assert row.seq == message["seq"]
        assert row.subject == message["subject"]
        assert bytes(row.data) == message["data"]
        assert row.ts == ts
    assert [bytes(r.data) for r in rows] == [f"m{i}".encode() for i in range(40)]
    assert [r.subject for r in rows] == [f"{name}.{'ab'[i % 2]}" for i in range(40)]


def test_batch_write_stores_every_row_once(
    connect_spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    from pyspark.sql import functions as F

    url, name = shared_nats_server.url, unique_name("CW")
    make_stream(url, name)
    df = connect_spark.range(0, 30, 1, 3).select(
        F.concat(F.lit(f"{name}."), (F.col("id") % 3).cast("string")).alias("subject"),
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("data"),
    )
    df.write.format("jetstream").mode("append").option("servers", url).save()

    stored = stream_table(url, name).to_pylist()
    assert len(stored) == 30
    assert Counter((m["subject"], m["data"]) for m in stored) == Counter(
        (f"{name}.{i % 3}", f"row-{i}".encode()) for i in range(30)
    )
    assert sorted(m["seq"] for m in stored) == list(range(1, 31))


def test_a_streaming_copy_continues_from_its_checkpoint(
    connect_spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Path
) -> None:
    url = shared_nats_server.url
    source, target = unique_name("CS"), unique_name("CT")
    make_stream(url, source)
    make_stream(url, target)
    checkpoint = str(tmp_path / "checkpoint")

    def run() -> None:
        copy = (
            connect_spark.readStream.format("jetstream")
            .option("servers", url)
            .option("stream", source)
            .option("startingOffsets", "earliest")
            .load()
        )
        writer = (
            copy.writeStream.format("jetstream")
            .option("servers", url)
            .option("subject", f"{target}.copy")
            .option("checkpointLocation", checkpoint)
        )
        run_available_now(writer)

    def copied() -> list[bytes]:
        return [m["data"] for m in stream_table(url, target).to_pylist()]

    publish(url, source, 20)
    run()
    assert sorted(copied()) == sorted(f"m{i}".encode() for i in range(20))

    publish(url, source, 15, start=20)
    run()
    data = copied()
    assert len(data) == 35, "a message was copied twice or not at all"
    assert Counter(data) == Counter(f"m{i}".encode() for i in range(35))
    assert {m["subject"] for m in stream_table(url, target).to_pylist()} == {f"{target}.copy"}


def test_map_in_arrow_helpers(
    connect_spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    from pyspark.sql import functions as F

    url, name = shared_nats_server.url, unique_name("CM")
    make_stream(url, name)
    df = connect_spark.range(0, 24, 1, 2).select(
        F.concat(F.lit(f"{name}."), (F.col("id") % 2).cast("string")).alias("subject"),
        F.col("id").cast("string").alias("data"),
    )
    acks = df.mapInArrow(publish_fn(servers=url, write_id="connect-1"), ACK_SCHEMA).collect()
    assert len(acks) == 24
    assert all(a.error is None and a.duplicate is False for a in acks)
    assert sorted(a.seq for a in acks) == list(range(1, 25))
    again = df.mapInArrow(publish_fn(servers=url, write_id="connect-1"), ACK_SCHEMA).collect()
    assert all(a.duplicate for a in again)

    stored = {m["seq"]: m for m in stream_table(url, name).to_pylist()}
    assert len(stored) == 24
    assert Counter(m["data"] for m in stored.values()) == Counter(
        str(i).encode() for i in range(24)
    )

    ranges = connect_spark.createDataFrame(
        [(name, 1, 10), (name, 11, None)], "stream string, start_seq bigint, end_seq bigint"
    ).repartition(2)
    read = ranges.mapInArrow(read_fn(servers=url), message_schema()).collect()
    assert sorted(r.seq for r in read) == list(range(1, 25))
    for row in read:
        assert row.subject == stored[row.seq]["subject"]
        assert bytes(row.data) == stored[row.seq]["data"]


def test_register_accepts_a_connect_session(
    connect_spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    import jetstream_arrow.spark as js
    from jetstream_arrow.spark.preflight import is_connect_session

    assert is_connect_session(connect_spark)
    # Registered through the session (the class is sent to the server), the format
    # reads as the one the server found by itself.
    js.register(connect_spark)
    url, name = shared_nats_server.url, unique_name("CG")
    make_stream(url, name)
    publish(url, name, 5)
    df = connect_spark.read.format("jetstream").option("servers", url).load(name)
    assert sorted(bytes(r.data) for r in df.collect()) == [f"m{i}".encode() for i in range(5)]


def test_an_error_reaches_the_client_with_the_package_message(
    connect_spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    from pyspark.errors import PySparkException

    url, name = shared_nats_server.url, unique_name("CE")
    make_stream(url, name)
    reader = (
        connect_spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", name)
        .option("startingSequnce", 1)
    )
    with pytest.raises(PySparkException) as excinfo:
        reader.load().collect()
    assert type(excinfo.value).__module__ == "pyspark.errors.exceptions.connect"
    text = str(excinfo.value)
    # Spark hands a data source its option names in lower case.
    assert "'startingsequnce'" in text and "did you mean 'startingSequence'" in text, text
