"""Every way the package reads a stream, against an independent oracle, on generated
streams with a history.

A history (``tests/oracle_histories.py``) is applied to a fresh stream of the shared
server with nats-py, not with the package: publishes on a few subjects with random
payloads (empty, not UTF-8, a few KiB) and headers (repeated names, names differing
only in case, empty values, message ids that deduplicate), interior deletes, purges of
one subject and purges keeping N, a per-subject limit, per-message TTLs that expire,
rollups of a subject or of the whole stream, streams starting at sequence 1,000, and
the stream deleted and made again under its name. The oracle is what nats-py sees
stored afterwards: ``STREAM.MSG.GET`` of every sequence from the first to the last,
headers read byte for byte.

Each read path is compared with it row by row and column by column (seq, subject,
payload bytes, every header value in order, the timestamp's microseconds):
``client.read`` by consumer, by direct gets and "auto", over ranges starting and
ending inside deleted gaps, by time, with subject filters and small batches; the
latest message per subject (both methods, as of a sequence and as of a time); the
ordered consumer (from a sequence, a time, or new messages only); durable pull
consumers (``fetch`` and ``messages``), push consumers and flow-control push
consumers; ``read_kv`` against nats-py's KV API (and server markers); and JSON
payloads (``codec="json"`` and explicit Arrow schemas) against ``json.loads``.

Hypothesis examples per property (``max_examples``; not derandomized, so each run
tries new histories; ``ORACLE_SCALE=10`` in the environment multiplies them): range
reads 25, consumers 15, TTL histories 5, KV buckets 25, JSON values with a schema 25,
JSON values that do not fit 20 (115 generated histories or streams a run), plus the
explicit examples of what they found. With the package right, the module takes about
half a minute serially on two cores; a failing property's shrinking, and reads that
hang until their bounded wait, add to that.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import random
import re
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import jetstream_arrow as ja
from jetstream_arrow.consumers import ConsumedBatch
from jetstream_arrow.exceptions import BadInputError, MalformedPayloadError
from natsserver import NatsServer
from oracle_histories import (
    SUBJECTS,
    Burst,
    Changed,
    Delete,
    History,
    Publish,
    PurgeKeep,
    PurgeSubject,
    PyNats,
    Recreate,
    Rollup,
    Stored,
    StreamShape,
    deadline,
)

UniqueName = Callable[[str], str]


def hsettings(examples: int) -> Any:
    return settings(
        max_examples=examples * int(os.environ.get("ORACLE_SCALE", "1")),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        # No explain phase: it reruns a failing history hundreds of times.
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    )


# -- generated histories ----------------------------------------------------------------

#: Header names: two differing only in case (NATS headers are case-sensitive), a
#: one-letter one, ordinary ones; none that steers storage.
HEADER_NAMES = ("X-A", "x-a", "b", "Trace-Id", "Content-Type", "X-Empty")
VALUE_ALPHABET = "abcXYZ019 :;,=/-_.\u00e9\u65e5"

header_values = st.text(VALUE_ALPHABET, max_size=12).map(str.strip)
headers_st = st.one_of(
    st.none(),
    st.just(()),  # an empty header block
    st.lists(st.tuples(st.sampled_from(HEADER_NAMES), header_values), min_size=1, max_size=5).map(
        tuple
    ),
)
msg_ids = st.one_of(st.none(), st.sampled_from(["id-1", "id-2", "id-3"]))


def _random_bytes(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


payloads = st.one_of(
    st.just(b""),
    st.binary(max_size=40),
    st.text(max_size=20).map(str.encode),
    st.sampled_from([b"\xff", b"\xc3\x28", b"\x00\x00\x00", b"\r\n", b"a\x80b"]),  # not UTF-8
    st.builds(_random_bytes, st.integers(1_000, 4_096), st.integers(0, 2**32)),
)
subjects_st = st.sampled_from(SUBJECTS)


@st.composite
def publishes(draw: st.DrawFn, ttl: bool) -> Publish:
    headers = draw(headers_st)
    msg_id = draw(msg_ids)
    if msg_id is not None:
        headers = (*(headers or ()), ("Nats-Msg-Id", msg_id))
    return Publish(
        subject=draw(subjects_st),
        data=draw(payloads),
        headers=headers,
        ttl=ttl and draw(st.booleans()),
    )


def operations(shape: StreamShape, recreate: bool) -> st.SearchStrategy[Any]:
    publish = publishes(shape.allow_msg_ttl)
    choices = [
        publish,
        publish,
        publish,
        st.builds(Burst, subjects_st, st.integers(1, 25)),
        st.builds(Delete, st.floats(0, 1, exclude_max=True)),
        st.builds(Delete, st.floats(0, 1, exclude_max=True)),
        st.builds(PurgeSubject, subjects_st),
        st.builds(PurgeKeep, st.integers(0, 6)),
        st.builds(Rollup, subjects_st, payloads, st.sampled_from([False, False, False, True])),
    ]
    if recreate:
        choices.append(st.just(Recreate()))
    return st.one_of(*choices)


@st.composite
def histories(draw: st.DrawFn, ttl: bool = False, max_ops: int = 30) -> History:
    shape = StreamShape(
        allow_direct=draw(st.booleans()) if not ttl else True,
        max_msgs_per_subject=draw(st.sampled_from([-1, -1, 1, 2, 3])),
        allow_msg_ttl=ttl,
        memory=draw(st.booleans()),
        first_seq=draw(st.sampled_from([1, 1, 1, 1_000])),
    )
    ops = draw(st.lists(operations(shape, recreate=not ttl), min_size=3, max_size=max_ops))
    if ttl and not any(isinstance(op, Publish) and op.ttl for op in ops):
        ops.append(Publish("a.x", b"expires", None, ttl=True))
    return History(shape, tuple(ops))


# -- subjects -------------------------------------------------------------------------------


def subject_matches(subject: str, pattern: str) -> bool:
    """NATS subject matching: ``*`` one token, ``>`` one or more at the end."""
    s, p = subject.split("."), pattern.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(s) == len(p)


def matching(stored: Iterable[Stored], filters: Sequence[str] | None) -> list[Stored]:
    if not filters:
        return list(stored)
    return [m for m in stored if any(subject_matches(m.subject, f) for f in filters)]


#: Consumer filters (relative), each with a subject template (``{n}`` a number) that
#: matches it and no subject of a history: a consumer ends at such a sentinel.
CONSUMER_FILTERS: tuple[tuple[tuple[str, ...] | None, str], ...] = (
    (None, "z{n}.z"),
    ((">",), "z{n}"),
    (("a.*",), "a.z{n}"),
    (("*.x",), "z{n}.x"),
    (("a.x", "b.*"), "b.z{n}"),
)

#: Read filters (relative): literal, wildcards of both depths, two at once.
READ_FILTERS: tuple[tuple[str, ...] | None, ...] = (
    None,
    ("a.x",),
    ("c",),
    ("a.*",),
    ("*.x",),
    ("b.>",),
    ("a.x", "b.*"),
    ("a.y", "c"),
)


def absolute(name: str, filters: Sequence[str] | None) -> list[str] | None:
    return None if filters is None else [f"{name}.{f}" for f in filters]


# -- what the package gives, as rows ----------------------------------------------------------


def _headers_of(value: Any) -> Any:
    if value is None:
        return None
    return tuple((k, tuple(v)) for k, v in value)


def rows_of(
    batches: pa.Table | pa.RecordBatch | Sequence[pa.RecordBatch], stream: str
) -> list[tuple[Any, ...]]:
    """Rows ``(seq, subject, data, headers, ts_us)`` (no ``headers`` without the
    column), after checking the columns' types and the ``stream`` column."""
    if isinstance(batches, (pa.Table, pa.RecordBatch)):
        batches = [batches]
    rows: list[tuple[Any, ...]] = []
    for b in batches:
        assert b.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
        assert b.schema.field("seq").type == pa.int64()
        assert b.schema.field("data").type == pa.binary()
        assert set(b.column("stream").to_pylist()) <= {stream}
        seq = b.column("seq").to_pylist()
        subject = b.column("subject").to_pylist()
        data = b.column("data").to_pylist()
        ts = b.column("timestamp").cast(pa.int64()).to_pylist()
        if "headers" in b.schema.names:
            headers = [_headers_of(h) for h in b.column("headers").to_pylist()]
            rows.extend(zip(seq, subject, data, headers, ts, strict=True))
        else:
            rows.extend(zip(seq, subject, data, ts, strict=True))
    return rows


