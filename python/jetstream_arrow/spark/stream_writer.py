"""The stream writer of ``df.writeStream.format("jetstream")``.

A streaming write publishes each micro-batch like a batch write, with message ids
``<query id>-<batch id>-<partition>-<row>``. Spark keeps the query id in the
checkpoint and re-runs an unfinished micro-batch under its old batch id after a
restart, so the re-run sends the ids of the first attempt and the server drops the
messages it already stored. A copy of a stream (the read's ``stream`` and ``seq``
columns) is numbered by its source messages alone, ``<stream>:<seq>:<digest>``, so
that any query moving a message again (a standby of a consumer group taking over
what the stopped query had not acknowledged) sends the id it had.

With option ``exactlyOnce`` each task is also an exactly-once writer, so a query
restarted from its checkpoint at any age skips what the re-run micro-batch stored
(the duplicate window no longer has to outlast the restart). Identities are kept per
query id (from the checkpoint) and partition, not per micro-batch, so the stream
holds one position per partition of the query, not one per task ever run:

* rows numbered by position are the writer ``<query id>-<partition>-``, and their
  msg ids ``<query id>-<partition>-<n>`` with ``n = batch id * 10**9 + row``, so the
  rows of one partition are numbered on across micro-batches and a position is
  "every row before this one of this partition";
* a copy of a stream is the writer ``<query id>-copy:<source stream>:<partition>``,
  its position the next source sequence (a streaming read plans each micro-batch as
  ranges of later sequences, so a partition's ranges only move forward; the re-run of
  a micro-batch plans the same ranges); its msg ids stay the source's.

The write task, its commit message and reports are the batch writer's too
(:mod:`.writing`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from ..exceptions import JetStreamArrowError
from .exactly_once import ExactlyOnceTask
from .publishing_writer import PublishingWriter
from .writing import (
    JetStreamCommitMessage,
    finished_tasks,
    msg_id_prefix,
    publish_task,
    report_aborted,
)

#: Local properties Spark sets for the tasks of a streaming micro-batch.
_QUERY_ID_PROPERTY = "sql.streaming.queryId"
_BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: Rows an exactly-once partition numbers per micro-batch: row ``r`` of batch ``b`` is
#: ``b * ROWS_PER_MICRO_BATCH + r``. A billion rows per partition of a micro-batch;
#: the numbers stay within int64 for 9.2 billion micro-batches (29 years at ten a
#: second).
ROWS_PER_MICRO_BATCH = 10**9


@dataclass
class StreamCommitMessage(JetStreamCommitMessage):
    """What one write task of a micro-batch did, and the query it belongs to."""

    # A default only because the fields before it have one; always given.
    query_id: str = ""


def micro_batch_ids() -> tuple[str, int, int, int]:
    """(query id, batch id, partition id, attempt number) of the running write task.

    The query id is kept in the checkpoint, so it survives a restart (the run id does
    not); the batch id is the micro-batch's, the same when Spark re-runs it.
    """
    from pyspark import TaskContext

    ctx = TaskContext.get()
    query_id = ctx.getLocalProperty(_QUERY_ID_PROPERTY) if ctx is not None else None
    batch_id = ctx.getLocalProperty(_BATCH_ID_PROPERTY) if ctx is not None else None
    if ctx is None or not query_id or batch_id is None:
        raise JetStreamArrowError(
            "a jetstream streaming write runs only as a task of a micro-batch of a "
            "streaming query (Spark gives it the query id and the batch id that make "
            "its message ids)"
        )
    return query_id, int(batch_id), ctx.partitionId(), ctx.attemptNumber()


class JetStreamStreamWriter(PublishingWriter, DataSourceStreamArrowWriter):
    """Publishes each micro-batch's Arrow batches; idempotent across task retries and
    micro-batch re-runs (a query restarted from its checkpoint)."""

    def __repr__(self) -> str:
        return "JetStreamStreamWriter()"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamCommitMessage:
        query_id, batch_id, partition, attempt = micro_batch_ids()
        where = (
            f"streaming query {query_id}, batch {batch_id}, partition {partition}, "
            f"attempt {attempt}"
        )
        # A copy's ids are its source messages' alone (no run prefix): queries of one
        # consumer group, or a query started anew, that move a message again give it
        # the id it had, and the target stores it once. Rows numbered by position take
        # the query id, since every query numbers its batches from 0.
        task = None
        if self.exactly_once:
            prefix = msg_id_prefix(self.columns, "", f"{query_id}-{partition}-")
            task = ExactlyOnceTask(
                writer=prefix,
                start=batch_id * ROWS_PER_MICRO_BATCH,
                copy_writer=lambda source, _: f"{query_id}-copy:{source}:{partition}",
            )
        else:
            prefix = msg_id_prefix(self.columns, "", f"{query_id}-{batch_id}-{partition}-")
        tally = publish_task(self.opts, self.columns, iterator, prefix, where, task)
        return StreamCommitMessage(partition, attempt, **asdict(tally), query_id=query_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = finished_tasks(messages, StreamCommitMessage)
        self._commit(self._batch(done, batchId), done, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = finished_tasks(messages, StreamCommitMessage)
        report_aborted(
            self._batch(done, batchId),
            done,
            len(messages),
            f"Restart the query from its checkpoint: it re-runs batch {batchId} with the "
            "same message ids"
            + (
                ", and each task resumes after what it stored, at any age."
                if self.exactly_once
                else ", so the server drops what is already stored (inside the stream's "
                "duplicate window)."
            ),
        )

    @staticmethod
    def _batch(done: list[StreamCommitMessage], batch_id: int) -> str:
        # This runs in a driver process of its own, which is not told the query id;
        # the tasks' messages carry it.
        query = f"streaming query {done[0].query_id}" if done else "streaming query"
        return f"{query} batch {batch_id}"
