"""The Arrow schema a load's rows were encoded with, kept in the stream's metadata so
that an export decodes the payloads back into the same types (dates stay dates,
decimals decimals, zoned timestamps zoned, 32-bit integers 32-bit).

The schema is stored as Arrow IPC (base64), the one form that keeps every type
and its parameters; the format beside it names how the rows were encoded. A later
load into the same stream adds its columns to the recorded schema (an export decodes
every load's rows with it, so a column left out would be dropped from the rows that
have it); a column it gives another type is refused before anything is published.
"""

from __future__ import annotations

import base64
from typing import Any

import pyarrow as pa

from ..codec import ValueCodec

#: Stream metadata keys: the value format of loaded rows, and their Arrow schema.
FORMAT_KEY = "jetstream-arrow.value-format"
SCHEMA_KEY = "jetstream-arrow.value-schema"


def record(client: Any, stream: str, schema: pa.Schema) -> bool:
    """Record ``schema`` (with the columns of any schema recorded before it) as the
    stream's JSON value schema; False when it was already."""
    info = client.stream_info(stream)
    metadata = dict(info.config.metadata or {})
    earlier = recorded(info)
    if earlier is not None:
        schema = merged(
            earlier,
            schema,
            f"the schema an earlier load recorded in stream {stream}'s metadata",
        )
    encoded = base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")
    if metadata.get(SCHEMA_KEY) == encoded and metadata.get(FORMAT_KEY) == "json":
        return False
    metadata[FORMAT_KEY] = "json"
    metadata[SCHEMA_KEY] = encoded
    client.update_stream(info.config, metadata=metadata)
    return True


def merged(earlier: pa.Schema, schema: pa.Schema, earlier_is: str) -> pa.Schema:
    """The columns of ``earlier`` then the new ones of ``schema``; a column only one
    of them has is nullable (the other's rows have no value for it). A column the two
    give different types is refused, naming it and saying what ``earlier`` is."""
    from .errors import UsageError

    fields = []
    for field in earlier:
        i = schema.get_field_index(field.name)
        if i < 0:
            fields.append(field.with_nullable(True))
            continue
        other = schema.field(i)
        if other.type != field.type:
            raise UsageError(
                f"column {field.name!r} is {other.type} here but {field.type} in {earlier_is}: "
                "an export decodes all the rows of a stream with one schema; cast the "
                "column, or load into another stream"
            )
        fields.append(field.with_nullable(field.nullable or other.nullable))
    fields.extend(f.with_nullable(True) for f in schema if earlier.get_field_index(f.name) < 0)
    return pa.schema(fields)


def recorded(info: Any) -> pa.Schema | None:
    """The value schema a load recorded in the stream's metadata, if any."""
    metadata = info.config.metadata or {}
    if metadata.get(FORMAT_KEY) != "json" or SCHEMA_KEY not in metadata:
        return None
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(metadata[SCHEMA_KEY])))


def json_payloads(batch: pa.RecordBatch, columns: list[str]) -> pa.Array:
    """``columns`` of each row as one JSON object (nulls written as ``null``), encoded
    by the native core."""
    from .. import _core

    value = pa.StructArray.from_arrays([batch.column(c) for c in columns], names=columns)
    wrapped = pa.RecordBatch.from_arrays([value], names=[_core.VALUE_COLUMN])
    encoded = pa.record_batch(_core.encode_values(wrapped, ValueCodec("json")))
    return encoded.column("data")
