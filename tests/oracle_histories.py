"""Stream histories applied with an independent client (nats-py), and the oracle: what
that client sees stored afterwards, message by message.

Used by ``tests/read/test_oracle_readers.py``. Nothing here uses the package under test:

- :class:`PyNats` is a nats-py connection driven by its own event loop (one per
  history), with the JetStream API spoken as JSON, so every field the server sends
  is seen as it is sent;
- :func:`parse_header_block` reads a stored header block byte for byte, keeping every
  value of a repeated header in order (nats-py's own parser keeps one value per name),
  as nats.go reads one: names as given (case kept), values without the white space
  around them, grouped by name, sorted by name;
- :meth:`PyNats.snapshot` is the oracle: ``STREAM.MSG.GET`` of every sequence from
  the stream's first to its last, the timestamp parsed from the server's RFC 3339
  nanoseconds with integers;
- :class:`History` and its operations are what the hypothesis strategies of the test
  module generate, and :meth:`PyNats.apply` applies them.
"""

from __future__ import annotations

import asyncio
import base64
import calendar
import contextlib
import json
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import nats
import nats.js.errors
from nats.protocol import command as nats_command

#: Relative subjects of a history's stream ``<name>.<rel>``: two levels, one with a
#: single token (wildcards of both depths select different sets), one not ASCII.
SUBJECTS = ("a.x", "a.y", "b.x", "b.y", "c", "b.\u00e9")

#: Header values of one stored message, by name, as the package's ``headers`` column
#: holds them: ``((name, (value, ...)), ...)`` sorted by name; None without headers.
Headers = tuple[tuple[str, tuple[str, ...]], ...] | None


# -- what is stored ----------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """One stored message, as the oracle read it."""

    seq: int
    subject: str
    data: bytes
    headers: Headers
    time_ns: int

    @property
    def ts_us(self) -> int:
        """The timestamp the package's schema holds: microseconds, cut (not rounded)."""
        return self.time_ns // 1000

    def row(self, with_headers: bool = True) -> tuple[Any, ...]:
        if with_headers:
            return (self.seq, self.subject, self.data, self.headers, self.ts_us)
        return (self.seq, self.subject, self.data, self.ts_us)


def parse_header_block(block: bytes) -> Headers:
    """A stored header block (``NATS/1.0\\r\\nName: value\\r\\n...\\r\\n``) as
    :data:`Headers`: every value of a repeated name, in order; names as given."""
    lines = block.split(b"\r\n")
    if not lines[0].startswith(b"NATS/1.0"):
        raise AssertionError(f"not a NATS header block: {block[:40]!r}")
    grouped: dict[str, list[str]] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(b":")
        if not sep:
            raise AssertionError(f"a header line without ':' in {block!r}")
        grouped.setdefault(name.decode(), []).append(value.strip(b" \t").decode())
    if not grouped:
        return None
    return tuple(sorted((k, tuple(v)) for k, v in grouped.items()))


_RFC3339 = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$"
)


def rfc3339_ns(text: str) -> int:
    """Epoch nanoseconds of the server's RFC 3339 time, with integers only."""
    m = _RFC3339.match(text)
    if m is None:
        raise AssertionError(f"not an RFC 3339 time: {text!r}")
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    frac = int((m.group(7) or "").ljust(9, "0"))
    seconds = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    zone = m.group(8)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds * 1_000_000_000 + frac


def header_block(headers: Sequence[tuple[str, str]]) -> bytes:
    """The header block a client sends for ``headers`` (repeated names allowed)."""
    lines = b"".join(f"{k}: {v}\r\n".encode() for k, v in headers)
    return b"NATS/1.0\r\n" + lines + b"\r\n"


# -- a history -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamShape:
    """How a history's stream is made (with nats-py)."""

    allow_direct: bool = True
    max_msgs_per_subject: int = -1
    allow_msg_ttl: bool = False
    memory: bool = False
    first_seq: int = 1  # the sequence the stream (and each remake of it) starts at

    def config(self, name: str) -> dict[str, Any]:
        return {
            "first_seq": self.first_seq,
            "name": name,
            "subjects": [f"{name}.>"],
            "storage": "memory" if self.memory else "file",
            "allow_direct": self.allow_direct,
            "allow_rollup_hdrs": True,
            "max_msgs_per_subject": self.max_msgs_per_subject,
            "allow_msg_ttl": self.allow_msg_ttl,
            "num_replicas": 1,
            "duplicate_window": 120 * 1_000_000_000,
        }


