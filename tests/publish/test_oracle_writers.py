"""Every way the package writes into a stream, checked against an independent oracle.

What a writer stored is read by another client, nats-py (``js.get_msg`` of every
sequence, the raw header block parsed here; its KV API for buckets), and each payload
is decoded by its format's own library: Python's ``json`` (numbers kept as their
tokens, objects as their pairs, so duplicates, key order and ``1`` against ``1.0``
show), ``fastavro``, ``pyarrow.ipc`` and protobuf's Python runtime. Each decoded value
is compared with the value given, by the exact form the docs promise
(docs/payloads.md, docs/cli.md, docs/publishing.md):

- JSON: integers and decimals are numbers with every digit (a decimal with its scale's
  digits, ``12.30``; a scale of 0 or less, an integer); a float is a number that reads
  back as that float of its width, with a ``.0`` or an exponent (never an integer
  token), and NaN, Infinity and -Infinity are the strings ``"NaN"``, ``"Infinity"``
  and ``"-Infinity"`` (JSON has no literal for them; Spark and Jackson write these);
  ``date32`` dates are ``YYYY-MM-DD``, ``date64`` ones ``YYYY-MM-DDT00:00:00``;
  dictionary-encoded values are their values; timestamps are ISO-8601 as arrow-json writes them (chrono's
  form: seconds always, then ``.fff``, ``.ffffff`` or ``.fffffffff``, the shortest of
  these that holds the value), naive ones without a zone, zoned ones in their zone's
  wall time with ``Z`` for a zero offset and ``+hh:mm`` otherwise (an offset with
  seconds, a local mean time, has no such spelling: that instant in UTC, ``Z``),
  naming exactly the instant given; times of day the same way; binary is lower-case
  hex; maps are objects (their pairs in order, duplicates kept); every field is in
  every object, nulls as ``null``. Control characters and non-ASCII text are whatever
  JSON escapes read back as. A ``load`` writes rows with the same encoder (docs/cli.md
  spells the same forms). Read back with the same schema, the table is the one
  published, except what payloads.md says the decoder does not read: a non-null
  decimal of negative scale is refused (``MalformedPayloadError`` naming the field),
  a dictionary type in the schema is refused (read with its value type, it gives the
  values), a duration's ``"PT5S"`` is refused.
- Avro: the schema is given (``avro_schema``), derived here from the Arrow schema the
  way Avro spells each type (``["null", T]`` for a nullable field, ``int``/``long``,
  ``decimal`` on bytes, ``date``, ``timestamp-*``/``local-timestamp-*`` in the
  column's unit, seconds as milliseconds); ``fastavro`` reads every payload with it and
  must consume every byte. Avro cannot carry a uint64 beyond 2^63-1 (it is refused)
  nor a map with a key twice (the strategies give unique keys). The framings' prefixes
  are checked byte for byte: Confluent's zero and big-endian id, single-object's
  ``C3 01`` and the schema's CRC-64-AVRO fingerprint (little-endian, computed here).
- Arrow IPC: each payload is one stream of one batch of one row, whose schema is the
  value columns' fields and whose row is the row given.
- Protobuf: each payload parses in the runtime into the message the runtime builds
  from the same row, field by field (a NaN is any NaN, a zero keeps its sign); a null
  is an absent field, and a proto3 field without presence reads as its default.
- Raw rows: subject, payload bytes (null: empty) and the raw header block, every
  value of a multi-valued header in order; the msg id is the ``msg_id`` column's, else
  ``<prefix><n>`` counted across a publisher's calls, or
  ``<prefix><stream>:<seq>:<digest>`` (of the stored subject and payload) in a copy of
  a read, whose steering headers (``Nats-Expected-*``, ...) are dropped, else a
  ``Nats-Msg-Id`` header's (publishing.md). Atomic batches' messages
  carry the ``Nats-Batch-*`` headers they were sent with (the server keeps them).

Column names: with a value format every column but the publish columns (``subject``,
``headers``, ``msg_id``, ``expected_last_*``) is a value, also ``timestamp``,
``seq``, ``stream``, ``delivered``, ``consumer_seq`` and ``_corrupt_record``, except
in a table that is a read of a stream (it has ``stream`` and ``seq``), where those are
left out; a struct column ``value``, when there is one, is the whole value.

Writers: ``client.publish`` acked, fast (``mode="fast"``) and atomic
(``mode="atomic"``, ``batch_rows``), a publisher's calls and ``publish_batches``, raw
and with ``codec`` json, avro (three framings), arrow and protobuf, with and without
msg ids (column, header, ``msg_id_prefix``) and headers; ``client.write_kv`` (puts,
deletes, purges, compare-and-set, repeated ids); ``jetstream-arrow load`` of a Parquet
file and ``export --data-as json``. Round trips read back with ``client.read(...,
codec=...)`` and ``client.read_kv``.

Hypothesis examples per property (``max_examples``; ``database=None``, so nothing is
written into the tree). Each property writes every example into a fresh stream of the
shared server; tables have 1-6 rows (raw: 1-8, KV: 1-10) of 1-4 value columns nested
up to two levels:

    raw rows (nats-py view + read back)          50
    JSON payloads (json.loads)                   60
    JSON round trip                              40
    Avro payloads (fastavro) + round trip        40
    Arrow IPC payloads (pyarrow.ipc) + read      40
    Protobuf payloads (runtime) + read           40
    KV writes (nats-py KV API + read_kv)         30
    load Parquet / export --data-as json         15

315 generated tables in all, about 15 s; with the tests after them the module takes
about 21 s serially and 15 s with ``-n 3`` (when every test passes: a failing
property also shrinks its example). The differences found are kept at the end of the
module, each as a plain test, and as ``@example`` on the property that found it.
``export --data-as json`` giving a non-nullable column back nullable was found last
and is fixed (the Kolkata example of the load/export property shows it).

Open defects, not fixed yet, are left out of the strategies, each exclusion marked
``open defect:``: Avro's ``"null"`` below a record's top level does not read back;
an Avro record that encodes to no bytes does not read back; protobuf refuses on read
a timestamp in the first 0.85 s from -2^63 ns; a row failing its
expected revision is reported a duplicate of a later row with its msg id; an export
of a dictionary inside a list, struct or map fails.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import math
import re
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import Context, Decimal
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import fastavro
import nats
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastavro.schema import to_parsing_canonical_form
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from nats.js.errors import KeyNotFoundError, NoKeysError, NotFoundError

import jetstream_arrow as ja
from cli_helpers import cli
from jetstream_arrow.exceptions import BadInputError, MalformedPayloadError
from jetstream_arrow.positions import POSITION_SUBJECT_PREFIX as POSITION_PREFIX
from natsserver import NatsServer
from oracle_tables import (
    AVRO_NAMES,
    COLLIDING,
    EPOCH,
    EPOCH_DAY,
    HEADER_NAMES,
    HEADER_VALUES,
    INT_BOUNDS,
    PER_SECOND,
    PLAIN_NAMES,
    READ_COLUMNS,
    STEERING_HEADER,
    SUBJECT_TOKENS,
    TIME_UNITS,
    Col,
    KvRow,
    RawRow,
    columns,
    decimals,
    floats,
    ints,
    kv_rows,
    raw_rows,
    table_of,
    timestamp_ticks,
)
from proto_compile import compile_proto

pytestmark = pytest.mark.timeout(240)


def examples(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


# == the oracle: nats-py ===============================================================


@dataclass(frozen=True)
class Stored:
    """A stored message as nats-py's ``get_msg`` returns it; headers from the raw
    block, every line in order."""

    seq: int
    subject: str
    data: bytes
    headers: tuple[tuple[str, str], ...]

    def header_map(self, batch_headers: bool = False) -> dict[str, list[str]]:
        """Each header's values in order; without the ``Nats-Batch-*`` headers of an
        atomic batch's messages (which the server stores as they were sent) unless
        ``batch_headers``."""
        out: dict[str, list[str]] = {}
        for name, value in self.headers:
            if batch_headers or name not in BATCH_HEADERS:
                out.setdefault(name, []).append(value)
        return out


BATCH_HEADERS = ("Nats-Batch-Id", "Nats-Batch-Sequence", "Nats-Batch-Commit")


def parse_header_block(hdrs: str | bytes | None) -> tuple[tuple[str, str], ...]:
    """``NATS/1.0\\r\\nName: value\\r\\n...\\r\\n\\r\\n`` (base64, as the STREAM.MSG.GET
    API returns it) as (name, value) lines in order."""
    if not hdrs:
        return ()
    raw = base64.b64decode(hdrs).decode("utf-8")
    lines = raw.split("\r\n")
    assert lines[0].startswith("NATS/1.0"), raw
    out = []
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        assert colon, f"a header line without a colon: {line!r}"
        out.append((name, value.strip(" \t")))
    return tuple(out)


class Oracle:
    """A nats-py connection on an event loop of its own; every call has a timeout."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.loop = asyncio.new_event_loop()
        self.nc = self.run(nats.connect(url, connect_timeout=5, allow_reconnect=False))
        self.js = self.nc.jetstream(timeout=10)

    def run(self, coro: Any, timeout: float = 60.0) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def close(self) -> None:
        try:
            self.run(self.nc.close(), 10)
        finally:
            self.loop.close()

    def messages(self, stream: str) -> list[Stored]:
        """Every message of ``stream``, in sequence order."""

        async def go() -> list[Stored]:
            info = await self.js.stream_info(stream)
            state = info.state
            out = []
            if state.messages:
                for seq in range(state.first_seq, state.last_seq + 1):
                    try:
                        m = await self.js.get_msg(stream, seq)
                    except NotFoundError:
                        continue
                    out.append(Stored(m.seq, m.subject, m.data or b"", parse_header_block(m.hdrs)))
            assert len(out) == state.messages, (len(out), state)
            return out

        return self.run(go())  # type: ignore[no-any-return]

    def data_messages(self, stream: str) -> list[Stored]:
        """The messages of ``stream`` that are not writers' positions (``load`` keeps
        one position message per file, on ``$JA.POS.<stream>.<digest>``, in a stream
        it made; no read shows them)."""
        return [m for m in self.messages(stream) if not m.subject.startswith(POSITION_PREFIX)]


@pytest.fixture
def oracle(shared_nats_server: NatsServer, unique_name: Callable[[str], str]) -> Iterator[Oracle]:
    """nats-py on the shared server. A stream of its own stays for the test: the
    server removes its store's stream directory with the last stream, and a stream
    created meanwhile fails ("could not create storage directory", 10049), which the
    stream of every example, made and deleted in turn, would otherwise run into."""
    o = Oracle(shared_nats_server.url)
    anchor = unique_name("ORC_ANCHOR")
    o.run(o.js.add_stream(name=anchor, subjects=[f"{anchor}.>"]))
    try:
        yield o
    finally:
        try:
            o.run(o.js.delete_stream(anchor))
        finally:
            o.close()


@contextmanager
def fresh_stream(client: ja.Client, unique_name: Callable[[str], str]) -> Iterator[str]:
    """A stream for one example, taking every publish mode."""
    name = unique_name("ORC")
    client.create_stream(name, [f"{name}.>"], allow_atomic=True, allow_batched=True)
    try:
        yield name
    finally:
        client.delete_stream(name)


# == comparing values =================================================================


def same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN, the sign of a zero counted, and bool not an int."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if type(a) is not type(b) and not (isinstance(a, datetime) and isinstance(b, datetime)):
        return False
    return bool(a == b)


# -- JSON -------------------------------------------------------------------------------


class Tok(NamedTuple):
    """A JSON number as written: ``int`` or ``float`` token, and its text."""

    kind: str
    text: str


class Obj(list):  # type: ignore[type-arg]
    """A JSON object as its (name, value) pairs, in order, duplicates kept."""


def strict_json(payload: bytes) -> Any:
    def constant(name: str) -> Any:
        raise AssertionError(f"{name} is not JSON: {payload!r}")

    return json.loads(
        payload.decode("utf-8"),
        parse_int=lambda s: Tok("int", s),
        parse_float=lambda s: Tok("float", s),
        parse_constant=constant,
        object_pairs_hook=Obj,
    )


_NP_FLOAT = {16: np.float16, 32: np.float32}


def nearest_float(text: str, width: int) -> float:
    """The float of ``width`` bits a decimal text reads as (correctly rounded, ties to
    even), computed exactly."""
    exact = Fraction(text)
    if width == 64:
        return float(exact)
    kind = _NP_FLOAT[width]
    with np.errstate(over="ignore"):  # the neighbours of the largest are infinite
        guess = kind(float(exact))
        candidates = {
            guess,
            np.nextafter(guess, kind(np.inf)),
            np.nextafter(guess, kind(-np.inf)),
        }
    finite = [c for c in candidates if np.isfinite(c)]

    def key(c: Any) -> tuple[Fraction, int]:
        bits = int(np.array(c, kind).view(np.uint16 if width == 16 else np.uint32))
        return (abs(Fraction(float(c)) - exact), bits & 1)

    return float(min(finite, key=key))


