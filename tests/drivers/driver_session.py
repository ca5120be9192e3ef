"""What every Spark session of the tests shares (the session fixture, the drivers the
fault tests start and their jobs), and running a driver's streaming query until the
test kills the process."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

#: The settings every test's Spark session shares: no UI, two shuffle partitions, a
#: 1 GiB driver, times shown in UTC, Python workers running this interpreter.
SHARED_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
    "spark.pyspark.python": sys.executable,
}


def spark_session(app_name: str, master: str = "local[2]", **config: str) -> Any:
    """A session on ``master`` with :data:`SHARED_CONFIG` and ``config`` (Spark keys
    with dots are given as a dict: ``**{"spark.x": "1"}``); the one way the tests, the
    drivers they start and their jobs make a session."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**SHARED_CONFIG, **config}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_until_killed(writer: Any, checkpoint: str) -> None:
    """Start ``writer`` from ``checkpoint`` and keep it running; the test kills the
    process. A query that stops by itself is an error."""
    query = (
        writer.option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    print("query started", flush=True)
    while query.isActive:
        time.sleep(0.5)
    raise SystemExit(f"the query stopped: {query.exception()}")
