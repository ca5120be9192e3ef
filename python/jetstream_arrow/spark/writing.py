"""Publishing Spark's Arrow batches: the write task, its commit message and reports,
and the driver-side checks before a write.

A task publishes its batches through one publisher whose message ids are
``<prefix><row number>``, the prefix naming the write and the partition: a retried
task sends the same ids and the server drops what it already stored (inside the
stream's duplicate window). The batch writer (:mod:`.batch_writer`), the stream
writer (:mod:`.stream_writer`) and ``publish_fn`` (:mod:`.functions`) differ only in
that prefix and in what they tell the user when a write ends. With ``exactlyOnce`` a
task keeps its position in the stream too (:mod:`.exactly_once`): any age is exact.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import WriterCommitMessage

from .. import _core
from .._read_ahead import ReadAhead
from .._subjects import subject_matches
from ..exceptions import BadInputError, JetStreamArrowError, NotFoundError, PublishError
from ..kv import KvColumns
from .columns import PublishColumns
from .connection_cache import get_client
from .exactly_once import ExactlyOnceTask, SkippedRows, publish_exactly_once
from .options import WriteOptions
from .stream_lookup import PATIENCE
from .value_codec import write_codec

log = logging.getLogger("jetstream_arrow.spark")


def report(message: str, level: int = logging.INFO) -> None:
    """Log a job report; to stderr (the driver's console) when logging is not set up."""
    if log.hasHandlers():
        log.log(level, message)
    else:
        print(f"jetstream_arrow.spark: {message}", file=sys.stderr, flush=True)


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


def check_expected_stream(opts: WriteOptions) -> None:
    """On the driver, before any task runs: the stream a write names (option 'stream',
    'expectedStream' or the path given to save()) exists. Otherwise every row would
    fail with the server's answer to its ``Nats-Expected-Stream`` header, which names
    neither the stream nor the cause ("expected stream does not match", 10060, when
    another stream stores the subject)."""
    name = opts.expected_stream
    if name is None:
        return
    client = get_client(opts.connect)
    try:
        client.stream_info(name, resume_timeout=PATIENCE)
    except NotFoundError:
        raise BadInputError(
            f"there is no stream {name!r} to write into (named by option 'stream', "
            f"'expectedStream' or the path given to save(); JetStream API "
            f"{client.options.js_api_prefix}): create it first with the subjects the rows "
            f"are published to, e.g. client.create_stream({name!r}, subjects=[...])"
        ) from None


class StreamSubjects:
    """The subjects a stream stores, to refuse rows that another stream would store:
    a counter increment goes without the ``Nats-Expected-Stream`` header that refuses
    them elsewhere, and would count in another stream's counter."""

    def __init__(self, client: Any, stream: str, subject: str | None) -> None:
        config = client.stream_info(stream, resume_timeout=PATIENCE).config
        self.stream = stream
        self.filters = list(config.subjects or [])
        self.subject = subject  # option 'subject': every row's, without a subject column
        self.rows = 0

    def checked(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if "subject" in batch.schema.names:
                subjects = batch.column("subject")
                for subject in pc.unique(subjects).to_pylist():
                    if subject is not None and not self._stores(subject):
                        row = self.rows + int(pc.index(subjects, subject).as_py())
                        self._refuse(subject, f"row {row} of this task's input")
            elif self.subject is not None and not self._stores(self.subject):
                self._refuse(self.subject, "option 'subject'")
            self.rows += batch.num_rows
            yield batch

    def _stores(self, subject: str) -> bool:
        return any(subject_matches(f, subject) for f in self.filters)

    def _refuse(self, subject: str, where: str) -> None:
        raise BadInputError(
            f"{where}: stream {self.stream!r} (named by option 'stream', 'expectedStream' "
            f"or the path given to save()) does not store subject {subject!r} (its "
            f"subjects: {', '.join(self.filters) or 'none'}); the increment would count "
            "in another stream's counter or in none"
        )


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
    first_stored: int | None = None
    last_duplicate_of: int | None = None
    resends: int = 0
    retried: bool = False
    stored_ranges: list[tuple[int, int]] = field(default_factory=list)
    writer: str | None = None


@dataclass
class PublishTally:
    """What a task's publishes stored so far (the fields of its commit message):
    besides the counts and the sequences the acks named, the first sequence stored,
    the last one a duplicate named (the message the server already had), the resends,
    which tell whether the task's duplicates can have come from its own sends, and the
    runs of sequences it stored, which tell whether a duplicate's message is this
    write's (see ``alike_rows_merged``)."""

    rows: int = 0
    stored: int = 0
    duplicates: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    first_stored: int | None = None
    last_duplicate_of: int | None = None
    resends: int = 0
    #: Whether the task ran before (a task or stage attempt after the first).
    retried: bool = False
    #: The sequences stored, as inclusive ranges of consecutive ones (a publish of one
    #: writer stores a run; another writer of the stream at the same time splits it).
    stored_ranges: list[tuple[int, int]] = field(default_factory=list)
    writer: str | None = None  # the identity of its position (option exactlyOnce)

    def add(self, result: Any) -> None:
        self.rows += result.rows
        self.stored += result.stored
        self.duplicates += result.duplicates
        self.resends += result.resends
        seqs = result.acks.column("seq")
        if seqs.null_count < len(seqs):
            lo, hi = pc.min(seqs).as_py(), pc.max(seqs).as_py()
            self.first_seq = lo if self.first_seq is None else min(self.first_seq, lo)
            self.last_seq = hi if self.last_seq is None else max(self.last_seq, hi)
        duplicate = pc.fill_null(result.acks.column("duplicate"), False)
        stored = pc.filter(seqs, pc.and_(pc.is_valid(seqs), pc.invert(duplicate)))
        if len(stored):
            lo = pc.min(stored).as_py()
            self.first_stored = lo if self.first_stored is None else min(self.first_stored, lo)
            self._add_ranges(stored)
        if result.duplicates:
            hi = pc.max(pc.filter(seqs, duplicate)).as_py()
            if hi is not None:
                self.last_duplicate_of = max(self.last_duplicate_of or 0, hi)

    def _add_ranges(self, stored: pa.Array) -> None:
        seqs = np.sort(stored.to_numpy(zero_copy_only=False))
        breaks = np.flatnonzero(np.diff(seqs) != 1)
        starts = seqs[np.concatenate(([0], breaks + 1))]
        ends = seqs[np.concatenate((breaks, [len(seqs) - 1]))]
        for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
            if self.stored_ranges and self.stored_ranges[-1][1] + 1 == lo:
                self.stored_ranges[-1] = (self.stored_ranges[-1][0], hi)
            else:
                self.stored_ranges.append((lo, hi))


def task_ids() -> tuple[int, int, int]:
    """(stage id, partition id, attempt number) of the running Spark task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, 0, 0
    return ctx.stageId(), ctx.partitionId(), ctx.attemptNumber()


def task_retried() -> bool:
    """Whether the running Spark task is a later attempt of its task. (PySpark's task
    context does not say which attempt of its stage it runs in: a stage run again after
    a lost shuffle output starts its tasks' attempts from 0 again.)"""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx is not None and ctx.attemptNumber() > 0


#: What maps a write's input batches to publish input: the message columns of a
#: stream write, or the key and value columns of a KV bucket's (option ``kv``).
WriteColumns = PublishColumns | KvColumns


def write_columns(opts: WriteOptions, schema: pa.Schema) -> WriteColumns:
    """The input columns of a write, checked against its options, naming the column
    at fault."""
    if opts.kv is not None:
        return KvColumns.resolve(schema, opts.kv, opts.msg_id_column)
    columns = PublishColumns.resolve(
        schema,
        constant_subject=opts.subject is not None,
        msg_id_column=opts.msg_id_column,
        encoded=opts.value_format is not None,
    )
    columns.check(schema, opts.subject, write_codec(opts))
    return columns


def msg_id_prefix(columns: WriteColumns, run: str, place: str) -> str:
    """The prefix of the msg ids a task gives its rows: ``<run><place>`` then the row's
    number, or, for a copy of a stream, ``<run>`` then the source message's
    ``<stream>:<seq>:<digest>`` (the core appends it), so a retried task or a re-run that
    plans other partitions gives every message the same id again."""
    if isinstance(columns, PublishColumns) and columns.is_copy:
        return run
    return f"{run}{place}"


def publish_batches(
    opts: WriteOptions,
    columns: WriteColumns,
    batches: Iterator[pa.RecordBatch],
    msg_id_prefix: str,
    tally: PublishTally,
    where: str,
    exactly_once: ExactlyOnceTask | None = None,
) -> Iterator[Any]:
    """Publish the batches through one publisher; yield a PublishResult per group of
    batches (see ``Publisher.publish_batches``), rows in input order; with
    ``exactly_once`` over the task's position, skipping (as duplicates) what is stored.

    Spark's batches are read a few ahead in a thread, so that Spark handing over the
    next batch overlaps the publishing of this one, and the ack window stays full
    across batches. An engine error says what was stored before it."""
    client = get_client(opts.connect)
    kwargs = opts.publisher_kwargs()
    stored_by: StreamSubjects | None = None
    if isinstance(columns, PublishColumns) and columns.increment is not None:
        # The server refuses a counter increment with any expectation header: each
        # row's subject is checked against the named stream's before it is sent.
        kwargs.pop("expected_stream", None)
        if opts.expected_stream is not None:
            stored_by = StreamSubjects(client, opts.expected_stream, opts.subject)
    options = {
        "subject": opts.subject,
        "codec": write_codec(opts),
        # A KV delete or purge is a header that steers how the stream stores it.
        "keep_control_headers": True if opts.kv is not None else None,
        **kwargs,
    }
    selected = (
        columns.select_all(b for b in batches if b.num_rows)
        if isinstance(columns, KvColumns)
        else (columns.select(batch) for batch in batches if batch.num_rows)
    )
    if stored_by is not None:
        selected = stored_by.checked(selected)
    read_ahead = ReadAhead(selected, depth=2, name="jetstream-arrow-spark-input")
    skipped = SkippedRows()
    publisher = None
    results: Iterator[Any] | None = None
    try:
        if exactly_once is None:
            publisher = client.publisher(
                msg_id_prefix=msg_id_prefix, raise_on_error=False, **options
            )
            results = publisher.publish_batches(read_ahead)
        else:
            results = publish_exactly_once(
                client, opts, columns, read_ahead, msg_id_prefix, exactly_once, options, skipped
            )
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
            finally:
                skipped.count_into(tally)
            tally.add(result)
            yield result
    finally:
        if results is not None and hasattr(results, "close"):
            results.close()  # the task's publisher and position now, not when collected
        read_ahead.close()
        if publisher is not None:
            publisher.close()


def publish_task(
    opts: WriteOptions,
    columns: WriteColumns,
    batches: Iterator[pa.RecordBatch],
    msg_id_prefix: str,
    where: str,
    exactly_once: ExactlyOnceTask | None = None,
) -> PublishTally:
    """Publish one write task's batches; raise PublishError at the first group of
    batches with rows that were not stored (the task fails, and its retry sends the
    same ids; with ``exactly_once``, it resumes after what the stream holds)."""
    tally = PublishTally(retried=task_retried())
    results = publish_batches(opts, columns, batches, msg_id_prefix, tally, where, exactly_once)
    for result in (r for r in results if r.failed):
        first_error, first_code = result.first_failure()
        cause = ""
        if opts.expected_stream and first_code == _core.ERR_STREAM_NOT_MATCH:
            # The server's words name neither stream: say which one the write expects.
            cause = (
                f" (the write expects every row in stream {opts.expected_stream!r}, named "
                "by option 'stream', 'expectedStream' or the path given to save(); "
                "another stream stores these rows' subjects)"
            )
        raise PublishError(
            f"{where}: {result.failed} of {result.rows} rows published together were not "
            f"stored (first: {first_error}){cause}; this task stored {tally.stored} "
            f"messages and found {tally.duplicates} duplicates so far. A retry of "
            "the task sends the same message ids, so it stores only what is missing.",
            result,
        )
    return tally


_Message = TypeVar("_Message", bound=JetStreamCommitMessage)


def finished_tasks(
    messages: Sequence[WriterCommitMessage | None], kind: type[_Message]
) -> list[_Message]:
    """The commit messages of the tasks that finished (Spark gives None for the others)."""
    return [m for m in messages if isinstance(m, kind)]


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


def report_committed(write: str, done: Sequence[JetStreamCommitMessage], tasks: int) -> None:
    """Report a committed write (``write`` names it) and what its tasks published."""
    report(f"{write} committed: {published_summary(done, tasks)}")


def report_aborted(
    write: str, done: Sequence[JetStreamCommitMessage], tasks: int, how_to_finish: str
) -> None:
    """Report a failed write: what its finished tasks published, that the failed ones
    may have stored part of their rows, and ``how_to_finish`` it without duplicates."""
    report(
        f"{write} failed: {published_summary(done, tasks)}; {tasks - len(done)} task(s) "
        "failed and may have stored part of their rows. Messages already stored stay in "
        f"the stream. {how_to_finish}",
        logging.WARNING,
    )