def fraction_text(nanos: int) -> str:
    """chrono's ``AutoSi`` fraction: none, or 3, 6 or 9 digits, the fewest that hold it."""
    if nanos == 0:
        return ""
    if nanos % 1_000_000 == 0:
        return f".{nanos // 1_000_000:03d}"
    if nanos % 1_000 == 0:
        return f".{nanos // 1_000:06d}"
    return f".{nanos:09d}"


def zone_of(tz: str) -> Any:
    m = re.fullmatch(r"([+-])(\d\d):(\d\d)", tz)
    if m:
        sign = 1 if m.group(1) == "+" else -1
        return timezone(sign * timedelta(hours=int(m.group(2)), minutes=int(m.group(3))))
    return ZoneInfo(tz)


def offset_text(offset: timedelta) -> str:
    if offset == timedelta(0):
        return "Z"
    total = offset // timedelta(seconds=1)
    sign = "+" if total >= 0 else "-"
    hours, rest = divmod(abs(total), 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{seconds:02d}" if seconds else "")


def wall_text(wall: datetime) -> str:
    return (
        f"{wall.year:04d}-{wall.month:02d}-{wall.day:02d}"
        f"T{wall.hour:02d}:{wall.minute:02d}:{wall.second:02d}"
    )


def timestamp_text(t: pa.DataType, ticks: int) -> str:
    per = PER_SECOND[t.unit]
    secs, frac = divmod(ticks, per)
    nanos = frac * (10**9 // per)
    instant = EPOCH + timedelta(seconds=secs)
    if t.tz is None:
        return wall_text(instant) + fraction_text(nanos)
    local = instant.astimezone(zone_of(t.tz))
    offset = local.utcoffset()
    assert offset is not None
    if offset % timedelta(minutes=1):
        # An offset with seconds (a local mean time) has no RFC 3339 spelling: the
        # instant is written in UTC instead.
        return wall_text(instant) + fraction_text(nanos) + "Z"
    return wall_text(local) + fraction_text(nanos) + offset_text(offset)


_TIMESTAMP = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{3}|\d{6}|\d{9}))?(Z|[+-]\d\d:\d\d)?"
)


def instant_of(text: str) -> tuple[int, bool]:
    """Nanoseconds since 1970 that an ISO-8601 timestamp names (its wall time less its
    offset; a naive one as UTC), and whether it has a zone."""
    m = _TIMESTAMP.fullmatch(text)
    assert m, f"{text!r} is not an ISO-8601 timestamp as arrow-json writes them"
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    nanos = int((m.group(7) or "").ljust(9, "0"))
    zone = m.group(8)
    offset = 0
    if zone not in (None, "Z"):
        sign = 1 if zone[0] == "+" else -1
        offset = sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    wall = datetime(y, mo, d, h, mi, s)
    seconds = (wall - datetime(1970, 1, 1)) // timedelta(seconds=1) - offset
    return seconds * 10**9 + nanos, zone is not None


#: 2100-01-01: chrono-tz (under arrow-json) applies no daylight saving from there
#: on, where zoneinfo goes on with the zone's rule.
FAR_FUTURE_NS = 4102444800 * 10**9


def named_zone(tz: str | None) -> bool:
    return tz is not None and tz[0] not in "+-" and tz not in ("UTC", "Etc/UTC")


