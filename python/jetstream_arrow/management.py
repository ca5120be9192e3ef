"""Stream and consumer management: typed configs over the JetStream JSON API.

The JetStream API is JSON requests on ``<api prefix>.STREAM.*`` / ``CONSUMER.*``.
This module turns those into frozen dataclasses and methods of
:class:`ManagementMixin`, which :class:`jetstream_arrow.Client` inherits.

Conventions, the same in every class here:

- Field names follow the server's JSON names, except where Python reads better
  (``replicas`` for ``num_replicas``, ``allow_rollup`` for ``allow_rollup_hdrs``).
- Durations are seconds (float) in Python and nanoseconds on the wire; times are aware
  UTC ``datetime`` objects in Python and RFC 3339 strings on the wire.
- ``None`` means unset: the field is left out of the request and the server applies
  its default. ``extra`` is merged into the JSON as is, for options this module does
  not name yet; unknown fields of a server reply land there too, so a config read
  from the server can be sent back unchanged.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, TypeVar, cast

from .exceptions import ApiError, BadInputError, NotFoundError

Storage = Literal["file", "memory"]
Retention = Literal["limits", "interest", "workqueue"]
Discard = Literal["old", "new"]
Compression = Literal["none", "s2"]
DeliverPolicy = Literal[
    "all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"
]
AckPolicy = Literal["none", "all", "explicit", "flow_control"]
ReplayPolicy = Literal["instant", "original"]

Seconds = float | int | timedelta

# JetStream error codes this module reacts to.
ERR_STREAM_NAME_IN_USE = 10058
ERR_STREAM_NOT_FOUND = 10059
ERR_CONSUMER_NOT_FOUND = 10014
ERR_MESSAGE_NOT_FOUND = 10037

_NS_PER_SECOND = 1_000_000_000
# Stream and consumer names become subject tokens and file names on the server.
_BAD_NAME_CHARS = re.compile(r"[\s.*>/\\]")
_TIME_RE = re.compile(
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", re.IGNORECASE
)
# Go's zero time.Time, which the server sends for "never" (e.g. first_ts of an empty stream).
_GO_ZERO_TIME_PREFIX = "0001-01-01T00:00:00"


# -- value conversions ----------------------------------------------------------------


def validate_name(value: object, option: str) -> str:
    """A stream or consumer name: non-empty, no whitespace, ``.``, ``*``, ``>`` or slashes."""
    if not isinstance(value, str) or not value:
        raise BadInputError(f"option {option!r} must be a non-empty string, got {value!r}")
    bad = _BAD_NAME_CHARS.search(value)
    if bad:
        raise BadInputError(
            f"option {option!r}: {value!r} is not a valid name: it contains {bad.group()!r}; "
            "names may not contain whitespace, '.', '*', '>' or slashes"
        )
    return value


def _to_ns(value: Seconds, option: str) -> int:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise BadInputError(
            f"option {option!r} must be a non-negative number of seconds, got {value!r}"
        )
    return round(value * _NS_PER_SECOND)


def _from_ns(value: int) -> float:
    return value / _NS_PER_SECOND


def _time_to_api(value: datetime, option: str) -> str:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise BadInputError(
            f"option {option!r} must be an aware datetime (e.g. tzinfo=timezone.utc), got {value!r}"
        )
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _time_from_api(value: str | None) -> datetime | None:
    """Parse the server's RFC 3339 time (nanosecond precision) to an aware UTC datetime."""
    if not value or value.startswith(_GO_ZERO_TIME_PREFIX):
        return None
    match = _TIME_RE.match(value)
    if not match:
        raise ValueError(f"unexpected time {value!r} in a JetStream API reply")
    base, fraction, zone = match.groups()
    parsed = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    if zone.upper() == "Z":
        tz = timezone.utc
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    return parsed.replace(microsecond=micros, tzinfo=tz).astimezone(timezone.utc)


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


def _check_choice(option: str, value: object, choices: Iterable[str]) -> None:
    allowed = tuple(choices)
    if value is not None and value not in allowed:
        raise BadInputError(
            f"option {option!r}: {value!r} is not one of {', '.join(map(repr, allowed))}"
        )


