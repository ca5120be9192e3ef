"""``spark.readStream.format("jetstream").option("consumer", name)``: a streaming read
through a durable consumer, for WorkQueue and Interest streams. It is one module, the
consumer's claims, acks and pin from the planning of a micro-batch to its commit.

The consumer claims messages and the query acknowledges them only after Spark has
committed the micro-batch that holds them, so the stream empties as the query
progresses and a query killed at any moment loses nothing.

How, by the server's rules:

- The consumer (created if missing) is a durable pull consumer with explicit acks,
  ``max_deliver`` -1 and ``headers_only``: the driver learns which messages it claims
  (their stream sequences) without moving their payloads. On a WorkQueue stream it is
  the one consumer of its subject filter.
- A micro-batch is a range of stream sequences, like any jetstream streaming read
  (offset ``{"seq": <next sequence>}`` in the checkpoint). Executors read its messages
  by batched direct gets (the stream needs ``allow_direct``): no second consumer,
  which a WorkQueue would refuse. Nothing in a range is acknowledged before the
  micro-batch is committed, so a micro-batch that Spark re-runs after a crash reads
  exactly the same messages, split into the same partitions.
- ``latestOffset(start)`` runs only once every micro-batch before ``start`` is
  committed in the checkpoint, so it first acknowledges everything below ``start``
  (and so does ``commit``). A driver that starts (or restarts) resets the consumer to
  its ack floor, so whatever an earlier driver claimed but did not acknowledge is
  delivered again: below ``start`` it is acknowledged, above it goes into the next
  micro-batch.

With ``consumerGroup``, queries of one consumer share it through its ``pinned_client``
priority group: the pinned one moves the messages, the others get none. A standby
that finds no query pinned (the pinned one stopped pulling for the pin timeout) resets
the consumer, so that what the stopped one claimed comes again at once, and is pinned
with its next fetch; its micro-batches begin at the consumer's ack floor (the end
offset's ``first``), past what the other query acknowledged (a query acknowledges a
committed micro-batch when it plans the next: killed in between, its last one is moved
again by the standby).

Offsets keep when the stream was created (``"created"``, as a plain streaming read's
do). A driver that starts from a checkpoint made on another stream of the name (deleted
and created again, or one that now ends before the checkpoint's position) would
otherwise take the new stream's messages below that position for committed and
acknowledge them unread: the query fails with a ``DataLossError``, or with
``failOnDataLoss=false`` reads the new stream from its first message (the end offset's
``first``). Messages the stream removes after the consumer delivered them (limits, a
purge) are not loss in this sense: skipped, as acknowledged work items are.

The query's progress reports, as the source's ``latestOffset``, the sequence after the
last message the consumer can claim (``reportLatestOffset``): a query that has caught
up shows it equal to its ``endOffset`` even when the stream's last messages are on
subjects of other consumers.

The guarantee: every message reaches the sink at least once, and each micro-batch is
the same when re-run; into the jetstream sink (message ids per micro-batch, partition
and row) or Spark's file sink, that is exactly once. A micro-batch holds at most the
consumer's ``max_ack_pending`` messages (:data:`MAX_ACK_PENDING` when this source
creates it) and ``maxMessagesPerTrigger`` if set.

Spark tells a source that a micro-batch is committed only when it plans the next one
(it calls ``commit``, and ``latestOffset`` with the next start, only then), and tells
a Python source neither where its checkpoint is nor that the query stops between
micro-batches rather than during one: ``stop`` cannot tell the last micro-batch
committed from one cut short, and acknowledges nothing. So a query's last micro-batch
is acknowledged at its next trigger, or by the next run. With
trigger(availableNow=True) the end is fixed when the query starts
(``prepareForTriggerAvailableNow``: the stream's last message on the consumer's
subjects), Spark runs micro-batches until ``latestOffset`` has none left below it,
and that last look, made once the last micro-batch is committed, acknowledges it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
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

from .._core import DEFAULT_SPARK_CONSUMER_PIN_TIMEOUT
from ..client import Client
from ..consumers import ConsumedBatch, PullConsumer
from ..exceptions import BadInputError, JetStreamArrowError, NotFoundError, OperationTimeoutError
from .connection_cache import get_client
from .lag import behind_latest, mean_message_size
from .options import ReadOptions
from .partitions import read_partition, split_range
from .reading import DataLossError
from .stream_lookup import log, recreated_since, stream_now, stream_state
from .stream_reader import next_seq_of
from .triggers import TriggerGate, messages_within

#: Messages in flight of a consumer this source creates: one micro-batch at most.
MAX_ACK_PENDING = 100_000
#: How long the server waits for an ack before delivering a message again. Only
#: redelivery noise depends on it (a redelivered message the driver already holds is
#: acknowledged or planned once): longer than a slow micro-batch.
ACK_WAIT = 600.0
#: Messages claimed per fetch.
FETCH_MESSAGES = 10_000
#: With consumerGroup: seconds between looks whether a query holds the pin (a driver
#: asks for new messages many times a second while it has none).
PIN_CHECK_INTERVAL = 1.0
#: The first nats-server that resets a consumer to its ack floor (CONSUMER.RESET),
#: which every driver's start and a standby's takeover do.
RESET_SINCE = (2, 14)
#: The module Spark runs a Python streaming source's planner (the driver's side of a
#: stream reader) as, in a process of its own for the query.
PLANNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"
#: Seconds a planner process told to end waits for the reader's stop() (its acks
#: flushed, its pin given up) before it ends.
SETTLE_ON_STOP = 10.0


def stop_on_sigterm(reader: ConsumerStreamReader) -> None:
    """In Spark's planner process, run ``reader.stop()`` when the process is told to
    end. Spark ends a query's planner process with SIGTERM (its worker factory's
    ``stopWorker``) at ``query.stop()`` and when the query ends, without calling the
    reader's ``stop``: the consumer group's pin would stay until its timeout, and acks
    still in the connection's buffer would be lost. Elsewhere (a test, an
    application's own process) the process's signals are not this module's."""
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) != PLANNER_MODULE:
        return
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set handlers; Spark makes the reader there

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        # Spark sends it twice (the worker stopped, then its factory): the second
        # would end the process before the first has settled the consumer.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # In a thread of its own, waited for at most SETTLE_ON_STOP: the signal may
        # come while this thread holds a lock stop() needs (the connection cache's,
        # during a connect), and the process must end whatever stop() meets.
        settling = threading.Thread(target=reader.stop, name="jetstream-arrow-stop", daemon=True)
        settling.start()
        settling.join(SETTLE_ON_STOP)
        # End as the process would have: by the signal, with its default action.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)


