"""Mode ``deadletter`` (option ``deadLetterStream``) on spark.read, spark.readStream and
read_fn, against a real nats-server and a local[2] session: the rows hold exactly the
payloads that decode, the dead-letter stream exactly the others (bytes, error and
source in headers), and a read run again adds nothing to it (msg ids)."""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from conftest_spark import (
    SPARK_ERRORS,
    error_text,
    make_stream,
    read_df,
    read_stream,
    run_available_now,
    spark,
)
from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.sink.dead_letters import (
    ERROR_HEADER,
    SOURCE_SEQ_HEADER,
    SOURCE_STREAM_HEADER,
    SOURCE_SUBJECT_HEADER,
)
from jetstream_arrow.spark import read_fn

pytestmark = pytest.mark.spark
__all__ = ["spark"]

COUNT = 200
#: Message index -> a payload that does not decode as {"id": int, "name": string}.
BAD = {
    6: b"{oops",
    70: b'{"id": "seventy", "name": "n70"}',
    71: b"\xff\xfe not utf-8",
    199: b"[1, 2]",
}
SCHEMA = "seq LONG, value STRUCT<id: INT, name: STRING>"
VALUE = pa.schema([("id", pa.int32()), ("name", pa.string())])
VALUE_SCHEMA_JSON = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "integer", "nullable": True, "metadata": {}},
            {"name": "name", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def source_with_bad_payloads(url: str, name: str) -> None:
    payloads = [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(COUNT)]
    for i, payload in BAD.items():
        payloads[i] = payload
    make_stream(url, name)
    with ja.connect(url) as client:
        subjects = [f"{name}.{'ab'[i % 2]}" for i in range(COUNT)]
        client.publish(pa.table({"subject": subjects, "data": payloads}))


def decoded_permissively(url: str, name: str) -> pa.Table:
    """The stream as the client reads it in mode permissive: what Spark must match."""
    codec = ja.ValueCodec(format="json", schema=VALUE, on_malformed="permissive")
    with ja.connect(url) as client, client.read(name, codec=codec) as reader:
        return reader.read_all()


def good_rows(url: str, name: str) -> list[tuple[int, dict[str, Any]]]:
    table = decoded_permissively(url, name)
    corrupt = table.column("_corrupt_record").to_pylist()
    return [
        (seq, value)
        for seq, value, bad in zip(
            table.column("seq").to_pylist(),
            table.column("value").to_pylist(),
            corrupt,
            strict=True,
        )
        if bad is None
    ]


def dead_letters_in(url: str, dead: str) -> pa.Table:
    with ja.connect(url) as client:
        if client.stream_info(dead).state.messages == 0:
            return pa.table({"headers": pa.array([], pa.null()), "data": pa.array([], pa.binary())})
        with client.read(dead, include_headers=True) as reader:
            return reader.read_all()


def assert_dead_letters_are_the_bad_payloads(url: str, name: str, dead: str) -> None:
    letters = dead_letters_in(url, dead)
    headers = letters.column("headers").to_pylist()
    got = sorted(
        (int(dict(h)[SOURCE_SEQ_HEADER][0]), payload)
        for h, payload in zip(headers, letters.column("data").to_pylist(), strict=True)
    )
    assert got == sorted((i + 1, payload) for i, payload in BAD.items())
    readers = set()
    for h in headers:
        h = dict(h)
        seq = int(h[SOURCE_SEQ_HEADER][0])
        assert h[SOURCE_STREAM_HEADER] == [name]
        assert h[SOURCE_SUBJECT_HEADER] == [f"{name}.{'ab'[(seq - 1) % 2]}"]
        # <stream>:<seq>:<reader>, the reader a digest of Spark and the stream's creation.
        (msg_id,) = h["Nats-Msg-Id"]
        assert re.fullmatch(rf"{re.escape(name)}:{seq}:[0-9a-f]{{16}}", msg_id), msg_id
        readers.add(msg_id.rsplit(":", 1)[1])
        assert h[ERROR_HEADER][0]
    assert len(readers) == 1, readers


def streams(url: str, unique_name: Any) -> tuple[str, str]:
    name, dead = unique_name("DLS"), unique_name("DLQ")
    source_with_bad_payloads(url, name)
    make_stream(url, dead)
    return name, dead


def test_a_batch_read_yields_the_good_rows_and_dead_letters_the_others(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url = shared_nats_server.url
    name, dead = streams(url, unique_name)

    df = read_df(
        spark,
        url,
        name,
        valueFormat="json",
        valueSchema=VALUE_SCHEMA_JSON,
        mode="deadletter",
        deadLetterStream=dead,
        minPartitions=3,
    )
    assert "_corrupt_record" not in df.columns
    rows = [(r.seq, r.value.asDict()) for r in df.select("seq", "value").collect()]
    assert sorted(rows) == good_rows(url, name)
    assert len(rows) == COUNT - len(BAD)
    assert_dead_letters_are_the_bad_payloads(url, name, dead)


def test_a_read_run_again_or_by_read_fn_adds_no_dead_letter(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url = shared_nats_server.url
    name, dead = streams(url, unique_name)
    # The value's fields as columns, without the stream and subject columns the dead
    # letters' headers are taken from.
    df = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", name)
        .option("valueFormat", "json")
        .option("mode", "deadletter")
        .option("deadLetterStream", dead)
        .option("minPartitions", 2)
        .schema("seq LONG, id INT, name STRING")
        .load()
    )
    first = sorted(tuple(r) for r in df.collect())
    assert first == [(seq, v["id"], v["name"]) for seq, v in good_rows(url, name)]
    # A rerun stands for a task's retry: the same messages again.
    assert sorted(tuple(r) for r in df.collect()) == first

    fn = read_fn(
        servers=url,
        stream=name,
        value_format="json",
        value_schema=VALUE_SCHEMA_JSON,
        mode="deadletter",
        dead_letter_stream=dead,
    )
    ranges = spark.createDataFrame([(1, 100), (101, None)], "start_seq LONG, end_seq LONG")
    output = "stream STRING, subject STRING, seq LONG, timestamp TIMESTAMP, value STRUCT<id: INT, name: STRING>"
    got = ranges.mapInArrow(fn, output).select("seq", "value").collect()
    assert sorted((r.seq, r.value.asDict()) for r in got) == good_rows(url, name)

    assert_dead_letters_are_the_bad_payloads(url, name, dead)


def test_a_streaming_query_dead_letters_each_bad_payload_once(
    spark: Any, shared_nats_server: Any, unique_name: Any, tmp_path: Any
) -> None:
    url = shared_nats_server.url
    name, dead = streams(url, unique_name)

    def run(query: str, checkpoint: str) -> list[tuple[int, dict[str, Any]]]:
        stream = read_stream(
            spark,
            url,
            name,
            valueFormat="json",
            valueSchema=VALUE_SCHEMA_JSON,
            mode="deadletter",
            deadLetterStream=dead,
            startingOffsets="earliest",
            maxMessagesPerTrigger=60,
        )
        run_available_now(
            stream.select("seq", "value")
            .writeStream.format("memory")
            .queryName(query)
            .option("checkpointLocation", str(tmp_path / checkpoint))
        )
        return sorted(
            (r.seq, r.value.asDict()) for r in spark.sql(f"SELECT * FROM {query}").collect()
        )

    assert run(f"q1_{name}", "cp1") == good_rows(url, name)
    assert_dead_letters_are_the_bad_payloads(url, name, dead)
    # A new checkpoint reads every micro-batch again: no dead letter twice.
    assert run(f"q2_{name}", "cp2") == good_rows(url, name)
    assert_dead_letters_are_the_bad_payloads(url, name, dead)


def test_dead_letter_options_are_refused_naming_them(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url = shared_nats_server.url
    name, dead = streams(url, unique_name)
    value = {"valueFormat": "json", "valueSchema": VALUE_SCHEMA_JSON}

    def refused(reader: Any, *names: str) -> None:
        with pytest.raises(SPARK_ERRORS) as failed:
            reader()
        text = error_text(failed)
        for option in names:
            assert option in text, text

    refused(
        lambda: read_df(spark, url, name, mode="deadletter", **value).collect(),
        "'mode'",
        "'deadletter'",
        "'deadLetterStream'",
    )
    refused(
        lambda: read_df(
            spark, url, name, mode="permissive", deadLetterStream=dead, **value
        ).collect(),
        "'deadLetterStream'",
        "'mode'",
    )
    missing = unique_name("NODLQ")
    refused(
        lambda: read_df(
            spark, url, name, mode="deadletter", deadLetterStream=missing, **value
        ).collect(),
        "'deadLetterStream'",
        missing,
        "no such stream",
    )
    refused(
        lambda: read_df(
            spark, url, name, mode="deadletter", deadLetterStream=name, **value
        ).collect(),
        "'deadLetterStream'",
        "a stream the read reads",
    )
    # A streaming query is refused when it starts, as the batch read when it is planned.
    refused(
        lambda: run_available_now(
            read_stream(spark, url, name, mode="deadletter", deadLetterStream=missing, **value)
            .writeStream.format("memory")
            .queryName(f"refused_{name}")
        ),
        "'deadLetterStream'",
        "no such stream",
    )
    # read_fn refuses when it is made, before any task.
    for options, names in (
        ({"mode": "deadletter"}, ("'deadLetterStream'",)),
        ({"mode": "dropmalformed", "dead_letter_stream": dead}, ("'deadLetterStream'", "'mode'")),
        ({"mode": "deadletter", "dead_letter_stream": name}, ("'deadLetterStream'",)),
    ):
        with pytest.raises(BadInputError) as failed:
            read_fn(
                servers=url,
                stream=name,
                value_format="json",
                value_schema=VALUE_SCHEMA_JSON,
                **options,
            )
        assert all(n in str(failed.value) for n in names), str(failed.value)
    # Nothing was published by any of them.
    assert dead_letters_in(url, dead).num_rows == 0


def test_a_refused_dead_letter_fails_the_read_and_its_rerun_adds_each_once(
    spark: Any, shared_nats_server: Any, unique_name: Any
) -> None:
    url = shared_nats_server.url
    name, dead = unique_name("DLS"), unique_name("DLQ")
    source_with_bad_payloads(url, name)
    # Room for two of the four dead letters: the third publish is refused.
    make_stream(url, dead, max_msgs=2, discard="new")
    options = {
        "valueFormat": "json",
        "valueSchema": VALUE_SCHEMA_JSON,
        "mode": "deadletter",
        "deadLetterStream": dead,
    }

    with pytest.raises(SPARK_ERRORS) as failed:
        read_df(spark, url, name, **options).collect()
    assert "'deadLetterStream'" in error_text(failed)
    assert dead_letters_in(url, dead).num_rows == 2

    with ja.connect(url) as client:
        client.create_or_update_stream(dead, [f"{dead}.>"], max_msgs=-1, discard="new")
    rows = read_df(spark, url, name, **options).select("seq", "value").collect()
    assert sorted((r.seq, r.value.asDict()) for r in rows) == good_rows(url, name)
    # The two stored by the failed attempts are duplicates now: each bad payload once.
    assert_dead_letters_are_the_bad_payloads(url, name, dead)
