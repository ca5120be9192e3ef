"""The leaf-node deployment, end to end, on real servers: a hub (JetStream domain
``hub``) and a leaf node (domain ``leaf``) whose accounts reach the hub's data account
only through what that account exports.

Topology (accounts on each side of one leafnode listener, mapped by credentials)::

    hub server, domain hub                      leaf server, domain leaf
    ACC     JetStream; ORDERS lives here
    EDGE    imports ACC's API as JS.acc@hub.API  <── remote edge:edge ──  EDGE (JetStream)
    WORKER  imports MSG.NEXT + ACK of ORDERS>dur <── remote worker:worker ─ WORKER

- A client of the leaf's EDGE with ``api_prefix="JS.acc@hub.API"`` manages, publishes
  to and reads ACC's stream in the hub.
- A client of the leaf's WORKER binds to ACC's durable ``ORDERS > dur`` knowing only
  ``CONSUMER.MSG.NEXT`` and the ack subjects of that one consumer, and acks.
- A stream of the leaf's own domain sources ACC's ORDERS through ``$JS.hub.API``, its
  deliveries arriving on an exported deliver prefix.
"""

from __future__ import annotations

import functools
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import as_dicts, read_all, rows
from jetstream_arrow._subjects import subject_matches
from jetstream_arrow.exceptions import JetStreamNotEnabledError, NotFoundError
from jetstream_arrow.management import ExternalStream, StreamSource
from natsserver import NatsServer, free_port, wait_until

pytestmark = pytest.mark.timeout(120)

# The hub's data account is "acc" in domain "hub": the name its API gets on import.
HUB_API = "JS.acc@hub.API"
# <static>.<exporting account>.<exporting domain>.<importing account>.<importing domain>
# .<importing stream>: unique per import, so two importers never share deliveries.
DELIVER_PREFIX = "deliver.acc.hub.edge.leaf.ORDERS_COPY"

LINK_TIMEOUT = 30.0
SOURCE_TIMEOUT = 30.0
ACK_TIMEOUT = 10.0

# "<leafnode port>" is replaced by the port the hub listens on for leaf nodes.
HUB_CONFIG = """
leafnodes {
    listen: "127.0.0.1:<leafnode port>"
}
accounts {
    ACC: {
        jetstream: enabled
        users: [{user: acc, password: acc}]
        exports: [
            # The whole JetStream API, to EDGE alone. A pull (MSG.NEXT) is answered by
            # many messages, hence a stream response.
            {service: "$JS.API.>", response_type: stream, accounts: [EDGE]}
            # Publishing into ORDERS: the stored message's PubAck is the reply.
            {service: "orders.>", accounts: [EDGE]}
            # What a sourcing stream's consumer needs besides being created: its
            # deliveries (on the importer's deliver prefix) and the answers to its
            # flow-control requests.
            {stream: "deliver.acc.hub.>", accounts: [EDGE]}
            {service: "$JS.FC.ORDERS.>", accounts: [EDGE]}
            # One durable pull consumer and nothing else: next messages and their acks.
            {
                service: "$JS.API.CONSUMER.MSG.NEXT.ORDERS.dur"
                response_type: stream
                accounts: [WORKER]
            }
            {service: "$JS.ACK.ORDERS.dur.>", accounts: [WORKER]}
        ]
    }
    EDGE: {
        users: [{user: edge, password: edge}]
        imports: [
            # Renamed, so a client tells the hub's account from its own JetStream.
            {service: {account: ACC, subject: "$JS.API.>"}, to: "JS.acc@hub.API.>"}
            {service: {account: ACC, subject: "orders.>"}}
            # A source whose external API is the domain's ($JS.hub.API) asks for its
            # consumer on $JS.hub.API.CONSUMER.CREATE.ORDERS. The hub maps $JS.hub.API
            # to $JS.API in the account of the leafnode connection, EDGE, so ACC's
            # consumer create is imported here under its own name.
            {service: {account: ACC, subject: "$JS.API.CONSUMER.CREATE.ORDERS"}}
            {service: {account: ACC, subject: "$JS.FC.ORDERS.>"}}
            {stream: {account: ACC, subject: "deliver.acc.hub.edge.>"}}
        ]
    }
    WORKER: {
        users: [{user: worker, password: worker}]
        imports: [
            {
                service: {account: ACC, subject: "$JS.API.CONSUMER.MSG.NEXT.ORDERS.dur"}
                to: "JS.acc@hub.API.CONSUMER.MSG.NEXT.ORDERS.dur"
            }
            {service: {account: ACC, subject: "$JS.ACK.ORDERS.dur.>"}}
        ]
    }
}
"""