def _check_server(client: Client) -> None:
    """Refuse, naming the option, a server older than :data:`RESET_SINCE`."""
    version = str(client.server_info().get("version") or "")
    parts = version.split("-")[0].split(".")
    try:
        found = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        return  # a version this code cannot read: the reset's own answer decides
    if found < RESET_SINCE:
        raise BadInputError(
            f"option 'consumer' needs nats-server {RESET_SINCE[0]}.{RESET_SINCE[1]} or "
            f"newer (a driver that starts resets the consumer to its ack floor); the "
            f"server is {version}"
        )


def prepare_consumer(client: Client, opts: ReadOptions) -> PullConsumer:
    """The query's durable consumer, created if missing and checked if not, reset to
    its ack floor so that what an earlier driver claimed is delivered again."""
    assert opts.consumer is not None
    stream, name = opts.stream, opts.consumer
    _check_server(client)
    info = client.stream_info(stream)
    if not info.config.allow_direct:
        raise BadInputError(
            f"option 'consumer': stream {stream!r} does not allow direct gets, which "
            "the executors read a micro-batch with (a WorkQueue allows no second "
            # update_stream replaces the whole config: start from the current one, or
            # the stream's other settings return to the server's defaults.
            f"consumer); update it: client.update_stream(client.stream_info({stream!r}).config, "
            "allow_direct=True)"
        )
    wanted = list(opts.subjects) if opts.subjects else None
    try:
        config = client.consumer_info(stream, name).config
    except NotFoundError:
        config = None
    group = opts.consumer_group
    pin_timeout = opts.consumer_pin_timeout
    if config is None:
        grouped: dict[str, Any] = {}
        if group is not None:
            grouped = {
                "priority_groups": [group],
                "priority_policy": "pinned_client",
                "priority_timeout": pin_timeout or DEFAULT_SPARK_CONSUMER_PIN_TIMEOUT,
            }
        client.create_consumer(
            stream,
            durable_name=name,
            ack_policy="explicit",
            deliver_policy="all",
            filter_subjects=wanted,
            max_deliver=-1,
            ack_wait=ACK_WAIT,
            max_ack_pending=MAX_ACK_PENDING,
            headers_only=True,
            **grouped,
        )
    else:
        problem = None
        groups = list(config.priority_groups or [])
        if config.deliver_subject:
            problem = "is a push consumer"
        elif config.ack_policy != "explicit":
            problem = f"acknowledges with ack_policy {config.ack_policy!r}, not 'explicit'"
        elif not config.headers_only:
            # The driver claims every message to plan micro-batches; the executors
            # read the payloads by direct gets. Without headers_only each payload
            # would also cross to the driver, which holds a micro-batch's claims.
            problem = (
                "delivers payloads (headers_only is not set): the driver, which claims "
                "every message to plan micro-batches, would receive each payload; set "
                f"it: client.update_consumer({stream!r}, client.consumer_info({stream!r}, "
                f"{name!r}).config, headers_only=True)"
            )
        elif (config.filter_subjects or None) != wanted:
            problem = (
                f"filters {config.filter_subjects or 'no subjects'}, the query "
                f"{wanted or 'none'} (option 'subjects')"
            )
        elif group is None and groups:
            problem = f"has priority groups {groups} (option 'consumerGroup' names one)"
        elif group is not None and (
            group not in groups or config.priority_policy != "pinned_client"
        ):
            problem = (
                f"has no pinned_client priority group {group!r} (option 'consumerGroup'; "
                f"its groups: {groups or 'none'}, policy {config.priority_policy or 'none'})"
            )
        elif (
            group is not None and pin_timeout is not None and config.priority_timeout != pin_timeout
        ):
            problem = (
                f"moves its pin after {config.priority_timeout} s without a pull, the "
                f"query asks {pin_timeout} s (option 'consumerPinTimeout')"
            )
        if problem:
            raise BadInputError(
                f"option 'consumer': consumer {name!r} of stream {stream!r} {problem}; "
                "name a pull consumer with explicit acks, headers_only and the query's "
                "subject filter, or a new name (the source creates it)"
            )
        pending = config.max_ack_pending
        least = opts.min_messages_per_trigger
        if least is not None and pending is not None and 0 < pending < least:
            # The server delivers no more than max_ack_pending unacknowledged messages,
            # and a micro-batch's are acknowledged only once it is committed.
            raise BadInputError(
                f"option 'minMessagesPerTrigger' ({least}) is more than consumer {name!r} "
                f"ever holds unacknowledged (its max_ack_pending, {pending}): every "
                "micro-batch would wait 'maxTriggerDelay'; lower the option or raise the "
                "consumer's max_ack_pending"
            )
    # A query that starts while another of its group is pinned leaves the consumer as
    # it is: a reset now would deliver the pinned query's claims, its micro-batch in
    # flight, to it again. It is reset when this query finds no query pinned
    # (ConsumerStreamReader._check_pin).
    if group is None or pinned_client(client, stream, name) is None:
        client.reset_consumer(stream, name)
    return client.pull_consumer(stream, name, group=group)


