"""Every blocking call of the Python API ends within a deadline when its server stops
answering in the middle of it:

- **paused** (``SIGSTOP``): the TCP connection stays open and silent, as with a hung
  server or a black-holed network. The call raises a typed error within a bound
  derived from the timeouts set on the connection and on the call (an ack timeout, a
  heartbeat, a request timeout, the pings that prove a connection dead);
- **killed for good** (``kill -9``, no restart) under a connection that gives up at
  once (``max_reconnects=0``): the call raises ``ConnectionFailedError``, or its own
  timeout when that comes first;
- for publishes also **killed while the client reconnects** (``max_reconnects=None``):
  the publish still ends within its ack deadlines.

A publish's error carries ``.result``, which reports exactly the rows the server
acknowledged before the fault; the stream, read again after the pause or after a
restart from the store (which syncs every write, ``sync_interval: always``), holds
every one of them at the sequence its ack named, and after a kill nothing more.

Each call runs in a thread joined with a timeout, so a call that hangs fails its test
instead of hanging the suite. Each case prints one line: the error and its time after
the fault against its bound, and the rows delivered, or acknowledged against stored.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import read_all
from jetstream_arrow import _core
from jetstream_arrow.client import PublishResult
from jetstream_arrow.exceptions import (
    ConnectionFailedError,
    JetStreamArrowError,
    OperationTimeoutError,
    PublishError,
)
from natsserver import NatsServer, wait_until

pytestmark = [pytest.mark.fault, pytest.mark.timeout(90)]

# -- the timeouts the cases set, from which each bound is derived ---------------------

HEARTBEAT = 0.5
REQUEST_TIMEOUT = 1.0
RESUME_TIMEOUT = 1.0
ACK_TIMEOUT = 1.0
MAX_RETRIES = 2
RETRY_BACKOFF = 0.1
ACK_SYNC_TIMEOUT = 1.0
FETCH_EXPIRES = 2.0
#: How long past ``expires`` a fetch waits for the status with which the server ends
#: every pull request before it concludes that the server is gone.
FETCH_MARGIN = 2.0
#: A flow-control consumer's idle heartbeat (the server requires this one).
FLOW_CONTROL_HEARTBEAT = 1.0
CONNECT_TIMEOUT = 1.0
#: Pings are the one way to find a silent connection when no heartbeat is known: the
#: client closes a connection whose pings went unanswered at the third interval, then
#: tries to reconnect ``PAUSED_RECONNECTS`` times before giving up.
PING_INTERVAL = 1.0
PINGS_TO_STALE = 3
PAUSED_RECONNECTS = 1
RECONNECT_DELAY = 0.2
#: Scheduling on a busy two-core machine.
SLACK = 3.0
#: Past its bound by this much, a call still running is reported as hanging (its thread
#: is left behind).
HANG_MARGIN = 10.0
#: Setting a case up (publishing its data, creating consumers) before the fault.
SETUP_TIMEOUT = 30.0
#: In kill cases of a single request: the server is paused first and killed this much
#: later, so the request is in flight when the kill lands.
IN_FLIGHT = 0.3

READ_BOUND = 2 * HEARTBEAT + RESUME_TIMEOUT + REQUEST_TIMEOUT + SLACK
PUBLISH_BOUND = ACK_TIMEOUT + SLACK
PUBLISH_RETRIED_BOUND = (
    (MAX_RETRIES + 1) * ACK_TIMEOUT + sum(RETRY_BACKOFF * 2**k for k in range(MAX_RETRIES)) + SLACK
)
#: A silent connection found by its pings, then the reconnect attempts given up.
PING_BOUND = (
    PINGS_TO_STALE * PING_INTERVAL
    + (PAUSED_RECONNECTS + 1) * (CONNECT_TIMEOUT + RECONNECT_DELAY)
    + SLACK
)


# -- the fault ------------------------------------------------------------------------


#: How the server stops answering, and how many times the client tries to reconnect.
FAULTS: dict[str, int | None] = {"pause": None, "kill": 0, "kill-reconnecting": None}


class Fault:
    """Pauses (``SIGSTOP``) or kills (``SIGKILL``) the server by the PID its fixture
    started, once; ``end()`` resumes a paused server and forgets a killed one, so the
    fixture can stop it and a publish case can start it again from its store."""

    def __init__(self, kind: str, server: NatsServer) -> None:
        assert kind in FAULTS
        assert server.process is not None
        self.kind, self.server, self.pid = kind, server, server.process.pid
        self.at: float | None = None
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []
        self._ended = False

    @property
    def kills(self) -> bool:
        return self.kind != "pause"

    @property
    def signal(self) -> signal.Signals:
        return signal.SIGKILL if self.kills else signal.SIGSTOP

    def strike(self) -> None:
        """Pause or kill the server now (once; later calls do nothing)."""
        with self._lock:
            if self.at is None:
                os.kill(self.pid, self.signal)
                if not self.kills:
                    wait_stopped(self.pid)
                self.at = time.monotonic()

    def strike_after(self, seconds: float) -> None:
        """Strike while the call waits for the server."""
        timer = threading.Timer(seconds, self.strike)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def strike_in_flight(self) -> None:
        """For a call that is one request and its reply: the server stops reading now,
        and a kill lands while the request is in flight."""
        if not self.kills:
            self.strike()
        else:
            os.kill(self.pid, signal.SIGSTOP)
            wait_stopped(self.pid)
            self.strike_after(IN_FLIGHT)

    def end(self) -> None:
        if self._ended:
            return
        self._ended = True
        for timer in self._timers:
            timer.cancel()
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        if self.kills:
            self.server.kill()


def wait_stopped(pid: int) -> None:
    """Return once the process is stopped: ``kill`` returns before a busy server's
    threads have all stopped, and a request sent meanwhile could still be answered."""

    def state() -> str:
        # /proc/<pid>/stat: "pid (comm) state ..."; comm may hold spaces.
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]

    wait_until(lambda: state() in ("T", "t"), 5.0, f"process {pid} to stop on SIGSTOP", poll=0.005)


def connect_for(fault: Fault, server: NatsServer, *, ping: bool = False) -> ja.Client:
    """A client for a case: after a kill, given up at once or reconnecting forever
    (``FAULTS``); for a pause, reconnecting as usual (the call's own deadline must end
    it), or with ``ping`` found dead by its pings and given up after
    ``PAUSED_RECONNECTS`` attempts, for a call that has no deadline of its own."""
    if fault.kills:
        return ja.connect(
            server.url,
            request_timeout=REQUEST_TIMEOUT,
            max_reconnects=FAULTS[fault.kind],
            reconnect_delay=RECONNECT_DELAY,
        )
    if ping:
        return ja.connect(
            server.url,
            request_timeout=REQUEST_TIMEOUT,
            ping_interval=PING_INTERVAL,
            connect_timeout=CONNECT_TIMEOUT,
            max_reconnects=PAUSED_RECONNECTS,
            reconnect_delay=RECONNECT_DELAY,
        )
    return ja.connect(server.url, request_timeout=REQUEST_TIMEOUT)


@dataclass
class Case:
    """What a call needs: its server, the fault, a client, and the figures it reports."""

    server: NatsServer
    fault: Fault
    figures: dict[str, Any] = field(default_factory=dict)
    _client: ja.Client | None = None

    def client(self, *, ping: bool = False) -> ja.Client:
        if self._client is None:
            self._client = connect_for(self.fault, self.server, ping=ping)
        return self._client

    def close(self) -> float | None:
        """Close the client (once), waiting at most a few seconds; how long it took
        (None: it did not close, which the figures then say)."""
        if self._client is not None and "closed_in" not in self.figures:
            started = time.monotonic()
            thread = threading.Thread(target=self._client.close, daemon=True)
            thread.start()
            thread.join(5.0)
            self.figures["closed_in"] = None if thread.is_alive() else time.monotonic() - started
        return self.figures.get("closed_in", 0.0)


# -- publishes --------------------------------------------------------------------------

PUBLISH_STREAM = "P"
BATCH_ROWS = 2_000
BATCHES = 3
#: Once the first batch is stored, how long its acks get to reach the client.
ACKS_ARRIVE = 0.3


def row_data(i: int) -> bytes:
    return f"row-{i}".encode()


def input_batches(case: Case) -> Iterator[pa.RecordBatch]:
    """Three batches; the fault strikes once the server has stored the first one and
    its acks have had time to arrive, so rows were acknowledged before it and rows are
    sent after it, in the middle of the call."""
    for b in range(BATCHES):
        if b == 1:
            case.figures["stored_before"] = stored_before_fault(case.server)
            time.sleep(ACKS_ARRIVE)
            case.fault.strike()
        data = [row_data(i) for i in range(b * BATCH_ROWS, (b + 1) * BATCH_ROWS)]
        yield pa.record_batch({"data": pa.array(data, pa.binary())})


def stored_before_fault(server: NatsServer) -> int:
    """The messages the server holds once the first batch has arrived: all of it, or
    what it stored before it stopped taking more (a fast-ingest batch waits for acks)."""
    seen, steady_since = -1, time.monotonic()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        stored = int(server.monitor("jsz").get("messages", 0))
        if stored >= BATCH_ROWS:
            return stored
        if stored != seen:
            seen, steady_since = stored, time.monotonic()
        elif stored > 0 and time.monotonic() - steady_since > 0.5:
            return stored
        time.sleep(0.02)
    raise AssertionError(f"the server stored {seen} rows of the first batch in 10 s")


PUBLISH_OPTIONS: dict[str, Any] = {
    "ack_timeout": ACK_TIMEOUT,
    "max_retries": MAX_RETRIES,
    "retry_backoff": RETRY_BACKOFF,
}


def publish(options: dict[str, Any]) -> Callable[[Case], Any]:
    def call(case: Case) -> Any:
        client = case.client()
        client.create_stream(
            PUBLISH_STREAM, [f"{PUBLISH_STREAM}.>"], allow_batched=options.get("mode") == "fast"
        )
        reader = pa.RecordBatchReader.from_batches(
            pa.schema({"data": pa.binary()}), input_batches(case)
        )
        return client.publish(
            reader, subject=f"{PUBLISH_STREAM}.rows", **PUBLISH_OPTIONS, **options
        )

    return call


def publish_batches(case: Case) -> Any:
    client = case.client()
    client.create_stream(PUBLISH_STREAM, [f"{PUBLISH_STREAM}.>"])
    with client.publisher(
        subject=f"{PUBLISH_STREAM}.rows", msg_id_prefix="b-", **PUBLISH_OPTIONS
    ) as publisher:
        return list(publisher.publish_batches(input_batches(case)))


def check_publish(case: Case, error: BaseException, *, fast: bool) -> None:
    """The error reports what was acknowledged, and the stream (read again after the
    pause, or after a restart from the store) agrees with it."""
    assert isinstance(error, (ConnectionFailedError, PublishError)), error
    result = getattr(error, "result", None)
    assert isinstance(result, PublishResult), (
        f"{type(error).__name__} carries no PublishResult in .result, so what was "
        f"acknowledged is not reported: {error}"
    )
    acknowledged = result.stored + result.duplicates
    case.figures.update(acknowledged=acknowledged, failed=result.failed, rows=result.rows)
    stored_before = case.figures["stored_before"]
    # Closed before the server comes back, so that a reconnecting client cannot send
    # what it still holds.
    case.close()
    case.fault.end()
    if case.fault.kills:
        case.server.start()
    with ja.connect(case.server.url) as checker:
        back = read_all(checker, PUBLISH_STREAM)
    data = back.column("data").to_pylist()
    case.figures["in_stream"] = len(data)
    by_seq = dict(zip(back.column("seq").to_pylist(), data, strict=True))
    assert acknowledged + result.failed == result.rows, "a row is neither stored nor failed"
    assert len(set(data)) == len(data), "a row was stored twice"
    assert set(data) <= {row_data(i) for i in range(BATCHES * BATCH_ROWS)}
    if fast:
        # Fast-ingest acks cover ranges and name no sequence; the stored rows of a
        # fast publish are a prefix of its input.
        assert set(data) >= {row_data(i) for i in range(result.stored)}
        assert acknowledged <= stored_before
    else:
        for i, seq in enumerate(result.acks.column("seq").to_pylist()):
            if seq is not None:
                assert by_seq.get(seq) == row_data(i), (i, seq, by_seq.get(seq))
        # Every ack the server sent before the fault had reached the client: each is
        # reported.
        assert acknowledged == stored_before, (
            f"{acknowledged} rows reported acknowledged, {stored_before} stored before the "
            f"{case.fault.kind}"
        )
    if case.fault.kills and FAULTS[case.fault.kind] == 0:
        # A client that gave up holds nothing more: the store holds what the server
        # had stored when it was killed, no more.
        assert len(data) == stored_before, (len(data), stored_before)
    elif case.fault.kills:
        # A client still reconnecting sends what it had queued once the server is
        # back, even after close(): those rows were reported failed "may or may not be
        # stored", and each is stored once at most.
        assert stored_before <= len(data) <= result.rows, (len(data), stored_before)


# -- reads ------------------------------------------------------------------------------

READ_STREAM = "R"
READ_ROWS = 20_000
READ_BATCH = 500


def publish_rows(client: ja.Client, n: int) -> None:
    data = pa.array([f"m{i}".encode() for i in range(n)], pa.binary())
    assert client.publish(pa.table({"data": data}), subject=f"{READ_STREAM}.n").stored == n


def stream_with_rows(client: ja.Client, n: int, **config: Any) -> None:
    client.create_stream(READ_STREAM, [f"{READ_STREAM}.>"], **config)
    publish_rows(client, n)


def batches_until_error(case: Case, batches: Iterator[Any]) -> None:
    """Takes batches, striking after the first, and records the sequences delivered."""
    seqs: list[int] = case.figures.setdefault("seqs", [])
    for batch in batches:
        if isinstance(batch, pa.RecordBatch):
            seqs.extend(batch.column("seq").to_pylist())
        else:
            seqs.extend(batch.data.column("seq").to_pylist())
            batch.ack()
        case.fault.strike()


def read(method: str) -> Callable[[Case], Any]:
    def call(case: Case) -> Any:
        client = case.client()
        stream_with_rows(client, READ_ROWS, allow_direct=True)
        reader = client.read(
            READ_STREAM,
            method=method,
            batch_rows=READ_BATCH,
            heartbeat=HEARTBEAT,
            resume_timeout=RESUME_TIMEOUT,
        )
        batches_until_error(case, iter(reader))

    return call


def ordered_consumer(case: Case) -> Any:
    client = case.client()
    stream_with_rows(client, READ_ROWS)
    consumer = client.ordered_consumer(
        READ_STREAM, heartbeat=HEARTBEAT, resume_timeout=RESUME_TIMEOUT
    )
    batches_until_error(case, consumer.messages(batch_rows=READ_BATCH))


# -- durable consumers ------------------------------------------------------------------

CONSUMED_ROWS = 200
CONSUMED_BATCH = 50


def pull_consumer(case: Case) -> ja.PullConsumer:
    client = case.client()
    client.create_stream(READ_STREAM, [f"{READ_STREAM}.>"])
    client.create_consumer(READ_STREAM, durable_name="pull", ack_policy="explicit")
    return client.pull_consumer(READ_STREAM, "pull")


def fetch(heartbeat: float | None) -> Callable[[Case], Any]:
    """A fetch waiting on an empty consumer (a long poll) when the fault strikes."""

    def call(case: Case) -> Any:
        consumer = pull_consumer(case)
        case.fault.strike_after(IN_FLIGHT)
        expires = 10.0 if heartbeat else FETCH_EXPIRES
        return consumer.fetch(100, expires=expires, heartbeat=heartbeat)

    return call


def pull_messages(case: Case) -> Any:
    consumer = pull_consumer(case)
    publish_rows(case.client(), CONSUMED_ROWS)
    messages = consumer.messages(
        max_messages=CONSUMED_BATCH, batch_rows=CONSUMED_BATCH, heartbeat=HEARTBEAT
    )
    batches_until_error(case, messages)


def ack_sync(case: Case) -> Any:
    consumer = pull_consumer(case)
    publish_rows(case.client(), 10)
    batch = consumer.fetch(10, expires=5.0)
    assert len(batch) == 10
    case.fault.strike_in_flight()
    batch.ack_sync(timeout=ACK_SYNC_TIMEOUT)


def push(
    *, bound_by_subject: bool, heartbeat: float | None, pings: bool = False
) -> Callable[[Case], Any]:
    """Push consumption, the fault after the first batch. The consumer is looked up
    (its idle heartbeat with it), or bound by its deliver subject with or without
    the heartbeat passed to ``messages()``. Without one nothing from the server tells a
    quiet stream from a silent server: the client must ask the server itself, after
    the package's ``SILENCE_PROBE``, or learn it from the connection's ``pings``."""

    def call(case: Case) -> Any:
        client = case.client(ping=pings)
        client.create_stream(READ_STREAM, [f"{READ_STREAM}.>"])
        deliver = f"deliver.{READ_STREAM}"
        client.create_consumer(
            READ_STREAM,
            durable_name="push",
            deliver_subject=deliver,
            ack_policy="explicit",
            idle_heartbeat=heartbeat,
        )
        publish_rows(client, CONSUMED_ROWS)
        if bound_by_subject:
            consumer = client.push_consumer(
                READ_STREAM, "push", deliver_subject=deliver, ack_policy="explicit"
            )
            messages = consumer.messages(
                batch_rows=CONSUMED_BATCH, batch_wait=0.05, heartbeat=heartbeat
            )
        else:
            consumer = client.push_consumer(READ_STREAM, "push")
            messages = consumer.messages(batch_rows=CONSUMED_BATCH, batch_wait=0.05)
        batches_until_error(case, messages)

    return call


def flow_control(case: Case) -> Any:
    client = case.client()
    client.create_stream(READ_STREAM, [f"{READ_STREAM}.>"], retention="workqueue")
    client.create_consumer(
        READ_STREAM,
        durable_name="fc",
        deliver_subject=f"deliver.{READ_STREAM}",
        ack_policy="flow_control",
        max_ack_pending=1_000,
    )
    publish_rows(client, CONSUMED_ROWS)
    messages = client.push_consumer(READ_STREAM, "fc").messages(
        batch_rows=CONSUMED_BATCH, batch_wait=0.05
    )
    batches_until_error(case, messages)


# -- management and the connection -----------------------------------------------------


def management(request: Callable[[ja.Client], Any]) -> Callable[[Case], Any]:
    """One JetStream API request, in flight when the fault strikes."""

    def call(case: Case) -> Any:
        client = case.client()
        client.create_stream(READ_STREAM, [f"{READ_STREAM}.>"])
        client.create_consumer(READ_STREAM, durable_name="c", ack_policy="explicit")
        publish_rows(client, 1)
        case.fault.strike_in_flight()
        return request(client)

    return call


def connect(case: Case) -> Any:
    case.fault.strike_in_flight()
    return ja.connect(case.server.url, connect_timeout=CONNECT_TIMEOUT, max_reconnects=0)


# -- the matrix -------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    run: Callable[[Case], Any]
    #: Seconds from the fault to the error, at most.
    bound: float
    #: What a pause raises (a kill: see KILLED).
    paused: tuple[type[BaseException], ...] = (OperationTimeoutError,)
    #: Which publish check applies (None: not a publish).
    publish: str | None = None
    #: The faults the call is put to (default: a publish all of them, since a
    #: reconnecting client holds what is sent meanwhile in a queue a publish can fill;
    #: other calls a pause and a kill).
    only: tuple[str, ...] = ()

    @property
    def faults(self) -> tuple[str, ...]:
        if self.only:
            return self.only
        return tuple(FAULTS) if self.publish else ("pause", "kill")


API = {
    "create_stream": lambda c: c.create_stream("NEW", ["new.>"]),
    "stream_info": lambda c: c.stream_info(READ_STREAM),
    "list_streams": lambda c: c.list_streams(),
    "get_message": lambda c: c.get_message(READ_STREAM, seq=1),
    "purge_stream": lambda c: c.purge_stream(READ_STREAM),
    "create_consumer": lambda c: c.create_consumer(
        READ_STREAM, durable_name="new", ack_policy="explicit"
    ),
    "consumer_info": lambda c: c.consumer_info(READ_STREAM, "c"),
    "delete_stream": lambda c: c.delete_stream(READ_STREAM),
    # A flush is a round trip: it returns once the server has taken everything sent
    # before it.
    "flush": lambda c: c.flush(timeout=REQUEST_TIMEOUT),
}

CALLS: dict[str, Call] = {
    "publish-acked": Call(publish({}), PUBLISH_BOUND, (PublishError,), "acked"),
    "publish-acked-msg-ids": Call(
        publish({"msg_id_prefix": "p-"}), PUBLISH_RETRIED_BOUND, (PublishError,), "acked"
    ),
    "publish-fast": Call(publish({"mode": "fast"}), PUBLISH_BOUND, (PublishError,), "fast"),
    "publish_batches": Call(publish_batches, PUBLISH_RETRIED_BOUND, (PublishError,), "acked"),
    "read-consumer": Call(read("consumer"), READ_BOUND),
    "read-direct": Call(read("direct"), READ_BOUND),
    "ordered_consumer": Call(ordered_consumer, READ_BOUND),
    "fetch-heartbeat": Call(fetch(HEARTBEAT), 2 * HEARTBEAT + SLACK),
    "fetch": Call(fetch(None), FETCH_EXPIRES + FETCH_MARGIN + SLACK),
    "pull-messages": Call(pull_messages, 2 * HEARTBEAT + SLACK),
    "ack_sync": Call(ack_sync, ACK_SYNC_TIMEOUT + SLACK),
    "push-looked-up": Call(
        push(bound_by_subject=False, heartbeat=HEARTBEAT), 2 * HEARTBEAT + SLACK
    ),
    "push-by-subject-heartbeat": Call(
        push(bound_by_subject=True, heartbeat=HEARTBEAT), 2 * HEARTBEAT + SLACK
    ),
    "push-by-subject-no-heartbeat": Call(
        push(bound_by_subject=True, heartbeat=None),
        _core.DEFAULT_SILENCE_PROBE + REQUEST_TIMEOUT + SLACK,
        (ConnectionFailedError, OperationTimeoutError),
    ),
    "push-by-subject-no-heartbeat-pings": Call(
        push(bound_by_subject=True, heartbeat=None, pings=True),
        PING_BOUND,
        (ConnectionFailedError, OperationTimeoutError),
        only=("pause",),
    ),
    "push-flow-control": Call(flow_control, 2 * FLOW_CONTROL_HEARTBEAT + SLACK),
    **{name: Call(management(request), REQUEST_TIMEOUT + SLACK) for name, request in API.items()},
    "connect": Call(
        connect, CONNECT_TIMEOUT + SLACK, (ConnectionFailedError, OperationTimeoutError)
    ),
    # Asked again while the answer is transient (no reply), for up to the call's
    # resume_timeout (it waited the default 30 s whatever the caller's); the last
    # attempt may start just before that ends.
    "first_seq_at": Call(
        management(
            lambda c: c.first_seq_at(
                READ_STREAM, "2000-01-01T00:00:00Z", resume_timeout=RESUME_TIMEOUT
            )
        ),
        RESUME_TIMEOUT + REQUEST_TIMEOUT + SLACK,
    ),
    # The same for the patient requests Spark's driver and executors make around a
    # read (test_a_patient_request_outlasts_a_pause shows them outlast one).
    **{
        f"{name}-patient": Call(
            management(request), RESUME_TIMEOUT + REQUEST_TIMEOUT + SLACK, only=("pause",)
        )
        for name, request in {
            "stream_info": lambda c: c.stream_info(READ_STREAM, resume_timeout=RESUME_TIMEOUT),
            "list_streams": lambda c: c.list_streams(resume_timeout=RESUME_TIMEOUT),
            "stream_names": lambda c: c.stream_names(resume_timeout=RESUME_TIMEOUT),
        }.items()
    },
}


#: What a call raises when its server was killed: the lost connection, or the call's
#: own deadline when that comes first.
KILLED = (ConnectionFailedError, OperationTimeoutError)


def run_until_error(case: Case, call: Call, name: str) -> tuple[BaseException, float]:
    """Runs the call in a thread; its error and how long after the fault it came.
    Fails the test when the call returns instead, or is still running past its bound
    by ``HANG_MARGIN``."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["returned"] = call.run(case)
        except BaseException as err:
            outcome["error"], outcome["at"] = err, time.monotonic()

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    fault = case.fault
    wait_until(
        lambda: fault.at is not None or not thread.is_alive(),
        SETUP_TIMEOUT,
        f"{name}: the {fault.kind} to strike during the call",
    )
    if fault.at is None:
        if "error" in outcome:
            raise outcome["error"]
        pytest.fail(f"{name}: the call returned before the {fault.kind}: the fault missed it")
    thread.join(max(0.0, fault.at + call.bound + HANG_MARGIN - time.monotonic()))
    waited = time.monotonic() - fault.at
    if thread.is_alive():
        pytest.fail(
            f"{name}: still waiting {waited:.1f} s after the {fault.kind} (bound "
            f"{call.bound:.1f} s): it hangs; figures {summary(case.figures)}"
        )
    if "error" not in outcome:
        pytest.fail(
            f"{name}: returned {outcome['returned']!r} {waited:.1f} s after the "
            f"{fault.kind} instead of raising"
        )
    return outcome["error"], outcome["at"] - fault.at


