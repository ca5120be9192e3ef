"""Errors of publish and read: bad input named by column and row, what an interrupted
publish stored, streams that do not exist, payload limits, permission violations."""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import read_all, rows, stored_rows, stream_state
from fault_helpers import paused_server
from jetstream_arrow.client import PublishResult
from jetstream_arrow.exceptions import (
    BadInputError,
    ConnectionFailedError,
    JetStreamArrowError,
    NotFoundError,
    PublishError,
)
from natsserver import NatsServer, free_port

pytestmark = pytest.mark.timeout(60)


def two_rows(stream: str, subject2: str | None, data2: bytes = b"2") -> pa.Table:
    return pa.table(
        {
            "subject": pa.array([f"{stream}.ok", subject2], pa.utf8()),
            "data": pa.array([b"1", data2], pa.binary()),
        }
    )


# -- bad subjects -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "why"),
    [
        (None, "null"),
        ("", "empty"),
        ("{s}.has space", "white space"),
        ("{s}.*", "wildcard"),
        ("{s}.>", "wildcard"),
        ("{s}..x", None),
    ],
    ids=["null", "empty", "space", "star", "gt", "empty-token"],
)
def test_bad_subject_names_column_and_row(
    client: ja.Client, stream: str, subject: str | None, why: str | None
) -> None:
    bad = None if subject is None else subject.format(s=stream)
    with pytest.raises(BadInputError) as info:
        client.publish(two_rows(stream, bad))
    err = info.value
    assert isinstance(err, ValueError)
    assert isinstance(err, JetStreamArrowError)
    msg = str(err)
    assert "column 'subject'" in msg and "row 1" in msg, msg
    if why:
        assert why in msg, msg
    # Row 0 went out before row 1 was reached; the result says so and the stream agrees.
    assert err.result is not None
    assert stored_rows(err.result) == [0]
    assert stream_state(client, stream).messages == 1


def test_bad_input_error_result_is_a_publish_result(client: ja.Client, stream: str) -> None:
    """``BadInputError.result`` is the same kind of value as ``PublishError.result``: a
    PublishResult with its ``acks`` table."""
    with pytest.raises(BadInputError) as info:
        client.publish(two_rows(stream, None))
    result = info.value.result
    assert isinstance(result, PublishResult), type(result)
    assert isinstance(result.acks, pa.Table)
    assert (result.rows, result.stored) == (2, 1)


def test_bad_row_mid_input_says_exactly_which_rows_were_stored(
    client: ja.Client, stream: str
) -> None:
    table = rows(10_000, stream, headers=False)
    subjects = table.column("subject").to_pylist()
    subjects[7_321] = None
    table = table.set_column(0, "subject", pa.array(subjects, pa.utf8()))
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(1_000))
    with pytest.raises(BadInputError, match=r"column 'subject', row 7321") as info:
        client.publish(reader, window=256)
    assert stored_rows(info.value.result) == list(range(7_321))
    state = stream_state(client, stream)
    assert (state.messages, state.last_seq) == (7_321, 7_321)
    back = read_all(client, stream)
    assert back.column("data").to_pylist() == [f"payload-{i}".encode() for i in range(7_321)]


def test_bad_row_in_a_later_batch_of_a_reader(client: ja.Client, stream: str) -> None:
    """Row numbers count across the batches of one call."""
    good = rows(300, stream, headers=False, msg_ids=False)
    bad = pa.table({"subject": pa.array([f"{stream}.x", f"{stream}.a b"]), "data": [b"a", b"b"]})
    reader = pa.RecordBatchReader.from_batches(
        bad.schema, [*good.select(["subject", "data"]).to_batches(100), *bad.to_batches()]
    )
    with pytest.raises(BadInputError, match=r"row 301") as info:
        client.publish(reader)
    assert stored_rows(info.value.result) == list(range(301))
    assert stream_state(client, stream).messages == 301


# -- bad columns ------------------------------------------------------------------------


