"""Spark writes exactly once at any age (option ``exactlyOnce``): whether a write
keeps positions, decided on the driver before any task runs, and a task's rows
published over its position (:mod:`jetstream_arrow.exactly_once`).

Each task is one writer. Its identity is made of the same things as its msg ids
(:class:`ExactlyOnceTask`): a batch task's is its msg id prefix ``<writeId>-<partition>-``,
stable across re-runs with the same ``writeId``; a copy's names its source stream and
the part of it the task copies, as its position is a source sequence; a streaming
task's is the query id (kept in the checkpoint) and its partition. The publishing
itself, its read-ahead and its tally are :mod:`.writing`'s, which calls
:func:`publish_exactly_once` for a task that keeps a position.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..exactly_once import CopiedRows, ExactlyOnceUnavailableWarning, NumberedRows
from ..exceptions import BadInputError, JetStreamArrowError
from ..kv import KvColumns
from ..positions import enable_command, holds_positions, position_subject
from .columns import PublishColumns
from .connection_cache import get_client
from .options import WriteOptions
from .stream_lookup import PATIENCE

if TYPE_CHECKING:
    from .writing import PublishTally, WriteColumns


def exactly_once_planned(opts: WriteOptions, columns: WriteColumns, what: str) -> bool:
    """On the driver, before any task runs: whether the write's tasks keep positions
    (option ``exactlyOnce``). ``true`` where they cannot is refused, naming the option
    and how to make the stream hold positions; the default there writes as before,
    exact within the duplicate window, with one warning. ``what`` names the write."""
    planned = _planned(opts, columns, what)
    if not planned and opts.writer_lease is not None:
        raise BadInputError(
            f"{what}: option 'writerLease' is for tasks that keep positions, and this "
            "write keeps none (exactlyOnce=false, or its stream cannot hold them): drop it"
        )
    return planned


def _planned(opts: WriteOptions, columns: WriteColumns, what: str) -> bool:
    """Whether the write's tasks keep positions (see ``exactly_once_planned``)."""
    requested = opts.exactly_once
    if requested is False:
        return False
    not_for = _exactly_once_not_for(opts, columns)
    if not_for is not None:
        # Not a stream's rows numbered or copied by this package: nothing to warn of.
        if requested:
            raise BadInputError(
                f"{what}: option 'exactlyOnce' does not go with {not_for}; give "
                "exactlyOnce=false (the write is then exact within the stream's "
                "duplicate window)"
            )
        return False
    stream = opts.expected_stream
    if stream is None:
        if requested:
            raise BadInputError(
                f"{what}: option 'exactlyOnce' needs the stream the rows go to, named by "
                "option 'stream' (or 'expectedStream', or the path given to save()): each "
                "task keeps its position there"
            )
        _warn_window_only(
            f"{what}: no stream is named (option 'stream'), so the write cannot keep "
            "positions and a re-run or retry is exact only within the duplicate window; "
            "name the stream (made with create_stream(..., exactly_once=True)) to write "
            "exactly once at any age"
        )
        return False
    client = get_client(opts.connect)
    why = holds_positions(client.stream_info(stream, resume_timeout=PATIENCE))
    if why is None:
        return True
    if requested:
        raise BadInputError(
            f"{what}: option 'exactlyOnce' needs a stream that holds writers' positions, "
            f"and stream {stream!r} does not ({why}); enable it with "
            f"{enable_command(stream)}, or give exactlyOnce=false"
        )
    _warn_window_only(
        f"{what}: stream {stream!r} cannot hold writers' positions ({why}), so a re-run "
        "or retry is exact only within its duplicate window; enable exactly once at any "
        f"age (option 'exactlyOnce') with {enable_command(stream)}"
    )
    return False


def _exactly_once_not_for(opts: WriteOptions, columns: WriteColumns) -> str | None:
    """What makes a write one whose tasks cannot keep positions, or None."""
    if isinstance(columns, KvColumns) or opts.kv is not None:
        return "option 'kv' (a write into a KV bucket)"
    if columns.increment is not None:
        return f"counter increments (column {columns.increment!r})"
    if columns.msg_id is not None:
        # A task finds what it stored after its position by the ids it makes itself.
        return (
            f"rows that carry their own msg ids (column {columns.msg_id!r}; option "
            "'msgIdColumn' or a 'msg_id' column)"
        )
    return None


def _warn_window_only(message: str) -> None:
    warnings.warn(message, ExactlyOnceUnavailableWarning, stacklevel=3)


@dataclass(frozen=True)
class ExactlyOnceTask:
    """How a write task keeps its position in the target stream (option
    ``exactlyOnce``; see :mod:`jetstream_arrow.exactly_once`).

    Rows numbered by position: ``writer`` is the identity, the task's msg id prefix,
    and the rows are numbered from ``start``. A copy of a stream (``stream`` and
    ``seq`` columns): ``copy_writer(source stream, first source seq)`` is the
    identity, made when the first row is seen; its position is the next source
    sequence, so the identity names a part of the source no other task of the write
    copies at the same time."""

    writer: str
    start: int = 0
    copy_writer: Callable[[str, int], str] | None = None


