"""The Spark options, declared once. Each option is a field of :class:`ReadOptions`
or :class:`WriteOptions` (the options a read or a write is parsed into), and its
declaration (:func:`option`) says all there is to it: its Spark name (camelCase,
matched case-insensitively, beside the field's Python name), kind, default, bounds,
which kind of query takes it and why the other refuses it, the options it does not go
with, whether ``read_fn`` takes it, the native option it sets, and its line in the
docs. An option shared by reads and writes (the value codec's) is declared once and
given to both.

The rest is derived from the fields (:func:`specs_of`): the name index, the parser and
its refusals (:mod:`.options`), the defaults, the native mapping, the error messages
that list the known options, the docs' option tables (a test compares them) and the
option probes. Adding an option is adding a field (docs/development.md). It is one
module because it is one table: split, the parser and the guide would each have to
put it back together.

The native options, the connection's (the fields of
:class:`jetstream_arrow.ConnectOptions`, in camelCase: ``nkeySeed``, ``tlsCa`` ...),
a read's and a publisher's, are declared once, in the native core
(``_core.OPTION_TABLES``): a Spark option that sets one names its field
(:func:`native`) and takes its kind, bounds, choices, default and meaning from the
core's table, saying only what Spark says otherwise (its Spark name, default or
meaning). Spark takes every option of the core's read and publish tables: those the
classes below do not declare are added under their camelCase names as the core
declares them (:func:`takes_native_options`), unless listed in ``_READ_NOT_TAKEN`` or
``_PUBLISH_NOT_TAKEN`` with the reason. A native option added to the core is thus a
Spark option without an edit here.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._core import (
    DEFAULT_SPARK_BATCH_ROWS,
    DEFAULT_SPARK_MAX_MESSAGES_PER_PARTITION,
    DEFAULT_SPARK_MAX_TRIGGER_DELAY,
    DEFAULT_WRITER_LEASE,
    MAX_SECONDS,
    VALUE_FORMATS,
)
from ..option_tables import (
    NativeOption,
    meaning_of,
    native_option,
    native_options,
)
from ..options import ConnectOptions


@dataclass(frozen=True)
class OptionSpec:
    """One option: its Python and Spark names, value kind, default and meaning."""

    python: str
    spark: str
    kind: str  # str, int, float, bool, subjects, names, time
    default: Any
    meaning: str
    scope: str  # connect, read, write
    secret: bool = False
    minimum: float | None = None
    # The largest value the engine takes: see INT64_MAX, and MAX_SECONDS for durations.
    maximum: float | None = None
    nullable: bool = False  # None is a value; for a number also "none" (or "null")
    choices: tuple[str, ...] = ()  # the accepted values of a "str" option (lower case)
    # Which queries honour the option: "batch" (spark.read, df.write), "stream"
    # (spark.readStream, df.writeStream) or "both". Given to the other kind it is an
    # error, never silently ignored.
    queries: str = "both"
    # The field of the native options a Spark option sets (jetstream_arrow.PublishOptions
    # for a write, ReadOptions for a read), by its Python name there, which Spark
    # accepts too; None for an option of the Spark source or sink itself.
    native_field: str | None = None
    # Why the kind of query the option does not apply to refuses it (with ``queries``).
    only_because: str | None = None
    # Why ``read_fn`` (mapInArrow) refuses the option, when it does.
    not_in_read_fn: str | None = None
    # The options that do not go with this one when it is given, each with the reason
    # (Python names; refused as "option <other> does not go with option <this>").
    excludes: tuple[tuple[str, str], ...] = ()
    # The options that name the same thing another way, each with the reason (or ""):
    # refused as "options <other> and <this> exclude each other".
    rivals: tuple[tuple[str, str], ...] = ()
    # What Spark's Kafka source or sink calls it: given here by mistake, the parser
    # names this option instead.
    kafka: tuple[str, ...] = ()
    # The value formats the option belongs to (empty: any, or none): given with another
    # valueFormat, or without one, it would do nothing, so it is refused.
    formats: tuple[str, ...] = ()


#: The read mode (option ``mode``) of the Spark source beside the core's own: payloads
#: that do not decode are published to option ``deadLetterStream`` and left out.
DEAD_LETTER_MODE = "deadletter"

#: The largest count or sequence an option takes: Spark's LongType and Arrow's int64
#: hold it, and so do the engine's u64 and usize. A larger number would be refused by
#: the engine later, on an executor, without naming the option.
INT64_MAX = 2**63 - 1

#: What Spark's Kafka connector calls a connection option.
_CONNECT_KAFKA = {"servers": ("kafka.bootstrap.servers",)}

#: The kinds of the core's options, as the parser reads them from Spark's strings.
_SPARK_KIND = {
    "count": "int",
    "seconds": "float",
    "number": "float",
    "bool": "bool",
    "text": "str",
    "path": "str",
    "choice": "str",
    "texts": "subjects",
    "time": "time",
}


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _declared_by_core(core: NativeOption) -> dict[str, Any]:
    """What a Spark option takes from the core's declaration of its native option."""
    if core["kind"] not in _SPARK_KIND:
        raise TypeError(f"no Spark option takes a value of kind {core['kind']!r} ({core['name']})")
    kind = _SPARK_KIND[core["kind"]]
    maximum = core["maximum"]
    if kind == "int":  # what Spark's LongType holds, and Arrow's int64
        maximum = INT64_MAX if maximum is None else min(maximum, INT64_MAX)
    return {
        "kind": kind,
        "default": core["default"],
        "minimum": core["minimum"],
        "maximum": maximum,
        "choices": tuple(core["choices"]),
        "meaning": meaning_of(core),
    }


