"""Functions for ``df.mapInArrow``: publish each batch, or read sequence ranges.

Both take the options of the data source in Python spelling (or Spark spelling) and
return a plain function that Spark pickles to its executors; the connection is made
there, once per Python worker process.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from ..exceptions import BadInputError
from .columns import ACK_SCHEMA, arrow_schema, conform
from .connection_cache import get_client
from .dead_letters import check_dead_letter_stream, routes_dead_letters
from .options import parse_read_options, parse_write_options
from .preflight import check_worker_python
from .reading import read_range
from .value_codec import carries_schema, read_schema
from .writing import PublishTally, msg_id_prefix, publish_batches, task_ids, write_columns

ArrowFn = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def publish_fn(**options: Any) -> ArrowFn:
    """A function for ``df.mapInArrow(fn, ACK_SCHEMA)`` that publishes every row.

    The input has the columns of a write: ``subject`` (or option ``subject``), ``data``
    (binary or string), optional ``headers`` and an optional id column (``msg_id``, or
    the one named by ``msg_id_column``), and the per-row columns a publish takes:
    ``expected_last_subject_seq`` and ``expected_last_msg_id`` (checks), ``ttl`` (an
    interval: the row's ``Nats-TTL``), ``schedule`` with ``schedule_target``
    (scheduled messages), or ``increment`` without ``data`` (counter increments).
    With option ``kv`` the input is ``key``, ``value`` and optionally ``operation``
    and ``expected_revision`` instead. For each input batch it yields one batch of
    acks, row for row in input order, with the schema
    ``seq bigint, duplicate boolean, error string`` ([`ACK_SCHEMA`][]): ``seq`` is
    the stream sequence (null when the row failed), ``duplicate`` says the server
    already had that message id, ``error`` is null when the row is stored. Rows of
    counter increments are acked the same way: the counter's value after each is not
    in these acks (``Client.read_counters`` reads the counters).

    Options: the connection options of [`jetstream_arrow.connect`][] and the write
    options (``subject``, ``msg_id_column``, ``kv``, ``write_id``, ``publish_mode``,
    ``atomic_batch_rows``, ``compression``, ``window``, ``ack_timeout``,
    ``max_retries``, ``retry_backoff``, ``expected_stream``, and ``value_format``,
    ``avro_schema``, ``avro_framing``, ``avro_schema_id``, ``protobuf_message``,
    ``protobuf_descriptor_file``: the value columns encoded into each payload, no
    ``data`` column; the value is a struct column ``value``, or every column but
    those above that steer the publish (a ``ttl`` only when it is an interval, the
    schedule columns only together) and, in a copy, the read's own columns;
    ``value_schema`` is the earlier spelling of ``avro_schema`` and
    ``protobuf_message``). With ``publish_mode="fast"`` the server acknowledges
    ranges, so ``seq`` is null and a duplicate counts as stored; with ``"atomic"``
    each batch of ``atomic_batch_rows`` rows is stored whole or not at all.

    Message ids: rows without an id get ``<write id>-<stage>-<partition>-<n>``, so a
    retried task is deduplicated by the server while running the function again in
    another job (another action on the DataFrame) publishes again. With an explicit
    ``write_id`` the ids are ``<write id>-<partition>-<n>``: running the same input
    again, in any job, is deduplicated (inside the stream's duplicate window). Rows
    of a copy of a stream (``stream`` and ``seq`` columns) are numbered by their
    source message instead of ``<partition>-<n>``: ``<stream>:<seq>:<digest>``.
    ``exactly_once=True`` and ``writer_lease`` are refused: the acks are row for row,
    so every row is sent, exact within the duplicate window (``df.write`` keeps
    positions).

    Raises [`SparkSetupError`][jetstream_arrow.exceptions.SparkSetupError] at once when the active
    session's Python workers cannot import this package.
    """
    check_worker_python()
    explicit_id = any(k.replace("_", "").lower() == "writeid" for k in options)
    opts = parse_write_options(options)
    for given in options:
        name = given.replace("_", "").lower()
        if (name == "exactlyonce" and opts.exactly_once) or name == "writerlease":
            # Positions skip what the stream holds, and publish_fn owes Spark an ack
            # for every input row: it is exact within the duplicate window only.
            raise BadInputError(
                f"publish_fn: option {given!r} is for df.write and df.writeStream "
                "(exactly once at any age): publish_fn yields an ack for every input row, "
                "so it sends every row and is exact within the stream's duplicate window"
            )
    write_id = opts.write_id if explicit_id else uuid.uuid4().hex

    def publish(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        stage, partition, attempt = task_ids()
        batches = iter(batches)
        first = next(batches, None)
        if first is None:
            return
        columns = write_columns(opts, first.schema)
        run = f"{write_id}-" if explicit_id else f"{write_id}-{stage}-"
        prefix = msg_id_prefix(columns, run, f"{partition}-")
        target = arrow_schema(ACK_SCHEMA)
        where = f"publish_fn, partition {partition}, attempt {attempt}"
        # The first batch was taken to learn the columns; it is published too.
        batches = itertools.chain([first], batches)
        for result in publish_batches(opts, columns, batches, prefix, PublishTally(), where):
            for acks in result.acks.to_batches():
                yield conform(acks, target)

    return publish


def read_fn(**options: Any) -> ArrowFn:
    """A function for ``df.mapInArrow(fn, message_schema(include_headers))`` that reads
    the messages of each input row's sequence range.

    Input columns: ``stream`` (string; optional when option ``stream`` is given),
    ``start_seq`` (bigint, first sequence) and ``end_seq`` (bigint, last sequence,
    inclusive; null reads to the stream's last message). Output: the message schema
    ``stream string, subject string, seq bigint, timestamp timestamp, data binary``,
    with ``headers map<string, array<string>>`` before ``data`` when
    ``include_headers=True`` ([`message_schema`][jetstream_arrow.spark.message_schema] gives it).

    Options: the connection options of [`jetstream_arrow.connect`][], ``stream``,
    ``subjects``, ``include_headers``, ``include_ttl`` (a ``ttl`` interval column before
    ``data``: each message's ``Nats-TTL``), ``fail_on_data_loss``, ``batch_rows``,
    ``max_bytes``, ``resume_timeout``, ``heartbeat``, and the value options (``value_format``,
    ``value_schema`` (required for ``json`` and ``arrow``), ``on_malformed`` (and
    ``dead_letter_stream`` with ``deadletter``),
    ``avro_schema``, ``avro_framing``, ``avro_schemas_by_id``, ``protobuf_message``,
    ``protobuf_descriptor_file``: the output then has ``value`` in place of ``data``, see
    ``jetstream_arrow.spark.value_codec.read_schema``). The range options (``start_seq``, ...) and the split
    options (``min_partitions``, ``max_messages_per_partition``) are refused: each input
    row is one range, read whole by the task that holds it.

    Raises [`SparkSetupError`][jetstream_arrow.exceptions.SparkSetupError] at once when the active
    session's Python workers cannot import this package.
    """
    check_worker_python()
    # The range and split options are refused as their declarations say: each input
    # row is one range, read whole.
    opts = parse_read_options(options, need_stream=False, queries="read_fn")
    if opts.value_format is not None and not carries_schema(opts) and opts.value_schema is None:
        raise BadInputError(
            "read_fn: option 'value_schema' is required with value_format "
            f"{opts.value_format!r}: mapInArrow declares the output schema before any read "
            "(jetstream_arrow.spark.value_codec.read_schema gives it)"
        )
    if routes_dead_letters(opts):
        check_dead_letter_stream(get_client(opts.connect), opts)
    target = arrow_schema(read_schema(opts))

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        client = get_client(opts.connect)
        for batch in batches:
            names = {n.lower(): n for n in batch.schema.names}
            for column in ("start_seq", "end_seq") + (() if opts.stream else ("stream",)):
                if column not in names:
                    raise BadInputError(
                        f"read_fn: no column {column!r} in the input "
                        f"(columns: {', '.join(batch.schema.names)}); each row is a range "
                        "(stream, start_seq, end_seq)"
                    )
            starts = batch.column(names["start_seq"]).to_pylist()
            ends = batch.column(names["end_seq"]).to_pylist()
            streams = (
                batch.column(names["stream"]).to_pylist()
                if "stream" in names
                else [opts.stream] * batch.num_rows
            )
            for stream, start, end in zip(streams, starts, ends, strict=True):
                if stream is None or start is None:
                    raise BadInputError("read_fn: 'stream' and 'start_seq' may not be null")
                if start < 1 or (end is not None and end < start):
                    raise BadInputError(
                        f"read_fn: bad range start_seq={start}, end_seq={end} (sequences start "
                        "at 1, end_seq is inclusive and not below start_seq)"
                    )
                yield from read_range(
                    client,
                    opts,
                    stream,
                    int(start),
                    None if end is None else int(end),
                    opts.subjects,
                    target,
                )

    return read
