"""How much a streaming read's next micro-batch takes, beyond ``maxMessagesPerTrigger``
(which Spark hands the readers as their read limit): Kafka's ``minOffsetsPerTrigger``
with ``maxTriggerDelay``, and a bound in payload bytes.

A Python source gets one read limit from Spark, so these are the readers' own: both
stream readers (:mod:`.stream_reader`, :mod:`.consumer_stream_reader`) ask a
:class:`TriggerGate` whether the micro-batch they would plan may start, and bound its
end by :func:`messages_within`.
"""

from __future__ import annotations

import time
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
