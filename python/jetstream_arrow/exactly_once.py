"""Publishing numbered rows exactly once at any age, over a writer's position.

The rows of one writer are numbered (a file's rows, a partition's rows): row ``n``
has the msg id ``<prefix><n>``. [`NumberedRows`][] claims the writer's position
(see [`jetstream_arrow.positions`][]), skips the rows it says are stored and those
the read-back found after it, publishes the rest as one pipelined stream of
batches, and records the position after every ``position_rows`` rows once all of
them are acknowledged. The window drains once per position; that and one request
per position are the whole cost (benches: ``ja-publish-exactly-once``).
``CopiedRows`` does the same for a copy of a stream, its position a source
sequence. One module because both are writers over one claimed position, with its
state and claim in common, and move it the same way as their results come back.
"""

from __future__ import annotations

import re
import warnings
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from . import _core
from .exceptions import BadInputError
from .positions import Position, PositionedWriter, enable_command, holds_positions

#: The msg id column of the message schema.
MSG_ID = "msg_id"
#: A copy's id after its prefix: the source stream, sequence and digest, and the
#: repeat count of rows alike in everything (see the core's `copy_identity`).
_COPY_ID = re.compile(r"^(?P<stream>.+):(?P<seq>\d+):(?P<digest>[0-9a-f]{16})(?::\d+)?$")


@dataclass
class Sent:
    """One publish's result within an exactly-once write: ``first_row`` is the row
    number (counted from the write's ``start``) of its first row; ``contiguous``
    whether its rows are the rows from there on without gaps (rows the read-back
    found stored are left out of a result that is not)."""

    result: Any
    first_row: int
    contiguous: bool


def exactly_once_wanted(
    client: Any, stream: str, requested: bool | None, what: str, *, stacklevel: int = 3
) -> bool:
    """Whether a write into ``stream`` runs exactly once: ``requested`` True needs a
    stream that holds positions (refused, naming how to enable it); None (the
    default) means yes where the stream can, else the window only with one warning;
    False never. The warning names the frame ``stacklevel`` (counted as
    ``warnings.warn`` counts it from here; 3: the caller's caller), the user's code
    that asked for the write."""
    if requested is False:
        return False
    why = holds_positions(client.stream_info(stream))
    if why is None:
        return True
    if requested:
        raise BadInputError(
            f"{what}: option 'exactly_once' needs a stream that holds writers' positions, "
            f"and stream {stream!r} does not ({why}); enable it with {enable_command(stream)}"
        )
    warnings.warn(
        f"{what}: stream {stream!r} cannot hold writers' positions ({why}), so a re-run is "
        "exact only within its duplicate window; enable it with "
        f"{enable_command(stream)}",
        ExactlyOnceUnavailableWarning,
        stacklevel=stacklevel,
    )
    return False


class ExactlyOnceUnavailableWarning(UserWarning):
    """A write that would run exactly once at any age runs within the target
    stream's duplicate window only: the stream cannot hold writers' positions."""


class _PositionedRows:
    """What an exactly-once write of rows holds: the client, its msg ids' prefix and
    the rows' publisher options, the writer's identity (``positions``: its ids read
    back from ``read_back`` on) and the position it claimed."""

    def __init__(
        self,
        client: Any,
        stream: str,
        writer: str,
        msg_id_prefix: str,
        read_back: str,
        lease: float | None,
        publish_options: dict[str, Any],
    ) -> None:
        self.client = client
        self.prefix = msg_id_prefix
        self.publish_options = publish_options
        self.positions = PositionedWriter(client, stream, writer, id_prefix=read_back, lease=lease)
        self.position: Position | None = None
        #: Rows not sent because the stream holds them (before the position, or
        #: found after it by the read-back).
        self.skipped = 0

    def claim(self) -> Position:
        """Claim the writer's identity: its position and what the read-back found
        stored after it."""
        self.position = self.positions.claim()
        return self.position


