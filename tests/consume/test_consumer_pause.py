"""Pausing a consumer (server 2.11+): `pause_consumer(until)` / `resume_consumer()`
through `$JS.API.CONSUMER.PAUSE.<stream>.<consumer>`, the reply and the consumer's info
checked against nats-py's view, and what a pull on a paused consumer gets: the server
holds the pull (no status; idle heartbeats go on) and ends it at its expiry, so a fetch
returns nothing and a continuous consumer waits, then delivers once the pause ends, as
nats.go's and async-nats's pull consumers do."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError, NotFoundError
from natspy import with_jetstream
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(90)


def publish(client: ja.Client, stream: str, n: int) -> None:
    rows = pa.table({"subject": [f"{stream}.x"] * n, "data": [b"m%d" % i for i in range(n)]})
    assert client.publish(rows).stored == n


def seqs_of(batch: ja.ConsumedBatch) -> list[int]:
    out: list[int] = batch.data.column("seq").to_pylist()
    batch.ack_sync()
    return out


def consumer(client: ja.Client, stream: str, unique_name: Callable[[str], str]) -> str:
    name = unique_name("C")
    client.create_consumer(stream, durable_name=name, ack_policy="explicit")
    return name


def test_a_paused_consumer_says_so_until_its_time_and_resumes(
    client: ja.Client,
    new_stream: Callable[..., str],
    unique_name: Callable[[str], str],
    shared_nats_server: NatsServer,
) -> None:
    stream = new_stream("PAUSE")
    name = consumer(client, stream, unique_name)
    until = datetime.now(timezone.utc) + timedelta(minutes=10)
    paused = client.pause_consumer(stream, name, until)
    assert paused.paused is True
    assert paused.pause_until is not None
    assert abs((paused.pause_until - until).total_seconds()) < 0.001
    assert paused.pause_remaining is not None and 590 < paused.pause_remaining <= 600
    info = client.consumer_info(stream, name)
    assert info.paused is True
    assert info.pause_remaining is not None and info.pause_remaining > 590
    assert info.config.pause_until == paused.pause_until

    async def oracle(js: Any) -> Any:
        info = await js.consumer_info(stream, name)
        return info.paused, info.config.pause_until is not None

    # nats-py (2.16 reads a consumer's pause) sees the same pause.
    assert with_jetstream(shared_nats_server.url, oracle) == (True, True)

    resumed = client.resume_consumer(stream, name)
    assert resumed.paused is False
    info = client.consumer_info(stream, name)
    assert info.paused is False
    assert not info.pause_remaining


def test_a_pause_takes_a_timedelta_iso_text_or_epoch_seconds(
    client: ja.Client, new_stream: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    stream = new_stream("PAUSEFORMS")
    name = consumer(client, stream, unique_name)
    soon = datetime.now(timezone.utc) + timedelta(seconds=60)
    for until in (timedelta(seconds=60), soon.isoformat(), soon.timestamp(), soon):
        assert client.pause_consumer(stream, name, until).paused is True
    # A time in the past is no pause.
    assert client.pause_consumer(stream, name, timedelta(seconds=-5)).paused is False
    with pytest.raises(BadInputError, match="until"):
        client.pause_consumer(stream, name, "2030-01-01T00:00:00")  # no zone
    with pytest.raises(NotFoundError):
        client.pause_consumer(stream, unique_name("NONE"), timedelta(seconds=5))


def test_a_pull_on_a_paused_consumer_waits_and_delivers_when_the_pause_ends(
    client: ja.Client, new_stream: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    stream = new_stream("PAUSEPULL")
    name = consumer(client, stream, unique_name)
    publish(client, stream, 5)
    pull = client.pull_consumer(stream, name)
    client.pause_consumer(stream, name, timedelta(seconds=4))
    started = time.monotonic()
    # A fetch gets nothing and no error: the server held the pull to its expiry.
    assert len(pull.fetch(5, expires=1.0)) == 0
    # Continuous consumption waits through the pause (heartbeats every 0.5 s keep it
    # alive: the server sends them to held pulls) and delivers when it ends.
    got: list[int] = []
    with pull.messages(heartbeat=0.5, expires=2.0, batch_wait=0.2) as messages:
        for batch in messages:
            got += batch.data.column("seq").to_pylist()
            batch.ack()
            if len(got) >= 5:
                break
    waited = time.monotonic() - started
    assert got == [1, 2, 3, 4, 5]
    assert waited >= 3.0, waited
    assert client.consumer_info(stream, name).paused is False


def test_after_a_resume_the_next_pull_delivers_and_a_held_one_ends_at_its_expiry(
    client: ja.Client, new_stream: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    """nats-server 2.15.1: a pull the server held through `resume_consumer` is not
    served (it ends at its `expires`, 408); the next pull is, at once."""
    stream = new_stream("PAUSERESUME")
    name = consumer(client, stream, unique_name)
    publish(client, stream, 3)
    client.pause_consumer(stream, name, timedelta(minutes=5))
    pull = client.pull_consumer(stream, name)
    timer = threading.Timer(1.0, lambda: client.resume_consumer(stream, name))
    timer.start()
    try:
        started = time.monotonic()
        assert len(pull.fetch(3, expires=3.0)) == 0
        assert time.monotonic() - started >= 2.5
    finally:
        timer.join()
    assert client.consumer_info(stream, name).paused is False
    started = time.monotonic()
    assert seqs_of(pull.fetch(3, expires=5.0)) == [1, 2, 3]
    assert time.monotonic() - started < 2.0
