"""Stream and consumer management against real servers.

Test data is published with nats-py, an independent client, so these tests depend on
nothing but the management API of jetstream_arrow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import nats
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import ApiError, BadInputError, NotFoundError
from jetstream_arrow.management import (
    ConsumerConfig,
    ExternalStream,
    StreamConfig,
    StreamSource,
    parse_headers,
)
from natsserver import HubLeaf, NatsCluster, NatsServer, wait_until


def publish(url: str, messages: list[tuple[str, bytes, dict[str, str] | None]]) -> list[int]:
    """Publish through JetStream with nats-py; the stream sequences."""

    async def go() -> list[int]:
        nc = await nats.connect(url)
        js = nc.jetstream()
        seqs = [(await js.publish(s, d, headers=h)).seq for s, d, h in messages]
        await nc.close()
        return seqs

    return asyncio.run(go())


# -- streams ----------------------------------------------------------------------------


def test_create_stream_round_trips_every_option(
    client: ja.Client, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("CFG")
    config = StreamConfig(
        name=name,
        subjects=[f"{name}.a", f"{name}.b.>"],
        description="orders",
        storage="memory",
        retention="limits",
        replicas=1,
        max_msgs=1000,
        max_bytes=1 << 20,
        max_age=3600.0,
        max_msg_size=4096,
        max_msgs_per_subject=10,
        discard="new",
        duplicate_window=30.0,
        allow_direct=True,
        allow_atomic=True,
        allow_msg_ttl=True,
        allow_rollup=True,
        deny_delete=True,
        deny_purge=False,
        metadata={"team": "data"},
    )
    info = client.create_stream(config)
    got = info.config
    for option in [
        "name",
        "subjects",
        "description",
        "storage",
        "retention",
        "replicas",
        "max_msgs",
        "max_bytes",
        "max_age",
        "max_msg_size",
        "max_msgs_per_subject",
        "discard",
        "duplicate_window",
        "allow_direct",
        "allow_atomic",
        "allow_msg_ttl",
        "allow_rollup",
        "deny_delete",
        "deny_purge",
    ]:
        assert getattr(got, option) == getattr(config, option), option
    assert got.metadata is not None and got.metadata["team"] == "data"
    assert info.state.messages == 0
    assert info.state.first_ts is None
    assert info.created is not None and info.created.tzinfo is not None
    assert abs(info.created - datetime.now(timezone.utc)) < timedelta(minutes=5)
    client.delete_stream(name)


def test_create_is_idempotent_and_a_different_config_conflicts(
    client: ja.Client, stream: str
) -> None:
    again = client.create_stream(stream, [f"{stream}.>"])
    assert again.config.name == stream

    with pytest.raises(ApiError) as err:
        client.create_stream(stream, [f"{stream}.>"], max_msgs=5)
    assert err.value.err_code == 10058

    updated = client.create_or_update_stream(stream, [f"{stream}.>"], max_msgs=5)
    assert updated.config.max_msgs == 5


def test_update_stream_from_its_info(client: ja.Client, stream: str) -> None:
    config = client.stream_info(stream).config
    info = client.update_stream(config, max_age=timedelta(minutes=2), description="changed")
    assert info.config.max_age == 120.0
    assert info.config.description == "changed"
    assert info.config.subjects == [f"{stream}.>"]


def test_missing_stream_is_not_found(client: ja.Client) -> None:
    with pytest.raises(NotFoundError) as err:
        client.stream_info("NO_SUCH_STREAM")
    assert err.value.err_code == 10059
    assert isinstance(err.value, LookupError)
    with pytest.raises(NotFoundError):
        client.delete_stream("NO_SUCH_STREAM")


@pytest.mark.parametrize("bad", ["has space", "dot.ted", "star*", "gt>", "", "sl/ash"])
def test_invalid_names_name_the_option(client: ja.Client, bad: str) -> None:
    with pytest.raises(BadInputError, match="'name'"):
        client.create_stream(bad, ["x"])
    with pytest.raises(BadInputError, match="'stream'"):
        client.stream_info(bad)
    with pytest.raises(BadInputError, match="'durable_name'"):
        ConsumerConfig(durable_name=bad)


def test_unknown_option_is_named(client: ja.Client) -> None:
    with pytest.raises(BadInputError, match="'max_mesages'"):
        client.create_stream("TYPO", ["typo"], max_mesages=5)


@pytest.mark.slow
def test_listings_page_through_every_stream(nats_server: NatsServer) -> None:
    # The server pages STREAM.LIST at 256 entries: make it need two pages. (A page's
    # `missing` names, a cluster's, count in its offsets; see `_paged`.)
    with ja.connect(nats_server.url) as client:
        names = {f"P{i:03d}" for i in range(260)}
        for name in names:
            client.create_stream(name, [f"p.{name}"], storage="memory")
        assert set(client.stream_names()) == names
        infos = client.list_streams()
        assert {i.config.name for i in infos} == names
        assert client.stream_names(subject="p.P007") == ["P007"]
        assert [i.config.name for i in client.list_streams(subject="p.P008")] == ["P008"]
        # CONSUMER.LIST pages at 256 too: each consumer once.
        consumers = sorted(f"c{i:03d}" for i in range(260))
        for consumer in consumers:
            client.create_consumer("P000", durable_name=consumer)
        assert sorted(c.name for c in client.list_consumers("P000")) == consumers
        assert sorted(client.consumer_names("P000")) == consumers


def test_purge_by_subject_sequence_and_keep(
    client: ja.Client, stream: str, shared_nats_server: NatsServer
) -> None:
    publish(shared_nats_server.url, [(f"{stream}.{i % 2}", b"x", None) for i in range(10)])
    assert client.purge_stream(stream, subject=f"{stream}.0") == 5
    assert client.purge_stream(stream, up_to_seq=6) == 2  # seqs 2 and 4 (odd ones are gone)
    assert client.purge_stream(stream, keep=1) == 2
    state = client.stream_info(stream).state
    assert (state.messages, state.last_seq) == (1, 10)
    assert client.purge_stream(stream) == 1
    with pytest.raises(BadInputError):
        client.purge_stream(stream, up_to_seq=3, keep=1)


def test_get_and_delete_messages(
    client: ja.Client, stream: str, shared_nats_server: NatsServer
) -> None:
    publish(
        shared_nats_server.url,
        [
            (f"{stream}.a", b"first", {"Nats-Msg-Id": "m1", "Color": "red"}),
            (f"{stream}.b", b"", None),
            (f"{stream}.a", b"\x00\xffbinary", None),
        ],
    )
    first = client.get_message(stream, seq=1)
    assert (first.subject, first.seq, first.data) == (f"{stream}.a", 1, b"first")
    assert first.headers == {"Nats-Msg-Id": ["m1"], "Color": ["red"]}
    assert first.time is not None and first.time.tzinfo == timezone.utc

    empty = client.get_message(stream, seq=2)
    assert (empty.data, empty.headers) == (b"", {})

    last = client.get_message(stream, last_by_subject=f"{stream}.a")
    assert (last.seq, last.data) == (3, b"\x00\xffbinary")

    assert client.delete_message(stream, 1)
    assert client.delete_message(stream, 2, erase=True)
    with pytest.raises(NotFoundError):
        client.get_message(stream, seq=1)
    assert client.stream_info(stream).state.messages == 1
    with pytest.raises(BadInputError):
        client.get_message(stream)


def test_mirror_and_sources_configs(
    client: ja.Client,
    stream: str,
    shared_nats_server: NatsServer,
    unique_name: Callable[[str], str],
) -> None:
    publish(shared_nats_server.url, [(f"{stream}.{i}", b"x", None) for i in range(4)])
    mirror, sourced = unique_name("MIRROR"), unique_name("SRC")
    start = datetime(2020, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
    client.create_stream(mirror, mirror=StreamSource(stream, opt_start_seq=2))
    info = client.create_stream(
        sourced,
        sources=[StreamSource(stream, filter_subject=f"{stream}.3", opt_start_time=start)],
    )
    source = (info.config.sources or [])[0]
    assert (source.name, source.filter_subject, source.opt_start_time) == (
        stream,
        f"{stream}.3",
        start,
    )
    wait_until(
        lambda: client.stream_info(mirror).state.messages == 3, 15.0, "the mirror to catch up"
    )
    wait_until(
        lambda: client.stream_info(sourced).state.messages == 1, 15.0, "the source to catch up"
    )
    mirror_info = client.stream_info(mirror)
    assert mirror_info.config.mirror is not None
    assert mirror_info.config.mirror.opt_start_seq == 2
    assert "mirror" in mirror_info.raw
    client.delete_stream(mirror)
    client.delete_stream(sourced)


# -- consumers ---------------------------------------------------------------------------


def test_durable_pull_consumer_lifecycle(
    client: ja.Client, stream: str, shared_nats_server: NatsServer
) -> None:
    publish(shared_nats_server.url, [(f"{stream}.a", b"1", None), (f"{stream}.b", b"2", None)])
    info = client.create_consumer(
        stream,
        durable_name="WORKER",
        filter_subject=f"{stream}.a",
        ack_policy="explicit",
        ack_wait=12.5,
        max_deliver=3,
        max_ack_pending=50,
        deliver_policy="all",
        description="first",
        metadata={"owner": "tests"},
    )
    assert (info.stream_name, info.name) == (stream, "WORKER")
    cfg = info.config
    assert cfg.filter_subjects == [f"{stream}.a"]
    assert (cfg.ack_policy, cfg.ack_wait, cfg.max_deliver, cfg.max_ack_pending) == (
        "explicit",
        12.5,
        3,
        50,
    )
    assert cfg.metadata is not None and cfg.metadata["owner"] == "tests"
    assert not cfg.is_push
    assert info.num_pending == 1
    assert info.delivered.stream_seq == 0

    # Same config again: fine. Another config through create: refused.
    client.create_consumer(stream, cfg)
    with pytest.raises(ApiError):
        client.create_consumer(stream, cfg, max_deliver=4)

    updated = client.update_consumer(stream, cfg, description="second", max_deliver=4)
    assert (updated.config.description, updated.config.max_deliver) == ("second", 4)
    assert client.consumer_info(stream, "WORKER").config.description == "second"

    assert client.consumer_names(stream) == ["WORKER"]
    assert [c.name for c in client.list_consumers(stream)] == ["WORKER"]
    assert client.delete_consumer(stream, "WORKER")
    with pytest.raises(NotFoundError):
        client.consumer_info(stream, "WORKER")


def test_ephemeral_push_and_multi_filter_consumers(client: ja.Client, stream: str) -> None:
    ephemeral = client.create_consumer(stream, ack_policy="none", inactive_threshold=30)
    assert ephemeral.name
    assert ephemeral.config.inactive_threshold == 30.0

    push = client.create_consumer(
        stream,
        ConsumerConfig(
            durable_name="PUSH",
            deliver_subject=f"deliver.{stream}",
            deliver_group="grp",
            ack_policy="explicit",
            idle_heartbeat=2.0,
            flow_control=True,
            filter_subjects=[f"{stream}.a", f"{stream}.b.>"],
            deliver_policy="by_start_sequence",
            opt_start_seq=1,
            backoff=[0.5, 1.0],
            max_deliver=5,
        ),
    )
    cfg = push.config
    assert cfg.is_push and cfg.deliver_subject == f"deliver.{stream}"
    assert cfg.filter_subjects == [f"{stream}.a", f"{stream}.b.>"]
    assert (cfg.idle_heartbeat, cfg.flow_control, cfg.backoff) == (2.0, True, [0.5, 1.0])
    assert (cfg.deliver_policy, cfg.opt_start_seq) == ("by_start_sequence", 1)
    assert sorted(client.consumer_names(stream)) == sorted([ephemeral.name, "PUSH"])


def test_ack_flow_control_consumer(client: ja.Client, stream: str) -> None:
    info = client.create_consumer(
        stream,
        durable_name="AFC",
        ack_policy="flow_control",
        deliver_subject=f"afc.{stream}",
        max_ack_pending=100,
    )
    cfg = info.config
    assert (cfg.ack_policy, cfg.flow_control, cfg.idle_heartbeat) == ("flow_control", True, 1.0)
    assert cfg.max_ack_pending == 100


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "deliver_subject"),
        ({"deliver_subject": "d", "flow_control": False}, "flow_control"),
        ({"deliver_subject": "d", "idle_heartbeat": 5}, "idle_heartbeat"),
        ({"deliver_subject": "d", "max_ack_pending": 0}, "max_ack_pending"),
        ({"deliver_subject": "d", "ack_wait": 30}, "ack_wait"),
        ({"deliver_subject": "d", "max_deliver": 3}, "max_deliver"),
    ],
)
def test_ack_flow_control_rules(options: dict[str, object], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        ConsumerConfig(durable_name="X", ack_policy="flow_control", **options)  # type: ignore[arg-type]


def test_consumer_on_missing_stream(client: ja.Client) -> None:
    with pytest.raises(NotFoundError):
        client.create_consumer("NO_SUCH_STREAM", durable_name="C")


# -- conversions (no server) -------------------------------------------------------------


def test_wire_format() -> None:
    config = StreamConfig(
        name="S",
        max_age=timedelta(hours=1),
        replicas=3,
        allow_rollup=True,
        extra={"compression": "s2", "placement": {"tags": ["ssd"]}},
    )
    assert config.to_api() == {
        "name": "S",
        "num_replicas": 3,
        "max_age": 3_600_000_000_000,
        "allow_rollup_hdrs": True,
        "compression": "s2",
        "placement": {"tags": ["ssd"]},
    }
    consumer = ConsumerConfig(
        name="C",
        filter_subjects=["a"],
        opt_start_time=datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=timezone.utc),
        deliver_policy="by_start_time",
    )
    assert consumer.to_api() == {
        "name": "C",
        "filter_subject": "a",
        "deliver_policy": "by_start_time",
        "opt_start_time": "2024-05-06T07:08:09.000010Z",
    }
    back = ConsumerConfig.from_api(
        {
            "name": "C",
            "filter_subject": "a",
            "opt_start_time": "2024-05-06T09:08:09.000010789+02:00",
        }
    )
    assert back.filter_subjects == ["a"]
    assert back.opt_start_time == datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=timezone.utc)
    external = StreamSource("ORIGIN", external=ExternalStream.for_domain("hub"))
    assert external.to_api() == {"name": "ORIGIN", "external": {"api": "$JS.hub.API"}}


def test_parse_headers() -> None:
    block = b"NATS/1.0\r\nA: 1\r\nB:two\r\nA: 3\r\n\r\n"
    assert parse_headers(block) == {"A": ["1", "3"], "B": ["two"]}


def test_naive_datetime_is_refused() -> None:
    with pytest.raises(BadInputError, match="opt_start_time"):
        StreamSource("S", opt_start_time=datetime(2024, 1, 1)).to_api()


# -- domains and clusters ----------------------------------------------------------------


def test_mirror_from_another_domain(hub_leaf: HubLeaf) -> None:
    """A stream in the hub mirrors one in the leaf through the leaf's API prefix."""
    with ja.connect(hub_leaf.leaf_url) as leaf, ja.connect(hub_leaf.hub_url) as hub:
        leaf.create_stream("EDGE", ["edge.>"])
        info = hub.create_stream(
            "EDGE_COPY", mirror=StreamSource("EDGE", external=ExternalStream.for_domain("leaf"))
        )
        assert info.config.mirror is not None
        assert info.config.mirror.external == ExternalStream(api="$JS.leaf.API")
        publish(hub_leaf.leaf_url, [("edge.a", b"from the edge", None)])
        wait_until(lambda: hub.stream_info("EDGE_COPY").state.messages == 1, 15.0, "the mirror")
        assert hub.get_message("EDGE_COPY", seq=1).data == b"from the edge"

    # And managing the hub's JetStream from a connection to the leaf, by domain.
    with ja.connect(hub_leaf.leaf_url, domain="hub") as hub_via_leaf:
        assert "EDGE_COPY" in hub_via_leaf.stream_names()
        assert "EDGE" not in hub_via_leaf.stream_names()


