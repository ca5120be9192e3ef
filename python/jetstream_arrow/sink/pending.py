"""What a sink has read and not committed yet: the rows, the malformed payloads to
dead-letter, the positions they reach and the work-queue deliveries to acknowledge
once the commit that holds them is in the target."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .rows import SplitBatch


@dataclass
class Pending:
    """The rows read and not yet committed, with the positions they reach."""

    rows: list[pa.Table] = field(default_factory=list)
    #: The rows whose payload did not decode, with their stream.
    malformed: list[tuple[pa.Table, str]] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    #: Work-queue deliveries to acknowledge once this commit is in the target.
    acks: list[Any] = field(default_factory=list)
    count: int = 0
    since: float | None = None

    def add(self, stream: str, batch: SplitBatch) -> None:
        if batch.rows.num_rows:
            self.rows.append(batch.rows)
        if batch.malformed.num_rows:
            self.malformed.append((batch.malformed, stream))
        self.count += batch.rows.num_rows + batch.malformed.num_rows
        self.reach(stream, batch.through_seq)

    def reach(self, stream: str, seq: int) -> None:
        if seq > self.positions.get(stream, 0):
            self.positions[stream] = seq
            if self.since is None:
                self.since = time.monotonic()

    def due(self, commit_seconds: float) -> bool:
        """Whether the first row pending was read ``commit_seconds`` ago or more."""
        return self.since is not None and time.monotonic() - self.since >= commit_seconds