class SkippedRows:
    """The rows an exactly-once task did not send because the stream holds them:
    counted into the tally as duplicates (the rows a retry within the window would
    have found duplicates)."""

    def __init__(self) -> None:
        self.rows: Any = None  # the NumberedRows or CopiedRows, once made
        self.counted = 0

    def count_into(self, tally: PublishTally) -> None:
        now = 0 if self.rows is None else int(self.rows.skipped)
        tally.rows += now - self.counted
        tally.duplicates += now - self.counted
        self.counted = now
        if self.rows is not None:
            tally.writer = self.rows.positions.writer


def publish_exactly_once(
    client: Any,
    opts: WriteOptions,
    columns: WriteColumns,
    batches: Iterator[pa.RecordBatch],
    msg_id_prefix: str,
    task: ExactlyOnceTask,
    options: dict[str, Any],
    skipped: SkippedRows,
) -> Iterator[Any]:
    """The task's rows over its position: claimed when the first row is there (an
    empty task keeps none), closed after the last."""
    first = next(batches, None)
    if first is None:
        return
    source_failed = _InputFailure()
    rows_in = source_failed.watched(itertools.chain([first], batches))
    stream = opts.expected_stream
    assert stream is not None, "exactly_once_planned refuses a write without a stream"
    publish_options = {k: v for k, v in options.items() if v is not None}
    lease = opts.writer_lease
    rows: CopiedRows | NumberedRows
    if isinstance(columns, PublishColumns) and columns.is_copy:
        assert task.copy_writer is not None
        source = first.column("stream")[0].as_py()
        first_seq = first.column("seq")[0].as_py()
        if source is None or first_seq is None:
            raise _out_of_order(0, "its stream or seq is null")
        rows = CopiedRows(
            client,
            stream,
            task.copy_writer(source, int(first_seq)),
            msg_id_prefix,
            source=source,
            lease=lease,
            **publish_options,
        )
        sent = rows.publish(_in_source_order(rows_in, source))
    else:
        rows = NumberedRows(
            client,
            stream,
            task.writer,
            msg_id_prefix,
            start=task.start,
            lease=lease,
            **publish_options,
        )
        sent = rows.publish(rows_in)
    skipped.rows = rows
    try:
        for one in sent:
            yield one.result
    except BaseException:
        if source_failed.failed:
            # The task's input failed (a Spark error upstream, a UDF): the publisher
            # raises that only after every row before it is resolved and the position
            # moved past those acknowledged, so the identity is freed at once and
            # Spark's retry of the task does not wait out the lease. It reads back
            # after that position, as rows after a failed one may be stored.
            with contextlib.suppress(JetStreamArrowError):
                rows.positions.release(rows.positions.next)
        raise


class _InputFailure:
    """Whether a task's input raised (as opposed to its publishing)."""

    def __init__(self) -> None:
        self.failed = False

    def watched(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            yield from batches
        except BaseException:
            self.failed = True
            raise


def _in_source_order(batches: Iterator[pa.RecordBatch], source: str) -> Iterator[pa.RecordBatch]:
    """A copy's rows, checked to come from ``source`` in its order: the position is
    the next source sequence, which says every row before it is stored only when no
    earlier one comes after it."""
    last = 0
    row = 0
    for batch in batches:
        streams = batch.column("stream")
        seqs = pc.cast(batch.column("seq"), pa.int64())
        if streams.null_count or seqs.null_count:
            nulls = pc.or_(pc.is_null(streams), pc.is_null(seqs))
            raise _out_of_order(
                row + int(pc.index(nulls, True).as_py()), "its stream or seq is null"
            )
        other = pc.not_equal(streams, source)
        if pc.any(other).as_py():
            at = int(pc.index(other, True).as_py())
            raise _out_of_order(
                row + at, f"it comes from stream {streams[at].as_py()!r}, after {source!r}"
            )
        # Each row's seq against the one before it (the previous batch's last first).
        before = pa.concat_arrays([pa.array([last], pa.int64()), seqs.slice(0, len(seqs) - 1)])
        back = pc.less(seqs, before)
        if pc.any(back).as_py():
            at = int(pc.index(back, True).as_py())
            raise _out_of_order(
                row + at, f"its seq {seqs[at].as_py()} comes after seq {before[at].as_py()}"
            )
        last = seqs[len(seqs) - 1].as_py()
        row += batch.num_rows
        yield batch


def forget_positions(opts: WriteOptions, writers: list[str]) -> None:
    """Remove the positions of a committed write's tasks: a write under a random
    `writeId` is never run again, so they would only pile up in the stream (one per
    task). Best effort: a position left behind costs one message, nothing else."""
    stream = opts.expected_stream
    if not writers or stream is None:
        return
    client = get_client(opts.connect)
    for writer in dict.fromkeys(writers):
        try:
            client.purge_stream(stream, subject=position_subject(stream, writer))
        except JetStreamArrowError as err:
            logging.getLogger("jetstream_arrow.spark").warning(
                "the position of writer %r was left in stream %r: %s", writer, stream, err
            )


def _out_of_order(row: int, why: str) -> BadInputError:
    return BadInputError(
        f"row {row} of this task's input: option 'exactlyOnce' copies a stream by its "
        "sequences, so each task's rows must come from one source stream in its order "
        f"(as a read hands them over, without a shuffle), and {why}; give exactlyOnce=false "
        "to copy them exact within the duplicate window, or select the 'stream' and 'seq' "
        "columns away to number the rows by position"
    )
