"""Reading sequence ranges of a stream, and noticing messages removed before they were read.

Batch reads (:mod:`.batch_reader`), streaming reads (:mod:`.stream_reader`) and ``read_fn``
(:mod:`.functions`) all read a range of stream sequences on an executor and look up
where a stream starts on the driver; they share these functions so that a range
means the same thing, and loses no message silently, whichever API asked for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import StructType

from .._time import LAST_NS_TIME
from ..client import Client
from ..exceptions import (
    BadInputError,
    JetStreamArrowError,
    NewFieldError,
)
from .columns import conform, kv_schema, message_schema
from .dead_letters import DeadLetterRouter, routes_dead_letters
from .options import ReadOptions
from .stream_lookup import PATIENCE, stream_state
from .value_codec import read_codec

#: The highest sequence a range can name (Spark's ``seq`` column is a bigint).
MAX_SEQ = 2**63 - 1


class DataLossError(JetStreamArrowError):
    """Messages of the requested sequence range were removed from the stream (by its
    limits, a purge or a delete) before they could be read, and ``failOnDataLoss`` is
    true. ``first`` and ``last`` are the removed sequences."""

    def __init__(self, message: str, first: int = 0, last: int = 0) -> None:
        super().__init__(message)
        self.first = first
        self.last = last


def checked_schema(opts: ReadOptions, schema: StructType) -> StructType:
    """The message schema of a read, refusing a different user-given schema; with a
    value format, the message columns and value fields the schema names; a KV
    bucket's entries with option ``kv``."""
    if opts.value_format is not None:
        from .value_codec import check_value_read_schema

        return check_value_read_schema(opts, schema)
    expected = (
        kv_schema()
        if opts.kv is not None
        else message_schema(opts.include_headers, opts.include_ttl)
    )
    if [(f.name, f.dataType) for f in schema.fields] != [
        (f.name, f.dataType) for f in expected.fields
    ]:
        raise BadInputError(
            f"a jetstream read has the schema {expected.simpleString()}, not "
            f"{schema.simpleString()}; drop .schema(...) (option 'includeHeaders' "
            "adds the headers column)"
        )
    return expected


def first_available(state: Any) -> int:
    """The lowest sequence the stream still holds (last + 1 when it is empty)."""
    return int(state.first_seq) if state.messages else int(state.last_seq) + 1


def first_seq_at(client: Client, stream: str, when: datetime, patience: float) -> int | None:
    """The sequence of the first message stored at or after ``when``, or None; asked
    through transient failures for ``patience`` seconds (the read's ``resumeTimeout``)."""
    if when >= LAST_NS_TIME:
        # No message is stored that late, and the engine cannot be asked.
        return None
    return client.first_seq_at(stream, when, resume_timeout=patience)


def check_data_loss(
    client: Client,
    stream: str,
    start: int,
    end: int,
    what: str,
    state: Any = None,
    patience: float = PATIENCE,
) -> int:
    """Raise :class:`DataLossError` when sequences ``start..end`` begin below what the
    stream still holds; return the first sequence still held. Without ``state`` the
    stream's is asked for, through transient failures for ``patience`` seconds."""
    if state is None:
        state = stream_state(client, stream, patience)
    available = first_available(state)
    if start < available and start <= int(state.last_seq):
        last_lost = min(end, available - 1)
        raise DataLossError(
            f"option 'failOnDataLoss': messages {start}..{last_lost} of stream {stream!r} "
            f"({what}) were removed (by the stream's limits, a purge or a delete) before "
            f"they could be read; the stream now starts at sequence {available}. "
            "Set failOnDataLoss=false to read what is left.",
            start,
            last_lost,
        )
    return available


def skipped_sequences(seqs: pa.Array, expected: int) -> list[tuple[int, int]]:
    """The runs of sequences (first, last) missing from ``seqs``, a batch of a read in
    sequence order whose next sequence was ``expected``."""
    if len(seqs) == 0:
        return []
    seqs = seqs.cast(pa.int64())
    before = pa.concat_arrays([pa.array([expected - 1], pa.int64()), seqs.slice(0, len(seqs) - 1)])
    jumps = pc.indices_nonzero(pc.greater(pc.subtract(seqs, before), 1)).to_pylist()
    return [(before[i].as_py() + 1, seqs[i].as_py() - 1) for i in jumps]


def check_removed_while_read(
    client: Client, stream: str, skipped: list[tuple[int, int]], what: str, patience: float
) -> None:
    """Raise :class:`DataLossError` when runs of sequences a read skipped lie below the
    stream's first sequence now: its head (limits, a purge) went past them before they
    were read. Runs above it were deleted from the middle of the stream, which a read
    skips, as Kafka skips compacted offsets. (A run deleted from the middle that the
    head overtook between the read skipping it and this check counts as removed.)"""
    if not skipped:
        return
    available = first_available(stream_state(client, stream, patience))
    removed = [(lo, min(hi, available - 1)) for lo, hi in skipped if lo < available]
    if not removed:
        return
    runs = ", ".join(str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in removed)
    raise DataLossError(
        f"option 'failOnDataLoss': messages {runs} of stream {stream!r} ({what}) were "
        "removed from the stream's head (by its limits or a purge) while the range was "
        f"read, before they could be read; the stream now starts at sequence {available}. "
        "Set failOnDataLoss=false to read what is left.",
        removed[0][0],
        removed[-1][1],
    )


