"""Stream types: a stream's configuration (with its mirror and sources), its state and
info as the server reports them, and the replies of purging and reading one message.

Every type here is a frozen dataclass over :class:`~.wire.WireObject`; the field
conventions (names, durations, times, ``None`` as unset, ``extra``) are described in
:mod:`jetstream_arrow.management.wire`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .._core import validate_name
from ..exceptions import BadInputError
from .wire import Seconds, WireObject, check_choice, check_list, meta

Storage = Literal["file", "memory"]
Retention = Literal["limits", "interest", "workqueue"]
Discard = Literal["old", "new"]
Compression = Literal["none", "s2"]


@dataclass(frozen=True)
class ExternalStream(WireObject):
    """Where a mirror or source lives when it is in another domain or account.

    ``api`` is that JetStream's API prefix (``$JS.<domain>.API`` for a domain),
    ``deliver`` an optional prefix for the subjects messages are delivered on.
    """

    api: str
    deliver: str | None = None

    @classmethod
    def for_domain(cls, domain: str, deliver: str | None = None) -> ExternalStream:
        return cls(api=f"$JS.{domain}.API", deliver=deliver)


@dataclass(frozen=True)
class SourceConsumer(WireObject):
    """Source through an existing durable AckFlowControl consumer of the origin stream
    (push, delivering on ``deliver_subject``) instead of one the server makes."""

    name: str
    deliver_subject: str | None = None


@dataclass(frozen=True)
class StreamSource(WireObject):
    """A stream to mirror or source from (``StreamConfig.mirror`` / ``.sources``)."""

    name: str
    opt_start_seq: int | None = None
    opt_start_time: datetime | None = field(default=None, metadata=meta("time"))
    filter_subject: str | None = None
    external: ExternalStream | None = field(default=None, metadata=meta("nested", ExternalStream))
    consumer: SourceConsumer | None = field(default=None, metadata=meta("nested", SourceConsumer))
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_name(self.name, "source name")


@dataclass(frozen=True)
class StreamConfig(WireObject):
    """A stream's configuration. Only ``name`` is required; unset fields take the
    server's defaults (file storage, limits retention, one replica, no limits)."""

    name: str
    subjects: list[str] | None = None
    description: str | None = None
    storage: Storage | None = None
    retention: Retention | None = None
    replicas: int | None = field(default=None, metadata=meta(wire="num_replicas"))
    max_consumers: int | None = None
    max_msgs: int | None = None
    max_bytes: int | None = None
    max_age: Seconds | None = field(default=None, metadata=meta("duration"))
    max_msg_size: int | None = None
    max_msgs_per_subject: int | None = None
    discard: Discard | None = None
    discard_new_per_subject: bool | None = None
    duplicate_window: Seconds | None = field(default=None, metadata=meta("duration"))
    allow_direct: bool | None = None
    mirror_direct: bool | None = None
    allow_atomic: bool | None = None
    allow_batched: bool | None = None
    allow_msg_ttl: bool | None = None
    #: Counter increments only (ADR-49, nats-server 2.12+): see ``Client.read_counters``.
    allow_msg_counter: bool | None = None
    #: Scheduled messages (ADR-51, nats-server 2.12+): see the ``schedule`` column.
    allow_msg_schedules: bool | None = None
    subject_delete_marker_ttl: Seconds | None = field(default=None, metadata=meta("duration"))
    allow_rollup: bool | None = field(default=None, metadata=meta(wire="allow_rollup_hdrs"))
    deny_delete: bool | None = None
    deny_purge: bool | None = None
    sealed: bool | None = None
    no_ack: bool | None = None
    compression: Compression | None = None
    first_seq: int | None = None
    mirror: StreamSource | None = field(default=None, metadata=meta("nested", StreamSource))
    sources: list[StreamSource] | None = field(
        default=None, metadata=meta("nested_list", StreamSource)
    )
    metadata: dict[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_name(self.name, "name")
        check_list("subjects", self.subjects, "subject")
        check_choice("storage", self.storage, Storage)
        check_choice("retention", self.retention, Retention)
        check_choice("discard", self.discard, Discard)
        check_choice("compression", self.compression, Compression)
        if self.mirror is not None and self.subjects:
            raise BadInputError("options 'mirror' and 'subjects' exclude each other")


@dataclass(frozen=True)
class StreamState(WireObject):
    """What a stream holds: messages, bytes, first and last sequence and time."""

    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    last_seq: int = 0
    first_ts: datetime | None = field(default=None, metadata=meta("time"))
    last_ts: datetime | None = field(default=None, metadata=meta("time"))
    num_deleted: int = 0
    num_subjects: int = 0
    consumer_count: int = 0


@dataclass(frozen=True)
class ClusterInfo(WireObject):
    """The replica group of a stream or consumer in a cluster."""

    name: str | None = None
    leader: str | None = None
    replicas: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class StreamInfo(WireObject):
    """A stream's config and state, as the server reports them; ``raw`` is the whole
    reply."""

    # A reply without a state is an empty stream's: config and state decode from {}
    # when absent (the config then names what is missing).
    config: StreamConfig = field(metadata=meta("nested", StreamConfig))
    state: StreamState = field(metadata=meta("nested", StreamState))
    created: datetime | None = field(default=None, metadata=meta("time"))
    cluster: ClusterInfo | None = field(default=None, metadata=meta("nested", ClusterInfo))
    domain: str | None = None
    # The reply as the server sent it, for fields not named here (mirror/sources lag ...).
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class PurgeResult(WireObject):
    """The server's answer to a purge: how many messages it removed."""

    success: bool = False
    purged: int = 0


@dataclass(frozen=True)
class StoredMessage(WireObject):
    """One message read straight from a stream (``get_message``). The payload and the
    header block travel as base64."""

    subject: str
    seq: int
    data: bytes = field(default=b"", metadata=meta("base64"))
    headers: dict[str, list[str]] = field(
        default_factory=dict, metadata=meta("headers", wire="hdrs")
    )
    time: datetime | None = field(default=None, metadata=meta("time"))
