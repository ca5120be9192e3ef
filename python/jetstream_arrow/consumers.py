"""Durable consumers: delivered messages as Arrow batches, and their acknowledgements.

A consumer is bound by name with no info lookup on the server, so a client that may
use only ``CONSUMER.MSG.NEXT`` and ``$JS.ACK`` works.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from . import _core
from .codec import ValueCodec, report_malformed
from .options import ConsumeOptions, FetchOptions, FollowOptions, PushOptions


def _rows_arg(rows: Sequence[int] | None) -> list[int] | None:
    return None if rows is None else [int(r) for r in rows]


class ConsumedBatch:
    """Messages delivered by a durable consumer, as one Arrow record batch.

    ``data`` has the message schema plus ``delivered`` and ``consumer_seq``.
    The ack methods act on all rows, or on the chosen row indices.
    """

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

    def ack(self, rows: Sequence[int] | None = None) -> None:
        """Acknowledge (one AckAll for the whole batch where the policy allows)."""
        self._native.ack(_rows_arg(rows))

    def ack_sync(
        self, rows: Sequence[int] | None = None, timeout: float = _core.DEFAULT_ACK_SYNC_TIMEOUT
    ) -> None:
        """Double ack: returns once the server confirmed every ack (retried until then)."""
        self._native.ack_sync(_rows_arg(rows), timeout)

    def nak(self, rows: Sequence[int] | None = None, delay: float | None = None) -> None:
        """Ask for redelivery, after ``delay`` seconds if given."""
        self._native.nak(_rows_arg(rows), delay)

    def term(self, rows: Sequence[int] | None = None, reason: str | None = None) -> None:
        """Stop redelivery of these messages for good."""
        self._native.term(_rows_arg(rows), reason)

    def in_progress(self, rows: Sequence[int] | None = None) -> None:
        """Reset the ack timer: still working on these."""
        self._native.in_progress(_rows_arg(rows))


class _BoundConsumer:
    """What every bound durable consumer has: its stream and its name."""

    _native: _core.PullConsumer | _core.PushConsumer

    @property
    def stream(self) -> str:
        """The consumer's stream."""
        return self._native.stream

    @property
    def name(self) -> str:
        """The consumer's name."""
        return self._native.name


class PullConsumer(_BoundConsumer):
    """A durable pull consumer, bound by name with no info lookup on the server."""

    def __init__(self, native: _core.PullConsumer) -> None:
        self._native: _core.PullConsumer = native

    @property
    def pin_id(self) -> str | None:
        """The pin this binding holds in its ``pinned_client`` priority group (the
        ``Nats-Pin-Id`` of its deliveries), None while another client holds it."""
        return self._native.pin_id

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
        return ConsumedBatch(self._native.fetch(options, ValueCodec.of(codec)))

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
            )
        )


class PushConsumer(_BoundConsumer):
    """A durable push consumer (see ``Client.push_consumer``)."""

    def __init__(self, native: _core.PushConsumer) -> None:
        self._native: _core.PushConsumer = native

    @property
    def deliver_subject(self) -> str:
        """The subject the server delivers this consumer's messages to."""
        return self._native.deliver_subject

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
        return Messages(self._native.messages(options, ValueCodec.of(codec)))


class Messages:
    """The batches of a pull or push consumer, without end; ``close()`` (or leaving a
    ``with`` block) stops consumption."""

    def __init__(self, native: _core.MessageStream) -> None:
        self._native = native

    def __iter__(self) -> Messages:
        return self

    def __next__(self) -> ConsumedBatch:
        return ConsumedBatch(next(self._native))

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
        self._native.close()

    def __enter__(self) -> Messages:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OrderedConsumer:
    """An open-ended ordered consumer (see ``Client.ordered_consumer``). Nothing to
    acknowledge: it keeps no state on the server beyond an ephemeral consumer."""

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
        options = dataclasses.replace(
            self._options,
            batch_rows=batch_rows,
            batch_wait=batch_wait,
            max_bytes=max_bytes,
            include_headers=include_headers,
        )
        stream = self._client.follow(self.stream, options, self._codec)
        return _batches(stream, self.stream, self._codec)


def _batches(
    stream: _core.ReadBatches, name: str, codec: ValueCodec | None
) -> Iterator[pa.RecordBatch]:
    try:
        for batch in stream:
            yield pa.record_batch(batch)
    finally:
        report_malformed(name, codec, stream.malformed)
        stream.close()