def pinned_client(client: Client, stream: str, name: str) -> str | None:
    """The pin of the consumer's priority group, if a client holds it. The server
    reports one group with the pin all its groups share, whatever their names."""
    groups = client.consumer_info(stream, name).priority_groups or []
    return next((g["pinned_client_id"] for g in groups if g.get("pinned_client_id")), None)


def claim_limits(client: Client, opts: ReadOptions) -> tuple[int, int]:
    """Messages to claim per fetch (:data:`FETCH_MESSAGES`, or the consumer's
    ``max_batch`` if lower: the server refuses a pull of more), and how many the
    consumer delivers unacknowledged at most (its ``max_ack_pending``; a pull past it
    is held by the server, not answered; :data:`MAX_ACK_PENDING` for a consumer
    without a limit, so that a micro-batch stays bounded)."""
    config = client.consumer_info(opts.stream, opts.consumer or "").config
    per_fetch = min(b for b in (FETCH_MESSAGES, config.max_batch) if b is not None and b > 0)
    pending = config.max_ack_pending
    if pending is not None and pending > 0:
        return per_fetch, pending
    return per_fetch, max(MAX_ACK_PENDING, opts.min_messages_per_trigger or 0)


def last_seq_on(
    client: Client, stream: str, subjects: tuple[str, ...] | None, patience: float
) -> int:
    """The sequence of the stream's last message on ``subjects`` (one filter, wildcards
    allowed, as option 'consumer' takes), 0 when there is none."""
    if not subjects:
        return int(stream_state(client, stream, patience).last_seq)
    try:
        return int(client.get_message(stream, last_by_subject=subjects[0]).seq)
    except NotFoundError:
        return 0


class ConsumerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of the messages a durable consumer claims; acknowledged once
    committed. Offset and planning methods run on the driver; ``read`` on executors."""

    def __init__(self, opts: ReadOptions, schema: StructType, inferred: bool = False) -> None:
        self.opts = opts
        self.schema = schema
        # Whether the JSON value's schema was inferred when the query was planned.
        self.inferred = inferred
        self._consumer: PullConsumer | None = None
        self._per_fetch = FETCH_MESSAGES
        self._max_pending = MAX_ACK_PENDING
        # When the stream was created, as this driver found it at its start; and,
        # after a checkpoint made on another stream of the name (failOnDataLoss=false),
        # the sequence this driver reads the new one from until a micro-batch is planned.
        self._created: int | None = None
        self._consumer_created: Any = None
        self._checked_start = False
        self._read_anew_from: int | None = None
        # Whether this driver reads a stream created again since its checkpoint: the
        # old stream's offsets, which Spark still commits, acknowledge nothing then.
        self._reading_new_stream = False
        # Claimed messages not yet acknowledged: their batch and (row, seq) pairs.
        self._held: list[tuple[ConsumedBatch, list[tuple[int, int]]]] = []
        # The end latestOffset last gave, the one of the micro-batch being planned.
        self.planned_end = 1
        # With consumerGroup: when to look next whether any query holds the pin, and
        # the pin this query's claims in `_held` were made under, and whether another
        # query held the pin when last looked (then this one pulls nothing: a pull the
        # server holds unanswered could be given the pin when it moves).
        self._next_pin_check = 0.0
        self._pin: str | None = None
        self._standby = False
        # minMessagesPerTrigger and maxTriggerDelay: the delay counts from the start.
        self.gate = TriggerGate.of(opts)
        # With trigger(availableNow=True): the sequence after the stream's last message
        # on the consumer's subjects when the query started. The query's micro-batches
        # end below it; it stops once none is left to plan.
        self.available_now_end: int | None = None
        stop_on_sigterm(self)

    def __repr__(self) -> str:
        return f"ConsumerStreamReader(stream={self.opts.stream!r}, consumer={self.opts.consumer!r})"

    def _claimer(self) -> PullConsumer:
        if self._consumer is None:
            client = get_client(self.opts.connect)
            self._consumer = prepare_consumer(client, self.opts)
            self._per_fetch, self._max_pending = claim_limits(client, self.opts)
            self._note_identities(client)
        return self._consumer

    def _note_identities(self, client: Client) -> None:
        """When the stream and the consumer were created, as this driver finds them."""
        stream, name = self.opts.stream, self.opts.consumer or ""
        self._created = stream_now(client, stream, self.opts.resume_timeout).created
        self._consumer_created = client.consumer_info(stream, name).created

    def _check_consumer_same(self, start: dict[str, Any]) -> None:
        """Each trigger: a consumer created again while this driver runs (its stream
        deleted and created again, and the consumer made by another query of the
        group, or by hand) is checked as a start is, before anything is acknowledged."""
        client = get_client(self.opts.connect)
        created = client.consumer_info(self.opts.stream, self.opts.consumer or "").created
        if created == self._consumer_created:
            return
        log.warning(
            "consumer %r of stream %r was created again while the query ran",
            self.opts.consumer,
            self.opts.stream,
        )
        self._note_identities(client)
        self._held = []
        self._checked_start = False
        self._check_start(start)

    def _with_created(self, offset: dict[str, Any]) -> dict[str, Any]:
        return offset if self._created is None else {**offset, "created": self._created}

    def initialOffset(self) -> dict[str, Any]:
        """Where the consumer stands: the sequence after its ack floor."""
        self._claimer()
        info = get_client(self.opts.connect).consumer_info(
            self.opts.stream, self.opts.consumer or ""
        )
        return self._with_created({"seq": int(info.ack_floor.stream_seq) + 1})

    def _check_start(self, offset: dict[str, Any]) -> None:
        """Once per driver, before anything below ``offset`` (the checkpoint's) is
        acknowledged or a micro-batch ending there is run again: is the stream the
        one the checkpoint was made on? Another one's messages below the checkpoint's
        position are not committed: the query fails (failOnDataLoss), or reads the new
        stream from its first message."""
        self._claimer()
        if self._checked_start:
            return
        self._checked_start = True
        position = next_seq_of(offset)
        stream = self.opts.stream
        now = stream_now(get_client(self.opts.connect), stream, self.opts.resume_timeout)
        recorded = offset.get("created")
        if recreated_since(recorded if isinstance(recorded, int) else None, now):
            what = (
                f"stream {stream!r} was deleted and created again since the query read "
                f"it up to sequence {position - 1} (it has another creation time)"
            )
        elif int(now.state.last_seq) < position - 1:
            what = (
                f"stream {stream!r} ends at sequence {now.state.last_seq}, but the query "
                f"has read it up to {position - 1}: the stream was deleted and recreated, "
                "restored from an older snapshot, or lost its last messages"
            )
        else:
            return
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                f"option 'failOnDataLoss': {what}. Its sequences now name other messages, "
                f"which the query would take for committed and acknowledge unread. Set "
                "failOnDataLoss=false to read it from its first message, or start a new "
                "query (a new checkpoint)."
            )
        log.warning("%s: the query reads it from its first message", what)
        self._read_anew_from = 1
        self._reading_new_stream = True

    def _of_old_stream(self, offset: dict[str, Any]) -> bool:
        """Whether ``offset`` was made on the stream deleted since (read anew)."""
        return self._reading_new_stream and offset.get("created") != self._created

    def prepareForTriggerAvailableNow(self) -> None:
        """trigger(availableNow=True): fix the end, what the stream holds for the
        consumer now. Spark then plans micro-batches (each within the read limit and
        the consumer's ``max_ack_pending``) until :meth:`latestOffset` has nothing more
        below that end; without this, Spark would ask once for all that is available
        and end after the one micro-batch the consumer's ``max_ack_pending`` allows."""
        self._claimer()
        client = get_client(self.opts.connect)
        last = last_seq_on(client, self.opts.stream, self.opts.subjects, self.opts.resume_timeout)
        self.available_now_end = last + 1

    def getDefaultReadLimit(self) -> ReadLimit:
        # With minMessagesPerTrigger the default is never ReadAllAvailable: Spark
        # passes that only for trigger(once=True), which the gate lets through.
        if self.opts.max_messages_per_trigger is not None:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        if self.opts.min_messages_per_trigger is not None:
            return ReadMinRows(self.opts.min_messages_per_trigger)
        return ReadAllAvailable()

    def _ack_below(self, seq: int) -> None:
        """Acknowledge every held message below ``seq``: its micro-batch is committed."""
        still: list[tuple[ConsumedBatch, list[tuple[int, int]]]] = []
        for batch, rows in self._held:
            done = [row for row, s in rows if s < seq]
            if done:
                batch.ack(done)
            left = [(row, s) for row, s in rows if s >= seq]
            if left:
                still.append((batch, left))
        self._held = still

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Acknowledge what lies below ``start`` (committed), claim new messages, and
        end the next micro-batch after the last one claimed (within ``limit``)."""
        next_seq = next_seq_of(start)
        if isinstance(limit, ReadMaxRows):
            most: int | None = limit.max_rows
        elif isinstance(limit, (ReadAllAvailable, ReadMinRows)):
            most = None
        else:
            raise BadInputError(
                f"a jetstream read through option 'consumer' limits micro-batches by "
                f"messages (option 'maxMessagesPerTrigger'), not by {type(limit).__name__}"
            )
        consumer = self._claimer()
        self._check_start(start)
        self._check_consumer_same(start)
        if self._read_anew_from is not None:
            next_seq = self._read_anew_from
        self._ack_below(next_seq)
        if self.opts.consumer_group is not None:
            self._check_pin()
        claimed = sorted({s for _, rows in self._held for _, s in rows})
        end = self.available_now_end
        while (most is None or len(claimed) < most) and not self._standby:
            want = self._per_fetch if most is None else min(self._per_fetch, most - len(claimed))
            want = min(want, self._max_pending - sum(len(rows) for _, rows in self._held))
            if end is not None:
                # No more than the sequences left below the end: the consumer delivers
                # in stream order, so a claim of more would take messages stored after
                # the query started, which it leaves unacknowledged.
                want = min(want, end - 1 - max([next_seq - 1, *claimed]))
            if want <= 0:
                break
            try:
                batch = consumer.fetch(want, no_wait=True)
            except OperationTimeoutError:
                if self.opts.consumer_group is None:
                    raise
                # The pin moved to another query since this one looked, which holds
                # the consumer's max_ack_pending: the server leaves the pull unanswered.
                log.info(
                    "consumer %r: a pull of this query was not answered (another query "
                    "of group %r holds the pin); nothing claimed",
                    self.opts.consumer,
                    self.opts.consumer_group,
                )
                break
            if self.opts.consumer_group is not None and consumer.pin_id != self._pin:
                self._pin_moved(consumer.pin_id)
                claimed = []
                if consumer.pin_id is None:
                    break
                continue  # fetch again what the reset delivers to this query now
            if len(batch) == 0:
                break
            seqs = batch.data.column("seq").to_pylist()
            self._held.append((batch, list(enumerate(seqs))))
            self._ack_below(next_seq)
            claimed = sorted(set(claimed).union(s for s in seqs if s >= next_seq))
        if end is not None:
            claimed = [s for s in claimed if s < end]
        first = next_seq
        if self.opts.consumer_group is not None and claimed:
            # Another query of the group processed and acknowledged the messages from
            # this query's start up to the consumer's ack floor: not read again.
            first = max(next_seq, self._first_unacked())
            claimed = [s for s in claimed if s >= first]
        available_now = end is not None or (
            isinstance(limit, ReadAllAvailable) and self.gate.min_messages is not None
        )
        if claimed and not self.gate.allows(len(claimed), available_now):
            claimed = []  # held: claimed, and planned once enough are there
        if most is not None:
            claimed = claimed[:most]
        claimed = self._within_bytes(claimed)
        if claimed:
            self.gate.fired()
        if not claimed:
            self.planned_end = next_seq_of(start)
            if end is not None:
                self._finish_available_now(end)
            return dict(start)  # no micro-batch, and no new offset that would make one
        self.planned_end = claimed[-1] + 1
        if self._read_anew_from is not None:
            # The new stream's first micro-batch: its start offset is the old stream's.
            first = max(first, 1)
            self._read_anew_from = None
            return self._with_created({"seq": self.planned_end, "first": first})
        if first > next_seq:
            return self._with_created({"seq": self.planned_end, "first": first})
        return self._with_created({"seq": self.planned_end})

    def _finish_available_now(self, end: int) -> None:
        """The last look of a trigger(availableNow=True) query: nothing below ``end``
        is left to plan, and the query stops. Messages claimed past ``end`` (stored
        after the query started, on a filtered stream whose other subjects made the
        claim bound loose) are handed back at once rather than after the ack wait,
        and what this call acknowledged (the last micro-batch, committed) reaches the
        server before the query ends."""
        for batch, rows in self._held:
            later = [row for row, s in rows if s >= end]
            if later:
                batch.nak(later)
        self._held = [
            (batch, kept) for batch, rows in self._held if (kept := [r for r in rows if r[1] < end])
        ]
        get_client(self.opts.connect).flush()

    def _pin_moved(self, pin: str | None) -> None:
        """This query's pin in the group changed: lost (another query is pinned, and
        has reset the consumer or will), or a new one. What it claimed before is no
        longer its alone: forgotten, not planned. Pinned anew, it resets the consumer,
        so that whatever is unacknowledged (its own earlier claims too) is delivered to
        it again, now."""
        self._pin = pin
        self._held = []
        if pin is not None:
            get_client(self.opts.connect).reset_consumer(self.opts.stream, self.opts.consumer or "")

    def _check_pin(self) -> None:
        """With consumerGroup, before claiming: which query of the group holds the pin,
        as the consumer says (asked each time this query holds claims, else at most
        every :data:`PIN_CHECK_INTERVAL`).

        Held claims made under a pin that is no longer this query's are forgotten, not
        planned: another query was pinned (after this one did not pull for the pin
        timeout) and gets them from its reset. When no query holds the pin (none has
        pulled yet, or the pinned one stopped pulling, its driver killed), the consumer
        is reset, so that what it delivered and was never acknowledged is delivered
        again at once, to the query the server pins next, not after the ack wait."""
        now = time.monotonic()
        if not self._held and now < self._next_pin_check:
            return
        self._next_pin_check = now + PIN_CHECK_INTERVAL
        client = get_client(self.opts.connect)
        stream, name = self.opts.stream, self.opts.consumer or ""
        pinned = pinned_client(client, stream, name)
        if self._held and pinned != self._pin:
            self._held = []
            self._pin = None
        self._standby = pinned is not None and pinned != self._pin
        if not pinned:
            client.reset_consumer(stream, name)

    def _first_unacked(self) -> int:
        """The sequence after the consumer's ack floor: every message below it on the
        consumer's subjects is acknowledged, by this query or another of its group."""
        info = get_client(self.opts.connect).consumer_info(
            self.opts.stream, self.opts.consumer or ""
        )
        return int(info.ack_floor.stream_seq) + 1

    def _within_bytes(self, claimed: list[int]) -> list[int]:
        """The first of ``claimed`` that fit ``maxBytesPerTrigger`` (at least one), at
        the stream's mean message size: the claimed messages come without their
        payloads (the consumer delivers headers only), so their sizes are not at hand."""
        budget = self.opts.max_bytes_per_trigger
        if budget is None or not claimed:
            return claimed
        state = stream_state(
            get_client(self.opts.connect), self.opts.stream, self.opts.resume_timeout
        )
        fit = messages_within(budget, mean_message_size(state))
        return claimed[: fit or len(claimed)]

    def reportLatestOffset(self) -> dict[str, Any]:
        """For the query's progress (Spark shows it as the source's ``latestOffset``,
        beside the ``endOffset`` latestOffset gave a moment ago): the sequence after the
        last message the consumer can claim, never below that end.

        While the consumer has messages pending, that is the sequence after the
        stream's last message on the consumer's subject filter. Once it has none,
        everything on its subjects is claimed, and it is the sequence after the last
        claimed message: the stream's later messages, on subjects of other consumers,
        are no lag of this query. (The consumer's info answers whether any are
        pending; the last message, payload and all, is fetched only when some are.)
        Beside it, the messages and bytes behind (:mod:`.lag`): the consumer's pending
        messages and those it delivered that no micro-batch took yet."""
        if self._standby:
            # Another query of the group moves the messages: none is this one's lag.
            return {"seq": self.planned_end}
        client = get_client(self.opts.connect)
        stream = self.opts.stream
        pending = int(client.consumer_info(stream, self.opts.consumer or "").num_pending)
        if pending:
            last = last_seq_on(client, stream, self.opts.subjects, self.opts.resume_timeout)
        else:
            last = max((s for _, rows in self._held for _, s in rows), default=0)
        # Behind: what the consumer has still to deliver, and what it delivered that
        # no micro-batch has taken yet.
        held = {s for _, rows in self._held for _, s in rows if s >= self.planned_end}
        size = mean_message_size(stream_state(client, stream, self.opts.resume_timeout))
        behind = {stream: (pending + len(held), size)}
        return {"seq": max(last + 1, self.planned_end), **behind_latest(behind)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """Sequences ``start..end - 1``, or from the end offset's ``first`` (another
        query of the group acknowledged the messages before it; or the stream was
        created again and is read from its first message), split by the options alone,
        so that a re-run micro-batch has the same partitions (and the same message ids
        in a sink)."""
        # Spark runs the checkpoint's last micro-batch again before planning the next.
        self._check_start(end)
        if self._of_old_stream(end):
            return []  # planned on the stream that was deleted: its messages are gone
        first = end["first"] if "first" in end else next_seq_of(start)
        last = next_seq_of(end) - 1
        opts = self.opts
        return list(split_range(first, last, opts.min_partitions, opts.max_messages_per_partition))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, partition, self.opts.subjects, self.schema, self.inferred)

    def commit(self, end: dict[str, Any]) -> None:
        """The micro-batch ending before ``end`` is committed: acknowledge it. (Spark
        commits it after planning the next one: when that reads a stream created again,
        this end is the old stream's and acknowledges nothing of the new.)"""
        if self._of_old_stream(end):
            return
        self._ack_below(next_seq_of(end))

    def stop(self) -> None:
        """Claimed but unacknowledged messages are left to the server: the next driver
        resets the consumer and gets them again. The acks sent so far reach the
        server. A query of a group that holds the pin gives it up, so that a standby
        takes over now, not after the pin timeout. (Spark ends the planner process
        with SIGTERM rather than call this: :func:`stop_on_sigterm`.)"""
        self._held = []
        if self._consumer is None:
            return  # nothing claimed, acknowledged or pinned
        client = get_client(self.opts.connect)
        stream, name = self.opts.stream, self.opts.consumer or ""
        group, pin = self.opts.consumer_group, self._pin
        self._pin = None
        try:
            client.flush()
            if group is not None and pin is not None and pinned_client(client, stream, name) == pin:
                client.unpin_consumer(stream, name, group)
        except JetStreamArrowError as err:
            log.warning(
                "consumer %r: as the query stopped, its acks or its pin of group %r could "
                "not be settled (the pin stays until it times out; a message not "
                "acknowledged comes again): %s",
                name,
                group,
                err,
            )
