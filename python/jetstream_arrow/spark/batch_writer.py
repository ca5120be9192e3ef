"""The batch writer of ``df.write.format("jetstream")``.

Each task publishes with message ids ``<write id>-<partition>-<row>``
(:mod:`.writing`), so a retried task, or the whole write run again with the same
option ``writeId`` (same data, same partitioning), stores only what is missing
(inside the stream's duplicate window).

With option ``exactlyOnce`` each task is an exactly-once writer whose identity is its
msg id prefix, ``<write id>-<partition>-``: stable across re-runs with the same
``writeId``, so a re-run at any age resumes after what each task stored. A copy of
a stream is the writer ``<write id>-copy:<source stream>:<first source seq>``: its
position is a source sequence, so the identity names the part of the source the
task copies (two tasks of one write copy disjoint ranges of one source), and a
re-run that reads the same range plans the same partitions and finds it again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from .exactly_once import ExactlyOnceTask, forget_positions
from .publishing_writer import PublishingWriter
from .writing import (
    JetStreamCommitMessage,
    finished_tasks,
    msg_id_prefix,
    publish_task,
    report_aborted,
    task_ids,
)


class JetStreamWriter(PublishingWriter, DataSourceArrowWriter):
    """Publishes each task's Arrow batches; idempotent across task retries."""

    def __repr__(self) -> str:
        return f"JetStreamWriter(write_id={self.opts.write_id!r})"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> JetStreamCommitMessage:
        _, partition, attempt = task_ids()
        where = f"write {self.opts.write_id}, partition {partition}, attempt {attempt}"
        run = f"{self.opts.write_id}-"
        prefix = msg_id_prefix(self.columns, run, f"{partition}-")
        task = None
        if self.exactly_once:
            task = ExactlyOnceTask(
                writer=prefix,
                # The partition, as the read planned it: a re-run of the same read
                # plans the same ranges, whatever became of their first messages.
                copy_writer=lambda source, _: f"{run}copy:{source}:{partition}",
            )
        tally = publish_task(self.opts, self.columns, iterator, prefix, where, task)
        return JetStreamCommitMessage(partition, attempt, **asdict(tally))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        done = finished_tasks(messages, JetStreamCommitMessage)
        self._commit(f"write {self.opts.write_id}", done, len(messages))
        if self.exactly_once and not self.opts.write_id_given:
            forget_positions(self.opts, [m.writer for m in done if m.writer])

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = finished_tasks(messages, JetStreamCommitMessage)
        how_to_finish = (
            "To finish the write without duplicates, run it again with option "
            f"writeId={self.opts.write_id} (same data, same partitioning)"
            + (
                ": each task resumes after what it stored, at any age."
                if self.exactly_once
                else " within the stream's duplicate window."
            )
        )
        if self.merged:
            # Run again with the same ids, the merged rows would be duplicates again.
            how_to_finish = "Rows alike in everything shared msg ids: see the error."
        report_aborted(f"write {self.opts.write_id}", done, len(messages), how_to_finish)
