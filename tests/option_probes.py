"""The option probes' shared part: every public option of every entry point changes
what happens, or is refused naming it.

The options are enumerated, not listed by hand: the signatures of the Python API (and
the dataclasses its ``**options`` spread into), the Spark option table per kind of
query and for the mapInArrow helpers ``read_fn`` / ``publish_fn``, and the argparse
actions of every CLI command. Each has a probe, made in the test module of its entry
point (``tests/<area>/test_every_option_<entry>.py``, each with its own
``ProbeTable``), and ``test_every_option_has_a_probe`` (tests/project/test_every_option.py)
fails when an option has none (a new option must come with its probe) or a probe names
an option that no longer exists.

A probe is one of:

- effect: the call with the option set gives another result against a real server
  than without it (or than with another value);
- refusal: a bad value is refused with an error that names the option (the Python
  name, the Spark name or the CLI flag the user wrote);
- delegated: a Spark connection option is shown to arrive unchanged in the
  ``ConnectOptions`` the data source connects with, whose fields each have an effect
  or refusal probe of their own under ``connect``.

Timeouts, backoffs and buffer sizes whose effect takes a paused server or seconds of
waiting are proven by refusal (their deadlines are proven in tests/faults/test_deadlines.py).
Spark readers and writers are driven as Spark drives them, by calling the data
source's methods in the test's process (no JVM), except ``load(path)`` and ``save(path)``,
which go through a real SparkSession, and the demo, run as a process. Stream and
consumer configs are proven field by field: each field set on create comes back in the
server's info. ``test_option_ignored_in_combination`` (tests/cli/test_every_option_cli.py)
holds combinations in which an option that acts elsewhere is taken and does nothing.

The meta test prints how many options each entry point has and how each is proven.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from cli_helpers import cli
from fault_helpers import paused_server
from jetstream_arrow import (
    ConsumedBatch,
    OrderedConsumer,
    Publisher,
    PullConsumer,
    PushConsumer,
)
from jetstream_arrow.cli import build_parser
from jetstream_arrow.exceptions import (
    BadInputError,
    ConnectionFailedError,
    JetStreamArrowError,
    OperationTimeoutError,
)
from jetstream_arrow.management import ConsumerConfig, StreamConfig
from jetstream_arrow.options import ConnectOptions
from natsserver import NatsServer, start_server

# -- enumeration -----------------------------------------------------------------------


def _defaulted(func: Callable[..., Any]) -> list[str]:
    """The parameters of ``func`` that have a default: its options (the others are
    the call's operands: the data, the stream, the consumer's name)."""
    return [
        p.name
        for p in inspect.signature(func).parameters.values()
        if p.default is not inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


def _fields(cls: type[Any], *without: str) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.name not in without]


def _spreads(func: Callable[..., Any]) -> bool:
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(func).parameters.values()
    )


#: Where a ``**options`` goes: the options of the call or dataclass it is spread into.
#: (An entry point that takes ``**options`` and is missing here fails the meta test.)
_SPREAD_INTO: dict[str, list[str]] = {
    "connect": [*_fields(ConnectOptions), "options"],
    "Client.publisher": _fields(ja.PublishOptions),
    "Client.publish": [*_defaulted(ja.Client.publisher), *_fields(ja.PublishOptions)],
    "Client.read": _fields(ja.ReadOptions),
    "PullConsumer.messages": _fields(ja.ConsumeOptions),
    "Client.create_stream": _fields(StreamConfig, "name"),
    "Client.update_stream": [],
    # Spread into a latest-per-subject read: its ReadOptions are probed on Client.read.
    "Client.read_counters": [],
    "Client.create_or_update_stream": [],
    "Client.create_consumer": [*_fields(ConsumerConfig), "filter_subject"],
    "Client.update_consumer": [],
    "Client.create_or_update_consumer": [],
}

#: The public entry points of the Python API whose options are enumerated. The
#: update and create-or-update calls build their configs as the create calls do
#: (same dataclasses, same builder); their own parameters are probed here.
PYTHON_ENTRY_POINTS: dict[str, Callable[..., Any]] = {
    "connect": ja.connect,
    "Client.publisher": ja.Client.publisher,
    "Client.publish": ja.Client.publish,
    "Publisher.publish": Publisher.publish,
    "Publisher.publish_batches": Publisher.publish_batches,
    "Client.read": ja.Client.read,
    "Client.first_seq_at": ja.Client.first_seq_at,
    "Client.read_counters": ja.Client.read_counters,
    "Client.ordered_consumer": ja.Client.ordered_consumer,
    "OrderedConsumer.messages": OrderedConsumer.messages,
    "Client.pull_consumer": ja.Client.pull_consumer,
    "PullConsumer.fetch": PullConsumer.fetch,
    "PullConsumer.messages": PullConsumer.messages,
    "Client.push_consumer": ja.Client.push_consumer,
    "PushConsumer.messages": PushConsumer.messages,
    "ConsumedBatch.ack": ConsumedBatch.ack,
    "ConsumedBatch.ack_sync": ConsumedBatch.ack_sync,
    "ConsumedBatch.nak": ConsumedBatch.nak,
    "ConsumedBatch.term": ConsumedBatch.term,
    "ConsumedBatch.in_progress": ConsumedBatch.in_progress,
    "Client.flush": ja.Client.flush,
    "Client.create_stream": ja.Client.create_stream,
    "Client.update_stream": ja.Client.update_stream,
    "Client.create_or_update_stream": ja.Client.create_or_update_stream,
    "Client.purge_stream": ja.Client.purge_stream,
    "Client.get_message": ja.Client.get_message,
    "Client.delete_message": ja.Client.delete_message,
    "Client.stream_info": ja.Client.stream_info,
    "Client.list_streams": ja.Client.list_streams,
    "Client.stream_names": ja.Client.stream_names,
    "Client.create_consumer": ja.Client.create_consumer,
    "Client.update_consumer": ja.Client.update_consumer,
    "Client.create_or_update_consumer": ja.Client.create_or_update_consumer,
    "Client.reset_consumer": ja.Client.reset_consumer,
    "run_sink": ja.run_sink,
}


def python_options() -> dict[str, list[str]]:
    out = {}
    for entry, func in PYTHON_ENTRY_POINTS.items():
        names = _defaulted(func)
        if _spreads(func):
            names = list(dict.fromkeys([*names, *_SPREAD_INTO[entry]]))
        out[entry] = names
    return out


def spark_kinds() -> dict[str, tuple[str, str]]:
    """Spark entry point -> (option scope, query kind)."""
    return {
        "spark.read": ("read", "batch"),
        "spark.readStream": ("read", "stream"),
        "df.write": ("write", "batch"),
        "df.writeStream": ("write", "stream"),
    }


def spark_options() -> dict[str, list[str]]:
    """The Spark names of the options each kind of query takes: the connection options
    and those of its scope that apply to it, and the path of ``load``/``save``/``start``
    (and, for writes, ``stream``, which means ``expectedStream``)."""
    from jetstream_arrow.spark.option_specs import CONNECT_SPECS, READ_SPECS, WRITE_SPECS

    out = {}
    for entry, (scope, kind) in spark_kinds().items():
        specs = CONNECT_SPECS + (READ_SPECS if scope == "read" else WRITE_SPECS)
        names = [s.spark for s in specs if s.queries in ("both", kind)]
        names.append("path")
        if scope == "write":
            names.append("stream")
        out[entry] = names
    return out


#: The mapInArrow helpers: they take the options of a batch read or write, in Python
#: spelling, as keyword arguments.
MAP_IN_ARROW = {"read_fn": ("read", "batch"), "publish_fn": ("write", "batch")}


def map_in_arrow_options() -> dict[str, list[str]]:
    from jetstream_arrow.spark.option_specs import CONNECT_SPECS, READ_SPECS, WRITE_SPECS

    out = {}
    for fn, (scope, kind) in MAP_IN_ARROW.items():
        specs = CONNECT_SPECS + (READ_SPECS if scope == "read" else WRITE_SPECS)
        names = [s.python for s in specs if s.queries in ("both", kind)]
        if scope == "write":
            names.append("stream")
        out[f"spark.functions.{fn}"] = names
    return out


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flag(action: argparse.Action) -> str:
    """The flag's first long spelling (``--progress`` of ``--progress/--no-progress``)."""
    return next(o for o in action.option_strings if o.startswith("--"))


