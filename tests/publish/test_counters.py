"""Counter streams (ADR-49, servers 2.12+, streams with `allow_msg_counter`): a table of
`(subject, increment)` published as `Nats-Incr` increments through the acked window,
each ack's new value in the result, a retry without double counting by msg id, and the
counters read back as a table of current values with their sources' breakdown;
checked against nats-py's view of the stored messages and its own increments."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from fault_helpers import paused_server
from jetstream_arrow import _core
from jetstream_arrow.exceptions import BadInputError, PublishError
from jetstream_arrow.management.streams import StreamSource
from natspy import with_jetstream
from natsserver import NatsServer, wait_until

pytestmark = pytest.mark.timeout(90)


def stored_counters(url: str, stream: str, subjects: list[str]) -> dict[str, Any]:
    """Each subject's last message as nats-py reads it: the body and the headers."""

    async def work(js: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for subject in subjects:
            msg = await js.get_last_msg(stream, subject)
            out[subject] = (json.loads(msg.data), dict(msg.headers or {}))
        return out

    return with_jetstream(url, work)


def natspy_increment(url: str, subject: str, incr: str, msg_id: str | None = None) -> Any:
    """An increment sent by nats-py, the server's ack as it answers it."""

    async def work(js: Any) -> Any:
        headers = {"Nats-Incr": incr}
        if msg_id is not None:
            headers["Nats-Msg-Id"] = msg_id
        reply = await js._nc.request(subject, b"", timeout=5, headers=headers)
        return json.loads(reply.data)

    return with_jetstream(url, work)


def increments(subjects: list[str], values: pa.Array, **extra: Any) -> pa.Table:
    return pa.table({"subject": subjects, "increment": values, **extra})


def test_increments_are_counted_and_each_ack_carries_the_new_value(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("CNT", allow_msg_counter=True)
    a, b = f"{name}.a", f"{name}.b"
    result = client.publish(increments([a, a, b, a], pa.array([5, -2, 7, 10], pa.int64())))
    assert (result.stored, result.failed) == (4, 0)
    # In input order within a subject: each ack the running total.
    assert result.acks.column("value").to_pylist() == ["5", "3", "7", "13"]
    assert result.acks.schema.field("value").type == pa.utf8()
    # The stored body is {"val": "<decimal>"}, the header the increment as sent.
    seen = stored_counters(shared_nats_server.url, name, [a, b])
    assert seen[a][0] == {"val": "13"} and seen[a][1]["Nats-Incr"] == "10"
    assert seen[b][0] == {"val": "7"}
    # nats-py's own increment lands on the same counter.
    assert natspy_increment(shared_nats_server.url, a, "+1")["val"] == "14"

    table = client.read_counters(name)
    assert table.column_names == ["subject", "value", "sources", "seq"]
    assert table.schema.field("value").type == pa.decimal128(38, 0)
    assert dict(zip(table["subject"].to_pylist(), table["value"].to_pylist(), strict=True)) == {
        a: Decimal(14),
        b: Decimal(7),
    }
    assert table["sources"].to_pylist() == [None, None]
    only_b = client.read_counters(name, subjects=[b])
    assert only_b["subject"].to_pylist() == [b]


def test_arbitrary_precision_is_kept_beyond_int64_and_decimal128(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("CNTBIG", allow_msg_counter=True)
    big, huge = f"{name}.big", f"{name}.huge"
    # Decimal text, decimals of whole values and unsigned integers past int64.
    text = increments([big, big], pa.array(["9223372036854775807", "+9223372036854775807"]))
    assert client.publish(text).acks.column("value").to_pylist() == [
        "9223372036854775807",
        "18446744073709551614",
    ]
    dec = increments([big], pa.array([Decimal("2.00")], pa.decimal128(10, 2)))
    assert client.publish(dec).acks.column("value").to_pylist() == ["18446744073709551616"]
    u64 = increments([big], pa.array([2**64 - 1], pa.uint64()))
    assert client.publish(u64).acks.column("value").to_pylist() == ["36893488147419103231"]
    table = client.read_counters(name)
    assert table.schema.field("value").type == pa.decimal128(38, 0)
    assert table["value"].to_pylist() == [Decimal(36893488147419103231)]

    # A negative scale: 10**30 units of 10**10, past decimal128(38, 0), still counted.
    scaled = pa.array([10**30], pa.decimal128(38, 0)).view(pa.decimal128(38, -10))
    ack = client.publish(increments([f"{name}.scaled"], scaled)).acks
    assert ack.column("value").to_pylist() == [str(10**40)]
    client.publish(increments([f"{name}.scaled"], pa.array([-(10**40)], pa.decimal256(76, 0))))

    forty_digits = "1" + "0" * 39
    client.publish(increments([huge], pa.array([forty_digits])))
    assert stored_counters(shared_nats_server.url, name, [huge])[huge][0] == {"val": forty_digits}
    # A value past decimal128(38, 0): the whole table is text, never a float.
    table = client.read_counters(name)
    assert table.schema.field("value").type == pa.utf8()
    assert dict(zip(table["subject"].to_pylist(), table["value"].to_pylist(), strict=True)) == {
        big: "36893488147419103231",
        huge: forty_digits,
        f"{name}.scaled": "0",
    }


def test_floats_bad_increments_and_a_stream_without_counters_are_refused(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    name = new_stream("CNTBAD", allow_msg_counter=True)
    with pytest.raises(BadInputError, match=r"column 'increment' is Float64.*never a float"):
        client.publish(increments([f"{name}.a"], pa.array([1.0])))
    with pytest.raises(BadInputError, match=r"column 'increment', row 1: .*not an integer"):
        client.publish(increments([f"{name}.a"] * 2, pa.array(["3", "1e3"])))
    with pytest.raises(BadInputError, match=r"column 'increment', row 0: 1.50 is not a whole"):
        client.publish(increments([f"{name}.a"], pa.array([Decimal("1.5")], pa.decimal128(5, 2))))
    with pytest.raises(BadInputError, match=r"column 'increment', row 0: the increment is null"):
        client.publish(increments([f"{name}.a"], pa.array([None], pa.int64())))
    with pytest.raises(BadInputError, match=r"mode='acked'"):
        client.publish(increments([f"{name}.a"], pa.array([1])), mode="fast")
    # The server refuses an increment with any expectation header (10171): refused
    # before anything is sent, naming the option.
    with pytest.raises(BadInputError, match=r"takes no expected_stream"):
        client.publish(increments([f"{name}.a"], pa.array([1])), expected_stream=name)
    with pytest.raises(BadInputError, match=r"'include_ttl'.*read_counters gives its own"):
        client.read_counters(name, include_ttl=True)
    with pytest.raises(BadInputError, match=r"'include_headers'.*read_counters gives its own"):
        client.read_counters(name, include_headers=False)
    # Rows before a refused one are sent, as in any publish: only row 0's 3 counted.
    assert client.read_counters(name)["value"].to_pylist() == [Decimal(3)]

    # A stream without allow_msg_counter: each row fails naming it; nothing stored.
    plain = new_stream("CNTOFF")
    with pytest.raises(PublishError) as excinfo:
        client.publish(increments([f"{plain}.a"] * 2, pa.array([1, 2])))
    result = excinfo.value.result
    assert result.failed == 2
    for error in result.acks.column("error").to_pylist():
        assert "err_code 10168" in error and "allow_msg_counter" in error, error
    assert _core.ERR_MESSAGE_INCR_DISABLED == 10168
    assert client.stream_info(plain).state.messages == 0

    # A counter stream takes increments only: a payload is refused with what it takes.
    with pytest.raises(PublishError, match=r"10169.*increments only"):
        client.publish(pa.table({"subject": [f"{name}.a"], "data": [b"x"]}))


def test_an_increment_is_counted_once_per_msg_id_within_the_duplicate_window(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("CNTDUP", allow_msg_counter=True)
    a = f"{name}.a"
    table = increments([a, a], pa.array([5, 5]), msg_id=["one", "two"])
    first = client.publish(table)
    assert first.acks.column("value").to_pylist() == ["5", "10"]
    again = client.publish(table)
    # The server dedupes increments by Nats-Msg-Id: the re-run counts nothing, and a
    # duplicate's ack carries no value.
    assert (again.stored, again.duplicates) == (0, 2)
    assert again.acks.column("value").to_pylist() == [None, None]
    # nats-py sees the same: its duplicate ack has no value, the counter stays 10.
    ack = natspy_increment(shared_nats_server.url, a, "+5", msg_id="one")
    assert ack.get("duplicate") is True and "val" not in ack
    assert client.read_counters(name)["value"].to_pylist() == [Decimal(10)]


def test_ack_timeouts_retry_increments_with_msg_ids_once_and_report_the_rest(
    nats_server: NatsServer,
) -> None:
    """A stalled server: increments with msg ids are sent again after the ack timeout
    and counted once; without msg ids they are reported, not retried, saying the
    increment may or may not be counted."""
    with ja.connect(nats_server.url) as client:
        client.create_stream("C", ["c.>"], allow_msg_counter=True)
        n = 200
        table = increments(
            [f"c.{i % 4}" for i in range(n)],
            pa.array([1] * n),
            msg_id=[f"id-{i}" for i in range(n)],
        )
        with paused_server(nats_server, 1.5):
            result = client.publish(
                table, ack_timeout=0.5, max_retries=10, retry_backoff=0.1, raise_on_error=False
            )
        assert result.failed == 0, result.failed_rows().slice(0, 3).to_pylist()
        assert result.stored + result.duplicates == n
        counters = client.read_counters("C")
        assert counters["value"].to_pylist() == [Decimal(n // 4)] * 4

        bare = increments(["c.x"] * 5, pa.array([1] * 5))
        with paused_server(nats_server, 4.0):
            result = client.publish(bare, ack_timeout=0.5, raise_on_error=False)
        assert result.failed == 5
        for error in result.acks.column("error").to_pylist():
            assert "no msg id" in error and "may or may not be counted" in error, error


def test_a_stream_sourcing_counters_sums_them_and_reads_its_sources_breakdown(
    client: ja.Client, new_stream: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    east = new_stream("CNTE", allow_msg_counter=True)
    west = new_stream("CNTW", allow_msg_counter=True)
    client.publish(increments([f"{east}.hits", f"{east}.hits"], pa.array([3, 4])))
    client.publish(increments([f"{west}.hits"], pa.array([10])))
    total = unique_name("CNTT")
    # Both sources' `hits` counters land on one counter of the total, all.hits.
    client.create_stream(
        total,
        allow_msg_counter=True,
        sources=[
            StreamSource(
                name=src,
                extra={"subject_transforms": [{"src": f"{src}.hits", "dest": "all.hits"}]},
            )
            for src in (east, west)
        ],
    )
    try:

        def settled() -> bool:
            t = client.read_counters(total)
            return t.num_rows == 1 and t["value"].to_pylist() == [Decimal(17)]

        wait_until(settled, 10.0, "the sourced counters to add up to 17")
        row = client.read_counters(total).to_pylist()[0]
        assert row["subject"] == "all.hits"
        assert row["sources"] == [
            {"stream": s, "subject": f"{s}.hits", "value": Decimal(v)}
            for s, v in sorted([(east, 7), (west, 10)])
        ]
        # A later increment at a source moves the total by its difference.
        client.publish(increments([f"{west}.hits"], pa.array([-4])))
        wait_until(
            lambda: client.read_counters(total)["value"].to_pylist() == [Decimal(13)],
            10.0,
            "the total to follow the source",
        )
    finally:
        client.delete_stream(total)


def test_read_counters_refuses_a_stream_that_is_not_a_counter_stream(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    name = new_stream("NOTCNT")
    client.publish(pa.table({"subject": [f"{name}.a"], "data": [b"plain"]}))
    with pytest.raises(BadInputError, match=r"seq 1: not a counter value.*allow_msg_counter"):
        client.read_counters(name)


def test_a_spark_write_of_increments_counts_only_in_the_stream_it_names(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    """What a Spark write task runs, without Spark: increments go without the
    expected-stream header (the server refuses them with it), so a row whose subject
    another counter stream stores is refused naming it before anything is sent, not
    counted there."""
    from jetstream_arrow.spark.options import parse_write_options
    from jetstream_arrow.spark.writing import PublishTally, publish_batches, write_columns

    named = new_stream("CNTNAMED", allow_msg_counter=True)
    other = new_stream("CNTOTHER", allow_msg_counter=True)
    opts = parse_write_options({"stream": named, "servers": shared_nats_server.url})

    def write(subjects: list[str]) -> list[Any]:
        batch = pa.record_batch({"subject": subjects, "increment": pa.array([1] * len(subjects))})
        return list(
            publish_batches(
                opts, write_columns(opts, batch.schema), iter([batch]), "t-", PublishTally(), "t"
            )
        )

    with pytest.raises(BadInputError, match=rf"row 1 .*{named}.* does not store .*{other}\.x"):
        write([f"{named}.a", f"{other}.x"])
    assert client.read_counters(other).num_rows == 0
    assert client.read_counters(named).num_rows == 0  # refused before anything was sent
    (result,) = write([f"{named}.a", f"{named}.a"])
    assert result.stored == 2
    assert client.read_counters(named)["value"].to_pylist() == [Decimal(2)]
