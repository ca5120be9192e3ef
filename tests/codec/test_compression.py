"""Payload compression (`compression` on publish, `Content-Encoding` per message):
every algorithm round trips through publish and every read path, nats-py's view of
the stored bytes is decompressed with Python's own zlib/gzip and `zstandard` as the
oracle, a stream may mix compressed and plain messages, a payload that expands past
`max_decompressed_bytes` fails naming its seq, and a corrupt one is malformed."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import zstandard

import jetstream_arrow as ja
from cli_helpers import cli
from conftest_spark import spark
from jetstream_arrow.exceptions import BadInputError, MalformedPayloadError
from natspy import with_jetstream
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(120)
__all__ = ["spark"]  # a fixture, imported for pytest

ALGORITHMS = ("zstd", "gzip", "zlib", "s2")

#: What Python's own libraries make of each algorithm's stored bytes (S2 has none).
ORACLE: dict[str, Callable[[bytes], bytes]] = {
    "zstd": lambda b: zstandard.ZstdDecompressor().decompress(b),
    "gzip": gzip.decompress,
    "zlib": zlib.decompress,
}


def doc(i: int, size: int = 1024) -> bytes:
    """Compressible JSON of about ``size`` bytes."""
    row = {"id": i, "name": f"customer {i}", "tags": ["alpha", "beta"], "pad": ""}
    text = json.dumps(row)
    row["pad"] = "x" * max(0, size - len(text))
    return json.dumps(row).encode()


def stored(url: str, stream: str, seqs: list[int]) -> dict[int, tuple[bytes, dict[str, str]]]:
    """Each message's payload and headers as nats-py reads them from the server."""

    async def work(js: Any) -> dict[int, tuple[bytes, dict[str, str]]]:
        out = {}
        for seq in seqs:
            msg = await js.get_msg(stream, seq)
            out[seq] = (msg.data, dict(msg.headers or {}))
        return out

    return with_jetstream(url, work)


def publish_raw(
    url: str, subject: str, payloads: list[tuple[bytes, dict[str, str] | None]]
) -> None:
    """Publish with nats-py, as another producer would."""

    async def work(js: Any) -> None:
        for data, headers in payloads:
            await js.publish(subject, data, headers=headers)

    with_jetstream(url, work)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_each_algorithm_round_trips_and_is_what_nats_py_reads_compressed(
    algorithm: str,
    client: ja.Client,
    new_stream: Callable[..., str],
    shared_nats_server: NatsServer,
) -> None:
    name = new_stream("Z", allow_direct=True)
    payloads = [doc(i) for i in range(5)]
    table = pa.table({"subject": [f"{name}.a"] * 5, "data": payloads})
    assert client.publish(table, compression=algorithm).stored == 5
    raw = stored(shared_nats_server.url, name, [1, 2, 3, 4, 5])
    for seq, (data, headers) in raw.items():
        assert headers.get("Content-Encoding") == algorithm
        assert len(data) < len(payloads[seq - 1]) / 3
        if algorithm in ORACLE:
            assert ORACLE[algorithm](data) == payloads[seq - 1]
    # Every read path gives the payload decompressed, its headers without the
    # Content-Encoding it no longer has (here its only header: none left).
    for method in ("direct", "consumer"):
        read = client.read(name, include_headers=True, method=method).read_all()
        assert read.column("data").to_pylist() == payloads, method
        assert read.column("headers").to_pylist() == [None] * 5, method
    # decompress=False: as stored, marked.
    with ja.connect(shared_nats_server.url, decompress=False) as as_stored:
        read = as_stored.read(name, include_headers=True).read_all()
        assert read.column("data").to_pylist() == [raw[seq][0] for seq in range(1, 6)]
        assert [dict(h) for h in read.column("headers").to_pylist()] == [
            {"Content-Encoding": [algorithm]}
        ] * 5
    latest = client.read(name, last_per_subject=True).read_all()
    assert latest.column("data").to_pylist() == [payloads[-1]]
    client.create_consumer(name, durable_name="pull", ack_policy="explicit")
    fetched = client.pull_consumer(name, "pull").fetch(5, expires=5)
    assert pa.table(fetched.data).column("data").to_pylist() == payloads
    fetched.ack()
    follow = client.ordered_consumer(name).messages(batch_wait=0.2)
    got: list[bytes] = []
    for batch in follow:
        got.extend(batch.column("data").to_pylist())
        if len(got) >= 5:
            break
    follow.close()  # type: ignore[attr-defined]
    assert got == payloads