def expected_rows(stored: Iterable[Stored], with_headers: bool) -> list[tuple[Any, ...]]:
    return [m.row(with_headers) for m in stored]


def assert_same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], what: str) -> None:
    if got == want:
        return
    got_seqs = [r[0] for r in got]
    want_seqs = [r[0] for r in want]
    lines = [f"{what}: the package and the oracle differ"]
    if got_seqs != want_seqs:
        lines.append(f"  seqs: package {got_seqs}")
        lines.append(f"         oracle  {want_seqs}")
    else:
        for g, w in zip(got, want, strict=True):
            if g != w:
                lines.append(f"  seq {w[0]}: package {_short(g)}")
                lines.append(f"  {' ' * len(str(w[0]))}      oracle  {_short(w)}")
    raise AssertionError("\n".join(lines[:25]))


def _short(row: tuple[Any, ...]) -> str:
    return repr(tuple(v[:40] + b"..." if isinstance(v, bytes) and len(v) > 40 else v for v in row))


def read_rows(
    client: ja.Client, stream: str, within: float = 30.0, **options: Any
) -> list[tuple[Any, ...]]:
    with deadline(within, f"read {options}"):
        return rows_of(list(client.read(stream, **options)), stream)


# -- the read paths ---------------------------------------------------------------------------


def check_full_reads(
    client: ja.Client, name: str, shape: StreamShape, stored: list[Stored], what: str
) -> None:
    """Whole-stream reads by every method, with and without headers, and the latest
    message of each subject by both methods."""
    methods = ["consumer", "auto"] + (["direct"] if shape.allow_direct else [])
    for method in methods:
        assert_same(
            read_rows(client, name, method=method, include_headers=True),
            expected_rows(stored, True),
            f"{what}: read(method={method!r}, include_headers=True)",
        )
    # Small batches by rows and by bytes (5,000: above any message a history stores,
    # as a consumer's pulls must be: test_max_bytes_below_one_message).
    assert_same(
        read_rows(client, name, method="consumer", batch_rows=3, max_bytes=5_000),
        expected_rows(stored, False),
        f"{what}: read(method='consumer', batch_rows=3, max_bytes=5000)",
    )
    last = expected_rows(latest_per_subject(stored), True)
    for method in ["consumer"] + (["direct"] if shape.allow_direct else []):
        got = read_rows(client, name, last_per_subject=True, include_headers=True, method=method)
        assert_same(sorted(got), last, f"{what}: read(last_per_subject=True, method={method!r})")
    if not shape.allow_direct and stored:  # an empty stream: test_direct_refused_...
        with pytest.raises(BadInputError, match="allow_direct"):
            client.read(name, method="direct").read_all()


def latest_per_subject(stored: Iterable[Stored], upto: int | None = None) -> list[Stored]:
    last: dict[str, Stored] = {}
    for m in stored:
        if upto is None or m.seq <= upto:
            last[m.subject] = m
    return sorted(last.values(), key=lambda m: m.seq)


def interesting_seqs(stored: list[Stored], py: PyNats, name: str) -> list[int]:
    """Sequences where ranges go wrong: the ends, and each gap's edges and insides."""
    state = py.stream_state(name, deleted=True)
    first, last = state["first_seq"], state["last_seq"]
    held = {m.seq for m in stored}
    out = {1, first, last, last + 1, last + 2, max(first - 1, 1)}
    for s in range(first, last + 1):
        if s not in held:
            out.update({s - 1, s, s + 1})
    return sorted(s for s in out if s >= 1)


def _at(seqs: list[int], where: float) -> int:
    return seqs[min(int(where * len(seqs)), len(seqs) - 1)]


@dataclass(frozen=True)
class RangeRead:
    """A drawn range read; ``start``/``end`` pick among :func:`interesting_seqs`."""

    start: float | None
    end: float | None
    filters: tuple[str, ...] | None
    method: str
    batch_rows: int
    max_bytes: int
    headers: bool


@dataclass(frozen=True)
class ReadPlan:
    ranges: tuple[RangeRead, ...]
    time_from: float  # picks the stored message whose microsecond starts a read by time
    time_to: float
    time_direct: bool
    time_bounds: str  # "both", "start" or "end"
    time_filters: tuple[str, ...] | None
    last_filters: tuple[str, ...] | None
    as_of: float


fractions = st.floats(0, 1, exclude_max=True)
range_reads = st.builds(
    RangeRead,
    start=st.none() | fractions,
    end=st.none() | fractions,
    filters=st.sampled_from(READ_FILTERS),
    method=st.sampled_from(["consumer", "direct", "auto"]),
    batch_rows=st.sampled_from([1, 2, 7, 65_536]),
    # Above every message a history stores (a pull request bounded below a message's
    # size is refused: test_max_bytes_below_one_message_...).
    max_bytes=st.sampled_from([5_000, 6_000, 16_777_216]),
    headers=st.booleans(),
)
read_plans = st.builds(
    ReadPlan,
    ranges=st.lists(range_reads, min_size=1, max_size=3).map(tuple),
    time_from=fractions,
    time_to=fractions,
    time_direct=st.booleans(),
    time_bounds=st.sampled_from(["both", "start", "end"]),
    time_filters=st.sampled_from(READ_FILTERS),
    last_filters=st.sampled_from(READ_FILTERS),
    as_of=fractions,
)


def check_planned_reads(
    client: ja.Client,
    py: PyNats,
    name: str,
    shape: StreamShape,
    stored: list[Stored],
    plan: ReadPlan,
) -> None:
    seqs = interesting_seqs(stored, py, name)
    for spec in plan.ranges:
        start = None if spec.start is None else _at(seqs, spec.start)
        end = None if spec.end is None else max(_at(seqs, spec.end), start or 1)
        method = spec.method
        if method == "direct" and not (
            shape.allow_direct and (spec.filters is None or len(spec.filters) == 1)
        ):
            method = "consumer"
        options: dict[str, Any] = {
            "method": method,
            "include_headers": spec.headers,
            "batch_rows": spec.batch_rows,
            "max_bytes": spec.max_bytes,
        }
        if start is not None:
            options["start_seq"] = start
        if end is not None:
            options["end_seq"] = end
        if spec.filters is not None:
            options["subjects"] = absolute(name, spec.filters)
        lo, hi = start or 1, end if end is not None else math.inf
        want = [m for m in matching(stored, absolute(name, spec.filters)) if lo <= m.seq <= hi]
        got = read_rows(client, name, **options)
        assert_same(got, expected_rows(want, spec.headers), f"read({options})")
        for batch in client.read(name, **options):
            assert batch.num_rows <= spec.batch_rows
            sizes = [len(d) for d in batch.column("data").to_pylist()]
            assert batch.num_rows == 1 or sum(sizes) <= spec.max_bytes, (sizes, spec.max_bytes)

    # By time: from a stored message's microsecond to a later one's (both given as
    # the microseconds the timestamp column holds).
    if stored:
        a = stored[min(int(plan.time_from * len(stored)), len(stored) - 1)]
        b = stored[min(int(plan.time_to * len(stored)), len(stored) - 1)]
        start_ns, end_ns = a.ts_us * 1000, max(a, b, key=lambda m: m.seq).ts_us * 1000
        filters = absolute(name, plan.time_filters)
        direct_ok = shape.allow_direct and (filters is None or len(filters) == 1)
        options: dict[str, Any] = {
            "method": "direct" if direct_ok and plan.time_direct else "consumer"
        }
        if filters is not None:
            options["subjects"] = filters
        if plan.time_bounds != "end":
            options["start_time"] = _time(start_ns)
        if plan.time_bounds != "start":
            options["end_time"] = _time(end_ns)
        got = read_rows(client, name, **options)
        want = []
        for m in matching(stored, filters):
            if "start_time" in options and m.time_ns < start_ns:
                continue
            if "end_time" in options and m.time_ns > end_ns:
                break  # "stop at the first message stored after this time"
            want.append(m)
        assert_same(got, expected_rows(want, False), f"read by time {options}")

    # The latest message of each subject of some filter, and as of a sequence.
    filters = absolute(name, plan.last_filters)
    want = latest_per_subject(matching(stored, filters))
    for method in ["consumer"] + (["direct"] if shape.allow_direct else []):
        got = read_rows(client, name, last_per_subject=True, subjects=filters, method=method)
        assert_same(sorted(got), expected_rows(want, False), f"last_per_subject {filters} {method}")
    if shape.allow_direct:
        upto = _at(seqs, plan.as_of)
        got = read_rows(client, name, last_per_subject=True, as_of_seq=upto, include_headers=True)
        want = latest_per_subject(stored, upto)
        assert_same(sorted(got), expected_rows(want, True), f"last_per_subject as_of_seq={upto}")
        if stored:
            # As of a time: "messages stored up to it, its whole microsecond included".
            at = stored[min(int(plan.as_of * len(stored)), len(stored) - 1)]
            got = read_rows(client, name, last_per_subject=True, as_of_time=_time(at.ts_us * 1000))
            before = [m for m in stored if m.time_ns < (at.ts_us + 1) * 1000]
            want = latest_per_subject(before)
            assert_same(sorted(got), expected_rows(want, False), f"as_of_time of seq {at.seq}")


