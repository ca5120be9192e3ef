"""``run_sink``, the lake sink's entry point: its options checked (``settings.py``),
then one run of a ``Sink`` (``sink.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..codec import ValueCodec
from .settings import (
    DEFAULT_COMMIT_ROWS,
    DEFAULT_COMMIT_SECONDS,
    DEFAULT_RESUME_TIMEOUT,
    SinkSettings,
)
from .sink import Sink, SinkProgress, SinkReport
from .target import Target


def run_sink(
    client: Any,
    streams: Sequence[str],
    target: Target,
    *,
    follow: bool = False,
    subjects: Mapping[str, str | Sequence[str]] | None = None,
    codec: ValueCodec | str | Mapping[str, ValueCodec | str | None] | None = None,
    include_headers: bool = False,
    partition_by: Sequence[str] | None = (),
    commit_rows: int = DEFAULT_COMMIT_ROWS,
    commit_seconds: float = DEFAULT_COMMIT_SECONDS,
    dead_letter_stream: str | None = None,
    dead_letter_lease: float | None = None,
    batch_rows: int | None = None,
    durable: str | None = None,
    resume_timeout: float = DEFAULT_RESUME_TIMEOUT,
    stop: threading.Event | None = None,
    on_progress: Callable[[SinkProgress], None] | None = None,
) -> SinkReport:
    """Land the messages of ``streams`` into ``target`` exactly once, and return
    what was done.

    Each stream is read from the position ``target`` holds (the last sequence it
    committed) + 1: until the stream's last sequence when the sink started, or with
    ``follow``, on and on, looking for new messages every half second once caught
    up, until ``stop`` is set. Rows are committed, with each stream's new position
    in the same transaction, every ``commit_rows`` rows or ``commit_seconds``
    seconds after the first pending row; rows read and not committed when the
    process dies are read again by the next run, so none is written twice or
    skipped. Setting ``stop`` (a ``threading.Event``; a signal handler may set it)
    ends the sink after it commits what it has read.

    - ``subjects``: a subject filter (or several) per stream name.
    - ``codec``: a [`ValueCodec`][] or format name (or one per stream name): each
      payload is decoded and its fields land as columns beside ``stream``,
      ``subject``, ``seq`` and ``timestamp`` (a field named like one of them lands
      as ``value_<name>``). Without one, the payload lands as the ``data`` column.
      New columns are added to the table; a column that arrives with another type
      is refused.
    - ``include_headers``: a ``headers`` column.
    - ``partition_by``: ``"date"`` (the UTC day of ``timestamp``) and
      ``"subject_token_N"`` (the Nth token of the subject) columns to partition by
      (None or none: no partitions). A subject whose token is
      ``__HIVE_DEFAULT_PARTITION__`` is refused: it would read back as null.
    - ``dead_letter_stream``: payloads that do not decode are published there
      (acknowledged) before the commit that moves the position past them, with
      their error and source in headers and msg id ``<stream>:<seq>:<reader>``
      (``<reader>``: a digest of the target and the stream's creation); without
      one, such a payload stops the sink with its error. Into a dead-letter stream
      that holds writers' positions (``create_stream(..., exactly_once=True)``,
      ``jetstream-arrow streams enable-exactly-once``) each letter is stored once at
      any age, even by a sink that died between its letters and its commit and is
      restarted after the stream's duplicate window; into another, within that
      window, with one ``ExactlyOnceUnavailableWarning``.
    - ``dead_letter_lease``: seconds a sink's dead-letter position claims its
      identity (default ``_core.DEFAULT_WRITER_LEASE``): a sink restarted after one
      that died waits until then before its first letters.
    - ``batch_rows``: rows per read batch (default the read's, at most
      ``commit_rows``).
    - ``durable``: the durable pull consumer through which a stream with
      ``workqueue`` or ``interest`` retention is consumed (such a stream cannot be
      read by range: its messages go once acknowledged). It is created if missing,
      with explicit acks; each message is acknowledged after the commit that holds
      it, and one delivered again at or below the target's position (committed by a
      run that died before its acks) is acknowledged and not landed again. Required
      for such streams, refused when no stream is one. One sink per consumer.
    - ``resume_timeout``: how long each call to the server (a stream's info, a read,
      a consumer's pull or info, dead letters' publish) waits while the server does
      not answer (no reply, a lost connection, a ``503``) before the sink fails,
      in seconds (default 300). The client's own reconnects must last as long:
      connect with ``max_reconnects=None`` for a sink that follows.
    - ``on_progress``: called with a [`SinkProgress`][jetstream_arrow.sink.SinkProgress]
      after each batch read and each commit.
    """
    settings = SinkSettings.checked(
        streams,
        follow=follow,
        subjects=subjects,
        codec=codec,
        include_headers=include_headers,
        partition_by=partition_by,
        commit_rows=commit_rows,
        commit_seconds=commit_seconds,
        dead_letter_stream=dead_letter_stream,
        dead_letter_lease=dead_letter_lease,
        batch_rows=batch_rows,
        durable=durable,
        resume_timeout=resume_timeout,
    )
    return Sink(client, target, settings, stop, on_progress).run()
