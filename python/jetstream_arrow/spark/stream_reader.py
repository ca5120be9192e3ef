"""The stream reader of ``spark.readStream.format("jetstream")``. One module: a
micro-batch's offsets, its planning and its partitions are read from each other's
state (a re-run is planned from the offsets alone).

A streaming read of one stream keeps one offset, ``{"seq": <next stream sequence to
read>}``, in Spark's checkpoint. Each micro-batch reads the sequences from its start
offset up to (not including) its end offset, planned and read like a batch read (the
same partitions and executor reads), and ``maxMessagesPerTrigger`` bounds how many
sequences one micro-batch may span (``minMessagesPerTrigger``, ``maxTriggerDelay`` and
``maxBytesPerTrigger``: :mod:`.triggers`).

A read of several streams (options ``streams``, ``streamPattern``) keeps such an
offset per stream, ``{"streams": {"ORDERS": {"seq": 12}, "RETURNS": {"seq": 3}}}``,
and asks at each micro-batch which streams there are: a stream that appeared starts
where ``startingOffsets`` (or ``startingTime``) says, a stream that is gone fails the
query or, with ``failOnDataLoss`` false, is dropped with a warning and named in the
progress (``streamsGone``). The trigger bounds are shared among the streams by their
backlogs. A read of one stream keeps its offset as it was, so its checkpoints stay
readable.

Each stream's offset also keeps when the stream was created, ``"created"`` (ns since
the epoch): a stream's sequences name its messages only while it is the same stream,
and a stream deleted and created again under the same name, refilled past the
query's position, cannot be told from the one the query read by its sequences.
Offsets of checkpoints written before it was kept have none, and get it with the
next micro-batch that moves.

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
from .partitions import read_partition, split_range, split_ranges
from .reading import DataLossError, check_data_loss, first_available, first_seq_at
from .stream_lookup import ChosenStream, log, recreated_since, streams_named, streams_of
from .triggers import TriggerGate, share_by_backlog


def _seq_in(offset: Any, key: str) -> int | None:
    """``offset[key]`` when it is a stream sequence (an int from 1), else None."""
    value = offset.get(key) if isinstance(offset, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return None


def _created_in(offset: Any) -> int | None:
    """``offset["created"]``, when the stream was created (ns since the epoch)."""
    value = offset.get("created") if isinstance(offset, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def next_seq_of(offset: Any) -> int:
    """The sequence an offset points at, refusing offsets this source did not make
    (a checkpoint of another source, or one edited by hand)."""
    seq = _seq_in(offset, "seq")
    if (
        seq is None
        or set(offset) - {"seq", "first", "created"}
        or ("first" in offset and _seq_in(offset, "first") is None)
        or ("created" in offset and _created_in(offset) is None)
    ):
        raise BadInputError(
            f"a jetstream offset is {{'seq': <next stream sequence>}}, got {offset!r}; "
            "was the checkpoint written by another source, or by a query reading "
            "several streams (options 'streams', 'streamPattern')?"
        )
    return seq


#: A stream's place in an offset: the next sequence to read, and where the micro-batch
#: that ends there began reading (None: at the start offset's next sequence).
Position = tuple[int, int | None]


def positions_of(offset: Any, several: bool, stream: str) -> dict[str, Position]:
    """The positions an offset holds, by stream; ``stream`` names the one of a read of
    one stream, whose offset has no stream names."""
    if not several:
        return {stream: (next_seq_of(offset), _seq_in(offset, "first"))}
    streams = offset.get("streams") if isinstance(offset, dict) else None
    if not isinstance(streams, dict) or set(offset) != {"streams"}:
        raise BadInputError(
            "a jetstream offset of several streams is {'streams': {<stream>: {'seq': "
            f"<next stream sequence>}}}}, got {offset!r}; was the checkpoint written by "
            "another source, or by a query reading one stream (option 'stream')?"
        )
    return {name: (next_seq_of(o), _seq_in(o, "first")) for name, o in streams.items()}


def identities_of(offset: Any, several: bool, stream: str) -> dict[str, int]:
    """When each stream of an offset was created, as the offset recorded it (offsets
    of checkpoints written before it was kept have none)."""
    if not several:
        created = _created_in(offset)
        return {} if created is None else {stream: created}
    streams = offset.get("streams", {}) if isinstance(offset, dict) else {}
    return {name: created for name, o in streams.items() if (created := _created_in(o)) is not None}


def offset_of(
    positions: dict[str, Position], several: bool, created: dict[str, int | None]
) -> dict[str, Any]:
    """The offset of ``positions`` and of when each stream was created, the inverse of
    :func:`positions_of` and :func:`identities_of`."""

    def one(stream: str) -> dict[str, int]:
        seq, first = positions[stream]
        offset = {"seq": seq} if first is None else {"seq": seq, "first": first}
        when = created.get(stream)
        return offset if when is None else {**offset, "created": when}

    if not several:
        (stream,) = positions
        return one(stream)
    return {"streams": {name: one(name) for name in sorted(positions)}}


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read of one stream or several, in micro-batches of stream sequence
    ranges.

    Offset and planning methods run on the driver, in one Python process for the
    whole query; ``read`` runs on executors.
    """

    def __init__(self, opts: ReadOptions, schema: StructType, inferred: bool = False) -> None:
        self.opts = opts
        self.schema = schema
        # Whether the JSON value's schema was inferred when the query was planned.
        self.inferred = inferred
        self.several = opts.several_streams
        # With trigger(availableNow=True): by stream, the sequence after the last
        # message that existed when the query started. Later messages, and streams
        # created later, are left for the next run.
        self.available_now_end: dict[str, int] | None = None
        # By stream, its end as latestOffset last saw it and its mean message size:
        # Spark asks reportLatestOffset right after latestOffset, and each costs
        # JetStream API requests otherwise.
        self.seen: dict[str, tuple[int, float]] | None = None
        # By stream, the end latestOffset last gave, the one of the micro-batch being
        # planned.
        self.planned_end: dict[str, int] = {}
        # Streams the last planning found gone (failOnDataLoss false), for the progress.
        self.gone: list[str] = []
        # Streams the last planning found storing none of option 'subjects'.
        self.idle: set[str] = set()
        # By stream, when the last planning found it created (its identity).
        self.created: dict[str, int | None] = {}
        # What initialOffset answered from the streams' state (not startingSequence),
        # which it may not answer again after a restart.
        self.initial_from_state: dict[str, Any] | None = None
        # minMessagesPerTrigger and maxTriggerDelay: the delay counts from the start.
        self.gate = TriggerGate.of(opts)

    def __repr__(self) -> str:
        return f"JetStreamStreamReader({streams_named(self.opts)})"

    def _streams(self, missing_ok: bool) -> dict[str, Any]:
        """The states of the streams the query reads now, by name."""
        return {s: it.state for s, it in self._chosen(missing_ok).items()}

    def _chosen(self, missing_ok: bool) -> dict[str, ChosenStream]:
        return streams_of(get_client(self.opts.connect), self.opts, missing_ok=missing_ok)

    def _start_in(self, stream: str, state: Any) -> int:
        """Where the query starts reading ``stream`` from the stream's state:
        the first message at ``startingTime``, or ``startingOffsets`` (default
        ``latest``: what arrives from now on)."""
        opts = self.opts
        end = int(state.last_seq) + 1
        if opts.start_time is not None:
            found = first_seq_at(
                get_client(opts.connect), stream, opts.start_time, opts.resume_timeout
            )
            return found if found is not None else end
        if opts.starting_offsets == "earliest":
            return first_available(state)
        return end

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts (a restarted one continues from its checkpoint):
        ``startingSequence``, else in each stream as :meth:`_start_in` says."""
        opts = self.opts
        if opts.start_seq is not None:
            return {"seq": opts.start_seq}
        chosen = self._chosen(missing_ok=False)
        positions: dict[str, Position] = {
            stream: (self._start_in(stream, it.state), None) for stream, it in chosen.items()
        }
        offset = offset_of(positions, self.several, {s: it.created for s, it in chosen.items()})
        self.initial_from_state = offset
        return offset

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_messages_per_trigger is not None:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        states = self._streams(missing_ok=self.several)
        self.available_now_end = {s: int(state.last_seq) + 1 for s, state in states.items()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end (exclusive) of the next micro-batch: each stream's end, at most
        ``limit`` sequences after ``start`` in all; ``start`` itself (as given, so that
        Spark sees no new data) when there is nothing new."""
        begun = positions_of(start, self.several, self.opts.stream)
        planned = self._plan({s: seq for s, (seq, _) in begun.items()}, limit, start)
        self.planned_end = {s: seq for s, (seq, _) in (planned or begun).items()}
        if planned is None:
            return start
        return offset_of(planned, self.several, self.created)

    def _plan(
        self, begun: dict[str, int], limit: ReadLimit, start: dict[str, Any]
    ) -> dict[str, Position] | None:
        """The positions ending the next micro-batch, or None when it would read
        nothing and no stream came or went."""
        opts = self.opts
        chosen = self._chosen(missing_ok=True)
        states = {s: it.state for s, it in chosen.items()}
        self.created = {s: it.created for s, it in chosen.items()}
        recorded = identities_of(start, self.several, opts.stream)
        self.seen = {s: (int(st.last_seq) + 1, mean_message_size(st)) for s, st in states.items()}
        # Streams (named in option 'streams') that store none of option 'subjects':
        # nothing in them is read, or behind.
        self.idle = {s for s, it in chosen.items() if it.subjects == ()}
        self.gone = [s for s in begun if s not in states]
        for stream in self.gone:
            self._drop_gone(stream)
        if not self.several and self.gone:
            return None  # nothing to read until a stream of that name is created again
        # Streams that appeared since the last micro-batch (not in a run with
        # trigger(availableNow=True): they are left for the next run).
        added = {
            s: self._start_in(s, st)
            for s, st in states.items()
            if s not in begun and (self.available_now_end is None or s in self.available_now_end)
        }
        positions = {s: seq for s, seq in begun.items() if s in states} | added
        # A stream created again since the offset recorded it (deleted and recreated:
        # another creation time), or that ends before where the query is (restored
        # from an older snapshot, its tail lost in a crash, or recreated under a
        # checkpoint that kept no creation time) went backwards. Its sequences now
        # name other messages: the query fails (failOnDataLoss), or reads the stream
        # again from its first message.
        restarted = {}
        for stream, seq in list(positions.items()):
            if stream in added:
                continue
            recreated = recreated_since(recorded.get(stream), chosen[stream])
            if not recreated and (self.seen[stream][0] >= seq or seq == opts.start_seq):
                continue
            self._went_back(stream, seq, self.seen[stream][0] - 1, recreated)
            restarted[stream] = positions[stream] = first_available(states[stream])
        # Each stream's backlog: from its next sequence, or from what it still holds
        # when limits removed its head (with failOnDataLoss the planning of this
        # micro-batch fails on them), up to its end.
        firsts, backlogs = {}, {}
        for stream, seq in positions.items():
            end = seq if stream in self.idle else self.seen[stream][0]
            if self.available_now_end is not None:
                end = min(end, self.available_now_end.get(stream, seq))
            firsts[stream] = min(max(seq, first_available(states[stream])), max(end, seq))
            backlogs[stream] = max(end - firsts[stream], 0) if end > seq else 0
        total = sum(backlogs.values())
        # Sequences removed before they were read move a position too: past them, or
        # (failOnDataLoss) to the failure that names them.
        skipped = any(firsts[s] > seq for s, seq in positions.items())
        reading = (total > 0 or skipped) and self.gate.allows(
            total, available_now=self.available_now_end is not None
        )
        if reading:
            if isinstance(limit, ReadMinRows) and total < limit.min_rows:
                reading = False
            elif not isinstance(limit, (ReadMaxRows, ReadMinRows, ReadAllAvailable)):
                raise BadInputError(
                    f"a jetstream stream read limits micro-batches by messages "
                    f"(option 'maxMessagesPerTrigger'), not by {type(limit).__name__}"
                )
        if reading:
            self.gate.fired()
            sizes = {s: self.seen[s][1] for s in positions}
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            take = share_by_backlog(backlogs, sizes, max_rows, opts.max_bytes_per_trigger)
        else:
            take = dict.fromkeys(positions, 0)
        from_state = start == self.initial_from_state
        planned: dict[str, Position] = {}
        for stream, seq in positions.items():
            moved = take[stream] > 0 or (reading and firsts[stream] > seq)
            end = firsts[stream] + take[stream] if moved else seq
            # Kept in the offset log: a re-run of this micro-batch reads from the same
            # sequence, whatever the stream has removed since (see partitions), and
            # from where a stream that was not in the start offset began.
            first: int | None = None
            if firsts[stream] > seq and moved and not opts.fail_on_data_loss:
                first = min(firsts[stream], end)
            elif stream in added or (from_state and moved) or (stream in restarted and moved):
                first = seq
            planned[stream] = (end, first)
        if (
            not added
            and not self.gone
            and not restarted
            and all(planned[s][0] == begun[s] for s in planned)
        ):
            return None
        return planned

    def _went_back(self, stream: str, position: int, last_seq: int, recreated: bool) -> None:
        """``stream`` was created again since the query read it up to ``position - 1``,
        or ends at ``last_seq``, before ``position``."""
        if recreated:
            what = (
                f"stream {stream!r} was deleted and created again since the query read "
                f"it up to sequence {position - 1} (it has another creation time)"
            )
        else:
            what = (
                f"stream {stream!r} ends at sequence {last_seq}, but the query has read it "
                f"up to {position - 1}: the stream was deleted and recreated, restored "
                "from an older snapshot, or lost its last messages"
            )
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                f"option 'failOnDataLoss': {what}. Its sequences now name other messages. "
                "Set failOnDataLoss=false to read it again from its first message, or "
                "start a new query (a new checkpoint)."
            )
        log.warning("%s: the query reads it again from its first message", what)

    def _recreated_under(self, stream: str, first: int, last: int) -> None:
        """``stream`` was created again after the micro-batch that reads its sequences
        ``first..last`` was planned: they are lost (failOnDataLoss), or left out and
        the next micro-batch reads the new stream from its first message."""
        what = (
            f"stream {stream!r} was deleted and created again (or lost its last messages) "
            f"after the micro-batch that reads its sequences {first}..{last} was planned"
        )
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                f"option 'failOnDataLoss': {what}: they now name other messages. Set "
                "failOnDataLoss=false to read the new stream from its first message, or "
                "start a new query (a new checkpoint).",
                first,
                last,
            )
        log.warning("%s: left out; the next micro-batch reads it from its first message", what)

    def _drop_gone(self, stream: str) -> None:
        """A stream read so far is gone: deleted, or (``streamPattern`` with
        ``subjects``) no longer storing them. Its unread messages are lost."""
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                f"option 'failOnDataLoss': stream {stream!r}, which the query reads, is "
                "gone (deleted, or it no longer stores option 'subjects') and its unread "
                "messages with it. Set failOnDataLoss=false to read on without it (a "
                "stream created again under its name is read from its first message)."
            )
        log.warning("stream %r is gone: the query reads on without it", stream)

    def reportLatestOffset(self) -> dict[str, Any]:
        """Each stream's end, for the query's progress, as latestOffset saw it a moment
        ago: Spark shows it as the source's ``latestOffset`` beside the ``endOffset``
        that latestOffset gave, and their difference is how far behind the query is,
        also given as messages and bytes behind (:mod:`.lag`).

        It is never below that end: a query started past the stream's end
        (``startingSequence``) waits for messages, it is not behind. With
        trigger(availableNow=True) it is the stream's end all the same, so the last
        progress of a run shows what it left for the next one."""
        if self.seen is None:
            states = self._streams(missing_ok=self.several)
            self.seen = {
                s: (int(st.last_seq) + 1, mean_message_size(st)) for s, st in states.items()
            }
        # Before the first micro-batch is planned, all of each stream is behind.
        planned = self.planned_end or dict.fromkeys(self.seen, 1)
        latest = {s: max(self.seen.get(s, (end, 0.0))[0], end) for s, end in planned.items()}
        behind = {
            s: (0 if s in self.idle else latest[s] - end, self.seen.get(s, (end, 0.0))[1])
            for s, end in planned.items()
        }
        lag = behind_latest(behind)
        if not self.several:
            return {"seq": latest[self.opts.stream], **lag}
        gone = {"streamsGone": self.gone} if self.gone else {}
        streams = {s: {"seq": latest[s]} for s in sorted(latest)}
        return {"streams": streams, **lag, **gone}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """Each stream's sequences from ``start`` up to ``end``, in ranges split like a
        batch read's, from the offsets alone: a micro-batch that Spark re-runs after a
        restart gets the partitions of its first run, whatever the streams removed
        since. (With failOnDataLoss, sequences already removed fail the micro-batch
        here.)"""
        opts = self.opts
        begun = positions_of(start, self.several, opts.stream)
        created_then = identities_of(start, self.several, opts.stream)
        created_now = identities_of(end, self.several, opts.stream)
        ranges = {}
        for stream, (end_seq, recorded_first) in positions_of(
            end, self.several, opts.stream
        ).items():
            begun_seq = begun[stream][0] if stream in begun else None
            was, now = created_then.get(stream), created_now.get(stream)
            if (
                recorded_first is not None
                and begun_seq is not None
                and (begun_seq > end_seq or (was is not None and now is not None and was != now))
            ):
                # A stream that went backwards (see _plan: it ends before it began, or
                # it was created again) is read from where it starts now. (A new
                # creation time alone, a stream restored into a cluster, reads on.)
                begun_seq = None
            if begun_seq is not None and begun_seq >= end_seq:
                # Nothing new (a query with several sources plans empty micro-batches):
                # an end offset's "first" belongs to the micro-batch that made it.
                continue
            first = recorded_first or begun_seq
            if first is not None and first <= end_seq - 1:
                ranges[stream] = (first, end_seq - 1)
        subjects: dict[str, tuple[str, ...] | None] = {}
        present = self._chosen(missing_ok=True) if ranges else {}
        # A stream gone since the micro-batch was planned: with failOnDataLoss its
        # messages are lost, else the other streams are read (of one, none).
        for stream in [s for s in ranges if s not in present]:
            self._drop_gone(stream)
            del ranges[stream]
        if self.several:
            subjects = {s: present[s].subjects for s in ranges}
            for stream in [s for s in ranges if subjects[s] == ()]:
                del ranges[stream]
        # A stream created again since the micro-batch was planned (Spark re-runs an
        # unfinished one from its logged offsets after a restart), or that now ends
        # before the micro-batch's last sequence (created again and not refilled yet,
        # or truncated): its sequences name other messages than those planned, or
        # will once it is filled again, before the executors read them.
        for stream in [
            s
            for s, (_, last) in ranges.items()
            if recreated_since(created_now.get(s), present[s])
            or int(present[s].state.last_seq) < last
        ]:
            self._recreated_under(stream, *ranges.pop(stream))
        if opts.fail_on_data_loss:
            client = get_client(opts.connect)
            for stream, (first, last) in ranges.items():
                what = f"micro-batch {first}..{last}"
                check_data_loss(client, stream, first, last, what, present[stream].state)
        if not self.several:
            return [
                r
                for stream, (first, last) in ranges.items()
                for r in split_range(
                    first, last, opts.min_partitions, opts.max_messages_per_partition
                )
            ]
        return list(
            split_ranges(ranges, opts.min_partitions, opts.max_messages_per_partition, subjects)
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, partition, self.opts.subjects, self.schema, self.inferred)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the reads use consumers that are deleted when each read ends,
        so the server keeps no read position to advance. The position is the offset in
        Spark's checkpoint, and the streams' own limits decide when messages go."""

    def stop(self) -> None:
        """Nothing to free: connections belong to the per-process cache
        (:mod:`.connection_cache`), shared with the other reads of the process."""
