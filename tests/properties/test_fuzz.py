"""Property-based tests (hypothesis): generated publish input against a real
nats-server, and generated option dicts against the Spark option parser.

Publishing: whatever the schema, the column types, the values and the batching, a
publish either stores exactly the rows given (read back: subject, data, headers and
sequence order) or raises ``BadInputError`` naming the column and the row (or the
option) at fault, with ``.result`` saying which earlier rows were stored, and the
stream holding exactly those. Any other exception, a Rust panic included, breaks the
property.

Spark options: option dicts with known names in any spelling, unknown names,
wrong-typed and out-of-range values either parse to the documented values or raise
``BadInputError`` naming the option.

The examples per test are bounded so the file runs in well under a minute on two
cores; ``JETSTREAM_ARROW_FUZZ_SCALE=10`` runs ten times as many.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import jetstream_arrow as ja
from engine_helpers import as_dicts, read_all
from jetstream_arrow.exceptions import BadInputError, NotFoundError
from jetstream_arrow.option_tables import native_option
from jetstream_arrow.spark.option_specs import CONNECT_SPECS, READ_SPECS, WRITE_SPECS, OptionSpec
from jetstream_arrow.spark.options import parse_read_options, parse_write_options
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(300)

_SCALE = float(os.environ.get("JETSTREAM_ARROW_FUZZ_SCALE", "1"))

settings.register_profile(
    "jetstream-arrow-fuzz",
    deadline=None,
    # No example database: nothing is written into the source tree, and a failure
    # prints its example (and a blob for @reproduce_failure) instead.
    database=None,
    print_blob=True,
    # One server and one client serve every example of a test; each example makes
    # its own stream, so function-scoped fixtures are what is wanted here.
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


def fuzz(examples: int) -> settings:
    """The file's profile with ``examples`` examples (times JETSTREAM_ARROW_FUZZ_SCALE)."""
    return settings(
        settings.get_profile("jetstream-arrow-fuzz"),
        max_examples=max(1, round(examples * _SCALE)),
    )


# == publishing ========================================================================

STREAM = "FUZZ"
PREFIX = "fz"
# The server of ``small_payload_nats_server`` (checked against its INFO).
MAX_PAYLOAD = 8192
# The server refuses a PUB whose control line (subject, reply subject, sizes) is over
# 4096 bytes and closes the connection. A subject up to SAFE_SUBJECT bytes leaves room
# for any reply subject and must be published; one over 4096 bytes can never be.
SAFE_SUBJECT = 3900
CONTROL_LINE = 4096

# What Rust's ``char::is_whitespace`` (Unicode White_Space) matches: the reading
# client splits control lines on these and trims them off header values.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)
# Characters that are not whitespace but odd in a subject, a header or an id.
ODD = "*>:$é€😀\x00\x01\x1b\x1f\x7f\u200b\ufeff"

HEADERS_LISTS = pa.map_(pa.utf8(), pa.list_(pa.utf8()))
HEADERS_LARGE_LISTS = pa.map_(pa.large_utf8(), pa.large_list(pa.large_utf8()))
HEADERS_SINGLE = pa.map_(pa.utf8(), pa.utf8())
TEXT_TYPES = (pa.utf8(), pa.large_utf8(), pa.string_view())
BINARY_TYPES = (pa.binary(), pa.large_binary(), pa.binary_view())


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)


def _is_headers_lists(t: pa.DataType) -> bool:
    return pa.types.is_map(t) and (
        pa.types.is_list(t.item_type) or pa.types.is_large_list(t.item_type)
    )


def _is_headers(t: pa.DataType) -> bool:
    return (
        pa.types.is_map(t)
        and _is_text(t.key_type)
        and (_is_text(t.item_type) or _is_headers_lists(t))
    )


HeaderValue = str | None | list[str | None]


@dataclass
class Row:
    subject: str | None
    data: bytes | str | None
    headers: list[tuple[str, HeaderValue]] | None
    msg_id: str | None


@dataclass
class PublishCase:
    """One publish call: its rows, how they are batched and typed, and its options."""

    rows: list[Row]
    sizes: list[int]  # rows per batch in input order; 0 is an empty batch
    form: str  # "table", "batch" or "reader"
    subject_type: pa.DataType | None  # None: no subject column
    data_type: pa.DataType | None  # None: no data column
    headers_type: pa.DataType | None
    msg_id_type: pa.DataType | None
    extras: list[tuple[str, pa.DataType]] = field(default_factory=list)
    option_subject: str | None = None
    msg_id_prefix: str | None = None
    msg_id_start: int = 0

    def schema(self) -> pa.Schema:
        columns = [
            ("subject", self.subject_type),
            ("data", self.data_type),
            ("headers", self.headers_type),
            ("msg_id", self.msg_id_type),
        ]
        present = [pa.field(name, t) for name, t in columns if t is not None]
        return pa.schema(present + [pa.field(name, t) for name, t in self.extras])

    def table(self) -> pa.Table:
        n = len(self.rows)
        arrays: list[pa.Array] = []
        for f in self.schema():
            arrays.append(self._column(f.name, f.type, n))
        return pa.Table.from_arrays(arrays, schema=self.schema())

    def _column(self, name: str, t: pa.DataType, n: int) -> pa.Array:
        rows = self.rows
        if name == "subject" and _is_text(t):
            return pa.array([r.subject for r in rows], pa.utf8()).cast(t)
        if name == "subject" and pa.types.is_dictionary(t):
            return pa.array([r.subject for r in rows], pa.utf8()).dictionary_encode()
        if name == "data" and (_is_text(t) or _is_binary(t)):
            return pa.array([r.data for r in rows], pa.utf8() if _is_text(t) else pa.binary()).cast(
                t
            )
        if name == "headers" and _is_headers(t):
            return pa.array([r.headers for r in rows], t)
        if name == "msg_id" and _is_text(t):
            return pa.array([r.msg_id for r in rows], pa.utf8()).cast(t)
        if pa.types.is_integer(t):
            return pa.array(range(n), pa.int64()).cast(t)
        return pa.nulls(n, t)

    def batches(self) -> list[pa.RecordBatch]:
        """The table cut into ``sizes``; later batches are slices with an offset."""
        whole = self.table().combine_chunks()
        merged = (
            whole.to_batches()[0]
            if whole.num_rows
            else pa.RecordBatch.from_pylist([], schema=whole.schema)
        )
        out, start = [], 0
        for size in self.sizes:
            out.append(merged.slice(start, size))
            start += size
        return out

    def input(self) -> Any:
        batches = self.batches()
        if self.form == "batch":
            assert len(batches) == 1
            return batches[0]
        if self.form == "reader":
            return pa.RecordBatchReader.from_batches(self.schema(), iter(batches))
        return pa.Table.from_batches(batches, schema=self.schema())


