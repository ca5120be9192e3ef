"""``spark.read.format("jetstream")`` and ``df.write.format("jetstream")``.

The data source also serves ``readStream`` and ``writeStream``, with the stream reader
and writer of :mod:`.streaming`, which build on the read and publish paths here.

Built on Spark's Python Data Source API. A read plans partitions on the driver as
ranges of stream sequences and reads each on an executor as Arrow record batches. A
write publishes each task's Arrow batches through one publisher whose message ids are
``<write id>-<partition>-<row number>``: a retried task sends the same ids and the
server drops what it already stored (inside the stream's duplicate window).
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from types import FrameType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from .._read_ahead import ReadAhead
from ..client import Client
from ..exceptions import (
    BadInputError,
    ConnectionFailedError,
    JetStreamArrowError,
    NotFoundError,
    OperationTimeoutError,
    PublishError,
)
from ._columns import PublishColumns, arrow_schema, conform, message_schema
from .connection_cache import get_client
from .options import ReadOptions, WriteOptions, parse_read_options, parse_write_options

log = logging.getLogger("jetstream_arrow.spark")

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MAX_SEQ = 2**63 - 1
_MAX_TIME = _EPOCH + timedelta(microseconds=(2**63 - 1) // 1000)
_MAX_PUSHED_SUBJECTS = 256
# Resumptions of one range read after mid-read failures (see read_range).
_MAX_RESUMES = 10_000


class DataLossError(JetStreamArrowError):
    """Messages of the requested sequence range were removed from the stream (by its
    limits, a purge or a delete) before they could be read, and ``failOnDataLoss`` is
    true. ``first`` and ``last`` are the removed sequences."""

    def __init__(self, message: str, first: int = 0, last: int = 0) -> None:
        super().__init__(message)
        self.first = first
        self.last = last


# -- helpers shared by the data source and the mapInArrow functions ----------------------


def _micros(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def _from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def stream_state(client: Client, stream: str) -> Any:
    """The stream's state, with a missing stream reported against option 'stream'."""
    try:
        return client.stream_info(stream).state
    except NotFoundError as err:
        raise BadInputError(
            f"option 'stream': there is no stream {stream!r} "
            f"(JetStream API {client.options.js_api_prefix}): {err.description or err}"
        ) from None


def first_available(state: Any) -> int:
    """The lowest sequence the stream still holds (last + 1 when it is empty)."""
    return int(state.first_seq) if state.messages else int(state.last_seq) + 1


def first_seq_at(client: Client, stream: str, when: datetime) -> int | None:
    """The sequence of the first message stored at or after ``when``, or None."""
    if when >= _MAX_TIME:
        # The engine takes times as int64 nanoseconds; no message is stored that late.
        return None
    reader = client.read(stream, start_time=when, batch_rows=1)
    try:
        for batch in reader:
            if batch.num_rows:
                return int(batch.column("seq")[0].as_py())
        return None
    finally:
        reader.close()


def check_data_loss(
    client: Client, stream: str, start: int, end: int, what: str, state: Any = None
) -> int:
    """Raise :class:`DataLossError` when sequences ``start..end`` begin below what the
    stream still holds; return the first sequence still held."""
    if state is None:
        state = stream_state(client, stream)
    available = first_available(state)
    if start < available and start <= int(state.last_seq):
        last_lost = min(end, available - 1)
        raise DataLossError(
            f"option 'failOnDataLoss': messages {start}..{last_lost} of stream {stream!r} "
            f"({what}) were removed (by the stream's limits, a purge or a delete) before "
            f"they could be read; the stream now starts at sequence {available}. "
            "Set failOnDataLoss=false to read what is left.",
            start,
            last_lost,
        )
    return available