def date_text(days: int) -> str:
    d = date.fromordinal(EPOCH_DAY + days)
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def time_text(t: pa.DataType, ticks: int) -> str:
    per = PER_SECOND[TIME_UNITS[t]]
    secs, frac = divmod(ticks, per)
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    return f"{h:02d}:{m:02d}:{s:02d}" + fraction_text(frac * (10**9 // per))


def decimal_token(value: Decimal, scale: int) -> Tok:
    """A decimal as a JSON number with exactly its scale's digits after the point."""
    if scale <= 0:
        return Tok("int", str(int(value)))
    unscaled = int(value.scaleb(scale, context=Context(prec=100)))
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    sign = "-" if unscaled < 0 else ""
    return Tok("float", f"{sign}{digits[:-scale]}.{digits[-scale:]}")


_WIDTH = {pa.float16(): 16, pa.float32(): 32, pa.float64(): 64}


def check_json(t: pa.DataType, given: Any, got: Any, where: str) -> None:
    """``got`` (parsed by :func:`strict_json`) is ``given`` of type ``t`` as documented."""
    if given is None:
        assert got is None, f"{where}: a null written as {got!r}"
        return
    if pa.types.is_dictionary(t):
        check_json(t.value_type, given, got, where)
    elif pa.types.is_integer(t):
        assert got == Tok("int", str(given)), f"{where}: {given} written as {got!r}"
    elif pa.types.is_floating(t):
        if math.isnan(given):
            assert got == "NaN", f"{where}: NaN written as {got!r}"
        elif math.isinf(given):
            want = "Infinity" if given > 0 else "-Infinity"
            assert got == want, f"{where}: {given} written as {got!r}"
        else:
            assert isinstance(got, Tok) and got.kind == "float", (
                f"{where}: the float {given!r} written as {got!r}, not a float token"
            )
            back = nearest_float(got.text, _WIDTH[t])
            assert back == given and got.text.startswith("-") == (math.copysign(1, given) < 0), (
                f"{where}: the float{_WIDTH[t]} {given!r} written as {got.text}, which reads "
                f"as {back!r}"
            )
    elif pa.types.is_decimal(t):
        want = decimal_token(given, t.scale)
        assert got == want, f"{where}: {t} {given} written as {got!r}, not {want.text}"
    elif pa.types.is_boolean(t):
        assert got is given, f"{where}: {given} written as {got!r}"
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        assert got == given, f"{where}: {given!r} written as {got!r}"
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        assert got == given.hex(), f"{where}: {given!r} written as {got!r}, not its hex"
    elif pa.types.is_date32(t):
        assert got == date_text(given), f"{where}: day {given} written as {got!r}"
    elif pa.types.is_date64(t):
        want = date_text(given // 86_400_000) + "T00:00:00"
        assert got == want, f"{where}: date64 {given} written as {got!r}, not {want!r}"
    elif pa.types.is_timestamp(t):
        assert isinstance(got, str), f"{where}: {t} {given} written as {got!r}"
        per = PER_SECOND[t.unit]
        instant, zoned = instant_of(got)
        assert zoned == (t.tz is not None), f"{where}: {t} written as {got!r}"
        assert instant == given * (10**9 // per), (
            f"{where}: {t} {given} ({timestamp_text(t, given)}) written as {got!r}, "
            f"which names another instant ({instant - given * (10**9 // per)} ns off)"
        )
        want = timestamp_text(t, given)
        if not (named_zone(t.tz) and given * (10**9 // per) >= FAR_FUTURE_NS):
            # From 2100 on chrono-tz's tables (arrow-json's) stop applying daylight
            # saving, zoneinfo's go on: only the instant is compared there.
            assert got == want, f"{where}: {t} {given} written as {got!r}, not {want!r}"
    elif pa.types.is_time(t):
        want = time_text(t, given)
        assert got == want, f"{where}: {t} {given} written as {got!r}, not {want!r}"
    elif pa.types.is_null(t):
        raise AssertionError(f"{where}: a null column with a value {given!r}")
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        assert type(got) is list and len(got) == len(given), f"{where}: {given!r} as {got!r}"
        for i, (g, v) in enumerate(zip(given, got, strict=True)):
            check_json(t.value_type, g, v, f"{where}[{i}]")
    elif pa.types.is_struct(t):
        assert isinstance(got, Obj), f"{where}: a struct written as {got!r}"
        assert [k for k, _ in got] == [f.name for f in t], f"{where}: fields {got!r}"
        for f, (_, v) in zip(t, got, strict=True):
            check_json(f.type, given[f.name], v, f"{where}.{f.name}")
    elif pa.types.is_map(t):
        assert isinstance(got, Obj), f"{where}: a map written as {got!r}"
        assert [k for k, _ in got] == [k for k, _ in given], f"{where}: keys of {got!r}"
        for (k, g), (_, v) in zip(given, got, strict=True):
            check_json(t.item_type, g, v, f"{where}[{k!r}]")
    else:
        raise AssertionError(f"no JSON oracle for {t}")


def check_json_payload(payload: bytes, value_cols: list[Col], row: int, where: str) -> None:
    obj = strict_json(payload)
    assert isinstance(obj, Obj), f"{where}: the payload {payload!r} is not an object"
    assert [k for k, _ in obj] == [c.name for c in value_cols], (
        f"{where}: the payload's fields {[k for k, _ in obj]} are not the value columns "
        f"{[c.name for c in value_cols]}: {payload!r}"
    )
    for col, (_, got) in zip(value_cols, obj, strict=True):
        check_json(col.type, col.values[row], got, f"{where} {col.name!r}")


# == publish cases ======================================================================

MODES = ("acked", "fast", "atomic")


@dataclass
class Case:
    """A table to publish, what of it is the value, and how it is published."""

    cols: list[Col]  # every column of the table but the steering ones below
    rows: int
    mode: str
    batch_rows: int = 1000
    subject_column: bool = True
    subjects: list[str] = field(default_factory=list)  # tokens after the stream's name
    msg_ids: str = "none"  # none, column, prefix
    id_column: list[str | None] = field(default_factory=list)
    value_struct: bool = False  # the values are a struct column "value"
    extras: list[Col] = field(default_factory=list)  # columns that are not the value
    checks: bool = False  # null expected_last_* columns, which check nothing
    #: For a table that is a read (``stream`` and ``seq`` columns): each row's
    #: source message, which a msg id prefix numbers the row by.
    source: list[tuple[str, int]] | None = None
    #: A ``headers`` column (names that steer nothing), or None.
    headers: list[dict[str, list[str]]] | None = None

    def value_cols(self) -> list[Col]:
        """The columns the payload must hold, by the documented rule."""
        if self.value_struct:
            return self.cols
        names = {c.name for c in self.cols}
        is_read = "stream" in names and "seq" in names
        return [c for c in self.cols if not (is_read and c.name in READ_COLUMNS)]

    def make_read(self, stream: str, first_seq: int, seq_type: pa.DataType) -> None:
        """Give the table a read's ``stream`` and ``seq`` columns (replacing columns of
        those names; ``seq`` uint64 as the package reads it, or int64 as Spark does):
        it is then a copy of the messages they name."""
        seqs = [first_seq + 2 * i for i in range(self.rows)]
        read = [
            Col("stream", pa.utf8(), False, tuple([stream] * self.rows)),
            Col("seq", seq_type, False, tuple(seqs)),
        ]
        self.cols = [c for c in self.cols if c.name not in ("stream", "seq")] + read
        self.source = [(stream, s) for s in seqs]

    def table(self, stream: str) -> pa.Table:
        arrays: list[pa.Array] = []
        fields: list[pa.Field] = []
        if self.subject_column:
            arrays.append(pa.array([f"{stream}.{s}" for s in self.subjects], pa.utf8()))
            fields.append(pa.field("subject", pa.utf8()))
        if self.value_struct:
            value = pa.StructArray.from_arrays(
                [c.array() for c in self.cols], fields=[c.field() for c in self.cols]
            )
            arrays.append(value)
            fields.append(pa.field("value", value.type, nullable=False))
        else:
            arrays += [c.array() for c in self.cols]
            fields += [c.field() for c in self.cols]
        for c in self.extras:
            arrays.append(c.array())
            fields.append(c.field())
        if self.msg_ids == "column":
            arrays.append(pa.array(self.id_column, pa.utf8()))
            fields.append(pa.field("msg_id", pa.utf8()))
        if self.headers is not None:
            headers_type = pa.map_(pa.utf8(), pa.list_(pa.utf8()))
            arrays.append(pa.array([list(h.items()) for h in self.headers], headers_type))
            fields.append(pa.field("headers", headers_type))
        if self.checks:
            arrays.append(pa.nulls(self.rows, pa.int64()))
            fields.append(pa.field("expected_last_subject_seq", pa.int64()))
            if self.mode == "acked":
                arrays.append(pa.nulls(self.rows, pa.utf8()))
                fields.append(pa.field("expected_last_msg_id", pa.utf8()))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))

    def options(self, stream: str) -> dict[str, Any]:
        opts: dict[str, Any] = {}
        if self.mode != "acked":
            opts["mode"] = self.mode
        if self.mode == "atomic":
            opts["batch_rows"] = self.batch_rows
        if not self.subject_column:
            opts["subject"] = f"{stream}.{self.subjects[0]}"
        if self.msg_ids == "prefix":
            opts["msg_id_prefix"] = "pre-"
        return opts

    def expected_msg_id(self, row: int, stored: Stored) -> str | None:
        if self.msg_ids == "column" and (self.id_column[row] is not None or self.source is None):
            return self.id_column[row]
        # publishing.md: the rows of a copy are numbered by their source message and
        # their content, with the prefix in front when one is given and without one.
        prefix = "pre-" if self.msg_ids == "prefix" else ""
        if self.source is not None:
            source_stream, source_seq = self.source[row]
            return f"{prefix}{source_stream}:{source_seq}:{copy_digest(stored)}"
        if self.msg_ids == "prefix":
            return f"pre-{row}"
        return None


def copy_digest(stored: Stored) -> str:
    """publishing.md: the first 8 bytes (hex) of a SHA-256 of the subject, a zero byte,
    the payload and the headers (names sorted, each value as the lengths and bytes of
    name and value; the msg id and an atomic batch's headers, added when sent, left
    out), of the message a copied row is stored as."""
    digest = hashlib.sha256(stored.subject.encode() + b"\0" + stored.data)
    for name, values in sorted(stored.header_map().items()):
        if name.lower() == "nats-msg-id":
            continue
        for value in values:
            for part in (name.encode(), value.encode()):
                digest.update(len(part).to_bytes(8, "little") + part)
    return digest.digest()[:8].hex()


def copy_ids(prefix: str, sources: list[tuple[str, int]], stored: list[Stored]) -> list[str]:
    """publishing.md: each row's ``<prefix><stream>:<seq>:<digest>``, and ``:<n>`` after
    it for the n-th repeat of an alike row among the consecutive rows of one source
    message."""
    ids: list[str] = []
    seen: dict[str, int] = {}
    for i, ((stream, seq), m) in enumerate(zip(sources, stored, strict=True)):
        if i == 0 or sources[i - 1] != (stream, seq):
            seen = {}
        identity = f"{prefix}{stream}:{seq}:{copy_digest(m)}"
        n = seen.get(identity, 0)
        seen[identity] = n + 1
        ids.append(identity if n == 0 else f"{identity}:{n}")
    return ids


@st.composite
def cases(
    draw: st.DrawFn,
    fmt: str,
    names: tuple[str, ...],
    modes: tuple[str, ...] = MODES,
    shapes: tuple[str, ...] = ("plain", "read", "value_struct"),
    unique_keys: bool = False,
) -> Case:
    rows = draw(st.integers(1, 6))
    cols = draw(columns(fmt, rows, names, unique_keys=unique_keys))
    shape = draw(st.sampled_from(shapes))
    mode = draw(st.sampled_from(modes))
    case = Case(cols=cols, rows=rows, mode=mode)
    case.batch_rows = draw(st.integers(1, rows))
    case.subject_column = draw(st.booleans())
    if case.subject_column:
        case.subjects = draw(
            st.lists(st.sampled_from(SUBJECT_TOKENS), min_size=rows, max_size=rows)
        )
    else:
        case.subjects = [draw(st.sampled_from(SUBJECT_TOKENS))] * rows
    case.msg_ids = draw(st.sampled_from(("none", "column", "prefix")))
    if case.msg_ids == "column":
        # Unique ids (some rows without one): every row is stored, in every mode.
        case.id_column = [
            draw(st.none() | st.just(f"id-{i}-{draw(st.sampled_from(('a', 'é', '😀')))}"))
            for i in range(rows)
        ]
    case.checks = mode != "fast" and draw(st.booleans())
    if draw(st.booleans()):
        case.headers = draw(
            st.lists(
                st.dictionaries(
                    st.sampled_from(HEADER_NAMES),
                    st.lists(HEADER_VALUES, min_size=1, max_size=2),
                    max_size=2,
                ),
                min_size=rows,
                max_size=rows,
            )
        )
    names_now = {c.name for c in cols}
    if shape == "read" or (shape == "plain" and {"stream", "seq"} <= names_now):
        # A read of a stream (a table with both columns is one, whatever else it
        # has): the read's own columns are not the value.
        case.make_read(
            draw(st.sampled_from(("SRC", "orders_2"))),
            draw(st.integers(1, 2**40)),
            draw(st.sampled_from((pa.uint64(), pa.int64()))),
        )
        for extra in draw(st.lists(st.sampled_from(READ_COLUMNS[2:]), unique=True, max_size=2)):
            if extra not in names_now:
                case.cols.append(Col(extra, pa.int64(), True, tuple([7] * rows)))
    elif shape == "value_struct":
        case.value_struct = True
        # Beside a struct column "value", no other column is a value.
        extra = draw(st.sampled_from(("timestamp", "other", "seq")))
        case.extras = [Col(extra, pa.utf8(), True, tuple(["not the value"] * rows))]
    assume(case.value_cols())
    return case


def publish_case(
    client: ja.Client, stream: str, case: Case, codec: Any
) -> tuple[pa.Table, ja.PublishResult]:
    table = case.table(stream)
    result = client.publish(table, codec=codec, **case.options(stream))
    assert (result.rows, result.stored, result.failed) == (case.rows, case.rows, 0)
    return table, result


def stored_rows(oracle: Oracle, stream: str, case: Case, result: Any) -> list[Stored]:
    """The stored message of each row, in row order, after checking that the stream
    holds those and nothing else, each on its subject with its msg id."""
    messages = oracle.messages(stream)
    assert len(messages) == case.rows, f"{len(messages)} messages stored for {case.rows} rows"
    seqs = result.acks.column("seq").to_pylist()
    if case.mode == "fast":
        # Acks cover ranges (no seq); the stored rows of a call are in order.
        assert seqs == [None] * case.rows
        by_row = messages
    else:
        by_seq = {m.seq: m for m in messages}
        assert sorted(seqs) == sorted(by_seq), (seqs, sorted(by_seq))
        by_row = [by_seq[s] for s in seqs]
        if case.mode == "atomic":
            # Each batch at consecutive sequences, the batches in order.
            assert seqs == list(range(seqs[0], seqs[0] + case.rows))
    for i, m in enumerate(by_row):
        assert m.subject == f"{stream}.{case.subjects[i]}", (i, m.subject)
        headers = m.header_map()
        ids = headers.pop("Nats-Msg-Id", None)
        want = case.expected_msg_id(i, m)
        assert ids == (None if want is None else [want]), (i, ids, want)
        assert headers == (case.headers[i] if case.headers else {}), (i, m.headers)
    return by_row


# == 1. raw rows ========================================================================


@dataclass
class RawCase:
    rows: list[RawRow]
    text_data: bool
    headers_lists: bool
    mode: str
    batch_rows: int
    msg_ids: str
    subject_column: bool
    #: ``publish`` (one call), ``publisher`` (two calls of one publisher, the msg id
    #: numbering going on across them) or ``batches`` (``publish_batches``, a result
    #: per two rows).
    via: str = "publish"
    #: A copy of a read: ``stream`` and ``seq`` columns, each row's source message.
    copy: bool = False
    #: In a copy, the source message of each row, by number: rows of one number are
    #: made of one message (an explode), some of them alike in everything.
    groups: list[int] = field(default_factory=list)
    seq_type: pa.DataType = field(default_factory=pa.uint64)

    def source_seq(self, i: int) -> int:
        return 1000 + 3 * self.groups[i]

    def table(self, stream: str) -> pa.Table:
        n = len(self.rows)
        cols: dict[str, pa.Array] = {}
        if self.subject_column:
            cols["subject"] = pa.array([f"{stream}.{r.subject}" for r in self.rows])
        cols["data"] = pa.array(
            [r.data for r in self.rows], pa.utf8() if self.text_data else pa.binary()
        )
        if self.headers_lists:
            cols["headers"] = pa.array(
                [
                    None if r.headers is None else [(k, list(v)) for k, v in r.headers]
                    for r in self.rows
                ],
                pa.map_(pa.utf8(), pa.list_(pa.utf8())),
            )
        else:
            cols["headers"] = pa.array(
                [
                    None if r.headers is None else [(k, v[0]) for k, v in r.headers]
                    for r in self.rows
                ],
                pa.map_(pa.utf8(), pa.utf8()),
            )
        if self.msg_ids == "column":
            cols["msg_id"] = pa.array([None if i % 3 == 2 else f"raw-{i}" for i in range(n)])
        if self.copy:
            cols["stream"] = pa.array(["SRC"] * n)
            cols["seq"] = pa.array([self.source_seq(i) for i in range(n)], self.seq_type)
        return pa.table(cols)

    def expected_headers(self, i: int, copy_id: str) -> dict[str, list[str]]:
        """publishing.md: the headers as given, less a copy's steering headers; the
        msg id from the ``msg_id`` column, else, in a copy, ``<prefix><stream>:<seq>:<digest>``
        (with no prefix too), else the prefix's ``<prefix><n>``, in place of a
        ``Nats-Msg-Id`` header; else the ``Nats-Msg-Id`` header's."""
        r = self.rows[i]
        out = {
            k: list(v) if self.headers_lists else [v[0]]
            for k, v in (r.headers or ())
            if not (self.copy and k == STEERING_HEADER[0])
        }
        if self.msg_ids == "column" and i % 3 != 2:
            out["Nats-Msg-Id"] = [f"raw-{i}"]
        elif self.copy:
            out["Nats-Msg-Id"] = [copy_id]
        elif self.msg_ids == "prefix":
            out["Nats-Msg-Id"] = [f"pre-{i}"]
        return out


@st.composite
def raw_cases(draw: st.DrawFn) -> RawCase:
    n = draw(st.integers(1, 8))
    text_data = draw(st.booleans())
    copy = draw(st.booleans())
    rows = draw(raw_rows(n, text_data, copy))
    subject_column = draw(st.booleans())
    if not subject_column:
        first = rows[0].subject
        rows = [RawRow(first, r.data, r.headers, r.msg_id) for r in rows]
    groups = [0] * n
    if copy:
        for i in range(1, n):
            groups[i] = groups[i - 1] + draw(st.integers(0, 1))
            if groups[i] == groups[i - 1] and draw(st.booleans()):
                # Alike to the row before (an explode of a repeated value); not its
                # msg id header, which would make it a duplicate of it by the user's word.
                before = rows[i - 1]
                headers = tuple(h for h in before.headers or () if h[0] != "Nats-Msg-Id")
                rows[i] = RawRow(before.subject, before.data, headers or None, None)
    return RawCase(
        rows=rows,
        text_data=text_data,
        headers_lists=draw(st.booleans()),
        mode=draw(st.sampled_from(MODES)),
        batch_rows=draw(st.integers(1, n)),
        msg_ids=draw(st.sampled_from(("none", "column", "prefix"))),
        subject_column=subject_column,
        via=draw(st.sampled_from(("publish", "publisher", "batches"))),
        copy=copy,
        groups=groups,
        seq_type=draw(st.sampled_from((pa.uint64(), pa.int64()))),
    )


def publish_raw(client: ja.Client, case: RawCase, table: pa.Table, opts: dict[str, Any]) -> Any:
    """Publish ``table`` as ``case.via`` says: the stored count and each row's seq."""
    if case.via == "publish":
        result = client.publish(table, **opts)
        return result.stored, result.acks.column("seq").to_pylist()
    results = []
    with client.publisher(**opts) as publisher:
        if case.via == "publisher":
            half = table.num_rows // 2
            for part in (table.slice(0, half), table.slice(half)):
                results.append(publisher.publish(part))
        else:
            batches = table.to_batches(max_chunksize=1)
            results = list(publisher.publish_batches(batches, rows_per_result=2))
    assert sum(r.rows for r in results) == table.num_rows
    seqs = [s for r in results for s in r.acks.column("seq").to_pylist()]
    return sum(r.stored for r in results), seqs


@pytest.mark.timeout(180)
@examples(50)
@given(case=raw_cases())
def test_raw_rows_are_stored_as_nats_py_reads_them(
    client: ja.Client, oracle: Oracle, unique_name: Callable[[str], str], case: RawCase
) -> None:
    """Subject, payload bytes and every header value (multi-valued ones in order, the
    msg id as ``Nats-Msg-Id``, numbered across a publisher's calls) as another client
    reads them, in every mode, by ``publish``, a publisher's calls and
    ``publish_batches``; and the package's own read gives back the same."""
    with fresh_stream(client, unique_name) as stream:
        opts: dict[str, Any] = {}
        if case.mode != "acked":
            opts["mode"] = case.mode
        if case.mode == "atomic":
            opts["batch_rows"] = case.batch_rows
        if not case.subject_column:
            opts["subject"] = f"{stream}.{case.rows[0].subject}"
        if case.msg_ids == "prefix":
            opts["msg_id_prefix"] = "pre-"
        stored, seqs = publish_raw(client, case, case.table(stream), opts)
        n = len(case.rows)
        assert stored == n
        messages = oracle.messages(stream)
        assert len(messages) == n
        if case.mode != "fast":
            assert seqs == [m.seq for m in messages]
        # A copy's rows without a msg_id of their own take their source's identity,
        # numbered among themselves.
        prefix = "pre-" if case.msg_ids == "prefix" else ""
        own = [i for i in range(n) if case.msg_ids != "column" or i % 3 == 2]
        sources = [("SRC", case.source_seq(i)) for i in own]
        ids = dict(zip(own, copy_ids(prefix, sources, [messages[i] for i in own]), strict=True))
        for i, (row, m) in enumerate(zip(case.rows, messages, strict=True)):
            data = row.data.encode() if isinstance(row.data, str) else (row.data or b"")
            assert m.subject == f"{stream}.{row.subject}", i
            assert m.data == data, (i, m.data, data)
            assert m.header_map() == case.expected_headers(i, ids.get(i, "")), (i, m.headers)

        back = client.read(stream, include_headers=True).read_all()
        assert back.column("seq").to_pylist() == [m.seq for m in messages]
        assert back.column("subject").to_pylist() == [m.subject for m in messages]
        assert back.column("data").to_pylist() == [m.data for m in messages]
        read_headers = [dict(h or []) for h in back.column("headers").to_pylist()]
        assert read_headers == [m.header_map(batch_headers=True) for m in messages]


# == 2. JSON ============================================================================

JSON_NAMES = PLAIN_NAMES + COLLIDING


@pytest.mark.timeout(180)
def one_column(t: pa.DataType, *values: Any, mode: str = "acked") -> Case:
    """A case of one column ``a`` (an example a property found, kept)."""
    col = Col("a", t, None in values or pa.types.is_null(t), values)
    return Case(cols=[col], rows=len(values), mode=mode, subjects=["a"] * len(values))


JSON_CASES = cases("json", JSON_NAMES)

#: A zero of negative scale: written ``00`` (no JSON) before it was written ``0``.
NEGATIVE_SCALE_ZERO = one_column(pa.decimal128(5, -2), Decimal("0"), Decimal("300"), None)


#: Kolkata's local mean time (+5:53:28) in year 1: the offset was written cut to minutes.
LMT_CASE = one_column(pa.timestamp("s", "Asia/Kolkata"), -62135510400)


@examples(60)
@example(case=LMT_CASE)
@example(case=NEGATIVE_SCALE_ZERO)
@given(case=JSON_CASES)
def test_json_payloads_are_the_values_as_json_loads_reads_them(
    client: ja.Client, oracle: Oracle, unique_name: Callable[[str], str], case: Case
) -> None:
    with fresh_stream(client, unique_name) as stream:
        _, result = publish_case(client, stream, case, "json")
        value_cols = case.value_cols()
        for i, m in enumerate(stored_rows(oracle, stream, case, result)):
            check_json_payload(m.data, value_cols, i, f"row {i} (seq {m.seq})")


def value_schema(cols: list[Col]) -> pa.Schema:
    return pa.schema([c.field() for c in cols])


def check_round_trip(back: pa.Table, cols: list[Col], cast: bool = False) -> None:
    """The ``value`` struct column read back holds each column given, type and values."""
    assert back.num_rows == len(cols[0].values)
    value = back.column("value").combine_chunks()
    for i, c in enumerate(cols):
        got = value.field(i)
        assert value.type.field(i).name == c.name
        if cast:
            got = got.cast(c.type)
        else:
            assert got.type == c.type, f"{c.name!r}: {c.type} read back as {got.type}"
        want = ticks_of(c.array())
        assert same(ticks_of(got), want), f"{c.name!r}: {want!r} read back as {ticks_of(got)!r}"


def without_dictionaries(t: pa.DataType) -> pa.DataType:
    """``t`` with each dictionary type, at any depth, replaced by its value type."""
    if pa.types.is_dictionary(t):
        return without_dictionaries(t.value_type)
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(without_dictionaries(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(without_dictionaries(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(without_dictionaries(f.type)) for f in t])
    if pa.types.is_map(t):
        item = t.item_field.with_type(without_dictionaries(t.item_type))
        return pa.map_(t.key_field, item)
    return t


def negative_scale_at(t: pa.DataType, value: Any, path: str) -> tuple[str, int] | None:
    """Where the first non-null decimal of negative scale of ``value`` is in its JSON
    text, spelled as the reader names a field (``a.x``, ``a[]`` for a list's item or
    a map's value), and the scale; None when there is none."""
    if value is None:
        return None
    if pa.types.is_decimal(t):
        return (path, t.scale) if t.scale < 0 else None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        found = (negative_scale_at(t.value_type, v, f"{path}[]") for v in value)
    elif pa.types.is_map(t):
        found = (negative_scale_at(t.item_type, v, f"{path}[]") for _, v in value)
    elif pa.types.is_struct(t):
        found = (negative_scale_at(f.type, value[f.name], f"{path}.{f.name}") for f in t)
    else:
        return None
    return next((f for f in found if f is not None), None)


@pytest.mark.timeout(180)
@examples(40)
@example(case=one_column(pa.dictionary(pa.int32(), pa.utf8()), "a", None))
@example(case=one_column(pa.decimal256(39, -1), Decimal("10")))
@example(case=LMT_CASE)
@example(case=NEGATIVE_SCALE_ZERO)
@given(case=cases("json", JSON_NAMES, modes=("acked",), shapes=("plain", "value_struct")))
@pytest.mark.usefixtures("oracle")  # its stream keeps the store's directory
def test_json_written_reads_back_the_same(
    client: ja.Client, unique_name: Callable[[str], str], case: Case
) -> None:
    """payloads.md: read back with the same schema, the table is the one published,
    except what the JSON decoder cannot read: a schema with a dictionary type is
    refused (read with the dictionary's value type, the values come back), and the
    first message holding a non-null decimal of negative scale is refused, naming its
    field."""
    with fresh_stream(client, unique_name) as stream:
        publish_case(client, stream, case, "json")
        cols = case.value_cols()
        schema = value_schema(cols)
        plain = [Col(c.name, without_dictionaries(c.type), c.nullable, c.values) for c in cols]
        if value_schema(plain) != schema:
            with pytest.raises(BadInputError, match=r"Support for Dictionary\(.*\) in JSON reader"):
                client.read(stream, codec=ja.ValueCodec("json", schema=schema)).read_all()
        refused = next(
            (
                (row, found)
                for row in range(case.rows)
                for c in cols
                if (found := negative_scale_at(c.type, c.values[row], c.name)) is not None
            ),
            None,
        )
        read = client.read(stream, codec=ja.ValueCodec("json", schema=value_schema(plain)))
        if refused is None:
            check_round_trip(read.read_all(), plain)
            return
        row, (path, scale) = refused
        with pytest.raises(MalformedPayloadError) as info:
            read.read_all()
        want = f"seq {row + 1}: the payload is not json of the value's schema: field '{path}': "
        want += f"a decimal of negative scale ({scale}) is not read from JSON"
        assert want in str(info.value), str(info.value)


# == 3. Avro ============================================================================


def avro_type(t: pa.DataType, nullable: bool, names: Iterator[int]) -> Any:
    if pa.types.is_null(t):
        return "null"
    base = _avro_base(t, names)
    return ["null", base] if nullable else base


def _avro_base(t: pa.DataType, names: Iterator[int]) -> Any:
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        return "int"
    if t in (pa.int64(), pa.uint32(), pa.uint64()):
        return "long"
    if t in (pa.float16(), pa.float32()):
        return "float"
    if t == pa.float64():
        return "double"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_string(t):
        return "string"
    if pa.types.is_binary(t):
        return "bytes"
    if pa.types.is_decimal(t):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        unit = {"s": "millis", "ms": "millis", "us": "micros", "ns": "nanos"}[t.unit]
        local = "" if t.tz is not None else "local-"
        return {"type": "long", "logicalType": f"{local}timestamp-{unit}"}
    if t == pa.time32("ms"):
        return {"type": "int", "logicalType": "time-millis"}
    if t == pa.time64("us"):
        return {"type": "long", "logicalType": "time-micros"}
    if pa.types.is_list(t):
        return {"type": "array", "items": avro_type(t.value_type, t.value_field.nullable, names)}
    if pa.types.is_struct(t):
        return {
            "type": "record",
            "name": f"Rec{next(names)}",
            "fields": [{"name": f.name, "type": avro_type(f.type, f.nullable, names)} for f in t],
        }
    if pa.types.is_map(t):
        return {"type": "map", "values": avro_type(t.item_type, t.item_field.nullable, names)}
    raise AssertionError(f"no Avro type for {t}")


def avro_schema_of(cols: list[Col]) -> dict[str, Any]:
    # Each field's type is the one its column's Arrow type is read back as; columns
    # under a field of another type are the conversion test's.
    names = iter(range(10**6))
    return {
        "type": "record",
        "name": "Row",
        "namespace": "oracle",
        "fields": [{"name": c.name, "type": avro_type(c.type, c.nullable, names)} for c in cols],
    }


def avro_expected(t: pa.DataType, v: Any) -> Any:
    """What fastavro gives for ``v`` of type ``t`` written with :func:`avro_schema_of`."""
    if v is None:
        return None
    if pa.types.is_date32(t):
        return date.fromordinal(EPOCH_DAY + v)
    if pa.types.is_timestamp(t):
        if t.unit == "ns":
            return v  # fastavro has no timestamp-nanos: the long itself
        micros = v * {"s": 10**6, "ms": 10**3, "us": 1}[t.unit]
        instant = EPOCH + timedelta(microseconds=micros)
        return instant if t.tz is not None else instant.replace(tzinfo=None)
    if pa.types.is_time(t):
        micros = v * (1000 if t == pa.time32("ms") else 1)
        return (datetime(1970, 1, 1) + timedelta(microseconds=micros)).time()
    if pa.types.is_list(t):
        return [avro_expected(t.value_type, x) for x in v]
    if pa.types.is_struct(t):
        return {f.name: avro_expected(f.type, v[f.name]) for f in t}
    if pa.types.is_map(t):
        return {k: avro_expected(t.item_type, x) for k, x in v}
    return v


def crc64_avro(data: bytes) -> bytes:
    """The Avro spec's CRC-64-AVRO (Rabin) fingerprint, little-endian, as the
    single-object encoding carries it."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for b in data:
        fp = (fp >> 8) ^ table[(fp ^ b) & 0xFF]
    return fp.to_bytes(8, "little")


AVRO_FRAMINGS = ("raw", "single-object", "confluent")


def avro_codec(schema: dict[str, Any], framing: str, write: bool) -> ja.ValueCodec:
    if framing == "confluent":
        by_id = {77: schema}
        if write:
            return ja.ValueCodec(
                "avro", avro_framing="confluent", avro_schema=schema, avro_schema_id=77
            )
        return ja.ValueCodec("avro", avro_framing="confluent", avro_schemas_by_id=by_id)
    return ja.ValueCodec("avro", avro_framing=framing, avro_schema=schema)  # type: ignore[arg-type]


def avro_datum(payload: bytes, schema: dict[str, Any], framing: str) -> bytes:
    """The datum after the framing's prefix, which is checked byte for byte."""
    if framing == "raw":
        return payload
    if framing == "confluent":
        assert payload[:5] == b"\x00" + (77).to_bytes(4, "big"), payload[:5]
        return payload[5:]
    canonical = to_parsing_canonical_form(fastavro.parse_schema(schema)).encode()
    assert payload[:2] == b"\xc3\x01", payload[:2]
    assert payload[2:10] == crc64_avro(canonical), (payload[2:10].hex(), canonical)
    return payload[10:]


def avro_no_bytes(t: pa.DataType, nullable: bool) -> bool:
    """Whether every value of the field is written as no bytes at all (a null, or a
    record of such fields; a union's branch index is a byte)."""
    if pa.types.is_null(t):
        return True
    return (
        not nullable and pa.types.is_struct(t) and all(avro_no_bytes(f.type, f.nullable) for f in t)
    )


#: open defect: a record that encodes to no bytes does not read back ("0 of its 0 bytes read")
def _null_below_top(t: pa.DataType) -> bool:
    children: list[pa.DataType] = []
    if pa.types.is_struct(t):
        children = [t.field(i).type for i in range(t.num_fields)]
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        children = [t.value_type]
    elif pa.types.is_map(t):
        children = [t.item_type]
    return any(pa.types.is_null(c) or _null_below_top(c) for c in children)


AVRO_CASES = cases("avro", AVRO_NAMES, unique_keys=True).filter(
    lambda case: (
        not all(avro_no_bytes(c.type, c.nullable) for c in case.value_cols())
        # open defect: Avro's "null" below a record's top level (an array's items, a
        # nested record's field) is read as a non-nullable Arrow null and does not read
        # back ("Non-nullable field of ListArray", "Found unmasked nulls").
        and not any(_null_below_top(c.type) for c in case.value_cols())
    )
)


@pytest.mark.timeout(180)
@examples(40)
@given(case=AVRO_CASES, framing=st.sampled_from(AVRO_FRAMINGS))
def test_avro_payloads_are_the_values_as_fastavro_reads_them(
    client: ja.Client,
    oracle: Oracle,
    unique_name: Callable[[str], str],
    case: Case,
    framing: str,
) -> None:
    cols = case.value_cols()
    schema = avro_schema_of(cols)
    parsed = fastavro.parse_schema(schema)
    with fresh_stream(client, unique_name) as stream:
        _, result = publish_case(client, stream, case, avro_codec(schema, framing, write=True))
        for i, m in enumerate(stored_rows(oracle, stream, case, result)):
            datum = io.BytesIO(avro_datum(m.data, schema, framing))
            got = fastavro.schemaless_reader(datum, parsed, None)
            assert datum.tell() == len(datum.getvalue()), f"row {i}: bytes left after the record"
            want = {c.name: avro_expected(c.type, c.values[i]) for c in cols}
            assert same(got, want), f"row {i}: fastavro reads {got!r}, given {want!r}"

        back = client.read(stream, codec=avro_codec(schema, framing, write=False)).read_all()
        check_round_trip(back, cols, cast=True)


# == 4. Arrow IPC =======================================================================


@pytest.mark.timeout(180)
@examples(40)
@given(case=cases("arrow", JSON_NAMES))
def test_arrow_payloads_are_one_row_ipc_streams_pyarrow_reads(
    client: ja.Client, oracle: Oracle, unique_name: Callable[[str], str], case: Case
) -> None:
    cols = case.value_cols()
    schema = value_schema(cols)
    whole = table_of(cols)
    with fresh_stream(client, unique_name) as stream:
        _, result = publish_case(client, stream, case, "arrow")
        for i, m in enumerate(stored_rows(oracle, stream, case, result)):
            with pa.ipc.open_stream(m.data) as reader:
                got = reader.read_all()
            assert got.schema == schema, f"row {i}: {got.schema} is not {schema}"
            assert got.num_rows == 1
            want = whole.slice(i, 1)
            for name in schema.names:
                theirs = ticks_of(got.column(name).combine_chunks())
                ours = ticks_of(want.column(name).combine_chunks())
                assert same(theirs, ours), (i, name, theirs, ours)

        back = client.read(stream, codec="arrow").read_all()
        check_round_trip(back, cols)


# == 5. Protobuf ========================================================================

PROTO = """
syntax = "proto3";
package oracle.v1;

import "google/protobuf/timestamp.proto";

enum Colour {
  COLOUR_UNSPECIFIED = 0;
  RED = 1;
  GREEN = 2;
}

message Leaf {
  string s = 1;
  optional sint64 n = 2;
  bytes b = 3;
}

message Row {
  int32 i32 = 1;
  int64 i64 = 2;
  uint32 u32 = 3;
  uint64 u64 = 4;
  sint32 s32 = 5;
  sint64 s64 = 6;
  fixed32 fx32 = 7;
  fixed64 fx64 = 8;
  sfixed32 sfx32 = 9;
  sfixed64 sfx64 = 10;
  float f = 11;
  double d = 12;
  bool flag = 13;
  string text = 14;
  bytes blob = 15;
  optional double maybe_d = 16;
  optional int64 maybe_i = 17;
  optional string maybe_s = 18;
  repeated double ds = 19;
  repeated string ss = 20;
  repeated sint64 is = 21;
  map<string, int64> by_name = 22;
  map<int32, string> by_num = 23;
  Leaf leaf = 24;
  repeated Leaf leaves = 25;
  Colour colour = 26;
  google.protobuf.Timestamp at = 27;
}
"""
PROTO_MESSAGE = "oracle.v1.Row"


@dataclass
class Proto:
    descriptor: Path
    module: ModuleType

    def codec(self) -> ja.ValueCodec:
        return ja.ValueCodec(
            "protobuf", protobuf_descriptor=self.descriptor, protobuf_message=PROTO_MESSAGE
        )


@pytest.fixture(scope="module")
def proto(tmp_path_factory: pytest.TempPathFactory) -> Proto:
    return Proto(*compile_proto(tmp_path_factory.mktemp("oracle-proto"), "oracle_row", PROTO))


_PROTO_INTS = {
    "i32": pa.int32(),
    "i64": pa.int64(),
    "u32": pa.uint32(),
    "u64": pa.uint64(),
    "s32": pa.int32(),
    "s64": pa.int64(),
    "fx32": pa.uint32(),
    "fx64": pa.uint64(),
    "sfx32": pa.int32(),
    "sfx64": pa.int64(),
}


#: float32's largest value.
F32_MAX = float(np.finfo(np.float32).max)


def _maybe(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | s


@st.composite
def proto_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows of the message's value schema: any field null (absent); list items and map
    values never null (protobuf has no null inside a repeated field or a map)."""
    from oracle_tables import BYTES, TEXT, floats, ints, timestamp_ticks

    singular_double = floats(pa.float64())
    singular_float = floats(pa.float32())
    # open defect: a timestamp before -9223372036 s (from -2^63 ns) is refused on read
    at = timestamp_ticks("ns").filter(lambda t: t >= -9223372036 * 10**9)
    leaf = st.fixed_dictionaries(
        {"s": _maybe(TEXT), "n": _maybe(ints(pa.int64())), "b": _maybe(BYTES)}
    )
    row = st.fixed_dictionaries(
        {
            **{name: _maybe(ints(t)) for name, t in _PROTO_INTS.items()},
            "f": _maybe(singular_float),
            "d": _maybe(singular_double),
            "flag": _maybe(st.booleans()),
            "text": _maybe(TEXT),
            "blob": _maybe(BYTES),
            "maybe_d": _maybe(floats(pa.float64())),
            "maybe_i": _maybe(ints(pa.int64())),
            "maybe_s": _maybe(TEXT),
            "ds": _maybe(st.lists(floats(pa.float64()), max_size=3)),
            "ss": _maybe(st.lists(TEXT, max_size=3)),
            "is": _maybe(st.lists(ints(pa.int64()), max_size=3)),
            "by_name": _maybe(st.lists(st.tuples(TEXT, ints(pa.int64())), max_size=3)),
            "by_num": _maybe(st.lists(st.tuples(ints(pa.int32()), TEXT), max_size=3)),
            "leaf": _maybe(leaf),
            "leaves": _maybe(st.lists(leaf, max_size=2)),
            "colour": _maybe(st.sampled_from(("COLOUR_UNSPECIFIED", "RED", "GREEN"))),
            "at": _maybe(at),
        }
    )
    return draw(st.lists(row, min_size=1, max_size=5))


def runtime_message(pb: ModuleType, row: dict[str, Any]) -> Any:
    """The message protobuf's runtime builds from ``row`` (null: not set)."""
    m = pb.Row()
    for name, v in row.items():
        if v is None:
            continue
        if name in ("ds", "ss", "is"):
            getattr(m, name).extend(v)
        elif name in ("by_name", "by_num"):
            for k, x in v:
                getattr(m, name)[k] = x
        elif name == "leaf":
            _leaf(m.leaf, v)
        elif name == "leaves":
            for item in v:
                _leaf(m.leaves.add(), item)
        elif name == "colour":
            m.colour = pb.Colour.Value(v)
        elif name == "at":
            m.at.seconds, m.at.nanos = divmod(v, 10**9)
        else:
            setattr(m, name, v)
    return m


def _leaf(target: Any, v: dict[str, Any]) -> None:
    target.SetInParent()
    for k, x in v.items():
        if x is not None:
            setattr(target, k, x)


def runtime_view(m: Any, value_type: pa.StructType) -> dict[str, Any]:
    """The row a read of ``m`` must give, from the runtime's view of it: an absent
    field without presence is its default, maps as sorted pairs."""
    out: dict[str, Any] = {}
    for f in value_type:
        name = f.name
        if name in ("maybe_d", "maybe_i", "maybe_s"):
            out[name] = getattr(m, name) if m.HasField(name) else None
        elif name in ("ds", "ss", "is"):
            out[name] = list(getattr(m, name))
        elif name in ("by_name", "by_num"):
            out[name] = sorted(getattr(m, name).items())
        elif name == "leaf":
            out[name] = _leaf_view(m.leaf) if m.HasField("leaf") else None
        elif name == "leaves":
            out[name] = [_leaf_view(x) for x in m.leaves]
        elif name == "colour":
            out[name] = (
                type(m)
                .DESCRIPTOR.fields_by_name["colour"]
                .enum_type.values_by_number[m.colour]
                .name
            )
        elif name == "at":
            out[name] = m.at.seconds * 10**9 + m.at.nanos if m.HasField("at") else None
        else:
            out[name] = getattr(m, name)
    return out


def _leaf_view(x: Any) -> dict[str, Any]:
    return {"s": x.s, "n": x.n if x.HasField("n") else None, "b": x.b}


def proto_table(proto: Proto, rows: list[dict[str, Any]], stream: str) -> pa.Table:
    schema = proto.codec().value_schema()
    values = pa.Table.from_pylist(rows, schema=schema)
    return values.add_column(0, "subject", pa.array([f"{stream}.p"] * len(rows)))


def read_view(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for name in ("by_name", "by_num"):
        out[name] = sorted(out[name]) if out[name] is not None else None
    if out.get("at") is not None:
        out["at"] = pa.scalar(out["at"], pa.timestamp("ns", "UTC")).cast(pa.int64()).as_py()
    return out


NAN_ROW = {"d": float("nan"), "f": float("-inf"), "maybe_d": float("inf")}
NAN_LIST_ROW = {"ds": [float("nan"), -0.0, float("inf")]}


@pytest.mark.timeout(180)
@examples(40)
@example(rows=[NAN_ROW])
@example(rows=[{"maybe_d": -0.0}])
@example(rows=[NAN_LIST_ROW])
@example(rows=[{"d": 2.0**-24}])
@example(rows=[{"at": -9223372036 * 10**9}])
@given(rows=proto_rows())
def test_protobuf_payloads_parse_in_the_runtime_as_the_rows_given(
    client: ja.Client,
    oracle: Oracle,
    unique_name: Callable[[str], str],
    proto: Proto,
    rows: list[dict[str, Any]],
) -> None:
    pb = proto.module
    value_type = pa.struct(list(proto.codec().value_schema()))
    full = [{f.name: r.get(f.name) for f in value_type} for r in rows]
    with fresh_stream(client, unique_name) as stream:
        result = client.publish(proto_table(proto, full, stream), codec=proto.codec())
        assert result.stored == len(full)
        messages = oracle.messages(stream)
        assert [m.seq for m in messages] == result.acks.column("seq").to_pylist()
        expected = [runtime_message(pb, r) for r in full]
        for i, (m, want) in enumerate(zip(messages, expected, strict=True)):
            got = pb.Row.FromString(m.data)
            # Field by field as the runtime reads them: a NaN is a NaN (whatever its
            # payload bits, which JSON-routed encoders cannot keep), a zero keeps its sign.
            assert same(runtime_view(got, value_type), runtime_view(want, value_type)), (
                f"row {i}: given {full[i]}, the runtime parses the payload as\n{got}\n"
                f"and builds from the row\n{want}"
            )

        back = client.read(stream, codec=proto.codec()).read_all()
        got_rows = [read_view(v) for v in back.column("value").to_pylist()]
        want_rows = [runtime_view(w, value_type) for w in expected]
        assert same(got_rows, want_rows)


# == 6. KV buckets ======================================================================


@dataclass
class KvModel:
    """What a bucket holds after rows are written, as a KV client reads it."""

    seq: int = 0
    history: dict[str, list[tuple[str, bytes, int]]] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)

    def revision(self, key: str) -> int:
        """The key's last message's sequence (0: no message at all)."""
        entries = self.history.get(key)
        return entries[-1][2] if entries else 0

    def write(self, row: KvRow, expected_revision: int | None) -> str:
        """``stored``, ``duplicate`` or ``conflict``."""
        if row.msg_id is not None and row.msg_id in self.ids:
            return "duplicate"
        if expected_revision is not None and expected_revision != self.revision(row.key):
            return "conflict"
        self.seq += 1
        op = (row.operation or "PUT").upper()
        value = row.value.encode() if isinstance(row.value, str) else (row.value or b"")
        entry = (op, value if op == "PUT" else b"", self.seq)
        if op == "PURGE":
            self.history[row.key] = [entry]
        else:
            self.history.setdefault(row.key, []).append(entry)
        if row.msg_id is not None:
            self.ids.add(row.msg_id)
        return "stored"


@pytest.mark.timeout(180)
@examples(30)
@given(
    text_values=st.booleans(),
    checks=st.booleans(),
    with_operation=st.booleans(),
    data=st.data(),
)
def test_kv_writes_are_what_nats_py_kv_reads(
    client: ja.Client,
    oracle: Oracle,
    unique_name: Callable[[str], str],
    text_values: bool,
    checks: bool,
    with_operation: bool,
    data: st.DataObject,
) -> None:
    """Puts, deletes and purges (any case), msg ids repeated, compare-and-set right and
    wrong: each row stored, duplicate or a conflict as a KV client would have it, and
    ``get``/``history`` of nats-py's KV API and ``read_kv`` agree with the model."""
    rows = data.draw(kv_rows(text_values, checks))
    if not with_operation:
        rows = [KvRow(r.key, r.value, None, r.msg_id, r.check) for r in rows]
    bucket = unique_name("kv")

    async def make() -> None:
        await oracle.js.create_key_value(bucket=bucket, history=64)

    oracle.run(make())
    try:
        model = KvModel()
        outcomes = []
        expected_revisions = []
        for r in rows:
            # A check is written as the revision the key is at when its row comes
            # (right) or one past it (wrong): known before the write, since rows apply
            # in order.
            exp = None
            if r.check is not None:
                exp = model.revision(r.key) + (0 if r.check == "right" else 1)
            expected_revisions.append(exp)
            outcomes.append(model.write(r, exp))
        table: dict[str, pa.Array] = {
            "key": pa.array([r.key for r in rows]),
            "value": pa.array([r.value for r in rows], pa.utf8() if text_values else pa.binary()),
            "msg_id": pa.array([r.msg_id for r in rows], pa.utf8()),
        }
        if with_operation:
            table["operation"] = pa.array([r.operation for r in rows], pa.utf8())
        if checks:
            table["expected_revision"] = pa.array(expected_revisions, pa.int64())
        result = client.write_kv(bucket, pa.table(table), raise_on_error=False)
        errors = result.acks.column("error").to_pylist()
        duplicates = result.acks.column("duplicate").to_pylist()
        got = [
            "conflict"
            if e is not None and e.startswith("conflict:")
            else ("duplicate" if d else ("stored" if e is None else f"error {e}"))
            for e, d in zip(errors, duplicates, strict=True)
        ]
        assert got == outcomes, list(zip(rows, got, outcomes, strict=True))

        async def look() -> dict[str, Any]:
            kv = await oracle.js.key_value(bucket)
            seen: dict[str, Any] = {}
            for key in sorted({r.key for r in rows}):
                try:
                    e = await kv.get(key)
                    last: Any = ("PUT", e.value or b"", e.revision)
                except KeyNotFoundError as err:
                    last = (getattr(err, "op", None), None, None)
                hist = []
                for _ in range(5):
                    try:
                        hist = await kv.history(key)
                    except NoKeysError:
                        hist = []
                    # nats-py's watcher says "no keys" when the first message is on
                    # its way as it asks its consumer what is pending: an empty
                    # history of a key that get() found is asked for again.
                    if hist or last[0] is None:
                        break
                seen[key] = (
                    last,
                    [(h.operation or "PUT", h.value or b"", h.revision) for h in hist],
                )
            return seen

        seen = oracle.run(look())
        for key, (last, hist) in seen.items():
            want_hist = model.history.get(key, [])
            assert hist == want_hist, (key, hist, want_hist)
            if not want_hist:
                assert last == (None, None, None), (key, last)
            elif want_hist[-1][0] == "PUT":
                assert last == want_hist[-1], (key, last)
            else:
                assert last[0] == want_hist[-1][0], (key, last, want_hist[-1])

        entries = client.read_kv(bucket, include_deletes=True).read_all()
        read = {r["key"]: (r["operation"], r["value"], r["revision"]) for r in entries.to_pylist()}
        want_read = {
            k: (h[-1][0], h[-1][1] if h[-1][0] == "PUT" else None, h[-1][2])
            for k, h in model.history.items()
        }
        assert read == want_read
    finally:
        oracle.run(oracle.js.delete_key_value(bucket))


# == 7. load and export =================================================================

#: Types a Parquet file keeps as they are: JSON's, less decimals of a negative scale
#: (Parquet has none) and the time32(s) Parquet writes as milliseconds.
CLI_NAMES = (*PLAIN_NAMES[:7], "ts_like", "seq_no")


def parquet_safe(t: pa.DataType, top: bool = True) -> bool:
    """Whether a Parquet file keeps the type, so that what the load is given is the
    table generated: Parquet has no decimal of negative scale (pyarrow refuses to
    write one) and no time in seconds (pyarrow writes time32("s") as milliseconds)."""
    if pa.types.is_decimal(t) and t.scale < 0:
        return False
    if t == pa.time32("s"):
        return False
    # open defect: an export of a dictionary inside a list, struct or map fails (JSON reader)
    if pa.types.is_dictionary(t) and not top:
        return False
    if pa.types.is_struct(t):
        return all(parquet_safe(f.type, top=False) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return parquet_safe(t.value_type, top=False)
    if pa.types.is_map(t):
        return parquet_safe(t.item_type, top=False)
    return True


def required_leaf_under(t: pa.StructType) -> bool:
    """Whether a struct has a non-nullable field of a type without children, itself
    or through struct fields: a null struct's decoded children are null, and so is
    that field, which Parquet's writer refuses."""
    return any(
        (not f.nullable and f.type.num_fields == 0)
        or (pa.types.is_struct(f.type) and required_leaf_under(f.type))
        for f in t
    )


def null_struct_with_required_leaf(t: pa.DataType, value: Any) -> bool:
    """Whether ``value`` of type ``t`` is, or holds, a null struct with such a field."""
    if pa.types.is_struct(t):
        if value is None:
            return required_leaf_under(t)
        return any(null_struct_with_required_leaf(f.type, value[f.name]) for f in t)
    if value is None:
        return False
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return any(null_struct_with_required_leaf(t.value_type, v) for v in value)
    if pa.types.is_map(t):
        return any(null_struct_with_required_leaf(t.item_type, v) for _, v in value)
    return False


@pytest.mark.timeout(240)
@st.composite
def parquet_tables(draw: st.DrawFn) -> list[Col]:
    rows = draw(st.integers(1, 6))
    cols = draw(columns("json", rows, CLI_NAMES))
    assume(all(parquet_safe(c.type) for c in cols))
    return cols


@examples(15)
# Fails, open: the export gives this non-nullable column back nullable.
@example(cols=[Col("t", pa.timestamp("s", "Asia/Kolkata"), False, (-62135510400,))])
@example(cols=[Col("a", pa.struct([pa.field("x", pa.int8(), nullable=False)]), True, (None,))])
@given(cols=parquet_tables())
def test_load_of_parquet_stores_json_rows_and_export_gives_the_table_back(
    shared_nats_server: NatsServer,
    client: ja.Client,
    oracle: Oracle,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cols: list[Col],
) -> None:
    """``load`` of a Parquet file: one message per row, each a JSON object of the
    row's columns (read by ``json.loads``, as the codec writes them and docs/cli.md
    says), msg ids ``ja-<file id>-<row>``; ``export --data-as json`` writes the table
    back, types and values, from the schema the load recorded; a row Parquet's writer
    refuses (a null struct, whose decoded non-nullable field is then null) fails the
    export with exit code 1 and an error naming the messages, and no file."""
    rows = len(cols[0].values)
    stream = unique_name("LOAD")
    src = tmp_path / f"{stream}.parquet"
    pq.write_table(table_of(cols), src)
    loaded = pq.read_table(src)
    # The oracle's input is the file as pyarrow reads it back.
    file_cols = [
        Col(f.name, f.type, f.nullable, tuple(ticks_of(loaded.column(f.name).combine_chunks())))
        for f in loaded.schema
    ]
    url = shared_nats_server.url
    run = cli(
        capsys,
        "load", str(src), "--stream", stream, "--subject", f"{stream}.rows",
        "--create-stream", "-s", url,
    )  # fmt: skip
    assert run.code == 0, run.err
    try:
        messages = oracle.data_messages(stream)
        assert len(messages) == rows
        file_ids = set()
        for i, m in enumerate(messages):
            assert m.subject == f"{stream}.rows"
            (msg_id,) = m.header_map()["Nats-Msg-Id"]
            found = re.fullmatch(r"ja-([0-9a-f]{16})-(\d+)", msg_id)
            assert found and int(found.group(2)) == i, msg_id
            file_ids.add(found.group(1))
            check_json_payload(m.data, file_cols, i, f"row {i}")
        assert len(file_ids) == 1

        out = tmp_path / f"{stream}-back.parquet"
        run = cli(
            capsys,
            "export", stream, "-o", str(out), "--data-as", "json",
            "--columns", ",".join(loaded.column_names), "-s", url,
        )  # fmt: skip
        if any(null_struct_with_required_leaf(c.type, v) for c in file_cols for v in c.values):
            assert run.code == 1, (run.code, run.err)
            assert re.fullmatch(
                r"jetstream-arrow export: error: cannot write messages \d+\.\.\d+ as parquet: "
                r"Column '.*' is declared non-nullable but contains nulls\n",
                run.err,
            ), run.err
            assert not out.exists()
            return
        assert run.code == 0, run.err
        back = pq.read_table(out)
        # A dictionary column is recorded (and so exported) as its values' type.
        assert back.schema == pa.schema(
            [
                f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f
                for f in loaded.schema
            ]
        )
        for name in loaded.column_names:
            theirs = ticks_of(back.column(name).combine_chunks())
            ours = ticks_of(loaded.column(name).combine_chunks())
            assert same(theirs, ours), (name, theirs, ours)
    finally:
        client.delete_stream(stream)


def ticks_of(arr: pa.Array) -> list[Any]:
    """Python values as the strategies give them: temporal values as integer ticks
    (exact at any unit, and no pandas NaT for the nanosecond -2^63), dictionaries as
    their values, maps as (key, value) pairs."""
    if arr.offset:
        arr = pa.concat_arrays([arr])  # offsets into children below assume none
    return _ticks_array(arr.type, arr)


def _ticks_array(t: pa.DataType, arr: pa.Array) -> list[Any]:
    if (
        pa.types.is_timestamp(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_duration(t)
    ):
        width = pa.int32() if t.bit_width == 32 else pa.int64()
        return arr.view(width).to_pylist()
    if pa.types.is_dictionary(t):
        # Looked up here, not cast: below a null struct an index is undefined, and
        # pyarrow itself leaves 0 into an empty dictionary there (a struct masks it).
        values = arr.dictionary.to_pylist()
        return [
            None if i is None else values[i] if i < len(values) else f"<index {i} out of bounds>"
            for i in arr.indices.to_pylist()
        ]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        flat = _ticks_array(t.value_type, arr.values)
        offsets = arr.offsets.to_pylist()
        return [
            None if not arr[i].is_valid else flat[offsets[i] : offsets[i + 1]]
            for i in range(len(arr))
        ]
    if pa.types.is_struct(t):
        children = [_ticks_array(f.type, arr.field(j)) for j, f in enumerate(t)]
        return [
            None if not arr[i].is_valid else {f.name: children[j][i] for j, f in enumerate(t)}
            for i in range(len(arr))
        ]
    if pa.types.is_map(t):
        keys = arr.keys.to_pylist()
        items = _ticks_array(t.item_type, arr.items)
        offsets = arr.offsets.to_pylist()
        return [
            None
            if not arr[i].is_valid
            else list(
                zip(
                    keys[offsets[i] : offsets[i + 1]],
                    items[offsets[i] : offsets[i + 1]],
                    strict=True,
                )
            )
            for i in range(len(arr))
        ]
    return arr.to_pylist()


# == 8. the differences found, each kept as a test =========================================
#
# Each test below is a difference between the package and the oracle that the
# properties above found (or one a property can only reach rarely), reduced to a few
# rows. Each asserts what the docs promise.


def publish_values(
    client: ja.Client, stream: str, table: pa.Table, codec: Any, **options: Any
) -> Any:
    table = table.add_column(0, "subject", pa.array([f"{stream}.v"] * table.num_rows))
    return client.publish(table, codec=codec, **options)


# -- JSON ---------------------------------------------------------------------------------

#: Instants in a zone's local mean time, whose offset has seconds: Kolkata's +5:53:28
#: (year 1) and New York's -4:56:02 (one second before its standard time, 1883).
LOCAL_MEAN_TIME = [
    (pa.timestamp("s", "Asia/Kolkata"), -62135510400),
    (pa.timestamp("us", "America/New_York"), -2717650801 * 10**6),
]


@pytest.mark.parametrize(("t", "ticks"), LOCAL_MEAN_TIME, ids=["kolkata-1", "new-york-1883"])
def test_json_a_zoned_timestamp_in_local_mean_time_names_the_instant_given(
    client: ja.Client,
    oracle: Oracle,
    unique_name: Callable[[str], str],
    t: pa.DataType,
    ticks: int,
) -> None:
    """RFC 3339 offsets have no seconds: arrow-json wrote the zone's wall time with
    its offset cut to minutes, a text that named another instant (28 s and 2 s off
    here), and a read gave that other instant back. (Found here; the encoder now
    writes such an instant in UTC.)"""
    table = pa.table({"at": pa.array([ticks], t)})
    with fresh_stream(client, unique_name) as stream:
        publish_values(client, stream, table, "json")
        (m,) = oracle.messages(stream)
        (_, got), *_ = strict_json(m.data)
        instant, _ = instant_of(got)
        per = PER_SECOND[t.unit]
        assert instant == ticks * (10**9 // per), (
            f"{t} {ticks} written as {got!r}, {instant - ticks * (10**9 // per)} ns off"
        )
        back = client.read(stream, codec=ja.ValueCodec("json", schema=table.schema))
        assert ticks_of(back.read_all().column("value").combine_chunks().field(0)) == [ticks]


@pytest.mark.usefixtures("oracle")  # its stream keeps the store's directory
def test_json_a_decimal_of_negative_scale_is_written_and_its_read_refused(
    client: ja.Client, unique_name: Callable[[str], str]
) -> None:
    """payloads.md: 12300 in decimal128(5, -2) is written as the number 12300 (its
    digits); reading it is refused, naming the field, rather than misread (the decoder
    underneath would read 12300 as 12300 units of 10^2)."""
    table = pa.table({"d": pa.array([Decimal("12300"), Decimal("-500")], pa.decimal128(5, -2))})
    with fresh_stream(client, unique_name) as stream:
        publish_values(client, stream, table, "json")
        raw = client.read(stream).read_all().column("data").to_pylist()
        assert raw == [b'{"d":12300}', b'{"d":-500}']
        read = client.read(stream, codec=ja.ValueCodec("json", schema=table.schema))
        with pytest.raises(
            MalformedPayloadError, match=re.escape("field 'd': a decimal of negative scale (-2)")
        ):
            read.read_all()


def test_json_a_date64_is_written_as_midnight_of_its_date(
    client: ja.Client, oracle: Oracle, unique_name: Callable[[str], str]
) -> None:
    """cli.md: "``date32`` dates are ``2024-01-01``, ``date64`` ones
    ``2024-01-01T00:00:00``"; both read back as the date given."""
    table = pa.table(
        {
            "day": pa.array([19723 * 86_400_000], pa.date64()),
            "day32": pa.array([19723], pa.date32()),
        }
    )
    with fresh_stream(client, unique_name) as stream:
        publish_values(client, stream, table, "json")
        (m,) = oracle.messages(stream)
        assert strict_json(m.data) == [("day", "2024-01-01T00:00:00"), ("day32", "2024-01-01")]
        back = client.read(stream, codec=ja.ValueCodec("json", schema=table.schema)).read_all()
        value = back.column("value").combine_chunks()
        assert value.type == pa.struct(list(table.schema))
        assert ticks_of(value.field(0)) == [19723 * 86_400_000]
        assert ticks_of(value.field(1)) == [19723]


@pytest.mark.parametrize(
    ("column", "written"),
    [
        (
            pa.array(["a", None, "a", "é"], pa.dictionary(pa.int32(), pa.utf8())),
            [b'{"x":"a"}', b'{"x":null}', b'{"x":"a"}', '{"x":"é"}'.encode()],
        ),
        (
            pa.array(
                [[("k", "a")], None, [], [("k", "b")]],
                pa.map_(pa.utf8(), pa.dictionary(pa.int8(), pa.utf8())),
            ),
            [b'{"x":{"k":"a"}}', b'{"x":null}', b'{"x":{}}', b'{"x":{"k":"b"}}'],
        ),
        (
            pa.array([5, -1, None, 0], pa.duration("s")),
            [b'{"x":"PT5S"}', b'{"x":"-PT1S"}', b'{"x":null}', b'{"x":"P0D"}'],
        ),
        (
            pa.array([1, -(2**62), None, 0], pa.duration("ns")),
            [
                b'{"x":"PT0.000000001S"}',
                b'{"x":"-PT4611686018.427387904S"}',
                b'{"x":null}',
                b'{"x":"P0D"}',
            ],
        ),
    ],
    ids=["dictionary", "map-of-dictionary", "duration-s", "duration-ns"],
)
@pytest.mark.usefixtures("oracle")  # its stream keeps the store's directory
def test_json_dictionary_and_duration_columns_are_written_and_refused_on_read(
    client: ja.Client, unique_name: Callable[[str], str], column: pa.Array, written: list[bytes]
) -> None:
    """payloads.md: a dictionary is written as its values and a duration as ISO-8601
    text ("PT5S"); neither reads back with the schema published. A schema with a
    dictionary type is refused ("Support for Dictionary(...) in JSON reader" is not
    implemented: read it with the dictionary's value type, which gives the values),
    and a duration's text is refused as a malformed payload naming the field."""
    table = pa.table({"x": column})
    with fresh_stream(client, unique_name) as stream:
        publish_values(client, stream, table, "json")
        assert client.read(stream).read_all().column("data").to_pylist() == written
        codec = ja.ValueCodec("json", schema=table.schema)
        if pa.types.is_duration(column.type):
            read = client.read(stream, codec=codec)
            with pytest.raises(
                MalformedPayloadError,
                match=r"seq 1: .*field 'x': failed to parse \"PT[0-9.]+S\" as Duration",
            ):
                read.read_all()
            return
        with pytest.raises(BadInputError, match=r"Support for Dictionary\(Int(8|32), Utf8\)"):
            client.read(stream, codec=codec).read_all()
        plain = pa.schema([pa.field("x", without_dictionaries(column.type))])
        back = client.read(stream, codec=ja.ValueCodec("json", schema=plain)).read_all()
        got = back.column("value").combine_chunks().field(0)
        assert got.type == plain.field("x").type
        assert ticks_of(got) == ticks_of(column)


# -- Avro ---------------------------------------------------------------------------------


def _fastavro_read(payload: bytes, field_type: Any) -> Any:
    schema = fastavro.parse_schema(
        {"type": "record", "name": "R", "fields": [{"name": "x", "type": field_type}]}
    )
    datum = io.BytesIO(payload)
    value = fastavro.schemaless_reader(datum, schema, None)
    assert datum.tell() == len(payload), f"{len(payload) - datum.tell()} bytes left"
    return value["x"]


def test_avro_an_int64_within_int_is_written_as_the_schema_s_int(
    client: ja.Client, oracle: Oracle, unique_name: Callable[[str], str]
) -> None:
    """payloads.md: ``avro_schema`` is the schema "the values are read as and written
    with": an int64 column under "int" is written as an int."""
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "int"}]}
    with fresh_stream(client, unique_name) as stream:
        table = pa.table({"x": pa.array([5, -(2**31), 2**31 - 1], pa.int64())})
        publish_values(client, stream, table, ja.ValueCodec("avro", avro_schema=schema))
        assert [_fastavro_read(m.data, "int") for m in oracle.messages(stream)] == [
            5,
            -(2**31),
            2**31 - 1,
        ]


def test_avro_a_uint64_beyond_a_long_is_refused_and_one_within_is_written(
    client: ja.Client, oracle: Oracle, unique_name: Callable[[str], str]
) -> None:
    """Avro has no unsigned 64-bit integer: 2^64-1 cannot be carried, and is refused
    before anything is stored; 2^63-1 is a long."""
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "long"}]}
    codec = ja.ValueCodec("avro", avro_schema=schema)
    with fresh_stream(client, unique_name) as stream:
        with pytest.raises(BadInputError, match="18446744073709551615"):
            publish_values(
                client, stream, pa.table({"x": pa.array([1, 2**64 - 1], pa.uint64())}), codec
            )
        assert oracle.messages(stream) == []
        publish_values(client, stream, pa.table({"x": pa.array([2**63 - 1], pa.uint64())}), codec)
        (m,) = oracle.messages(stream)
        assert _fastavro_read(m.data, "long") == 2**63 - 1


class Refused(Exception):
    """The value cannot be written as the schema's type without changing it."""


def _f32(v: float) -> float:
    try:
        return float(struct.unpack("<f", struct.pack("<f", v))[0])
    except OverflowError:
        raise Refused from None


def _exact_double(v: int) -> float:
    if int(float(v)) != v:
        raise Refused
    return float(v)


def _within_int(v: int) -> int:
    if not -(2**31) <= v < 2**31:
        raise Refused
    return v


def _instant(ticks: int, unit: str, to_unit: str, zoned: bool) -> datetime:
    nanos = ticks * PER_SECOND["ns"] // PER_SECOND[unit]
    if nanos % (PER_SECOND["ns"] // PER_SECOND[to_unit]):
        raise Refused
    instant = EPOCH + timedelta(microseconds=nanos // 1000)
    return instant if zoned else instant.replace(tzinfo=None)


def _decimal_at(scale: int) -> Callable[[Decimal], Decimal]:
    def at(v: Decimal) -> Decimal:
        if v != v.quantize(Decimal(1).scaleb(-scale)):
            raise Refused
        return v

    return at


#: A column of one Arrow type under a schema field of another: (Arrow type, Avro type,
#: the value fastavro reads back for a given one, or Refused).
AVRO_CONVERSIONS: dict[str, tuple[pa.DataType, Any, Callable[[Any], Any]]] = {
    "int64-as-int": (pa.int64(), "int", _within_int),
    "uint32-as-int": (pa.uint32(), "int", _within_int),
    "int32-as-long": (pa.int32(), "long", lambda v: v),
    "int64-as-double": (pa.int64(), "double", _exact_double),
    "float32-as-double": (pa.float32(), "double", lambda v: v),
    "float64-as-float": (pa.float64(), "float", _f32),
    "ns-as-micros": (
        pa.timestamp("ns", "UTC"),
        {"type": "long", "logicalType": "timestamp-micros"},
        lambda v: _instant(v, "ns", "us", zoned=True),
    ),
    "ms-as-micros": (
        pa.timestamp("ms", "Europe/Paris"),
        {"type": "long", "logicalType": "timestamp-micros"},
        lambda v: _instant(v, "ms", "us", zoned=True),
    ),
    "us-as-local-millis": (
        pa.timestamp("us"),
        {"type": "long", "logicalType": "local-timestamp-millis"},
        lambda v: _instant(v, "us", "ms", zoned=False),
    ),
    "scale-2-as-4": (
        pa.decimal128(10, 2),
        {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 4},
        _decimal_at(4),
    ),
    "scale-4-as-2": (
        pa.decimal128(10, 4),
        {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        _decimal_at(2),
    ),
}


def _conversion_values(t: pa.DataType) -> st.SearchStrategy[Any]:
    if pa.types.is_integer(t):
        lo, hi = INT_BOUNDS[t]
        edges = [
            v for v in (0, -1, 2**31 - 1, 2**31, -(2**31) - 1, 2**53 + 1, lo, hi) if lo <= v <= hi
        ]
        return st.one_of(st.sampled_from(edges), ints(t))
    if t == pa.float64():
        # Either side of the largest float and of where rounding would make it infinite.
        edges = [3.4028235677973366e38, 3.4028235677973362e38, 3.4028234663852886e38, 1e300, 0.1]
        return st.one_of(st.sampled_from(edges), floats(t))
    if pa.types.is_floating(t):
        return floats(t)
    if pa.types.is_timestamp(t):
        return st.one_of(st.sampled_from([0, 1, -1, 1000, -1000]), timestamp_ticks(t.unit))
    return decimals(t)


@examples(40)
@given(data=st.data(), kind=st.sampled_from(sorted(AVRO_CONVERSIONS)))
def test_avro_a_column_under_another_schema_type_is_converted_exactly_or_refused(
    client: ja.Client,
    oracle: Oracle,
    unique_name: Callable[[str], str],
    data: st.DataObject,
    kind: str,
) -> None:
    """payloads.md: the schema's type is the one written. A column of another Arrow
    type is converted to it when every value survives (a double narrowed to "float"
    rounds, as the type says); otherwise the publish is refused, naming the column and
    the first row that would change, and nothing is stored."""
    arrow_type, avro_type_, want_of = AVRO_CONVERSIONS[kind]
    values = data.draw(
        st.lists(st.one_of(st.none(), _conversion_values(arrow_type)), min_size=1, max_size=8)
    )
    schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "x", "type": ["null", avro_type_]}],
    }
    wanted: list[Any] = []
    refused_row = None
    for i, v in enumerate(values):
        try:
            wanted.append(None if v is None else want_of(v))
        except Refused:
            refused_row = i
            break
    table = pa.table({"x": pa.array(values, arrow_type)})
    codec = ja.ValueCodec("avro", avro_schema=schema)
    with fresh_stream(client, unique_name) as stream:
        if refused_row is not None:
            with pytest.raises(BadInputError, match=rf"column 'x', row {refused_row}:"):
                publish_values(client, stream, table, codec)
            assert oracle.messages(stream) == []
            return
        publish_values(client, stream, table, codec)
        got = [_fastavro_read(m.data, ["null", avro_type_]) for m in oracle.messages(stream)]
        assert same(got, wanted), f"fastavro reads {got!r}, given {values!r}"


def test_avro_text_under_an_enum_is_written_as_its_symbols(
    client: ja.Client, oracle: Oracle, unique_name: Callable[[str], str]
) -> None:
    """A string column under an Avro enum is written as each value's symbol index, in
    the schema's order, whatever values a batch holds; a value that is no symbol is
    refused, naming its row, before anything is stored."""
    kind = {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": kind}]}
    codec = ja.ValueCodec("avro", avro_schema=schema)
    with fresh_stream(client, unique_name) as stream:
        with pytest.raises(BadInputError, match=r"column 'x', row 2: \"D\" is not a symbol"):
            publish_values(client, stream, pa.table({"x": ["C", "A", "D"]}), codec)
        assert oracle.messages(stream) == []
        publish_values(client, stream, pa.table({"x": ["C", "A", "C"]}), codec)
        assert [_fastavro_read(m.data, kind) for m in oracle.messages(stream)] == ["C", "A", "C"]
        back = client.read(stream, codec=codec).read_all().column("value").combine_chunks()
        assert back.field(0).cast(pa.utf8()).to_pylist() == ["C", "A", "C"]


def test_avro_a_null_under_a_field_that_is_not_nullable_is_refused(
    client: ja.Client, oracle: Oracle, unique_name: Callable[[str], str]
) -> None:
    """A null has no value in a field that is not a union with "null": refused naming
    the column and row, not written as 0 or an empty string."""
    schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "n", "type": "long"}, {"name": "s", "type": "string"}],
    }
    codec = ja.ValueCodec("avro", avro_schema=schema)
    with fresh_stream(client, unique_name) as stream:
        for table, column in (
            (pa.table({"n": [1, None], "s": ["a", "b"]}), "n"),
            (pa.table({"n": [1, 2], "s": ["a", None]}), "s"),
        ):
            with pytest.raises(BadInputError, match=rf"column '{column}', row 1: null"):
                publish_values(client, stream, table, codec)
        assert oracle.messages(stream) == []


