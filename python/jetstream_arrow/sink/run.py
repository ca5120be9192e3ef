"""The sink's loop: read each stream on from the position its target holds, batch by
batch, and commit the rows with the new positions every ``commit_rows`` rows or
``commit_seconds`` seconds. A work-queue or interest stream, whose messages go once
acknowledged, is consumed through a durable pull consumer instead (see ``queue.py``),
its messages acknowledged after the commit that holds them. It is one module, the
loop in one function, because its steps (read, consume, land, commit, acknowledge)
share the state of one run: the rows pending, the positions and the totals.

Memory is bounded by one commit: a read's batches are at most ``commit_rows`` rows,
and the rows pending are committed before a batch that would take them past it.
Nothing but the target holds a position: after a crash the rows read and not
committed are read again, and the rows committed are not.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from .._core import DEFAULT_READ_BATCH_ROWS, VALUE_COLUMN
from ..codec import ValueCodec
from ..exactly_once import exactly_once_wanted
from ..exceptions import (
    BadInputError,
    MalformedPayloadError,
    NewFieldError,
    NothingToInferError,
    OperationTimeoutError,
)
from .dead_letters import (
    DeadLetterPositions,
    as_malformed,
    content_encodings,
    dead_letter_subject,
    dead_letters,
    error_texts,
    no_value_reasons,
    reader_tag,
)
from .origin import check_same_stream, created_ns, recorded_for
from .patience import Patience
from .queue import (
    QUEUE_RETENTIONS,
    SAMPLE_ROWS,
    QueueReader,
    grown_type,
    open_queue,
)
from .rows import (
    SplitBatch,
    check_partition_by,
    concat_refusing_conflicts,
    partition_column,
    split,
)

#: Commit after this many rows, at most (a Parquet file or Delta commit per commit).
DEFAULT_COMMIT_ROWS = 100_000
#: ... or this many seconds after the first row pending, whichever comes first.
DEFAULT_COMMIT_SECONDS = 60.0
#: The largest ``commit_rows``: a commit's rows are held in memory.
MAX_COMMIT_ROWS = 10_000_000
#: The longest ``commit_seconds``: a day.
MAX_COMMIT_SECONDS = 86_400.0
#: How long each call of a sink waits for a server that does not answer (restarting,
#: cut off, electing a leader) before the sink fails: minutes, so that a following
#: sink outlives a server's restart or a network cut.
DEFAULT_RESUME_TIMEOUT = 300.0
#: A following sink looks for new messages this often when it has caught up.
FOLLOW_POLL_SECONDS = 0.5
#: A work queue that delivers nothing while it holds messages is asked again after this.
QUEUE_HELD_BACK_SECONDS = 0.05
#: Unless following, a work queue that delivers nothing while it holds messages for
#: ``commit_seconds`` (at least this) fails the run: paused, or held by another client.
QUEUE_HELD_BACK_MIN_SECONDS = 1.0


class Target(Protocol):
    """Where a sink lands rows: a [`DeltaTarget`][jetstream_arrow.sink.DeltaTarget]
    or a [`ParquetTarget`][jetstream_arrow.sink.ParquetTarget]."""

    @property
    def identity(self) -> str: ...

    def positions(self, streams: Sequence[str]) -> dict[str, int]: ...

    def created(self, streams: Sequence[str]) -> dict[str, int | None]: ...

    def commit(
        self,
        rows: pa.Table,
        positions: Mapping[str, int],
        partition_by: Sequence[str],
        created: Mapping[str, int] | None = None,
    ) -> None: ...


@dataclass(frozen=True)
class SinkProgress:
    """How far a sink is, given to ``on_progress`` after each batch read and each
    commit: ``rows`` landed (committed) and their Arrow ``bytes``, ``dead_letters``
    published, ``commits``,
    ``pending`` rows read and not yet committed, ``positions`` (the last sequence
    committed per stream), ``lag`` (messages each stream holds past that, as of its
    last look), ``seconds`` since the start."""

    rows: int
    bytes: int
    dead_letters: int
    commits: int
    pending: int
    positions: dict[str, int]
    lag: dict[str, int]
    seconds: float


@dataclass(frozen=True)
class SinkReport:
    """What a sink did: ``rows`` landed, ``dead_letters`` published, ``commits``
    made, the ``positions`` it ended at (last sequence per stream), whether it was
    ``stopped`` (by ``stop``) rather than caught up, and ``seconds``."""

    rows: int
    dead_letters: int
    commits: int
    positions: dict[str, int]
    stopped: bool
    seconds: float


@dataclass
class _Pending:
    """The rows read and not yet committed, with the positions they reach."""

    rows: list[pa.Table] = field(default_factory=list)
    #: The rows whose payload did not decode, with their stream.
    malformed: list[tuple[pa.Table, str]] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    #: Work-queue deliveries to acknowledge once this commit is in the target.
    acks: list[Any] = field(default_factory=list)
    count: int = 0
    since: float | None = None

    def add(self, stream: str, batch: SplitBatch) -> None:
        if batch.rows.num_rows:
            self.rows.append(batch.rows)
        if batch.malformed.num_rows:
            self.malformed.append((batch.malformed, stream))
        self.count += batch.rows.num_rows + batch.malformed.num_rows
        self.reach(stream, batch.through_seq)

    def reach(self, stream: str, seq: int) -> None:
        if seq > self.positions.get(stream, 0):
            self.positions[stream] = seq
            if self.since is None:
                self.since = time.monotonic()


#: The message columns a partition column is made from, with no rows.
_EMPTY_MESSAGES = pa.table(
    {"subject": pa.array([], pa.string()), "timestamp": pa.array([], pa.timestamp("us", "UTC"))}
)


def _check(
    streams: Sequence[str], commit_rows: int, commit_seconds: float, batch_rows: int | None
) -> list[str]:
    names = [streams] if isinstance(streams, str) else list(streams)
    if not names:
        raise BadInputError("option 'streams' names no stream")
    if len(set(names)) != len(names):
        raise BadInputError(f"option 'streams' names a stream twice: {names}")
    if isinstance(commit_rows, bool) or not isinstance(commit_rows, int):
        raise BadInputError(f"option 'commit_rows' must be an integer, got {commit_rows!r}")
    if not 1 <= commit_rows <= MAX_COMMIT_ROWS:
        raise BadInputError(
            f"option 'commit_rows' must be between 1 and {MAX_COMMIT_ROWS:,}, got {commit_rows}"
        )
    if not 0 < commit_seconds <= MAX_COMMIT_SECONDS:
        raise BadInputError(
            f"option 'commit_seconds' must be more than 0 and at most {MAX_COMMIT_SECONDS:,.0f}, "
            f"got {commit_seconds}"
        )
    if batch_rows is not None and batch_rows < 1:
        raise BadInputError(f"option 'batch_rows' must be at least 1, got {batch_rows}")
    return names


def _codecs(
    codec: ValueCodec | str | Mapping[str, ValueCodec | str | None] | None,
    streams: list[str],
    dead_letter_stream: str | None,
) -> dict[str, ValueCodec | None]:
    given = codec if isinstance(codec, Mapping) else dict.fromkeys(streams, codec)
    unknown = sorted(set(given) - set(streams))
    if unknown:
        raise BadInputError(f"option 'codec' names streams the sink does not read: {unknown}")
    out: dict[str, ValueCodec | None] = {}
    for stream in streams:
        one = ValueCodec.of(given.get(stream))
        if one is not None:
            # The value arrives as one struct column (flattened here, where a field
            # named like a message column is renamed); with a dead-letter stream,
            # bad payloads are kept (in _corrupt_record) to be sent there.
            settings: dict[str, Any] = {"flatten": False}
            if dead_letter_stream is not None:
                settings["on_malformed"] = "permissive"
            one = dataclasses.replace(one, **settings)
        out[stream] = one
    return out


def _untyped(t: pa.DataType) -> bool:
    """Whether ``t`` holds a part no value has typed yet: the null type (a JSON field
    null in every payload the schema was inferred from, an empty list's items) or a
    struct without fields (an object that was always empty)."""
    if pa.types.is_null(t):
        return True
    if pa.types.is_struct(t):
        return t.num_fields == 0 or any(_untyped(f.type) for f in t)
    if pa.types.is_list(t):
        return _untyped(t.value_type)
    return False


def _typed_only(column: pa.Array) -> pa.Array | None:
    """``column`` without its untyped parts (``_untyped``), at any depth; None when
    nothing is left. Parquet (and so Delta) cannot store a struct without fields, and
    a lake table's column keeps the type it is created with, so a null-typed column
    could never take the values that type it later: such a part lands once a value
    types it (the read's schema then grows), and reads as null before."""
    t = column.type
    if pa.types.is_null(t):
        return None
    if pa.types.is_struct(t):
        children = [_typed_only(c) for c in column.flatten()]
        kept = [(f, c) for f, c in zip(t, children, strict=True) if c is not None]
        if not kept:
            return None
        return pa.StructArray.from_arrays(
            [c for _, c in kept],
            fields=[f.with_type(c.type) for f, c in kept],
            mask=column.is_null(),
        )
    if pa.types.is_list(t):
        values = _typed_only(column.values)
        if values is None:
            return None
        return pa.ListArray.from_arrays(column.offsets, values, mask=column.is_null())
    return column


def _landable(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its value's untyped parts left out (``_typed_only``); itself
    when it has none."""
    if VALUE_COLUMN not in batch.schema.names:
        return batch
    i = batch.schema.get_field_index(VALUE_COLUMN)
    if not _untyped(batch.schema.field(i).type):
        return batch
    value = _typed_only(batch.column(i))
    if value is None:
        value = pa.nulls(batch.num_rows, pa.struct([]))
    return batch.set_column(i, VALUE_COLUMN, value)


def run_sink(
    client: Any,
    streams: Sequence[str],
    target: Target,
    *,
    follow: bool = False,
    subjects: Mapping[str, str | Sequence[str]] | None = None,
    codec: ValueCodec | str | Mapping[str, ValueCodec | str | None] | None = None,
    include_headers: bool = False,
    partition_by: Sequence[str] | None = (),
    commit_rows: int = DEFAULT_COMMIT_ROWS,
    commit_seconds: float = DEFAULT_COMMIT_SECONDS,
    dead_letter_stream: str | None = None,
    dead_letter_lease: float | None = None,
    batch_rows: int | None = None,
    durable: str | None = None,
    resume_timeout: float = DEFAULT_RESUME_TIMEOUT,
    stop: threading.Event | None = None,
    on_progress: Callable[[SinkProgress], None] | None = None,
) -> SinkReport:
    """Land the messages of ``streams`` into ``target`` exactly once, and return
    what was done.

    Each stream is read from the position ``target`` holds (the last sequence it
    committed) + 1: until the stream's last sequence when the sink started, or with
    ``follow``, on and on, looking for new messages every half second once caught
    up, until ``stop`` is set. Rows are committed, with each stream's new position
    in the same transaction, every ``commit_rows`` rows or ``commit_seconds``
    seconds after the first pending row; rows read and not committed when the
    process dies are read again by the next run, so none is written twice or
    skipped. Setting ``stop`` (a ``threading.Event``; a signal handler may set it)
    ends the sink after it commits what it has read.

    - ``subjects``: a subject filter (or several) per stream name.
    - ``codec``: a [`ValueCodec`][] or format name (or one per stream name): each
      payload is decoded and its fields land as columns beside ``stream``,
      ``subject``, ``seq`` and ``timestamp`` (a field named like one of them lands
      as ``value_<name>``). Without one, the payload lands as the ``data`` column.
      New columns are added to the table; a column that arrives with another type
      is refused.
    - ``include_headers``: a ``headers`` column.
    - ``partition_by``: ``"date"`` (the UTC day of ``timestamp``) and
      ``"subject_token_N"`` (the Nth token of the subject) columns to partition by
      (None or none: no partitions). A subject whose token is
      ``__HIVE_DEFAULT_PARTITION__`` is refused: it would read back as null.
    - ``dead_letter_stream``: payloads that do not decode are published there
      (acknowledged) before the commit that moves the position past them, with
      their error and source in headers and msg id ``<stream>:<seq>:<reader>``
      (``<reader>``: a digest of the target and the stream's creation); without
      one, such a payload stops the sink with its error. Into a dead-letter stream
      that holds writers' positions (``create_stream(..., exactly_once=True)``,
      ``jetstream-arrow streams enable-exactly-once``) each letter is stored once at
      any age, even by a sink that died between its letters and its commit and is
      restarted after the stream's duplicate window; into another, within that
      window, with one ``ExactlyOnceUnavailableWarning``.
    - ``dead_letter_lease``: seconds a sink's dead-letter position claims its
      identity (default ``_core.DEFAULT_WRITER_LEASE``): a sink restarted after one
      that died waits until then before its first letters.
    - ``batch_rows``: rows per read batch (default the read's, at most
      ``commit_rows``).
    - ``durable``: the durable pull consumer through which a stream with
      ``workqueue`` or ``interest`` retention is consumed (such a stream cannot be
      read by range: its messages go once acknowledged). It is created if missing,
      with explicit acks; each message is acknowledged after the commit that holds
      it, and one delivered again at or below the target's position (committed by a
      run that died before its acks) is acknowledged and not landed again. Required
      for such streams, refused when no stream is one. One sink per consumer.
    - ``resume_timeout``: how long each call to the server (a stream's info, a read,
      a consumer's pull or info, dead letters' publish) waits while the server does
      not answer (no reply, a lost connection, a ``503``) before the sink fails,
      in seconds (default 300). The client's own reconnects must last as long:
      connect with ``max_reconnects=None`` for a sink that follows.
    - ``on_progress``: called with a [`SinkProgress`][jetstream_arrow.sink.SinkProgress]
      after each batch read and each commit.
    """
    names = _check(streams, commit_rows, commit_seconds, batch_rows)
    if isinstance(resume_timeout, bool) or not (
        isinstance(resume_timeout, (int, float)) and resume_timeout > 0
    ):
        raise BadInputError(
            f"option 'resume_timeout' must be more than 0 seconds, got {resume_timeout!r}"
        )
    patience = Patience(client, float(resume_timeout))
    if dead_letter_lease is not None and (
        isinstance(dead_letter_lease, bool)
        or not (isinstance(dead_letter_lease, (int, float)) and dead_letter_lease > 0)
    ):
        raise BadInputError(
            f"option 'dead_letter_lease' must be more than 0 seconds, got {dead_letter_lease!r}"
        )
    if dead_letter_stream is not None and dead_letter_stream in names:
        # Its dead letters would be read back as messages of the stream, and fail again.
        raise BadInputError(
            f"option 'dead_letter_stream' {dead_letter_stream!r} is one of the streams sunk"
        )
    codecs = _codecs(codec, names, dead_letter_stream)
    partitions = check_partition_by(partition_by, "option 'partition_by'")
    filters = dict(subjects or {})
    unknown = sorted(set(filters) - set(names))
    if unknown:
        raise BadInputError(f"option 'subjects' names streams the sink does not read: {unknown}")
    rows_per_batch = min(batch_rows or DEFAULT_READ_BATCH_ROWS, commit_rows)
    dead_subject = (
        dead_letter_subject(
            client, dead_letter_stream, "option 'dead_letter_stream'", resume_timeout
        )
        if dead_letter_stream is not None
        else None
    )
    # With a dead-letter stream the reads take the headers: a payload still compressed
    # is dead-lettered with its Content-Encoding (the rows land without them unless
    # asked for).
    read_headers = include_headers or dead_letter_stream is not None
    stop = stop or threading.Event()
    started = time.monotonic()
    infos = {s: patience.stream_info(s) for s in names}
    last_seqs = {s: int(infos[s].state.last_seq) for s in names}
    queued = [s for s in names if infos[s].config.retention in QUEUE_RETENTIONS]
    # JSON with no schema given: each read, and each pull of a work queue, fails on a
    # field its schema lacks (arrow-json would skip it), and the schema grows
    # (`grow`). The codec to infer with, per such stream.
    growing = {
        s: dataclasses.replace(c, on_new_field="fail")
        for s, c in codecs.items()
        if c is not None and c.format == "json" and c.schema is None
    }
    codecs.update(growing)
    if queued and durable is None:
        raise BadInputError(
            f"stream {queued[0]} has {infos[queued[0]].config.retention} retention: its "
            "messages go once acknowledged, so it cannot be read by range; give option "
            "'durable' (--durable NAME), the durable consumer to land it through"
        )
    if durable is not None and not queued:
        raise BadInputError(
            f"option 'durable' {durable!r}: no stream sunk has workqueue or interest "
            "retention (streams with limits retention are read by range, with no consumer)"
        )
    committed = target.positions(names)
    # When each stream was created: recorded with every position a commit moves, so
    # that a stream deleted and made again is told from the one landed (origin.py).
    created = {s: created_ns(infos[s]) for s in names}
    # Who reads each stream, in its dead letters' ids: two sinks sharing a dead-letter
    # stream, or a stream made again landed anew, must not drop each other's letters.
    readers = {s: reader_tag(target.identity, created[s]) for s in names}
    dead_positions = (
        DeadLetterPositions(client, dead_letter_stream, readers, dead_letter_lease)
        if dead_letter_stream is not None
        and exactly_once_wanted(
            client, dead_letter_stream, None, f"dead letters into stream {dead_letter_stream!r}"
        )
        else None
    )
    recorded = target.created(names)
    for stream in names:
        check_same_stream(target, stream, recorded[stream], created[stream], committed[stream])
        if committed[stream] > last_seqs[stream]:
            # Sequences only grow: the stream was made again under the same name, and
            # its messages up to the old position would be skipped without a word.
            raise BadInputError(
                f"{target!r} holds stream {stream} up to sequence {committed[stream]}, "
                f"but the stream's last sequence is {last_seqs[stream]}: it is not the "
                "stream landed there (made again?); land it into another table"
            )
    read_to = dict(committed)
    queues: dict[str, QueueReader] = {}
    for stream in queued:
        assert durable is not None
        queues[stream] = open_queue(
            patience,
            stream,
            durable,
            subjects=filters.get(stream),
            commit_rows=commit_rows,
            commit_seconds=commit_seconds,
            batch_rows=rows_per_batch,
        )
    pending = _Pending()
    totals = {"rows": 0, "bytes": 0, "dead_letters": 0, "commits": 0}

    def progress() -> None:
        if on_progress is not None:
            on_progress(
                SinkProgress(
                    rows=totals["rows"],
                    bytes=totals["bytes"],
                    dead_letters=totals["dead_letters"],
                    commits=totals["commits"],
                    pending=pending.count,
                    positions=dict(committed),
                    lag={s: max(last_seqs[s] - committed[s], 0) for s in names},
                    seconds=time.monotonic() - started,
                )
            )

    def acknowledge(acks: list[Any]) -> None:
        """Acknowledge work-queue deliveries the target holds: a crash before this
        only makes them come again, at or below the position, and be skipped."""
        for delivered in acks:
            delivered.ack()
        if acks:
            patience.call(names[0], "flush of acks", client.flush)

    def commit() -> None:
        nonlocal pending
        if not pending.positions:
            acknowledge(pending.acks)
            pending.acks = []
            return
        if pending.malformed:
            assert dead_letter_stream is not None and dead_subject is not None
            published = 0
            for malformed, stream in pending.malformed:
                letters = dead_letters(
                    malformed,
                    error_texts(malformed),
                    dead_subject,
                    content_encodings(client, malformed),
                    readers,
                )
                if dead_positions is not None:
                    # Those a run that died before its commit stored already.
                    letters = dead_positions.unsent(stream, letters, malformed)
                # Published again after a failure, a letter stored already is a
                # duplicate of its msg id, dropped by the server.
                if letters.num_rows:
                    patience.call(
                        dead_letter_stream,
                        f"publish to dead-letter stream {dead_letter_stream}",
                        functools.partial(
                            client.publish, letters, expected_stream=dead_letter_stream
                        ),
                    )
                published += malformed.num_rows
            if dead_positions is not None:
                # Every letter up to this commit's positions is stored: said before
                # the commit, so a run that dies before it does not send them again.
                for stream in sorted({stream for _, stream in pending.malformed}):
                    patience.call(
                        dead_letter_stream,
                        f"position of dead letters in stream {dead_letter_stream}",
                        functools.partial(
                            dead_positions.advance, stream, pending.positions[stream] + 1
                        ),
                    )
            totals["dead_letters"] += published
        rows = (
            concat_refusing_conflicts(pending.rows, f"streams {sorted(pending.positions)}")
            if pending.rows
            else None
        )
        if rows is None:
            # Only positions (and dead letters): the partition columns too, which a
            # new partitioned table is created with.
            rows = pa.table({"stream": pa.array([], pa.string())})
            for name in partitions:
                rows = rows.append_column(name, partition_column(_EMPTY_MESSAGES, name))
        target.commit(rows, pending.positions, partitions, recorded_for(pending.positions, created))
        committed.update(pending.positions)
        totals["rows"] += rows.num_rows
        totals["bytes"] += rows.nbytes
        totals["commits"] += 1
        acks, pending = pending.acks, _Pending()
        progress()
        acknowledge(acks)

    def look(stream: str) -> None:
        """Take the stream's last sequence now; a stream deleted and made again
        meanwhile ends the sink, after it commits what it read of the old one."""
        info = patience.stream_info(stream)
        now = created_ns(info)
        if created[stream] is not None and now is not None and now != created[stream]:
            commit()
            check_same_stream(target, stream, created[stream], now, committed[stream])
        last_seqs[stream] = int(info.state.last_seq)

    def due() -> bool:
        return pending.since is not None and time.monotonic() - pending.since >= commit_seconds

    def land(stream: str, batch: pa.RecordBatch) -> None:
        """Add a batch read to the rows pending, committing first when they would
        grow past ``commit_rows`` and after when they reach it or are due."""
        if pending.count + batch.num_rows > commit_rows:
            commit()
        pending.add(stream, split(_landable(batch), partitions, include_headers))
        read_to[stream] = pending.positions[stream]
        progress()
        if pending.count >= commit_rows or due():
            commit()

    def pass_undecodable_sample(stream: str, end: int) -> None:
        """Move past what kept a read from inferring the value schema: a range with no
        message of the read's subjects is behind the sink; payloads that do not decode
        (JSON: are not objects), up to the first that does, are malformed (sent to the dead-letter
        stream, or stopping the sink as a malformed payload does). The range is read
        again from there."""
        start = read_to[stream] + 1
        stream_codec = codecs[stream]
        assert stream_codec is not None
        # At most what the read sampled, and a batch: the next read looks further.
        limit = min(stream_codec.sample_rows or SAMPLE_ROWS, rows_per_batch)
        sample: list[pa.RecordBatch] = []
        taken = 0
        with client.read(
            stream,
            start_seq=start,
            end_seq=end,
            subjects=filters.get(stream),
            batch_rows=limit,
            resume_timeout=resume_timeout,
        ) as raw:
            for batch in raw:
                sample.append(batch.slice(0, limit - taken))
                taken += sample[-1].num_rows
                if taken >= limit:
                    break
        if taken == 0:
            # Only other subjects' messages (or none left) up to the range's end.
            pending.reach(stream, end)
            read_to[stream] = end
            return
        messages = pa.Table.from_batches(sample)
        value_format = stream_codec.format
        # Why each payload holds no value, in the decoder's words (None: it holds one).
        reasons = no_value_reasons(stream_codec, stream, messages)
        bad = next((i for i, r in enumerate(reasons) if r is None), len(reasons))
        if bad == 0:
            # The read sees no value where these checks see one: a schema is needed.
            raise BadInputError(
                f"stream {stream}: no value schema can be inferred from its messages from "
                f"sequence {start}; give the codec a schema"
            )
        malformed = messages.slice(0, bad)
        seqs = malformed.column("seq").to_pylist()
        if dead_letter_stream is None:
            raise MalformedPayloadError(
                f"stream {stream!r} seq {seqs[0]}: the payload is not "
                f"{'a JSON object' if value_format == 'json' else 'an Arrow IPC stream'}, and no "
                "value schema can be inferred from the messages sampled; give the sink a "
                "dead-letter stream (option 'dead_letter_stream', --dead-letter-stream) to "
                "set such payloads aside"
            )
        malformed = as_malformed(malformed, reasons[:bad], ["stream", "subject", "seq", "data"])
        if pending.count + bad > commit_rows:
            commit()
        # Every message of the sample read before the first good one is malformed:
        # the read's subjects filter out the rest.
        through = seqs[-1] if bad < len(reasons) or taken >= limit else end
        pending.add(stream, SplitBatch(pa.table({}), malformed, through))
        read_to[stream] = through
        progress()
        if pending.count >= commit_rows or due():
            commit()

    #: Per stream, the sequence whose new field a schema inferred from there lacked.
    ungrown: dict[str, int] = {}

    def grow(stream: str, error: NewFieldError, queue: QueueReader | None = None) -> None:
        """Add what message ``error.seq`` holds to the stream's value schema: inferred
        from the messages from there (the first of them is that message), read by
        range, or of a work queue as its consumer delivers them again."""
        assert error.seq is not None
        codec = growing[stream]
        known = codecs[stream]
        assert known is not None and known.schema is not None
        if queue is not None:
            inferred = queue.schema_from(error.seq, codec.format)
            seen = pa.struct(list(inferred) if inferred is not None else [])
        else:
            with client.read(
                stream,
                start_seq=error.seq,
                end_seq=max(error.seq, last_seqs[stream]),
                subjects=filters.get(stream),
                codec=codec,
                batch_rows=1,
                resume_timeout=resume_timeout,
            ) as sample:
                seen = sample.schema.field(VALUE_COLUMN).type
        grown = grown_type(pa.struct(list(known.schema)), seen)
        if grown == pa.struct(list(known.schema)):
            # What was inferred from there on lacks the field: the message went before
            # this read (limits), and reading again passes it; or its payload is left
            # out of a sample (it did not decompress), and reading again fails again.
            if ungrown.get(stream) == error.seq:
                raise BadInputError(
                    f"stream {stream} seq {error.seq}: field {error.field!r} is not in the "
                    "value schema inferred from the messages from there; give the codec a "
                    "schema that has it"
                ) from error
            ungrown[stream] = error.seq
            return
        codecs[stream] = dataclasses.replace(known, schema=pa.schema(list(grown)))

    def set_aside(stream: str, delivered: Any) -> None:
        """Hold the work queue's ``delivered`` messages, none of which decodes, as
        malformed (dead letters), acknowledged with the commit that moves past them;
        as ``consume`` does, what a run that died before its acks committed is
        acknowledged now, and what this run holds pending already is skipped."""
        data = pa.Table.from_batches([QueueReader.rows(delivered)])
        seqs = data.column("seq")
        if int(pc.max(seqs).as_py()) <= committed[stream]:
            delivered.ack()
            return
        kept = ["stream", "subject", "seq", "data"]
        if "headers" in data.column_names:
            kept.append("headers")
        new = data.filter(pc.greater(seqs, read_to[stream]))
        stream_codec = codecs[stream]
        assert stream_codec is not None
        malformed = as_malformed(new, no_value_reasons(stream_codec, stream, new), kept)
        if pending.count + malformed.num_rows > commit_rows:
            commit()
        pending.acks.append(delivered)
        if malformed.num_rows:
            through = int(pc.max(malformed.column("seq")).as_py())
            pending.add(stream, SplitBatch(pa.table({}), malformed, through))
            read_to[stream] = pending.positions[stream]
            progress()
            if pending.count >= commit_rows or due():
                commit()

    def consume(stream: str, queue: QueueReader) -> bool:
        """Take what the work queue delivers, up to about a commit's rows; whether it
        has nothing more to deliver now (or, unless following, the sink has reached
        the stream's last sequence when it started)."""
        taken = 0
        held_back_since: float | None = None
        while not stop.is_set() and taken < commit_rows:
            room = max(min(rows_per_batch, commit_rows - pending.count), 1)
            try:
                codecs[stream], undecodable = queue.typed(
                    room, codecs[stream], read_headers, set_aside=dead_letter_stream is not None
                )
                if undecodable is not None:
                    # No payload of the sample decodes, so no schema: dead letters,
                    # as a read by range passes them (pass_undecodable_sample).
                    taken += len(undecodable)
                    set_aside(stream, undecodable)
                    continue
                delivered = queue.fetch(room, codecs[stream], read_headers)
            except NewFieldError as e:
                # The pull's messages hold a field the schema lacks: handed out to no
                # one, acknowledged by no one, they come again from the ack floor and
                # decode with the grown schema.
                grow(stream, e, queue)
                continue
            if delivered is None:
                waiting = queue.pending()
                if follow or waiting == 0:
                    return True
                # Held back, not drained: the consumer's unacknowledged messages are at
                # its max_ack_pending, or acks the server has not applied yet count.
                commit()
                now = time.monotonic()
                if held_back_since is None:
                    held_back_since = now
                elif now - held_back_since >= max(commit_seconds, QUEUE_HELD_BACK_MIN_SECONDS):
                    # Paused, or another client holds what it may deliver: waiting on
                    # would never end, and the run was asked to end once caught up.
                    raise OperationTimeoutError(
                        f"consumer {queue.consumer.name!r} of stream {stream} reports "
                        f"{waiting} messages pending but delivered none for "
                        f"{now - held_back_since:.1f} s: it is paused, or another client "
                        "holds its unacknowledged messages (max_ack_pending); resume it, "
                        "or run the sink with --follow to wait"
                    )
                stop.wait(QUEUE_HELD_BACK_SECONDS)
                continue
            held_back_since = None
            taken += len(delivered)
            data = queue.rows(delivered)
            seqs = data.column("seq")
            if int(pc.max(seqs).as_py()) <= committed[stream]:
                # Committed by a run that died before its acks: done already.
                delivered.ack()
                continue
            # A message delivered again at or below what this run has read is pending
            # already (its ack wait ran out): it is acknowledged with the next commit.
            fresh = data.filter(pc.greater(seqs, read_to[stream]))
            if pending.count + fresh.num_rows > commit_rows:
                # Before the batch's acks join the pending ones: a commit acknowledges
                # only what it holds.
                commit()
            pending.acks.append(delivered)
            if fresh.num_rows:
                land(stream, fresh)
            if not follow and read_to[stream] >= last_seqs[stream]:
                return True
        return False

    while not stop.is_set():
        drained: dict[str, bool] = {}
        for stream in names:
            if stop.is_set():
                break
            if stream in queues:
                if follow:
                    look(stream)
                drained[stream] = consume(stream, queues[stream])
                continue
            if follow:
                look(stream)
            end = last_seqs[stream]
            if read_to[stream] >= end:
                continue
            try:
                reader = client.read(
                    stream,
                    start_seq=read_to[stream] + 1,
                    end_seq=end,
                    subjects=filters.get(stream),
                    codec=codecs[stream],
                    include_headers=read_headers,
                    batch_rows=rows_per_batch,
                    resume_timeout=resume_timeout,
                )
            except NothingToInferError:
                pass_undecodable_sample(stream, end)
                continue
            try:
                with reader:
                    if stream in growing:
                        # The schema inferred, kept for the run's later reads: a
                        # field is then added once, when first met.
                        value = reader.schema.field(VALUE_COLUMN).type
                        codecs[stream] = dataclasses.replace(
                            growing[stream], schema=pa.schema(list(value))
                        )
                    for batch in reader:
                        if batch.num_rows == 0:
                            continue
                        land(stream, batch)
                        if stop.is_set():
                            break
                    else:
                        # The range is read: messages of other subjects up to its
                        # end are behind the sink too.
                        if end > read_to[stream]:
                            pending.reach(stream, end)
                            read_to[stream] = end
            except NewFieldError as e:
                # The schema lacks a field of message e.seq (its batch was not handed
                # out): grow it by a schema inferred from there, and read on.
                grow(stream, e)
        caught_up = all(drained.get(s, read_to[s] >= last_seqs[s]) for s in names)
        if due() or (caught_up and not follow) or (pending.count >= commit_rows):
            commit()
        if caught_up and not follow:
            break
        if caught_up:
            wait = FOLLOW_POLL_SECONDS
            if pending.since is not None:
                wait = min(wait, max(pending.since + commit_seconds - time.monotonic(), 0.0))
            stop.wait(wait)
    commit()
    if dead_positions is not None:
        dead_positions.close()
    return SinkReport(
        rows=totals["rows"],
        dead_letters=totals["dead_letters"],
        commits=totals["commits"],
        positions=dict(committed),
        stopped=stop.is_set(),
        seconds=time.monotonic() - started,
    )