def cli_options() -> dict[str, list[str]]:
    """Every flag of every command (positional operands and --help left out)."""
    parser = build_parser()
    out = {
        "jetstream-arrow": [
            _flag(a)
            for a in parser._actions
            if a.option_strings and not isinstance(a, argparse._HelpAction)
        ]
    }
    for name, sub in _subcommands(parser).items():
        out[f"jetstream-arrow {name}"] = [
            _flag(a)
            for a in sub._actions
            if a.option_strings and not isinstance(a, argparse._HelpAction)
        ]
    return out


def enumerated() -> dict[str, list[str]]:
    return {**python_options(), **spark_options(), **map_in_arrow_options(), **cli_options()}


def key(entry: str, option: str) -> str:
    return f"{entry} :: {option}"


# -- the probe table ---------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    entry: str
    option: str
    kind: str  # "effect", "refusal" or "delegated"
    run: Callable[[Ctx], None]


#: Every probe of every test module, by key: the meta test compares it with the
#: enumerated options (tests/project/test_every_option.py).
ALL_PROBES: dict[str, Probe] = {}


class ProbeTable:
    """The probes of one test module (the options of one or a few entry points), which
    its ``test_option`` runs. Each probe is entered in ``ALL_PROBES`` too."""

    def __init__(self) -> None:
        self.probes: dict[str, Probe] = {}

    def register(self, entry: str, option: str, kind: str, run: Callable[[Ctx], None]) -> None:
        k = key(entry, option)
        assert k not in ALL_PROBES, f"two probes for {k}"
        self.probes[k] = ALL_PROBES[k] = Probe(entry, option, kind, run)

    def effect(
        self, *pairs: tuple[str, str]
    ) -> Callable[[Callable[[Ctx], None]], Callable[[Ctx], None]]:
        def wrap(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
            for entry, option in pairs:
                self.register(entry, option, "effect", fn)
            return fn

        return wrap

    def refused(
        self,
        entry: str,
        option: str,
        call: Callable[[Ctx], Any],
        names: tuple[str, ...] | None = None,
        error: type[BaseException] | tuple[type[BaseException], ...] = BadInputError,
    ) -> None:
        """A probe: ``call`` raises ``error`` naming the option (or one of ``names``)."""
        wanted = names or (option,)

        def run(ctx: Ctx) -> None:
            try:
                result = call(ctx)
            except error as err:
                text = str(err)
            else:
                pytest.fail(
                    f"{entry}: the {option!r} given was accepted (the call returned a "
                    f"{type(result).__name__}); it must be refused naming the option"
                )
            assert any(n in text for n in wanted), (
                f"the error does not name {' or '.join(map(repr, wanted))}: {text}"
            )

        self.register(entry, option, "refusal", run)

    def cli_refused(
        self, entry: str, flag: str, argv: Callable[[Ctx], list[str]], code: int = 2
    ) -> None:
        """A probe: the command exits with ``code`` and stderr names ``flag``."""

        def run(ctx: Ctx) -> None:
            got = ctx.cli(*argv(ctx))
            assert got.code == code and flag in got.err, (
                f"exit {got.code}; stderr does not name {flag}: {got.err}"
            )

        self.register(entry, flag, "refusal", run)

    def params(self, starting_spark: Iterable[str] = ()) -> list[Any]:
        """The keys of the module's probes, for ``parametrize``; those in
        ``starting_spark`` start a JVM and are marked, so `-m "not spark"` leaves them out."""
        marked = set(starting_spark)
        assert marked <= set(self.probes), f"no such probes: {marked - set(self.probes)}"
        return [
            pytest.param(k, marks=[pytest.mark.spark, pytest.mark.slow]) if k in marked else k
            for k in sorted(self.probes)
        ]

    def run(
        self,
        probe_key: str,
        ctx: Ctx,
        capsys: pytest.CaptureFixture[str],
        request: pytest.FixtureRequest,
    ) -> None:
        ctx.capsys = capsys
        ctx.request = request
        self.probes[probe_key].run(ctx)


# -- the context every probe gets ------------------------------------------------------------


@dataclass
class Ctx:
    """What probes share: a client of the session's server, streams they made (deleted
    at the end of the module), servers with authentication and TLS (started on first
    use), and a temporary directory."""

    server: NatsServer
    client: ja.Client
    tmp: Path
    factory: pytest.TempPathFactory
    made: list[str] = field(default_factory=list)
    extra_servers: dict[str, Any] = field(default_factory=dict)
    capsys: Any = None
    request: Any = None

    @property
    def url(self) -> str:
        return self.server.url

    def name(self, prefix: str = "OPT") -> str:
        return f"{prefix}_{uuid.uuid4().hex[:10]}"

    def stream(self, count: int = 0, **config: Any) -> str:
        """A new memory stream on ``<name>.>`` holding ``count`` messages ``m<i>`` on
        ``<name>.a`` and ``<name>.b`` in turn."""
        name = self.name()
        config.setdefault("storage", "memory")
        self.client.create_stream(name, [f"{name}.>"], **config)
        self.made.append(name)
        if count:
            self.fill(name, count)
        return name

    def fill(self, name: str, count: int, start: int = 0, size: int = 0) -> None:
        """``count`` messages ``m<i>`` (padded with dots to ``size`` bytes)."""
        rows = range(start, start + count)
        self.client.publish(
            pa.table(
                {
                    "subject": [f"{name}.{'ab'[i % 2]}" for i in rows],
                    "data": [f"m{i}".ljust(size, ".").encode() for i in rows],
                }
            )
        )

    def big_stream(self) -> str:
        """Six messages of 100 bytes each: byte bounds of a few hundred split them."""
        name = self.stream()
        self.fill(name, 6, size=100)
        return name

    def rows(self, name: str, **read: Any) -> pa.Table:
        return self.client.read(name, **read).read_all()

    def cli(self, *argv: str) -> Any:
        return cli(self.capsys, *argv)

    def spark(self) -> Any:
        return self.request.getfixturevalue("spark")


def table(name: str, count: int, subject: str = "a", size: int = 2) -> pa.Table:
    return pa.table(
        {
            "subject": [f"{name}.{subject}"] * count,
            "data": [f"{i:0{size}d}".encode() for i in range(count)],
        }
    )


def headers_of(ctx: Ctx, name: str) -> list[dict[str, list[str]]]:
    got = ctx.rows(name, include_headers=True)
    return [dict(h) if h else {} for h in got.column("headers").to_pylist()]


def atomic_batch_sizes(ctx: Ctx, name: str) -> list[int]:
    """The sizes of the atomic batches stored in stream ``name``, in order: the batch
    sequence of each commit."""
    with ctx.client.read(name, include_headers=True) as reader:
        headers = reader.read_all().column("headers").to_pylist()
    return [
        int(h["Nats-Batch-Sequence"][0]) for h in map(dict, headers) if "Nats-Batch-Commit" in h
    ]


def msg_ids(ctx: Ctx, name: str) -> list[str]:
    out = []
    for row in ctx.rows(name, include_headers=True).column("headers").to_pylist():
        found = dict(row or []).get("Nats-Msg-Id")
        out.append(found[0] if found else None)
    return out


def raises(call: Callable[[], Any], error: Any = Exception) -> BaseException:
    with pytest.raises(error) as raised:
        call()
    return raised.value


def must_refuse(call: Callable[[], Any], option: str, what: str) -> None:
    """``call`` (``what`` the user asked for) raises BadInputError naming ``option``."""
    try:
        result = call()
    except Exception as err:
        raised = err
    else:
        pytest.fail(
            f"{what} was accepted (gave {result!r:.120}); it must be refused naming {option!r}"
        )
    if not isinstance(raised, BadInputError):
        pytest.fail(
            f"{what}: {type(raised).__name__} instead of BadInputError naming {option!r}: {raised}"
        )
    assert option in str(raised), f"{what}: the error does not name {option!r}: {raised}"


# == Spark =====================================================================================
#
# The data source is driven as Spark drives it: its reader, stream reader and writers are
# made from the options and their methods called (partitions and read for a read,
# initialOffset, latestOffset, partitions and read for a streaming read, write for a
# batch write). A streaming write's task needs a running micro-batch, so its publishing
# options are shown to reach the same publisher as a batch write's ("delegated").


def data_source(ctx: Ctx, **options: Any) -> Any:
    from jetstream_arrow.spark.datasource import JetStreamDataSource

    return JetStreamDataSource({"servers": ctx.url, **{k: str(v) for k, v in options.items()}})


def spark_read(ctx: Ctx, **options: Any) -> tuple[list[Any], pa.Table]:
    """A batch read: its partitions and its rows."""
    source = data_source(ctx, **options)
    reader = source.reader(source.schema())
    parts = reader.partitions()
    batches = [b for p in parts for b in reader.read(p)]
    schema = batches[0].schema if batches else None
    return parts, pa.Table.from_batches(batches, schema)


def stream_reader(ctx: Ctx, **options: Any) -> Any:
    source = data_source(ctx, **options)
    return source.streamReader(source.schema())


def micro_batch(
    ctx: Ctx, **options: Any
) -> tuple[dict[str, Any], dict[str, Any], list[Any], list[pa.RecordBatch]]:
    """The first micro-batch of a streaming read: start, end, partitions, batches."""
    reader = stream_reader(ctx, **options)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    parts = reader.partitions(start, end)
    return start, end, parts, [b for p in parts for b in reader.read(p)]


def write_schema(rows: pa.Table) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(rows.schema)


def spark_write(ctx: Ctx, rows: pa.Table, **options: Any) -> Any:
    """One task of a batch write of ``rows``; its commit message."""
    source = data_source(ctx, **options)
    writer = source.writer(write_schema(rows), False)
    return writer.write(iter(rows.to_batches()))


def stream_writer(ctx: Ctx, rows: pa.Table, **options: Any) -> Any:
    source = data_source(ctx, **options)
    return source.streamWriter(write_schema(rows), False)


def seqs_of(batches: Any) -> list[int]:
    if isinstance(batches, pa.Table):
        return list(batches.column("seq").to_pylist())
    return [s for b in batches for s in b.column("seq").to_pylist()]


#: A value of each connection option, and the options it needs beside it.
CONNECT_SAMPLES: dict[str, Any] = {
    "user": "u",
    "password": "p",
    "token": "t",
    "creds": "/probe/user.creds",
    "creds_content": "-----BEGIN NATS USER JWT-----probe",
    "nkey_seed": "SUAPROBE",
    "tls_ca": "/probe/ca.pem",
    "tls_cert": "/probe/client.pem",
    "tls_key": "/probe/client.key",
    "tls_ca_content": "-----BEGIN CERTIFICATE-----ca",
    "tls_cert_content": "-----BEGIN CERTIFICATE-----client",
    "tls_key_content": "-----BEGIN PRIVATE KEY-----client",
    "tls_required": True,
    "tls_first": True,
    "name": "probe-name",
    "connect_timeout": 2.5,
    "request_timeout": 3.5,
    "max_reconnects": 3,
    "reconnect_delay": 0.25,
    "retry_on_initial_connect": True,
    "ping_interval": 7.0,
    "domain": "probe",
    "api_prefix": "PROBE.API",
    "inbox_prefix": "_PROBE",
    "max_decompressed_bytes": 12345,
    "decompress": False,
}
CONNECT_COMPANIONS = {
    "user": "password",
    "password": "user",
    "tls_cert": "tls_key",
    "tls_key": "tls_cert",
    "tls_cert_content": "tls_key_content",
    "tls_key_content": "tls_cert_content",
}


def parsed_options(ctx: Ctx, entry: str, **options: Any) -> Any:
    """The options the data source holds for a query of kind ``entry``."""
    rows = pa.table({"subject": ["x"], "data": [b"x"]})
    if entry == "spark.read":
        source = data_source(ctx, stream="PROBE", **options)
        return source.reader(source.schema()).opts
    if entry == "spark.readStream":
        return stream_reader(ctx, stream="PROBE", **options).opts
    if entry == "df.write":
        return data_source(ctx, **options).writer(write_schema(rows), False).opts
    return stream_writer(ctx, rows, **options).opts


def spark_connect_probes(probes: ProbeTable, entries: Iterable[str]) -> None:
    """Each connection option of the Spark ``entries`` arrives in the ConnectOptions
    the data source connects with (whose fields are probed under ``connect``)."""
    from jetstream_arrow.spark.option_specs import CONNECT_SPECS

    for entry in entries:
        for spec in CONNECT_SPECS:
            if spec.python == "servers":
                continue

            def run(ctx: Ctx, entry: str = entry, python: str = spec.python) -> None:
                given = {python: CONNECT_SAMPLES[python]}
                if python in CONNECT_COMPANIONS:
                    other = CONNECT_COMPANIONS[python]
                    given[other] = CONNECT_SAMPLES[other]
                spark = {
                    camel(k): str(v).lower() if isinstance(v, bool) else v for k, v in given.items()
                }
                assert parsed_options(ctx, entry, **spark).connect == ConnectOptions(
                    servers=ctx.url, **given
                )

            probes.register(entry, spec.spark, "delegated", run)


def _a_value_not_the_default(spec: Any) -> Any:
    """A value the option takes that is not its default."""
    if spec.kind == "bool":
        return not spec.default
    if spec.choices:
        return next(c for c in spec.choices if c != spec.default)
    if spec.kind in ("int", "float"):
        low = spec.minimum if spec.minimum is not None else 0
        value = low + 1 if low + 1 != spec.default else low + 2
        return int(value) if spec.kind == "int" else float(value)
    return "probe"


def native_spark_probes(probes: ProbeTable, entries: Iterable[str]) -> None:
    """A Spark option that Spark takes from the core's read or publish table by its
    rule (every such option it does not list as not taken, see
    jetstream_arrow.spark.option_specs) and that no probe of the module names is
    delegated: its value arrives unchanged at the native option, whose effect the
    Python entry's probe shows. Called last in each Spark probe module."""
    from jetstream_arrow.spark.option_specs import READ_SPECS, WRITE_SPECS
    from jetstream_arrow.spark.options import parse_read_options, parse_write_options

    kinds = {**spark_kinds(), **{f"spark.functions.{fn}": k for fn, k in MAP_IN_ARROW.items()}}
    for entry in entries:
        scope, queries = kinds[entry]
        for spec in READ_SPECS if scope == "read" else WRITE_SPECS:
            name = spec.python if entry.startswith("spark.functions.") else spec.spark
            taken = spec.native_field == spec.python and spec.queries in ("both", queries)
            if not taken or key(entry, name) in ALL_PROBES:
                continue

            def run(ctx: Ctx, spec: Any = spec, name: str = name, scope: str = scope) -> None:
                value = _a_value_not_the_default(spec)
                if scope == "read":
                    opts = parse_read_options({"stream": "S", name: value}, queries=None)
                    native = opts.reader_kwargs()
                else:
                    native = parse_write_options({name: value}).publisher_kwargs()
                assert native[spec.native_field] == value != spec.default

            probes.register(entry, name, "delegated", run)


def camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)


