"""The sink: read each stream on from the position its target holds, batch by batch,
and commit the rows with the new positions every ``commit_rows`` rows or
``commit_seconds`` seconds. A work-queue or interest stream, whose messages go once
acknowledged, is consumed through a durable pull consumer instead (see ``queue.py``),
its messages acknowledged after the commit that holds them. It is one module, the
sink one type, because its steps (read, consume, land, commit, acknowledge: its
methods) share the state of one run: the rows pending, the positions and the totals.
What they use apart from that state lives beside it: the options (``settings.py``),
the rows pending (``pending.py``), the value schema (``value_schema.py``), the work
queue (``queue.py``), the dead letters (``dead_letters.py``), the target (``target.py``).

Memory is bounded by one commit: a read's batches are at most ``commit_rows`` rows,
and the rows pending are committed before a batch that would take them past it.
Nothing but the target holds a position: after a crash the rows read and not
committed are read again, and the rows committed are not.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

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
from .pending import Pending
from .queue import QUEUE_RETENTIONS, QueueReader, open_queue
from .rows import SplitBatch, concat_refusing_conflicts, partition_column, split
from .settings import SinkSettings
from .target import Target
from .value_schema import ValueSchemas, landable

#: A following sink looks for new messages this often when it has caught up.
FOLLOW_POLL_SECONDS = 0.5
#: A work queue that delivers nothing while it holds messages is asked again after this.
QUEUE_HELD_BACK_SECONDS = 0.05
#: Unless following, a work queue that delivers nothing while it holds messages for
#: ``commit_seconds`` (at least this) fails the run: paused, or held by another client.
QUEUE_HELD_BACK_MIN_SECONDS = 1.0

#: The message columns a partition column is made from, with no rows.
_EMPTY_MESSAGES = pa.table(
    {"subject": pa.array([], pa.string()), "timestamp": pa.array([], pa.timestamp("us", "UTC"))}
)


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


class Sink:
    """One run of a sink from ``client``'s streams into ``target``, with checked
    ``settings``: made, it has asked the server and the target where each stream
    stands (and refused what cannot be landed); :meth:`run` lands until caught up,
    or with ``follow`` until ``stop`` is set."""

    def __init__(
        self,
        client: Any,
        target: Target,
        settings: SinkSettings,
        stop: threading.Event | None = None,
        on_progress: Callable[[SinkProgress], None] | None = None,
    ) -> None:
        self.client = client
        self.target = target
        self.settings = settings
        self.names = settings.names
        self.on_progress = on_progress
        self.patience = Patience(client, settings.resume_timeout)
        dead_letter_stream = settings.dead_letter_stream
        self.dead_subject = (
            dead_letter_subject(
                client, dead_letter_stream, "option 'dead_letter_stream'", settings.resume_timeout
            )
            if dead_letter_stream is not None
            else None
        )
        self.stop = stop or threading.Event()
        self.started = time.monotonic()
        infos = {s: self.patience.stream_info(s) for s in self.names}
        #: Each stream's last sequence as of its last look: where a run that does not
        #: follow ends.
        self.last_seqs = {s: int(infos[s].state.last_seq) for s in self.names}
        self.schemas = ValueSchemas(
            client, settings.codecs, settings.filters, settings.resume_timeout
        )
        queued = self._queued(infos)
        #: The last sequence the target holds, per stream.
        self.committed = target.positions(self.names)
        # When each stream was created: recorded with every position a commit moves, so
        # that a stream deleted and made again is told from the one landed (origin.py).
        self.created = {s: created_ns(infos[s]) for s in self.names}
        # Who reads each stream, in its dead letters' ids: two sinks sharing a dead-letter
        # stream, or a stream made again landed anew, must not drop each other's letters.
        self.readers = {s: reader_tag(target.identity, self.created[s]) for s in self.names}
        self.dead_positions = self._dead_letter_positions()
        self._check_positions()
        #: The last sequence read, per stream: committed, or pending.
        self.read_to = dict(self.committed)
        self.queues = self._open_queues(queued)
        self.pending = Pending()
        self.landed_rows = 0
        self.landed_bytes = 0
        self.dead_letters_published = 0
        self.commits = 0

    def _dead_letter_positions(self) -> DeadLetterPositions | None:
        """Where the dead-letter stream keeps writers' positions, each stream's letters
        stored once at any age (None: no dead-letter stream, or it keeps none)."""
        dead_letter_stream = self.settings.dead_letter_stream
        # The warning of a stream that keeps none names the code that called run_sink:
        # exactly_once_wanted <- here <- Sink() <- run_sink <- that code.
        if dead_letter_stream is None or not exactly_once_wanted(
            self.client,
            dead_letter_stream,
            None,
            f"dead letters into stream {dead_letter_stream!r}",
            stacklevel=5,
        ):
            return None
        return DeadLetterPositions(
            self.client, dead_letter_stream, self.readers, self.settings.dead_letter_lease
        )

    def _open_queues(self, queued: list[str]) -> dict[str, QueueReader]:
        """The durable consumer's reader of each work-queue stream."""
        settings = self.settings
        queues: dict[str, QueueReader] = {}
        for stream in queued:
            assert settings.durable is not None
            queues[stream] = open_queue(
                self.patience,
                stream,
                settings.durable,
                subjects=settings.filters.get(stream),
                commit_rows=settings.commit_rows,
                commit_seconds=settings.commit_seconds,
                batch_rows=settings.rows_per_batch,
            )
        return queues

    def _queued(self, infos: dict[str, Any]) -> list[str]:
        """The streams consumed through the durable consumer (work-queue or interest
        retention); refused without one, as the consumer is refused without them."""
        queued = [s for s in self.names if infos[s].config.retention in QUEUE_RETENTIONS]
        durable = self.settings.durable
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
        return queued

    def _check_positions(self) -> None:
        """Refuse a target that holds another stream of the same name than the one
        the server has now."""
        recorded = self.target.created(self.names)
        for stream in self.names:
            committed = self.committed[stream]
            check_same_stream(
                self.target, stream, recorded[stream], self.created[stream], committed
            )
            if committed > self.last_seqs[stream]:
                # Sequences only grow: the stream was made again under the same name, and
                # its messages up to the old position would be skipped without a word.
                raise BadInputError(
                    f"{self.target!r} holds stream {stream} up to sequence {committed}, "
                    f"but the stream's last sequence is {self.last_seqs[stream]}: it is not "
                    "the stream landed there (made again?); land it into another table"
                )

    def run(self) -> SinkReport:
        """Land until every stream is caught up (with ``follow``: until ``stop`` is
        set), commit what is pending, and say what was done."""
        follow = self.settings.follow
        while not self.stop.is_set():
            caught_up = self._read_each_stream()
            if self._due() or (caught_up and not follow) or self._full():
                self.commit()
            if caught_up and not follow:
                break
            if caught_up:
                wait = FOLLOW_POLL_SECONDS
                if self.pending.since is not None:
                    due_in = self.pending.since + self.settings.commit_seconds - time.monotonic()
                    wait = min(wait, max(due_in, 0.0))
                self.stop.wait(wait)
        self.commit()
        if self.dead_positions is not None:
            self.dead_positions.close()
        return SinkReport(
            rows=self.landed_rows,
            dead_letters=self.dead_letters_published,
            commits=self.commits,
            positions=dict(self.committed),
            stopped=self.stop.is_set(),
            seconds=time.monotonic() - self.started,
        )

    def _read_each_stream(self) -> bool:
        """Read each stream once on from where the sink is; whether all are caught up
        (a work queue: has nothing more to deliver now)."""
        drained: dict[str, bool] = {}
        for stream in self.names:
            if self.stop.is_set():
                break
            if self.settings.follow:
                self._look(stream)
            if stream in self.queues:
                drained[stream] = self._consume(stream, self.queues[stream])
            else:
                self._read_range(stream)
        return all(drained.get(s, self.read_to[s] >= self.last_seqs[s]) for s in self.names)

    def _read_range(self, stream: str) -> None:
        """Read the stream by range from where the sink is to its last sequence as of
        the last look, landing each batch."""
        end = self.last_seqs[stream]
        if self.read_to[stream] >= end:
            return
        try:
            reader = self.client.read(
                stream,
                start_seq=self.read_to[stream] + 1,
                end_seq=end,
                subjects=self.settings.filters.get(stream),
                codec=self.schemas.codecs[stream],
                include_headers=self.settings.read_headers,
                batch_rows=self.settings.rows_per_batch,
                resume_timeout=self.settings.resume_timeout,
            )
        except NothingToInferError:
            self._pass_undecodable_sample(stream, end)
            return
        try:
            with reader:
                self.schemas.keep_inferred(stream, reader)
                for batch in reader:
                    if batch.num_rows == 0:
                        continue
                    self._land(stream, batch)
                    if self.stop.is_set():
                        break
                else:
                    # The range is read: messages of other subjects up to its end are
                    # behind the sink too.
                    if end > self.read_to[stream]:
                        self.pending.reach(stream, end)
                        self.read_to[stream] = end
        except NewFieldError as e:
            # The schema lacks a field of message e.seq (its batch was not handed out):
            # grow it by a schema inferred from there, and read on.
            self._grow(stream, e)

    def _look(self, stream: str) -> None:
        """Take the stream's last sequence now; a stream deleted and made again
        meanwhile ends the sink, after it commits what it read of the old one."""
        info = self.patience.stream_info(stream)
        now = created_ns(info)
        created = self.created[stream]
        if created is not None and now is not None and now != created:
            self.commit()
            check_same_stream(self.target, stream, created, now, self.committed[stream])
        self.last_seqs[stream] = int(info.state.last_seq)

    def _due(self) -> bool:
        return self.pending.due(self.settings.commit_seconds)

    def _full(self) -> bool:
        return self.pending.count >= self.settings.commit_rows

    def _make_room(self, rows: int) -> None:
        """Commit first when ``rows`` more would take the rows pending past
        ``commit_rows``."""
        if self.pending.count + rows > self.settings.commit_rows:
            self.commit()

    def _hold(self, stream: str, batch: SplitBatch) -> None:
        """Add rows read to the rows pending, committing after when they reach
        ``commit_rows`` or are due."""
        self.pending.add(stream, batch)
        self.read_to[stream] = self.pending.positions[stream]
        self._progress()
        if self._full() or self._due():
            self.commit()

    def _land(self, stream: str, batch: pa.RecordBatch) -> None:
        """Add a batch read to the rows pending, committing first when they would
        grow past ``commit_rows`` and after when they reach it or are due."""
        self._make_room(batch.num_rows)
        partitions, include_headers = self.settings.partitions, self.settings.include_headers
        self._hold(stream, split(landable(batch), partitions, include_headers))

    def _pass_undecodable_sample(self, stream: str, end: int) -> None:
        """Move past what kept a read from inferring the value schema: a range with no
        message of the read's subjects is behind the sink; payloads that do not decode
        (JSON: are not objects), up to the first that does, are malformed (sent to the
        dead-letter stream, or stopping the sink as a malformed payload does). The range
        is read again from there."""
        sample = self.schemas.undecodable_sample(
            stream, self.read_to[stream] + 1, end, self.settings.rows_per_batch
        )
        if sample.messages is None:
            self.pending.reach(stream, end)
            self.read_to[stream] = end
            return
        if self.settings.dead_letter_stream is None:
            value_format = self.schemas.codec(stream).format
            raise MalformedPayloadError(
                f"stream {stream!r} seq {sample.messages.column('seq')[0].as_py()}: the "
                f"payload is not "
                f"{'a JSON object' if value_format == 'json' else 'an Arrow IPC stream'}, and no "
                "value schema can be inferred from the messages sampled; give the sink a "
                "dead-letter stream (option 'dead_letter_stream', --dead-letter-stream) to "
                "set such payloads aside"
            )
        malformed = as_malformed(
            sample.messages, sample.reasons, ["stream", "subject", "seq", "data"]
        )
        self._make_room(malformed.num_rows)
        self._hold(stream, SplitBatch(pa.table({}), malformed, sample.through))

    def _grow(self, stream: str, error: NewFieldError, queue: QueueReader | None = None) -> None:
        self.schemas.grow(stream, error, self.last_seqs[stream], queue)

    def _set_aside(self, stream: str, delivered: Any) -> None:
        """Hold the work queue's ``delivered`` messages, none of which decodes, as
        malformed (dead letters), acknowledged with the commit that moves past them;
        as ``_consume`` does, what a run that died before its acks committed is
        acknowledged now, and what this run holds pending already is skipped."""
        data = pa.Table.from_batches([QueueReader.rows(delivered)])
        seqs = data.column("seq")
        if int(pc.max(seqs).as_py()) <= self.committed[stream]:
            delivered.ack()
            return
        kept = ["stream", "subject", "seq", "data"]
        if "headers" in data.column_names:
            kept.append("headers")
        new = data.filter(pc.greater(seqs, self.read_to[stream]))
        reasons = no_value_reasons(self.schemas.codec(stream), stream, new)
        malformed = as_malformed(new, reasons, kept)
        self._make_room(malformed.num_rows)
        self.pending.acks.append(delivered)
        if malformed.num_rows:
            through = int(pc.max(malformed.column("seq")).as_py())
            self._hold(stream, SplitBatch(pa.table({}), malformed, through))

    def _consume(self, stream: str, queue: QueueReader) -> bool:
        """Take what the work queue delivers, up to about a commit's rows; whether it
        has nothing more to deliver now (or, unless following, the sink has reached
        the stream's last sequence when it started)."""
        settings = self.settings
        taken = 0
        held_back_since: float | None = None
        while not self.stop.is_set() and taken < settings.commit_rows:
            room = max(min(settings.rows_per_batch, settings.commit_rows - self.pending.count), 1)
            try:
                self.schemas.codecs[stream], undecodable = queue.typed(
                    room,
                    self.schemas.codecs[stream],
                    settings.read_headers,
                    set_aside=settings.dead_letter_stream is not None,
                )
                if undecodable is not None:
                    # No payload of the sample decodes, so no schema: dead letters,
                    # as a read by range passes them (_pass_undecodable_sample).
                    taken += len(undecodable)
                    self._set_aside(stream, undecodable)
                    continue
                delivered = queue.fetch(room, self.schemas.codecs[stream], settings.read_headers)
            except NewFieldError as e:
                # The pull's messages hold a field the schema lacks: handed out to no
                # one, acknowledged by no one, they come again from the ack floor and
                # decode with the grown schema.
                self._grow(stream, e, queue)
                continue
            if delivered is None:
                waiting = queue.pending()
                if settings.follow or waiting == 0:
                    return True
                held_back_since = self._held_back(stream, queue, waiting, held_back_since)
                continue
            held_back_since = None
            taken += len(delivered)
            self._take_delivered(stream, delivered)
            if not settings.follow and self.read_to[stream] >= self.last_seqs[stream]:
                return True
        return False

    def _held_back(
        self, stream: str, queue: QueueReader, waiting: int, since: float | None
    ) -> float:
        """Wait a little for a work queue that holds ``waiting`` messages and delivers
        none, held back ``since`` then (None: until now); when it is since
        ``commit_seconds`` the run fails rather than wait on. The time it is held
        back since."""
        # Held back, not drained: the consumer's unacknowledged messages are at its
        # max_ack_pending, or acks the server has not applied yet count.
        self.commit()
        now = time.monotonic()
        if since is None:
            since = now
        elif now - since >= max(self.settings.commit_seconds, QUEUE_HELD_BACK_MIN_SECONDS):
            # Paused, or another client holds what it may deliver: waiting on would
            # never end, and the run was asked to end once caught up.
            raise OperationTimeoutError(
                f"consumer {queue.consumer.name!r} of stream {stream} reports "
                f"{waiting} messages pending but delivered none for "
                f"{now - since:.1f} s: it is paused, or another client "
                "holds its unacknowledged messages (max_ack_pending); resume it, "
                "or run the sink with --follow to wait"
            )
        self.stop.wait(QUEUE_HELD_BACK_SECONDS)
        return since

    def _take_delivered(self, stream: str, delivered: Any) -> None:
        """Land what the work queue delivered, to be acknowledged with the commit that
        holds it; what the target or the rows pending hold already is not landed again."""
        data = QueueReader.rows(delivered)
        seqs = data.column("seq")
        if int(pc.max(seqs).as_py()) <= self.committed[stream]:
            # Committed by a run that died before its acks: done already.
            delivered.ack()
            return
        # A message delivered again at or below what this run has read is pending
        # already (its ack wait ran out): it is acknowledged with the next commit.
        fresh = data.filter(pc.greater(seqs, self.read_to[stream]))
        # Before the batch's acks join the pending ones: a commit acknowledges only
        # what it holds.
        self._make_room(fresh.num_rows)
        self.pending.acks.append(delivered)
        if fresh.num_rows:
            self._land(stream, fresh)

    def commit(self) -> None:
        """Commit the rows pending, with the positions they reach, into the target
        (their dead letters published first), then acknowledge the work-queue
        deliveries they hold."""
        pending = self.pending
        if not pending.positions:
            self._acknowledge(pending.acks)
            pending.acks = []
            return
        if pending.malformed:
            self._publish_dead_letters()
        rows = (
            concat_refusing_conflicts(pending.rows, f"streams {sorted(pending.positions)}")
            if pending.rows
            else None
        )
        if rows is None:
            # Only positions (and dead letters): the partition columns too, which a
            # new partitioned table is created with.
            rows = pa.table({"stream": pa.array([], pa.string())})
            for name in self.settings.partitions:
                rows = rows.append_column(name, partition_column(_EMPTY_MESSAGES, name))
        self.target.commit(
            rows,
            pending.positions,
            self.settings.partitions,
            recorded_for(pending.positions, self.created),
        )
        self.committed.update(pending.positions)
        self.landed_rows += rows.num_rows
        self.landed_bytes += rows.nbytes
        self.commits += 1
        self.pending = Pending()
        self._progress()
        self._acknowledge(pending.acks)

    def _publish_dead_letters(self) -> None:
        """Publish the malformed payloads pending to the dead-letter stream, and move
        its writers' positions past them (where it keeps them), before the commit
        that moves the streams' positions past them."""
        dead_letter_stream = self.settings.dead_letter_stream
        assert dead_letter_stream is not None and self.dead_subject is not None
        pending = self.pending
        published = 0
        for malformed, stream in pending.malformed:
            letters = dead_letters(
                malformed,
                error_texts(malformed),
                self.dead_subject,
                content_encodings(self.client, malformed),
                self.readers,
            )
            if self.dead_positions is not None:
                # Those a run that died before its commit stored already.
                letters = self.dead_positions.unsent(stream, letters, malformed)
            # Published again after a failure, a letter stored already is a duplicate
            # of its msg id, dropped by the server.
            if letters.num_rows:
                self.patience.call(
                    dead_letter_stream,
                    f"publish to dead-letter stream {dead_letter_stream}",
                    functools.partial(
                        self.client.publish, letters, expected_stream=dead_letter_stream
                    ),
                )
            published += malformed.num_rows
        if self.dead_positions is not None:
            # Every letter up to this commit's positions is stored: said before the
            # commit, so a run that dies before it does not send them again.
            for stream in sorted({stream for _, stream in pending.malformed}):
                self.patience.call(
                    dead_letter_stream,
                    f"position of dead letters in stream {dead_letter_stream}",
                    functools.partial(
                        self.dead_positions.advance, stream, pending.positions[stream] + 1
                    ),
                )
        self.dead_letters_published += published

    def _acknowledge(self, acks: list[Any]) -> None:
        """Acknowledge work-queue deliveries the target holds: a crash before this
        only makes them come again, at or below the position, and be skipped."""
        for delivered in acks:
            delivered.ack()
        if acks:
            self.patience.call(self.names[0], "flush of acks", self.client.flush)

    def _progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(
                SinkProgress(
                    rows=self.landed_rows,
                    bytes=self.landed_bytes,
                    dead_letters=self.dead_letters_published,
                    commits=self.commits,
                    pending=self.pending.count,
                    positions=dict(self.committed),
                    lag={s: max(self.last_seqs[s] - self.committed[s], 0) for s in self.names},
                    seconds=time.monotonic() - self.started,
                )
            )
