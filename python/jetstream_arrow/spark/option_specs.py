"""The table of Spark options: every option's names, kind, default and meaning.

One table serves the parser (:mod:`.options`), the error messages that list the known
options, and the README's option tables (a test compares them). Every option has a
Spark name (camelCase, matched case-insensitively) and a Python name (snake_case).
It is one module because it is one table: split, the parser and the guide would each
have to put it back together.

Connection options are the fields of :class:`jetstream_arrow.ConnectOptions`, spelled
in camelCase for Spark (``nkeySeed``, ``tlsCa``, ``apiPrefix`` ...), with its
defaults. The numeric defaults of reads and writes come from the native core
(``_core.DEFAULT_*``), where the package keeps every default, so each is written once.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
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
    DEFAULT_RETRY_BACKOFF,
    DEFAULT_SPARK_BATCH_ROWS,
    DEFAULT_SPARK_MAX_MESSAGES_PER_PARTITION,
    DEFAULT_SPARK_MAX_TRIGGER_DELAY,
    DEFAULT_WINDOW,
    MAX_RETRIES,
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
    # The largest value the engine takes (ints only); see INT64_MAX.
    maximum: int | None = None
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
}


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _connect_kind(annotation: Any) -> str:
    args = set(typing.get_args(annotation)) or {annotation}
    for kind, python_type in (("bool", bool), ("int", int), ("float", float)):
        if python_type in args:
            return kind
    return "str"


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
                maximum=INT64_MAX if kind == "int" else None,
                nullable=type(None) in typing.get_args(hints[f.name]),
            )
        )
    return specs


READ_SPECS = [
    OptionSpec(
        "stream",
        "stream",
        "str",
        None,
        "stream to read (one of `stream`, `streams`, `streamPattern` is required; `load(name)` also sets it)",
        "read",
    ),
    OptionSpec(
        "streams",
        "streams",
        "names",
        None,
        "several streams to read, comma-separated (Kafka: `subscribe`); column `stream` tells their rows apart",
        "read",
    ),
    OptionSpec(
        "stream_pattern",
        "streamPattern",
        "str",
        None,
        "every stream whose whole name matches this regular expression (Kafka: `subscribePattern`), and with `subjects` only the streams that store them; a streaming query reads streams created later too",
        "read",
    ),
    OptionSpec(
        "subjects",
        "subjects",
        "subjects",
        None,
        "only these subjects: comma-separated filters, wildcards allowed",
        "read",
    ),
    OptionSpec(
        "starting_offsets",
        "startingOffsets",
        "str",
        None,
        "`earliest` or `latest`: where to start without `startingSequence` or `startingTime` (default: `earliest` for spark.read, `latest` for spark.readStream, as in Kafka; `latest` is for spark.readStream only)",
        "read",
        choices=("earliest", "latest"),
    ),
    OptionSpec(
        "start_seq",
        "startingSequence",
        "int",
        None,
        "first stream sequence to read (default: see `startingOffsets`)",
        "read",
        minimum=1,
        maximum=INT64_MAX,
    ),
    OptionSpec(
        "end_seq",
        "endingSequence",
        "int",
        None,
        "last stream sequence to read, inclusive (default: the last when the query is planned); spark.read only",
        "read",
        minimum=1,
        maximum=INT64_MAX,
        queries="batch",
    ),
    OptionSpec(
        "start_time",
        "startingTime",
        "time",
        None,
        "read from the first message stored at or after this time (ISO-8601 with zone, or epoch seconds)",
        "read",
    ),
    OptionSpec(
        "end_time",
        "endingTime",
        "time",
        None,
        "stop before the first message stored at or after this time (exclusive); spark.read only",
        "read",
        queries="batch",
    ),
    OptionSpec(
        "min_partitions",
        "minPartitions",
        "int",
        1,
        "at least this many Spark partitions (at most one per sequence)",
        "read",
        minimum=1,
        maximum=INT64_MAX,
    ),
    OptionSpec(
        "max_messages_per_partition",
        "maxMessagesPerPartition",
        "int",
        # Small enough that a few hundred thousand messages already keep several
        # cores busy; large enough that a task's start-up is a small part of its work.
        DEFAULT_SPARK_MAX_MESSAGES_PER_PARTITION,
        "split the sequence range so no partition spans more sequences than this",
        "read",
        minimum=1,
        maximum=INT64_MAX,
    ),
    OptionSpec(
        "consumer",
        "consumer",
        "str",
        None,
        "read through this durable consumer (created if missing), acking each micro-batch's messages after Spark commits it: for WorkQueue and Interest streams, which then empty as the query progresses; the stream needs `allow_direct`; spark.readStream only",
        "read",
        nullable=True,
        queries="stream",
    ),
    OptionSpec(
        "max_messages_per_trigger",
        "maxMessagesPerTrigger",
        "int",
        None,
        "at most this many stream sequences (so at most this many rows) per micro-batch (Kafka: `maxOffsetsPerTrigger`); spark.readStream only",
        "read",
        minimum=1,
        maximum=INT64_MAX,
        queries="stream",
    ),
    OptionSpec(
        "min_messages_per_trigger",
        "minMessagesPerTrigger",
        "int",
        None,
        "hold a micro-batch back until this many messages are there to read, or until `maxTriggerDelay` has passed since the last one (Kafka: `minOffsetsPerTrigger`); not with trigger(availableNow=True), which reads what is there; spark.readStream only",
        "read",
        nullable=True,
        minimum=1,
        maximum=INT64_MAX,
        queries="stream",
    ),
    OptionSpec(
        "max_trigger_delay",
        "maxTriggerDelay",
        "float",
        DEFAULT_SPARK_MAX_TRIGGER_DELAY,
        "with `minMessagesPerTrigger`: seconds a micro-batch with fewer messages waits at most (Kafka's `15m` is `900` here); spark.readStream only",
        "read",
        minimum=0,
        queries="stream",
    ),
    OptionSpec(
        "max_bytes_per_trigger",
        "maxBytesPerTrigger",
        "int",
        None,
        "about this many bytes per micro-batch at most, and always at least one message: as many messages as fit at the stream's mean stored message size; spark.readStream only",
        "read",
        nullable=True,
        minimum=1,
        maximum=INT64_MAX,
        queries="stream",
    ),
    OptionSpec(
        "last_per_subject",
        "lastPerSubject",
        "bool",
        False,
        "one row per subject: the latest message of each (of `subjects`), as of `asOfSequence` or `asOfTime`, read in one partition without the stream's history; spark.read only",
        "read",
        queries="batch",
        native_field="last_per_subject",
    ),
    OptionSpec(
        "as_of_seq",
        "asOfSequence",
        "int",
        None,
        "with `lastPerSubject` or `kv`: as the stream was at this sequence (the stream needs `allow_direct`)",
        "read",
        minimum=1,
        maximum=INT64_MAX,
        queries="batch",
        native_field="as_of_seq",
    ),
    OptionSpec(
        "as_of_time",
        "asOfTime",
        "time",
        None,
        "with `lastPerSubject` or `kv`: as the stream was at this time (ISO-8601 with zone, or epoch seconds; the stream needs `allow_direct`)",
        "read",
        queries="batch",
        native_field="as_of_time",
    ),
    OptionSpec(
        "kv",
        "kv",
        "str",
        None,
        "read this KV bucket (stream `KV_<bucket>`) as a table of its live keys: `key`, `value`, `revision`, `operation`, `created`; `subjects` are not given, the keys are all read; spark.read only",
        "read",
        queries="batch",
    ),
    OptionSpec(
        "include_headers",
        "includeHeaders",
        "bool",
        False,
        "add the `headers` column (map<string, array<string>>)",
        "read",
        native_field="include_headers",
    ),
    OptionSpec(
        "fail_on_data_loss",
        "failOnDataLoss",
        "bool",
        True,
        "fail when messages of the requested range were removed (limits, purge) before they were read; `false` reads what is left",
        "read",
    ),
    OptionSpec(
        "batch_rows",
        "batchRows",
        "int",
        DEFAULT_SPARK_BATCH_ROWS,
        "rows per Arrow batch handed to Spark (at most `maxBytes` of payload too)",
        "read",
        minimum=1,
        maximum=INT64_MAX,
        native_field="batch_rows",
    ),
    OptionSpec(
        "max_bytes",
        "maxBytes",
        "int",
        DEFAULT_READ_MAX_BYTES,
        "payload bytes per Arrow batch; it also bounds the bytes asked for per pull or direct-get request, where the server counts each message's subject, headers and payload",
        "read",
        minimum=1,
        maximum=INT64_MAX,
        native_field="max_bytes",
    ),
    OptionSpec(
        "heartbeat",
        "heartbeat",
        "float",
        DEFAULT_HEARTBEAT,
        "seconds between the server's idle heartbeats while reading",
        "read",
        minimum=0.1,
        native_field="heartbeat",
    ),
    OptionSpec(
        "value_format",
        "valueFormat",
        "str",
        None,
        "decode each payload into typed columns: `json`, `avro`, `protobuf` or `arrow` (an Arrow IPC stream per message); the message columns and a struct column `value`, or with `.schema(...)` the message columns and value fields it names",
        "read",
        nullable=True,
        choices=tuple(VALUE_FORMATS),
    ),
    OptionSpec(
        "value_schema",
        "valueSchema",
        "str",
        None,
        "the value's schema: for `avro` the Avro schema (JSON); for `protobuf` the message's full name (`package.Message`); for `json` and `arrow` a Spark schema as JSON (`df.schema.json()`), where DDL goes to `.schema(...)` instead; default: inferred from the stream's first messages",
        "read",
        nullable=True,
    ),
    OptionSpec(
        "on_malformed",
        "mode",
        "str",
        DEFAULT_ON_MALFORMED,
        "a payload that does not decode: `failfast` (fail naming stream, sequence and field), `permissive` (a null value and the payload in `_corrupt_record`) or `dropmalformed` (left out) -- Spark's JSON reader's modes",
        "read",
        choices=tuple(ON_MALFORMED_MODES),
    ),
    OptionSpec(
        "avro_framing",
        "avroFraming",
        "str",
        DEFAULT_AVRO_FRAMING,
        "how each Avro payload is framed: `raw` (the datum), `single-object` (Avro's single-object encoding) or `confluent` (a zero byte and a 4-byte schema id)",
        "read",
        choices=tuple(AVRO_FRAMINGS),
    ),
    OptionSpec(
        "protobuf_descriptor_file",
        "protobufDescriptorFile",
        "str",
        None,
        "`protobuf`: the path of a descriptor set holding the message (`protoc --include_imports --descriptor_set_out=FILE`), read on the driver",
        "read",
        nullable=True,
    ),
    OptionSpec(
        "avro_schemas_by_id",
        "avroSchemasById",
        "str",
        None,
        '`confluent` framing: the writers\' Avro schemas by id, as a JSON object (`{"42": {...}}`)',
        "read",
        nullable=True,
    ),
]

WRITE_SPECS = [
    OptionSpec(
        "subject",
        "subject",
        "str",
        None,
        "publish every row to this subject (overrides a `subject` column)",
        "write",
    ),
    OptionSpec(
        "msg_id_column",
        "msgIdColumn",
        "str",
        None,
        "string column whose value is each message's `Nats-Msg-Id` (default: a `msg_id` column if present, else ids made per write)",
        "write",
    ),
    OptionSpec(
        "kv",
        "kv",
        "str",
        None,
        "write into this KV bucket instead of a stream: the DataFrame has `key` (string) and `value` (binary or string), optionally `operation` (`PUT`, `DEL` or `PURGE`) and `expected_revision` (long: a compare-and-set, 0 for a key with no entry; a row whose key moved on fails the task naming the conflict)",
        "write",
    ),
    OptionSpec(
        "write_id",
        "writeId",
        "str",
        None,
        "the id of this write, prefix of the generated `Nats-Msg-Id`s (default: a new random id per write); give the same id to re-run a failed write without duplicates; df.write only (a streaming write uses its query id)",
        "write",
        queries="batch",
    ),
    OptionSpec(
        "publish_mode",
        "publishMode",
        "str",
        DEFAULT_PUBLISH_MODE,
        "`fast`: fast-ingest batches into a stream with `allow_batched` (the server acks every N messages: less client and server work per row); a failed batch fails the task instead of being resent, and the task's retry stores what is missing by message id. `atomic`: batches of `atomicBatchRows` rows into a stream with `allow_atomic`, each stored whole or not at all; a refused batch fails the task, and the task's retry finds the batches already stored as duplicates. `acked`: an ack per message, 429/503/timeouts resent within the task",
        "write",
        choices=("acked", "fast", "atomic"),
        native_field="mode",
    ),
    OptionSpec(
        "atomic_batch_rows",
        "atomicBatchRows",
        "int",
        DEFAULT_ATOMIC_BATCH_ROWS,
        "with `publishMode` `atomic`: rows per batch, each stored whole or not at all (at most the server's limit, 1,000 unless configured lower); a task's rows are cut into batches in their order",
        "write",
        minimum=1,
        maximum=INT64_MAX,
        native_field="batch_rows",
    ),
    OptionSpec(
        "window",
        "ackWindow",
        "int",
        DEFAULT_WINDOW,
        "publishes in flight per task before waiting for acks",
        "write",
        minimum=1,
        maximum=MAX_WINDOW,
        native_field="window",
    ),
    OptionSpec(
        "ack_timeout",
        "ackTimeout",
        "float",
        DEFAULT_ACK_TIMEOUT,
        "seconds to wait for each ack before retrying",
        "write",
        minimum=0.001,
        native_field="ack_timeout",
    ),
    OptionSpec(
        "max_retries",
        "maxRetries",
        "int",
        DEFAULT_MAX_RETRIES,
        "retries of a publish after 429, 503 or an ack timeout",
        "write",
        minimum=0,
        maximum=MAX_RETRIES,
        native_field="max_retries",
    ),
    OptionSpec(
        "retry_backoff",
        "retryBackoff",
        "float",
        DEFAULT_RETRY_BACKOFF,
        "seconds before the first retry (doubling)",
        "write",
        minimum=0,
        native_field="retry_backoff",
    ),
    OptionSpec(
        "expected_stream",
        "expectedStream",
        "str",
        None,
        "the stream every message must be stored in (header `Nats-Expected-Stream`); option `stream` on a write means the same",
        "write",
        native_field="expected_stream",
    ),
    OptionSpec(
        "value_format",
        "valueFormat",
        "str",
        None,
        "encode the DataFrame's value columns (a struct column `value`, or every column that is not `subject`, `headers` or `msg_id`) into each payload: `json`, `avro`, `protobuf` or `arrow`; the DataFrame then has no `data` column",
        "write",
        nullable=True,
        choices=tuple(VALUE_FORMATS),
    ),
    OptionSpec(
        "value_schema",
        "valueSchema",
        "str",
        None,
        "`avro`: the Avro schema (JSON) the values are written with (default: derived from the columns); `protobuf`: the message's full name",
        "write",
        nullable=True,
    ),
    OptionSpec(
        "avro_framing",
        "avroFraming",
        "str",
        DEFAULT_AVRO_FRAMING,
        "how each Avro payload is framed: `raw`, `single-object` or `confluent`",
        "write",
        choices=tuple(AVRO_FRAMINGS),
    ),
    OptionSpec(
        "protobuf_descriptor_file",
        "protobufDescriptorFile",
        "str",
        None,
        "`protobuf`: the path of a descriptor set holding the message, read on the driver",
        "write",
        nullable=True,
    ),
    OptionSpec(
        "avro_schema_id",
        "avroSchemaId",
        "int",
        None,
        "`confluent` framing: the schema id each payload starts with",
        "write",
        nullable=True,
        minimum=0,
        maximum=4_294_967_295,
    ),
]

CONNECT_SPECS = _connect_specs()


def spec_defaults(specs: list[OptionSpec]) -> dict[str, Any]:
    """Each option's default, by Python name (the parsed options' field defaults)."""
    return {spec.python: spec.default for spec in specs}


def option_table(scope: str) -> list[OptionSpec]:
    """The documented options of one scope (connect, read, write), for the README."""
    return {"connect": CONNECT_SPECS, "read": READ_SPECS, "write": WRITE_SPECS}[scope]
