"""The demo, end to end with a small data set: Spark write, Spark read, check, rows/s."""

from __future__ import annotations

import pytest

import jetstream_arrow as ja
from cli_helpers import cli_process

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_demo_with_embedded_server():
    run = cli_process("demo", "--rows", "3000", timeout=600)
    assert run.code == 0, run.err[-3000:]
    assert "write  3,000 rows through Spark" in run.out
    assert "read   3,000 rows through Spark" in run.out
    assert "rows/s" in run.out
    assert "check  ok" in run.out


def test_demo_with_given_server(nats_server):
    run = cli_process("demo", "--rows", "1000", "--servers", nats_server.url, timeout=600)
    assert run.code == 0, run.err[-3000:]
    assert "check  ok" in run.out
    with ja.connect(nats_server.url) as client:
        assert client.stream_names() == []  # the demo deletes its stream on a given server
