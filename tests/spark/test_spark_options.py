"""Spark option parsing: names in both spellings, clear errors, no secrets shown."""

from __future__ import annotations

import itertools
import pickle
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.spark.option_specs import CONNECT_SPECS, READ_SPECS, WRITE_SPECS
from jetstream_arrow.spark.options import parse_read_options, parse_write_options
from jetstream_arrow.spark.partitions import SequenceRange, split_range


def test_spark_and_python_spellings_are_the_same_option() -> None:
    spark = parse_read_options(
        {"STREAM": "ORDERS", "startingsequence": "5", "nkeySeed": "SUAX", "apiPrefix": "JS.x.API"}
    )
    python = parse_read_options(
        {"stream": "ORDERS", "start_seq": 5, "nkey_seed": "SUAX", "api_prefix": "JS.x.API"}
    )
    assert spark == python
    assert spark.start_seq == 5
    assert spark.connect.nkey_seed == "SUAX"
    assert spark.connect.js_api_prefix == "JS.x.API"


def test_every_connect_option_has_a_spark_name() -> None:
    names = {spec.spark for spec in CONNECT_SPECS}
    assert {
        "servers",
        "user",
        "password",
        "token",
        "creds",
        "nkeySeed",
        "tlsCa",
        "tlsCert",
        "tlsKey",
        "domain",
        "apiPrefix",
    } <= names
    opts = parse_read_options(
        {"stream": "S", "connectTimeout": "2.5", "maxReconnects": "3", "tlsRequired": "true"}
    )
    assert opts.connect.connect_timeout == 2.5
    assert opts.connect.max_reconnects == 3
    assert opts.connect.tls_required is True
    forever = parse_read_options({"stream": "S", "maxReconnects": "none"})
    assert forever.connect.max_reconnects is None


def test_read_defaults_and_types() -> None:
    opts = parse_read_options(
        {
            "stream": "S",
            "subjects": "a.*, b.>",
            "includeHeaders": "TRUE",
            "failOnDataLoss": "false",
            "minPartitions": "4",
            "startingTime": "2026-01-31T12:00:00Z",
        }
    )
    assert opts.subjects == ("a.*", "b.>")
    assert opts.include_headers is True
    assert opts.fail_on_data_loss is False
    assert opts.min_partitions == 4
    assert opts.start_time == datetime(2026, 1, 31, 12, tzinfo=timezone.utc)
    assert parse_read_options({"stream": "S"}).fail_on_data_loss is True
    assert parse_read_options({"path": "S"}).stream == "S"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "'stream'"),
        ({"stream": "a.b"}, "'stream'"),
        ({"stream": "S", "startingSequence": "abc"}, "'startingSequence'"),
        ({"stream": "S", "startingSequence": "0"}, "'startingSequence'"),
        ({"stream": "S", "startingSequence": "9", "endingSequence": "3"}, "'endingSequence'"),
        ({"stream": "S", "minPartitions": "-1"}, "'minPartitions'"),
        ({"stream": "S", "includeHeaders": "maybe"}, "'includeHeaders'"),
        ({"stream": "S", "startingTime": "yesterday"}, "'startingTime'"),
        ({"stream": "S", "startingTime": "2026-01-31T12:00:00"}, "'startingTime'"),
        ({"stream": "S", "startingSequence": "1", "startingTime": "0"}, "'startingTime'"),
        ({"stream": "S", "subjects": "a,,b"}, "'subjects'"),
        ({"stream": "S", "startingSequnce": "1"}, "'startingSequnce'"),
        ({"stream": "S", "domain": "hub", "apiPrefix": "X"}, "'domain'"),
    ],
)
def test_bad_read_options_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_read_options(options)
    assert named in str(excinfo.value)


@pytest.mark.parametrize("group", ["a.b", "x" * 17, "", "with space"])
def test_a_consumer_group_the_server_would_refuse_is_named(group: str) -> None:
    options = {"stream": "S", "consumer": "C", "consumerGroup": group}
    with pytest.raises(BadInputError, match="option 'consumerGroup'"):
        parse_read_options(options, queries="stream")
    ok = parse_read_options({**options, "consumerGroup": "a/b_c=d-9" + "x" * 7}, queries="stream")
    assert ok.consumer_group == "a/b_c=d-9xxxxxxx"