@dataclass(frozen=True)
class Publish:
    subject: str  # relative, one of SUBJECTS
    data: bytes
    headers: tuple[tuple[str, str], ...] | None = None  # None: no header block at all
    ttl: bool = False  # adds Nats-TTL: 1s (the stream must allow it)


@dataclass(frozen=True)
class Burst:
    """``count`` small messages on one subject, payloads numbered."""

    subject: str
    count: int


@dataclass(frozen=True)
class Delete:
    """STREAM.MSG.DELETE of the live message at ``where`` (0..1) of the live ones."""

    where: float


@dataclass(frozen=True)
class PurgeSubject:
    subject: str


@dataclass(frozen=True)
class PurgeKeep:
    keep: int


@dataclass(frozen=True)
class Rollup:
    """A message with ``Nats-Rollup: sub`` (or ``all``): its subject (or the stream)
    keeps only it."""

    subject: str
    data: bytes
    whole_stream: bool = False


@dataclass(frozen=True)
class Recreate:
    """The stream deleted and made again with the same name and shape."""


Op = Publish | Burst | Delete | PurgeSubject | PurgeKeep | Rollup | Recreate


@dataclass(frozen=True)
class History:
    shape: StreamShape
    ops: tuple[Op, ...]

    @property
    def has_ttl(self) -> bool:
        return any(isinstance(op, Publish) and op.ttl for op in self.ops)


# -- nats-py --------------------------------------------------------------------------------


class Changed(Exception):
    """The stream changed while the oracle read it (a message expired meanwhile)."""


class ApiFailure(Exception):
    def __init__(self, subject: str, error: dict[str, Any]) -> None:
        super().__init__(f"{subject}: {error}")
        self.error = error


@dataclass
class Applied:
    """What applying a history did: the sequences published with a TTL, and the
    sequences the stream's generations ended at."""

    ttl_seqs: list[int] = field(default_factory=list)
    recreated: int = 0
    duplicates: int = 0