def _time(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // 1_000_000_000, timezone.utc).replace(
        microsecond=(ns // 1000) % 1_000_000
    )


# -- consumers ------------------------------------------------------------------------------


class Sentinels:
    """Messages published after the history on subjects no history uses: a consumer
    reads until the sentinel that matches its filter, and the oracle grows by each."""

    def __init__(self, py: PyNats, name: str, stored: list[Stored]) -> None:
        self.py, self.name = py, name
        self.stored = list(stored)
        self.count = 0

    def publish(self, template: str) -> Stored:
        self.count += 1
        subject = f"{self.name}.{template.format(n=self.count)}"
        seq = self.py.publish_sync(subject, f"sentinel {self.count}".encode(), [("S", "1")])
        got = self.py.get(self.name, seq)
        assert got is not None
        self.stored.append(got)
        return got


def consume(
    items: Iterator[Any], stream: str, until: int, what: str, ack: bool = False
) -> tuple[list[tuple[Any, ...]], list[tuple[int, int]]]:
    """Rows (with headers) of ``items`` up to sequence ``until``, and each row's
    ``(delivered, consumer_seq)`` for consumed batches."""
    rows: list[tuple[Any, ...]] = []
    meta: list[tuple[int, int]] = []
    with deadline(20, what):
        for item in items:
            batch = item.data if isinstance(item, ConsumedBatch) else item
            rows.extend(rows_of(batch, stream))
            if isinstance(item, ConsumedBatch):
                meta.extend(
                    zip(
                        batch.column("delivered").to_pylist(),
                        batch.column("consumer_seq").to_pylist(),
                        strict=True,
                    )
                )
                if ack:
                    item.ack()
            if rows and rows[-1][0] >= until:
                break
    return rows, meta


@dataclass(frozen=True)
class ConsumerPlan:
    """Drawn filters (indices into :data:`CONSUMER_FILTERS`) of the ordered consumer,
    of one with ``deliver="new"`` and of the four durable ones; where the ordered one
    starts (a fraction of the sequences up to its sentinel) and its batch size."""

    ordered: int
    ordered_start: float | None
    ordered_by_time: bool  # start at the time of the message at ordered_start
    ordered_batch_rows: int
    new: int
    durable: tuple[int, int, int, int]  # fetch, messages, push, flow_control


filter_index = st.integers(0, len(CONSUMER_FILTERS) - 1)
consumer_plans = st.builds(
    ConsumerPlan,
    ordered=filter_index,
    ordered_start=st.none() | fractions,
    ordered_by_time=st.booleans(),
    ordered_batch_rows=st.sampled_from([1, 4, 65_536]),
    new=filter_index,
    durable=st.tuples(filter_index, filter_index, filter_index, filter_index),
)


def check_consumers(
    client: ja.Client,
    py: PyNats,
    name: str,
    stored: list[Stored],
    plan: ConsumerPlan,
) -> None:
    sentinels = Sentinels(py, name, stored)

    def pick(index: int) -> tuple[list[str] | None, str]:
        filters, template = CONSUMER_FILTERS[index]
        return absolute(name, filters), template

    # The ordered consumer, from a drawn sequence.
    filters, template = pick(plan.ordered)
    end = sentinels.publish(template)
    start: dict[str, Any] = {}
    want = matching(sentinels.stored, filters)
    if plan.ordered_start is not None:
        at = sentinels.stored[int(plan.ordered_start * len(sentinels.stored))]
        if plan.ordered_by_time:  # from the microsecond the timestamp column shows
            start["start_time"] = _time(at.ts_us * 1000)
            want = [m for m in want if m.time_ns >= at.ts_us * 1000]
        else:
            start["start_seq"] = at.seq
            want = [m for m in want if m.seq >= at.seq]
    it = client.ordered_consumer(name, filters, **start).messages(
        include_headers=True, batch_rows=plan.ordered_batch_rows
    )
    try:
        rows, _ = consume(it, name, end.seq, "ordered consumer")
    finally:
        it.close()
    assert_same(rows, expected_rows(want, True), f"ordered_consumer({filters}, {start})")

    # deliver="new": only what is stored after it starts.
    filters, template = pick(plan.new)
    it = client.ordered_consumer(name, filters, deliver="new").messages(include_headers=True)
    try:
        new = sentinels.publish(template)
        rows, _ = consume(it, name, new.seq, "ordered consumer, deliver new")
    finally:
        it.close()
    assert_same(rows, [new.row(True)], "ordered_consumer(deliver='new')")

    # Durable consumers made with nats-py, each read to its sentinel.
    for kind, index in zip(
        ("fetch", "messages", "push", "flow_control"), plan.durable, strict=True
    ):
        filters, template = pick(index)
        end = sentinels.publish(template)
        want = matching(sentinels.stored, filters)
        cname = f"{kind.replace('_', '-')}-{sentinels.count}"
        config: dict[str, Any] = {"durable_name": cname, "deliver_policy": "all"}
        if filters is not None:
            config["filter_subjects"] = filters
        if kind in ("fetch", "messages"):
            config["ack_policy"] = "explicit"
        elif kind == "push":
            config.update(
                ack_policy="explicit",
                deliver_subject=f"dlv.{name}.{cname}",
                idle_heartbeat=1_000_000_000,
                flow_control=True,
            )
        else:
            config.update(
                ack_policy="flow_control",
                deliver_subject=f"dlv.{name}.{cname}",
                idle_heartbeat=1_000_000_000,
                flow_control=True,
                max_ack_pending=50,
            )
        py.create_consumer(name, config)
        what = f"{kind} consumer {filters}"
        if kind == "fetch":
            consumer = client.pull_consumer(name, cname, ack_policy="explicit")
            rows, meta = [], []
            with deadline(20, what):
                while not rows or rows[-1][0] < end.seq:
                    # As many as are left, at most 7: a fetch of more waits its expiry.
                    left = max(len(want) - len(rows), 1)
                    batch = consumer.fetch(min(7, left), expires=2.0, include_headers=True)
                    got, got_meta = consume(iter([batch]), name, end.seq, what)
                    rows += got
                    meta += got_meta
                    batch.ack_sync()
            info = py.consumer_info(name, cname)
            assert info["ack_floor"]["stream_seq"] == end.seq, info
            assert info["num_ack_pending"] == 0 and info["num_pending"] == 0, info
        elif kind == "messages":
            consumer = client.pull_consumer(name, cname, ack_policy="explicit")
            with consumer.messages(include_headers=True, max_messages=5, batch_rows=3) as msgs:
                rows, meta = consume(msgs, name, end.seq, what, ack=True)
        else:
            with client.push_consumer(name, cname).messages(include_headers=True) as msgs:
                rows, meta = consume(msgs, name, end.seq, what, ack=True)
                if kind == "flow_control":
                    assert msgs.consumer_resets == 0
        assert_same(rows, expected_rows(want, True), what)
        assert meta == [(1, i + 1) for i in range(len(want))], f"{what}: (delivered, consumer_seq)"
        py.run(py.api(f"CONSUMER.DELETE.{name}.{cname}"))


# -- the properties ---------------------------------------------------------------------------


@pytest.mark.timeout(300)
@hsettings(25)
@given(history=histories(), plan=read_plans)
@example(
    # Everything on one subject deleted but its first message, then the last
    # sequence of the stream deleted: ranges end inside a gap that reaches the end.
    history=History(
        StreamShape(allow_direct=True),
        (
            Burst("a.x", 6),
            Delete(0.5),
            Delete(0.5),
            Publish("b.y", b"", (("X-A", "1"), ("x-a", "2"), ("X-A", "3"))),
            Delete(0.99),
        ),
    ),
    plan=ReadPlan(
        ranges=(
            RangeRead(0.3, 0.99, None, "consumer", 2, 16_777_216, True),
            RangeRead(0.3, 0.99, None, "direct", 2, 16_777_216, True),
            RangeRead(0.5, None, ("a.x",), "direct", 1, 5_000, False),
        ),
        time_from=0.0,
        time_to=0.99,
        time_direct=True,
        time_bounds="both",
        time_filters=None,
        last_filters=None,
        as_of=0.5,
    ),
)
# Found by this test: a read from a start_time with two subject filters leaves out
# the messages of one filter stored at or after that time but before the other
# filter's first (here seq 2, on b.x): nats-server 2.15.1's consumers with
# DeliverByStartTime and several filters start there; the first sequence at the time
# (client.first_seq_at) is right.
@example(
    history=History(
        StreamShape(allow_direct=False), (Burst("b.x", 2), Burst("a.x", 1), Burst("a.x", 1))
    ),
    plan=ReadPlan(
        ranges=(RangeRead(None, None, ("a.x", "b.*"), "consumer", 65_536, 16_777_216, False),),
        time_from=0.25,
        time_to=0.5,
        time_direct=False,
        time_bounds="start",
        time_filters=("a.x", "b.*"),
        last_filters=None,
        as_of=0.0,
    ),
)
def test_range_reads_equal_the_oracle(
    client: ja.Client,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    history: History,
    plan: ReadPlan,
) -> None:
    name = unique_name("ORR")
    with PyNats(shared_nats_server.url) as py:
        try:

            def before_recreate() -> None:
                # The package reads the stream as it is before it goes, so whatever it
                # remembers of it is there when the new one is read.
                check_full_reads(client, name, history.shape, py.snapshot(name), "before delete")

            py.apply(name, history, before_recreate)
            stored = py.snapshot(name)
            check_full_reads(client, name, history.shape, stored, "after the history")
            check_planned_reads(client, py, name, history.shape, stored, plan)
        finally:
            py.delete_stream(name)


@pytest.mark.timeout(300)
@hsettings(15)
@given(history=histories(max_ops=14), plan=consumer_plans)
# The ordered consumer has the start_time finding of test_range_reads_equal_the_oracle:
# from seq 2's time with filters a.x and b.*, it starts at seq 3.
@example(
    history=History(
        StreamShape(allow_direct=False), (Burst("b.x", 2), Burst("a.x", 1), Burst("a.x", 1))
    ),
    plan=ConsumerPlan(
        ordered=4,
        ordered_start=0.2,
        ordered_by_time=True,
        ordered_batch_rows=65_536,
        new=0,
        durable=(0, 1, 2, 3),
    ),
)
def test_consumers_deliver_what_the_oracle_holds(
    client: ja.Client,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    history: History,
    plan: ConsumerPlan,
) -> None:
    name = unique_name("ORC")
    with PyNats(shared_nats_server.url) as py:
        try:
            py.apply(name, history)
            stored = py.snapshot(name)
            check_consumers(client, py, name, stored, plan)
        finally:
            py.delete_stream(name)


@pytest.mark.timeout(300)
@hsettings(5)
@given(history=histories(ttl=True, max_ops=12), plan=read_plans)
def test_reads_after_messages_expired_by_ttl_equal_the_oracle(
    client: ja.Client,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    history: History,
    plan: ReadPlan,
) -> None:
    name = unique_name("ORT")
    with PyNats(shared_nats_server.url) as py:
        try:
            applied = py.apply(name, history)
            assert applied.ttl_seqs or applied.duplicates
            py.wait_expired(name, applied.ttl_seqs)
            stored = py.snapshot(name)
            assert not {m.seq for m in stored} & set(applied.ttl_seqs)
            check_full_reads(client, name, history.shape, stored, "after TTLs expired")
            check_planned_reads(client, py, name, history.shape, stored, plan)
        finally:
            py.delete_stream(name)


# -- KV buckets -------------------------------------------------------------------------------

KV_KEYS = ("k1", "k2", "dev.1", "dev.2", "a-b_c=d/e")


@dataclass(frozen=True)
class KvOp:
    kind: str  # "put", "delete" or "purge", with nats-py's KV API
    key: str
    value: bytes = b""


kv_keys = st.sampled_from(KV_KEYS)
kv_ops = st.one_of(
    st.builds(KvOp, st.just("put"), kv_keys, payloads),
    st.builds(KvOp, st.just("put"), kv_keys, payloads),
    st.builds(KvOp, st.just("delete"), kv_keys),
    st.builds(KvOp, st.just("purge"), kv_keys),
)

#: A key's entry: (key, value, revision, operation, created_us).
Entry = tuple[str, bytes | None, int, str, int]


def kv_entries_of(stored: Iterable[Stored], bucket: str, upto: int | None = None) -> list[Entry]:
    """A bucket's entries from its stored messages (the latest of each key up to
    ``upto``), read as NATS's Go client reads them: ``KV-Operation`` DEL or PURGE,
    else a server marker's reason (MaxAge and Purge a purge, Remove a delete), else
    a put."""
    prefix = f"$KV.{bucket}."
    latest = {m.subject: m for m in stored if upto is None or m.seq <= upto}
    out: list[Entry] = []
    for subject, m in latest.items():
        headers = dict(m.headers or ())
        op = "PUT"
        if "KV-Operation" in headers:
            given = headers["KV-Operation"][0]
            op = given if given in ("DEL", "PURGE") else "PUT"
        elif "Nats-Marker-Reason" in headers:
            reason = headers["Nats-Marker-Reason"][0]
            op = {"MaxAge": "PURGE", "Purge": "PURGE", "Remove": "DEL"}.get(reason, "PUT")
        value = m.data if op == "PUT" else None
        out.append((subject[len(prefix) :], value, m.seq, op, m.ts_us))
    return sorted(out)


def kv_rows(reader: pa.RecordBatchReader) -> list[Entry]:
    with deadline(30, "read_kv"):
        table = reader.read_all()
    assert table.schema.field("created").type == pa.timestamp("us", tz="UTC")
    rows = zip(
        table.column("key").to_pylist(),
        table.column("value").to_pylist(),
        table.column("revision").to_pylist(),
        table.column("operation").to_pylist(),
        table.column("created").cast(pa.int64()).to_pylist(),
        strict=True,
    )
    return sorted(rows)  # type: ignore[arg-type]


def nats_py_kv_view(py: PyNats, bucket: str, stored: list[Stored]) -> list[Entry]:
    """The bucket as nats-py's KV API reads it: the last entry of each key's
    ``history()`` (its watcher reads server markers too), checked against ``keys()``
    and ``get()`` for the live ones; created from the oracle's timestamps."""
    times = {m.seq: m.ts_us for m in stored}

    async def view() -> list[Entry]:
        import nats.js.errors

        kv = await py.js.key_value(bucket)
        # nats-py's watcher now and then reports no entries for a key that has some
        # (its first consumer info can race the first delivery): "none" is believed
        # only when three watchers in a row say so.
        out: list[Entry] = []
        for key in KV_KEYS:
            history: list[Any] = []
            for _ in range(3):
                with contextlib.suppress(nats.js.errors.NoKeysError):
                    history = await kv.history(key)
                if history:
                    break
            if not history:
                continue
            last = history[-1]
            op = str(last.operation or "PUT").rsplit(".", 1)[-1]
            value = (last.value or b"") if op == "PUT" else None
            out.append((key, value, last.revision, op, times[last.revision]))
        want_live = sorted(e[0] for e in out if e[3] == "PUT")
        live: list[str] = []
        for _ in range(3):
            try:
                live = sorted(await kv.keys())
            except nats.js.errors.NoKeysError:
                live = []
            if live == want_live:
                break
        assert live == want_live, (live, out)
        for key, value, revision, op, _ in out:
            if op == "PUT":
                got = await kv.get(key)
                # nats-py's get() hands an empty value back as None.
                assert (got.value or b"", got.revision) == (value, revision)
        return sorted(out)

    return py.run(view())  # type: ignore[no-any-return]


@pytest.mark.timeout(300)
@hsettings(25)
@given(
    history=st.sampled_from([1, 2, 5]),
    direct=st.booleans(),
    ops=st.lists(kv_ops, max_size=20),
    as_of=fractions,
)
def test_read_kv_equals_nats_py_kv(
    client: ja.Client,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    history: int,
    direct: bool,
    ops: list[KvOp],
    as_of: float,
) -> None:
    bucket = unique_name("kvo")
    with PyNats(shared_nats_server.url) as py:

        async def apply() -> None:
            kv = await py.js.create_key_value(bucket=bucket, history=history, direct=direct)
            for op in ops:
                if op.kind == "put":
                    await kv.put(op.key, op.value)
                elif op.kind == "delete":
                    await kv.delete(op.key)
                else:
                    await kv.purge(op.key)

        try:
            py.run(apply())
            stored = py.snapshot(f"KV_{bucket}")
            every = nats_py_kv_view(py, bucket, stored)
            assert kv_entries_of(stored, bucket) == every  # the two oracles agree
            live = [e for e in every if e[3] == "PUT"]
            assert kv_rows(client.read_kv(bucket, include_deletes=True)) == every
            assert kv_rows(client.read_kv(bucket)) == live
            assert kv_rows(client.read_kv(bucket, "dev.*")) == [
                e for e in live if e[0].startswith("dev.")
            ]
            assert kv_rows(client.read_kv(bucket, ["k1", "a-b_c=d/e"], include_deletes=True)) == [
                e for e in every if e[0] in ("k1", "a-b_c=d/e")
            ]
            if direct and stored:
                at = stored[min(int(as_of * len(stored)), len(stored) - 1)]
                got = kv_rows(client.read_kv(bucket, include_deletes=True, as_of_seq=at.seq))
                assert got == kv_entries_of(stored, bucket, at.seq), f"as_of_seq={at.seq}"
                got = kv_rows(client.read_kv(bucket, as_of_time=_time(at.ts_us * 1000)))
                upto = max(m.seq for m in stored if m.time_ns < (at.ts_us + 1) * 1000)
                want = [e for e in kv_entries_of(stored, bucket, upto) if e[3] == "PUT"]
                assert got == want, f"as_of_time of revision {at.seq}"
        finally:
            with contextlib.suppress(Exception):
                py.run(py.js.delete_key_value(bucket))


@pytest.mark.timeout(120)
def test_read_kv_reads_server_markers_as_nats_kv_clients_do(
    client: ja.Client, shared_nats_server: NatsServer, unique_name: UniqueName
) -> None:
    """A key whose message expired (``Nats-TTL``) in a bucket with limit markers: the
    server writes a marker (``Nats-Marker-Reason: MaxAge``), which nats-py's watcher
    and NATS's Go client read as a purge (nats-py's ``get()`` does not: it reads the
    marker as a put of an empty value). The marker itself lives ``limit_marker_ttl``
    (3 s). Two buckets, with and without direct gets, wait together."""
    buckets = {unique_name("kvm"): True, unique_name("kvm"): False}
    with PyNats(shared_nats_server.url) as py:

        async def apply(bucket: str, direct: bool) -> None:
            kv = await py.js.create_key_value(
                bucket=bucket, history=3, direct=direct, limit_marker_ttl=3
            )
            await kv.put("k1", b"kept")
            await kv.create("dev.1", b"expires", msg_ttl=1)
            await kv.put("k2", b"a")
            await kv.delete("k2")

        try:
            for bucket, direct in buckets.items():
                py.run(apply(bucket, direct))
            for bucket in buckets:
                stream = f"KV_{bucket}"
                deadline_at = time.monotonic() + 10
                while True:
                    assert time.monotonic() < deadline_at, "no marker within 10 s"
                    try:
                        stored = py.snapshot(stream)
                    except Changed:  # the expiring message went while it was read
                        continue
                    marked = [m for m in stored if "Nats-Marker-Reason" in dict(m.headers or ())]
                    if marked:
                        break
                    time.sleep(0.05)
                every = nats_py_kv_view(py, bucket, stored)
                assert ("dev.1", None, marked[0].seq, "PURGE", marked[0].ts_us) in every
                assert kv_entries_of(stored, bucket) == every
                assert kv_rows(client.read_kv(bucket, include_deletes=True)) == every, bucket
                assert kv_rows(client.read_kv(bucket)) == [e for e in every if e[3] == "PUT"]
                assert py.snapshot(stream) == stored, "the marker went while the bucket was read"
        finally:
            for bucket in buckets:
                with contextlib.suppress(Exception):
                    py.run(py.js.delete_key_value(bucket))


# -- JSON payloads ----------------------------------------------------------------------------

JSON_SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("o", pa.struct([("x", pa.int64()), ("t", pa.string())])),
        ("l", pa.list_(pa.int64())),
    ]
)
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}