def test_write_options() -> None:
    opts = parse_write_options(
        {
            "servers": "nats://h:1",
            "subject": "x.y",
            "ackWindow": "100",
            "ackTimeout": "2",
            "maxRetries": "0",
            "stream": "ORDERS",
            "msgIdColumn": "id",
            "path": "ORDERS",
        }
    )
    assert opts.subject == "x.y"
    assert opts.window == 100
    assert opts.ack_timeout == 2.0
    assert opts.max_retries == 0
    assert opts.expected_stream == "ORDERS"
    assert opts.msg_id_column == "id"
    # Each write gets its own id unless one is given.
    assert parse_write_options({}).write_id != parse_write_options({}).write_id
    assert parse_write_options({"writeId": "job-7"}).write_id == "job-7"
    with pytest.raises(BadInputError, match="'ackWindow'"):
        parse_write_options({"ackWindow": "0"})
    assert parse_write_options({}).publisher_kwargs()["mode"] == "acked"
    assert parse_write_options({"publishMode": " Fast"}).publisher_kwargs()["mode"] == "fast"
    with pytest.raises(BadInputError, match="'publishMode' must be one of acked, fast"):
        parse_write_options({"publishMode": "batched"})
    with pytest.raises(BadInputError, match="'startingSequence'"):
        parse_write_options({"startingSequence": "1"})


def test_secrets_stay_out_of_repr_and_errors_but_survive_pickle() -> None:
    opts = parse_read_options(
        {
            "stream": "S",
            "user": "u",
            "password": "pw-SECRET-1",
            "token": "tok-SECRET-2",
            "nkeySeed": "SU-SECRET-3",
        }
    )
    for text in (
        repr(opts),
        str(opts),
        repr(parse_write_options({"password": "pw-SECRET-1", "user": "u"})),
    ):
        assert "SECRET" not in text
    copy = pickle.loads(pickle.dumps(opts))
    assert copy.connect.password == "pw-SECRET-1"
    with pytest.raises(BadInputError) as excinfo:
        parse_read_options({"stream": "S", "password": "pw-SECRET-1", "bogus": "1"})
    assert "SECRET" not in str(excinfo.value)


def test_split_range_sizes() -> None:
    ranges = split_range(1, 1000, 7, 10**9)
    assert len(ranges) == 7
    assert ranges[0].start == 1 and ranges[-1].end == 1000
    assert all(a.end + 1 == b.start for a, b in itertools.pairwise(ranges))
    assert max(r.end - r.start for r in ranges) - min(r.end - r.start for r in ranges) <= 1
    assert len(split_range(1, 1000, 1, 100)) == 10
    assert len(split_range(5, 7, 10, 100)) == 3  # never more partitions than sequences
    assert split_range(8, 7, 1, 100) == []
    assert "SECRET" not in repr(SequenceRange(0, 1, 2))


def _guide_rows() -> list[tuple[str, str, str]]:
    """The rows of the option tables of the Spark guide (docs/spark.md)."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "spark.md").read_text()
    options = guide[guide.index("\n## Options\n") :]
    options = options[: options.index("\n## ", 1)]
    return re.findall(r"^\| `(\w+)` \| `(\w+)` \| ([^|]+) \|", options, re.MULTILINE)


def _shown(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    return f"`{value}`"


def test_spark_guide_tables_match_the_options() -> None:
    rows = _guide_rows()
    specs = READ_SPECS + WRITE_SPECS
    assert [(p, s) for p, s, _ in rows] == [(spec.python, spec.spark) for spec in specs]
    for (_, spark_name, default), spec in zip(rows, specs, strict=True):
        assert default.strip() == _shown(spec.default), spark_name


def test_every_option_of_one_kind_of_query_says_why_to_the_other() -> None:
    """An option given to the kind of query it does not apply to is refused with the
    reason, whichever option it is."""
    for spec in READ_SPECS + WRITE_SPECS:
        if spec.queries == "both":
            continue
        other = "stream" if spec.queries == "batch" else "batch"
        value = {"bool": "true", "int": "1", "float": "1", "time": "0"}.get(spec.kind, "x")
        options = {"stream": "S", spec.spark: value}
        parse = parse_read_options if spec.scope == "read" else parse_write_options
        with pytest.raises(BadInputError, match=f"'{spec.spark}' applies to"):
            parse(options, queries=other)


def test_value_schema_is_refused_where_no_codec_would_read_it() -> None:
    """A read takes valueSchema with any valueFormat; a write only with avro and
    protobuf (a JSON or Arrow write encodes the DataFrame's own columns); neither
    without a valueFormat. Elsewhere it would be ignored, so it is refused."""
    schema = '{"type": "struct", "fields": []}'
    assert parse_read_options({"stream": "S", "valueFormat": "json", "valueSchema": schema})
    with pytest.raises(BadInputError, match=r"'valueSchema' is for valueFormat .*; no valueFormat"):
        parse_read_options({"stream": "S", "valueSchema": schema})
    for fmt in ("json", "arrow"):
        with pytest.raises(
            BadInputError,
            match=f"'valueSchema' is for valueFormat avro or protobuf; valueFormat is {fmt}",
        ):
            parse_write_options({"valueFormat": fmt, "valueSchema": schema})
    with pytest.raises(BadInputError, match=r"'valueSchema' is for .*; no valueFormat"):
        parse_write_options({"valueSchema": schema})
    avro = '{"type": "int"}'
    assert parse_write_options({"valueFormat": "avro", "valueSchema": avro}).value_schema == avro
