"""What a sink lands rows into: the ``Target`` protocol a sink commits through, and
``LakeTarget``, what a Delta table and a Parquet dataset share as targets (a table
keeps the partitioning it is created with, its schema only grows by new columns),
so that the next lake format adds only how it writes one commit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from ..exceptions import BadInputError
from .rows import merged_schema


class Target(Protocol):
    """Where a sink lands rows: a [`DeltaTarget`][jetstream_arrow.sink.DeltaTarget]
    or a [`ParquetTarget`][jetstream_arrow.sink.ParquetTarget]."""

    @property
    def identity(self) -> str: ...

    def positions(self, streams: Sequence[str]) -> dict[str, int]: ...

    def created(self, streams: Sequence[str]) -> dict[str, int | None]: ...

    def commit(
        self,
        rows: pa.Table,
        positions: Mapping[str, int],
        partition_by: Sequence[str],
        created: Mapping[str, int] | None = None,
    ) -> None: ...


@dataclass(frozen=True)
class TargetCommit:
    """One commit a lake target writes, checked against what the table holds: the
    ``rows`` to append, the table's ``schema`` once they are in it, each stream's new
    position (last sequence), the ``partition_by`` columns and when each stream was
    ``created`` (nanoseconds since the epoch)."""

    rows: pa.Table
    schema: pa.Schema
    positions: dict[str, int]
    partition_by: list[str]
    created: dict[str, int]


class LakeTarget(ABC):
    """A lake table as a sink's target: each commit is checked against the table's
    partitioning and schema here, then written, rows and positions together, by
    :meth:`_write`."""

    #: What the table is called in errors: ``table``, ``dataset``.
    _kind: str

    @abstractmethod
    def _location(self) -> str:
        """Where the table is, as errors name it."""

    @abstractmethod
    def _partitioning(self) -> list[str] | None:
        """The columns the table is partitioned by (None: no table yet)."""

    @abstractmethod
    def _schema(self) -> pa.Schema | None:
        """The table's schema (None: no table yet)."""

    @abstractmethod
    def _write(self, commit: TargetCommit) -> None:
        """Append the commit's rows and move its positions, in one transaction."""

    def commit(
        self,
        rows: pa.Table,
        positions: Mapping[str, int],
        partition_by: Sequence[str],
        created: Mapping[str, int] | None = None,
    ) -> None:
        """Append ``rows`` and move each stream's position to ``positions`` in one
        transaction, with the ``created`` time of each such stream."""
        where = f"{self._kind} {self._location()}"
        partitioning = self._partitioning()
        if partitioning is not None and partitioning != list(partition_by):
            raise BadInputError(
                f"option 'partition_by' {list(partition_by)}: {where} is partitioned by "
                f"{partitioning}; a {self._kind} keeps its partitioning"
            )
        self._write(
            TargetCommit(
                rows=rows,
                schema=merged_schema(self._schema(), rows.schema, where),
                positions={s: int(seq) for s, seq in positions.items()},
                partition_by=list(partition_by),
                created={s: int(ns) for s, ns in (created or {}).items()},
            )
        )