def summary(figures: dict[str, Any]) -> str:
    shown = {k: v for k, v in figures.items() if k not in ("seqs", "closed_in")}
    if "seqs" in figures:
        shown["delivered"] = len(figures["seqs"])
    return ", ".join(f"{k} {v}" for k, v in shown.items())


@pytest.mark.parametrize(
    ("name", "kind"), [(name, kind) for name, call in CALLS.items() for kind in call.faults]
)
def test_a_call_ends_with_a_typed_error_in_time_when_its_server_stops(
    nats_server_factory: Callable[..., NatsServer], name: str, kind: str
) -> None:
    call = CALLS[name]
    server = nats_server_factory(jetstream_extra="sync_interval: always", tmpfs=True)
    fault = Fault(kind, server)
    case = Case(server, fault)
    error: BaseException | None = None
    try:
        error, elapsed = run_until_error(case, call, name)
        if call.publish is not None:
            check_publish(case, error, fast=call.publish == "fast")
    finally:
        fault.end()
        closed = case.close()
        if error is not None:
            print(
                f"{name}, {kind}: {type(error).__name__} {elapsed:.2f} s after it (bound "
                f"{call.bound:.1f} s); {summary(case.figures)}; client closed in "
                + ("(not within 5 s)" if closed is None else f"{closed:.2f} s")
                + f": {str(error)[:200]}"
            )
    # The base class means the core lost the error's kind on the way.
    assert type(error) is not JetStreamArrowError, error
    expected = call.paused if kind == "pause" else KILLED
    if call.publish is not None and fault.kills:
        expected = (*KILLED, PublishError)
    assert isinstance(error, expected), (
        f"{type(error).__name__} where {' or '.join(e.__name__ for e in expected)} was due: {error}"
    )
    assert elapsed < call.bound, f"{elapsed:.2f} s after the {kind}, bound {call.bound:.1f} s"
    seqs = case.figures.get("seqs")
    if seqs is not None:
        # What was delivered before the error came in order, each message once.
        assert seqs == sorted(set(seqs)), "a message was delivered twice or out of order"


