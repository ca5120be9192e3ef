"""The option probes of connect: each option changes what happens, or is refused naming it.
tests/option_probes.py says what a probe is and holds what the probes share;
tests/project/test_every_option.py checks that every option of every entry point has a
probe."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import (
    AuthorizationError,
    BadInputError,
    ConnectionFailedError,
    JetStreamArrowError,
    JetStreamNotEnabledError,
)
from jetstream_arrow.options import ConnectOptions
from natsserver import NatsServer
from option_probes import (
    Ctx,
    ProbeTable,
    auth_server,
    ctx,
    must_refuse,
    raises,
    tls_server,
    token_server,
)

__all__ = ["ctx"]  # a fixture, imported for pytest

probes = ProbeTable()


# == Python: connect =========================================================================

_CT = {"connect_timeout": 2.0}


@probes.effect(("connect", "servers"))
def _servers(ctx: Ctx) -> None:
    with ja.connect(ctx.url) as c:
        assert c.server_info()["server_id"] == ctx.server.monitor("varz")["server_id"]
    raises(lambda: ja.connect("nats://127.0.0.1:1", **_CT), ConnectionFailedError)


@probes.effect(("connect", "options"))
def _options(ctx: Ctx) -> None:
    with ja.connect(options=ConnectOptions(servers=ctx.url, name="opt-probe")) as c:
        c.flush()
        assert _connz(ctx.server, "opt-probe")


@probes.effect(("connect", "user"))
def _user(ctx: Ctx) -> None:
    server, _ = auth_server(ctx)
    with ja.connect(server.url, user="probe", password="secret") as c:
        c.flush()
    raises(lambda: ja.connect(server.url, user="nobody", password="secret"), AuthorizationError)


@probes.effect(("connect", "password"))
def _password(ctx: Ctx) -> None:
    server, _ = auth_server(ctx)
    raises(lambda: ja.connect(server.url, user="probe", password="wrong"), AuthorizationError)
    # A password without a user is sent nowhere: it must be refused, not dropped.
    must_refuse(
        lambda: ja.connect(ctx.url, password="secret").close(),
        "password",
        "connect(password=...) without user",
    )


@probes.effect(("connect", "token"))
def _token(ctx: Ctx) -> None:
    server = token_server(ctx)
    with ja.connect(server.url, token="probe-token") as c:
        c.flush()
    raises(lambda: ja.connect(server.url, token="wrong"), AuthorizationError)


@probes.effect(("connect", "nkey_seed"))
def _nkey(ctx: Ctx) -> None:
    server, seed = auth_server(ctx)
    with ja.connect(server.url, nkey_seed=seed) as c:
        c.flush()
    raises(lambda: ja.connect(server.url), AuthorizationError)


probes.refused(
    "connect",
    "creds",
    lambda ctx: ja.connect(ctx.url, creds=str(ctx.tmp / "missing.creds")),
)
probes.refused(
    "connect",
    "creds_content",
    lambda ctx: ja.connect(ctx.url, creds_content="no creds here"),
)


@probes.effect(("connect", "tls_ca"))
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


@probes.effect(("connect", "tls_cert"), ("connect", "tls_key"))
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


@probes.effect(
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


@probes.effect(("connect", "tls_first"))
def _tls_first(ctx: Ctx) -> None:
    server, files = tls_server(ctx)
    tls = {"tls_ca": files["ca"], "tls_cert": files["cert"], "tls_key": files["key"]}
    with ja.connect(server.url, tls_first=True, **tls, **_CT) as c:
        c.flush()
    raises(lambda: ja.connect(server.url, **tls, **_CT), JetStreamArrowError)


@probes.effect(("connect", "tls_required"))
def _tls_required(ctx: Ctx) -> None:
    with ja.connect(ctx.url) as c:
        c.flush()
    raises(lambda: ja.connect(ctx.url, tls_required=True, **_CT), ConnectionFailedError)


def _connz(server: NatsServer, cid_name: str) -> dict[str, Any]:
    for conn in server.monitor("connz?subs=1").get("connections", []):
        if conn.get("name") == cid_name:
            return dict(conn)
    raise AssertionError(f"no connection named {cid_name!r} in the server's connz")


@probes.effect(("connect", "name"))
def _name(ctx: Ctx) -> None:
    name = ctx.name("conn")
    with ja.connect(ctx.url, name=name) as c:
        c.flush()
        assert _connz(ctx.server, name)


@probes.effect(("connect", "max_decompressed_bytes"))
def _max_decompressed_bytes(ctx: Ctx) -> None:
    name = ctx.stream()
    rows = pa.table({"subject": [f"{name}.a"], "data": [b"\0" * 4096]})
    ctx.client.publish(rows, compression="zstd")
    with ja.connect(ctx.url, max_decompressed_bytes=1000) as small:
        raises(lambda: small.read(name).read_all(), ja.exceptions.MalformedPayloadError)
    with ja.connect(ctx.url, max_decompressed_bytes=4096) as enough:
        assert enough.read(name).read_all().column("data").to_pylist() == [b"\0" * 4096]
    raises(lambda: ja.connect(ctx.url, max_decompressed_bytes=0), BadInputError)


@probes.effect(("connect", "decompress"))
def _decompress(ctx: Ctx) -> None:
    name = ctx.stream()
    plain = b"compressible " * 40
    ctx.client.publish(pa.table({"subject": [f"{name}.a"], "data": [plain]}), compression="zlib")
    assert ctx.client.read(name).read_all().column("data").to_pylist() == [plain]
    with ja.connect(ctx.url, decompress=False) as off:
        data = off.read(name).read_all().column("data").to_pylist()
    assert len(data[0]) < len(plain) and zlib.decompress(data[0]) == plain


@probes.effect(("connect", "inbox_prefix"))
def _inbox_prefix(ctx: Ctx) -> None:
    name = ctx.name("conn")
    with ja.connect(ctx.url, name=name, inbox_prefix="_PROBE_INBOX") as c:
        c.stream_names()
        subs = _connz(ctx.server, name).get("subscriptions_list", [])
    assert any(s.startswith("_PROBE_INBOX.") for s in subs), subs


@probes.effect(("connect", "retry_on_initial_connect"))
def _retry_initial(ctx: Ctx) -> None:
    dead = "nats://127.0.0.1:1"
    raises(lambda: ja.connect(dead, connect_timeout=1), ConnectionFailedError)
    # With it, connect returns and the connection is tried in the background.
    ja.connect(dead, connect_timeout=1, request_timeout=1, retry_on_initial_connect=True).close()


@probes.effect(("connect", "domain"))
def _domain(ctx: Ctx) -> None:
    name = ctx.stream()
    with ja.connect(ctx.url, domain="nowhere", request_timeout=1) as c:
        err = raises(lambda: c.stream_info(name), JetStreamNotEnabledError)
    assert "$JS.nowhere.API" in str(err)


@probes.effect(("connect", "api_prefix"))
def _api_prefix(ctx: Ctx) -> None:
    name = ctx.stream()
    with ja.connect(ctx.url, api_prefix="$JS.API") as c:
        assert c.stream_info(name).config.name == name
    with ja.connect(ctx.url, api_prefix="ELSEWHERE.API", request_timeout=1) as c:
        raises(lambda: c.stream_info(name), JetStreamNotEnabledError)


for _option in ("connect_timeout", "request_timeout", "reconnect_delay", "ping_interval"):
    probes.refused("connect", _option, lambda ctx, o=_option: ja.connect(ctx.url, **{o: 0}))
probes.refused("connect", "max_reconnects", lambda ctx: ja.connect(ctx.url, max_reconnects=-1))


@pytest.mark.parametrize("probe_key", probes.params())
def test_option(
    probe_key: str, ctx: Ctx, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    probes.run(probe_key, ctx, capsys, request)
