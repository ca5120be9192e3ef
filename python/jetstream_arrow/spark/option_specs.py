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

Connection options are the fields of :class:`jetstream_arrow.ConnectOptions`, spelled
in camelCase for Spark (``nkeySeed``, ``tlsCa``, ``apiPrefix`` ...), with its
defaults. The numeric defaults of reads and writes come from the native core
(``_core.DEFAULT_*``), where the package keeps every default, so each is written once.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._core import (
    AVRO_FRAMINGS,
    DEFAULT_ACK_TIMEOUT,
    DEFAULT_ATOMIC_BATCH_ROWS,
    DEFAULT_AVRO_FRAMING,
    DEFAULT_HEARTBEAT,
    DEFAULT_MAX_RETRIES,
    DEFAULT_ON_MALFORMED,
    DEFAULT_PUBLISH_MODE,
    DEFAULT_READ_MAX_BYTES,
    DEFAULT_RESUME_TIMEOUT,
    DEFAULT_RETRY_BACKOFF,
    DEFAULT_SPARK_BATCH_ROWS,
    DEFAULT_SPARK_MAX_MESSAGES_PER_PARTITION,
    DEFAULT_SPARK_MAX_TRIGGER_DELAY,
    DEFAULT_WINDOW,
    DEFAULT_WRITER_LEASE,
    MAX_RETRIES,
    MAX_SECONDS,
    MAX_WINDOW,
    ON_MALFORMED_MODES,
    VALUE_FORMATS,
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

_CONNECT_MEANING = {
    "servers": "NATS server URL, or several separated by commas",
    "user": "user name (with `password`)",
    "password": "password (secret: never logged)",
    "token": "authentication token (secret)",
    "creds": "path of a `.creds` file (JWT + nkey seed)",
    "creds_content": "the text of a `.creds` file, where executors have no file (secret)",
    "nkey_seed": "nkey seed for nkey authentication (secret)",
    "tls_ca": "path of the CA certificate(s) to trust",
    "tls_cert": "path of the client certificate (with `tlsKey`)",
    "tls_key": "path of the client key (with `tlsCert`)",
    "tls_ca_content": "the CA certificate(s) to trust, as PEM text (not shown in plans)",
    "tls_cert_content": "the client certificate as PEM text (with `tlsKeyContent`)",
    "tls_key_content": "the client key as PEM text (secret)",
    "tls_required": "require TLS",
    "tls_first": "TLS handshake before the NATS INFO (server `handshake_first`)",
    "name": "connection name shown by the server",
    "connect_timeout": "seconds to wait for the connection",
    "request_timeout": "seconds to wait for a JetStream API reply",
    "max_reconnects": "reconnect attempts before giving up (empty: forever)",
    "reconnect_delay": "seconds between reconnect attempts",
    "retry_on_initial_connect": "retry the first connect like a reconnect",
    "ping_interval": "seconds between client pings",
    "domain": "JetStream domain (API prefix `$JS.<domain>.API`)",
    "api_prefix": "JetStream API prefix (excludes `domain`)",
    "inbox_prefix": "prefix of reply subjects",
    "max_decompressed_bytes": "bytes a compressed payload (`Content-Encoding`) may decompress to on a read (and a consumer's batch in total); more fails the read naming its seq",
    "decompress": "reads decompress payloads marked `Content-Encoding` (`zstd`, `gzip`, `zlib`/`deflate`, `s2`); false: payloads as stored, the header kept",
}

#: What Spark's Kafka connector calls a connection option.
_CONNECT_KAFKA = {"servers": ("kafka.bootstrap.servers",)}


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _connect_kind(annotation: Any) -> str:
    args = set(typing.get_args(annotation)) or {annotation}
    for kind, python_type in (("bool", bool), ("int", int), ("float", float)):
        if python_type in args:
            return kind
    return "str"


#: The least a connection option takes, where the core refuses less (it decides; the
#: bound here lets Spark's parser and the fuzz tests say it too).
_CONNECT_MINIMUM = {"max_decompressed_bytes": 1}


def _connect_specs() -> list[OptionSpec]:
    hints = typing.get_type_hints(ConnectOptions)
    specs = []
    for f in dataclasses.fields(ConnectOptions):
        kind = _connect_kind(hints[f.name])
        specs.append(
            OptionSpec(
                python=f.name,
                spark=_camel(f.name),
                kind=kind,
                default=f.default,
                meaning=_CONNECT_MEANING.get(f.name, "see `jetstream_arrow.connect`"),
                scope="connect",
                secret=not f.repr,
                minimum=_CONNECT_MINIMUM.get(f.name),
                maximum=INT64_MAX if kind == "int" else None,
                nullable=type(None) in typing.get_args(hints[f.name]),
                kafka=_CONNECT_KAFKA.get(f.name, ()),
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
            "write": "encode the DataFrame's value columns (a struct column `value`, or every column that does not steer the publish: not `subject`, `headers`, `msg_id`, `expected_last_subject_seq` or `expected_last_msg_id`, nor `ttl` when it is a duration column, nor `schedule` and `schedule_target` when both are there, nor, in a copy of a read (`stream` and `seq` columns), the read's own `stream`, `seq`, `timestamp`, `delivered`, `consumer_seq` and `_corrupt_record`) into each payload: `json`, `avro`, `protobuf` or `arrow`; the DataFrame then has no `data` column",
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
    return option(
        formats=("avro",),
        default=DEFAULT_AVRO_FRAMING,
        choices=tuple(AVRO_FRAMINGS),
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


@dataclass(frozen=True, kw_only=True)
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
    last_per_subject: bool = option(
        excludes=_NOT_WITH_LATEST,
        not_in_read_fn=_RANGE_BY_ROW,
        only_because=_LATEST_IS_A_TABLE,
        kind="bool",
        default=False,
        queries="batch",
        native_field="last_per_subject",
        meaning="one row per subject: the latest message of each (of `subjects`), as of `asOfSequence` or `asOfTime`, read in one partition without the stream's history; spark.read only",
    )
    as_of_seq: int | None = option(
        not_in_read_fn=_RANGE_BY_ROW,
        only_because=_LATEST_IS_A_TABLE,
        spark="asOfSequence",
        kind="int",
        minimum=1,
        maximum=INT64_MAX,
        queries="batch",
        native_field="as_of_seq",
        meaning="with `lastPerSubject` or `kv`: as the stream was at this sequence (the stream needs `allow_direct`)",
    )
    as_of_time: datetime | None = option(
        rivals={"as_of_seq": ""},
        not_in_read_fn=_RANGE_BY_ROW,
        only_because=_LATEST_IS_A_TABLE,
        kind="time",
        queries="batch",
        native_field="as_of_time",
        meaning="with `lastPerSubject` or `kv`: as the stream was at this time (ISO-8601 with zone, or epoch seconds; the stream needs `allow_direct`)",
    )
    kv: str | None = option(
        excludes=_NOT_WITH_KV,
        not_in_read_fn=_RANGE_BY_ROW,
        only_because="a KV bucket's entries are a table read once, not a stream",
        queries="batch",
        meaning="read this KV bucket (stream `KV_<bucket>`) as a table of its live keys: `key`, `value`, `revision`, `operation`, `created`; `subjects` are not given, the keys are all read; spark.read only",
    )
    include_headers: bool = option(
        kind="bool",
        default=False,
        native_field="include_headers",
        meaning="add the `headers` column (map<string, array<string>>)",
    )
    include_ttl: bool = option(
        kind="bool",
        default=False,
        native_field="include_ttl",
        meaning="add the `ttl` column (interval): each message's `Nats-TTL` as the server reads it, whole seconds, -1 s for `never`, null for none; a write of the rows keeps each TTL, a write without the column drops them",
    )
    fail_on_data_loss: bool = option(
        kind="bool",
        default=True,
        meaning="fail when messages of the requested range were removed (limits, purge) before they were read; `false` reads what is left",
    )
    batch_rows: int = option(
        kind="int",
        default=DEFAULT_SPARK_BATCH_ROWS,
        minimum=1,
        maximum=INT64_MAX,
        native_field="batch_rows",
        meaning="rows per Arrow batch handed to Spark (at most `maxBytes` of payload too)",
    )
    max_bytes: int = option(
        kind="int",
        default=DEFAULT_READ_MAX_BYTES,
        minimum=1,
        maximum=INT64_MAX,
        native_field="max_bytes",
        meaning="payload bytes per Arrow batch; it also bounds the bytes asked for per pull or direct-get request, where the server counts each message's subject, headers and payload",
    )
    resume_timeout: float = option(
        kind="float",
        default=DEFAULT_RESUME_TIMEOUT,
        minimum=0,
        maximum=MAX_SECONDS,
        native_field="resume_timeout",
        meaning="seconds a read rides through a server restart or a leader election (its consumer made again, its direct gets and the requests for the stream's state sent again) before it fails with the last error",
    )
    heartbeat: float = option(
        maximum=MAX_SECONDS,
        kind="float",
        default=DEFAULT_HEARTBEAT,
        minimum=0.1,
        native_field="heartbeat",
        meaning="seconds between the server's idle heartbeats while reading",
    )
    value_format: str | None = _value_format()
    value_schema: str | None = _value_schema(tuple(VALUE_FORMATS))
    on_malformed: str = option(
        spark="mode",
        default=DEFAULT_ON_MALFORMED,
        choices=(*ON_MALFORMED_MODES, DEAD_LETTER_MODE),
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


@dataclass(frozen=True, kw_only=True)
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
    publish_mode: str = option(
        default=DEFAULT_PUBLISH_MODE,
        choices=("acked", "fast", "atomic"),
        native_field="mode",
        meaning="`fast`: fast-ingest batches into a stream with `allow_batched` (the server acks every N messages: less client and server work per row); a failed batch fails the task instead of being resent, and the task's retry stores what is missing by message id. `atomic`: batches of `atomicBatchRows` rows into a stream with `allow_atomic`, each stored whole or not at all; a refused batch fails the task, and the task's retry finds the batches already stored as duplicates. `acked`: an ack per message, 429/503/timeouts resent within the task",
    )
    atomic_batch_rows: int = option(
        kind="int",
        default=DEFAULT_ATOMIC_BATCH_ROWS,
        minimum=1,
        maximum=INT64_MAX,
        native_field="batch_rows",
        meaning="with `publishMode` `atomic`: rows per batch, each stored whole or not at all (at most the server's limit, 1,000 unless configured lower); a task's rows are cut into batches in their order",
    )
    compression: str | None = option(
        choices=("zstd", "gzip", "zlib", "s2"),
        native_field="compression",
        meaning="compress each payload (after `valueFormat` encoded it) with `zstd`, `gzip`, `zlib` or `s2`, marked `Content-Encoding: <name>` (a payload that would not shrink is sent plain); reads decompress by that header, message by message, with no option. Refused with `kv`: no KV client decompresses a value",
    )
    window: int = option(
        spark="ackWindow",
        kind="int",
        default=DEFAULT_WINDOW,
        minimum=1,
        maximum=MAX_WINDOW,
        native_field="window",
        meaning="publishes in flight per task before waiting for acks",
    )
    ack_timeout: float = option(
        maximum=MAX_SECONDS,
        kind="float",
        default=DEFAULT_ACK_TIMEOUT,
        minimum=0.001,
        native_field="ack_timeout",
        meaning="seconds to wait for each ack before retrying",
    )
    max_retries: int = option(
        kind="int",
        default=DEFAULT_MAX_RETRIES,
        minimum=0,
        maximum=MAX_RETRIES,
        native_field="max_retries",
        meaning="retries of a publish after 429, 503 or an ack timeout",
    )
    retry_backoff: float = option(
        maximum=MAX_SECONDS,
        kind="float",
        default=DEFAULT_RETRY_BACKOFF,
        minimum=0,
        native_field="retry_backoff",
        meaning="seconds before the first retry (doubling)",
    )
    expected_stream: str | None = option(
        native_field="expected_stream",
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
        minimum=0,
        maximum=4_294_967_295,
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


def option_table(scope: str) -> list[OptionSpec]:
    """The documented options of one scope (connect, read, write), for the README."""
    return {"connect": CONNECT_SPECS, "read": READ_SPECS, "write": WRITE_SPECS}[scope]
