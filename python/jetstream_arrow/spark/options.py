"""Spark options parsed into plain, picklable values: :class:`ReadOptions` and
:class:`WriteOptions`.

Spark hands a data source its options as strings in a case-insensitive dict. The same
names serve the mapInArrow helpers, which take Python keyword arguments. Both
spellings of every option in the table (:mod:`.option_specs`) are accepted
everywhere, and an unknown name is an error that lists the known ones (a typo must
not be silently ignored). It is one module because the value parsers, the name
matching and the query-kind checks here serve the read and the write options alike.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._core import validate_name
from .._time import to_datetime
from ..exceptions import BadInputError
from ..kv import bucket_stream
from ..options import ConnectOptions
from .option_specs import CONNECT_SPECS, READ_SPECS, WRITE_SPECS, OptionSpec, spec_defaults


def _index(specs: list[OptionSpec]) -> dict[str, OptionSpec]:
    out: dict[str, OptionSpec] = {}
    for spec in specs:
        out[_norm(spec.python)] = spec
        out[_norm(spec.spark)] = spec
        if spec.native_field is not None:
            out[_norm(spec.native_field)] = spec
    return out


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_READ_INDEX = _index(CONNECT_SPECS + READ_SPECS)
_WRITE_INDEX = _index(CONNECT_SPECS + WRITE_SPECS)


def read_option_name(key: str) -> str | None:
    """The Python name of the read option ``key`` names (in either spelling), or None."""
    spec = _READ_INDEX.get(_norm(key))
    return None if spec is None else spec.python


# The defaults of options not given, and of the fields of ReadOptions and WriteOptions:
# the table's, so each default is written in one place.
_READ_DEFAULTS = spec_defaults(READ_SPECS)
_WRITE_DEFAULTS = spec_defaults(WRITE_SPECS)


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
    if spec.maximum is not None and number > spec.maximum:
        raise BadInputError(f"option {_name(spec)!r} must be at most {spec.maximum}, got {value!r}")
    return number


def _parse_time(spec: OptionSpec, value: Any) -> datetime:
    # A bound after 2262 is accepted: a read starting then reads nothing, one ending
    # then has no end (see ``first_seq_at``).
    return to_datetime(value, _name(spec), beyond_ns_range=True)


def _is_filter(subject: str) -> bool:
    """A subject filter the server takes: tokens neither empty nor holding white
    space, and '>' only as the last token."""
    tokens = subject.split(".")
    return not any(c.isspace() for c in subject) and all(tokens) and ">" not in tokens[:-1]


def _parse_subjects(spec: OptionSpec, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = []
    subjects = tuple(s.strip() if isinstance(s, str) else s for s in items)
    if not subjects or not all(isinstance(s, str) and _is_filter(s) for s in subjects):
        raise BadInputError(
            f"option {_name(spec)!r} must be comma-separated subject filters such as "
            f"'orders.*,invoices.>' (or a list of them), got {value!r}"
        )
    return subjects


def _parse_names(spec: OptionSpec, value: Any) -> tuple[str, ...]:
    """Stream names, comma-separated (or a list of them), each once."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise BadInputError(
            f"option {_name(spec)!r} must be comma-separated stream names such as "
            f"'ORDERS,INVOICES' (or a list of them), got {value!r}"
        )
    names = tuple(
        str(validate_name(n.strip() if isinstance(n, str) else n, spec.spark)) for n in items
    )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BadInputError(f"option {_name(spec)!r} names {twice[0]!r} twice, got {value!r}")
    return names


def _parse_pattern(spec: OptionSpec, value: Any) -> str:
    """A regular expression, checked here so a bad one is named before the query runs."""
    text = _parse_text(spec, value)
    try:
        re.compile(text)
    except re.error as err:
        raise BadInputError(
            f"option {_name(spec)!r} must be a regular expression (Python's re, matched "
            f"against the whole stream name), got {value!r}: {err}"
        ) from None
    return text


def _parse_text(spec: OptionSpec, value: Any) -> str:
    # Spark hands over strings; a Python caller may give a path for a file option.
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise BadInputError(f"option {_name(spec)!r} must be a string, got {value!r}")
    if value.strip() == "":
        raise BadInputError(f"option {_name(spec)!r} is empty")
    return value