def read_range(
    client: Client,
    opts: ReadOptions,
    stream: str,
    start: int,
    end: int | None,
    subjects: Sequence[str] | None,
    target: pa.Schema,
) -> Iterator[pa.RecordBatch]:
    """Messages ``start..end`` (inclusive) of ``stream`` as batches in ``target``'s schema.

    A read that fails after it delivered messages resumes after the last one it
    delivered (a fresh reader, at most ``_MAX_RESUMES`` times), and so does one that
    ends before ``end``. An unfiltered read of a stream without deleted messages
    must return every sequence of the range; fewer is an error, never a silent loss.
    """
    state = stream_state(client, stream)
    if opts.fail_on_data_loss:
        what = f"range {start}..{end if end is not None else 'end'}"
        check_data_loss(client, stream, start, end if end is not None else _MAX_SEQ, what, state)
    last = int(state.last_seq) if end is None else min(end, int(state.last_seq))
    next_seq, received, resumes = start, 0, 0
    while next_seq <= last:
        progressed = False
        reader = client.read(
            stream,
            start_seq=next_seq,
            end_seq=last,
            subjects=list(subjects) if subjects else None,
            include_headers=opts.include_headers,
            batch_rows=opts.batch_rows,
            max_bytes=opts.max_bytes,
            heartbeat=opts.heartbeat,
        )
        try:
            for batch in reader:
                if batch.num_rows:
                    progressed = True
                    received += batch.num_rows
                    next_seq = int(batch.column("seq")[-1].as_py()) + 1
                    yield conform(batch, target)
        except (BadInputError, OperationTimeoutError, ConnectionFailedError) as err:
            if not progressed or resumes >= _MAX_RESUMES:
                raise
            resumes += 1
            log.info("read of %s resumes at sequence %d after: %s", stream, next_seq, err)
        finally:
            # Also when Spark stops early (a limit) or the task is cancelled: the
            # reader's consumer is deleted on the server right away.
            reader.close()
        if not progressed:
            break
    if subjects is None and start <= last:
        _check_complete(client, stream, start, last, received)


def _check_complete(client: Client, stream: str, start: int, last: int, received: int) -> None:
    state = stream_state(client, stream)
    if state.num_deleted == 0 and first_available(state) <= start:
        expected = last - start + 1
        if received != expected:
            raise JetStreamArrowError(
                f"the read of stream {stream!r} sequences {start}..{last} returned {received} "
                f"messages where the stream holds {expected}; the read is incomplete"
            )


def report(message: str, level: int = logging.INFO) -> None:
    """Log a job report; to stderr (the driver's console) when logging is not set up."""
    if log.hasHandlers():
        log.log(level, message)
    else:
        print(f"jetstream_arrow.spark: {message}", file=sys.stderr, flush=True)


# -- read ----------------------------------------------------------------------------------


class SequenceRange(InputPartition):
    """One Spark partition: stream sequences ``start..end`` (inclusive).

    Holds no connection options, so nothing secret is shown where Spark prints
    partitions."""

    def __init__(self, index: int, start: int, end: int) -> None:
        super().__init__((start, end))
        self.index = index
        self.start = start
        self.end = end


def split_range(
    start: int, end: int, min_partitions: int, max_per_partition: int
) -> list[SequenceRange]:
    """``start..end`` in contiguous ranges: at least ``min_partitions`` (one sequence
    each at most), none longer than ``max_per_partition``."""
    span = end - start + 1
    if span <= 0:
        return []
    count = min(span, max(min_partitions, math.ceil(span / max_per_partition)))
    size, extra = divmod(span, count)
    ranges = []
    lo = start
    for i in range(count):
        hi = lo + size + (1 if i < extra else 0) - 1
        ranges.append(SequenceRange(i, lo, hi))
        lo = hi + 1
    return ranges