@pytest.mark.cluster
def test_replicated_stream_reports_its_cluster(nats_cluster: NatsCluster) -> None:
    with ja.connect(nats_cluster.url) as client:
        info = client.create_stream("R3", ["r3.>"], replicas=3)
        assert info.config.replicas == 3
        info = client.stream_info("R3")
        assert info.cluster is not None
        assert info.cluster.leader in {"n1", "n2", "n3"}
        assert len(info.cluster.replicas) == 2
        consumer = client.create_consumer("R3", durable_name="C3")
        assert consumer.cluster is not None and consumer.cluster.leader


@pytest.mark.cluster
@pytest.mark.fault
@pytest.mark.timeout(180)
def test_a_stream_whose_leader_does_not_answer_is_not_listed_as_gone(
    nats_cluster: NatsCluster,
) -> None:
    """A stream listing in a cluster leaves out, as ``missing``, the streams whose
    leaders did not answer in time: ``list_streams`` asks for each of them on its own
    and raises when it still gets no answer, instead of a listing without the stream
    (which made a streaming read over ``streamPattern`` take it for deleted)."""
    import os
    import signal

    meta = nats_cluster.meta_leader()
    with ja.connect(nats_cluster.url) as client:
        # R1 streams until one has a leader other than the meta leader (which answers
        # the listing itself).
        chosen = None
        for i in range(12):
            info = client.create_stream(f"ML{i}", [f"ml{i}.>"], replicas=1)
            if info.cluster is not None and info.cluster.leader not in (None, meta):
                chosen = (f"ML{i}", info.cluster.leader)
                break
        assert chosen is not None, "every stream was placed on the meta leader"
    name, leader = chosen
    paused = next(s for s in nats_cluster.servers if s.name == leader)
    other = next(s for s in nats_cluster.servers if s.name not in (leader,))
    assert paused.process is not None
    os.kill(paused.process.pid, signal.SIGSTOP)
    try:
        with ja.connect(other.url, request_timeout=5.0) as client:
            try:
                listed = {info.config.name for info in client.list_streams()}
            except ja.exceptions.JetStreamArrowError:
                pass  # no answer for it: said, not hidden
            else:
                assert name in listed, f"{name} (leader {leader}, paused) left out: {listed}"
    finally:
        os.kill(paused.process.pid, signal.SIGCONT)
    with ja.connect(nats_cluster.url) as client:
        wait_until(
            lambda: name in {i.config.name for i in client.list_streams()},
            30.0,
            f"{name} listed again after its leader resumed",
        )
