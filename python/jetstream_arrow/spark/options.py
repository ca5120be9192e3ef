"""Spark options parsed into plain, picklable values: :class:`ReadOptions` and
:class:`WriteOptions`, whose fields declare the options (:mod:`.option_specs`).

Spark hands a data source its options as strings in a case-insensitive dict. The same
names serve the mapInArrow helpers, which take Python keyword arguments. Both
spellings of every declared option are accepted everywhere, and an unknown name is an
error that lists the known ones (a typo must not be silently ignored). What the
declarations say is enforced here, for every option alike: its kind and bounds, the
kind of query it applies to, the value formats it is for, the options it does not go
with, whether ``read_fn`` takes it. It is one module because the value parsers, the
name matching and those checks serve the read and the write options alike.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .._core import validate_name
from .._time import to_datetime
from ..exceptions import BadInputError
from ..kv import bucket_stream, refuse_compression
from ..options import ConnectOptions
from .option_specs import (
    CONNECT_SPECS,
    DEAD_LETTER_MODE,
    READ_SPECS,
    WRITE_SPECS,
    OptionSpec,
    ReadOptions,
    WriteOptions,
    spec_defaults,
)

__all__ = ["ReadOptions", "WriteOptions", "parse_read_options", "parse_write_options"]

#: What the server takes as a priority group's name.
_PRIORITY_GROUP_NAME = re.compile(r"[a-zA-Z0-9/_=-]{1,16}")


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
    text = _parse_text(_name(spec), value)
    try:
        re.compile(text)
    except re.error as err:
        raise BadInputError(
            f"option {_name(spec)!r} must be a regular expression (Python's re, matched "
            f"against the whole stream name), got {value!r}: {err}"
        ) from None
    return text


def _parse_text(name: str, value: Any) -> str:
    # Spark hands over strings; a Python caller may give a path for a file option.
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise BadInputError(f"option {name!r} must be a string, got {value!r}")
    if value.strip() == "":
        raise BadInputError(f"option {name!r} is empty")
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
    text = _parse_text(_name(spec), value)
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


def _check_query_kind(spec: OptionSpec, queries: str | None) -> None:
    if queries is None or spec.queries in ("both", queries):
        return
    raise BadInputError(
        f"option {spec.spark!r} applies to {_QUERY_API[spec.scope, spec.queries]} only, "
        f"not to {_QUERY_API[spec.scope, queries]}: {spec.only_because}"
    )


def _given(value: Any) -> bool:
    """Whether an option's value asks for something (a flag's False does not)."""
    return value is not None and value is not False


def _check_formats(given: Mapping[str, Any], specs: list[OptionSpec]) -> None:
    """Each option of some value formats only, given, refuses any other valueFormat
    and its absence: the codec of another format has no use for it. ``given`` holds
    the options the user gave, before defaults, so an option with a default
    (avroFraming) is refused only when given."""
    value_format = given.get("value_format")
    for spec in specs:
        if not spec.formats or not _given(given.get(spec.python)):
            continue
        if value_format not in spec.formats:
            found = f"valueFormat is {value_format}" if value_format else "no valueFormat is given"
            raise BadInputError(
                f"option {spec.spark!r} is for valueFormat {' or '.join(spec.formats)}; {found}"
            )


def _check_excludes(values: dict[str, Any], specs: list[OptionSpec]) -> None:
    """Each option given refuses its rivals (other ways of saying the same), then the
    options it declares it does not go with."""
    by_name = {spec.python: spec for spec in specs}
    for declared, said in (
        ("rivals", "options {other!r} and {this!r} exclude each other"),
        ("excludes", "option {other!r} does not go with option {this!r}"),
    ):
        for spec in specs:
            if not _given(values.get(spec.python)):
                continue
            for other, reason in getattr(spec, declared):
                if _given(values.get(other)):
                    message = said.format(other=by_name[other].spark, this=spec.spark)
                    raise BadInputError(message + (f": {reason}" if reason else ""))


def _collect(
    options: Mapping[str, Any],
    index: dict[str, OptionSpec],
    what: str,
    ignore: tuple[str, ...] = (),
    queries: str | None = None,
) -> dict[str, Any]:
    """Map each given option to its spec's Python name, with its parsed value.
    ``queries`` ("batch" or "stream") refuses the options of the other kind of query;
    None accepts both (for a caller that does not know yet); "read_fn" is a batch read
    that also refuses what ``read_fn`` does not take."""
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
        _check_query_kind(spec, "batch" if queries == "read_fn" else queries)
        values[spec.python] = _parse_value(spec, raw)
        if queries == "read_fn" and spec.not_in_read_fn and _given(values[spec.python]):
            raise BadInputError(f"option {key!r} does not apply to read_fn: {spec.not_in_read_fn}")
    if unknown:
        known = sorted({s.spark for s in index.values()})
        named = ", ".join(_with_advice(key, index) for key in sorted(unknown))
        raise BadInputError(f"unknown {what} option(s) {named}; known options: {', '.join(known)}")
    return values


#: Options of Spark's Kafka source and sink (names normalised by ``_norm``) and the
#: Python names of what this source calls them (their declarations' ``kafka``), in
#: the order they are looked up in the options of a query: a read finds the first, a
#: write the second where they differ.
def _kafka_equivalents() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for spec in CONNECT_SPECS + READ_SPECS + WRITE_SPECS:
        for kafka in spec.kafka:
            out[_norm(kafka)] = (*out.get(_norm(kafka), ()), spec.python)
    return out


KAFKA_EQUIVALENTS = _kafka_equivalents()


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


def _stream_of_path(path: Any, call: str) -> str:
    """The stream named by the path given to ``call`` (``load()``, ``save()``)."""
    try:
        return str(validate_name(_parse_text("path", path), "path"))
    except BadInputError as err:
        raise BadInputError(f"the path given to {call} is a stream's name: {err}") from None


def _connect_options(values: dict[str, Any]) -> ConnectOptions:
    given = {s.python: values.pop(s.python) for s in CONNECT_SPECS if s.python in values}
    try:
        return ConnectOptions(**given)
    except BadInputError as err:
        # ConnectOptions names options in Python spelling; add the Spark one.
        raise BadInputError(
            f"{err} (Spark option names: {_spark_names(err.options)})", options=err.options
        ) from None


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


def _spark_names(options: tuple[str, ...]) -> str:
    """The Spark names of connect ``options`` (Python names), in their order."""
    spark = {s.python: s.spark for s in CONNECT_SPECS}
    names = [spark[o] for o in options if o in spark]
    return ", ".join(names) or "see the option table"


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
    refuse_compression(values["compression"], "option 'kv'")
    given = values["expected_stream"]
    if given not in (None, bucket_stream_name):
        said = stream_given_as if stream is not None else "option 'expectedStream'"
        raise BadInputError(
            f"option 'kv' ({values['kv']!r}, stream {bucket_stream_name!r}) and {said} "
            f"({given!r}) disagree"
        )
    values["expected_stream"] = bucket_stream_name


def _check_as_of(values: dict[str, Any]) -> None:
    """``asOfSequence`` and ``asOfTime`` need a read of the latest message per subject
    (``lastPerSubject``, or a KV bucket)."""
    if values["last_per_subject"] or values["kv"] is not None:
        return
    for option in ("as_of_seq", "as_of_time"):
        if values[option] is not None:
            raise BadInputError(
                f"option {_READ_INDEX[_norm(option)].spark!r} ({option!r}) is for reads "
                "of the latest message per subject: give option 'lastPerSubject' (or "
                "'kv') too"
            )


def _check_dead_letter(values: dict[str, Any]) -> None:
    """Mode ``deadletter`` and option ``deadLetterStream`` go together: the mode needs
    a stream to publish to, and the stream is of no use to another mode."""
    dead_letter_mode = values["on_malformed"] == DEAD_LETTER_MODE
    stream = values["dead_letter_stream"]
    if dead_letter_mode and stream is None:
        raise BadInputError(
            f"option 'mode' {DEAD_LETTER_MODE!r} needs option 'deadLetterStream': the "
            "stream the payloads that do not decode are published to"
        )
    if stream is not None and not dead_letter_mode:
        raise BadInputError(
            f"option 'deadLetterStream' ({stream!r}) is for option 'mode' "
            f"{DEAD_LETTER_MODE!r}; mode is {values['on_malformed']!r}"
        )
    if stream is not None:
        validate_name(stream, "deadLetterStream")


def parse_read_options(
    options: Mapping[str, Any], *, need_stream: bool = True, queries: str | None = "batch"
) -> ReadOptions:
    """Spark (or Python) read options -> :class:`ReadOptions`, naming the option at fault.

    ``queries`` is the kind of read: "batch" (spark.read) or "stream"
    (spark.readStream) refuse the options of the other kind; None checks only the
    values (Spark asks for the schema before it says which kind of read it plans);
    "read_fn" is the mapInArrow helper's batch read of the ranges its rows give.
    """
    options = dict(options)
    path = None
    for key in list(options):
        if _norm(key) == "path":
            path = options.pop(key)
    values = _collect(options, _READ_INDEX, "read", queries=queries)
    if queries == "read_fn":
        queries = "batch"
    if path is not None:
        path = _stream_of_path(path, "load()")
        if values.get("stream") not in (None, path):
            raise BadInputError(
                f"option 'stream' ({values['stream']!r}) and the path given to load() "
                f"({path!r}) disagree; give the stream once"
            )
        values["stream"] = path
    connect = _connect_options(values)
    _check_formats(values, READ_SPECS)
    values = {**_READ_DEFAULTS, **values}
    if values["kv"] is not None:
        kv_stream = bucket_stream(values["kv"])
        if values["stream"] not in (None, kv_stream):
            raise BadInputError(
                f"option 'kv' ({values['kv']!r}, stream {kv_stream!r}) and option 'stream' "
                f"({values['stream']!r}) disagree; give the bucket alone"
            )
        values["stream"] = kv_stream
    _check_excludes(values, READ_SPECS)
    _check_as_of(values)
    _check_dead_letter(values)
    stream = values.pop("stream")
    if stream is None and need_stream and not (values["streams"] or values["stream_pattern"]):
        raise BadInputError(
            "option 'stream' is required: spark.read.format('jetstream').option('stream', "
            "'ORDERS') (or option 'streams' or 'streamPattern' for several)"
        )
    if stream is not None:
        validate_name(stream, "stream")
    if values["starting_offsets"] == "latest" and queries == "batch":
        raise BadInputError(
            "option 'startingOffsets': 'latest' applies to spark.readStream only; a batch "
            "read from the latest message would read nothing (use startingSequence or "
            "startingTime to skip older messages)"
        )
    if values["consumer_group"] is not None and values["consumer"] is None:
        raise BadInputError(
            "option 'consumerGroup' is a priority group of the durable consumer named by "
            "option 'consumer'; give that option too"
        )
    group = values["consumer_group"]
    if group is not None and not _PRIORITY_GROUP_NAME.fullmatch(group):
        raise BadInputError(
            f"option 'consumerGroup': {group!r} is not a priority group name (1 to 16 "
            "letters, digits and the characters / _ = -, as the server takes them)"
        )
    if values["consumer_pin_timeout"] is not None and values["consumer_group"] is None:
        raise BadInputError(
            "option 'consumerPinTimeout' is the pin timeout of option 'consumerGroup'; "
            "give that option too"
        )
    if values["consumer"] is not None:
        validate_name(values["consumer"], "consumer")
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
    _check_formats(values, WRITE_SPECS)
    values = {**_WRITE_DEFAULTS, **values}
    _check_excludes(values, WRITE_SPECS)
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
    given_id = values.pop("write_id")
    write_id = given_id or ("" if queries == "stream" else uuid.uuid4().hex)
    if any(c.isspace() for c in write_id):
        raise BadInputError(f"option 'writeId' may not contain whitespace, got {write_id!r}")
    values["protobuf_descriptor"] = _descriptor_set(values["protobuf_descriptor_file"])
    return WriteOptions(connect=connect, write_id=write_id, write_id_given=bool(given_id), **values)