def _parse_value(spec: OptionSpec, value: Any) -> Any:
    if value is None:
        return None
    # "none" stands for no value where a string cannot be one (maxReconnects=none);
    # as a text option's value it is that text: a password, a consumer named "none".
    if (
        spec.nullable
        and spec.kind != "str"
        and isinstance(value, str)
        and value.strip().lower() in ("none", "null")
    ):
        return None
    if spec.kind == "bool":
        return _parse_bool(spec, value)
    if spec.kind in ("int", "float"):
        return _parse_number(spec, value)
    if spec.kind == "time":
        return _parse_time(spec, value)
    if spec.kind == "subjects":
        return _parse_subjects(spec, value)
    if spec.kind == "names":
        return _parse_names(spec, value)
    if spec.python == "stream_pattern":
        return _parse_pattern(spec, value)
    text = _parse_text(spec, value)
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
    "min_messages_per_trigger": "a batch read reads its whole range at once",
    "max_trigger_delay": "a batch read reads its whole range at once",
    "max_bytes_per_trigger": "a batch read reads its whole range at once",
    "consumer": (
        "the consumer's messages are acknowledged as a streaming query commits its "
        "micro-batches; a batch read reads a range of the stream without one"
    ),
    "write_id": (
        "a streaming write makes its message ids from the query id (kept in the "
        "checkpoint) and the micro-batch id, so a restarted query re-sends the same ids"
    ),
    "last_per_subject": "the latest message of each subject is a table read once, not a stream",
    "as_of_seq": "the latest message of each subject is a table read once, not a stream",
    "as_of_time": "the latest message of each subject is a table read once, not a stream",
    "kv": "a KV bucket's entries are a table read once, not a stream",
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
        if raw is None and not spec.nullable:
            # An option set to None (Spark: .option(name, None)) is not given; only
            # options that document None as a value (e.g. maxReconnects) take it.
            continue
        if spec.python in values:
            raise BadInputError(f"option {spec.spark!r} is given twice (as {key!r} too)")
        _check_query_kind(spec, queries)
        values[spec.python] = _parse_value(spec, raw)
    if unknown:
        known = sorted({s.spark for s in index.values()})
        named = ", ".join(_with_advice(key, index) for key in sorted(unknown))
        raise BadInputError(f"unknown {what} option(s) {named}; known options: {', '.join(known)}")
    return values


#: Options of Spark's Kafka source and sink (names normalised by ``_norm``) and the
#: Python names of what this source calls them, in the order they are looked up in
#: the options of a query: a read finds the first, a write the second where they differ.
KAFKA_EQUIVALENTS: dict[str, tuple[str, ...]] = {
    "maxoffsetspertrigger": ("max_messages_per_trigger",),
    "minoffsetspertrigger": ("min_messages_per_trigger",),
    "maxrecordsperpartition": ("max_messages_per_partition",),
    "startingoffsetsbytimestamp": ("start_time",),
    "startingtimestamp": ("start_time",),
    "endingoffsets": ("end_seq",),
    "endingoffsetsbytimestamp": ("end_time",),
    "endingtimestamp": ("end_time",),
    "subscribe": ("streams",),
    "subscribepattern": ("stream_pattern",),
    "assign": ("stream",),
    "topic": ("stream", "subject"),
    "kafka.bootstrap.servers": ("servers",),
}


def _with_advice(key: str, index: dict[str, OptionSpec]) -> str:
    """``key`` quoted, with the known option meant by it: the equivalent of a Kafka
    option, else the closest known name."""
    for python in KAFKA_EQUIVALENTS.get(_norm(key), ()):
        spec = index.get(_norm(python))
        if spec is not None:
            return f"{key!r} (Kafka's name for {spec.spark!r})"
    close = difflib.get_close_matches(_norm(key), list(index), n=1, cutoff=0.8)
    if close:
        return f"{key!r} (did you mean {index[close[0]].spark!r}?)"
    return repr(key)


#: The path of ``load(path)``, ``save(path)`` and ``start(path)``: a stream's name.
_PATH_SPEC = OptionSpec("path", "path", "str", None, "the stream's name", "read")


