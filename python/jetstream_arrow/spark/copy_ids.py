"""Whether a copy's rows were merged: rows alike in everything made from one source
message share a msg id, and the server keeps one of them (see ``alike_rows_merged``).
Checked by the batch and stream writers when a write commits."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from ..exceptions import PublishError
from .columns import PublishColumns
from .writing import JetStreamCommitMessage


def alike_rows_merged(
    columns: Any, done: Sequence[JetStreamCommitMessage]
) -> JetStreamCommitMessage | None:
    """A finished task of a copy that sent a row the server took for a duplicate of a
    message this same write stored from another row; None when there is none.

    A copy's msg id is its source message's identity, and rows alike in everything
    made from one source message are told apart only by their order among that
    message's rows next to each other in one task: spread over tasks (a repartition
    after an explode) they share an id, and the server keeps one. A duplicate is
    otherwise what a retry or a re-run is meant to find (a message stored by an
    earlier attempt of the task, an earlier run, or a resend of the task's own), so
    only a task that ran once and resent nothing tells, by a duplicate of a message
    one of this write's tasks stored. Not any message stored after this write's
    first: another writer copying the same source messages at the same time (a
    streaming query of a consumer group whose pin moved while its micro-batch ran)
    stores them under the same ids, and the other's duplicates are no merged rows."""
    if not (isinstance(columns, PublishColumns) and columns.is_copy) or columns.msg_id:
        # Ids the rows give (a 'msg_id' column) may repeat on purpose, to drop rows.
        return None
    ranges = sorted(r for m in done for r in m.stored_ranges)
    starts = [lo for lo, _ in ranges]
    for m in done:
        if m.retried or m.resends or m.last_duplicate_of is None:
            continue
        at = bisect_right(starts, m.last_duplicate_of) - 1
        if at >= 0 and m.last_duplicate_of <= ranges[at][1]:
            return m
    return None


def refuse_merged(write: str, merged: JetStreamCommitMessage) -> None:
    """Fail a write ``alike_rows_merged`` found rows of, saying what to change."""
    raise PublishError(
        f"{write}: partition {merged.partition} sent a row the server took for a "
        f"duplicate of message {merged.last_duplicate_of}, which this write stored from "
        "another row: rows alike in every column made from one source message (an "
        "explode of a repeated value) that are not next to each other in one task (a "
        "repartition or a shuffle after the explode) share one msg id (columns 'stream', "
        "'seq' and a digest of 'subject', 'data' and 'headers'), and the stream keeps "
        "one of them. Give each row its own id (a 'msg_id' column, or option "
        "'msgIdColumn': the source's stream and seq with posexplode's position), make "
        "the rows differ in what is sent (the position in a header), or select columns "
        "'stream' and 'seq' away (rows are then numbered by partition and position). "
        "The messages stored stay in the stream."
    )