def test_json_values_compressed_after_encoding_and_decompressed_before_decoding(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("ZJ")
    rows = pa.table(
        {
            "subject": [f"{name}.a"] * 4,
            "id": [1, 2, 3, 4],
            "text": ["lorem ipsum " * 50] * 4,
        }
    )
    assert client.publish(rows, codec="json", compression="zstd").stored == 4
    data, headers = stored(shared_nats_server.url, name, [1])[1]
    assert headers["Content-Encoding"] == "zstd"
    assert json.loads(ORACLE["zstd"](data)) == {"id": 1, "text": "lorem ipsum " * 50}
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    codec = ja.ValueCodec("json", schema=schema, flatten=True)
    read = client.read(name, codec=codec).read_all()
    assert read.select(["id", "text"]).to_pylist() == rows.select(["id", "text"]).to_pylist()
    # The schema inferred from a sample reads the decompressed payloads too.
    inferred = client.read(name, codec="json").read_all()
    assert [v["id"] for v in inferred.column("value").to_pylist()] == [1, 2, 3, 4]


def test_a_stream_mixes_compressed_and_plain_messages_and_other_producers(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("ZM")
    big = doc(0, 4096)
    client.publish(pa.table({"subject": [f"{name}.a"], "data": [big]}))
    client.publish(pa.table({"subject": [f"{name}.a"], "data": [big]}), compression="gzip")
    # Not worth compressing: sent plain, unmarked.
    client.publish(pa.table({"subject": [f"{name}.a"], "data": [b"{}"]}), compression="zstd")
    client.publish(pa.table({"subject": [f"{name}.a"], "data": [b""]}), compression="zstd")
    # Other producers: Python's zlib under HTTP's name for it, zstandard's frames.
    publish_raw(
        shared_nats_server.url,
        f"{name}.a",
        [
            (zlib.compress(big), {"Content-Encoding": "deflate"}),
            (zstandard.ZstdCompressor().compress(big), {"Content-Encoding": "zstd"}),
            (b"plain", {"Content-Encoding": "identity"}),
        ],
    )
    raw = stored(shared_nats_server.url, name, [1, 2, 3, 4])
    assert [h.get("Content-Encoding") for _, h in raw.values()] == [None, "gzip", None, None]
    read = client.read(name).read_all()
    assert read.column("data").to_pylist() == [big, big, b"{}", b"", big, big, b"plain"]


def test_a_payload_over_the_limit_fails_naming_its_seq(
    new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("ZL")
    url = shared_nats_server.url
    publish_raw(url, f"{name}.a", [(b"small", None)])
    bomb = zstandard.ZstdCompressor().compress(b"\0" * (8 << 20))
    assert len(bomb) < 4096
    publish_raw(url, f"{name}.a", [(bomb, {"Content-Encoding": "zstd"})])
    gz = gzip.compress(b"\0" * (2 << 20))
    publish_raw(url, f"{name}.a", [(gz, {"Content-Encoding": "gzip"})])
    with ja.connect(url, max_decompressed_bytes=1 << 20) as small:
        with pytest.raises(MalformedPayloadError, match=r"seq 2\b.*max_decompressed_bytes"):
            small.read(name).read_all()
        with pytest.raises(MalformedPayloadError, match=r"seq 3\b"):
            small.read(name, start_seq=3).read_all()
        small.create_consumer(name, durable_name="pull", ack_policy="explicit")
        with pytest.raises(MalformedPayloadError, match=r"seq 2\b"):
            small.pull_consumer(name, "pull").fetch(3, expires=5)
    with ja.connect(url) as default:
        sizes = [len(d) for d in default.read(name).read_all().column("data").to_pylist()]
    assert sizes == [5, 8 << 20, 2 << 20]
    with pytest.raises(BadInputError, match="max_decompressed_bytes"):
        ja.connect(url, max_decompressed_bytes=0)


def test_a_corrupt_payload_is_malformed(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("ZC")
    good = json.dumps({"id": 1}).encode()
    publish_raw(
        shared_nats_server.url,
        f"{name}.a",
        [
            (zlib.compress(good), {"Content-Encoding": "zlib"}),
            (b'{"id": 2}', {"Content-Encoding": "zstd"}),  # marked, but plain
            (zlib.compress(good)[:-6], {"Content-Encoding": "zlib"}),  # cut short
        ],
    )
    with pytest.raises(MalformedPayloadError, match=r"seq 2\b.*zstd"):
        client.read(name).read_all()
    schema = pa.schema([("id", pa.int64())])
    with pytest.raises(MalformedPayloadError, match=r"seq 2\b"):
        client.read(name, codec=ja.ValueCodec("json", schema=schema)).read_all()
    kept = client.read(
        name, codec=ja.ValueCodec("json", schema=schema, on_malformed="permissive")
    ).read_all()
    assert kept.column("value").to_pylist() == [{"id": 1}, None, None]
    corrupt = kept.column("_corrupt_record").to_pylist()
    assert corrupt[0] is None and corrupt[1] == b'{"id": 2}' and corrupt[2] is not None
    dropped = client.read(
        name, codec=ja.ValueCodec("json", schema=schema, on_malformed="dropmalformed")
    ).read_all()
    assert dropped.column("seq").to_pylist() == [1]
    # A schema inferred from a sample: payloads that do not decompress are left out of
    # the sample, for the read's on_malformed to meet.
    inferred = client.read(name, codec=ja.ValueCodec("json", on_malformed="permissive"))
    assert inferred.read_all().column("value").to_pylist() == [{"id": 1}, None, None]
    inferred = client.read(name, codec=ja.ValueCodec("json", on_malformed="dropmalformed"))
    assert inferred.read_all().column("seq").to_pylist() == [1]


@pytest.mark.parametrize("columns", ["whole read", "without stream and seq"])
def test_a_copy_of_a_read_stores_plain_or_compressed_again(
    columns: str,
    client: ja.Client,
    new_stream: Callable[..., str],
    shared_nats_server: NatsServer,
) -> None:
    source, plain, packed, kept = (new_stream(p) for p in ("ZS", "ZP", "ZQ", "ZK"))
    payloads = [doc(i) for i in range(3)]
    rows = pa.table(
        {
            "subject": [f"{source}.a"] * 3,
            "data": payloads,
            "headers": pa.array([[("Trace", "t")]] * 3, pa.map_(pa.string(), pa.string())),
        }
    )
    client.publish(rows, compression="zstd")
    read = client.read(source, include_headers=True).read_all()
    # Decompressed rows keep their other headers, not Content-Encoding.
    assert [dict(h) for h in read.column("headers").to_pylist()] == [{"Trace": ["t"]}] * 3
    if columns != "whole read":
        read = read.drop_columns(["stream", "seq"])
    client.publish(read, subject=f"{plain}.a")
    client.publish(read, subject=f"{packed}.a", compression="s2")
    url = shared_nats_server.url
    copied = stored(url, plain, [1, 2, 3])
    assert [d for d, _ in copied.values()] == payloads
    assert all("Content-Encoding" not in h and h["Trace"] == "t" for _, h in copied.values())
    again = stored(url, packed, [1, 2, 3])
    assert all(h["Content-Encoding"] == "s2" for _, h in again.values())
    assert all(len(d) < len(p) / 3 for (d, _), p in zip(again.values(), payloads, strict=True))
    for copy in (plain, packed):
        assert client.read(copy).read_all().column("data").to_pylist() == payloads, copy
    # Read as stored (decompress=False), a copy stores the compressed bytes, marked.
    with ja.connect(url, decompress=False) as as_stored:
        raw = as_stored.read(source, include_headers=True).read_all()
    if columns != "whole read":
        raw = raw.drop_columns(["stream", "seq"])
    client.publish(raw, subject=f"{kept}.a")
    kept_stored = stored(url, kept, [1, 2, 3])
    if columns == "whole read":
        # A copy is stored under its source message's identity (publishing.md).
        for seq, (_, headers) in kept_stored.items():
            assert headers.pop("Nats-Msg-Id").startswith(f"{source}:{seq}:"), headers
    assert kept_stored == stored(url, source, [1, 2, 3])
    assert client.read(kept).read_all().column("data").to_pylist() == payloads
    # ... and compressing it again is refused rather than done twice.
    with pytest.raises(BadInputError, match=r"row 0.*Content-Encoding.*compression"):
        client.publish(raw, subject=f"{kept}.a", compression="zstd")


def test_a_row_marked_compressed_is_published_as_given(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    name = new_stream("ZG")
    marked = pa.table(
        {
            "subject": [f"{name}.a"],
            "data": [zlib.compress(b"x" * 100)],
            "headers": pa.array(
                [[("Content-Encoding", "zlib")]], pa.map_(pa.string(), pa.string())
            ),
        }
    )
    with pytest.raises(BadInputError, match=r"row 0.*Content-Encoding.*compression"):
        client.publish(marked, compression="zstd")
    # Marked in another spelling: not wrapped in another encoding either.
    lower = marked.set_column(
        2,
        "headers",
        pa.array([[("content-encoding", "gzip")]], pa.map_(pa.string(), pa.string())),
    )
    with pytest.raises(BadInputError, match=r"row 0.*content-encoding.*compression"):
        client.publish(lower, compression="zstd")
    assert client.publish(marked).stored == 1
    assert client.read(name).read_all().column("data").to_pylist() == [b"x" * 100]


def test_a_read_drops_only_the_header_it_decompressed_by(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    """Another producer's message with `Content-Encoding: zstd` over gzip bytes marked
    `content-encoding: gzip`: the read undoes the zstd it knows and keeps the other
    header, which still says what the payload is."""
    name = new_stream("ZH")
    plain = b"x" * 200
    inner = gzip.compress(plain)
    outer = zstandard.ZstdCompressor().compress(inner)
    headers = {"Content-Encoding": "zstd", "content-encoding": "gzip"}
    publish_raw(shared_nats_server.url, f"{name}.a", [(outer, headers)])
    back = client.read(name, include_headers=True).read_all()
    assert back.column("data").to_pylist() == [inner]
    assert dict(back.column("headers")[0].as_py()) == {"content-encoding": ["gzip"]}


def test_another_tools_gzip_is_read_as_stored_with_decompress_off(
    new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("ZO")
    url = shared_nats_server.url
    body = doc(0, 4096)
    packed = gzip.compress(body)
    publish_raw(url, f"{name}.a", [(packed, {"Content-Encoding": "gzip", "X": "1"})])
    with ja.connect(url) as default:
        read = default.read(name, include_headers=True).read_all()
        assert read.column("data").to_pylist() == [body]
        assert [dict(h) for h in read.column("headers").to_pylist()] == [{"X": ["1"]}]
    with ja.connect(url, decompress=False) as off:
        read = off.read(name, include_headers=True).read_all()
        assert read.column("data").to_pylist() == [packed]
        assert [dict(h) for h in read.column("headers").to_pylist()] == [
            {"Content-Encoding": ["gzip"], "X": ["1"]}
        ]
        off.create_consumer(name, durable_name="raw", ack_policy="explicit")
        fetched = off.pull_consumer(name, "raw").fetch(1, expires=5)
        assert pa.table(fetched.data).column("data").to_pylist() == [packed]


def test_a_consumers_batch_over_the_limit_in_total_loses_nothing(
    new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    """The limit is per payload: a consumer's batch, delivered already (for good with
    ack_policy none), is handed out whole whatever its decompressed total."""
    name = new_stream("ZB")
    url = shared_nats_server.url
    # Four payloads of 40 kB each, every one under the 100 kB limit; 160 kB together.
    body = b"\0" * 40_000
    publish_raw(
        url,
        f"{name}.a",
        [(zstandard.ZstdCompressor().compress(body), {"Content-Encoding": "zstd"})] * 4,
    )
    with ja.connect(url, max_decompressed_bytes=100_000) as small:
        for policy in ("none", "explicit"):
            small.create_consumer(name, durable_name=policy, ack_policy=policy)
            fetched = small.pull_consumer(name, policy).fetch(4, expires=5)
            table = pa.table(fetched.data)
            assert table.column("seq").to_pylist() == [1, 2, 3, 4]
            assert table.column("data").to_pylist() == [body] * 4
            if policy == "explicit":
                fetched.ack_sync()
            info = small.consumer_info(name, policy)
            assert (info.num_pending, info.num_ack_pending) == (0, 0)
        small.create_consumer(name, durable_name="two", ack_policy="explicit")
        two = small.pull_consumer(name, "two")
        for seqs in ([1, 2], [3, 4]):
            fetched = two.fetch(2, expires=5)
            assert pa.table(fetched.data).column("seq").to_pylist() == seqs
            fetched.ack()
        # A read cuts its batches by max_bytes: no error either.
        got = small.read(name, max_bytes=50_000).read_all()
        assert got.column("data").to_pylist() == [body] * 4


def test_decompressed_payloads_are_viewed_correctly(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    name = new_stream("ZV")
    # Short (copied into the shared block), long (a block of its own) and inline sizes.
    payloads = [doc(0, 16 << 10), doc(1, 1024), b"{}", doc(2, 4096), b""]
    client.publish(pa.table({"subject": [f"{name}.a"] * 5, "data": payloads}), compression="zstd")
    read = client.read(name, payload_views=True).read_all()
    assert read.schema.field("data").type == pa.binary_view()
    assert read.column("data").to_pylist() == payloads


@pytest.mark.parametrize("mode", ["fast", "atomic"])
def test_fast_and_atomic_publishes_compress(
    mode: str, client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("ZF", allow_batched=True, allow_atomic=True)
    payloads = [doc(i) for i in range(20)]
    table = pa.table({"subject": [f"{name}.a"] * 20, "data": payloads})
    assert client.publish(table, mode=mode, compression="zstd").stored == 20
    raw = stored(shared_nats_server.url, name, [1, 20])
    assert all(h["Content-Encoding"] == "zstd" for _, h in raw.values())
    assert client.read(name).read_all().column("data").to_pylist() == payloads


def test_an_unknown_algorithm_is_refused_naming_the_option(client: ja.Client) -> None:
    with pytest.raises(BadInputError, match=r"compression.*zstd, gzip, zlib, s2"):
        client.publish(pa.table({"subject": ["x"], "data": [b"x"]}), compression="lz4")


def test_the_cli_load_compresses(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    new_stream: Callable[..., str],
    shared_nats_server: NatsServer,
    client: ja.Client,
) -> None:
    name = new_stream("ZCLI")
    path = tmp_path / "rows.jsonl"
    rows = [{"id": i, "text": "compressible " * 40} for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    url = shared_nats_server.url
    run = cli(
        capsys, "load", str(path), "--stream", name, "--subject", f"{name}.a",
        "--compression", "gzip", "--servers", url,
    )  # fmt: skip
    assert run.code == 0, run.err
    raw = stored(url, name, [1, 2, 3])
    assert [json.loads(gzip.decompress(d)) for d, _ in raw.values()] == rows
    assert all(h["Content-Encoding"] == "gzip" for _, h in raw.values())
    # The same load again (a re-run after a crash): duplicates of what it stored, the
    # stored payloads compared decompressed, not called other content.
    again = cli(
        capsys, "load", str(path), "--stream", name, "--subject", f"{name}.a",
        "--compression", "gzip", "--servers", url,
    )  # fmt: skip
    assert again.code == 0 and "3 duplicates" in again.err + again.out, again.err
    bad = cli(capsys, "load", str(path), "--stream", name, "--subject", "x", "--compression", "lz4")
    assert bad.code == 2 and "--compression" in bad.err


@pytest.mark.spark
@pytest.mark.slow
# Spark's first session of a worker may start inside this test (30 s and more on a
# loaded machine): the module's 120 s is for the tests without Spark. A timeout that
# interrupts a call into Spark's JVM leaves the worker's shared session unusable.
@pytest.mark.timeout(600)
def test_spark_write_compresses_and_read_decompresses(
    spark: Any, shared_nats_server: NatsServer, unique_name: Callable[[str], str]
) -> None:
    from pyspark.sql import functions as F

    url, name = shared_nats_server.url, unique_name("ZSPARK")
    with ja.connect(url) as c:
        c.create_stream(name, subjects=[f"{name}.>"])
    df = spark.range(0, 40, 1, 2).select(
        F.lit(f"{name}.a").alias("subject"),
        F.col("id"),
        F.lit("compressible " * 40).alias("text"),
    )
    (
        df.write.format("jetstream")
        .mode("append")
        .option("servers", url)
        .option("valueFormat", "json")
        .option("compression", "zstd")
        .save()
    )
    raw = stored(url, name, [1])
    assert raw[1][1]["Content-Encoding"] == "zstd"
    back = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", name)
        .option("valueFormat", "json")
        .schema("id LONG, text STRING")
        .load()
        .select("id", "text")
        .orderBy("id")
        .collect()
    )
    assert [(r.id, r.text) for r in back] == [(i, "compressible " * 40) for i in range(40)]
