"""Hypothesis strategies for ``tests/publish/test_oracle_writers.py``: Arrow tables of the value
types each payload format takes, raw message tables, and KV writes.

A table is drawn as :class:`Col` objects: a name, an Arrow type, a nullability and the
Python values handed to ``pa.array``. Temporal values are given as integer ticks of
their unit (days for ``date32``), which ``pa.array`` takes as they are, so a test can
compute the exact text or number a format must carry for each one without going
through Python's ``datetime`` and its microsecond resolution.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

# -- column names -------------------------------------------------------------------

#: Columns of publish input that steer a message: never a value's.
PUBLISH_COLUMNS = (
    "subject",
    "headers",
    "msg_id",
    "expected_last_subject_seq",
    "expected_last_msg_id",
)
#: The columns a read adds: a value's, except in a table that is a read (it has both
#: ``stream`` and ``seq``).
READ_COLUMNS = ("stream", "seq", "timestamp", "delivered", "consumer_seq", "_corrupt_record")
#: Value names that are message columns of a read (they collide with a read's schema).
COLLIDING = READ_COLUMNS
#: Ordinary names, some of them odd in JSON (quotes, backslashes, non-ASCII, empty).
PLAIN_NAMES = ("a", "id", "b2", "naïve", "名前", "with space", 'quo"te', "back\\slash", "")
#: Names Avro takes (``[A-Za-z_][A-Za-z0-9_]*``), the colliding ones among them.
AVRO_NAMES = ("a", "id", "b2", "x_y", "_u", "Zed", *COLLIDING)

# -- scalar values ------------------------------------------------------------------

INT_TYPES = (
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
)
INT_BOUNDS = {
    pa.int8(): (-(2**7), 2**7 - 1),
    pa.int16(): (-(2**15), 2**15 - 1),
    pa.int32(): (-(2**31), 2**31 - 1),
    pa.int64(): (-(2**63), 2**63 - 1),
    pa.uint8(): (0, 2**8 - 1),
    pa.uint16(): (0, 2**16 - 1),
    pa.uint32(): (0, 2**32 - 1),
    pa.uint64(): (0, 2**64 - 1),
}
#: Integers where formats and parsers go wrong: beyond a double's 2^53, the ends of
#: each width.
INT_EDGES = (
    0,
    1,
    -1,
    2**31 - 1,
    -(2**31),
    2**32 - 1,
    2**53,
    2**53 + 1,
    -(2**53) - 1,
    2**63 - 1,
    -(2**63),
    2**64 - 1,
)


def ints(t: pa.DataType, lo: int | None = None, hi: int | None = None) -> st.SearchStrategy[int]:
    tlo, thi = INT_BOUNDS[t]
    lo = tlo if lo is None else max(lo, tlo)
    hi = thi if hi is None else min(hi, thi)
    edges = sorted({e for e in (*INT_EDGES, lo, hi) if lo <= e <= hi})
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


FLOAT_WIDTH = {pa.float16(): 16, pa.float32(): 32, pa.float64(): 64}
_SPECIAL_FLOATS = (0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1.0, -1.5)
_F64_EDGES = (5e-324, -5e-324, 1.7976931348623157e308, 2.0**53, 2.0**53 + 2, 1e16, 1e-7, 0.1, 1e21)


def floats(t: pa.DataType) -> st.SearchStrategy[float]:
    width = FLOAT_WIDTH[t]
    special = _SPECIAL_FLOATS + (_F64_EDGES if width == 64 else ())
    return st.one_of(
        st.sampled_from(special),
        st.floats(width=width, allow_nan=True, allow_infinity=True),  # type: ignore[arg-type]
    )


def decimals(t: pa.DataType) -> st.SearchStrategy[Decimal]:
    p, s = t.precision, t.scale
    # pyarrow builds no value of more digits (a negative scale's zeros counted) than
    # its width holds: 38 for decimal128, 76 for decimal256.
    top = 10 ** min(p, (38 if t.bit_width == 128 else 76) + min(s, 0)) - 1
    unscaled = st.one_of(st.sampled_from((0, 1, -1, top, -top)), st.integers(-top, top))
    # scaleb rounds to its context's precision: one wide enough for 76 digits.
    return unscaled.map(lambda u: Decimal(u).scaleb(-s, context=_WIDE))


_WIDE = Context(prec=100)


EPOCH_DAY = date(1970, 1, 1).toordinal()
#: date32 days of 0001-01-01 and 9999-12-31, the years Python's dates hold.
DAYS = (date(1, 1, 1).toordinal() - EPOCH_DAY, date(9999, 12, 31).toordinal() - EPOCH_DAY)
PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: Instants a timestamp of each unit is drawn from: 0001-01-02 to 9999-12-30 (a zone's
#: wall time stays within years 1-9999), and every int64 for nanoseconds.
_FIRST = int((datetime(1, 1, 2, tzinfo=timezone.utc) - EPOCH).total_seconds())
_LAST = int((datetime(9999, 12, 30, tzinfo=timezone.utc) - EPOCH).total_seconds())
#: Time zones: UTC spelled three ways, fixed offsets, and named zones with half- and
#: quarter-hour offsets, daylight saving, and (before standard time) a local mean
#: time whose offset has seconds (New York: -4:56:02 until 1883).
TIME_ZONES = (
    None,
    "UTC",
    "+00:00",
    "Etc/UTC",
    "+05:30",
    "-03:00",
    "+14:00",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Europe/Paris",
    "America/New_York",
    "Australia/Lord_Howe",
)
#: Seconds since 1970 worth trying in any zone: the epoch, just before it, New York's
#: change to standard time (1883-11-18 17:00 UTC), a DST change, 2038, year 1 and 9999.
_SECOND_EDGES = (0, -1, -2717650800, -2717650801, 1711846800, 2**31, _FIRST, _LAST)


def timestamp_ticks(unit: str) -> st.SearchStrategy[int]:
    per = PER_SECOND[unit]
    if unit == "ns":
        lo, hi = -(2**63), 2**63 - 1
    else:
        lo, hi = _FIRST * per, _LAST * per + per - 1
    edges = sorted({e * per + f for e in _SECOND_EDGES for f in (0, per - 1, per // 2)} | {lo, hi})
    edges = [e for e in edges if lo <= e <= hi]
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


TIME_UNITS = {pa.time32("s"): "s", pa.time32("ms"): "ms", pa.time64("us"): "us"}
TIME_UNITS[pa.time64("ns")] = "ns"


def time_ticks(t: pa.DataType) -> st.SearchStrategy[int]:
    per = PER_SECOND[TIME_UNITS[t]]
    return st.one_of(
        st.sampled_from((0, per * 86400 - 1, per * 3600)), st.integers(0, per * 86400 - 1)
    )


_EDGE_TEXT = ("", "\x00", "\u2028\u2029", '"\\/', "😀", "\ufeff", "é", "\x7f\x1f", "a\nb\tc")
TEXT = st.one_of(
    st.sampled_from(_EDGE_TEXT),
    st.text(st.characters(codec="utf-8"), max_size=8),
)
_EDGE_BYTES = (b"", b"\x00", b"\xff\xfe", b"\xc3\x28", b'{"a": 1}', b"\xed\xa0\x80")
BYTES = st.one_of(st.sampled_from(_EDGE_BYTES), st.binary(max_size=8))

# -- types ---------------------------------------------------------------------------

#: What each format's tables are drawn from. JSON takes maps with text keys only;
#: Avro has no unsigned 64-bit integer (a uint64 beyond 2^63-1 is refused, see the
#: tests), no decimal with a negative scale, no seconds timestamps (written as
#: milliseconds) and no zoned time of day; Arrow IPC takes every type.
FORMATS = ("json", "avro", "arrow")


def _timestamps(units: tuple[str, ...]) -> st.SearchStrategy[pa.DataType]:
    return st.builds(pa.timestamp, st.sampled_from(units), st.sampled_from(TIME_ZONES))


@st.composite
def decimal_types(draw: st.DrawFn, negative_scale: bool = True) -> pa.DataType:
    if draw(st.booleans()):
        p = draw(st.integers(1, 38))
        s = draw(st.integers(-4 if negative_scale else 0, p))
        return pa.decimal128(p, s)
    p = draw(st.integers(39, 76))
    s = draw(st.integers(-4 if negative_scale else 0, p))
    return pa.decimal256(p, s)


def leaf_types(fmt: str) -> st.SearchStrategy[pa.DataType]:
    common: list[st.SearchStrategy[pa.DataType]] = [
        st.sampled_from(INT_TYPES),
        st.sampled_from((pa.float16(), pa.float32(), pa.float64())),
        st.sampled_from((pa.utf8(), pa.binary(), pa.bool_(), pa.null(), pa.date32())),
    ]
    if fmt == "json":
        return st.one_of(
            *common,
            decimal_types(),
            _timestamps(("s", "ms", "us", "ns")),
            st.sampled_from((pa.large_utf8(), pa.large_binary(), pa.binary(3), pa.date64())),
            st.sampled_from(tuple(TIME_UNITS)),
            st.just(pa.dictionary(pa.int32(), pa.utf8())),
        )
    if fmt == "avro":
        return st.one_of(
            st.sampled_from(INT_TYPES[:7]),  # uint64 below, bounded to 2^63-1
            st.sampled_from((pa.float16(), pa.float32(), pa.float64())),
            st.sampled_from((pa.utf8(), pa.binary(), pa.bool_(), pa.null(), pa.date32())),
            st.builds(
                lambda p, s: pa.decimal128(p, min(s, p)), st.integers(1, 38), st.integers(0, 38)
            ),
            _timestamps(("s", "ms", "us", "ns")),
            st.sampled_from((pa.time32("ms"), pa.time64("us"))),
        )
    return st.one_of(
        *common,
        decimal_types(),
        _timestamps(("s", "ms", "us", "ns")),
        st.sampled_from(
            (
                pa.large_utf8(),
                pa.large_binary(),
                pa.binary(3),
                pa.date64(),
                pa.duration("ms"),
                pa.duration("ns"),
                pa.dictionary(pa.int8(), pa.utf8()),
                *TIME_UNITS,
            )
        ),
    )


def _fields(
    draw: st.DrawFn, types: st.SearchStrategy[pa.DataType], names: tuple[str, ...], most: int
) -> list[pa.Field]:
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=most, unique=True))
    out = []
    for name in chosen:
        t = draw(types)
        nullable = pa.types.is_null(t) or draw(st.booleans())
        out.append(pa.field(name, t, nullable))
    return out


_INNER_NAMES = ("x", "y", "timestamp", "seq", "é", "q r")
_AVRO_INNER_NAMES = ("x", "y", "timestamp", "seq", "_z")


def value_types(fmt: str, depth: int = 2) -> st.SearchStrategy[pa.DataType]:
    leaves = leaf_types(fmt)
    if depth == 0:
        return leaves
    inner = value_types(fmt, depth - 1)
    inner_names = _AVRO_INNER_NAMES if fmt == "avro" else _INNER_NAMES

    @st.composite
    def nested(draw: st.DrawFn) -> pa.DataType:
        kind = draw(st.sampled_from(("list", "large_list", "struct", "map")))
        t = draw(inner)
        nullable = pa.types.is_null(t) or draw(st.booleans())
        if kind == "list" or (kind == "large_list" and fmt == "avro"):
            return pa.list_(pa.field("item", t, nullable))
        if kind == "large_list":
            return pa.large_list(pa.field("item", t, nullable))
        if kind == "struct":
            return pa.struct(_fields(draw, inner, inner_names, 3))
        key = pa.utf8() if fmt != "arrow" or draw(st.booleans()) else pa.int32()
        return pa.map_(key, pa.field("value", t, nullable))

    return st.one_of(leaves, leaves, nested())


# -- values --------------------------------------------------------------------------


def values_of(
    t: pa.DataType, nullable: bool, *, unique_keys: bool = False
) -> st.SearchStrategy[Any]:
    """Python values of type ``t`` for ``pa.array`` (temporal ones as ticks)."""
    base = _non_null(t, unique_keys)
    if nullable:
        return st.one_of(st.none(), base)
    return base


def _non_null(t: pa.DataType, unique_keys: bool) -> st.SearchStrategy[Any]:
    if pa.types.is_null(t):
        return st.none()
    if pa.types.is_integer(t):
        return ints(t)
    if pa.types.is_floating(t):
        return floats(t)
    if pa.types.is_decimal(t):
        return decimals(t)
    if pa.types.is_boolean(t):
        return st.booleans()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return TEXT
    if pa.types.is_fixed_size_binary(t):
        return st.binary(min_size=t.byte_width, max_size=t.byte_width)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return BYTES
    if pa.types.is_date32(t):
        return st.integers(*DAYS)
    if pa.types.is_date64(t):
        return st.integers(*DAYS).map(lambda d: d * 86_400_000)
    if pa.types.is_timestamp(t):
        return timestamp_ticks(t.unit)
    if pa.types.is_time(t):
        return time_ticks(t)
    if pa.types.is_duration(t):
        return st.integers(-(2**63), 2**63 - 1)
    if pa.types.is_dictionary(t):
        return TEXT
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = t.value_field
        return st.lists(values_of(item.type, item.nullable, unique_keys=unique_keys), max_size=3)
    if pa.types.is_struct(t):
        return st.fixed_dictionaries(
            {f.name: values_of(f.type, f.nullable, unique_keys=unique_keys) for f in t}
        )
    if pa.types.is_map(t):
        keys = values_of(t.key_type, False)
        item = t.item_field
        pairs = st.lists(
            st.tuples(keys, values_of(item.type, item.nullable, unique_keys=unique_keys)),
            max_size=3,
            unique_by=(lambda kv: kv[0]) if unique_keys else None,
        )
        return pairs
    raise AssertionError(f"no values for {t}")


@dataclass(frozen=True)
class Col:
    """One column: its field and the Python values given to ``pa.array``."""

    name: str
    type: pa.DataType
    nullable: bool
    values: tuple[Any, ...]

    def field(self) -> pa.Field:
        return pa.field(self.name, self.type, self.nullable)

    def array(self) -> pa.Array:
        return pa.array(list(self.values), self.type)


@st.composite
def columns(
    draw: st.DrawFn,
    fmt: str,
    rows: int,
    names: tuple[str, ...],
    most: int = 4,
    unique_keys: bool = False,
) -> list[Col]:
    """Between one and ``most`` value columns of ``rows`` rows, names from ``names``."""
    fields = _fields(draw, value_types(fmt), names, most)
    out = []
    for f in fields:
        vals = draw(
            st.lists(
                values_of(f.type, f.nullable, unique_keys=unique_keys),
                min_size=rows,
                max_size=rows,
            )
        )
        out.append(Col(f.name, f.type, f.nullable, tuple(vals)))
    return out


def table_of(cols: list[Col]) -> pa.Table:
    return pa.Table.from_arrays(
        [c.array() for c in cols], schema=pa.schema([c.field() for c in cols])
    )


# -- raw messages and KV writes ---------------------------------------------------------

#: Subject tokens (each row's subject is ``<stream>.<token>``): dots, non-ASCII.
SUBJECT_TOKENS = ("a", "b.c", "ü", "x-y_z", "1.2.3", "日本")
#: Header names that steer nothing (not ``Nats-*``), in mixed case (a header name is
#: printable ASCII other than ':').
HEADER_NAMES = ("X-Trace", "x-multi", "Content-Type", "a", "Rank_2", "odd!#$%&'*+.^`|~")
#: Header values: no line break, no whitespace at either end (NATS trims it).
HEADER_VALUES = st.one_of(
    st.sampled_from(("", "v", "a b", "é😀", "x:y", "1,2", '{"j":1}')),
    st.text(
        st.characters(codec="utf-8", exclude_categories=["Cc", "Zl", "Zp", "Zs"]),
        max_size=6,
    ),
)


@dataclass(frozen=True)
class RawRow:
    subject: str  # the token after the stream's name
    data: bytes | str | None
    headers: tuple[tuple[str, tuple[str, ...]], ...] | None
    msg_id: str | None


#: A header that steers how the server stores a message: published as given, but
#: dropped from a copy of a read (it would steer the stream the copy goes to). This
#: one would refuse the message (no stream here is at sequence 999999).
STEERING_HEADER = ("Nats-Expected-Last-Sequence", ("999999",))


@st.composite
def raw_rows(draw: st.DrawFn, rows: int, text_data: bool, copy: bool = False) -> list[RawRow]:
    """Rows of a raw message table: data all text or all bytes (null: an empty payload),
    headers with one to three values per name, now and then a ``Nats-Msg-Id`` header
    (the row's msg id) and, in a copy of a read, a header that steers the server."""
    out = []
    for i in range(rows):
        headers = draw(
            st.none()
            | st.lists(
                st.tuples(
                    st.sampled_from(HEADER_NAMES),
                    st.lists(HEADER_VALUES, min_size=1, max_size=3).map(tuple),
                ),
                max_size=3,
                unique_by=lambda kv: kv[0],
            ).map(tuple)
        )
        extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
        if draw(st.booleans()):
            extra += (("Nats-Msg-Id", (f"h-{i}",)),)
        if copy and draw(st.booleans()):
            extra += (STEERING_HEADER,)
        if extra:
            headers = (headers or ()) + extra
        out.append(
            RawRow(
                subject=draw(st.sampled_from(SUBJECT_TOKENS)),
                data=draw(st.none() | (TEXT if text_data else BYTES)),
                headers=headers,
                msg_id=None,
            )
        )
    return out


KV_KEYS = ("a", "b.c", "d/e", "f_g=h", "K-1", "x.y.z", "0")


@dataclass(frozen=True)
class KvRow:
    key: str
    value: bytes | str | None
    operation: str | None  # as given: any case; None is a put
    msg_id: str | None
    #: ``expected_revision``: None (no check), ``"right"`` (the key's revision when the
    #: row is written) or ``"wrong"`` (one past it).
    check: str | None


@st.composite
def kv_rows(draw: st.DrawFn, text_values: bool, checks: bool) -> list[KvRow]:
    n = draw(st.integers(1, 10))
    out = []
    for i in range(n):
        out.append(
            KvRow(
                key=draw(st.sampled_from(KV_KEYS)),
                value=draw(st.none() | (TEXT if text_values else BYTES)),
                operation=draw(
                    st.sampled_from((None, "PUT", "put", "DEL", "Del", "PURGE", "purge"))
                ),
                # Ids repeat now and then: a later row is a duplicate of an earlier one.
                msg_id=draw(st.none() | st.sampled_from((f"id-{i}", "id-0", "id-1"))),
                check=draw(st.sampled_from((None, "right", "wrong"))) if checks else None,
            )
        )
    # A failing check's id is not given again in a later row:
    # open defect: a row failing its expected revision is reported a duplicate of a later row with its msg id
    for i, row in enumerate(out):
        if row.check == "wrong" and row.msg_id is not None:
            out[i + 1 :] = [
                KvRow(r.key, r.value, r.operation, None, r.check) if r.msg_id == row.msg_id else r
                for r in out[i + 1 :]
            ]
    return out
