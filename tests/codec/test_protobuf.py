"""Protobuf payloads against a real server: messages written by protobuf's own Python
runtime, from a ``.proto`` compiled here with ``grpcio-tools``, read into typed
columns by the core; and tables published as Protobuf, parsed back by the runtime."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError, MalformedPayloadError
from proto_compile import compile_proto

pytestmark = pytest.mark.timeout(120)

PROTO = """
syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";

enum Status {
  STATUS_UNSPECIFIED = 0;
  PLACED = 1;
  SHIPPED = 2;
}

message Line {
  string sku = 1;
  uint32 qty = 2;
}

message Order {
  int64 id = 1;
  string customer = 2;
  double total = 3;
  Status status = 4;
  repeated Line lines = 5;
  map<string, string> tags = 6;
  bytes blob = 7;
  optional int32 priority = 8;
  Line gift = 9;
  map<int32, double> discounts = 10;
  sint64 delta = 11;
  fixed32 code = 12;
  bool rush = 13;
  float weight = 14;
  repeated int64 refs = 15;
  google.protobuf.Timestamp placed_at = 16;
}
"""

MESSAGE = "shop.v1.Order"
NANOS_UTC = pa.timestamp("ns", tz="UTC")


class Compiled:
    """The compiled ``.proto``: its descriptor set's path and the generated module."""

    def __init__(self, descriptor: Path, module: ModuleType) -> None:
        self.descriptor = descriptor
        self.module = module

    def codec(self, **kw: object) -> ja.ValueCodec:
        return ja.ValueCodec(
            "protobuf",
            protobuf_descriptor=self.descriptor,
            protobuf_message=MESSAGE,
            **kw,  # type: ignore[arg-type]
        )