def read_range(
    client: Client,
    opts: ReadOptions,
    stream: str,
    start: int,
    end: int | None,
    subjects: Sequence[str] | None,
    target: pa.Schema,
    inferred: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Messages ``start..end`` (inclusive) of ``stream`` as batches in ``target``'s schema.

    The core's reader recovers by itself (a new consumer, or the same direct get again,
    for up to its ``resume_timeout``), resumes a source that ends before the range
    does, and fails a read of every subject of a stream without deleted messages that
    gets fewer messages than the range holds. With ``failOnDataLoss``, an unfiltered
    read checks each batch that skipped sequences, and its end, against the stream's
    head (:func:`check_removed_while_read`), so messages removed while the range is
    read are named, not skipped. In mode ``deadletter`` each batch's payloads that do
    not decode are published to the dead-letter stream before its good rows are
    yielded (:mod:`.dead_letters`). With ``inferred`` (the JSON value's schema was
    inferred when the query was planned) a payload holding a field it lacks fails
    the read with :class:`NewFieldError` (:func:`new_field_error`) before anything of
    its batch is yielded.
    """
    state = stream_state(client, stream, opts.resume_timeout)
    # A read through a durable consumer (option 'consumer') re-reads the messages the
    # consumer holds unacknowledged, by direct gets: acknowledged work items around
    # them are gone by design, so removed messages do not mean loss.
    through_consumer = opts.consumer is not None
    what = f"range {start}..{end if end is not None else 'end'}"
    if opts.fail_on_data_loss and not through_consumer:
        check_data_loss(client, stream, start, end if end is not None else MAX_SEQ, what, state)
    # With a subject filter the messages between two of the read are other subjects'.
    watch_head = opts.fail_on_data_loss and not through_consumer and subjects is None
    last = int(state.last_seq) if end is None else min(end, int(state.last_seq))
    if start > last:
        return
    codec = read_codec(opts, target, inferred)
    router = (
        DeadLetterRouter(client, opts) if codec is not None and routes_dead_letters(opts) else None
    )
    reader = client.read(
        stream,
        start_seq=start,
        end_seq=last,
        subjects=list(subjects) if subjects else None,
        # "auto": short ranges (small streaming micro-batches) by direct gets.
        method="direct" if through_consumer else "auto",
        codec=codec,
        **opts.reader_kwargs(),
    )
    next_seq = start
    try:
        for batch in _naming_new_fields(reader, stream):
            if batch.num_rows:
                if watch_head:
                    skipped = skipped_sequences(batch.column("seq"), next_seq)
                    check_removed_while_read(client, stream, skipped, what, opts.resume_timeout)
                next_seq = int(batch.column("seq")[-1].as_py()) + 1
                if router is not None:
                    # Published (acknowledged) before the good rows are handed on.
                    batch = router.good_rows(batch)
                if batch.num_rows:
                    yield conform(batch, target)
    finally:
        # Also when Spark stops early (a limit) or the task is cancelled: the
        # reader's consumer is deleted on the server right away.
        reader.close()
    if watch_head and next_seq <= last:
        # The read ended early: its last sequences may have gone with the head.
        check_removed_while_read(client, stream, [(next_seq, last)], what, opts.resume_timeout)


def new_field_error(err: NewFieldError, stream: str) -> NewFieldError:
    """``err`` of a Spark read, saying what to do: a query's schema is fixed when it
    is planned, so only a schema given to the read can hold the field."""
    out = NewFieldError(
        f"stream {stream!r}, seq {err.seq}: the JSON value has a field {err.field!r} that "
        "the value's schema, inferred from the stream's first messages when the query "
        "was planned, lacks, and a Spark query's schema cannot grow; nothing of this "
        "batch was handed out (or acknowledged). Give the value's schema: option "
        "'valueSchema' (df.schema.json() of the value) or .schema(...), with the field "
        "to read it, without it to leave it out"
    )
    out.seq, out.field = err.seq, err.field
    return out


def _naming_new_fields(batches: Iterator[pa.RecordBatch], stream: str) -> Iterator[pa.RecordBatch]:
    try:
        yield from batches
    except NewFieldError as err:
        raise new_field_error(err, stream) from None


def read_latest(
    client: Client, opts: ReadOptions, subjects: Sequence[str] | None, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The latest message of each subject of the read's stream (option
    ``lastPerSubject``), or the live entries of its KV bucket (option ``kv``), as
    batches in ``target``'s schema: one read, in one partition."""
    if opts.kv is not None:
        # A bucket's table has no headers column and is always a latest read.
        kv_options = {
            k: v
            for k, v in opts.reader_kwargs().items()
            if k not in ("include_headers", "last_per_subject")
        }
        reader = client.read_kv(opts.kv, **kv_options)
    else:
        reader = client.read(
            opts.stream, subjects=list(subjects) if subjects else None, **opts.reader_kwargs()
        )
    try:
        for batch in reader:
            if batch.num_rows:
                yield conform(batch, target)
    finally:
        reader.close()