class NumberedRows(_PositionedRows):
    """Publishes a writer's numbered rows exactly once into ``stream``.

    ``writer``: the identity; ``msg_id_prefix``: the ids are ``<prefix><n>``, ``n``
    counted from ``start`` (a load numbers its files' rows across them with
    ``--msg-id-prefix``); ``publish_options``: [`PublishOptions`][] fields for the
    rows' publisher (not ``msg_id_prefix``/``msg_id_start``, set here)."""

    def __init__(
        self,
        client: Any,
        stream: str,
        writer: str,
        msg_id_prefix: str,
        *,
        start: int = 0,
        position_rows: int | None = None,
        lease: float | None = None,
        **publish_options: Any,
    ) -> None:
        rows_per_position = int(
            _core.DEFAULT_POSITION_ROWS if position_rows is None else position_rows
        )
        if rows_per_position < 1:
            raise BadInputError(f"option 'position_rows' must be positive, got {position_rows}")
        super().__init__(
            client, stream, writer, msg_id_prefix, msg_id_prefix, lease, publish_options
        )
        self.start = start
        self.position_rows = rows_per_position

    def publish(self, batches: Iterable[pa.RecordBatch]) -> Iterator[Sent]:
        """Publish ``batches`` (the rows from ``start``, in order), yielding each
        publish's result. The position is closed after the last row; a failed row
        stops the write there (its result is the last yielded)."""
        position = self.position or self.claim()
        resume = max(position.next, self.start)
        stored = {
            int(i[len(self.prefix) :])
            for i in position.stored_ids
            if i[len(self.prefix) :].isdigit()
        }
        # Rows up to the last one found stored are sent one by one by id; after it,
        # the rows are contiguous and numbered by the publisher.
        uncertain_end = max(stored, default=resume - 1) + 1
        n = self.start
        tail: list[pa.RecordBatch] = []
        source = iter(batches)
        for batch in source:
            self.positions.keep_lease()
            first, n = n, n + batch.num_rows
            if n <= resume:
                self.skipped += batch.num_rows
                continue
            if first < resume:
                self.skipped += resume - first
                batch = batch.slice(resume - first)
                first = resume
            if first < uncertain_end:
                inside = min(n, uncertain_end) - first
                sent = self._send_found_gaps(batch.slice(0, inside), first, stored)
                if sent is not None:
                    if sent.result.failed:
                        # Released before the caller sees the failure (it may stop
                        # here): the next writer reads back from where this one began.
                        self.positions.release(resume)
                        yield sent
                        return
                    yield sent
                if inside == batch.num_rows:
                    continue
                batch, first = batch.slice(inside), first + inside
            tail.append(batch)
            break
        else:
            self.positions.close(max(n, resume))
            return
        if uncertain_end > resume:
            self.positions.advance(first)
        yield from self._send_contiguous(first, _leased(self.positions, _chain(tail, source)))

    def _send_found_gaps(self, batch: pa.RecordBatch, first: int, stored: set[int]) -> Sent | None:
        numbers = pa.array(range(first, first + batch.num_rows), pa.int64())
        keep = pc.invert(pc.is_in(numbers, pa.array(sorted(stored), pa.int64())))
        kept = batch.filter(keep)
        self.skipped += batch.num_rows - kept.num_rows
        if kept.num_rows == 0:
            return None
        ids = pc.binary_join_element_wise(self.prefix, pc.cast(numbers.filter(keep), pa.utf8()), "")
        kept = kept.append_column(MSG_ID, ids) if MSG_ID not in kept.schema.names else kept
        result = self.client.publish(kept, raise_on_error=False, **self.publish_options)
        return Sent(result, first, contiguous=False)

    def _send_contiguous(self, first: int, batches: Iterator[pa.RecordBatch]) -> Iterator[Sent]:
        n = first
        with self.client.publisher(
            msg_id_prefix=self.prefix,
            msg_id_start=first,
            raise_on_error=False,
            **self.publish_options,
        ) as publisher:
            for result in publisher.publish_batches(batches, rows_per_result=self.position_rows):
                if result.failed:
                    # Every row sent is resolved: free the identity, and have the next
                    # writer read back after the first failed row (released before the
                    # caller sees the failure, as it may stop here).
                    failed = result.failed_rows().column("row")
                    self.positions.release(n + int(pc.min(failed).as_py()))
                    yield Sent(result, n, contiguous=True)
                    return
                self.positions.advance(n + result.rows)
                yield Sent(result, n, contiguous=True)
                n += result.rows
        self.positions.close(n)


