"""Every public option of every entry point changes what happens, or is refused naming it.

The options are enumerated, not listed by hand: the signatures of the Python API (and
the dataclasses its ``**options`` spread into), the Spark option table per kind of
query and for the mapInArrow helpers ``read_fn`` / ``publish_fn``, and the argparse
actions of every CLI command. Each has a probe in ``PROBES``,
and ``test_every_option_has_a_probe`` fails when an option has none (a new option
must come with its probe) or a probe names an option that no longer exists.

A probe is one of:

- effect: the call with the option set gives another result against a real server
  than without it (or than with another value);
- refusal: a bad value is refused with an error that names the option (the Python
  name, the Spark name or the CLI flag the user wrote);
- delegated: a Spark connection option is shown to arrive unchanged in the
  ``ConnectOptions`` the data source connects with, whose fields each have an effect
  or refusal probe of their own under ``connect``.

Timeouts, backoffs and buffer sizes whose effect takes a paused server or seconds of
waiting are proven by refusal (their deadlines are proven in tests/test_deadlines.py).
Spark readers and writers are driven here as Spark drives them, by calling the data
source's methods in this process (no JVM), except ``load(path)`` and ``save(path)``,
which go through a real SparkSession, and the demo, run as a process. Stream and
consumer configs are proven field by field: each field set on create comes back in the
server's info. ``test_option_ignored_in_combination`` holds combinations in which an
option that acts elsewhere is taken and does nothing.

The meta test prints how many options each entry point has and how each is proven.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import inspect
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import jetstream_arrow as ja
from cli_helpers import cli, cli_process
from conftest_spark import SPARK_ERRORS, seqs, spark
from fault_helpers import paused_server
from jetstream_arrow import (
    ConsumedBatch,
    OrderedConsumer,
    Publisher,
    PullConsumer,
    PushConsumer,
    _core,
)
from jetstream_arrow.cli import build_parser
from jetstream_arrow.exceptions import (
    ApiError,
    AuthorizationError,
    BadInputError,
    ConnectionFailedError,
    JetStreamArrowError,
    JetStreamNotEnabledError,
    MissedHeartbeatsError,
    OperationTimeoutError,
    PublishError,
)
from jetstream_arrow.kv import KvColumns
from jetstream_arrow.management import ConsumerConfig, StreamConfig, StreamSource
from jetstream_arrow.options import ConnectOptions
from jetstream_arrow.positions import POSITION_SUBJECT_PREFIX
from natspy import data_messages, first_data_seq
from natsserver import NatsServer, start_server, wait_until

__all__ = ["spark"]  # a fixture, imported for pytest

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


def _spark_kinds() -> dict[str, tuple[str, str]]:
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
    for entry, (scope, kind) in _spark_kinds().items():
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


PROBES: dict[str, Probe] = {}


def _register(entry: str, option: str, kind: str, run: Callable[[Ctx], None]) -> None:
    k = key(entry, option)
    assert k not in PROBES, f"two probes for {k}"
    PROBES[k] = Probe(entry, option, kind, run)


def effect(*pairs: tuple[str, str]) -> Callable[[Callable[[Ctx], None]], Callable[[Ctx], None]]:
    def wrap(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
        for entry, option in pairs:
            _register(entry, option, "effect", fn)
        return fn

    return wrap


def refused(
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

    _register(entry, option, "refusal", run)


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


# == Python: connect =========================================================================

_CT = {"connect_timeout": 2.0}


@effect(("connect", "servers"))
def _servers(ctx: Ctx) -> None:
    with ja.connect(ctx.url) as c:
        assert c.server_info()["server_id"] == ctx.server.monitor("varz")["server_id"]
    raises(lambda: ja.connect("nats://127.0.0.1:1", **_CT), ConnectionFailedError)


@effect(("connect", "options"))
def _options(ctx: Ctx) -> None:
    with ja.connect(options=ConnectOptions(servers=ctx.url, name="opt-probe")) as c:
        c.flush()
        assert _connz(ctx.server, "opt-probe")


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
        ctx.extra_servers["auth"] = (_start(ctx, config), seed.decode())
    server, seed = ctx.extra_servers["auth"]
    return server, seed


def token_server(ctx: Ctx) -> NatsServer:
    if "token" not in ctx.extra_servers:
        ctx.extra_servers["token"] = _start(ctx, "authorization { token: probe-token }")
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
        ctx.extra_servers["tls"] = (_start(ctx, config), {k: str(v) for k, v in files.items()})
    server, files = ctx.extra_servers["tls"]
    return server, files


def _start(ctx: Ctx, config: str) -> NatsServer:
    workdir = ctx.factory.mktemp("nats-opt")
    return start_server(
        lambda: NatsServer(workdir, name=f"opt{len(ctx.extra_servers)}", config_extra=config)
    )


@effect(("connect", "user"))
def _user(ctx: Ctx) -> None:
    server, _ = auth_server(ctx)
    with ja.connect(server.url, user="probe", password="secret") as c:
        c.flush()
    raises(lambda: ja.connect(server.url, user="nobody", password="secret"), AuthorizationError)


@effect(("connect", "password"))
def _password(ctx: Ctx) -> None:
    server, _ = auth_server(ctx)
    raises(lambda: ja.connect(server.url, user="probe", password="wrong"), AuthorizationError)
    # A password without a user is sent nowhere: it must be refused, not dropped.
    must_refuse(
        lambda: ja.connect(ctx.url, password="secret").close(),
        "password",
        "connect(password=...) without user",
    )


@effect(("connect", "token"))
def _token(ctx: Ctx) -> None:
    server = token_server(ctx)
    with ja.connect(server.url, token="probe-token") as c:
        c.flush()
    raises(lambda: ja.connect(server.url, token="wrong"), AuthorizationError)


@effect(("connect", "nkey_seed"))
def _nkey(ctx: Ctx) -> None:
    server, seed = auth_server(ctx)
    with ja.connect(server.url, nkey_seed=seed) as c:
        c.flush()
    raises(lambda: ja.connect(server.url), AuthorizationError)


refused(
    "connect",
    "creds",
    lambda ctx: ja.connect(ctx.url, creds=str(ctx.tmp / "missing.creds")),
)
refused(
    "connect",
    "creds_content",
    lambda ctx: ja.connect(ctx.url, creds_content="no creds here"),
)


@effect(("connect", "tls_ca"))
def _tls_ca(ctx: Ctx) -> None:
    server, files = tls_server(ctx)
    both = {"tls_cert": files["cert"], "tls_key": files["key"], "tls_first": True, **_CT}
    with ja.connect(server.url, tls_ca=files["ca"], **both) as c:
        c.flush()
    raises(lambda: ja.connect(server.url, **both), ConnectionFailedError)
    # A CA file that does not exist is refused, whatever the server offers.
    must_refuse(
        lambda: ja.connect(ctx.url, tls_ca=str(ctx.tmp / "missing-ca.pem")).close(),
        "tls_ca",
        "connect(tls_ca=<a file that does not exist>)",
    )


@effect(("connect", "tls_cert"), ("connect", "tls_key"))
def _tls_cert(ctx: Ctx) -> None:
    server, files = tls_server(ctx)
    with ja.connect(
        server.url,
        tls_ca=files["ca"],
        tls_cert=files["cert"],
        tls_key=files["key"],
        tls_first=True,
        **_CT,
    ) as c:
        c.flush()
    raises(lambda: ja.connect(server.url, tls_ca=files["ca"], tls_first=True, **_CT))


@effect(
    ("connect", "tls_ca_content"), ("connect", "tls_cert_content"), ("connect", "tls_key_content")
)
def _tls_content(ctx: Ctx) -> None:
    server, files = tls_server(ctx)
    text = {k: Path(files[k]).read_text() for k in ("ca", "cert", "key")}
    client = {"tls_cert_content": text["cert"], "tls_key_content": text["key"]}
    with ja.connect(server.url, tls_ca_content=text["ca"], **client, tls_first=True, **_CT) as c:
        c.flush()
    # Without the CA the system's roots are trusted; without the client's pair the
    # server refuses.
    raises(lambda: ja.connect(server.url, **client, tls_first=True, **_CT))
    raises(lambda: ja.connect(server.url, tls_ca_content=text["ca"], tls_first=True, **_CT))


@effect(("connect", "tls_first"))
def _tls_first(ctx: Ctx) -> None:
    server, files = tls_server(ctx)
    tls = {"tls_ca": files["ca"], "tls_cert": files["cert"], "tls_key": files["key"]}
    with ja.connect(server.url, tls_first=True, **tls, **_CT) as c:
        c.flush()
    raises(lambda: ja.connect(server.url, **tls, **_CT), JetStreamArrowError)


@effect(("connect", "tls_required"))
def _tls_required(ctx: Ctx) -> None:
    with ja.connect(ctx.url) as c:
        c.flush()
    raises(lambda: ja.connect(ctx.url, tls_required=True, **_CT), ConnectionFailedError)


def _connz(server: NatsServer, cid_name: str) -> dict[str, Any]:
    for conn in server.monitor("connz?subs=1").get("connections", []):
        if conn.get("name") == cid_name:
            return dict(conn)
    raise AssertionError(f"no connection named {cid_name!r} in the server's connz")


@effect(("connect", "name"))
def _name(ctx: Ctx) -> None:
    name = ctx.name("conn")
    with ja.connect(ctx.url, name=name) as c:
        c.flush()
        assert _connz(ctx.server, name)


@effect(("connect", "max_decompressed_bytes"))
def _max_decompressed_bytes(ctx: Ctx) -> None:
    name = ctx.stream()
    rows = pa.table({"subject": [f"{name}.a"], "data": [b"\0" * 4096]})
    ctx.client.publish(rows, compression="zstd")
    with ja.connect(ctx.url, max_decompressed_bytes=1000) as small:
        raises(lambda: small.read(name).read_all(), ja.exceptions.MalformedPayloadError)
    with ja.connect(ctx.url, max_decompressed_bytes=4096) as enough:
        assert enough.read(name).read_all().column("data").to_pylist() == [b"\0" * 4096]
    raises(lambda: ja.connect(ctx.url, max_decompressed_bytes=0), BadInputError)


def _stored_encodings(ctx: Ctx, name: str, count: int) -> list[str | None]:
    """Each message's Content-Encoding as stored: a read (decompress off) hands the
    header out as the server holds it."""
    with ja.connect(ctx.url, decompress=False) as as_stored:
        read = as_stored.read(name, include_headers=True).read_all()
    assert read.num_rows == count, read.num_rows
    return [
        dict(h or {}).get("Content-Encoding", [None])[0] for h in read.column("headers").to_pylist()
    ]


@effect(("connect", "decompress"))
def _decompress(ctx: Ctx) -> None:
    name = ctx.stream()
    plain = b"compressible " * 40
    ctx.client.publish(pa.table({"subject": [f"{name}.a"], "data": [plain]}), compression="zlib")
    assert ctx.client.read(name).read_all().column("data").to_pylist() == [plain]
    with ja.connect(ctx.url, decompress=False) as off:
        data = off.read(name).read_all().column("data").to_pylist()
    assert len(data[0]) < len(plain) and zlib.decompress(data[0]) == plain


@effect(("connect", "inbox_prefix"))
def _inbox_prefix(ctx: Ctx) -> None:
    name = ctx.name("conn")
    with ja.connect(ctx.url, name=name, inbox_prefix="_PROBE_INBOX") as c:
        c.stream_names()
        subs = _connz(ctx.server, name).get("subscriptions_list", [])
    assert any(s.startswith("_PROBE_INBOX.") for s in subs), subs


@effect(("connect", "retry_on_initial_connect"))
def _retry_initial(ctx: Ctx) -> None:
    dead = "nats://127.0.0.1:1"
    raises(lambda: ja.connect(dead, connect_timeout=1), ConnectionFailedError)
    # With it, connect returns and the connection is tried in the background.
    ja.connect(dead, connect_timeout=1, request_timeout=1, retry_on_initial_connect=True).close()


@effect(("connect", "domain"))
def _domain(ctx: Ctx) -> None:
    name = ctx.stream()
    with ja.connect(ctx.url, domain="nowhere", request_timeout=1) as c:
        err = raises(lambda: c.stream_info(name), JetStreamNotEnabledError)
    assert "$JS.nowhere.API" in str(err)


@effect(("connect", "api_prefix"))
def _api_prefix(ctx: Ctx) -> None:
    name = ctx.stream()
    with ja.connect(ctx.url, api_prefix="$JS.API") as c:
        assert c.stream_info(name).config.name == name
    with ja.connect(ctx.url, api_prefix="ELSEWHERE.API", request_timeout=1) as c:
        raises(lambda: c.stream_info(name), JetStreamNotEnabledError)


for _option in ("connect_timeout", "request_timeout", "reconnect_delay", "ping_interval"):
    refused("connect", _option, lambda ctx, o=_option: ja.connect(ctx.url, **{o: 0}))
refused("connect", "max_reconnects", lambda ctx: ja.connect(ctx.url, max_reconnects=-1))


# == Python: publishing ========================================================================


def _publish(ctx: Ctx, entry: str, data: Any, **options: Any) -> ja.PublishResult:
    """Publish through ``Client.publish`` or through a ``Client.publisher``."""
    if entry == "Client.publish":
        return ctx.client.publish(data, **options)
    with ctx.client.publisher(**options) as publisher:
        return publisher.publish(data)


def _publisher_probes(entry: str) -> None:
    def reg(option: str) -> Callable[[Callable[[Ctx, str], None]], None]:
        def wrap(fn: Callable[[Ctx, str], None]) -> None:
            _register(entry, option, "effect", lambda ctx: fn(ctx, entry))

        return wrap

    @reg("subject")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        _publish(ctx, entry, pa.table({"data": [b"x"]}), subject=f"{name}.given")
        assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.given"]

    @reg("window")
    def _(ctx: Ctx, entry: str) -> None:
        # With on_full="fail" the window is what is let through before the first ack.
        name = ctx.stream()
        small = _publish(
            ctx, entry, table(name, 50), window=1, on_full="fail", raise_on_error=False
        )
        large = _publish(ctx, entry, table(name, 50), on_full="fail", raise_on_error=False)
        assert small.failed > 0 and large.failed == 0, (small, large)
        raises(lambda: _publish(ctx, entry, table(name, 1), window=0), BadInputError)

    @reg("options")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        options = ja.PublishOptions(subject=f"{name}.given", msg_id_prefix="O-")
        _publish(ctx, entry, table(name, 2).drop_columns(["subject"]), options=options)
        _publish(ctx, entry, table(name, 2).drop_columns(["subject"]), options=options)
        assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.given"] * 2
        # A keyword is set over the object.
        _publish(
            ctx,
            entry,
            table(name, 1).drop_columns(["subject"]),
            options=options,
            msg_id_prefix="Q-",
        )
        assert ctx.rows(name).num_rows == 3

    @reg("on_full")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        waits = _publish(ctx, entry, table(name, 50), window=1)
        fails = _publish(
            ctx, entry, table(name, 50), window=1, on_full="fail", raise_on_error=False
        )
        assert waits.stored == 50 and fails.failed > 0, (waits, fails)

    # max_bytes_in_flight's effect is watched on the wire by test_publish_bytes_in_flight.py.
    for option, bad in (
        ("ack_timeout", 0),
        ("max_retries", -1),
        ("retry_backoff", -1),
        ("max_bytes_in_flight", 0),
    ):
        refused(entry, option, lambda ctx, o=option, b=bad: _publish(ctx, entry, None, **{o: b}))

    @reg("msg_id_prefix")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        _publish(ctx, entry, table(name, 2), msg_id_prefix="P-")
        _publish(ctx, entry, table(name, 2))
        assert msg_ids(ctx, name) == ["P-0", "P-1", None, None]

    @reg("msg_id_start")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        _publish(ctx, entry, table(name, 2), msg_id_prefix="P-", msg_id_start=7)
        assert msg_ids(ctx, name) == ["P-7", "P-8"]

    def expectation(option: str, wrong: Any) -> None:
        @reg(option)
        def _(ctx: Ctx, entry: str) -> None:
            name = ctx.stream(count=1)
            result = _publish(ctx, entry, table(name, 1), raise_on_error=False, **{option: wrong})
            assert result.failed == 1, result
            assert _publish(ctx, entry, table(name, 1)).stored == 1

    expectation("expected_stream", "NOT_THIS_ONE")
    expectation("expected_last_seq", 99)
    expectation("expected_last_msg_id", "no-such-id")
    expectation("expected_last_subject_seq", 99)

    @reg("mode")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream(allow_batched=True)
        fast = _publish(ctx, entry, table(name, 3), mode="fast")
        acked = _publish(ctx, entry, table(name, 3))
        assert fast.stored == 3 and fast.acks.column("seq").null_count == 3
        assert acked.acks.column("seq").to_pylist() == [4, 5, 6]
        # Atomic batches need allow_atomic: refused whole by this stream.
        atomic = _publish(ctx, entry, table(name, 3), mode="atomic", raise_on_error=False)
        assert atomic.failed == 3 and "allow_atomic" in atomic.acks.column("error")[0].as_py()

    @reg("batch_rows")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream(allow_atomic=True)
        _publish(ctx, entry, table(name, 5), mode="atomic", batch_rows=2)
        _publish(ctx, entry, table(name, 5), mode="atomic")
        assert atomic_batch_sizes(ctx, name) == [2, 2, 1, 5]
        raises(lambda: _publish(ctx, entry, None, mode="atomic", batch_rows=0), BadInputError)

    @reg("keep_control_headers")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream(count=1)
        rows = pa.table(
            {
                "subject": [f"{name}.a"],
                "data": [b"x"],
                "headers": pa.array(
                    [[("Nats-Expected-Last-Sequence", ["99"])]],
                    pa.map_(pa.string(), pa.list_(pa.string())),
                ),
            }
        )
        kept = _publish(ctx, entry, rows, raise_on_error=False)
        dropped = _publish(ctx, entry, rows, keep_control_headers=False)
        assert kept.failed == 1 and dropped.stored == 1, (kept, dropped)

    @reg("compression")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream()
        rows = pa.table({"subject": [f"{name}.a"], "data": [b"compressible " * 40]})
        _publish(ctx, entry, rows, compression="zstd")
        _publish(ctx, entry, rows)
        assert _stored_encodings(ctx, name, 2) == ["zstd", None]
        read = ctx.rows(name)
        assert read.column("data").to_pylist() == [b"compressible " * 40] * 2
        raises(lambda: _publish(ctx, entry, rows, compression="lz4"), BadInputError)

    @reg("raise_on_error")
    def _(ctx: Ctx, entry: str) -> None:
        name = ctx.stream(count=1)
        raises(lambda: _publish(ctx, entry, table(name, 1), expected_last_seq=99), PublishError)
        result = _publish(ctx, entry, table(name, 1), expected_last_seq=99, raise_on_error=False)
        assert result.failed == 1


_publisher_probes("Client.publisher")
_publisher_probes("Client.publish")


@effect(("Publisher.publish", "subject"))
def _publisher_publish_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    with ctx.client.publisher(f"{name}.first") as publisher:
        publisher.publish(pa.table({"data": [b"x"]}))
        publisher.publish(pa.table({"data": [b"y"]}), subject=f"{name}.second")
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.first", f"{name}.second"]


@effect(("Publisher.publish_batches", "subject"))
def _publish_batches_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    with ctx.client.publisher() as publisher:
        list(publisher.publish_batches(pa.table({"data": [b"x"]}).to_batches(), f"{name}.s"))
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.s"]


@effect(("Publisher.publish_batches", "rows_per_result"))
def _rows_per_result(ctx: Ctx) -> None:
    name = ctx.stream()
    batches = [b for i in range(3) for b in table(name, 2).to_batches()]
    with ctx.client.publisher() as publisher:
        assert len(list(publisher.publish_batches(batches))) == 1
        assert len(list(publisher.publish_batches(batches, rows_per_result=2))) == 3


# == Python: reading ===========================================================================


@effect(("Client.read", "options"))
def _read_options(ctx: Ctx) -> None:
    name = ctx.stream(6)
    options = ja.ReadOptions(start_seq=3, batch_rows=2)
    assert ctx.rows(name, options=options).column("seq").to_pylist() == [3, 4, 5, 6]
    assert ctx.rows(name, options=options, end_seq=4).column("seq").to_pylist() == [3, 4]


@effect(("Client.read", "start_seq"))
def _read_start(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert ctx.rows(name, start_seq=4).column("seq").to_pylist() == [4, 5, 6]


@effect(("Client.read", "end_seq"))
def _read_end(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert ctx.rows(name, end_seq=2).column("seq").to_pylist() == [1, 2]


@effect(("Client.read", "subjects"))
def _read_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert ctx.rows(name, subjects=f"{name}.b").column("seq").to_pylist() == [2, 4, 6]


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


@effect(("Client.read", "start_time"))
def _read_start_time(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    assert ctx.rows(name, start_time=middle).column("seq").to_pylist() == [4, 5, 6]


@effect(("Client.read", "end_time"))
def _read_end_time(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    assert ctx.rows(name, end_time=middle).column("seq").to_pylist() == [1, 2, 3]


@effect(("Client.read", "include_headers"))
def _read_headers(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    assert "headers" not in ctx.rows(name).column_names
    assert "headers" in ctx.rows(name, include_headers=True).column_names


@effect(("Client.read", "payload_views"))
def _read_payload_views(ctx: Ctx) -> None:
    name = ctx.stream(count=3)
    copied, viewed = ctx.rows(name), ctx.rows(name, payload_views=True)
    assert copied.schema.field("data").type == pa.binary()
    assert viewed.schema.field("data").type == pa.binary_view()
    assert viewed.column("data").to_pylist() == copied.column("data").to_pylist()


@effect(("Client.read", "include_ttl"))
def _read_ttl(ctx: Ctx) -> None:
    name = ctx.stream(allow_msg_ttl=True)
    ctx.client.publish(
        pa.table(
            {"subject": [f"{name}.a"], "data": [b"x"], "ttl": pa.array([60], pa.duration("s"))}
        )
    )
    assert "ttl" not in ctx.rows(name).column_names
    assert ctx.rows(name, include_ttl=True).column("ttl").to_pylist()[0].total_seconds() == 60


@effect(("Client.read", "include_positions"))
def _read_positions(ctx: Ctx) -> None:
    name = ctx.name()
    position = f"{_core.POSITION_SUBJECT_PREFIX}{name}.w1"
    ctx.client.create_stream(name, [f"{name}.>", f"{_core.POSITION_SUBJECT_PREFIX}{name}.>"])
    ctx.made.append(name)
    ctx.client.publish(pa.table({"subject": [f"{name}.a", position], "data": [b"x", b"{}"]}))
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.a"]
    shown = ctx.rows(name, include_positions=True).column("subject").to_pylist()
    assert shown == [f"{name}.a", position]


@effect(("Client.read", "batch_rows"))
def _read_batch_rows(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert [b.num_rows for b in ctx.client.read(name, batch_rows=4)] == [4, 2]


@effect(("Client.read", "max_bytes"))
def _read_max_bytes(ctx: Ctx) -> None:
    name = ctx.big_stream()
    sizes = [b.num_rows for b in ctx.client.read(name, max_bytes=300, method="consumer")]
    assert len(sizes) > 1 and sum(sizes) == 6, sizes
    assert [b.num_rows for b in ctx.client.read(name, method="consumer")] == [6]


refused("Client.read", "heartbeat", lambda ctx: ctx.client.read(ctx.stream(), heartbeat=-1))
refused(
    "Client.read", "resume_timeout", lambda ctx: ctx.client.read(ctx.stream(), resume_timeout=-1)
)


@effect(("Client.read", "method"))
def _read_method(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    assert ctx.rows(name, method="consumer").num_rows == 2
    raises(lambda: ctx.rows(name, method="direct"), BadInputError)


@effect(("Client.read", "last_per_subject"))
def _read_last_per_subject(ctx: Ctx) -> None:
    # m0..m3 alternate between <name>.a and <name>.b: the last of each are m2 and m3.
    name = ctx.stream(count=4, allow_direct=True)
    assert ctx.rows(name, last_per_subject=True).column("data").to_pylist() == [b"m2", b"m3"]
    raises(lambda: ctx.rows(name, last_per_subject=True, start_seq=1), BadInputError)


@effect(("Client.read", "as_of_seq"))
def _read_as_of_seq(ctx: Ctx) -> None:
    name = ctx.stream(count=4, allow_direct=True)
    rows = ctx.rows(name, last_per_subject=True, as_of_seq=2)
    assert rows.column("data").to_pylist() == [b"m0", b"m1"]
    raises(lambda: ctx.rows(name, as_of_seq=2), BadInputError)


@effect(("Client.read", "as_of_time"))
def _read_as_of_time(ctx: Ctx) -> None:
    name = ctx.stream(count=2, allow_direct=True)
    when = ctx.rows(name).column("timestamp")[1].as_py()
    ctx.fill(name, 2, start=2)
    rows = ctx.rows(name, last_per_subject=True, as_of_time=when)
    assert rows.column("data").to_pylist() == [b"m0", b"m1"]
    raises(lambda: ctx.rows(name, as_of_time=when), BadInputError)


# Its deadline under a paused server: tests/test_deadlines.py ("first_seq_at").
refused(
    "Client.first_seq_at",
    "resume_timeout",
    lambda ctx: ctx.client.first_seq_at(ctx.stream(), 0, resume_timeout=-1),
)


@effect(("Client.first_seq_at", "subjects"))
def _first_seq_at_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert ctx.client.first_seq_at(name, 0) == 1
    assert ctx.client.first_seq_at(name, 0, subjects=f"{name}.b") == 2


@effect(("Client.read_counters", "subjects"))
def _read_counters_subjects(ctx: Ctx) -> None:
    name = ctx.stream(allow_msg_counter=True)
    ctx.client.publish(
        pa.table({"subject": [f"{name}.a", f"{name}.b"], "increment": pa.array([2, 3])})
    )
    every = ctx.client.read_counters(name)
    assert every.column("subject").to_pylist() == [f"{name}.a", f"{name}.b"]
    only_b = ctx.client.read_counters(name, subjects=f"{name}.b")
    assert only_b.column("value").to_pylist() == [3]


def _first_batch(ordered: OrderedConsumer, **options: Any) -> pa.RecordBatch:
    batches = ordered.messages(batch_wait=0.2, **options)
    try:
        return next(batches)
    finally:
        batches.close()  # type: ignore[attr-defined]


@effect(("Client.ordered_consumer", "subjects"))
def _ordered_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    got = _first_batch(ctx.client.ordered_consumer(name, f"{name}.b"))
    assert got.column("seq").to_pylist() == [2, 4]


@effect(("Client.ordered_consumer", "start_seq"))
def _ordered_start_seq(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert (
        _first_batch(ctx.client.ordered_consumer(name, start_seq=3)).column("seq")[0].as_py() == 3
    )


@effect(("Client.ordered_consumer", "start_time"))
def _ordered_start_time(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    first = _first_batch(ctx.client.ordered_consumer(name, start_time=middle))
    assert first.column("seq")[0].as_py() == 4


@effect(("Client.ordered_consumer", "deliver"))
def _ordered_deliver(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    batches = ctx.client.ordered_consumer(name, deliver="new").messages(batch_wait=0.2)
    try:
        ctx.fill(name, 1, start=2)
        assert next(batches).column("seq").to_pylist() == [3]
    finally:
        batches.close()  # type: ignore[attr-defined]


def _heartbeat_zero_refused(call: Callable[[], Any]) -> None:
    """A heartbeat of 0 s cannot be kept: it must be refused naming the option, not
    taken and then reported as missed heartbeats."""
    must_refuse(call, "heartbeat", "heartbeat=0")


def _ordered_heartbeat(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    raises(lambda: ctx.client.ordered_consumer(name, heartbeat=-1).messages(), BadInputError)
    _heartbeat_zero_refused(
        lambda: _first_batch(ctx.client.ordered_consumer(name, heartbeat=0, resume_timeout=0))
    )


_register("Client.ordered_consumer", "heartbeat", "refusal", _ordered_heartbeat)
refused(
    "Client.ordered_consumer",
    "resume_timeout",
    lambda ctx: ctx.client.ordered_consumer(ctx.stream(), resume_timeout=-1).messages(),
)


@effect(("OrderedConsumer.messages", "batch_rows"))
def _ordered_batch_rows(ctx: Ctx) -> None:
    name = ctx.stream(count=5)
    assert _first_batch(ctx.client.ordered_consumer(name), batch_rows=2).num_rows == 2


refused(
    "OrderedConsumer.messages",
    "batch_wait",
    lambda ctx: ctx.client.ordered_consumer(ctx.stream()).messages(batch_wait=-1),
)


@effect(("OrderedConsumer.messages", "max_bytes"))
def _ordered_max_bytes(ctx: Ctx) -> None:
    name = ctx.big_stream()
    assert _first_batch(ctx.client.ordered_consumer(name)).num_rows == 6
    assert _first_batch(ctx.client.ordered_consumer(name), max_bytes=300).num_rows < 6


@effect(("OrderedConsumer.messages", "include_headers"))
def _ordered_headers(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    got = _first_batch(ctx.client.ordered_consumer(name), include_headers=True)
    assert "headers" in got.schema.names
    assert "headers" not in _first_batch(ctx.client.ordered_consumer(name)).schema.names


# == Python: consumers =========================================================================


def pull(ctx: Ctx, count: int = 4, **config: Any) -> tuple[str, str]:
    name = ctx.stream(count=count)
    config.setdefault("ack_policy", "explicit")
    ctx.client.create_consumer(name, durable_name="C", **config)
    return name, "C"


@effect(("Client.pull_consumer", "ack_policy"))
def _pull_ack_policy(ctx: Ctx) -> None:
    # Told the policy is "all", a batch is acknowledged by one ack of its last
    # message; the explicit consumer here then holds the others unacknowledged.
    name, consumer = pull(ctx)
    ctx.client.pull_consumer(name, consumer).fetch(2).ack_sync()
    assert ctx.client.consumer_info(name, consumer).num_ack_pending == 0
    ctx.client.pull_consumer(name, consumer, ack_policy="all").fetch(2).ack()
    ctx.client.flush()
    assert ctx.client.consumer_info(name, consumer).num_ack_pending == 1


def _grouped(ctx: Ctx, policy: str, count: int = 4) -> tuple[str, str]:
    return pull(ctx, count=count, priority_groups=["G"], priority_policy=policy)


@effect(("Client.pull_consumer", "group"))
def _pull_group(ctx: Ctx) -> None:
    name, consumer = _grouped(ctx, "pinned_client")
    with pytest.raises(ApiError, match="Priority Group missing"):
        ctx.client.pull_consumer(name, consumer).fetch(1, expires=1.0)
    grouped = ctx.client.pull_consumer(name, consumer, group="G")
    assert len(grouped.fetch(2, expires=1.0)) == 2
    assert grouped.pin_id


@effect(("Client.pull_consumer", "min_pending"))
def _pull_min_pending(ctx: Ctx) -> None:
    name, consumer = _grouped(ctx, "overflow")

    def fetched(min_pending: int) -> int:
        binding = ctx.client.pull_consumer(name, consumer, group="G", min_pending=min_pending)
        return len(binding.fetch(2, expires=1.0))

    assert fetched(10) == 0
    # 4 pending: served while the pending count (the message at hand included) is 3+.
    assert fetched(3) == 2


@effect(("Client.pull_consumer", "min_ack_pending"))
def _pull_min_ack_pending(ctx: Ctx) -> None:
    name, consumer = _grouped(ctx, "overflow")
    spare = ctx.client.pull_consumer(name, consumer, group="G", min_ack_pending=2)
    assert len(spare.fetch(1, expires=1.0)) == 0
    ctx.client.pull_consumer(name, consumer, group="G").fetch(2, expires=1.0)  # left unacked
    assert len(spare.fetch(1, expires=1.0)) == 1


@effect(("Client.pull_consumer", "priority"))
def _pull_priority(ctx: Ctx) -> None:
    name, consumer = _grouped(ctx, "prioritized", count=0)
    out: dict[int, int] = {}

    def fetch(priority: int) -> None:
        binding = ctx.client.pull_consumer(name, consumer, group="G", priority=priority)
        out[priority] = len(binding.fetch(4, expires=3.0))

    threads = [threading.Thread(target=fetch, args=(p,)) for p in (5, 0)]
    for t in threads:
        t.start()
        time.sleep(0.5)
    ctx.fill(name, 4)
    for t in threads:
        t.join(10)
    assert out == {0: 4, 5: 0}
    with pytest.raises(BadInputError, match="priority"):
        ctx.client.pull_consumer(name, consumer, group="G", priority=10)


@effect(("PullConsumer.fetch", "max_messages"))
def _fetch_max(ctx: Ctx) -> None:
    name, consumer = pull(ctx)
    assert len(ctx.client.pull_consumer(name, consumer).fetch(3)) == 3


@effect(("PullConsumer.fetch", "max_bytes"))
def _fetch_max_bytes(ctx: Ctx) -> None:
    name, consumer = pull(ctx)
    c = ctx.client.pull_consumer(name, consumer)
    assert 0 < len(c.fetch(4, max_bytes=200)) < 4
    # 0 bytes can carry no message: refused, not an empty batch while messages wait.
    must_refuse(lambda: c.fetch(4, max_bytes=0), "max_bytes", "fetch(max_bytes=0)")


@effect(("PullConsumer.fetch", "expires"))
def _fetch_expires(ctx: Ctx) -> None:
    name, consumer = pull(ctx, count=0)
    c = ctx.client.pull_consumer(name, consumer)
    started = time.monotonic()
    assert len(c.fetch(1, expires=0.3)) == 0
    assert time.monotonic() - started < 1.5
    # No time at all to wait is refused, not taken for a server that does not answer.
    must_refuse(lambda: c.fetch(1, expires=0), "expires", "fetch(expires=0)")


@effect(("PullConsumer.fetch", "no_wait"))
def _fetch_no_wait(ctx: Ctx) -> None:
    name, consumer = pull(ctx, count=0)
    started = time.monotonic()
    assert len(ctx.client.pull_consumer(name, consumer).fetch(1, no_wait=True, expires=5)) == 0
    assert time.monotonic() - started < 2


def _fetch_heartbeat(ctx: Ctx) -> None:
    name, consumer = pull(ctx, count=0)
    c = ctx.client.pull_consumer(name, consumer)
    raises(lambda: c.fetch(1, heartbeat=-1), BadInputError)
    _heartbeat_zero_refused(lambda: c.fetch(1, heartbeat=0, expires=2))


_register("PullConsumer.fetch", "heartbeat", "refusal", _fetch_heartbeat)


@effect(("PullConsumer.fetch", "include_headers"))
def _fetch_headers(ctx: Ctx) -> None:
    name, consumer = pull(ctx)
    c = ctx.client.pull_consumer(name, consumer)
    assert "headers" not in c.fetch(1).data.schema.names
    assert "headers" in c.fetch(1, include_headers=True).data.schema.names


def _first_consumed(messages: Any) -> ConsumedBatch:
    try:
        batch: ConsumedBatch = next(messages)
        return batch
    finally:
        messages.close()


@effect(("PullConsumer.messages", "options"))
def _messages_options(ctx: Ctx) -> None:
    # An options object sets what keywords would; a keyword is set over it.
    name, consumer = pull(ctx)
    c = ctx.client.pull_consumer(name, consumer)
    options = ja.ConsumeOptions(batch_rows=3, batch_wait=0.2)
    assert len(_first_consumed(c.messages(options=options))) == 3
    assert len(_first_consumed(c.messages(options=options, batch_rows=2))) == 2


@effect(("PullConsumer.messages", "batch_rows"))
def _messages_batch_rows(ctx: Ctx) -> None:
    name, consumer = pull(ctx)
    c = ctx.client.pull_consumer(name, consumer)
    assert len(_first_consumed(c.messages(batch_rows=3, batch_wait=0.2))) == 3


@effect(("PullConsumer.messages", "include_headers"))
def _messages_headers(ctx: Ctx) -> None:
    name, consumer = pull(ctx)
    c = ctx.client.pull_consumer(name, consumer)
    got = _first_consumed(c.messages(include_headers=True, batch_wait=0.2))
    assert "headers" in got.data.schema.names


@effect(("PullConsumer.messages", "max_messages"))
def _messages_max(ctx: Ctx) -> None:
    # A consumer that allows pulls of at most 2 messages refuses a buffer of 4.
    name, consumer = pull(ctx, max_batch=2)
    c = ctx.client.pull_consumer(name, consumer)
    assert len(_first_consumed(c.messages(max_messages=2, batch_wait=0.2))) >= 1
    raises(lambda: _first_consumed(c.messages(max_messages=4, batch_wait=0.2)), JetStreamArrowError)


@effect(("PullConsumer.messages", "max_bytes"))
def _messages_max_bytes(ctx: Ctx) -> None:
    name, consumer = pull(ctx, max_bytes=300)
    c = ctx.client.pull_consumer(name, consumer)
    assert len(_first_consumed(c.messages(max_bytes=200, batch_wait=0.2))) >= 1
    raises(lambda: _first_consumed(c.messages(max_bytes=1000, batch_wait=0.2)), JetStreamArrowError)


refused(
    "PullConsumer.messages",
    "threshold_messages",
    lambda ctx: _first_consumed(
        ctx.client.pull_consumer(*pull(ctx)).messages(max_messages=4, threshold_messages=4)
    ),
)


def _threshold_bytes(ctx: Ctx) -> None:
    # A byte threshold is one of a byte budget: without max_bytes nothing reads it.
    c = ctx.client.pull_consumer(*pull(ctx))
    must_refuse(
        lambda: _first_consumed(c.messages(threshold_bytes=100, batch_wait=0.2)),
        "threshold_bytes",
        "messages(threshold_bytes=100) without max_bytes",
    )


_register("PullConsumer.messages", "threshold_bytes", "refusal", _threshold_bytes)
refused(
    "PullConsumer.messages",
    "expires",
    lambda ctx: _first_consumed(ctx.client.pull_consumer(*pull(ctx)).messages(expires=0.5)),
)


def _messages_heartbeat(ctx: Ctx) -> None:
    c = ctx.client.pull_consumer(*pull(ctx))
    raises(lambda: _first_consumed(c.messages(expires=2, heartbeat=1.5)), BadInputError)
    _heartbeat_zero_refused(lambda: _first_consumed(c.messages(heartbeat=0)))


_register("PullConsumer.messages", "heartbeat", "refusal", _messages_heartbeat)
refused(
    "PullConsumer.messages",
    "batch_wait",
    lambda ctx: _first_consumed(ctx.client.pull_consumer(*pull(ctx)).messages(batch_wait=-1)),
)


def push(ctx: Ctx, count: int = 4, **config: Any) -> tuple[str, str, str]:
    name = ctx.stream(count=count)
    deliver = f"deliver.{name}"
    config.setdefault("ack_policy", "explicit")
    ctx.client.create_consumer(name, durable_name="P", deliver_subject=deliver, **config)
    return name, "P", deliver


@effect(("Client.push_consumer", "deliver_subject"))
def _push_deliver_subject(ctx: Ctx) -> None:
    name, consumer, deliver = push(ctx)
    assert ctx.client.push_consumer(name, consumer).deliver_subject == deliver
    bound = ctx.client.push_consumer(name, consumer, deliver_subject=f"{deliver}.other")
    assert bound.deliver_subject == f"{deliver}.other"


@effect(("Client.push_consumer", "deliver_group"))
def _push_deliver_group(ctx: Ctx) -> None:
    name, consumer, deliver = push(ctx, deliver_group="workers")
    bound = ctx.client.push_consumer(
        name, consumer, deliver_subject=deliver, deliver_group="workers"
    )
    assert len(_first_consumed(bound.messages(batch_wait=0.2, heartbeat=None))) == 4
    raises(lambda: ctx.client.push_consumer(name, consumer, deliver_group="workers"), BadInputError)


@effect(("Client.push_consumer", "ack_policy"))
def _push_ack_policy(ctx: Ctx) -> None:
    # As for a pull consumer: "all" acknowledges a batch by its last message.
    name, consumer, deliver = push(ctx)
    bound = ctx.client.push_consumer(name, consumer, deliver_subject=deliver, ack_policy="all")
    batch = _first_consumed(bound.messages(batch_wait=0.2))
    batch.ack()
    ctx.client.flush()
    assert ctx.client.consumer_info(name, consumer).num_ack_pending == len(batch) - 1


@effect(("PushConsumer.messages", "batch_rows"))
def _push_batch_rows(ctx: Ctx) -> None:
    name, consumer, _ = push(ctx)
    got = _first_consumed(ctx.client.push_consumer(name, consumer).messages(batch_rows=3))
    assert len(got) == 3


refused(
    "PushConsumer.messages",
    "batch_wait",
    lambda ctx: _first_consumed(ctx.client.push_consumer(*push(ctx)[:2]).messages(batch_wait=-1)),
)


@effect(("PushConsumer.messages", "include_headers"))
def _push_headers(ctx: Ctx) -> None:
    name, consumer, _ = push(ctx)
    c = ctx.client.push_consumer(name, consumer)
    got = _first_consumed(c.messages(include_headers=True, batch_wait=0.2))
    assert "headers" in got.data.schema.names


@effect(("PushConsumer.messages", "heartbeat"))
def _push_heartbeat(ctx: Ctx) -> None:
    # Bound without a lookup to a consumer whose server sends no heartbeats, a
    # heartbeat makes the silence an error after two periods.
    name, consumer, deliver = push(ctx, count=0)
    bound = ctx.client.push_consumer(name, consumer, deliver_subject=deliver)
    started = time.monotonic()
    raises(lambda: _first_consumed(bound.messages(heartbeat=0.3)), MissedHeartbeatsError)
    assert time.monotonic() - started < 3


def consumed(ctx: Ctx, count: int = 3, **config: Any) -> tuple[str, ConsumedBatch]:
    name, consumer = pull(ctx, count=count, **config)
    return name, ctx.client.pull_consumer(name, consumer).fetch(count)


def _pending(ctx: Ctx, name: str) -> int:
    ctx.client.flush()
    return ctx.client.consumer_info(name, "C").num_ack_pending


for _method in ("ack", "ack_sync", "nak", "term", "in_progress"):

    def _rows_probe(ctx: Ctx, method: str = _method) -> None:
        name, batch = consumed(ctx)
        if method == "in_progress":
            # Refused for a row outside the batch: nothing else is visible of it.
            raises(lambda: batch.in_progress(rows=[5]), BadInputError)
            batch.in_progress(rows=[0])
            return
        getattr(batch, method)(rows=[0])
        if method == "nak":
            # The row asked for again comes again at once, and only it.
            again = ctx.client.pull_consumer(name, "C").fetch(3, expires=0.5)
            assert again.data.column("seq").to_pylist() == [1]
        else:
            # An ack is applied by the server after it is received: wait for it.
            wait_until(lambda: _pending(ctx, name) == 2, 10, f"{method} of row 0 applied")
        raises(lambda: getattr(batch, method)(rows=[5]), BadInputError)

    _register(f"ConsumedBatch.{_method}", "rows", "effect", _rows_probe)

refused("ConsumedBatch.ack_sync", "timeout", lambda ctx: consumed(ctx)[1].ack_sync(timeout=-1))


@effect(("ConsumedBatch.nak", "delay"))
def _nak_delay(ctx: Ctx) -> None:
    name, consumer = pull(ctx, count=2)
    c = ctx.client.pull_consumer(name, consumer)
    batch = c.fetch(2)
    batch.nak(rows=[0], delay=30)
    batch.nak(rows=[1])
    again = c.fetch(2, expires=0.5)
    # The message nakked without a delay comes again at once; the delayed one does not.
    assert again.data.column("seq").to_pylist() == [2], again.data


@effect(("ConsumedBatch.term", "reason"))
def _term_reason(ctx: Ctx) -> None:
    # The server puts the reason in its advisory of the terminated message, which a
    # stream on the advisory subject keeps.
    name, batch = consumed(ctx, count=1)
    advisories = ctx.name("ADV")
    ctx.client.create_stream(
        advisories,
        [f"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{name}.>"],
        storage="memory",
    )
    ctx.made.append(advisories)
    batch.term(reason="done with it")
    ctx.client.flush()
    deadline = time.monotonic() + 5
    while ctx.client.stream_info(advisories).state.messages == 0:
        assert time.monotonic() < deadline, "no termination advisory within 5 s"
        time.sleep(0.05)
    advisory = json.loads(ctx.client.get_message(advisories, seq=1).data)
    assert advisory.get("reason") == "done with it", advisory


refused("Client.flush", "timeout", lambda ctx: ctx.client.flush(-1))


# == Python: management =======================================================================

#: StreamConfig field -> (value to create with, extra config, check of the info).
_STREAM_FIELDS: dict[str, tuple[Any, dict[str, Any], Callable[[Any, Any], bool] | None]] = {
    "subjects": (None, {}, None),  # the stream's subjects: see _stream_subjects
    "description": ("probe", {}, None),
    "storage": ("memory", {}, None),
    "retention": ("workqueue", {}, None),
    "max_consumers": (5, {}, None),
    "max_msgs": (5, {}, None),
    "max_bytes": (1000, {}, None),
    "max_age": (60.0, {}, None),
    "max_msg_size": (100, {}, None),
    "max_msgs_per_subject": (3, {}, None),
    "discard": ("new", {}, None),
    "discard_new_per_subject": (True, {"discard": "new", "max_msgs_per_subject": 3}, None),
    "duplicate_window": (30.0, {}, None),
    "allow_direct": (True, {}, None),
    "allow_atomic": (True, {}, None),
    "allow_batched": (True, {}, None),
    "allow_msg_ttl": (True, {}, None),
    "allow_msg_counter": (True, {}, None),
    "allow_msg_schedules": (True, {}, None),
    "subject_delete_marker_ttl": (60.0, {"allow_msg_ttl": True}, None),
    "allow_rollup": (True, {}, None),
    "deny_delete": (True, {}, None),
    "deny_purge": (True, {}, None),
    "no_ack": (True, {}, None),
    "compression": ("s2", {"storage": "file"}, None),
    "first_seq": (100, {}, lambda info, v: info.state.first_seq == v),
    "metadata": ({"probe": "yes"}, {}, lambda info, v: info.config.metadata.get("probe") == "yes"),
    "extra": ({"max_msgs": 7}, {}, lambda info, v: info.config.max_msgs == 7),
}


def _stream_field(option: str) -> Callable[[Ctx], None]:
    value, extra, check = _STREAM_FIELDS[option]

    def run(ctx: Ctx) -> None:
        config = {"storage": "file", **extra, option: value}
        name = ctx.stream(**config)
        info = ctx.client.stream_info(name)
        if check is not None:
            assert check(info, value), info
        else:
            assert getattr(info.config, option) == value, info.config
            default = ctx.client.stream_info(ctx.stream(**{**config, option: None}))
            assert getattr(default.config, option) != value

    return run


for _option in _STREAM_FIELDS:
    if _option != "subjects":
        _register("Client.create_stream", _option, "effect", _stream_field(_option))


@effect(("Client.create_stream", "exactly_once"))
def _stream_exactly_once(ctx: Ctx) -> None:
    name = ctx.name()
    ctx.client.create_stream(name, [f"{name}.>"], storage="memory", exactly_once=True)
    ctx.made.append(name)
    cfg = ctx.client.stream_info(name).config
    assert cfg.subjects == [f"{name}.>", f"{POSITION_SUBJECT_PREFIX}{name}.>"]
    assert cfg.allow_rollup is True


@effect(("Client.create_stream", "subjects"))
def _stream_subjects(ctx: Ctx) -> None:
    name = ctx.name()
    ctx.client.create_stream(name, subjects=[f"{name}.only"], storage="memory")
    ctx.made.append(name)
    assert ctx.client.stream_info(name).config.subjects == [f"{name}.only"]


refused(
    "Client.create_stream",
    "replicas",
    lambda ctx: ctx.stream(replicas=3),
    error=ApiError,
)
refused("Client.create_stream", "sealed", lambda ctx: ctx.stream(sealed=True), error=ApiError)


@effect(("Client.create_stream", "mirror"), ("Client.create_stream", "mirror_direct"))
def _mirror(ctx: Ctx) -> None:
    # A mirror answers direct gets only of an origin that allows them.
    origin = ctx.stream(count=2, allow_direct=True)
    name = ctx.name()
    ctx.client.create_stream(
        StreamConfig(
            name,
            storage="memory",
            mirror=StreamSource(origin),
            mirror_direct=True,
            allow_direct=True,
        )
    )
    ctx.made.append(name)
    info = ctx.client.stream_info(name)
    assert info.config.mirror is not None and info.config.mirror.name == origin
    assert info.config.mirror_direct is True


@effect(("Client.create_stream", "sources"))
def _sources(ctx: Ctx) -> None:
    origin = ctx.stream(count=2)
    name = ctx.stream(sources=[StreamSource(origin)])
    info = ctx.client.stream_info(name)
    assert [s.name for s in info.config.sources or []] == [origin]


@effect(("Client.update_stream", "subjects"), ("Client.create_or_update_stream", "subjects"))
def _update_subjects(ctx: Ctx) -> None:
    name = ctx.stream()
    ctx.client.update_stream(name, subjects=[f"{name}.one"], storage="memory")
    assert ctx.client.stream_info(name).config.subjects == [f"{name}.one"]
    ctx.client.create_or_update_stream(name, subjects=[f"{name}.two"], storage="memory")
    assert ctx.client.stream_info(name).config.subjects == [f"{name}.two"]


@effect(("Client.purge_stream", "subject"))
def _purge_subject(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert ctx.client.purge_stream(name, subject=f"{name}.a") == 2


@effect(("Client.purge_stream", "up_to_seq"))
def _purge_up_to(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert ctx.client.purge_stream(name, up_to_seq=3) == 2


@effect(("Client.purge_stream", "keep"))
def _purge_keep(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert ctx.client.purge_stream(name, keep=1) == 3


@effect(("Client.get_message", "seq"))
def _get_seq(ctx: Ctx) -> None:
    name = ctx.stream(count=3)
    assert ctx.client.get_message(name, seq=2).data == b"m1"


@effect(("Client.get_message", "last_by_subject"))
def _get_last(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    assert ctx.client.get_message(name, last_by_subject=f"{name}.a").seq == 3


@effect(("Client.delete_message", "erase"))
def _delete_erase(ctx: Ctx) -> None:
    # Erasing overwrites the message's bytes in the store; a plain delete leaves them.
    name = ctx.stream(storage="file")
    marker = uuid.uuid4().hex.encode()
    # A third message keeps the block that holds the first two.
    data = [marker + b"0", marker + b"1", b"kept"]
    ctx.client.publish(pa.table({"subject": [f"{name}.a"] * 3, "data": data}))

    def stored() -> bytes:
        blocks = ctx.server.store_dir.rglob(f"{name}/msgs/*.blk")
        return b"".join(p.read_bytes() for p in blocks)

    assert marker + b"0" in stored() and marker + b"1" in stored()
    ctx.client.delete_message(name, 1)
    ctx.client.delete_message(name, 2, erase=True)
    content = stored()
    assert marker + b"0" in content and marker + b"1" not in content


# Its effect, outlasting a paused server, and its deadline: tests/test_deadlines.py
# (test_a_patient_request_outlasts_a_pause, "stream_info-patient", ...).
for _listing, _call in {
    "Client.stream_info": lambda c, name: c.stream_info(name, resume_timeout=-1),
    "Client.list_streams": lambda c, name: c.list_streams(resume_timeout=-1),
    "Client.stream_names": lambda c, name: c.stream_names(resume_timeout=-1),
}.items():
    refused(_listing, "resume_timeout", lambda ctx, call=_call: call(ctx.client, ctx.stream()))


@effect(("Client.list_streams", "subject"), ("Client.stream_names", "subject"))
def _list_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    assert [s.config.name for s in ctx.client.list_streams(subject=f"{name}.x")] == [name]
    assert ctx.client.stream_names(subject=f"{name}.x") == [name]


#: ConsumerConfig field -> (value, extra config, check of the info or None).
_PUSH = {"deliver_subject": "probe.deliver"}
_CONSUMER_FIELDS: dict[str, tuple[Any, dict[str, Any], Callable[[Any, Any], bool] | None]] = {
    "durable_name": ("D1", {}, lambda info, v: info.name == v),
    "name": ("N1", {}, lambda info, v: info.name == v),
    "description": ("probe", {}, None),
    "deliver_policy": ("last", {}, None),
    "opt_start_seq": (3, {"deliver_policy": "by_start_sequence"}, None),
    "opt_start_time": (
        datetime(2030, 1, 2, tzinfo=timezone.utc),
        {"deliver_policy": "by_start_time"},
        None,
    ),
    "ack_policy": ("all", {}, None),
    "ack_wait": (7.0, {}, None),
    "max_deliver": (3, {}, None),
    "backoff": ([1.0, 2.0], {"max_deliver": 5}, None),
    "filter_subjects": (["{s}.a", "{s}.b"], {}, None),
    "replay_policy": ("original", {}, None),
    "rate_limit_bps": (1000, _PUSH, None),
    "sample_freq": ("50%", {}, None),
    "max_waiting": (7, {}, None),
    "max_ack_pending": (9, {}, None),
    "flow_control": (True, {**_PUSH, "idle_heartbeat": 2.0}, None),
    "headers_only": (True, {}, None),
    "max_batch": (7, {}, None),
    "max_expires": (5.0, {}, None),
    "max_bytes": (1000, {}, None),
    "deliver_subject": ("probe.deliver", {}, None),
    "deliver_group": ("workers", _PUSH, None),
    "idle_heartbeat": (2.0, _PUSH, None),
    "inactive_threshold": (10.0, {}, None),
    "num_replicas": (1, {}, None),
    "mem_storage": (True, {}, None),
    "metadata": ({"probe": "yes"}, {}, lambda info, v: info.config.metadata.get("probe") == "yes"),
    "pause_until": (
        datetime(2099, 1, 1, tzinfo=timezone.utc),
        {},
        lambda info, v: info.paused is True,
    ),
    "priority_groups": (
        ["G"],
        {"priority_policy": "overflow"},
        lambda info, v: info.config.priority_groups == ["G"],
    ),
    "priority_policy": (
        "pinned_client",
        {"priority_groups": ["G"]},
        lambda info, v: info.config.priority_policy == "pinned_client",
    ),
    "priority_timeout": (
        7.0,
        {"priority_groups": ["G"], "priority_policy": "pinned_client"},
        lambda info, v: info.config.priority_timeout == 7.0,
    ),
    "extra": ({"max_deliver": 4}, {}, lambda info, v: info.config.max_deliver == 4),
    "filter_subject": ("{s}.a", {}, lambda info, v: info.config.filter_subjects == [v]),
}


def _consumer_field(option: str) -> Callable[[Ctx], None]:
    value, extra, check = _CONSUMER_FIELDS[option]

    def run(ctx: Ctx) -> None:
        name = ctx.stream()
        v = value
        if isinstance(v, str):
            v = v.format(s=name)
        elif isinstance(v, list):
            v = [x.format(s=name) if isinstance(x, str) else x for x in v]
        config = {"durable_name": "C", **extra, option: v}
        if option == "name":
            config.pop("durable_name")
        info = ctx.client.create_consumer(name, **config)
        if check is not None:
            assert check(info, v), info
            return
        assert getattr(info.config, option) == v, info.config
        config.pop(option)
        config["durable_name"] = "C2"
        if option == "deliver_subject":
            other = ctx.client.create_consumer(name, **config)
        else:
            other = (
                ctx.client.create_consumer(name, **config)
                if not extra.get("deliver_policy")
                else None
            )
        if other is not None:
            assert getattr(other.config, option) != v, other.config

    return run


for _option in _CONSUMER_FIELDS:
    _register("Client.create_consumer", _option, "effect", _consumer_field(_option))


@effect(("Client.create_consumer", "config"))
def _consumer_config(ctx: Ctx) -> None:
    name = ctx.stream()
    info = ctx.client.create_consumer(name, ConsumerConfig(durable_name="C", description="given"))
    assert info.config.description == "given"


@effect(("Client.update_consumer", "config"), ("Client.create_or_update_consumer", "config"))
def _update_consumer(ctx: Ctx) -> None:
    name = ctx.stream()
    ctx.client.create_consumer(name, durable_name="C")
    info = ctx.client.update_consumer(name, ConsumerConfig(durable_name="C", description="one"))
    assert info.config.description == "one"
    info = ctx.client.create_or_update_consumer(
        name, ConsumerConfig(durable_name="C", description="two")
    )
    assert info.config.description == "two"


@effect(("Client.reset_consumer", "seq"))
def _reset_seq(ctx: Ctx) -> None:
    name, consumer = pull(ctx, count=4)
    assert ctx.client.reset_consumer(name, consumer, seq=3) == 3
    assert ctx.client.pull_consumer(name, consumer).fetch(1).data.column("seq")[0].as_py() == 3


# == Spark =====================================================================================
#
# The data source is driven as Spark drives it: its reader, stream reader and writers are
# made from the options and their methods called (partitions and read for a read,
# initialOffset, latestOffset, partitions and read for a streaming read, write for a
# batch write). A streaming write's task needs a running micro-batch, so its publishing
# options are shown to reach the same publisher as a batch write's ("delegated").


def _source(ctx: Ctx, **options: Any) -> Any:
    from jetstream_arrow.spark.datasource import JetStreamDataSource

    return JetStreamDataSource({"servers": ctx.url, **{k: str(v) for k, v in options.items()}})


def spark_read(ctx: Ctx, **options: Any) -> tuple[list[Any], pa.Table]:
    """A batch read: its partitions and its rows."""
    source = _source(ctx, **options)
    reader = source.reader(source.schema())
    parts = reader.partitions()
    batches = [b for p in parts for b in reader.read(p)]
    schema = batches[0].schema if batches else None
    return parts, pa.Table.from_batches(batches, schema)


@effect(("spark.read", "lastPerSubject"))
def _spark_last_per_subject(ctx: Ctx) -> None:
    # m0..m3 alternate between <name>.a and <name>.b: the last of each are m2 and m3.
    name = ctx.stream(count=4, allow_direct=True)
    parts, rows = spark_read(ctx, stream=name, lastPerSubject="true")
    assert len(parts) == 1 and rows.column("data").to_pylist() == [b"m2", b"m3"]
    raises(lambda: spark_read(ctx, stream=name, lastPerSubject="true", startingSequence=2))


@effect(("spark.read", "asOfSequence"))
def _spark_as_of_sequence(ctx: Ctx) -> None:
    name = ctx.stream(count=4, allow_direct=True)
    _, rows = spark_read(ctx, stream=name, lastPerSubject="true", asOfSequence=2)
    assert rows.column("data").to_pylist() == [b"m0", b"m1"]
    raises(lambda: spark_read(ctx, stream=name, asOfSequence=2), BadInputError)


@effect(("spark.read", "asOfTime"))
def _spark_as_of_time(ctx: Ctx) -> None:
    name = ctx.stream(count=2, allow_direct=True)
    when = ctx.rows(name).column("timestamp")[1].as_py().isoformat()
    ctx.fill(name, 2, start=2)
    _, rows = spark_read(ctx, stream=name, lastPerSubject="true", asOfTime=when)
    assert rows.column("data").to_pylist() == [b"m0", b"m1"]


@effect(("spark.read", "kv"))
def _spark_kv_read(ctx: Ctx) -> None:
    bucket = ctx.name("kv").lower()
    ctx.client.create_stream(f"KV_{bucket}", [f"$KV.{bucket}.>"], allow_direct=True)
    ctx.made.append(f"KV_{bucket}")
    ctx.client.write_kv(bucket, pa.table({"key": ["k1", "k2", "k1"], "value": [b"a", b"b", b"c"]}))
    _, rows = spark_read(ctx, kv=bucket)
    assert rows.column_names == ["key", "value", "revision", "operation", "created"]
    assert sorted(zip(rows["key"].to_pylist(), rows["value"].to_pylist(), strict=True)) == [
        ("k1", b"c"),
        ("k2", b"b"),
    ]
    raises(lambda: spark_read(ctx, kv=bucket, subjects="x"), BadInputError)


@effect(("spark.read", "streams"), ("spark.read", "streamPattern"))
def _spark_several_streams(ctx: Ctx) -> None:
    first, second = ctx.stream(count=2), ctx.stream(count=3)
    for options in ({"streams": f"{first},{second}"}, {"streamPattern": f"{first}|{second}"}):
        parts, rows = spark_read(ctx, **options)
        assert sorted({p.stream for p in parts}) == sorted([first, second])
        assert sorted(
            zip(rows["stream"].to_pylist(), rows["seq"].to_pylist(), strict=True)
        ) == sorted([(first, 1), (first, 2), (second, 1), (second, 2), (second, 3)])


@effect(("spark.readStream", "streams"), ("spark.readStream", "streamPattern"))
def _spark_stream_of_several_streams(ctx: Ctx) -> None:
    first, second = ctx.stream(count=2), ctx.stream(count=3)
    for options in ({"streams": f"{first},{second}"}, {"streamPattern": f"{first}|{second}"}):
        start, end, _, got = micro_batch(ctx, startingOffsets="earliest", **options)
        assert seqs(start) == {"streams": {first: {"seq": 1}, second: {"seq": 1}}}
        assert {s: o["seq"] for s, o in end["streams"].items()} == {first: 3, second: 4}
        assert sorted(_seqs(got)) == [1, 1, 2, 2, 3]


def stream_reader(ctx: Ctx, **options: Any) -> Any:
    source = _source(ctx, **options)
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


def _write_schema(rows: pa.Table) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(rows.schema)


def spark_write(ctx: Ctx, rows: pa.Table, **options: Any) -> Any:
    """One task of a batch write of ``rows``; its commit message."""
    source = _source(ctx, **options)
    writer = source.writer(_write_schema(rows), False)
    return writer.write(iter(rows.to_batches()))


def stream_writer(ctx: Ctx, rows: pa.Table, **options: Any) -> Any:
    source = _source(ctx, **options)
    return source.streamWriter(_write_schema(rows), False)


def _seqs(batches: Any) -> list[int]:
    if isinstance(batches, pa.Table):
        return list(batches.column("seq").to_pylist())
    return [s for b in batches for s in b.column("seq").to_pylist()]


#: A value of each connection option, and the options it needs beside it.
_CONNECT_SAMPLES: dict[str, Any] = {
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
_COMPANIONS = {
    "user": "password",
    "password": "user",
    "tls_cert": "tls_key",
    "tls_key": "tls_cert",
    "tls_cert_content": "tls_key_content",
    "tls_key_content": "tls_cert_content",
}


def _parsed(ctx: Ctx, entry: str, **options: Any) -> Any:
    """The options the data source holds for a query of kind ``entry``."""
    rows = pa.table({"subject": ["x"], "data": [b"x"]})
    if entry == "spark.read":
        source = _source(ctx, stream="PROBE", **options)
        return source.reader(source.schema()).opts
    if entry == "spark.readStream":
        return stream_reader(ctx, stream="PROBE", **options).opts
    if entry == "df.write":
        return _source(ctx, **options).writer(_write_schema(rows), False).opts
    return stream_writer(ctx, rows, **options).opts


def _spark_connect_probes() -> None:
    from jetstream_arrow.spark.option_specs import CONNECT_SPECS

    for entry in _spark_kinds():
        for spec in CONNECT_SPECS:
            if spec.python == "servers":
                continue

            def run(ctx: Ctx, entry: str = entry, python: str = spec.python) -> None:
                given = {python: _CONNECT_SAMPLES[python]}
                if python in _COMPANIONS:
                    other = _COMPANIONS[python]
                    given[other] = _CONNECT_SAMPLES[other]
                spark = {
                    _camel(k): str(v).lower() if isinstance(v, bool) else v
                    for k, v in given.items()
                }
                assert _parsed(ctx, entry, **spark).connect == ConnectOptions(
                    servers=ctx.url, **given
                )

            _register(entry, spec.spark, "delegated", run)


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)


_spark_connect_probes()


@effect(("spark.read", "servers"))
def _spark_read_servers(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    assert spark_read(ctx, stream=name)[1].num_rows == 2
    raises(lambda: spark_read(ctx, stream=name, servers="nats://127.0.0.1:1", connectTimeout=1))


@effect(("spark.readStream", "servers"))
def _spark_stream_servers(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    assert seqs(stream_reader(ctx, stream=name).initialOffset()) == {"seq": 3}
    dead = stream_reader(ctx, stream=name, servers="nats://127.0.0.1:1", connectTimeout=1)
    raises(dead.initialOffset)


@effect(("df.write", "servers"))
def _spark_write_servers(ctx: Ctx) -> None:
    name = ctx.stream()
    assert spark_write(ctx, table(name, 2)).stored == 2
    raises(lambda: spark_write(ctx, table(name, 2), servers="nats://127.0.0.1:1", connectTimeout=1))


@effect(("df.writeStream", "servers"))
def _spark_stream_write_servers(ctx: Ctx) -> None:
    # The driver looks the stream up before the query starts: on the server given.
    name = ctx.stream()
    stream_writer(ctx, table(name, 1), stream=name)
    raises(
        lambda: stream_writer(
            ctx, table(name, 1), stream=name, servers="nats://127.0.0.1:1", connectTimeout=1
        ),
        ConnectionFailedError,
    )


def _rides_through_a_pause(ctx: Ctx, seqs_read: Callable[..., list[int]]) -> None:
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


def _read_kind_probes(entry: str) -> None:
    """The options a batch read and a streaming read share, shown on ``entry``."""

    def rows(ctx: Ctx, **options: Any) -> list[int]:
        if entry == "spark.read":
            return _seqs(spark_read(ctx, **options)[1])
        return _seqs(micro_batch(ctx, startingOffsets="earliest", **options)[3])

    def parts(ctx: Ctx, **options: Any) -> int:
        if entry == "spark.read":
            return len(spark_read(ctx, **options)[0])
        return len(micro_batch(ctx, startingOffsets="earliest", **options)[2])

    def batches(ctx: Ctx, **options: Any) -> list[pa.RecordBatch]:
        if entry == "spark.read":
            return spark_read(ctx, **options)[1].to_batches()
        return micro_batch(ctx, startingOffsets="earliest", **options)[3]

    def reg(option: str, kind: str = "effect") -> Callable[[Callable[[Ctx], None]], None]:
        def wrap(fn: Callable[[Ctx], None]) -> None:
            _register(entry, option, kind, fn)

        return wrap

    @reg("stream")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=3)
        ctx.stream(count=5)
        assert rows(ctx, stream=name) == [1, 2, 3]

    @reg("subjects")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        assert rows(ctx, stream=name, subjects=f"{name}.b") == [2, 4, 6]

    @reg("minPartitions")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        assert parts(ctx, stream=name) == 1
        assert parts(ctx, stream=name, minPartitions=3) == 3

    @reg("maxMessagesPerPartition")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        assert parts(ctx, stream=name, maxMessagesPerPartition=2) == 3

    @reg("includeHeaders")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=1)
        assert "headers" in batches(ctx, stream=name, includeHeaders=True)[0].schema.names
        assert "headers" not in batches(ctx, stream=name)[0].schema.names

    @reg("includeTtl")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=1)
        assert "ttl" in batches(ctx, stream=name, includeTtl=True)[0].schema.names
        assert "ttl" not in batches(ctx, stream=name)[0].schema.names
        # beside a decoded value: a message column, not a field of the value
        typed = ctx.stream(allow_msg_ttl=True)
        ctx.client.publish(
            pa.table(
                {
                    "subject": [f"{typed}.a"],
                    "data": [b'{"x": 1}'],
                    "ttl": pa.array([600], pa.duration("s")),
                }
            )
        )
        got = batches(ctx, stream=typed, includeTtl=True, valueFormat="json")[0]
        assert got.column("ttl").to_pylist() == [timedelta(seconds=600)]
        assert got.column("value").to_pylist() == [{"x": 1}]

    @reg("failOnDataLoss")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        ctx.client.purge_stream(name, up_to_seq=3)
        if entry == "spark.read":
            raises(lambda: rows(ctx, stream=name, startingSequence=1), JetStreamArrowError)
            assert rows(ctx, stream=name, startingSequence=1, failOnDataLoss=False) == [3, 4, 5, 6]
        else:
            reader = stream_reader(ctx, stream=name)
            raises(lambda: reader.partitions({"seq": 1}, {"seq": 7}), JetStreamArrowError)
            lenient = stream_reader(ctx, stream=name, failOnDataLoss=False)
            assert lenient.partitions({"seq": 1}, {"seq": 7})

    @reg("batchRows")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        assert [b.num_rows for b in batches(ctx, stream=name, batchRows=4)] == [4, 2]

    @reg("maxBytes")
    def _(ctx: Ctx) -> None:
        name = ctx.big_stream()
        assert len(batches(ctx, stream=name)) == 1
        assert len(batches(ctx, stream=name, maxBytes=300)) > 1

    refused(entry, "heartbeat", lambda ctx: _parsed(ctx, entry, heartbeat="0.01"))

    @reg("resumeTimeout")
    def _(ctx: Ctx) -> None:
        _rides_through_a_pause(ctx, lambda name, **options: rows(ctx, stream=name, **options))

    @reg("startingSequence")
    def _(ctx: Ctx) -> None:
        name = ctx.stream(count=6)
        if entry == "spark.read":
            assert rows(ctx, stream=name, startingSequence=4) == [4, 5, 6]
        else:
            assert seqs(stream_reader(ctx, stream=name, startingSequence=4).initialOffset()) == {
                "seq": 4
            }

    @reg("startingTime")
    def _(ctx: Ctx) -> None:
        name, middle = timed_stream(ctx)
        if entry == "spark.read":
            assert rows(ctx, stream=name, startingTime=middle.isoformat()) == [4, 5, 6]
        else:
            reader = stream_reader(ctx, stream=name, startingTime=middle.isoformat())
            assert seqs(reader.initialOffset()) == {"seq": 4}


_read_kind_probes("spark.read")
_read_kind_probes("spark.readStream")

refused(
    "spark.read",
    "startingOffsets",
    lambda ctx: spark_read(ctx, stream=ctx.stream(count=1), startingOffsets="latest"),
)


@effect(("spark.read", "endingSequence"))
def _spark_end_seq(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert _seqs(spark_read(ctx, stream=name, endingSequence=2)[1]) == [1, 2]


@effect(("spark.read", "endingTime"))
def _spark_end_time(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    assert _seqs(spark_read(ctx, stream=name, endingTime=middle.isoformat())[1]) == [1, 2, 3]


@effect(("spark.readStream", "startingOffsets"))
def _spark_starting_offsets(ctx: Ctx) -> None:
    name = ctx.stream(count=3)
    assert seqs(stream_reader(ctx, stream=name).initialOffset()) == {"seq": 4}
    assert seqs(stream_reader(ctx, stream=name, startingOffsets="earliest").initialOffset()) == {
        "seq": 1
    }


@effect(("spark.readStream", "maxMessagesPerTrigger"))
def _spark_max_per_trigger(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    start, end, _, _ = micro_batch(
        ctx, stream=name, startingOffsets="earliest", maxMessagesPerTrigger=2
    )
    assert (start["seq"], end["seq"]) == (1, 3)


@effect(("spark.readStream", "minMessagesPerTrigger"))
def _spark_min_per_trigger(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    _, held, _, _ = micro_batch(
        ctx, stream=name, startingOffsets="earliest", minMessagesPerTrigger=7
    )
    _, went, _, _ = micro_batch(
        ctx, stream=name, startingOffsets="earliest", minMessagesPerTrigger=6
    )
    assert (held["seq"], went["seq"]) == (1, 7)


@effect(("spark.readStream", "maxTriggerDelay"))
def _spark_max_trigger_delay(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    # No delay: a micro-batch below minMessagesPerTrigger goes at once.
    _, end, _, _ = micro_batch(
        ctx, stream=name, startingOffsets="earliest", minMessagesPerTrigger=7, maxTriggerDelay=0
    )
    assert end["seq"] == 7


@effect(("spark.readStream", "maxBytesPerTrigger"))
def _spark_max_bytes_per_trigger(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    _, end, _, _ = micro_batch(ctx, stream=name, startingOffsets="earliest", maxBytesPerTrigger=1)
    assert end["seq"] == 2  # at least one message


@effect(("spark.readStream", "consumer"))
def _spark_consumer(ctx: Ctx) -> None:
    name = ctx.stream(count=3, allow_direct=True)
    _, end, _, got = micro_batch(ctx, stream=name, consumer="QUERY")
    assert ctx.client.consumer_names(name) == ["QUERY"]
    assert _seqs(got) == [1, 2, 3] and seqs(end) == {"seq": 4}


@effect(("spark.readStream", "consumerGroup"))
def _spark_consumer_group(ctx: Ctx) -> None:
    # Two queries of one group, as their drivers would run them: a is pinned, commits
    # a micro-batch, plans the next and stops (its driver killed); b stands by, and
    # once the pin timed out takes over from the ack floor: only a's unfinished batch.
    name = ctx.stream(count=6, allow_direct=True)
    group = {"stream": name, "consumer": "SHARED", "consumerGroup": "g", "maxMessagesPerTrigger": 3}
    a = stream_reader(ctx, **group, consumerPinTimeout=1)
    b = stream_reader(ctx, **group)
    a_start = a.initialOffset()
    first = a.latestOffset(a_start, a.getDefaultReadLimit())
    # b starts while a is pinned with a micro-batch in flight: a's acks still count.
    b_start = b.initialOffset()
    assert _seqs([x for p in a.partitions(a_start, first) for x in a.read(p)]) == [1, 2, 3]
    a.commit(first)
    a.latestOffset(first, a.getDefaultReadLimit())  # claims 4..6, then a stops
    assert b.latestOffset(b_start, b.getDefaultReadLimit()) == b_start  # a holds the pin
    config = ctx.client.consumer_info(name, "SHARED").config
    assert (config.priority_groups, config.priority_policy) == (["g"], "pinned_client")
    time.sleep(2.5)  # past the pin timeout and the standby's next look
    end = b.latestOffset(b_start, b.getDefaultReadLimit())
    assert seqs(end) == {"seq": 7, "first": 4}
    assert _seqs([x for p in b.partitions(b_start, end) for x in b.read(p)]) == [4, 5, 6]
    # a, back and no longer pinned, plans nothing of what it had claimed: b has it.
    assert a.latestOffset(first, a.getDefaultReadLimit()) == first


@effect(("spark.readStream", "consumerPinTimeout"))
def _spark_consumer_pin_timeout(ctx: Ctx) -> None:
    name = ctx.stream(count=1, allow_direct=True)
    micro_batch(ctx, stream=name, consumer="PINNED", consumerGroup="g", consumerPinTimeout=5)
    assert ctx.client.consumer_info(name, "PINNED").config.priority_timeout == 5
    # Without it, a consumer the source creates moves its pin after 30 s.
    micro_batch(ctx, stream=name, consumer="DEFAULT", consumerGroup="g")
    assert ctx.client.consumer_info(name, "DEFAULT").config.priority_timeout == 30
    # An existing consumer keeps its own: another asked is refused, naming both.
    refused = raises(
        lambda: micro_batch(
            ctx, stream=name, consumer="PINNED", consumerGroup="g", consumerPinTimeout=9
        ),
        BadInputError,
    )
    assert "5" in str(refused) and "consumerPinTimeout" in str(refused)
    refused = raises(lambda: stream_reader(ctx, consumer="X", consumerPinTimeout=5), BadInputError)
    assert "consumerGroup" in str(refused)


@effect(("spark.read", "path"))
def _spark_load_path(ctx: Ctx) -> None:
    name = ctx.stream(count=3)
    spark = ctx.spark()
    df = spark.read.format("jetstream").option("servers", ctx.url).load(name)
    assert sorted(r.seq for r in df.select("seq").collect()) == [1, 2, 3]


@effect(("spark.readStream", "path"))
def _spark_stream_load_path(ctx: Ctx) -> None:
    # Spark hands load(path) to the source as option "path".
    name = ctx.stream(count=3)
    assert seqs(stream_reader(ctx, path=name).initialOffset()) == {"seq": 4}


@effect(("df.write", "path"))
def _spark_save_path(ctx: Ctx) -> None:
    name = ctx.stream()
    spark = ctx.spark()
    df = spark.createDataFrame([(f"{name}.a", b"x")], "subject string, data binary")
    df.write.format("jetstream").option("servers", ctx.url).mode("append").save(name)
    assert ctx.client.stream_info(name).state.messages == 1
    with pytest.raises((BadInputError, *SPARK_ERRORS)) as raised:
        df.write.format("jetstream").option("servers", ctx.url).mode("append").save(f"{name}_NONE")
    assert f"{name}_NONE" in str(raised.value)


def _expected_stream_probe(entry: str, option: str) -> None:
    def run(ctx: Ctx) -> None:
        # The driver checks that the stream named exists; another name fails the write.
        name = ctx.stream()
        other = ctx.stream()
        rows = table(name, 1)
        if entry == "df.write":
            assert spark_write(ctx, rows, **{option: name}).stored == 1
            raises(lambda: spark_write(ctx, rows, **{option: other}), PublishError)
        else:
            stream_writer(ctx, rows, **{option: name})
        raises(
            lambda: (
                _source(ctx, **{option: f"{name}_NONE"}).writer(_write_schema(rows), False)
                if entry == "df.write"
                else stream_writer(ctx, rows, **{option: f"{name}_NONE"})
            ),
            BadInputError,
        )

    _register(entry, option, "effect", run)


for _entry in ("df.write", "df.writeStream"):
    _expected_stream_probe(_entry, "expectedStream")
    _expected_stream_probe(_entry, "stream")
    for _option, _bad in (
        ("ackWindow", 0),
        ("ackTimeout", 0),
        ("maxRetries", -1),
        ("retryBackoff", -1),
    ):
        refused(_entry, _option, lambda ctx, e=_entry, o=_option, b=_bad: _parsed(ctx, e, **{o: b}))


@effect(("df.writeStream", "path"))
def _spark_start_path(ctx: Ctx) -> None:
    # Spark hands start(path) to the sink as option "path": the stream it must exist.
    name = ctx.stream()
    assert stream_writer(ctx, table(name, 1), path=name).opts.expected_stream == name
    raises(lambda: stream_writer(ctx, table(name, 1), path=f"{name}_NONE"), BadInputError)


@effect(("df.write", "subject"))
def _spark_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(ctx, pa.table({"data": [b"x"]}), subject=f"{name}.given")
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.given"]


@effect(("df.write", "msgIdColumn"))
def _spark_msg_id_column(ctx: Ctx) -> None:
    name = ctx.stream()
    rows = table(name, 2).append_column("key", pa.array(["k0", "k1"]))
    spark_write(ctx, rows, msgIdColumn="key")
    assert msg_ids(ctx, name) == ["k0", "k1"]


@effect(("df.write", "writeId"))
def _spark_write_id(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(ctx, table(name, 2), writeId="probe-write")
    assert all(i.startswith("probe-write-") for i in msg_ids(ctx, name))


@effect(("df.write", "exactlyOnce"), ("df.writeStream", "exactlyOnce"))
def _spark_exactly_once(ctx: Ctx) -> None:
    # Into a stream that holds positions a task keeps one (by default, and when
    # asked); with false none. Into a stream that cannot, true is refused.
    rows_of = {}
    for given in ({}, {"exactlyOnce": "true"}, {"exactlyOnce": "false"}):
        name = ctx.stream(exactly_once=True)
        assert spark_write(ctx, table(name, 2), stream=name, writeId="eo", **given).stored == 2
        rows_of[given.get("exactlyOnce", "default")] = ctx.client.stream_info(name).state.messages
        kept = stream_writer(ctx, table(name, 1), stream=name, **given).exactly_once
        assert kept is (given.get("exactlyOnce") != "false")
    # Two rows, and with a position the writer's one (rolled up to its newest).
    assert rows_of == {"default": 3, "true": 3, "false": 2}
    plain = ctx.stream()
    for entry in ("df.write", "df.writeStream"):
        must_refuse(
            lambda e=entry: _parsed(ctx, e, stream=plain, exactlyOnce="true"),
            "exactlyOnce",
            "exactly once into a stream without positions",
        )


@effect(("df.write", "writerLease"), ("df.writeStream", "writerLease"))
def _spark_writer_lease(ctx: Ctx) -> None:
    import json

    from jetstream_arrow.positions import position_subject

    name = ctx.stream(exactly_once=True)
    spark_write(ctx, table(name, 2), stream=name, writeId="lease", writerLease=7)
    # The task's position (writer "lease-0-": its msg id prefix) carries the lease.
    position = ctx.client.get_message(name, last_by_subject=position_subject(name, "lease-0-"))
    assert json.loads(position.data)["lease"] == 7.0
    assert _parsed(ctx, "df.writeStream", stream=name, writerLease=7).writer_lease == 7.0
    for entry in ("df.write", "df.writeStream"):
        raises(lambda e=entry: _parsed(ctx, e, stream=name, writerLease=0), BadInputError)


@effect(("df.write", "publishMode"))
def _spark_publish_mode(ctx: Ctx) -> None:
    name = ctx.stream()
    assert spark_write(ctx, table(name, 2)).stored == 2
    raises(lambda: spark_write(ctx, table(name, 2), publishMode="fast"), PublishError)
    raises(lambda: spark_write(ctx, table(name, 2), publishMode="atomic"), PublishError)


@effect(("df.write", "compression"))
def _spark_compression(ctx: Ctx) -> None:
    name = ctx.stream()
    rows = pa.table({"subject": [f"{name}.a"], "data": [b"compressible " * 40]})
    assert spark_write(ctx, rows, compression="gzip").stored == 1
    assert _stored_encodings(ctx, name, 1) == ["gzip"]
    read = ctx.rows(name)
    assert read.column("data").to_pylist() == [b"compressible " * 40]
    raises(lambda: spark_write(ctx, rows, compression="lz4"), BadInputError)


@effect(("df.write", "kv"))
def _spark_kv(ctx: Ctx) -> None:
    bucket = ctx.name("kv").lower()
    ctx.client.create_stream(f"KV_{bucket}", [f"$KV.{bucket}.>"])
    ctx.made.append(f"KV_{bucket}")
    rows = pa.table({"key": ["k1", "k2"], "value": [b"1", b"2"]})
    assert spark_write(ctx, rows, kv=bucket).stored == 2
    assert ctx.rows(f"KV_{bucket}").column("subject").to_pylist() == [
        f"$KV.{bucket}.k1",
        f"$KV.{bucket}.k2",
    ]
    raises(
        lambda: _source(ctx, kv=bucket, subject="x").writer(_write_schema(rows), False),
        BadInputError,
    )
    # No KV client decompresses a value.
    raises(
        lambda: _source(ctx, kv=bucket, compression="zstd").writer(_write_schema(rows), False),
        BadInputError,
    )


@effect(("df.write", "atomicBatchRows"))
def _spark_atomic_batch_rows(ctx: Ctx) -> None:
    name = ctx.stream(allow_atomic=True)
    spark_write(ctx, table(name, 5), publishMode="atomic", atomicBatchRows=2)
    assert atomic_batch_sizes(ctx, name) == [2, 2, 1]


def _stream_write_delegated(option: str, value: Any) -> None:
    def run(ctx: Ctx) -> None:
        # A streaming write's task publishes like a batch write's (publish_task) with
        # the options parsed the same way: shown on df.write.
        name = ctx.stream()
        rows = pa.table({"subject": [f"{name}.a"], "data": [b"x"], "key": ["k"]})
        batch = _source(ctx, **{option: value}).writer(_write_schema(rows), False)
        stream = stream_writer(ctx, rows, **{option: value})
        assert stream.opts.publisher_kwargs() == batch.opts.publisher_kwargs()
        assert (stream.opts.subject, stream.opts.msg_id_column) == (
            batch.opts.subject,
            batch.opts.msg_id_column,
        )
        assert stream.columns == batch.columns
        del name

    _register("df.writeStream", option, "delegated", run)


_stream_write_delegated("subject", "probe.subject")
_stream_write_delegated("msgIdColumn", "key")
_stream_write_delegated("publishMode", "fast")
_stream_write_delegated("atomicBatchRows", 7)
_stream_write_delegated("compression", "zstd")


@effect(("df.writeStream", "kv"))
def _stream_write_kv(ctx: Ctx) -> None:
    bucket = ctx.name("kv").lower()
    ctx.client.create_stream(f"KV_{bucket}", [f"$KV.{bucket}.>"])
    ctx.made.append(f"KV_{bucket}")
    rows = pa.table({"key": ["k"], "value": [b"v"]})
    writer = stream_writer(ctx, rows, kv=bucket)
    assert (writer.opts.kv, writer.opts.expected_stream) == (bucket, f"KV_{bucket}")
    assert isinstance(writer.columns, KvColumns) and writer.columns.bucket == bucket


# -- mapInArrow helpers: read_fn and publish_fn, called as Spark calls them on a worker ---


def _read_fn(ctx: Ctx, rows: list[tuple[str, int, int | None]], **options: Any) -> pa.Table:
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


def _publish_fn(ctx: Ctx, rows: pa.Table, **options: Any) -> pa.Table:
    from jetstream_arrow.spark.functions import publish_fn

    fn = publish_fn(servers=ctx.url, **options)
    return pa.Table.from_batches(list(fn(iter(rows.to_batches()))))


def _closure_opts(fn: Callable[..., Any]) -> Any:
    return inspect.getclosurevars(fn).nonlocals["opts"]


def _map_in_arrow_connect_probes() -> None:
    from jetstream_arrow.spark.functions import publish_fn, read_fn
    from jetstream_arrow.spark.option_specs import CONNECT_SPECS

    for name, make in (("read_fn", read_fn), ("publish_fn", publish_fn)):
        for spec in CONNECT_SPECS:
            if spec.python == "servers":
                continue

            def run(ctx: Ctx, make: Callable[..., Any] = make, python: str = spec.python) -> None:
                given = {python: _CONNECT_SAMPLES[python]}
                if python in _COMPANIONS:
                    given[_COMPANIONS[python]] = _CONNECT_SAMPLES[_COMPANIONS[python]]
                opts = _closure_opts(make(servers=ctx.url, **given))
                assert opts.connect == ConnectOptions(servers=ctx.url, **given)

            _register(f"spark.functions.{name}", spec.python, "delegated", run)


_map_in_arrow_connect_probes()
_READ_FN = "spark.functions.read_fn"
_PUBLISH_FN = "spark.functions.publish_fn"


@effect((_READ_FN, "servers"))
def _read_fn_servers(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    assert _read_fn(ctx, [(name, 1, None)]).num_rows == 2
    raises(
        lambda: _read_fn(ctx, [(name, 1, None)], servers="nats://127.0.0.1:1", connect_timeout=1)
    )


@effect((_READ_FN, "stream"))
def _read_fn_stream(ctx: Ctx) -> None:
    from jetstream_arrow.spark.functions import read_fn

    name = ctx.stream(count=3)
    fn = read_fn(servers=ctx.url, stream=name)
    ranges = pa.table(
        {"start_seq": pa.array([2], pa.int64()), "end_seq": pa.array([3], pa.int64())}
    )
    got = pa.Table.from_batches(list(fn(iter(ranges.to_batches()))))
    assert got.column("seq").to_pylist() == [2, 3]


@effect((_READ_FN, "subjects"))
def _read_fn_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    got = _read_fn(ctx, [(name, 1, None)], subjects=f"{name}.b")
    assert got.column("seq").to_pylist() == [2, 4, 6]


@effect((_READ_FN, "include_headers"))
def _read_fn_headers(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    assert "headers" in _read_fn(ctx, [(name, 1, None)], include_headers=True).column_names
    assert "headers" not in _read_fn(ctx, [(name, 1, None)]).column_names


@effect((_READ_FN, "include_ttl"))
def _read_fn_ttl(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    assert "ttl" in _read_fn(ctx, [(name, 1, None)], include_ttl=True).column_names
    assert "ttl" not in _read_fn(ctx, [(name, 1, None)]).column_names


@effect((_READ_FN, "resume_timeout"))
def _read_fn_resume_timeout(ctx: Ctx) -> None:
    def seqs_read(name: str, **options: Any) -> list[int]:
        return _read_fn(ctx, [(name, 1, None)], **options).column("seq").to_pylist()

    _rides_through_a_pause(ctx, seqs_read)


@effect((_READ_FN, "batch_rows"))
def _read_fn_batch_rows(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    got = _read_fn(ctx, [(name, 1, None)], batch_rows=4)
    assert [b.num_rows for b in got.to_batches()] == [4, 2]


@effect((_READ_FN, "max_bytes"))
def _read_fn_max_bytes(ctx: Ctx) -> None:
    name = ctx.big_stream()
    assert len(_read_fn(ctx, [(name, 1, None)]).to_batches()) == 1
    assert len(_read_fn(ctx, [(name, 1, None)], max_bytes=300).to_batches()) > 1


@effect((_READ_FN, "fail_on_data_loss"))
def _read_fn_data_loss(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    ctx.client.purge_stream(name, up_to_seq=3)
    raises(lambda: _read_fn(ctx, [(name, 1, None)]), JetStreamArrowError)
    got = _read_fn(ctx, [(name, 1, None)], fail_on_data_loss=False)
    assert got.column("seq").to_pylist() == [3, 4, 5, 6]


refused(_READ_FN, "heartbeat", lambda ctx: _read_fn(ctx, [], heartbeat=0.01))
for _option, _value in (
    ("starting_offsets", "earliest"),
    ("start_seq", 1),
    ("end_seq", 1),
    ("start_time", "2030-01-01T00:00:00+00:00"),
    ("end_time", "2030-01-01T00:00:00+00:00"),
    # Each input row is one range, read by the task that holds it: nothing splits it.
    ("min_partitions", 2),
    ("max_messages_per_partition", 10),
    # A read of the latest message per subject is not a range.
    ("last_per_subject", True),
    ("as_of_seq", 1),
    ("as_of_time", "2030-01-01T00:00:00+00:00"),
    ("kv", "bucket"),
    # Each input row names its stream.
    ("streams", "A,B"),
    ("stream_pattern", "A.*"),
):
    refused(_READ_FN, _option, lambda ctx, o=_option, v=_value: _read_fn(ctx, [], **{o: v}))


@effect((_PUBLISH_FN, "servers"))
def _publish_fn_servers(ctx: Ctx) -> None:
    name = ctx.stream()
    assert _publish_fn(ctx, table(name, 2)).num_rows == 2
    raises(
        lambda: _publish_fn(ctx, table(name, 2), servers="nats://127.0.0.1:1", connect_timeout=1)
    )


@effect((_PUBLISH_FN, "subject"))
def _publish_fn_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    _publish_fn(ctx, pa.table({"data": [b"x"]}), subject=f"{name}.given")
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.given"]


@effect((_PUBLISH_FN, "msg_id_column"))
def _publish_fn_msg_id_column(ctx: Ctx) -> None:
    name = ctx.stream()
    _publish_fn(
        ctx, table(name, 2).append_column("key", pa.array(["k0", "k1"])), msg_id_column="key"
    )
    assert msg_ids(ctx, name) == ["k0", "k1"]


@effect((_PUBLISH_FN, "write_id"))
def _publish_fn_write_id(ctx: Ctx) -> None:
    name = ctx.stream()
    _publish_fn(ctx, table(name, 2), write_id="probe-write")
    assert msg_ids(ctx, name) == ["probe-write-0-0", "probe-write-0-1"]


# publish_fn acks every input row, so it keeps no position: refused, naming the option.
refused(
    _PUBLISH_FN,
    "exactly_once",
    lambda ctx: _publish_fn(ctx, table(ctx.stream(exactly_once=True), 1), exactly_once=True),
)
refused(
    _PUBLISH_FN,
    "writer_lease",
    lambda ctx: _publish_fn(ctx, table(ctx.stream(exactly_once=True), 1), writer_lease=5),
)


@effect((_PUBLISH_FN, "publish_mode"))
def _publish_fn_mode(ctx: Ctx) -> None:
    name = ctx.stream(allow_batched=True)
    assert _publish_fn(ctx, table(name, 2)).column("seq").to_pylist() == [1, 2]
    assert _publish_fn(ctx, table(name, 2), publish_mode="fast").column("seq").null_count == 2


@effect((_PUBLISH_FN, "compression"))
def _publish_fn_compression(ctx: Ctx) -> None:
    name = ctx.stream()
    rows = pa.table({"subject": [f"{name}.a"], "data": [b"compressible " * 40]})
    assert _publish_fn(ctx, rows, compression="s2").column("seq").to_pylist() == [1]
    assert _stored_encodings(ctx, name, 1) == ["s2"]


@effect((_PUBLISH_FN, "kv"))
def _publish_fn_kv(ctx: Ctx) -> None:
    bucket = ctx.name("kv").lower()
    ctx.client.create_stream(f"KV_{bucket}", [f"$KV.{bucket}.>"])
    ctx.made.append(f"KV_{bucket}")
    acks = _publish_fn(ctx, pa.table({"key": ["k"], "value": [b"v"]}), kv=bucket)
    assert acks.column("seq").to_pylist() == [1]


@effect((_PUBLISH_FN, "atomic_batch_rows"))
def _publish_fn_atomic_batch_rows(ctx: Ctx) -> None:
    name = ctx.stream(allow_atomic=True)
    acks = _publish_fn(ctx, table(name, 3), publish_mode="atomic", atomic_batch_rows=2)
    assert acks.column("seq").to_pylist() == [1, 2, 3]
    assert atomic_batch_sizes(ctx, name) == [2, 1]


@effect((_PUBLISH_FN, "expected_stream"), (_PUBLISH_FN, "stream"))
def _publish_fn_expected_stream(ctx: Ctx) -> None:
    name, other = ctx.stream(), ctx.stream()
    for option in ("expected_stream", "stream"):
        assert _publish_fn(ctx, table(name, 1), **{option: name}).column("error").null_count == 1
        acks = _publish_fn(ctx, table(name, 1), **{option: other})
        assert acks.column("error").null_count == 0, acks


def _spark_name(python: str) -> str:
    from jetstream_arrow.spark.option_specs import WRITE_SPECS

    return next(s.spark for s in WRITE_SPECS if s.python == python)


# The helpers take both spellings; an error may name the option in either.
for _option, _bad in (
    ("window", 0),
    ("ack_timeout", 0),
    ("max_retries", -1),
    ("retry_backoff", -1),
):
    refused(
        _PUBLISH_FN,
        _option,
        lambda ctx, o=_option, b=_bad: _publish_fn(ctx, pa.table({}), **{o: b}),
        names=(_option, _spark_name(_option)),
    )


# == CLI ========================================================================================


def write_csv(ctx: Ctx, text: str, suffix: str = ".csv") -> str:
    path = ctx.tmp / f"{uuid.uuid4().hex[:8]}{suffix}"
    path.write_text(text)
    return str(path)


_CSV = "id,zip,kind\n1,02134,a\n2,10001,b\n"


def load(ctx: Ctx, *argv: str, csv: str = _CSV, stream: str | None = None) -> tuple[Any, str]:
    """``jetstream-arrow load`` of a small CSV file into a new stream (or ``stream``)."""
    name = stream or ctx.stream()
    run = ctx.cli("load", write_csv(ctx, csv), "--stream", name, "-s", ctx.url, *argv)
    if "--subject" not in argv and "--subject-column" not in argv:
        raise AssertionError("give --subject or --subject-column")
    return run, name


def payloads(ctx: Ctx, name: str) -> list[Any]:
    return [json.loads(d) for d in ctx.rows(name).column("data").to_pylist()]


def _load_probe(option: str) -> Callable[[Callable[[Ctx], None]], None]:
    def wrap(fn: Callable[[Ctx], None]) -> None:
        _register("jetstream-arrow load", option, "effect", fn)

    return wrap


@_load_probe("--stream")
def _cli_stream(ctx: Ctx) -> None:
    name = ctx.stream()
    run, _ = load(ctx, "--subject", f"{name}.x", stream=name)
    assert run.code == 0, run.err
    assert ctx.client.stream_info(name).state.messages == 2


@_load_probe("--subject")
def _cli_subject(ctx: Ctx) -> None:
    name = ctx.stream()
    load(ctx, "--subject", f"{name}.given", stream=name)
    assert set(ctx.rows(name).column("subject").to_pylist()) == {f"{name}.given"}


@_load_probe("--subject-column")
def _cli_subject_column(ctx: Ctx) -> None:
    name = ctx.stream()
    run, _ = load(
        ctx, "--subject-column", "subj", stream=name, csv=f"subj,v\n{name}.p,1\n{name}.q,2\n"
    )
    assert run.code == 0, run.err
    assert ctx.rows(name).column("subject").to_pylist() == [f"{name}.p", f"{name}.q"]


@_load_probe("--format")
def _cli_format(ctx: Ctx) -> None:
    name = ctx.stream()
    path = write_csv(ctx, _CSV, suffix=".txt")
    base = ("load", path, "--stream", name, "-s", ctx.url, "--subject", f"{name}.x")
    assert ctx.cli(*base).code == 2
    run = ctx.cli(*base, "--format", "csv")
    assert run.code == 0, run.err
    assert ctx.client.stream_info(name).state.messages == 2


@_load_probe("--data-column")
def _cli_data_column(ctx: Ctx) -> None:
    name = ctx.stream()
    load(ctx, "--subject", f"{name}.x", "--data-column", "kind", stream=name)
    assert ctx.rows(name).column("data").to_pylist() == [b"a", b"b"]


@_load_probe("--headers-column")
def _cli_headers_column(ctx: Ctx) -> None:
    name = ctx.stream()
    csv = 'h,v\n"{""X-Probe"": ""one""}",1\n"{""X-Probe"": ""two""}",2\n'
    run, _ = load(ctx, "--subject", f"{name}.x", "--headers-column", "h", stream=name, csv=csv)
    assert run.code == 0, run.err
    assert [h.get("X-Probe") for h in headers_of(ctx, name)] == [["one"], ["two"]]


@_load_probe("--msg-id-column")
def _cli_msg_id_column(ctx: Ctx) -> None:
    name = ctx.stream()
    load(ctx, "--subject", f"{name}.x", "--msg-id-column", "zip", stream=name)
    assert msg_ids(ctx, name) == ["02134", "10001"]


@_load_probe("--file-id")
def _cli_file_id(ctx: Ctx) -> None:
    name = ctx.stream()
    path = write_csv(ctx, _CSV)
    base = ("load", path, "--stream", name, "-s", ctx.url, "--subject", f"{name}.x")
    ctx.cli(*base)
    ctx.cli(*base, "--file-id", "quick")
    ids = msg_ids(ctx, name)
    assert len(ids) == 4 and ids[0] != ids[2], ids


@_load_probe("--msg-id-prefix")
def _cli_msg_id_prefix(ctx: Ctx) -> None:
    name = ctx.stream()
    load(ctx, "--subject", f"{name}.x", "--msg-id-prefix", "P", stream=name)
    assert msg_ids(ctx, name) == ["P0", "P1"]


def _created(ctx: Ctx, *argv: str, subjects: str | None = None) -> Any:
    """A load with --create-stream (and ``argv``); the new stream's info. ``subjects``
    ("{name}" for the stream's name) is given as --stream-subjects."""
    name = ctx.name()
    ctx.made.append(name)
    more = ["--stream-subjects", subjects.format(name=name)] if subjects else []
    run = ctx.cli(
        "load",
        write_csv(ctx, _CSV),
        "--stream",
        name,
        "-s",
        ctx.url,
        "--subject",
        f"{name}.x",
        "--create-stream",
        *more,
        *argv,
    )
    assert run.code == 0, run.err
    return ctx.client.stream_info(name)


@_load_probe("--create-stream")
def _cli_create_stream(ctx: Ctx) -> None:
    name = ctx.name()
    run = ctx.cli(
        "load", write_csv(ctx, _CSV), "--stream", name, "-s", ctx.url, "--subject", f"{name}.x"
    )
    assert run.code == 1 and "--create-stream" in run.err
    # the file's 2 rows (its position message, kept in a stream the load made, is not one)
    assert data_messages(ctx.url, _created(ctx).config.name) == 2


@_load_probe("--stream-subjects")
def _cli_stream_subjects(ctx: Ctx) -> None:
    # The subjects given (or the load's subject), and the writers' positions' subjects
    # that --create-stream adds to every stream it makes.
    info = _created(ctx, subjects="{name}.*")
    name = info.config.name
    assert info.config.subjects == [f"{name}.*", f"{POSITION_SUBJECT_PREFIX}{name}.>"]
    plain = _created(ctx)
    name = plain.config.name
    assert plain.config.subjects == [f"{name}.x", f"{POSITION_SUBJECT_PREFIX}{name}.>"]


@_load_probe("--storage")
def _cli_storage(ctx: Ctx) -> None:
    assert _created(ctx, "--storage", "memory").config.storage == "memory"
    assert _created(ctx).config.storage == "file"


@_load_probe("--duplicate-window")
def _cli_duplicate_window(ctx: Ctx) -> None:
    assert _created(ctx, "--duplicate-window", "30").config.duplicate_window == 30.0
    assert _created(ctx).config.duplicate_window != 30.0


@_load_probe("--ttl")
def _cli_ttl(ctx: Ctx) -> None:
    info = _created(ctx, "--ttl", "90s")
    assert info.config.allow_msg_ttl is True
    # the file's first row: after its first position message
    first = first_data_seq(ctx.url, info.config.name)
    stored = ctx.client.get_message(info.config.name, first)
    assert stored.headers.get("Nats-TTL") == ["90s"], stored.headers
    assert _created(ctx).config.allow_msg_ttl is not True


@_load_probe("--delimiter")
def _cli_delimiter(ctx: Ctx) -> None:
    name = ctx.stream()
    load(ctx, "--subject", f"{name}.x", "--delimiter", ";", stream=name, csv="a;b\n1;2\n")
    assert payloads(ctx, name) == [{"a": "1", "b": "2"}]


@_load_probe("--csv-types")
def _cli_csv_types(ctx: Ctx) -> None:
    as_text, inferred = ctx.stream(), ctx.stream()
    load(ctx, "--subject", f"{as_text}.x", stream=as_text)
    load(ctx, "--subject", f"{inferred}.x", "--csv-types", "infer", stream=inferred)
    assert [p["zip"] for p in payloads(ctx, as_text)] == ["02134", "10001"]
    assert [p["zip"] for p in payloads(ctx, inferred)] == [2134, 10001]


def cli_refused(entry: str, flag: str, argv: Callable[[Ctx], list[str]], code: int = 2) -> None:
    """A probe: the command exits with ``code`` and stderr names ``flag``."""

    def run(ctx: Ctx) -> None:
        got = ctx.cli(*argv(ctx))
        assert got.code == code and flag in got.err, (
            f"exit {got.code}; stderr does not name {flag}: {got.err}"
        )

    _register(entry, flag, "refusal", run)


def _load_argv(ctx: Ctx, *argv: str) -> list[str]:
    name = ctx.stream()
    return [
        "load",
        write_csv(ctx, _CSV),
        "--stream",
        name,
        "-s",
        ctx.url,
        "--subject",
        f"{name}.x",
        *argv,
    ]


@_load_probe("--compression")
def _cli_load_compression(ctx: Ctx) -> None:
    name = ctx.stream()
    text = "compressible " * 40
    run, _ = load(
        ctx, "--subject", f"{name}.x", "--compression", "zlib", stream=name, csv=f"id,t\n1,{text}\n"
    )
    assert run.code == 0, run.err
    assert _stored_encodings(ctx, name, 1) == ["zlib"]
    assert payloads(ctx, name) == [{"id": "1", "t": text}]
    bad = ctx.cli(*_load_argv(ctx, "--compression", "lz4"))
    assert bad.code == 2 and "--compression" in bad.err


@_load_probe("--exactly-once")
def _cli_load_exactly_once(ctx: Ctx) -> None:
    name = ctx.stream(exactly_once=True)
    run, _ = load(ctx, "--subject", f"{name}.x", "--exactly-once", stream=name)
    assert run.code == 0, run.err
    # The two rows and the file's position, which reads leave out.
    assert ctx.client.stream_info(name).state.messages == 3
    assert len(payloads(ctx, name)) == 2
    # Into a stream that cannot hold positions: refused, naming how to enable it.
    refused = ctx.cli(*_load_argv(ctx, "--exactly-once"))
    assert refused.code == 2 and "--exactly-once" in refused.err, refused.err
    assert "enable-exactly-once" in refused.err


@_load_probe("--no-exactly-once")
def _cli_load_no_exactly_once(ctx: Ctx) -> None:
    name = ctx.stream(exactly_once=True)
    run, _ = load(ctx, "--subject", f"{name}.x", "--no-exactly-once", stream=name)
    assert run.code == 0, run.err
    assert ctx.client.stream_info(name).state.messages == 2  # no position


@_load_probe("--writer-lease")
def _cli_load_writer_lease(ctx: Ctx) -> None:
    name = ctx.stream(exactly_once=True)
    run, _ = load(ctx, "--subject", f"{name}.x", "--writer-lease", "7.5", stream=name)
    assert run.code == 0, run.err
    # The file's last position (closed) is the last message of the stream.
    last = ctx.client.stream_info(name).state.last_seq
    position = json.loads(ctx.client.get_message(name, seq=last).data)
    assert position["lease"] == 7.5
    refused = ctx.cli(*_load_argv(ctx, "--writer-lease", "0"))
    assert refused.code == 2 and "--writer-lease" in refused.err, refused.err


for _flag_name, _value in (
    ("--batch-rows", "0"),
    ("--window", "0"),
    ("--ack-timeout", "0"),
    ("--max-rate", "0"),
):
    cli_refused(
        "jetstream-arrow load",
        _flag_name,
        lambda ctx, f=_flag_name, v=_value: _load_argv(ctx, f, v),
    )


def _export_argv(
    ctx: Ctx, *argv: str, name: str | None = None, out: str | None = None
) -> list[str]:
    name = name or ctx.stream(count=6)
    out = out or str(ctx.tmp / f"{uuid.uuid4().hex[:8]}.parquet")
    return ["export", name, "-o", out, "-s", ctx.url, *argv]


def export(ctx: Ctx, *argv: str, name: str | None = None) -> pa.Table:
    out = str(ctx.tmp / f"{uuid.uuid4().hex[:8]}.parquet")
    run = ctx.cli(*_export_argv(ctx, *argv, name=name, out=out))
    assert run.code == 0, run.err
    return pq.read_table(out)


def _export_probe(option: str) -> Callable[[Callable[[Ctx], None]], None]:
    def wrap(fn: Callable[[Ctx], None]) -> None:
        _register("jetstream-arrow export", option, "effect", fn)

    return wrap


@_export_probe("--output")
def _cli_output(ctx: Ctx) -> None:
    out = ctx.tmp / "given-name.arrow"
    assert ctx.cli(*_export_argv(ctx, out=str(out))).code == 0
    assert out.exists()


@_export_probe("--format")
def _cli_export_format(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    run = ctx.cli("export", name, "-o", "-", "--format", "jsonl", "-s", ctx.url)
    assert run.code == 0 and len(run.out.splitlines()) == 2, run


@_export_probe("--no-decompress")
def _cli_no_decompress(ctx: Ctx) -> None:
    name = ctx.stream()
    plain = b"compressible " * 40
    ctx.client.publish(pa.table({"subject": [f"{name}.a"], "data": [plain]}), compression="gzip")
    assert export(ctx, name=name).column("data").to_pylist() == [plain]
    stored = export(ctx, "--no-decompress", name=name).column("data").to_pylist()
    assert len(stored[0]) < len(plain) and gzip.decompress(stored[0]) == plain


@_export_probe("--start-seq")
def _cli_start_seq(ctx: Ctx) -> None:
    assert export(ctx, "--start-seq", "4").column("seq").to_pylist() == [4, 5, 6]


@_export_probe("--end-seq")
def _cli_end_seq(ctx: Ctx) -> None:
    assert export(ctx, "--end-seq", "2").column("seq").to_pylist() == [1, 2]


@_export_probe("--since")
def _cli_since(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    got = export(ctx, "--since", middle.isoformat(), name=name)
    assert got.column("seq").to_pylist() == [4, 5, 6]


@_export_probe("--until")
def _cli_until(ctx: Ctx) -> None:
    name, middle = timed_stream(ctx)
    got = export(ctx, "--until", middle.isoformat(), name=name)
    assert got.column("seq").to_pylist() == [1, 2, 3]


@_export_probe("--subjects")
def _cli_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert export(ctx, "--subjects", f"{name}.b", name=name).column("seq").to_pylist() == [2, 4, 6]


@_export_probe("--include-headers")
def _cli_include_headers(ctx: Ctx) -> None:
    assert "headers" in export(ctx, "--include-headers").column_names
    assert "headers" not in export(ctx).column_names


@_export_probe("--data-as")
def _cli_data_as(ctx: Ctx) -> None:
    assert export(ctx, "--data-as", "text").column("data").to_pylist()[0] == "m0"
    assert export(ctx).column("data").to_pylist()[0] == b"m0"


@_export_probe("--columns")
def _cli_columns(ctx: Ctx) -> None:
    assert export(ctx, "--columns", "seq,subject").column_names == ["seq", "subject"]


@_export_probe("--compression")
def _cli_compression(ctx: Ctx) -> None:
    out = str(ctx.tmp / f"{uuid.uuid4().hex[:8]}.parquet")
    assert ctx.cli(*_export_argv(ctx, "--compression", "snappy", out=out)).code == 0
    assert pq.ParquetFile(out).metadata.row_group(0).column(0).compression == "SNAPPY"
    # Where the format has no compression, the flag is refused, not dropped.
    csv = str(ctx.tmp / f"{uuid.uuid4().hex[:8]}.csv")
    run = ctx.cli(*_export_argv(ctx, "--compression", "gzip", out=csv))
    assert run.code == 2 and "--compression" in run.err, (
        f"export to CSV with --compression gzip: exit {run.code}, stderr {run.err!r}"
    )


@_export_probe("--batch-rows")
def _cli_export_batch_rows(ctx: Ctx) -> None:
    out = str(ctx.tmp / f"{uuid.uuid4().hex[:8]}.parquet")
    assert ctx.cli(*_export_argv(ctx, "--batch-rows", "2", out=out)).code == 0
    assert pq.ParquetFile(out).metadata.num_row_groups == 3


# -- connection and output flags, per command -----------------------------------------


def _reach(ctx: Ctx, command: str, url: str, *flags: str) -> Any:
    """Run ``command`` against ``url``; a run that reached JetStream ends in success
    (load creates its stream) or says the stream does not exist (export, sink)."""
    name = ctx.name()
    if command == "load":
        argv = [
            "load",
            write_csv(ctx, _CSV),
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


def _reached(run: Any) -> bool:
    return run.code == 0 or "does not exist" in run.err


def _connection_probes(command: str) -> None:
    entry = f"jetstream-arrow {command}"

    def reg(flag: str, kind: str = "effect") -> Callable[[Callable[[Ctx], None]], None]:
        def wrap(fn: Callable[[Ctx], None]) -> None:
            _register(entry, flag, kind, fn)

        return wrap

    @reg("--servers")
    def _(ctx: Ctx) -> None:
        assert _reached(_reach(ctx, command, ctx.url))
        dead = _reach(ctx, command, "nats://127.0.0.1:1")
        assert dead.code == 1 and "cannot reach NATS" in dead.err, dead

    @reg("--context")
    def _(ctx: Ctx) -> None:
        context = ctx.tmp / f"{uuid.uuid4().hex[:8]}.json"
        context.write_text(json.dumps({"url": "nats://127.0.0.1:1"}))
        name = ctx.name()
        argv = (
            ["load", write_csv(ctx, _CSV), "--stream", name, "--subject", "x.y"]
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
        assert _reached(_reach(ctx, command, server.url, "--user", "probe", "--password", "secret"))
        run = _reach(ctx, command, server.url, "--user", "nobody", "--password", "secret")
        assert run.code == 1 and "permission denied" in run.err, run

    @reg("--password")
    def _(ctx: Ctx) -> None:
        server, _ = auth_server(ctx)
        run = _reach(ctx, command, server.url, "--user", "probe", "--password", "wrong")
        assert run.code == 1 and "permission denied" in run.err, run
        # A password without a user is sent nowhere: refused, not dropped.
        alone = _reach(ctx, command, ctx.url, "--password", "secret")
        assert alone.code == 2 and "--password" in alone.err, (
            f"--password without --user: exit {alone.code}, stderr {alone.err!r}"
        )

    @reg("--token")
    def _(ctx: Ctx) -> None:
        server = token_server(ctx)
        assert _reached(_reach(ctx, command, server.url, "--token", "probe-token"))
        assert "permission denied" in _reach(ctx, command, server.url, "--token", "wrong").err

    @reg("--nkey")
    def _(ctx: Ctx) -> None:
        server, seed = auth_server(ctx)
        seed_file = ctx.tmp / f"{uuid.uuid4().hex[:8]}.nk"
        seed_file.write_text(seed)
        assert _reached(_reach(ctx, command, server.url, "--nkey", str(seed_file)))
        assert "permission denied" in _reach(ctx, command, server.url).err

    cli_refused(
        entry,
        "--creds",
        lambda ctx: [*_reach_argv(ctx, command), "--creds", "/no/such.creds"],
        code=1,
    )

    def tls(ctx: Ctx, *without: str) -> Any:
        server, files = tls_server(ctx)
        flags = {"--tls-ca": files["ca"], "--tls-cert": files["cert"], "--tls-key": files["key"]}
        argv = [x for f, v in flags.items() if f not in without for x in (f, v)]
        if "--tls-first" not in without:
            argv.append("--tls-first")
        return _reach(ctx, command, server.url, *argv)

    @reg("--tls-first")
    def _(ctx: Ctx) -> None:
        assert _reached(tls(ctx))
        assert not _reached(tls(ctx, "--tls-first"))

    @reg("--tls-ca")
    def _(ctx: Ctx) -> None:
        assert not _reached(tls(ctx, "--tls-ca"))
        missing = _reach(ctx, command, ctx.url, "--tls-ca", "/no/such/ca.pem")
        assert missing.code == 1 and "--tls-ca" in missing.err, missing

    for flag in ("--tls-cert", "--tls-key"):

        def cert(ctx: Ctx, flag: str = flag) -> None:
            assert not _reached(tls(ctx, "--tls-cert", "--tls-key"))
            other = "--tls-key" if flag == "--tls-cert" else "--tls-cert"
            files = tls_server(ctx)[1]
            given = {"--tls-cert": files["cert"], "--tls-key": files["key"]}
            missing = _reach(ctx, command, ctx.url, flag, "/no/such/file.pem", other, given[other])
            assert missing.code == 1 and flag in missing.err, missing

        _register(entry, flag, "effect", cert)

    @reg("--domain")
    def _(ctx: Ctx) -> None:
        run = _reach(ctx, command, ctx.url, "--domain", "nowhere")
        assert run.code == 1 and "--domain" in run.err, run

    @reg("--api-prefix")
    def _(ctx: Ctx) -> None:
        assert _reached(_reach(ctx, command, ctx.url, "--api-prefix", "$JS.API"))
        run = _reach(ctx, command, ctx.url, "--api-prefix", "ELSEWHERE.API")
        assert run.code == 1 and "--api-prefix" in run.err, run

    cli_refused(
        entry,
        "--connect-timeout",
        lambda ctx: [*_reach_argv(ctx, command), "--connect-timeout", "0"],
    )

    def moving(ctx: Ctx, *flags: str) -> Any:
        """The command moving data: a load, or an export or sink of a stream that has
        some."""
        if command == "load":
            return _reach(ctx, command, ctx.url, *flags)
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
        assert _reach(ctx, command, "nats://127.0.0.1:1").code == 1
        raises(lambda: _reach(ctx, command, "nats://127.0.0.1:1", "--debug"), ConnectionFailedError)


def _reach_argv(ctx: Ctx, command: str) -> list[str]:
    name = ctx.name()
    if command == "load":
        return [
            "load",
            write_csv(ctx, _CSV),
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


_connection_probes("load")
_connection_probes("export")
_connection_probes("sink")


# -- jetstream-arrow sink and run_sink ---------------------------------------------------


def _sink_stream_of(ctx: Ctx, *payloads: bytes) -> str:
    """A new stream of ``payloads`` on ``<name>.a`` and ``<name>.b`` in turn (default:
    six JSON objects ``{"n": i}``)."""
    name = ctx.stream()
    data = list(payloads) or [json.dumps({"n": i}).encode() for i in range(6)]
    subjects = [f"{name}.{'ab'[i % 2]}" for i in range(len(data))]
    ctx.client.publish(pa.table({"subject": subjects, "data": data}))
    return name


def sink(ctx: Ctx, name: str, *argv: str) -> tuple[Any, pa.Table]:
    """``jetstream-arrow sink`` of ``name`` into a new Parquet dataset; the run and the
    rows landed."""
    from jetstream_arrow.sink import dataset_files

    root = ctx.tmp / f"sink-{uuid.uuid4().hex[:8]}"
    run = ctx.cli("sink", name, "--parquet", str(root), "-s", ctx.url, *argv)
    assert run.code == 0, run.err
    files = dataset_files(root)
    got = pq.ParquetDataset(files, partitioning=None).read() if files else pa.table({})
    return run, got


def _sink_probe(option: str) -> Callable[[Callable[[Ctx], None]], None]:
    def wrap(fn: Callable[[Ctx], None]) -> None:
        _register("jetstream-arrow sink", option, "effect", fn)

    return wrap


@_sink_probe("--parquet")
def _cli_sink_parquet(ctx: Ctx) -> None:
    _, got = sink(ctx, ctx.stream(count=3))
    assert got.column("seq").to_pylist() == [1, 2, 3]


@_sink_probe("--delta")
def _cli_sink_delta(ctx: Ctx) -> None:
    from deltalake import DeltaTable

    name, path = ctx.stream(count=3), ctx.tmp / f"delta-{uuid.uuid4().hex[:8]}"
    assert ctx.cli("sink", name, "--delta", str(path), "-s", ctx.url).code == 0
    assert sorted(DeltaTable(str(path)).to_pyarrow_table().column("seq").to_pylist()) == [1, 2, 3]


@_sink_probe("--until-caught-up")
def _cli_sink_until_caught_up(ctx: Ctx) -> None:
    run, got = sink(ctx, ctx.stream(count=3), "--until-caught-up")
    assert "caught up" in run.out and got.num_rows == 3
    both = ctx.cli("sink", "X", "--parquet", "x", "--until-caught-up", "--follow")
    assert both.code == 2 and "--until-caught-up" in both.err


@_sink_probe("--follow")
def _cli_sink_follow(ctx: Ctx) -> None:
    from jetstream_arrow.sink import read_manifest

    name, root = ctx.stream(count=2), ctx.tmp / f"follow-{uuid.uuid4().hex[:8]}"
    argv = ["sink", name, "--parquet", str(root), "-s", ctx.url, "--commit-seconds", "0.1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetstream_arrow", *argv, "--follow"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ctx.fill(name, 1, start=2)  # stored while the sink runs: a following sink lands it
        deadline = time.monotonic() + 30
        while not (root.exists() and (read_manifest(root) or {}).get("positions") == {name: 3}):
            assert proc.poll() is None, "a following sink ended by itself"
            assert time.monotonic() < deadline, "waited 30 s for the sink to land message 3"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and f"stopped: {name} at 3" in out, out


@_sink_probe("--subject")
def _cli_sink_subject(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    _, got = sink(ctx, name, "--subject", f"{name}={name}.b")
    assert got.column("seq").to_pylist() == [2, 4, 6]


@_sink_probe("--commit-rows")
def _cli_sink_commit_rows(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert "in 3 commits" in sink(ctx, name, "--commit-rows", "2")[0].out
    assert "in 1 commits" in sink(ctx, name)[0].out


@_sink_probe("--value-format")
def _cli_sink_value_format(ctx: Ctx) -> None:
    name = _sink_stream_of(ctx)
    assert sink(ctx, name, "--value-format", "json")[1].column("n").to_pylist() == list(range(6))
    assert "n" not in sink(ctx, name)[1].column_names


@_sink_probe("--include-headers")
def _cli_sink_include_headers(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    assert "headers" in sink(ctx, name, "--include-headers")[1].column_names
    assert "headers" not in sink(ctx, name)[1].column_names


@_sink_probe("--partition-by")
def _cli_sink_partition_by(ctx: Ctx) -> None:
    from jetstream_arrow.sink import dataset_files

    name, root = ctx.stream(count=4), ctx.tmp / f"parts-{uuid.uuid4().hex[:8]}"
    argv = ["sink", name, "--parquet", str(root), "-s", ctx.url]
    assert ctx.cli(*argv, "--partition-by", "subject_token_2").code == 0
    dirs = sorted({Path(f).parent.name for f in dataset_files(root)})
    assert dirs == ["subject_token_2=a", "subject_token_2=b"], dirs


@_sink_probe("--dead-letter-stream")
def _cli_sink_dead_letter_stream(ctx: Ctx) -> None:
    name = _sink_stream_of(ctx, b'{"n": 1}', b"not json", b'{"n": 3}')
    dead = ctx.stream()
    _, got = sink(ctx, name, "--value-format", "json", "--dead-letter-stream", dead)
    assert got.column("seq").to_pylist() == [1, 3]
    assert ctx.rows(dead).column("data").to_pylist() == [b"not json"]
    failed = ctx.cli(
        "sink", name, "--parquet", str(ctx.tmp / "x"), "-s", ctx.url, "--value-format", "json"
    )
    assert failed.code == 1 and "seq 2" in failed.err, failed


@_sink_probe("--durable")
def _cli_sink_durable(ctx: Ctx) -> None:
    name = ctx.stream(count=3, retention="workqueue")
    needed = ctx.cli("sink", name, "--parquet", str(ctx.tmp / "x"), "-s", ctx.url)
    assert needed.code == 2 and "--durable" in needed.err, needed
    _, got = sink(ctx, name, "--durable", "lake")
    assert got.column("seq").to_pylist() == [1, 2, 3]
    assert ctx.client.stream_info(name).state.messages == 0, "landed messages stay queued"
    limits = ctx.stream(count=1)
    refused_run = ctx.cli(
        "sink", limits, "--parquet", str(ctx.tmp / "y"), "-s", ctx.url, "--durable", "lake"
    )
    assert refused_run.code == 2 and "--durable" in refused_run.err, refused_run


@_sink_probe("--avro-schema")
def _cli_sink_avro_schema(ctx: Ctx) -> None:
    import io

    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(_VALUE_AVRO), {"id": 5})
    name = _sink_stream_of(ctx, out.getvalue())
    schema = json.dumps(_VALUE_AVRO)
    _, got = sink(ctx, name, "--value-format", "avro", "--avro-schema", schema)
    assert got.column("id").to_pylist() == [5]
    # Given for another format, it is refused rather than ignored.
    run = ctx.cli(
        "sink",
        name,
        "--parquet",
        str(ctx.tmp / "x"),
        "--value-format",
        "json",
        "--avro-schema",
        schema,
        "-s",
        ctx.url,
    )
    assert run.code == 2 and "--avro-schema" in run.err, run


def _cli_sink_protobuf(ctx: Ctx) -> None:
    name = _sink_stream_of(ctx, b"\x08\x05")  # field 1 (id) = 5
    descriptor, message = _probe_descriptor(), "probe.V"
    _, got = sink(
        ctx,
        name,
        "--value-format",
        "protobuf",
        "--protobuf-descriptor",
        descriptor,
        "--protobuf-message",
        message,
    )
    assert got.column("id").to_pylist() == [5]
    for flag, value in (("--protobuf-descriptor", descriptor), ("--protobuf-message", message)):
        run = ctx.cli(
            "sink",
            name,
            "--parquet",
            str(ctx.tmp / "x"),
            "--value-format",
            "protobuf",
            flag,
            value,
            "-s",
            ctx.url,
        )
        other = "--protobuf-message" if flag == "--protobuf-descriptor" else "--protobuf-descriptor"
        assert run.code == 2 and other in run.err, run


_register("jetstream-arrow sink", "--protobuf-descriptor", "effect", _cli_sink_protobuf)
_register("jetstream-arrow sink", "--protobuf-message", "effect", _cli_sink_protobuf)


for _flag_name, _argv in (
    ("--commit-seconds", ["--commit-seconds", "0"]),
    ("--batch-rows", ["--batch-rows", "0"]),
    ("--resume-timeout", ["--resume-timeout", "0"]),
    # Its effect, a restarted sink waiting out a dead one's lease, is run_sink's
    # (tests/test_sink_dead_letters_exactly_once.py).
    ("--dead-letter-lease", ["--dead-letter-stream", "D", "--dead-letter-lease", "0"]),
):
    cli_refused(
        "jetstream-arrow sink",
        _flag_name,
        lambda ctx, a=_argv: ["sink", "S", "--parquet", str(ctx.tmp / "no"), "-s", ctx.url, *a],
    )


def _run_sink(ctx: Ctx, name: str, **options: Any) -> tuple[Any, pa.Table]:
    """``run_sink`` of ``name`` into a new Parquet dataset: its report and rows."""
    from jetstream_arrow.sink import dataset_files

    root = ctx.tmp / f"api-{uuid.uuid4().hex[:8]}"
    report = ja.run_sink(ctx.client, [name], ja.ParquetTarget(root), **options)
    files = dataset_files(root)
    # The partition columns are in the files: none is inferred from the directories
    # (a Hive one would guess its type, and clash with the file's).
    return report, pq.ParquetDataset(files, partitioning=None).read() if files else pa.table({})


@effect(("run_sink", "follow"), ("run_sink", "stop"))
def _api_sink_follow(ctx: Ctx) -> None:
    name = ctx.stream(count=2)
    stop = threading.Event()
    later = threading.Timer(0.5, lambda: ctx.fill(name, 1, start=2))
    stopping = threading.Timer(2.0, stop.set)
    later.start()
    stopping.start()
    try:
        report, got = _run_sink(ctx, name, follow=True, stop=stop, commit_seconds=0.1)
    finally:
        later.cancel()
        stopping.cancel()
    assert report.stopped and got.column("seq").to_pylist() == [1, 2, 3]
    assert not _run_sink(ctx, name)[0].stopped


@effect(("run_sink", "subjects"))
def _api_sink_subjects(ctx: Ctx) -> None:
    name = ctx.stream(count=4)
    got = _run_sink(ctx, name, subjects={name: f"{name}.a"})[1]
    assert got.column("seq").to_pylist() == [1, 3]


@effect(("run_sink", "codec"))
def _api_sink_codec(ctx: Ctx) -> None:
    name = _sink_stream_of(ctx)
    assert _run_sink(ctx, name, codec="json")[1].column("n").to_pylist() == list(range(6))
    assert "data" in _run_sink(ctx, name)[1].column_names


@effect(("run_sink", "include_headers"))
def _api_sink_include_headers(ctx: Ctx) -> None:
    name = ctx.stream(count=1)
    assert "headers" in _run_sink(ctx, name, include_headers=True)[1].column_names


@effect(("run_sink", "partition_by"))
def _api_sink_partition_by(ctx: Ctx) -> None:
    assert "date" in _run_sink(ctx, ctx.stream(count=1), partition_by=["date"])[1].column_names


@effect(("run_sink", "commit_rows"))
def _api_sink_commit_rows(ctx: Ctx) -> None:
    name = ctx.stream(count=6)
    assert _run_sink(ctx, name, commit_rows=2)[0].commits == 3
    assert _run_sink(ctx, name)[0].commits == 1


@effect(("run_sink", "dead_letter_stream"))
def _api_sink_dead_letter_stream(ctx: Ctx) -> None:
    name, dead = _sink_stream_of(ctx, b'{"n": 1}', b"oops"), ctx.stream()
    report, _ = _run_sink(ctx, name, codec="json", dead_letter_stream=dead)
    assert report.dead_letters == 1 and ctx.rows(dead).column("data").to_pylist() == [b"oops"]


@effect(("run_sink", "durable"))
def _api_sink_durable(ctx: Ctx) -> None:
    name = ctx.stream(count=4, retention="workqueue")
    with pytest.raises(BadInputError, match="'durable'"):
        _run_sink(ctx, name)
    report, got = _run_sink(ctx, name, durable="lake", commit_rows=3)
    assert report.commits == 2 and got.column("seq").to_pylist() == [1, 2, 3, 4]
    assert ctx.client.consumer_info(name, "lake").num_ack_pending == 0
    with pytest.raises(BadInputError, match="'durable'"):
        _run_sink(ctx, ctx.stream(count=1), durable="lake")


@effect(("run_sink", "on_progress"))
def _api_sink_on_progress(ctx: Ctx) -> None:
    seen: list[Any] = []
    name = ctx.stream(count=3)
    _run_sink(ctx, name, on_progress=seen.append)
    assert seen and seen[-1].rows == 3 and seen[-1].lag == {name: 0}


refused(
    "run_sink",
    "commit_seconds",
    lambda ctx: _run_sink(ctx, ctx.stream(count=1), commit_seconds=0),
)
refused("run_sink", "batch_rows", lambda ctx: _run_sink(ctx, ctx.stream(count=1), batch_rows=0))
# Its effect, each dead letter once after a kill past the window, is
# tests/test_sink_dead_letters_exactly_once.py's.
refused(
    "run_sink",
    "dead_letter_lease",
    lambda ctx: _run_sink(ctx, ctx.stream(count=1), dead_letter_lease=0),
)
# Its effect, a sink outliving a server's outage, is tests/test_sink_outage.py's.
refused(
    "run_sink",
    "resume_timeout",
    lambda ctx: _run_sink(ctx, ctx.stream(count=1), resume_timeout=0),
)


@effect(("jetstream-arrow", "--version"))
def _cli_version(ctx: Ctx) -> None:
    run = ctx.cli("--version")
    assert run.code == 0 and run.out.startswith("jetstream-arrow "), run


cli_refused("jetstream-arrow server", "--port", lambda ctx: ["server", "--port", "70000"], code=1)


@effect(("jetstream-arrow server", "--debug"))
def _cli_server_debug(ctx: Ctx) -> None:
    from jetstream_arrow.cli.errors import CliError

    assert ctx.cli("server", "--port", "70000").code == 1
    raises(lambda: ctx.cli("server", "--port", "70000", "--debug"), CliError)


def started_server(ctx: Ctx) -> tuple[str, Path, str]:
    """``jetstream-arrow server --port 0 --store-dir D --domain X`` in its own process:
    the URL it printed, D, X (run once, stopped with SIGTERM)."""
    if "cli-server" not in ctx.extra_servers:
        store = ctx.tmp / "cli-store"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jetstream_arrow",
                "server",
                "--port",
                "0",
                "--store-dir",
                str(store),
                "--domain",
                "probedomain",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("nats://"), (url, proc.stderr.read() if proc.stderr else "")
            with ja.connect(url, domain="probedomain", request_timeout=5) as c:
                c.create_stream("CLIPROBE", ["cliprobe.>"])
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise AssertionError(
                    "jetstream-arrow server did not stop within 20 s of SIGTERM"
                ) from None
        ctx.extra_servers["cli-server"] = (url, store, "probedomain")
    found: tuple[str, Path, str] = ctx.extra_servers["cli-server"]
    return found


@effect(("jetstream-arrow server", "--store-dir"))
def _cli_store_dir(ctx: Ctx) -> None:
    _, store, _ = started_server(ctx)
    assert list(store.rglob("CLIPROBE")), list(store.rglob("*"))


@effect(("jetstream-arrow server", "--domain"))
def _cli_server_domain(ctx: Ctx) -> None:
    # The stream was created through the domain's API prefix ($JS.probedomain.API).
    _, store, domain = started_server(ctx)
    assert list(store.rglob("CLIPROBE")) and domain == "probedomain"


# -- demo: one run with the flags that shape it, and runs that fail early -----------------------

DEMO_ROWS = 300


def demo_server(ctx: Ctx) -> NatsServer:
    """A server of its own for each demo run: a demo's stream stores ``demo.>``, which
    another demo's stream (or another test's) on the same server would overlap."""
    server = _start(ctx, "")
    ctx.extra_servers[f"demo-server-{len(ctx.extra_servers)}"] = server
    return server


def demo_run(ctx: Ctx) -> tuple[Any, str, ja.Client]:
    """One demo, kept stream and all (run once), and a client of its server."""
    if "demo" not in ctx.extra_servers:
        name = ctx.name("DEMO")
        server = demo_server(ctx)
        run = cli_process(
            "demo",
            "--servers",
            server.url,
            "--rows",
            str(DEMO_ROWS),
            "--partitions",
            "3",
            "--stream",
            name,
            "--keep-stream",
            "--master",
            "local[1]",
            "--step-timeout",
            "240",
            "--quiet",
            timeout=300,
        )
        ctx.extra_servers["demo"] = (run, name, ja.connect(server.url))
    found: tuple[Any, str, ja.Client] = ctx.extra_servers["demo"]
    return found


def _demo_probe(option: str) -> Callable[[Callable[[Ctx], None]], Callable[[Ctx], None]]:
    def wrap(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
        _register("jetstream-arrow demo", option, "effect", fn)
        return fn

    return wrap


def _demo_ok(ctx: Ctx) -> tuple[ja.Client, str]:
    run, name, client = demo_run(ctx)
    assert run.code == 0, run.err
    return client, name


@_demo_probe("--servers")
@_demo_probe("--stream")
@_demo_probe("--keep-stream")
def _cli_demo_stream(ctx: Ctx) -> None:
    client, name = _demo_ok(ctx)
    assert client.stream_info(name).state.messages == DEMO_ROWS


@_demo_probe("--rows")
def _cli_demo_rows(ctx: Ctx) -> None:
    client, name = _demo_ok(ctx)
    assert client.read(name).read_all().num_rows == DEMO_ROWS


@_demo_probe("--partitions")
def _cli_demo_partitions(ctx: Ctx) -> None:
    # A Spark write's message ids are <write id>-<partition>-<row>.
    client, name = _demo_ok(ctx)
    headers = client.read(name, include_headers=True).read_all().column("headers").to_pylist()
    ids = [dict(h)["Nats-Msg-Id"][0] for h in headers]
    assert len({i.rsplit("-", 2)[1] for i in ids}) == 3, ids[:5]


@_demo_probe("--quiet")
def _cli_demo_quiet(ctx: Ctx) -> None:
    run = demo_run(ctx)[0]
    assert run.code == 0
    assert not run.out.strip() and not run.err.strip(), (
        f"demo --quiet printed (stdout) {run.out!r} and (stderr) {run.err[:300]!r}"
    )


@_demo_probe("--master")
def _cli_demo_master(ctx: Ctx) -> None:
    run = cli_process(
        "demo",
        "--servers",
        demo_server(ctx).url,
        "--rows",
        "10",
        "--master",
        "nonsense-master",
        timeout=120,
    )
    assert run.code == 1 and "nonsense-master" in run.err, run.err


@_demo_probe("--step-timeout")
def _cli_demo_step_timeout(ctx: Ctx) -> None:
    # The demo bounds each Spark step with this deadline (demo._timed). A step whose
    # deadline passes before its Spark job starts must fail as one past the deadline.
    # Shown in this process on the session's Spark: a demo process spends a JVM start
    # first, and with the deadline missed it runs the whole demo.
    from jetstream_arrow.cli import demo
    from jetstream_arrow.cli.errors import CliError

    assert build_parser().parse_args(["demo", "--step-timeout", "0.001"]).step_timeout == 0.001
    spark = ctx.spark()

    def step() -> int:
        time.sleep(0.2)
        return int(spark.range(10).count())

    try:
        got = demo._timed(spark, 0.001, "the probe step", step)
    except CliError as err:
        message = str(err)
    else:
        pytest.fail(f"a step that outlived --step-timeout 0.001 by 0.2 s returned {got}")
    assert "--step-timeout" in message, message


def _demo_delegated(flag: str) -> None:
    """demo connects with the flags as load does (the same connection module): the
    ConnectOptions parsed from them are the same; their effect is shown on load."""

    def run(ctx: Ctx) -> None:
        from jetstream_arrow.cli.connection import connect_options

        value = {"--tls-first": None, "--connect-timeout": "3"}.get(flag, f"{ctx.tmp}/probe")
        flags = [flag] if value is None else [flag, value]
        if flag == "--user":
            flags += ["--password", "p"]
        if flag == "--password":
            flags = ["--user", "u", flag, "p"]
        if flag in ("--tls-cert", "--tls-key"):
            flags = ["--tls-cert", str(ctx.tmp / "c.pem"), "--tls-key", str(ctx.tmp / "k.pem")]
        for f in (ctx.tmp / "c.pem", ctx.tmp / "k.pem", ctx.tmp / "probe"):
            f.write_text("{}" if f.name == "probe" else "x")
        parser = build_parser()
        demo = parser.parse_args(["demo", *flags])
        loading = parser.parse_args(["load", "f.csv", "--stream", "S", "--subject", "s", *flags])
        assert connect_options(demo) == connect_options(loading)

    _register("jetstream-arrow demo", flag, "delegated", run)


for _flag_name in (
    "--context",
    "--creds",
    "--user",
    "--password",
    "--token",
    "--nkey",
    "--tls-cert",
    "--tls-key",
    "--tls-ca",
    "--tls-first",
    "--domain",
    "--api-prefix",
    "--connect-timeout",
):
    _demo_delegated(_flag_name)


@_demo_probe("--debug")
def _cli_demo_debug(ctx: Ctx) -> None:
    from jetstream_arrow.cli.errors import CliError

    assert ctx.cli("demo", "--rows", "0", "-s", ctx.url).code == 1
    raises(lambda: ctx.cli("demo", "--rows", "0", "-s", ctx.url, "--debug"), CliError)


#: The probes that start Spark (a JVM): marked, so `-m "not spark"` leaves them out.
SPARK_PROBES = {
    key("spark.read", "path"),
    key("df.write", "path"),
    *(
        key("jetstream-arrow demo", f)
        for f in (
            "--servers",
            "--stream",
            "--keep-stream",
            "--rows",
            "--partitions",
            "--quiet",
            "--master",
            "--step-timeout",
        )
    ),
}


# == options accepted where they do nothing =========================================================
#
# Each option above has an effect somewhere; these are combinations in which one is
# taken and then does nothing. Each must be refused naming it, as `load --csv-types`
# is refused when no file is CSV.


def _parquet(ctx: Ctx) -> str:
    path = ctx.tmp / f"{uuid.uuid4().hex[:8]}.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), path)
    return str(path)


IGNORED_IN_COMBINATION: dict[str, tuple[str, Callable[[Ctx], list[str]]]] = {
    "load --delimiter without a CSV file": (
        "--delimiter",
        lambda ctx: _load_argv_file(ctx, _parquet(ctx), "--delimiter", ";"),
    ),
    "load --storage without --create-stream": (
        "--storage",
        lambda ctx: _load_argv_file(ctx, _parquet(ctx), "--storage", "memory"),
    ),
    "load --duplicate-window without --create-stream": (
        "--duplicate-window",
        lambda ctx: _load_argv_file(ctx, _parquet(ctx), "--duplicate-window", "5"),
    ),
    "load --stream-subjects without --create-stream": (
        "--stream-subjects",
        lambda ctx: _load_argv_file(ctx, _parquet(ctx), "--stream-subjects", "other.>"),
    ),
    "sink --dead-letter-lease without --dead-letter-stream": (
        "--dead-letter-lease",
        lambda ctx: [
            *["sink", "S", "--parquet", str(ctx.tmp / "no"), "-s", ctx.url],
            *["--dead-letter-lease", "5"],
        ],
    ),
}


def _load_argv_file(ctx: Ctx, path: str, *argv: str) -> list[str]:
    name = ctx.stream()
    return ["load", path, "--stream", name, "-s", ctx.url, "--subject", f"{name}.x", *argv]


# == the tests ===============================================================================


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

_VALUE_AVRO = {
    "type": "record",
    "name": "Probe",
    "fields": [{"name": "id", "type": "int"}],
}


def _json_stream(ctx: Ctx, payloads: list[bytes] | None = None) -> str:
    """A stream of JSON objects ``{"id": i}`` (or ``payloads``) on ``<name>.j``."""
    name = ctx.stream()
    payloads = payloads or [json.dumps({"id": i}).encode() for i in range(3)]
    ctx.client.publish(pa.table({"subject": [f"{name}.j"] * len(payloads), "data": payloads}))
    return name


def _ids(table: pa.Table | pa.RecordBatch) -> list[int]:
    return [v["id"] for v in table.column("value").to_pylist()]


@effect(("Client.read", "codec"))
def _read_codec(ctx: Ctx) -> None:
    name = _json_stream(ctx)
    assert _ids(ctx.client.read(name, codec="json").read_all()) == [0, 1, 2]
    assert "value" not in ctx.rows(name).column_names


def _exact_stream(ctx: Ctx) -> str:
    """A new stream that holds exactly-once writers' positions."""
    name = ctx.stream(exactly_once=True)
    return name


@effect(("Client.publish", "writer"))
def _publish_writer(ctx: Ctx) -> None:
    name = _exact_stream(ctx)
    rows = pa.table({"data": [b"a", b"b", b"c"]})
    assert ctx.client.publish(rows.slice(0, 2), f"{name}.w", writer="w").stored == 2
    again = ctx.client.publish(rows, f"{name}.w", writer="w")
    # The two rows the stream holds are skipped by the writer's position, not sent.
    assert (again.stored, again.duplicates) == (1, 2)
    assert again.acks.column("seq").to_pylist()[:2] == [None, None]
    assert ctx.rows(name).column("data").to_pylist() == [b"a", b"b", b"c"]


refused(
    "Client.publish",
    "exactly_once",
    lambda ctx: ctx.client.publish(
        pa.table({"data": [b"a"]}), f"{ctx.stream()}.x", writer="w", exactly_once=True
    ),
)
# Their effects (a second writer waits out the lease; positions every N rows) are
# tests/test_exactly_once_publish.py's.
refused(
    "Client.publish",
    "writer_lease",
    lambda ctx: ctx.client.publish(
        pa.table({"data": [b"a"]}), f"{_exact_stream(ctx)}.x", writer="w", writer_lease=0
    ),
)
refused(
    "Client.publish",
    "position_rows",
    lambda ctx: ctx.client.publish(
        pa.table({"data": [b"a"]}), f"{_exact_stream(ctx)}.x", writer="w", position_rows=0
    ),
)


@effect(("Client.publish", "codec"), ("Client.publisher", "codec"))
def _publish_codec(ctx: Ctx) -> None:
    name = ctx.stream()
    rows = pa.table({"subject": [f"{name}.j"], "id": [7]})
    ctx.client.publish(rows, codec="json")
    with ctx.client.publisher(codec="json") as publisher:
        publisher.publish(rows)
    assert ctx.rows(name).column("data").to_pylist() == [b'{"id":7}'] * 2


@effect(("Client.ordered_consumer", "codec"))
def _ordered_codec(ctx: Ctx) -> None:
    name = _json_stream(ctx)
    assert _ids(_first_batch(ctx.client.ordered_consumer(name, codec="json"))) == [0, 1, 2]


@effect(("PullConsumer.fetch", "codec"), ("PullConsumer.messages", "codec"))
def _pull_codec(ctx: Ctx) -> None:
    name = _json_stream(ctx)
    ctx.client.create_consumer(name, durable_name="C", ack_policy="explicit")
    c = ctx.client.pull_consumer(name, "C")
    assert _ids(c.fetch(1, codec="json").data) == [0]
    got = _first_consumed(c.messages(codec="json", batch_rows=2, batch_wait=0.2))
    assert _ids(got.data) == [1, 2]


@effect(("PushConsumer.messages", "codec"))
def _push_codec(ctx: Ctx) -> None:
    name = _json_stream(ctx)
    ctx.client.create_consumer(
        name, durable_name="P", deliver_subject=f"deliver.{name}", ack_policy="explicit"
    )
    got = _first_consumed(
        ctx.client.push_consumer(name, "P").messages(codec="json", batch_wait=0.2)
    )
    assert _ids(got.data)[0] == 0


def _probe_descriptor() -> str:
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


def _spark_value_probes() -> None:
    id_int = (
        '{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}}]}'
    )
    for entry in ("spark.read", "spark.readStream"):

        def table_of(ctx: Ctx, entry: str = entry, **options: Any) -> pa.Table:
            if entry == "spark.read":
                return spark_read(ctx, **options)[1]
            got = micro_batch(ctx, startingOffsets="earliest", **options)[3]
            return pa.Table.from_batches(got)

        def format_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = _json_stream(ctx)
            assert _ids(table_of(ctx, stream=name, valueFormat="json")) == [0, 1, 2]
            assert "data" in table_of(ctx, stream=name).column_names

        def schema_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = _json_stream(ctx)
            got = table_of(ctx, stream=name, valueFormat="json", valueSchema=id_int)
            assert got.schema.field("value").type == pa.struct([("id", pa.int32())])

        def mode_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = _json_stream(ctx, [b'{"id": 1}', b"{bad"])
            got = table_of(
                ctx, stream=name, valueFormat="json", valueSchema=id_int, mode="permissive"
            )
            assert got.column("_corrupt_record").to_pylist() == [None, b"{bad"]
            got = table_of(
                ctx, stream=name, valueFormat="json", valueSchema=id_int, mode="dropmalformed"
            )
            assert got.column("seq").to_pylist() == [1]

        def avro_(ctx: Ctx, table_of: Any = table_of) -> None:
            import io
            import struct

            import fastavro

            out = io.BytesIO()
            fastavro.schemaless_writer(out, fastavro.parse_schema(_VALUE_AVRO), {"id": 5})
            name = _json_stream(ctx, [b"\x00" + struct.pack(">I", 3) + out.getvalue()])
            got = table_of(
                ctx,
                stream=name,
                valueFormat="avro",
                avroFraming="confluent",
                avroSchemasById=json.dumps({"3": _VALUE_AVRO}),
            )
            assert _ids(got) == [5]

        def protobuf_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = _json_stream(ctx, [b"\x08\x05"])
            got = table_of(
                ctx,
                stream=name,
                valueFormat="protobuf",
                valueSchema="probe.V",
                protobufDescriptorFile=_probe_descriptor(),
            )
            assert _ids(got) == [5]

        def avro_schema_(ctx: Ctx, table_of: Any = table_of) -> None:
            # A raw datum carries no schema: without the option there is none to read it as.
            name = _json_stream(ctx, [b"\x0a"])  # the zig-zag varint of 5
            got = table_of(ctx, stream=name, valueFormat="avro", avroSchema=json.dumps(_VALUE_AVRO))
            assert _ids(got) == [5]

        def protobuf_message_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = _json_stream(ctx, [b"\x08\x05"])
            got = table_of(
                ctx,
                stream=name,
                valueFormat="protobuf",
                protobufMessage="probe.V",
                protobufDescriptorFile=_probe_descriptor(),
            )
            assert _ids(got) == [5]

        _register(entry, "protobufDescriptorFile", "effect", protobuf_)
        _register(entry, "avroSchema", "effect", avro_schema_)
        _register(entry, "protobufMessage", "effect", protobuf_message_)
        _register(entry, "valueFormat", "effect", format_)
        _register(entry, "valueSchema", "effect", schema_)
        _register(entry, "mode", "effect", mode_)
        _register(entry, "avroFraming", "effect", avro_)
        _register(entry, "avroSchemasById", "effect", avro_)


_spark_value_probes()


def _dead_letter_probes() -> None:
    """Mode deadletter: the good rows, and the bad payload in the dead-letter stream,
    for each read entry point; refused without the mode, naming both options."""
    id_int = (
        '{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}}]}'
    )

    def read_fn_table(ctx: Ctx, **options: Any) -> pa.Table:
        python = {"valueFormat": "value_format", "valueSchema": "value_schema"}
        python |= {"deadLetterStream": "dead_letter_stream", "stream": "stream"}
        given = {python.get(k, k): v for k, v in options.items()}
        return _read_fn(ctx, [(given["stream"], 1, None)], **given)

    for entry in ("spark.read", "spark.readStream", _READ_FN):

        def table_of(ctx: Ctx, entry: str = entry, **options: Any) -> pa.Table:
            if entry == "spark.read":
                return spark_read(ctx, **options)[1]
            if entry == _READ_FN:
                return read_fn_table(ctx, **options)
            got = micro_batch(ctx, startingOffsets="earliest", **options)[3]
            return pa.Table.from_batches(got)

        def dead_letter_(ctx: Ctx, table_of: Any = table_of) -> None:
            name = _json_stream(ctx, [b'{"id": 1}', b"{bad", b'{"id": 3}'])
            dead = ctx.stream()
            read = {"stream": name, "valueFormat": "json", "valueSchema": id_int}
            got = table_of(ctx, mode="deadletter", deadLetterStream=dead, **read)
            assert got.column("seq").to_pylist() == [1, 3]
            assert "_corrupt_record" not in got.column_names
            assert ctx.rows(dead).column("data").to_pylist() == [b"{bad"]
            error = raises(lambda: table_of(ctx, deadLetterStream=dead, **read), BadInputError)
            assert "'deadLetterStream'" in str(error) and "'mode'" in str(error)

        _register(
            entry,
            "deadLetterStream" if entry != _READ_FN else "dead_letter_stream",
            "effect",
            dead_letter_,
        )


_dead_letter_probes()


def _value_rows(name: str) -> pa.Table:
    return pa.table({"subject": [f"{name}.v"] * 2, "id": pa.array([1, 2], pa.int32())})


@effect(("df.write", "valueFormat"))
def _write_value_format(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(ctx, _value_rows(name), valueFormat="json")
    assert ctx.rows(name).column("data").to_pylist() == [b'{"id":1}', b'{"id":2}']


@effect(("df.write", "valueSchema"), ("df.write", "avroFraming"), ("df.write", "avroSchemaId"))
def _write_avro(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(
        ctx,
        _value_rows(name),
        valueFormat="avro",
        valueSchema=json.dumps(_VALUE_AVRO),
        avroFraming="confluent",
        avroSchemaId=11,
    )
    payloads = ctx.rows(name).column("data").to_pylist()
    # A zero byte, the id, then the zig-zag varint of the int.
    assert payloads == [b"\x00\x00\x00\x00\x0b\x02", b"\x00\x00\x00\x00\x0b\x04"]


@effect(("df.write", "avroSchema"))
def _write_avro_schema(ctx: Ctx) -> None:
    # The columns' own schema would write the int column as an Avro int (a varint);
    # the schema given writes it as a double.
    name = ctx.stream()
    double = {**_VALUE_AVRO, "fields": [{"name": "id", "type": "double"}]}
    spark_write(ctx, _value_rows(name), valueFormat="avro", avroSchema=json.dumps(double))
    payloads = ctx.rows(name).column("data").to_pylist()
    assert payloads == [struct.pack("<d", 1.0), struct.pack("<d", 2.0)]


@effect(("df.write", "protobufMessage"))
def _write_protobuf_message(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(
        ctx,
        _value_rows(name),
        valueFormat="protobuf",
        protobufMessage="probe.V",
        protobufDescriptorFile=_probe_descriptor(),
    )
    assert ctx.rows(name).column("data").to_pylist() == [b"\x08\x01", b"\x08\x02"]


@effect(("df.write", "protobufDescriptorFile"))
def _write_protobuf(ctx: Ctx) -> None:
    name = ctx.stream()
    spark_write(
        ctx,
        _value_rows(name),
        valueFormat="protobuf",
        valueSchema="probe.V",
        protobufDescriptorFile=_probe_descriptor(),
    )
    # Field 1 as a varint: the tag byte 0x08, then the value.
    assert ctx.rows(name).column("data").to_pylist() == [b"\x08\x01", b"\x08\x02"]


def _stream_write_value_delegated(option: str, value: Any, **beside: Any) -> None:
    """``beside``: the options the value format needs beside ``option`` (default: an
    Avro write, which needs none)."""

    def run(ctx: Ctx) -> None:
        # A streaming write's task encodes like a batch write's: the same parsed options.
        rows = _value_rows("probe")
        given = {"valueFormat": "avro", **beside, option: value() if callable(value) else value}
        given = {k: v() if callable(v) else v for k, v in given.items()}
        batch = _source(ctx, **given).writer(_write_schema(rows), False)
        stream = stream_writer(ctx, rows, **given)
        assert stream.opts == dataclasses.replace(batch.opts, write_id=stream.opts.write_id)
        assert stream.columns == batch.columns

    _register("df.writeStream", option, "delegated", run)


_stream_write_value_delegated("valueFormat", "avro")
_stream_write_value_delegated("valueSchema", json.dumps(_VALUE_AVRO))
_stream_write_value_delegated("avroSchema", json.dumps(_VALUE_AVRO))
_stream_write_value_delegated("avroFraming", "single-object")
_stream_write_value_delegated("avroSchemaId", 4)
_stream_write_value_delegated(
    "protobufDescriptorFile", _probe_descriptor, valueFormat="protobuf", protobufMessage="probe.V"
)
# An option of one value format given with another is refused when the query is
# planned, as any option the codec would not use (its arrival in the stream writer is
# shown above, beside protobufDescriptorFile).
refused(
    "df.writeStream",
    "protobufMessage",
    lambda ctx: stream_writer(
        ctx, _value_rows("probe"), valueFormat="avro", protobufMessage="probe.V"
    ),
)


def _map_in_arrow_value_options(spec: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The options of the value format an option of the mapInArrow helpers is for,
    beside it: its own format's (its declaration's ``formats``), else Avro's."""
    if spec.formats == ("protobuf",):
        return {
            "value_format": "protobuf",
            "protobuf_message": values["protobuf_message"],
            "protobuf_descriptor_file": values["protobuf_descriptor_file"](),
        }
    if spec.python == "avro_schema":
        return {"value_format": "avro"}  # valueSchema is its earlier spelling: not both
    return {"value_format": "avro", "value_schema": values["value_schema"]}


def _map_in_arrow_value_probes() -> None:
    from jetstream_arrow.spark.functions import publish_fn, read_fn
    from jetstream_arrow.spark.option_specs import READ_SPECS, WRITE_SPECS

    values = {
        "value_format": "avro",
        "value_schema": json.dumps(_VALUE_AVRO),
        "on_malformed": "permissive",
        "avro_schema": json.dumps(_VALUE_AVRO),
        "avro_framing": "confluent",
        "avro_schemas_by_id": json.dumps({"1": _VALUE_AVRO}),
        "avro_schema_id": 1,
        "protobuf_message": "probe.V",
        "protobuf_descriptor_file": _probe_descriptor,
    }
    for name, make, specs, fields in (
        (
            "read_fn",
            read_fn,
            READ_SPECS,
            (
                "value_format",
                "value_schema",
                "on_malformed",
                "avro_schema",
                "avro_framing",
                "avro_schemas_by_id",
                "protobuf_message",
                "protobuf_descriptor_file",
            ),
        ),
        (
            "publish_fn",
            publish_fn,
            WRITE_SPECS,
            (
                "value_format",
                "value_schema",
                "avro_schema",
                "avro_framing",
                "avro_schema_id",
                "protobuf_message",
                "protobuf_descriptor_file",
            ),
        ),
    ):
        for python in fields:
            spec = next(s for s in specs if s.python == python)

            def run(
                ctx: Ctx, make: Callable[..., Any] = make, python: str = python, spec: Any = spec
            ) -> None:
                # The helper holds the options the data source would: its tasks read
                # and write through the same read_range and publish_batches.
                want = values[python]
                want = want() if callable(want) else want
                given = _map_in_arrow_value_options(spec, values)
                given[python] = want
                if given.get("avro_framing") == "confluent" and make is read_fn:
                    given["avro_schemas_by_id"] = values["avro_schemas_by_id"]
                opts = _closure_opts(make(servers=ctx.url, **given))
                assert getattr(opts, python) == want

            _register(f"spark.functions.{name}", python, "delegated", run)


_map_in_arrow_value_probes()


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


def _native_spark_probes() -> None:
    """A Spark option that Spark takes from the core's read or publish table by its
    rule (every such option it does not list as not taken, see
    jetstream_arrow.spark.option_specs) and that no probe above names is delegated: its
    value arrives unchanged at the native option, whose effect the Python entry's
    probe shows."""
    from jetstream_arrow.spark.option_specs import READ_SPECS, WRITE_SPECS
    from jetstream_arrow.spark.options import parse_read_options, parse_write_options

    entries = {**_spark_kinds(), **{f"spark.functions.{fn}": k for fn, k in MAP_IN_ARROW.items()}}
    for entry, (scope, queries) in entries.items():
        for spec in READ_SPECS if scope == "read" else WRITE_SPECS:
            name = spec.python if entry.startswith("spark.functions.") else spec.spark
            taken = spec.native_field == spec.python and spec.queries in ("both", queries)
            if not taken or key(entry, name) in PROBES:
                continue

            def run(ctx: Ctx, spec: Any = spec, name: str = name, scope: str = scope) -> None:
                value = _a_value_not_the_default(spec)
                if scope == "read":
                    opts = parse_read_options({"stream": "S", name: value}, queries=None)
                    native = opts.reader_kwargs()
                else:
                    native = parse_write_options({name: value}).publisher_kwargs()
                assert native[spec.native_field] == value != spec.default

            _register(entry, name, "delegated", run)


_native_spark_probes()


def _all_keys() -> set[str]:
    return {key(entry, option) for entry, options in enumerated().items() for option in options}


def test_every_option_has_a_probe() -> None:
    """The enumerated options and the probe table are the same set: an option without
    a probe, or a probe of an option that is gone, fails here."""
    options = _all_keys()
    missing = sorted(options - set(PROBES))
    stale = sorted(set(PROBES) - options)
    assert not missing and not stale, (
        f"options without a probe: {missing}; probes of no option: {stale}"
    )
    by_entry: dict[str, Counter[str]] = {}
    for probe in PROBES.values():
        by_entry.setdefault(probe.entry, Counter())[probe.kind] += 1
    kinds = Counter(p.kind for p in PROBES.values())
    lines = [
        f"{len(PROBES)} options of {len(by_entry)} entry points: "
        + ", ".join(f"{kinds[k]} by {k}" for k in ("effect", "refusal", "delegated"))
    ]
    for entry, counts in by_entry.items():
        lines.append(
            f"  {entry}: {sum(counts.values())} "
            f"({', '.join(f'{n} {k}' for k, n in sorted(counts.items()))})"
        )
    print("\n".join(lines))


@pytest.mark.parametrize(
    "probe_key",
    [
        pytest.param(k, marks=[pytest.mark.spark, pytest.mark.slow]) if k in SPARK_PROBES else k
        for k in sorted(PROBES)
    ],
)
def test_option(
    probe_key: str, ctx: Ctx, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    ctx.capsys = capsys
    ctx.request = request
    PROBES[probe_key].run(ctx)


@pytest.mark.parametrize("case", sorted(IGNORED_IN_COMBINATION))
def test_option_ignored_in_combination(
    case: str, ctx: Ctx, capsys: pytest.CaptureFixture[str]
) -> None:
    flag, argv = IGNORED_IN_COMBINATION[case]
    ctx.capsys = capsys
    run = ctx.cli(*argv(ctx))
    assert run.code == 2 and flag in run.err, (
        f"{case}: exit {run.code}, the flag was taken and did nothing (stderr {run.err!r})"
    )