int64s = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, -(2**63), 0]),
)
floats_json = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),  # as JSON numbers
    st.sampled_from(["NaN", "Infinity", "-Infinity"]),  # as Spark and Jackson write them
    st.integers(-(2**53), 2**53),  # integer literals in a float field
)
texts = st.text(max_size=12)


def maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field's value, null, or absent (``...``)."""
    return st.one_of(values, st.none(), st.just(...))


@st.composite
def json_objects(draw: st.DrawFn) -> dict[str, Any]:
    fields = {
        "i": draw(maybe(int64s)),
        "f": draw(maybe(floats_json)),
        "s": draw(maybe(texts)),
        "b": draw(maybe(st.booleans())),
        "o": draw(
            maybe(
                st.fixed_dictionaries(
                    {}, optional={"x": st.none() | int64s, "t": st.none() | texts}
                )
            )
        ),
        "l": draw(maybe(st.lists(st.none() | int64s, max_size=4))),
        "extra": draw(maybe(st.recursive(st.none() | st.integers() | texts, st.lists))),
    }
    return {k: v for k, v in fields.items() if v is not ...}


def json_payload(obj: dict[str, Any], ascii_only: bool, spaced: bool) -> bytes:
    text = json.dumps(
        obj, ensure_ascii=ascii_only, separators=(", ", ": ") if spaced else (",", ":")
    )
    return text.encode()


