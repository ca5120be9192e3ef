"""Consumer types: a consumer's config (with the server's rules for AckFlowControl),
its delivery positions and its info.

Each is a frozen dataclass over :class:`~jetstream_arrow.management.wire.WireObject`;
only ``ConsumerConfig`` adds to the generic encoding (one filter subject travels as
``filter_subject``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .._core import validate_name
from .._time import to_ns_duration
from ..exceptions import BadInputError
from .streams import ClusterInfo
from .wire import Seconds, WireObject, check_choice, check_list, meta

DeliverPolicy = Literal[
    "all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"
]
AckPolicy = Literal["none", "all", "explicit", "flow_control"]
ReplayPolicy = Literal["instant", "original"]
PriorityPolicy = Literal["none", "overflow", "pinned_client", "prioritized"]


@dataclass(frozen=True)
class ConsumerConfig(WireObject):
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
    opt_start_time: datetime | None = field(default=None, metadata=meta("time"))
    ack_policy: AckPolicy | None = None
    ack_wait: Seconds | None = field(default=None, metadata=meta("duration"))
    max_deliver: int | None = None
    backoff: list[Seconds] | None = field(default=None, metadata=meta("durations"))
    filter_subjects: list[str] | None = None
    replay_policy: ReplayPolicy | None = None
    rate_limit_bps: int | None = None
    sample_freq: str | None = None
    max_waiting: int | None = None
    max_ack_pending: int | None = None
    flow_control: bool | None = None
    headers_only: bool | None = None
    max_batch: int | None = None
    max_expires: Seconds | None = field(default=None, metadata=meta("duration"))
    max_bytes: int | None = None
    deliver_subject: str | None = None
    deliver_group: str | None = None
    idle_heartbeat: Seconds | None = field(default=None, metadata=meta("duration"))
    inactive_threshold: Seconds | None = field(default=None, metadata=meta("duration"))
    num_replicas: int | None = None
    mem_storage: bool | None = None
    metadata: dict[str, str] | None = None
    pause_until: datetime | None = field(default=None, metadata=meta("time"))
    #: Priority groups (server 2.11+; ``prioritized`` 2.12+): the groups a pull names
    #: (``pull_consumer(..., group=)``), and how the server picks among its pullers.
    priority_groups: list[str] | None = None
    priority_policy: PriorityPolicy | None = None
    #: ``pinned_client``: how long a pinned client may go without pulling before the
    #: pin moves to another (server default 2 minutes).
    priority_timeout: Seconds | None = field(default=None, metadata=meta("duration"))
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
        check_list(
            "filter_subjects",
            self.filter_subjects,
            "subject",
            f"filter_subject={self.filter_subjects!r}",
        )
        check_choice("deliver_policy", self.deliver_policy, DeliverPolicy)
        check_choice("ack_policy", self.ack_policy, AckPolicy)
        check_choice("replay_policy", self.replay_policy, ReplayPolicy)
        check_choice("priority_policy", self.priority_policy, PriorityPolicy)
        check_list("priority_groups", self.priority_groups, "group")
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
        elif self.idle_heartbeat is not None and to_ns_duration(
            self.idle_heartbeat, "idle_heartbeat"
        ) != to_ns_duration(1, "idle_heartbeat"):
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
        out = super().to_api()
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
        return super().from_api(data)


@dataclass(frozen=True)
class SequenceInfo(WireObject):
    """A consumer sequence and the stream sequence it stands for."""

    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: datetime | None = field(default=None, metadata=meta("time"))


@dataclass(frozen=True)
class ConsumerInfo(WireObject):
    """A consumer's config and delivery state, as the server reports them; ``raw``
    is the whole reply."""

    stream_name: str
    name: str
    # A reply without a config is one of a consumer with every option unset.
    config: ConsumerConfig = field(metadata=meta("nested", ConsumerConfig))
    delivered: SequenceInfo = field(default=SequenceInfo(), metadata=meta("nested", SequenceInfo))
    ack_floor: SequenceInfo = field(default=SequenceInfo(), metadata=meta("nested", SequenceInfo))
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    num_pending: int = 0
    created: datetime | None = field(default=None, metadata=meta("time"))
    cluster: ClusterInfo | None = field(default=None, metadata=meta("nested", ClusterInfo))
    push_bound: bool = False
    paused: bool = False
    #: While paused: seconds until the consumer delivers again.
    pause_remaining: Seconds | None = field(default=None, metadata=meta("duration"))
    #: Each priority group's state: ``group``, and with ``pinned_client`` the
    #: ``pinned_client_id`` and ``pinned_ts`` of the client holding the pin.
    priority_groups: list[dict[str, Any]] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class ConsumerPause(WireObject):
    """What the server answers a pause or a resume (server 2.11+): whether the
    consumer is paused, until when, and the seconds left."""

    paused: bool = False
    pause_until: datetime | None = field(default=None, metadata=meta("time"))
    pause_remaining: Seconds | None = field(default=None, metadata=meta("duration"))
