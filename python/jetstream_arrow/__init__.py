"""NATS JetStream in and out of Apache Arrow, at the speed of the server."""

from __future__ import annotations

from . import exceptions
from ._core import __version__
from .aio import (
    AsyncBatches,
    AsyncClient,
    AsyncConsumedBatch,
    AsyncMessages,
    AsyncOrderedConsumer,
    AsyncPublisher,
    AsyncPullConsumer,
    AsyncPushConsumer,
    connect_async,
)
from .client import Client, Publisher, PublishResult, connect
from .codec import ValueCodec
from .consumers import ConsumedBatch, Messages, OrderedConsumer, PullConsumer, PushConsumer
from .options import (
    ConnectOptions,
    ConsumeOptions,
    FetchOptions,
    FollowOptions,
    PublishOptions,
    PushOptions,
    ReadOptions,
)
from .sink import DeltaTarget, ParquetTarget, SinkReport, run_sink

__all__ = [
    "AsyncBatches",
    "AsyncClient",
    "AsyncConsumedBatch",
    "AsyncMessages",
    "AsyncOrderedConsumer",
    "AsyncPublisher",
    "AsyncPullConsumer",
    "AsyncPushConsumer",
    "Client",
    "ConnectOptions",
    "ConsumeOptions",
    "ConsumedBatch",
    "FetchOptions",
    "FollowOptions",
    "DeltaTarget",
    "OrderedConsumer",
    "ParquetTarget",
    "PublishOptions",
    "PushOptions",
    "PublishResult",
    "Publisher",
    "PullConsumer",
    "ReadOptions",
    "SinkReport",
    "ValueCodec",
    "PushConsumer",
    "Messages",
    "__version__",
    "connect",
    "connect_async",
    "exceptions",
    "run_sink",
]
