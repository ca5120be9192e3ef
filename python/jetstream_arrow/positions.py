"""Exactly once at any age: a writer's position, kept in the stream it writes. It is
one module because a position's claim, fence, lease and read-back are one protocol,
each step correct only with the others.

A retried publish is safe while the stream's duplicate window (two minutes unless
configured) still holds its msg ids. A writer restarted later (a night's outage, a
failed driver restarted in the morning) would store its last rows again. So every
exactly-once writer has an identity (a load's file, a Spark write's partition, a
copy's source) and records how far it got in the target stream itself:

* its rows go out as they always do (acked, pipelined, each with a msg id made from
  the writer's identity and the row's place), so the duplicate window still catches
  resends while it runs;
* after every unit before ``next`` is acknowledged, one *position* message on
  ``$JA.POS.<stream>.<digest of the identity>`` says so. It carries
  ``Nats-Rollup: sub``, so the stream keeps only a writer's newest position, and
  ``Nats-Expected-Last-Subject-Sequence`` of the writer's previous position: a fence,
  which the server checks and applies under one lock, so two writers with one
  identity cannot both advance it;
* a restarted writer finds its position with one request, and reads back what the
  stream took after it (its rows stored after the last position, at most what it
  sends between two positions when it writes the stream alone), so it skips those
  and sends the rest. Nothing is stored twice, nothing skipped.

Positions are not written in the same atomic batch as their rows: atomic batches
(``mode="atomic"``) publish about a sixth as fast as acked publishing with msg ids
(benches/README.md), and the read-back makes the rows after a position exact anyway.

A writer's position also claims its identity for ``lease`` seconds, and a writer at
work writes it again every half lease. A second writer with the same identity that
finds an open position watches it for one lease (by its own clock, so clock skew
does not matter; at once if the position is older than two leases): if it moved,
the holder is at work and the second writer is refused (``WriterFencedError``);
if not, the holder died and the second takes over. A writer that finishes writes a
closed position, so the next one starts at once. Readers never
see positions (the core leaves ``$JA.POS.`` out of every read unless asked).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from . import _core
from ._subjects import subject_matches
from .exceptions import BadInputError, JetStreamArrowError, NotFoundError, PublishError

POSITION_SUBJECT_PREFIX = _core.POSITION_SUBJECT_PREFIX
#: The header naming the writer on its position messages (the subject holds a digest).
WRITER_HEADER = "Ja-Writer"
log = logging.getLogger("jetstream_arrow.positions")
#: ``after`` of a position written when nothing past ``next`` was sent: its own seq.
ITSELF = -1
#: How often a writer waiting out another's lease looks whether it moved, at most.
_LEASE_POLL = 1.0


def _after(body: dict[str, Any], seq: int) -> int | None:
    """Where rows past a stored position's ``next`` may be: after which sequence."""
    if "after" in body:
        after = body["after"]
        return seq if after == ITSELF else (None if after is None else int(after))
    # Written before `after` existed: an open position, rows after itself.
    return seq if body.get("open") else None


class WriterFencedError(JetStreamArrowError):
    """Another writer with the same identity is writing the stream, or took the
    identity over while this one was stopped: this one stops, storing nothing more.
    ``writer`` is the identity, ``stream`` the stream."""

    def __init__(self, message: str, writer: str = "", stream: str = "") -> None:
        super().__init__(message)
        self.writer = writer
        self.stream = stream


def position_subjects(stream: str) -> str:
    """The subjects a stream takes to hold positions: ``$JA.POS.<stream>.>``."""
    return f"{POSITION_SUBJECT_PREFIX}{stream}.>"


def position_subject(stream: str, writer: str) -> str:
    """Where ``writer`` keeps its position in ``stream``: identities are free text,
    so the subject holds a digest of it (128 bits) and the header the text."""
    digest = hashlib.sha256(writer.encode()).hexdigest()[:32]
    return f"{POSITION_SUBJECT_PREFIX}{stream}.{digest}"


