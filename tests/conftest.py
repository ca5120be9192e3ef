"""Fixtures that start real nats-server processes (see tests/natsserver.py).

- ``nats_server``: a fresh single server with JetStream, for one test.
- ``shared_nats_server``: one server for the whole session; tests must use their own
  stream names (``unique_name``) and clean up nothing they did not create.
- ``nats_server_factory``: start servers with extra config (authorization, accounts,
  max_payload, ...) for one test.
- ``small_payload_nats_server``: a server whose max_payload is 8 KiB.
- ``hub_leaf``: a hub (JetStream domain ``hub``) and a leaf node (domain ``leaf``).
- ``nats_cluster``: three routed servers with a JetStream meta leader elected.

When a test fails, the tails of the logs of the servers it used are added to its
report. Servers are stopped by their fixtures, and whatever is still running when the
interpreter exits is killed.
"""

from __future__ import annotations

import atexit
import itertools
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import NotFoundError
from natsserver import (
    RUNNING,
    HubLeaf,
    NatsCluster,
    NatsServer,
    kill_all,
    make_cluster,
    make_hub_leaf,
    start_server,
)

atexit.register(kill_all)

_server_numbers = itertools.count(1)


def _use(request: pytest.FixtureRequest, *servers: NatsServer) -> None:
    """Remember which servers a test used, so a failure report can show their logs."""
    used: list[NatsServer] = request.node.__dict__.setdefault("_nats_servers", [])
    used.extend(s for s in servers if s not in used)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    if report.failed:
        for server in item.__dict__.get("_nats_servers", []):
            report.sections.append(
                (f"nats-server {server.name} log ({server.workdir})", server.log_tail())
            )
    return report


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests first. The test command runs tests in parallel workers
    (pytest-xdist), which take tests in this order: the longest then start at once
    rather than last, when the other workers have run out of work."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


