"""The asyncio facade is the sync facade's twin: every call of a sync class has its
asyncio twin, with the same parameters (names, kinds, defaults, annotations), so
neither can drift from the other; every call that waits is one native call, waited
for by the one and awaited by the other. No server is needed."""

from __future__ import annotations

import asyncio
import inspect

import pytest

import jetstream_arrow as ja
from jetstream_arrow import _core, aio, client, consumers

TWINS = [
    (client.Client, aio.AsyncClient),
    (client.Publisher, aio.AsyncPublisher),
    (consumers.PullConsumer, aio.AsyncPullConsumer),
    (consumers.PushConsumer, aio.AsyncPushConsumer),
    (consumers.OrderedConsumer, aio.AsyncOrderedConsumer),
    (consumers.ConsumedBatch, aio.AsyncConsumedBatch),
]

# What only the sync client offers (docs/asyncio.md: through `sync_client`).
SYNC_ONLY = {"write_kv", "read_kv", "read_counters"}


def public_calls(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and (callable(member) or isinstance(member, property))
    }


def parameters(function: object) -> list[tuple[str, object, object, object]]:
    signature = inspect.signature(function)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default, p.annotation) for p in signature.parameters.values()]


@pytest.mark.parametrize(("sync", "twin"), TWINS, ids=lambda c: c.__name__)
def test_every_sync_call_has_its_asyncio_twin_with_the_same_parameters(
    sync: type, twin: type
) -> None:
    sync_calls = public_calls(sync)
    twin_calls = public_calls(twin)
    missing = sorted(set(sync_calls) - set(twin_calls) - SYNC_ONLY)
    assert not missing, f"{twin.__name__} lacks {missing}, which {sync.__name__} has"
    for name, call in sync_calls.items():
        if name in SYNC_ONLY or isinstance(call, property):
            continue
        assert parameters(twin_calls[name]) == parameters(call), (
            f"{twin.__name__}.{name} and {sync.__name__}.{name} differ in their parameters"
        )


def test_the_management_calls_are_coroutines_of_the_async_client() -> None:
    # The management calls run the sync call in a worker thread; the others await a
    # native call. Either way, a call of the sync client that waits is awaited here.
    waits_not = {"is_closed", "server_info", "ordered_consumer", "pull_consumer", "read"}
    for name, call in public_calls(aio.AsyncClient).items():
        if isinstance(call, property) or name in waits_not:
            continue
        assert inspect.iscoroutinefunction(call), f"AsyncClient.{name} is not a coroutine"


def test_a_native_call_runs_once_and_only_when_waited_for_or_awaited() -> None:
    # A connect to nowhere: nothing happens until the call is waited for, and a call
    # is started once, by wait() or by await, never twice.
    options = ja.ConnectOptions(servers="nats://127.0.0.1:1", connect_timeout=0.2)
    call = _core.Client.connect(options)
    with pytest.raises(ja.exceptions.ConnectionFailedError):
        call.wait()
    with pytest.raises(RuntimeError, match="already waited for or awaited"):
        call.wait()

    async def awaited() -> None:
        again = _core.Client.connect(options)
        with pytest.raises(ja.exceptions.ConnectionFailedError):
            await again
        with pytest.raises(RuntimeError, match="already waited for or awaited"):
            await again

    asyncio.run(awaited())