def _stream_of_path(path: Any, call: str) -> str:
    """The stream named by the path given to ``call`` (``load()``, ``save()``)."""
    try:
        return str(validate_name(_parse_text(_PATH_SPEC, path), "path"))
    except BadInputError as err:
        raise BadInputError(f"the path given to {call} is a stream's name: {err}") from None


def _connect_options(values: dict[str, Any]) -> ConnectOptions:
    given = {s.python: values.pop(s.python) for s in CONNECT_SPECS if s.python in values}
    try:
        return ConnectOptions(**given)
    except BadInputError as err:
        # ConnectOptions names options in Python spelling; add the Spark one.
        raise BadInputError(f"{err} (Spark option names: {_spark_names_in(str(err))})") from None


def _descriptor_set(path: str | None) -> bytes | None:
    """The bytes of option ``protobufDescriptorFile``, or a clear error."""
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as err:
        raise BadInputError(
            f"option 'protobufDescriptorFile': cannot read the descriptor set {path!r}: {err}"
        ) from None


def _spark_names_in(message: str) -> str:
    names = [s.spark for s in CONNECT_SPECS if f"'{s.python}'" in message]
    return ", ".join(names) or "see the option table"


# -- parsed options -----------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    """Everything a batch or streaming read needs; picklable, secrets kept out of ``repr``."""

    connect: ConnectOptions
    # The stream of a read of one stream; empty when options ``streams`` or
    # ``streamPattern`` choose several (see :func:`.reading.streams_of`).
    stream: str
    streams: tuple[str, ...] | None = None
    stream_pattern: str | None = None
    subjects: tuple[str, ...] | None = None
    starting_offsets: str | None = None  # "earliest", "latest" or None (the query's default)
    start_seq: int | None = None
    end_seq: int | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    min_partitions: int = _READ_DEFAULTS["min_partitions"]
    max_messages_per_partition: int = _READ_DEFAULTS["max_messages_per_partition"]
    max_messages_per_trigger: int | None = None
    min_messages_per_trigger: int | None = None
    max_trigger_delay: float = _READ_DEFAULTS["max_trigger_delay"]
    max_bytes_per_trigger: int | None = None
    consumer: str | None = None
    # One row per subject (its latest message) instead of a range; a KV bucket read
    # as a table is one too.
    last_per_subject: bool = _READ_DEFAULTS["last_per_subject"]
    as_of_seq: int | None = None
    as_of_time: datetime | None = None
    kv: str | None = None
    include_headers: bool = _READ_DEFAULTS["include_headers"]
    fail_on_data_loss: bool = _READ_DEFAULTS["fail_on_data_loss"]
    batch_rows: int = _READ_DEFAULTS["batch_rows"]
    max_bytes: int = _READ_DEFAULTS["max_bytes"]
    heartbeat: float = _READ_DEFAULTS["heartbeat"]
    value_format: str | None = None
    value_schema: str | None = None
    on_malformed: str = _READ_DEFAULTS["on_malformed"]
    avro_framing: str = _READ_DEFAULTS["avro_framing"]
    avro_schemas_by_id: str | None = None
    protobuf_descriptor_file: str | None = None
    # The file's bytes, read where the options are parsed (the driver), so tasks on
    # other machines need no copy of it.
    protobuf_descriptor: bytes | None = None

    @property
    def several_streams(self) -> bool:
        """Whether the read names its streams by ``streams`` or ``streamPattern``: its
        streaming offsets then keep a position per stream."""
        return self.streams is not None or self.stream_pattern is not None


@dataclass(frozen=True)
class WriteOptions:
    """Everything a batch or streaming write needs; picklable, secrets kept out of ``repr``."""

    connect: ConnectOptions
    # The prefix of a batch write's message ids; empty for a streaming write, whose ids
    # come from its query id and micro-batch id (see stream_writer.py).
    write_id: str
    subject: str | None = None
    msg_id_column: str | None = None
    publish_mode: str = _WRITE_DEFAULTS["publish_mode"]
    # A KV bucket written instead of a stream (its stream is the expected one).
    kv: str | None = None
    atomic_batch_rows: int = _WRITE_DEFAULTS["atomic_batch_rows"]
    window: int = _WRITE_DEFAULTS["window"]
    ack_timeout: float = _WRITE_DEFAULTS["ack_timeout"]
    max_retries: int = _WRITE_DEFAULTS["max_retries"]
    retry_backoff: float = _WRITE_DEFAULTS["retry_backoff"]
    expected_stream: str | None = None
    value_format: str | None = None
    value_schema: str | None = None
    avro_framing: str = _WRITE_DEFAULTS["avro_framing"]
    avro_schema_id: int | None = None
    protobuf_descriptor_file: str | None = None
    # Read on the driver, as for reads.
    protobuf_descriptor: bytes | None = None

    def publisher_kwargs(self) -> dict[str, Any]:
        """The :class:`jetstream_arrow.PublishOptions` fields these options set."""
        return {
            spec.native_field: getattr(self, spec.python)
            for spec in WRITE_SPECS
            if spec.native_field is not None
        }


