"""Payloads that do not decode, published to a dead-letter stream before the commit
that moves a sink's position past them.

Each goes with its original bytes, the decoder's error and its source (headers
``Jetstream-Arrow-Error``, ``-Source-Stream``, ``-Source-Subject``, ``-Source-Seq``)
under msg id ``<stream>:<seq>:<reader>``: a sink that publishes it again after a
restart adds nothing within the dead-letter stream's duplicate window, and, when the
dead-letter stream holds writers' positions, at any age (:class:`DeadLetterPositions`:
the sink is a writer per source stream, its position the source sequence after the
last commit whose letters are stored). ``<reader>`` (:func:`reader_tag`) names who read it: a sink's target and the
stream's creation, so that two sinks sharing a dead-letter stream, or a stream made
again under its name and landed anew, do not drop each other's letters as duplicates. A
payload still compressed as stored (it did not decompress, or the connection does not
decompress) keeps its ``Content-Encoding`` header, without which its bytes could not
be read; one the read decompressed goes plain.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .. import _core
from ..codec import ValueCodec
from ..exceptions import BadInputError, JetStreamArrowError
from ..positions import POSITION_SUBJECT_PREFIX, Position, PositionedWriter

ERROR_HEADER = "Jetstream-Arrow-Error"
SOURCE_STREAM_HEADER = "Jetstream-Arrow-Source-Stream"
SOURCE_SUBJECT_HEADER = "Jetstream-Arrow-Source-Subject"
SOURCE_SEQ_HEADER = "Jetstream-Arrow-Source-Seq"
#: The header that names a payload's compression (the core's ``compression.rs``).
CONTENT_ENCODING_HEADER = "Content-Encoding"


def dead_letter_subject(
    client: Any, dead_letter_stream: str, option: str, resume_timeout: float | None = None
) -> str:
    """The subject dead letters are published to: the dead-letter stream's first
    subject, its last token ``>`` or ``*`` taken as ``dead``. The stream's info is
    asked for patiently with ``resume_timeout`` (see ``Client.stream_info``)."""
    info = client.stream_info(dead_letter_stream, resume_timeout=resume_timeout)
    # Writers' positions are no subject to publish letters to (readers skip them).
    subjects = [s for s in info.config.subjects or [] if not s.startswith(POSITION_SUBJECT_PREFIX)]
    if not subjects:
        raise BadInputError(
            f"{option} {dead_letter_stream!r}: the stream takes no subjects to publish to"
        )
    tokens = subjects[0].split(".")
    if tokens[-1] in ("*", ">"):
        tokens[-1] = "dead"
    if any(t in ("*", ">") for t in tokens):
        raise BadInputError(
            f"{option} {dead_letter_stream!r}: its first subject {subjects[0]!r} has a "
            "wildcard before its last token; give the stream a subject such as 'dead.>'"
        )
    return ".".join(tokens)


def error_texts(malformed: pa.Table) -> list[str]:
    """Why each of the ``malformed`` rows did not decode: its ``_corrupt_reason``,
    the decoder's own words as the read that set it aside gave them (or, for a
    payload a sink sampled itself, as :func:`no_value_reasons` gives them)."""
    return [str(reason) for reason in malformed.column(_core.CORRUPT_REASON_COLUMN).to_pylist()]


def no_value_reasons(codec: ValueCodec, stream: str, messages: pa.Table) -> list[str | None]:
    """For each of ``messages`` (of ``stream``, read or delivered without a codec),
    why its payload holds no value a schema could be inferred from, in the words of a
    read's ``_corrupt_reason``; None for a payload that holds one."""
    return _core.no_value_reasons(
        codec,
        stream,
        messages.column("seq").to_pylist(),
        messages.column("data").to_pylist(),
    )


def as_malformed(messages: pa.Table, reasons: list[str | None], kept: list[str]) -> pa.Table:
    """``messages``' columns ``kept`` as the malformed rows of a read: ``data`` as
    ``_corrupt_record``, and ``reasons`` as ``_corrupt_reason``."""
    table = messages.select(kept).rename_columns(
        [_core.CORRUPT_RECORD_COLUMN if c == "data" else c for c in kept]
    )
    return table.append_column(_core.CORRUPT_REASON_COLUMN, pa.array(reasons, pa.string()))


def content_encodings(client: Any, malformed: pa.Table) -> list[str | None]:
    """The ``Content-Encoding`` each of the ``malformed`` rows' payload still has: the
    read's ``headers`` keep that header only for a payload it did not decompress.
    Without a ``headers`` column each message is asked for as stored, and keeps its
    header only when its stored bytes are the payload's (a decompressed payload's are
    not)."""
    if "headers" in malformed.column_names:
        return [
            _encoding(dict(h) if h is not None else {})
            for h in malformed.column("headers").to_pylist()
        ]
    found: list[str | None] = []
    for stream, seq, payload in zip(
        malformed.column("stream").to_pylist(),
        malformed.column("seq").to_pylist(),
        malformed.column(_core.CORRUPT_RECORD_COLUMN).to_pylist(),
        strict=True,
    ):
        try:
            stored = client.get_message(stream, seq)
        except JetStreamArrowError:
            # Gone, or not to be read again: no header it could be told by.
            found.append(None)
            continue
        encoding = _encoding(stored.headers)
        found.append(encoding if encoding is not None and stored.data == payload else None)
    return found


