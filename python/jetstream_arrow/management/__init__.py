"""Stream and consumer management: typed configs over the JetStream JSON API.

The JetStream API is JSON requests on ``<api prefix>.STREAM.*`` / ``CONSUMER.*``.
This package turns those into frozen dataclasses and the methods of
:class:`ManagementMixin`, which :class:`jetstream_arrow.Client` inherits:

- ``wire``: the one encoding every type shares (``WireObject``: ``to_api`` /
  ``from_api`` from field metadata; seconds, times, nested objects, ``extra``);
- ``streams``: stream configs, state and info, purge results, stored messages;
- ``consumers``: consumer configs and info;
- ``api``: ``ManagementMixin``, the requests themselves.

Every public name is re-exported here.
"""

from __future__ import annotations

from .. import _core
from .._core import validate_name
from .api import ManagementMixin
from .consumers import (
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPause,
    DeliverPolicy,
    PriorityPolicy,
    ReplayPolicy,
    SequenceInfo,
)
from .streams import (
    ClusterInfo,
    Compression,
    Discard,
    ExternalStream,
    PurgeResult,
    Retention,
    SourceConsumer,
    Storage,
    StoredMessage,
    StreamConfig,
    StreamInfo,
    StreamSource,
    StreamState,
)
from .wire import Seconds, WireObject, parse_headers

# JetStream error codes the management API reacts to; their one home is the native core.
ERR_STREAM_NAME_IN_USE = _core.ERR_STREAM_NAME_IN_USE
ERR_STREAM_NOT_FOUND = _core.ERR_STREAM_NOT_FOUND
ERR_CONSUMER_NOT_FOUND = _core.ERR_CONSUMER_NOT_FOUND
ERR_MESSAGE_NOT_FOUND = _core.ERR_NO_MESSAGE_FOUND

__all__ = [
    "ERR_CONSUMER_NOT_FOUND",
    "ERR_MESSAGE_NOT_FOUND",
    "ERR_STREAM_NAME_IN_USE",
    "ERR_STREAM_NOT_FOUND",
    "AckPolicy",
    "ClusterInfo",
    "Compression",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerPause",
    "DeliverPolicy",
    "Discard",
    "ExternalStream",
    "ManagementMixin",
    "PriorityPolicy",
    "PurgeResult",
    "ReplayPolicy",
    "Retention",
    "Seconds",
    "SequenceInfo",
    "SourceConsumer",
    "Storage",
    "StoredMessage",
    "StreamConfig",
    "StreamInfo",
    "StreamSource",
    "StreamState",
    "WireObject",
    "parse_headers",
    "validate_name",
]