def _connect_specs() -> list[OptionSpec]:
    hints = typing.get_type_hints(ConnectOptions)
    specs = []
    for f in dataclasses.fields(ConnectOptions):
        declared = _declared_by_core(native_option("connect", f.name))
        specs.append(
            OptionSpec(
                python=f.name,
                spark=_camel(f.name),
                scope="connect",
                secret=not f.repr,
                # None is a value where the field's type says so (maxReconnects=none).
                nullable=type(None) in typing.get_args(hints[f.name]),
                kafka=_CONNECT_KAFKA.get(f.name, ()),
                **declared,
            )
        )
    return specs


#: The metadata key under which a field of ReadOptions or WriteOptions holds its declaration.
_DECLARED = "jetstream_arrow.spark.option"


def option(
    *,
    meaning: str | Mapping[str, str],
    spark: str | None = None,
    kind: str = "str",
    default: Any = None,
    required: bool = False,
    minimum: float | None = None,
    maximum: float | None = None,
    nullable: bool = False,
    choices: tuple[str, ...] = (),
    queries: str = "both",
    native_field: str | None = None,
    only_because: str | None = None,
    not_in_read_fn: str | None = None,
    excludes: Mapping[str, str] | None = None,
    rivals: Mapping[str, str] | None = None,
    kafka: tuple[str, ...] = (),
    formats: tuple[str, ...] = (),
) -> Any:
    """A field of :class:`ReadOptions` or :class:`WriteOptions` that is a Spark option,
    declared with everything :class:`OptionSpec` holds (``spark``: default, the field's
    name in camelCase; ``meaning``: one line, or one per scope for a shared option;
    ``required``: a field without a default, which the parser always sets;
    ``formats``: the values of ``valueFormat`` the option is for, refused with any other
    or none)."""
    declared = {
        "meaning": meaning,
        "spark": spark,
        "kind": kind,
        "default": default,
        "minimum": minimum,
        "maximum": maximum,
        "nullable": nullable,
        "choices": choices,
        "queries": queries,
        "native_field": native_field,
        "only_because": only_because,
        "not_in_read_fn": not_in_read_fn,
        "excludes": tuple((excludes or {}).items()),
        "rivals": tuple((rivals or {}).items()),
        "kafka": kafka,
        "formats": formats,
    }
    if queries != "both" and only_because is None:
        raise TypeError("an option of one kind of query says why the other refuses it")
    if not set(formats) <= set(VALUE_FORMATS):
        raise TypeError(f"formats {formats} are not all value formats ({VALUE_FORMATS})")
    metadata = {_DECLARED: declared}
    if required:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def specs_of(options: type, scope: str) -> list[OptionSpec]:
    """The options declared by the fields of ``options`` (ReadOptions or WriteOptions),
    in their order."""
    specs = []
    for f in dataclasses.fields(options):
        declared = dict(f.metadata.get(_DECLARED, {}))
        if not declared:
            continue  # a field the parser fills (connect, protobuf_descriptor)
        meaning = declared.pop("meaning")
        spark = declared.pop("spark") or _camel(f.name)
        specs.append(
            OptionSpec(
                python=f.name,
                spark=spark,
                meaning=meaning if isinstance(meaning, str) else meaning[scope],
                scope=scope,
                **declared,
            )
        )
    return specs


#: Marks a Spark option's default as its native option's, from the core's table.
_CORE_DEFAULT: Any = object()


