"""The option probes of pull and push consumers and the acks of a ConsumedBatch: each
option changes what happens, or is refused naming it. tests/option_probes.py says what a
probe is and holds what the probes share; tests/project/test_every_option.py checks that
every option of every entry point has a probe."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

import jetstream_arrow as ja
from jetstream_arrow import (
    ConsumedBatch,
)
from jetstream_arrow.exceptions import (
    ApiError,
    BadInputError,
    JetStreamArrowError,
    MissedHeartbeatsError,
)
from natsserver import wait_until
from option_probes import (
    Ctx,
    ProbeTable,
    ctx,
    heartbeat_zero_refused,
    json_stream,
    must_refuse,
    pull,
    raises,
    value_ids,
)

__all__ = ["ctx"]  # a fixture, imported for pytest

probes = ProbeTable()


# == Python: consumers =========================================================================


@probes.effect(("Client.pull_consumer", "ack_policy"))
def _pull_ack_policy(ctx: Ctx) -> None:
    # Told the policy is "all", a batch is acknowledged by one ack of its last
    # message; the explicit consumer here then holds the others unacknowledged.
    name, consumer = pull(ctx)
    ctx.client.pull_consumer(name, consumer).fetch(2).ack_sync()
    assert ctx.client.consumer_info(name, consumer).num_ack_pending == 0
    ctx.client.pull_consumer(name, consumer, ack_policy="all").fetch(2).ack()
    ctx.client.flush()
    assert ctx.client.consumer_info(name, consumer).num_ack_pending == 1


def _grouped(ctx: Ctx, policy: str, count: int = 4) -> tuple[str, str]:
    return pull(ctx, count=count, priority_groups=["G"], priority_policy=policy)


@probes.effect(("Client.pull_consumer", "group"))
def _pull_group(ctx: Ctx) -> None:
    name, consumer = _grouped(ctx, "pinned_client")
    with pytest.raises(ApiError, match="Priority Group missing"):
        ctx.client.pull_consumer(name, consumer).fetch(1, expires=1.0)
    grouped = ctx.client.pull_consumer(name, consumer, group="G")
    assert len(grouped.fetch(2, expires=1.0)) == 2
    assert grouped.pin_id


@probes.effect(("Client.pull_consumer", "min_pending"))
def _pull_min_pending(ctx: Ctx) -> None:
    name, consumer = _grouped(ctx, "overflow")

    def fetched(min_pending: int) -> int:
        binding = ctx.client.pull_consumer(name, consumer, group="G", min_pending=min_pending)
        return len(binding.fetch(2, expires=1.0))

    assert fetched(10) == 0
    # 4 pending: served while the pending count (the message at hand included) is 3+.
    assert fetched(3) == 2


@probes.effect(("Client.pull_consumer", "min_ack_pending"))
def _pull_min_ack_pending(ctx: Ctx) -> None:
    name, consumer = _grouped(ctx, "overflow")
    spare = ctx.client.pull_consumer(name, consumer, group="G", min_ack_pending=2)
    assert len(spare.fetch(1, expires=1.0)) == 0
    ctx.client.pull_consumer(name, consumer, group="G").fetch(2, expires=1.0)  # left unacked
    assert len(spare.fetch(1, expires=1.0)) == 1


@probes.effect(("Client.pull_consumer", "priority"))
def _pull_priority(ctx: Ctx) -> None:
    name, consumer = _grouped(ctx, "prioritized", count=0)
    out: dict[int, int] = {}

    def fetch(priority: int) -> None:
        binding = ctx.client.pull_consumer(name, consumer, group="G", priority=priority)
        out[priority] = len(binding.fetch(4, expires=3.0))

    threads = [threading.Thread(target=fetch, args=(p,)) for p in (5, 0)]
    for t in threads:
        t.start()
        time.sleep(0.5)
    ctx.fill(name, 4)
    for t in threads:
        t.join(10)
    assert out == {0: 4, 5: 0}
    with pytest.raises(BadInputError, match="priority"):
        ctx.client.pull_consumer(name, consumer, group="G", priority=10)


@probes.effect(("PullConsumer.fetch", "max_messages"))
def _fetch_max(ctx: Ctx) -> None:
    name, consumer = pull(ctx)
    assert len(ctx.client.pull_consumer(name, consumer).fetch(3)) == 3


@probes.effect(("PullConsumer.fetch", "max_bytes"))
def _fetch_max_bytes(ctx: Ctx) -> None:
    name, consumer = pull(ctx)
    c = ctx.client.pull_consumer(name, consumer)
    assert 0 < len(c.fetch(4, max_bytes=200)) < 4
    # 0 bytes can carry no message: refused, not an empty batch while messages wait.
    must_refuse(lambda: c.fetch(4, max_bytes=0), "max_bytes", "fetch(max_bytes=0)")


@probes.effect(("PullConsumer.fetch", "expires"))
def _fetch_expires(ctx: Ctx) -> None:
    name, consumer = pull(ctx, count=0)
    c = ctx.client.pull_consumer(name, consumer)
    started = time.monotonic()
    assert len(c.fetch(1, expires=0.3)) == 0
    assert time.monotonic() - started < 1.5
    # No time at all to wait is refused, not taken for a server that does not answer.
    must_refuse(lambda: c.fetch(1, expires=0), "expires", "fetch(expires=0)")


@probes.effect(("PullConsumer.fetch", "no_wait"))
def _fetch_no_wait(ctx: Ctx) -> None:
    name, consumer = pull(ctx, count=0)
    started = time.monotonic()
    assert len(ctx.client.pull_consumer(name, consumer).fetch(1, no_wait=True, expires=5)) == 0
    assert time.monotonic() - started < 2


def _fetch_heartbeat(ctx: Ctx) -> None:
    name, consumer = pull(ctx, count=0)
    c = ctx.client.pull_consumer(name, consumer)
    raises(lambda: c.fetch(1, heartbeat=-1), BadInputError)
    heartbeat_zero_refused(lambda: c.fetch(1, heartbeat=0, expires=2))


probes.register("PullConsumer.fetch", "heartbeat", "refusal", _fetch_heartbeat)


@probes.effect(("PullConsumer.fetch", "include_headers"))
def _fetch_headers(ctx: Ctx) -> None:
    name, consumer = pull(ctx)
    c = ctx.client.pull_consumer(name, consumer)
    assert "headers" not in c.fetch(1).data.schema.names
    assert "headers" in c.fetch(1, include_headers=True).data.schema.names


def _first_consumed(messages: Any) -> ConsumedBatch:
    try:
        batch: ConsumedBatch = next(messages)
        return batch
    finally:
        messages.close()


@probes.effect(("PullConsumer.messages", "options"))
def _messages_options(ctx: Ctx) -> None:
    # An options object sets what keywords would; a keyword is set over it.
    name, consumer = pull(ctx)
    c = ctx.client.pull_consumer(name, consumer)
    options = ja.ConsumeOptions(batch_rows=3, batch_wait=0.2)
    assert len(_first_consumed(c.messages(options=options))) == 3
    assert len(_first_consumed(c.messages(options=options, batch_rows=2))) == 2


@probes.effect(("PullConsumer.messages", "batch_rows"))
def _messages_batch_rows(ctx: Ctx) -> None:
    name, consumer = pull(ctx)
    c = ctx.client.pull_consumer(name, consumer)
    assert len(_first_consumed(c.messages(batch_rows=3, batch_wait=0.2))) == 3


@probes.effect(("PullConsumer.messages", "include_headers"))
def _messages_headers(ctx: Ctx) -> None:
    name, consumer = pull(ctx)
    c = ctx.client.pull_consumer(name, consumer)
    got = _first_consumed(c.messages(include_headers=True, batch_wait=0.2))
    assert "headers" in got.data.schema.names


@probes.effect(("PullConsumer.messages", "max_messages"))
def _messages_max(ctx: Ctx) -> None:
    # A consumer that allows pulls of at most 2 messages refuses a buffer of 4.
    name, consumer = pull(ctx, max_batch=2)
    c = ctx.client.pull_consumer(name, consumer)
    assert len(_first_consumed(c.messages(max_messages=2, batch_wait=0.2))) >= 1
    raises(lambda: _first_consumed(c.messages(max_messages=4, batch_wait=0.2)), JetStreamArrowError)


@probes.effect(("PullConsumer.messages", "max_bytes"))
def _messages_max_bytes(ctx: Ctx) -> None:
    name, consumer = pull(ctx, max_bytes=300)
    c = ctx.client.pull_consumer(name, consumer)
    assert len(_first_consumed(c.messages(max_bytes=200, batch_wait=0.2))) >= 1
    raises(lambda: _first_consumed(c.messages(max_bytes=1000, batch_wait=0.2)), JetStreamArrowError)


probes.refused(
    "PullConsumer.messages",
    "threshold_messages",
    lambda ctx: _first_consumed(
        ctx.client.pull_consumer(*pull(ctx)).messages(max_messages=4, threshold_messages=4)
    ),
)


def _threshold_bytes(ctx: Ctx) -> None:
    # A byte threshold is one of a byte budget: without max_bytes nothing reads it.
    c = ctx.client.pull_consumer(*pull(ctx))
    must_refuse(
        lambda: _first_consumed(c.messages(threshold_bytes=100, batch_wait=0.2)),
        "threshold_bytes",
        "messages(threshold_bytes=100) without max_bytes",
    )


probes.register("PullConsumer.messages", "threshold_bytes", "refusal", _threshold_bytes)
probes.refused(
    "PullConsumer.messages",
    "expires",
    lambda ctx: _first_consumed(ctx.client.pull_consumer(*pull(ctx)).messages(expires=0.5)),
)


def _messages_heartbeat(ctx: Ctx) -> None:
    c = ctx.client.pull_consumer(*pull(ctx))
    raises(lambda: _first_consumed(c.messages(expires=2, heartbeat=1.5)), BadInputError)
    heartbeat_zero_refused(lambda: _first_consumed(c.messages(heartbeat=0)))


probes.register("PullConsumer.messages", "heartbeat", "refusal", _messages_heartbeat)
probes.refused(
    "PullConsumer.messages",
    "batch_wait",
    lambda ctx: _first_consumed(ctx.client.pull_consumer(*pull(ctx)).messages(batch_wait=-1)),
)


def push(ctx: Ctx, count: int = 4, **config: Any) -> tuple[str, str, str]:
    name = ctx.stream(count=count)
    deliver = f"deliver.{name}"
    config.setdefault("ack_policy", "explicit")
    ctx.client.create_consumer(name, durable_name="P", deliver_subject=deliver, **config)
    return name, "P", deliver


@probes.effect(("Client.push_consumer", "deliver_subject"))
def _push_deliver_subject(ctx: Ctx) -> None:
    name, consumer, deliver = push(ctx)
    assert ctx.client.push_consumer(name, consumer).deliver_subject == deliver
    bound = ctx.client.push_consumer(name, consumer, deliver_subject=f"{deliver}.other")
    assert bound.deliver_subject == f"{deliver}.other"


@probes.effect(("Client.push_consumer", "deliver_group"))
def _push_deliver_group(ctx: Ctx) -> None:
    name, consumer, deliver = push(ctx, deliver_group="workers")
    bound = ctx.client.push_consumer(
        name, consumer, deliver_subject=deliver, deliver_group="workers"
    )
    assert len(_first_consumed(bound.messages(batch_wait=0.2, heartbeat=None))) == 4
    raises(lambda: ctx.client.push_consumer(name, consumer, deliver_group="workers"), BadInputError)


@probes.effect(("Client.push_consumer", "ack_policy"))
def _push_ack_policy(ctx: Ctx) -> None:
    # As for a pull consumer: "all" acknowledges a batch by its last message.
    name, consumer, deliver = push(ctx)
    bound = ctx.client.push_consumer(name, consumer, deliver_subject=deliver, ack_policy="all")
    batch = _first_consumed(bound.messages(batch_wait=0.2))
    batch.ack()
    ctx.client.flush()
    assert ctx.client.consumer_info(name, consumer).num_ack_pending == len(batch) - 1


@probes.effect(("PushConsumer.messages", "batch_rows"))
def _push_batch_rows(ctx: Ctx) -> None:
    name, consumer, _ = push(ctx)
    got = _first_consumed(ctx.client.push_consumer(name, consumer).messages(batch_rows=3))
    assert len(got) == 3


probes.refused(
    "PushConsumer.messages",
    "batch_wait",
    lambda ctx: _first_consumed(ctx.client.push_consumer(*push(ctx)[:2]).messages(batch_wait=-1)),
)


@probes.effect(("PushConsumer.messages", "include_headers"))
def _push_headers(ctx: Ctx) -> None:
    name, consumer, _ = push(ctx)
    c = ctx.client.push_consumer(name, consumer)
    got = _first_consumed(c.messages(include_headers=True, batch_wait=0.2))
    assert "headers" in got.data.schema.names


@probes.effect(("PushConsumer.messages", "heartbeat"))
def _push_heartbeat(ctx: Ctx) -> None:
    # Bound without a lookup to a consumer whose server sends no heartbeats, a
    # heartbeat makes the silence an error after two periods.
    name, consumer, deliver = push(ctx, count=0)
    bound = ctx.client.push_consumer(name, consumer, deliver_subject=deliver)
    started = time.monotonic()
    raises(lambda: _first_consumed(bound.messages(heartbeat=0.3)), MissedHeartbeatsError)
    assert time.monotonic() - started < 3


def consumed(ctx: Ctx, count: int = 3, **config: Any) -> tuple[str, ConsumedBatch]:
    name, consumer = pull(ctx, count=count, **config)
    return name, ctx.client.pull_consumer(name, consumer).fetch(count)


def _pending(ctx: Ctx, name: str) -> int:
    ctx.client.flush()
    return ctx.client.consumer_info(name, "C").num_ack_pending


for _method in ("ack", "ack_sync", "nak", "term", "in_progress"):

    def _rows_probe(ctx: Ctx, method: str = _method) -> None:
        name, batch = consumed(ctx)
        if method == "in_progress":
            # Refused for a row outside the batch: nothing else is visible of it.
            raises(lambda: batch.in_progress(rows=[5]), BadInputError)
            batch.in_progress(rows=[0])
            return
        getattr(batch, method)(rows=[0])
        if method == "nak":
            # The row asked for again comes again at once, and only it.
            again = ctx.client.pull_consumer(name, "C").fetch(3, expires=0.5)
            assert again.data.column("seq").to_pylist() == [1]
        else:
            # An ack is applied by the server after it is received: wait for it.
            wait_until(lambda: _pending(ctx, name) == 2, 10, f"{method} of row 0 applied")
        raises(lambda: getattr(batch, method)(rows=[5]), BadInputError)

    probes.register(f"ConsumedBatch.{_method}", "rows", "effect", _rows_probe)

probes.refused(
    "ConsumedBatch.ack_sync", "timeout", lambda ctx: consumed(ctx)[1].ack_sync(timeout=-1)
)


@probes.effect(("ConsumedBatch.nak", "delay"))
def _nak_delay(ctx: Ctx) -> None:
    name, consumer = pull(ctx, count=2)
    c = ctx.client.pull_consumer(name, consumer)
    batch = c.fetch(2)
    batch.nak(rows=[0], delay=30)
    batch.nak(rows=[1])
    again = c.fetch(2, expires=0.5)
    # The message nakked without a delay comes again at once; the delayed one does not.
    assert again.data.column("seq").to_pylist() == [2], again.data


@probes.effect(("ConsumedBatch.term", "reason"))
def _term_reason(ctx: Ctx) -> None:
    # The server puts the reason in its advisory of the terminated message, which a
    # stream on the advisory subject keeps.
    name, batch = consumed(ctx, count=1)
    advisories = ctx.name("ADV")
    ctx.client.create_stream(
        advisories,
        [f"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{name}.>"],
        storage="memory",
    )
    ctx.made.append(advisories)
    batch.term(reason="done with it")
    ctx.client.flush()
    deadline = time.monotonic() + 5
    while ctx.client.stream_info(advisories).state.messages == 0:
        assert time.monotonic() < deadline, "no termination advisory within 5 s"
        time.sleep(0.05)
    advisory = json.loads(ctx.client.get_message(advisories, seq=1).data)
    assert advisory.get("reason") == "done with it", advisory


probes.refused("Client.flush", "timeout", lambda ctx: ctx.client.flush(-1))


@probes.effect(("PullConsumer.fetch", "codec"), ("PullConsumer.messages", "codec"))
def _pull_codec(ctx: Ctx) -> None:
    name = json_stream(ctx)
    ctx.client.create_consumer(name, durable_name="C", ack_policy="explicit")
    c = ctx.client.pull_consumer(name, "C")
    assert value_ids(c.fetch(1, codec="json").data) == [0]
    got = _first_consumed(c.messages(codec="json", batch_rows=2, batch_wait=0.2))
    assert value_ids(got.data) == [1, 2]


@probes.effect(("PushConsumer.messages", "codec"))
def _push_codec(ctx: Ctx) -> None:
    name = json_stream(ctx)
    ctx.client.create_consumer(
        name, durable_name="P", deliver_subject=f"deliver.{name}", ack_policy="explicit"
    )
    got = _first_consumed(
        ctx.client.push_consumer(name, "P").messages(codec="json", batch_wait=0.2)
    )
    assert value_ids(got.data)[0] == 0


@pytest.mark.parametrize("probe_key", probes.params())
def test_option(
    probe_key: str, ctx: Ctx, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    probes.run(probe_key, ctx, capsys, request)
