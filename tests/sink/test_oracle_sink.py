"""The lake sink (``jetstream_arrow.sink.run_sink`` and ``jetstream-arrow sink``)
checked against independent oracles: what nats-py published and saw stored, against
what the table formats' own readers read back (``deltalake`` for Delta, DuckDB and
``pyarrow.dataset`` for the Parquet dataset's manifest files). The package's own
``client.read`` is never the oracle.

Histories are generated (hypothesis) and applied with nats-py: JSON objects whose
fields appear late, are null, or absent (empty objects), Unicode text, payloads that
are not JSON objects (to the dead-letter stream), interior deletes, purges of a
subject, the stream deleted and made again, and sink runs between them. The oracle of
a run is nats-py's snapshot of the stream when the run starts: every message past the
position the table held (its last sequence landed) is landed once, with its stream,
subject, sequence, timestamp (microseconds) and each field as ``json.loads`` reads
it; every payload that is not a JSON object is in the dead-letter stream once, its
bytes and source in headers, its msg id naming the source. A stream made again under its
name is either refused (an error, nothing landed) or landed from its first message.
A work-queue stream is consumed through a consumer the user made with the server's
defaults, and is empty after a run.

Hypothesis examples (``max_examples``): Delta 12, Parquet 12, work queue 8; with the
plain tests after them about 30 s when they pass (a failing property also shrinks).

Differences found, each kept as a plain test or an explicit example, each now fixed
but the last: a stream made again and refilled up to the table's position was landed
short, by range and through a work queue's consumer (``REMADE_TO_POSITION``); a
work-queue consumer with a finite ``max_deliver`` let the position pass messages it
would never deliver again (now refused); Parquet partition values that look like
numbers read back as integers by ``pyarrow.dataset``; the dead letters of a stream
made again were dropped by the dead-letter stream as duplicates of the old stream's,
while the run reported them published; a dead letter of a payload marked
``Content-Encoding`` that does not decompress lost the mark; an Arrow IPC payload of no
rows lands nothing and is not dead-lettered (``test_an_arrow_payload_of_no_rows_...``).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import jetstream_arrow as ja
from cli_helpers import cli
from jetstream_arrow.exceptions import JetStreamArrowError
from jetstream_arrow.sink import app_id, dataset_files, read_manifest
from natsserver import NatsServer
from oracle_histories import PyNats, Stored, StreamShape
from oracle_tables import TEXT

pytestmark = pytest.mark.timeout(300)

UniqueName = Callable[[str], str]

#: The value fields of generated objects and the Arrow type each has (one type per
#: field: a field that changes type is refused by the sink, as documented).
FIELDS = {"i": pa.int64(), "s": pa.string(), "b": pa.bool_(), "f": pa.float64(), "名": pa.string()}
#: Subject tokens after the stream's name: two levels, one a number with a leading zero
#: (a partition value that looks like an integer), one not ASCII.
SUBJECT_TOKENS = ("007.x", "eu.x", "eu.y", "é.z", "10.x")
#: Payloads that are not a JSON object.
NOT_OBJECTS = (b"{not json", b"[1, 2]", b"42", b'"text"', b"\xff\xfe", b"null")
#: The dead-letter headers (docs/sink.md).
SOURCE_STREAM = "Jetstream-Arrow-Source-Stream"
SOURCE_SUBJECT = "Jetstream-Arrow-Source-Subject"
SOURCE_SEQ = "Jetstream-Arrow-Source-Seq"
ERROR = "Jetstream-Arrow-Error"


def examples(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@pytest.fixture
def py(shared_nats_server: NatsServer, unique_name: UniqueName) -> Iterator[PyNats]:
    """nats-py on the shared server, with a stream of its own kept for the test (the
    server removes its store's directory with its last stream, and a stream made
    meanwhile fails)."""
    with PyNats(shared_nats_server.url) as conn:
        anchor = unique_name("SNK_ANCHOR")
        conn.create_stream(anchor, StreamShape())
        try:
            yield conn
        finally:
            conn.delete_stream(anchor)


# -- histories ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Put:
    token: str
    payload: bytes


@dataclass(frozen=True)
class Delete:
    where: float


@dataclass(frozen=True)
class Purge:
    token: str


@dataclass(frozen=True)
class Sink:
    """A sink run now (until caught up)."""


@dataclass(frozen=True)
class Recreate:
    """The stream deleted and made again under its name (then refilled by later puts)."""


Step = Put | Delete | Purge | Sink | Recreate

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "i": st.one_of(st.sampled_from((0, -1, 2**53 + 1, 2**63 - 1, -(2**63))), st.integers(-9, 9)),
    "s": TEXT,
    "b": st.booleans(),
    "f": finite_floats,
    "名": TEXT,
}


@st.composite
def objects(draw: st.DrawFn, fields: tuple[str, ...]) -> bytes:
    """A JSON object of some of ``fields`` (none: ``{}``), each value or null."""
    chosen = draw(st.lists(st.sampled_from(fields), unique=True, max_size=len(fields)))
    value = {k: draw(st.none() | VALUES[k]) for k in chosen}
    return json.dumps(value, ensure_ascii=draw(st.booleans())).encode()


@st.composite
def histories(draw: st.DrawFn, malformed: bool, recreate: bool, purges: bool = True) -> list[Step]:
    """Steps ending with a sink run; fields become available one by one, so some are
    first seen late (after a run, or after others)."""
    steps: list[Step] = []
    order = draw(st.permutations(tuple(FIELDS)))
    known = 1
    for _ in range(draw(st.integers(2, 4))):
        for _ in range(draw(st.integers(1, 8))):
            if draw(st.integers(0, 5)) == 0:
                known = min(known + 1, len(order))
            kind = draw(st.integers(0, 9))
            token = draw(st.sampled_from(SUBJECT_TOKENS))
            if malformed and kind == 0:
                steps.append(Put(token, draw(st.sampled_from(NOT_OBJECTS))))
            elif kind == 1:
                steps.append(Delete(draw(st.floats(0, 1))))
            elif kind == 2 and purges:
                steps.append(Purge(token))
            elif kind == 3 and recreate and draw(st.integers(0, 3)) == 0:
                steps.append(Recreate())
            else:
                steps.append(Put(token, draw(objects(tuple(order[:known])))))
        steps.append(Sink())
    return steps


# -- the oracle -----------------------------------------------------------------------------


def _is_object(payload: bytes) -> bool:
    try:
        return isinstance(json.loads(payload), dict)
    except ValueError:
        return False


@dataclass
class Expected:
    """What the table and the dead-letter stream must hold, message by message."""

    rows: list[tuple[Stored, dict[str, Any]]] = field(default_factory=list)
    dead: list[Stored] = field(default_factory=list)

    def add(self, stored: list[Stored], after: int) -> None:
        for m in stored:
            if m.seq <= after:
                continue
            if _is_object(m.data):
                self.rows.append((m, json.loads(m.data)))
            else:
                self.dead.append(m)


def _typed(value: Any) -> Any:
    """A value with its type, so that ``True`` is not ``1`` and ``1.0`` not ``1``."""
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    return (type(value).__name__, value)


def check_rows(table: pa.Table, stream: str, expected: Expected, partition_by: list[str]) -> None:
    """The landed table, read by a format's own reader, against the oracle."""
    want = sorted(expected.rows, key=lambda r: (r[0].time_ns, r[0].seq))
    assert table.num_rows == len(want), f"{table.num_rows} rows landed, {len(want)} expected"
    if not want:
        return
    ts = pc.cast(pc.cast(table.column("timestamp"), pa.timestamp("us", "UTC")), pa.int64())
    table = table.append_column("_ts_us", ts)
    table = table.sort_by([("_ts_us", "ascending"), ("seq", "ascending")])
    got = table.to_pylist()
    fields = {k for _, v in want for k in v}
    for name in fields:
        if name not in table.column_names:
            nulls = [v.get(name) for _, v in want]
            assert all(x is None for x in nulls), f"field {name!r} did not land as a column"
    for (m, value), row in zip(want, got, strict=True):
        where = f"seq {m.seq}"
        assert row["stream"] == stream, where
        assert row["subject"] == m.subject, where
        assert row["seq"] == m.seq, where
        assert row["_ts_us"] == m.ts_us, where
        for name in fields:
            if name in table.column_names:
                assert _typed(row[name]) == _typed(value.get(name)), (where, name, row[name])
        tokens = m.subject.split(".")
        for name in partition_by:
            if name == "subject_token_2":
                assert row[name] == tokens[1], (where, name, row[name], tokens[1])
            elif name == "date":
                day = time.strftime("%Y-%m-%d", time.gmtime(m.time_ns // 10**9))
                assert str(row[name]) == day, (where, row[name], day)
    # Nothing but the message columns, the partition columns and the fields.
    allowed = {"stream", "subject", "seq", "timestamp", "_ts_us", *partition_by, *FIELDS, *fields}
    assert set(table.column_names) <= allowed, set(table.column_names) - allowed


def check_dead_letters(py: PyNats, dead_stream: str, stream: str, expected: Expected) -> None:
    """Each payload that is not a JSON object in the dead-letter stream once: its bytes,
    its source in headers, msg id ``<stream>:<seq>:<reader>``."""
    stored = py.snapshot(dead_stream)
    got = []
    for m in stored:
        headers = dict(m.headers or ())
        assert headers[SOURCE_STREAM] == (stream,), headers
        assert headers[ERROR][0], "a dead letter without its error"
        seq = int(headers[SOURCE_SEQ][0])
        # The reader's part is a digest of the target and the stream's creation.
        prefix, _, reader = headers["Nats-Msg-Id"][0].rpartition(":")
        assert prefix == f"{stream}:{seq}" and len(reader) == 16, headers
        got.append((seq, headers[SOURCE_SUBJECT][0], m.data))
    want = [(m.seq, m.subject, m.data) for m in expected.dead]
    assert sorted(got) == sorted(want)


# -- the targets read by their own readers ----------------------------------------------------


def read_delta(path: Path) -> pa.Table:
    if not DeltaTable.is_deltatable(str(path)):
        return pa.table({"stream": pa.array([], pa.string())})
    return DeltaTable(str(path)).to_pyarrow_table()


def delta_position(path: Path, stream: str) -> int:
    if not DeltaTable.is_deltatable(str(path)):
        return 0
    return int(DeltaTable(str(path)).transaction_version(app_id(stream)) or 0)


def read_parquet_duckdb(path: Path) -> pa.Table:
    """The files the manifest lists, as docs/sink.md reads them with DuckDB."""
    files = dataset_files(path)
    if not files:
        return pa.table({"stream": pa.array([], pa.string())})
    return duckdb.sql(
        f"SELECT * FROM read_parquet({files!r}, hive_partitioning = false, union_by_name = true)"
    ).to_arrow_table()


def read_parquet_pyarrow(path: Path) -> pa.Table:
    """The files the manifest lists, with ``pyarrow.dataset`` as docs/sink.md reads
    them: the partition columns are in the files (no ``partitioning``), the files'
    schemas unified (a column added by a later commit is missing from earlier files)."""
    files = dataset_files(path)
    if not files:
        return pa.table({"stream": pa.array([], pa.string())})
    schema = pa.unify_schemas([pq.read_schema(f) for f in files])
    return ds.dataset(files, schema=schema, format="parquet").to_table()


def parquet_position(path: Path, stream: str) -> int:
    manifest = read_manifest(path) if path.exists() else None
    return int(manifest["positions"].get(stream, 0)) if manifest else 0


# -- running a history --------------------------------------------------------------------


@dataclass
class Run:
    """A history applied, the sink run at each ``Sink`` step."""

    py: PyNats
    client: ja.Client
    stream: str
    dead: str
    shape: StreamShape
    target: Callable[[], Any]
    position: Callable[[], int]
    read: Callable[[], pa.Table]
    partition_by: list[str]
    durable: str | None = None
    codec: Any = "json"
    expected: Expected = field(default_factory=Expected)
    refused: bool = False
    recreated: bool = False

    def make_stream(self) -> None:
        config = self.shape.config(self.stream)
        if self.durable is not None:
            config["retention"] = "workqueue"
        self.py.run(self.py.api(f"STREAM.CREATE.{self.stream}", config))
        if self.durable is not None:
            # A consumer the user made, with the server's defaults but what a sink
            # needs (a durable pull consumer with explicit acks).
            self.py.create_consumer(
                self.stream, {"durable_name": self.durable, "ack_policy": "explicit"}
            )

    def apply(self, steps: list[Step]) -> None:
        self.make_stream()
        for step in steps:
            if self.refused:
                return
            if isinstance(step, Put):
                self.py.publish_sync(f"{self.stream}.{step.token}", step.payload)
            elif isinstance(step, Delete):
                live = self.py.live_seqs(self.stream)
                if live:
                    seq = live[min(int(step.where * len(live)), len(live) - 1)]
                    assert self.py.run(self.py.js.delete_msg(self.stream, seq))
            elif isinstance(step, Purge):
                self.py.run(
                    self.py.js.purge_stream(self.stream, subject=f"{self.stream}.{step.token}")
                )
            elif isinstance(step, Recreate):
                self.py.run(self.py.api(f"STREAM.DELETE.{self.stream}"))
                self.make_stream()
                self.recreated = True
            else:
                self.sink()

    def sink(self) -> None:
        before = self.position()
        stored = self.py.snapshot(self.stream)
        landed_before = self.read().num_rows
        last_seq = self.py.stream_state(self.stream)["last_seq"]
        made_again = self.recreated and before > 0
        try:
            ja.run_sink(
                self.client,
                [self.stream],
                self.target(),
                codec=self.codec,
                partition_by=self.partition_by,
                commit_rows=7,
                batch_rows=3,
                dead_letter_stream=self.dead,
                durable=self.durable,
            )
        except JetStreamArrowError:
            # Refused only when the stream is not the one landed (made again under its
            # name): then nothing of it lands.
            assert made_again, f"the sink failed at position {before}, last seq {last_seq}"
            assert self.read().num_rows == landed_before
            self.refused = True
            return
        self.recreated = False
        # A stream made again is landed from its first message: its sequences say
        # nothing of what the table holds of the old one.
        self.expected.add(stored, 0 if made_again else before)
        if self.durable is None:
            assert self.position() == max(last_seq, 0 if made_again else before)
        else:
            # Acks reach the stream a moment after the run's flush.
            deadline = time.monotonic() + 5
            while (held := self.py.stream_state(self.stream)["messages"]) and (
                time.monotonic() < deadline
            ):
                time.sleep(0.05)
            assert held == 0, f"the work queue holds {held} after a run"


def _run_history(
    py: PyNats,
    client: ja.Client,
    unique_name: UniqueName,
    tmp_path: Path,
    steps: list[Step],
    kind: str,
    partition_by: list[str],
    durable: bool = False,
    codec: Any = "json",
) -> None:
    stream, dead = unique_name("SNK"), unique_name("DLQ")
    path = tmp_path / f"{kind}-{stream}"
    py.create_stream(dead, StreamShape())
    if kind == "delta":
        target: Callable[[], Any] = lambda: ja.DeltaTarget(path)  # noqa: E731
        position = lambda: delta_position(path, stream)  # noqa: E731
        readers = [lambda: read_delta(path)]
    else:
        target = lambda: ja.ParquetTarget(path)  # noqa: E731
        position = lambda: parquet_position(path, stream)  # noqa: E731
        readers = [lambda: read_parquet_duckdb(path), lambda: read_parquet_pyarrow(path)]
    run = Run(
        py,
        client,
        stream,
        dead,
        StreamShape(),
        target,
        position,
        readers[0],
        partition_by,
        durable=unique_name("lake") if durable else None,
        codec=codec,
    )
    try:
        run.apply(steps)
        for read in readers:
            check_rows(read(), stream, run.expected, partition_by)
        check_dead_letters(py, dead, stream, run.expected)
    finally:
        py.delete_stream(stream)
        py.delete_stream(dead)


#: A stream made again and refilled up to the table's position: its message is not the
#: one landed at that sequence.
REMADE_TO_POSITION = [
    Put("eu.x", b'{"i": 1}'),
    Sink(),
    Recreate(),
    Put("eu.x", b'{"i": 2}'),
    Sink(),
]

PARTITIONS = st.sampled_from(([], ["date"], ["subject_token_2"], ["date", "subject_token_2"]))


@pytest.mark.timeout(600)
@examples(12)
@example(steps=REMADE_TO_POSITION, partition_by=[])
@given(steps=histories(malformed=True, recreate=True), partition_by=PARTITIONS)
def test_delta_sink_lands_each_message_once_as_nats_py_stored_it(
    py: PyNats,
    client: ja.Client,
    unique_name: UniqueName,
    tmp_path: Path,
    steps: list[Step],
    partition_by: list[str],
) -> None:
    """Generated histories landed in Delta by runs between their steps, read back by
    ``deltalake``: every message past the table's position once, values as
    ``json.loads`` reads them; payloads that are not objects dead-lettered once."""
    _run_history(py, client, unique_name, tmp_path, steps, "delta", partition_by)


@pytest.mark.timeout(600)
@examples(12)
@given(steps=histories(malformed=True, recreate=True), partition_by=PARTITIONS)
def test_parquet_sink_lands_each_message_once_as_nats_py_stored_it(
    py: PyNats,
    client: ja.Client,
    unique_name: UniqueName,
    tmp_path: Path,
    steps: list[Step],
    partition_by: list[str],
) -> None:
    """The same into a partitioned Parquet dataset, read back through its manifest by
    DuckDB (the files' own columns, ``union_by_name``) and by ``pyarrow.dataset``: the
    partition columns are the subject's tokens and days as written (``007`` stays
    text)."""
    _run_history(py, client, unique_name, tmp_path, steps, "parquet", partition_by)


@pytest.mark.timeout(600)
@examples(8)
@example(steps=REMADE_TO_POSITION, partition_by=[])
@given(steps=histories(malformed=True, recreate=True), partition_by=PARTITIONS)
def test_work_queue_sink_through_a_user_consumer_lands_each_message_once(
    py: PyNats,
    client: ja.Client,
    unique_name: UniqueName,
    tmp_path: Path,
    steps: list[Step],
    partition_by: list[str],
) -> None:
    """A work-queue stream consumed through a durable consumer the user made with the
    server's defaults (``max_ack_pending`` 1,000, ``max_deliver`` unlimited), the
    value schema given: every message the queue held lands once, the bad ones are
    dead-lettered once, and the queue is empty after each run."""
    codec = ja.ValueCodec("json", schema=pa.schema(list(FIELDS.items())))
    _run_history(
        py, client, unique_name, tmp_path, steps, "delta", partition_by, durable=True, codec=codec
    )


# -- found or known differences, each as a plain test -------------------------------------


def _publish_all(py: PyNats, subject: str, payloads: list[bytes]) -> None:
    async def go() -> None:
        for i in range(0, len(payloads), 500):
            await asyncio.gather(*(py.js.publish(subject, p) for p in payloads[i : i + 500]))

    py.run(go())


@pytest.mark.parametrize("kind", ["delta", "parquet"])
@pytest.mark.parametrize("first", ["objects", "empty"])
def test_a_json_field_first_seen_after_the_sample_lands(
    py: PyNats, client: ja.Client, unique_name: UniqueName, tmp_path: Path, kind: str, first: str
) -> None:
    """1,500 objects (``{"a": i}``, or ``{}``) then 10 with a field ``discount``: every
    value lands, the late field as a column (docs/sink.md: a field first seen later is
    added as a column)."""
    stream = unique_name("LATE")
    py.create_stream(stream, StreamShape())
    try:
        early = [b"{}" if first == "empty" else json.dumps({"a": i}).encode() for i in range(1500)]
        late = [json.dumps({"a": i, "discount": i / 2 + 0.25}).encode() for i in range(10)]
        _publish_all(py, f"{stream}.x", early)
        _publish_all(py, f"{stream}.y", late)
        path = tmp_path / kind
        target = ja.DeltaTarget(path) if kind == "delta" else ja.ParquetTarget(path)
        report = ja.run_sink(client, [stream], target, codec="json")
        assert report.rows == 1510
        stored = py.snapshot(stream)
        expected = Expected()
        expected.add(stored, 0)
        table = read_delta(path) if kind == "delta" else read_parquet_duckdb(path)
        assert "discount" in table.column_names, table.column_names
        check_rows(table, stream, expected, [])
    finally:
        py.delete_stream(stream)


def test_parquet_partition_values_read_back_as_the_subject_s_tokens(
    py: PyNats, client: ja.Client, unique_name: UniqueName, tmp_path: Path
) -> None:
    """``subject_token_2`` of ``<stream>.007.x`` is the text ``007``, read by DuckDB and
    ``pyarrow.dataset`` as docs/sink.md reads the dataset (not the integer 7)."""
    stream = unique_name("PART")
    py.create_stream(stream, StreamShape())
    try:
        # Only tokens that look like numbers: a reader guessing types from directory
        # names would take them for integers.
        for token in ("007", "10"):
            py.publish_sync(f"{stream}.{token}.x", json.dumps({"t": token}).encode())
        ja.run_sink(
            client,
            [stream],
            ja.ParquetTarget(tmp_path),
            codec="json",
            partition_by=["subject_token_2"],
        )
        for read in (read_parquet_duckdb, read_parquet_pyarrow):
            table = read(tmp_path).sort_by("seq")
            assert table.column("subject_token_2").to_pylist() == ["007", "10"], read
    finally:
        py.delete_stream(stream)


def test_a_stream_made_again_past_the_position_is_refused_or_landed_anew(
    py: PyNats, client: ja.Client, unique_name: UniqueName, tmp_path: Path
) -> None:
    """The table holds sequences 1-3 of a stream that is then deleted and made again
    with 5 messages: its first three are not the ones landed, so they are landed (or
    the run refused), never skipped."""
    stream = unique_name("REMADE")
    py.create_stream(stream, StreamShape())
    try:
        for i in range(3):
            py.publish_sync(f"{stream}.x", json.dumps({"old": i}).encode())
        ja.run_sink(client, [stream], ja.DeltaTarget(tmp_path), codec="json")
        py.run(py.api(f"STREAM.DELETE.{stream}"))
        py.create_stream(stream, StreamShape())
        for i in range(5):
            py.publish_sync(f"{stream}.x", json.dumps({"new": i}).encode())
        try:
            ja.run_sink(client, [stream], ja.DeltaTarget(tmp_path), codec="json")
        except JetStreamArrowError:
            assert read_delta(tmp_path).num_rows == 3
            return
        table = read_delta(tmp_path)
        assert sorted(v for v in table.column("new").to_pylist() if v is not None) == [
            0,
            1,
            2,
            3,
            4,
        ]
    finally:
        py.delete_stream(stream)


def test_a_work_queue_consumer_with_a_finite_max_deliver_loses_nothing(
    py: PyNats, client: ja.Client, unique_name: UniqueName, tmp_path: Path
) -> None:
    """A user's work-queue consumer with ``max_deliver`` 1: a run that dies after
    messages were delivered and before its commit leaves them unacknowledged and never
    delivered again. The next run lands every message the queue holds, or refuses the
    consumer; it never ends "caught up" past them."""
    stream, durable = unique_name("WQMD"), "lake"
    config = StreamShape().config(stream)
    config["retention"] = "workqueue"
    py.run(py.api(f"STREAM.CREATE.{stream}", config))
    try:
        py.create_consumer(
            stream,
            {
                "durable_name": durable,
                "ack_policy": "explicit",
                "max_deliver": 1,
                "ack_wait": 1_000_000_000,
            },
        )
        for i in range(20):
            py.publish_sync(f"{stream}.x", json.dumps({"i": i}).encode())

        class Died(Exception):
            pass

        def die(progress: Any) -> None:
            if progress.pending:
                raise Died

        first_refused = False
        try:
            ja.run_sink(
                client,
                [stream],
                ja.DeltaTarget(tmp_path),
                codec="json",
                durable=durable,
                commit_rows=10,
                batch_rows=5,
                on_progress=die,
            )
        except Died:
            pass
        except JetStreamArrowError:
            first_refused = True
        if first_refused:
            assert py.stream_state(stream)["messages"] == 20
            return
        time.sleep(1.5)  # the first run's deliveries' ack wait runs out
        try:
            ja.run_sink(
                client,
                [stream],
                ja.DeltaTarget(tmp_path),
                codec="json",
                durable=durable,
                commit_rows=10,
                batch_rows=5,
            )
        except JetStreamArrowError:
            return
        landed = sorted(read_delta(tmp_path).column("i").to_pylist())
        assert landed == list(range(20)), f"landed {landed}"
    finally:
        py.delete_stream(stream)


def test_the_cli_sink_lands_a_parquet_dataset_and_dead_letters(
    py: PyNats,
    shared_nats_server: NatsServer,
    unique_name: UniqueName,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``jetstream-arrow sink`` once, with a partition by subject token and a
    dead-letter stream, checked with DuckDB and nats-py."""
    stream, dead = unique_name("CLI"), unique_name("CLIDLQ")
    py.create_stream(stream, StreamShape())
    py.create_stream(dead, StreamShape())
    try:
        payloads = [
            json.dumps({"i": 1, "s": "é😀"}).encode(),
            b"not json",
            json.dumps({"i": None}).encode(),
            b"{}",
            json.dumps({"s": "late", "f": 2.5}).encode(),
            b"[1]",
        ]
        for k, p in enumerate(payloads):
            py.publish_sync(f"{stream}.{('007', 'eu')[k % 2]}.x", p)
        py.run(py.js.delete_msg(stream, 3))
        run = cli(
            capsys,
            "sink",
            stream,
            "--parquet",
            str(tmp_path),
            "--value-format",
            "json",
            "--partition-by",
            "subject_token_2",
            "--dead-letter-stream",
            dead,
            "-s",
            shared_nats_server.url,
        )
        assert run.code == 0, run.err
        expected = Expected()
        expected.add(py.snapshot(stream), 0)
        check_rows(read_parquet_duckdb(tmp_path), stream, expected, ["subject_token_2"])
        check_dead_letters(py, dead, stream, expected)
    finally:
        py.delete_stream(stream)
        py.delete_stream(dead)


@pytest.mark.parametrize("kind", ["delta", "parquet"])
def test_dead_letters_of_a_stream_made_again_are_not_dropped_as_duplicates(
    py: PyNats, client: ja.Client, unique_name: UniqueName, tmp_path: Path, kind: str
) -> None:
    """A stream made again under its name, landed into a new table as docs/sink.md
    advises, with one dead-letter stream: its bad payload at sequence 1 is another
    message than the old stream's, and is dead-lettered too."""
    stream, dead = unique_name("AGAIN"), unique_name("AGAINDLQ")
    py.create_stream(dead, StreamShape())
    try:
        for generation, payload in enumerate((b"{first", b"{second")):
            py.create_stream(stream, StreamShape())
            py.publish_sync(f"{stream}.x", payload)
            path = tmp_path / f"{kind}-{generation}"
            target = ja.DeltaTarget(path) if kind == "delta" else ja.ParquetTarget(path)
            report = ja.run_sink(client, [stream], target, codec="json", dead_letter_stream=dead)
            assert report.dead_letters == 1
            py.run(py.api(f"STREAM.DELETE.{stream}"))
        letters = sorted(m.data for m in py.snapshot(dead))
        assert letters == [b"{first", b"{second"], letters
    finally:
        py.delete_stream(stream)
        py.delete_stream(dead)


def test_compressed_payloads_that_do_not_decode_keep_their_encoding_in_dead_letters(
    py: PyNats, client: ja.Client, unique_name: UniqueName, tmp_path: Path
) -> None:
    """A gzip payload that is not JSON, and a payload marked gzip that is not gzip: each
    dead letter says, with its own ``Content-Encoding``, what its bytes are, so that
    decoding it as marked gives the source payload decoded as marked (or the bytes, when
    the source's do not decompress)."""
    stream, dead = unique_name("GZ"), unique_name("GZDLQ")
    py.create_stream(stream, StreamShape())
    py.create_stream(dead, StreamShape())
    try:
        marked = [("Content-Encoding", "gzip")]
        py.publish_sync(f"{stream}.x", gzip.compress(b'{"i": 1}'), marked)
        py.publish_sync(f"{stream}.x", gzip.compress(b"{not json"), marked)
        py.publish_sync(f"{stream}.x", b"not gzip at all", marked)
        report = ja.run_sink(
            client, [stream], ja.DeltaTarget(tmp_path), codec="json", dead_letter_stream=dead
        )
        assert (report.rows, report.dead_letters) == (1, 2)

        def content(m: Stored) -> bytes:
            encoding = dict(m.headers or ()).get("Content-Encoding")
            if encoding is None:
                return m.data
            assert encoding == ("gzip",), encoding
            try:
                return gzip.decompress(m.data)
            except OSError:
                return m.data  # marked, but not gzip: its bytes are what it is

        by_seq = {int(dict(m.headers or ())[SOURCE_SEQ][0]): m for m in py.snapshot(dead)}
        assert sorted(by_seq) == [2, 3]
        assert content(by_seq[2]) == b"{not json"
        # The bytes the source holds, with the mark that says what they are.
        assert by_seq[3].data == b"not gzip at all"
        assert dict(by_seq[3].headers or ()).get("Content-Encoding") == ("gzip",)
    finally:
        py.delete_stream(stream)
        py.delete_stream(dead)


def test_an_arrow_payload_of_no_rows_is_accounted_for(
    py: PyNats, client: ja.Client, unique_name: UniqueName, tmp_path: Path
) -> None:
    """Arrow IPC payloads of one row and of no rows: every message leaves a trace in
    the table or the dead-letter stream (its sequence), none vanishes."""
    stream, dead = unique_name("IPC"), unique_name("IPCDLQ")
    py.create_stream(stream, StreamShape())
    py.create_stream(dead, StreamShape())
    schema = pa.schema([("n", pa.int64())])

    def ipc(rows: list[int]) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema) as writer:
            writer.write_table(pa.table({"n": rows}, schema=schema))
        return sink.getvalue().to_pybytes()

    try:
        for rows in ([1], [], [3]):
            py.publish_sync(f"{stream}.x", ipc(rows))
        ja.run_sink(
            client, [stream], ja.DeltaTarget(tmp_path), codec="arrow", dead_letter_stream=dead
        )
        landed = set(read_delta(tmp_path).column("seq").to_pylist())
        dead_seqs = {int(dict(m.headers or ())[SOURCE_SEQ][0]) for m in py.snapshot(dead)}
        assert landed | dead_seqs == {1, 2, 3}, (landed, dead_seqs)
    finally:
        py.delete_stream(stream)
        py.delete_stream(dead)
