"""The stream reader of ``spark.readStream.format("jetstream")``.

A streaming read keeps one offset, ``{"seq": <next stream sequence to read>}``, in
Spark's checkpoint. Each micro-batch reads the sequences from its start offset up to
(not including) its end offset, planned and read like a batch read (the same
partitions and executor reads), and ``maxMessagesPerTrigger`` bounds how many
sequences one micro-batch may span (``minMessagesPerTrigger``, ``maxTriggerDelay`` and
``maxBytesPerTrigger``: :mod:`.triggers`).

A micro-batch's partitions follow from its end offset and the start offset in the
offset log, never from the stream's state when they are planned: Spark re-runs an
unfinished micro-batch after a restart with the offsets it logged, and a sink that
names rows by partition and row (the jetstream sink's message ids) needs the re-run to
hold the same rows. The end offset records where the micro-batch's reads begin,
``{"seq": <end>, "first": <first sequence read>}``, when that is not its start offset
as logged: when the stream's head had passed the start as the micro-batch was planned
(``failOnDataLoss`` false), and for a query's first micro-batch when its start came
from the stream's state (``startingOffsets``, ``startingTime``), because Spark has
no logged start for it and asks ``initialOffset`` again, which would answer from the
stream as it is then.

How far a query is behind shows in its progress (``query.lastProgress``): beside the
``endOffset`` of each micro-batch, the source reports as ``latestOffset`` the stream's
end when the micro-batch was planned (through option ``consumer``,
:mod:`.consumer_stream_reader`: the end of what the consumer can claim), so
``latestOffset.seq - endOffset.seq`` is how many sequences the query had still to
read after that micro-batch, 0 once it has caught up. (Sequences
are messages unless the stream deleted some or the read filters subjects.) The same
``latestOffset`` carries that lag in the terms of the Kafka source's metrics
(``minMessagesBehindLatest`` ..., :mod:`.lag`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ..exceptions import BadInputError
from .connection_cache import get_client
from .lag import behind_latest, mean_message_size
from .options import ReadOptions
from .partitions import read_partition, split_range
from .reading import check_data_loss, first_available, first_seq_at, stream_state
from .triggers import TriggerGate, messages_within


def _seq_in(offset: Any, key: str) -> int | None:
    """``offset[key]`` when it is a stream sequence (an int from 1), else None."""
    value = offset.get(key) if isinstance(offset, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return None


def next_seq_of(offset: Any) -> int:
    """The sequence an offset points at, refusing offsets this source did not make
    (a checkpoint of another source, or one edited by hand)."""
    seq = _seq_in(offset, "seq")
    if (
        seq is None
        or set(offset) - {"seq", "first"}
        or ("first" in offset and _seq_in(offset, "first") is None)
    ):
        raise BadInputError(
            f"a jetstream offset is {{'seq': <next stream sequence>}}, got {offset!r}; "
            "was the checkpoint written by another source?"
        )
    return seq


def first_read_of(start: Any, end: Any) -> int:
    """The first sequence the micro-batch from offset ``start`` to ``end`` reads: where
    its planning recorded it (``end["first"]``), else the start."""
    first = next_seq_of(start)
    next_seq_of(end)
    return _seq_in(end, "first") or first


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read of one stream, in micro-batches of stream sequence ranges.

    Offset and planning methods run on the driver, in one Python process for the
    whole query; ``read`` runs on executors.
    """

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        # With trigger(availableNow=True): the sequence after the last message that
        # existed when the query started. Later messages are left for the next run.
        self.available_now_end: int | None = None
        # The stream's end as latestOffset last saw it, and its mean message size:
        # Spark asks reportLatestOffset right after latestOffset, and each costs a
        # JetStream API request otherwise.
        self.seen_end: int | None = None
        self.seen_message_size = 0.0
        # The end latestOffset last gave, the one of the micro-batch being planned.
        self.planned_end = 1
        # What initialOffset answered from the stream's state (not startingSequence),
        # which it may not answer again after a restart.
        self.initial_from_state: dict[str, int] | None = None
        # minMessagesPerTrigger and maxTriggerDelay: the delay counts from the start.
        self.gate = TriggerGate.of(opts)

    def __repr__(self) -> str:
        return f"JetStreamStreamReader(stream={self.opts.stream!r})"

    def initialOffset(self) -> dict[str, int]:
        """Where a new query starts (a restarted one continues from its checkpoint):
        ``startingSequence``, the first message at ``startingTime``, or
        ``startingOffsets`` (default ``latest``: what arrives from now on)."""
        opts = self.opts
        if opts.start_seq is not None:
            return {"seq": opts.start_seq}
        client = get_client(opts.connect)
        state = stream_state(client, opts.stream)
        end = int(state.last_seq) + 1
        if opts.start_time is not None:
            found = first_seq_at(client, opts.stream, opts.start_time)
            offset = {"seq": found if found is not None else end}
        elif opts.starting_offsets == "earliest":
            offset = {"seq": first_available(state)}
        else:
            offset = {"seq": end}
        self.initial_from_state = offset
        return offset

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_messages_per_trigger is not None:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        state = stream_state(get_client(self.opts.connect), self.opts.stream)
        self.available_now_end = int(state.last_seq) + 1

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end (exclusive) of the next micro-batch: the stream's end, at most
        ``limit`` sequences after ``start``; ``start`` itself (as given, so that Spark
        sees no new data) when there is nothing new."""
        offset = self._next_end(next_seq_of(start), limit, start == self.initial_from_state)
        self.planned_end = next_seq_of(offset or start)
        return offset or start

    def _next_end(
        self, next_seq: int, limit: ReadLimit, start_from_state: bool
    ) -> dict[str, int] | None:
        state = stream_state(get_client(self.opts.connect), self.opts.stream)
        end = self.seen_end = int(state.last_seq) + 1
        self.seen_message_size = mean_message_size(state)
        if self.available_now_end is not None:
            end = min(end, self.available_now_end)
        if end <= next_seq:
            return None
        # Sequences removed from the head of the stream are no messages: the limit
        # counts from what the stream still holds. (With failOnDataLoss the planning
        # of this micro-batch fails on them.)
        first = max(next_seq, first_available(state))
        if not self.gate.allows(end - first, available_now=self.available_now_end is not None):
            return None
        by_bytes = messages_within(self.opts.max_bytes_per_trigger, self.seen_message_size)
        if by_bytes is not None:
            end = min(end, first + by_bytes)
        if isinstance(limit, ReadMaxRows):
            end = min(end, first + limit.max_rows)
        elif isinstance(limit, ReadMinRows):
            if end - first < limit.min_rows:
                return None
        elif not isinstance(limit, ReadAllAvailable):
            raise BadInputError(
                f"a jetstream stream read limits micro-batches by messages "
                f"(option 'maxMessagesPerTrigger'), not by {type(limit).__name__}"
            )
        self.gate.fired()
        # Kept in the offset log: a re-run of this micro-batch reads from the same
        # sequence, whatever the stream has removed since (see partitions).
        if first > next_seq and not self.opts.fail_on_data_loss:
            return {"seq": end, "first": min(first, end)}
        if start_from_state:
            return {"seq": end, "first": next_seq}
        return {"seq": end}

    def reportLatestOffset(self) -> dict[str, Any]:
        """The stream's end, for the query's progress, as latestOffset saw it a moment
        ago: Spark shows it as the source's ``latestOffset`` beside the ``endOffset``
        that latestOffset gave, and their difference is how far behind the query is,
        also given as messages and bytes behind (:mod:`.lag`).

        It is never below that end: a query started past the stream's end
        (``startingSequence``) waits for messages, it is not behind. With
        trigger(availableNow=True) it is the stream's end all the same, so the last
        progress of a run shows what it left for the next one."""
        if self.seen_end is None:
            state = stream_state(get_client(self.opts.connect), self.opts.stream)
            self.seen_end = int(state.last_seq) + 1
            self.seen_message_size = mean_message_size(state)
        latest = max(self.seen_end, self.planned_end)
        behind = {self.opts.stream: (latest - self.planned_end, self.seen_message_size)}
        return {"seq": latest, **behind_latest(behind)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """Sequences ``start..end - 1`` in ranges, split like a batch read's, from the
        offsets alone: a micro-batch that Spark re-runs after a restart gets the
        partitions of its first run, whatever the stream removed since. (With
        failOnDataLoss, sequences already removed fail the micro-batch here.)"""
        opts = self.opts
        if next_seq_of(start) >= next_seq_of(end):
            # Nothing new (a query with several sources plans empty micro-batches):
            # an end offset's "first" belongs to the micro-batch that made it.
            return []
        first, last = first_read_of(start, end), next_seq_of(end) - 1
        if first > last:
            return []
        if opts.fail_on_data_loss:
            client = get_client(opts.connect)
            check_data_loss(client, opts.stream, first, last, f"micro-batch {first}..{last}")
        return list(split_range(first, last, opts.min_partitions, opts.max_messages_per_partition))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, partition, self.opts.subjects, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the reads use consumers that are deleted when each read ends,
        so the server keeps no read position to advance. The position is the offset in
        Spark's checkpoint, and the stream's own limits decide when messages go."""

    def stop(self) -> None:
        """Nothing to free: connections belong to the per-process cache
        (:mod:`.connection_cache`), shared with the other reads of the process."""
