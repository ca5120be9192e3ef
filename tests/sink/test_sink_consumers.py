"""A work queue's consumer made by the user, with a setting that lets a message go
unlanded, is refused naming the consumer and the setting, before anything is
acknowledged: what nats-py made and published is still all in the stream."""

from __future__ import annotations

from typing import Any

import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.sink import dataset_files
from natspy import with_jetstream


def _made_by_natspy(url: str, stream: str, retention: str, **config: Any) -> None:
    async def work(js: Any) -> None:
        await js.add_stream(name=stream, subjects=[f"{stream.lower()}.>"], retention=retention)
        await js.add_consumer(
            stream, ConsumerConfig(durable_name="lake", ack_policy=AckPolicy.EXPLICIT, **config)
        )
        for i in range(5):
            await js.publish(f"{stream.lower()}.x", b'{"i": %d}' % i)

    with_jetstream(url, work)


@pytest.mark.parametrize(
    ("retention", "config", "named"),
    [
        ("workqueue", {"max_deliver": 2}, "has max_deliver 2"),
        # A work queue's consumer delivers all (the server refuses another policy).
        ("interest", {"deliver_policy": DeliverPolicy.NEW}, "has deliver_policy 'new'"),
        ("workqueue", {"headers_only": True}, "is headers_only"),
        ("interest", {"inactive_threshold": 60.0}, "has inactive_threshold 60 s"),
    ],
    ids=["max_deliver", "deliver_policy", "headers_only", "inactive_threshold"],
)
def test_a_consumer_that_can_lose_messages_is_refused_naming_it(
    shared_nats_server, unique_name, tmp_path, retention, config, named
):
    stream = unique_name("Q")
    _made_by_natspy(shared_nats_server.url, stream, retention, **config)
    with ja.connect(shared_nats_server.url) as client:
        with pytest.raises(BadInputError) as refused:
            ja.run_sink(
                client,
                [stream],
                ja.ParquetTarget(tmp_path / "t"),
                durable="lake",
                commit_rows=100,
                batch_rows=10,
            )
        assert f"consumer 'lake' of stream {stream} {named}" in str(refused.value), refused.value
        info = client.consumer_info(stream, "lake")
        assert info.num_ack_pending == 0 and info.delivered.stream_seq == 0
    assert not (tmp_path / "t" / "_jetstream_arrow_manifest.json").exists()

    async def count(js: Any) -> int:
        return int((await js.stream_info(stream)).state.messages)

    assert with_jetstream(shared_nats_server.url, count) == 5


def test_a_consumer_with_unlimited_deliveries_lands_everything(
    shared_nats_server, unique_name, tmp_path
):
    stream = unique_name("Q")
    _made_by_natspy(shared_nats_server.url, stream, "workqueue", max_deliver=-1)
    with ja.connect(shared_nats_server.url) as client:
        report = ja.run_sink(
            client,
            [stream],
            ja.ParquetTarget(tmp_path / "t"),
            durable="lake",
            codec="json",
            commit_rows=100,
            batch_rows=10,
        )
    assert report.rows == 5
    landed = ds.dataset(dataset_files(tmp_path / "t"), format="parquet").to_table()
    assert sorted(landed.column("i").to_pylist()) == list(range(5))


def test_a_delivery_lost_on_its_way_is_landed_not_passed(shared_nats_server, unique_name, tmp_path):
    """A delivery the sink never got (taken here by nats-py from the sink's consumer
    mid-run and not acknowledged, as a pull whose reply the connection lost) leaves a
    gap in the consumer sequences: the sink delivers again from the ack floor, and
    lands that message in order, rather than pass it with the position."""
    url, stream = shared_nats_server.url, unique_name("Q")

    async def fill(js: Any) -> None:
        await js.add_stream(name=stream, subjects=[f"{stream.lower()}.>"], retention="workqueue")
        for i in range(6):
            await js.publish(f"{stream.lower()}.x", b'{"i": %d}' % i)

    with_jetstream(url, fill)
    taken: list[int] = []

    def take_one(_: Any) -> None:
        if taken:
            return

        async def work(js: Any) -> None:
            sub = await js.pull_subscribe_bind("lake", stream)
            msgs = await sub.fetch(1, timeout=5)
            taken.extend(m.metadata.sequence.stream for m in msgs)

        with_jetstream(url, work)

    path = tmp_path / "t"
    with ja.connect(url) as client:
        report = ja.run_sink(
            client,
            [stream],
            ja.DeltaTarget(path),
            durable="lake",
            codec="json",
            commit_rows=100,
            batch_rows=2,
            on_progress=take_one,
        )
    assert taken == [3], taken
    assert report.positions == {stream: 6}
    landed = DeltaTable(str(path)).to_pyarrow_table().sort_by("seq")
    assert landed.column("seq").to_pylist() == [1, 2, 3, 4, 5, 6]
    assert landed.column("i").to_pylist() == list(range(6))

    async def left(js: Any) -> int:
        return int((await js.stream_info(stream)).state.messages)

    assert with_jetstream(url, left) == 0
