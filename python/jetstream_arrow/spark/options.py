"""Spark options: one table of every option, parsed into plain, picklable values.

Spark hands a data source its options as strings in a case-insensitive dict. The same
names serve the mapInArrow helpers, which take Python keyword arguments. So every
option has a Spark name (camelCase, matched case-insensitively) and a Python name
(snake_case); both spellings are accepted everywhere, and an unknown name is an error
that lists the known ones (a typo must not be silently ignored).

Connection options are the fields of :class:`jetstream_arrow.ConnectOptions`, spelled
in camelCase for Spark (``nkeySeed``, ``tlsCa``, ``apiPrefix`` ...).
"""

from __future__ import annotations

import dataclasses
import math
import typing
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..exceptions import BadInputError
from ..options import ConnectOptions

# -- the option table -------------------------------------------------------------------


@dataclass(frozen=True)
class OptionSpec:
    """One option: its Python and Spark names, value kind, default and meaning."""

    python: str
    spark: str
    kind: str  # str, int, float, bool, subjects, time
    default: Any
    meaning: str
    scope: str  # connect, read, write
    secret: bool = False
    minimum: float | None = None
    nullable: bool = False  # "none" (or "null") gives None
    choices: tuple[str, ...] = ()  # the accepted values of a "str" option (lower case)
    # Which queries honour the option: "batch" (spark.read, df.write), "stream"
    # (spark.readStream, df.writeStream) or "both". Given to the other kind it is an
    # error, never silently ignored.
    queries: str = "both"


