"""Arrow IPC payloads of one stream written by producers that differ in what does not
change a value: field order, dictionary encoding, nullability. Each decodes into the
value inferred from the first payload, checked against pyarrow's own reading of each
payload (columns by name); what would change or drop a value is refused, naming it."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import MalformedPayloadError
from natspy import with_jetstream
from natsserver import NatsServer


def _payload(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _publish(url: str, subject: str, payloads: list[bytes]) -> None:
    async def work(js: Any) -> None:
        for p in payloads:
            await js.publish(subject, p)

    with_jetstream(url, work)


def _oracle(payloads: list[bytes], names: list[str]) -> list[dict[str, Any]]:
    """Each payload's rows as pyarrow reads them, its columns taken by name."""
    rows: list[dict[str, Any]] = []
    for p in payloads:
        table = pa.ipc.open_stream(p).read_all()
        rows += table.select(names).to_pylist()
    return rows


def test_payloads_differing_in_order_dictionaries_and_nullability_decode_alike(
    client: ja.Client, stream: str, shared_nats_server: NatsServer
) -> None:
    not_null = pa.schema([pa.field("a", pa.int64(), nullable=False), ("s", pa.string())])
    payloads = [
        _payload(pa.record_batch([pa.array([1, 2]), pa.array(["x", "y"])], schema=not_null)),
        # The same fields in another order.
        _payload(pa.record_batch({"s": ["z"], "a": pa.array([3], pa.int64())})),
        # A dictionary-encoded column, and a null where the first producer had none.
        _payload(
            pa.record_batch(
                {
                    "a": pa.array([None, 5], pa.int64()),
                    "s": pa.array(["x", "x"]).dictionary_encode(),
                }
            )
        ),
    ]
    _publish(shared_nats_server.url, f"{stream}.v", payloads)
    read = client.read(stream, codec=ja.ValueCodec("arrow", flatten=True)).read_all()
    assert read.select(["a", "s"]).to_pylist() == _oracle(payloads, ["a", "s"])
    assert read.column("seq").to_pylist() == [1, 1, 2, 3, 3]

    # A field the value lacks would be dropped, one of another type changed: refused.
    extra = _payload(pa.record_batch({"a": pa.array([6], pa.int64()), "s": ["w"], "t": [1]}))
    narrower = _payload(pa.record_batch({"a": pa.array([7], pa.int32()), "s": ["v"]}))
    _publish(shared_nats_server.url, f"{stream}.v", [extra, narrower])
    inferred = ja.ValueCodec("arrow", schema=pa.schema([("a", pa.int64()), ("s", pa.string())]))
    for seq in (4, 5):
        with pytest.raises(MalformedPayloadError, match=rf"seq {seq}: .*matched by name"):
            client.read(stream, codec=inferred, start_seq=seq).read_all()

    # Given a value whose field is not nullable, a null there is refused, naming it.
    given = ja.ValueCodec("arrow", schema=not_null)
    with pytest.raises(MalformedPayloadError, match=r"seq 3: .*'a'"):
        client.read(stream, codec=given, end_seq=3).read_all()