# -- strategies -------------------------------------------------------------------------

T = TypeVar("T")


def weighted(*choices: tuple[int, st.SearchStrategy[T]]) -> st.SearchStrategy[T]:
    """One of ``choices``, each about as often as its weight; shrinks towards the first.

    ``one_of`` picks its branches about equally often (hypothesis draws each distinct
    branch once, whatever the copies), and an integer draw favours its bounds: the
    first choice takes both ends of the range, so the others come as rarely as weighted.
    """
    (weight, first), rest = choices[0], choices[1:]
    slots: list[st.SearchStrategy[T]] = [first] * ((weight + 1) // 2)
    slots += [strategy for w, strategy in rest for _ in range(w)]
    slots += [first] * (weight // 2)
    return st.integers(0, len(slots) - 1).flatmap(lambda i: slots[i])


_plain_token = st.text(alphabet="abcxyz0189-_", min_size=1, max_size=6)
# Not white space, not '.', and not a lone wildcard: odd but publishable.
_odd_token = st.text(alphabet=st.sampled_from(list("ab" + ODD)), min_size=1, max_size=4).filter(
    lambda t: t not in ("*", ">")
)
_bad_token = weighted(
    (2, st.sampled_from(["*", ">", ""])),
    (1, st.tuples(_plain_token, st.sampled_from(list(WHITESPACE)), _plain_token).map("".join)),
)
valid_subjects = st.lists(weighted((4, _plain_token), (1, _odd_token)), min_size=1, max_size=3).map(
    lambda ts: f"{PREFIX}." + ".".join(ts)
)
# Lengths on both sides of what a control line allows, and over max_payload.
_long_subjects = weighted(
    (3, st.integers(SAFE_SUBJECT - 10, CONTROL_LINE + 20)),
    (1, st.sampled_from([1_000, 3_000, 4_200, 5_000, 8_300])),
).map(lambda n: f"{PREFIX}." + "s" * (n - len(PREFIX) - 1))
bad_subjects: st.SearchStrategy[str | None] = weighted(
    (
        3,
        st.lists(weighted((3, _plain_token), (1, _bad_token)), min_size=1, max_size=3).map(
            lambda ts: f"{PREFIX}." + ".".join(ts)
        ),
    ),
    (1, st.none()),
    (1, st.sampled_from(["", " ", f"{PREFIX}.", f".{PREFIX}.a", f"{PREFIX}.a\tb"])),
)
subjects: st.SearchStrategy[str | None] = weighted(
    (60, valid_subjects), (2, _long_subjects), (2, bad_subjects)
)
_valid_key = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=":"),
    min_size=1,
    max_size=8,
)
_odd_key = st.text(alphabet=st.sampled_from(list("Kk-" + ODD + WHITESPACE[:6])), max_size=4)
# Keys of the server's own headers (Nats-Msg-Id, Nats-Expected-*, ...) change what it
# stores; they are not fuzzed.
header_keys = weighted((15, _valid_key), (1, _odd_key)).filter(
    lambda k: not k.lower().startswith("nats")
)
_good_value_chars = weighted(
    (3, st.characters(min_codepoint=0x20, max_codepoint=0x7E)),
    (1, st.sampled_from(list(ODD + WHITESPACE.replace("\r", "").replace("\n", "")))),
)
_good_value = st.text(alphabet=_good_value_chars, max_size=8)
_bad_value = st.tuples(_good_value, st.sampled_from(["\r", "\n", "\r\n"]), _good_value).map("".join)
header_values = weighted((30, _good_value), (1, _bad_value))
_id_chars = weighted(
    (3, st.characters(min_codepoint=0x21, max_codepoint=0x7E)),
    (1, st.sampled_from(list(ODD + " \t\xa0"))),
)
# Ids that start and end with a non-space: the server drops an id's leading spaces
# when it compares ids, and a read trims both ends of every header value.
_odd_id = st.text(alphabet=_id_chars, min_size=1, max_size=8).filter(
    lambda s: s[0] not in WHITESPACE and s[-1] not in WHITESPACE
)
msg_ids = weighted(
    (10, st.none()),
    (10, st.sampled_from(["a", "b", "c"])),  # repeated ids: the server deduplicates them
    (10, _odd_id),
    (2, st.just("")),  # no id
    (1, st.tuples(_odd_id, st.sampled_from(["\r", "\n"])).map("".join)),
)
_extra_names = st.sampled_from(
    ["Subject", "DATA", "headers_", "msg-id", "x", "seq", "stream", "timestamp", "é"]
)
_extra_types = st.sampled_from(
    [
        pa.int64(),
        pa.float64(),
        pa.bool_(),
        pa.utf8(),
        pa.list_(pa.int32()),
        pa.struct([("a", pa.int8())]),
        pa.timestamp("us", tz="UTC"),
    ]
)
_text_types = st.sampled_from(TEXT_TYPES)
_bad_headers_types = st.sampled_from(
    [pa.utf8(), pa.map_(pa.utf8(), pa.int64()), pa.map_(pa.int32(), pa.utf8())]
)


@st.composite
def header_maps(draw: st.DrawFn, lists: bool) -> list[tuple[str, HeaderValue]] | None:
    if draw(st.integers(0, 5)) == 0:
        return None
    entries: list[tuple[str, HeaderValue]] = []
    for key in draw(st.lists(header_keys, max_size=3)):
        if lists:
            items = draw(
                weighted(
                    (8, st.lists(weighted((5, header_values), (1, st.none())), max_size=3)),
                    (1, st.none()),
                )
            )
            entries.append((key, items))
        else:
            entries.append((key, draw(weighted((5, header_values), (1, st.none())))))
    return entries