def _check_kv(values: dict[str, Any], stream: str | None, stream_given_as: str) -> None:
    """A write into a KV bucket: its rows' subjects come from their keys, its payloads
    from column ``value``, and every message must land in the bucket's stream."""
    bucket_stream_name = bucket_stream(values["kv"])
    for option, spark in (("subject", "subject"), ("value_format", "valueFormat")):
        if values[option] is not None:
            raise BadInputError(
                f"options 'kv' and '{spark}' exclude each other: a KV write takes its "
                "subjects from column 'key' and its payloads from column 'value'"
            )
    given = values["expected_stream"]
    if given not in (None, bucket_stream_name):
        said = stream_given_as if stream is not None else "option 'expectedStream'"
        raise BadInputError(
            f"option 'kv' ({values['kv']!r}, stream {bucket_stream_name!r}) and {said} "
            f"({given!r}) disagree"
        )
    values["expected_stream"] = bucket_stream_name


def _check_latest_read(values: dict[str, Any]) -> None:
    """Options of a read of the latest message per subject (``lastPerSubject``, or a
    KV bucket), refusing the range and streaming options it has no use for."""
    latest = values["last_per_subject"] or values["kv"] is not None
    if not latest:
        for option in ("as_of_seq", "as_of_time"):
            if values[option] is not None:
                raise BadInputError(
                    f"option {_READ_INDEX[_norm(option)].spark!r} ({option!r}) is for reads "
                    "of the latest message per subject: give option 'lastPerSubject' (or "
                    "'kv') too"
                )
        return
    given = "kv" if values["kv"] is not None else "lastPerSubject"
    unfit = ["starting_offsets", "start_seq", "end_seq", "start_time", "end_time", "consumer"]
    unfit += ["value_format"] + (["subjects", "include_headers"] if values["kv"] else [])
    for option in unfit:
        if values[option] not in (None, False):
            raise BadInputError(
                f"option {_READ_INDEX[_norm(option)].spark!r} does not go with option "
                f"{given!r}, which reads the latest message of each subject"
            )
    if values["as_of_seq"] is not None and values["as_of_time"] is not None:
        raise BadInputError("options 'asOfSequence' and 'asOfTime' exclude each other")


