"""Land streams into lake tables exactly once: a Delta Lake table
([`DeltaTarget`][jetstream_arrow.sink.DeltaTarget]) or a partitioned Parquet dataset
([`ParquetTarget`][jetstream_arrow.sink.ParquetTarget]), each commit holding its rows
and the stream positions they reach, so a sink that starts again needs no state of
its own. [`run_sink`][jetstream_arrow.sink.run_sink] runs one; ``jetstream-arrow
sink`` is its command line."""

from __future__ import annotations

from .delta import DeltaTarget, app_id
from .parquet import ParquetTarget, dataset_files, read_manifest
from .run import run_sink
from .settings import (
    DEFAULT_COMMIT_ROWS,
    DEFAULT_COMMIT_SECONDS,
    DEFAULT_RESUME_TIMEOUT,
    MAX_COMMIT_ROWS,
    MAX_COMMIT_SECONDS,
)
from .sink import SinkProgress, SinkReport
from .target import Target

__all__ = [
    "DEFAULT_COMMIT_ROWS",
    "DEFAULT_COMMIT_SECONDS",
    "DEFAULT_RESUME_TIMEOUT",
    "MAX_COMMIT_ROWS",
    "MAX_COMMIT_SECONDS",
    "DeltaTarget",
    "ParquetTarget",
    "SinkProgress",
    "SinkReport",
    "Target",
    "app_id",
    "dataset_files",
    "read_manifest",
    "run_sink",
]