@st.composite
def publish_cases(draw: st.DrawFn) -> PublishCase:
    # Schema: mostly well-typed, sometimes a column missing or of the wrong type.
    subject_type = draw(
        weighted(
            (18, _text_types),
            (1, st.just(pa.dictionary(pa.int32(), pa.utf8()))),
            (1, st.sampled_from([None, pa.int64()])),
        )
    )
    option_subject = draw(
        weighted(
            (17, st.none()),
            (2, valid_subjects),
            (1, weighted((1, _long_subjects), (1, bad_subjects))),
        )
    )
    data_type = draw(
        weighted(
            (10, st.sampled_from(BINARY_TYPES)),
            (8, _text_types),
            (1, st.sampled_from([None, pa.int64()])),
        )
    )
    headers_type = draw(
        weighted(
            (7, st.none()),
            (6, st.just(HEADERS_LISTS)),
            (3, st.just(HEADERS_SINGLE)),
            (2, st.just(HEADERS_LARGE_LISTS)),
            (1, _bad_headers_types),
        )
    )
    msg_id_type = draw(
        weighted(
            (8, st.none()),
            (6, st.just(pa.utf8())),
            (3, st.just(pa.large_utf8())),
            (1, st.just(pa.int64())),
        )
    )
    extras = draw(
        st.lists(st.tuples(_extra_names, _extra_types), max_size=2, unique_by=lambda e: e[0])
    )
    msg_id_prefix = draw(
        weighted((14, st.none()), (5, st.sampled_from(["p-", "", "é "])), (1, st.just("a\nb")))
    )
    msg_id_start = draw(st.sampled_from([0, 7, 2**40]))

    text_data = data_type is not None and _is_text(data_type)
    lists = headers_type is not None and _is_headers_lists(headers_type)
    n = draw(st.integers(0, 10))
    rows: list[Row] = []
    fills: list[tuple[int, str, int]] = []
    for i in range(n):
        data: bytes | str | None = draw(
            weighted(
                (8, st.text(max_size=6) if text_data else st.binary(max_size=12)),
                (1, st.none()),
            )
        )
        # Some payloads are sized around max_payload once subject and headers are known.
        fill = draw(weighted((14, st.none()), (1, st.sampled_from(["total", "payload"]))))
        if fill:
            fills.append((i, fill, draw(st.integers(-2, 2))))
        rows.append(
            Row(
                subject=draw(subjects),
                data=data,
                headers=draw(header_maps(lists)),
                msg_id=draw(msg_ids),
            )
        )
    case = PublishCase(
        rows=rows,
        sizes=[],
        form=draw(st.sampled_from(["table", "batch", "reader"])),
        subject_type=subject_type,
        data_type=data_type,
        headers_type=headers_type,
        msg_id_type=msg_id_type,
        extras=extras,
        option_subject=option_subject,
        msg_id_prefix=msg_id_prefix,
        msg_id_start=msg_id_start,
    )
    for i, mode, delta in fills:
        row = rows[i]
        overhead = _header_block(case, row, i)
        if mode == "total":
            overhead += len((_subject_of(case, row) or "").encode())
        size = max(0, MAX_PAYLOAD + delta - overhead)
        row.data = "x" * size if text_data else bytes(j % 251 for j in range(size))
    # Batches: one for a RecordBatch; otherwise cut anywhere, empty batches included.
    if case.form == "batch":
        case.sizes = [n]
    else:
        cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
        bounds = [0, *cuts, n]
        case.sizes = [b - a for a, b in itertools.pairwise(bounds)]
        if n == 0 and draw(st.booleans()):
            case.sizes = []  # no batch at all
    return case


# -- the model ----------------------------------------------------------------------------


def _subject_of(case: PublishCase, row: Row) -> str | None:
    return case.option_subject if case.option_subject is not None else row.subject


def _msg_id_of(case: PublishCase, row: Row, index: int) -> str | None:
    if case.msg_id_type is not None and row.msg_id:
        return row.msg_id
    if case.msg_id_prefix is not None:
        return f"{case.msg_id_prefix}{case.msg_id_start + index}"
    return None


def _header_pairs(case: PublishCase, row: Row) -> list[tuple[str, str]]:
    """The (name, value) lines the row's headers column makes, in order."""
    if case.headers_type is None or row.headers is None:
        return []
    pairs = []
    for key, value in row.headers:
        values = value if isinstance(value, list) else [value]
        pairs += [(key, v) for v in values if v is not None]
    return pairs


def _header_block(case: PublishCase, row: Row, index: int) -> int:
    """Bytes of the NATS header block (``NATS/1.0`` line, ``k: v`` lines, blank line)."""
    pairs = _header_pairs(case, row)
    msg_id = _msg_id_of(case, row, index)
    if msg_id is not None:
        pairs.append(("Nats-Msg-Id", msg_id))
    if not pairs:
        return 0
    return 12 + sum(len(k.encode()) + 2 + len(v.encode()) + 2 for k, v in pairs)


def _subject_faults(subject: str | None) -> tuple[bool, bool]:
    """(definitely refused, maybe refused) for a subject to publish to."""
    if subject is None or subject == "":
        return True, False
    if any(c in WHITESPACE for c in subject):
        return True, False
    if any(t in ("", "*", ">") for t in subject.split(".")):
        return True, False
    size = len(subject.encode())
    return size > CONTROL_LINE, size > SAFE_SUBJECT


def _valid_header_name(key: str) -> bool:
    return bool(key) and all(0x21 <= ord(c) <= 0x7E and c != ":" for c in key)


def _line_break(value: str) -> bool:
    return "\r" in value or "\n" in value


@dataclass
class Fault:
    """A reason for BadInputError: what its message must name, and at which row."""

    names: tuple[str, ...]  # the message names one of these
    row: int | None = None  # and says "row <row>" (and no other row)


def _schema_fault(case: PublishCase) -> tuple[Fault | None, Fault | None]:
    """(a fault of the columns or options that must stop the publish, one that may)."""
    names: list[str] = []
    may = None
    if case.option_subject is not None:
        refused, maybe = _subject_faults(case.option_subject)
        if refused:
            names.append("option 'subject'")
        elif maybe:
            may = Fault(("option 'subject'",))
    elif case.subject_type is None or pa.types.is_integer(case.subject_type):
        names.append("'subject'")
    if case.data_type is None or pa.types.is_integer(case.data_type):
        names.append("'data'")
    if case.headers_type is not None and not _is_headers(case.headers_type):
        names.append("'headers")
    if case.msg_id_type is not None and not _is_text(case.msg_id_type):
        names.append("'msg_id'")
    if names and may:
        return Fault((*names, *may.names)), None
    return (Fault(tuple(names)) if names else None), may