_CONNECT_MEANING = {
    "servers": "NATS server URL, or several separated by commas",
    "user": "user name (with `password`)",
    "password": "password (secret: never logged)",
    "token": "authentication token (secret)",
    "creds": "path of a `.creds` file (JWT + nkey seed)",
    "nkey_seed": "nkey seed for nkey authentication (secret)",
    "tls_ca": "path of the CA certificate(s) to trust",
    "tls_cert": "path of the client certificate (with `tlsKey`)",
    "tls_key": "path of the client key (with `tlsCert`)",
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
        specs.append(
            OptionSpec(
                python=f.name,
                spark=_camel(f.name),
                kind=_connect_kind(hints[f.name]),
                default=f.default,
                meaning=_CONNECT_MEANING.get(f.name, "see `jetstream_arrow.connect`"),
                scope="connect",
                secret=not f.repr,
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
        "stream to read (required; `load(name)` also sets it)",
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
    ),
    OptionSpec(
        "end_seq",
        "endingSequence",
        "int",
        None,
        "last stream sequence to read, inclusive (default: the last when the query is planned); spark.read only",
        "read",
        minimum=1,
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
    ),
    OptionSpec(
        "max_messages_per_partition",
        "maxMessagesPerPartition",
        "int",
        100_000,
        "split the sequence range so no partition spans more sequences than this",
        "read",
        minimum=1,
    ),
    OptionSpec(
        "max_messages_per_trigger",
        "maxMessagesPerTrigger",
        "int",
        None,
        "at most this many stream sequences (so at most this many rows) per micro-batch (Kafka: `maxOffsetsPerTrigger`); spark.readStream only",
        "read",
        minimum=1,
        queries="stream",
    ),
    OptionSpec(
        "include_headers",
        "includeHeaders",
        "bool",
        False,
        "add the `headers` column (map<string, array<string>>)",
        "read",
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
        10_000,
        "rows per Arrow batch (Spark's own default batch size)",
        "read",
        minimum=1,
    ),
    OptionSpec(
        "max_bytes",
        "maxBytes",
        "int",
        16 * 1024 * 1024,
        "payload bytes per Arrow batch (and per pull)",
        "read",
        minimum=1,
    ),
    OptionSpec(
        "heartbeat",
        "heartbeat",
        "float",
        5.0,
        "seconds between the server's idle heartbeats while reading",
        "read",
        minimum=0.1,
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
        "write_id",
        "writeId",
        "str",
        None,
        "the id of this write, prefix of the generated `Nats-Msg-Id`s (default: a new random id per write); give the same id to re-run a failed write without duplicates; df.write only (a streaming write uses its query id)",
        "write",
        queries="batch",
    ),
    OptionSpec(
        "window",
        "ackWindow",
        "int",
        8192,
        "publishes in flight per task before waiting for acks",
        "write",
        minimum=1,
    ),
    OptionSpec(
        "ack_timeout",
        "ackTimeout",
        "float",
        5.0,
        "seconds to wait for each ack before retrying",
        "write",
        minimum=0.001,
    ),
    OptionSpec(
        "max_retries",
        "maxRetries",
        "int",
        5,
        "retries of a publish after 429, 503 or an ack timeout",
        "write",
        minimum=0,
    ),
    OptionSpec(
        "retry_backoff",
        "retryBackoff",
        "float",
        0.05,
        "seconds before the first retry (doubling)",
        "write",
        minimum=0,
    ),
    OptionSpec(
        "expected_stream",
        "expectedStream",
        "str",
        None,
        "the stream every message must be stored in (header `Nats-Expected-Stream`); option `stream` on a write means the same",
        "write",
    ),
]

CONNECT_SPECS = _connect_specs()


def _index(specs: list[OptionSpec]) -> dict[str, OptionSpec]:
    out: dict[str, OptionSpec] = {}
    for spec in specs:
        out[_norm(spec.python)] = spec
        out[_norm(spec.spark)] = spec
    return out


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_READ_INDEX = _index(CONNECT_SPECS + READ_SPECS)
_WRITE_INDEX = _index(CONNECT_SPECS + WRITE_SPECS)


# -- value parsing ----------------------------------------------------------------------


def _name(spec: OptionSpec) -> str:
    return spec.spark


def _parse_bool(spec: OptionSpec, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise BadInputError(f"option {_name(spec)!r} must be true or false, got {value!r}")


def _parse_number(spec: OptionSpec, value: Any) -> int | float:
    what = "an integer" if spec.kind == "int" else "a number"
    try:
        if isinstance(value, bool):
            raise ValueError
        number: int | float = (
            int(str(value).strip()) if spec.kind == "int" else float(str(value).strip())
        )
        if isinstance(number, float) and not math.isfinite(number):
            raise ValueError
    except ValueError:
        raise BadInputError(f"option {_name(spec)!r} must be {what}, got {value!r}") from None
    if spec.minimum is not None and number < spec.minimum:
        bound = int(spec.minimum) if spec.kind == "int" else spec.minimum
        raise BadInputError(f"option {_name(spec)!r} must be at least {bound}, got {value!r}")
    return number


def parse_time(value: Any, option: str) -> datetime:
    """An aware datetime (UTC) from a datetime, ISO-8601 text or epoch seconds."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        parsed = datetime.fromtimestamp(value, tz=timezone.utc)
    else:
        text = str(value).strip()
        try:
            parsed = datetime.fromtimestamp(float(text), tz=timezone.utc)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                raise BadInputError(
                    f"option {option!r}: {value!r} is neither an ISO-8601 time such as "
                    "'2026-01-31T12:00:00Z' nor epoch seconds"
                ) from None
    if parsed.tzinfo is None:
        raise BadInputError(
            f"option {option!r}: the time {value!r} has no time zone; add one (e.g. 'Z' for UTC)"
        )
    return parsed.astimezone(timezone.utc)


def _parse_subjects(spec: OptionSpec, value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    subjects = tuple(str(s).strip() for s in items)
    if not subjects or any(not s or " " in s for s in subjects):
        raise BadInputError(
            f"option {_name(spec)!r} must be comma-separated subject filters such as "
            f"'orders.*,invoices.>', got {value!r}"
        )
    return subjects


def _parse_value(spec: OptionSpec, value: Any) -> Any:
    if value is None:
        return None
    if spec.nullable and isinstance(value, str) and value.strip().lower() in ("none", "null"):
        return None
    if spec.kind == "bool":
        return _parse_bool(spec, value)
    if spec.kind in ("int", "float"):
        return _parse_number(spec, value)
    if spec.kind == "time":
        return parse_time(value, _name(spec))
    if spec.kind == "subjects":
        return _parse_subjects(spec, value)
    text = str(value)
    if text.strip() == "":
        raise BadInputError(f"option {_name(spec)!r} is empty")
    if spec.choices:
        choice = text.strip().lower()
        if choice not in spec.choices:
            raise BadInputError(
                f"option {_name(spec)!r} must be one of {', '.join(spec.choices)}, got {value!r}"
            )
        return choice
    return text


#: The API a kind of query is made with, by option scope, for error messages.
_QUERY_API = {
    ("read", "batch"): "spark.read",
    ("read", "stream"): "spark.readStream",
    ("write", "batch"): "df.write",
    ("write", "stream"): "df.writeStream",
}

#: Why an option does not apply to the other kind of query.
_ONE_KIND_ONLY = {
    "end_seq": "a streaming query has no end: it reads what arrives",
    "end_time": "a streaming query has no end: it reads what arrives",
    "max_messages_per_trigger": "a batch read reads its whole range at once",
    "write_id": (
        "a streaming write makes its message ids from the query id (kept in the "
        "checkpoint) and the micro-batch id, so a restarted query re-sends the same ids"
    ),
}


def _check_query_kind(spec: OptionSpec, queries: str | None) -> None:
    if queries is None or spec.queries in ("both", queries):
        return
    raise BadInputError(
        f"option {spec.spark!r} applies to {_QUERY_API[spec.scope, spec.queries]} only, "
        f"not to {_QUERY_API[spec.scope, queries]}: {_ONE_KIND_ONLY[spec.python]}"
    )


def _collect(
    options: Mapping[str, Any],
    index: dict[str, OptionSpec],
    what: str,
    ignore: tuple[str, ...] = (),
    queries: str | None = None,
) -> dict[str, Any]:
    """Map each given option to its spec's Python name, with its parsed value.
    ``queries`` ("batch" or "stream") refuses the options of the other kind of query;
    None accepts both (for a caller that does not know yet)."""
    values: dict[str, Any] = {}
    unknown = []
    for key, raw in options.items():
        if _norm(key) in ignore:
            continue
        spec = index.get(_norm(key))
        if spec is None:
            unknown.append(key)
            continue
        if spec.python in values:
            raise BadInputError(f"option {spec.spark!r} is given twice (as {key!r} too)")
        _check_query_kind(spec, queries)
        values[spec.python] = _parse_value(spec, raw)
    if unknown:
        known = sorted({s.spark for s in index.values()})
        raise BadInputError(
            f"unknown {what} option(s) {', '.join(map(repr, sorted(unknown)))}; "
            f"known options: {', '.join(known)}"
        )
    return values


def _connect_options(values: dict[str, Any]) -> ConnectOptions:
    given = {s.python: values.pop(s.python) for s in CONNECT_SPECS if s.python in values}
    try:
        return ConnectOptions(**given)
    except BadInputError as err:
        # ConnectOptions names options in Python spelling; add the Spark one.
        raise BadInputError(f"{err} (Spark option names: {_spark_names_in(str(err))})") from None


def _spark_names_in(message: str) -> str:
    names = [s.spark for s in CONNECT_SPECS if f"'{s.python}'" in message]
    return ", ".join(names) or "see the option table"


def _defaults(specs: list[OptionSpec], values: dict[str, Any]) -> dict[str, Any]:
    return {s.python: values.get(s.python, s.default) for s in specs}


# -- parsed options -----------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    """Everything a batch or streaming read needs; picklable, secrets kept out of ``repr``."""

    connect: ConnectOptions
    stream: str
    subjects: tuple[str, ...] | None = None
    starting_offsets: str | None = None  # "earliest", "latest" or None (the query's default)
    start_seq: int | None = None
    end_seq: int | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    min_partitions: int = 1
    # Small enough that a few hundred thousand messages already keep several
    # cores busy; large enough that a task's start-up is a small part of its work.
    max_messages_per_partition: int = 100_000
    max_messages_per_trigger: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    batch_rows: int = 10_000
    max_bytes: int = 16 * 1024 * 1024
    heartbeat: float = 5.0


@dataclass(frozen=True)
class WriteOptions:
    """Everything a batch or streaming write needs; picklable, secrets kept out of ``repr``."""

    connect: ConnectOptions
    # The prefix of a batch write's message ids; empty for a streaming write, whose ids
    # come from its query id and micro-batch id (see streaming.py).
    write_id: str
    subject: str | None = None
    msg_id_column: str | None = None
    window: int = 8192
    ack_timeout: float = 5.0
    max_retries: int = 5
    retry_backoff: float = 0.05
    expected_stream: str | None = None

    def publisher_kwargs(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "ack_timeout": self.ack_timeout,
            "max_retries": self.max_retries,
            "retry_backoff": self.retry_backoff,
            "expected_stream": self.expected_stream,
        }


def parse_read_options(
    options: Mapping[str, Any], *, need_stream: bool = True, queries: str | None = "batch"
) -> ReadOptions:
    """Spark (or Python) read options -> :class:`ReadOptions`, naming the option at fault.

    ``queries`` is the kind of read: "batch" (spark.read) or "stream"
    (spark.readStream) refuse the options of the other kind; None checks only the
    values (Spark asks for the schema before it says which kind of read it plans).
    """
    options = dict(options)
    path = None
    for key in list(options):
        if _norm(key) == "path":
            path = options.pop(key)
    values = _collect(options, _READ_INDEX, "read", queries=queries)
    if path is not None:
        if values.get("stream") not in (None, path):
            raise BadInputError(
                f"option 'stream' ({values['stream']!r}) and the path given to load() "
                f"({path!r}) disagree; give the stream once"
            )
        values["stream"] = path
    connect = _connect_options(values)
    values = _defaults(READ_SPECS, values)
    stream = values.pop("stream")
    if stream is None and need_stream:
        raise BadInputError(
            "option 'stream' is required: spark.read.format('jetstream').option('stream', 'ORDERS')"
        )
    if stream is not None and any(c in stream for c in " .*>/\\"):
        raise BadInputError(
            f"option 'stream': {stream!r} is not a valid stream name (no spaces, '.', '*', '>' or slashes)"
        )
    if values["start_seq"] is not None and values["start_time"] is not None:
        raise BadInputError("options 'startingSequence' and 'startingTime' exclude each other")
    if values["starting_offsets"] is not None and (
        values["start_seq"] is not None or values["start_time"] is not None
    ):
        given = "startingSequence" if values["start_seq"] is not None else "startingTime"
        raise BadInputError(f"options 'startingOffsets' and {given!r} exclude each other")
    if values["starting_offsets"] == "latest" and queries == "batch":
        raise BadInputError(
            "option 'startingOffsets': 'latest' applies to spark.readStream only; a batch "
            "read from the latest message would read nothing (use startingSequence or "
            "startingTime to skip older messages)"
        )
    if values["end_seq"] is not None and values["end_time"] is not None:
        raise BadInputError("options 'endingSequence' and 'endingTime' exclude each other")
    if (
        values["start_seq"] is not None
        and values["end_seq"] is not None
        and values["end_seq"] < values["start_seq"]
    ):
        raise BadInputError(
            f"option 'endingSequence' ({values['end_seq']}) is below 'startingSequence' "
            f"({values['start_seq']})"
        )
    if (
        values["start_time"] is not None
        and values["end_time"] is not None
        and values["end_time"] <= values["start_time"]
    ):
        raise BadInputError("option 'endingTime' must be after 'startingTime'")
    return ReadOptions(connect=connect, stream=stream or "", **values)


def parse_write_options(options: Mapping[str, Any], *, queries: str = "batch") -> WriteOptions:
    """Spark (or Python) write options -> :class:`WriteOptions`, naming the option at fault.

    ``queries`` is the kind of write: "batch" (df.write) or "stream" (df.writeStream).
    """
    options = dict(options)
    stream = None
    for key in list(options):
        if _norm(key) == "stream":
            stream = options.pop(key)
    # Spark hands a streaming sink its own option checkpointLocation too.
    ignore = ("path", "checkpointlocation") if queries == "stream" else ("path",)
    values = _collect(options, _WRITE_INDEX, "write", ignore=ignore, queries=queries)
    connect = _connect_options(values)
    values = _defaults(WRITE_SPECS, values)
    if stream is not None:
        if values["expected_stream"] not in (None, stream):
            raise BadInputError(
                f"options 'stream' ({stream!r}) and 'expectedStream' "
                f"({values['expected_stream']!r}) disagree"
            )
        values["expected_stream"] = stream
    write_id = values.pop("write_id") or ("" if queries == "stream" else uuid.uuid4().hex)
    if any(c.isspace() for c in write_id):
        raise BadInputError(f"option 'writeId' may not contain whitespace, got {write_id!r}")
    return WriteOptions(connect=connect, write_id=write_id, **values)


def option_table(scope: str) -> list[OptionSpec]:
    """The documented options of one scope (connect, read, write), for the README."""
    return {"connect": CONNECT_SPECS, "read": READ_SPECS, "write": WRITE_SPECS}[scope]
