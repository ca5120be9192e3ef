"""JetStream domains and API prefixes over a hub + leaf pair: a client on the leaf
manages, publishes to and reads a stream that lives in the hub."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import as_dicts, read_all, rows
from jetstream_arrow.exceptions import JetStreamNotEnabledError, NotFoundError
from natsserver import HubLeaf

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize(
    "how", [{"domain": "hub"}, {"api_prefix": "$JS.hub.API"}], ids=["domain", "api_prefix"]
)
def test_leaf_client_uses_the_hub_stream(hub_leaf: HubLeaf, how: dict[str, str]) -> None:
    with ja.connect(hub_leaf.leaf_url, **how) as leaf:
        assert leaf.api_prefix == "$JS.hub.API"
        leaf.create_stream("ORDERS", ["orders.>"])
        # Interest in the new stream's subjects crosses the leafnode link a moment
        # after it is created: the engine's 503 retries cover that.
        table = rows(1_000, "orders")
        result = leaf.publish(table)
        assert (result.stored, result.duplicates, result.failed) == (1_000, 0, 0)
        back = read_all(leaf, "ORDERS", include_headers=True, subjects="orders.1")
        assert back.column("seq").to_pylist() == list(range(2, 1_001, 3))
        ids = [h["Nats-Msg-Id"][0] for h in as_dicts(back.column("headers").to_pylist())]
        assert ids == [f"id-{i}" for i in range(1, 1_000, 3)]

        consumer_info = leaf.create_consumer("ORDERS", durable_name="w", ack_policy="explicit")
        assert consumer_info.name == "w"
        batch = leaf.pull_consumer("ORDERS", "w").fetch(10, expires=2.0)
        assert batch.data.column("seq").to_pylist() == list(range(1, 11))
        batch.ack_sync()
        assert leaf.consumer_info("ORDERS", "w").ack_floor.stream_seq == 10

    # The stream is in the hub, not in the leaf.
    with ja.connect(hub_leaf.hub_url) as hub:
        assert hub.stream_info("ORDERS").state.messages == 1_000
        assert hub.read("ORDERS").read_all().num_rows == 1_000
    with ja.connect(hub_leaf.leaf_url) as leaf_local:
        assert leaf_local.api_prefix == "$JS.API"
        with pytest.raises(NotFoundError):
            leaf_local.stream_info("ORDERS")
        assert "ORDERS" not in leaf_local.stream_names()


def test_leaf_local_domain_from_the_hub(hub_leaf: HubLeaf) -> None:
    """The other direction: a hub client reaches the leaf's JetStream by its domain."""
    with ja.connect(hub_leaf.hub_url, domain=hub_leaf.leaf_domain) as client:
        client.create_stream("LOCAL", ["local.>"])
        table = pa.table({"subject": ["local.a"] * 3, "data": [b"1", b"2", b"3"]})
        result = client.publish(table, msg_id_prefix="l-")
        assert result.failed == 0
        assert client.read("LOCAL").read_all().column("data").to_pylist() == [b"1", b"2", b"3"]
    with ja.connect(hub_leaf.leaf_url) as local:
        assert local.stream_info("LOCAL").state.messages == 3


def test_wrong_domain_fails_fast(hub_leaf: HubLeaf) -> None:
    with ja.connect(hub_leaf.leaf_url, domain="nowhere", request_timeout=5.0) as client:
        t0 = time.monotonic()
        with pytest.raises(JetStreamNotEnabledError) as info:
            client.stream_names()
        with pytest.raises(JetStreamNotEnabledError):
            client.read("ORDERS")
        with pytest.raises(JetStreamNotEnabledError):
            client.create_stream("X", ["x.>"])
        elapsed = time.monotonic() - t0
        assert elapsed < 3, f"{elapsed:.1f}s: waited for a timeout instead of no responders"
        assert "$JS.nowhere.API" in str(info.value)