def _row_faults(case: PublishCase, row: Row, index: int) -> tuple[Fault | None, Fault | None]:
    """(a fault that must stop the publish at this row, one that may)."""
    must: list[str] = []
    may: list[str] = []
    if case.option_subject is None:
        refused, maybe = _subject_faults(row.subject)
        if refused:
            must.append("'subject'")
        elif maybe:
            may.append("'subject'")
    if case.headers_type is not None and row.headers is not None:
        for key, value in row.headers:
            values = value if isinstance(value, list) else [value]
            if not _valid_header_name(key) or any(v is not None and _line_break(v) for v in values):
                must.append("'headers'")
                break
    if case.msg_id_type is not None and row.msg_id and _line_break(row.msg_id):
        must.append("'msg_id'")
    data = row.data.encode() if isinstance(row.data, str) else row.data or b""
    payload = len(data) + _header_block(case, row, index)
    subject = _subject_of(case, row) or ""
    if payload > MAX_PAYLOAD:
        must.append("max_payload")
    elif payload + len(subject.encode()) > MAX_PAYLOAD:
        # The engine may count the subject too (its documented size), or not.
        may.append("max_payload")
    if must:
        return Fault(tuple(must + may), index), None
    return None, (Fault(tuple(may), index) if may else None)


def _trim(value: str) -> str:
    return value.strip(WHITESPACE)