def rides_through_a_pause(ctx: Ctx, seqs_read: Callable[..., list[int]]) -> None:
    """Option resumeTimeout: a read (the requests for its streams' state, and the read
    itself) rides through a paused server for that long, and gives up at the first
    unanswered request with 0. ``seqs_read(stream, **options)``: the sequences read."""
    name = ctx.stream(count=3)
    quick = {"request_timeout": 0.5}
    # Connected before the pause (a connection is not made while it lasts).
    assert seqs_read(name, **quick, resume_timeout=10) == [1, 2, 3]
    with paused_server(ctx.server, 1.5):
        assert seqs_read(name, **quick, resume_timeout=10) == [1, 2, 3]
    with paused_server(ctx.server, 1.5):
        raises(lambda: seqs_read(name, **quick, resume_timeout=0), OperationTimeoutError)


# -- the module's context --------------------------------------------------------------------


@pytest.fixture(scope="module")
def ctx(_shared_server: NatsServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ctx]:
    if not _shared_server.running:
        _shared_server.start()
    with ja.connect(_shared_server.url) as client:
        context = Ctx(_shared_server, client, tmp_path_factory.mktemp("options"), tmp_path_factory)
        try:
            yield context
        finally:
            for name in context.made:
                with contextlib.suppress(JetStreamArrowError):
                    client.delete_stream(name)
            for made in context.extra_servers.values():
                for part in made if isinstance(made, tuple) else (made,):
                    if isinstance(part, ja.Client):
                        part.close()
                    elif isinstance(part, NatsServer):
                        part.stop()


