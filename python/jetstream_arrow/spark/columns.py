"""Spark schemas of the message and ack tables, and the input columns of a publish.

Reads yield the message schema exactly as Spark declares it (names, types and
nullability must match, or Spark refuses the batch). Publishes accept a DataFrame with
``subject`` (or a constant subject), ``data`` (binary or string), optional ``headers``
and an optional id column; other columns are ignored, so a DataFrame read from a
stream can be written straight back.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .. import _core
from ..codec import ValueCodec
from ..exceptions import BadInputError


def message_schema(include_headers: bool = False) -> StructType:
    """The Spark schema of messages read from a stream (``includeHeaders`` adds ``headers``)."""
    fields = [
        StructField("stream", StringType(), False),
        StructField("subject", StringType(), False),
        StructField("seq", LongType(), False),
        StructField("timestamp", TimestampType(), False),
    ]
    if include_headers:
        fields.append(
            StructField("headers", MapType(StringType(), ArrayType(StringType(), True), True), True)
        )
    fields.append(StructField("data", BinaryType(), False))
    return StructType(fields)


#: The Spark schema of the per-row acks that [`publish_fn`][jetstream_arrow.spark.publish_fn] yields.
ACK_SCHEMA = StructType(
    [
        StructField("seq", LongType(), True),
        StructField("duplicate", BooleanType(), False),
        StructField("error", StringType(), True),
    ]
)


def kv_schema() -> StructType:
    """The schema of a KV bucket read as a table (option ``kv``): its live keys."""
    return StructType(
        [
            StructField("key", StringType(), False),
            StructField("value", BinaryType(), True),
            StructField("revision", LongType(), False),
            StructField("operation", StringType(), False),
            StructField("created", TimestampType(), False),
        ]
    )


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects for ``schema`` (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` in exactly the ``target`` schema (a no-op when it already is)."""
    if batch.schema.equals(target):
        return batch
    try:
        return batch.select(target.names).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError) as err:
        raise BadInputError(
            f"a batch read from the stream has the schema {batch.schema} where Spark "
            f"expects {target}: {err}"
        ) from None


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t))


def _headers_ok(t: pa.DataType) -> bool:
    if not pa.types.is_map(t) or not _is_string(t.key_type):
        return False
    item = t.item_type
    if _is_string(item):
        return True
    return (pa.types.is_list(item) or pa.types.is_large_list(item)) and _is_string(item.value_type)


def _spark_type(t: pa.DataType) -> str:
    if _is_string(t):
        return "string"
    if _is_binary(t):
        return "binary"
    try:
        from pyspark.sql.pandas.types import from_arrow_type

        return str(from_arrow_type(t).simpleString())
    except Exception:
        return str(t)


