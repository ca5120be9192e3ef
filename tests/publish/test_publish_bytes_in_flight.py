"""``max_bytes_in_flight``: a publisher sends no further message while that many payload
bytes await their acks, whatever its window.

The probe watches the wire with nats-py, the independent client: one subscription sees
every message published to the stream's subjects and every ack the server sends to the
publisher's inbox, in the order the server routes them. A message sent only after the
ack of the one before shows up after that ack, so the most messages seen between acks
is the most the publisher had in flight.
"""

from __future__ import annotations

import asyncio
import threading

import nats
import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError
from natspy import data_messages
from natsserver import NatsServer

PAYLOAD = 600
INBOX = "probe"


def most_in_flight(server: NatsServer, rows: int, **options: object) -> int:
    """Publish ``rows`` payloads of ``PAYLOAD`` bytes with ``options``; the most
    messages the wire showed sent and not yet acknowledged."""
    seen: list[str] = []
    ready = threading.Event()
    errors: list[BaseException] = []

    async def observe() -> None:
        nc = await nats.connect(server.url)
        everything = asyncio.Event()

        async def on_message(msg: nats.aio.msg.Msg) -> None:
            if msg.subject.startswith(f"{INBOX}."):
                seen.append("ack")
            elif msg.subject.startswith("load."):
                seen.append("message")
            if len(seen) == 2 * rows:
                everything.set()

        # One subscription: nats-py runs each subscription's callbacks on a task of
        # its own, so only one keeps the server's order of messages and acks.
        await nc.subscribe(">", cb=on_message)
        await nc.flush()
        ready.set()
        try:
            await asyncio.wait_for(everything.wait(), 30)
        finally:
            await nc.close()

    def run() -> None:
        try:
            asyncio.run(observe())
        except BaseException as e:  # reported by the test
            errors.append(e)
            ready.set()

    observer = threading.Thread(target=run, daemon=True)
    observer.start()
    assert ready.wait(10), "the observer did not subscribe"
    table = pa.table({"data": [bytes([i % 256]) * PAYLOAD for i in range(rows)]})
    # Only the publish uses the watched inbox: the API's replies go elsewhere.
    with ja.connect(server.url) as admin:
        if "LOAD" in admin.stream_names():
            admin.purge_stream("LOAD")
        else:
            admin.create_stream("LOAD", subjects=["load.>"])
    with ja.connect(server.url, inbox_prefix=INBOX) as client:
        client.publish(table, "load.a", **options)
    observer.join(40)
    assert not errors, errors
    assert len(seen) == 2 * rows, f"saw {len(seen)} of {2 * rows} messages and acks"
    assert data_messages(server.url, "LOAD") == rows
    in_flight = most = 0
    for what in seen:
        in_flight += 1 if what == "message" else -1
        most = max(most, in_flight)
    return most


def test_a_publisher_holds_at_most_max_bytes_in_flight(nats_server: NatsServer) -> None:
    # Fewer than one more payload fits: each message waits for the ack before it.
    assert most_in_flight(nats_server, 30, max_bytes_in_flight=PAYLOAD) == 1
    # Sent while less than 2.5 payloads' worth is in flight: three at most.
    assert most_in_flight(nats_server, 30, max_bytes_in_flight=PAYLOAD * 5 // 2) <= 3
    # By default the window and 32 MiB allow many at once, which the probe sees.
    assert most_in_flight(nats_server, 200) > 3


def test_max_bytes_in_flight_is_checked_by_the_core(client: ja.Client, stream: str) -> None:
    with pytest.raises(BadInputError, match="option 'max_bytes_in_flight' must be at least 1"):
        client.publisher(f"{stream}.a", max_bytes_in_flight=0)
    with pytest.raises(BadInputError, match="option 'max_bytes_in_flight' must be a whole number"):
        client.publisher(f"{stream}.a", max_bytes_in_flight="1MB")  # type: ignore[arg-type]
