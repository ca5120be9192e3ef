"""``jetstream-arrow streams enable-exactly-once STREAM``: the command the exactly-once
warnings and refusals name makes a stream hold writers' positions (checked with
nats-py), says so when it does already, and refuses a work queue."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pytest

from cli_helpers import cli
from jetstream_arrow.exceptions import BadInputError
from natspy import with_jetstream


def _config(url: str, stream: str) -> Any:
    async def work(js: Any) -> Any:
        return (await js.stream_info(stream)).config

    return with_jetstream(url, work)


def test_enable_exactly_once_lets_a_stream_hold_positions(
    capsys, client, shared_nats_server, unique_name
):
    url, name = shared_nats_server.url, unique_name("PLAIN")
    client.create_stream(name, [f"{name}.>"])
    command = f"jetstream-arrow streams enable-exactly-once {name}"
    with pytest.raises(BadInputError, match=re.escape(command)):
        client.publish(pa.table({"data": [b"a"]}), f"{name}.x", writer="w", exactly_once=True)
    run = cli(capsys, "streams", "enable-exactly-once", name, "--servers", url)
    assert run.code == 0, run.err
    assert f"$JA.POS.{name}.>" in run.out
    config = _config(url, name)
    assert config.subjects == [f"{name}.>", f"$JA.POS.{name}.>"]
    assert config.allow_rollup_hdrs is True
    again = cli(capsys, "streams", "enable-exactly-once", name, "--servers", url)
    assert again.code == 0 and "already" in again.out
    assert _config(url, name).subjects == [f"{name}.>", f"$JA.POS.{name}.>"]
    # A writer may now ask for exactly once.
    rows = pa.table({"data": [b"a", b"b"]})
    assert client.publish(rows, f"{name}.x", writer="w", exactly_once=True).stored == 2
    client.delete_stream(name)


def test_enable_exactly_once_refuses_a_work_queue_and_a_missing_stream(
    capsys, client, shared_nats_server, unique_name
):
    url, name = shared_nats_server.url, unique_name("WQ")
    client.create_stream(name, [f"{name}.>"], retention="workqueue")
    run = cli(capsys, "streams", "enable-exactly-once", name, "--servers", url)
    assert run.code == 1 and "retention" in run.err and name in run.err
    assert _config(url, name).subjects == [f"{name}.>"]
    client.delete_stream(name)
    missing = cli(capsys, "streams", "enable-exactly-once", unique_name("NONE"), "--servers", url)
    assert missing.code == 1 and "not found" in missing.err.lower()