@dataclass(frozen=True)
class PublishColumns:
    """Which input column feeds which column of a publish (names as in the input)."""

    subject: str | None
    #: None when the value columns are encoded into the payload (``valueFormat``).
    data: str | None
    headers: str | None
    msg_id: str | None
    #: The columns encoded into the payload (``valueFormat``), by their own names.
    values: tuple[str, ...] = ()
    #: Per-row optimistic-concurrency checks, when the DataFrame has them.
    expected_last_subject_seq: str | None = None
    expected_last_msg_id: str | None = None
    #: A read of a stream's ``stream`` (string) and ``seq`` (integer) columns: the
    #: DataFrame is a copy. The core then leaves out the control headers the source
    #: messages carry and numbers each row by its source message, not its position.
    source_stream: str | None = None
    source_seq: str | None = None

    @property
    def is_copy(self) -> bool:
        return self.source_seq is not None

    @classmethod
    def resolve(
        cls,
        schema: pa.Schema,
        *,
        constant_subject: bool,
        msg_id_column: str | None,
        encoded: bool = False,
    ) -> PublishColumns:
        """Check the input columns, naming the one at fault. Spark matches column
        names case-insensitively, so this does too."""
        by_lower: dict[str, str] = {}
        for name in schema.names:
            by_lower.setdefault(name.lower(), name)

        def find(name: str) -> str | None:
            return by_lower.get(name.lower())

        def check(name: str, ok: bool, want: str) -> None:
            if not ok:
                got = _spark_type(schema.field(name).type)
                raise BadInputError(f"column {name!r} must be {want}, got {got}")

        subject = None
        if not constant_subject:
            subject = find("subject")
            if subject is None:
                raise BadInputError(
                    "no 'subject' column: add one (string) or give option 'subject' "
                    f"(columns: {', '.join(schema.names)})"
                )
            check(subject, _is_string(schema.field(subject).type), "string")
        data = find("data")
        if encoded:
            if data is not None:
                raise BadInputError(
                    "option 'valueFormat': the payload is encoded from the value columns, so "
                    "the DataFrame has no 'data' column; drop it or drop valueFormat"
                )
        elif data is None:
            raise BadInputError(
                f"no 'data' column (binary or string) to publish (columns: {', '.join(schema.names)})"
            )
        else:
            check(
                data,
                _is_binary(schema.field(data).type) or _is_string(schema.field(data).type),
                "binary or string",
            )
        headers = find("headers")
        if headers is not None:
            check(
                headers,
                _headers_ok(schema.field(headers).type),
                "map<string, array<string>> or map<string, string>",
            )
        if msg_id_column is not None:
            msg_id = find(msg_id_column)
            if msg_id is None:
                raise BadInputError(
                    f"option 'msgIdColumn': no column {msg_id_column!r} "
                    f"(columns: {', '.join(schema.names)})"
                )
        else:
            msg_id = find("msg_id")
        if msg_id is not None:
            check(msg_id, _is_string(schema.field(msg_id).type), "string (it becomes Nats-Msg-Id)")
        expected_seq = find("expected_last_subject_seq")
        if expected_seq is not None:
            check(
                expected_seq,
                pa.types.is_integer(schema.field(expected_seq).type),
                "an integer (a stream sequence)",
            )
        expected_id = find("expected_last_msg_id")
        if expected_id is not None:
            check(expected_id, _is_string(schema.field(expected_id).type), "string")
        source_stream, source_seq = find("stream"), find("seq")
        if not (
            source_stream is not None
            and source_seq is not None
            and _is_string(schema.field(source_stream).type)
            and pa.types.is_integer(schema.field(source_seq).type)
        ):
            source_stream = source_seq = None
        values: tuple[str, ...] = ()
        if encoded:
            # Carried to the core, which decides which of them the value is (a struct
            # column `value`, or all of them) and refuses what it cannot encode:
            # `check_encoding` asks it on the driver.
            taken = {subject, headers, msg_id, expected_seq, expected_id, source_stream, source_seq}
            values = tuple(n for n in schema.names if n not in taken)
        return cls(
            subject=subject,
            data=data,
            headers=headers,
            msg_id=msg_id,
            values=values,
            expected_last_subject_seq=expected_seq,
            expected_last_msg_id=expected_id,
            source_stream=source_stream,
            source_seq=source_seq,
        )

    def check_encoding(self, schema: pa.Schema, codec: ValueCodec) -> None:
        """The core's verdict on encoding input of ``schema`` with ``codec``, before any
        row is sent (on Spark's driver, at planning): which columns are the value, and
        whether the format takes them; its error names the column."""
        empty = pa.RecordBatch.from_pylist([], schema=schema)
        try:
            _core.encode_values(self.select(empty), codec)
        except BadInputError as err:
            raise BadInputError(f"option 'valueFormat' ({codec.format}): {err}") from None

    def select(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The publish input: the chosen columns under the engine's names, plain
        (not large) string and binary types."""
        arrays = []
        names = []
        for source, target in (
            (self.subject, "subject"),
            (self.data, "data"),
            (self.headers, "headers"),
            (self.msg_id, "msg_id"),
            (self.expected_last_subject_seq, "expected_last_subject_seq"),
            (self.expected_last_msg_id, "expected_last_msg_id"),
            (self.source_stream, "stream"),
            (self.source_seq, "seq"),
        ):
            if source is None:
                continue
            column = batch.column(source)
            if pa.types.is_large_string(column.type):
                column = column.cast(pa.string())
            elif pa.types.is_large_binary(column.type):
                column = column.cast(pa.binary())
            arrays.append(column)
            names.append(target)
        for name in self.values:
            arrays.append(batch.column(name))
            names.append(name)
        return pa.RecordBatch.from_arrays(arrays, names=names)
