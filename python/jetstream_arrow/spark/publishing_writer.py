"""What the batch writer (:mod:`.batch_writer`) and the stream writer
(:mod:`.stream_writer`) share: their state, and the commit of a write (or of a
micro-batch), refused where the server merged rows of a copy that were alike in
everything (:mod:`.copy_ids`)."""

from __future__ import annotations

from collections.abc import Sequence

from .copy_ids import alike_rows_merged, refuse_merged
from .options import WriteOptions
from .writing import JetStreamCommitMessage, WriteColumns, report_committed


class PublishingWriter:
    """A Spark writer's state: the write's options, its columns and whether each task
    keeps its position in the stream (option exactlyOnce)."""

    def __init__(
        self, opts: WriteOptions, columns: WriteColumns, exactly_once: bool = False
    ) -> None:
        self.opts = opts
        self.columns = columns
        #: Whether each task keeps its position in the stream (option exactlyOnce).
        self.exactly_once = exactly_once
        #: Whether the commit found rows the server merged (``alike_rows_merged``).
        self.merged = False

    def _commit(self, write: str, done: Sequence[JetStreamCommitMessage], tasks: int) -> None:
        """Commit ``write`` (as reports name it) of ``tasks`` tasks, ``done`` of them
        finished: refused where they sent rows the server merged, else reported."""
        merged = alike_rows_merged(self.columns, done)
        if merged is not None:
            self.merged = True
            refuse_merged(write, merged)
        report_committed(write, done, tasks)
