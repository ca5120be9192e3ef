"""What every Spark driver of the fault tests shares: its session, and running its
streaming query until the test kills the process."""

from __future__ import annotations

import os
import sys
import time
from typing import Any


def spark_session(app_name: str) -> Any:
    """A local[2] session whose Python workers run this interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
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
