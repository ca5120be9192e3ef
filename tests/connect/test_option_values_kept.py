"""Option values as users give them, kept as given by the options declared in the core:
numpy scalars are counts, seconds and bools; None for an option that may be None is
None (``max_reconnects=None`` reconnects forever, ``name=None`` sends no name), not the
option's default; Spark's own bounds are checked where its options are parsed, naming
the Spark option; ``ReadOptions`` still normalises subjects and times; and a payload of
several JSON values is told as such. Real nats-server, nats-py as the independent
oracle of what is stored."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError, JetStreamArrowError
from jetstream_arrow.spark.options import parse_read_options, parse_write_options
from natspy import with_jetstream
from natsserver import NatsServer


def _stored(url: str, stream: str) -> list[bytes]:
    """The payload of every message of ``stream``, as nats-py reads them."""

    async def work(js: Any) -> list[bytes]:
        info = await js.stream_info(stream)
        if not info.state.messages:
            return []
        return [
            (await js.get_msg(stream, seq)).data
            for seq in range(info.state.first_seq, info.state.last_seq + 1)
        ]

    return with_jetstream(url, work)


def _publish_with_natspy(url: str, subject: str, payloads: list[bytes]) -> None:
    async def work(js: Any) -> None:
        for payload in payloads:
            await js.publish(subject, payload)

    with_jetstream(url, work)


# Numbers of numpy's types (what pandas and Arrow's to_numpy() hand back) are taken as
# Python's own: counts by __index__, seconds by __float__, numpy.bool_ as a bool.


def test_numpy_numbers_are_taken_by_publish(
    client: ja.Client, shared_nats_server: NatsServer, new_stream: Callable[..., str]
) -> None:
    stream = new_stream("NP_PUB")
    rows = pa.table({"subject": [f"{stream}.a"] * 3, "data": [b"1", b"2", b"3"]})
    result = client.publish(
        rows,
        window=np.int64(2),
        max_retries=np.uint32(1),
        ack_timeout=np.float32(5.0),
        retry_backoff=np.int64(0),
    )
    assert result.stored == 3
    assert _stored(shared_nats_server.url, stream) == [b"1", b"2", b"3"]


def test_numpy_numbers_are_taken_by_read_and_ordered_consumer(
    client: ja.Client, shared_nats_server: NatsServer, new_stream: Callable[..., str]
) -> None:
    stream = new_stream("NP_READ")
    _publish_with_natspy(shared_nats_server.url, f"{stream}.a", [b"1", b"2", b"3"])
    seqs = np.array([2, 3], dtype=np.int64)  # as from a table's seq column
    table = client.read(
        stream, start_seq=seqs[0], end_seq=seqs[1], include_headers=np.bool_(True)
    ).read_all()
    assert table.column("seq").to_pylist() == [2, 3]
    assert "headers" in table.column_names
    follower = client.ordered_consumer(stream, start_seq=seqs[0])
    batches = follower.messages(batch_rows=np.int64(10), batch_wait=0.2)
    try:
        assert next(batches).column("seq").to_pylist()[0] == 2
    finally:
        batches.close()  # type: ignore[attr-defined]


# Spark's own bounds, tighter than the core's, are refused where the options are
# parsed, naming Spark's option (the core would name its own later, on an executor).


def test_spark_as_of_sequence_zero_is_refused_when_parsed() -> None:
    with pytest.raises(BadInputError, match="asOfSequence"):
        parse_read_options({"stream": "S", "lastPerSubject": "true", "asOfSequence": "0"})


def test_spark_ack_timeout_below_a_millisecond_is_refused_when_parsed() -> None:
    with pytest.raises(BadInputError, match="ackTimeout"):
        parse_write_options({"stream": "S", "subject": "S.a", "ackTimeout": "0.000001"})


def test_read_options_normalise_subjects_and_times() -> None:
    options = ja.ReadOptions(
        subjects="ORDERS.eu", start_time="2026-01-31T12:00:00Z", as_of_time=1_769_860_800
    )
    assert options.subject_filters == ["ORDERS.eu"]
    assert options.start_time_ns == 1_769_860_800_000_000_000
    assert options.as_of_time_ns == 1_769_860_800_000_000_000


# None for an option that may be None is None, whatever the option's default.


def test_max_reconnects_none_reconnects_past_the_default_count(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    server = nats_server_factory()
    # Each try waits about 10 ms here, so the default's 60 tries would be spent within
    # a second or two of the server being gone.
    with ja.connect(server.url, max_reconnects=None, reconnect_delay=0.01) as client:
        client.create_stream("RECON", ["RECON.>"])
        server.stop()
        time.sleep(5.0)
        server.start()
        deadline = time.monotonic() + 20.0
        while True:
            try:
                client.publish(pa.table({"data": [b"back"]}), subject="RECON.a")
                break
            except JetStreamArrowError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    assert _stored(server.url, "RECON") == [b"back"]


def test_name_none_connects_without_a_client_name(nats_server: NatsServer) -> None:
    # A server of its own: the only connection is this client's.
    with ja.connect(nats_server.url, name=None) as client:
        client.flush()
        names = [c.get("name", "") for c in nats_server.monitor("connz")["connections"]]
    assert names == [""], names


def test_a_payload_of_two_json_objects_is_told_as_two_values(
    client: ja.Client, shared_nats_server: NatsServer, new_stream: Callable[..., str]
) -> None:
    stream = new_stream("TWO_VALUES")
    _publish_with_natspy(shared_nats_server.url, f"{stream}.a", [b'{"id": 1}\n{"id": 2}'])
    codec = ja.ValueCodec("json", on_malformed="permissive", schema=pa.schema([("id", pa.int64())]))
    reason = client.read(stream, codec=codec).read_all().column("_corrupt_reason")[0].as_py()
    assert reason is not None and "not JSON" not in reason, reason
    assert "2 JSON values" in reason, reason
