"""Mode ``deadletter`` of a read with a value format: payloads that do not decode are
published to option ``deadLetterStream`` and left out of the rows.

Batch reads, streaming reads and ``read_fn`` all read through
:func:`.reading.read_range`, which decodes with the core's ``permissive`` mode and
hands each batch to :class:`DeadLetterRouter`: the rows whose ``_corrupt_record`` is
set are published, acknowledged, before the good rows are yielded. The messages are
the continuous sink's (:mod:`jetstream_arrow.sink.dead_letters`): the payload's bytes,
the decoder's error (the read's ``_corrupt_reason``) and the source stream, subject and sequence in headers, under msg
id ``<stream>:<seq>:<reader>``, ``<reader>`` a digest of Spark and the stream's
creation, so a retried task, or the same read run again, adds nothing within the
dead-letter stream's duplicate window, while a stream made again under its name, and a
sink sharing the dead-letter stream, have letters of their own. A publish that fails fails the task.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from .. import _core
from ..client import Client
from ..exceptions import BadInputError, JetStreamArrowError, NotFoundError, PublishError
from ..sink.dead_letters import (
    content_encodings,
    dead_letter_subject,
    dead_letters,
    error_texts,
    reader_tag,
)
from ..sink.origin import created_ns
from .option_specs import DEAD_LETTER_MODE
from .options import ReadOptions
from .stream_lookup import PATIENCE

OPTION = "option 'deadLetterStream'"


def routes_dead_letters(opts: ReadOptions) -> bool:
    """Whether a read publishes the payloads that do not decode (mode ``deadletter``)."""
    return opts.on_malformed == DEAD_LETTER_MODE and opts.dead_letter_stream is not None


def _is_read(opts: ReadOptions, stream: str) -> bool:
    if stream == opts.stream or stream in (opts.streams or ()):
        return True
    # A streaming query of a pattern reads the streams created later too.
    return opts.stream_pattern is not None and re.fullmatch(opts.stream_pattern, stream) is not None


def check_dead_letter_stream(client: Client, opts: ReadOptions) -> None:
    """At planning (driver side): the dead-letter stream exists, takes a subject to
    publish to, and is not a stream the read reads (its dead letters would be read
    back as malformed again)."""
    if not routes_dead_letters(opts):
        return
    stream = opts.dead_letter_stream
    assert stream is not None
    if _is_read(opts, stream):
        raise BadInputError(
            f"{OPTION} {stream!r} is a stream the read reads (option 'stream', 'streams' "
            "or 'streamPattern'); give a stream of its own for the payloads that do not decode"
        )
    try:
        dead_letter_subject(client, stream, OPTION)
    except NotFoundError:
        raise BadInputError(
            f"{OPTION} {stream!r}: no such stream; create it first (for example on "
            f"subjects '{stream}.>')"
        ) from None


class DeadLetterRouter:
    """In a task: publishes a decoded batch's malformed rows to the dead-letter stream
    and gives back its good rows, without ``_corrupt_record``'s payloads."""

    def __init__(self, client: Client, opts: ReadOptions) -> None:
        assert opts.dead_letter_stream is not None
        self.client = client
        self.stream = opts.dead_letter_stream
        self.subject = dead_letter_subject(client, self.stream, OPTION)
        self.published = 0
        self.readers: dict[str, str] = {}

    def good_rows(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        corrupt = batch.column(_core.CORRUPT_RECORD_COLUMN)
        if corrupt.null_count == len(corrupt):
            return batch
        bad = pc.is_valid(corrupt)
        malformed = pa.Table.from_batches([batch.filter(bad)])
        # The decoder's reasons, from the read's `_corrupt_reason`.
        errors = error_texts(malformed)
        try:
            # A payload still compressed as stored keeps its Content-Encoding.
            encodings = content_encodings(self.client, malformed)
            self.client.publish(
                dead_letters(malformed, errors, self.subject, encodings, self._readers(malformed)),
                expected_stream=self.stream,
            )
        except JetStreamArrowError as err:
            raise PublishError(
                f"{OPTION} {self.stream!r}: publishing {malformed.num_rows} dead letter(s) "
                f"failed, so the task fails (its retry adds nothing twice): {err}",
                getattr(err, "result", None),
            ) from err
        self.published += malformed.num_rows
        return batch.filter(pc.invert(bad))

    def _readers(self, malformed: pa.Table) -> dict[str, str]:
        """The reader part of the letters' ids, per stream: Spark and when the stream
        was created, asked for once per stream a task dead-letters from."""
        for stream in set(malformed.column("stream").to_pylist()) - set(self.readers):
            info = self.client.stream_info(stream, resume_timeout=PATIENCE)
            self.readers[stream] = reader_tag("spark", created_ns(info))
        return self.readers
