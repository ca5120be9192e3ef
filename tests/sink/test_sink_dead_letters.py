"""Dead letters of compressed payloads can be read: a payload still compressed as
stored (it does not decompress, or the connection does not decompress) keeps its
``Content-Encoding`` header in the letter, and one the read decompressed goes plain.
Letters are read back with nats-py and decompressed with ``zstandard``; the lake sink
and Spark's ``deadletter`` mode make the same letters."""

from __future__ import annotations

from typing import Any

import pytest
import zstandard
from pyspark.sql.types import LongType, StructField, StructType

import jetstream_arrow as ja
from conftest_spark import read_df, spark
from natspy import with_jetstream

#: The Spark session fixture, used by name.
__all__ = ["spark"]

GOOD = b'{"a": 1}'
#: Decompresses, but is no JSON object: its letter is the decompressed bytes.
NOT_JSON = b"not json"
#: Marked zstd, but no zstd frame: its letter is the stored bytes, still marked.
BROKEN = b"\x28\xb5\x2f\xfd broken frame"
VALUE = StructType([StructField("a", LongType(), True)])


def _publish(url: str, stream: str) -> None:
    zstd = zstandard.ZstdCompressor()

    async def work(js: Any) -> None:
        await js.add_stream(name=stream, subjects=[f"{stream.lower()}.>"])
        marked = {"Content-Encoding": "zstd"}
        for payload in (zstd.compress(GOOD), zstd.compress(NOT_JSON), BROKEN):
            await js.publish(f"{stream.lower()}.x", payload, headers=marked)

    with_jetstream(url, work)


def _letters(url: str, dead: str) -> dict[int, tuple[bytes, str | None]]:
    """Each letter by its source sequence: its payload and Content-Encoding."""

    async def work(js: Any) -> dict[int, tuple[bytes, str | None]]:
        count = (await js.stream_info(dead)).state.messages
        letters = {}
        for seq in range(1, count + 1):
            msg = await js.get_msg(dead, seq)
            headers = msg.headers or {}
            source = int(headers["Jetstream-Arrow-Source-Seq"])
            letters[source] = (msg.data, headers.get("Content-Encoding"))
        return letters

    return with_jetstream(url, work)


def _dead_letter_stream(client: ja.Client, name: str) -> None:
    client.create_stream(name, [f"{name.lower()}.>"])


def test_a_letter_keeps_the_content_encoding_its_payload_still_has(
    shared_nats_server, unique_name, tmp_path
):
    url, stream = shared_nats_server.url, unique_name("Z")
    _publish(url, stream)
    decompressed, as_stored = unique_name("DEAD"), unique_name("DEAD")
    with ja.connect(url) as client:
        _dead_letter_stream(client, decompressed)
        report = ja.run_sink(
            client,
            [stream],
            ja.ParquetTarget(tmp_path / "a"),
            codec="json",
            dead_letter_stream=decompressed,
        )
        assert report.dead_letters == 2 and report.rows == 1
    # The read decompressed seq 2: its letter is plain. Seq 3 did not decompress.
    assert _letters(url, decompressed) == {2: (NOT_JSON, None), 3: (BROKEN, "zstd")}

    with ja.connect(url, decompress=False) as client:
        _dead_letter_stream(client, as_stored)
        report = ja.run_sink(
            client,
            [stream],
            ja.ParquetTarget(tmp_path / "b"),
            codec="json",
            dead_letter_stream=as_stored,
        )
        assert report.dead_letters == 3 and report.rows == 0
    letters = _letters(url, as_stored)
    assert {seq: encoding for seq, (_, encoding) in letters.items()} == dict.fromkeys(
        (1, 2, 3), "zstd"
    )
    assert zstandard.ZstdDecompressor().decompress(letters[1][0]) == GOOD
    assert zstandard.ZstdDecompressor().decompress(letters[2][0]) == NOT_JSON
    assert letters[3][0] == BROKEN


@pytest.mark.spark
def test_spark_letters_keep_the_content_encoding_too(
    spark,
    shared_nats_server,
    unique_name,
):
    url, stream, dead = shared_nats_server.url, unique_name("Z"), unique_name("DEAD")
    _publish(url, stream)
    with ja.connect(url) as client:
        _dead_letter_stream(client, dead)
    rows = read_df(
        spark,
        url,
        stream,
        valueFormat="json",
        valueSchema=VALUE.json(),
        mode="deadletter",
        deadLetterStream=dead,
    ).collect()
    assert [r.seq for r in rows] == [1]
    assert _letters(url, dead) == {2: (NOT_JSON, None), 3: (BROKEN, "zstd")}


def test_two_sinks_sharing_a_dead_letter_stream_each_store_their_letters(
    shared_nats_server, unique_name, tmp_path
):
    url, stream, dead = shared_nats_server.url, unique_name("Z"), unique_name("DEAD")
    _publish(url, stream)
    with ja.connect(url) as client:
        _dead_letter_stream(client, dead)
        for name in ("a", "b", "a"):
            # Target a again: its letters are the ones it published, not stored twice.
            ja.run_sink(
                client,
                [stream],
                ja.DeltaTarget(tmp_path / name),
                codec="json",
                dead_letter_stream=dead,
            )

    async def ids(js: Any) -> list[tuple[int, str]]:
        count = (await js.stream_info(dead)).state.messages
        msgs = [await js.get_msg(dead, seq) for seq in range(1, count + 1)]
        return [
            (int(m.headers["Jetstream-Arrow-Source-Seq"]), m.headers["Nats-Msg-Id"]) for m in msgs
        ]

    stored = with_jetstream(url, ids)
    # Each of the two targets dead-letters seq 2 and 3, once, under ids of its own.
    assert sorted(seq for seq, _ in stored) == [2, 2, 3, 3], stored
    assert len({msg_id for _, msg_id in stored}) == 4, stored
    assert all(msg_id.startswith(f"{stream}:{seq}:") for seq, msg_id in stored), stored