def _expected_headers(case: PublishCase, row: Row, index: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in _header_pairs(case, row):
        out.setdefault(key, []).append(_trim(value))
    msg_id = _msg_id_of(case, row, index)
    if msg_id is not None:
        out["Nats-Msg-Id"] = [_trim(msg_id)]
    return out


@dataclass
class Outcome:
    acks: list[tuple[int | None, bool]]  # (seq, duplicate) of each row before the fault
    messages: list[tuple[str, bytes, dict[str, list[str]]]]  # the stream, in seq order
    fault: Fault | None


def expected_outcome(case: PublishCase, error: str | None) -> Outcome:
    """What the stream must hold. ``error`` (the message of the BadInputError the
    publish raised, if any) settles the cases that may go either way."""
    acks: list[tuple[int | None, bool]] = []
    messages: list[tuple[str, bytes, dict[str, list[str]]]] = []
    if case.msg_id_prefix is not None and _line_break(case.msg_id_prefix):
        return Outcome(acks, messages, Fault(("'msg_id_prefix'",)))
    fault, may_fault = _schema_fault(case)
    if fault:
        return Outcome(acks, messages, fault)
    rows_named = _rows_named(error or "")
    if may_fault and error is not None and not rows_named:
        return Outcome(acks, messages, may_fault)
    error_row = min(rows_named) if len(rows_named) == 1 else None
    seen: dict[str, int] = {}
    for index, row in enumerate(case.rows):
        must, may = _row_faults(case, row, index)
        if must:
            return Outcome(acks, messages, must)
        if may and error_row == index:
            return Outcome(acks, messages, may)
        msg_id = _msg_id_of(case, row, index)
        if msg_id is not None and msg_id in seen:
            acks.append((seen[msg_id], True))
            continue
        seq = len(messages) + 1
        if msg_id is not None:
            seen[msg_id] = seq
        data = row.data.encode() if isinstance(row.data, str) else row.data or b""
        subject = _subject_of(case, row)
        assert subject is not None
        messages.append((subject, data, _expected_headers(case, row, index)))
        acks.append((seq, False))
    return Outcome(acks, messages, None)


# -- the property -------------------------------------------------------------------------


def _rows_named(message: str) -> set[int]:
    return {int(m) for m in re.findall(r"\brow (\d+)", message)}


def _outcome(call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """What ``call`` returned, or what it raised: a Rust panic arrives as a
    ``pyo3_runtime.PanicException``, a BaseException, and is an outcome like any other."""
    try:
        return call(), None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:
        return None, err


def _describe(error: BaseException) -> str:
    return f"raised {type(error).__module__}.{type(error).__name__}: {error}"


def _publish(client: ja.Client, case: PublishCase) -> tuple[Any, BaseException | None]:
    options: dict[str, Any] = {"ack_timeout": 2.0, "msg_id_start": case.msg_id_start}
    if case.msg_id_prefix is not None:
        options["msg_id_prefix"] = case.msg_id_prefix
    return _outcome(lambda: client.publish(case.input(), subject=case.option_subject, **options))


def check_publish(client: ja.Client, case: PublishCase) -> None:
    result, error = _publish(client, case)
    assert error is None or isinstance(error, BadInputError), _describe(error)
    message = str(error) if error is not None else ""
    rows_named = _rows_named(message)
    want = expected_outcome(case, message if error is not None else None)

    event("stored" if want.fault is None else f"refused: {' or '.join(want.fault.names)}")
    if want.fault is None:
        assert error is None, f"unexpected BadInputError: {message}"
    else:
        assert error is not None, f"no BadInputError; expected one naming {want.fault}"
        assert any(name in message for name in want.fault.names), (want.fault, message)
        if want.fault.row is not None:
            assert rows_named == {want.fault.row}, (want.fault, message)
        result = error.result  # type: ignore[attr-defined]
        if not want.acks:
            assert result is None or result.stored + result.duplicates == 0, result
    if result is not None:
        seqs = result.acks.column("seq").to_pylist()
        dups = result.acks.column("duplicate").to_pylist()
        got = list(zip(seqs, dups, strict=True))[: len(want.acks)]
        assert got == want.acks, (got, want.acks)
        assert all(s is None for s in seqs[len(want.acks) :]), seqs
        assert result.failed == 0, result.failed_rows().to_pylist()
        if error is None:
            assert result.rows == len(case.rows)
        assert result.stored == len(want.messages)
    else:
        assert not want.acks

    back = read_all(client, STREAM, include_headers=True)
    assert back.column("seq").to_pylist() == list(range(1, len(want.messages) + 1))
    assert back.column("subject").to_pylist() == [m[0] for m in want.messages]
    assert back.column("data").to_pylist() == [m[1] for m in want.messages]
    assert as_dicts(back.column("headers").to_pylist()) == [m[2] for m in want.messages]


@pytest.fixture
def fuzz_client(small_payload_nats_server: NatsServer) -> Iterator[ja.Client]:
    with ja.connect(small_payload_nats_server.url) as client:
        assert client.server_info()["max_payload"] == MAX_PAYLOAD
        yield client


def _fresh_stream(client: ja.Client) -> None:
    try:
        client.delete_stream(STREAM)
    except NotFoundError:
        pass
    client.create_stream(STREAM, [f"{PREFIX}.>"], storage="memory")


def _case(*rows: Row, **schema: Any) -> PublishCase:
    """A table of ``rows`` (subject utf8, data binary unless ``schema`` says otherwise)."""
    fields: dict[str, Any] = {
        "sizes": [len(rows)],
        "form": "table",
        "subject_type": pa.utf8(),
        "data_type": pa.binary(),
        "headers_type": None,
        "msg_id_type": None,
    }
    fields.update(schema)
    return PublishCase(rows=list(rows), **fields)


def _row(subject: str | None = f"{PREFIX}.a", **values: Any) -> Row:
    return Row(
        subject=subject,
        data=values.get("data", b"x"),
        headers=values.get("headers"),
        msg_id=values.get("msg_id"),
    )


@fuzz(200)
@given(case=publish_cases())
# A header name async-nats refuses (non-ASCII, a control character) panicked in the
# engine: the publish raised RuntimeError("task panicked"), without .result, while
# row 0 was stored.
@example(
    case=_case(
        _row(headers=[("K", ["v"])]), _row(headers=[("é", ["v"])]), headers_type=HEADERS_LISTS
    )
)
@example(case=_case(_row(headers=[("a\x00", "v")]), headers_type=HEADERS_SINGLE))
# So did a msg id with a line break.
@example(case=_case(_row(msg_id="x"), _row(msg_id="a\nb"), msg_id_type=pa.utf8()))
# A subject whose PUB line passed the server's 4096 bytes: the server closed the
# connection, and row 0, stored, was reported failed after the ack timeout.
@example(case=_case(_row(), _row(f"{PREFIX}." + "s" * 4100)))
# A subject with white space beyond ASCII was stored, and a read of it (with headers)
# hung: the client's parser split the delivery's control line there.
@example(case=_case(_row(f"{PREFIX}.\x0bx", msg_id="m"), msg_id_type=pa.utf8()))
@example(case=_case(_row(f"{PREFIX}.\xa0x"), headers_type=HEADERS_LISTS))
# A missing column of an input without rows was not noticed (no batch, no check).
@example(case=_case(subject_type=None, sizes=[0]))
# A bad header in a later batch named the row within its batch as well.
@example(
    case=_case(
        _row(),
        _row(headers=[("a b", ["v"])]),
        sizes=[1, 1],
        form="reader",
        headers_type=HEADERS_LISTS,
    )
)
# An empty header name with no values is refused like one with values.
@example(case=_case(_row(headers=[("", [])]), headers_type=HEADERS_LISTS))
def test_publish_stores_exactly_the_input_or_names_the_bad_column_and_row(
    fuzz_client: ja.Client, case: PublishCase
) -> None:
    _fresh_stream(fuzz_client)
    check_publish(fuzz_client, case)


# -- publisher options ----------------------------------------------------------------------

_seconds = st.one_of(
    st.floats(min_value=0.5, max_value=1e6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -1.0, 1e-300, 1e15, 1.8e19, 1e300]),
)
_u64 = st.one_of(st.integers(0, 1000), st.integers(0, 2**64 - 1))
_text_options = st.text(
    alphabet=weighted(
        (4, st.characters(min_codepoint=0x21, max_codepoint=0x7E)),
        (1, st.sampled_from(list(" \r\n\té\x00"))),
    ),
    max_size=6,
)
publisher_options = st.one_of(
    st.tuples(st.just("window"), st.one_of(st.integers(0, 70_000), _u64)),
    st.tuples(st.just("max_retries"), st.integers(0, 2**32 - 1)),
    st.tuples(st.just("msg_id_start"), _u64),
    st.tuples(st.just("ack_timeout"), _seconds),
    st.tuples(st.just("retry_backoff"), _seconds),
    st.tuples(st.sampled_from(["expected_last_seq", "expected_last_subject_seq"]), _u64),
    st.tuples(
        st.sampled_from(["expected_stream", "expected_last_msg_id", "msg_id_prefix"]),
        st.one_of(st.just(STREAM), _text_options),
    ),
    st.tuples(st.just("on_full"), st.sampled_from(["wait", "fail", "full"])),
)


@fuzz(60)
@given(option=publisher_options)
# An ack timeout past what an instant holds panicked in the engine.
@example(option=("ack_timeout", 1.8e19))
# A line break in an option sent as a header panicked in the engine.
@example(option=("expected_stream", "a\nb"))
@example(option=("expected_last_msg_id", "a\rb"))
def test_publisher_options_publish_or_name_the_option(
    fuzz_client: ja.Client, option: tuple[str, Any]
) -> None:
    """Whatever a publisher option's value, the publish is the server's verdict on each
    row, or BadInputError naming the option; never a panic."""
    name, value = option
    _fresh_stream(fuzz_client)
    table = pa.table({"subject": [f"{PREFIX}.a", f"{PREFIX}.b"], "data": [b"1", b"2"]})
    result, error = _outcome(
        lambda: fuzz_client.publish(table, raise_on_error=False, **{name: value})
    )
    stored = fuzz_client.stream_info(STREAM).state.messages
    if error is not None:
        assert isinstance(error, BadInputError), _describe(error)
        assert f"'{name}'" in str(error), str(error)
        assert stored == 0
        return
    assert result.stored + result.duplicates + result.failed == 2
    # A row that failed on an ack timeout may still have been stored.
    assert result.stored <= stored <= 2


# == Spark options =====================================================================

READ = CONNECT_SPECS + READ_SPECS
WRITE = CONNECT_SPECS + WRITE_SPECS
SPECS_BY_NAME = {spec.python: spec for spec in READ + WRITE}
INT64_MAX = 2**63 - 1
# What the engine takes beyond the table's minimum: the publisher's window, a u32 of
# retries (as the core's table declares them); every other count and sequence is an
# int64 (Spark's LongType).
MAX_WINDOW = native_option("publish", "window")["maximum"]
MAX_RETRIES = native_option("publish", "max_retries")["maximum"]
MAXIMUM = {"window": MAX_WINDOW, "max_retries": MAX_RETRIES}
_ALNUM = "abcXYZ019"
_names = st.text(alphabet=_ALNUM + "_-", min_size=1, max_size=8)
_words = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=10
)
UTC = timezone.utc


