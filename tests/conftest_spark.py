"""The Spark tests' session (local[2]) and helpers; imported by the Spark tests.

One SparkSession serves the whole test session (a JVM start takes seconds). Python
workers run this interpreter, with tests/ on their path so functions defined in test
modules (``spark.test_...``: the folders of tests/ are packages) unpickle there. Task failures are retried (``local[2,4]``: two threads, four
attempts per task), as on a cluster.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from drivers.driver_session import spark_session

TESTS = Path(__file__).resolve().parent


def _spark_errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JJavaError)


#: What a failed Spark action raises (planning errors, task errors, JVM errors).
SPARK_ERRORS = _spark_errors()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    path = os.environ.get("PYTHONPATH", "")
    if str(TESTS) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), path) if p)
    session = spark_session(
        "jetstream-arrow-tests", "local[2,4]", **{"spark.default.parallelism": "2"}
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def pushdown(spark: Any) -> Iterator[Any]:
    """The session with Python filter pushdown on, for one test."""
    key = "spark.sql.python.filterPushdown.enabled"
    spark.conf.set(key, "true")
    try:
        yield spark
    finally:
        spark.conf.set(key, "false")


def make_stream(url: str, name: str, **config: Any) -> None:
    """A stream ``name`` on subjects ``<name>.>``."""
    with ja.connect(url) as client:
        client.create_stream(name, subjects=[f"{name}.>"], **config)


def publish(
    url: str, name: str, count: int, subjects: tuple[str, ...] = ("a", "b"), start: int = 0
) -> None:
    """``count`` messages on ``<name>.<subject>`` (round robin), payload ``m<i>``."""
    rows = range(start, start + count)
    table = pa.table(
        {
            "subject": [f"{name}.{subjects[i % len(subjects)]}" for i in rows],
            "data": [f"m{i}".encode() for i in rows],
        }
    )
    with ja.connect(url) as client:
        result = client.publish(table)
    assert result.stored == count


def stream_table(url: str, name: str, include_headers: bool = False) -> pa.Table:
    """Everything in the stream, read with the engine (not through Spark)."""
    with ja.connect(url) as client:
        return client.read(name, include_headers=include_headers).read_all()


def read_df(spark: Any, url: str, name: str, /, **options: Any) -> Any:
    reader = spark.read.format("jetstream").option("servers", url).option("stream", name)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


#: Seconds a streaming query may run before the test fails.
QUERY_TIMEOUT = 240


def read_stream(spark: Any, url: str, name: str, /, **options: Any) -> Any:
    """``spark.readStream.format("jetstream")`` of stream ``name`` with ``options``."""
    reader = spark.readStream.format("jetstream").option("servers", url).option("stream", name)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(writer: Any) -> Any:
    """Start ``writer`` with trigger(availableNow=True) and wait until the query has
    processed what was available; raises what the query failed with."""
    query = writer.trigger(availableNow=True).start()
    try:
        if not query.awaitTermination(QUERY_TIMEOUT):
            raise AssertionError(f"the streaming query did not finish in {QUERY_TIMEOUT} s")
    finally:
        query.stop()
    return query


def error_text(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """The whole text of an error raised through Spark (Python traceback included)."""
    err = excinfo.value
    parts = [str(err)]
    desc = getattr(err, "desc", None)
    if desc:
        parts.append(str(desc))
    java = getattr(err, "java_exception", None)
    if java is not None:
        parts.append(str(java))
    return "\n".join(parts)


def seqs(offset: Any) -> Any:
    """A stream reader's offset without the streams' creation times (``created``,
    a stream's identity, which a test does not know in advance)."""
    if isinstance(offset, dict):
        return {k: seqs(v) for k, v in offset.items() if k != "created"}
    return offset
