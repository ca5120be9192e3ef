"""``Client.publish(..., writer=...)``: one call's rows published exactly once at any age.

A writer's rows go through [`NumberedRows`][jetstream_arrow.exactly_once.NumberedRows]
(rows numbered by their place in the input, msg ids ``ja.w.<writer>:<n>``) or, when
the input is a read of a stream (it has the read's ``stream`` and ``seq`` columns, a
copy), through [`CopiedRows`][jetstream_arrow.exactly_once.CopiedRows]. Both skip
the rows the target stream holds already, so the result is made here from their
results and those skipped rows: one row per input row, as any publish's result.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from . import _core
from .exactly_once import CopiedRows, NumberedRows, held_copies
from .exceptions import BadInputError, JetStreamArrowError, PublishError
from .options import PublishOptions

#: The start of every msg id a numbered writer gives its rows: ``ja.w.<writer>:<n>``.
#: A stream name has no ``.``, so no copy's id (``<stream>:<seq>:<digest>``) or dead
#: letter's (``<stream>:<seq>:<reader>``) starts like it, and the row number after the
#: last ``:`` tells two writers apart even when one's identity starts with another's.
WRITER_ID_PREFIX = "ja.w."

#: The columns a read adds that make a table a copy (the core's ``is_read``).
_STREAM, _SEQ = "stream", "seq"

_ACKS = pa.schema(
    [
        pa.field("seq", pa.int64()),
        pa.field("duplicate", pa.bool_(), nullable=False),
        pa.field("error", pa.string()),
    ]
)


def writer_msg_id_prefix(writer: str) -> str:
    """The prefix of writer ``writer``'s msg ids: row ``n`` is ``<prefix><n>``."""
    return f"{WRITER_ID_PREFIX}{writer}:"


def is_copy(schema: pa.Schema) -> bool:
    """Whether rows of ``schema`` are published as a copy: a ``stream`` column of text
    and an integer ``seq`` column, as the core decides."""
    names = schema.names
    if _STREAM not in names or _SEQ not in names:
        return False
    text = schema.field(_STREAM).type
    if pa.types.is_dictionary(text):
        text = text.value_type
    return bool(
        (
            pa.types.is_string(text)
            or pa.types.is_large_string(text)
            or pa.types.is_string_view(text)
        )
        and pa.types.is_integer(schema.field(_SEQ).type)
    )


def as_reader(data: Any) -> pa.RecordBatchReader:
    """``data`` (anything with the Arrow PyCapsule interface) as batches."""
    if isinstance(data, pa.RecordBatchReader):
        return data
    if isinstance(data, pa.Table):
        return data.to_reader()
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatchReader.from_batches(data.schema, [data])
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data)
    if hasattr(data, "__arrow_c_array__"):
        batch = pa.record_batch(data)
        return pa.RecordBatchReader.from_batches(batch.schema, [batch])
    raise BadInputError(
        f"publish takes an Arrow table, batch or stream (the Arrow PyCapsule interface), "
        f"got {type(data).__name__}"
    )


def target_stream(client: Any, settings: PublishOptions, schema: pa.Schema) -> str:
    """The stream a writer's rows go to: ``expected_stream``, else the stream that
    stores the constant subject."""
    if settings.expected_stream:
        return settings.expected_stream
    if settings.subject is None:
        raise BadInputError(
            "option 'writer' needs the target stream, which holds the writer's position: "
            "give option 'expected_stream' (the rows' subjects come from column 'subject', "
            "which may name any stream)"
            if "subject" in schema.names
            else "option 'writer': give a subject (or option 'expected_stream')"
        )
    names = client.stream_names(subject=settings.subject)
    if len(names) != 1:
        raise BadInputError(
            f"option 'writer' needs the stream that stores subject {settings.subject!r}, "
            f"and {'none does' if not names else f'several do: {names}'}; give option "
            "'expected_stream'"
        )
    return str(names[0])


