"""JSON-lines input for ``load``: each line is one message's payload, byte for byte.

A line is checked to be JSON (and UTF-8) but never re-serialised, so numbers beyond
64 bits, key order, spacing and escapes reach the stream as the file has them, and a
field that first appears late in the file is no different from any other. The line
terminator (``\\n`` or ``\\r\\n``) is not part of the payload; blank lines are skipped,
but counted in line numbers.

A file is read twice, each time as a stream of chunks: :meth:`JsonLinesFile.check`
reads every line before anything is published, so a line that does not parse stops
the load with its file and line number, and :meth:`JsonLinesFile.messages` then builds
the message batches. Fields named by ``--subject-column``, ``--msg-id-column``,
``--headers-column`` and ``--data-column`` are taken from each line's object; the
payload stays the whole line unless ``--data-column`` names a field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from .errors import CliError
from .messages import HEADERS_TYPE, header_values
from .sources import open_byte_stream

# Bytes read from the (decompressed) file at a time.
_CHUNK = 1 << 20
# No NATS server accepts a larger max_payload: a longer line can never be sent, and
# reading one no further keeps memory bounded on a file without newlines.
LONGEST_POSSIBLE_PAYLOAD = 64 << 20
# Payload bytes in one message batch, besides --batch-rows: a file of large lines
# must not gather --batch-rows of them in memory.
_BATCH_BYTES = 8 << 20
_BOM = b"\xef\xbb\xbf"


_JSON_KINDS = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


# One decoder for every line: json.loads with options builds a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


class LineError(Exception):
    """What is wrong with one line; the caller adds file and line number."""


def _parse(line: bytes) -> Any:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LineError(f"not UTF-8 (byte {e.start + 1} of the line)") from None
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise LineError(f"not JSON ({e.msg} at column {e.colno})") from None
    except ValueError as e:
        raise LineError(f"not JSON ({e})") from None


def _text(value: Any) -> str:
    """A field's value as message text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass
class LineFields:
    """The fields of each line's object that the column flags name."""

    subject: str | None = None
    data: str | None = None
    headers: str | None = None
    msg_id: str | None = None

    @property
    def any(self) -> bool:
        return any((self.subject, self.data, self.headers, self.msg_id))

    def extract(self, value: Any) -> tuple[str | None, bytes | None, Any, str | None]:
        """(subject, payload or None for the whole line, header pairs, msg id)."""
        if not isinstance(value, dict):
            raise LineError(
                f"is a JSON {_JSON_KINDS.get(type(value), 'value')}, not an object; the "
                "column flags name fields of an object on each line"
            )
        subject = data = headers = msg_id = None
        if self.subject is not None:
            subject = value.get(self.subject)
            if not isinstance(subject, str) or not subject:
                raise LineError(self._missing("--subject-column", self.subject, subject, value))
        if self.data is not None:
            if self.data not in value:
                raise LineError(self._missing("--data-column", self.data, None, value))
            data = _text(value[self.data]).encode()
        if self.headers is not None:
            raw = value.get(self.headers)
            if raw is not None:
                if not isinstance(raw, dict):
                    raise LineError(
                        f"--headers-column {self.headers!r}: the field holds "
                        f'{_text(raw)[:80]}, not an object such as {{"Trace-Id": "abc"}}'
                    )
                headers = [(str(k), header_values(v)) for k, v in raw.items() if v is not None]
        if self.msg_id is not None:
            raw = value.get(self.msg_id)
            if raw is not None:
                if isinstance(raw, bool) or not isinstance(raw, (str, int)):
                    raise LineError(
                        f"--msg-id-column {self.msg_id!r}: the field holds {_text(raw)[:80]}; "
                        "give a string or an integer"
                    )
                msg_id = str(raw)
        return subject, data, headers, msg_id

    @staticmethod
    def _missing(flag: str, name: str, found: Any, value: dict[str, Any]) -> str:
        if name not in value:
            return f"{flag} {name!r}: the line has no such field"
        return f"{flag} {name!r}: the field holds {_text(found)[:80]}, not a subject"


@dataclass
class CheckedFile:
    """What the checking pass found."""

    records: int
    # The longest payload, and the line it is on.
    longest_payload: int
    longest_line: int


