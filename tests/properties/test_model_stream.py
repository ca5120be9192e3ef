"""A model-checked stream: hypothesis's rule-based state machine drives a real
nats-server through random sequences of publishes, reads, consumption and faults,
and checks the stream against a model of what it must hold.

One module: the model, the machine that drives the server and the test that runs it
are read together; none of it is shared with other tests.

The server stores with ``sync_interval: always`` (on ``/dev/shm``), so a ``kill -9``
keeps every write it acknowledged. Each run of the machine makes its own stream
(``allow_batched`` for fast publishes, ``allow_atomic`` for atomic ones,
``allow_direct`` for direct reads, a
duplicate window longer than the test) and a durable pull consumer with a short
``ack_wait``, then draws steps from:

- **publish**, acked, fast or atomic, with or without msg ids, any window, raising or
  not;
- **republish** rows with ids: the ones a publish reported failed (what docs/reliability.md
  tells users to do) and rows stored before;
- **read** from a random ``start_seq``, by consumer, direct gets or auto;
- **consume**: one ``fetch`` of a durable pull consumer, then ``ack_sync`` of all,
  some or none of the batch;
- **faults**: a graceful restart, a ``kill -9`` and start, a pause (``SIGSTOP``, then
  ``SIGCONT`` up to 1.5 s later), on their own or in the middle of any call above.

The model: every row ever sent (its payload is unique, so it names the row), whether
a publish acknowledged it, and the stream sequence an ack named or a read saw. What
must hold:

- **Nothing acknowledged lost.** A row acknowledged as stored or duplicate is in the
  stream, with its subject and payload, at the sequence its ack named, through every
  later restart, ``kill -9`` and pause.
- **Nothing doubled.** No payload is stored twice. A row with a msg id is stored once
  however often it is published: published again, a row already stored comes back as
  a duplicate naming its first sequence.
- **At least the acknowledged, at most everything sent.** A row a fault cut off is
  reported failed ("may or may not be stored"): the server may have stored it while
  its ack was lost, or may store it after a pause from what it had buffered. The
  model lets such a row be stored once or not at all; rows with ids are published
  again until acknowledged. Nothing that was never sent appears.
- **Sequences contiguous.** Nothing is deleted, so the stream holds 1..last_seq
  without holes, a read from ``start_seq`` returns exactly start_seq..its end in
  order, and a message keeps its sequence once seen.
- **Consumption.** A message whose ack the server confirmed (``ack_sync``) is not
  delivered again, except after a ``kill -9``: nats-server writes a consumer's state
  to disk after the fact (its flusher), even with ``sync_interval: always``, so a
  crash can forget acks it confirmed (measured: a consumer back at its first
  message after a kill two seconds after its creation). The model lets a message
  acked before a kill come again. A message delivered but not acked comes
  again after ``ack_wait``; at the end of each run every stored message has been
  delivered and acked.
- **Nothing hangs, nothing misleads.** Every call returns, or raises a typed error
  (never the bare base class), within a bound. A publish that raises carries
  ``.result``, what it had stored; one that met no fault stores every row. A read
  rides out a fault (shorter than its ``resume_timeout``) and returns its whole
  range. A fetch may end with a ``TimeoutError`` or ``ConnectionError`` class when a
  fault strikes it, never one saying the consumer is gone.

The run is seeded: ``JETSTREAM_ARROW_MODEL_SEED`` (default below; ``random`` draws
one) picks the sequences, and the test prints it with its figures. A failure prints
the failing steps, and a blob for ``@reproduce_failure`` (it decorates
``StreamMachine``); replay with the printed seed. Timing varies between runs, so a
replay draws the same steps but the faults land at slightly different moments.
Failing examples are not shrunk (each step takes real time;
``JETSTREAM_ARROW_MODEL_SHRINK=1`` shrinks), and ``JETSTREAM_ARROW_MODEL_SCALE=10``
runs ten times the examples.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    rule,
    run_state_machine_as_test,
)

import jetstream_arrow as ja
from jetstream_arrow.client import PublishResult
from jetstream_arrow.exceptions import JetStreamArrowError
from natsserver import NatsServer

T = TypeVar("T")

DEFAULT_SEED = 20261123
_SEED_SETTING = os.environ.get("JETSTREAM_ARROW_MODEL_SEED", str(DEFAULT_SEED))
SEED = random.randrange(2**32) if _SEED_SETTING == "random" else int(_SEED_SETTING)
_SCALE = float(os.environ.get("JETSTREAM_ARROW_MODEL_SCALE", "1"))
_SHRINK = os.environ.get("JETSTREAM_ARROW_MODEL_SHRINK") == "1"

#: Runs of the machine, and steps in each: about two minutes on a busy two-core machine.
EXAMPLES = max(1, round(8 * _SCALE))
STEPS = 25

#: A publish's wait for each ack; retries (with ids) ride out a pause longer than it.
ACK_TIMEOUT = 1.0
#: How long a pull consumer waits before delivering an unacknowledged message again.
ACK_WAIT = 1.0
#: Reads: heartbeats, and how long a read keeps recreating its consumer after a fault.
HEARTBEAT = 1.0
RESUME_TIMEOUT = 10.0
#: The longest pause: longer than an ack timeout and a heartbeat, shorter than a resume.
LONGEST_PAUSE = 1.5
#: Bounds on each call (a busy machine, a fault and the client's reconnect included).
PUBLISH_BOUND = 60.0
READ_BOUND = RESUME_TIMEOUT + 30.0
REQUEST_BOUND = 15.0
#: The end of each run waits at most this long for the consumer to deliver everything.
DRAIN_BOUND = 60.0
DRAIN_FETCH = 10_000


# -- faults -------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """``restart`` (SIGTERM, start), ``kill`` (SIGKILL, start) or ``pause`` (SIGSTOP,
    SIGCONT ``pause_for`` seconds later), ``after`` seconds into a call (see
    :class:`FaultThread`) or between calls."""

    kind: str
    after: float = 0.0
    pause_for: float = 0.0

    def __repr__(self) -> str:
        pause = f", pause_for={self.pause_for:.2f}" if self.kind == "pause" else ""
        return f"Fault({self.kind!r}, after={self.after:.2f}{pause})"


def faults() -> st.SearchStrategy[Fault]:
    return st.builds(
        Fault,
        kind=st.sampled_from(["restart", "kill", "pause"]),
        after=st.floats(0.0, 0.03),
        pause_for=st.floats(0.2, LONGEST_PAUSE),
    )


@dataclass(frozen=True)
class Publish:
    """``n`` new rows, acked, fast or atomic, with or without msg ids."""

    n: int
    mode: str
    ids: bool
    window: int
    raise_on_error: bool
    fault: Fault | None


@dataclass(frozen=True)
class Republish:
    """Every row a publish reported failed with an id, and ``n`` rows with ids sent
    before, from a fraction ``start`` into them."""

    start: float
    n: int
    mode: str
    fault: Fault | None


@dataclass(frozen=True)
class Read:
    """A read from a fraction ``start`` into the stream to its end."""

    start: float
    method: str
    batch_rows: int
    fault: Fault | None


@dataclass(frozen=True)
class Consume:
    """One fetch of up to ``n`` messages, then ``ack_sync`` of all, every other or none."""

    n: int
    acks: str
    heartbeat: float | None
    fault: Fault | None


def steps() -> st.SearchStrategy[Publish | Republish | Read | Consume | Fault]:
    """One step, weighted: publishing and consuming most; a fault in about one call
    in five, and between calls in one step in ten."""
    maybe_fault = st.none() | st.none() | st.none() | st.none() | faults()
    publish = st.builds(
        Publish,
        # A few rows, or enough that a fault lands in the middle of the call.
        n=st.one_of(st.integers(1, 50), st.integers(1000, 10_000)),
        mode=st.sampled_from(["acked", "fast", "atomic"]),
        ids=st.booleans(),
        window=st.sampled_from([16, 512, 8192]),
        raise_on_error=st.booleans(),
        fault=maybe_fault,
    )
    republish = st.builds(
        Republish,
        start=st.floats(0.0, 1.0),
        n=st.integers(0, 500),
        mode=st.sampled_from(["acked", "fast", "atomic"]),
        fault=maybe_fault,
    )
    read = st.builds(
        Read,
        start=st.floats(0.0, 1.0),
        method=st.sampled_from(["auto", "consumer", "direct"]),
        batch_rows=st.sampled_from([7, 1000, 65536]),
        fault=maybe_fault,
    )
    consume = st.builds(
        Consume,
        n=st.integers(1, 500),
        acks=st.sampled_from(["all", "some", "none"]),
        heartbeat=st.sampled_from([None, 0.5]),
        fault=maybe_fault,
    )
    between = faults().map(lambda f: Fault(f.kind, 0.0, f.pause_for))
    return st.one_of(
        publish, publish, publish, republish, read, read, consume, consume, consume, between
    )


def inject(server: NatsServer, fault: Fault) -> None:
    """Inject ``fault`` now; the server is running and answering when this returns."""
    if fault.kind == "restart":
        server.restart()
    elif fault.kind == "kill":
        server.kill()
        server.start()
    else:
        assert server.process is not None
        pid = server.process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(fault.pause_for)
        finally:
            os.kill(pid, signal.SIGCONT)


class FaultThread(threading.Thread):
    """Injects a fault ``fault.after`` seconds after the call it accompanies sets
    ``midway`` (a publish with half its rows handed over, a read with its first batch
    in hand, a fetch at once), so the fault falls inside the call, not after it."""

    def __init__(self, server: NatsServer, fault: Fault, midway: threading.Event) -> None:
        super().__init__(name=f"fault-{fault.kind}", daemon=True)
        self.server, self.fault, self.midway = server, fault, midway
        self.error: BaseException | None = None
        #: When the fault struck (monotonic), to tell whether it fell inside the call.
        self.struck: float | None = None

    def run(self) -> None:
        try:
            # The call sets it, or run_with when the call returned without.
            self.midway.wait(PUBLISH_BOUND + READ_BOUND)
            time.sleep(self.fault.after)
            self.struck = time.monotonic()
            inject(self.server, self.fault)
        except BaseException as err:  # reported by the step, not lost in the thread
            self.error = err


def bounded(what: str, limit: float, call: Callable[[], T]) -> T:
    """``call()`` in a thread, failing the step when it has not returned within
    ``limit`` seconds: a hung call is a failure naming the call, not a hung test."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as err:
            box["error"] = err

    thread = threading.Thread(target=run, name=what, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        raise AssertionError(f"{what} did not return within {limit:.0f} s")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def read_whole(client: ja.Client, stream: str, **options: Any) -> pa.Table:
    with client.read(stream, **options) as reader:
        return reader.read_all()


# -- the model ------------------------------------------------------------------------


@dataclass
class Row:
    """One row ever sent. Its payload is unique, so a message names its row."""

    key: bytes
    subject: str
    msg_id: str | None
    acked: bool = False
    #: A publish reported it failed ("may or may not be stored").
    failed: bool = False
    #: The stream sequence, once an ack named it or a read or delivery saw it.
    seq: int | None = None


@dataclass
class Figures:
    """What the runs did, printed at the end of the test."""

    examples: int = 0
    steps: Counter[str] = field(default_factory=Counter)
    rows_sent: int = 0
    rows_acked: int = 0
    rows_failed: int = 0
    failed_found_stored: int = 0
    duplicates_confirmed: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    faults_inside_calls: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    #: The first message of each (call, error class).
    error_examples: dict[str, str] = field(default_factory=dict)
    rows_read: int = 0
    delivered: int = 0
    redelivered: int = 0
    acks_forgotten_by_kill: int = 0

    def line(self) -> str:
        steps = sum(self.steps.values())
        return (
            f"seed {SEED} (replay: JETSTREAM_ARROW_MODEL_SEED={SEED} pytest "
            f"tests/properties/test_model_stream.py, or @seed({SEED}) on StreamMachine): "
            f"{self.examples} runs, {steps} steps ({dict(self.steps)}); "
            f"{self.rows_sent} rows sent, {self.rows_acked} acknowledged, "
            f"{self.rows_failed} reported failed of which {self.failed_found_stored} "
            f"found stored; {self.duplicates_confirmed} re-sent ids answered duplicate; "
            f"faults {dict(self.faults)} ({self.faults_inside_calls} struck before the call "
            f"returned); errors raised {dict(self.errors)}; "
            f"{self.rows_read} rows read, {self.delivered} delivered to the consumer "
            f"({self.redelivered} again, {self.acks_forgotten_by_kill} acks forgotten "
            "at a kill -9)"
        )


class StreamMachine(RuleBasedStateMachine):
    """One stream and one durable pull consumer on ``server``, and their model."""

    server: ClassVar[NatsServer]
    figures: ClassVar[Figures]
    runs: ClassVar[int] = 0

    def __init__(self) -> None:
        super().__init__()
        cls = type(self)
        cls.runs += 1
        cls.figures.examples += 1
        self.stream = f"MODEL{cls.runs}"
        self.client = ja.connect(
            self.server.url,
            max_reconnects=None,
            reconnect_delay=0.1,
            connect_timeout=2.0,
            request_timeout=2.0,
        )
        self.client.create_stream(
            self.stream,
            [f"{self.stream}.>"],
            allow_batched=True,
            allow_atomic=True,
            allow_direct=True,
            duplicate_window=600.0,
        )
        self.client.create_consumer(
            self.stream,
            durable_name="model",
            ack_policy="explicit",
            ack_wait=ACK_WAIT,
            # The end of a run drains everything in large fetches.
            max_ack_pending=DRAIN_FETCH,
        )
        self.consumer = self.client.pull_consumer(self.stream, "model")
        self.rows: dict[bytes, Row] = {}
        self.by_seq: dict[int, bytes] = {}
        self.next_row = 0
        #: Rows with ids, in the order sent, and those a publish reported failed.
        self.id_rows: list[Row] = []
        self.unacked_ids: dict[bytes, Row] = {}
        #: Consumer: seq -> kills so far when the server confirmed its ack.
        self.consumer_acked: dict[int, int] = {}
        #: Acks sent whose confirmation a fault cut off: they may or may not count.
        self.ack_unsure: set[int] = set()
        self.kills = 0

    # -- bookkeeping ------------------------------------------------------------------

    def new_rows(self, n: int, mode: str, ids: bool) -> list[Row]:
        rows = []
        for _ in range(n):
            number = self.next_row
            self.next_row += 1
            key = f"{self.stream}-row-{number}".encode()
            row = Row(key, f"{self.stream}.{mode}", f"id-{number}" if ids else None)
            self.rows[key] = row
            rows.append(row)
            if ids:
                self.id_rows.append(row)
        self.figures.rows_sent += n
        return rows

    def learn(self, key: bytes, seq: int, subject: str | None, where: str) -> Row:
        """A message at ``seq`` holds ``key``: it must be a row sent, on its subject, at
        the one sequence it has ever had, and no other row may have had that sequence."""
        row = self.rows.get(key)
        assert row is not None, f"{where}: seq {seq} holds {key!r}, which was never sent"
        if subject is not None:
            assert subject == row.subject, f"{where}: {key!r} at seq {seq} on {subject!r}"
        if row.seq is None:
            row.seq = seq
            if row.failed:
                self.figures.failed_found_stored += 1
        assert row.seq == seq, f"{where}: {key!r} at seq {seq}, earlier at {row.seq} (doubled)"
        held = self.by_seq.setdefault(seq, key)
        assert held == key, f"{where}: seq {seq} holds {key!r}, earlier {held!r}"
        return row

    def acknowledge(self, row: Row) -> None:
        if not row.acked:
            row.acked = True
            self.figures.rows_acked += 1
        self.unacked_ids.pop(row.key, None)

    def run_with(
        self,
        what: str,
        fault: Fault | None,
        limit: float,
        call: Callable[[], T],
        midway: threading.Event | None = None,
    ) -> tuple[T | None, JetStreamArrowError | None]:
        """``call()`` bounded in time, with ``fault`` injected once the call sets
        ``midway`` (at once without one): its value, or the package's error it raised
        (of a class more precise than the base)."""
        thread = None
        if midway is None:
            midway = threading.Event()
            midway.set()
        if fault is not None:
            self.note_fault(fault, during=what.split(" ", 1)[0].split("(", 1)[0])
            thread = FaultThread(self.server, fault, midway)
            thread.start()
        error: JetStreamArrowError | None = None
        try:
            return bounded(what, limit, call), None
        except JetStreamArrowError as err:
            error = err
        finally:
            returned = time.monotonic()
            midway.set()
            if thread is not None:
                thread.join(LONGEST_PAUSE + 60.0)
                if thread.struck is not None and thread.struck < returned:
                    self.figures.faults_inside_calls += 1
                assert not thread.is_alive(), f"the {fault} during {what} did not end"
                if thread.error is not None:
                    raise thread.error
        key = f"{what.split(' ', 1)[0].split('(', 1)[0]}: {type(error).__name__}"
        self.figures.errors[key] += 1
        self.figures.error_examples.setdefault(key, str(error)[:300])
        assert type(error) is not JetStreamArrowError, (
            f"{what} raised the bare JetStreamArrowError (its class was lost): {error}"
        )
        return None, error

    def note_fault(self, fault: Fault, during: str | None = None) -> None:
        self.figures.faults[f"{fault.kind} during {during}" if during else fault.kind] += 1
        if fault.kind == "kill":
            self.kills += 1

    # -- publishing -------------------------------------------------------------------

    def send(
        self,
        rows: list[Row],
        mode: str,
        window: int,
        raise_on_error: bool,
        fault: Fault | None,
        ids: bool,
    ) -> PublishResult:
        table = pa.table(
            {
                "subject": pa.array([r.subject for r in rows], pa.utf8()),
                "data": pa.array([r.key for r in rows], pa.binary()),
                **({"msg_id": pa.array([r.msg_id for r in rows], pa.utf8())} if ids else {}),
            }
        )

        midway = threading.Event()

        def halves() -> Iterator[pa.RecordBatch]:
            half = len(rows) // 2
            for start, stop in ((0, half), (half, len(rows))):
                if start == half:
                    midway.set()
                if stop > start:
                    yield from table.slice(start, stop - start).to_batches()

        def publish() -> PublishResult:
            # A stream of two batches: the engine reads the second when the first
            # is on its way, and the fault strikes then.
            return self.client.publish(
                pa.RecordBatchReader.from_batches(table.schema, halves()),
                mode=mode,
                window=window,
                ack_timeout=ACK_TIMEOUT,
                raise_on_error=raise_on_error,
            )

        what = f"publish of {len(rows)} rows ({mode})"
        result, error = self.run_with(what, fault, PUBLISH_BOUND, publish, midway)
        if error is not None:
            result = error.result
            assert isinstance(result, PublishResult), (
                f"{type(error).__name__} from {what} carries no .result (what was stored is "
                f"unknown): {error}"
            )
        assert result is not None
        assert result.rows == len(rows)
        assert result.stored + result.duplicates + result.failed == len(rows), result
        if fault is None:
            assert result.failed == 0, result.failed_rows().slice(0, 3).to_pylist()
        return result

    def take(self, rows: list[Row], result: PublishResult, mode: str, ids: bool) -> None:
        """Fold a publish's acks into the model."""
        acks = result.acks.to_pydict()
        failed = [i for i, e in enumerate(acks["error"]) if e is not None]
        if mode == "fast" and failed:
            # Fast batches stop at a lost message: the stored rows are a prefix.
            assert failed == list(range(failed[0], len(rows))), failed[:10]
        for row, seq, duplicate, error in zip(
            rows, acks["seq"], acks["duplicate"], acks["error"], strict=True
        ):
            if error is not None:
                self.figures.rows_failed += 1
                row.failed = True
                if row.msg_id is not None and not row.acked:
                    self.unacked_ids[row.key] = row
                continue
            if mode in ("acked", "atomic"):
                assert seq is not None, (row, "acknowledged without a sequence")
                assert ids or not duplicate, (row, "a duplicate without a msg id")
                self.learn(row.key, seq, None, "publish ack")
            self.acknowledge(row)

    def publish(self, step: Publish) -> None:
        rows = self.new_rows(step.n, step.mode, step.ids)
        result = self.send(rows, step.mode, step.window, step.raise_on_error, step.fault, step.ids)
        self.take(rows, result, step.mode, step.ids)

    def republish(self, step: Republish) -> None:
        """Rows with ids again: every one a publish reported failed, and ``n`` sent
        before. None may be stored twice; one already acknowledged is a duplicate."""
        first = int(step.start * len(self.id_rows))
        chosen = {r.key: r for r in self.id_rows[first : first + step.n]}
        chosen.update(self.unacked_ids)
        rows = list(chosen.values())
        if not rows:
            return
        before = {r.key: (r.acked, r.seq) for r in rows}
        mode = step.mode
        result = self.send(rows, mode, 512, False, step.fault, ids=True)
        acks = result.acks.to_pydict()
        for row, seq, duplicate, error in zip(
            rows, acks["seq"], acks["duplicate"], acks["error"], strict=True
        ):
            acked_before, seq_before = before[row.key]
            if (
                error is None
                and mode in ("acked", "atomic")
                and (acked_before or seq_before is not None)
            ):
                # Known to be stored, and the server still has its id: a duplicate,
                # answered with the first sequence.
                assert duplicate, (row, "a stored row was stored again")
                assert seq_before is None or seq == seq_before, (row, seq, seq_before)
                self.figures.duplicates_confirmed += 1
        self.take(rows, result, mode, ids=True)

    # -- reading ----------------------------------------------------------------------

    def last_seq(self) -> int:
        state = bounded(
            "stream_info", REQUEST_BOUND, lambda: self.client.stream_info(self.stream).state
        )
        # Nothing is deleted: the stream holds 1..last_seq without holes.
        assert state.messages == state.last_seq, state
        assert state.first_seq == (1 if state.messages else state.first_seq), state
        return int(state.last_seq)

    def check_read(self, start: int, table: pa.Table, where: str) -> int:
        """A read from ``start``: consecutive sequences from it, every message a row
        sent at its one sequence. Returns the last sequence read (start - 1 if none)."""
        known_end = max(self.by_seq, default=0)
        data = table.to_pydict()
        seqs = data["seq"]
        assert seqs == list(range(start, start + len(seqs))), (
            f"{where}: sequences from {start} are not contiguous: {seqs[:5]}...{seqs[-5:]}"
        )
        for seq, key, subject in zip(seqs, data["data"], data["subject"], strict=True):
            self.learn(key, seq, subject, where)
        self.figures.rows_read += len(seqs)
        end = start + len(seqs) - 1
        # A row already seen at a sequence in the range was read there (learn checks
        # that); one seen beyond the end of the read was left out.
        assert end >= known_end, f"{where}: read ended at {end}, but seq {known_end} holds a row"
        return end

    def check_all_acknowledged_present(self, where: str) -> None:
        missing = [r for r in self.rows.values() if r.acked and r.seq is None]
        assert not missing, (
            f"{where}: {len(missing)} acknowledged rows are not in the stream, e.g. {missing[:3]}"
        )

    def read(self, step: Read) -> None:
        last = self.last_seq()
        first = 1 + int(step.start * last)
        method, fault = step.method, step.fault

        midway = threading.Event()

        def read_range() -> pa.Table:
            batches = []
            with self.client.read(
                self.stream,
                start_seq=first,
                method=method,
                batch_rows=step.batch_rows,
                heartbeat=HEARTBEAT,
                resume_timeout=RESUME_TIMEOUT,
            ) as reader:
                for batch in reader:
                    batches.append(batch)
                    midway.set()
                return pa.Table.from_batches(batches, reader.schema)

        what = f"read from {first} ({method})"
        table, error = self.run_with(what, fault, READ_BOUND, read_range, midway)
        # A read survives a fault shorter than its resume_timeout.
        assert error is None, f"{what} across {fault}: {error!r}"
        assert table is not None
        end = self.check_read(first, table, f"read from {first} ({method})")
        assert end >= last, f"read from {first} ended at {end} before the last seq {last}"
        if first == 1:
            self.check_all_acknowledged_present("read of the whole stream")

    # -- consuming --------------------------------------------------------------------

    def delivered(self, batch: Any, where: str) -> list[int]:
        data = batch.data.to_pydict()
        seqs: list[int] = data["seq"]
        for seq, key, subject in zip(seqs, data["data"], data["subject"], strict=True):
            self.learn(key, seq, subject, where)
            self.figures.delivered += 1
            acked_at_kills = self.consumer_acked.pop(seq, None)
            if seq in self.ack_unsure:
                self.ack_unsure.discard(seq)
                self.figures.redelivered += 1
            elif acked_at_kills is not None:
                assert self.kills > acked_at_kills, (
                    f"{where}: seq {seq} delivered again although its ack was confirmed "
                    "and no kill -9 came since"
                )
                self.figures.acks_forgotten_by_kill += 1
                self.figures.redelivered += 1
        return seqs

    def ack(self, batch: Any, rows: list[int], seqs: list[int], where: str) -> None:
        if not rows:
            return
        _, error = self.run_with(
            f"ack_sync of {len(rows)} rows ({where})",
            None,
            REQUEST_BOUND,
            lambda: batch.ack_sync(rows, 2.0),
        )
        if error is not None:
            self.ack_unsure.update(seqs[i] for i in rows)
            return
        for i in rows:
            self.consumer_acked[seqs[i]] = self.kills

    def consume(self, step: Consume) -> None:
        n, fault = step.n, step.fault
        expires = 2.0

        def fetch_and_ack() -> tuple[Any, list[int]]:
            batch = self.consumer.fetch(n, expires=expires, heartbeat=step.heartbeat)
            return batch, self.delivered(batch, "fetch")

        fetched, error = self.run_with(f"fetch({n})", fault, expires + REQUEST_BOUND, fetch_and_ack)
        if error is not None:
            # A fault may end a fetch with an error saying the server or the
            # connection failed it (never that the consumer is gone: it never is);
            # what the fetch had delivered comes again after ack_wait.
            assert fault is not None, f"fetch({n}) failed with no fault: {error!r}"
            assert isinstance(error, (TimeoutError, ConnectionError)), (
                f"fetch({n}) across {fault} raised {type(error).__name__}: {error}"
            )
            return
        assert fetched is not None
        batch, seqs = fetched
        chosen = {"all": range(len(seqs)), "some": range(0, len(seqs), 2), "none": range(0)}
        self.ack(batch, list(chosen[step.acks]), seqs, "consume")

    def drain(self) -> None:
        """Consume until every message of the stream was delivered and acked."""
        deadline = time.monotonic() + DRAIN_BOUND
        last = self.last_seq()
        while True:
            # An ack whose confirmation a fault cut off counts: if the server lost it,
            # the message comes again and is acked then.
            done = self.consumer_acked.keys() | self.ack_unsure
            missing = [s for s in range(1, last + 1) if s not in done]
            if not missing:
                return
            assert time.monotonic() < deadline, (
                f"the consumer has not delivered {len(missing)} of {last} messages within "
                f"{DRAIN_BOUND:.0f} s, e.g. seq {missing[:5]}"
            )
            batch = bounded(
                "fetch while draining",
                REQUEST_BOUND,
                lambda: self.consumer.fetch(DRAIN_FETCH, expires=ACK_WAIT, heartbeat=None),
            )
            seqs = self.delivered(batch, "drain")
            self.ack(batch, list(range(len(seqs))), seqs, "drain")
            last = self.last_seq()

    # -- one step ---------------------------------------------------------------------

    @rule(step=steps())
    def step(self, step: Publish | Republish | Read | Consume | Fault) -> None:
        self.figures.steps[type(step).__name__] += 1
        if isinstance(step, Publish):
            self.publish(step)
        elif isinstance(step, Republish):
            self.republish(step)
        elif isinstance(step, Read):
            self.read(step)
        elif isinstance(step, Consume):
            self.consume(step)
        else:
            # A fault between calls: the next call meets a server that restarted
            # (its streams and consumers reloaded from disk) or was paused.
            self.note_fault(step)
            inject(self.server, step)

    # -- the end of each run ------------------------------------------------------------

    def teardown(self) -> None:
        try:
            if not self.server.running:
                self.server.start()
            last = self.last_seq()
            table = bounded(
                "final read",
                READ_BOUND,
                lambda: read_whole(self.client, self.stream, start_seq=1, heartbeat=HEARTBEAT),
            )
            assert self.check_read(1, table, "final read") >= last
            self.check_all_acknowledged_present("final read")
            self.drain()
        finally:
            try:
                self.client.delete_stream(self.stream)
            finally:
                self.client.close()


@pytest.mark.fault
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_stream_driven_through_random_publishes_reads_consumption_and_faults_matches_its_model(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    server = nats_server_factory(jetstream_extra="sync_interval: always", tmpfs=True)
    StreamMachine.server = server
    StreamMachine.figures = Figures()
    StreamMachine.runs = 0
    phases = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if _SHRINK else [])
    started = time.monotonic()
    try:
        run_state_machine_as_test(
            seed(SEED)(StreamMachine),
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                deadline=None,
                database=None,
                print_blob=True,
                phases=phases,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        figures = StreamMachine.figures
        print(f"{figures.line()}; {time.monotonic() - started:.0f} s")
        for key, message in figures.error_examples.items():
            print(f"  {key}, e.g. {message}")