def _named(spec: OptionSpec, message: str) -> bool:
    return f"'{spec.spark}'" in message or f"'{spec.python}'" in message


@st.composite
def spellings(draw: st.DrawFn, spec: OptionSpec) -> str:
    """The option's Python or Spark name in any case, with '_' and '-' anywhere."""
    out = []
    for char in draw(st.sampled_from([spec.python, spec.spark])):
        if char in "_-":
            out.append(draw(st.sampled_from(["", "_", "-"])))
        else:
            out.append(char.upper() if draw(st.booleans()) else char.lower())
    return "".join(out)


def _maximum(spec: OptionSpec) -> int:
    return MAXIMUM.get(spec.python, INT64_MAX)


def _int_values(lo: int, hi: int) -> st.SearchStrategy[tuple[Any, Any]]:
    numbers = st.one_of(st.integers(lo, min(hi, lo + 1000)), st.integers(lo, hi), st.just(hi))
    return numbers.flatmap(lambda n: st.sampled_from([(n, n), (str(n), n), (f" {n} ", n)]))


def _float_values(lo: float) -> st.SearchStrategy[tuple[Any, Any]]:
    numbers = st.floats(min_value=lo, max_value=1e6, allow_nan=False, allow_infinity=False)

    def forms(x: float) -> st.SearchStrategy[tuple[Any, Any]]:
        whole = [(int(x), float(int(x)))] if int(x) >= max(lo, 1) else []
        return st.sampled_from([(x, x), (repr(x), x), *whole])

    return numbers.flatmap(forms)


_times = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
_zones = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]
)


@st.composite
def time_values(draw: st.DrawFn) -> tuple[Any, datetime]:
    when = draw(_times)
    form = draw(st.sampled_from(["iso", "z", "epoch", "datetime"]))
    if form == "epoch":
        when = when.replace(microsecond=0)
        return draw(st.sampled_from([int(when.timestamp()), str(int(when.timestamp()))])), when
    shown = when.astimezone(draw(_zones))
    if form == "datetime":
        return shown, when
    text = shown.isoformat()
    return (text.replace("+00:00", "Z") if form == "z" else text), when


@st.composite
def subject_filters(draw: st.DrawFn, most: int = 3) -> tuple[Any, tuple[str, ...]]:
    tokens = st.one_of(st.text(alphabet="abc", min_size=1, max_size=3), st.just("*"))
    filters = draw(
        st.lists(
            st.lists(tokens, min_size=1, max_size=3)
            .map(".".join)
            .flatmap(lambda f: st.sampled_from([f, f + ".>"])),
            min_size=1,
            max_size=most,
        )
    )
    if draw(st.booleans()):
        return list(filters), tuple(filters)
    pads = [draw(st.sampled_from(["", " "])) for _ in filters]
    return ",".join(p + f + p for p, f in zip(pads, filters, strict=True)), tuple(filters)


def valid_values(spec: OptionSpec) -> st.SearchStrategy[tuple[Any, Any]]:
    """(value given, value parsed) pairs for one option, valid on their own."""
    if spec.kind == "bool":
        return st.sampled_from(
            [
                (True, True),
                (False, False),
                ("true", True),
                ("FALSE", False),
                (" yes ", True),
                ("No", False),
                ("1", True),
                ("0", False),
            ]
        )
    if spec.kind == "int":
        return _int_values(int(spec.minimum) if spec.minimum is not None else 0, _maximum(spec))
    if spec.kind == "float":
        # Connection durations must be positive; the table's minimum otherwise.
        return _float_values(spec.minimum if spec.minimum is not None else 0.001)
    if spec.kind == "time":
        return time_values()
    if spec.kind == "subjects":
        return subject_filters()
    if spec.choices:
        return st.sampled_from(spec.choices).flatmap(
            lambda c: st.sampled_from([(c, c), (c.upper(), c), (f" {c.title()} ", c)])
        )
    if spec.python in ("stream", "consumer", "expected_stream"):
        return _names.map(lambda n: (n, n))
    return _words.map(lambda w: (w, w))


@dataclass
class OptionsCase:
    """Options given to a parser, and the fields they must parse to."""

    scope: str  # "read" or "write"
    queries: str | None
    given: dict[str, Any]
    expected: dict[str, Any]  # by Python name; connection options too


@st.composite
def option_names(draw: st.DrawFn, python: str) -> str:
    return draw(spellings(SPECS_BY_NAME[python]))


@st.composite
def connect_options(draw: st.DrawFn, case: OptionsCase) -> None:
    paired = (
        ("user", "password"),
        ("tls_cert", "tls_key"),
        ("tls_cert_content", "tls_key_content"),
    )
    in_pairs = {name for pair in paired for name in pair}
    simple = [s for s in CONNECT_SPECS if s.python not in in_pairs]
    groups: list[tuple[str, ...]] = [(s.python,) for s in simple] + list(paired)
    chosen = draw(st.lists(st.sampled_from(groups), max_size=4, unique=True))
    # Options that exclude each other: one of each pair is kept.
    for first, second in (
        (("domain",), ("api_prefix",)),
        (("creds",), ("creds_content",)),
        (("tls_ca",), ("tls_ca_content",)),
        (("tls_cert", "tls_key"), ("tls_cert_content", "tls_key_content")),
    ):
        if first in chosen and second in chosen:
            chosen.remove(second)
    for group in chosen:
        for python in group:
            spec = SPECS_BY_NAME[python]
            given, parsed = draw(valid_values(spec))
            case.given[draw(option_names(python))] = given
            case.expected[python] = parsed


def _set(draw: st.DrawFn, case: OptionsCase, python: str) -> Any:
    given, parsed = draw(valid_values(SPECS_BY_NAME[python]))
    case.given[draw(option_names(python))] = given
    case.expected[python] = parsed
    return parsed


