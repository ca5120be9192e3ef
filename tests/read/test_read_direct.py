"""Reading with batched direct gets (``method="direct"``): the same rows as the
consumer-based read on the same ranges, no consumer created, and a WorkQueue stream
re-read while its messages belong to a durable consumer. ``method="auto"`` (the
default) takes direct gets for short ranges on streams only whose leader answers them."""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import read_all, rows, stream_state
from jetstream_arrow._core import DIRECT_READ_MAX_MESSAGES
from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.management import StreamSource
from natsserver import NatsCluster

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def direct_stream(new_stream: Callable[..., str]) -> str:
    return new_stream("direct", allow_direct=True)


def both(client: ja.Client, stream: str, **options: object) -> tuple[pa.Table, pa.Table]:
    return (
        read_all(client, stream, method="consumer", **options),
        read_all(client, stream, method="direct", **options),
    )


def same_rows(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables; header maps compared as dicts (their key order is not kept)."""
    if "headers" not in a.column_names:
        return a.equals(b)
    as_dicts = [
        [dict(h) if h is not None else None for h in t.column("headers").to_pylist()]
        for t in (a, b)
    ]
    rest = [t.drop_columns(["headers"]) for t in (a, b)]
    return as_dicts[0] == as_dicts[1] and rest[0].equals(rest[1])


def test_direct_reads_equal_consumer_reads_on_the_same_ranges(
    client: ja.Client, direct_stream: str
) -> None:
    client.publish(rows(3_000, direct_stream, subjects=3))
    client.delete_message(direct_stream, 17)
    client.delete_message(direct_stream, 3_000)
    cases: list[dict[str, object]] = [
        {},
        {"include_headers": True},
        {"start_seq": 100, "end_seq": 2_500},
        {"start_seq": 2_990},
        {"subjects": f"{direct_stream}.1"},
        {"subjects": [f"{direct_stream}.*"], "start_seq": 10, "end_seq": 20},
        {"batch_rows": 7, "end_seq": 100},
        {"max_bytes": 100, "end_seq": 300},
    ]
    for options in cases:
        by_consumer, direct = both(client, direct_stream, **options)
        assert direct.num_rows > 0, options
        assert same_rows(direct, by_consumer), options
    # No consumer was created by the direct reads (the consumer reads delete theirs).
    assert stream_state(client, direct_stream).consumer_count == 0


def test_direct_read_by_start_time(client: ja.Client, direct_stream: str) -> None:
    client.publish(rows(50, direct_stream))
    time.sleep(0.05)
    middle = time.time()
    time.sleep(0.05)
    client.publish(rows(50, direct_stream, start=50))
    by_consumer, direct = both(client, direct_stream, start_time=middle)
    assert direct.column("seq").to_pylist() == list(range(51, 101))
    assert direct.equals(by_consumer)


def test_direct_read_of_an_empty_range(client: ja.Client, direct_stream: str) -> None:
    assert read_all(client, direct_stream, method="direct").num_rows == 0
    client.publish(rows(5, direct_stream))
    assert read_all(client, direct_stream, method="direct", start_seq=6).num_rows == 0


def test_direct_read_needs_allow_direct_and_one_filter(
    client: ja.Client, stream: str, direct_stream: str
) -> None:
    client.publish(rows(5, stream))
    with pytest.raises(BadInputError, match=r"option 'method'.*allow_direct"):
        read_all(client, stream, method="direct")
    with pytest.raises(BadInputError, match="option 'subjects'"):
        read_all(client, direct_stream, method="direct", subjects=["a", "b"])
    with pytest.raises(BadInputError, match="option 'method'"):
        read_all(client, direct_stream, method="by-carrier-pigeon")  # type: ignore[arg-type]


def test_a_work_queue_is_re_read_directly_while_a_durable_consumer_holds_it(
    client: ja.Client, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("wq")
    client.create_stream(name, [f"{name}.>"], retention="workqueue", allow_direct=True)
    try:
        client.publish(rows(1_000, name))
        client.create_consumer(name, durable_name="owner", ack_policy="explicit")
        consumer = client.pull_consumer(name, "owner")
        batch = consumer.fetch(max_messages=400)
        batch.ack()
        first_kept = 401
        # Acknowledged work items are gone; the rest are read without a second
        # consumer (a WorkQueue allows one per subject).
        wait_messages(client, name, 600)
        direct = read_all(client, name, method="direct")
        assert direct.column("seq").to_pylist() == list(range(first_kept, 1_001))
        assert stream_state(client, name).consumer_count == 1
    finally:
        client.delete_stream(name)


def wait_messages(client: ja.Client, stream: str, n: int) -> None:
    deadline = time.monotonic() + 5
    while stream_state(client, stream).messages != n:
        assert time.monotonic() < deadline, f"{stream} never held {n} messages"
        time.sleep(0.02)


def consumers_while_reading(client: ja.Client, stream: str, **options: object) -> int:
    """The stream's consumers after a read's first batch: 1 while a consumer read is
    open, 0 during a read by direct gets. Counted by name (the consumers the meta
    layer holds), not by a stream's state, which in a cluster may not show a consumer
    made a moment ago."""
    reader = client.read(stream, batch_rows=10, **options)  # type: ignore[arg-type]
    try:
        assert reader.read_next_batch().num_rows > 0
        return len(client.consumer_names(stream))
    finally:
        reader.close()


def test_auto_reads_a_short_range_by_direct_gets_and_a_long_one_by_a_consumer(
    client: ja.Client, direct_stream: str
) -> None:
    short = DIRECT_READ_MAX_MESSAGES
    client.publish(rows(short + 100, direct_stream))
    # The count tells the methods apart.
    assert consumers_while_reading(client, direct_stream, method="consumer", end_seq=30) == 1
    assert consumers_while_reading(client, direct_stream, method="direct") == 0
    # "auto" is the default.
    assert consumers_while_reading(client, direct_stream, end_seq=short) == 0
    assert consumers_while_reading(client, direct_stream, start_seq=101) == 0
    assert consumers_while_reading(client, direct_stream, subjects=f"{direct_stream}.1") == 1
    assert (
        consumers_while_reading(client, direct_stream, subjects=f"{direct_stream}.1", end_seq=30)
        == 0
    )
    assert consumers_while_reading(client, direct_stream, end_seq=short + 1) == 1
    assert consumers_while_reading(client, direct_stream) == 1
    # Two subject filters are more than a direct get takes.
    two = [f"{direct_stream}.1", f"{direct_stream}.2"]
    assert consumers_while_reading(client, direct_stream, subjects=two, end_seq=30) == 1
    # Either way the same rows.
    for options in ({"end_seq": short}, {"start_seq": 101}, {"subjects": two, "end_seq": 30}):
        auto = read_all(client, direct_stream, include_headers=True, **options)
        assert auto.num_rows > 0
        by_consumer = read_all(
            client, direct_stream, include_headers=True, method="consumer", **options
        )
        assert same_rows(auto, by_consumer), options


def test_auto_reads_a_stream_without_direct_gets_by_a_consumer(
    client: ja.Client, unique_name: Callable[[str], str]
) -> None:
    plain = unique_name("plain")
    client.create_stream(plain, [f"{plain}.>"])
    try:
        client.publish(rows(50, plain))
        assert consumers_while_reading(client, plain) == 1
        assert read_all(client, plain).num_rows == 50
        with pytest.raises(BadInputError, match="allow_direct"):
            read_all(client, plain, method="direct")
    finally:
        client.delete_stream(plain)


def test_a_direct_read_takes_no_answer_from_a_mirror(
    client: ja.Client, unique_name: Callable[[str], str]
) -> None:
    """A mirror with ``mirror_direct`` answers the origin's direct gets from its own
    copy, here one that starts at sequence 21: its answers would make a read short
    (1..20 missing). Each read must still return the origin's range exactly."""
    origin = unique_name("origin")
    client.create_stream(origin, [f"{origin}.>"], allow_direct=True)
    mirror = unique_name("mirror")
    try:
        client.publish(rows(60, origin))
        client.create_stream(
            mirror, mirror=StreamSource(origin, opt_start_seq=21), mirror_direct=True
        )
        deadline = time.monotonic() + 10
        while stream_state(client, mirror).messages < 40:
            assert time.monotonic() < deadline, "the mirror did not copy 21..60"
            time.sleep(0.05)
        expected = read_all(client, origin, method="consumer", include_headers=True)
        for _ in range(15):  # the queue group picks a responder at random
            for method in ("auto", "direct"):
                got = read_all(client, origin, method=method, include_headers=True)
                assert same_rows(got, expected), method
            filtered = read_all(client, origin, method="direct", subjects=f"{origin}.1")
            assert filtered.column("seq").to_pylist() == list(range(2, 61, 3))
    finally:
        for name in (mirror, origin):
            client.delete_stream(name)


@pytest.mark.cluster
def test_auto_reads_a_replicated_stream_by_a_consumer(nats_cluster: NatsCluster) -> None:
    with ja.connect(nats_cluster.url) as client:
        client.create_stream("R3", ["r3.>"], allow_direct=True, replicas=3)
        client.publish(rows(100, "r3"))
        assert consumers_while_reading(client, "R3") == 1
        assert consumers_while_reading(client, "R3", method="direct") == 0
        assert read_all(client, "R3").num_rows == 100