#: Tests that start Spark processes of their own, a few JVMs each, and kill them, by
#: the start of their node id: each group runs on one worker, one test after another,
#: so at most two such tests load the two cores at once. The executor-loss module
#: also shares one local cluster (a module-scoped fixture) among its tests.
WORKER_GROUPS = {
    "tests/spark/test_spark_executor_loss.py::": "spark-cluster",
    "tests/spark/test_spark_faults.py::test_streaming_drivers_killed": "spark-drivers",
    "tests/spark/test_spark_work_queue.py::test_a_driver_killed": "spark-drivers",
    # The option probes of `jetstream-arrow demo` share one demo run (a Spark job in a
    # JVM of its own), kept by the module's context: one worker runs them all.
    "tests/cli/test_every_option_cli.py::test_option[jetstream-arrow demo ::": "demo",
    # One Spark Connect server (a module fixture) per worker that runs its tests: all
    # on one. The test of remote("local[2]") in its own interpreter goes anywhere.
    **{
        f"tests/spark/test_spark_connect.py::test_{name}": "spark-connect"
        for name in (
            "batch_read",
            "batch_write",
            "a_streaming_copy",
            "map_in_arrow",
            "register",
            "an_error",
        )
    },
}


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown in a run without the plugin
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Tests go to whichever worker is free, but for ``WORKER_GROUPS``. (xdist's own
    ``--dist loadgroup`` marks groups by a suffix of the node id, which this pytest
    does not keep, so it hands a group's tests to several workers.) Each worker has
    its own session-scoped server and Spark session."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            for start, group in WORKER_GROUPS.items():
                if nodeid.startswith(start):
                    return group
            return nodeid

    return GroupScheduling(config, log)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if RUNNING:
        kill_all()


# -- single servers -------------------------------------------------------------------


@pytest.fixture
def nats_server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[NatsServer]:
    """A fresh nats-server with JetStream for this test.

    Yields a NatsServer: ``.url``, ``.port``, ``.store_dir``, ``.log``, ``.monitor()``,
    ``stop()``, ``start()``, ``restart()`` (same ports and store), ``kill()``.
    """
    workdir = tmp_path_factory.mktemp("nats")
    server = start_server(lambda: NatsServer(workdir, name=f"n{next(_server_numbers)}"))
    _use(request, server)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def _shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    workdir = tmp_path_factory.mktemp("nats-shared")
    server = start_server(lambda: NatsServer(workdir, name="shared"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def shared_nats_server(_shared_server: NatsServer, request: pytest.FixtureRequest) -> NatsServer:
    """One server for the whole session (fast). Do not stop or restart it; use
    ``unique_name`` for streams so tests do not see each other's data."""
    if not _shared_server.running:
        # A test broke the rule; give the next one a working server all the same.
        _shared_server.start()
    _use(request, _shared_server)
    return _shared_server


@pytest.fixture
def nats_server_factory(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Callable[..., NatsServer]]:
    """``make(config_extra="", *, jetstream=True, domain=None, max_payload=None,
    jetstream_extra="", tmpfs=False)``
    starts a server with ``config_extra`` appended to its config, e.g.::

        server = nats_server_factory('''
            accounts {
                A: { jetstream: enabled, users: [{user: a, password: a}] }
            }
        ''')

    Note that with an ``accounts`` block, JetStream must be enabled per account.
    ``tmpfs=True`` puts the server's directory (so its store) on ``/dev/shm``, for a
    store with ``sync_interval: always`` that must take many writes: each write is
    still made before its ack, so a ``kill -9`` keeps it, but the sync costs nothing
    (where there is no ``/dev/shm`` the store is on disk: slower, the same test).
    Every server made is stopped after the test.
    """
    made: list[NatsServer] = []
    in_memory: list[Path] = []

    def make(
        config_extra: str = "",
        *,
        jetstream: bool = True,
        domain: str | None = None,
        max_payload: int | None = None,
        jetstream_extra: str = "",
        tmpfs: bool = False,
    ) -> NatsServer:
        extra = config_extra
        if max_payload is not None:
            extra = f"max_payload: {int(max_payload)}\n{extra}"
        if tmpfs and TMPFS.is_dir():
            workdir = Path(tempfile.mkdtemp(prefix="nats-", dir=TMPFS))
            in_memory.append(workdir)
        else:
            workdir = tmp_path_factory.mktemp("nats")
        server = start_server(
            lambda: NatsServer(
                workdir,
                name=f"n{next(_server_numbers)}",
                jetstream=jetstream,
                domain=domain,
                config_extra=extra,
                jetstream_extra=jetstream_extra,
            )
        )
        made.append(server)
        _use(request, server)
        return server

    try:
        yield make
    finally:
        for server in made:
            server.stop()
        for workdir in in_memory:
            shutil.rmtree(workdir, ignore_errors=True)


#: A memory-backed file system, for stores that sync every write.
TMPFS = Path("/dev/shm")

SMALL_MAX_PAYLOAD = 8192


@pytest.fixture
def small_payload_nats_server(nats_server_factory: Callable[..., NatsServer]) -> NatsServer:
    """A JetStream server whose max_payload is ``SMALL_MAX_PAYLOAD`` (8 KiB)."""
    return nats_server_factory(max_payload=SMALL_MAX_PAYLOAD)


# -- topologies ---------------------------------------------------------------------


@pytest.fixture
def hub_leaf(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[HubLeaf]:
    """A hub server with JetStream domain ``hub`` and a leaf node server with domain
    ``leaf`` connected to it. Yields a HubLeaf: ``.hub_url``, ``.leaf_url``,
    ``.hub_domain``, ``.leaf_domain``, and the servers ``.hub`` / ``.leaf``.

    Both servers are in the global account, so the API of the other side is reached
    by its domain: a client on the leaf uses domain ``hub`` (``$JS.hub.API``).
    """
    pair = make_hub_leaf(tmp_path_factory.mktemp("hubleaf"))
    _use(request, pair.hub, pair.leaf)
    try:
        yield pair
    finally:
        pair.stop()


@pytest.fixture
def nats_cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[NatsCluster]:
    """Three routed servers (n1..n3) with JetStream; returns once all agree on a meta
    leader. Yields a NatsCluster: ``.url`` (all URLs, comma-separated), ``.urls``,
    ``.servers``, ``.meta_leader()``, ``.wait_ready()``, ``.stop()``.
    Mark tests that use it ``@pytest.mark.cluster``."""
    cluster = make_cluster(tmp_path_factory.mktemp("cluster"))
    _use(request, *cluster.servers)
    try:
        yield cluster
    finally:
        cluster.stop()


# -- helpers --------------------------------------------------------------------------


@pytest.fixture
def unique_name() -> Callable[[str], str]:
    """``unique_name("ORDERS")`` -> ``"ORDERS_3f9a..."``: a stream or consumer name no
    other test uses, for the shared server."""

    def make(prefix: str = "S") -> str:
        return f"{prefix}_{uuid.uuid4().hex[:12]}"

    return make


@pytest.fixture
def client(shared_nats_server: NatsServer) -> Iterator[ja.Client]:
    """A client of the shared server, closed after the test."""
    with ja.connect(shared_nats_server.url) as c:
        yield c


@pytest.fixture
def new_stream(
    client: ja.Client, unique_name: Callable[[str], str]
) -> Iterator[Callable[..., str]]:
    """``new_stream("FAST", allow_batched=True)``: a fresh stream on subjects
    ``<name>.>`` of the shared server, with the configuration given, deleted after
    the test. The one way tests make their streams on the shared server."""
    made: list[str] = []

    def make(prefix: str = "S", **config: Any) -> str:
        name = unique_name(re.sub(r"[^A-Za-z0-9_-]", "_", prefix)[:40])
        client.create_stream(name, [f"{name}.>"], **config)
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            client.delete_stream(name)
        except NotFoundError:
            pass


@pytest.fixture
def stream(new_stream: Callable[..., str], request: pytest.FixtureRequest) -> str:
    """A fresh stream on subjects ``<name>.>`` of the shared server, deleted afterwards.
    Its name starts with the test's name, so a server log points at the test."""
    return new_stream(request.node.name)