def native(
    field: str,
    table: str,
    *,
    default: Any = _CORE_DEFAULT,
    meaning: str | Mapping[str, str] | None = None,
    **declared: Any,
) -> Any:
    """A Spark option that sets the native option ``field`` of the core's ``table``
    ("read" or "publish"): its kind, bounds, choices, default and meaning are the
    core's; ``default``, ``meaning`` and what :func:`option` takes besides (``spark``,
    ``queries``, ``excludes`` ...) say only where Spark's differ."""
    core = _declared_by_core(native_option(table, field))
    if default is not _CORE_DEFAULT:
        core["default"] = default
    if meaning is not None:
        core["meaning"] = meaning
    return option(native_field=field, **{**core, **declared})


def takes_native_options(table: str, not_taken: Mapping[str, str]) -> Any:
    """A class decorator (under ``@dataclass``): every option of the core's ``table``
    the class declares no field for (by :func:`native`) becomes one, a Spark option
    under its camelCase name as the core declares it; ``not_taken`` lists the options
    Spark does not take, each with the reason."""

    def add(cls: type) -> type:
        names = [core["name"] for core in native_options(table)]
        stale = sorted(set(not_taken) - set(names))
        if stale:
            raise TypeError(f"{cls.__name__}: the core's {table!r} options have no {stale}")
        own = vars(cls)
        annotations = own["__annotations__"]  # a dict: the class body has fields
        declared = {
            value.metadata[_DECLARED]["native_field"]
            for value in own.values()
            if isinstance(value, dataclasses.Field) and _DECLARED in value.metadata
        }
        for name in names:
            if name in declared or name in not_taken:
                continue
            if name in annotations:
                raise TypeError(
                    f"{cls.__name__}.{name} is a Spark option of the native option's name "
                    f"that does not set it: list {name!r} as not taken, saying why"
                )
            annotations[name] = "Any"
            setattr(cls, name, native(name, table))
        return cls

    return add


# Why one kind of query refuses an option of the other, shared by several options.
_NO_END = "a streaming query has no end: it reads what arrives"
_WHOLE_RANGE = "a batch read reads its whole range at once"
_LATEST_IS_A_TABLE = "the latest message of each subject is a table read once, not a stream"
# Why read_fn refuses an option: it reads the ranges its input rows give, whole.
_RANGE_BY_ROW = "each input row gives its range (columns stream, start_seq, end_seq)"
_SPLITS = (
    "it splits a read into Spark partitions, and read_fn reads each input row's range "
    "whole, in the task that holds the row (split the ranges in the input instead)"
)
# Why a read names its streams one way only.
_ONE_WAY = "name the streams read one way (a path given to load() or option 'kv' names one stream)"
# What a read of several streams (options streams, streamPattern) does not take.
_ONE_STREAM_ONLY = {
    "start_seq": "a sequence belongs to one stream; use startingOffsets or startingTime",
    "end_seq": "a sequence belongs to one stream; use endingTime",
    "consumer": "a durable consumer belongs to one stream",
    "last_per_subject": "the latest message of each subject is read from one stream",
}
# Where a read through a durable consumer starts is the consumer's to say.
_NOT_WITH_CONSUMER = dict.fromkeys(
    ("starting_offsets", "start_seq", "start_time"),
    "the query starts where the consumer stands (its ack floor); drop it",
)
# What a read of the latest message per subject (lastPerSubject, or a KV bucket) has
# no use for.
_LATEST = "it reads the latest message of each subject"
_NOT_WITH_LATEST = dict.fromkeys(
    (
        "starting_offsets",
        "start_seq",
        "end_seq",
        "start_time",
        "end_time",
        "consumer",
        "value_format",
    ),
    _LATEST,
)
_NOT_WITH_KV = {
    **_NOT_WITH_LATEST,
    "subjects": f"{_LATEST}, and its subjects are its keys (all of them are read)",
    "include_headers": f"{_LATEST} as key, value, revision, operation and created",
    "include_ttl": f"{_LATEST} as key, value, revision, operation and created",
}


# -- the value codec's options, taken by reads and writes alike ----------------------------


def _value_format() -> Any:
    return option(
        nullable=True,
        choices=tuple(VALUE_FORMATS),
        meaning={
            "read": "decode each payload into typed columns: `json`, `avro`, `protobuf` or `arrow` (an Arrow IPC stream per message); the message columns and a struct column `value`, or with `.schema(...)` the message columns and value fields it names",
            "write": "encode the DataFrame's value columns (a struct column `value`, or every column that does not steer the publish: not `subject`, `headers`, `msg_id`, `expected_last_subject_seq` or `expected_last_msg_id`, nor `ttl` when it is a duration column, nor `schedule` and `schedule_target` when both are there, nor, in a copy of a read (`stream` and `seq` columns), the read's own `stream`, `seq`, `timestamp`, `delivered`, `consumer_seq` and `_corrupt_record`) into each payload: `json`, `avro`, `protobuf` or `arrow`; the DataFrame then has no `data` column (see [Publishing with a codec](payloads.md#publishing))",
        },
    )


