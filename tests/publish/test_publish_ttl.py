"""A row's own time to live: publish input's `ttl` column sent as `Nats-TTL`
(servers 2.11+, streams with `allow_msg_ttl`), checked against nats-py's view of the
stored messages and against the server removing them on time; the subject delete
marker the server leaves behind read back as it stores it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from nats.js.errors import NotFoundError

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError, PublishError
from jetstream_arrow.positions import POSITION_SUBJECT_PREFIX
from natspy import with_jetstream
from natsserver import NatsServer, wait_until

pytestmark = pytest.mark.timeout(90)


def stored_ttls(url: str, stream: str, seqs: list[int]) -> dict[int, str | None]:
    """Each message's Nats-TTL header as nats-py reads the stored message."""

    async def work(js: Any) -> dict[int, str | None]:
        out: dict[int, str | None] = {}
        for seq in seqs:
            msg = await js.get_msg(stream, seq)
            out[seq] = (msg.headers or {}).get("Nats-TTL")
        return out

    return with_jetstream(url, work)


def row_ttls(url: str, stream: str) -> list[str | None]:
    """The Nats-TTL header of each row of ``stream`` in sequence order, as nats-py
    reads the stored messages: the messages on ``$JA.POS.`` subjects (one position
    per file a load wrote into a stream it made) are not rows."""

    async def work(js: Any) -> list[str | None]:
        info = await js.stream_info(stream)
        out: list[str | None] = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                msg = await js.get_msg(stream, seq)
            except NotFoundError:  # an older position, removed by its writer's rollup
                continue
            if not msg.subject.startswith(POSITION_SUBJECT_PREFIX):
                out.append((msg.headers or {}).get("Nats-TTL"))
        return out

    return with_jetstream(url, work)


