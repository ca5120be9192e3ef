"""A Spark write into a KV bucket (option ``kv``), checked with nats-py's KV API:
compression is refused, since no KV client decompresses a value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from nats.js.errors import KeyNotFoundError

from conftest_spark import SPARK_ERRORS, error_text, spark
from natspy import with_jetstream

pytestmark = pytest.mark.spark
__all__ = ["spark"]


def test_a_kv_write_refuses_compression_and_stores_nothing(
    spark: Any, shared_nats_server: Any, unique_name: Callable[[str], str]
) -> None:
    url, bucket = shared_nats_server.url, unique_name("kvz").lower()
    with_jetstream(url, lambda js: js.create_key_value(bucket=bucket))
    df = spark.createDataFrame([("k", "v" * 100)], "key string, value string")
    with pytest.raises(SPARK_ERRORS) as excinfo:
        (
            df.write.format("jetstream")
            .mode("append")
            .option("servers", url)
            .option("kv", bucket)
            .option("compression", "zstd")
            .save()
        )
    assert "option 'kv' and option 'compression' exclude each other" in error_text(excinfo)

    async def get(js: Any) -> bytes | None:
        kv = await js.key_value(bucket)
        try:
            return (await kv.get("k")).value  # type: ignore[no-any-return]
        except KeyNotFoundError:
            return None

    assert with_jetstream(url, get) is None
    # Without compression the value is what a KV client reads.
    df.write.format("jetstream").mode("append").option("servers", url).option("kv", bucket).save()
    assert with_jetstream(url, get) == b"v" * 100
