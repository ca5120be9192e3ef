"""Every status a real server sends to a pull request, provoked and checked against
what the core's table (``rust/core/src/api/status.rs``) makes of it: the end of a
request (an empty or short batch), or a typed error naming what to change. Then the
edges of reads and copies: a read published into another stream stores a copy that
steers nothing, ids that arrive in headers are msg ids, headers read back in one
order, filters and names that cannot work are refused at once, push consumers bound
without a lookup join their deliver group."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import HEADERS_TYPE
from jetstream_arrow.exceptions import (
    ApiError,
    BadInputError,
    ConsumerDeletedError,
    NotFoundError,
)
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(120)


def _payloads(n: int, subject: str, size: int = 16) -> pa.Table:
    return pa.table(
        {
            "subject": pa.array([subject] * n, pa.utf8()),
            "data": pa.array([f"{i:0{size}d}".encode() for i in range(n)], pa.binary()),
        }
    )


def _pull(client: ja.Client, stream: str, **config: Any) -> ja.PullConsumer:
    name = "limited"
    client.create_consumer(stream, durable_name=name, ack_policy="explicit", **config)
    return client.pull_consumer(stream, name)


# Each case: consumer settings, the pull, and what must come of it. ``error`` is the
# class and the words the message must hold; ``rows`` the batch length otherwise.
PULL_CASES: dict[str, dict[str, Any]] = {
    "404 No Messages": {"published": 0, "pull": {"no_wait": True}, "rows": 0},
    "408 Request Timeout": {"published": 0, "pull": {"expires": 1.0}, "rows": 0},
    "409 Exceeded MaxRequestBatch": {
        "config": {"max_batch": 100},
        "pull": {"max_messages": 500},
        "error": (ApiError, ["max_batch", "'max_messages'", "of 100"]),
    },
    "409 Exceeded MaxRequestExpires": {
        "config": {"max_expires": 1.0},
        "pull": {"expires": 5.0},
        "error": (ApiError, ["max_expires", "'expires'"]),
    },
    "409 Exceeded MaxRequestMaxBytes": {
        "config": {"max_bytes": 1000},
        "pull": {"max_bytes": 100_000},
        "error": (ApiError, ["max_bytes", "'max_bytes'"]),
    },
    "409 Message Size Exceeds MaxBytes": {
        "pull": {"max_bytes": 8, "expires": 1.0},
        "error": (BadInputError, ["larger than option 'max_bytes'"]),
    },
}


@pytest.mark.parametrize("status", list(PULL_CASES))
def test_each_pull_status_is_an_end_or_a_named_error(
    status: str, client: ja.Client, stream: str
) -> None:
    case = PULL_CASES[status]
    client.publish(_payloads(case.get("published", 1000), f"{stream}.a"))
    consumer = _pull(client, stream, **case.get("config", {}))
    started = time.monotonic()
    if "error" in case:
        cls, words = case["error"]
        with pytest.raises(cls) as raised:
            consumer.fetch(**case["pull"])
        for word in words:
            assert word in str(raised.value), (status, str(raised.value))
    else:
        assert len(consumer.fetch(**case["pull"])) == case["rows"]
    print(f"{status}: answered in {time.monotonic() - started:.2f} s")


def test_continuous_pulls_over_a_consumer_limit_fail_instead_of_spinning(
    client: ja.Client, stream: str
) -> None:
    client.publish(_payloads(5000, f"{stream}.a"))
    consumer = _pull(client, stream, max_batch=100)
    started = time.monotonic()
    with pytest.raises(ApiError) as raised:
        for _ in consumer.messages(max_messages=500):
            pass
    assert "max_batch" in str(raised.value) and raised.value.code == 409
    assert time.monotonic() - started < 10
    # Within the limit the same consumer delivers everything.
    got = 0
    with consumer.messages(max_messages=100, batch_wait=0.05) as messages:
        for batch in messages:
            batch.ack()
            got += len(batch)
            if got >= 5000:
                break
    assert got == 5000


def test_a_pull_consumer_bound_to_a_push_consumer_says_so(client: ja.Client, stream: str) -> None:
    client.create_consumer(
        stream, durable_name="pushed", deliver_subject=f"deliver.{stream}", ack_policy="explicit"
    )
    client.publish(_payloads(10, f"{stream}.a"))
    consumer = client.pull_consumer(stream, "pushed")
    with pytest.raises(BadInputError, match=r"push consumer.*push_consumer"):
        consumer.fetch(10, expires=1.0)


def test_a_pull_over_the_consumers_max_waiting_names_it(client: ja.Client, stream: str) -> None:
    consumer = _pull(client, stream, max_waiting=1)
    waiting = threading.Thread(target=consumer.fetch, kwargs={"max_messages": 1, "expires": 3.0})
    waiting.start()
    try:
        time.sleep(0.5)
        with pytest.raises(ApiError, match="max_waiting") as raised:
            consumer.fetch(1, expires=2.0)
        assert raised.value.code == 409
    finally:
        waiting.join(10)


def test_a_consumer_deleted_during_a_pull_and_one_that_never_existed(
    client: ja.Client, stream: str
) -> None:
    consumer = _pull(client, stream)
    deleter = threading.Timer(0.5, client.delete_consumer, (stream, "limited"))
    deleter.start()
    try:
        with pytest.raises((ConsumerDeletedError, NotFoundError)):
            consumer.fetch(10, expires=5.0)
    finally:
        deleter.join()
    with pytest.raises(NotFoundError):
        client.pull_consumer(stream, "never").fetch(10, expires=1.0)


# -- copies between streams ------------------------------------------------------------


def _control_stream(client: ja.Client, name: str) -> None:
    client.create_stream(name, [f"{name}.>"], allow_msg_ttl=True, allow_rollup=True)


def _with_headers(subjects: list[str], headers: list[dict[str, list[str]]]) -> pa.Table:
    return pa.table(
        {
            "subject": pa.array(subjects, pa.utf8()),
            "data": pa.array([f"m{i}".encode() for i in range(len(subjects))], pa.binary()),
            "headers": pa.array([list(h.items()) for h in headers], HEADERS_TYPE),
        }
    )


def test_a_read_published_into_another_stream_is_a_copy_that_steers_nothing(
    client: ja.Client, unique_name: Callable[[str], str]
) -> None:
    source, target = unique_name("SRC"), unique_name("DST")
    _control_stream(client, source)
    client.create_stream(target, [f"{target}.>"])  # no TTLs, no rollups
    n = 60
    headers: list[dict[str, list[str]]] = []
    for i in range(n):
        h: dict[str, list[str]] = {"X-Row": [str(i)], "Nats-Msg-Id": [f"copy-{i}"]}
        if i % 10 == 3:
            h["Nats-TTL"] = ["1h"]
        if i % 10 == 7:
            h["Nats-Rollup"] = ["sub"]
        headers.append(h)
    client.publish(_with_headers([f"{source}.k{i % 4}" for i in range(n)], headers))
    # Headers the user wrote are sent as given: the rollups purged their subjects.
    held = client.stream_info(source).state.messages
    assert 0 < held < n

    copy = client.read(source, include_headers=True).read_all()
    renamed = copy.set_column(
        copy.schema.get_field_index("subject"),
        "subject",
        pa.array([s.replace(source, target, 1) for s in copy["subject"].to_pylist()]),
    )
    result = client.publish(renamed)
    assert (result.stored, result.failed) == (held, 0)
    back = client.read(target, include_headers=True).read_all()
    assert back.num_rows == held
    for row in back["headers"].to_pylist():
        names = {k for k, _ in row}
        assert "X-Row" in names and "Nats-Msg-Id" in names
        assert not names & {"Nats-TTL", "Nats-Rollup", "Nats-Stream", "Nats-Sequence"}
    # The ids came in the headers column: a second copy is all duplicates.
    again = client.publish(renamed)
    assert (again.stored, again.duplicates) == (0, held)
    # Kept on request, the TTLs are refused by a stream without allow_msg_ttl.
    other = unique_name("KEEP")
    client.create_stream(other, [f"{other}.>"])
    kept = renamed.set_column(
        renamed.schema.get_field_index("subject"),
        "subject",
        pa.array([s.replace(target, other, 1) for s in renamed["subject"].to_pylist()]),
    )
    result = client.publish(kept, keep_control_headers=True, raise_on_error=False)
    assert result.failed > 0
    print(f"copy: {held} held, {held} copied, {result.failed} refused when control headers kept")


def test_ids_in_the_headers_column_make_ack_timeouts_safe_to_retry(
    nats_server: NatsServer, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("HDRID")
    n = 3000
    table = _with_headers([f"{name}.a"] * n, [{"Nats-Msg-Id": [f"h-{i}"]} for i in range(n)])
    with ja.connect(nats_server.url, request_timeout=5.0) as client:
        client.create_stream(name, [f"{name}.>"])
        outcome: dict[str, Any] = {}

        def publish() -> None:
            outcome["result"] = client.publish(
                table, ack_timeout=0.5, max_retries=10, window=64, raise_on_error=False
            )

        worker = threading.Thread(target=publish)
        worker.start()
        time.sleep(0.2)
        process = nats_server.process
        assert process is not None
        os.kill(process.pid, signal.SIGSTOP)
        try:
            time.sleep(1.5)
        finally:
            os.kill(process.pid, signal.SIGCONT)
        worker.join(60)
        assert not worker.is_alive()
        result = outcome["result"]
        assert result.failed == 0, result.failed_rows().slice(0, 3).to_pylist()
        assert result.stored + result.duplicates == n
        assert client.stream_info(name).state.messages == n


# -- reads -------------------------------------------------------------------------------


def test_headers_read_back_in_one_order(client: ja.Client, stream: str) -> None:
    names = [f"X-H{i:02d}" for i in range(12)]
    client.publish(_with_headers([f"{stream}.a"], [{name: ["v"] for name in reversed(names)}]))
    for _ in range(5):
        (row,) = client.read(stream, include_headers=True).read_all()["headers"].to_pylist()
        assert [k for k, _ in row] == sorted(names)


def test_an_invalid_stream_name_is_refused_at_once(client: ja.Client) -> None:
    started = time.monotonic()
    with pytest.raises(BadInputError, match="'stream'"):
        client.read("A.B")
    assert time.monotonic() - started < 1


def test_a_filter_the_stream_cannot_match_is_refused(client: ja.Client, stream: str) -> None:
    client.publish(_payloads(5, f"{stream}.a"))
    with pytest.raises(BadInputError, match=r"'subjects'.*A\.B"):
        client.read(stream, subjects=["A.B"])
    assert client.read(stream, subjects=[f"{stream}.*"]).read_all().num_rows == 5


# -- push consumers ----------------------------------------------------------------------


def test_a_push_consumer_bound_without_lookup_joins_its_deliver_group(
    client: ja.Client, stream: str
) -> None:
    deliver = f"deliver.{stream}"
    client.create_consumer(
        stream,
        durable_name="grouped",
        deliver_subject=deliver,
        deliver_group="workers",
        ack_policy="explicit",
        idle_heartbeat=1.0,
    )
    client.publish(_payloads(50, f"{stream}.a"))
    consumer = client.push_consumer(
        stream, "grouped", deliver_subject=deliver, deliver_group="workers", ack_policy="explicit"
    )
    got = 0
    with consumer.messages(heartbeat=1.0, batch_wait=0.05) as messages:
        for batch in messages:
            batch.ack()
            got += len(batch)
            if got >= 50:
                break
    assert got == 50
    with pytest.raises(BadInputError, match="deliver_group"):
        client.push_consumer(stream, "grouped", deliver_group="workers")