class _Input:
    """The input's batches as they pass to the writer, with which rows it skips:
    a writer's results cover the rows it did not skip, in order."""

    def __init__(self, reader: pa.RecordBatchReader, copy: bool) -> None:
        self.reader = reader
        self.copy = copy
        self.skipped: list[pa.Array] = []  # per batch, True where the writer skips a row
        self.rows = 0
        self._skip: Any = None
        self._source: str | None = None
        self._top: int | None = None

    def skip_numbered(self, start: int, resume: int, stored: set[int]) -> None:
        stored_array = pa.array(sorted(stored), pa.int64())

        def skip(batch: pa.RecordBatch) -> pa.Array:
            numbers = pa.array(range(start + self.rows, start + self.rows + batch.num_rows))
            return pc.or_(pc.less(numbers, resume), pc.is_in(numbers, value_set=stored_array))

        self._skip = skip

    def skip_copied(self, next_seq: int, found: dict[int, int]) -> None:
        def skip(batch: pa.RecordBatch) -> pa.Array:
            return held_copies(batch.column(_SEQ), next_seq, found)

        self._skip = skip

    def _check_copy(self, batch: pa.RecordBatch) -> None:
        """A copy's position is one source sequence: its rows must come from one
        stream, in source order, each message's rows in one batch."""
        if batch.num_rows == 0:
            return
        streams = pc.unique(pc.cast(batch.column(_STREAM), pa.string())).to_pylist()
        for source in streams:
            if source is not None and self._source not in (None, source):
                raise BadInputError(
                    f"column 'stream': a copy published with option 'writer' is of one "
                    f"stream (the writer's position is a sequence of it), got rows of "
                    f"{self._source!r} and {source!r}; publish each stream with a writer "
                    "of its own"
                )
            self._source = source or self._source
        seqs = pc.cast(batch.column(_SEQ), pa.int64())
        low, high = pc.min(seqs).as_py(), pc.max(seqs).as_py()
        if low is not None and self._top is not None and low <= self._top:
            raise BadInputError(
                f"column 'seq', row {self.rows}: a copy published with option 'writer' "
                f"must be in source order, each message's rows in one batch (seq {low} "
                f"follows a batch that reached seq {self._top})"
            )
        if high is not None:
            self._top = high

    def batches(self) -> Iterator[pa.RecordBatch]:
        for batch in self.reader:
            if self.copy:
                self._check_copy(batch)
            self.skipped.append(self._skip(batch))
            self.rows += batch.num_rows
            yield batch

    def drain(self) -> None:
        """Count the rows the writer did not take (it stopped at a failed row)."""
        for _ in self.batches():
            pass


def merged_result(results: list[Any], given: _Input, result_type: Any) -> Any:
    """One result for the whole input: the writer's results for the rows it sent,
    skipped rows as duplicates (seq null: the stream holds them already), and rows
    after a failure that stopped the writer as failed, not sent."""
    acks = pa.concat_tables([r.acks for r in results]) if results else _ACKS.empty_table()
    sent = acks.num_rows
    skip = pa.chunked_array(given.skipped, pa.bool_()).combine_chunks()
    # The writer's results are its unskipped rows in order: the k-th unskipped input
    # row is row k of ``acks``; a row past them takes the "not sent" template.
    rank = pc.subtract(pc.cumulative_sum(pc.cast(pc.invert(skip), pa.int64())), 1)
    index = pc.if_else(skip, sent, pc.if_else(pc.less(rank, sent), rank, sent + 1))
    unskipped = len(skip) - int(pc.sum(skip).as_py() or 0)
    templates = {
        "duplicate": [True, False],
        "error": [
            None,
            "not sent: an earlier row failed and the writer stopped there (a re-run with "
            "the same writer sends it)",
        ],
    }
    rows = pa.table(
        {
            name: pa.array(templates.get(name, [None, None]), acks.schema.field(name).type)
            for name in acks.schema.names
        },
        schema=acks.schema,
    )
    merged = pa.concat_tables([acks, rows]).take(index).combine_chunks()
    error_codes = None
    if any(r.error_codes is not None for r in results):
        # Each sent row's code where it failed with one, in the rows' order as above.
        codes = [
            r.error_codes if r.error_codes is not None else pa.nulls(r.rows, pa.uint32())
            for r in results
        ]
        error_codes = pa.concat_arrays([*codes, pa.nulls(2, pa.uint32())]).take(index)
    return result_type(
        rows=len(skip),
        stored=sum(r.stored for r in results),
        duplicates=sum(r.duplicates for r in results) + len(skip) - unskipped,
        failed=sum(r.failed for r in results) + max(unskipped - sent, 0),
        acks=merged,
        resends=sum(r.resends for r in results),
        late_replies=sum(r.late_replies for r in results),
        error_codes=error_codes,
    )


@dataclasses.dataclass(frozen=True)
class WriterInput:
    """A writer's input, checked, and the stream it goes to."""

    reader: pa.RecordBatchReader
    copy: bool
    stream: str


