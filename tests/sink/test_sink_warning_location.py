"""The sink's one warning of a dead-letter stream that cannot hold writers' positions
names the code that called ``run_sink`` (where a warnings filter or a reader looks),
not a line inside the package. Messages are published with nats-py."""

from __future__ import annotations

import warnings
from typing import Any

import jetstream_arrow as ja
from jetstream_arrow.exactly_once import ExactlyOnceUnavailableWarning
from natspy import with_jetstream


def _publish(url: str, stream: str, payloads: list[bytes]) -> None:
    async def work(js: Any) -> None:
        await js.add_stream(name=stream, subjects=[f"{stream}.>"])
        for payload in payloads:
            await js.publish(f"{stream}.x", payload)

    with_jetstream(url, work)


def test_the_dead_letter_warning_names_the_caller_of_run_sink(
    client, shared_nats_server, unique_name, tmp_path
):
    stream, dead = unique_name("SRC"), unique_name("DEAD")
    _publish(shared_nats_server.url, stream, [b"not json", b'{"a": 1}'])
    client.create_stream(dead, [f"{dead}.>"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = ja.run_sink(
            client,
            [stream],
            ja.ParquetTarget(tmp_path / "t"),
            codec="json",
            dead_letter_stream=dead,
        )
    told = [w for w in caught if issubclass(w.category, ExactlyOnceUnavailableWarning)]
    assert len(told) == 1
    assert told[0].filename == __file__
    assert report.rows == 1 and report.dead_letters == 1