class PyNats:
    """A nats-py connection on an event loop of its own (run in this thread)."""

    TIMEOUT = 10.0

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.nc = self.run(nats.connect(url, max_reconnect_attempts=3, connect_timeout=5))
        self.js = self.nc.jetstream(timeout=self.TIMEOUT)
        self._inbox = self.nc.new_inbox()
        self._replies = self.run(self.nc.subscribe(f"{self._inbox}.*"))
        self._next_reply = 0

    def run(self, coro: Any, timeout: float = 60.0) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.run(self.nc.close(), 10)
        self.loop.close()

    def __enter__(self) -> PyNats:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the API as JSON ------------------------------------------------------------------
    async def api(self, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        payload = b"" if body is None else json.dumps(body).encode()
        msg = await self.nc.request(f"$JS.API.{subject}", payload, timeout=self.TIMEOUT)
        reply: dict[str, Any] = json.loads(msg.data)
        if "error" in reply:
            raise ApiFailure(subject, reply["error"])
        return reply

    def create_stream(self, name: str, shape: StreamShape) -> None:
        self.run(self.api(f"STREAM.CREATE.{name}", shape.config(name)))

    def delete_stream(self, name: str) -> None:
        with contextlib.suppress(ApiFailure):
            self.run(self.api(f"STREAM.DELETE.{name}"))

    def create_consumer(self, stream: str, config: dict[str, Any]) -> None:
        name = config["durable_name"]
        body = {"stream_name": stream, "config": config}
        self.run(self.api(f"CONSUMER.CREATE.{stream}.{name}", body))

    def consumer_info(self, stream: str, name: str) -> dict[str, Any]:
        return self.run(self.api(f"CONSUMER.INFO.{stream}.{name}"))  # type: ignore[no-any-return]

    def stream_state(self, stream: str, deleted: bool = False) -> dict[str, Any]:
        body = {"deleted_details": True} if deleted else None
        info = self.run(self.api(f"STREAM.INFO.{stream}", body))
        return info["state"]  # type: ignore[no-any-return]

    def live_seqs(self, stream: str) -> list[int]:
        state = self.stream_state(stream, deleted=True)
        if not state["messages"]:
            return []
        gone = set(state.get("deleted") or [])
        return [s for s in range(state["first_seq"], state["last_seq"] + 1) if s not in gone]

    # -- publishing ------------------------------------------------------------------------
    async def publish(
        self, subject: str, data: bytes, headers: Sequence[tuple[str, str]] | None
    ) -> dict[str, Any]:
        """Publish and wait for the stream's ack. Headers with one value per name go
        through nats-py's own ``js.publish``; repeated names (which its API cannot
        express) as an HPUB built here, on the same connection."""
        if headers is None or len({k for k, _ in headers}) == len(headers):
            hdrs = None if headers is None else dict(headers)
            ack = await self.js.publish(subject, data, headers=hdrs, timeout=self.TIMEOUT)
            return {"seq": ack.seq, "duplicate": bool(ack.duplicate)}
        self._next_reply += 1
        reply = f"{self._inbox}.{self._next_reply}"
        cmd = nats_command.hpub_cmd(subject, reply, header_block(headers), data)
        await self.nc._send_command(cmd)
        await self.nc.flush(timeout=int(self.TIMEOUT))
        while True:
            msg = await self._replies.next_msg(timeout=self.TIMEOUT)
            if msg.subject == reply:
                break
        answer: dict[str, Any] = json.loads(msg.data)
        if "error" in answer:
            raise ApiFailure(subject, answer["error"])
        return {"seq": answer["seq"], "duplicate": bool(answer.get("duplicate"))}

    def publish_sync(
        self, subject: str, data: bytes, headers: Sequence[tuple[str, str]] | None = None
    ) -> int:
        return int(self.run(self.publish(subject, data, headers))["seq"])

    # -- applying a history ---------------------------------------------------------------
    def apply(
        self,
        name: str,
        history: History,
        before_recreate: Callable[[], None] | None = None,
    ) -> Applied:
        """Make stream ``name`` and apply ``history`` to it; ``before_recreate`` runs
        before each :class:`Recreate` (to let the package read the old stream)."""
        done = Applied()
        self.create_stream(name, history.shape)
        for op in history.ops:
            self._apply_one(name, history.shape, op, done, before_recreate)
        return done

    def _apply_one(
        self,
        name: str,
        shape: StreamShape,
        op: Op,
        done: Applied,
        before_recreate: Callable[[], None] | None,
    ) -> None:
        if isinstance(op, Publish):
            headers = list(op.headers) if op.headers is not None else None
            if op.ttl:
                headers = [*(headers or []), ("Nats-TTL", "1s")]
            ack = self.run(self.publish(f"{name}.{op.subject}", op.data, headers))
            done.duplicates += ack["duplicate"]
            if op.ttl and not ack["duplicate"]:
                done.ttl_seqs.append(ack["seq"])
        elif isinstance(op, Burst):

            async def burst() -> None:
                acks = [
                    self.js.publish(f"{name}.{op.subject}", f"burst {i}".encode())
                    for i in range(op.count)
                ]
                await asyncio.gather(*acks)

            self.run(burst())
        elif isinstance(op, Delete):
            live = self.live_seqs(name)
            if live:
                seq = live[min(int(op.where * len(live)), len(live) - 1)]
                assert self.run(self.js.delete_msg(name, seq))
        elif isinstance(op, PurgeSubject):
            self.run(self.js.purge_stream(name, subject=f"{name}.{op.subject}"))
        elif isinstance(op, PurgeKeep):
            # keep=0 is the whole stream (nats-py leaves a falsy keep out of the request).
            self.run(self.api(f"STREAM.PURGE.{name}", {"keep": op.keep} if op.keep else {}))
        elif isinstance(op, Rollup):
            kind = "all" if op.whole_stream else "sub"
            self.run(self.publish(f"{name}.{op.subject}", op.data, [("Nats-Rollup", kind)]))
        elif isinstance(op, Recreate):
            if before_recreate is not None:
                before_recreate()
            self.run(self.api(f"STREAM.DELETE.{name}"))
            self.create_stream(name, shape)
            done.recreated += 1
        else:  # pragma: no cover
            raise AssertionError(op)

    def wait_expired(self, name: str, seqs: Sequence[int], timeout: float = 8.0) -> None:
        """Wait until every message published with a TTL is gone, so that what the
        oracle sees stays put while the package reads."""
        pending = set(seqs)
        deadline = time.monotonic() + timeout
        while pending:
            pending = {s for s in pending if self.get(name, s) is not None}
            if not pending:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"messages with Nats-TTL 1s still stored: {sorted(pending)}")
            time.sleep(0.1)

    # -- the oracle -----------------------------------------------------------------------
    async def _get(self, stream: str, seq: int) -> Stored | None:
        try:
            reply = await self.api(f"STREAM.MSG.GET.{stream}", {"seq": seq})
        except ApiFailure as e:
            if e.error.get("err_code") == 10037 or e.error.get("code") == 404:
                return None  # no message at this sequence
            raise
        m = reply["message"]
        assert m["seq"] == seq, m
        return Stored(
            seq=m["seq"],
            subject=m["subject"],
            data=base64.b64decode(m.get("data") or ""),
            headers=parse_header_block(base64.b64decode(m["hdrs"])) if m.get("hdrs") else None,
            time_ns=rfc3339_ns(m["time"]),
        )

    def get(self, stream: str, seq: int) -> Stored | None:
        return self.run(self._get(stream, seq))  # type: ignore[no-any-return]

    def snapshot(self, stream: str) -> list[Stored]:
        """Every stored message of ``stream``, in sequence order: one
        ``STREAM.MSG.GET`` per sequence from the first to the last (gaps answer 404),
        then the same through nats-py's ``js.get_msg`` as a cross-check of subject
        and payload."""
        state = self.stream_state(stream)
        first, last = state["first_seq"], state["last_seq"]

        async def all_of() -> list[Stored]:
            out: list[Stored] = []
            seqs = list(range(max(first, 1), last + 1))
            for i in range(0, len(seqs), 200):
                got = await asyncio.gather(*(self._get(stream, s) for s in seqs[i : i + 200]))
                out.extend(m for m in got if m is not None)
            return out

        stored: list[Stored] = self.run(all_of())
        assert len(stored) == state["messages"], (len(stored), state)

        async def cross_check() -> None:
            for m in stored:
                try:
                    raw = await self.js.get_msg(stream, m.seq)
                except nats.js.errors.NotFoundError as e:
                    raise Changed(f"{stream}: seq {m.seq} went during the snapshot") from e
                assert (raw.seq, raw.subject, raw.data or b"") == (m.seq, m.subject, m.data)

        self.run(cross_check())
        return stored


# -- bounded waits ---------------------------------------------------------------------------


class DeadlineExceeded(Exception):
    pass


@contextlib.contextmanager
def deadline(seconds: float, what: str) -> Iterator[None]:
    """Raise :class:`DeadlineExceeded` in this (the main) thread after ``seconds``.

    The package's blocking calls release the GIL and look at Python's signal
    handlers every 50 ms, so a ``SIGUSR1`` sent from a timer thread interrupts a
    ``next()`` on a consumer that never delivers. Elsewhere than in the main thread
    this does nothing (pytest-timeout remains the bound)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = threading.Event()
    active = [True]

    def handler(signum: int, frame: Any) -> None:
        if fired.is_set() and active[0]:
            raise DeadlineExceeded(f"{what}: not done within {seconds} s")

    previous = signal.signal(signal.SIGUSR1, handler)
    main = threading.main_thread().ident
    assert main is not None

    def fire() -> None:
        fired.set()
        signal.pthread_kill(main, signal.SIGUSR1)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        active[0] = False
        timer.cancel()
        timer.join()  # a signal sent now finds this handler, which ignores it
        signal.signal(signal.SIGUSR1, previous)
