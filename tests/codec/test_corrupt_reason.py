"""A permissive read says why each payload did not decode, in ``_corrupt_reason``.

The oracle of what a reason must say is Python's own JSON parser (not the package's
decoder): whether a payload parses, where it stops, what kind of value it is; and the
test's own payloads for which field holds a value of the wrong type. That the reason
is the decoder's failfast error for that message, without its advice on the modes,
is checked against a failfast read of each message alone.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow import _core
from jetstream_arrow.exceptions import MalformedPayloadError

SCHEMA = pa.schema([("n", pa.int64()), ("name", pa.string())])
#: What Python's `json` calls each kind of value, as a reason names it.
KINDS = {list: "an array", str: "a string", int: "a number", float: "a number"}
KINDS.update({bool: "a boolean", type(None): "null"})
#: The failfast error's advice on the modes, which a reason leaves out.
ADVICE = " (mode 'failfast'; 'permissive' or 'dropmalformed' keep reading)"

PAYLOADS: list[bytes] = [
    b'{"n": 1, "name": "a"}',
    b"{not json",
    b'{"n" 1}',
    b"[1, 2]",
    b'"just a string"',
    b"42",
    b"null",
    b"true",
    b'{"n": "one"}',
    b'{"n": 2.5}',
    b'{"n": 3, "name": 7}',
    b'{"n": 4}',
]
#: The field each payload that parses as an object holds a bad value in.
BAD_FIELD = {8: "n", 9: "n", 10: "name"}


def _where_json_stops(payload: bytes) -> tuple[int, int] | None:
    """The line and column where Python's parser stops on ``payload``; None when it
    parses."""
    try:
        json.loads(payload)
    except json.JSONDecodeError as e:
        return e.lineno, e.colno
    return None


def _permissive(client: ja.Client, stream: str, **read: Any) -> pa.Table:
    codec = ja.ValueCodec("json", schema=SCHEMA, on_malformed="permissive")
    return client.read(stream, codec=codec, **read).read_all()


def test_each_reason_says_what_pythons_parser_says_of_the_payload(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    stream = new_stream("REASONS")
    client.publish(pa.table({"subject": [f"{stream}.x"] * len(PAYLOADS), "data": PAYLOADS}))
    read = _permissive(client, stream)
    assert read.schema.field(_core.CORRUPT_REASON_COLUMN).type == pa.string()
    reasons = read.column(_core.CORRUPT_REASON_COLUMN).to_pylist()
    corrupt = read.column(_core.CORRUPT_RECORD_COLUMN).to_pylist()
    for i, payload in enumerate(PAYLOADS):
        seq, reason = i + 1, reasons[i]
        stop = _where_json_stops(payload)
        if stop is not None:
            assert reason is not None and corrupt[i] == payload
            assert reason.startswith(f"stream '{stream}' seq {seq}: the payload is not json")
            # Not JSON, and where Python's parser stops too.
            assert "it is not JSON" in reason, reason
            assert f"line {stop[0]} column {stop[1]}" in reason, (reason, stop)
            continue
        value = json.loads(payload)
        if not isinstance(value, dict):
            assert reason is not None and corrupt[i] == payload
            assert reason.endswith(f"it is JSON but not an object: it is {KINDS[type(value)]}"), (
                reason
            )
        elif i in BAD_FIELD:
            assert reason is not None and corrupt[i] == payload
            assert f"field '{BAD_FIELD[i]}'" in reason, reason
        else:
            assert reason is None and corrupt[i] is None, reason
        if reason is not None:
            assert reason.startswith(f"stream '{stream}' seq {seq}: "), reason


def test_each_reason_is_the_failfast_error_of_its_message_alone(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    stream = new_stream("FAILFAST")
    client.publish(pa.table({"subject": [f"{stream}.x"] * len(PAYLOADS), "data": PAYLOADS}))
    reasons = _permissive(client, stream).column(_core.CORRUPT_REASON_COLUMN).to_pylist()
    failfast = ja.ValueCodec("json", schema=SCHEMA)
    for i, reason in enumerate(reasons):
        if reason is None:
            continue
        with pytest.raises(MalformedPayloadError) as raised:
            client.read(stream, start_seq=i + 1, end_seq=i + 1, codec=failfast).read_all()
        assert str(raised.value) == reason + ADVICE


def test_a_payload_that_does_not_decompress_says_so(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    stream = new_stream("GZ")
    marked = [("Content-Encoding", "gzip")]
    client.publish(
        pa.table(
            {
                "subject": [f"{stream}.x"] * 3,
                "data": [gzip.compress(b'{"n": 1}'), b"not gzip at all", gzip.compress(b"{x")],
                "headers": pa.array([marked] * 3, pa.map_(pa.string(), pa.string())),
            }
        )
    )
    reasons = _permissive(client, stream).column(_core.CORRUPT_REASON_COLUMN).to_pylist()
    assert reasons[0] is None
    assert reasons[1] is not None and "gzip" in reasons[1] and "decompress" in reasons[1]
    # Decompressed, then not JSON: the JSON parser's words, as for a plain payload.
    assert reasons[2] is not None and "it is not JSON" in reasons[2], reasons[2]
    failfast = ja.ValueCodec("json", schema=SCHEMA)
    with pytest.raises(MalformedPayloadError) as raised:
        client.read(stream, start_seq=2, end_seq=2, codec=failfast).read_all()
    assert str(raised.value) == reasons[1]


def test_only_a_permissive_read_has_the_column(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    stream = new_stream("MODES")
    client.publish(pa.table({"subject": [f"{stream}.x"] * 2, "data": PAYLOADS[:2]}))
    dropped = ja.ValueCodec("json", schema=SCHEMA, on_malformed="dropmalformed")
    read = client.read(stream, codec=dropped).read_all()
    assert _core.CORRUPT_REASON_COLUMN not in read.column_names
    # A permissive read whose payloads all decode has the column, all null.
    good = _permissive(client, stream, end_seq=1)
    assert good.column(_core.CORRUPT_REASON_COLUMN).null_count == good.num_rows == 1


def test_the_reasons_of_payloads_with_no_value_to_infer_from(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    """What a sink that samples payloads itself is told, in a read's words."""
    payloads: list[bytes | None] = [b"{x", b"[1]", b'{"a": 1}', None]
    reasons = _core.no_value_reasons(ja.ValueCodec("json"), "S", [1, 2, 3, 4], payloads)
    assert reasons[0] is not None and reasons[0].startswith("stream 'S' seq 1: ")
    assert "it is not JSON" in reasons[0]
    assert reasons[1] is not None and reasons[1].endswith("not an object: it is an array")
    assert reasons[2] is None
    assert reasons[3] is not None and reasons[3].endswith("the payload is empty")
    arrow = _core.no_value_reasons(ja.ValueCodec("arrow"), "S", [5], [b"nope"])
    assert arrow[0] is not None and "not an Arrow IPC stream" in arrow[0]
