"""How far a streaming read is behind the latest messages, in the terms of Kafka's
source metrics (``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``,
``avgOffsetsBehindLatest``, ``estimatedTotalBytesBehindLatest``), for the query's
progress.

A Python source cannot report custom metrics (Spark asks the JVM object of the
source for them, and the one of a Python source has none), so the figures travel in
the JSON the source reports as its latest offset (``reportLatestOffset``). Spark shows
that JSON as the source's ``latestOffset`` in ``query.lastProgress`` and never reads it
back: it is not the offset Spark logs, checkpoints or compares (those are the
``endOffset``s), so the figures change nothing of what a query reads.

Messages behind are stream sequences after the micro-batch's end up to the latest one
(messages, unless the stream deleted some or the read filters subjects); through a
consumer, the messages it has pending. Bytes are estimated at the stream's mean stored
message size, as ``maxBytesPerTrigger`` counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def mean_message_size(state: Any) -> float:
    """The mean stored size of a stream's messages (subject, headers and payload), from
    its state; 0 for an empty stream."""
    return int(state.bytes) / max(int(state.messages), 1)


def behind_latest(behind: Mapping[str, tuple[int, float]]) -> dict[str, Any]:
    """The progress fields for ``{stream: (messages behind, mean message size)}``: the
    least, most and mean messages behind over the streams, and the bytes behind in all."""
    messages = [max(count, 0) for count, _ in behind.values()]
    if not messages:
        return {}
    return {
        "minMessagesBehindLatest": min(messages),
        "maxMessagesBehindLatest": max(messages),
        "avgMessagesBehindLatest": sum(messages) / len(messages),
        "estimatedTotalBytesBehindLatest": round(
            sum(max(count, 0) * size for count, size in behind.values())
        ),
    }