def _value_schema(formats: tuple[str, ...]) -> Any:
    """Reads take it for every format, writes for the formats whose payloads are
    written by a schema (a JSON or Arrow write takes the DataFrame's)."""
    return option(
        nullable=True,
        formats=formats,
        meaning={
            "read": "`json` and `arrow`: the value's schema, a Spark schema as JSON (`df.schema.json()`), where DDL goes to `.schema(...)` instead; default: inferred from the stream's first messages (`json`: a payload with a field the inferred schema lacks then fails the read, see [Reading](#reading)). For `avro` and `protobuf` the earlier spelling of `avroSchema` and `protobufMessage`",
            "write": "for `avro` and `protobuf` the earlier spelling of `avroSchema` and `protobufMessage`",
        },
    )


def _earlier_spelling(spark: str) -> dict[str, str]:
    """The rival of a format's own option for its schema: ``valueSchema``, which said
    the same before the format had its own option, and is still taken for it."""
    return {"value_schema": f"'valueSchema' is the earlier spelling of '{spark}'; give one of them"}


def _avro_schema() -> Any:
    return option(
        formats=("avro",),
        rivals=_earlier_spelling("avroSchema"),
        nullable=True,
        meaning={
            "read": "`avro`: the Avro schema (JSON) the values are read as (with `confluent` framing and `avroSchemasById`, the one schema the writers' schemas are read as)",
            "write": "`avro`: the Avro schema (JSON) the values are written with (default: derived from the columns)",
        },
    )


def _protobuf_message() -> Any:
    return option(
        formats=("protobuf",),
        rivals=_earlier_spelling("protobufMessage"),
        nullable=True,
        meaning="`protobuf`: the message's full name (`package.Message`), a message of the descriptor set of `protobufDescriptorFile`",
    )


def _avro_framing() -> Any:
    core = native_option("avro", "avro_framing")
    return option(
        formats=("avro",),
        default=core["default"],
        choices=tuple(core["choices"]),
        meaning={
            "read": "how each Avro payload is framed: `raw` (the datum), `single-object` (Avro's single-object encoding) or `confluent` (a zero byte and a 4-byte schema id)",
            "write": "how each Avro payload is framed: `raw`, `single-object` or `confluent`",
        },
    )


def _protobuf_descriptor_file() -> Any:
    return option(
        formats=("protobuf",),
        nullable=True,
        meaning={
            "read": "`protobuf`: the path of a descriptor set holding the message (`protoc --include_imports --descriptor_set_out=FILE`), read on the driver",
            "write": "`protobuf`: the path of a descriptor set holding the message, read on the driver",
        },
    )


# -- the options, parsed ------------------------------------------------------------------


# The options of the core's read table that Spark does not take, and why.
_RANGE_IS_SPARKS = (
    "the source's own option of that name: it splits the range read into partitions, "
    "giving each its own to read"
)
_READ_NOT_TAKEN = {
    "start_seq": _RANGE_IS_SPARKS,
    "end_seq": _RANGE_IS_SPARKS,
    "start_time": _RANGE_IS_SPARKS,
    "end_time": _RANGE_IS_SPARKS,
    "subjects": "the source's own option of that name, which also chooses the streams of `streamPattern`",
    "method": "the source chooses: direct gets for a read through a durable consumer (whose messages are the consumer's), else the core's choice by the range",
    "payload_views": "Spark takes each batch into its own memory: views of the buffers received would save no copy",
    "include_positions": "the positions exactly-once writers keep in a stream are their bookkeeping, not its rows: Spark's exactly-once writes read them themselves",
}