def test_avro_a_column_the_schema_does_not_name_is_refused(
    client: ja.Client, oracle: Oracle, unique_name: Callable[[str], str]
) -> None:
    """The writer writes the schema's fields: a value column it does not name would be
    left out of every payload, so the publish is refused naming it."""
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "long"}]}
    table = pa.table({"x": [1, 2], "extra": ["kept?", "no"]})
    with fresh_stream(client, unique_name) as stream:
        with pytest.raises(BadInputError, match="column 'extra' is not a field of the Avro schema"):
            publish_values(client, stream, table, ja.ValueCodec("avro", avro_schema=schema))
        assert oracle.messages(stream) == []


# -- Protobuf -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "row",
    [
        {"d": float("nan")},
        {"d": float("inf")},
        {"f": float("-inf")},
        {"maybe_d": float("nan")},
        {"maybe_d": -0.0},
        {"d": -0.0},
        {"f": -0.0},
        {"ds": [float("nan"), float("-inf")]},
        {"ds": [-0.0]},
        {"f": 3.4028232635611926e38},
        {"f": F32_MAX},
        {"f": -F32_MAX},
        {"d": 2.0**-24},
        {"ds": [2.0**-24, 0.1]},
    ],
    ids=[
        "nan",
        "infinity",
        "float-minus-infinity",
        "optional-nan",
        "optional-minus-zero",
        "minus-zero",
        "float-minus-zero",
        "repeated-nan",
        "repeated-minus-zero",
        "float-below-max",
        "float-max",
        "float-min",
        "double-2^-24",
        "repeated-double-2^-24",
    ],
)
def test_protobuf_floats_are_written_exactly(
    client: ja.Client,
    oracle: Oracle,
    unique_name: Callable[[str], str],
    proto: Proto,
    row: dict[str, Any],
) -> None:
    """Rows go through protobuf's JSON mapping on their way to bytes. A NaN or an
    infinity became JSON null and the field was left out (the runtime read 0.0, an
    optional field read as unset), and in a repeated field the row was refused
    ("invalid type: null"); a double could come back one unit in the last place off
    (serde_json's default float parser: 2^-24 was read as 5.9604644775390638e-08).
    (Found here; NaN and ±Inf are now the mapping's strings and floats parse to the
    last bit.) A -0.0 with presence or in a repeated field is written, and the float32
    just below the largest."""
    pb = proto.module
    value_type = pa.struct(list(proto.codec().value_schema()))
    full = {f.name: row.get(f.name) for f in value_type}
    with fresh_stream(client, unique_name) as stream:
        client.publish(proto_table(proto, [full], stream), codec=proto.codec())
        (m,) = oracle.messages(stream)
        got = pb.Row.FromString(m.data)
        want = runtime_message(pb, full)
        assert same(runtime_view(got, value_type), runtime_view(want, value_type)), (
            f"the runtime parses\n{got}\nwhere the row is\n{want}"
        )


