"""The Python facade over the native client: connect, publish, read, pull consumers.

Everything here is thin: the native core (``jetstream_arrow._core``) does the work
with the GIL released; this module turns its PyCapsule outputs into pyarrow objects
and its options into keyword arguments with defaults a Python user can read. It is one
module because ``Client`` is the facade's one entry point: its methods are each a
signature, a docstring and one native call.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from . import _core
from ._input import importable
from ._time import to_epoch_ns
from ._writer_publish import publish_as_writer, writer_input
from .codec import ValueCodec
from .consumers import OrderedConsumer, PullConsumer, PushConsumer, read_batches
from .counters import counter_table
from .exactly_once import exactly_once_wanted
from .exceptions import BadInputError, JetStreamArrowError, PublishError
from .kv import (
    ENTRY_SCHEMA,
    KvColumns,
    bucket_stream,
    entries,
    key_subjects,
    refuse_compression,
)
from .kv import SUBJECT_PREFIX as KV_SUBJECT_PREFIX
from .management import ManagementMixin
from .options import ConnectOptions, FollowOptions, PublishOptions, ReadOptions


@dataclass(frozen=True)
class PublishResult:
    """What a publish did, row by row.

    ``acks`` has one row per input row, in input order: ``seq`` (the stream
    sequence, null unless stored or duplicate), ``duplicate`` (the server already
    had this msg id), ``error`` (null when the row is stored). ``resends`` counts
    rows sent again (after an ack timeout, a ``429``/``503`` or a lost connection;
    an atomic batch counts its rows) and ``late_replies`` acks that came after their
    row was resent or resolved; the ``jetstream_arrow.publish`` logger tells them too.

    A publish of counter increments (a table with an ``increment`` column and no
    ``data`` column) adds ``value`` to ``acks``: the counter's value after the row's
    increment as the server's ack says it (decimal text, utf8; null for a duplicate,
    whose increment was counted before, and for a failed row).

    ``error_codes``, when rows failed: each row's JetStream error code (uint32, null
    unless the server refused the row with one; ``_core.ERR_*`` names those the
    package acts on), in input order; None when no row failed.
    """

    rows: int
    stored: int
    duplicates: int
    failed: int
    acks: pa.Table
    resends: int = 0
    late_replies: int = 0
    error_codes: pa.Array | None = None

    @classmethod
    def from_outcome(cls, outcome: _core.PublishOutcome) -> PublishResult:
        """The result of a native publish's outcome."""
        return cls(
            rows=outcome.rows,
            stored=outcome.stored,
            duplicates=outcome.duplicates,
            failed=outcome.failed,
            acks=pa.table(pa.record_batch(outcome.acks())),
            resends=outcome.resends,
            late_replies=outcome.late_replies,
            # Asked for only when rows failed: a publish that stored every row
            # builds nothing more.
            error_codes=pa.array(outcome.error_codes()) if outcome.failed else None,
        )

    def first_failure(self) -> tuple[str, int | None]:
        """The first failed row's error, and its JetStream error code (None when the
        server gave none). Only for a result with failed rows."""
        row = int(pc.index(self.acks["error"].is_valid(), True).as_py())
        code = None if self.error_codes is None else self.error_codes[row].as_py()
        return str(self.acks["error"][row].as_py()), code

    def failed_rows(self) -> pa.Table:
        """The rows that were not stored, with their index and error."""
        index = pa.array(range(self.rows), pa.int64())
        acks = self.acks.append_column("row", index)
        return acks.filter(acks["error"].is_valid())


def raise_if_failed(result: PublishResult) -> PublishResult:
    """``result``, or ``PublishError`` carrying it when rows failed."""
    if result.failed:
        first = result.failed_rows().slice(0, 1).to_pylist()[0]
        raise PublishError(
            f"{result.failed} of {result.rows} rows were not stored "
            f"(first: row {first['row']}: {first['error']}); "
            f"{result.stored} stored, {result.duplicates} duplicates; "
            "see .result.acks for every row",
            result,
        )
    return result


