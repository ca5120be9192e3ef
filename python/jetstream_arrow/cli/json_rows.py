"""JSON text for the export's files: one literal per value of a column (the
``headers`` map of a CSV export, one object per row), and values as lines.

Row payloads are not built here: a load encodes rows as JSON in the native core
(``value_schema.json_payloads``), and ``export --format jsonl`` writes its lines the
same way. Literals are built with Arrow compute kernels a column at a time; nested
columns fall back to ``json.dumps`` row by row for that column only.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_CONTROL = "[\\x00-\\x1f]"


def _quote(strings: pa.Array) -> pa.Array:
    """JSON string literals of a utf8 array (nulls stay null)."""
    s = pc.replace_substring(strings, "\\", "\\\\")
    s = pc.replace_substring(s, '"', '\\"')
    if pc.any(pc.match_substring_regex(s, _CONTROL)).as_py():
        for code in range(0x20):
            char = chr(code)
            s = pc.replace_substring(s, char, _ESCAPES.get(char, f"\\u{code:04x}"))
    return pc.binary_join_element_wise('"', s, '"', "")


def _python_json(column: pa.Array) -> pa.Array:
    def default(value: Any) -> Any:
        if isinstance(value, bytes):
            return base64.b64encode(value).decode("ascii")
        return str(value)

    def convert(value: Any, arrow_type: pa.DataType) -> Any:
        # maps come out of to_pylist as lists of (key, value) pairs
        if pa.types.is_map(arrow_type) and value is not None:
            return {k: convert(v, arrow_type.item_type) for k, v in value}
        return value

    return pa.array(
        [
            json.dumps(convert(v, column.type), default=default, ensure_ascii=False)
            for v in column.to_pylist()
        ],
        pa.string(),
    )


def json_literals(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One JSON literal per value (``null`` for nulls), as a utf8 array."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    if pa.types.is_dictionary(t):
        return json_literals(column.dictionary_decode())
    if pa.types.is_null(t):
        out = pa.array(["null"] * len(column), pa.string())
    elif pa.types.is_boolean(t):
        out = pc.if_else(column, "true", "false")
    elif pa.types.is_integer(t) or pa.types.is_decimal(t):
        out = pc.cast(column, pa.string())
    elif pa.types.is_floating(t):
        text = pc.cast(column, pa.string())
        # keep floats floats on the way back: "1" -> "1.0"
        integral = pc.match_substring_regex(text, r"^-?[0-9]+$")
        text = pc.if_else(integral, pc.binary_join_element_wise(text, ".0", ""), text)
        finite = pc.is_finite(column)
        out = pc.if_else(finite, text, pa.scalar(None, pa.string()))
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        out = _quote(pc.cast(column, pa.string()))
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        try:
            text = pc.cast(pc.cast(column, pa.binary()), pa.string())
            text.validate(full=True)
        except pa.ArrowInvalid:
            return _python_json(column)  # not UTF-8: base64 text
        out = _quote(text)
    elif pa.types.is_timestamp(t):
        # aware timestamps are written as UTC with a "Z"; casting through a naive
        # timestamp is ~10x faster than Arrow's time-zone-aware formatting
        text = pc.cast(column.cast(pa.timestamp(t.unit)), pa.string())
        text = pc.replace_substring(text, " ", "T", max_replacements=1)
        if t.tz is not None:
            text = pc.binary_join_element_wise(text, "Z", "")
        out = _quote(text)
    elif pa.types.is_date(t) or pa.types.is_time(t):
        out = _quote(pc.cast(column, pa.string()))
    elif pa.types.is_duration(t):
        out = pc.cast(pc.cast(column, pa.int64()), pa.string())
    else:
        return _python_json(column)
    return pc.fill_null(out, "null")


def lines_buffer(values: pa.Array) -> pa.Buffer:
    """Every value followed by a newline, as one contiguous buffer (no Python per row)."""
    newline = pa.scalar(b"\n", pa.large_binary())
    nothing = pa.scalar(b"", pa.large_binary())
    lines = pc.binary_join_element_wise(pc.cast(values, pa.large_binary()), newline, nothing)
    offsets_buffer, payload = lines.buffers()[1], lines.buffers()[2]
    assert offsets_buffer is not None and payload is not None
    offsets = pa.Array.from_buffers(
        pa.int64(), len(lines) + 1, [None, offsets_buffer], 0, lines.offset
    )
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    return payload.slice(start, end - start)