def typed(value: Any, type_: pa.DataType) -> Any:
    """What a field of ``type_`` holds for ``value`` as ``json.loads`` gives it, with
    floats as comparable tokens (NaN equal to itself, -0.0 apart from 0.0)."""
    if value is None:
        return None
    if pa.types.is_floating(type_):
        number = NON_FINITE[value] if isinstance(value, str) else float(value)
        return float_token(number)
    if pa.types.is_struct(type_):
        return {f.name: typed(value.get(f.name), f.type) for f in type_}
    if pa.types.is_list(type_):
        return [typed(v, type_.value_type) for v in value]
    return value


def float_token(number: float | None) -> Any:
    if number is None:
        return None
    return "nan" if math.isnan(number) else struct.pack(">d", number)


def tokens(value: Any, type_: pa.DataType) -> Any:
    """The package's value with its floats as :func:`float_token`."""
    if value is None:
        return None
    if pa.types.is_floating(type_):
        return float_token(value)
    if pa.types.is_struct(type_):
        return {f.name: tokens(value.get(f.name), f.type) for f in type_}
    if pa.types.is_list(type_):
        return [tokens(v, type_.value_type) for v in value]
    return value


def values_of(table: pa.Table) -> list[Any]:
    column = table.column("value")
    return [tokens(v, column.type) for v in column.to_pylist()]


def expected_values(payloads: Sequence[bytes], schema: pa.Schema) -> list[Any]:
    out = []
    for p in payloads:
        obj = json.loads(p)
        out.append({f.name: typed(obj.get(f.name), f.type) for f in schema})
    return out


def publish_all(py: PyNats, subject: str, payloads: Sequence[bytes]) -> None:
    async def go() -> None:
        for i in range(0, len(payloads), 500):
            await asyncio.gather(*(py.js.publish(subject, p) for p in payloads[i : i + 500]))

    py.run(go())


