"""The wire encoding every management type shares: dataclass fields to and from the
JetStream API's JSON.

A type that travels as JSON derives from :class:`WireObject` and describes its fields
with :func:`meta` (``field(default=None, metadata=meta("duration"))``); ``to_api`` and
``from_api`` follow from that description alone.
The conventions, the same for every type:

- Field names follow the server's JSON names, except where Python reads better
  (``replicas`` for ``num_replicas``); ``meta(wire=...)`` gives the JSON name then.
- ``meta(kind=...)`` says how a value travels: ``"duration"`` is seconds (float) in
  Python and nanoseconds on the wire (``"durations"`` a list of them); ``"time"`` an
  aware UTC ``datetime`` in Python and RFC 3339 text on the wire; ``"nested"`` /
  ``"nested_list"`` another WireObject (``meta(type=...)``); ``"base64"`` bytes as
  base64 text; ``"headers"`` a ``{name: [values]}`` map as a base64 ``NATS/1.0``
  header block. ``"plain"`` (the default) travels as it is.
- ``None`` means unset: the field is left out of the request and the server applies
  its default; ``""`` in a reply is unset too. ``extra`` is merged into the JSON as
  is, for options no type names yet; unknown fields of a server reply land there, so
  a config read from the server can be sent back unchanged. ``raw`` keeps a whole
  reply as the server sent it.

Also here: the header-block parser and the check of a value against a ``Literal``.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, Literal, TypeVar, cast, get_args

from .._time import from_ns_duration, from_rfc3339, to_ns_duration, to_rfc3339
from ..exceptions import BadInputError

Seconds = float | int | timedelta
Kind = Literal[
    "plain", "duration", "durations", "time", "nested", "nested_list", "base64", "headers"
]

_T = TypeVar("_T")
_W = TypeVar("_W", bound="WireObject")

# Fields that hold the unknown rest of a reply (or all of it), not one JSON key.
_BOOKKEEPING_FIELDS = ("extra", "raw")


def meta(kind: Kind = "plain", type: Any = None, *, wire: str | None = None) -> dict[str, Any]:
    """A field's wire description: its JSON name when it differs, how its value
    travels, and for nested kinds the WireObject type it decodes to."""
    return {"wire": wire, "kind": kind, "type": type}


def wire_name(f: dataclasses.Field[Any]) -> str:
    return f.metadata.get("wire") or f.name


def is_data_field(f: dataclasses.Field[Any]) -> bool:
    return f.name not in _BOOKKEEPING_FIELDS


def parse_headers(block: bytes) -> dict[str, list[str]]:
    """Parse a ``NATS/1.0`` header block into ``{name: [values...]}`` (names as sent)."""
    headers: dict[str, list[str]] = {}
    lines = block.decode("utf-8", errors="replace").split("\r\n")
    # lines[0] is the version line ("NATS/1.0" plus an optional status).
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep and name.strip():
            headers.setdefault(name.strip(), []).append(value.strip())
    return headers


def format_headers(headers: Mapping[str, list[str]]) -> bytes:
    """The ``NATS/1.0`` header block :func:`parse_headers` reads back."""
    lines = [f"{name}: {value}\r\n" for name, values in headers.items() for value in values]
    return ("NATS/1.0\r\n" + "".join(lines) + "\r\n").encode()


def check_choice(option: str, value: object, choices: Any) -> None:
    """Refuse ``value`` unless it is None or one of the ``Literal`` type ``choices``."""
    allowed = get_args(choices)
    if value is not None and value not in allowed:
        raise BadInputError(
            f"option {option!r}: {value!r} is not one of {', '.join(map(repr, allowed))}"
        )


def check_list(option: str, value: object, one: str, write_one: str = "") -> None:
    """Refuse a string given where option ``option`` takes a list, saying how to give
    the one ``one`` (subject, group) it names: ``option=[value]``, or ``write_one``
    where there is another way too."""
    if isinstance(value, str):
        alternative = f" or {write_one}" if write_one else ""
        raise BadInputError(
            f"option {option!r} takes a list, got the string {value!r}; for one {one} "
            f"write {option}=[{value!r}]{alternative}"
        )


def _plain_to_wire(value: Any, option: str) -> Any:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


# kind -> (Python value, option name) -> JSON value
_TO_WIRE: dict[str, Callable[[Any, str], Any]] = {
    "plain": _plain_to_wire,
    "duration": to_ns_duration,
    "durations": lambda value, option: [to_ns_duration(v, option) for v in value],
    "time": to_rfc3339,
    "nested": lambda value, _: value.to_api(),
    "nested_list": lambda value, _: [v.to_api() for v in value],
    "base64": lambda value, _: _b64(value),
    "headers": lambda value, _: _b64(format_headers(value)),
}

# kind -> (JSON value, the field's metadata "type") -> Python value
_FROM_WIRE: dict[str, Callable[[Any, Any], Any]] = {
    "plain": lambda value, _: value,
    "duration": lambda value, _: from_ns_duration(value),
    "durations": lambda value, _: [from_ns_duration(v) for v in value],
    "time": lambda value, _: from_rfc3339(value),
    "nested": lambda value, cls: cls.from_api(value),
    "nested_list": lambda value, cls: [cls.from_api(v) for v in value],
    "base64": lambda value, _: base64.b64decode(value),
    "headers": lambda value, _: parse_headers(base64.b64decode(value)),
}


def _kind(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("kind", "plain"))


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def encode(obj: Any) -> dict[str, Any]:
    """The JSON object of a dataclass instance; unset (None) fields are left out."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if is_data_field(f) and value is not None:
            out[wire_name(f)] = _TO_WIRE[_kind(f)](value, f.name)
    extra = getattr(obj, "extra", None)
    if extra:
        out.update(extra)
    return out


def decode(cls: type[_T], data: Mapping[str, Any]) -> _T:
    """Build ``cls`` from a reply; unknown keys go to ``extra`` if the class has one."""
    kwargs: dict[str, Any] = {}
    known: set[str] = set()
    names = set()
    for f in dataclasses.fields(cast(Any, cls)):
        names.add(f.name)
        if not is_data_field(f):
            continue
        wire = wire_name(f)
        known.add(wire)
        value = data.get(wire)
        kind = _kind(f)
        # Go's omitempty is not used everywhere: "" means unset too (e.g. external.deliver).
        if value is None or value == "":
            if kind != "nested" or not _required(f):
                continue
            value = {}  # a required object the reply leaves out is an empty one
        kwargs[f.name] = _FROM_WIRE[kind](value, f.metadata.get("type"))
    if "extra" in names:
        kwargs["extra"] = {k: v for k, v in data.items() if k not in known}
    if "raw" in names:
        kwargs["raw"] = dict(data)
    return cls(**kwargs)


class WireObject:
    """Base of the dataclasses that travel as JetStream API JSON: ``to_api`` and
    ``from_api`` driven by each field's :func:`meta`."""

    def to_api(self) -> dict[str, Any]:
        return encode(self)

    @classmethod
    def from_api(cls: type[_W], data: Mapping[str, Any]) -> _W:
        return decode(cls, data)