NESTED_FLOATS_PROTO = """
syntax = "proto3";
package nested;
import "google/protobuf/wrappers.proto";
message Inner {
  double x = 1;
  float y = 2;
  optional double z = 3;
  google.protobuf.FloatValue fw = 4;
}
message Row {
  double d = 1;
  Inner inner = 2;
  repeated Inner inners = 3;
  map<string, double> m = 4;
  map<string, Inner> mi = 5;
  oneof o { double od = 6; }
  google.protobuf.DoubleValue w = 7;
  map<string, google.protobuf.DoubleValue> mw = 8;
}
"""
_INNER = pa.struct(
    [("x", pa.float64()), ("y", pa.float32()), ("z", pa.float64()), ("fw", pa.float32())]
)
_NESTED_FLOATS = pa.schema(
    [
        ("d", pa.float64()),
        ("inner", _INNER),
        ("inners", pa.list_(_INNER)),
        ("m", pa.map_(pa.utf8(), pa.float64())),
        ("mi", pa.map_(pa.utf8(), _INNER)),
        ("od", pa.float64()),
        ("w", pa.float64()),
        ("mw", pa.map_(pa.utf8(), pa.float64())),
    ]
)


@pytest.fixture(scope="module")
def nested_floats(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ModuleType]:
    return compile_proto(tmp_path_factory.mktemp("nested"), "nested_floats", NESTED_FLOATS_PROTO)