def test_data_column_of_integers(client: ja.Client, stream: str) -> None:
    table = pa.table({"subject": [f"{stream}.a"], "data": pa.array([1], pa.int64())})
    with pytest.raises(BadInputError, match=r"column 'data'.*(binary|utf8)"):
        client.publish(table)
    assert stream_state(client, stream).messages == 0


def test_subject_column_of_integers(client: ja.Client, stream: str) -> None:
    table = pa.table({"subject": pa.array([1], pa.int64()), "data": [b"x"]})
    with pytest.raises(BadInputError, match=r"column 'subject'"):
        client.publish(table)
    assert stream_state(client, stream).messages == 0


def test_headers_column_of_wrong_type(client: ja.Client, stream: str) -> None:
    table = pa.table({"subject": [f"{stream}.a"], "data": [b"x"], "headers": ["k: v"]})
    with pytest.raises(BadInputError, match=r"column 'headers'"):
        client.publish(table)
    assert stream_state(client, stream).messages == 0


def test_missing_data_column(client: ja.Client, stream: str) -> None:
    with pytest.raises(BadInputError, match=r"no 'data' column") as info:
        client.publish(pa.table({"subject": [f"{stream}.a"]}))
    assert "subject" in str(info.value)  # lists the columns it has
    assert stream_state(client, stream).messages == 0


def test_missing_subject_column_and_option(client: ja.Client, stream: str) -> None:
    with pytest.raises(BadInputError, match=r"no 'subject' column and no 'subject' option"):
        client.publish(pa.table({"data": [b"x"]}))
    assert stream_state(client, stream).messages == 0


def test_not_arrow_input(client: ja.Client) -> None:
    with pytest.raises((TypeError, ValueError)):
        client.publish([{"subject": "a", "data": b"x"}])


def test_header_value_with_line_break_is_bad_input(client: ja.Client, stream: str) -> None:
    headers = pa.array(
        [[("K", ["ok"])], [("K", ["a\r\nInjected: 1"])]], pa.map_(pa.utf8(), pa.list_(pa.utf8()))
    )
    table = pa.table({"subject": [f"{stream}.a"] * 2, "data": [b"1", b"2"], "headers": headers})
    with pytest.raises(BadInputError, match=r"row 1"):
        client.publish(table)
    assert stream_state(client, stream).messages == 1


# -- server limits ----------------------------------------------------------------------


def test_payload_over_max_payload(small_payload_nats_server: NatsServer) -> None:
    with ja.connect(small_payload_nats_server.url) as client:
        client.create_stream("BIG", ["big.>"])
        max_payload = client.server_info()["max_payload"]
        assert max_payload == 8192
        table = pa.table(
            {
                "subject": ["big.a", "big.a", "big.a"],
                "data": [b"x" * 100, b"y" * 8000, b"z" * (max_payload + 1)],
            }
        )
        with pytest.raises(BadInputError) as info:
            client.publish(table)
        msg = str(info.value)
        assert "row 2" in msg and "max_payload" in msg and "8192" in msg, msg
        assert stored_rows(info.value.result) == [0, 1]
        assert client.stream_info("BIG").state.messages == 2


# -- streams that do not exist ----------------------------------------------------------


def test_publish_to_a_subject_no_stream_captures_fails_fast(client: ja.Client) -> None:
    table = pa.table({"subject": ["nostream.anywhere"] * 3, "data": [b"1", b"2", b"3"]})
    t0 = time.monotonic()
    result = client.publish(table, max_retries=2, retry_backoff=0.01, raise_on_error=False)
    assert time.monotonic() - t0 < 5
    assert (result.stored, result.failed) == (0, 3)
    for error in result.acks.column("error").to_pylist():
        assert "503" in error and "no stream" in error and "max_retries" in error, error
    with pytest.raises(PublishError, match="3 of 3 rows were not stored") as info:
        client.publish(table, max_retries=1, retry_backoff=0.01)
    assert info.value.result.failed == 3
    assert info.value.result.failed_rows().column("row").to_pylist() == [0, 1, 2]