@dataclass(frozen=True, kw_only=True)
@takes_native_options("read", _READ_NOT_TAKEN)
class ReadOptions:
    """Everything a batch or streaming read needs; picklable, secrets kept out of ``repr``."""

    connect: ConnectOptions
    # The stream of a read of one stream; empty when options ``streams`` or
    # ``streamPattern`` choose several (see :func:`.stream_lookup.streams_of`).
    stream: str = option(
        kafka=("assign", "topic"),
        meaning="stream to read (one of `stream`, `streams`, `streamPattern` is required; `load(name)` also sets it)",
    )
    streams: tuple[str, ...] | None = option(
        rivals={"stream": _ONE_WAY},
        kafka=("subscribe",),
        excludes=_ONE_STREAM_ONLY,
        not_in_read_fn=_RANGE_BY_ROW,
        kind="names",
        meaning="several streams to read, comma-separated (Kafka: `subscribe`); column `stream` tells their rows apart",
    )
    stream_pattern: str | None = option(
        rivals={"stream": _ONE_WAY, "streams": _ONE_WAY},
        kafka=("subscribePattern",),
        excludes=_ONE_STREAM_ONLY,
        not_in_read_fn=_RANGE_BY_ROW,
        meaning="every stream whose whole name matches this regular expression (Kafka: `subscribePattern`), and with `subjects` only the streams that store them; a streaming query reads streams created later too",
    )
    subjects: tuple[str, ...] | None = option(
        kind="subjects",
        meaning="only these subjects: comma-separated filters, wildcards allowed",
    )
    starting_offsets: str | None = option(
        not_in_read_fn=_RANGE_BY_ROW,
        choices=("earliest", "latest"),
        meaning="`earliest` or `latest`: where to start without `startingSequence` or `startingTime` (default: `earliest` for spark.read, `latest` for spark.readStream, as in Kafka; `latest` is for spark.readStream only)",
    )
    start_seq: int | None = option(
        rivals={"starting_offsets": ""},
        not_in_read_fn=_RANGE_BY_ROW,
        spark="startingSequence",
        kind="int",
        minimum=1,
        maximum=INT64_MAX,
        meaning="first stream sequence to read (default: see `startingOffsets`)",
    )
    end_seq: int | None = option(
        kafka=("endingOffsets",),
        not_in_read_fn=_RANGE_BY_ROW,
        only_because=_NO_END,
        spark="endingSequence",
        kind="int",
        minimum=1,
        maximum=INT64_MAX,
        queries="batch",
        meaning="last stream sequence to read, inclusive (default: the last when the query is planned); spark.read only",
    )
    start_time: datetime | None = option(
        rivals={"starting_offsets": "", "start_seq": ""},
        kafka=("startingOffsetsByTimestamp", "startingTimestamp"),
        not_in_read_fn=_RANGE_BY_ROW,
        spark="startingTime",
        kind="time",
        meaning="read from the first message stored at or after this time (ISO-8601 with zone, or epoch seconds)",
    )
    end_time: datetime | None = option(
        rivals={"end_seq": ""},
        kafka=("endingOffsetsByTimestamp", "endingTimestamp"),
        not_in_read_fn=_RANGE_BY_ROW,
        only_because=_NO_END,
        spark="endingTime",
        kind="time",
        queries="batch",
        meaning="stop before the first message stored at or after this time (exclusive); spark.read only",
    )
    min_partitions: int = option(
        not_in_read_fn=_SPLITS,
        kind="int",
        default=1,
        minimum=1,
        maximum=INT64_MAX,
        meaning="at least this many Spark partitions (at most one per sequence)",
    )
    max_messages_per_partition: int = option(
        kafka=("maxRecordsPerPartition",),
        not_in_read_fn=_SPLITS,
        kind="int",
        default=DEFAULT_SPARK_MAX_MESSAGES_PER_PARTITION,
        minimum=1,
        maximum=INT64_MAX,
        meaning="split the sequence range so no partition spans more sequences than this",
    )
    consumer: str | None = option(
        excludes=_NOT_WITH_CONSUMER,
        only_because=(
            "the consumer's messages are acknowledged as a streaming query commits its "
            "micro-batches; a batch read reads a range of the stream without one"
        ),
        nullable=True,
        queries="stream",
        meaning="read through this durable consumer (created if missing), acking each micro-batch's messages after Spark commits it: for WorkQueue and Interest streams, which then empty as the query progresses; the stream needs `allow_direct`; spark.readStream only",
    )
    consumer_group: str | None = option(
        excludes=_NOT_WITH_CONSUMER,
        only_because=(
            "queries sharing a consumer take over from one another as streaming queries; "
            "a batch read reads a range of the stream without one"
        ),
        nullable=True,
        queries="stream",
        meaning="with `consumer`: the consumer's pinned priority group (1 to 16 letters, digits, `/`, `_`, `=`, `-`) this query joins, so that queries sharing the consumer run as one active and standbys: the server delivers to one (the pinned), and when it stops pulling (its driver killed) another takes over after `consumerPinTimeout`, from the consumer's ack floor; the consumer is created with policy `pinned_client` if missing",
    )
    consumer_pin_timeout: float | None = option(
        excludes=_NOT_WITH_CONSUMER,
        only_because=(
            "queries sharing a consumer take over from one another as streaming queries; "
            "a batch read reads a range of the stream without one"
        ),
        kind="float",
        nullable=True,
        minimum=1.0,
        maximum=86_400.0,
        queries="stream",
        meaning="with `consumerGroup`: seconds without a pull after which the server moves the pin to another query (the consumer's `priority_timeout`: 30 s when this source creates the consumer and the option is not given; a consumer that exists must have the same)",
    )
    max_messages_per_trigger: int | None = option(
        kafka=("maxOffsetsPerTrigger",),
        only_because=_WHOLE_RANGE,
        kind="int",
        minimum=1,
        maximum=INT64_MAX,
        queries="stream",
        meaning="at most this many stream sequences (so at most this many rows) per micro-batch (Kafka: `maxOffsetsPerTrigger`); spark.readStream only",
    )
    min_messages_per_trigger: int | None = option(
        kafka=("minOffsetsPerTrigger",),
        only_because=_WHOLE_RANGE,
        kind="int",
        nullable=True,
        minimum=1,
        maximum=INT64_MAX,
        queries="stream",
        meaning="hold a micro-batch back until this many messages are there to read, or until `maxTriggerDelay` has passed since the last one (Kafka: `minOffsetsPerTrigger`); not with trigger(availableNow=True), which reads what is there; spark.readStream only",
    )
    max_trigger_delay: float = option(
        maximum=MAX_SECONDS,
        only_because=_WHOLE_RANGE,
        kind="float",
        default=DEFAULT_SPARK_MAX_TRIGGER_DELAY,
        minimum=0,
        queries="stream",
        meaning="with `minMessagesPerTrigger`: seconds a micro-batch with fewer messages waits at most (Kafka's `15m` is `900` here); spark.readStream only",
    )
    max_bytes_per_trigger: int | None = option(
        only_because=_WHOLE_RANGE,
        kind="int",
        nullable=True,
        minimum=1,
        maximum=INT64_MAX,
        queries="stream",
        meaning="about this many bytes per micro-batch at most, and always at least one message: as many messages as fit at the stream's mean stored message size; spark.readStream only",
    )
    last_per_subject: bool = native(
        "last_per_subject",
        "read",
        excludes=_NOT_WITH_LATEST,
        not_in_read_fn=_RANGE_BY_ROW,
        only_because=_LATEST_IS_A_TABLE,
        queries="batch",
        meaning="one row per subject: the latest message of each (of `subjects`), as of `asOfSequence` or `asOfTime`, read in one partition without the stream's history; spark.read only",
    )
    # Spark's own bounds, refused where the options are parsed, naming Spark's option:
    # stream sequences start at 1.
    as_of_seq: int | None = native(
        "as_of_seq",
        "read",
        minimum=1,
        not_in_read_fn=_RANGE_BY_ROW,
        only_because=_LATEST_IS_A_TABLE,
        spark="asOfSequence",
        queries="batch",
        meaning="with `lastPerSubject` or `kv`: as the stream was at this sequence (the stream needs `allow_direct`)",
    )
    as_of_time: datetime | None = native(
        "as_of_time",
        "read",
        rivals={"as_of_seq": ""},
        not_in_read_fn=_RANGE_BY_ROW,
        only_because=_LATEST_IS_A_TABLE,
        queries="batch",
        meaning="with `lastPerSubject` or `kv`: as the stream was at this time (ISO-8601 with zone, or epoch seconds; the stream needs `allow_direct`)",
    )
    kv: str | None = option(
        excludes=_NOT_WITH_KV,
        not_in_read_fn=_RANGE_BY_ROW,
        only_because="a KV bucket's entries are a table read once, not a stream",
        queries="batch",
        meaning="read this KV bucket (stream `KV_<bucket>`) as a table of its live keys: `key`, `value`, `revision`, `operation`, `created`; `subjects` are not given, the keys are all read; spark.read only",
    )
    include_headers: bool = native(
        "include_headers", "read", meaning="add the `headers` column (map<string, array<string>>)"
    )
    include_ttl: bool = native(
        "include_ttl",
        "read",
        meaning="add the `ttl` column (interval): each message's `Nats-TTL` as the server reads it, whole seconds, -1 s for `never`, null for none; a write of the rows keeps each TTL, a write without the column drops them",
    )
    fail_on_data_loss: bool = option(
        kind="bool",
        default=True,
        meaning="fail when messages of the requested range were removed (limits, purge) before they were read; `false` reads what is left",
    )
    batch_rows: int = native(
        "batch_rows",
        "read",
        default=DEFAULT_SPARK_BATCH_ROWS,
        meaning="rows per Arrow batch handed to Spark (at most `maxBytes` of payload too)",
    )
    max_bytes: int = native("max_bytes", "read")
    resume_timeout: float = native(
        "resume_timeout",
        "read",
        meaning="seconds a read rides through a server restart or a leader election (its consumer made again, its direct gets and the requests for the stream's state sent again) before it fails with the last error",
    )
    # Spark's own bound: a shorter heartbeat, missed twice in a worker's pause (a
    # garbage collection, a busy executor), would fail a task that was never stuck.
    heartbeat: float = native("heartbeat", "read", minimum=0.1)
    value_format: str | None = _value_format()
    value_schema: str | None = _value_schema(tuple(VALUE_FORMATS))
    on_malformed: str = option(
        spark="mode",
        # Every format's decoder takes the same modes: the JSON codec's say them.
        default=native_option("json", "on_malformed")["default"],
        choices=(*native_option("json", "on_malformed")["choices"], DEAD_LETTER_MODE),
        meaning="a payload that does not decode: `failfast` (fail naming stream, sequence and field), `permissive` (a null value and the payload in `_corrupt_record`) or `dropmalformed` (left out) -- Spark's JSON reader's modes -- or `deadletter` (left out, and published to `deadLetterStream` first)",
    )
    dead_letter_stream: str | None = option(
        formats=tuple(VALUE_FORMATS),
        meaning="with `mode` `deadletter`: the stream each payload that does not decode is published to, acknowledged, before its task yields the good rows: its bytes, the decoder's error and its source stream, subject and sequence in headers, under msg id `<stream>:<seq>:<reader>` (`<reader>` a digest of Spark and the stream's creation: a retried task adds nothing within the stream's duplicate window); it must exist and not be a stream read",
    )
    avro_schema: str | None = _avro_schema()
    avro_framing: str = _avro_framing()
    avro_schemas_by_id: str | None = option(
        formats=("avro",),
        nullable=True,
        meaning='`confluent` framing: the writers\' Avro schemas by id, as a JSON object (`{"42": {...}}`)',
    )
    protobuf_message: str | None = _protobuf_message()
    protobuf_descriptor_file: str | None = _protobuf_descriptor_file()
    # The file's bytes, read where the options are parsed (the driver), so tasks on
    # other machines need no copy of it.
    protobuf_descriptor: bytes | None = None

    def reader_kwargs(self) -> dict[str, Any]:
        """The :class:`jetstream_arrow.ReadOptions` fields these options set."""
        return {
            spec.native_field: getattr(self, spec.python)
            for spec in READ_SPECS
            if spec.native_field is not None
        }

    @property
    def several_streams(self) -> bool:
        """Whether the read names its streams by ``streams`` or ``streamPattern``: its
        streaming offsets then keep a position per stream."""
        return self.streams is not None or self.stream_pattern is not None