def holds_positions(info: Any, *, after_enabling: bool = False) -> str | None:
    """Why stream ``info`` (a ``StreamInfo``) cannot hold writers' positions, or
    None when it can (``after_enabling``: once [`with_positions`][] is applied)."""
    cfg = info.config
    probe = position_subject(cfg.name, "probe")
    if not after_enabling and not any(subject_matches(s, probe) for s in cfg.subjects or []):
        return f"its subjects do not take {position_subjects(cfg.name)!r}"
    retention = getattr(cfg.retention, "value", cfg.retention)
    if retention not in (None, "limits"):
        # Work queues and interest streams remove what consumers acknowledge, and a
        # position nobody consumes would be removed at once.
        return f"its retention is {retention!r}: positions need retention 'limits'"
    if cfg.mirror is not None:
        return "it is a mirror, which takes no publishes"
    if not after_enabling and not cfg.allow_rollup:
        return "it does not allow rollups (allow_rollup): a writer keeps one position"
    if cfg.deny_purge:
        return "it denies purges (deny_purge), which a writer's rollup needs"
    return None


def with_positions(config: Any) -> Any:
    """Stream ``config`` (a ``StreamConfig``) as one that holds positions: its
    subjects also take ``$JA.POS.<name>.>``, and it allows rollups."""
    wanted = position_subjects(config.name)
    subjects = list(config.subjects or [])
    if wanted not in subjects:
        subjects.append(wanted)
    return dataclasses.replace(config, subjects=subjects, allow_rollup=True)


def enable_command(stream: str) -> str:
    """The command a warning or refusal names to make ``stream`` hold positions."""
    return (
        f"`jetstream-arrow streams enable-exactly-once {stream}` (adds the subjects "
        f"{position_subjects(stream)!r} and allow_rollup)"
    )


@dataclass(frozen=True)
class Position:
    """Where a writer stands in a stream: every unit before ``next`` is stored;
    ``seq`` is the sequence of the position message (0: none yet); ``stored_ids``
    are the writer's msg ids the stream took after its previous position, which a
    restart must not send again."""

    writer: str
    next: int = 0
    seq: int = 0
    stored_ids: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class _Found:
    seq: int
    next: int
    session: str
    lease: float
    open: bool
    #: The stream sequence after which the writer's rows past ``next`` may be stored
    #: (None: none may be, the position was closed after all of them).
    after: int | None
    time: datetime | None


