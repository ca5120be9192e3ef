"""Each option is declared once per layer it crosses, and the layers agree.

Connect and publish options are dataclasses (``ConnectOptions``, ``PublishOptions``)
read by attribute into one native struct each; Spark's write options that set a
publish option name its ``PublishOptions`` field. These tests compare the layers, so
an option added to one and forgotten in another fails here, not on a user's cluster.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow import _core
from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.spark.option_specs import READ_SPECS, WRITE_SPECS
from jetstream_arrow.spark.options import parse_write_options


def table_names(key: str) -> list[str]:
    return [option["name"] for option in _core.OPTION_TABLES[key]]


def table_defaults(key: str) -> dict[str, object]:
    return {option["name"]: option["default"] for option in _core.OPTION_TABLES[key]}


def field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_the_native_core_reads_exactly_the_fields_of_each_options_dataclass() -> None:
    assert field_names(ja.ConnectOptions) == table_names("connect")
    assert field_names(ja.PublishOptions) == table_names("publish")
    assert field_names(ja.ReadOptions) == table_names("read")
    assert field_names(ja.ConsumeOptions) == table_names("consume")


@pytest.mark.parametrize("cls", [ja.PublishOptions, ja.ReadOptions, ja.ConsumeOptions])
def test_options_default_to_none_so_the_core_decides(cls: type) -> None:
    assert all(f.default is None for f in dataclasses.fields(cls))


def test_every_spark_publish_option_names_a_publish_options_field() -> None:
    fields = set(field_names(ja.PublishOptions))
    mapped = {s.python: s.native_field for s in WRITE_SPECS if s.native_field is not None}
    assert mapped, "no Spark write option sets a publish option"
    assert set(mapped.values()) <= fields, set(mapped.values()) - fields
    # The publisher is made from exactly the options the specs map.
    assert set(parse_write_options({}).publisher_kwargs()) == set(mapped.values())


def test_every_spark_read_option_that_sets_a_read_option_names_its_field() -> None:
    fields = set(field_names(ja.ReadOptions))
    mapped = {s.native_field for s in READ_SPECS if s.native_field is not None}
    assert mapped and mapped <= fields, mapped - fields
    # Each has the core's default for that field.
    for spec in READ_SPECS:
        if spec.native_field is not None:
            assert spec.default == table_defaults("read")[spec.native_field], spec


@pytest.mark.parametrize(
    ("spark_name", "python_name", "value", "field"),
    [
        ("publishMode", "mode", "fast", "mode"),
        ("ackWindow", "window", "77", "window"),
        ("ackTimeout", "ack_timeout", "2.5", "ack_timeout"),
    ],
)
def test_spark_takes_the_python_name_of_a_publish_option_too(
    spark_name: str, python_name: str, value: str, field: str
) -> None:
    by_spark = parse_write_options({spark_name: value}).publisher_kwargs()[field]
    by_python = parse_write_options({python_name: value}).publisher_kwargs()[field]
    assert by_spark == by_python != parse_write_options({}).publisher_kwargs()[field]


def test_an_options_object_and_keywords_make_the_same_publisher(
    client: ja.Client, stream: str
) -> None:
    table = pa.table({"data": [b"a", b"b", b"c"]})
    options = ja.PublishOptions(subject=f"{stream}.x", msg_id_prefix="p-", window=2)
    first = client.publish(table, options=options)
    again = client.publish(table, f"{stream}.x", msg_id_prefix="p-", window=2)
    assert (first.stored, again.duplicates) == (3, 3)
    # Keywords are set over the object.
    other = client.publish(table, options=options, msg_id_prefix="q-")
    assert other.stored == 3


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"window": 0}, "window"),
        ({"window": -3}, "window"),
        ({"max_retries": 2**40}, "max_retries"),
        ({"ack_timeout": -1.0}, "ack_timeout"),
        ({"on_full": "drop"}, "on_full"),
        ({"mode": "slow"}, "mode"),
        ({"window": "many"}, "window"),
    ],
)
def test_a_bad_publish_option_is_refused_by_the_core_naming_it(
    client: ja.Client, stream: str, given: dict[str, object], named: str
) -> None:
    with pytest.raises(BadInputError, match=named):
        client.publisher(f"{stream}.x", **given)


def test_an_unknown_publish_option_is_refused_naming_it(client: ja.Client) -> None:
    with pytest.raises(BadInputError, match="'windw'"):
        client.publisher("x", windw=5)


def test_read_options_as_an_object_and_as_keywords_read_the_same(
    client: ja.Client, stream: str
) -> None:
    client.publish(pa.table({"data": [b"%d" % i for i in range(10)]}), f"{stream}.x")
    options = ja.ReadOptions(start_seq=3, end_seq=7, subjects=f"{stream}.x", batch_rows=2)
    by_object = client.read(stream, options=options).read_all()
    by_keywords = client.read(
        stream, start_seq=3, end_seq=7, subjects=[f"{stream}.x"], batch_rows=2
    ).read_all()
    assert by_object.column("seq").to_pylist() == [3, 4, 5, 6, 7]
    assert by_object.equals(by_keywords)
    with pytest.raises(BadInputError, match="option 'batch_rows'"):
        client.read(stream, options=options, batch_rows=-1)
    with pytest.raises(BadInputError, match="'start_sequence'"):
        client.read(stream, start_sequence=1)


def test_consume_options_as_an_object_and_as_keywords(client: ja.Client, stream: str) -> None:
    client.publish(pa.table({"data": [b"%d" % i for i in range(6)]}), f"{stream}.x")
    client.create_consumer(stream, durable_name="c", ack_policy="explicit")
    consumer = client.pull_consumer(stream, "c")
    with consumer.messages(options=ja.ConsumeOptions(max_messages=4), batch_rows=3) as messages:
        batch = next(messages)
        assert 1 <= len(batch) <= 3
        batch.ack()
    with pytest.raises(BadInputError, match="option 'max_messages'"):
        consumer.messages(max_messages=-5)
    with pytest.raises(BadInputError, match="'max_msgs'"):
        consumer.messages(max_msgs=5)
