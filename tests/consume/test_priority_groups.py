"""Priority groups of pull consumers (server 2.11+; `prioritized` 2.12+): pulls that
name a group (`pull_consumer(..., group=, min_pending=, priority=)`), the pin of a
`pinned_client` group kept from `Nats-Pin-Id` and named in later pulls, its loss
(`423`) when the pin moves by `unpin_consumer` or by the pinned client going quiet for
`priority_timeout`, and `overflow` pulls served only past their minimum. Counts are
exact: every message once across both bindings."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import ApiError, BadInputError
from natspy import with_jetstream
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(120)


def publish(client: ja.Client, stream: str, n: int) -> None:
    rows = pa.table({"subject": [f"{stream}.x"] * n, "data": [b"m%d" % i for i in range(n)]})
    assert client.publish(rows).stored == n


def seqs(batch: ja.ConsumedBatch) -> list[int]:
    out = batch.data.column("seq").to_pylist()
    batch.ack_sync()
    return out


def grouped(client: ja.Client, stream: str, name: str, policy: str, **config: Any) -> None:
    client.create_consumer(
        stream,
        durable_name=name,
        ack_policy="explicit",
        priority_groups=["G"],
        priority_policy=policy,
        **config,
    )


def test_only_the_pinned_binding_gets_messages_until_it_is_unpinned(
    client: ja.Client,
    new_stream: Callable[..., str],
    unique_name: Callable[[str], str],
    shared_nats_server: NatsServer,
) -> None:
    stream = new_stream("PIN")
    name = unique_name("C")
    grouped(client, stream, name, "pinned_client", priority_timeout=30)
    info = client.consumer_info(stream, name)
    assert info.config.priority_groups == ["G"]
    assert info.config.priority_policy == "pinned_client"
    assert info.config.priority_timeout == 30
    publish(client, stream, 20)
    a = client.pull_consumer(stream, name, group="G")
    b = client.pull_consumer(stream, name, group="G")

    got_a = seqs(a.fetch(5, expires=1.0))
    assert got_a == [1, 2, 3, 4, 5]
    pin = a.pin_id
    assert pin
    # The server's view: the group is pinned to a's id.
    groups = client.consumer_info(stream, name).priority_groups
    assert groups and groups[0]["group"] == "G" and groups[0]["pinned_client_id"] == pin
    # b is not pinned: its pull waits to its expiry and gets nothing.
    assert len(b.fetch(5, expires=1.0)) == 0
    assert b.pin_id is None
    got_a += seqs(a.fetch(5, expires=1.0))
    assert got_a == list(range(1, 11))

    client.unpin_consumer(stream, name, "G")
    got_b = seqs(b.fetch(5, expires=3.0))
    assert got_b == [11, 12, 13, 14, 15]
    assert b.pin_id and b.pin_id != pin
    # a's next pull names the old pin: turned away (423), a forgets it.
    assert len(a.fetch(5, expires=1.0)) == 0
    assert a.pin_id is None
    got_b += seqs(b.fetch(10, expires=1.0))
    assert sorted(got_a + got_b) == list(range(1, 21))
    assert len(got_a) + len(got_b) == 20

    async def oracle(js: Any) -> Any:
        return (await js.consumer_info(stream, name)).num_ack_pending

    assert with_jetstream(shared_nats_server.url, oracle) == 0


def test_the_other_binding_takes_over_when_the_pinned_one_goes_quiet(
    client: ja.Client, new_stream: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    """a consumes continuously, then stops (its loop closed, as a killed reader's
    would be); after priority_timeout the server pins b, which gets the rest: each
    message once across both."""
    stream = new_stream("PINFAIL")
    name = unique_name("C")
    grouped(client, stream, name, "pinned_client", priority_timeout=2, ack_wait=3)
    publish(client, stream, 30)
    a = client.pull_consumer(stream, name, group="G")
    b = client.pull_consumer(stream, name, group="G")
    got_a: list[int] = []
    with a.messages(
        max_messages=10, expires=6.0, heartbeat=1.0, batch_rows=10, batch_wait=0.2
    ) as messages:
        for batch in messages:
            got_a += seqs(batch)
            if len(got_a) >= 10:
                break
    assert a.pin_id
    closed = time.monotonic()
    got_b: list[int] = []
    with b.messages(
        max_messages=10, expires=6.0, heartbeat=1.0, batch_rows=10, batch_wait=0.2
    ) as messages:
        for batch in messages:
            got_b += seqs(batch)
            if len(got_a) + len(got_b) >= 30:
                break
    took_over = time.monotonic() - closed
    assert b.pin_id and b.pin_id != a.pin_id
    assert 1.0 <= took_over < 20.0, took_over
    # a's loop may have had more delivered than it handed out before it closed: those
    # come again to b after ack_wait; every message is acknowledged exactly once here.
    assert sorted(got_a + got_b) == list(range(1, 31))
    assert client.consumer_info(stream, name).num_ack_pending == 0


def test_an_overflow_pull_is_served_only_past_its_minimum(
    client: ja.Client, new_stream: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    stream = new_stream("OVERFLOW")
    name = unique_name("C")
    grouped(client, stream, name, "overflow")
    publish(client, stream, 10)
    spare = client.pull_consumer(stream, name, group="G", min_pending=20)
    main = client.pull_consumer(stream, name, group="G")
    # 10 pending, below 20: the spare's pull waits and gets nothing.
    assert len(spare.fetch(5, expires=1.0)) == 0
    publish(client, stream, 15)
    # 25 pending: the spare is served.
    got_spare = seqs(spare.fetch(5, expires=2.0))
    assert got_spare == [1, 2, 3, 4, 5]
    # The server counts the message at hand as pending: with 20 left it serves one
    # more (20 pending with it), then none (19).
    got_spare += seqs(spare.fetch(5, expires=2.0))
    assert got_spare == [1, 2, 3, 4, 5, 6]
    assert len(spare.fetch(5, expires=1.0)) == 0
    got_main = seqs(main.fetch(100, expires=1.0))
    assert sorted(got_spare + got_main) == list(range(1, 26))
    assert len(got_spare) == 6 and len(got_main) == 19


def test_group_options_are_checked_and_the_server_refusals_named(
    client: ja.Client, new_stream: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    stream = new_stream("GROUPBAD")
    name = unique_name("C")
    grouped(client, stream, name, "pinned_client")
    with pytest.raises(BadInputError, match="'priority' must be between 0"):
        client.pull_consumer(stream, name, group="G", priority=10)
    with pytest.raises(BadInputError, match="give 'group' too"):
        client.pull_consumer(stream, name, min_pending=5)
    with pytest.raises(BadInputError, match="'min_pending' must be at least 1"):
        client.pull_consumer(stream, name, group="G", min_pending=0)
    # Groups the consumer does not have, or a pull with no group: the server's 400.
    with pytest.raises(ApiError, match="Invalid Priority Group"):
        client.pull_consumer(stream, name, group="H").fetch(1, expires=1.0)
    with pytest.raises(ApiError, match="Priority Group missing"):
        client.pull_consumer(stream, name).fetch(1, expires=1.0)
    with pytest.raises(ApiError, match="Not a Overflow Priority consumer"):
        client.pull_consumer(stream, name, group="G", min_pending=5).fetch(1, expires=1.0)
    with pytest.raises(BadInputError, match="priority_policy"):
        client.create_consumer(stream, durable_name="X", priority_policy="pinned")


def test_a_prioritized_group_serves_the_lower_priority_first(
    client: ja.Client, new_stream: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    """Both bindings wait with a pull; the stream's messages go to priority 0 first."""
    import threading

    stream = new_stream("PRIO")
    name = unique_name("C")
    grouped(client, stream, name, "prioritized")
    first = client.pull_consumer(stream, name, group="G", priority=0)
    second = client.pull_consumer(stream, name, group="G", priority=1)
    out: dict[str, list[int]] = {}

    def pull(label: str, binding: ja.PullConsumer) -> None:
        out[label] = seqs(binding.fetch(5, expires=4.0))

    threads = [
        threading.Thread(target=pull, args=("second", second)),
        threading.Thread(target=pull, args=("first", first)),
    ]
    for t in threads:
        t.start()
        time.sleep(0.5)  # both pulls wait at the server before any message
    publish(client, stream, 5)
    for t in threads:
        t.join(10)
    assert out == {"first": [1, 2, 3, 4, 5], "second": []}


def test_an_asyncio_binding_takes_the_group_and_keeps_the_pin(
    shared_nats_server: NatsServer,
    client: ja.Client,
    new_stream: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    import asyncio

    stream = new_stream("PINAIO")
    name = unique_name("C")
    grouped(client, stream, name, "pinned_client")
    publish(client, stream, 4)

    async def work() -> tuple[list[int], str | None, int]:
        async with await ja.connect_async(shared_nats_server.url) as c:
            pinned = c.pull_consumer(stream, name, group="G")
            other = c.pull_consumer(stream, name, group="G")
            batch = await pinned.fetch(4, expires=1.0)
            got = batch.data.column("seq").to_pylist()
            await batch.ack_sync()
            none = len(await other.fetch(4, expires=1.0))
            return got, pinned.pin_id, none

    got, pin, none = asyncio.run(work())
    assert got == [1, 2, 3, 4] and pin and none == 0