class PositionedWriter:
    """One writer's position in ``stream``: [`claim`][] it, then [`advance`][] it
    as units are acknowledged and [`close`][] it at the end.

    ``id_prefix``: the start every msg id of this writer has; the read-back after
    a claim collects only those (None: none is collected, for a writer whose rows
    carry no msg id of their own and so cannot be found again)."""

    def __init__(
        self,
        client: Any,
        stream: str,
        writer: str,
        *,
        id_prefix: str | None = None,
        lease: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not writer:
            raise BadInputError("an exactly-once writer needs a non-empty identity")
        self.client = client
        self.stream = stream
        self.writer = writer
        self.id_prefix = id_prefix
        self.lease = float(_core.DEFAULT_WRITER_LEASE if lease is None else lease)
        if self.lease <= 0:
            raise BadInputError(f"option 'writer_lease' must be positive, got {lease}")
        self.subject = position_subject(stream, writer)
        self.session = uuid.uuid4().hex
        self._clock = clock
        self._written = 0  # positions written by this session: their msg ids
        self._seq = 0
        self._next = 0
        self._after: int | None = None  # the last position's `after`, resolved
        self._written_at = 0.0

    # -- reading what the stream holds -------------------------------------------------
    def _found(self) -> _Found | None:
        try:
            message = self.client.get_message(self.stream, last_by_subject=self.subject)
        except NotFoundError:
            return None
        try:
            body = json.loads(message.data)
            return _Found(
                seq=message.seq,
                next=int(body["next"]),
                session=str(body.get("session", "")),
                lease=float(body.get("lease", self.lease)),
                open=bool(body.get("open", False)),
                after=_after(body, message.seq),
                time=message.time,
            )
        except (ValueError, KeyError, TypeError) as err:
            raise BadInputError(
                f"stream {self.stream!r} holds a position for writer {self.writer!r} at "
                f"sequence {message.seq} that is not one ({err}): {message.data[:200]!r}"
            ) from None

    def _wait_out_lease(self, found: _Found) -> _Found:
        """Waits while ``found`` may be the position of a writer at work: an open
        position no older than two leases by this machine's clock (one lease of
        clock skew allowed). A writer at work writes its position again every half
        lease, so watching it for one whole lease tells: it moved (refused) or it
        did not (the writer died; taken over)."""
        if not found.open or found.time is None:
            return found
        written = found.time if found.time.tzinfo else found.time.replace(tzinfo=timezone.utc)
        age = (datetime.now(timezone.utc) - written).total_seconds()
        if age > 2 * found.lease:
            return found
        log.info(
            "writer %r on stream %r: its position (sequence %d, %.1f s old) is open; "
            "waiting up to its lease (%g s) to see whether its writer is at work",
            self.writer,
            self.stream,
            found.seq,
            max(age, 0.0),
            found.lease,
        )
        deadline = self._clock() + found.lease
        while True:
            now = self._clock()
            if now >= deadline:
                return found
            time.sleep(min(_LEASE_POLL, deadline - now))
            latest = self._found()
            if latest is None or latest.seq != found.seq:
                raise self._fenced(
                    f"writer {self.writer!r} is at work on stream {self.stream!r}: its "
                    f"position moved (sequence {found.seq} -> "
                    f"{latest.seq if latest else 'removed'}) while this writer watched it "
                    f"for its lease ({found.lease:g} s); one writer per identity at a time"
                )

    def _read_back(self, after: int, before: int) -> frozenset[str]:
        """This writer's msg ids stored in ``(after, before)``."""
        if self.id_prefix is None or before <= after + 1:
            return frozenset()
        found: set[str] = set()
        reader = self.client.read(
            self.stream, start_seq=after + 1, end_seq=before - 1, include_headers=True
        )
        for batch in reader:
            if batch.num_rows == 0:
                continue
            ids = pc.map_lookup(batch.column("headers"), "Nats-Msg-Id", "first")
            ids = pc.list_element(ids, 0)
            mine = pc.starts_with(ids, self.id_prefix)
            found.update(pc.filter(ids, pc.fill_null(mine, False)).to_pylist())
        return frozenset(found)

    # -- writing positions -----------------------------------------------------------
    def claim(self) -> Position:
        """Take the identity: wait out a live lease, write an open position at the
        previous one's place (fenced by it), then read back what the stream took
        after the previous one. Raises ``WriterFencedError`` when another writer
        holds it."""
        found = self._found()
        if found is not None:
            found = self._wait_out_lease(found)
        previous_seq = found.seq if found else 0
        start = found.next if found else 0
        self._seq = previous_seq
        # Rows past `next` may follow a position that is open or was released after
        # a failed row; the claim keeps saying so until this writer has read them
        # back and moved on, so a claim that dies leaves the next one the same work.
        # A closed position was written after all the writer's rows; without any,
        # no attempt of this writer sent a row (each claims before its first).
        after = found.after if found is not None else None
        # This writer's own rows come after its claim.
        self._write(start, open_=True, after=ITSELF if after is None else after)
        stored = self._read_back(after, self._seq) if after is not None else frozenset()
        return Position(self.writer, start, self._seq, stored)

    def advance(self, next_unit: int) -> None:
        """Every unit before ``next_unit`` is acknowledged and none after it was
        sent yet: record it (fenced)."""
        self._write(next_unit, open_=True, after=ITSELF)

    def close(self, next_unit: int) -> None:
        """The writer is done: record where, and free the identity."""
        self._write(next_unit, open_=False, after=None)

    def release(self, next_unit: int) -> None:
        """The writer stops with every row it sent resolved, some failed: free the
        identity at once. Rows after the first failed one may be stored before this
        position, so the next writer reads back from where the last position said."""
        self._write(next_unit, open_=False, after=self._after)

    def keep_lease(self) -> None:
        """Before handing on more rows: write the position again (the same place,
        fenced) once half the lease is gone, so a second writer sees this one at
        work; raises ``WriterFencedError`` when it was taken over meanwhile (this
        writer was stopped past its lease), before any more row is sent."""
        if self.lease_left() <= self.lease / 2:
            self._write(self._next, open_=True, after=self._after)

    def lease_left(self) -> float:
        """Seconds until this writer's last position stops claiming its identity."""
        return self.lease - (self._clock() - self._written_at)

    @property
    def next(self) -> int:
        return self._next

    def _write(self, next_unit: int, *, open_: bool, after: int | None) -> None:
        """Write the position: every unit before ``next_unit`` stored; this writer's
        rows past it may be stored after sequence ``after`` (``ITSELF``: after this
        position; None: nowhere)."""
        body = json.dumps(
            {
                "writer": self.writer,
                "next": int(next_unit),
                "session": self.session,
                "lease": self.lease,
                "open": open_,
                "after": after,
            },
            separators=(",", ":"),
        ).encode()
        row = pa.table(
            {
                "subject": [self.subject],
                "data": pa.array([body], pa.binary()),
                "headers": pa.array(
                    [[("Nats-Rollup", ["sub"]), (WRITER_HEADER, [self.writer])]],
                    pa.map_(pa.utf8(), pa.list_(pa.utf8())),
                ),
                # A resend after a lost ack is then a duplicate, not a stale fence.
                "msg_id": [f"{self.subject}:{self.session}:{self._written}"],
            }
        )
        written_at = self._clock()
        result = self.client.publish(
            row,
            keep_control_headers=True,
            expected_stream=self.stream,
            expected_last_subject_seq=self._seq,
            raise_on_error=False,
        )
        if result.failed:
            # Decided by what the stream holds, not by the error's text: a position
            # other than ours means another writer moved it.
            latest = self._found()
            if (
                latest is not None
                and latest.session == self.session
                and latest.seq > self._seq
                and latest.next == int(next_unit)
            ):
                # Stored after all (its ack was lost and the resends gave up).
                self._settle(latest.seq, next_unit, after, written_at)
                return
            if latest is None and self._seq:
                # Removed by the stream's limits (max_msgs, max_bytes, max_age) or a
                # purge, not moved: written again as a first position, fenced by there
                # being none, so a writer that claimed it meanwhile still wins.
                log.warning(
                    "writer %r: its position (sequence %d) is gone from stream %r (its "
                    "limits or a purge); writing it again",
                    self.writer,
                    self._seq,
                    self.stream,
                )
                self._seq = 0
                self._write(next_unit, open_=open_, after=after)
                return
            if latest is None or latest.seq != self._seq:
                raise self._fenced(
                    f"writer {self.writer!r} on stream {self.stream!r} was taken over: its "
                    f"position is at sequence {latest.seq if latest else 'none'}, not "
                    f"{self._seq} where this writer left it (another writer with the same "
                    "identity claimed it, or it was removed); this writer stops"
                )
            error = result.failed_rows().column("error")[0].as_py()
            raise PublishError(
                f"writer {self.writer!r}: its position on stream {self.stream!r} was not "
                f"stored: {error}",
                result,
            )
        self._settle(int(result.acks.column("seq")[0].as_py()), next_unit, after, written_at)

    def _settle(self, seq: int, next_unit: int, after: int | None, written_at: float) -> None:
        self._written += 1
        self._seq = seq
        self._next = int(next_unit)
        self._after = seq if after == ITSELF else after
        self._written_at = written_at

    def _fenced(self, message: str) -> WriterFencedError:
        return WriterFencedError(message, self.writer, self.stream)
