"""How much a streaming read's next micro-batch takes, beyond ``maxMessagesPerTrigger``
(which Spark hands the readers as their read limit): Kafka's ``minOffsetsPerTrigger``
with ``maxTriggerDelay``, and a bound in payload bytes.

A Python source gets one read limit from Spark, so these are the readers' own: both
stream readers (:mod:`.stream_reader`, :mod:`.consumer_stream_reader`) ask a
:class:`TriggerGate` whether the micro-batch they would plan may start, and bound its
end by :func:`messages_within`; a read of several streams shares the bounds among
them by their backlogs (:func:`share_by_backlog`), as Kafka's source shares
``maxOffsetsPerTrigger`` among a topic's partitions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from .options import ReadOptions


@dataclass
class TriggerGate:
    """Holds a micro-batch back until ``min_messages`` are there to read, or until
    ``max_delay`` seconds have passed since the last micro-batch started (or since the
    query did). Without ``min_messages`` every micro-batch may start."""

    min_messages: int | None
    max_delay: float
    last_fired: float = field(default_factory=time.monotonic)

    @classmethod
    def of(cls, opts: ReadOptions) -> TriggerGate:
        return cls(opts.min_messages_per_trigger, opts.max_trigger_delay)

    def allows(self, available: int, available_now: bool) -> bool:
        """Whether a micro-batch of ``available`` messages may start now. A query
        run with trigger(availableNow=True) reads what is there and stops: it is never
        held back, or it would wait for messages that may never come."""
        if self.min_messages is None or available_now or available >= self.min_messages:
            return True
        return time.monotonic() - self.last_fired >= self.max_delay

    def fired(self) -> None:
        """A micro-batch was planned: the delay counts from now."""
        self.last_fired = time.monotonic()


def messages_within(max_bytes: int | None, mean_size: float) -> int | None:
    """How many messages of ``mean_size`` payload bytes fit ``max_bytes``: at least
    one, so a message larger than the bound is still read; None without a bound."""
    if max_bytes is None:
        return None
    return max(1, int(max_bytes // max(mean_size, 1.0)))


def _shares(weights: Mapping[str, int], budget: int) -> dict[str, int]:
    """``budget`` split in proportion to ``weights`` (largest remainders first), each
    share at most its weight; the weights themselves when they fit the budget."""
    total = sum(weights.values())
    if total <= budget:
        return dict(weights)
    exact = {key: weight * budget / total for key, weight in weights.items()}
    shares = {key: int(value) for key, value in exact.items()}
    by_remainder = sorted(exact, key=lambda key: (shares[key] - exact[key], key))
    for key in by_remainder[: budget - sum(shares.values())]:
        shares[key] += 1
    return shares


def share_by_backlog(
    backlogs: Mapping[str, int],
    sizes: Mapping[str, float],
    max_messages: int | None,
    max_bytes: int | None,
) -> dict[str, int]:
    """How many messages of each stream's backlog the next micro-batch reads: all of
    them within the bounds, else shares in proportion to the backlogs (in messages for
    ``max_messages``, in bytes at each stream's mean message size for ``max_bytes``),
    and one message at least when there is any, so a message larger than
    ``max_bytes`` is still read."""
    take = {key: max(count, 0) for key, count in backlogs.items()}
    if max_messages is not None:
        take = _shares(take, max_messages)
    if max_bytes is not None:
        total_bytes = sum(count * max(sizes[key], 1.0) for key, count in take.items())
        if total_bytes > max_bytes:
            # The same fraction of each backlog: each stream's share of the bytes is
            # its share of the backlog in bytes.
            take = {key: int(count * max_bytes / total_bytes) for key, count in take.items()}
    if not any(take.values()) and any(backlogs.values()):
        largest = max(sorted(backlogs), key=lambda key: backlogs[key])
        take[largest] = 1
    return take