def _encoding(headers: dict[str, Any]) -> str | None:
    for name, values in headers.items():
        if name.lower() == CONTENT_ENCODING_HEADER.lower() and values:
            return str(values[0] if isinstance(values, list) else values)
    return None


def reader_tag(*identity: object) -> str:
    """The last part of a dead letter's msg id: 16 hex digits of a digest of what
    identifies the reader (a sink's target and the stream's creation time), the same
    for the same reader after a restart, another for another reader."""
    text = "\n".join(str(part) for part in identity)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def dead_letters(
    malformed: pa.Table,
    errors: list[str],
    subject: str,
    encodings: list[str | None],
    readers: Mapping[str, str],
) -> pa.Table:
    """The messages that carry ``malformed`` rows to the dead-letter stream, each with
    its payload's ``encodings`` (:func:`content_encodings`), under msg id
    ``<stream>:<seq>:<reader>`` (``readers``: the :func:`reader_tag` of each stream)."""
    streams = malformed.column("stream").to_pylist()
    subjects = malformed.column("subject").to_pylist()
    seqs = malformed.column("seq").to_pylist()
    headers = [
        [
            (ERROR_HEADER, error.replace("\r", " ").replace("\n", " ")),
            (SOURCE_STREAM_HEADER, stream),
            (SOURCE_SUBJECT_HEADER, source_subject),
            (SOURCE_SEQ_HEADER, str(seq)),
            *([(CONTENT_ENCODING_HEADER, encoding)] if encoding is not None else []),
        ]
        for error, stream, source_subject, seq, encoding in zip(
            errors, streams, subjects, seqs, encodings, strict=True
        )
    ]
    return pa.table(
        {
            "subject": pa.array([subject] * malformed.num_rows, pa.string()),
            "data": malformed.column(_core.CORRUPT_RECORD_COLUMN),
            "headers": pa.array(headers, pa.map_(pa.string(), pa.string())),
            "msg_id": pa.array(
                [f"{s}:{q}:{readers[s]}" for s, q in zip(streams, seqs, strict=True)],
                pa.string(),
            ),
        }
    )


def dead_letter_writer(stream: str, reader: str) -> str:
    """The writer identity of a sink's dead letters of source ``stream``, read by
    ``reader`` (its :func:`reader_tag`): one per source stream and sink."""
    return f"sink dead letters of {stream} read by {reader}"


class DeadLetterPositions:
    """A sink's dead letters, each stored once in the dead-letter stream at any age.

    Per source stream the sink is a writer (a ``PositionedWriter``), claimed at its
    first letters: a commit's letters
    are published, then the position moves to the source sequence after the commit
    (every letter before it is stored), then the commit is made. A sink that died
    between its letters and its commit reads the same messages again: the letters
    before the position, and those the read-back finds stored after it (by their msg
    ids), are not published again."""

    def __init__(
        self, client: Any, dead_letter_stream: str, readers: Mapping[str, str], lease: float | None
    ) -> None:
        self.client = client
        self.stream = dead_letter_stream
        self.readers = readers
        self.lease = lease
        self._writers: dict[str, tuple[PositionedWriter, Position]] = {}

    def _writer(self, stream: str) -> tuple[PositionedWriter, Position]:
        if stream not in self._writers:
            writer = PositionedWriter(
                self.client,
                self.stream,
                dead_letter_writer(stream, self.readers[stream]),
                id_prefix=f"{stream}:",
                lease=self.lease,
            )
            self._writers[stream] = (writer, writer.claim())
        return self._writers[stream]

    def unsent(self, stream: str, letters: pa.Table, malformed: pa.Table) -> pa.Table:
        """The ``letters`` (of ``malformed`` rows of source ``stream``) the
        dead-letter stream does not hold yet."""
        _, position = self._writer(stream)
        seqs = pc.cast(malformed.column("seq"), pa.int64())
        keep = pc.greater_equal(seqs, position.next)
        if position.stored_ids:
            stored = pa.array(sorted(position.stored_ids), pa.string())
            keep = pc.and_(keep, pc.invert(pc.is_in(letters.column("msg_id"), value_set=stored)))
        return letters.filter(keep)

    def advance(self, stream: str, next_seq: int) -> None:
        """Every letter of source ``stream`` before ``next_seq`` is stored."""
        writer, _ = self._writer(stream)
        if next_seq > writer.next:
            writer.advance(next_seq)

    def close(self) -> None:
        """The sink ends: free each identity, so the next run starts at once."""
        for writer, _ in self._writers.values():
            writer.close(writer.next)
        self._writers.clear()