@dataclass
class _Pushed:
    """What pushed-down filters allow: a sequence range, a time range (microseconds,
    end exclusive), literal subjects and subject prefixes."""

    seq_lo: int = 1
    seq_hi: int = _MAX_SEQ
    time_lo: int | None = None
    time_hi: int | None = None
    subjects: set[str] | None = None
    prefixes: list[str] = field(default_factory=list)

    def subject_filters(self) -> list[str] | None:
        """NATS subject filters for the pushed subject predicates ([] matches nothing)."""
        if self.subjects is not None:
            return sorted(s for s in self.subjects if all(s.startswith(p) for p in self.prefixes))
        if self.prefixes:
            longest = max(self.prefixes, key=len)
            if all(longest.startswith(p) for p in self.prefixes):
                return [longest + ">"]
            return []
        return None


def _literal_subject(value: Any) -> bool:
    return (
        isinstance(value, str)
        and bool(value)
        and not any(c in value for c in " \t\r\n*>")
        and all(value.split("."))
    )


class JetStreamReader(DataSourceReader):
    """A batch read of one stream. Partitions are planned on the driver."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.pushed = _Pushed()

    def __repr__(self) -> str:
        return f"JetStreamReader(stream={self.opts.stream!r})"

    # The planning step, in a Python process on the driver.
    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        client = get_client(opts.connect)
        state = stream_state(client, opts.stream)
        last = int(state.last_seq)
        available = first_available(state)

        start = opts.start_seq
        if start is not None and opts.fail_on_data_loss:
            check_data_loss(
                client, opts.stream, start, opts.end_seq or last, "option 'startingSequence'"
            )
        if start is None and opts.start_time is not None:
            found = first_seq_at(client, opts.stream, opts.start_time)
            start = found if found is not None else last + 1
        start = max(start or 1, available, self.pushed.seq_lo)

        end = min(last, self.pushed.seq_hi)
        if opts.end_seq is not None:
            end = min(end, opts.end_seq)
        if opts.end_time is not None:
            found = first_seq_at(client, opts.stream, opts.end_time)
            if found is not None:
                end = min(end, found - 1)
        if self.pushed.time_lo is not None and start <= end:
            found = first_seq_at(client, opts.stream, _from_micros(self.pushed.time_lo))
            start = max(start, found if found is not None else last + 1)
        if self.pushed.time_hi is not None and start <= end:
            found = first_seq_at(client, opts.stream, _from_micros(self.pushed.time_hi))
            if found is not None:
                end = min(end, found - 1)
        if self.pushed.subject_filters() == []:
            return []
        return list(split_range(start, end, opts.min_partitions, opts.max_messages_per_partition))

    def _subjects(self) -> list[str] | None:
        if self.opts.subjects is not None:
            return list(self.opts.subjects)
        return self.pushed.subject_filters()

    # On an executor.
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SequenceRange):
            return iter(())  # Spark's placeholder partition of an empty read
        client = get_client(self.opts.connect)
        return read_range(
            client,
            self.opts,
            self.opts.stream,
            partition.start,
            partition.end,
            self._subjects(),
            arrow_schema(self.schema),
        )


class JetStreamPushdownReader(JetStreamReader):
    """The reader with filter pushdown, used when Spark plans with pushdown enabled.

    Predicates on ``seq`` narrow the planned sequence range exactly; ``subject``
    equality, ``IN`` and prefixes ending in ``.`` become subject filters (only when
    option ``subjects`` is not given); predicates on ``timestamp`` narrow the range
    too but are left for Spark to check as well. Everything else is Spark's.
    """

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        return [f for f in filters if not self._push(f)]

    def _push(self, f: Filter) -> bool:
        """Apply ``f`` to the planned read; True when the read alone makes it hold."""
        attribute = getattr(f, "attribute", None)
        if attribute == ("seq",):
            return self._push_seq(f)
        if attribute == ("timestamp",):
            self._push_time(f)
            return isinstance(f, IsNotNull)
        if attribute == ("subject",) and self.opts.subjects is None:
            return self._push_subject(f)
        return False

    def _push_seq(self, f: Filter) -> bool:
        p = self.pushed
        if isinstance(f, IsNotNull):
            return True
        value: Any = getattr(f, "value", None)
        if isinstance(f, In):
            values = [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
            if values and len(values) == len(value):
                p.seq_lo, p.seq_hi = max(p.seq_lo, min(values)), min(p.seq_hi, max(values))
            return False
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        if isinstance(f, EqualTo):
            p.seq_lo, p.seq_hi = max(p.seq_lo, value), min(p.seq_hi, value)
        elif isinstance(f, GreaterThan):
            p.seq_lo = max(p.seq_lo, value + 1)
        elif isinstance(f, GreaterThanOrEqual):
            p.seq_lo = max(p.seq_lo, value)
        elif isinstance(f, LessThan):
            p.seq_hi = min(p.seq_hi, value - 1)
        elif isinstance(f, LessThanOrEqual):
            p.seq_hi = min(p.seq_hi, value)
        else:
            return False
        return True

    def _push_time(self, f: Filter) -> None:
        value: Any = getattr(f, "value", None)
        if not isinstance(value, datetime) or value.tzinfo is None:
            return
        us = _micros(value)
        p = self.pushed
        lo, hi = None, None  # hi exclusive
        if isinstance(f, EqualTo):
            lo, hi = us, us + 1
        elif isinstance(f, GreaterThan):
            lo = us + 1
        elif isinstance(f, GreaterThanOrEqual):
            lo = us
        elif isinstance(f, LessThan):
            hi = us
        elif isinstance(f, LessThanOrEqual):
            hi = us + 1
        if lo is not None:
            p.time_lo = lo if p.time_lo is None else max(p.time_lo, lo)
        if hi is not None:
            p.time_hi = hi if p.time_hi is None else min(p.time_hi, hi)

    def _push_subject(self, f: Filter) -> bool:
        p = self.pushed
        if isinstance(f, IsNotNull):
            return True
        value: Any = getattr(f, "value", None)
        if isinstance(f, EqualTo) and _literal_subject(value):
            values = {value}
        elif (
            isinstance(f, In)
            and 0 < len(value) <= _MAX_PUSHED_SUBJECTS
            and all(_literal_subject(v) for v in value)
        ):
            values = set(value)
        elif (
            isinstance(f, StringStartsWith)
            and isinstance(value, str)
            and value.endswith(".")
            and _literal_subject(value[:-1])
        ):
            # Subjects have no empty tokens, so "starts with 'a.b.'" is exactly "a.b.>".
            p.prefixes.append(value)
            return True
        else:
            return False
        p.subjects = values if p.subjects is None else p.subjects & values
        return True


def _planning_with_pushdown() -> bool:
    """True when Spark asks for this reader in order to push filters into it.

    Spark refuses to plan a reader that implements ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false, and the data source is not
    told the setting. It does call ``reader()`` from a worker module of its own for
    pushdown, so that call is recognised by its caller and only then gets the reader
    with pushdown. Anything else gets the plain reader, which is always correct.
    """
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
            return True
        frame = frame.f_back
    return False


# -- write ---------------------------------------------------------------------------------


@dataclass
class JetStreamCommitMessage(WriterCommitMessage):
    """What one write task did."""

    partition: int
    attempt: int
    rows: int
    stored: int
    duplicates: int
    first_seq: int | None
    last_seq: int | None


@dataclass
class _Tally:
    rows: int = 0
    stored: int = 0
    duplicates: int = 0
    first_seq: int | None = None
    last_seq: int | None = None

    def add(self, result: Any) -> None:
        self.rows += result.rows
        self.stored += result.stored
        self.duplicates += result.duplicates
        seqs = result.acks.column("seq")
        if seqs.null_count < len(seqs):
            lo, hi = pc.min(seqs).as_py(), pc.max(seqs).as_py()
            self.first_seq = lo if self.first_seq is None else min(self.first_seq, lo)
            self.last_seq = hi if self.last_seq is None else max(self.last_seq, hi)


def _task_ids() -> tuple[int, int, int]:
    """(stage id, partition id, attempt number) of the running Spark task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, 0, 0
    return ctx.stageId(), ctx.partitionId(), ctx.attemptNumber()