def test_read_a_stream_that_does_not_exist(client: ja.Client) -> None:
    with pytest.raises(NotFoundError) as info:
        client.read("NO_SUCH_STREAM_X")
    assert info.value.err_code == 10059
    assert "NO_SUCH_STREAM_X" in str(info.value)
    assert isinstance(info.value, LookupError)


def test_pull_consumer_that_does_not_exist(client: ja.Client, stream: str) -> None:
    consumer = client.pull_consumer(stream, "nobody")
    with pytest.raises(NotFoundError):
        consumer.fetch(1, expires=1.0)


# -- integer options out of range -------------------------------------------------------


@pytest.mark.parametrize("value", [-1, 2**70])
@pytest.mark.parametrize(
    ("option", "call"),
    [
        ("window", lambda c, s, kw: c.publisher(f"{s}.a", **kw)),
        ("max_retries", lambda c, s, kw: c.publish(pa.table({"data": [b"x"]}), f"{s}.a", **kw)),
        ("msg_id_start", lambda c, s, kw: c.publisher(f"{s}.a", msg_id_prefix="p", **kw)),
        ("batch_rows", lambda c, s, kw: c.read(s, **kw)),
        ("start_seq", lambda c, s, kw: c.read(s, **kw)),
        ("max_messages", lambda c, s, kw: c.pull_consumer(s, "any").fetch(**kw)),
    ],
)
def test_an_integer_option_out_of_range_is_named(
    client: ja.Client,
    stream: str,
    option: str,
    call: Callable[[ja.Client, str, dict[str, int]], object],
    value: int,
) -> None:
    with pytest.raises(BadInputError, match=f"option '{option}' \\({value}\\) out of range"):
        call(client, stream, {option: value})


@pytest.mark.parametrize(
    "call",
    [
        lambda c, s: c.first_seq_at(s, 0, resume_timeout=1e19),
        lambda c, s: c.read(s, resume_timeout=1e19, method="consumer").read_all(),
    ],
    ids=["first_seq_at", "read"],
)
def test_a_duration_beyond_any_deadline_is_refused_naming_the_option(
    client: ja.Client, stream: str, call: Callable[[ja.Client, str], object]
) -> None:
    """Every timeout is added to the present: 1e19 s overflowed the deadline, a panic
    that reached Python as an internal error."""
    with pytest.raises(BadInputError, match="option 'resume_timeout' must be at most 1e9"):
        call(client, stream)


# -- permissions ------------------------------------------------------------------------

PERMISSIONS = """
authorization {
    users = [
        {user: a, password: b, permissions: {publish: {deny: ["secret.>"]}}}
    ]
}
"""


