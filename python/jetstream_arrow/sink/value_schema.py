"""The value schema a sink decodes each stream with: inferred when the codec has none,
grown by each new field a message brings, and left without the parts no value has
typed yet when rows land.

JSON with no schema given: each read, and each pull of a work queue, fails on a field
its schema lacks (arrow-json would skip it), and the schema grows (``grow``): inferred
from the messages from that one on, added to what the schema had, kept for the run's
later reads, so that each field costs one sample per run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .._core import VALUE_COLUMN
from ..codec import ValueCodec
from ..exceptions import BadInputError, NewFieldError
from .dead_letters import no_value_reasons
from .queue import SAMPLE_ROWS, QueueReader, grown_type


def _untyped(t: pa.DataType) -> bool:
    """Whether ``t`` holds a part no value has typed yet: the null type (a JSON field
    null in every payload the schema was inferred from, an empty list's items) or a
    struct without fields (an object that was always empty)."""
    if pa.types.is_null(t):
        return True
    if pa.types.is_struct(t):
        return t.num_fields == 0 or any(_untyped(f.type) for f in t)
    if pa.types.is_list(t):
        return _untyped(t.value_type)
    return False


def _typed_only(column: pa.Array) -> pa.Array | None:
    """``column`` without its untyped parts (``_untyped``), at any depth; None when
    nothing is left. Parquet (and so Delta) cannot store a struct without fields, and
    a lake table's column keeps the type it is created with, so a null-typed column
    could never take the values that type it later: such a part lands once a value
    types it (the read's schema then grows), and reads as null before."""
    t = column.type
    if pa.types.is_null(t):
        return None
    if pa.types.is_struct(t):
        children = [_typed_only(c) for c in column.flatten()]
        kept = [(f, c) for f, c in zip(t, children, strict=True) if c is not None]
        if not kept:
            return None
        return pa.StructArray.from_arrays(
            [c for _, c in kept],
            fields=[f.with_type(c.type) for f, c in kept],
            mask=column.is_null(),
        )
    if pa.types.is_list(t):
        values = _typed_only(column.values)
        if values is None:
            return None
        return pa.ListArray.from_arrays(column.offsets, values, mask=column.is_null())
    return column


def landable(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its value's untyped parts left out (``_typed_only``); itself
    when it has none."""
    if VALUE_COLUMN not in batch.schema.names:
        return batch
    i = batch.schema.get_field_index(VALUE_COLUMN)
    if not _untyped(batch.schema.field(i).type):
        return batch
    value = _typed_only(batch.column(i))
    if value is None:
        value = pa.nulls(batch.num_rows, pa.struct([]))
    return batch.set_column(i, VALUE_COLUMN, value)


@dataclass(frozen=True)
class UndecodableSample:
    """What kept a read from inferring a value schema: the ``messages`` before the
    first payload that decodes (none when the range holds no message of the read's
    subjects), why each holds no value (``reasons``, in the words of a read's
    ``_corrupt_reason``), and the sequence the sink is past once it holds them
    (``through``)."""

    messages: pa.Table | None
    through: int
    reasons: list[str | None] = field(default_factory=list)


class ValueSchemas:
    """The codec each stream is decoded with (``codecs``: None where the payload lands
    as ``data``), its value schema inferred, kept and grown through one run."""

    def __init__(
        self,
        client: Any,
        codecs: dict[str, ValueCodec | None],
        filters: dict[str, str | Sequence[str]],
        resume_timeout: float,
    ) -> None:
        self.client = client
        self.filters = filters
        self.resume_timeout = resume_timeout
        # The codec to infer with, per JSON stream given no schema: it fails on a field
        # its schema lacks, so that the schema grows.
        self.growing = {
            s: dataclasses.replace(c, on_new_field="fail")
            for s, c in codecs.items()
            if c is not None and c.format == "json" and c.schema is None
        }
        self.codecs = {**codecs, **self.growing}
        # Per stream, the sequence whose new field a schema inferred from there lacked.
        self.ungrown: dict[str, int] = {}

    def codec(self, stream: str) -> ValueCodec:
        """The codec of a stream that has one."""
        codec = self.codecs[stream]
        assert codec is not None
        return codec

    def keep_inferred(self, stream: str, reader: Any) -> None:
        """Keep the schema ``reader`` inferred for the run's later reads: a field is
        then added once, when first met."""
        if stream in self.growing:
            value = reader.schema.field(VALUE_COLUMN).type
            self.codecs[stream] = dataclasses.replace(
                self.growing[stream], schema=pa.schema(list(value))
            )

    def grow(
        self, stream: str, error: NewFieldError, last_seq: int, queue: QueueReader | None = None
    ) -> None:
        """Add what message ``error.seq`` holds to the stream's value schema: inferred
        from the messages from there (the first of them is that message) up to
        ``last_seq``, read by range, or of a work queue as its consumer delivers them
        again."""
        assert error.seq is not None
        codec = self.growing[stream]
        known = self.codec(stream)
        assert known.schema is not None
        if queue is not None:
            inferred = queue.schema_from(error.seq, codec.format)
            seen = pa.struct(list(inferred) if inferred is not None else [])
        else:
            with self.client.read(
                stream,
                start_seq=error.seq,
                end_seq=max(error.seq, last_seq),
                subjects=self.filters.get(stream),
                codec=codec,
                batch_rows=1,
                resume_timeout=self.resume_timeout,
            ) as sample:
                seen = sample.schema.field(VALUE_COLUMN).type
        grown = grown_type(pa.struct(list(known.schema)), seen)
        if grown == pa.struct(list(known.schema)):
            # What was inferred from there on lacks the field: the message went before
            # this read (limits), and reading again passes it; or its payload is left
            # out of a sample (it did not decompress), and reading again fails again.
            if self.ungrown.get(stream) == error.seq:
                raise BadInputError(
                    f"stream {stream} seq {error.seq}: field {error.field!r} is not in the "
                    "value schema inferred from the messages from there; give the codec a "
                    "schema that has it"
                ) from error
            self.ungrown[stream] = error.seq
            return
        self.codecs[stream] = dataclasses.replace(known, schema=pa.schema(list(grown)))

    def undecodable_sample(
        self, stream: str, start: int, end: int, rows_per_batch: int
    ) -> UndecodableSample:
        """The messages from ``start`` that kept a read up to ``end`` from inferring
        the value schema: payloads that do not decode (JSON: are not objects), up to
        the first that does; none when the range holds no message of the read's
        subjects (it is behind the sink)."""
        stream_codec = self.codec(stream)
        # At most what the read sampled, and a batch: the next read looks further.
        limit = min(stream_codec.sample_rows or SAMPLE_ROWS, rows_per_batch)
        sample: list[pa.RecordBatch] = []
        taken = 0
        with self.client.read(
            stream,
            start_seq=start,
            end_seq=end,
            subjects=self.filters.get(stream),
            batch_rows=limit,
            resume_timeout=self.resume_timeout,
        ) as raw:
            for batch in raw:
                sample.append(batch.slice(0, limit - taken))
                taken += sample[-1].num_rows
                if taken >= limit:
                    break
        if taken == 0:
            # Only other subjects' messages (or none left) up to the range's end.
            return UndecodableSample(None, end)
        messages = pa.Table.from_batches(sample)
        # Why each payload holds no value, in the decoder's words (None: it holds one).
        reasons = no_value_reasons(stream_codec, stream, messages)
        bad = next((i for i, r in enumerate(reasons) if r is None), len(reasons))
        if bad == 0:
            # The read sees no value where these checks see one: a schema is needed.
            raise BadInputError(
                f"stream {stream}: no value schema can be inferred from its messages from "
                f"sequence {start}; give the codec a schema"
            )
        malformed = messages.slice(0, bad)
        # Every message of the sample read before the first good one is malformed:
        # the read's subjects filter out the rest.
        last = malformed.column("seq")[-1].as_py()
        through = last if bad < len(reasons) or taken >= limit else end
        return UndecodableSample(malformed, through, reasons[:bad])
