"""The asyncio facade: the client's calls as coroutines and async iterators that never
block the event loop.

Each publish, read step, fetch, ack and connect is a future of the native core run as
a task on its tokio runtime; the awaitable it hands back is an asyncio future of the
running loop, completed from that task (``pyo3-async-runtimes``). No thread waits per
call. The management calls (streams, consumers, stored messages) are the sync
client's, each run in a worker thread (``asyncio.to_thread``): one or a few JSON
requests, each bounded by the ``request_timeout`` option.

Cancelling a task that awaits a read, a fetch or a consumer's next batch ends that
iterator and deletes what it holds on the server (a read's ephemeral consumer). A
cancelled publish stops taking rows, sees the acks of the messages in flight, and
raises the ``CancelledError`` with ``.result``: the [`PublishResult`][] of the rows
it took (see docs/asyncio.md).

Every native call that waits is one ``_core.Call``: the sync facade waits for it,
this one awaits it. Each class here is the twin of a sync class, sharing its base
(what does not wait: ``Connection``, ``DeliveredBatch``, the consumers' bindings)
and declaring each call with the sync method's parameters and defaults, which
``tests/aio/test_facade_twins.py`` holds equal, so neither facade can drift.

It is one module because it is one facade, the asyncio twin of ``client.py`` and
``consumers.py``: each class wraps one native class's calls, and the client hands
out the others.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

import pyarrow as pa

from . import _core
from ._input import importable
from .client import (
    BatchGroups,
    Client,
    Connection,
    PublishResult,
    connect_options,
    push_binding,
    raise_if_failed,
    refuse_writer_options,
)
from .codec import ValueCodec, report_malformed
from .consumers import (
    DeliveredBatch,
    OrderedBinding,
    PullBinding,
    PushBinding,
    rows_arg,
)
from .exceptions import BadInputError, JetStreamArrowError
from .options import (
    ConnectOptions,
    ConsumeOptions,
    FetchOptions,
    PublishOptions,
    PushOptions,
    ReadOptions,
)

_R = TypeVar("_R")
_Native = TypeVar("_Native", _core.ReadBatches, _core.MessageStream)
_Item = TypeVar("_Item")
_Steps = TypeVar("_Steps", bound="AsyncSteps[Any, Any]")


async def connect_async(servers: str | Sequence[str] | None = None, **options: Any) -> AsyncClient:
    """Connect to NATS without blocking the event loop: the arguments of
    [`connect`][jetstream_arrow.connect] (the fields of [`ConnectOptions`][], or
    ``options=ConnectOptions(...)``); at most ``connect_timeout`` seconds."""
    opts = connect_options(servers, **options)
    native = await _core.Client.connect(opts)
    return AsyncClient(native, opts)


def _in_thread(method: Callable[..., _R]) -> Callable[..., Coroutine[Any, Any, _R]]:
    """A method of the sync client as a coroutine of the async one (same arguments,
    same result, same signature and docstring), run in a worker thread: the native
    request inside it releases the GIL."""

    @functools.wraps(method)
    async def call(self: AsyncClient, *args: Any, **kwargs: Any) -> _R:
        return await asyncio.to_thread(method, self.sync_client, *args, **kwargs)

    call.__qualname__ = f"AsyncClient.{method.__name__}"
    return call


async def _close(native: _core.ReadBatches | _core.MessageStream) -> None:
    """Close a native iterator, to the end even when the awaiting task is cancelled
    meanwhile (deleting a read's consumer is one request)."""
    await asyncio.shield(native.close())


#: Closes scheduled by callbacks, referenced until done (the loop keeps weak ones).
_CLOSING: set[asyncio.Future[None]] = set()


async def _closed_when_done(call: asyncio.Future[Any]) -> None:
    """Wait for an opening whose task was cancelled, and close what it opened; a
    second cancellation leaves that to a callback, when the opening ends."""

    def close(done: asyncio.Future[Any]) -> None:
        if not done.cancelled() and done.exception() is None:
            closing = asyncio.ensure_future(_close(done.result()))
            _CLOSING.add(closing)
            closing.add_done_callback(_CLOSING.discard)

    try:
        native = await asyncio.shield(call)
    except asyncio.CancelledError:
        call.add_done_callback(close)
        raise
    except BaseException:
        return  # it failed: nothing was opened
    await _close(native)


class AsyncPublisher:
    """A publisher keeping one ack window across calls (the asyncio
    [`Publisher`][jetstream_arrow.Publisher]); one call sends at a time."""

    def __init__(self, native: _core.Publisher, raise_on_error: bool) -> None:
        self._native = native
        self._raise_on_error = raise_on_error

    async def publish(self, data: Any, subject: str | None = None) -> PublishResult:
        """Publish every row of ``data`` (anything with the Arrow PyCapsule interface,
        in the message schema) and return once each row is stored, a duplicate or
        failed; as the sync ``publish``.

        Cancelled, it takes no more rows, waits for the acks of the messages in flight
        (within ``ack_timeout`` and its retries, as any publish), and re-raises the
        ``CancelledError`` with ``.result``, the [`PublishResult`][] of the rows it took:
        each stored, a duplicate or failed; the rows after ``result.rows`` were not
        sent. Cancelling it again while it waits abandons the wait (``.result`` is
        then None, and the publisher is closed)."""
        stop = _core.StopSignal()
        call = asyncio.ensure_future(self._native.publish(importable(data), subject, stop))
        try:
            outcome = await asyncio.shield(call)
        except asyncio.CancelledError as cancelled:
            stop.set()
            cancelled.result = None  # type: ignore[attr-defined]
            try:
                cancelled.result = PublishResult.from_outcome(await call)  # type: ignore[attr-defined]
            except asyncio.CancelledError:
                pass
            except JetStreamArrowError as err:
                cancelled.result = _partial(err)  # type: ignore[attr-defined]
            raise
        except JetStreamArrowError as err:
            # Input errors and lost connections stop a publish midway; what was
            # already acknowledged is reported, never lost.
            err.result = _partial(err)
            raise
        result = PublishResult.from_outcome(outcome)
        return raise_if_failed(result) if self._raise_on_error else result

    async def publish_batches(
        self,
        batches: Iterable[pa.RecordBatch],
        subject: str | None = None,
        *,
        rows_per_result: int = _core.DEFAULT_ROWS_PER_RESULT,
    ) -> AsyncIterator[PublishResult]:
        """Publish a sequence of record batches (one schema) without letting the ack
        window drain between them, yielding one result per group of at most
        ``rows_per_result`` rows, as the sync ``publish_batches``. ``batches`` is a
        plain iterable: the engine reads it as it sends."""
        groups = BatchGroups(batches, rows_per_result)
        for stream in groups:
            yield await self.publish(stream, subject)
            groups.raise_failure()

    def close(self) -> None:
        """Release the publisher (each publish call has already waited for its rows)."""
        self._native.close()

    async def __aenter__(self) -> AsyncPublisher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def _nothing_sent() -> PublishResult:
    """The result of a publish cancelled before it took a row: ``table.slice(
    result.rows)`` is the whole input."""
    acks = pa.schema(
        [
            pa.field("seq", pa.int64()),
            pa.field("duplicate", pa.bool_(), nullable=False),
            pa.field("error", pa.string()),
        ]
    )
    return PublishResult(rows=0, stored=0, duplicates=0, failed=0, acks=acks.empty_table())


def _partial(err: JetStreamArrowError) -> PublishResult | None:
    result = getattr(err, "result", None)
    if isinstance(result, _core.PublishOutcome):
        return PublishResult.from_outcome(result)
    return result if isinstance(result, PublishResult) else None


class AsyncSteps(Generic[_Native, _Item]):
    """A native iterator's steps as an async iterator: it opens at the first step (or
    on entering ``async with``) and ends, releasing what it holds on the server, at
    its end, on an error, on [`aclose`][] or when the task awaiting a step is
    cancelled."""

    def __init__(self, opening: Callable[[], _core.Call[_Native]]) -> None:
        self._opening: Callable[[], _core.Call[_Native]] | None = opening
        self._native: _Native | None = None

    def _item(self, native: Any) -> _Item:
        """A native step's item as this iterator yields it."""
        raise NotImplementedError

    def _opened(self, native: _Native) -> None:
        """Called once the iterator is open."""

    def _closed(self, native: _Native) -> None:
        """Called once the iterator is closed."""

    async def _open(self) -> _Native | None:
        if self._opening is not None:
            opening, self._opening = self._opening, None
            # Shielded: an opening cancelled midway would drop its request (for a
            # read's consumer), which the server may still grant. It runs on, and what
            # it opened is closed before the cancellation goes on.
            call = asyncio.ensure_future(opening())
            try:
                self._native = await asyncio.shield(call)
            except asyncio.CancelledError:
                await _closed_when_done(call)
                raise
            self._opened(self._native)
        return self._native

    def __aiter__(self: _Steps) -> _Steps:
        return self

    async def __anext__(self) -> _Item:
        native = await self._open()
        if native is None:
            raise StopAsyncIteration
        try:
            item = await native.next_batch()
        except BaseException:
            await self.aclose()
            raise
        if item is None:
            await self.aclose()
            raise StopAsyncIteration
        return self._item(item)

    async def aclose(self) -> None:
        """Stop, and release what the iterator holds on the server (a read's consumer
        is deleted)."""
        self._opening = None
        native, self._native = self._native, None
        if native is not None:
            try:
                await _close(native)
            finally:
                self._closed(native)

    async def __aenter__(self: _Steps) -> _Steps:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncBatches(AsyncSteps[_core.ReadBatches, pa.RecordBatch]):
    """Record batches of a read or an ordered consumer, as an async iterator. The
    read opens at the first step (or on entering ``async with``); it ends, and its
    consumer is deleted, at its end, on an error, on [`aclose`][jetstream_arrow.AsyncBatches.aclose] or when the task
    awaiting a step is cancelled."""

    def __init__(
        self,
        opening: Callable[[], _core.Call[_core.ReadBatches]],
        stream: str,
        codec: ValueCodec | None,
    ) -> None:
        super().__init__(opening)
        self._stream = stream
        self._codec = codec
        self.schema: pa.Schema | None = None
        """The schema of every batch, once the read is open."""

    def _item(self, native: Any) -> pa.RecordBatch:
        return pa.record_batch(native)

    def _opened(self, native: _core.ReadBatches) -> None:
        self.schema = pa.schema(native.schema())

    def _closed(self, native: _core.ReadBatches) -> None:
        report_malformed(self._stream, self._codec, native.malformed)

    async def read_all(self) -> pa.Table:
        """Every remaining batch as one table."""
        batches = [batch async for batch in self]
        if self.schema is None:
            raise BadInputError("the read was closed before it opened")
        return pa.Table.from_batches(batches, self.schema)

    @property
    def malformed(self) -> int:
        """Payloads that did not decode so far (a codec's ``on_malformed``)."""
        return 0 if self._native is None else self._native.malformed


class AsyncConsumedBatch(DeliveredBatch):
    """Messages delivered by a durable consumer, as one Arrow record batch; the ack
    methods are coroutines (see [`ConsumedBatch`][jetstream_arrow.ConsumedBatch])."""

    async def ack(self, rows: Sequence[int] | None = None) -> None:
        """Acknowledge (one AckAll for the whole batch where the policy allows)."""
        await self._native.ack(rows_arg(rows))

    async def ack_sync(
        self, rows: Sequence[int] | None = None, timeout: float = _core.DEFAULT_ACK_SYNC_TIMEOUT
    ) -> None:
        """Double ack: returns once the server confirmed every ack (retried until then,
        within ``timeout`` seconds)."""
        await self._native.ack_sync(rows_arg(rows), timeout)

    async def nak(self, rows: Sequence[int] | None = None, delay: float | None = None) -> None:
        """Ask for redelivery, after ``delay`` seconds if given."""
        await self._native.nak(rows_arg(rows), delay)

    async def term(self, rows: Sequence[int] | None = None, reason: str | None = None) -> None:
        """Stop redelivery of these messages for good."""
        await self._native.term(rows_arg(rows), reason)

    async def in_progress(self, rows: Sequence[int] | None = None) -> None:
        """Reset the ack timer: still working on these."""
        await self._native.in_progress(rows_arg(rows))


class AsyncMessages(AsyncSteps[_core.MessageStream, "AsyncConsumedBatch"]):
    """The batches of a pull or push consumer, without end, as an async iterator of
    [`AsyncConsumedBatch`][]es. Consumption starts at the first step (or on entering
    ``async with``) and stops on [`aclose`][jetstream_arrow.AsyncMessages.aclose], on an
    error or when the task awaiting a step is cancelled (what that step had received
    is delivered again after the consumer's ack wait)."""

    def _item(self, native: Any) -> AsyncConsumedBatch:
        return AsyncConsumedBatch(native)

    @property
    def flow_control_answers(self) -> int:
        """Flow-control answers sent (push consumers); 0 for pull consumers."""
        return 0 if self._native is None else self._native.flow_control_answers

    @property
    def consumer_resets(self) -> int:
        """Resets of a flow-control push consumer to its ack floor; 0 for pull."""
        return 0 if self._native is None else self._native.consumer_resets


class AsyncPullConsumer(PullBinding):
    """A durable pull consumer, bound by name with no info lookup on the server (the
    asyncio [`PullConsumer`][jetstream_arrow.PullConsumer]). ``async for batch in
    consumer`` consumes with the default [`ConsumeOptions`][]."""

    async def fetch(
        self,
        max_messages: int = _core.DEFAULT_FETCH_MAX_MESSAGES,
        *,
        max_bytes: int | None = None,
        expires: float = _core.DEFAULT_FETCH_EXPIRES,
        no_wait: bool = False,
        heartbeat: float | None = None,
        include_headers: bool = False,
        codec: ValueCodec | str | None = None,
    ) -> AsyncConsumedBatch:
        """One pull request: up to ``max_messages`` (or ``max_bytes``) within
        ``expires`` seconds, as the sync ``fetch``."""
        options = FetchOptions(
            max_messages=max_messages,
            max_bytes=max_bytes,
            expires=expires,
            no_wait=no_wait,
            heartbeat=heartbeat,
            include_headers=include_headers,
        )
        native = await self._native.fetch(options, ValueCodec.of(codec))
        return AsyncConsumedBatch(native)

    def messages(
        self,
        *,
        options: ConsumeOptions | None = None,
        codec: ValueCodec | str | None = None,
        **kwargs: Any,
    ) -> AsyncMessages:
        """Continuous, pre-buffered consumption as ``options`` (a
        [`ConsumeOptions`][]) say, any of its fields given as a keyword, as the sync
        ``messages``."""
        settings = ConsumeOptions.from_kwargs(options, **kwargs)
        value_codec = ValueCodec.of(codec)
        native = self._native
        return AsyncMessages(lambda: native.messages(settings, value_codec))

    def __aiter__(self) -> AsyncMessages:
        return self.messages()


class AsyncPushConsumer(PushBinding):
    """A durable push consumer (the asyncio [`PushConsumer`][jetstream_arrow.PushConsumer])."""

    def messages(
        self,
        *,
        batch_rows: int = _core.DEFAULT_CONSUME_BATCH_ROWS,
        batch_wait: float = _core.DEFAULT_CONSUME_BATCH_WAIT,
        include_headers: bool = False,
        heartbeat: float | None = None,
        codec: ValueCodec | str | None = None,
    ) -> AsyncMessages:
        """Continuous consumption from the deliver subject, as the sync ``messages``;
        the subscription starts at the first step (or on entering ``async with``)."""
        options = PushOptions(
            batch_rows=batch_rows,
            batch_wait=batch_wait,
            include_headers=include_headers,
            heartbeat=heartbeat,
        )
        value_codec = ValueCodec.of(codec)
        native = self._native
        return AsyncMessages(lambda: native.messages(options, value_codec))

    def __aiter__(self) -> AsyncMessages:
        return self.messages()


class AsyncOrderedConsumer(OrderedBinding):
    """An open-ended ordered consumer (the asyncio
    [`OrderedConsumer`][jetstream_arrow.OrderedConsumer])."""

    def messages(
        self,
        *,
        batch_rows: int = _core.DEFAULT_READ_BATCH_ROWS,
        batch_wait: float = _core.DEFAULT_FOLLOW_BATCH_WAIT,
        max_bytes: int = _core.DEFAULT_READ_MAX_BYTES,
        include_headers: bool = False,
    ) -> AsyncBatches:
        """Batches in stream order, without end, as the sync ``messages``; the
        consumer is created at the first step (or on entering ``async with``, so
        ``deliver="new"`` starts there) and deleted when the iterator closes."""
        return AsyncBatches(
            lambda: self._follow(
                batch_rows=batch_rows,
                batch_wait=batch_wait,
                max_bytes=max_bytes,
                include_headers=include_headers,
            ),
            self.stream,
            self._codec,
        )

    def __aiter__(self) -> AsyncBatches:
        return self.messages()


class AsyncClient(Connection):
    """A connection to NATS with JetStream whose calls are coroutines (see
    [`connect_async`][]). ``sync_client`` is the same connection's
    [`Client`][jetstream_arrow.Client], for calls not offered here."""

    def __init__(self, native: _core.Client, options: ConnectOptions) -> None:
        super().__init__(native, options)
        self.sync_client = Client(native, options)

    # -- lifecycle -----------------------------------------------------------------
    async def close(self) -> None:
        """Flush and close the connection. Safe to call twice."""
        await self._native.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def flush(self, timeout: float | None = None) -> None:
        """Send what is buffered and wait for the server to answer a round trip, within
        ``timeout`` seconds (default: the ``request_timeout`` option)."""
        await self._native.flush(timeout)

    # -- publish -------------------------------------------------------------------
    async def publisher(
        self,
        subject: str | None = None,
        *,
        options: PublishOptions | None = None,
        raise_on_error: bool = True,
        codec: ValueCodec | str | None = None,
        **kwargs: Any,
    ) -> AsyncPublisher:
        """A publisher with a bounded window of unacknowledged messages, as the sync
        ``publisher`` takes them: [`PublishOptions`][] fields as keywords."""
        if subject is not None:
            kwargs["subject"] = subject
        settings = PublishOptions.from_kwargs(options, **kwargs)
        native = await self._native.publisher(settings, ValueCodec.of(codec))
        return AsyncPublisher(native, raise_on_error)

    async def publish(
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
        """Publish every row of an Arrow batch, table or stream in the message schema,
        as the sync ``publish``; cancelled, see [`AsyncPublisher.publish`][] (cancelled
        before it sent anything, ``.result`` holds no rows).

        With ``writer`` (exactly once at any age; ``exactly_once``, ``writer_lease``,
        ``position_rows`` as the sync ``publish`` takes them), the sync publish runs
        in a worker thread: it claims the writer's position, may wait out another's
        lease, and records its position as it goes. Cancelling the awaiting task does
        not stop it: it runs to its end in that thread, so the position stays true to
        what the stream holds, and the ``CancelledError`` is raised at once."""
        if writer is not None or exactly_once is not None:
            return await asyncio.to_thread(
                functools.partial(
                    self.sync_client.publish,
                    data,
                    subject,
                    writer=writer,
                    exactly_once=exactly_once,
                    writer_lease=writer_lease,
                    position_rows=position_rows,
                    **options,
                )
            )
        refuse_writer_options(exactly_once, writer_lease, position_rows)
        try:
            publisher = await self.publisher(subject, **options)
        except asyncio.CancelledError as cancelled:
            cancelled.result = _nothing_sent()  # type: ignore[attr-defined]
            raise
        async with publisher:
            return await publisher.publish(data)

    # -- read ----------------------------------------------------------------------
    def read(
        self,
        stream: str,
        *,
        options: ReadOptions | None = None,
        codec: ValueCodec | str | None = None,
        **kwargs: Any,
    ) -> AsyncBatches:
        """Replay a stream in sequence order: ``async for batch in client.read(...)``
        with the options of the sync ``read`` (a [`ReadOptions`][], any field as a
        keyword)."""
        settings = ReadOptions.from_kwargs(options, **kwargs)
        value_codec = ValueCodec.of(codec)
        native = self._native
        return AsyncBatches(lambda: native.read(stream, settings, value_codec), stream, value_codec)

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
    ) -> AsyncOrderedConsumer:
        """An open-ended ordered consumer, as the sync ``ordered_consumer``."""
        return AsyncOrderedConsumer._of(
            self.sync_client.ordered_consumer(
                stream,
                subjects,
                start_seq=start_seq,
                start_time=start_time,
                deliver=deliver,
                heartbeat=heartbeat,
                resume_timeout=resume_timeout,
                codec=codec,
            )
        )

    # -- consumers -----------------------------------------------------------------
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
    ) -> AsyncPullConsumer:
        """Bind to a durable pull consumer by name, with no info lookup (no request);
        ``group`` and its options as [`Client.pull_consumer`][jetstream_arrow.Client.pull_consumer]."""
        return AsyncPullConsumer._of(
            self.sync_client.pull_consumer(
                stream,
                name,
                ack_policy,
                group=group,
                min_pending=min_pending,
                min_ack_pending=min_ack_pending,
                priority=priority,
            )
        )

    async def push_consumer(
        self,
        stream: str,
        name: str,
        *,
        deliver_subject: str | None = None,
        deliver_group: str | None = None,
        ack_policy: Literal["none", "all", "explicit", "flow_control"] | None = None,
    ) -> AsyncPushConsumer:
        """Bind to a durable push consumer, as the sync ``push_consumer``."""
        binding = push_binding(
            self._native, stream, name, deliver_subject, deliver_group, ack_policy
        )
        return AsyncPushConsumer(await binding)

    # -- management: the sync client's calls, each in a worker thread ----------------
    create_stream = _in_thread(Client.create_stream)
    enable_exactly_once = _in_thread(Client.enable_exactly_once)
    update_stream = _in_thread(Client.update_stream)
    create_or_update_stream = _in_thread(Client.create_or_update_stream)
    stream_info = _in_thread(Client.stream_info)
    delete_stream = _in_thread(Client.delete_stream)
    list_streams = _in_thread(Client.list_streams)
    stream_names = _in_thread(Client.stream_names)
    purge_stream = _in_thread(Client.purge_stream)
    get_message = _in_thread(Client.get_message)
    delete_message = _in_thread(Client.delete_message)
    create_consumer = _in_thread(Client.create_consumer)
    update_consumer = _in_thread(Client.update_consumer)
    create_or_update_consumer = _in_thread(Client.create_or_update_consumer)
    consumer_info = _in_thread(Client.consumer_info)
    reset_consumer = _in_thread(Client.reset_consumer)
    pause_consumer = _in_thread(Client.pause_consumer)
    resume_consumer = _in_thread(Client.resume_consumer)
    unpin_consumer = _in_thread(Client.unpin_consumer)
    delete_consumer = _in_thread(Client.delete_consumer)
    list_consumers = _in_thread(Client.list_consumers)
    consumer_names = _in_thread(Client.consumer_names)
    first_seq_at = _in_thread(Client.first_seq_at)