class BatchGroups:
    """The batches of a ``publish_batches`` call as one Arrow stream per group of
    consecutive batches (one schema, as many whole batches as fit in
    ``rows_per_result`` rows, at least one). An exception raised by ``batches`` ends
    the group it falls in; [`raise_failure`][] raises it once that group is published.
    """

    def __init__(self, batches: Iterable[pa.RecordBatch], rows_per_result: int) -> None:
        if rows_per_result < 1:
            raise BadInputError(
                f"option 'rows_per_result' must be at least 1, got {rows_per_result}"
            )
        self._source = iter(batches)
        self._rows_per_result = rows_per_result
        self._failure: list[BaseException] = []

    def __iter__(self) -> Iterator[pa.RecordBatchReader]:
        source = self._source
        # A batch read but not yet published (the first of the next group).
        pending: list[pa.RecordBatch] = list(itertools.islice(source, 1))
        while pending:
            first = pending.pop()

            def group(first: pa.RecordBatch = first) -> Iterator[pa.RecordBatch]:
                # Runs inside the engine's read of the stream. A failing source ends
                # the stream cleanly here and is raised once the group's acks are in.
                yield first
                rows = first.num_rows
                while True:
                    try:
                        batch = next(source)
                    except StopIteration:
                        return
                    except BaseException as err:
                        self._failure.append(err)
                        return
                    if (
                        batch.schema != first.schema
                        or rows + batch.num_rows > self._rows_per_result
                    ):
                        pending.append(batch)  # starts the next group
                        return
                    rows += batch.num_rows
                    yield batch

            yield pa.RecordBatchReader.from_batches(first.schema, group())

    def raise_failure(self) -> None:
        """Raise what ``batches`` raised, if it did."""
        if self._failure:
            raise self._failure[0]


class Publisher:
    """A long-lived publisher that keeps one ack window across many batches.

    Each [`publish`][] call returns when every row of that call is acknowledged
    (stored or duplicate) or has failed; [`publish_batches`][] keeps the window
    full across the batches of a long input.
    """

    def __init__(self, native: _core.Publisher, raise_on_error: bool) -> None:
        self._native = native
        self._raise_on_error = raise_on_error

    def publish(self, data: Any, subject: str | None = None) -> PublishResult:
        """Publish every row of ``data`` (anything with the Arrow PyCapsule interface,
        in the message schema; ``subject`` over the publisher's) and return once each
        row is stored, a duplicate or failed. Raises ``PublishError`` when rows fail,
        unless the publisher was made with ``raise_on_error=False``. Ctrl-C stops it
        taking rows (before the input's next batch) and raises ``KeyboardInterrupt``
        once the rows taken are acknowledged, their ``PublishResult`` as its
        ``.result`` (absent when they were not within 10 s)."""
        try:
            outcome = self._native.publish(importable(data), subject).wait()
        except (JetStreamArrowError, KeyboardInterrupt) as err:
            # Input errors and lost connections stop a publish midway, and so does
            # Ctrl-C (the rows taken before it are acknowledged first): what was
            # acknowledged is reported, never lost.
            if isinstance(getattr(err, "result", None), _core.PublishOutcome):
                err.result = PublishResult.from_outcome(err.result)  # type: ignore[union-attr]
            raise
        result = PublishResult.from_outcome(outcome)
        return raise_if_failed(result) if self._raise_on_error else result

    def publish_batches(
        self,
        batches: Iterable[pa.RecordBatch],
        subject: str | None = None,
        *,
        rows_per_result: int = _core.DEFAULT_ROWS_PER_RESULT,
    ) -> Iterator[PublishResult]:
        """Publish a sequence of record batches (all in one schema) without letting the
        ack window drain between them, as one [`publish`][] per batch would.

        Consecutive batches go to the engine as one stream of as many whole batches
        as fit in ``rows_per_result`` rows (at least one batch), and one result is
        yielded for each such group, its ``acks`` in input order; that bounds the
        memory the acks take. An exception raised by ``batches`` is raised after
        the result of the rows that came before it.
        """
        groups = BatchGroups(batches, rows_per_result)
        for stream in groups:
            yield self.publish(stream, subject)
            groups.raise_failure()

    def close(self) -> None:
        """Release the publisher (each publish call has already waited for its rows)."""
        self._native.close()

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Connection:
    """What a client is without waiting: its connection's options, state and the
    server's announcement. [`Client`][] and its asyncio twin share it."""

    def __init__(self, native: _core.Client, options: ConnectOptions) -> None:
        self._native = native
        self.options = options

    def is_closed(self) -> bool:
        """Whether [`close`][jetstream_arrow.Client.close] was called (a lost
        connection reconnects by itself)."""
        return self._native.is_closed()

    def __reduce__(self) -> Any:
        raise TypeError(
            f"a jetstream_arrow {type(self).__name__} is a live connection and cannot be "
            "pickled; pickle its .options (a ConnectOptions) and connect again where needed"
        )

    def __repr__(self) -> str:
        servers = _core.redact_servers(self.options.servers)
        return f"{type(self).__name__}(servers={servers!r}, api_prefix={self.api_prefix!r})"

    @property
    def api_prefix(self) -> str:
        """The subject prefix of the JetStream API this client talks to
        (``$JS.API``, or a domain's or the ``api_prefix`` option's)."""
        return self._native.api_prefix

    def server_info(self) -> dict[str, Any]:
        """What the connected server announced (no request): ``server_id``,
        ``server_name``, ``version``, ``max_payload``, ``headers``, ``jetstream``,
        ``domain``, ``cluster`` and ``client_id``."""
        return self._native.server_info()


