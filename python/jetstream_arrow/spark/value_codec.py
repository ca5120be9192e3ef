"""Typed payloads in Spark (option ``valueFormat``): the schema a read declares, and
the codec each task decodes or encodes with in the native core.

A read declares the message columns and a struct column ``value``; with
``.schema(...)`` (Spark DDL) it declares what the user names instead: message columns
by their names and types, and either one struct column ``value`` or the value's
fields as columns (flattened). Without either, a JSON or Arrow value schema comes from
``valueSchema`` (a Spark schema as JSON) or is inferred from the stream's first
messages (the core samples them) when the query is planned; an Avro one is derived
from ``avroSchema``, a Protobuf one from the descriptor of ``protobufMessage``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.types import BinaryType, StructField, StructType

from .. import _core
from .._views import schema_without_views
from ..codec import ValueCodec
from ..exceptions import BadInputError
from .columns import kv_schema, message_schema
from .connection_cache import get_client
from .option_specs import DEAD_LETTER_MODE
from .stream_lookup import streams_of

if TYPE_CHECKING:
    from .options import ReadOptions, WriteOptions

#: Columns that are never a value's field (the message columns and `_corrupt_record`).
MESSAGE_COLUMNS = frozenset(_core.MESSAGE_COLUMNS)


def not_value_columns(include_ttl: bool) -> frozenset[str]:
    """The columns of a read that are not the value's: the message columns, and
    ``ttl`` when the read adds it (``includeTtl``; without it a value may have a
    field of that name)."""
    return MESSAGE_COLUMNS | {_core.TTL_COLUMN} if include_ttl else MESSAGE_COLUMNS


def _avro_schemas_by_id(text: str | None) -> dict[int, str] | None:
    if text is None:
        return None
    try:
        parsed = json.loads(text)
        return {int(k): v if isinstance(v, str) else json.dumps(v) for k, v in parsed.items()}
    except (ValueError, AttributeError) as err:
        raise BadInputError(
            f"option 'avroSchemasById' must be a JSON object of schema ids to Avro schemas: {err}"
        ) from None


def _format_options(opts: ReadOptions | WriteOptions) -> dict[str, object]:
    """What the format's own options mean for the codec: the Avro schema and framing,
    or the Protobuf message's name and descriptor set. ``valueSchema``, their earlier
    spelling, stands for ``avroSchema`` and ``protobufMessage`` (the parser refuses
    both given at once)."""
    if opts.value_format == "avro":
        avro_schema = opts.avro_schema if opts.avro_schema is not None else opts.value_schema
        return {"avro_schema": avro_schema, "avro_framing": opts.avro_framing}
    if opts.value_format == "protobuf":
        message = opts.protobuf_message if opts.protobuf_message is not None else opts.value_schema
        if message is None or opts.protobuf_descriptor is None:
            raise BadInputError(
                "option 'valueFormat' protobuf needs options 'protobufMessage' (the "
                "message's full name, package.Message) and 'protobufDescriptorFile' (a "
                "descriptor set: protoc --include_imports --descriptor_set_out=FILE)"
            )
        return {"protobuf_message": message, "protobuf_descriptor": opts.protobuf_descriptor}
    return {}


def carries_schema(opts: ReadOptions) -> bool:
    """Whether the value's schema comes from the format's own options (Avro's
    ``avroSchema``, Protobuf's ``protobufMessage``), not from a Spark schema (given in
    ``valueSchema``, inferred, or the one Spark expects)."""
    return opts.value_format in ("avro", "protobuf")


def infers_value_schema(opts: ReadOptions) -> bool:
    """Whether a read given no schema (no ``.schema(...)``) infers its JSON value's
    schema when the query is planned: no ``valueSchema``. Its tasks decode with
    ``on_new_field`` ``fail`` (see :func:`read_codec`)."""
    return opts.kv is None and opts.value_format == "json" and opts.value_schema is None


def _read_codec(
    opts: ReadOptions, schema: pa.Schema | None, flatten: bool, inferred: bool = False
) -> ValueCodec:
    carries = carries_schema(opts)
    return ValueCodec(
        format=opts.value_format,  # type: ignore[arg-type]
        schema=None if carries else schema,
        # Mode deadletter is the Spark source's: the core keeps the payloads that do
        # not decode (in _corrupt_record), and the task publishes them.
        on_malformed=(
            "permissive" if opts.on_malformed == DEAD_LETTER_MODE else opts.on_malformed  # type: ignore[arg-type]
        ),
        flatten=flatten,
        # A query's schema is fixed when it is planned: a field an inferred schema
        # lacks would be left out of every row, and a work queue's messages
        # acknowledged without it. The batch fails instead, handed out to no one.
        on_new_field="fail" if inferred else None,
        avro_schemas_by_id=(
            _avro_schemas_by_id(opts.avro_schemas_by_id) if opts.value_format == "avro" else None
        ),
        **_format_options(opts),  # type: ignore[arg-type]
    )


def _from_arrow(schema: pa.Schema) -> StructType:
    """The Spark type of an Arrow value schema; view types (an Arrow IPC payload's
    own, a recorded schema) as their plain counterparts: Spark has none, and the
    core casts a view-typed payload to the plain value it is read with."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema_without_views(schema), prefer_timestamp_ntz=False)


