"""NATS JetStream in and out of Apache Arrow, at the speed of the server."""

from __future__ import annotations

from . import exceptions
from ._core import __version__
from .client import Client, Publisher, PublishResult, connect
from .codec import ValueCodec
from .consumers import ConsumedBatch, Messages, OrderedConsumer, PullConsumer, PushConsumer
from .options import ConnectOptions, ConsumeOptions, PublishOptions, ReadOptions

__all__ = [
    "Client",
    "ConnectOptions",
    "ConsumeOptions",
    "ConsumedBatch",
    "OrderedConsumer",
    "PublishOptions",
    "PublishResult",
    "Publisher",
    "PullConsumer",
    "ReadOptions",
    "ValueCodec",
    "PushConsumer",
    "Messages",
    "__version__",
    "connect",
    "exceptions",
]
