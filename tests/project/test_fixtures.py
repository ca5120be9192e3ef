"""The server fixtures work: checked with an independent client (nats-py)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import nats
import pytest
from nats.errors import NoServersError
from nats.js.errors import NoStreamResponseError, NotFoundError

from natsserver import HubLeaf, NatsCluster, NatsServer, free_port, js_api_answers, start_server

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def retry(action: Callable[[], Awaitable[T]], timeout: float = 10.0) -> T:
    """Retry while interest has not propagated yet (across a leafnode or a route)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await action()
        except (NoStreamResponseError, nats.errors.NoRespondersError, nats.errors.TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_single_server_stores_across_restart(nats_server: NatsServer) -> None:
    async def write() -> None:
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        await js.add_stream(name="KEEP", subjects=["keep.>"])
        for i in range(3):
            await js.publish("keep.x", f"m{i}".encode())
        await nc.close()

    async def read() -> tuple[int, bytes]:
        nc = await nats.connect(nats_server.url)
        jsm = nc.jsm()
        info = await jsm.stream_info("KEEP")
        msg = await jsm.get_msg("KEEP", 3)
        await nc.close()
        return info.state.messages, msg.data or b""

    run(write())
    assert nats_server.store_dir.is_dir()
    nats_server.restart()
    assert run(read()) == (3, b"m2")
    assert "Server is ready" in nats_server.log


def test_stop_ends_the_process(nats_server: NatsServer) -> None:
    process = nats_server.process
    assert process is not None
    assert port_open(nats_server.port)
    nats_server.stop()
    assert process.poll() is not None
    assert not nats_server.running
    assert not port_open(nats_server.port)
    nats_server.start()
    assert js_api_answers(nats_server.url)


def test_shared_server_answers(shared_nats_server: NatsServer) -> None:
    assert shared_nats_server.running
    assert js_api_answers(shared_nats_server.url)


def test_factory_with_accounts_and_users(nats_server_factory: Callable[..., NatsServer]) -> None:
    server = nats_server_factory(
        """
        accounts {
            APP: { jetstream: enabled, users: [{user: app, password: secret}] }
        }
        """
    )

    async def check() -> int:
        with pytest.raises((NoServersError, nats.errors.Error)):
            await nats.connect(server.url, allow_reconnect=False, max_reconnect_attempts=0)
        nc = await nats.connect(server.url, user="app", password="secret")
        js = nc.jetstream()
        await js.add_stream(name="AUTH", subjects=["auth.>"])
        ack = await js.publish("auth.a", b"x")
        await nc.close()
        return ack.seq

    assert run(check()) == 1


def test_factory_jetstream_extra_goes_inside_the_jetstream_block(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    server = nats_server_factory(jetstream_extra="sync_interval: always")
    block = server.config_path.read_text().split("jetstream {", 1)[1].split("}", 1)[0]
    assert "sync_interval: always" in block
    assert server.monitor("varz")["jetstream"]["config"]["sync_always"] is True


def test_small_payload_server(small_payload_nats_server: NatsServer) -> None:
    async def max_payload() -> int:
        nc = await nats.connect(small_payload_nats_server.url)
        value = nc.max_payload
        await nc.close()
        return value

    assert run(max_payload()) == 8192


def test_hub_leaf_domains(hub_leaf: HubLeaf) -> None:
    assert (hub_leaf.hub_domain, hub_leaf.leaf_domain) == ("hub", "leaf")

    async def check() -> dict[str, Any]:
        # One client on the leaf reaches both JetStreams by domain.
        nc = await nats.connect(hub_leaf.leaf_url)
        leaf_js = nc.jetstream(domain="leaf")
        hub_js = nc.jetstream(domain="hub")
        await leaf_js.add_stream(name="EDGE", subjects=["edge.>"])
        await hub_js.add_stream(name="CORE", subjects=["core.>"])
        edge_ack = await retry(lambda: leaf_js.publish("edge.a", b"at the edge"))
        core_ack = await retry(lambda: hub_js.publish("core.a", b"in the hub"))
        edge_msg = await leaf_js.get_msg("EDGE", 1)
        # Each domain is its own name space.
        with pytest.raises(NotFoundError):
            await hub_js.stream_info("EDGE")
        await nc.close()

        # And from the hub side, the leaf's JetStream by its domain.
        nc = await nats.connect(hub_leaf.hub_url)
        from_hub = await nc.jetstream(domain="leaf").stream_info("EDGE")
        core_local = await nc.jsm().stream_info("CORE")
        await nc.close()
        return {
            "acks": (edge_ack.stream, edge_ack.domain, core_ack.stream, core_ack.domain),
            "edge_data": edge_msg.data,
            "edge_msgs_seen_from_hub": from_hub.state.messages,
            "core_msgs": core_local.state.messages,
        }

    assert run(check()) == {
        "acks": ("EDGE", "leaf", "CORE", "hub"),
        "edge_data": b"at the edge",
        "edge_msgs_seen_from_hub": 1,
        "core_msgs": 1,
    }


@pytest.mark.cluster
def test_cluster_replicated_stream_survives_a_member(nats_cluster: NatsCluster) -> None:
    leader = nats_cluster.meta_leader()
    assert leader in {"n1", "n2", "n3"}

    async def create_and_publish() -> str:
        nc = await nats.connect(nats_cluster.urls)
        js = nc.jetstream()
        info = await js.add_stream(name="R3", subjects=["r3.>"], num_replicas=3)
        # A new R3 stream answers "no responders" until its leader is elected; the
        # msg ids keep a retry after a lost ack from storing a message twice.
        for i in range(5):
            await retry(
                lambda i=i: js.publish("r3.x", str(i).encode(), headers={"Nats-Msg-Id": f"m{i}"}),
                timeout=30,
            )
        info = await nc.jsm().stream_info("R3")
        await nc.close()
        assert info.cluster is not None
        assert len(info.cluster.replicas or []) == 2
        assert info.cluster.leader
        return info.cluster.leader

    stream_leader = run(create_and_publish())
    victim = next(s for s in nats_cluster.servers if s.name == stream_leader)
    victim.kill()
    survivors = [s.url for s in nats_cluster.servers if s.running]

    async def publish_after_failover() -> int:
        nc = await nats.connect(survivors)
        js = nc.jetstream()
        await retry(lambda: js.publish("r3.x", b"after"), timeout=30)
        info = await nc.jsm().stream_info("R3")
        await nc.close()
        return info.state.messages

    assert run(publish_after_failover()) == 6
    victim.start(wait=True)
    nats_cluster.wait_ready()


def test_free_ports_avoid_the_source_ports_of_outgoing_connections() -> None:
    port_range = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    low, high = (int(v) for v in port_range)
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50, "a port was handed out twice"
    assert all(not low <= port <= high for port in ports), (low, high, ports)


def test_a_server_whose_port_was_taken_starts_again_on_fresh_ports(
    tmp_path: Path,
) -> None:
    # Someone else listens on the monitoring port between choosing it and the server
    # binding it: the first start fails naming the taken address, the retry succeeds.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        made: list[NatsServer] = []

        def make() -> NatsServer:
            monitor_port = taken if not made else free_port()
            made.append(NatsServer(tmp_path / f"try{len(made)}", monitor_port=monitor_port))
            return made[-1]

        server = start_server(make)
        try:
            assert len(made) == 2
            assert "address already in use" in made[0].log
            assert server.monitor("varz")["port"] == server.port
        finally:
            server.stop()