def writer_input(client: Any, data: Any, writer: str, settings: PublishOptions) -> WriterInput:
    """Check a publish with option ``writer`` and find its target stream."""
    if not isinstance(writer, str) or not writer:
        raise BadInputError(f"option 'writer' must be a non-empty string, got {writer!r}")
    if settings.msg_id_prefix is not None:
        raise BadInputError(
            "options 'writer' and 'msg_id_prefix' exclude each other: a writer's rows "
            f"are numbered under msg ids {writer_msg_id_prefix(writer)}<n>"
        )
    reader = as_reader(data)
    copy = is_copy(reader.schema)
    if not copy and "msg_id" in reader.schema.names:
        raise BadInputError(
            "column 'msg_id' with option 'writer': a writer numbers its rows (msg ids "
            f"{writer_msg_id_prefix(writer)}<n>) to find them again; drop the column"
        )
    return WriterInput(reader, copy, target_stream(client, settings, reader.schema))


def _peek_source(reader: pa.RecordBatchReader) -> tuple[pa.RecordBatchReader, str | None]:
    """``reader`` as it was, and the source stream its first row was read from."""
    batches = iter(reader)
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        return pa.RecordBatchReader.from_batches(reader.schema, []), None
    source = first.column(_STREAM)[0].as_py()
    rest = pa.RecordBatchReader.from_batches(reader.schema, itertools.chain([first], batches))
    return rest, None if source is None else str(source)


def publish_as_writer(
    client: Any,
    given_input: WriterInput,
    *,
    writer: str,
    exact: bool,
    writer_lease: float | None,
    position_rows: int | None,
    settings: PublishOptions,
    codec: Any,
    result_type: Any,
) -> Any:
    """Publish ``given_input`` as writer ``writer`` (see ``Client.publish``): exactly
    once at any age when ``exact``, else within the duplicate window, under the same
    msg ids. The result (a ``result_type``, ``PublishResult``) covers every input row
    and is not raised on failed rows."""
    reader, copy, stream = given_input.reader, given_input.copy, given_input.stream
    if position_rows is not None and (
        isinstance(position_rows, bool) or not isinstance(position_rows, int) or position_rows < 1
    ):
        raise BadInputError(f"option 'position_rows' must be at least 1, got {position_rows!r}")
    if copy and position_rows is not None:
        raise BadInputError(
            "option 'position_rows' is for numbered rows: a copy (the input has the read's "
            "'stream' and 'seq' columns) records its position after every "
            f"{_core.DEFAULT_POSITION_ROWS:,} rows"
        )
    if not exact:
        if writer_lease is not None or position_rows is not None:
            given_option = "writer_lease" if writer_lease is not None else "position_rows"
            raise BadInputError(
                f"option {given_option!r} is for a writer that keeps its position, and this "
                "publish does not (exactly_once=False, or its stream cannot hold positions): "
                "drop the option"
            )
        window_only = (
            settings
            if copy
            else dataclasses.replace(settings, msg_id_prefix=writer_msg_id_prefix(writer))
        )
        return client.publish(reader, options=window_only, codec=codec, raise_on_error=False)
    options = dataclasses.replace(
        settings, expected_stream=stream, msg_id_prefix=None, msg_id_start=None
    )
    given = _Input(reader, copy)
    results: list[Any] = []
    sends: Iterator[Any]
    try:
        if copy:
            # The copy's source stream (its first row's), so its read-back collects
            # only copies of that source: another source's copies share sequences.
            reader, source = _peek_source(reader)
            given = _Input(reader, copy)
            copied = CopiedRows(
                client,
                stream,
                writer,
                source=source,
                lease=writer_lease,
                options=options,
                codec=codec,
            )
            position = copied.claim()
            given.skip_copied(position.next, copied.stored_source_seqs())
            sends = copied.publish(given.batches())
        else:
            start = int(settings.msg_id_start or 0)
            prefix = writer_msg_id_prefix(writer)
            numbered = NumberedRows(
                client,
                stream,
                writer,
                prefix,
                start=start,
                position_rows=position_rows,
                lease=writer_lease,
                options=options,
                codec=codec,
            )
            position = numbered.claim()
            stored = {
                int(i[len(prefix) :]) for i in position.stored_ids if i[len(prefix) :].isdigit()
            }
            given.skip_numbered(start, max(position.next, start), stored)
            sends = numbered.publish(given.batches())
        for sent in sends:
            results.append(sent.result)
        given.drain()
    except JetStreamArrowError as err:
        # What was acknowledged is reported, never lost: the rows taken so far.
        # An input error carries the result of the rows its publish took; a
        # PublishError here is a position's, not of rows.
        partial = getattr(err, "result", None)
        if partial is not None and not isinstance(err, PublishError):
            results.append(partial)
        err.result = merged_result(results, given, result_type)
        raise
    return merged_result(results, given, result_type)