@pytest.mark.parametrize(
    ("row", "column"),
    [
        ({"inner": {"x": -0.0}}, "inner.x"),
        ({"inner": {"y": -0.0}}, "inner.y"),
        ({"inners": [{"x": 1.0}, {"x": -0.0}]}, "inners[].x"),
        ({"m": [("k", -0.0)]}, "m"),
        ({"mi": [("k", {"y": -0.0})]}, "mi[].y"),
        ({"w": -0.0}, "w"),
        ({"inner": {"fw": -0.0}}, "inner.fw"),
        ({"mw": [("k", -0.0)]}, "mw"),
    ],
    ids=[
        "message-double",
        "message-float",
        "repeated-message",
        "map-value",
        "map-message",
        "double-wrapper",
        "float-wrapper-in-a-message",
        "map-of-wrappers",
    ],
)
def test_protobuf_minus_zero_below_the_top_level_is_refused_not_changed(
    client: ja.Client,
    oracle: Oracle,
    unique_name: Callable[[str], str],
    nested_floats: tuple[Path, ModuleType],
    row: dict[str, Any],
    column: str,
) -> None:
    """-0.0 in a float field without presence inside a message, or as a map's value, is
    the default to prost-reflect, which leaves it out: it read back 0.0 without a word
    (found by review). The top level's is written after the message; below it the row
    is refused naming the column and row, before anything is stored. With presence
    (`optional`, a oneof) or at the top level it is written, and a -0.0 under a null
    message is no value."""
    descriptor, pb = nested_floats
    codec = ja.ValueCodec("protobuf", protobuf_descriptor=descriptor, protobuf_message="nested.Row")
    fine = {"d": -0.0, "inner": {"x": 0.0, "z": -0.0}, "od": -0.0}
    table = pa.Table.from_pylist([fine, row], schema=_NESTED_FLOATS)
    with fresh_stream(client, unique_name) as stream:
        with pytest.raises(
            BadInputError, match=rf"row 1 .*column '{re.escape(column)}' holds -0.0"
        ):
            publish_values(client, stream, table, codec)
        assert oracle.messages(stream) == []
        # A null message whose field's slot holds -0.0 has no value there.
        inner = pa.array([{"x": -0.0, "y": -0.0, "z": None, "fw": -0.0}], _INNER)
        nulled = pa.StructArray.from_arrays(
            [inner.field(i) for i in range(4)], fields=list(_INNER), mask=pa.array([True])
        )
        rest = pa.Table.from_pylist([fine], schema=_NESTED_FLOATS)
        publish_values(
            client, stream, rest.set_column(1, "inner", pa.chunked_array([nulled])), codec
        )
        publish_values(client, stream, rest, codec)
        first, second = (pb.Row.FromString(m.data) for m in oracle.messages(stream))
        assert not first.HasField("inner")
        assert math.copysign(1, second.d) == math.copysign(1, second.od) == -1.0
        assert math.copysign(1, second.inner.z) == -1.0 and second.inner.HasField("z")