@pytest.mark.timeout(300)
@hsettings(25)
@given(
    objects=st.lists(json_objects(), min_size=1, max_size=30),
    ascii_only=st.booleans(),
    spaced=st.booleans(),
    method=st.sampled_from(["consumer", "direct"]),
)
# Found by this test: arrow-json decodes the escaped surrogate pair of a code point
# from U+20000 up wrongly ("\ud840\udc00" is U+20000, read as U+10000), which
# Python's json.dumps writes by default (ensure_ascii).
@example(
    objects=[{"s": "\U00020000"}, {"s": "a\U0010ffffb"}, {"o": {"t": "\U0002a6d6"}}],
    ascii_only=True,
    spaced=False,
    method="consumer",
)
def test_json_values_with_a_schema_equal_json_loads(
    client: ja.Client,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    objects: list[dict[str, Any]],
    ascii_only: bool,
    spaced: bool,
    method: str,
) -> None:
    name = unique_name("ORJ")
    payloads = [json_payload(o, ascii_only, spaced) for o in objects]
    with PyNats(shared_nats_server.url) as py:
        try:
            py.create_stream(name, StreamShape(allow_direct=True))
            publish_all(py, f"{name}.j", payloads)
            want = expected_values(payloads, JSON_SCHEMA)
            codec = ja.ValueCodec("json", schema=JSON_SCHEMA)
            with deadline(30, "json read"):
                table = client.read(name, codec=codec, method=method).read_all()
            assert table.column("seq").to_pylist() == list(range(1, len(payloads) + 1))
            assert table.schema.field("value").type == pa.struct(list(JSON_SCHEMA))
            assert values_of(table) == want
            # Flattened, the same values as top-level columns.
            flat = client.read(
                name, codec=ja.ValueCodec("json", schema=JSON_SCHEMA, flatten=True), method=method
            ).read_all()
            assert [
                {f.name: tokens(row[f.name], f.type) for f in JSON_SCHEMA}
                for row in flat.to_pylist()
            ] == want
            # A pull consumer's batch decodes the same.
            py.create_consumer(name, {"durable_name": "j", "ack_policy": "explicit"})
            batch = client.pull_consumer(name, "j").fetch(len(payloads), expires=5.0, codec=codec)
            assert values_of(pa.table(batch.data)) == want
        finally:
            py.delete_stream(name)


#: Values a field of ``JSON_SCHEMA`` cannot hold as JSON gives them, each with the
#: path of its field: the read must refuse them naming the field, never give another
#: value (``2.7`` read as 2, ``-2**63 - 1`` as ``-2**63``).
DO_NOT_FIT: tuple[tuple[str, dict[str, Any]], ...] = (
    ("i", {"i": 2.7}),
    ("i", {"i": -0.5}),
    ("i", {"i": "12"}),
    ("i", {"i": 1e3}),
    ("i", {"i": 2**63}),
    ("i", {"i": -(2**63) - 1}),
    ("i", {"i": -(2**63) - 1024}),
    ("i", {"i": -(2**63) - 1025}),
    ("i", {"i": 1e20}),
    ("f", {"f": "1.5"}),
    ("f", {"f": "nan"}),
    ("f", {"f": "Inf"}),
    ("o.x", {"o": {"x": 2.5}}),
    ("o.x", {"o": {"x": "7"}}),
    ("o.x", {"o": {"x": -(2**63) - 1}}),
    ("l", {"l": [1, 2.5]}),
    ("l", {"l": ["3"]}),
    ("l", {"l": [-(2**63) - 1]}),
    ("b", {"b": "true"}),
)
ONE_OBJECT = [{"i": 0, "f": 0.0, "s": "", "b": False, "o": {}, "l": []}]


@pytest.mark.timeout(300)
@hsettings(20)
@given(
    objects=st.lists(json_objects(), min_size=1, max_size=20),
    bad=st.sampled_from(DO_NOT_FIT),
    at=fractions,
    method=st.sampled_from(["consumer", "direct"]),
)
# Found by this test: an integer just below -2**63 (down to -2**63 - 1024, which a
# double rounds to -2**63) is read as -2**63, at the top level, nested or in a list.
@example(objects=ONE_OBJECT, bad=("i", {"i": -(2**63) - 1}), at=0.0, method="consumer")
@example(objects=ONE_OBJECT, bad=("i", {"i": -(2**63) - 1024}), at=0.9, method="direct")
@example(objects=ONE_OBJECT, bad=("o.x", {"o": {"x": -(2**63) - 1}}), at=0.0, method="consumer")
@example(objects=ONE_OBJECT, bad=("l", {"l": [-(2**63) - 1]}), at=0.0, method="direct")
def test_json_values_that_do_not_fit_the_schema_are_refused_naming_the_field(
    client: ja.Client,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    objects: list[dict[str, Any]],
    bad: tuple[str, dict[str, Any]],
    at: float,
    method: str,
) -> None:
    field_name, bad_object = bad
    name = unique_name("ORB")
    payloads = [json_payload(o, True, False) for o in objects]
    where = int(at * (len(payloads) + 1))
    payloads.insert(where, json.dumps(bad_object).encode())
    with PyNats(shared_nats_server.url) as py:
        try:
            py.create_stream(name, StreamShape(allow_direct=True))
            publish_all(py, f"{name}.j", payloads)
            good = [p for i, p in enumerate(payloads) if i != where]
            codec = ja.ValueCodec("json", schema=JSON_SCHEMA)
            with pytest.raises(MalformedPayloadError) as refused, deadline(30, "json read"):
                client.read(name, codec=codec, method=method).read_all()
            message = str(refused.value)
            assert re.search(rf"field '{re.escape(field_name)}(\[\])*'", message), message
            assert f"seq {where + 1}:" in message, message
            # permissive: that row null with its bytes kept, every other row exact.
            permissive = client.read(
                name,
                codec=ja.ValueCodec("json", schema=JSON_SCHEMA, on_malformed="permissive"),
                method=method,
            ).read_all()
            values = values_of(permissive)
            assert values[where] is None
            assert permissive.column("_corrupt_record").to_pylist()[where] == payloads[where]
            assert values[:where] + values[where + 1 :] == expected_values(good, JSON_SCHEMA)
            # dropmalformed: that row left out.
            dropped = client.read(
                name,
                codec=ja.ValueCodec("json", schema=JSON_SCHEMA, on_malformed="dropmalformed"),
                method=method,
            ).read_all()
            assert values_of(dropped) == expected_values(good, JSON_SCHEMA)
            assert where + 1 not in dropped.column("seq").to_pylist()
        finally:
            py.delete_stream(name)


#: After 1,500 objects of one shape (the schema inferred from the first 1,000), one
#: whose value has another JSON type: the read gives it exactly or refuses it naming
#: the field, never another value (2.7 read as 2).
LATE_CHANGES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("n", {"n": 2.7}),
    ("n", {"n": "12"}),
    ("n", {"n": 2**63 - 1}),
    ("n", {"n": -(2**63)}),
    ("n", {"n": 2**63}),
    ("n", {"n": -(2**63) - 1}),
    ("n", {"n": True}),
    ("n", {"n": None}),
    ("n", {"n": {"deep": 1}}),
    ("x", {"x": 7}),
    ("x", {"x": "NaN"}),
    ("x", {"x": "Infinity"}),
    ("x", {"x": "-Infinity"}),
    ("x", {"x": "1.5"}),
    ("o.k", {"o": {"k": 0.25}}),
    ("o.k", {"o": {"k": 9_007_199_254_740_993}}),
    ("l", {"l": [1, 2.5]}),
    ("l", {"l": [2**62, "3"]}),
    ("s", {"s": 12}),
)


def early_object(i: int) -> dict[str, Any]:
    return {"n": i * 7_919 - 5_000, "x": i / 8, "s": f"s{i}", "o": {"k": i}, "l": [i, -i]}