class Client(Connection, ManagementMixin):
    """A connection to NATS with JetStream. Use [`connect`][] to make one."""

    # -- lifecycle -----------------------------------------------------------------
    def close(self) -> None:
        """Flush and close the connection. Safe to call twice."""
        self._native.close().wait()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def flush(self, timeout: float | None = None) -> None:
        """Send what is buffered and wait for the server to answer a round trip, within
        ``timeout`` seconds (default: the ``request_timeout`` option)."""
        self._native.flush(timeout).wait()

    def _api_json(
        self,
        subject: str,
        body: dict[str, Any] | None = None,
        resume_timeout: float | None = None,
    ) -> dict[str, Any]:
        raw = self._native.api_request(
            subject,
            None if body is None else json.dumps(body).encode(),
            resume_timeout=resume_timeout,
        ).wait()
        reply: dict[str, Any] = json.loads(raw) if raw else {}
        return reply

    # -- publish -------------------------------------------------------------------
    def publisher(
        self,
        subject: str | None = None,
        *,
        options: PublishOptions | None = None,
        raise_on_error: bool = True,
        codec: ValueCodec | str | None = None,
        **kwargs: Any,
    ) -> Publisher:
        """A publisher with a bounded window of unacknowledged messages, sending as
        ``options`` say, with any [`PublishOptions`][] field given as a keyword
        (``window=8192``) set over them. ``raise_on_error``: raise ``PublishError``
        (with ``.result``) when rows fail, or return the result.

        With ``codec`` (a [`ValueCodec`][] or a format name), the input has no
        ``data`` column: its value columns (a struct column ``value``, or every
        column that is not a message column) are encoded into each row's payload."""
        if subject is not None:
            kwargs["subject"] = subject
        settings = PublishOptions.from_kwargs(options, **kwargs)
        native = self._native.publisher(settings, ValueCodec.of(codec)).wait()
        return Publisher(native, raise_on_error)

    def publish(
        self,
        data: Any,
        subject: str | None = None,
        *,
        writer: str | None = None,
        exactly_once: bool | None = None,
        writer_lease: float | None = None,
        position_rows: int | None = None,
        **options: Any,
    ) -> PublishResult:
        """Publish every row of an Arrow batch, table or stream (anything with the
        Arrow PyCapsule interface) in the message schema; ``options`` are
        [`PublishOptions`][] fields, ``raise_on_error`` and ``codec`` (see
        [`publisher`][]). Raises ``PublishError`` (with ``.result``) when rows fail,
        unless ``raise_on_error=False``.

        ``writer`` (an identity: a job's, a file's, a partition's) publishes the rows
        exactly once at any age, past the stream's duplicate window: the writer keeps
        its position in the target stream, and a re-run with the same ``writer`` and
        the same input, however much later, stores only the rows the stream lacks.
        Rows are numbered by their place in the input from ``msg_id_start`` (default
        0), under msg ids ``ja.w.<writer>:<n>``; an input that is a read of a stream
        (it has the read's ``stream`` and ``seq`` columns) is a copy, one source
        stream in source order, under its copy ids, its position the next source
        sequence. The target stream is ``expected_stream``, else the stream that
        stores ``subject`` (rows with a ``subject`` column need ``expected_stream``).
        A second writer with the same identity at the same time is refused
        (``WriterFencedError``); one that finds the identity's position open waits
        until its ``writer_lease`` (seconds, default ``_core.DEFAULT_WRITER_LEASE``)
        has run out since it was written (a writer that died), and is refused when
        the position moved meanwhile. A numbered writer records its position after
        every ``position_rows`` rows (default ``_core.DEFAULT_POSITION_ROWS``); a
        re-run reads back what the stream took after the last one.

        ``exactly_once``: None (default) runs exactly once where the stream holds
        writers' positions, else within its duplicate window only, with one
        ``ExactlyOnceUnavailableWarning`` naming the command that enables it; True
        refuses such a stream (``BadInputError``); False never keeps a position.
        The result has a row for every input row: rows the stream held already are
        ``duplicate`` with a null ``seq``. See
        [Exactly once at any age](publishing.md#exactly-once-at-any-age)."""
        if writer is None:
            refuse_writer_options(exactly_once, writer_lease, position_rows)
            with self.publisher(subject, **options) as publisher:
                return publisher.publish(data)
        raise_on_error = options.pop("raise_on_error", True)
        codec = options.pop("codec", None)
        if subject is not None:
            options["subject"] = subject
        settings = PublishOptions.from_kwargs(options.pop("options", None), **options)
        given = writer_input(self, data, writer, settings)
        # Asked here, so that its one warning names the caller's line.
        exact = exactly_once_wanted(
            self, given.stream, exactly_once, f"publish as writer {writer!r}"
        )
        result = publish_as_writer(
            self,
            given,
            writer=writer,
            exact=exact,
            writer_lease=writer_lease,
            position_rows=position_rows,
            settings=settings,
            codec=codec,
            result_type=PublishResult,
        )
        return raise_if_failed(result) if raise_on_error else result

    def write_kv(self, bucket: str, data: Any, **options: Any) -> PublishResult:
        """Write rows into KV bucket ``bucket``: ``key`` and ``value`` columns, optional
        ``operation`` (``PUT``, ``DEL``, ``PURGE``) and ``expected_revision`` (a
        compare-and-set: the row is stored only if its key is at that revision, 0 for
        a key with no entry; otherwise it fails with a ``conflict:`` error of its own).
        ``data`` is anything with the Arrow PyCapsule interface; it is mapped batch by
        batch (see [`jetstream_arrow.kv`][]) and published with ``options``
        ([`PublishOptions`][] fields and ``raise_on_error``), so an entry's revision
        is its row's ``acks.seq``. A key given twice in one call ends at the value of
        the row with the higher ``acks.seq``: the later row, unless the earlier was
        resent (after a ``429``, ``503`` or ack timeout) and stored after it; give each
        key once per call where that matters."""
        stream = bucket_stream(bucket)
        refuse_compression(
            options.get("compression") or getattr(options.get("options"), "compression", None),
            "write_kv",
        )
        subjects = self.stream_info(stream).config.subjects or []
        wanted = f"{KV_SUBJECT_PREFIX}{bucket}.>"
        if wanted not in subjects:
            raise BadInputError(
                f"stream {stream!r} does not take the subjects of bucket {bucket!r} "
                f"({wanted!r}; it has {subjects}): it is not a KV bucket written here"
            )
        reader = (
            pa.RecordBatchReader.from_batches(data.schema, [data])
            if isinstance(data, pa.RecordBatch)
            else pa.RecordBatchReader.from_stream(data)
        )
        columns = KvColumns.resolve(reader.schema, bucket, options.pop("msg_id_column", None))
        mapped = columns.select_all(reader)
        first = next(mapped, None)
        if first is None:  # no rows: the publish still checks the columns
            first = columns.select(pa.RecordBatch.from_pylist([], schema=reader.schema))
        # Bad input found while mapping a later batch ends the input there; it is
        # raised with the result of the rows before, as the engine's own is.
        failure: list[BadInputError] = []

        def rest() -> Iterator[pa.RecordBatch]:
            try:
                yield from mapped
            except BadInputError as err:
                failure.append(err)

        batches = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], rest()))
        raise_on_error = options.pop("raise_on_error", True)
        options.setdefault("keep_control_headers", True)
        options.setdefault("expected_stream", stream)
        result = self.publish(batches, raise_on_error=False, **options)
        if failure:
            failure[0].result = result
            raise failure[0]
        return raise_if_failed(result) if raise_on_error else result

    def read_kv(
        self,
        bucket: str,
        keys: Sequence[str] | str | None = None,
        *,
        include_deletes: bool = False,
        as_of_seq: int | None = None,
        as_of_time: datetime | str | float | None = None,
        **options: Any,
    ) -> pa.RecordBatchReader:
        """The entries of KV bucket ``bucket`` as a table: ``key``, ``value``,
        ``revision``, ``operation`` (``PUT``, ``DEL``, ``PURGE``) and ``created``
        (when the revision was stored), one row per key, read as the latest message of
        each of the bucket's subjects (``keys``: keys or wildcards such as ``"dev.*"``;
        default every key) without reading its history. Deleted and purged keys are
        left out unless ``include_deletes`` (then with a null value). ``as_of_seq`` /
        ``as_of_time``: the bucket as it was then. ``options``: [`ReadOptions`][]
        fields (``batch_rows``, ``max_bytes``, ``resume_timeout``)."""
        _refuse_table_options("read_kv", "key, value, revision, operation and created", options)
        stream = bucket_stream(bucket)
        reader = self.read(
            stream,
            last_per_subject=True,
            subjects=key_subjects(bucket, keys),
            include_headers=True,
            as_of_seq=as_of_seq,
            as_of_time=as_of_time,
            **options,
        )
        return pa.RecordBatchReader.from_batches(
            ENTRY_SCHEMA, entries(reader, bucket, include_deletes)
        )

    def read_counters(
        self,
        stream: str,
        subjects: Sequence[str] | str | None = None,
        **options: Any,
    ) -> pa.Table:
        """The counters of ``stream`` (created with ``allow_msg_counter``, nats-server
        2.12+) as a table: ``subject``, ``value`` (the counter's current value:
        decimal128(38, 0) when every value read fits in 38 digits, else decimal text,
        utf8, for the whole table; never a float), ``sources`` (what each sourced
        counter contributed, from the ``Nats-Counter-Sources`` header: a list of
        ``stream``, ``subject``, ``value``; null for a counter that sources nothing)
        and ``seq`` (the message holding the value). One row per subject of
        ``subjects`` (subjects or wildcards; default every subject), read as the
        latest message of each without reading its history. ``options``:
        [`ReadOptions`][] fields (``batch_rows``, ``max_bytes``, ``resume_timeout``,
        ``as_of_seq``, ``as_of_time``)."""
        _refuse_table_options("read_counters", "subject, value, sources and seq", options)
        filters = [subjects] if isinstance(subjects, str) else list(subjects or [])
        reader = self.read(
            stream,
            last_per_subject=True,
            subjects=filters or None,
            include_headers=True,
            **options,
        )
        return counter_table(reader, stream)

    # -- read ----------------------------------------------------------------------
    def first_seq_at(
        self,
        stream: str,
        when: datetime | str | float,
        subjects: Sequence[str] | str | None = None,
        *,
        resume_timeout: float | None = None,
    ) -> int | None:
        """The sequence of the first message stored at or after ``when`` (on one of
        ``subjects`` if given), or None when none is: one ``STREAM.MSG.GET`` request
        per subject filter, not a read. While the server restarts or the stream
        elects a leader the requests are sent again, for up to ``resume_timeout``
        seconds (default: a read's ``resume_timeout``)."""
        time_ns = to_epoch_ns(when, "when")
        if time_ns is None:
            raise BadInputError("option 'when' is required: a datetime, text or epoch seconds")
        filters = [subjects] if isinstance(subjects, str) else list(subjects or [])
        return self._native.first_seq_at(stream, time_ns, filters, resume_timeout).wait()

    def read(
        self,
        stream: str,
        *,
        options: ReadOptions | None = None,
        codec: ValueCodec | str | None = None,
        **kwargs: Any,
    ) -> pa.RecordBatchReader:
        """Replay a stream in sequence order as Arrow record batches, as ``options``
        (a [`ReadOptions`][]) say, with any of its fields given as a keyword
        (``start_seq=100``) set over them.

        Reads from ``start_seq`` (or ``start_time``; default: the first message) up
        to ``end_seq`` inclusive (default: the last sequence when the read starts)
        and ``end_time``, only ``subjects`` if given. Memory is bounded by
        ``batch_rows`` and ``max_bytes`` per pull; the temporary consumer is
        deleted when the reader ends or is dropped.

        The read is an ordered consumer: when deliveries are lost, the client
        reconnects, the server restarts, the stream's leader changes or the consumer
        is deleted, it recreates its consumer at the last delivered sequence + 1, so
        the range still comes out exactly once and in order. It gives up (raising the
        last error) when that has failed for ``resume_timeout`` seconds.

        ``method="direct"`` reads with batched direct gets instead, on a stream created
        with ``allow_direct=True``: no consumer is created (fewer round trips for small
        reads), and it is the one way to re-read a WorkQueue stream whose messages
        belong to a durable consumer. ``subjects`` is then at most one filter.
        ``method="consumer"`` always reads through a consumer. ``"auto"`` (the default)
        reads a range of at most ``DIRECT_READ_MAX_MESSAGES`` sequences by direct gets
        when the stream allows them and only its leader answers them (one replica, no
        mirror with ``mirror_direct``): replicas and mirrors answer from what they have
        applied so far, which can trail the latest publish. Otherwise it is a consumer.

        With ``codec`` (a [`ValueCodec`][] or a format name), each payload is
        decoded into the struct column ``value`` in place of ``data``.
        """
        value_codec = ValueCodec.of(codec)
        settings = ReadOptions.from_kwargs(options, **kwargs)
        native = self._native.read(stream, settings, value_codec).wait()
        # An error raised by a native step keeps its class through pyarrow (an Arrow C
        # stream would turn it into text). Dropping the reader deletes the read's
        # consumer on the server.
        batches = read_batches(native, stream, value_codec)
        return pa.RecordBatchReader.from_batches(pa.schema(native.schema()), batches)

    def ordered_consumer(
        self,
        stream: str,
        subjects: Sequence[str] | str | None = None,
        *,
        start_seq: int | None = None,
        start_time: datetime | str | float | None = None,
        deliver: Literal["all", "new"] = "all",
        heartbeat: float = _core.DEFAULT_HEARTBEAT,
        resume_timeout: float = _core.DEFAULT_RESUME_TIMEOUT,
        codec: ValueCodec | str | None = None,
    ) -> OrderedConsumer:
        """An open-ended ordered consumer, like nats.go's ``OrderedConsumer``: every
        message of ``stream`` (only ``subjects`` if given) from ``start_seq``,
        ``start_time``, the first (``deliver="all"``) or the next one stored
        (``deliver="new"``), then each new one as it is stored, exactly once and in
        order, through server restarts and leader changes (see [`read`][])."""
        if deliver not in ("all", "new"):
            raise BadInputError(f"option 'deliver' must be 'all' or 'new', got {deliver!r}")
        options = FollowOptions(
            subjects=subjects,
            start_seq=start_seq,
            start_time=start_time,
            deliver_new=deliver == "new",
            heartbeat=heartbeat,
            resume_timeout=resume_timeout,
        )
        return OrderedConsumer(self._native, stream, options, ValueCodec.of(codec))

    # -- consumers -----------------------------------------------------------------
    def push_consumer(
        self,
        stream: str,
        name: str,
        *,
        deliver_subject: str | None = None,
        deliver_group: str | None = None,
        ack_policy: Literal["none", "all", "explicit", "flow_control"] | None = None,
    ) -> PushConsumer:
        """Bind to a durable push consumer. Without ``deliver_subject`` its info is
        looked up (deliver subject, queue group, ack policy, heartbeat); with it,
        nothing is (pass ``deliver_group`` if the consumer has one, ``ack_policy``,
        and ``heartbeat`` to ``messages()``). A consumer with a deliver group delivers
        only to that queue group: without it, this client would receive nothing."""
        binding = push_binding(
            self._native, stream, name, deliver_subject, deliver_group, ack_policy
        )
        return PushConsumer(binding.wait())

    def pull_consumer(
        self,
        stream: str,
        name: str,
        ack_policy: Literal["none", "all", "explicit"] | None = None,
        *,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> PullConsumer:
        """Bind to a durable pull consumer by name, with no info lookup (so a client
        that may only use ``CONSUMER.MSG.NEXT`` and ``$JS.ACK`` works). Pass the
        consumer's ``ack_policy`` to let batch acks use one AckAll when it is "all".

        ``group``: every pull names this one of the consumer's ``priority_groups``
        (server 2.11+). With policy ``pinned_client`` the server pins one binding and
        delivers only to it; the binding keeps the pin (``pin_id``) and names it in
        its pulls, and when the pin moves (``unpin_consumer``, or no pull for the
        consumer's ``priority_timeout``) its pulls are turned away (``423``), it
        forgets the pin and pulls on as a candidate. With ``overflow``,
        ``min_pending`` / ``min_ack_pending`` make its pulls served only while the
        consumer has at least that many messages pending / awaiting acks (both given:
        either suffices, as the server decides). With
        ``prioritized`` (2.12+), ``priority`` 0 (served first) to 9."""
        return PullConsumer(
            self._native.pull_consumer(
                stream,
                name,
                ack_policy=ack_policy,
                group=group,
                min_pending=min_pending,
                min_ack_pending=min_ack_pending,
                priority=priority,
            )
        )


def refuse_writer_options(
    exactly_once: bool | None, writer_lease: float | None, position_rows: int | None
) -> None:
    """Refuse the options of a publish as a writer given without ``writer``."""
    if exactly_once:
        raise BadInputError(
            "option 'exactly_once' needs option 'writer': the identity whose "
            "position in the stream makes a re-run exact"
        )
    for option, value in (("writer_lease", writer_lease), ("position_rows", position_rows)):
        if value is not None:
            raise BadInputError(f"option '{option}' is for a publish with 'writer'")


def push_binding(
    native: _core.Client,
    stream: str,
    name: str,
    deliver_subject: str | None,
    deliver_group: str | None,
    ack_policy: str | None,
) -> _core.Call[_core.PushConsumer]:
    """The call binding a push consumer, its options checked first."""
    if deliver_group is not None and deliver_subject is None:
        raise BadInputError(
            "option 'deliver_group' is given only with 'deliver_subject' (without it, "
            "the consumer's own deliver group is looked up)"
        )
    return native.push_consumer(
        stream,
        name,
        deliver_subject=deliver_subject,
        deliver_group=deliver_group,
        ack_policy=ack_policy,
    )


def _refuse_table_options(call: str, columns: str, options: dict[str, Any]) -> None:
    """Refuse the read options that shape columns ``call``'s own table does not have."""
    for option in ("payload_views", "include_ttl", "codec"):
        if options.get(option):
            raise BadInputError(
                f"option '{option}' is for reads of a stream's message columns; {call} "
                f"gives its own table: {columns}"
            )
    if "include_headers" in options:  # the call reads the headers it needs itself
        raise BadInputError(
            f"option 'include_headers' is for reads of a stream's message columns; {call} "
            f"gives its own table: {columns}"
        )


def connect_options(servers: str | Sequence[str] | None = None, **options: Any) -> ConnectOptions:
    """The options of a [`connect`][] call: keyword options, or ``options=ConnectOptions(...)``."""
    given = options.pop("options", None)
    if given is not None:
        if options or servers is not None:
            raise BadInputError("give either options=ConnectOptions(...) or keyword options")
        opts: ConnectOptions = given
        return opts
    return ConnectOptions.from_kwargs(servers, **options)


def connect(servers: str | Sequence[str] | None = None, **options: Any) -> Client:
    """Connect to NATS. ``options`` are the fields of [`ConnectOptions`][]
    (or pass ``options=ConnectOptions(...)``)."""
    opts = connect_options(servers, **options)
    return Client(_core.Client.connect(opts).wait(), opts)
