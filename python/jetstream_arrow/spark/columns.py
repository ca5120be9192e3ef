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
    DayTimeIntervalType,
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


def message_schema(include_headers: bool = False, include_ttl: bool = False) -> StructType:
    """The Spark schema of messages read from a stream (``includeHeaders`` adds ``headers``,
    ``includeTtl`` adds ``ttl``: each message's ``Nats-TTL``, an interval)."""
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
    if include_ttl:
        fields.append(StructField("ttl", DayTimeIntervalType(), True))
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
    #: Each row's own time to live (``Nats-TTL``), when the DataFrame has one.
    ttl: str | None = None
    #: Counter increments (``Nats-Incr``): a DataFrame with ``increment`` and no ``data``.
    increment: str | None = None
    #: When each row fires and where to (``Nats-Schedule``, ``Nats-Schedule-Target``):
    #: both columns, or neither.
    schedule: str | None = None
    schedule_target: str | None = None
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
        """Which input column feeds which column of the publish, naming a column
        that is missing. Spark matches column names case-insensitively, so this does
        too. Their types are the core's to judge: see :meth:`check`."""
        by_lower: dict[str, str] = {}
        for name in schema.names:
            by_lower.setdefault(name.lower(), name)

        def find(name: str) -> str | None:
            return by_lower.get(name.lower())

        subject = None
        if not constant_subject:
            subject = find("subject")
            if subject is None:
                raise BadInputError(
                    "no 'subject' column: add one (string) or give option 'subject' "
                    f"(columns: {', '.join(schema.names)})"
                )
        data = find("data")
        # A DataFrame of counter increments: no payload, each row's `increment`.
        increment = find("increment") if data is None and not encoded else None
        if encoded:
            if data is not None:
                raise BadInputError(
                    "option 'valueFormat': the payload is encoded from the value columns, so "
                    "the DataFrame has no 'data' column; drop it or drop valueFormat"
                )
        elif data is None and increment is None:
            raise BadInputError(
                "no 'data' column (binary or string) to publish, nor an 'increment' column of "
                f"counter increments (columns: {', '.join(schema.names)})"
            )
        headers = find("headers")
        if msg_id_column is not None:
            msg_id = find(msg_id_column)
            if msg_id is None:
                raise BadInputError(
                    f"option 'msgIdColumn': no column {msg_id_column!r} "
                    f"(columns: {', '.join(schema.names)})"
                )
        else:
            msg_id = find("msg_id")
        expected_seq = find("expected_last_subject_seq")
        expected_id = find("expected_last_msg_id")
        ttl = find("ttl")
        if ttl is not None and not pa.types.is_duration(schema.field(ttl).type):
            # Only an interval is a TTL; a `ttl` column of another type is the
            # DataFrame's own (a value's field), as the core reads it.
            ttl = None
        schedule, schedule_target = find("schedule"), find("schedule_target")
        if schedule is None or schedule_target is None:
            # A schedule only with its target; one alone is the DataFrame's own.
            schedule = schedule_target = None
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
            # `check` asks it on the driver.
            taken = {
                subject,
                headers,
                msg_id,
                expected_seq,
                expected_id,
                ttl,
                schedule,
                schedule_target,
                source_stream,
                source_seq,
            }
            values = tuple(n for n in schema.names if n not in taken)
        return cls(
            subject=subject,
            data=data,
            headers=headers,
            msg_id=msg_id,
            values=values,
            expected_last_subject_seq=expected_seq,
            expected_last_msg_id=expected_id,
            ttl=ttl,
            increment=increment,
            schedule=schedule,
            schedule_target=schedule_target,
            source_stream=source_stream,
            source_seq=source_seq,
        )

    def check(self, schema: pa.Schema, subject: str | None, codec: ValueCodec | None) -> None:
        """The core's verdict on publish input of ``schema``, before any row is sent (on
        Spark's driver, at planning): with ``codec``, which columns are the value and
        whether the format takes them; then the types of the columns that steer a
        message and the constant ``subject``. Its errors name the column as the
        DataFrame does."""
        empty = self.select(pa.RecordBatch.from_pylist([], schema=schema))
        if codec is not None:
            try:
                empty = pa.record_batch(_core.encode_values(empty, codec))
            except BadInputError as err:
                raise BadInputError(f"option 'valueFormat' ({codec.format}): {err}") from None
        # The core names each column as the input does (option `msgIdColumn`,
        # another case), where that is not the publish's name for it.
        names = {target: source for source, target in self._renames() if source != target}
        try:
            _core.check_publish_input(empty, subject, names)
        except BadInputError as err:
            chosen_id = self.msg_id is not None and self.msg_id.lower() != "msg_id"
            if chosen_id and err.column == self.msg_id:
                raise BadInputError(
                    f"{err} (option 'msgIdColumn' chose it for each row's Nats-Msg-Id)",
                    column=err.column,
                ) from None
            raise

    def _renames(self) -> list[tuple[str, str]]:
        """(input column, publish column) of each column that steers a message."""
        pairs = (
            (self.subject, "subject"),
            (self.data, "data"),
            (self.headers, "headers"),
            (self.msg_id, "msg_id"),
            (self.expected_last_subject_seq, "expected_last_subject_seq"),
            (self.expected_last_msg_id, "expected_last_msg_id"),
            (self.ttl, "ttl"),
            (self.increment, "increment"),
            (self.schedule, "schedule"),
            (self.schedule_target, "schedule_target"),
            (self.source_stream, "stream"),
            (self.source_seq, "seq"),
        )
        return [(source, target) for source, target in pairs if source is not None]

    def select(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The publish input: the chosen columns under the engine's names, plain
        (not large) string and binary types."""
        arrays = []
        names = []
        for source, target in self._renames():
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