LEAF_CONFIG = """
leafnodes {
    remotes: [
        # Each local account is bound to the hub account whose credentials it uses.
        {url: "nats-leaf://edge:edge@127.0.0.1:<leafnode port>", account: EDGE}
        {url: "nats-leaf://worker:worker@127.0.0.1:<leafnode port>", account: WORKER}
    ]
}
accounts {
    EDGE: {
        jetstream: enabled
        users: [{user: edge, password: edge}]
    }
    WORKER: {
        users: [{user: worker, password: worker}]
    }
}
"""


@dataclass
class LeafDeployment:
    hub: NatsServer
    leaf: NatsServer

    def acc(self) -> ja.Client:
        """ACC in the hub, directly: what the hub itself sees."""
        return ja.connect(self.hub.url, user="acc", password="acc")

    def edge(self) -> ja.Client:
        """EDGE on the leaf, reaching ACC's JetStream by its renamed API."""
        return ja.connect(self.leaf.url, user="edge", password="edge", api_prefix=HUB_API)

    def edge_local(self) -> ja.Client:
        """EDGE on the leaf, with the leaf's own JetStream (domain leaf)."""
        return ja.connect(self.leaf.url, user="edge", password="edge")

    def worker(self) -> ja.Client:
        """WORKER on the leaf: of ACC's API, only ORDERS > dur's next messages."""
        return ja.connect(self.leaf.url, user="worker", password="worker", api_prefix=HUB_API)


def hub_interest(leaf: NatsServer, account: str, subject: str) -> bool:
    """Whether the hub has told the leaf, on ``account``'s leafnode connection, that
    something there takes messages on ``subject``."""
    query = urllib.parse.urlencode({"subs": 1, "acc": account})
    links = leaf.monitor(f"leafz?{query}").get("leafs") or []
    return any(
        subject_matches(pattern, subject)
        for link in links
        for pattern in link.get("subscriptions_list") or []
    )


# Subjects the tests send from the leaf to the hub, by leaf account. The hub announces
# its interest in them over each leafnode connection a moment after the connection is
# up; a request sent before would find no responder.
ROUTED_TO_HUB = {
    "EDGE": [
        f"{HUB_API}.STREAM.INFO.ORDERS",
        "orders.0",
        "$JS.hub.API.CONSUMER.CREATE.ORDERS",
        "$JS.FC.ORDERS.x.y",
    ],
    "WORKER": [
        f"{HUB_API}.CONSUMER.MSG.NEXT.ORDERS.dur",
        "$JS.ACK.ORDERS.dur.1.1.1.1.0",
    ],
}


@pytest.fixture
def deployment(nats_server_factory: Callable[..., NatsServer]) -> LeafDeployment:
    """Both servers (stopped by the factory after the test), linked: the hub sees the
    leaf's two connections and the leaf every subject the tests route to the hub."""
    port = str(free_port())
    hub = nats_server_factory(HUB_CONFIG.replace("<leafnode port>", port), domain="hub")
    leaf = nats_server_factory(LEAF_CONFIG.replace("<leafnode port>", port), domain="leaf")
    wait_until(
        lambda: hub.monitor("leafz").get("leafnodes") == 2,
        LINK_TIMEOUT,
        "the leaf's two leafnode connections (EDGE and WORKER) at the hub",
    )
    for account, subjects in ROUTED_TO_HUB.items():
        for subject in subjects:
            wait_until(
                functools.partial(hub_interest, leaf, account, subject),
                LINK_TIMEOUT,
                f"the hub's interest in {subject!r} on the leaf's {account} connection",
            )
    return LeafDeployment(hub, leaf)


