"""The option probes of the management calls: streams, messages and consumers: each option
changes what happens, or is refused naming it. tests/option_probes.py says what a probe
is and holds what the probes share; tests/project/test_every_option.py checks that every
option of every entry point has a probe."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pytest

from jetstream_arrow.exceptions import (
    ApiError,
)
from jetstream_arrow.management import ConsumerConfig, StreamConfig, StreamSource
from jetstream_arrow.positions import POSITION_SUBJECT_PREFIX
from option_probes import (
    Ctx,
    ProbeTable,
    ctx,
    pull,
)

__all__ = ["ctx"]  # a fixture, imported for pytest

probes = ProbeTable()


# == Python: management =======================================================================

#: StreamConfig field -> (value to create with, extra config, check of the info).
_STREAM_FIELDS: dict[str, tuple[Any, dict[str, Any], Callable[[Any, Any], bool] | None]] = {
    "subjects": (None, {}, None),  # the stream's subjects: see _stream_subjects
    "description": ("probe", {}, None),
    "storage": ("memory", {}, None),
    "retention": ("workqueue", {}, None),
    "max_consumers": (5, {}, None),
    "max_msgs": (5, {}, None),
    "max_bytes": (1000, {}, None),
    "max_age": (60.0, {}, None),
    "max_msg_size": (100, {}, None),
    "max_msgs_per_subject": (3, {}, None),
    "discard": ("new", {}, None),
    "discard_new_per_subject": (True, {"discard": "new", "max_msgs_per_subject": 3}, None),
    "duplicate_window": (30.0, {}, None),
    "allow_direct": (True, {}, None),
    "allow_atomic": (True, {}, None),
    "allow_batched": (True, {}, None),
    "allow_msg_ttl": (True, {}, None),
    "allow_msg_counter": (True, {}, None),
    "allow_msg_schedules": (True, {}, None),
    "subject_delete_marker_ttl": (60.0, {"allow_msg_ttl": True}, None),
    "allow_rollup": (True, {}, None),
    "deny_delete": (True, {}, None),
    "deny_purge": (True, {}, None),
    "no_ack": (True, {}, None),
    "compression": ("s2", {"storage": "file"}, None),
    "first_seq": (100, {}, lambda info, v: info.state.first_seq == v),
    "metadata": ({"probe": "yes"}, {}, lambda info, v: info.config.metadata.get("probe") == "yes"),
    "extra": ({"max_msgs": 7}, {}, lambda info, v: info.config.max_msgs == 7),
}


def _stream_field(option: str) -> Callable[[Ctx], None]:
    value, extra, check = _STREAM_FIELDS[option]

    def run(ctx: Ctx) -> None:
        config = {"storage": "file", **extra, option: value}
        name = ctx.stream(**config)
        info = ctx.client.stream_info(name)
        if check is not None:
            assert check(info, value), info
        else:
            assert getattr(info.config, option) == value, info.config
            default = ctx.client.stream_info(ctx.stream(**{**config, option: None}))
            assert getattr(default.config, option) != value

    return run


for _option in _STREAM_FIELDS:
    if _option != "subjects":
        probes.register("Client.create_stream", _option, "effect", _stream_field(_option))


@probes.effect(("Client.create_stream", "exactly_once"))
def _stream_exactly_once(ctx: Ctx) -> None:
    name = ctx.name()
    ctx.client.create_stream(name, [f"{name}.>"], storage="memory", exactly_once=True)
    ctx.made.append(name)
    cfg = ctx.client.stream_info(name).config
    assert cfg.subjects == [f"{name}.>", f"{POSITION_SUBJECT_PREFIX}{name}.>"]
    assert cfg.allow_rollup is True


@probes.effect(("Client.create_stream", "subjects"))
def _stream_subjects(ctx: Ctx) -> None:
    name = ctx.name()
    ctx.client.create_stream(name, subjects=[f"{name}.only"], storage="memory")
    ctx.made.append(name)
    assert ctx.client.stream_info(name).config.subjects == [f"{name}.only"]


probes.refused(
    "Client.create_stream",
    "replicas",
    lambda ctx: ctx.stream(replicas=3),
    error=ApiError,
)
probes.refused(
    "Client.create_stream", "sealed", lambda ctx: ctx.stream(sealed=True), error=ApiError
)


@probes.effect(("Client.create_stream", "mirror"), ("Client.create_stream", "mirror_direct"))
def _mirror(ctx: Ctx) -> None:
    # A mirror answers direct gets only of an origin that allows them.
    origin = ctx.stream(count=2, allow_direct=True)
    name = ctx.name()
    ctx.client.create_stream(
        StreamConfig(
            name,
            storage="memory",
            mirror=StreamSource(origin),
            mirror_direct=True,
            allow_direct=True,
        )
    )
    ctx.made.append(name)
    info = ctx.client.stream_info(name)
    assert info.config.mirror is not None and info.config.mirror.name == origin
    assert info.config.mirror_direct is True


@probes.effect(("Client.create_stream", "sources"))
def _sources(ctx: Ctx) -> None:
    origin = ctx.stream(count=2)
    name = ctx.stream(sources=[StreamSource(origin)])
    info = ctx.client.stream_info(name)
    assert [s.name for s in info.config.sources or []] == [origin]


@probes.effect(("Client.update_stream", "subjects"), ("Client.create_or_update_stream", "subjects"))
def _update_subjects(ctx: Ctx) -> None:
    name = ctx.stream()
    ctx.client.update_stream(name, subjects=[f"{name}.one"], storage="memory")
    assert ctx.client.stream_info(name).config.subjects == [f"{name}.one"]
    ctx.client.create_or_update_stream(name, subjects=[f"{name}.two"], storage="memory")
    assert ctx.client.stream_info(name).config.subjects == [f"{name}.two"]


@probes.effect(("Client.purge_stream", "subject"))
def _purge_subject(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert ctx.client.purge_stream(name, subject=f"{name}.a") == 2


@probes.effect(("Client.purge_stream", "up_to_seq"))
def _purge_up_to(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert ctx.client.purge_stream(name, up_to_seq=3) == 2


@probes.effect(("Client.purge_stream", "keep"))
def _purge_keep(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert ctx.client.purge_stream(name, keep=1) == 3


@probes.effect(("Client.get_message", "seq"))
def _get_seq(ctx: Ctx) -> None:
    name = ctx.stream(count=3)
    assert ctx.client.get_message(name, seq=2).data == b"m1"


@probes.effect(("Client.get_message", "last_by_subject"))
def _get_last(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert ctx.client.get_message(name, last_by_subject=f"{name}.a").seq == 3


@probes.effect(("Client.delete_message", "erase"))
def _delete_erase(ctx: Ctx) -> None:
    # Erasing overwrites the message's bytes in the store; a plain delete leaves them.
    name = ctx.stream(storage="file")
    marker = uuid.uuid4().hex.encode()
    # A third message keeps the block that holds the first two.
    data = [marker + b"0", marker + b"1", b"kept"]
    ctx.client.publish(pa.table({"subject": [f"{name}.a"] * 3, "data": data}))

    def stored() -> bytes:
        blocks = ctx.server.store_dir.rglob(f"{name}/msgs/*.blk")
        return b"".join(p.read_bytes() for p in blocks)

    assert marker + b"0" in stored() and marker + b"1" in stored()
    ctx.client.delete_message(name, 1)
    ctx.client.delete_message(name, 2, erase=True)
    content = stored()
    assert marker + b"0" in content and marker + b"1" not in content


# Its effect, outlasting a paused server, and its deadline: tests/faults/test_deadlines.py
# (test_a_patient_request_outlasts_a_pause, "stream_info-patient", ...).
for _listing, _call in {
    "Client.stream_info": lambda c, name: c.stream_info(name, resume_timeout=-1),
    "Client.list_streams": lambda c, name: c.list_streams(resume_timeout=-1),
    "Client.stream_names": lambda c, name: c.stream_names(resume_timeout=-1),
}.items():
    probes.refused(
        _listing, "resume_timeout", lambda ctx, call=_call: call(ctx.client, ctx.stream())
    )


@probes.effect(("Client.list_streams", "subject"), ("Client.stream_names", "subject"))
def _list_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    assert [s.config.name for s in ctx.client.list_streams(subject=f"{name}.x")] == [name]
    assert ctx.client.stream_names(subject=f"{name}.x") == [name]


#: ConsumerConfig field -> (value, extra config, check of the info or None).
_PUSH = {"deliver_subject": "probe.deliver"}
_CONSUMER_FIELDS: dict[str, tuple[Any, dict[str, Any], Callable[[Any, Any], bool] | None]] = {
    "durable_name": ("D1", {}, lambda info, v: info.name == v),
    "name": ("N1", {}, lambda info, v: info.name == v),
    "description": ("probe", {}, None),
    "deliver_policy": ("last", {}, None),
    "opt_start_seq": (3, {"deliver_policy": "by_start_sequence"}, None),
    "opt_start_time": (
        datetime(2030, 1, 2, tzinfo=timezone.utc),
        {"deliver_policy": "by_start_time"},
        None,
    ),
    "ack_policy": ("all", {}, None),
    "ack_wait": (7.0, {}, None),
    "max_deliver": (3, {}, None),
    "backoff": ([1.0, 2.0], {"max_deliver": 5}, None),
    "filter_subjects": (["{s}.a", "{s}.b"], {}, None),
    "replay_policy": ("original", {}, None),
    "rate_limit_bps": (1000, _PUSH, None),
    "sample_freq": ("50%", {}, None),
    "max_waiting": (7, {}, None),
    "max_ack_pending": (9, {}, None),
    "flow_control": (True, {**_PUSH, "idle_heartbeat": 2.0}, None),
    "headers_only": (True, {}, None),
    "max_batch": (7, {}, None),
    "max_expires": (5.0, {}, None),
    "max_bytes": (1000, {}, None),
    "deliver_subject": ("probe.deliver", {}, None),
    "deliver_group": ("workers", _PUSH, None),
    "idle_heartbeat": (2.0, _PUSH, None),
    "inactive_threshold": (10.0, {}, None),
    "num_replicas": (1, {}, None),
    "mem_storage": (True, {}, None),
    "metadata": ({"probe": "yes"}, {}, lambda info, v: info.config.metadata.get("probe") == "yes"),
    "pause_until": (
        datetime(2099, 1, 1, tzinfo=timezone.utc),
        {},
        lambda info, v: info.paused is True,
    ),
    "priority_groups": (
        ["G"],
        {"priority_policy": "overflow"},
        lambda info, v: info.config.priority_groups == ["G"],
    ),
    "priority_policy": (
        "pinned_client",
        {"priority_groups": ["G"]},
        lambda info, v: info.config.priority_policy == "pinned_client",
    ),
    "priority_timeout": (
        7.0,
        {"priority_groups": ["G"], "priority_policy": "pinned_client"},
        lambda info, v: info.config.priority_timeout == 7.0,
    ),
    "extra": ({"max_deliver": 4}, {}, lambda info, v: info.config.max_deliver == 4),
    "filter_subject": ("{s}.a", {}, lambda info, v: info.config.filter_subjects == [v]),
}


def _consumer_field(option: str) -> Callable[[Ctx], None]:
    value, extra, check = _CONSUMER_FIELDS[option]

    def run(ctx: Ctx) -> None:
        name = ctx.stream()
        v = value
        if isinstance(v, str):
            v = v.format(s=name)
        elif isinstance(v, list):
            v = [x.format(s=name) if isinstance(x, str) else x for x in v]
        config = {"durable_name": "C", **extra, option: v}
        if option == "name":
            config.pop("durable_name")
        info = ctx.client.create_consumer(name, **config)
        if check is not None:
            assert check(info, v), info
            return
        assert getattr(info.config, option) == v, info.config
        config.pop(option)
        config["durable_name"] = "C2"
        if option == "deliver_subject":
            other = ctx.client.create_consumer(name, **config)
        else:
            other = (
                ctx.client.create_consumer(name, **config)
                if not extra.get("deliver_policy")
                else None
            )
        if other is not None:
            assert getattr(other.config, option) != v, other.config

    return run


for _option in _CONSUMER_FIELDS:
    probes.register("Client.create_consumer", _option, "effect", _consumer_field(_option))


@probes.effect(("Client.create_consumer", "config"))
def _consumer_config(ctx: Ctx) -> None:
    name = ctx.stream()
    info = ctx.client.create_consumer(name, ConsumerConfig(durable_name="C", description="given"))
    assert info.config.description == "given"


@probes.effect(("Client.update_consumer", "config"), ("Client.create_or_update_consumer", "config"))
def _update_consumer(ctx: Ctx) -> None:
    name = ctx.stream()
    ctx.client.create_consumer(name, durable_name="C")
    info = ctx.client.update_consumer(name, ConsumerConfig(durable_name="C", description="one"))
    assert info.config.description == "one"
    info = ctx.client.create_or_update_consumer(
        name, ConsumerConfig(durable_name="C", description="two")
    )
    assert info.config.description == "two"


@probes.effect(("Client.reset_consumer", "seq"))
def _reset_seq(ctx: Ctx) -> None:
    name, consumer = pull(ctx, count=4)
    assert ctx.client.reset_consumer(name, consumer, seq=3) == 3
    assert ctx.client.pull_consumer(name, consumer).fetch(1).data.column("seq")[0].as_py() == 3


@pytest.mark.parametrize("probe_key", probes.params())
def test_option(
    probe_key: str, ctx: Ctx, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    probes.run(probe_key, ctx, capsys, request)
