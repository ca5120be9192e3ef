"""The Arrow schema a load's rows were encoded with, kept in the stream's metadata so
that an export decodes the payloads back into the same types (dates stay dates,
decimals decimals, zoned timestamps zoned, 32-bit integers 32-bit).

The schema is stored as Arrow IPC (base64), the one form that keeps every type
and its parameters; the format beside it names how the rows were encoded.
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
    """Record ``schema`` as the stream's JSON value schema; False when it was already."""
    info = client.stream_info(stream)
    metadata = dict(info.config.metadata or {})
    encoded = base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")
    if metadata.get(SCHEMA_KEY) == encoded and metadata.get(FORMAT_KEY) == "json":
        return False
    metadata[FORMAT_KEY] = "json"
    metadata[SCHEMA_KEY] = encoded
    client.update_stream(info.config, metadata=metadata)
    return True


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
