"""Durable consumers: delivered messages as Arrow batches, and their acknowledgements.

A consumer is bound by name with no info lookup on the server, so a client that may
use only ``CONSUMER.MSG.NEXT`` and ``$JS.ACK`` works.

The bases here (``DeliveredBatch``, ``BoundConsumer``, ``PullBinding``,
``PushBinding``, ``OrderedBinding``) hold what the sync classes share with their
asyncio twins in ``aio.py``: every member that does not wait.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import pyarrow as pa

from . import _core
from .codec import ValueCodec, report_malformed
from .options import ConsumeOptions, FetchOptions, FollowOptions, PushOptions

_Bound = TypeVar("_Bound", bound="BoundConsumer")
_Ordered = TypeVar("_Ordered", bound="OrderedBinding")


def rows_arg(rows: Sequence[int] | None) -> list[int] | None:
    """The row indices an ack call names, as the native call takes them."""
    return None if rows is None else [int(r) for r in rows]


class DeliveredBatch:
    """Messages delivered by a durable consumer, as one Arrow record batch ``data``."""

    def __init__(self, native: _core.ConsumedBatch) -> None:
        self._native = native
        self.data: pa.RecordBatch = pa.record_batch(native.batch())

    def __len__(self) -> int:
        return len(self._native)

    @property
    def malformed(self) -> int:
        """Payloads of this batch that did not decode (a codec's ``on_malformed``):
        left out and terminated (``dropmalformed``), or kept as ``_corrupt_record``
        (``permissive``)."""
        return self._native.malformed


class ConsumedBatch(DeliveredBatch):
    """Messages delivered by a durable consumer, as one Arrow record batch.

    ``data`` has the message schema plus ``delivered`` and ``consumer_seq``.
    The ack methods act on all rows, or on the chosen row indices.
    """

    def ack(self, rows: Sequence[int] | None = None) -> None:
        """Acknowledge (one AckAll for the whole batch where the policy allows)."""
        self._native.ack(rows_arg(rows)).wait()

    def ack_sync(
        self, rows: Sequence[int] | None = None, timeout: float = _core.DEFAULT_ACK_SYNC_TIMEOUT
    ) -> None:
        """Double ack: returns once the server confirmed every ack (retried until then)."""
        self._native.ack_sync(rows_arg(rows), timeout).wait()

    def nak(self, rows: Sequence[int] | None = None, delay: float | None = None) -> None:
        """Ask for redelivery, after ``delay`` seconds if given."""
        self._native.nak(rows_arg(rows), delay).wait()

    def term(self, rows: Sequence[int] | None = None, reason: str | None = None) -> None:
        """Stop redelivery of these messages for good."""
        self._native.term(rows_arg(rows), reason).wait()

    def in_progress(self, rows: Sequence[int] | None = None) -> None:
        """Reset the ack timer: still working on these."""
        self._native.in_progress(rows_arg(rows)).wait()


class BoundConsumer:
    """What every bound durable consumer has: its stream and its name."""

    _native: _core.PullConsumer | _core.PushConsumer

    def __init__(self, native: _core.PullConsumer | _core.PushConsumer) -> None:
        self._native = native

    @classmethod
    def _of(cls: type[_Bound], other: BoundConsumer) -> _Bound:
        """The binding ``other`` holds, as this class (the other facade's twin)."""
        return cls(other._native)

    @property
    def stream(self) -> str:
        """The consumer's stream."""
        return self._native.stream

    @property
    def name(self) -> str:
        """The consumer's name."""
        return self._native.name


class PullBinding(BoundConsumer):
    """A bound durable pull consumer."""

    def __init__(self, native: _core.PullConsumer) -> None:
        self._native: _core.PullConsumer = native

    @property
    def pin_id(self) -> str | None:
        """The pin this binding holds in its ``pinned_client`` priority group (the
        ``Nats-Pin-Id`` of its deliveries), None while another client holds it."""
        return self._native.pin_id


class PullConsumer(PullBinding):
    """A durable pull consumer, bound by name with no info lookup on the server."""

    def fetch(
        self,
        max_messages: int = _core.DEFAULT_FETCH_MAX_MESSAGES,
        *,
        max_bytes: int | None = None,
        expires: float = _core.DEFAULT_FETCH_EXPIRES,
        no_wait: bool = False,
        heartbeat: float | None = None,
        include_headers: bool = False,
        codec: ValueCodec | str | None = None,
    ) -> ConsumedBatch:
        """One pull request: up to ``max_messages`` (or ``max_bytes``) within ``expires``.

        With ``heartbeat``, the server sends an idle heartbeat each period while the
        request waits, and two silent periods raise ``MissedHeartbeatsError`` (or
        return what was delivered before them) instead of waiting for ``expires``."""
        options = FetchOptions(
            max_messages=max_messages,
            max_bytes=max_bytes,
            expires=expires,
            no_wait=no_wait,
            heartbeat=heartbeat,
            include_headers=include_headers,
        )
        return ConsumedBatch(self._native.fetch(options, ValueCodec.of(codec)).wait())

    def messages(
        self,
        *,
        options: ConsumeOptions | None = None,
        codec: ValueCodec | str | None = None,
        **kwargs: Any,
    ) -> Messages:
        """Continuous, pre-buffered consumption, like nats.go's ``Messages()``, as
        ``options`` (a [`ConsumeOptions`][]) say, with any of its fields given as a
        keyword (``max_messages=1000``) set over them.

        Up to ``max_messages`` (or ``max_bytes``) are kept buffered; a new pull is
        sent when the buffer falls to the threshold (default half). Raises
        ``MissedHeartbeatsError`` after two missed heartbeats and
        ``ConsumerDeletedError`` when the consumer goes away.
        """
        return Messages(
            self._native.messages(
                ConsumeOptions.from_kwargs(options, **kwargs), ValueCodec.of(codec)
            ).wait()
        )


class PushBinding(BoundConsumer):
    """A bound durable push consumer."""

    def __init__(self, native: _core.PushConsumer) -> None:
        self._native: _core.PushConsumer = native

    @property
    def deliver_subject(self) -> str:
        """The subject the server delivers this consumer's messages to."""
        return self._native.deliver_subject


class PushConsumer(PushBinding):
    """A durable push consumer (see ``Client.push_consumer``)."""

    def messages(
        self,
        *,
        batch_rows: int = _core.DEFAULT_CONSUME_BATCH_ROWS,
        batch_wait: float = _core.DEFAULT_CONSUME_BATCH_WAIT,
        include_headers: bool = False,
        heartbeat: float | None = None,
        codec: ValueCodec | str | None = None,
    ) -> Messages:
        """Continuous consumption from the deliver subject, as ``ConsumedBatch``es.

        Each batch waits for one message, then takes what arrives within
        ``batch_wait`` seconds, up to ``batch_rows``. Two missed idle heartbeats raise
        ``MissedHeartbeatsError`` (``heartbeat``: the consumer's, when it was bound
        without an info lookup); a deleted consumer raises ``ConsumerDeletedError``.
        With ``ack_policy="flow_control"``, ``batch.ack()`` releases the batch and the
        next flow-control answer acknowledges everything released, one ack message
        per window; the subscription starts here, before the first ``next()``.
        """
        options = PushOptions(
            batch_rows=batch_rows,
            batch_wait=batch_wait,
            include_headers=include_headers,
            heartbeat=heartbeat,
        )
        return Messages(self._native.messages(options, ValueCodec.of(codec)).wait())


class Messages:
    """The batches of a pull or push consumer, without end; ``close()`` (or leaving a
    ``with`` block) stops consumption."""

    def __init__(self, native: _core.MessageStream) -> None:
        self._native = native

    def __iter__(self) -> Messages:
        return self

    def __next__(self) -> ConsumedBatch:
        batch = self._native.next_batch().wait()
        if batch is None:
            raise StopIteration
        return ConsumedBatch(batch)

    @property
    def flow_control_answers(self) -> int:
        """Flow-control answers sent (push consumers; with flow-control acking, the ack
        messages). Always 0 for pull consumers."""
        return self._native.flow_control_answers

    @property
    def consumer_resets(self) -> int:
        """How often a flow-control push consumer was reset to its ack floor because it
        fell out of step with the server (a delivery lost on the way, a server that
        restarted from an older state); everything unacknowledged then comes again.
        Always 0 for pull consumers."""
        return self._native.consumer_resets

    def close(self) -> None:
        """Stop consuming."""
        self._native.close().wait()

    def __enter__(self) -> Messages:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OrderedBinding:
    """An open-ended ordered consumer's stream and settings, which each of its
    ``messages()`` iterators opens a consumer with."""

    def __init__(
        self,
        native_client: _core.Client,
        stream: str,
        options: FollowOptions,
        codec: ValueCodec | None,
    ) -> None:
        self._client = native_client
        self.stream = stream
        self._options = options
        self._codec = codec

    def _follow(self, **batching: Any) -> _core.Call[_core.ReadBatches]:
        """The call opening one iterator's consumer, batched as ``batching`` says."""
        options = dataclasses.replace(self._options, **batching)
        return self._client.follow(self.stream, options, self._codec)

    @classmethod
    def _of(cls: type[_Ordered], other: OrderedBinding) -> _Ordered:
        """The consumer ``other`` describes, as this class (the other facade's twin)."""
        return cls(other._client, other.stream, other._options, other._codec)


class OrderedConsumer(OrderedBinding):
    """An open-ended ordered consumer (see ``Client.ordered_consumer``). Nothing to
    acknowledge: it keeps no state on the server beyond an ephemeral consumer."""

    def messages(
        self,
        *,
        batch_rows: int = _core.DEFAULT_READ_BATCH_ROWS,
        batch_wait: float = _core.DEFAULT_FOLLOW_BATCH_WAIT,
        max_bytes: int = _core.DEFAULT_READ_MAX_BYTES,
        include_headers: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """Batches in stream order, without end: each waits for at least one message,
        then takes what arrives within ``batch_wait`` seconds, up to ``batch_rows``
        rows and ``max_bytes`` payload bytes. The consumer is created here, before the
        first ``next()`` (so ``deliver="new"`` starts now); closing the iterator
        deletes it."""
        native = self._follow(
            batch_rows=batch_rows,
            batch_wait=batch_wait,
            max_bytes=max_bytes,
            include_headers=include_headers,
        ).wait()
        return read_batches(native, self.stream, self._codec)


def read_batches(
    native: _core.ReadBatches, stream: str, codec: ValueCodec | None
) -> Iterator[pa.RecordBatch]:
    """The batches of a native read, each read with the GIL released, as pyarrow
    batches; closing (or dropping) the iterator closes the read, deleting its consumer."""
    try:
        while (batch := native.next_batch().wait()) is not None:
            yield pa.record_batch(batch)
    finally:
        report_malformed(stream, codec, native.malformed)
        if native.resets:
            # Each resume was told as it happened; this is the read's count.
            logging.getLogger("jetstream_arrow.read").info(
                "read of stream %r resumed %d times with a new consumer, each after the "
                "last message it had read",
                stream,
                native.resets,
            )
        native.close().wait()
