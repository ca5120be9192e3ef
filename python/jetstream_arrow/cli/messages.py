"""Turn a user's columns into the message schema: subject, data, headers, msg_id."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .errors import CliError
from .value_schema import json_payloads

HEADERS_TYPE = pa.map_(pa.string(), pa.list_(pa.string()))


def _utf8(column: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_string(column.type):
        return column
    return pc.cast(column, pa.string())


def _data(column: pa.Array) -> pa.Array:
    t = column.type
    if pa.types.is_dictionary(t):
        return _data(column.dictionary_decode())
    if pa.types.is_binary(t) or pa.types.is_string(t):
        return column
    if pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return pc.cast(column, pa.binary())
    # large_string, numbers, dates, ...: their text
    return pc.cast(column, pa.string())


def header_values(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def _headers(column: pa.Array, name: str) -> pa.Array:
    """map<utf8, list<utf8>> from a map, a struct, or JSON-object text.

    Maps with utf8 keys pass through (the engine takes both map forms); structs and
    JSON text are converted row by row in Python (headers are small and optional)."""
    t = column.type
    if pa.types.is_map(t) and pa.types.is_string(t.key_type):
        item = t.item_type
        if pa.types.is_string(item) or (
            pa.types.is_list(item) and pa.types.is_string(item.value_type)
        ):
            return column
    rows: list[list[tuple[str, list[str]]] | None] = []
    if pa.types.is_struct(t) or pa.types.is_map(t):
        for value in column.to_pylist():
            if value is None:
                rows.append(None)
                continue
            pairs = value.items() if isinstance(value, dict) else value
            rows.append([(str(k), header_values(v)) for k, v in pairs if v is not None])
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        for i, text in enumerate(column.to_pylist()):
            if text is None or text == "":
                rows.append(None)
                continue
            try:
                obj = json.loads(text)
            except ValueError:
                obj = None
            if not isinstance(obj, dict):
                raise CliError(
                    f"--headers-column {name!r}: row {i} of this batch is not a JSON object "
                    f'such as {{"Trace-Id": "abc"}}: {text[:80]!r}'
                )
            rows.append([(str(k), header_values(v)) for k, v in obj.items()])
    else:
        raise CliError(
            f"--headers-column {name!r} has type {t}; give a map, a struct, or text "
            "holding a JSON object per row"
        )
    return pa.array(rows, HEADERS_TYPE)


@dataclass
class MessageBuilder:
    """Built from a file's schema and the column flags; call it on each batch."""

    schema: pa.Schema
    source: str
    subject_column: str | None = None
    data_column: str | None = None
    headers_column: str | None = None
    msg_id_column: str | None = None

    def __post_init__(self) -> None:
        names = self.schema.names
        for flag, column in (
            ("--subject-column", self.subject_column),
            ("--data-column", self.data_column),
            ("--headers-column", self.headers_column),
            ("--msg-id-column", self.msg_id_column),
        ):
            if column is not None and column not in names:
                shown = ", ".join(names[:30]) + (", ..." if len(names) > 30 else "")
                raise CliError(
                    f"{flag} {column!r}: {self.source} has no such column; its columns are: "
                    f"{shown or '(none)'}"
                )
        special = {self.headers_column, self.msg_id_column}
        self.json_columns = [n for n in names if n not in special]
        if self.data_column is None and not self.json_columns:
            raise CliError(f"{self.source}: no columns left to encode as JSON data")

    @property
    def value_schema(self) -> pa.Schema | None:
        """The schema of the columns encoded as JSON (dictionaries as their values),
        or None when a data column is published as it is."""
        if self.data_column is not None:
            return None
        fields = [self.schema.field(n) for n in self.json_columns]
        return pa.schema(
            [
                f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f
                for f in fields
            ]
        )

    def __call__(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, int]:
        """The message batch and its payload size in bytes."""
        arrays: list[pa.Array] = []
        fields: list[str] = []
        if self.subject_column is not None:
            arrays.append(_utf8(batch.column(self.subject_column)))
            fields.append("subject")
        if self.data_column is not None:
            data = _data(batch.column(self.data_column))
        else:
            data = json_payloads(batch, self.json_columns)
        arrays.append(data)
        fields.append("data")
        if self.headers_column is not None:
            arrays.append(_headers(batch.column(self.headers_column), self.headers_column))
            fields.append("headers")
        if self.msg_id_column is not None:
            arrays.append(_utf8(batch.column(self.msg_id_column)))
            fields.append("msg_id")
        out = pa.RecordBatch.from_arrays(arrays, names=fields)
        return out, data.nbytes