class JsonLinesFile:
    def __init__(self, path: Path, fields: LineFields) -> None:
        self.path = path
        self.fields = fields
        self.checked: CheckedFile | None = None

    def _lines(self) -> Iterator[tuple[int, bytes, float]]:
        """(line number, line without its terminator, fraction of the file read), for
        every line that is not blank; a line longer than any payload is an error."""
        raw, source = open_byte_stream(self.path)
        size = max(self.path.stat().st_size, 1)
        number = 0
        tail: list[bytes] = []  # the start of a line that continues in the next chunk
        tail_bytes = 0
        try:
            while chunk := source.read(_CHUNK):
                pieces = chunk.split(b"\n")
                fraction = raw.tell() / size
                for piece in pieces[:-1]:
                    if tail:
                        piece = b"".join(tail) + piece
                        tail, tail_bytes = [], 0
                    number += 1
                    if number == 1 and piece.startswith(_BOM):
                        piece = piece[len(_BOM) :]
                    if piece.endswith(b"\r"):
                        piece = piece[:-1]
                    self._check_length(number, len(piece))
                    if piece.strip():
                        yield number, piece, fraction
                if pieces[-1]:
                    tail.append(pieces[-1])
                    tail_bytes += len(pieces[-1])
                    self._check_length(number + 1, tail_bytes)
            if tail:
                piece = b"".join(tail)
                number += 1
                if number == 1 and piece.startswith(_BOM):
                    piece = piece[len(_BOM) :]
                if piece.endswith(b"\r"):
                    piece = piece[:-1]
                if piece.strip():
                    yield number, piece, 1.0
        except OSError as e:
            raise CliError(f"cannot read {str(self.path)!r}: {e.strerror or e}") from None
        finally:
            source.close()

    def _check_length(self, number: int, length: int) -> None:
        if length > LONGEST_POSSIBLE_PAYLOAD:
            raise CliError(
                f"{self.path}:{number}: the line is longer than "
                f"{LONGEST_POSSIBLE_PAYLOAD >> 20} MiB, more than any NATS server's "
                "max_payload allows in one message; nothing was published"
            )

    def _error(self, number: int, error: LineError) -> CliError:
        return CliError(f"{self.path}:{number}: {error}; nothing was published")

    def check(self) -> CheckedFile:
        """Parse every line (in bounded memory); raise naming the first bad line."""
        records = longest = longest_line = 0
        for number, line, _ in self._lines():
            try:
                value = _parse(line)
                payload = self.fields.extract(value)[1] if self.fields.any else None
            except LineError as e:
                raise self._error(number, e) from None
            records += 1
            size = len(line) if payload is None else len(payload)
            if size > longest:
                longest, longest_line = size, number
        self.checked = CheckedFile(records, longest, longest_line)
        return self.checked

    def check_payload_limit(self, max_payload: int) -> None:
        """After :meth:`check`: refuse a file with a payload the server cannot take."""
        checked = self.checked
        if checked is not None and checked.longest_payload > max_payload:
            raise CliError(
                f"{self.path}:{checked.longest_line}: the payload is "
                f"{checked.longest_payload:,} bytes, more than the server's max_payload of "
                f"{max_payload:,} bytes; nothing was published. Raise max_payload in the "
                "server's configuration, or split the record"
            )

    def messages(self, batch_rows: int) -> Iterator[tuple[pa.RecordBatch, int, int, float | None]]:
        """``(message batch, rows, payload bytes, fraction of the file read)``."""
        fields = self.fields
        data: list[bytes] = []
        subjects: list[str | None] = []
        headers: list[Any] = []
        msg_ids: list[str | None] = []
        nbytes = 0
        fraction = 0.0

        def batch() -> pa.RecordBatch:
            arrays: dict[str, pa.Array] = {}
            if fields.subject is not None:
                arrays["subject"] = pa.array(subjects, pa.string())
            arrays["data"] = pa.array(data, pa.binary())
            if fields.headers is not None:
                arrays["headers"] = pa.array(headers, HEADERS_TYPE)
            if fields.msg_id is not None:
                arrays["msg_id"] = pa.array(msg_ids, pa.string())
            return pa.RecordBatch.from_pydict(arrays)

        for number, line, fraction in self._lines():
            payload = line
            if fields.any:
                try:
                    subject, field_data, pairs, msg_id = fields.extract(_parse(line))
                except LineError as e:
                    # checked a moment ago: the file was changed while it was loaded
                    raise CliError(
                        f"{self.path}:{number}: {e} (the file changed while it was loaded)"
                    ) from None
                subjects.append(subject)
                headers.append(pairs)
                msg_ids.append(msg_id)
                if field_data is not None:
                    payload = field_data
            data.append(payload)
            nbytes += len(payload)
            if len(data) >= batch_rows or nbytes >= _BATCH_BYTES:
                yield batch(), len(data), nbytes, fraction
                data, subjects, headers, msg_ids, nbytes = [], [], [], [], 0
        if data:
            yield batch(), len(data), nbytes, 1.0