@st.composite
def valid_read_options(draw: st.DrawFn) -> OptionsCase:
    queries = draw(st.sampled_from(["batch", "stream", None]))
    case = OptionsCase("read", queries, {}, {})
    draw(connect_options(case))
    _set(draw, case, "stream")
    consumer = queries != "batch" and draw(st.booleans())
    if consumer:
        _set(draw, case, "consumer")
        if draw(st.booleans()):
            given, parsed = draw(subject_filters(most=1))
            case.given[draw(option_names("subjects"))] = given
            case.expected["subjects"] = parsed
    else:
        if draw(st.booleans()):
            _set(draw, case, "subjects")
        start = draw(st.sampled_from([None, "start_seq", "start_time", "starting_offsets"]))
        if start == "starting_offsets":
            offsets = ["earliest"] if queries == "batch" else ["earliest", "latest"]
            given = draw(st.sampled_from(offsets))
            case.given[draw(option_names(start))] = given.upper()
            case.expected[start] = given
        elif start:
            _set(draw, case, start)
        end = draw(st.sampled_from([None, "end_seq", "end_time"])) if queries != "stream" else None
        if end == "end_seq":
            first = case.expected.get("start_seq", 1)
            last = draw(st.integers(first, INT64_MAX))
            case.given[draw(option_names(end))] = str(last)
            case.expected[end] = last
        elif end == "end_time":
            first = case.expected.get("start_time", datetime(1970, 1, 1, tzinfo=UTC))
            last = first + timedelta(seconds=draw(st.integers(1, 10**9)))
            case.given[draw(option_names(end))] = last.isoformat()
            case.expected[end] = last
    if queries != "batch" and draw(st.booleans()):
        _set(draw, case, "max_messages_per_trigger")
    plain = [
        "min_partitions",
        "max_messages_per_partition",
        "include_headers",
        "fail_on_data_loss",
        "batch_rows",
        "max_bytes",
        "heartbeat",
    ]
    for python in draw(st.lists(st.sampled_from(plain), max_size=4, unique=True)):
        _set(draw, case, python)
    return case


@st.composite
def valid_write_options(draw: st.DrawFn) -> OptionsCase:
    queries = draw(st.sampled_from(["batch", "stream"]))
    case = OptionsCase("write", queries, {}, {})
    draw(connect_options(case))
    plain = ["subject", "msg_id_column", "window", "ack_timeout", "max_retries", "retry_backoff"]
    if queries == "batch":
        plain.append("write_id")
    for python in draw(st.lists(st.sampled_from(plain), max_size=4, unique=True)):
        _set(draw, case, python)
    target = draw(st.sampled_from([None, "expected_stream", "stream", "both"]))
    if target:
        name = draw(_names)
        if target in ("expected_stream", "both"):
            case.given[draw(option_names("expected_stream"))] = name
        if target in ("stream", "both"):
            case.given[draw(st.sampled_from(["stream", "STREAM", "Stream"]))] = name
        case.expected["expected_stream"] = name
    return case


def parse(case: OptionsCase, given: dict[str, Any] | None = None) -> Any:
    options = case.given if given is None else given
    if case.scope == "read":
        return parse_read_options(options, queries=case.queries)
    assert case.queries is not None
    return parse_write_options(options, queries=case.queries)


def check_parsed(case: OptionsCase, parsed: Any) -> None:
    """Every field is the value given, or the table's default; of the documented type."""
    specs = READ if case.scope == "read" else WRITE
    for spec in specs:
        if spec.python == "write_id":
            continue
        holder = parsed.connect if spec.scope == "connect" else parsed
        got = getattr(holder, spec.python)
        want = case.expected.get(spec.python, spec.default)
        if spec.python == "stream" and spec.scope == "read":
            want = case.expected["stream"]
        assert got == want, (spec.python, got, want)
        if got is not None:
            kind = {"bool": bool, "int": int, "float": float, "time": datetime, "subjects": tuple}
            assert type(got) is kind.get(spec.kind, str), (spec.python, type(got))
    if case.scope == "write":
        write_id = parsed.write_id
        if "write_id" in case.expected:
            assert write_id == case.expected["write_id"]
        elif case.queries == "stream":
            assert write_id == ""
        else:
            assert re.fullmatch(r"[0-9a-f]{32}", write_id), write_id


@fuzz(150)
@given(case=st.one_of(valid_read_options(), valid_write_options()))
# "none" and "null" were taken for None in text options: a password "none" was dropped.
@example(
    case=OptionsCase(
        "write", "batch", {"user": "u", "password": "None"}, {"user": "u", "password": "None"}
    )
)
@example(
    case=OptionsCase(
        "read", "stream", {"stream": "S", "consumer": "null"}, {"stream": "S", "consumer": "null"}
    )
)
def test_valid_options_in_any_spelling_parse_to_the_documented_values(case: OptionsCase) -> None:
    check_parsed(case, parse(case))


def test_the_option_tables_bounds_are_the_publishers(fuzz_client: ja.Client) -> None:
    """The core's table declares the publisher's bounds: MAX_WINDOW and MAX_RETRIES are
    what a publisher takes, and one more is refused."""
    fuzz_client.publisher(window=MAX_WINDOW, max_retries=MAX_RETRIES).close()
    with pytest.raises(BadInputError, match="'window'"):
        fuzz_client.publisher(window=MAX_WINDOW + 1)
    # The native argument is a u32: one more does not convert.
    with pytest.raises((OverflowError, BadInputError)):
        fuzz_client.publisher(max_retries=MAX_RETRIES + 1)


# -- one bad value ------------------------------------------------------------------------

_junk = st.sampled_from(["", "   ", "abc", "0x10", "tru", "1e3x", "None?", "[]"])
_not_scalars = st.sampled_from([[1], ["a"], {"a": 1}, b"a.b", (), object()])