def test_publish_to_a_denied_subject_fails_the_rows_with_permission_error(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    """The server answers a denied publish with a -ERR permission violation (no ack):
    the engine fails those rows with a 'permission denied' error naming the subject,
    after the ack timeout, and stores the permitted rows."""
    server = nats_server_factory(PERMISSIONS)
    with ja.connect(server.url, user="a", password="b") as client:
        client.create_stream("SEC", ["secret.>", "open.>"])
        table = pa.table({"subject": ["open.a", "secret.x", "open.b"], "data": [b"1", b"2", b"3"]})
        t0 = time.monotonic()
        result = client.publish(table, ack_timeout=1.0, msg_id_prefix="perm-", raise_on_error=False)
        assert time.monotonic() - t0 < 10
        errors = result.acks.column("error").to_pylist()
        assert errors[0] is None and errors[2] is None
        assert errors[1] and "permission" in errors[1].lower() and "secret.x" in errors[1]
        assert (result.stored, result.failed) == (2, 1)
        assert client.stream_info("SEC").state.messages == 2
        with pytest.raises(PublishError, match="permission"):
            client.publish(table.slice(1, 1), ack_timeout=1.0)


# -- ack timeouts -----------------------------------------------------------------------


def test_ack_timeouts_are_retried_with_msg_ids(nats_server: NatsServer) -> None:
    """A stalled server: rows with msg ids are sent again after the ack timeout and end
    stored exactly once (or duplicate), none lost."""
    with ja.connect(nats_server.url) as client:
        client.create_stream("T", ["t.>"])
        table = rows(2_000, "t", headers=False)
        with paused_server(nats_server, 1.5):
            result = client.publish(
                table, ack_timeout=0.5, max_retries=10, retry_backoff=0.1, raise_on_error=False
            )
        assert result.failed == 0, result.failed_rows().slice(0, 3).to_pylist()
        assert result.stored + result.duplicates == 2_000
        back = read_all(client, "T", include_headers=True)
        ids = [dict(h)["Nats-Msg-Id"][0] for h in back.column("headers").to_pylist()]
        assert sorted(ids) == sorted(f"id-{i}" for i in range(2_000))


def test_ack_timeout_without_msg_id_is_reported_not_retried(nats_server: NatsServer) -> None:
    with ja.connect(nats_server.url) as client:
        client.create_stream("T", ["t.>"])
        table = rows(5, "t", headers=False, msg_ids=False)
        # The publisher is made before the pause (making one may ask the server), so
        # the rows go out while the server is paused, well past the ack timeout: on a
        # loaded machine they may be sent a second after the pause began, and must
        # still see no ack in time.
        with (
            client.publisher(ack_timeout=0.5, raise_on_error=False) as publisher,
            paused_server(nats_server, 4.0),
        ):
            result = publisher.publish(table)
        assert result.failed == 5
        for error in result.acks.column("error").to_pylist():
            assert "ack_timeout" in error and "msg id" in error, error


def test_a_resent_row_with_its_own_check_is_found_stored_by_its_msg_id(
    nats_server: NatsServer,
) -> None:
    """A stalled server: rows with an expected-last check and a msg id are resent after
    the ack timeout. The server stores the first sends when it resumes, so each resend
    fails its own check (the server checks it before duplicates); a probe then finds
    the row's msg id stored, and the row is reported a duplicate, not a conflict."""
    with ja.connect(nats_server.url) as client:
        client.create_stream("T", ["t.>"])
        table = rows(30, "t", headers=False, subjects=30).append_column(
            "expected_last_subject_seq", pa.array([0] * 30, pa.int64())
        )
        # Paused well past the ack timeout, so the first sends fall in the pause even
        # when a loaded machine delays them (the resends' backoff outlasts 4 s).
        with paused_server(nats_server, 4.0):
            result = client.publish(
                table, ack_timeout=0.5, max_retries=10, retry_backoff=0.1, raise_on_error=False
            )
        assert result.failed == 0, result.failed_rows().slice(0, 3).to_pylist()
        assert result.stored + result.duplicates == 30 and result.duplicates > 0
        back = read_all(client, "T")
        assert sorted(back.column("data").to_pylist()) == sorted(
            f"payload-{i}".encode() for i in range(30)
        )
        # Without a msg id the server could not tell: the check's failure is a conflict.
        again = client.publish(table.drop_columns(["msg_id"]), raise_on_error=False)
        assert again.failed == 30
        assert all(e.startswith("conflict: ") for e in again.acks.column("error").to_pylist())
        # With it, a re-run is a run of duplicates.
        rerun = client.publish(table)
        assert (rerun.duplicates, rerun.acks.column("seq").to_pylist()) == (
            30,
            result.acks.column("seq").to_pylist(),
        )


# -- which errors a retry may cure --------------------------------------------------------


def test_each_error_says_whether_a_retry_may_cure_it(client: ja.Client) -> None:
    """The core's one rule (a timeout, a lost connection, a 503) travels with each
    error as ``transient``, so callers that retry do not restate it."""
    with pytest.raises(NotFoundError) as missing:
        client.stream_info("NO_SUCH_STREAM_HERE")
    assert missing.value.transient is False
    with pytest.raises(BadInputError) as bad:
        client.publisher("x", window=0)
    assert bad.value.transient is False
    with pytest.raises(ConnectionFailedError) as unreachable:
        ja.connect(f"nats://127.0.0.1:{free_port()}", connect_timeout=0.5, max_reconnects=0)
    assert unreachable.value.transient is True