def test_a_ttl_column_is_each_rows_nats_ttl_and_the_server_removes_the_row_on_time(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("TTL", allow_msg_ttl=True)
    table = pa.table(
        {
            "subject": [f"{name}.a", f"{name}.b", f"{name}.c"],
            "data": [b"short", b"none", b"long"],
            "ttl": pa.array([2, None, 3600], pa.duration("s")),
        }
    )
    published = time.monotonic()
    assert client.publish(table).stored == 3
    assert stored_ttls(shared_nats_server.url, name, [1, 2, 3]) == {1: "2s", 2: None, 3: "3600s"}
    # A TTL the column cannot say goes in the headers, as given.
    never = pa.table(
        {
            "subject": [f"{name}.d"],
            "data": [b"x"],
            "headers": pa.array([[("Nats-TTL", "never")]], pa.map_(pa.string(), pa.string())),
        }
    )
    assert client.publish(never).stored == 1
    assert stored_ttls(shared_nats_server.url, name, [4]) == {4: "never"}

    wait_until(
        lambda: client.stream_info(name).state.messages == 3, 10.0, "row 0 to expire (ttl 2 s)"
    )
    gone_after = time.monotonic() - published
    assert gone_after >= 1.5, gone_after
    back = client.read(name).read_all()
    assert back.column("data").to_pylist() == [b"none", b"long", b"x"]


def test_ttls_the_server_cannot_keep_are_refused_naming_the_row(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    name = new_stream("TTLBAD", allow_msg_ttl=True)

    def publish(ttl: pa.Array) -> ja.PublishResult:
        rows = pa.table({"subject": [f"{name}.a"] * len(ttl), "data": [b"x"] * len(ttl)})
        return client.publish(rows.append_column("ttl", ttl))

    with pytest.raises(BadInputError, match=r"column 'ttl', row 1: .*whole\s+seconds"):
        publish(pa.array([5_000, 1_500], pa.duration("ms")))
    with pytest.raises(BadInputError, match=r"column 'ttl', row 0: .*at least 1"):
        publish(pa.array([0], pa.duration("s")))
    # The server's own verdict on a Nats-TTL header, named per row with what it takes.
    with pytest.raises(PublishError) as raised:
        client.publish(
            pa.table(
                {
                    "subject": [f"{name}.a"],
                    "data": [b"x"],
                    "headers": pa.array(
                        [[("Nats-TTL", "500ms")]], pa.map_(pa.string(), pa.string())
                    ),
                }
            )
        )
    failed = raised.value.result.failed_rows()
    assert failed.column("row").to_pylist() == [0]
    assert "whole seconds, at least 1" in failed.column("error")[0].as_py()
    # Only row 0 of the first call: rows before a refused one are sent as they come.
    assert client.stream_info(name).state.messages == 1


def test_a_ttl_column_of_text_or_numbers_is_the_tables_own_not_a_ttl(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    """A value's field named `ttl` stays in the value (a copy of decoded messages, say),
    and without a codec such a column is ignored: neither expires the message."""
    name = new_stream("TTLVALUE", allow_msg_ttl=True)
    values = pa.table({"subject": [f"{name}.a", f"{name}.a"], "x": [1, 2], "ttl": ["1h", "2h"]})
    assert client.publish(values, codec="json").stored == 2
    numbers = pa.table({"subject": [f"{name}.b"], "data": [b"raw"], "ttl": [60]})
    assert client.publish(numbers).stored == 1
    assert stored_ttls(shared_nats_server.url, name, [1, 2, 3]) == {1: None, 2: None, 3: None}
    back = client.read(name).read_all().column("data").to_pylist()
    assert back == [b'{"x":1,"ttl":"1h"}', b'{"x":2,"ttl":"2h"}', b"raw"]


def test_a_kv_write_takes_a_ttl_column_for_each_key(
    client: ja.Client, shared_nats_server: NatsServer, unique_name: Callable[[str], str]
) -> None:
    bucket = unique_name("ttlkv")

    async def make(js: Any) -> None:
        await js.create_key_value(bucket=bucket)

    with_jetstream(shared_nats_server.url, make)
    stream = f"KV_{bucket}"
    client.update_stream(client.stream_info(stream).config, allow_msg_ttl=True)
    rows = pa.table(
        {
            "key": ["a", "b"],
            "value": [b"1", b"2"],
            "ttl": pa.array([60, None], pa.duration("s")),
        }
    )
    assert client.write_kv(bucket, rows).stored == 2
    assert stored_ttls(shared_nats_server.url, stream, [1, 2]) == {1: "60s", 2: None}


def test_a_ttl_into_a_stream_without_allow_msg_ttl_names_the_setting_and_stores_nothing(
    client: ja.Client, stream: str
) -> None:
    rows = pa.table(
        {"subject": [f"{stream}.a"], "data": [b"x"], "ttl": pa.array([60], pa.duration("s"))}
    )
    with pytest.raises(PublishError) as raised:
        client.publish(rows)
    assert "allow_msg_ttl" in raised.value.result.failed_rows().column("error")[0].as_py()
    assert client.stream_info(stream).state.messages == 0


@pytest.mark.parametrize(
    ("header", "columns", "config"),
    [
        ("Nats-TTL", {"ttl": pa.array([60], pa.duration("s"))}, {"allow_msg_ttl": True}),
        ("Nats-Incr", {"increment": pa.array([1])}, {"allow_msg_counter": True}),
        (
            "Nats-Schedule",
            {"schedule": pa.array(["@every 1h"]), "schedule_target": ["{name}.out"]},
            {"allow_msg_schedules": True},
        ),
        (
            "Nats-Schedule-Target",
            {"schedule": pa.array(["@every 1h"]), "schedule_target": ["{name}.out"]},
            {"allow_msg_schedules": True},
        ),
    ],
)
def test_a_header_given_by_a_column_and_by_the_headers_is_refused(
    client: ja.Client,
    new_stream: Callable[..., str],
    header: str,
    columns: dict[str, Any],
    config: dict[str, Any],
) -> None:
    """Which of the two the user meant is not guessed: the row is refused, naming the
    column, and nothing is stored."""
    name = new_stream("TWICE", **config)
    column = next(iter(columns))
    rows = pa.table(
        {
            "subject": [f"{name}.a"],
            # A table of increments has no data column.
            **({} if column == "increment" else {"data": [b"x"]}),
            "headers": pa.array([[(header, "5s")]], pa.map_(pa.string(), pa.string())),
            **{
                key: [v.format(name=name) for v in value] if isinstance(value, list) else value
                for key, value in columns.items()
            },
        }
    )
    if header == "Nats-Schedule-Target":
        column = "schedule_target"
    with pytest.raises(
        BadInputError, match=rf"row 0: column '{column}' and the row's headers both give {header}"
    ):
        client.publish(rows)
    assert client.stream_info(name).state.messages == 0


def test_the_marker_an_expired_row_leaves_reads_back_as_the_server_stores_it(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    # The server keeps a marker for subject_delete_marker_ttl; it removes the expired
    # row and leaves the marker a few seconds after the row's TTL (measured: ~4 s).
    name = new_stream("TTLMARK", allow_msg_ttl=True, subject_delete_marker_ttl=5)
    rows = pa.table(
        {"subject": [f"{name}.k"], "data": [b"v"], "ttl": pa.array([1], pa.duration("s"))}
    )
    assert client.publish(rows).stored == 1
    wait_until(
        lambda: (lambda st: st.last_seq == 2 and st.messages == 1)(client.stream_info(name).state),
        15.0,
        "the marker of the expired row, alone",
    )
    back = client.read(name, include_headers=True).read_all()
    assert back.column("seq").to_pylist() == [2]
    marker = dict(back.column("headers")[0].as_py())

    async def oracle(js: Any) -> Any:
        return await js.get_msg(name, 2)

    expected = with_jetstream(shared_nats_server.url, oracle)
    assert back.column("subject").to_pylist() == [expected.subject]
    assert back.column("data").to_pylist() == [expected.data or b""]
    assert {k: v[0] if isinstance(v, list) else v for k, v in marker.items()} == dict(
        expected.headers
    )
    assert marker.get("Nats-Marker-Reason") in (["MaxAge"], "MaxAge")


def ttl_rows(name: str, ttls: list[Any]) -> pa.Table:
    """Rows of `name.<i>` with the given Nats-TTL header texts (None: no header)."""
    return pa.table(
        {
            "subject": [f"{name}.{i}" for i in range(len(ttls))],
            "data": [f"m{i}".encode() for i in range(len(ttls))],
            "headers": pa.array(
                [[] if t is None else [("Nats-TTL", t)] for t in ttls],
                pa.map_(pa.string(), pa.string()),
            ),
        }
    )


def test_a_read_gives_each_messages_ttl_as_the_server_reads_it(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    """`include_ttl` adds `ttl` (duration[s]): a Go duration or whole seconds as the
    seconds the server keeps, `never` as -1 s, no header as null; a read without it
    has no such column."""
    name = new_stream("TTLREAD", allow_msg_ttl=True, allow_direct=True)
    # 90.5s: the server keeps whole seconds, truncated (a sub-second TTL it refuses).
    texts = ["90s", "5m", "1h30m", "1.5h", "3600", "never", "NEVER", None, "90.5s"]
    assert client.publish(ttl_rows(name, texts), keep_control_headers=True).stored == len(texts)
    for method in ("consumer", "direct"):
        back = client.read(name, include_ttl=True, method=method).read_all()
        assert back.schema.field("ttl").type == pa.duration("s")
        seconds = [None if v is None else v.total_seconds() for v in back.column("ttl").to_pylist()]
        assert seconds == [90, 300, 5400, 5400, 3600, -1, -1, None, 90], method
    assert "ttl" not in client.read(name).read_all().schema.names
    latest = client.read(name, include_ttl=True, last_per_subject=True).read_all()
    assert latest.num_rows == len(texts)


def test_a_flattened_value_field_named_ttl_is_refused_beside_the_ttl_column(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    """Two columns named `ttl` would hide one of them: refused, naming the field; without
    `include_ttl` the value's own `ttl` is a column as any other."""
    name = new_stream("TTLFLAT", allow_msg_ttl=True)
    client.publish(pa.table({"subject": [f"{name}.a"], "data": [b'{"ttl": 5, "x": 1}']}))
    value = pa.schema([("ttl", pa.int64()), ("x", pa.int64())])
    flat = ja.ValueCodec("json", schema=value, flatten=True)
    with pytest.raises(BadInputError, match=r"'flatten'.*field 'ttl'"):
        client.read(name, include_ttl=True, codec=flat).read_all()
    assert client.read(name, codec=flat).read_all().column("ttl").to_pylist() == [5]
    nested = client.read(
        name, include_ttl=True, codec=ja.ValueCodec("json", schema=value)
    ).read_all()
    assert nested.column("value").to_pylist() == [{"ttl": 5, "x": 1}]
    assert nested.column("ttl").to_pylist() == [None]


def test_a_copy_keeps_ttls_with_the_ttl_column_and_drops_them_without(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    source = new_stream("TTLSRC", allow_msg_ttl=True)
    texts = ["90s", "never", None, "3600"]
    client.publish(ttl_rows(source, texts), keep_control_headers=True)

    kept = new_stream("TTLKEPT", allow_msg_ttl=True)
    dropped = new_stream("TTLDROP", allow_msg_ttl=True)

    def to(stream: str, table: pa.Table) -> pa.Table:
        subjects = [s.replace(source, stream, 1) for s in table.column("subject").to_pylist()]
        return table.set_column(
            table.schema.get_field_index("subject"), "subject", pa.array(subjects)
        )

    with_ttl = client.read(source, include_ttl=True, include_headers=True).read_all()
    assert client.publish(to(kept, with_ttl)).stored == 4
    assert stored_ttls(shared_nats_server.url, kept, [1, 2, 3, 4]) == {
        1: "90s",
        2: "never",
        3: None,
        4: "3600s",
    }
    # Without the column the copy drops them: the headers' Nats-TTL is a control header.
    without = client.read(source, include_headers=True).read_all()
    assert client.publish(to(dropped, without)).stored == 4
    assert stored_ttls(shared_nats_server.url, dropped, [1, 2, 3, 4]) == {
        1: None,
        2: None,
        3: None,
        4: None,
    }


def test_a_ttl_of_minus_one_second_is_never_and_other_negatives_are_refused(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("TTLNEVER", allow_msg_ttl=True)
    rows = pa.table(
        {"subject": [f"{name}.a"], "data": [b"x"], "ttl": pa.array([-1], pa.duration("s"))}
    )
    assert client.publish(rows).stored == 1
    assert stored_ttls(shared_nats_server.url, name, [1]) == {1: "never"}
    ms = rows.set_column(2, "ttl", pa.array([-1000], pa.duration("ms")))
    assert client.publish(ms).stored == 1
    assert stored_ttls(shared_nats_server.url, name, [2]) == {2: "never"}
    with pytest.raises(BadInputError, match=r"row 0: .*-1 s for never"):
        client.publish(rows.set_column(2, "ttl", pa.array([-2], pa.duration("s"))))


def test_the_cli_load_gives_every_row_the_ttl_of_its_flag(
    shared_nats_server: NatsServer,
    unique_name: Callable[[str], str],
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cli_helpers import cli

    stream = unique_name("TTLCLI")
    src = tmp_path / "rows.csv"
    src.write_text("a,b\n1,x\n2,y\n3,z\n")
    run = cli(
        capsys,
        "load",
        str(src),
        "--stream",
        stream,
        "--subject",
        f"{stream}.in",
        "--create-stream",
        "--ttl",
        "1h30m",
        "-s",
        shared_nats_server.url,
    )
    assert run.code == 0, run.err
    assert row_ttls(shared_nats_server.url, stream) == ["5400s"] * 3
    run = cli(
        capsys,
        "load",
        str(src),
        "--stream",
        stream,
        "--subject",
        f"{stream}.in",
        "--msg-id-prefix",
        "again-",
        "--ttl",
        "never",
        "-s",
        shared_nats_server.url,
    )
    assert run.code == 0, run.err
    assert row_ttls(shared_nats_server.url, stream) == ["5400s"] * 3 + ["never"] * 3
    # JSON lines are published as they are, each with the TTL too.
    lines = tmp_path / "rows.jsonl"
    lines.write_text('{"a": 1}\n{"a": 2}\n')
    run = cli(
        capsys,
        "load",
        str(lines),
        "--stream",
        stream,
        "--subject",
        f"{stream}.in",
        "--ttl",
        "60",
        "-s",
        shared_nats_server.url,
    )
    assert run.code == 0, run.err
    assert row_ttls(shared_nats_server.url, stream) == ["5400s"] * 3 + ["never"] * 3 + ["60s"] * 2
    # The same file again with another --ttl: the server drops its rows as duplicates
    # of the first load, which kept their first TTL; said, not reported as loaded.
    common = ["load", str(src), "--stream", stream, "--subject", f"{stream}.in"]
    run = cli(capsys, *common, "--ttl", "2h", "-s", shared_nats_server.url)
    assert run.code != 0 and "with other content" in run.err and "--ttl" in run.err, run.err
    run = cli(capsys, *common, "--ttl", "1h30m", "-s", shared_nats_server.url)
    assert run.code == 0, run.err  # as the first load: a re-run, nothing to say
    run = cli(capsys, *common, "-s", shared_nats_server.url)  # no --ttl this time
    assert run.code != 0 and "with other content" in run.err, run.err
    # TTLs given by the file's own headers (no --ttl): a re-run is a re-run.
    own = tmp_path / "own.jsonl"
    own.write_text("".join(f'{{"id": {i}, "h": {{"Nats-TTL": "1h"}}}}\n' for i in range(2)))
    with_headers = ["load", str(own), "--stream", stream, "--subject", f"{stream}.in"]
    for _ in range(2):
        run = cli(capsys, *with_headers, "--headers-column", "h", "-s", shared_nats_server.url)
        assert run.code == 0, run.err
    for bad in ("500ms", "1.5s", "5d", "soon"):
        run = cli(capsys, "load", str(src), "--stream", stream, "--subject", "x", "--ttl", bad)
        assert run.code == 2, (bad, run.err)
        assert "--ttl" in run.err, run.err
    with ja.connect(shared_nats_server.url) as c:
        assert c.stream_info(stream).config.allow_msg_ttl is True
        c.delete_stream(stream)