# The options of the core's publish table that Spark does not take, and why.
_ONE_CALL = (
    "it checks the first row of one publish call, and a write is many calls (a task's "
    "batches); columns `expected_last_subject_seq` and `expected_last_msg_id` check each row"
)
_PUBLISH_NOT_TAKEN = {
    "subject": "the write's own option of that name, beside each row's `subject` column",
    "on_full": "a task waits for room in its window: rows refused would fail it",
    "msg_id_prefix": "a write makes its message ids from `writeId` (a streaming write, from its query and micro-batch) and each row's place",
    "msg_id_start": "a write makes its message ids from `writeId` (a streaming write, from its query and micro-batch) and each row's place",
    "expected_last_seq": _ONE_CALL,
    "expected_last_msg_id": _ONE_CALL,
    "expected_last_subject_seq": _ONE_CALL,
    "keep_control_headers": "the write decides: a copy of a read drops them, a KV write keeps them (its deletes are headers)",
}


@dataclass(frozen=True, kw_only=True)
@takes_native_options("publish", _PUBLISH_NOT_TAKEN)
class WriteOptions:
    """Everything a batch or streaming write needs; picklable, secrets kept out of ``repr``."""

    connect: ConnectOptions
    subject: str | None = option(
        kafka=("topic",),
        meaning="publish every row to this subject (overrides a `subject` column)",
    )
    msg_id_column: str | None = option(
        meaning="string column whose value is each message's `Nats-Msg-Id` (default: a `msg_id` column if present, else ids made per write)",
    )
    kv: str | None = option(
        meaning="write into this KV bucket instead of a stream: the DataFrame has `key` (string) and `value` (binary or string), optionally `operation` (`PUT`, `DEL` or `PURGE`) and `expected_revision` (long: a compare-and-set, 0 for a key with no entry; a row whose key moved on fails the task naming the conflict)",
    )
    write_id: str = option(
        only_because=(
            "a streaming write makes its message ids from the query id (kept in the "
            "checkpoint) and the micro-batch id, so a restarted query re-sends the same ids; "
            "a copy of a stream, from its source messages alone, so any query moving a "
            "message again re-sends its id"
        ),
        required=True,
        queries="batch",
        meaning="the id of this write, prefix of the generated `Nats-Msg-Id`s (default: a new random id per write); give the same id to re-run a failed write without duplicates; df.write only (a streaming write uses its query id, a streaming copy its source messages' ids)",
    )
    exactly_once: bool | None = option(
        kind="bool",
        nullable=True,
        meaning="store each row exactly once at any age: every task keeps its position in the target stream (`$JA.POS.<stream>.>`), so a re-run with the same `writeId`, a retried task or a restarted query skips what is stored even after the duplicate window. Default: on where the stream named by `stream` holds positions (`create_stream(..., exactly_once=True)`), else off with one warning per write naming `jetstream-arrow streams enable-exactly-once`; `true` into a stream that cannot is refused before any task runs",
    )
    writer_lease: float | None = option(
        kind="float",
        nullable=True,
        minimum=0.001,
        maximum=MAX_SECONDS,
        meaning=f"with `exactlyOnce`: seconds a task's position claims its identity (default {DEFAULT_WRITER_LEASE:g}; written again every half lease while the task works); a retry or restart of a task killed mid-way watches its position for one lease before it resumes (shorter: faster restarts, but a task whose input stalls longer can be taken over); refused where no position is kept",
    )
    publish_mode: str = native(
        "mode",
        "publish",
        meaning="`fast`: fast-ingest batches into a stream with `allow_batched` (the server acks every N messages: less client and server work per row); a failed batch fails the task instead of being resent, and the task's retry stores what is missing by message id. `atomic`: batches of `atomicBatchRows` rows into a stream with `allow_atomic`, each stored whole or not at all; a refused batch fails the task, and the task's retry finds the batches already stored as duplicates. `acked`: an ack per message, 429/503/timeouts resent within the task",
    )
    atomic_batch_rows: int = native(
        "batch_rows",
        "publish",
        meaning="with `publishMode` `atomic`: rows per batch, each stored whole or not at all (at most the server's limit, 1,000 unless configured lower); a task's rows are cut into batches in their order",
    )
    compression: str | None = native(
        "compression",
        "publish",
        meaning="compress each payload (after `valueFormat` encoded it) with `zstd`, `gzip`, `zlib` or `s2`, marked `Content-Encoding: <name>` (a payload that would not shrink is sent plain); reads decompress by that header, message by message, with no option. Refused with `kv`: no KV client decompresses a value",
    )
    window: int = native(
        "window",
        "publish",
        spark="ackWindow",
        meaning="publishes in flight per task before waiting for acks",
    )
    # Spark's own bound: an ack timeout under a millisecond would resend every message.
    ack_timeout: float = native("ack_timeout", "publish", minimum=0.001)
    max_retries: int = native("max_retries", "publish")
    retry_backoff: float = native("retry_backoff", "publish")
    expected_stream: str | None = native(
        "expected_stream",
        "publish",
        meaning="the stream every message must be stored in (header `Nats-Expected-Stream`); option `stream` on a write means the same",
    )
    value_format: str | None = _value_format()
    value_schema: str | None = _value_schema(("avro", "protobuf"))
    avro_schema: str | None = _avro_schema()
    avro_framing: str = _avro_framing()
    avro_schema_id: int | None = option(
        formats=("avro",),
        kind="int",
        nullable=True,
        minimum=native_option("avro", "avro_schema_id")["minimum"],
        maximum=native_option("avro", "avro_schema_id")["maximum"],
        meaning="`confluent` framing: the schema id each payload starts with",
    )
    protobuf_message: str | None = _protobuf_message()
    protobuf_descriptor_file: str | None = _protobuf_descriptor_file()
    # Read on the driver, as for reads.
    protobuf_descriptor: bytes | None = None
    # Whether the user gave `writeId`: a write under a random one can never be run
    # again, so its tasks' positions are removed once it commits.
    write_id_given: bool = False

    def publisher_kwargs(self) -> dict[str, Any]:
        """The :class:`jetstream_arrow.PublishOptions` fields these options set."""
        return {
            spec.native_field: getattr(self, spec.python)
            for spec in WRITE_SPECS
            if spec.native_field is not None
        }


READ_SPECS = specs_of(ReadOptions, "read")
WRITE_SPECS = specs_of(WriteOptions, "write")
CONNECT_SPECS = _connect_specs()


def spec_defaults(specs: list[OptionSpec]) -> dict[str, Any]:
    """Each option's default, by Python name (the parsed options' field defaults)."""
    return {spec.python: spec.default for spec in specs}