def bad_values(spec: OptionSpec) -> st.SearchStrategy[Any]:
    """Values the option must refuse, naming itself."""
    common = (
        [_not_scalars]
        if spec.kind != "subjects"
        else [st.sampled_from([{"a": 1}, b"a.b", 5, object()])]
    )
    if spec.kind == "bool":
        return st.one_of(*common, _junk, st.sampled_from([2, -1, 1.5, "2", "yess"]))
    if spec.kind == "int":
        lo = int(spec.minimum) if spec.minimum is not None else 0
        hi = _maximum(spec)
        numbers = st.one_of(st.integers(max_value=lo - 1), st.integers(min_value=hi + 1))
        return st.one_of(
            *common,
            _junk,
            st.sampled_from([True, False, 1.5, "1.0", "nan"]),
            numbers,
            numbers.map(str),
        )
    if spec.kind == "float":
        lo = spec.minimum if spec.minimum is not None else 0.0
        below = st.floats(
            max_value=lo, exclude_max=spec.minimum is not None or lo == 0.0, allow_nan=False
        )
        below = below.filter(lambda x: x < lo or (spec.minimum is None and x <= 0))
        return st.one_of(
            *common,
            _junk,
            below,
            below.map(repr),
            st.sampled_from([True, "nan", "inf", "-inf", float("nan"), float("inf")]),
        )
    if spec.kind == "time":
        return st.one_of(
            *common,
            _junk,
            st.sampled_from(
                [
                    "yesterday",
                    "2026-01-31T12:00:00",
                    "2026-13-01T00:00:00Z",
                    True,
                    float("nan"),
                    float("inf"),
                    1e300,
                    "1e300",
                ]
            ),
        )
    if spec.kind == "subjects":
        return st.one_of(
            *common,
            st.sampled_from(
                [
                    "",
                    " ",
                    " , ",
                    "a,,b",
                    "a b",
                    "a\tb",
                    "a..b",
                    ".a",
                    "a.",
                    "a.>.b",
                    [],
                    ["a", ""],
                    [1],
                ]
            ),
        )
    bad: list[Any] = ["", "   ", 5, True, 1.5]
    if spec.choices:
        bad += ["middle", "earliest latest"]
    if spec.python in ("stream", "consumer", "expected_stream"):
        bad += ["a.b", "a b", "*", ">", "a/b"]
    if spec.python == "write_id":
        bad += ["a b", "a\tb"]
    return st.one_of(*common, st.sampled_from(bad))


# A write takes 'stream' too, as a second name of 'expectedStream'.
WRITE_STREAM = OptionSpec("stream", "stream", "str", None, "", "write")


@st.composite
def one_bad_value(draw: st.DrawFn) -> tuple[OptionsCase, OptionSpec, str]:
    case = draw(st.one_of(valid_read_options(), valid_write_options()))
    specs = READ if case.scope == "read" else [*WRITE, WRITE_STREAM]
    spec = draw(st.sampled_from(specs))
    for key in [k for k in case.given if _norm(k) in (_norm(spec.python), _norm(spec.spark))]:
        del case.given[key]
    key = draw(spellings(spec))
    case.given[key] = draw(bad_values(spec))
    return case, spec, key


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _one_bad(scope: str, python: str, value: Any, queries: str = "batch") -> Any:
    given = {"stream": "S"} if scope == "read" else {}
    spec = SPECS_BY_NAME[python]
    given[spec.spark] = value
    return OptionsCase(scope, queries, given, {}), spec, spec.spark


@fuzz(150)
@given(bad=one_bad_value())
# Wrong-typed text options were taken as their str(): servers "[1]", a stream 5.
@example(bad=_one_bad("read", "servers", [1]))
# Subject filters the server refuses, and bytes taken as a list of numbers.
@example(bad=_one_bad("read", "subjects", "a..b"))
@example(bad=_one_bad("read", "subjects", b"a.b"))
# Numbers the engine cannot take were accepted, to fail later on an executor.
@example(bad=_one_bad("write", "window", "65537"))
@example(bad=_one_bad("write", "max_retries", str(2**32)))
@example(bad=_one_bad("read", "start_seq", str(2**64)))
# The write option 'stream' was taken without a check.
@example(bad=(OptionsCase("write", "batch", {"stream": ""}, {}), WRITE_STREAM, "stream"))
@example(bad=(OptionsCase("write", "batch", {"stream": 5}, {}), WRITE_STREAM, "stream"))
def test_a_bad_value_is_refused_naming_its_option(bad: tuple[OptionsCase, OptionSpec, str]) -> None:
    case, spec, key = bad
    with pytest.raises(BadInputError) as info:
        parse(case)
    assert _named(spec, str(info.value)), (spec.python, case.given[key], str(info.value))


# -- anything at all ------------------------------------------------------------------------

_any_values = st.one_of(
    st.text(max_size=12),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.lists(st.text(max_size=3), max_size=2),
    st.binary(max_size=4),
    st.datetimes(timezones=st.none() | st.just(UTC)),
)


@st.composite
def any_options(draw: st.DrawFn) -> OptionsCase:
    scope = draw(st.sampled_from(["read", "write"]))
    specs = READ if scope == "read" else WRITE
    queries = draw(st.sampled_from(["batch", "stream"] + ([None] if scope == "read" else [])))
    keys = draw(
        st.lists(
            st.one_of(
                st.sampled_from(specs).flatmap(spellings),
                st.text(max_size=10),
                st.sampled_from(["path", "checkpointLocation", "stream", "Stream"]),
            ),
            max_size=6,
            unique=True,
        )
    )
    given = {
        key: draw(
            st.one_of(_any_values, st.sampled_from(specs).flatmap(valid_values).map(lambda v: v[0]))
        )
        for key in keys
    }
    return OptionsCase(scope, queries, given, {})


@fuzz(150)
@given(case=any_options())
# A streaming-only option given to a batch read raised KeyError (no reason recorded).
@example(case=OptionsCase("read", "batch", {"stream": "S", "consumer": "C"}, {}))
# A float NaN as a time raised ValueError.
@example(case=OptionsCase("read", "batch", {"stream": "S", "startingTime": float("nan")}, {}))
# Subjects that are neither text nor a list raised TypeError.
@example(case=OptionsCase("read", "batch", {"stream": "S", "subjects": 5}, {}))
def test_any_options_parse_or_raise_bad_input_naming_an_option(case: OptionsCase) -> None:
    _, error = _outcome(lambda: parse(case))
    if error is not None:
        assert isinstance(error, BadInputError), _describe(error)
        message = str(error)
        named = [repr(k) for k in case.given] + ["'stream'"]
        for key in case.given:
            spec = next(
                (s for s in READ + WRITE if _norm(key) in (_norm(s.python), _norm(s.spark))), None
            )
            if spec is not None:
                named += [f"'{spec.spark}'", f"'{spec.python}'"]
        assert any(name in message for name in named), (case.given, message)
