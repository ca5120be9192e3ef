"""A following sink outlives a server outage longer than its client's
``request_timeout``: every call it makes (stream info, reads, a work queue's consumer
calls) waits for the server as long as the sink's ``resume_timeout``. What nats-py
published before and after a ``kill -9`` of the server lands in the Delta table once
each, read back by ``deltalake``."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

import jetstream_arrow as ja
from jetstream_arrow.sink import app_id
from natspy import with_jetstream

#: Shorter than the outage below, so each call of the sink meets one.
REQUEST_TIMEOUT = 1.0
OUTAGE_SECONDS = 3.0


def _publish(url: str, start: int, stop: int) -> list[int]:
    """Publish ``{"i": i}`` for i in [start, stop) with nats-py; the sequences acked."""

    async def work(js: Any) -> list[int]:
        acks = [
            await js.publish("out.x", json.dumps({"i": i}).encode()) for i in range(start, stop)
        ]
        return [a.seq for a in acks]

    return with_jetstream(url, work)


def _position(path: Path) -> int:
    if not DeltaTable.is_deltatable(str(path)):
        return 0
    return int(DeltaTable(str(path)).transaction_version(app_id("OUT")) or 0)


def _wait_position(
    path: Path, seq: int, sink: threading.Thread, outcome: dict[str, Any], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while _position(path) < seq:
        assert sink.is_alive(), f"the sink ended: {outcome}"
        assert time.monotonic() < deadline, f"waited {timeout} s for the sink to reach {seq}"
        time.sleep(0.05)


@pytest.mark.fault
@pytest.mark.parametrize("retention", ["limits", "workqueue"])
def test_a_following_sink_lands_every_message_once_across_a_server_outage(
    nats_server_factory, tmp_path, caplog, retention
):
    caplog.set_level(logging.WARNING, "jetstream_arrow.sink")
    server = nats_server_factory(jetstream_extra="sync_interval: always", tmpfs=True)
    path = tmp_path / "t"
    with ja.connect(
        server.url, request_timeout=REQUEST_TIMEOUT, reconnect_delay=0.2, max_reconnects=None
    ) as client:
        client.create_stream("OUT", ["out.>"], retention=retention)
        published = _publish(server.url, 0, 50)
        stop = threading.Event()
        outcome: dict[str, Any] = {}

        def sink() -> None:
            try:
                outcome["report"] = ja.run_sink(
                    client,
                    ["OUT"],
                    ja.DeltaTarget(path),
                    follow=True,
                    codec="json",
                    commit_seconds=0.2,
                    durable="lake" if retention == "workqueue" else None,
                    resume_timeout=60.0,
                    stop=stop,
                )
            except BaseException as e:
                outcome["error"] = e

        thread = threading.Thread(target=sink, daemon=True)
        thread.start()
        try:
            _wait_position(path, 50, thread, outcome, 30)
            server.kill()
            time.sleep(OUTAGE_SECONDS)
            server.start()
            published += _publish(server.url, 50, 80)
            _wait_position(path, published[-1], thread, outcome, 60)
        finally:
            stop.set()
            thread.join(60)
        assert not thread.is_alive(), "the sink did not stop within 60 s"
        assert "error" not in outcome, repr(outcome.get("error"))
        assert outcome["report"].stopped

    landed = DeltaTable(str(path)).to_pyarrow_table().sort_by("seq")
    assert landed.num_rows == 80
    assert landed.column("seq").to_pylist() == published
    assert landed.column("i").to_pylist() == list(range(80))
    # The outage is told once as it starts and once as it ends.
    told = [r.getMessage() for r in caplog.records if r.name == "jetstream_arrow.sink"]
    assert sum("waiting up to 60 s (resume_timeout)" in m for m in told) == 1, told
    assert sum("the server answers again" in m for m in told) == 1, told