def _stream_to_infer_from(client: Any, opts: ReadOptions) -> tuple[str, tuple[str, ...] | None]:
    """The stream whose first message shows the value's schema, and the subjects to
    read it with: the read's one stream, or of several the first (by name) that holds
    messages of the read's subjects."""
    if not opts.several_streams:
        return opts.stream, opts.subjects
    chosen = {s: it for s, it in streams_of(client, opts).items() if it.subjects != ()}
    if not chosen:
        raise BadInputError(
            f"no stream matches option 'streamPattern' ({opts.stream_pattern!r}) or holds "
            "option 'subjects', so there is no message to infer the value's schema from; "
            "give option 'valueSchema'"
        )
    stream = next((s for s, it in chosen.items() if it.state.messages), next(iter(chosen)))
    return stream, chosen[stream].subjects


def value_struct(opts: ReadOptions) -> StructType:
    """The Spark type of the value: from the format's own options (Avro, Protobuf),
    from ``valueSchema``, or inferred (driver side)."""
    if carries_schema(opts):
        return _from_arrow(pa.schema(_core.value_schema(_read_codec(opts, None, False))))
    if opts.value_schema is not None:
        # A data source's schema is asked for in a Python worker, where Spark's DDL
        # parser (on the JVM) is out of reach: DDL goes through .schema(...).
        try:
            return StructType.fromJson(json.loads(opts.value_schema))
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise BadInputError(
                f"option 'valueSchema' must be a Spark schema as JSON (df.schema.json()), "
                f"got {opts.value_schema!r} ({err}); for DDL, give the value's fields to "
                ".schema(...): 'seq LONG, value STRUCT<id: INT, name: STRING>' or "
                "'seq LONG, id INT, name STRING'"
            ) from None
    client = get_client(opts.connect)
    stream, subjects = _stream_to_infer_from(client, opts)
    reader = client.read(
        stream,
        codec=_read_codec(opts, None, False),
        subjects=list(subjects) if subjects else None,
        batch_rows=1,
        resume_timeout=opts.resume_timeout,
    )
    try:
        value = reader.schema.field(_core.VALUE_COLUMN).type
    finally:
        reader.close()
    return _from_arrow(pa.schema(list(value)))


def read_schema(opts: ReadOptions) -> StructType:
    """What a read declares: message columns, ``value`` in place of ``data`` with a
    value format (and ``_corrupt_record`` in mode ``permissive``)."""
    if opts.kv is not None:
        return kv_schema()
    messages = message_schema(opts.include_headers, opts.include_ttl)
    if opts.value_format is None:
        return messages
    fields = [f for f in messages.fields if f.name != "data"]
    fields.append(StructField(_core.VALUE_COLUMN, value_struct(opts), True))
    if opts.on_malformed == "permissive":
        fields.append(StructField(_core.CORRUPT_RECORD_COLUMN, BinaryType(), True))
    return StructType(fields)


def check_value_read_schema(opts: ReadOptions, schema: StructType) -> StructType:
    """A user-given schema of a read with a value format: message columns must have
    their types; the other fields are the value's."""
    known = {f.name: f.dataType for f in message_schema(True, True).fields}
    known[_core.CORRUPT_RECORD_COLUMN] = BinaryType()
    for f in schema.fields:
        if f.name == "data":
            raise BadInputError(
                "option 'valueFormat': the payload is decoded, so the schema has no 'data' "
                "column; name the value's fields (or read without valueFormat)"
            )
        if f.name in known and f.dataType != known[f.name]:
            raise BadInputError(
                f"column {f.name!r} is a message column of type "
                f"{known[f.name].simpleString()}, not {f.dataType.simpleString()}"
            )
        if f.name == "headers" and not opts.include_headers:
            raise BadInputError("column 'headers' needs option includeHeaders=true")
        if f.name == "ttl" and not opts.include_ttl:
            raise BadInputError("column 'ttl' needs option includeTtl=true")
    if not any(f.name not in not_value_columns(opts.include_ttl) for f in schema.fields):
        raise BadInputError(
            f"option 'valueFormat': the schema {schema.simpleString()} names no field of the value"
        )
    return schema


def read_codec(opts: ReadOptions, target: pa.Schema, inferred: bool = False) -> ValueCodec | None:
    """The codec a task reads with, for the Arrow schema Spark expects; ``inferred``
    when that schema's value was inferred at planning (:func:`infers_value_schema`
    was true when Spark asked the data source for its schema): a payload holding a
    field it lacks then fails the batch with ``NewFieldError``."""
    if opts.value_format is None:
        return None
    value = [f for f in target if f.name not in not_value_columns(opts.include_ttl)]
    if (
        len(value) == 1
        and value[0].name == _core.VALUE_COLUMN
        and pa.types.is_struct(value[0].type)
    ):
        return _read_codec(opts, pa.schema(list(value[0].type)), False, inferred)
    return _read_codec(opts, pa.schema(value), True, inferred)


def write_codec(opts: WriteOptions) -> ValueCodec | None:
    """The codec a write task encodes with."""
    if opts.value_format is None:
        return None
    return ValueCodec(
        format=opts.value_format,  # type: ignore[arg-type]
        avro_schema_id=opts.avro_schema_id,
        **_format_options(opts),  # type: ignore[arg-type]
    )