def publish_batches(
    opts: WriteOptions,
    columns: PublishColumns,
    batches: Iterator[pa.RecordBatch],
    msg_id_prefix: str,
    tally: _Tally,
    where: str,
) -> Iterator[Any]:
    """Publish the batches through one publisher; yield a PublishResult per group of
    batches (see ``Publisher.publish_batches``), rows in input order.

    Spark's batches are read a few ahead in a thread, so that Spark handing over the
    next batch overlaps the publishing of this one, and the ack window stays full
    across batches. An engine error says what was stored before it."""
    client = get_client(opts.connect)
    publisher = client.publisher(
        opts.subject,
        msg_id_prefix=msg_id_prefix,
        raise_on_error=False,
        **opts.publisher_kwargs(),
    )
    selected = (columns.select(batch) for batch in batches if batch.num_rows)
    read_ahead = ReadAhead(selected, depth=2, name="jetstream-arrow-spark-input")
    try:
        results = publisher.publish_batches(read_ahead)
        while True:
            try:
                result = next(results)
            except StopIteration:
                return
            except JetStreamArrowError as err:
                if hasattr(err, "add_note"):
                    err.add_note(
                        f"{where}: before these rows {tally.stored} messages were stored "
                        f"and {tally.duplicates} were duplicates"
                    )
                raise
            tally.add(result)
            yield result
    finally:
        read_ahead.close()
        publisher.close()