@pytest.fixture(scope="module")
def proto(tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    return Compiled(*compile_proto(tmp_path_factory.mktemp("proto"), "order", PROTO))


def orders(pb: ModuleType, n: int) -> list[object]:
    """Orders exercising every kind of field; odd ones leave the optional fields unset."""
    out = []
    for i in range(n):
        o = pb.Order(
            id=2**40 + i,
            customer=f"c{i}",
            total=i * 1.25,
            status=pb.SHIPPED if i % 2 else pb.PLACED,
            blob=bytes([i % 256, 0, 255]),
            delta=-i,
            code=4_000_000_000 + i,
            rush=i % 3 == 0,
            weight=0.5,
            refs=[i, -i],
        )
        o.lines.add(sku=f"s{i}", qty=i)
        o.lines.add(sku="x", qty=1)
        o.tags["k"] = f"v{i}"
        o.discounts[i] = 0.25
        if i % 2 == 0:
            o.priority = i
            o.gift.sku = "g"
            o.placed_at.seconds = 1_700_000_000 + i
            o.placed_at.nanos = 123_456_789
        out.append(o)
    return out


def expected(o: object) -> dict[str, object]:
    """The row the core must give for ``o``, from the runtime's own view of it."""
    pb = o  # type: ignore[assignment]
    return {
        "id": pb.id,
        "customer": pb.customer,
        "total": pb.total,
        "status": type(pb)
        .DESCRIPTOR.fields_by_name["status"]
        .enum_type.values_by_number[pb.status]
        .name,
        "lines": [{"sku": ln.sku, "qty": ln.qty} for ln in pb.lines],
        "tags": sorted(pb.tags.items()),
        "blob": pb.blob,
        "priority": pb.priority if pb.HasField("priority") else None,
        "gift": {"sku": pb.gift.sku, "qty": pb.gift.qty} if pb.HasField("gift") else None,
        "discounts": sorted(pb.discounts.items()),
        "delta": pb.delta,
        "code": pb.code,
        "rush": pb.rush,
        "weight": pb.weight,
        "refs": list(pb.refs),
        # Nanoseconds since 1970, UTC: the column is a zoned timestamp.
        "placed_at": (
            pb.placed_at.seconds * 10**9 + pb.placed_at.nanos if pb.HasField("placed_at") else None
        ),
    }


def normalised(value: dict[str, object] | None) -> dict[str, object] | None:
    """Maps as sorted (key, value) pairs, as Arrow hands them back in any order."""
    if value is None:
        return None
    out = {k: sorted(v) if k in ("tags", "discounts") else v for k, v in value.items()}  # type: ignore[call-overload]
    if out["placed_at"] is not None:
        out["placed_at"] = pa.scalar(out["placed_at"], NANOS_UTC).cast(pa.int64()).as_py()
    return out


def publish_raw(client: ja.Client, subject: str, payloads: list[bytes]) -> None:
    table = pa.table({"subject": [subject] * len(payloads), "data": payloads})
    assert client.publish(table).stored == len(payloads)


def test_messages_from_the_protobuf_runtime_read_as_typed_columns(
    client: ja.Client, stream: str, proto: Compiled
) -> None:
    written = orders(proto.module, 40)
    publish_raw(client, f"{stream}.o", [o.SerializeToString() for o in written])  # type: ignore[attr-defined]

    table = client.read(stream, codec=proto.codec()).read_all()
    value = table.schema.field("value").type
    assert value.field("id").type == pa.int64()
    assert value.field("code").type == pa.uint32()
    assert value.field("status").type == pa.string()
    assert value.field("blob").type == pa.binary()
    assert value.field("placed_at").type == NANOS_UTC
    assert value.field("discounts").type == pa.map_(pa.int32(), pa.float64())
    assert value.field("lines").type == pa.list_(
        pa.struct([pa.field("sku", pa.string()), pa.field("qty", pa.uint32())])
    )
    assert [normalised(v) for v in table.column("value").to_pylist()] == [
        expected(o) for o in written
    ]

    # A consumer's fetch decodes the same way, and flattened.
    client.create_consumer(stream, durable_name="p", ack_policy="explicit")
    batch = client.pull_consumer(stream, "p").fetch(40, expires=5, codec=proto.codec(flatten=True))
    fetched = pa.table(batch.data)
    assert fetched.column("customer").to_pylist() == [f"c{i}" for i in range(40)]
    assert fetched.column("priority").to_pylist() == [i if i % 2 == 0 else None for i in range(40)]
    batch.ack()


def test_a_table_published_as_protobuf_parses_in_the_runtime(
    client: ja.Client, stream: str, proto: Compiled
) -> None:
    written = orders(proto.module, 25)
    rows = [expected(o) for o in written]
    value_type = proto.codec().value_schema()
    table = pa.Table.from_pylist(
        [{"subject": f"{stream}.o", **r} for r in rows],
        schema=pa.schema([pa.field("subject", pa.string()), *value_type]),
    )
    assert client.publish(table, codec=proto.codec()).stored == 25

    raw = client.read(stream).read_all()
    parsed = [proto.module.Order.FromString(d) for d in raw.column("data").to_pylist()]
    assert parsed == written

    # And through the core again, unchanged.
    back = client.read(stream, codec=proto.codec()).read_all()
    assert [normalised(v) for v in back.column("value").to_pylist()] == rows


def test_bad_protobuf_payloads_by_mode_and_mistakes_named(
    client: ja.Client, stream: str, proto: Compiled
) -> None:
    good = [o.SerializeToString() for o in orders(proto.module, 3)]  # type: ignore[attr-defined]
    # A length-delimited field (customer, field 2) whose length runs past the end.
    publish_raw(client, f"{stream}.o", [good[0], b"\x12\x50abc", good[2]])

    with pytest.raises(MalformedPayloadError, match=r"seq 2\b.*shop\.v1\.Order"):
        client.read(stream, codec=proto.codec()).read_all()
    kept = client.read(stream, codec=proto.codec(on_malformed="permissive")).read_all()
    assert kept.column("_corrupt_record").to_pylist() == [None, b"\x12\x50abc", None]
    dropped = client.read(stream, codec=proto.codec(on_malformed="dropmalformed")).read_all()
    assert dropped.column("seq").to_pylist() == [1, 3]

    with pytest.raises(BadInputError, match=r"protobuf_message.*no message .shop.v1.Nope.*Order"):
        client.read(
            stream,
            codec=ja.ValueCodec(
                "protobuf", protobuf_descriptor=proto.descriptor, protobuf_message="shop.v1.Nope"
            ),
        )
    with pytest.raises(BadInputError, match="protobuf_descriptor"):
        client.read(stream, codec=ja.ValueCodec("protobuf", protobuf_message=MESSAGE))
    with pytest.raises(BadInputError, match=r"protobuf_descriptor.*cannot read"):
        ja.ValueCodec("protobuf", protobuf_descriptor="/nonexistent.desc", protobuf_message=MESSAGE)
    with pytest.raises(BadInputError, match="protobuf_descriptor"):
        client.read(
            stream,
            codec=ja.ValueCodec(
                "protobuf", protobuf_descriptor=b"not a descriptor", protobuf_message=MESSAGE
            ),
        )
    # A column the message does not have is refused, naming it.
    extra = pa.table({"subject": [f"{stream}.o"], "id": [1], "colour": ["red"]})
    with pytest.raises(BadInputError, match="colour"):
        client.publish(extra, codec=proto.codec())
