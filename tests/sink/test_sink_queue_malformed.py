"""A work queue's payloads that do not decode, landed by the lake sink given no value
schema: one that is malformed and holds a new field too, and a first sample of which
none decodes. With a dead-letter stream they go there and the rest lands; without, the
sink stops with ``MalformedPayloadError`` naming the message, which stays in the
queue. Checked against independent oracles: the payloads nats-py published, read
back with ``json.loads``, against what ``deltalake`` reads, and the dead letters and
the queue's messages as nats-py reads them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

import jetstream_arrow as ja
from jetstream_arrow.exceptions import MalformedPayloadError, NewFieldError
from natspy import with_jetstream
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(180)


def publish(url: str, subject: str, payloads: list[bytes]) -> None:
    async def work(js: Any) -> None:
        for p in payloads:
            await js.publish(subject, p)

    with_jetstream(url, work)


def letters(url: str, dead: str) -> dict[int, bytes]:
    """Each dead letter's payload by its source sequence."""

    async def work(js: Any) -> dict[int, bytes]:
        count = (await js.stream_info(dead)).state.messages
        out = {}
        for seq in range(1, count + 1):
            msg = await js.get_msg(dead, seq)
            out[int(msg.headers["Jetstream-Arrow-Source-Seq"])] = msg.data
        return out

    return with_jetstream(url, work)


def messages_left(url: str, stream: str) -> int:
    async def work(js: Any) -> int:
        return int((await js.stream_info(stream)).state.messages)

    return with_jetstream(url, work)


def landed(path: Path) -> list[dict[str, Any]]:
    table = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(table.to_pylist(), key=lambda r: r["seq"])


#: A field first seen (after the consumer's sample) in a payload that is malformed.
BAD_AND_NEW = [json.dumps({"a": i}).encode() for i in range(1500)] + [
    json.dumps({"a": "bad", "z": 1}).encode(),
    json.dumps({"a": 3, "z": 2}).encode(),
]


def test_a_malformed_payload_with_a_new_field_is_a_dead_letter(
    shared_nats_server: NatsServer,
    client: ja.Client,
    new_stream: Callable[..., str],
    tmp_path: Path,
) -> None:
    url = shared_nats_server.url
    stream = new_stream("WQ_BAD_NEW", retention="workqueue")
    dead = new_stream("WQ_BAD_NEW_DEAD")
    publish(url, f"{stream}.x", BAD_AND_NEW)
    report = ja.run_sink(
        client,
        [stream],
        ja.DeltaTarget(tmp_path),
        codec="json",
        durable="lake",
        dead_letter_stream=dead,
    )
    assert (report.rows, report.dead_letters) == (1501, 1)
    assert report.positions == {stream: 1502}
    rows = landed(tmp_path)
    good = [s for s in range(1, 1503) if s != 1501]
    assert [r["seq"] for r in rows] == good
    published = [json.loads(BAD_AND_NEW[s - 1]) for s in good]
    assert [{"a": r["a"], "z": r["z"]} for r in rows] == [
        {"a": v["a"], "z": v.get("z")} for v in published
    ]
    assert letters(url, dead) == {1501: BAD_AND_NEW[1500]}
    assert messages_left(url, stream) == 0


def test_without_a_dead_letter_stream_it_stops_the_sink_naming_it(
    shared_nats_server: NatsServer,
    client: ja.Client,
    new_stream: Callable[..., str],
    tmp_path: Path,
) -> None:
    url = shared_nats_server.url
    stream = new_stream("WQ_BAD_NEW_NODLQ", retention="workqueue")
    publish(url, f"{stream}.x", BAD_AND_NEW)
    with pytest.raises(MalformedPayloadError, match=r"seq 1501\b") as raised:
        ja.run_sink(client, [stream], ja.DeltaTarget(tmp_path), codec="json", durable="lake")
    assert not isinstance(raised.value, NewFieldError)
    # Nothing was acknowledged that the table does not hold: the bad payload stays.
    held = landed(tmp_path) if DeltaTable.is_deltatable(str(tmp_path)) else []
    assert [r["seq"] for r in held] == list(range(1, len(held) + 1))
    assert len(held) + messages_left(url, stream) == 1502
    assert len(held) <= 1500


#: A first sample (a pull of ``batch_rows``) of which no payload is a JSON object.
NOT_JSON = [b"not json"] * 150 + [json.dumps({"a": i}).encode() for i in range(30)]


def test_a_first_sample_of_no_json_object_goes_to_the_dead_letter_stream(
    shared_nats_server: NatsServer,
    client: ja.Client,
    new_stream: Callable[..., str],
    tmp_path: Path,
) -> None:
    """As a read by range passes them: each such payload a dead letter, then the
    schema inferred from what follows."""
    url = shared_nats_server.url
    stream = new_stream("WQ_NOT_JSON", retention="workqueue")
    dead = new_stream("WQ_NOT_JSON_DEAD")
    publish(url, f"{stream}.x", NOT_JSON)
    report = ja.run_sink(
        client,
        [stream],
        ja.DeltaTarget(tmp_path),
        codec="json",
        durable="lake",
        dead_letter_stream=dead,
        batch_rows=100,
    )
    assert (report.rows, report.dead_letters) == (30, 150)
    rows = landed(tmp_path)
    assert [r["seq"] for r in rows] == list(range(151, 181))
    assert [r["a"] for r in rows] == [json.loads(p)["a"] for p in NOT_JSON[150:]]
    assert letters(url, dead) == dict.fromkeys(range(1, 151), b"not json")
    assert messages_left(url, stream) == 0