def publish_task(
    opts: WriteOptions,
    columns: PublishColumns,
    batches: Iterator[pa.RecordBatch],
    msg_id_prefix: str,
    where: str,
) -> _Tally:
    """Publish one write task's batches; raise PublishError at the first group of
    batches with rows that were not stored (the task fails, and its retry sends the
    same ids)."""
    tally = _Tally()
    for result in publish_batches(opts, columns, batches, msg_id_prefix, tally, where):
        if result.failed:
            first = result.failed_rows().slice(0, 1).to_pylist()[0]
            raise PublishError(
                f"{where}: {result.failed} of {result.rows} rows published together were not "
                f"stored (first: {first['error']}); this task stored {tally.stored} "
                f"messages and found {tally.duplicates} duplicates so far. A retry of "
                "the task sends the same message ids, so it stores only what is missing.",
                result,
            )
    return tally


def published_summary(done: Sequence[JetStreamCommitMessage], tasks: int) -> str:
    """What the finished tasks of a write published, for the commit and abort reports."""
    stored = sum(m.stored for m in done)
    duplicates = sum(m.duplicates for m in done)
    rows = sum(m.rows for m in done)
    firsts = [m.first_seq for m in done if m.first_seq is not None]
    lasts = [m.last_seq for m in done if m.last_seq is not None]
    seqs = f", sequences {min(firsts)}..{max(lasts)}" if firsts else ""
    return (
        f"{len(done)} of {tasks} task(s) published "
        f"{rows} rows: {stored} stored, {duplicates} duplicates{seqs}"
    )


