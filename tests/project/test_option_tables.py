"""Every native option is declared once, in the core, and exported as
``_core.OPTION_TABLES``: the Python dataclasses that cross to the core have exactly
its fields, their Literal choice types its choices, and the bounds Python states are
the table's."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow import _core, codec, options
from jetstream_arrow.exceptions import BadInputError

KINDS = {"count", "seconds", "bool", "text", "choice", "texts", "path", "time", "bytes", "number"}
KEYS = {"name", "kind", "default", "minimum", "maximum", "choices", "doc"}

DATACLASSES: dict[str, type] = {
    "connect": ja.ConnectOptions,
    "publish": ja.PublishOptions,
    "read": ja.ReadOptions,
    "consume": ja.ConsumeOptions,
    "follow": ja.FollowOptions,
    "push": ja.PushOptions,
    "fetch": ja.FetchOptions,
}


def table(key: str) -> dict[str, dict[str, Any]]:
    return {option["name"]: option for option in _core.OPTION_TABLES[key]}


def test_every_table_has_the_exported_shape() -> None:
    assert set(DATACLASSES) <= set(_core.OPTION_TABLES)
    for key, rows in _core.OPTION_TABLES.items():
        assert isinstance(rows, tuple) and rows, key
        for row in rows:
            assert set(row) == KEYS, (key, row)
            assert isinstance(row["name"], str) and row["name"].isidentifier(), row
            assert row["kind"] in KINDS, row
            assert isinstance(row["choices"], tuple), row
            assert all(isinstance(c, str) for c in row["choices"]), row
            assert bool(row["choices"]) == (row["kind"] == "choice"), row
            for bound in ("minimum", "maximum"):
                assert row[bound] is None or type(row[bound]) in (int, float), row
            assert isinstance(row["doc"], str) and row["doc"] and "\n" not in row["doc"], row
            assert row["doc"] == row["doc"].strip(), row
            if row["kind"] == "choice" and row["default"] is not None:
                assert row["default"] in row["choices"], row
            if row["kind"] in ("count", "seconds") and row["default"] is not None:
                assert row["minimum"] <= row["default"] <= row["maximum"], row


@pytest.mark.parametrize("key", sorted(DATACLASSES))
def test_each_dataclass_has_exactly_the_fields_of_its_table(key: str) -> None:
    fields = [f.name for f in dataclasses.fields(DATACLASSES[key])]
    assert fields == list(table(key))


@pytest.mark.parametrize("key", sorted(DATACLASSES))
def test_the_literal_choices_of_each_dataclass_are_its_tables(key: str) -> None:
    cls = DATACLASSES[key]
    hints = typing.get_type_hints(cls, vars(options))
    for name, row in table(key).items():
        literals = [
            arg for arg in typing.get_args(hints[name]) if typing.get_origin(arg) is typing.Literal
        ]
        if row["kind"] == "choice":
            assert len(literals) == 1, (name, hints[name])
            assert typing.get_args(literals[0]) == row["choices"], name
        else:
            assert not literals, name


def test_connect_defaults_are_the_tables() -> None:
    # ConnectOptions shows its defaults; the other dataclasses leave None, the core's.
    rows = table("connect")
    for f in dataclasses.fields(ja.ConnectOptions):
        assert f.default == rows[f.name]["default"], f.name


@pytest.mark.parametrize("key", sorted(set(DATACLASSES) - {"connect"}))
def test_the_other_dataclasses_leave_every_default_to_the_core(key: str) -> None:
    assert all(f.default is None for f in dataclasses.fields(DATACLASSES[key]))


def test_the_bounds_python_states_are_the_tables() -> None:
    publish = table("publish")
    assert publish["window"]["maximum"] == _core.MAX_WINDOW
    assert publish["max_retries"]["maximum"] == _core.MAX_RETRIES
    seconds = [
        row for rows in _core.OPTION_TABLES.values() for row in rows if row["kind"] == "seconds"
    ]
    assert seconds and all(row["maximum"] == _core.MAX_SECONDS for row in seconds)
    # The value formats' closed sets of names.
    assert tuple(_core.ON_MALFORMED_MODES) == typing.get_args(codec.OnMalformed)
    assert tuple(_core.AVRO_FRAMINGS) == typing.get_args(codec.AvroFraming)
    assert tuple(_core.VALUE_FORMATS) == typing.get_args(codec.ValueFormat)


def test_defaults_are_the_exported_defaults() -> None:
    assert table("publish")["window"]["default"] == _core.DEFAULT_WINDOW
    assert table("read")["method"]["default"] == _core.DEFAULT_READ_METHOD
    assert table("follow")["batch_wait"]["default"] == _core.DEFAULT_FOLLOW_BATCH_WAIT
    assert table("fetch")["max_messages"]["default"] == _core.DEFAULT_FETCH_MAX_MESSAGES
    assert table("push")["batch_rows"]["default"] == _core.DEFAULT_CONSUME_BATCH_ROWS
    assert table("connect")["max_reconnects"]["default"] == _core.DEFAULT_MAX_RECONNECTS


# -- the flat-keyword calls read their options dataclass as every other call ------------


def test_a_fetch_option_of_the_wrong_type_is_named(client: ja.Client, stream: str) -> None:
    client.create_consumer(stream, durable_name="c", ack_policy="explicit")
    consumer = client.pull_consumer(stream, "c")
    with pytest.raises(BadInputError, match="option 'max_messages' must be a whole number"):
        consumer.fetch("3")  # type: ignore[arg-type]
    with pytest.raises(BadInputError, match="option 'expires' must be a number, or None"):
        consumer.fetch(1, expires="soon")  # type: ignore[arg-type]
    with pytest.raises(BadInputError, match="option 'max_messages' must be at least 1"):
        consumer.fetch(0)


def test_a_follow_option_of_the_wrong_type_is_named(client: ja.Client, stream: str) -> None:
    with pytest.raises(BadInputError, match="option 'include_headers' must be True or False"):
        next(client.ordered_consumer(stream).messages(include_headers=1))  # type: ignore[arg-type]
    with pytest.raises(BadInputError, match="option 'batch_rows' must be at least 1"):
        next(client.ordered_consumer(stream).messages(batch_rows=0))


def test_a_follow_reads_from_its_start_time_and_one_subject(client: ja.Client, stream: str) -> None:
    client.publish(pa.table({"data": [b"a", b"b"]}), f"{stream}.one")
    client.publish(pa.table({"data": [b"c"]}), f"{stream}.two")
    messages = client.ordered_consumer(stream, f"{stream}.one", start_time=0.0).messages()
    try:
        batch = next(messages)
    finally:
        messages.close()  # type: ignore[attr-defined]
    assert batch.column("data").to_pylist() == [b"a", b"b"]


def test_a_dataclass_field_the_table_lacks_is_refused(client: ja.Client, stream: str) -> None:
    @dataclasses.dataclass(frozen=True)
    class Extended(ja.PushOptions):
        surprise: int | None = None

    client.create_consumer(stream, durable_name="p", deliver_subject=f"deliver.{stream}")
    native = client.push_consumer(stream, "p")._native
    with pytest.raises(BadInputError, match="push option 'surprise' is not known"):
        native.messages(Extended())


# -- the value codec: one table per format, what every format shares first ---------------

# The codec's fields that are no option values: its format, an Arrow schema, a map of
# Avro schemas (read beside the tables).
CODEC_VALUE_FIELDS = {"format", "schema", "avro_schemas_by_id"}


def test_each_value_format_has_a_table_that_starts_with_the_shared_settings() -> None:
    formats = list(_core.VALUE_FORMATS)
    assert set(formats) <= set(_core.OPTION_TABLES)
    shared = [row["name"] for row in _core.OPTION_TABLES[formats[0]]][:2]
    assert shared == ["on_malformed", "flatten"]
    for fmt in formats:
        assert [row["name"] for row in _core.OPTION_TABLES[fmt]][:2] == shared, fmt


def test_the_value_codec_has_exactly_the_settings_of_the_format_tables() -> None:
    names = {row["name"] for fmt in _core.VALUE_FORMATS for row in _core.OPTION_TABLES[fmt]}
    fields = {f.name for f in dataclasses.fields(ja.ValueCodec)}
    assert fields == names | CODEC_VALUE_FIELDS
    hints = typing.get_type_hints(ja.ValueCodec, vars(codec))
    for fmt in _core.VALUE_FORMATS:
        for row in _core.OPTION_TABLES[fmt]:
            literals = [
                arg
                for arg in typing.get_args(hints[row["name"]])
                if typing.get_origin(arg) is typing.Literal
            ]
            if row["kind"] == "choice":
                assert [typing.get_args(lit) for lit in literals] == [row["choices"]], row
    assert table("json")["on_malformed"]["default"] == _core.DEFAULT_ON_MALFORMED
    assert table("avro")["avro_framing"]["default"] == _core.DEFAULT_AVRO_FRAMING
    assert table("json")["sample_rows"]["default"] == _core.DEFAULT_VALUE_SAMPLE_ROWS


def test_a_setting_of_another_format_is_refused_naming_the_formats_that_take_it() -> None:
    with pytest.raises(BadInputError, match="option 'sample_rows' is for format json or arrow"):
        ja.ValueCodec("avro", sample_rows=5, avro_schema='"long"').value_schema()
    with pytest.raises(BadInputError, match="option 'avro_framing' is for format avro"):
        ja.ValueCodec(
            "json", avro_framing="raw", schema=pa.schema([("a", pa.int64())])
        ).value_schema()
    with pytest.raises(BadInputError, match="option 'sample_rows' must be a whole number"):
        ja.ValueCodec(
            "json", sample_rows="many", schema=pa.schema([("a", pa.int64())])
        ).value_schema()  # type: ignore[arg-type]


def test_a_count_beyond_any_integer_the_core_takes_is_out_of_range() -> None:
    with pytest.raises(BadInputError, match=r"option 'max_reconnects' \(\d+\) out of range"):
        ja.ConnectOptions(max_reconnects=2**200)
    with pytest.raises(BadInputError, match=r"option 'max_reconnects' \(-1\) out of range"):
        ja.ConnectOptions(max_reconnects=-1)