def _leased(
    positions: PositionedWriter, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``batches``, each handed on only while the writer holds its identity: its
    position is written again once half its lease is gone (a slow input, a slow
    server), and a writer taken over meanwhile stops here, before sending more."""
    for batch in batches:
        positions.keep_lease()
        yield batch


def _chain(head: list[pa.RecordBatch], rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from head
    yield from rest


class CopiedRows(_PositionedRows):
    """Publishes a copy of a stream (rows read with their ``stream`` and ``seq``
    columns, in source order) exactly once into ``stream``: the writer's position
    is the next source sequence, and the read-back finds the copies stored after it
    by their ids, ``<prefix><source stream>:<seq>:<digest>``, which the core gives
    every copied row. ``writer``: the identity (one per source stream and target);
    ``msg_id_prefix``: the copy ids' prefix, if any ("" for none); ``source``: the
    source stream, when known, so the read-back collects only its copies.

    The rows of one source message (an explode) are kept in one batch, so a
    position never falls between them. Of a message whose copies the read-back
    found after the position, the first as many rows as were found are taken as
    stored: its rows are sent in order, so this is exact unless a crash fell while
    a resend (after a ``429`` or an ack timeout) had put them out of order."""

    def __init__(
        self,
        client: Any,
        stream: str,
        writer: str,
        msg_id_prefix: str = "",
        *,
        source: str | None = None,
        lease: float | None = None,
        **publish_options: Any,
    ) -> None:
        read_back = f"{msg_id_prefix}{source}:" if source is not None else msg_id_prefix
        super().__init__(client, stream, writer, msg_id_prefix, read_back, lease, publish_options)
        self.source = source

    def stored_source_seqs(self) -> dict[int, int]:
        """How many copies of each source sequence the read-back found after the
        position."""
        position = self.position or self.claim()
        found: dict[int, int] = {}
        for copy_id in position.stored_ids:
            match = _COPY_ID.match(copy_id[len(self.prefix) :])
            if match is not None and self.source in (None, match["stream"]):
                seq = int(match["seq"])
                found[seq] = found.get(seq, 0) + 1
        return found

    def publish(self, batches: Iterable[pa.RecordBatch], *, close: bool = True) -> Iterator[Sent]:
        """Publish the copied rows of ``batches`` not yet in the stream, yielding each
        publish's result; the position follows the source sequences acknowledged.
        ``close``: free the identity after the last row (a copy that goes on later,
        such as a streaming query's next micro-batch, keeps it). The rows the
        stream holds ([`held_copies`][]) are left out."""
        position = self.position or self.claim()
        found = self.stored_source_seqs()
        # (rows, highest source sequence) of each batch handed to the publisher, so
        # that each result, made of whole batches, tells how far the copy got; the
        # rows held already count too (they are stored): the position passes them.
        handed: deque[tuple[int, int]] = deque()
        seen = [position.next]  # past the highest source sequence taken from the input

        def remaining() -> Iterator[pa.RecordBatch]:
            for batch in _leased(self.positions, _whole_messages(batches)):
                top = int(pc.max(pc.cast(batch.column("seq"), pa.uint64())).as_py())
                seen[0] = max(seen[0], top + 1)
                held = held_copies(batch.column("seq"), position.next, found)
                kept = batch.filter(pc.invert(held))
                self.skipped += batch.num_rows - kept.num_rows
                if kept.num_rows:
                    handed.append((kept.num_rows, top))
                    yield kept

        next_seq = position.next
        with self.client.publisher(
            msg_id_prefix=self.prefix or None, raise_on_error=False, **self.publish_options
        ) as publisher:
            for result in publisher.publish_batches(
                remaining(), rows_per_result=_core.DEFAULT_POSITION_ROWS
            ):
                if result.failed:
                    self.positions.release(next_seq)
                    yield Sent(result, next_seq, contiguous=False)
                    return
                first_seq = next_seq
                rows = 0
                while rows < result.rows and handed:
                    n, top = handed.popleft()
                    rows += n
                    next_seq = max(next_seq, top + 1)
                self.positions.advance(next_seq)
                yield Sent(result, first_seq, contiguous=False)
        if close:
            # Every row taken from the input is stored now: sent and acknowledged, or
            # held already.
            self.positions.close(max(next_seq, seen[0]))


def _whole_messages(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` re-cut so that the rows of one source message are in one batch
    (the last message's rows of a batch held back for the next), checked to be in
    source order: a position says every message before it is copied."""
    carry: pa.RecordBatch | None = None
    last = -1
    for batch in batches:
        if batch.num_rows == 0:
            continue
        seqs = pc.cast(batch.column("seq"), pa.int64())
        first = seqs[0].as_py()
        steps = pc.less(seqs.slice(1), seqs.slice(0, len(seqs) - 1))
        if first is None or first < last or pc.any(steps).as_py() or seqs.null_count:
            raise BadInputError(
                "an exactly-once copy takes its rows in source order: column 'seq' "
                f"goes back (to {first} after {last}) or is null; read the source in "
                "order, without a shuffle between the read and the write"
            )
        if carry is not None and carry.num_rows:
            if first != last:
                # The held-back message ended with its batch: handed on as it is,
                # without copying this batch's rows behind it.
                yield carry
            else:
                # It goes on here (an explode cut by the batch size): one batch.
                batch = pa.Table.from_batches([carry, batch]).combine_chunks().to_batches()[0]
                seqs = pc.cast(batch.column("seq"), pa.int64())
        last = seqs[-1].as_py()
        tail = pc.equal(seqs, last)
        cut = len(seqs) - int(pc.sum(pc.cast(tail, pa.int64())).as_py())
        if cut:
            yield batch.slice(0, cut)
        carry = batch.slice(cut)
    if carry is not None and carry.num_rows:
        yield carry


def held_copies(seq: pa.Array, next_seq: int, found: dict[int, int]) -> pa.Array:
    """Which copied rows the stream holds already, by their source sequences
    ``seq`` (rows in source order, each message's rows together): those before the
    position ``next_seq``, and the first ``found[s]`` rows of each source sequence
    ``s`` the read-back found after it."""
    seqs = pc.cast(seq, pa.uint64())
    held = pc.less(seqs, pa.scalar(next_seq, pa.uint64()))
    if not found:
        return held
    candidates = pc.is_in(seqs, pa.array(sorted(found), pa.uint64()))
    if not pc.any(candidates).as_py():
        return held
    mask = held.to_pylist()
    taken: dict[int, int] = {}
    for i in pc.indices_nonzero(candidates).to_pylist():
        s = seqs[i].as_py()
        taken[s] = taken.get(s, 0) + 1
        if taken[s] <= found[s]:
            mask[i] = True
    return pa.array(mask, pa.bool_())


__all__ = [
    "CopiedRows",
    "ExactlyOnceUnavailableWarning",
    "NumberedRows",
    "Sent",
    "exactly_once_wanted",
    "held_copies",
]