class JetStreamWriter(DataSourceArrowWriter):
    """Publishes each task's Arrow batches; idempotent across task retries."""

    def __init__(self, opts: WriteOptions, columns: PublishColumns) -> None:
        self.opts = opts
        self.columns = columns

    def __repr__(self) -> str:
        return f"JetStreamWriter(write_id={self.opts.write_id!r})"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> JetStreamCommitMessage:
        _, partition, attempt = _task_ids()
        where = f"write {self.opts.write_id}, partition {partition}, attempt {attempt}"
        prefix = f"{self.opts.write_id}-{partition}-"
        tally = publish_task(self.opts, self.columns, iterator, prefix, where)
        return JetStreamCommitMessage(partition, attempt, **asdict(tally))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        done = [m for m in messages if isinstance(m, JetStreamCommitMessage)]
        report(self.summary("committed", done, len(messages)))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = [m for m in messages if isinstance(m, JetStreamCommitMessage)]
        failed = len(messages) - len(done)
        report(
            self.summary("failed", done, len(messages))
            + f"; {failed} task(s) failed and may have stored part of their rows. "
            "Messages already stored stay in the stream. To finish the write without "
            f"duplicates, run it again with option writeId={self.opts.write_id} (same "
            "data, same partitioning) within the stream's duplicate window.",
            logging.WARNING,
        )

    def summary(self, what: str, done: list[JetStreamCommitMessage], tasks: int) -> str:
        return f"write {self.opts.write_id} {what}: {published_summary(done, tasks)}"


# -- the data source -------------------------------------------------------------------------


def checked_schema(opts: ReadOptions, schema: StructType) -> StructType:
    """The message schema of a read, refusing a different user-given schema."""
    expected = message_schema(opts.include_headers)
    if [(f.name, f.dataType) for f in schema.fields] != [
        (f.name, f.dataType) for f in expected.fields
    ]:
        raise BadInputError(
            f"a jetstream read has the schema {expected.simpleString()}, not "
            f"{schema.simpleString()}; drop .schema(...) (option 'includeHeaders' "
            "adds the headers column)"
        )
    return expected


def refuse_overwrite(overwrite: bool, streaming: bool = False) -> None:
    """A stream is not a table: its messages cannot be replaced by a write."""
    if overwrite and streaming:
        # Spark asks a streaming sink to overwrite for outputMode("complete").
        raise BadInputError(
            "outputMode('complete') is not supported: it replaces what the sink holds "
            "with each micro-batch, and a stream's messages cannot be replaced. Use "
            "outputMode('append') to publish each micro-batch's rows as new messages."
        )
    if overwrite:
        raise BadInputError(
            "mode('overwrite') is not supported: a stream is not a table, its messages "
            "cannot be replaced. Use mode('append') to publish the rows as new messages "
            "(purge the stream first if it must start empty)."
        )


class JetStreamDataSource(DataSource):
    """Format ``"jetstream"``: batch and streaming reads of a stream, and Arrow writes
    (batch and streaming) into streams."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def __repr__(self) -> str:
        return "JetStreamDataSource()"

    def schema(self) -> StructType:
        # Spark asks for the schema before it says whether the read is a batch or a
        # streaming one; reader() and streamReader() check the options for their kind.
        opts = parse_read_options(self.options, need_stream=False, queries=None)
        return message_schema(opts.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_read_options(self.options)
        expected = checked_schema(opts, schema)
        cls = JetStreamPushdownReader if _planning_with_pushdown() else JetStreamReader
        return cls(opts, expected)

    def writer(self, schema: StructType, overwrite: bool) -> JetStreamWriter:
        refuse_overwrite(overwrite)
        opts = parse_write_options(self.options)
        return JetStreamWriter(opts, self._publish_columns(opts, schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        # Imported here: streaming.py builds on this module's read and write paths.
        from .streaming import JetStreamStreamReader

        opts = parse_read_options(self.options, queries="stream")
        return JetStreamStreamReader(opts, checked_schema(opts, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .streaming import JetStreamStreamWriter

        refuse_overwrite(overwrite, streaming=True)
        opts = parse_write_options(self.options, queries="stream")
        return JetStreamStreamWriter(opts, self._publish_columns(opts, schema))

    @staticmethod
    def _publish_columns(opts: WriteOptions, schema: StructType) -> PublishColumns:
        return PublishColumns.resolve(
            arrow_schema(schema),
            constant_subject=opts.subject is not None,
            msg_id_column=opts.msg_id_column,
        )