def test_leaf_client_manages_publishes_and_reads_the_hub_stream(
    deployment: LeafDeployment,
) -> None:
    with deployment.edge() as edge, deployment.acc() as acc:
        assert edge.api_prefix == HUB_API
        edge.create_stream("ORDERS", ["orders.>"], allow_direct=True)
        config = edge.stream_info("ORDERS").config
        edge.update_stream(config, description="managed from the leaf")
        assert acc.stream_info("ORDERS").config.description == "managed from the leaf"

        result = edge.publish(rows(500, "orders"))
        assert (result.stored, result.duplicates, result.failed) == (500, 0, 0)
        assert edge.stream_names() == ["ORDERS"]

        back = read_all(edge, "ORDERS", include_headers=True)
        assert back.column("seq").to_pylist() == list(range(1, 501))
        assert back.column("data").to_pylist() == [f"payload-{i}".encode() for i in range(500)]
        ids = [h["Nats-Msg-Id"][0] for h in as_dicts(back.column("headers").to_pylist())]
        assert ids == [f"id-{i}" for i in range(500)]
        filtered = read_all(edge, "ORDERS", subjects="orders.1")
        assert filtered.column("seq").to_pylist() == list(range(2, 501, 3))
        # Direct gets: the same messages without a consumer on the hub (the two ways of
        # reading may list a message's headers in different orders).
        direct = read_all(edge, "ORDERS", method="direct", include_headers=True)
        assert direct.drop_columns(["headers"]).equals(back.drop_columns(["headers"]))
        assert as_dicts(direct.column("headers").to_pylist()) == as_dicts(
            back.column("headers").to_pylist()
        )

        # The stream is ACC's, in the hub; the leaf's own JetStream has none.
        assert acc.stream_info("ORDERS").state.messages == 500
        with deployment.edge_local() as local:
            assert local.api_prefix == "$JS.API"
            assert local.stream_names() == []
            with pytest.raises(NotFoundError):
                local.stream_info("ORDERS")

        assert edge.delete_stream("ORDERS")
        assert acc.stream_names() == []


def test_minimal_worker_binds_fetches_and_acks_a_hub_durable(
    deployment: LeafDeployment,
) -> None:
    with deployment.edge() as edge:
        edge.create_stream("ORDERS", ["orders.>"])
        edge.create_consumer("ORDERS", durable_name="dur", ack_policy="explicit")
        assert edge.publish(rows(20, "orders", headers=False)).stored == 20

    with deployment.worker() as worker, deployment.acc() as acc:
        consumer = worker.pull_consumer("ORDERS", "dur")
        first = consumer.fetch(5, expires=2.0)
        assert first.data.column("seq").to_pylist() == [1, 2, 3, 4, 5]
        assert first.data.column("subject").to_pylist()[:3] == ["orders.0", "orders.1", "orders.2"]
        # A plain ack is not confirmed: it reaches the hub a moment later.
        first.ack()
        wait_until(
            lambda: (
                (info := acc.consumer_info("ORDERS", "dur")).ack_floor.stream_seq == 5
                and info.num_ack_pending == 0
            ),
            ACK_TIMEOUT,
            lambda: (
                "the hub's ORDERS > dur to record the leaf's acks of seq 1-5 (ack floor "
                f"{(info := acc.consumer_info('ORDERS', 'dur')).ack_floor.stream_seq}, "
                f"{info.num_ack_pending} pending)"
            ),
        )
        # A confirmed ack: the hub's answer comes back through the same imports.
        rest = consumer.fetch(15, expires=2.0)
        assert rest.data.column("seq").to_pylist() == list(range(6, 21))
        rest.ack_sync(timeout=5.0)
        info = acc.consumer_info("ORDERS", "dur")
        assert (info.ack_floor.stream_seq, info.num_ack_pending, info.num_pending) == (20, 0, 0)
        assert len(consumer.fetch(5, no_wait=True)) == 0

        # WORKER reaches nothing else of the API: no responder, at once.
        t0 = time.monotonic()
        with pytest.raises(JetStreamNotEnabledError):
            worker.stream_info("ORDERS")
        with pytest.raises(JetStreamNotEnabledError):
            worker.consumer_info("ORDERS", "dur")
        with pytest.raises(JetStreamNotEnabledError):
            worker.create_consumer("ORDERS", durable_name="mine")
        assert time.monotonic() - t0 < 3.0
        assert acc.consumer_names("ORDERS") == ["dur"]