# -- generic (de)serialisation driven by field metadata ------------------------------
#
# Each field may carry metadata: "wire" (the JSON name when it differs) and "kind":
# "duration" (ns), "durations" (list of ns), "time" (RFC 3339), "nested" / "nested_list"
# (with "type", a class that has to_api/from_api).

_T = TypeVar("_T")


def _meta(wire: str | None = None, kind: str = "plain", type: Any = None) -> dict[str, Any]:
    return {"wire": wire, "kind": kind, "type": type}


def _wire_name(f: dataclasses.Field[Any]) -> str:
    return f.metadata.get("wire") or f.name


def _is_data_field(f: dataclasses.Field[Any]) -> bool:
    return f.name not in ("extra", "raw")


def _encode(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if not _is_data_field(f) or value is None:
            continue
        kind = f.metadata.get("kind", "plain")
        if kind == "duration":
            value = _to_ns(value, f.name)
        elif kind == "durations":
            value = [_to_ns(v, f.name) for v in value]
        elif kind == "time":
            value = _time_to_api(value, f.name)
        elif kind == "nested":
            value = value.to_api()
        elif kind == "nested_list":
            value = [v.to_api() for v in value]
        elif isinstance(value, (list, tuple)):
            value = list(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        out[_wire_name(f)] = value
    extra = getattr(obj, "extra", None)
    if extra:
        out.update(extra)
    return out


def _decode(cls: type[_T], data: Mapping[str, Any], **given: Any) -> _T:
    """Build ``cls`` from a reply; unknown keys go to ``extra`` if the class has one."""
    kwargs: dict[str, Any] = dict(given)
    known: set[str] = set(given)
    names = set()
    for f in dataclasses.fields(cast(Any, cls)):
        names.add(f.name)
        if not _is_data_field(f) or f.name in given:
            continue
        wire = _wire_name(f)
        known.add(wire)
        value = data.get(wire)
        # Go's omitempty is not used everywhere: "" means unset too (e.g. external.deliver).
        if value is None or value == "":
            continue
        kind = f.metadata.get("kind", "plain")
        if kind == "duration":
            value = _from_ns(value)
        elif kind == "durations":
            value = [_from_ns(v) for v in value]
        elif kind == "time":
            value = _time_from_api(value)
        elif kind == "nested":
            value = f.metadata["type"].from_api(value)
        elif kind == "nested_list":
            value = [f.metadata["type"].from_api(v) for v in value]
        kwargs[f.name] = value
    if "extra" in names:
        kwargs["extra"] = {k: v for k, v in data.items() if k not in known}
    if "raw" in names:
        kwargs["raw"] = dict(data)
    return cls(**kwargs)


def _check_kwargs(cls: type[Any], options: Mapping[str, Any], what: str) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise BadInputError(
            f"unknown {what} option(s) {', '.join(map(repr, unknown))}; "
            f"known options: {', '.join(sorted(known))}"
        )


# -- streams --------------------------------------------------------------------------


@dataclass(frozen=True)
class ExternalStream:
    """Where a mirror or source lives when it is in another domain or account.

    ``api`` is that JetStream's API prefix (``$JS.<domain>.API`` for a domain),
    ``deliver`` an optional prefix for the subjects messages are delivered on.
    """

    api: str
    deliver: str | None = None

    @classmethod
    def for_domain(cls, domain: str, deliver: str | None = None) -> ExternalStream:
        return cls(api=f"$JS.{domain}.API", deliver=deliver)

    def to_api(self) -> dict[str, Any]:
        return _encode(self)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ExternalStream:
        return _decode(cls, data)


@dataclass(frozen=True)
class SourceConsumer:
    """Source through an existing durable AckFlowControl consumer of the origin stream
    (push, delivering on ``deliver_subject``) instead of one the server makes."""

    name: str
    deliver_subject: str | None = None

    def to_api(self) -> dict[str, Any]:
        return _encode(self)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> SourceConsumer:
        return _decode(cls, data)


@dataclass(frozen=True)
class StreamSource:
    """A stream to mirror or source from (``StreamConfig.mirror`` / ``.sources``)."""

    name: str
    opt_start_seq: int | None = None
    opt_start_time: datetime | None = field(default=None, metadata=_meta(kind="time"))
    filter_subject: str | None = None
    external: ExternalStream | None = field(
        default=None, metadata=_meta(kind="nested", type=ExternalStream)
    )
    consumer: SourceConsumer | None = field(
        default=None, metadata=_meta(kind="nested", type=SourceConsumer)
    )
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_name(self.name, "source name")

    def to_api(self) -> dict[str, Any]:
        return _encode(self)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> StreamSource:
        return _decode(cls, data)


@dataclass(frozen=True)
class StreamConfig:
    """A stream's configuration. Only ``name`` is required; unset fields take the
    server's defaults (file storage, limits retention, one replica, no limits)."""

    name: str
    subjects: list[str] | None = None
    description: str | None = None
    storage: Storage | None = None
    retention: Retention | None = None
    replicas: int | None = field(default=None, metadata=_meta(wire="num_replicas"))
    max_consumers: int | None = None
    max_msgs: int | None = None
    max_bytes: int | None = None
    max_age: Seconds | None = field(default=None, metadata=_meta(kind="duration"))
    max_msg_size: int | None = None
    max_msgs_per_subject: int | None = None
    discard: Discard | None = None
    discard_new_per_subject: bool | None = None
    duplicate_window: Seconds | None = field(default=None, metadata=_meta(kind="duration"))
    allow_direct: bool | None = None
    mirror_direct: bool | None = None
    allow_atomic: bool | None = None
    allow_batched: bool | None = None
    allow_msg_ttl: bool | None = None
    subject_delete_marker_ttl: Seconds | None = field(default=None, metadata=_meta(kind="duration"))
    allow_rollup: bool | None = field(default=None, metadata=_meta(wire="allow_rollup_hdrs"))
    deny_delete: bool | None = None
    deny_purge: bool | None = None
    sealed: bool | None = None
    no_ack: bool | None = None
    compression: Compression | None = None
    first_seq: int | None = None
    mirror: StreamSource | None = field(
        default=None, metadata=_meta(kind="nested", type=StreamSource)
    )
    sources: list[StreamSource] | None = field(
        default=None, metadata=_meta(kind="nested_list", type=StreamSource)
    )
    metadata: dict[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_name(self.name, "name")
        if isinstance(self.subjects, str):
            raise BadInputError(
                f"option 'subjects' takes a list of subjects, got the string {self.subjects!r}"
            )
        _check_choice("storage", self.storage, ("file", "memory"))
        _check_choice("retention", self.retention, ("limits", "interest", "workqueue"))
        _check_choice("discard", self.discard, ("old", "new"))
        _check_choice("compression", self.compression, ("none", "s2"))
        if self.mirror is not None and self.subjects:
            raise BadInputError("options 'mirror' and 'subjects' exclude each other")

    def to_api(self) -> dict[str, Any]:
        return _encode(self)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> StreamConfig:
        return _decode(cls, data)


@dataclass(frozen=True)
class StreamState:
    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    last_seq: int = 0
    first_ts: datetime | None = field(default=None, metadata=_meta(kind="time"))
    last_ts: datetime | None = field(default=None, metadata=_meta(kind="time"))
    num_deleted: int = 0
    num_subjects: int = 0
    consumer_count: int = 0

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> StreamState:
        return _decode(cls, data)


@dataclass(frozen=True)
class ClusterInfo:
    """The replica group of a stream or consumer in a cluster."""

    name: str | None = None
    leader: str | None = None
    replicas: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ClusterInfo:
        return _decode(cls, data)


@dataclass(frozen=True)
class StreamInfo:
    config: StreamConfig
    state: StreamState
    created: datetime | None = field(default=None, metadata=_meta(kind="time"))
    cluster: ClusterInfo | None = field(
        default=None, metadata=_meta(kind="nested", type=ClusterInfo)
    )
    domain: str | None = None
    # The reply as the server sent it, for fields not named here (mirror/sources lag ...).
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> StreamInfo:
        return _decode(
            cls,
            data,
            config=StreamConfig.from_api(data["config"]),
            state=StreamState.from_api(data.get("state") or {}),
        )


@dataclass(frozen=True)
class PurgeResult:
    success: bool
    purged: int

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> PurgeResult:
        return cls(success=bool(data.get("success")), purged=int(data.get("purged", 0)))


@dataclass(frozen=True)
class StoredMessage:
    """One message read straight from a stream (``get_message``)."""

    subject: str
    seq: int
    data: bytes
    headers: dict[str, list[str]]
    time: datetime | None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> StoredMessage:
        # The payload and the header block are base64 in the JSON reply.
        hdrs = data.get("hdrs")
        return cls(
            subject=data["subject"],
            seq=int(data["seq"]),
            data=base64.b64decode(data.get("data") or b""),
            headers=parse_headers(base64.b64decode(hdrs)) if hdrs else {},
            time=_time_from_api(data.get("time")),
        )


# -- consumers ------------------------------------------------------------------------


@dataclass(frozen=True)
class ConsumerConfig:
    """A consumer's configuration. A ``durable_name`` (or ``name``) makes a named
    consumer, neither an ephemeral one; ``deliver_subject`` makes it a push consumer.

    ``filter_subjects`` is a list; a single filter goes on the wire as
    ``filter_subject`` (what older servers understand).
    """

    durable_name: str | None = None
    name: str | None = None
    description: str | None = None
    deliver_policy: DeliverPolicy | None = None
    opt_start_seq: int | None = None
    opt_start_time: datetime | None = field(default=None, metadata=_meta(kind="time"))
    ack_policy: AckPolicy | None = None
    ack_wait: Seconds | None = field(default=None, metadata=_meta(kind="duration"))
    max_deliver: int | None = None
    backoff: list[Seconds] | None = field(default=None, metadata=_meta(kind="durations"))
    filter_subjects: list[str] | None = None
    replay_policy: ReplayPolicy | None = None
    rate_limit_bps: int | None = None
    sample_freq: str | None = None
    max_waiting: int | None = None
    max_ack_pending: int | None = None
    flow_control: bool | None = None
    headers_only: bool | None = None
    max_batch: int | None = None
    max_expires: Seconds | None = field(default=None, metadata=_meta(kind="duration"))
    max_bytes: int | None = None
    deliver_subject: str | None = None
    deliver_group: str | None = None
    idle_heartbeat: Seconds | None = field(default=None, metadata=_meta(kind="duration"))
    inactive_threshold: Seconds | None = field(default=None, metadata=_meta(kind="duration"))
    num_replicas: int | None = None
    mem_storage: bool | None = None
    metadata: dict[str, str] | None = None
    pause_until: datetime | None = field(default=None, metadata=_meta(kind="time"))
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.durable_name is not None:
            validate_name(self.durable_name, "durable_name")
        if self.name is not None:
            validate_name(self.name, "name")
        if self.durable_name and self.name and self.durable_name != self.name:
            raise BadInputError(
                f"options 'durable_name' ({self.durable_name!r}) and 'name' ({self.name!r}) "
                "differ; give one of them"
            )
        if isinstance(self.filter_subjects, str):
            raise BadInputError(
                "option 'filter_subjects' takes a list; for one subject write "
                f"filter_subjects=[{self.filter_subjects!r}] or filter_subject="
                f"{self.filter_subjects!r}"
            )
        _check_choice(
            "deliver_policy",
            self.deliver_policy,
            ("all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"),
        )
        _check_choice("ack_policy", self.ack_policy, ("none", "all", "explicit", "flow_control"))
        _check_choice("replay_policy", self.replay_policy, ("instant", "original"))
        if self.deliver_policy == "by_start_sequence" and self.opt_start_seq is None:
            raise BadInputError("deliver_policy 'by_start_sequence' needs 'opt_start_seq'")
        if self.deliver_policy == "by_start_time" and self.opt_start_time is None:
            raise BadInputError("deliver_policy 'by_start_time' needs 'opt_start_time'")
        if self.ack_policy == "flow_control":
            self._check_ack_flow_control()

    def _check_ack_flow_control(self) -> None:
        # The server's rules for AckFlowControl (nats-server 2.14): a push consumer
        # with flow control, a 1 s heartbeat and a bounded window; acks come from
        # flow-control replies, so no ack_wait, backoff or max_deliver.
        problem = None
        if not self.deliver_subject:
            problem = "it is push only: set 'deliver_subject'"
        elif self.flow_control is False:
            problem = "it needs 'flow_control' true"
        elif self.idle_heartbeat is not None and _to_ns(self.idle_heartbeat, "idle_heartbeat") != (
            _NS_PER_SECOND
        ):
            problem = "'idle_heartbeat' must be exactly 1 second"
        elif self.max_ack_pending is not None and self.max_ack_pending <= 0:
            problem = "'max_ack_pending' must be > 0"
        elif self.ack_wait is not None or self.backoff:
            problem = "'ack_wait' and 'backoff' do not apply; leave them unset"
        elif self.max_deliver is not None and self.max_deliver != -1:
            problem = "'max_deliver' must be unset or -1"
        if problem:
            raise BadInputError(f"ack_policy 'flow_control': {problem}")
        # Fill what the rules fix, so the request also passes a pedantic server.
        if self.flow_control is None:
            object.__setattr__(self, "flow_control", True)
        if self.idle_heartbeat is None:
            object.__setattr__(self, "idle_heartbeat", 1.0)

    @property
    def consumer_name(self) -> str | None:
        return self.durable_name or self.name

    @property
    def is_push(self) -> bool:
        return bool(self.deliver_subject)

    def to_api(self) -> dict[str, Any]:
        out = _encode(self)
        filters = out.pop("filter_subjects", None)
        if filters and len(filters) == 1:
            out["filter_subject"] = filters[0]
        elif filters:
            out["filter_subjects"] = filters
        return out

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ConsumerConfig:
        data = dict(data)
        single = data.pop("filter_subject", None)
        if single and not data.get("filter_subjects"):
            data["filter_subjects"] = [single]
        return _decode(cls, data)


@dataclass(frozen=True)
class SequenceInfo:
    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: datetime | None = field(default=None, metadata=_meta(kind="time"))

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> SequenceInfo:
        return _decode(cls, data)


@dataclass(frozen=True)
class ConsumerInfo:
    stream_name: str
    name: str
    config: ConsumerConfig
    delivered: SequenceInfo = field(
        default=SequenceInfo(), metadata=_meta(kind="nested", type=SequenceInfo)
    )
    ack_floor: SequenceInfo = field(
        default=SequenceInfo(), metadata=_meta(kind="nested", type=SequenceInfo)
    )
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    num_pending: int = 0
    created: datetime | None = field(default=None, metadata=_meta(kind="time"))
    cluster: ClusterInfo | None = field(
        default=None, metadata=_meta(kind="nested", type=ClusterInfo)
    )
    push_bound: bool = False
    paused: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ConsumerInfo:
        return _decode(cls, data, config=ConsumerConfig.from_api(data.get("config") or {}))


# -- the methods ----------------------------------------------------------------------


def _build(cls: type[_T], given: _T | None, options: dict[str, Any], what: str) -> _T:
    """A config from an instance, keyword options, or an instance with overrides."""
    _check_kwargs(cls, options, what)
    if given is None:
        return cls(**options)
    if not isinstance(given, cls):
        raise BadInputError(f"expected a {cls.__name__}, got {type(given).__name__}")
    return dataclasses.replace(cast(Any, given), **options) if options else given


class ManagementMixin:
    """Stream and consumer management for :class:`jetstream_arrow.Client`.

    Every method is one (or, for listings, a few) JetStream API requests. Errors are
    raised as :class:`~jetstream_arrow.exceptions.ApiError`, or
    :class:`~jetstream_arrow.exceptions.NotFoundError` for a missing stream, consumer
    or message.
    """

    def _api_json(self, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Request ``<api prefix>.<subject>`` with a JSON body; the JSON reply.
        Provided by the class that mixes this in."""
        raise NotImplementedError

    def _call(self, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self._api_json(subject, body)
        error = reply.get("error")
        if error:
            # The native client raises on error replies already; this keeps the
            # mixin correct over any transport.
            code, err_code = int(error.get("code", 0)), int(error.get("err_code", 0))
            description = str(error.get("description", ""))
            kind = NotFoundError if code == 404 else ApiError
            raise kind(
                f"JetStream API {subject}: {description} (code {code}, err_code {err_code})",
                code,
                err_code,
                description,
            )
        return reply

    def _paged(self, subject: str, key: str, body: dict[str, Any] | None = None) -> list[Any]:
        items: list[Any] = []
        while True:
            reply = self._call(subject, {**(body or {}), "offset": len(items)})
            page = reply.get(key) or []
            items.extend(page)
            if not page or len(items) >= int(reply.get("total", 0)):
                return items

    # -- streams ----------------------------------------------------------------------
    def create_stream(
        self,
        name: str | StreamConfig,
        subjects: list[str] | None = None,
        **config: Any,
    ) -> StreamInfo:
        """Create a stream: ``create_stream("ORDERS", ["orders.>"], max_age=3600)`` or
        ``create_stream(StreamConfig(...))``. Creating a stream that exists with the
        same config succeeds; with a different config it raises ApiError (10058)."""
        cfg = self._stream_config(name, subjects, config)
        reply = self._call(f"STREAM.CREATE.{cfg.name}", cfg.to_api())
        return StreamInfo.from_api(reply)

    def update_stream(
        self,
        name: str | StreamConfig,
        subjects: list[str] | None = None,
        **config: Any,
    ) -> StreamInfo:
        """Replace a stream's config. Unset fields return to the server's defaults, so
        start from ``stream_info(name).config`` to change one field::

            client.update_stream(client.stream_info("S").config, max_msgs=100)
        """
        cfg = self._stream_config(name, subjects, config)
        reply = self._call(f"STREAM.UPDATE.{cfg.name}", cfg.to_api())
        return StreamInfo.from_api(reply)

    def create_or_update_stream(
        self,
        name: str | StreamConfig,
        subjects: list[str] | None = None,
        **config: Any,
    ) -> StreamInfo:
        cfg = self._stream_config(name, subjects, config)
        try:
            return self.create_stream(cfg)
        except ApiError as err:
            if err.err_code != ERR_STREAM_NAME_IN_USE:
                raise
        return self.update_stream(cfg)

    @staticmethod
    def _stream_config(
        name: str | StreamConfig, subjects: list[str] | None, config: dict[str, Any]
    ) -> StreamConfig:
        if subjects is not None:
            config["subjects"] = subjects
        if isinstance(name, StreamConfig):
            return _build(StreamConfig, name, config, "stream")
        _check_kwargs(StreamConfig, config, "stream")
        return StreamConfig(name=name, **config)

    def stream_info(self, name: str) -> StreamInfo:
        validate_name(name, "stream")
        return StreamInfo.from_api(self._call(f"STREAM.INFO.{name}"))

    def delete_stream(self, name: str) -> bool:
        validate_name(name, "stream")
        return bool(self._call(f"STREAM.DELETE.{name}").get("success"))

    def list_streams(self, subject: str | None = None) -> list[StreamInfo]:
        """Every stream (that stores ``subject``, when given), with config and state."""
        body = {"subject": subject} if subject else None
        return [StreamInfo.from_api(s) for s in self._paged("STREAM.LIST", "streams", body)]

    def stream_names(self, subject: str | None = None) -> list[str]:
        body = {"subject": subject} if subject else None
        return [str(s) for s in self._paged("STREAM.NAMES", "streams", body)]

    def purge_stream(
        self,
        name: str,
        subject: str | None = None,
        up_to_seq: int | None = None,
        keep: int | None = None,
    ) -> int:
        """Remove messages; returns how many. ``subject`` limits it to matching
        messages, ``up_to_seq`` purges below that sequence (exclusive), ``keep``
        keeps the newest N. ``up_to_seq`` and ``keep`` exclude each other."""
        validate_name(name, "stream")
        if up_to_seq is not None and keep is not None:
            raise BadInputError("options 'up_to_seq' and 'keep' exclude each other")
        body: dict[str, Any] = {}
        if subject is not None:
            body["filter"] = subject
        if up_to_seq is not None:
            body["seq"] = int(up_to_seq)
        if keep is not None:
            body["keep"] = int(keep)
        reply = self._call(f"STREAM.PURGE.{name}", body or None)
        return PurgeResult.from_api(reply).purged

    def get_message(
        self, stream: str, seq: int | None = None, last_by_subject: str | None = None
    ) -> StoredMessage:
        """One stored message, by sequence or as the last one on a subject."""
        validate_name(stream, "stream")
        if (seq is None) == (last_by_subject is None):
            raise BadInputError("give exactly one of 'seq' and 'last_by_subject'")
        body = {"seq": int(seq)} if seq is not None else {"last_by_subj": last_by_subject}
        reply = self._call(f"STREAM.MSG.GET.{stream}", body)
        return StoredMessage.from_api(reply["message"])

    def delete_message(self, stream: str, seq: int, erase: bool = False) -> bool:
        """Delete one message. ``erase=True`` also overwrites its bytes on disk."""
        validate_name(stream, "stream")
        body: dict[str, Any] = {"seq": int(seq)}
        if not erase:
            body["no_erase"] = True
        return bool(self._call(f"STREAM.MSG.DELETE.{stream}", body).get("success"))

    # -- consumers --------------------------------------------------------------------
    def create_consumer(
        self, stream: str, config: ConsumerConfig | None = None, **options: Any
    ) -> ConsumerInfo:
        """Create a consumer: durable with ``durable_name``/``name``, else ephemeral;
        push when ``deliver_subject`` is set, else pull. A single filter may be given
        as ``filter_subject="orders.new"``. Creating a consumer that exists with the
        same config succeeds; with another config it raises ApiError."""
        return self._write_consumer(stream, config, options, "create")

    def update_consumer(
        self, stream: str, config: ConsumerConfig | None = None, **options: Any
    ) -> ConsumerInfo:
        """Change an existing named consumer (not every field may change)."""
        return self._write_consumer(stream, config, options, "update")

    def create_or_update_consumer(
        self, stream: str, config: ConsumerConfig | None = None, **options: Any
    ) -> ConsumerInfo:
        return self._write_consumer(stream, config, options, None)

    def _write_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None,
        options: dict[str, Any],
        action: str | None,
    ) -> ConsumerInfo:
        validate_name(stream, "stream")
        if "filter_subject" in options:
            single = options.pop("filter_subject")
            if options.get("filter_subjects"):
                raise BadInputError("give 'filter_subject' or 'filter_subjects', not both")
            options["filter_subjects"] = None if single is None else [single]
        cfg = _build(ConsumerConfig, config, options, "consumer")
        name = cfg.consumer_name
        if name is None:
            if action == "update":
                raise BadInputError("update_consumer needs the consumer's 'durable_name' or 'name'")
            subject = f"CONSUMER.CREATE.{stream}"
        else:
            subject = f"CONSUMER.CREATE.{stream}.{name}"
            filters = cfg.filter_subjects or []
            # The filter in the subject lets permissions restrict what a user may
            # consume; a wildcard cannot travel as a literal subject token.
            if len(filters) == 1 and not re.search(r"[*>]", filters[0]):
                subject += f".{filters[0]}"
        body: dict[str, Any] = {"stream_name": stream, "config": cfg.to_api()}
        if action:
            body["action"] = action
        return ConsumerInfo.from_api(self._call(subject, body))

    def consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        validate_name(stream, "stream")
        validate_name(name, "consumer")
        return ConsumerInfo.from_api(self._call(f"CONSUMER.INFO.{stream}.{name}"))

    def delete_consumer(self, stream: str, name: str) -> bool:
        validate_name(stream, "stream")
        validate_name(name, "consumer")
        return bool(self._call(f"CONSUMER.DELETE.{stream}.{name}").get("success"))

    def list_consumers(self, stream: str) -> list[ConsumerInfo]:
        validate_name(stream, "stream")
        return [
            ConsumerInfo.from_api(c) for c in self._paged(f"CONSUMER.LIST.{stream}", "consumers")
        ]

    def consumer_names(self, stream: str) -> list[str]:
        validate_name(stream, "stream")
        return [str(c) for c in self._paged(f"CONSUMER.NAMES.{stream}", "consumers")]


__all__ = [
    "ClusterInfo",
    "ConsumerConfig",
    "ConsumerInfo",
    "ExternalStream",
    "ManagementMixin",
    "PurgeResult",
    "SequenceInfo",
    "SourceConsumer",
    "StoredMessage",
    "StreamConfig",
    "StreamInfo",
    "StreamSource",
    "StreamState",
    "parse_headers",
    "validate_name",
]