def test_protobuf_minus_zero_in_fixed_size_lists_and_under_null_map_values(
    client: ja.Client,
    oracle: Oracle,
    unique_name: Callable[[str], str],
    nested_floats: tuple[Path, ModuleType],
) -> None:
    """The -0.0 check follows every list layout to its row (a fixed-size list of
    messages was missed). A null as a map's value was left out with its key (a map
    entry holds a value): refused naming the column and row, for a message value
    (whatever its fields' slots hold: a -0.0 there was blamed) and a double alike."""
    descriptor, _ = nested_floats
    codec = ja.ValueCodec("protobuf", protobuf_descriptor=descriptor, protobuf_message="nested.Row")
    inners = pa.array([{"x": 1.5}, {"x": -0.0}], _INNER)
    fixed = pa.FixedSizeListArray.from_arrays(inners, 1)
    hidden = pa.StructArray.from_arrays(
        [
            pa.array([-0.0]),
            pa.array([0.0], pa.float32()),
            pa.array([None], pa.float64()),
            pa.array([None], pa.float32()),
        ],
        fields=list(_INNER),
        mask=pa.array([True]),
    )
    null_value = pa.MapArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["k"]), hidden)
    with fresh_stream(client, unique_name) as stream:
        with pytest.raises(BadInputError, match=r"row 1 .*column 'inners\[\]\.x' holds -0.0"):
            publish_values(client, stream, pa.table({"inners": fixed}), codec)
        null_double = pa.MapArray.from_arrays(
            pa.array([0, 0, 2], pa.int32()), pa.array(["a", "b"]), pa.array([1.0, None])
        )
        for column, values in (("mi", null_value), ("m", null_double)):
            row = len(values) - 1
            with pytest.raises(
                BadInputError,
                match=rf"row {row} .*column '{column}' holds a map entry whose value is null",
            ):
                publish_values(client, stream, pa.table({column: values}), codec)
        assert oracle.messages(stream) == []