@pytest.fixture
def changing_stream(
    shared_nats_server: NatsServer, unique_name: UniqueName
) -> Iterator[tuple[PyNats, str, list[bytes]]]:
    """A stream of 1,500 objects on ``<name>.early`` and each of
    :data:`LATE_CHANGES` on ``<name>.late.<i>``."""
    name = unique_name("ORL")
    early = [json.dumps(early_object(i)).encode() for i in range(1_500)]
    with PyNats(shared_nats_server.url) as py:
        try:
            py.create_stream(name, StreamShape(allow_direct=True))
            publish_all(py, f"{name}.early", early)
            for i, (_, late) in enumerate(LATE_CHANGES):
                py.publish_sync(f"{name}.late.{i}", json.dumps(late).encode())
            yield py, name, early
        finally:
            py.delete_stream(name)


def json_value(value: Any) -> Any:
    """``json.loads``'s value with floats as comparable tokens."""
    if isinstance(value, float):
        return float_token(value)
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_value(v) for v in value]
    return value


def exact_or_refused(
    read: Callable[[], pa.Table], payloads: list[bytes], field: str, seq: int, what: str
) -> str:
    """Either the read refuses the payload at ``seq``, naming ``field``, or every value
    equals ``json.loads`` of its payload: typed, the same JSON value (a float field
    holds JSON's numbers, and the strings "NaN", "Infinity", "-Infinity")."""
    try:
        with deadline(60, what):
            table = read()
    except MalformedPayloadError as e:
        message = str(e)
        named = re.search(rf"field '{re.escape(field)}(\[\])*'", message)
        assert named and f"seq {seq}:" in message, f"{what}: {message}"
        return "refused"
    value_type = table.schema.field("value").type
    got = [tokens(v, value_type) for v in table.column("value").to_pylist()]
    want = [typed_as_loaded(json.loads(p), value_type) for p in payloads]
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"{what}: row {i} ({payloads[i][:80]!r}) read as {g!r}, JSON says {w!r}"
    assert len(got) == len(want)
    return "exact"


def typed_as_loaded(obj: dict[str, Any], type_: pa.DataType) -> Any:
    """``obj`` as a value of struct type ``type_`` must read if read exactly: every
    field of the type (absent ones null), each JSON value kept as it is, but for
    numbers in a float field (as floats) and the non-finite strings there."""
    return {f.name: _as_loaded(obj.get(f.name), f.type) for f in type_}


