"""The batch reader of ``spark.read.format("jetstream")``.

Plans a read on the driver as ranges of stream sequences (narrowed by the options
and by pushed-down filters) and reads each range on an executor as Arrow batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StructType

from .._time import from_epoch_micros
from ..client import Client
from .connection_cache import get_client
from .options import ReadOptions
from .partitions import LatestPartition, read_partition, split_range, split_ranges
from .pushdown import PushedFilters
from .reading import check_data_loss, first_available, first_seq_at
from .stream_lookup import streams_named, streams_of


class JetStreamReader(DataSourceReader):
    """A batch read of one stream, or of several (options ``streams``,
    ``streamPattern``). Partitions are planned on the driver."""

    def __init__(self, opts: ReadOptions, schema: StructType, inferred: bool = False) -> None:
        self.opts = opts
        self.schema = schema
        # Whether the JSON value's schema was inferred when the query was planned.
        self.inferred = inferred
        self.pushed = PushedFilters()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({streams_named(self.opts)})"

    # The planning step, in a Python process on the driver.
    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        if opts.last_per_subject or opts.kv is not None:
            return [LatestPartition()]
        if self.pushed.subject_filters() == []:
            return []
        client = get_client(opts.connect)
        chosen = streams_of(client, opts, self._subjects())
        ranges = {
            stream: self._range_of(client, stream, it.state)
            for stream, it in chosen.items()
            # A stream of several that stores none of the read's subjects.
            if it.subjects != ()
        }
        if not opts.several_streams:
            start, end = ranges[opts.stream]
            return list(
                split_range(start, end, opts.min_partitions, opts.max_messages_per_partition)
            )
        subjects = {stream: it.subjects for stream, it in chosen.items()}
        return list(
            split_ranges(ranges, opts.min_partitions, opts.max_messages_per_partition, subjects)
        )

    def _range_of(self, client: Client, stream: str, state: Any) -> tuple[int, int]:
        """The sequences ``(start, end)`` of ``stream`` the read takes (none when
        start > end), from the options, the pushed filters and the stream's state."""
        opts = self.opts
        last = int(state.last_seq)
        available = first_available(state)

        start = opts.start_seq
        if start is not None and opts.fail_on_data_loss:
            check_data_loss(
                client,
                stream,
                start,
                opts.end_seq or last,
                "option 'startingSequence'",
                patience=opts.resume_timeout,
            )
        if start is None and opts.start_time is not None:
            found = first_seq_at(client, stream, opts.start_time, opts.resume_timeout)
            start = found if found is not None else last + 1
        start = max(start or 1, available, self.pushed.seq_lo)

        end = min(last, self.pushed.seq_hi)
        if opts.end_seq is not None:
            end = min(end, opts.end_seq)
        if opts.end_time is not None:
            found = first_seq_at(client, stream, opts.end_time, opts.resume_timeout)
            if found is not None:
                end = min(end, found - 1)
        if self.pushed.time_lo is not None and start <= end:
            found = first_seq_at(
                client, stream, from_epoch_micros(self.pushed.time_lo), opts.resume_timeout
            )
            start = max(start, found if found is not None else last + 1)
        if self.pushed.time_hi is not None and start <= end:
            found = first_seq_at(
                client, stream, from_epoch_micros(self.pushed.time_hi), opts.resume_timeout
            )
            if found is not None:
                end = min(end, found - 1)
        return start, end

    def _subjects(self) -> list[str] | None:
        if self.opts.subjects is not None:
            return list(self.opts.subjects)
        return self.pushed.subject_filters()

    # On an executor.
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, partition, self._subjects(), self.schema, self.inferred)


class JetStreamPushdownReader(JetStreamReader):
    """The reader with filter pushdown (:mod:`.pushdown`), used when Spark plans with
    pushdown enabled."""

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        if self.opts.last_per_subject or self.opts.kv is not None:
            # A filter on seq or timestamp applies to the latest messages, not to
            # which messages are the latest: Spark applies them all.
            return filters
        subjects_given = self.opts.subjects is not None
        return [f for f in filters if not self.pushed.push(f, subjects_given)]
