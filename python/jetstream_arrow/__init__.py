"""NATS JetStream in and out of Apache Arrow, at the speed of the server."""

from __future__ import annotations

from . import exceptions
from ._core import __version__
from .client import Client, Publisher, PublishResult, connect
from .consumers import ConsumedBatch, OrderedConsumer, PullConsumer, PushConsumer, PushMessages
from .options import ConnectOptions

__all__ = [
    "Client",
    "ConnectOptions",
    "ConsumedBatch",
    "OrderedConsumer",
    "PublishResult",
    "Publisher",
    "PullConsumer",
    "PushConsumer",
    "PushMessages",
    "__version__",
    "connect",
    "exceptions",
]