def _as_loaded(value: Any, type_: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_floating(type_) and (
        isinstance(value, (int, float)) and not isinstance(value, bool)
    ):
        return float_token(float(value))
    if pa.types.is_floating(type_) and value in NON_FINITE:
        return float_token(NON_FINITE[value])
    if pa.types.is_struct(type_) and isinstance(value, dict):
        return typed_as_loaded(value, type_)
    if pa.types.is_list(type_) and isinstance(value, list):
        return [_as_loaded(v, type_.value_type) for v in value]
    return json_value(value)


@pytest.mark.timeout(180)
def test_json_values_whose_type_changes_after_the_inferred_sample(
    client: ja.Client, changing_stream: tuple[PyNats, str, list[bytes]]
) -> None:
    _, name, early = changing_stream
    outcomes: dict[str, str] = {}
    wrong: list[str] = []
    for i, (field, late) in enumerate(LATE_CHANGES):
        payloads = [*early, json.dumps(late).encode()]
        subjects = [f"{name}.early", f"{name}.late.{i}"]
        try:
            outcomes[json.dumps(late)] = exact_or_refused(
                lambda s=subjects: client.read(name, subjects=s, codec="json").read_all(),
                payloads,
                field,
                1_501 + i,
                f"codec='json' with {late}",
            )
        except AssertionError as e:
            wrong.append(str(e).split("\n")[0])
    assert not wrong, "\n".join(wrong)
    # The inferred schema is the first 1,000's: these do not fit it, so are refused.
    assert outcomes[json.dumps({"n": 2.7})] == "refused"
    assert outcomes[json.dumps({"n": "12"})] == "refused"
    assert outcomes[json.dumps({"n": 2**63 - 1})] == "exact"
    assert outcomes[json.dumps({"x": "NaN"})] == "exact"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("method", ["consumer", "direct", "auto"])
def test_a_fraction_after_1500_integers_is_never_read_as_an_integer(
    client: ja.Client,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    method: str,
) -> None:
    """The brief's case: 1,500 messages with an integer field, then one with 2.7."""
    name = unique_name("OR27")
    payloads = [json.dumps({"id": i, "v": i}).encode() for i in range(1_500)]
    payloads.append(json.dumps({"id": 1_500, "v": 2.7}).encode())
    with PyNats(shared_nats_server.url) as py:
        try:
            py.create_stream(name, StreamShape(allow_direct=True))
            publish_all(py, f"{name}.n", payloads)
            outcome = exact_or_refused(
                lambda: client.read(name, codec="json", method=method).read_all(),
                payloads,
                "v",
                1_501,
                f"codec='json', method={method!r}",
            )
            assert outcome == "refused"
            # And with a small sample the schema sees only integers too.
            outcome = exact_or_refused(
                lambda: client.read(
                    name, codec=ja.ValueCodec("json", sample_rows=10), method=method
                ).read_all(),
                payloads,
                "v",
                1_501,
                "sample_rows=10",
            )
            assert outcome == "refused"
        finally:
            py.delete_stream(name)


@pytest.mark.timeout(120)
def test_floats_the_package_wrote_as_nan_strings_read_back_with_and_without_a_schema(
    client: ja.Client, shared_nats_server: NatsServer, unique_name: UniqueName
) -> None:
    """The package's JSON encoder writes NaN and ±Inf as "NaN", "Infinity" and
    "-Infinity" (and nothing else can: JSON has no literal for them). Read back, with
    the schema or with the one inferred from these same payloads, they are the floats
    written: a schema inferred from a sample must hold that sample."""
    name = unique_name("ORN")
    xs = [1.5, math.nan, math.inf, -math.inf, 2.0, -0.0, 2.0**60, 5e-324]
    with PyNats(shared_nats_server.url) as py:
        try:
            py.create_stream(name, StreamShape(allow_direct=True))
            client.publish(
                pa.table(
                    {
                        "subject": [f"{name}.f"] * len(xs),
                        "x": pa.array(xs, pa.float64()),
                        "n": list(range(len(xs))),
                    }
                ),
                codec="json",
            )
            stored = py.snapshot(name)
            loaded = [json.loads(m.data) for m in stored]
            assert [d["x"] for d in loaded][1:4] == ["NaN", "Infinity", "-Infinity"]
            want = [{"n": d["n"], "x": _as_loaded(d["x"], pa.float64())} for d in loaded]
            assert [{"n": i, "x": float_token(x)} for i, x in enumerate(xs)] == want
            schema = pa.schema([("x", pa.float64()), ("n", pa.int64())])
            for codec in (ja.ValueCodec("json", schema=schema), "json"):
                for method in ("consumer", "direct"):
                    what = f"codec={codec!r}, method={method!r}"
                    with deadline(30, what):
                        table = client.read(name, codec=codec, method=method).read_all()
                    value_type = table.schema.field("value").type
                    got = [tokens(v, value_type) for v in table.column("value").to_pylist()]
                    assert [{"n": g["n"], "x": g["x"]} for g in got] == want, what
        finally:
            py.delete_stream(name)


# -- found by the properties: regular tests ---------------------------------------------------

#: Headers the server adds to a direct get's reply, as a stored message may carry them
#: itself (a copy of a direct get's reply, as nats-py hands it out, republished).
SERVER_HEADERS = (
    ("Nats-Stream", "OTHER"),
    ("Nats-Subject", "other.subject"),
    ("Nats-Sequence", "999"),
    ("Nats-Time-Stamp", "2001-01-01T00:00:00Z"),
    ("Nats-Num-Pending", "0"),
    ("Nats-Last-Sequence", "1"),
)


def check_every_read_path(
    client: ja.Client,
    name: str,
    stored: list[Stored],
    resume_timeout: float = 2.0,
    skip: tuple[str, ...] = (),
) -> list[str]:
    """Every read path of a stream with direct gets (but those named in ``skip``),
    against the oracle; the differences, one line each (a read that fails is one
    too)."""
    paths: list[tuple[str, dict[str, Any], list[Stored]]] = [
        ("read(method='consumer')", {"method": "consumer"}, stored),
        ("read(method='direct')", {"method": "direct"}, stored),
        ("read(method='auto')", {"method": "auto"}, stored),
        ("read(last_per_subject, direct)", {"last_per_subject": True}, latest_per_subject(stored)),
        (
            "read(last_per_subject, consumer)",
            {"last_per_subject": True, "method": "consumer"},
            latest_per_subject(stored),
        ),
        (
            f"read(last_per_subject, as_of_seq={stored[-1].seq})",
            {"last_per_subject": True, "as_of_seq": stored[-1].seq},
            latest_per_subject(stored),
        ),
    ]
    wrong = []
    for what, options, want in paths:
        if what in skip:
            continue
        try:
            got = read_rows(
                client,
                name,
                within=resume_timeout + 10,
                include_headers=True,
                resume_timeout=resume_timeout,
                **options,
            )
            if "last_per_subject" in options:
                got = sorted(got)
            assert_same(got, expected_rows(want, True), what)
        except Exception as e:  # each path's failure is reported
            wrong.append(f"{what}: {type(e).__name__}: {str(e)[:400]}")
    it = client.ordered_consumer(name, resume_timeout=resume_timeout).messages(include_headers=True)
    try:
        rows, _ = consume(it, name, stored[-1].seq, "ordered consumer")
        assert_same(rows, expected_rows(stored, True), "ordered_consumer")
    except Exception as e:
        wrong.append(f"ordered_consumer: {type(e).__name__}: {str(e)[:400]}")
    finally:
        it.close()
    return wrong


@pytest.mark.timeout(120)
@pytest.mark.parametrize("header", SERVER_HEADERS, ids=[h for h, _ in SERVER_HEADERS])
def test_a_stored_header_named_like_a_direct_gets_own_is_data(
    client: ja.Client,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    header: tuple[str, str],
) -> None:
    """The server appends its own ``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence``,
    ``Nats-Time-Stamp`` (and on batched gets ``Nats-Num-Pending``,
    ``Nats-Last-Sequence``) after the stored headers of a direct get's reply. A
    message that stores such a header is read with its own subject, sequence and
    time, and its stored headers, as the consumer path reads it."""
    name = unique_name("ORH")
    with PyNats(shared_nats_server.url) as py:
        try:
            py.create_stream(name, StreamShape(allow_direct=True))
            py.publish_sync(f"{name}.a", b"before", [("K", "1")])
            py.publish_sync(f"{name}.a", b"copy", [header, ("K", "2")])
            py.publish_sync(f"{name}.b", b"after", None)
            stored = py.snapshot(name)
            assert dict(stored[1].headers or ())[header[0]] == (header[1],)
            wrong = check_every_read_path(client, name, stored)
            assert not wrong, "\n".join(wrong)
        finally:
            py.delete_stream(name)


@pytest.mark.timeout(120)
def test_a_message_copied_from_a_direct_get_by_nats_py_reads_as_stored(
    client: ja.Client, shared_nats_server: NatsServer, unique_name: UniqueName
) -> None:
    """nats-py's ``get_msg(direct=True)`` hands the reply's headers out with the
    message; a copier that republishes them stores them in the copy."""
    source, name = unique_name("ORS"), unique_name("ORH")
    with PyNats(shared_nats_server.url) as py:
        try:
            py.create_stream(source, StreamShape(allow_direct=True))
            py.create_stream(name, StreamShape(allow_direct=True))
            py.publish_sync(f"{source}.x", b"original", [("Trace-Id", "t-1")])
            original = py.run(py.js.get_msg(source, 1, direct=True))
            py.publish_sync(f"{name}.a", b"first", None)
            py.publish_sync(f"{name}.copied", original.data, list(original.headers.items()))
            py.publish_sync(f"{name}.a", b"last", None)
            stored = py.snapshot(name)
            assert dict(stored[1].headers or ())["Nats-Stream"] == (source,)
            wrong = check_every_read_path(client, name, stored)
            assert not wrong, "\n".join(wrong)
        finally:
            py.delete_stream(source)
            py.delete_stream(name)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("allow_direct", [True, False], ids=["direct", "no-direct"])
def test_a_subject_with_unicode_white_space_is_read_by_every_read_path(
    client: ja.Client,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    allow_direct: bool,
) -> None:
    """docs/reading.md: a message with headers stored by another client on a subject
    with Unicode white space drops this client's connection on each delivery, and a
    read still reads it (with ``STREAM.MSG.GET``); so must every read, within its
    ``resume_timeout``. The latest message of each subject read through a consumer
    (no direct gets, or ``method="consumer"``) cannot be read past such a message (a
    consumer of the last message per subject starts over at each recreation): it
    fails within its ``resume_timeout``, naming it, instead of starting over forever."""
    name = unique_name("ORW")
    with PyNats(shared_nats_server.url) as py:
        try:
            py.create_stream(name, StreamShape(allow_direct=allow_direct))
            py.publish_sync(f"{name}.a", b"zero", None)
            py.publish_sync(f"{name}.a\u00a0b", b"one", [("K", "v")])
            py.publish_sync(f"{name}.c", b"two", [("K", "w")])
            stored = py.snapshot(name)
            started = time.monotonic()
            with pytest.raises(ja.exceptions.JetStreamArrowError, match="resume_timeout"):
                client.read(
                    name,
                    last_per_subject=True,
                    method="consumer",
                    include_headers=True,
                    resume_timeout=2.0,
                ).read_all()
            assert time.monotonic() - started < 20
            if allow_direct:
                wrong = check_every_read_path(
                    client, name, stored, skip=("read(last_per_subject, consumer)",)
                )
            else:
                wrong = []
                for what, options, want in (("read()", {}, stored),):
                    try:
                        got = read_rows(
                            client,
                            name,
                            within=12,
                            include_headers=True,
                            resume_timeout=2.0,
                            **options,
                        )
                        assert_same(sorted(got), expected_rows(want, True), what)
                    except Exception as e:
                        wrong.append(f"{what}: {type(e).__name__}: {str(e)[:300]}")
            assert not wrong, "\n".join(wrong)
        finally:
            py.delete_stream(name)


@pytest.mark.timeout(60)
def test_max_bytes_below_one_message(
    client: ja.Client, shared_nats_server: NatsServer, unique_name: UniqueName
) -> None:
    """``max_bytes`` bounds a batch's payload bytes and each pull request. Direct
    gets hand a larger message out as a batch of its own. A consumer's pulls ask for
    twice ``max_bytes`` (as the server counts: subject, headers and payload); a
    message bigger than that cannot come, and the read says so, naming the option
    (docs/reading.md: it "bounds each pull request")."""
    name = unique_name("ORM")
    with PyNats(shared_nats_server.url) as py:
        try:
            py.create_stream(name, StreamShape(allow_direct=True))
            for i in range(3):
                py.publish_sync(f"{name}.a", bytes([i]) * 100, None)
            stored = py.snapshot(name)
            batches = list(client.read(name, method="direct", max_bytes=50))
            assert [b.num_rows for b in batches] == [1, 1, 1]
            assert_same(rows_of(batches, name), expected_rows(stored, False), "direct")
            with pytest.raises(BadInputError, match="max_bytes"), deadline(30, "consumer read"):
                client.read(name, method="consumer", max_bytes=50).read_all()
        finally:
            py.delete_stream(name)


@pytest.mark.timeout(60)
def test_direct_refused_on_a_stream_without_direct_gets_empty_or_not(
    client: ja.Client, shared_nats_server: NatsServer, unique_name: UniqueName
) -> None:
    """``method="direct"`` needs ``allow_direct``: refused whatever the stream holds
    (an option is checked against the stream, not its messages)."""
    name = unique_name("ORD")
    with PyNats(shared_nats_server.url) as py:
        try:
            py.create_stream(name, StreamShape(allow_direct=False))
            refused = []
            for when in ("empty", "with a message", "purged"):
                if when == "with a message":
                    py.publish_sync(f"{name}.a", b"x", None)
                if when == "purged":
                    py.run(py.js.purge_stream(name))
                for options in (
                    {"method": "direct"},
                    {"method": "direct", "last_per_subject": True},
                ):
                    try:
                        client.read(name, **options).read_all()
                    except BadInputError as e:
                        refused.append("allow_direct" in str(e) or f"{when}, {options}: {e}")
                    else:
                        refused.append(f"{when} stream, {options}: read without an error")
            assert all(r is True for r in refused), refused
        finally:
            py.delete_stream(name)
