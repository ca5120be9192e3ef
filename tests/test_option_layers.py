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
from jetstream_arrow.spark.option_specs import WRITE_SPECS
from jetstream_arrow.spark.options import parse_write_options


def field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_the_native_core_reads_exactly_the_fields_of_each_options_dataclass() -> None:
    assert field_names(ja.ConnectOptions) == list(_core.CONNECT_FIELDS)
    assert field_names(ja.PublishOptions) == list(_core.PUBLISH_FIELDS)


def test_publish_options_default_to_none_so_the_core_decides() -> None:
    assert all(f.default is None for f in dataclasses.fields(ja.PublishOptions))


def test_every_spark_publish_option_names_a_publish_options_field() -> None:
    fields = set(field_names(ja.PublishOptions))
    mapped = {s.python: s.publish_field for s in WRITE_SPECS if s.publish_field is not None}
    assert mapped, "no Spark write option sets a publish option"
    assert set(mapped.values()) <= fields, set(mapped.values()) - fields
    # The publisher is made from exactly the options the specs map.
    assert set(parse_write_options({}).publisher_kwargs()) == set(mapped.values())


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