# == Typed payloads: the codec of every Python entry point, the value options of Spark ===========

VALUE_AVRO = {
    "type": "record",
    "name": "Probe",
    "fields": [{"name": "id", "type": "int"}],
}


def json_stream(ctx: Ctx, payloads: list[bytes] | None = None) -> str:
    """A stream of JSON objects ``{"id": i}`` (or ``payloads``) on ``<name>.j``."""
    name = ctx.stream()
    payloads = payloads or [json.dumps({"id": i}).encode() for i in range(3)]
    ctx.client.publish(pa.table({"subject": [f"{name}.j"] * len(payloads), "data": payloads}))
    return name


def value_ids(table: pa.Table | pa.RecordBatch) -> list[int]:
    return [v["id"] for v in table.column("value").to_pylist()]


def probe_descriptor() -> str:
    """A descriptor set of ``message probe.V { int32 id = 1; }``, built with protobuf's
    own descriptor messages (no protoc needed), written once to a file."""
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"probe-{os.getpid()}.desc"
    if not path.exists():
        from google.protobuf import descriptor_pb2

        file = descriptor_pb2.FileDescriptorProto(name="probe.proto", package="probe")
        file.syntax = "proto3"
        message = file.message_type.add(name="V")
        message.field.add(
            name="id",
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
        path.write_bytes(descriptor_pb2.FileDescriptorSet(file=[file]).SerializeToString())
    return str(path)


def dead_letter_probes(probes: ProbeTable, entries: Iterable[str]) -> None:
    """Mode deadletter: the good rows, and the bad payload in the dead-letter stream,
    for each read entry point; refused without the mode, naming both options."""
    id_int = (
        '{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}}]}'
    )

    def read_fn_table(ctx: Ctx, **options: Any) -> pa.Table:
        python = {"valueFormat": "value_format", "valueSchema": "value_schema"}
        python |= {"deadLetterStream": "dead_letter_stream", "stream": "stream"}
        given = {python.get(k, k): v for k, v in options.items()}
        return call_read_fn(ctx, [(given["stream"], 1, None)], **given)

    for entry in entries:

        def table_of(ctx: Ctx, entry: str = entry, **options: Any) -> pa.Table:
            if entry == "spark.read":
                return spark_read(ctx, **options)[1]
            if entry == READ_FN:
                return read_fn_table(ctx, **options)
            got = micro_batch(ctx, startingOffsets="earliest", **options)[3]
            return pa.Table.from_batches(got)

        def dead_letter_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = json_stream(ctx, [b'{"id": 1}', b"{bad", b'{"id": 3}'])
            dead = ctx.stream()
            read = {"stream": name, "valueFormat": "json", "valueSchema": id_int}
            got = table_of(ctx, mode="deadletter", deadLetterStream=dead, **read)
            assert got.column("seq").to_pylist() == [1, 3]
            assert "_corrupt_record" not in got.column_names
            assert ctx.rows(dead).column("data").to_pylist() == [b"{bad"]
            error = raises(lambda: table_of(ctx, deadLetterStream=dead, **read), BadInputError)
            assert "'deadLetterStream'" in str(error) and "'mode'" in str(error)

        probes.register(
            entry,
            "deadLetterStream" if entry != READ_FN else "dead_letter_stream",
            "effect",
            dead_letter_,
        )


# -- what the probes of several entry points share ----------------------------------------


def stored_encodings(ctx: Ctx, name: str, count: int) -> list[str | None]:
    """Each message's Content-Encoding as stored: a read (decompress off) hands the
    header out as the server holds it."""
    with ja.connect(ctx.url, decompress=False) as as_stored:
        read = as_stored.read(name, include_headers=True).read_all()
    assert read.num_rows == count, read.num_rows
    return [
        dict(h or {}).get("Content-Encoding", [None])[0] for h in read.column("headers").to_pylist()
    ]


def auth_server(ctx: Ctx) -> tuple[NatsServer, str]:
    """A server with a user/password user and an nkey user; returns it and the seed."""
    if "auth" not in ctx.extra_servers:
        import nkeys

        seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
        public = nkeys.from_seed(bytearray(seed)).public_key.decode()
        config = f"""
            authorization {{
                users: [
                    {{user: probe, password: secret}}
                    {{nkey: {public}}}
                ]
            }}
        """
        ctx.extra_servers["auth"] = (start_configured_server(ctx, config), seed.decode())
    server, seed = ctx.extra_servers["auth"]
    return server, seed


def token_server(ctx: Ctx) -> NatsServer:
    if "token" not in ctx.extra_servers:
        ctx.extra_servers["token"] = start_configured_server(
            ctx, "authorization { token: probe-token }"
        )
    server: NatsServer = ctx.extra_servers["token"]
    return server


def tls_server(ctx: Ctx) -> tuple[NatsServer, dict[str, str]]:
    """A server that wants TLS first and a client certificate; returns the files."""
    if "tls" not in ctx.extra_servers:
        import trustme

        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        client_cert = ca.issue_cert("probe@example.com")
        d = ctx.factory.mktemp("tls")
        files = {
            "ca": d / "ca.pem",
            "server_cert": d / "server.pem",
            "server_key": d / "server.key",
            "cert": d / "client.pem",
            "key": d / "client.key",
        }
        ca.cert_pem.write_to_path(str(files["ca"]))
        cert.private_key_pem.write_to_path(str(files["server_key"]))
        cert.cert_chain_pems[0].write_to_path(str(files["server_cert"]))
        client_cert.private_key_pem.write_to_path(str(files["key"]))
        client_cert.cert_chain_pems[0].write_to_path(str(files["cert"]))
        config = f"""
            tls {{
                cert_file: "{files["server_cert"]}"
                key_file: "{files["server_key"]}"
                ca_file: "{files["ca"]}"
                verify: true
                handshake_first: true
            }}
        """
        ctx.extra_servers["tls"] = (
            start_configured_server(ctx, config),
            {k: str(v) for k, v in files.items()},
        )
    server, files = ctx.extra_servers["tls"]
    return server, files


def start_configured_server(ctx: Ctx, config: str) -> NatsServer:
    workdir = ctx.factory.mktemp("nats-opt")
    return start_server(
        lambda: NatsServer(workdir, name=f"opt{len(ctx.extra_servers)}", config_extra=config)
    )


def heartbeat_zero_refused(call: Callable[[], Any]) -> None:
    """A heartbeat of 0 s cannot be kept: it must be refused naming the option, not
    taken and then reported as missed heartbeats."""
    must_refuse(call, "heartbeat", "heartbeat=0")


def timed_stream(ctx: Ctx) -> tuple[str, datetime]:
    """A stream of 3 messages, then a time, then 3 more (made once per module)."""
    if "timed" not in ctx.extra_servers:
        name = ctx.stream(count=3)
        time.sleep(0.05)
        middle = datetime.now(timezone.utc)
        time.sleep(0.05)
        ctx.fill(name, 3, start=3)
        ctx.extra_servers["timed"] = (name, middle)
    found: tuple[str, datetime] = ctx.extra_servers["timed"]
    return found


def pull(ctx: Ctx, count: int = 4, **config: Any) -> tuple[str, str]:
    name = ctx.stream(count=count)
    config.setdefault("ack_policy", "explicit")
    ctx.client.create_consumer(name, durable_name="C", **config)
    return name, "C"


# -- the connection and output flags of a command (load, export, sink) ---------------------


def reach_command(ctx: Ctx, command: str, url: str, *flags: str) -> Any:
    """Run ``command`` against ``url``; a run that reached JetStream ends in success
    (load creates its stream) or says the stream does not exist (export, sink)."""
    name = ctx.name()
    if command == "load":
        argv = [
            "load",
            write_csv(ctx, SAMPLE_CSV),
            "--stream",
            name,
            "--subject",
            f"{name}.x",
            "--create-stream",
        ]
    elif command == "sink":
        argv = ["sink", name, "--parquet", str(ctx.tmp / name)]
    else:
        argv = ["export", name, "-o", str(ctx.tmp / f"{name}.parquet")]
    return ctx.cli(*argv, "-s", url, "--connect-timeout", "2", *flags)


def reached_jetstream(run: Any) -> bool:
    return run.code == 0 or "does not exist" in run.err


def connection_probes(probes: ProbeTable, command: str) -> None:
    """The connection and output flags of ``command``."""
    entry = f"jetstream-arrow {command}"

    def reg(flag: str, kind: str = "effect") -> Callable[[Callable[[Ctx], None]], None]:
        def wrap(fn: Callable[[Ctx], None]) -> None:
            probes.register(entry, flag, kind, fn)

        return wrap

    @reg("--servers")
    def _(ctx: Ctx) -> None:
        assert reached_jetstream(reach_command(ctx, command, ctx.url))
        dead = reach_command(ctx, command, "nats://127.0.0.1:1")
        assert dead.code == 1 and "cannot reach NATS" in dead.err, dead

    @reg("--context")
    def _(ctx: Ctx) -> None:
        context = ctx.tmp / f"{uuid.uuid4().hex[:8]}.json"
        context.write_text(json.dumps({"url": "nats://127.0.0.1:1"}))
        name = ctx.name()
        argv = (
            ["load", write_csv(ctx, SAMPLE_CSV), "--stream", name, "--subject", "x.y"]
            if command == "load"
            else ["sink", name, "--parquet", str(ctx.tmp / name)]
            if command == "sink"
            else ["export", name, "-o", str(ctx.tmp / "x.parquet")]
        )
        run = ctx.cli(*argv, "--context", str(context), "--connect-timeout", "1")
        assert run.code == 1 and "nats://127.0.0.1:1" in run.err, run

    @reg("--user")
    def _(ctx: Ctx) -> None:
        server, _ = auth_server(ctx)
        assert reached_jetstream(
            reach_command(ctx, command, server.url, "--user", "probe", "--password", "secret")
        )
        run = reach_command(ctx, command, server.url, "--user", "nobody", "--password", "secret")
        assert run.code == 1 and "permission denied" in run.err, run

    @reg("--password")
    def _(ctx: Ctx) -> None:
        server, _ = auth_server(ctx)
        run = reach_command(ctx, command, server.url, "--user", "probe", "--password", "wrong")
        assert run.code == 1 and "permission denied" in run.err, run
        # A password without a user is sent nowhere: refused, not dropped.
        alone = reach_command(ctx, command, ctx.url, "--password", "secret")
        assert alone.code == 2 and "--password" in alone.err, (
            f"--password without --user: exit {alone.code}, stderr {alone.err!r}"
        )

    @reg("--token")
    def _(ctx: Ctx) -> None:
        server = token_server(ctx)
        assert reached_jetstream(reach_command(ctx, command, server.url, "--token", "probe-token"))
        assert (
            "permission denied" in reach_command(ctx, command, server.url, "--token", "wrong").err
        )

    @reg("--nkey")
    def _(ctx: Ctx) -> None:
        server, seed = auth_server(ctx)
        seed_file = ctx.tmp / f"{uuid.uuid4().hex[:8]}.nk"
        seed_file.write_text(seed)
        assert reached_jetstream(reach_command(ctx, command, server.url, "--nkey", str(seed_file)))
        assert "permission denied" in reach_command(ctx, command, server.url).err

    probes.cli_refused(
        entry,
        "--creds",
        lambda ctx: [*reach_argv(ctx, command), "--creds", "/no/such.creds"],
        code=1,
    )

    def tls(ctx: Ctx, *without: str) -> Any:
        server, files = tls_server(ctx)
        flags = {"--tls-ca": files["ca"], "--tls-cert": files["cert"], "--tls-key": files["key"]}
        argv = [x for f, v in flags.items() if f not in without for x in (f, v)]
        if "--tls-first" not in without:
            argv.append("--tls-first")
        return reach_command(ctx, command, server.url, *argv)

    @reg("--tls-first")
    def _(ctx: Ctx) -> None:
        assert reached_jetstream(tls(ctx))
        assert not reached_jetstream(tls(ctx, "--tls-first"))

    @reg("--tls-ca")
    def _(ctx: Ctx) -> None:
        assert not reached_jetstream(tls(ctx, "--tls-ca"))
        missing = reach_command(ctx, command, ctx.url, "--tls-ca", "/no/such/ca.pem")
        assert missing.code == 1 and "--tls-ca" in missing.err, missing

    for flag in ("--tls-cert", "--tls-key"):

        def cert(ctx: Ctx, flag: str = flag) -> None:
            assert not reached_jetstream(tls(ctx, "--tls-cert", "--tls-key"))
            other = "--tls-key" if flag == "--tls-cert" else "--tls-cert"
            files = tls_server(ctx)[1]
            given = {"--tls-cert": files["cert"], "--tls-key": files["key"]}
            missing = reach_command(
                ctx, command, ctx.url, flag, "/no/such/file.pem", other, given[other]
            )
            assert missing.code == 1 and flag in missing.err, missing

        probes.register(entry, flag, "effect", cert)

    @reg("--domain")
    def _(ctx: Ctx) -> None:
        run = reach_command(ctx, command, ctx.url, "--domain", "nowhere")
        assert run.code == 1 and "--domain" in run.err, run

    @reg("--api-prefix")
    def _(ctx: Ctx) -> None:
        assert reached_jetstream(reach_command(ctx, command, ctx.url, "--api-prefix", "$JS.API"))
        run = reach_command(ctx, command, ctx.url, "--api-prefix", "ELSEWHERE.API")
        assert run.code == 1 and "--api-prefix" in run.err, run

    probes.cli_refused(
        entry,
        "--connect-timeout",
        lambda ctx: [*reach_argv(ctx, command), "--connect-timeout", "0"],
    )

    def moving(ctx: Ctx, *flags: str) -> Any:
        """The command moving data: a load, or an export or sink of a stream that has
        some."""
        if command == "load":
            return reach_command(ctx, command, ctx.url, *flags)
        name = ctx.stream(count=2)
        if command == "sink":
            return ctx.cli("sink", name, "--parquet", str(ctx.tmp / name), "-s", ctx.url, *flags)
        out = str(ctx.tmp / f"{name}.parquet")
        return ctx.cli("export", name, "-o", out, "-s", ctx.url, *flags)

    @reg("--progress")
    def _(ctx: Ctx) -> None:
        assert "\r" in moving(ctx, "--progress").err
        assert "\r" not in moving(ctx).err

    @reg("--quiet")
    def _(ctx: Ctx) -> None:
        assert moving(ctx).out
        assert not moving(ctx, "--quiet").out

    @reg("--debug")
    def _(ctx: Ctx) -> None:
        assert reach_command(ctx, command, "nats://127.0.0.1:1").code == 1
        raises(
            lambda: reach_command(ctx, command, "nats://127.0.0.1:1", "--debug"),
            ConnectionFailedError,
        )


def reach_argv(ctx: Ctx, command: str) -> list[str]:
    name = ctx.name()
    if command == "load":
        return [
            "load",
            write_csv(ctx, SAMPLE_CSV),
            "--stream",
            name,
            "--subject",
            f"{name}.x",
            "-s",
            ctx.url,
        ]
    if command == "sink":
        return ["sink", name, "--parquet", str(ctx.tmp / name), "-s", ctx.url]
    return ["export", name, "-o", str(ctx.tmp / f"{name}.parquet"), "-s", ctx.url]


# -- the mapInArrow helper read_fn, called as Spark calls it on a worker; the CLI's files ----


def call_read_fn(ctx: Ctx, rows: list[tuple[str, int, int | None]], **options: Any) -> pa.Table:
    from jetstream_arrow.spark.functions import read_fn

    fn = read_fn(servers=ctx.url, **options)
    ranges = pa.table(
        {
            "stream": [r[0] for r in rows],
            "start_seq": pa.array([r[1] for r in rows], pa.int64()),
            "end_seq": pa.array([r[2] for r in rows], pa.int64()),
        }
    )
    batches = list(fn(iter(ranges.to_batches())))
    return pa.Table.from_batches(batches) if batches else pa.table({})


READ_FN = "spark.functions.read_fn"


def write_csv(ctx: Ctx, text: str, suffix: str = ".csv") -> str:
    path = ctx.tmp / f"{uuid.uuid4().hex[:8]}{suffix}"
    path.write_text(text)
    return str(path)


SAMPLE_CSV = "id,zip,kind\n1,02134,a\n2,10001,b\n"