def _messages(table: pa.Table) -> list[tuple[str, bytes, dict[str, list[str]]]]:
    """(subject, data, headers) per message, without the header the sourcing stream adds."""
    headers = as_dicts(table.column("headers").to_pylist())
    for h in headers:
        h.pop("Nats-Stream-Source", None)
    subjects = table.column("subject").to_pylist()
    return list(zip(subjects, table.column("data").to_pylist(), headers, strict=True))


def kib_rows(n: int, start: int) -> pa.Table:
    """``rows`` with 1 KiB payloads: enough of them fill the sourcing consumer's
    flow-control window, so the copy only completes when its answers reach the hub."""
    table = rows(n, "orders", start=start)
    data = [f"payload-{i}".encode().ljust(1024, b".") for i in range(start, start + n)]
    return table.set_column(table.schema.get_field_index("data"), "data", pa.array(data))


def test_leaf_stream_sources_the_hub_stream_across_domains(
    deployment: LeafDeployment,
) -> None:
    external = ExternalStream(api="$JS.hub.API", deliver=DELIVER_PREFIX)
    with deployment.acc() as acc, deployment.edge_local() as local:
        acc.create_stream("ORDERS", ["orders.>"])
        # Messages before the source exists (caught up) and after (followed): 4 MiB in
        # all, twice the window a flow-control consumer may have unanswered.
        assert acc.publish(kib_rows(3_000, 0)).stored == 3_000
        info = local.create_stream(
            "ORDERS_COPY", sources=[StreamSource("ORDERS", external=external)]
        )
        assert info.config.sources is not None
        assert info.config.sources[0].external == external
        assert acc.publish(kib_rows(1_000, 3_000)).stored == 1_000
        total = 4_000

        def copied() -> int:
            return local.stream_info("ORDERS_COPY").state.messages

        wait_until(
            lambda: copied() >= total,
            SOURCE_TIMEOUT,
            lambda: (
                f"the leaf's ORDERS_COPY to hold the hub's {total} messages (has {copied()}; "
                f"source {local.stream_info('ORDERS_COPY').raw.get('sources')})"
            ),
        )
        hub_messages = _messages(read_all(acc, "ORDERS", include_headers=True))
        copy = read_all(local, "ORDERS_COPY", include_headers=True)
        assert len(hub_messages) == total
        assert _messages(copy) == hub_messages
        assert copy.column("seq").to_pylist() == list(range(1, total + 1))
        # Each copy names its origin: ORDERS, qualified by a hash of its external API.
        origins = {
            h["Nats-Stream-Source"][0].split(" ")[0]
            for h in as_dicts(copy.column("headers").to_pylist())
        }
        assert len(origins) == 1 and origins.pop().startswith("ORDERS:")

        state = local.stream_info("ORDERS_COPY")
        assert state.state.messages == total
        (source,) = state.raw["sources"]
        assert source["name"] == "ORDERS"
        assert source["external"] == {"api": "$JS.hub.API", "deliver": DELIVER_PREFIX}
        assert source["lag"] == 0
        assert "error" not in source
