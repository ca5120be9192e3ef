"""Spark partitions of a read: contiguous ranges of stream sequences (of one stream each).

A batch read and each micro-batch of a streaming read are planned on the driver the
same way (a range split by ``minPartitions`` and ``maxMessagesPerPartition``) and
each partition is read on an executor the same way, so both live here once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from .columns import arrow_schema
from .connection_cache import get_client
from .options import ReadOptions
from .reading import read_latest, read_range


class SequenceRange(InputPartition):
    """One Spark partition: stream sequences ``start..end`` (inclusive) of ``stream``
    (None: the read's one stream), of the subjects ``subjects`` (None: the read's).

    Holds no connection options, so nothing secret is shown where Spark prints
    partitions."""

    def __init__(
        self,
        index: int,
        start: int,
        end: int,
        stream: str | None = None,
        subjects: tuple[str, ...] | None = None,
    ) -> None:
        super().__init__((start, end) if stream is None else (stream, start, end))
        self.index = index
        self.start = start
        self.end = end
        self.stream = stream
        self.subjects = subjects


class LatestPartition(InputPartition):
    """The one Spark partition of a read of the latest message per subject (options
    ``lastPerSubject``, ``kv``): one read, its pages bounded by ``batchRows`` and
    ``maxBytes``."""

    def __init__(self) -> None:
        super().__init__("latest")


def split_range(
    start: int,
    end: int,
    min_partitions: int,
    max_per_partition: int,
    stream: str | None = None,
    first_index: int = 0,
    subjects: tuple[str, ...] | None = None,
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
        ranges.append(SequenceRange(first_index + i, lo, hi, stream, subjects))
        lo = hi + 1
    return ranges


def split_ranges(
    ranges: Mapping[str, tuple[int, int]],
    min_partitions: int,
    max_per_partition: int,
    subjects: Mapping[str, tuple[str, ...] | None],
) -> list[SequenceRange]:
    """The ranges ``{stream: (start, end)}`` of a read of several streams, each split
    as :func:`split_range` does, ``min_partitions`` shared among them by their length
    (every stream with messages gets one partition at least), each read with its
    ``subjects``."""
    spans = {s: end - start + 1 for s, (start, end) in ranges.items() if end >= start}
    total = sum(spans.values())
    out: list[SequenceRange] = []
    for stream, span in spans.items():
        start, end = ranges[stream]
        share = max(1, math.ceil(min_partitions * span / total))
        out += split_range(start, end, share, max_per_partition, stream, len(out), subjects[stream])
    return out


def read_partition(
    opts: ReadOptions,
    partition: InputPartition,
    subjects: Sequence[str] | None,
    schema: StructType,
    inferred: bool = False,
) -> Iterator[pa.RecordBatch]:
    """The messages of one planned partition, on an executor (``inferred``: see
    :func:`.reading.read_range`)."""
    if isinstance(partition, LatestPartition):
        return read_latest(get_client(opts.connect), opts, subjects, arrow_schema(schema))
    if not isinstance(partition, SequenceRange):
        # Spark's placeholder partition of an empty read or micro-batch.
        return iter(())
    return read_range(
        get_client(opts.connect),
        opts,
        partition.stream or opts.stream,
        partition.start,
        partition.end,
        subjects if partition.subjects is None else partition.subjects,
        arrow_schema(schema),
        inferred,
    )
