"""Exactly once at any age under the faults that bend it: a copy re-run beside
another source's copies, a writer that is slow (its lease kept by writing its
position again), rows stored after a failed row, a run that dies right after its
claim, options that only a positioned writer takes. Real servers, a duplicate
window of 1 s and waits >= 2 s, so the server's dedupe is not what keeps a count
exact; what a stream holds is read with nats-py."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exactly_once import NumberedRows
from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.positions import PositionedWriter, WriterFencedError
from natspy import with_jetstream

WINDOW = 1.0
AFTER_WINDOW = 2.5


def _exact_stream(client: ja.Client, name: str, **config: Any) -> str:
    client.create_stream(name, [f"{name}.>"], duplicate_window=WINDOW, exactly_once=True, **config)
    return name


def _payloads(url: str, stream: str) -> Counter[bytes]:
    async def work(js: Any) -> Counter[bytes]:
        info = await js.stream_info(stream)
        found: Counter[bytes] = Counter()
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                msg = await js.get_msg(stream, seq)
            except Exception:  # removed by a position's rollup
                continue
            if not msg.subject.startswith("$JA.POS."):
                found[msg.data] += 1
        return found

    return with_jetstream(url, work)


# A copy's read-back collects its own source's copies only: another source's copies
# stored in the same target meanwhile share its sequences.
def test_a_copy_rerun_beside_another_sources_copies_stores_its_own_once(
    client, shared_nats_server, unique_name
):
    url = shared_nats_server.url
    a, b = unique_name("SRCA"), unique_name("SRCB")
    for s in (a, b):
        client.create_stream(s, [f"{s}.>"])
        client.publish(pa.table({"data": [f"{s}-{i}".encode() for i in range(3)]}), f"{s}.x")
    target = _exact_stream(client, unique_name("T"))
    # The copy of A claims its identity and dies before its first row (kill -9 right
    # after the claim): an open position with rows possibly after it.
    PositionedWriter(client, target, f"copy of {a}", id_prefix="", lease=1.0).claim()
    # The copy of B runs meanwhile into the same target.
    b_result = client.publish(
        client.read(b).read_all().drop_columns(["subject"]), f"{target}.b", writer=f"copy of {b}"
    )
    assert b_result.stored == 3
    time.sleep(AFTER_WINDOW)  # past the lease and the window
    a_result = client.publish(
        client.read(a).read_all().drop_columns(["subject"]), f"{target}.a", writer=f"copy of {a}"
    )
    payloads = _payloads(url, target)
    assert payloads == Counter([f"{s}-{i}".encode() for s in (a, b) for i in range(3)]), (
        a_result.stored,
        payloads,
    )


# A writer whose rows come slowly keeps its identity by writing its position again
# every half lease: a second writer with the same identity watches it move and is
# refused before it sends a row; the first finishes, every row once.
def test_a_slow_writer_keeps_its_lease_and_a_second_is_refused(
    client, shared_nats_server, unique_name
):
    url = shared_nats_server.url
    stream = _exact_stream(client, unique_name("SLOW"))
    n = 8
    rows = pa.table({"data": [f"row-{i}".encode() for i in range(n)]})
    errors: list[BaseException] = []

    def slow_source():
        for batch in rows.to_batches(max_chunksize=1):
            yield batch
            time.sleep(0.4)

    def first() -> None:
        with ja.connect(url) as own:
            writer = NumberedRows(
                own,
                stream,
                "job",
                "ja.w.job:",
                position_rows=1000,
                lease=1.0,
                options=ja.PublishOptions(subject=f"{stream}.rows"),
            )
            try:
                for _ in writer.publish(slow_source()):
                    pass
            except BaseException as err:  # reported below
                errors.append(err)

    thread = threading.Thread(target=first)
    thread.start()
    time.sleep(1.6)  # longer than the lease: only its renewals show the writer at work
    with pytest.raises(WriterFencedError):
        client.publish(rows, f"{stream}.rows", writer="job")
    thread.join(timeout=30)
    assert not thread.is_alive() and errors == []
    assert _payloads(url, stream) == Counter(rows["data"].to_pylist())


# A writer stopped by a failed row frees its identity, and the next reads back from
# its last position: the rows after the failed one in the same window were stored.
def test_rows_stored_after_a_failed_row_are_not_stored_again_by_the_rerun(
    client, shared_nats_server, unique_name
):
    url = shared_nats_server.url
    stream = _exact_stream(client, unique_name("FAILMID"))
    rows = pa.table({"data": [f"row-{i}".encode() for i in range(10)]})
    # Row 5 expects its subject at sequence 999: it fails; rows 6..9 of the same
    # batch are stored.
    checked = rows.append_column(
        "expected_last_subject_seq", pa.array([None] * 5 + [999] + [None] * 4, pa.int64())
    )
    first = client.publish(checked, f"{stream}.rows", writer="w", raise_on_error=False)
    assert first.failed == 1, (first.stored, first.failed)
    time.sleep(AFTER_WINDOW)
    rerun = client.publish(rows, f"{stream}.rows", writer="w")
    payloads = _payloads(url, stream)
    assert payloads == Counter(rows["data"].to_pylist()), (rerun.stored, payloads)


# A claim says where the rows past its `next` may be (after the previous position),
# until the writer moves on: a run that dies right after its claim leaves the next
# run the same read-back.
def test_a_run_that_dies_right_after_its_claim_leaves_the_next_the_same_read_back(
    client, shared_nats_server, unique_name
):
    url = shared_nats_server.url
    stream = _exact_stream(client, unique_name("CLAIMDIE"))
    rows = pa.table({"data": [f"row-{i}".encode() for i in range(150)]})
    prefix = "ja.w.w:"
    # Run 1: rows 0..149 stored, position at 100 (the last one written), killed.
    run1 = PositionedWriter(client, stream, "w", id_prefix=prefix, lease=1.0)
    run1.claim()
    client.publish(
        rows.slice(0, 100).append_column("msg_id", pa.array([f"{prefix}{i}" for i in range(100)])),
        f"{stream}.rows",
    )
    run1.advance(100)
    client.publish(
        rows.slice(100).append_column(
            "msg_id", pa.array([f"{prefix}{i}" for i in range(100, 150)])
        ),
        f"{stream}.rows",
    )
    time.sleep(1.5)  # run 1's lease runs out
    # Run 2: claims (its read-back finds rows 100..149), killed before its next position.
    found = PositionedWriter(client, stream, "w", id_prefix=prefix, lease=1.0).claim()
    assert len(found.stored_ids) == 50
    time.sleep(AFTER_WINDOW)
    # Run 3 with the same input.
    run3 = client.publish(rows, f"{stream}.rows", writer="w", writer_lease=1.0)
    payloads = _payloads(url, stream)
    assert payloads == Counter(rows["data"].to_pylist()), (run3.stored, sum(payloads.values()))


# Options only a positioned writer takes are refused where it keeps no position.
def test_writer_lease_and_position_rows_are_refused_when_exactly_once_is_off(
    client, shared_nats_server, unique_name
):
    stream = _exact_stream(client, unique_name("OFF"))
    rows = pa.table({"data": [b"a"]})
    ignored = []
    for option in ({"writer_lease": 5.0}, {"position_rows": 10}):
        try:
            client.publish(rows, f"{stream}.rows", writer="w", exactly_once=False, **option)
            ignored.append(option)
        except BadInputError:
            pass
    assert ignored == [], ignored


# A copy whose read-back finds every remaining row stored closes its position past
# them, so the next run with the same identity does not copy them again.
def test_a_copy_rerun_that_finds_everything_stored_closes_past_it(
    client, shared_nats_server, unique_name
):
    url = shared_nats_server.url
    source = unique_name("SRC")
    client.create_stream(source, [f"{source}.>"])
    client.publish(pa.table({"data": [f"m{i}".encode() for i in range(5)]}), f"{source}.x")
    target = _exact_stream(client, unique_name("T"))
    writer = f"copy of {source}"

    def copy() -> Any:
        rows = client.read(source).read_all().drop_columns(["subject"])
        return client.publish(rows, f"{target}.x", writer=writer, writer_lease=1.0)

    # Run 1 is killed after all its rows are acknowledged, before its position moved:
    # its claim (open) and its rows, with their copy ids, are in the stream.
    PositionedWriter(client, target, writer, id_prefix=f"{source}:", lease=1.0).claim()
    client.publish(client.read(source).read_all().drop_columns(["subject"]), f"{target}.x")
    assert sum(_payloads(url, target).values()) == 5
    time.sleep(AFTER_WINDOW)  # past the lease and the window
    second = copy()  # finds all 5 by its read-back: stores none (right)
    assert sum(_payloads(url, target).values()) == 5, second.stored
    time.sleep(AFTER_WINDOW)
    third = copy()  # the same copy once more: should store none
    payloads = _payloads(url, target)
    assert payloads == Counter(f"m{i}".encode() for i in range(5)), (third.stored, payloads)


# A writer whose own position the stream's limits removed writes it again (fenced by
# there being none) rather than stopping as if taken over.
def test_a_writer_whose_position_the_stream_limits_remove_writes_it_again(
    client, shared_nats_server, unique_name
):
    target = _exact_stream(client, unique_name("T"), max_msgs=50)
    rows = pa.table({"data": [f"r{i}".encode() for i in range(500)]})
    result = client.publish(rows, f"{target}.x", writer="ring", position_rows=100)
    assert result.stored == 500


# A streaming partition's row numbers (batch * 10^9 + row) stay within the core's
# and int64's range for billions of micro-batches.
def test_a_streaming_partition_numbers_rows_of_micro_batch_twenty_million(client, unique_name):
    from jetstream_arrow.exactly_once import NumberedRows
    from jetstream_arrow.spark.stream_writer import ROWS_PER_MICRO_BATCH

    target = _exact_stream(client, unique_name("T"))
    batch_id = 20_000_000
    rows = NumberedRows(
        client, target, "query-0-", "query-0-", start=batch_id * ROWS_PER_MICRO_BATCH
    )
    batch = pa.record_batch({"subject": [f"{target}.x"] * 3, "data": [b"a", b"b", b"c"]})
    results = list(rows.publish([batch]))
    assert sum(r.result.stored for r in results) == 3


# A copy's batches are re-cut so that no source message's rows (an explode) span two
# batches, which a position could fall between; rows and their order are kept.
def test_a_copys_batches_keep_each_messages_rows_together():
    from jetstream_arrow.exactly_once import _whole_messages

    cuts = [[1, 2, 2], [2, 3], [4], [4, 4, 5], [6]]
    batches = [pa.record_batch({"seq": pa.array(c, pa.uint64())}) for c in cuts]
    out = [b.column("seq").to_pylist() for b in _whole_messages(batches)]
    assert [s for b in out for s in b] == [s for c in cuts for s in c]
    for before, after in itertools.pairwise(out):
        assert before[-1] != after[0], out
    with pytest.raises(BadInputError, match="column 'seq'"):
        list(_whole_messages([pa.record_batch({"seq": pa.array([3, 2], pa.uint64())})]))
