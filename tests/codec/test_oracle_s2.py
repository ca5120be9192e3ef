"""S2 payloads (``compression="s2"``) against an independent implementation of the S2
block format, written here from the format's description (klauspost/compress's
``s2`` README: Snappy's block format, plus a copy with a one-byte tag and offset 0
that repeats the last offset, its length in up to three more bytes). PyPI has no
Python implementation of S2 to use instead (its Snappy libraries decode Snappy, which
S2 extends, and not the repeats S2's encoders write).

- What the package publishes with ``compression="s2"`` and marks ``Content-Encoding:
  s2`` is read raw with nats-py and decoded here to the payload given (a payload the
  package sends plain carries no header and is the payload given).
- Blocks encoded here (literals, copies with two-byte offsets, and repeats), published
  with nats-py under ``Content-Encoding: s2``, are read by the package as the payloads
  encoded, the header left out of the ``headers`` column.

Hypothesis examples: 25 each; a few seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jetstream_arrow as ja
from natsserver import NatsServer
from oracle_histories import PyNats, StreamShape

pytestmark = pytest.mark.timeout(120)

UniqueName = Callable[[str], str]
HEADER = "Content-Encoding"


def examples(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


# -- the S2 block format --------------------------------------------------------------------


class Corrupt(Exception):
    pass


def _uvarint(src: bytes) -> tuple[int, int]:
    value = shift = 0
    for i, byte in enumerate(src[:10]):
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i + 1
        shift += 7
    raise Corrupt("a bad length")


def s2_decode(block: bytes) -> bytes:
    """A block: the decoded length as a varint, then elements, each a literal or a
    copy of earlier output (a copy may overlap what it writes)."""
    size, s = _uvarint(block)
    out = bytearray()
    offset = 0
    while s < len(block):
        tag = block[s]
        kind = tag & 3
        if kind == 0:  # a literal: its length - 1 in the tag, or in 1-4 bytes after it
            n = tag >> 2
            s += 1
            if n >= 60:
                extra = n - 59
                n = int.from_bytes(block[s : s + extra], "little")
                s += extra
            n += 1
            if s + n > len(block):
                raise Corrupt("a literal past the block's end")
            out += block[s : s + n]
            s += n
            continue
        if kind == 1:  # two bytes: 3 length bits, 11 offset bits (0: repeat the last)
            length = (tag >> 2) & 7
            given = ((tag & 0xE0) << 3) | block[s + 1]
            s += 2
            if given == 0:
                # S2's repeat: the last offset again; lengths 5-7 say how many bytes
                # after the tag hold the length, biased by 4, 256 and 65536.
                if length >= 5:
                    extra = length - 4
                    raw = int.from_bytes(block[s : s + extra], "little")
                    s += extra
                    length = raw + (4, 256, 65536)[extra - 1]
            else:
                offset = given
            length += 4
        elif kind == 2:  # three bytes: length - 1 in the tag, a 16-bit offset
            length = (tag >> 2) + 1
            offset = int.from_bytes(block[s + 1 : s + 3], "little")
            s += 3
        else:  # five bytes: a 32-bit offset
            length = (tag >> 2) + 1
            offset = int.from_bytes(block[s + 1 : s + 5], "little")
            s += 5
        if offset <= 0 or offset > len(out):
            raise Corrupt(f"a copy from {offset} bytes back, {len(out)} written")
        for _ in range(length):
            out.append(out[-offset])
    if len(out) != size:
        raise Corrupt(f"{len(out)} bytes decoded, the block says {size}")
    return bytes(out)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _literal(chunk: bytes) -> bytes:
    n = len(chunk) - 1
    if n < 60:
        return bytes([n << 2]) + chunk
    width = (n.bit_length() + 7) // 8
    return bytes([(59 + width) << 2]) + n.to_bytes(width, "little") + chunk


def s2_encode(data: bytes) -> bytes:
    """A greedy encoder: 4-byte matches found by a table of last positions, written as
    two-byte-offset copies of at most 64 bytes, or as repeats when the offset is the
    last one; everything else as literals."""
    out = bytearray(_varint(len(data)))
    last_at: dict[bytes, int] = {}
    pending = 0  # start of the bytes not written yet
    last_offset = 0
    i = 0
    while i + 4 <= len(data):
        key = data[i : i + 4]
        j = last_at.get(key)
        last_at[key] = i
        if j is None or i - j > 0xFFFF:
            i += 1
            continue
        length = 4
        while i + length < len(data) and data[j + length] == data[i + length]:
            length += 1
        if pending < i:
            out += _literal(data[pending:i])
        offset = i - j
        left = length
        while left:
            if offset == last_offset and left >= 4:
                n = min(left, 65535 + 65536)
                rest = n - 4
                if rest < 4:
                    out += bytes([(rest << 2) | 1, 0])
                elif rest < 256 + 4:
                    out += bytes([(5 << 2) | 1, 0, rest - 4])
                elif rest < 65536 + 256:
                    out += bytes([(6 << 2) | 1, 0]) + (rest - 256).to_bytes(2, "little")
                else:
                    out += bytes([(7 << 2) | 1, 0]) + (rest - 65536).to_bytes(3, "little")
            else:
                n = min(left, 64)
                out += bytes([((n - 1) << 2) | 2]) + offset.to_bytes(2, "little")
                last_offset = offset
            left -= n
        i += length
        pending = i
    if pending < len(data):
        out += _literal(data[pending:])
    return bytes(out)


# -- the tests --------------------------------------------------------------------------------

#: Payloads that compress (repeats, runs) and some that do not.
payloads = st.one_of(
    st.binary(max_size=64),
    st.builds(lambda unit, n: unit * n, st.binary(min_size=1, max_size=9), st.integers(2, 400)),
    st.lists(st.sampled_from((b"abc", b"abcd", b'{"k": 1}', b"\x00" * 7)), max_size=80).map(
        b"".join
    ),
    st.text(max_size=40).map(lambda t: (t * 20).encode()),
)


@pytest.fixture
def py(shared_nats_server: NatsServer, unique_name: UniqueName) -> Iterator[PyNats]:
    with PyNats(shared_nats_server.url) as conn:
        anchor = unique_name("S2_ANCHOR")
        conn.create_stream(anchor, StreamShape())
        try:
            yield conn
        finally:
            conn.delete_stream(anchor)


def test_the_oracle_decodes_what_it_encodes() -> None:
    for data in (b"", b"a", b"ab" * 300, bytes(range(256)) * 5, b"x" * 70_000):
        assert s2_decode(s2_encode(data)) == data


@examples(25)
@given(data=st.lists(payloads, min_size=1, max_size=6))
def test_s2_payloads_the_package_writes_decode_to_the_payloads_given(
    client: ja.Client, py: PyNats, unique_name: UniqueName, data: list[bytes]
) -> None:
    stream = unique_name("S2W")
    py.create_stream(stream, StreamShape())
    try:
        table = pa.table(
            {"subject": [f"{stream}.x"] * len(data), "data": pa.array(data, pa.binary())}
        )
        result = client.publish(table, compression="s2")
        assert result.stored == len(data)
        for given_payload, m in zip(data, py.snapshot(stream), strict=True):
            headers = dict(m.headers or ())
            if HEADER in headers:
                assert headers[HEADER] == ("s2",)
                assert s2_decode(m.data) == given_payload
            else:  # sent plain: it would not shrink
                assert m.data == given_payload
    finally:
        py.delete_stream(stream)


@examples(25)
@given(data=st.lists(payloads, min_size=1, max_size=6))
def test_s2_blocks_encoded_elsewhere_are_read_as_their_payloads(
    client: ja.Client, py: PyNats, unique_name: UniqueName, data: list[bytes]
) -> None:
    stream = unique_name("S2R")
    py.create_stream(stream, StreamShape())
    try:
        for payload in data:
            py.publish_sync(f"{stream}.x", s2_encode(payload), [(HEADER, "s2"), ("X-K", "v")])
        back = client.read(stream, include_headers=True).read_all()
        assert back.column("data").to_pylist() == data
        assert [dict(h) for h in back.column("headers").to_pylist()] == [{"X-K": ["v"]}] * len(data)
    finally:
        py.delete_stream(stream)


def test_a_payload_that_shrinks_is_sent_as_s2(
    client: ja.Client, py: PyNats, unique_name: UniqueName
) -> None:
    """Runs and repeats (which S2's encoders write as repeat copies) decode here."""
    stream = unique_name("S2P")
    py.create_stream(stream, StreamShape())
    try:
        data = [b"ab" * 1000, bytes(range(200)) * 30, b'{"id": 1, "name": "x"}' * 50]
        client.publish(
            pa.table({"subject": [f"{stream}.x"] * 3, "data": pa.array(data)}), compression="s2"
        )
        stored = py.snapshot(stream)
        assert [dict(m.headers or ()).get(HEADER) for m in stored] == [("s2",)] * 3
        assert [s2_decode(m.data) for m in stored] == data
        assert all(len(m.data) < len(d) for m, d in zip(stored, data, strict=True))
    finally:
        py.delete_stream(stream)