def test_max_reconnects_0_gives_the_connection_up_at_the_first_loss(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    """What the kill cases above rest on: ``max_reconnects=0`` is no reconnecting (the
    client library underneath reads 0 as "forever"). Killed and started again, the
    server is not reached again: a request raises ``ConnectionFailedError`` at once."""
    server = nats_server_factory()
    with ja.connect(server.url, max_reconnects=0, request_timeout=REQUEST_TIMEOUT) as client:
        client.create_stream(READ_STREAM, [f"{READ_STREAM}.>"])
        server.kill()
        # Well after the one immediate try the client may make once the connection is lost.
        time.sleep(0.5)
        server.start()
        time.sleep(1.0)
        started = time.monotonic()
        with pytest.raises(ConnectionFailedError) as raised:
            client.stream_info(READ_STREAM)
        elapsed = time.monotonic() - started
    print(f"max_reconnects=0: {type(raised.value).__name__} {elapsed:.3f} s after the call")
    assert elapsed < 0.5


@pytest.mark.parametrize("request_name", ["stream_info", "list_streams", "stream_names"])
def test_a_patient_request_outlasts_a_pause(
    nats_server_factory: Callable[..., NatsServer], request_name: str
) -> None:
    """With ``resume_timeout`` a stream's state is asked again while the server does
    not answer (a pause of twice the request timeout here), and answered once it
    does; without, the request fails with the first timeout. The same request made
    patiently by Spark around its reads (no retry loop of its own)."""
    server = nats_server_factory()
    assert server.process is not None
    requests: dict[str, Callable[..., Any]] = {
        "stream_info": lambda c, **kw: c.stream_info(READ_STREAM, **kw).config.name,
        "list_streams": lambda c, **kw: [i.config.name for i in c.list_streams(**kw)],
        "stream_names": lambda c, **kw: c.stream_names(**kw),
    }
    request = requests[request_name]
    pause = 2 * REQUEST_TIMEOUT
    with ja.connect(server.url, request_timeout=REQUEST_TIMEOUT) as client:
        client.create_stream(READ_STREAM, [f"{READ_STREAM}.>"])
        for patience in (None, 10 * pause):
            os.kill(server.process.pid, signal.SIGSTOP)
            wait_stopped(server.process.pid)
            resume = threading.Timer(pause, os.kill, (server.process.pid, signal.SIGCONT))
            resume.start()
            started = time.monotonic()
            try:
                if patience is None:
                    with pytest.raises(OperationTimeoutError):
                        request(client)
                else:
                    answer = request(client, resume_timeout=patience)
                    assert answer in (READ_STREAM, [READ_STREAM]), answer
                    assert time.monotonic() - started >= pause * 0.9
            finally:
                resume.join()
            # The server answers again before the next round.
            wait_until(lambda: client.stream_names() == [READ_STREAM], 10.0, "the server back")
