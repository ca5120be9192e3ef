"""A Delta Lake table as a sink's target, through the ``deltalake`` package.

Each commit is one Delta transaction holding the rows it appends and, for each
stream they came from, an app transaction ``(jetstream-arrow:<stream>, last sequence)``
and another ``(jetstream-arrow-created:<stream>, the stream's creation time in
nanoseconds since the epoch)``, which tells the stream from one deleted and made again
under its name (``origin.py``). The position and the rows are in the log together or
not at all, so a sink that starts again reads its position from the table and needs no
state of its own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ..exceptions import BadInputError, JetStreamArrowError
from .rows import check_unique_ignoring_case
from .target import LakeTarget, TargetCommit

#: The app id of a stream's position in a table's log is this prefix and its name.
APP_ID_PREFIX = "jetstream-arrow:"
#: The app id of the creation time of the stream a position belongs to: this prefix
#: and its name (no stream name makes one app id of the other: their prefixes differ
#: before the colon).
CREATED_APP_ID_PREFIX = "jetstream-arrow-created:"


def app_id(stream: str) -> str:
    """The Delta app transaction id that holds the position of ``stream``."""
    return f"{APP_ID_PREFIX}{stream}"


def created_app_id(stream: str) -> str:
    """The Delta app transaction id that holds when ``stream`` was created."""
    return f"{CREATED_APP_ID_PREFIX}{stream}"


def _deltalake() -> Any:
    try:
        import deltalake
    except ImportError:
        raise BadInputError(
            "a Delta Lake target needs the deltalake package: pip install 'jetstream-arrow[delta]'"
        ) from None
    return deltalake


class DeltaTarget(LakeTarget):
    """A Delta Lake table in the directory ``path``, created by the first commit.

    One sink writes a table's rows of a stream at a time: its position is checked
    against the log before each commit, and a sink that finds another one's there
    stops rather than write rows twice."""

    _kind = "table"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._deltalake = _deltalake()
        self._held_schema: pa.Schema | None = None
        self._partitions: list[str] | None = None
        # The positions this sink last read or wrote, per stream.
        self._expected: dict[str, int] = {}
        # The creation times recorded with them (None: a table of an older release).
        self._created: dict[str, int | None] = {}

    def __repr__(self) -> str:
        return f"DeltaTarget({self.path!r})"

    @property
    def identity(self) -> str:
        """The table, the same whatever directory the sink runs in: its absolute path
        (a URI as given)."""
        return self.path if "://" in self.path else os.path.abspath(self.path)

    def _table(self) -> Any:
        deltalake = self._deltalake
        if not deltalake.DeltaTable.is_deltatable(self.path):
            return None
        return deltalake.DeltaTable(self.path)

    def positions(self, streams: Sequence[str]) -> dict[str, int]:
        """The last sequence of each stream the table holds (0: none)."""
        table = self._table()
        if table is None:
            self._expected = dict.fromkeys(streams, 0)
            self._created = dict.fromkeys(streams)
        else:
            self._held_schema = pa.schema(table.schema().to_arrow())
            self._partitions = list(table.metadata().partition_columns)
            self._expected = {s: int(table.transaction_version(app_id(s)) or 0) for s in streams}
            self._created = {s: table.transaction_version(created_app_id(s)) for s in streams}
        return dict(self._expected)

    def created(self, streams: Sequence[str]) -> dict[str, int | None]:
        """When each stream whose position the table holds was created, as recorded
        with it (nanoseconds since the epoch; None: nothing recorded), as
        :meth:`positions` read them."""
        return {s: self._created.get(s) for s in streams}

    def _location(self) -> str:
        return self.path

    def _partitioning(self) -> list[str] | None:
        return self._partitions

    def _schema(self) -> pa.Schema | None:
        return self._held_schema

    def _write(self, commit: TargetCommit) -> None:
        """One Delta transaction: the rows appended, and an app transaction per stream
        for its position and its creation time; refused when another sink moved a
        position past the one this sink last read or wrote."""
        deltalake = self._deltalake
        table = self._table()
        if table is not None:
            for stream in commit.positions:
                held = int(table.transaction_version(app_id(stream)) or 0)
                if held > self._expected.get(stream, 0):
                    raise JetStreamArrowError(
                        f"table {self.path} holds stream {stream} up to sequence {held}, "
                        f"past this sink's {self._expected.get(stream, 0)}: another sink "
                        "writes it; this one stops rather than write rows twice"
                    )
        check_unique_ignoring_case(commit.schema, f"table {self.path}")
        transactions = [
            deltalake.Transaction(app_id(stream), seq) for stream, seq in commit.positions.items()
        ]
        transactions += [
            deltalake.Transaction(created_app_id(stream), ns)
            for stream, ns in commit.created.items()
        ]
        try:
            deltalake.write_deltalake(
                self.path,
                commit.rows,
                mode="append",
                schema_mode="merge",
                partition_by=commit.partition_by or None,
                commit_properties=deltalake.CommitProperties(app_transactions=transactions),
            )
        except Exception as e:  # deltalake's errors share no base class of their own
            raise JetStreamArrowError(f"cannot commit to Delta table {self.path}: {e}") from e
        self._held_schema = commit.schema
        self._partitions = commit.partition_by
        self._expected.update(commit.positions)
        self._created.update(commit.created)