def _check_several_streams(values: dict[str, Any]) -> None:
    """One way of naming the streams read, and none of the options that hold for one
    stream only when there are several."""
    given = [
        spark
        for python, spark in (
            ("stream", "stream"),
            ("streams", "streams"),
            ("stream_pattern", "streamPattern"),
        )
        if values[python] is not None
    ]
    if len(given) > 1:
        raise BadInputError(
            f"options {given[0]!r} and {given[1]!r} exclude each other: name the streams "
            "read one way (a path given to load() or option 'kv' names one stream)"
        )
    if given in ([], ["stream"]):
        return
    why = {
        "start_seq": "a sequence belongs to one stream; use startingOffsets or startingTime",
        "end_seq": "a sequence belongs to one stream; use endingTime",
        "consumer": "a durable consumer belongs to one stream",
        "last_per_subject": "the latest message of each subject is read from one stream",
    }
    for option, reason in why.items():
        if values[option] not in (None, False):
            raise BadInputError(
                f"option {_READ_INDEX[_norm(option)].spark!r} does not go with option "
                f"{given[0]!r}: {reason}"
            )


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
        path = _stream_of_path(path, "load()")
        if values.get("stream") not in (None, path):
            raise BadInputError(
                f"option 'stream' ({values['stream']!r}) and the path given to load() "
                f"({path!r}) disagree; give the stream once"
            )
        values["stream"] = path
    connect = _connect_options(values)
    values = {**_READ_DEFAULTS, **values}
    if values["kv"] is not None:
        kv_stream = bucket_stream(values["kv"])
        if values["stream"] not in (None, kv_stream):
            raise BadInputError(
                f"option 'kv' ({values['kv']!r}, stream {kv_stream!r}) and option 'stream' "
                f"({values['stream']!r}) disagree; give the bucket alone"
            )
        values["stream"] = kv_stream
    _check_latest_read(values)
    _check_several_streams(values)
    stream = values.pop("stream")
    if stream is None and need_stream and not (values["streams"] or values["stream_pattern"]):
        raise BadInputError(
            "option 'stream' is required: spark.read.format('jetstream').option('stream', "
            "'ORDERS') (or option 'streams' or 'streamPattern' for several)"
        )
    if stream is not None:
        validate_name(stream, "stream")
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
    if values["consumer"] is not None:
        validate_name(values["consumer"], "consumer")
        starts = ("starting_offsets", "start_seq", "start_time")
        start_options = [_READ_INDEX[_norm(k)].spark for k in starts if values[k] is not None]
        if start_options:
            raise BadInputError(
                f"option 'consumer': the query starts where the consumer stands (its ack "
                f"floor), so {start_options[0]!r} does not apply; drop it"
            )
        if values["subjects"] is not None and len(values["subjects"]) > 1:
            raise BadInputError(
                "option 'subjects': a read through option 'consumer' takes one subject "
                f"filter (wildcards allowed), got {list(values['subjects'])}"
            )
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
    values["protobuf_descriptor"] = _descriptor_set(values["protobuf_descriptor_file"])
    return ReadOptions(connect=connect, stream=stream or "", **values)


def parse_write_options(options: Mapping[str, Any], *, queries: str = "batch") -> WriteOptions:
    """Spark (or Python) write options -> :class:`WriteOptions`, naming the option at fault.

    ``queries`` is the kind of write: "batch" (df.write) or "stream" (df.writeStream).
    """
    options = dict(options)
    stream = None
    stream_keys = [key for key in options if _norm(key) == "stream"]
    if len(stream_keys) > 1:
        raise BadInputError(f"option 'stream' is given twice (as {stream_keys[1]!r} too)")
    for key in stream_keys:
        stream = options.pop(key)
    path = None
    for key in [key for key in options if _norm(key) == "path"]:
        path = options.pop(key)
    # Spark hands a streaming sink its own option checkpointLocation too.
    ignore = ("checkpointlocation",) if queries == "stream" else ()
    values = _collect(options, _WRITE_INDEX, "write", ignore=ignore, queries=queries)
    connect = _connect_options(values)
    values = {**_WRITE_DEFAULTS, **values}
    # Both name the stream every message must land in: a name the server could never
    # match would fail every row at run time instead.
    if values["expected_stream"] is not None:
        validate_name(values["expected_stream"], "expectedStream")
    stream_given_as = "option 'stream'"
    if stream is not None:
        stream = validate_name(stream, "stream")
    if path is not None:
        # save("ORDERS") (start("ORDERS") for a streaming write) names the stream, as
        # load("ORDERS") does for a read.
        call = "start()" if queries == "stream" else "save()"
        path = _stream_of_path(path, call)
        if stream not in (None, path):
            raise BadInputError(
                f"option 'stream' ({stream!r}) and the path given to {call} ({path!r}) "
                "disagree; give the stream once"
            )
        stream, stream_given_as = path, f"the path given to {call}"
    if stream is not None:
        if values["expected_stream"] not in (None, stream):
            raise BadInputError(
                f"{stream_given_as} ({stream!r}) and option 'expectedStream' "
                f"({values['expected_stream']!r}) disagree"
            )
        values["expected_stream"] = stream
    if values["kv"] is not None:
        _check_kv(values, stream, stream_given_as)
    write_id = values.pop("write_id") or ("" if queries == "stream" else uuid.uuid4().hex)
    if any(c.isspace() for c in write_id):
        raise BadInputError(f"option 'writeId' may not contain whitespace, got {write_id!r}")
    values["protobuf_descriptor"] = _descriptor_set(values["protobuf_descriptor_file"])
    return WriteOptions(connect=connect, write_id=write_id, **values)