# -- KV and the command line --------------------------------------------------------------


def test_load_and_export_a_file_whose_columns_have_message_names(
    shared_nats_server: NatsServer,
    client: ja.Client,
    oracle: Oracle,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """cli.md: the load writes every column into the row's JSON object, and "export
    --data-as json" gives the table back. A file with a column named ``timestamp``,
    ``seq``, ``subject`` or ``stream`` (common names) loaded, but its export failed:
    "option 'flatten': the value's field 'timestamp' has the name of a message
    column". (Found here; such a column now comes back in place of the message's.)
    The loaded values must come out (under whatever column name)."""
    table = pa.table(
        {
            "timestamp": pa.array([1_700_000_000, 1_700_000_001], pa.int64()),
            "seq": ["first", "second"],
            "subject": ["maths", "art"],
            "stream": [True, False],
            "score": [1.5, -2.0],
        }
    )
    stream = unique_name("NAMES")
    src = tmp_path / "names.parquet"
    pq.write_table(table, src)
    url = shared_nats_server.url
    run = cli(
        capsys, "load", str(src), "--stream", stream, "--subject", f"{stream}.in",
        "--create-stream", "-s", url,
    )  # fmt: skip
    assert run.code == 0, run.err
    try:
        messages = oracle.data_messages(stream)
        assert len(messages) == table.num_rows
        for i, m in enumerate(messages):
            cols = [
                Col(f.name, f.type, True, tuple(table.column(f.name).to_pylist()))
                for f in table.schema
            ]
            check_json_payload(m.data, cols, i, f"row {i}")
        out = tmp_path / "names-back.parquet"
        run = cli(capsys, "export", stream, "-o", str(out), "--data-as", "json", "-s", url)
        assert run.code == 0, run.err
        back = pq.read_table(out)
        exported = [back.column(c).to_pylist() for c in back.column_names]
        for name in table.column_names:
            assert table.column(name).to_pylist() in exported, f"{name!r} not exported"
    finally:
        client.delete_stream(stream)


def test_load_and_export_a_null_struct_with_a_required_field(
    shared_nats_server: NatsServer,
    client: ja.Client,
    oracle: Oracle,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A nullable struct column with a non-nullable field, null in a row: pyarrow
    writes and reads the file, the load stores ``{"a":null}``, and Parquet's writer
    refuses the export (the decoded struct's null row has a null in its required
    field, which Arrow allows and Parquet's writer does not). It died with an uncaught
    ``ArrowInvalid`` (found here); it now exits with code 1 and an error naming the
    messages, and leaves no file."""
    point = pa.struct([pa.field("x", pa.int8(), nullable=False)])
    table = pa.table({"a": pa.array([None, {"x": 1}], point)})
    stream = unique_name("REQUIRED")
    src = tmp_path / "required.parquet"
    pq.write_table(table, src)
    url = shared_nats_server.url
    run = cli(
        capsys, "load", str(src), "--stream", stream, "--subject", f"{stream}.in",
        "--create-stream", "-s", url,
    )  # fmt: skip
    assert run.code == 0, run.err
    try:
        messages = oracle.data_messages(stream)
        assert [m.data for m in messages] == [b'{"a":null}', b'{"a":{"x":1}}']
        out = tmp_path / "required-back.parquet"
        run = cli(
            capsys, "export", stream, "-o", str(out), "--data-as", "json",
            "--columns", "a", "-s", url,
        )  # fmt: skip
        assert run.code == 1, (run.code, run.err)
        # the rows' sequences: they follow the file's first position message
        assert run.err == (
            f"jetstream-arrow export: error: cannot write messages {messages[0].seq}.."
            f"{messages[-1].seq} as parquet: "
            "Column 'x' is declared non-nullable but contains nulls\n"
        ), run.err
        assert "Traceback" not in run.err + run.out
        assert not out.exists()
    finally:
        client.delete_stream(stream)
