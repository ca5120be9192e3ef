"""Security against real servers: every way to authenticate (user and password, token,
nkey, creds in operator mode, credentials in the server URL), TLS (server
verification, mutual TLS, TLS first), a user allowed only its own inbox prefix, and
secrets that must never show: in exception messages, in ``repr``s, in the package's
logs, in Spark's plans and in the errors of failed Spark queries.

Every key, JWT and certificate is made by the test that uses it (nkeys, trustme);
none is checked in. Secrets are random, so finding one in a text cannot be chance.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import logging
import os
import secrets
import ssl
import time
import traceback
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nkeys
import pyarrow as pa
import pytest
import trustme

import jetstream_arrow as ja
from conftest_spark import SPARK_ERRORS, error_text, spark
from jetstream_arrow.exceptions import (
    AuthorizationError,
    BadInputError,
    ConnectionFailedError,
    JetStreamArrowError,
    OperationTimeoutError,
)
from jetstream_arrow.options import ConnectOptions
from jetstream_arrow.spark.options import parse_read_options, parse_write_options
from natsserver import NatsServer

pytestmark = [pytest.mark.security, pytest.mark.timeout(120)]
__all__ = ["spark"]  # a fixture, imported for pytest

ROWS = 5
#: A wrong secret must be refused within this many seconds (connect_timeout is 3).
REFUSAL_SECONDS = 6.0

Factory = Callable[..., NatsServer]


def secret(kind: str) -> str:
    return f"{kind}-{secrets.token_urlsafe(18)}"


def assert_hidden(text: str, hidden: list[str], where: str) -> None:
    for value in hidden:
        assert value not in text, f"a secret appears in {where}:\n{text}"


def exception_text(err: BaseException) -> str:
    """Everything an exception shows: its message, its repr and its traceback."""
    return "\n".join([str(err), repr(err), *traceback.format_exception(err)])


def log_text(caplog: pytest.LogCaptureFixture) -> str:
    """Every record of the package's loggers, formatted, with exceptions and stacks."""
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(
        formatter.format(r) for r in caplog.records if r.name.startswith("jetstream_arrow")
    )


@pytest.fixture
def package_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The package's loggers captured at DEBUG for the whole test."""
    caplog.set_level(logging.DEBUG, logger="jetstream_arrow")
    return caplog


def round_trip(client: ja.Client, name: str) -> None:
    """Create a stream, publish rows, read them back (through a consumer and by direct
    gets) and consume them with a durable pull consumer (fetch + ack): every kind of
    traffic the package sends."""
    client.create_stream(name, [f"{name}.>"], allow_direct=True)
    data = [f"row-{i}".encode() for i in range(ROWS)]
    result = client.publish(
        pa.table({"subject": [f"{name}.r"] * ROWS, "data": data}), msg_id_prefix=f"{name}-"
    )
    assert result.stored == ROWS
    for method in ("consumer", "direct"):
        assert client.read(name, method=method).read_all().column("data").to_pylist() == data
    client.create_consumer(name, durable_name="work", ack_policy="explicit", ack_wait=5.0)
    batch = client.pull_consumer(name, "work").fetch(ROWS, expires=5.0)
    assert batch.data.column("data").to_pylist() == data
    batch.ack_sync(timeout=5.0)
    info = client.consumer_info(name, "work")
    assert (info.num_ack_pending, info.ack_floor.stream_seq) == (0, ROWS)


def connection(server: NatsServer, client: ja.Client) -> dict[str, Any]:
    """The server's view of ``client``'s connection (monitoring ``connz`` with its
    identity and subscriptions)."""
    cid = client.server_info()["client_id"]
    conns = server.monitor(f"connz?auth=true&subs=1&cid={cid}")["connections"]
    assert len(conns) == 1, conns
    found: dict[str, Any] = conns[0]
    return found


# -- keys and JWTs ----------------------------------------------------------------------


def new_keys(prefix: int) -> tuple[str, nkeys.KeyPair]:
    """A fresh nkey (``prefix``: operator, account or user) as its seed and key pair."""
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    return seed.decode(), nkeys.from_seed(bytearray(seed))


def public(keys: nkeys.KeyPair) -> str:
    return str(keys.public_key.decode())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign_jwt(issuer: nkeys.KeyPair, subject: str, nats: dict[str, Any]) -> str:
    """A NATS JWT (v2 claims) for ``subject``, signed by ``issuer``'s nkey."""
    claims = {
        # Any unique id: the server does not recompute it.
        "jti": uuid.uuid4().hex.upper(),
        "iat": int(time.time()),
        "iss": public(issuer),
        "sub": subject,
        "name": subject[:8],
        "nats": {**nats, "version": 2},
    }
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps(claims).encode())
    signature = issuer.sign(f"{header}.{body}".encode())
    return f"{header}.{body}.{_b64(signature)}"


UNLIMITED = {
    "subs": -1,
    "data": -1,
    "payload": -1,
    "imports": -1,
    "exports": -1,
    "wildcards": True,
    "conn": -1,
    "leaf": -1,
}


@dataclass
class Operator:
    """An operator, its system account and one account with JetStream, preloaded into
    the server's memory resolver; users' JWTs are signed by the account."""

    workdir: Path
    keys: nkeys.KeyPair = field(init=False)
    account: nkeys.KeyPair = field(init=False)
    config: str = field(init=False)

    def __post_init__(self) -> None:
        _, self.keys = new_keys(nkeys.PREFIX_BYTE_OPERATOR)
        _, self.account = new_keys(nkeys.PREFIX_BYTE_ACCOUNT)
        _, system = new_keys(nkeys.PREFIX_BYTE_ACCOUNT)
        operator_jwt = sign_jwt(self.keys, public(self.keys), {"type": "operator"})
        # JetStream is enabled for an account by its JWT's storage limits.
        js_limits = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
        account_jwt = sign_jwt(
            self.keys,
            public(self.account),
            {"type": "account", "limits": {**UNLIMITED, **js_limits}},
        )
        system_jwt = sign_jwt(self.keys, public(system), {"type": "account", "limits": UNLIMITED})
        self.config = (
            f"operator: {operator_jwt}\n"
            f"system_account: {public(system)}\n"
            "resolver: MEMORY\n"
            "resolver_preload: {\n"
            f"    {public(self.account)}: {account_jwt}\n"
            f"    {public(system)}: {system_jwt}\n"
            "}\n"
        )

    def user_creds(
        self, name: str, *, account: nkeys.KeyPair | None = None, seed: str | None = None
    ) -> tuple[Path, list[str]]:
        """A creds file for a new user of the account (or of ``account``), holding its
        JWT and its seed (or ``seed``); returns the path and the secrets in it."""
        user_seed, user = new_keys(nkeys.PREFIX_BYTE_USER)
        user_jwt = sign_jwt(
            account or self.account,
            public(user),
            {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1},
        )
        path = self.workdir / f"{name}.creds"
        path.write_text(
            "-----BEGIN NATS USER JWT-----\n"
            f"{user_jwt}\n"
            "------END NATS USER JWT------\n\n"
            "-----BEGIN USER NKEY SEED-----\n"
            f"{seed or user_seed}\n"
            "------END USER NKEY SEED------\n"
        )
        return path, [user_jwt, seed or user_seed]


# -- authentication -----------------------------------------------------------------------


@dataclass
class Auth:
    """A server that requires one way of authenticating, options that pass, options
    with a wrong secret each, and every secret string involved."""

    server: NatsServer
    good: dict[str, Any]
    wrong: dict[str, dict[str, Any]]
    hidden: list[str]
    #: What the server's connz says about an authenticated connection.
    expect: dict[str, Any]


def with_user_info(url: str, user_info: str) -> str:
    return url.replace("nats://", f"nats://{user_info}@", 1)


def user_password(make: Factory, workdir: Path) -> Auth:
    password = secret("pw")
    server = make(
        f"authorization {{ users = [ {{user: alice, password: {json.dumps(password)}}} ] }}"
    )
    wrong = secret("pw")
    return Auth(
        server,
        {"servers": server.url, "user": "alice", "password": password},
        {"a wrong password": {"servers": server.url, "user": "alice", "password": wrong}},
        [password, wrong],
        {"authorized_user": "alice"},
    )


def token(make: Factory, workdir: Path) -> Auth:
    value = secret("tok")
    server = make(f"authorization {{ token: {json.dumps(value)} }}")
    wrong = secret("tok")
    return Auth(
        server,
        {"servers": server.url, "token": value},
        {
            "a wrong token": {"servers": server.url, "token": wrong},
            "no token": {"servers": server.url},
        },
        [value, wrong],
        {},
    )


def nkey(make: Factory, workdir: Path) -> Auth:
    seed, keys = new_keys(nkeys.PREFIX_BYTE_USER)
    other_seed, _ = new_keys(nkeys.PREFIX_BYTE_USER)
    # The right seed with its checksum broken: not a seed at all.
    broken = seed[:-4] + ("AAAA" if not seed.endswith("AAAA") else "BBBB")
    server = make(f"authorization {{ users = [ {{nkey: {public(keys)}}} ] }}")
    return Auth(
        server,
        {"servers": server.url, "nkey_seed": seed},
        {
            "another user's seed": {"servers": server.url, "nkey_seed": other_seed},
            "a broken seed": {"servers": server.url, "nkey_seed": broken},
        },
        [seed, other_seed, broken],
        {"authorized_user": public(keys)},
    )


def creds(make: Factory, workdir: Path) -> Auth:
    operator = Operator(workdir)
    server = make(operator.config)
    good, good_secrets = operator.user_creds("good")
    # The JWT of a known user with the seed of another: the nonce signature fails.
    other_seed, _ = new_keys(nkeys.PREFIX_BYTE_USER)
    other, other_secrets = operator.user_creds("other-seed", seed=other_seed)
    # A user of an account the server does not know.
    _, stranger_account = new_keys(nkeys.PREFIX_BYTE_ACCOUNT)
    stranger, stranger_secrets = operator.user_creds("stranger", account=stranger_account)
    return Auth(
        server,
        {"servers": server.url, "creds": str(good)},
        {
            "another user's seed": {"servers": server.url, "creds": str(other)},
            "a user of an unknown account": {"servers": server.url, "creds": str(stranger)},
        },
        good_secrets + other_secrets + stranger_secrets,
        {"account": public(operator.account)},
    )


def creds_content(make: Factory, workdir: Path) -> Auth:
    """The creds files' text as options, as a Spark executor gets them."""
    files = creds(make, workdir)

    def as_content(options: dict[str, Any]) -> dict[str, Any]:
        return {"servers": options["servers"], "creds_content": Path(options["creds"]).read_text()}

    return Auth(
        files.server,
        as_content(files.good),
        {what: as_content(options) for what, options in files.wrong.items()},
        files.hidden,
        files.expect,
    )


def url_user_password(make: Factory, workdir: Path) -> Auth:
    # Characters a URL must percent-encode, so decoding is exercised too.
    password = secret("pw") + "@:/%"
    wrong = secret("pw")
    server = make(
        f"authorization {{ users = [ {{user: bob, password: {json.dumps(password)}}} ] }}"
    )
    quoted = urllib.parse.quote(password, safe="")
    return Auth(
        server,
        {"servers": with_user_info(server.url, f"bob:{quoted}")},
        {"a wrong password": {"servers": with_user_info(server.url, f"bob:{wrong}")}},
        [password, quoted, wrong],
        {"authorized_user": "bob"},
    )


def url_token(make: Factory, workdir: Path) -> Auth:
    value = secret("tok")
    wrong = secret("tok")
    server = make(f"authorization {{ token: {json.dumps(value)} }}")
    return Auth(
        server,
        {"servers": with_user_info(server.url, value)},
        {"a wrong token": {"servers": with_user_info(server.url, wrong)}},
        [value, wrong],
        {},
    )


AUTHS = [user_password, token, nkey, creds, creds_content, url_user_password, url_token]


@pytest.fixture(params=AUTHS, ids=[a.__name__ for a in AUTHS])
def auth(request: pytest.FixtureRequest, nats_server_factory: Factory, tmp_path: Path) -> Auth:
    make: Callable[[Factory, Path], Auth] = request.param
    return make(nats_server_factory, tmp_path)


def test_authenticated_round_trip(auth: Auth, package_logs: pytest.LogCaptureFixture) -> None:
    """Each way of authenticating carries a whole round trip (stream, publish, read,
    pull consumer with acks), the server sees the expected identity, and no secret
    shows in the reprs or the package's logs."""
    with ja.connect(**auth.good) as client:
        round_trip(client, "AUTH")
        seen = connection(auth.server, client)
        for key, value in auth.expect.items():
            assert seen.get(key) == value, seen
        assert_hidden(repr(client), auth.hidden, "repr(Client)")
        assert_hidden(repr(client.options), auth.hidden, "repr(ConnectOptions)")
        assert_hidden(str(client.options.redacted()), auth.hidden, "ConnectOptions.redacted()")
    assert_hidden(log_text(package_logs), auth.hidden, "the package's log")


def test_wrong_secret_is_refused_naming_no_secret(
    auth: Auth, package_logs: pytest.LogCaptureFixture
) -> None:
    """A wrong secret fails fast with AuthorizationError (a PermissionError); neither
    the wrong nor the right secret shows in the error or the package's logs."""
    for what, options in auth.wrong.items():
        t0 = time.monotonic()
        with pytest.raises(AuthorizationError) as info:
            ja.connect(**options, connect_timeout=3.0)
        assert time.monotonic() - t0 < REFUSAL_SECONDS, what
        assert isinstance(info.value, PermissionError)
        assert_hidden(exception_text(info.value), auth.hidden, f"the error with {what}")
    assert_hidden(log_text(package_logs), auth.hidden, "the package's log")


def test_credentials_given_twice_are_refused() -> None:
    """Credentials in a URL and in options (or differing between URLs) are a mistake
    to name, not a choice to make silently; the message shows neither."""
    first, second = secret("pw"), secret("pw")
    url = "nats://127.0.0.1:1"
    cases: list[dict[str, Any]] = [
        {"servers": with_user_info(url, f"a:{first}"), "user": "a", "password": second},
        {"servers": with_user_info(url, first), "token": second},
        {
            "servers": ",".join(
                [with_user_info(url, f"a:{first}"), with_user_info(url, f"a:{second}")]
            )
        },
    ]
    for options in cases:
        with pytest.raises(BadInputError, match="credentials") as info:
            ja.connect(**options)
        assert_hidden(exception_text(info.value), [first, second], "the error")


def test_reprs_hide_every_secret() -> None:
    """ConnectOptions and the Spark read and write options carry secrets to executors;
    their reprs and ``redacted()`` show none (URL user info included)."""
    password, token_value, seed = secret("pw"), secret("tok"), secret("SU")
    creds_text, key_text = secret("creds"), secret("key")
    options = {
        "servers": f"nats://carol:{password}@h1:4222,tls://{token_value}@h2:4222",
        "nkey_seed": seed,
        "token": token_value,
        "user": "carol",
        "password": password,
        "creds_content": creds_text,
        "tls_cert_content": secret("cert"),
        "tls_key_content": key_text,
    }
    hidden = [password, token_value, seed, creds_text, key_text, options["tls_cert_content"]]
    connect = ConnectOptions(**options)
    assert_hidden(repr(connect), hidden, "repr(ConnectOptions)")
    assert_hidden(str(connect), hidden, "str(ConnectOptions)")
    assert_hidden(str(connect.redacted()), hidden, "ConnectOptions.redacted()")
    assert "carol" in repr(connect) and "h1:4222" in repr(connect)  # still says where
    read = parse_read_options({**options, "stream": "S"})
    write = parse_write_options({**options, "subject": "s.a"})
    for value in (read, write):
        assert_hidden(repr(value), hidden, f"repr({type(value).__name__})")


# -- TLS ------------------------------------------------------------------------------------


@dataclass
class Pki:
    """A CA with a server certificate for 127.0.0.1, a client certificate, a server
    certificate for another name, and a CA nobody uses; files in ``workdir``."""

    workdir: Path

    def __post_init__(self) -> None:
        self.ca = trustme.CA()
        self.ca.cert_pem.write_to_path(str(self.path("ca.pem")))
        self._issue(self.ca, "server", "127.0.0.1", "localhost")
        self._issue(self.ca, "client", "client.example")
        self._issue(self.ca, "elsewhere", "elsewhere.example")
        stranger = trustme.CA()
        stranger.cert_pem.write_to_path(str(self.path("stranger-ca.pem")))
        self._issue(stranger, "stranger-client", "client.example")

    def path(self, name: str) -> Path:
        return self.workdir / name

    def _issue(self, ca: trustme.CA, name: str, *identities: str) -> None:
        cert = ca.issue_cert(*identities)
        cert.private_key_pem.write_to_path(str(self.path(f"{name}-key.pem")))
        for i, pem in enumerate(cert.cert_chain_pems):
            pem.write_to_path(str(self.path(f"{name}.pem")), append=i > 0)

    def fingerprint(self, name: str) -> str:
        """The SHA-256 of the (first) certificate in ``<name>.pem``, in hex."""
        der = ssl.PEM_cert_to_DER_cert(self.path(f"{name}.pem").read_text())
        return hashlib.sha256(der).hexdigest()

    def client_options(self, name: str = "client", as_content: bool = False) -> dict[str, str]:
        cert, key = self.path(f"{name}.pem"), self.path(f"{name}-key.pem")
        if as_content:
            return {"tls_cert_content": cert.read_text(), "tls_key_content": key.read_text()}
        return {"tls_cert": str(cert), "tls_key": str(key)}

    def ca_options(self, name: str = "ca", as_content: bool = False) -> dict[str, str]:
        path = self.path(f"{name}.pem")
        return {"tls_ca_content": path.read_text()} if as_content else {"tls_ca": str(path)}

    def server_config(self, name: str = "server", extra: str = "") -> str:
        return (
            "tls {\n"
            f"    cert_file: {json.dumps(str(self.path(f'{name}.pem')))}\n"
            f"    key_file: {json.dumps(str(self.path(f'{name}-key.pem')))}\n"
            "    timeout: 2\n"
            f"    {extra}\n"
            "}\n"
        )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def refused(options: dict[str, Any]) -> JetStreamArrowError:
    """Connecting with ``options`` fails, within bounds; the error."""
    t0 = time.monotonic()
    with pytest.raises((ConnectionFailedError, OperationTimeoutError)) as info:
        ja.connect(**options, connect_timeout=1.0)
    assert time.monotonic() - t0 < REFUSAL_SECONDS
    return info.value


@pytest.mark.parametrize("as_content", [False, True], ids=["files", "content"])
def test_tls_verifies_the_server(pki: Pki, nats_server_factory: Factory, as_content: bool) -> None:
    """With the CA that signed the server's certificate the client talks TLS; a server
    whose certificate no trusted CA signed, or names another host, is refused. The
    CA as a file or as its PEM text."""
    server = nats_server_factory(pki.server_config())
    ca = pki.ca_options(as_content=as_content)
    with ja.connect(server.url, **ca, tls_required=True) as client:
        round_trip(client, "TLS")
        seen = connection(server, client)
        assert seen.get("tls_version", "").startswith("1."), seen
    # Without a CA the system's roots are trusted, and they did not sign it either.
    for options in ({}, pki.ca_options("stranger-ca", as_content)):
        err = refused({"servers": server.url, **options})
        assert "invalid peer certificate" in str(err), err
    elsewhere = nats_server_factory(pki.server_config("elsewhere"))
    err = refused({"servers": elsewhere.url, **ca})
    assert "not valid for name" in str(err), err


@pytest.mark.parametrize("as_content", [False, True], ids=["files", "content"])
def test_mutual_tls(pki: Pki, nats_server_factory: Factory, as_content: bool) -> None:
    """A server with ``verify: true`` takes a client certificate its CA signed, and
    refuses a client without one, or with one another CA signed; each certificate and
    key a file or its PEM text."""
    verify = f"ca_file: {json.dumps(str(pki.path('ca.pem')))}\n    verify: true"
    server = nats_server_factory(pki.server_config(extra=verify))
    ca = {"servers": server.url, **pki.ca_options(as_content=as_content)}
    with ja.connect(**ca, **pki.client_options(as_content=as_content)) as client:
        round_trip(client, "MTLS")
        seen = connection(server, client)
        # The server saw exactly the client's certificate.
        assert [c["cert_sha256"] for c in seen.get("tls_peer_certs", [])] == [
            pki.fingerprint("client")
        ], seen
    assert "CertificateRequired" in str(refused(ca))
    stranger = pki.client_options("stranger-client", as_content)
    assert "UnknownCA" in str(refused({**ca, **stranger}))
    if as_content:
        # A client certificate as text without a CA: the system's roots, which did
        # not sign the server's certificate.
        err = refused({"servers": server.url, **pki.client_options(as_content=True)})
        assert "invalid peer certificate" in str(err), err


def test_tls_and_creds_content_that_does_not_parse_is_refused_naming_the_option(
    pki: Pki,
) -> None:
    """Text that is no PEM (or no creds) names its option and never shows in the
    error; giving the file and the text of one option is refused."""
    key_text = pki.path("client-key.pem").read_text()
    url = {"servers": "nats://127.0.0.1:1"}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"tls_ca_content": "not a certificate " + secret("x")}, "tls_ca_content"),
        ({"tls_ca_content": key_text}, "tls_ca_content"),
        (
            {"tls_cert_content": key_text, "tls_key_content": key_text},
            "tls_cert_content",
        ),
        (
            {
                "tls_cert_content": pki.path("client.pem").read_text(),
                "tls_key_content": "garbage " + secret("k"),
            },
            "tls_key_content",
        ),
        (
            {
                "tls_cert_content": pki.path("client.pem").read_text(),
                "tls_key_content": pki.path("stranger-client-key.pem").read_text(),
            },
            "tls_cert_content",
        ),
        ({"creds_content": "-----BEGIN NATS USER JWT-----\n" + secret("j")}, "creds_content"),
    ]
    for options, named in cases:
        with pytest.raises(BadInputError, match=named) as info:
            ja.connect(**url, **options)
        texts = [line for value in options.values() for line in value.splitlines() if len(line) > 8]
        assert_hidden(exception_text(info.value), texts, f"the error of {sorted(options)}")
    for file, content in (("creds", "creds_content"), ("tls_ca", "tls_ca_content")):
        with pytest.raises(BadInputError, match=f"'{file}' and '{content}' exclude each other"):
            ja.connect(**url, **{file: str(pki.path("ca.pem")), content: "x"})
    with pytest.raises(BadInputError, match="go together"):
        ja.connect(**url, tls_cert_content=pki.path("client.pem").read_text())


def test_tls_first(pki: Pki, nats_server_factory: Factory) -> None:
    """Against ``handshake_first`` the client opens with the TLS handshake when
    ``tls_first`` is set; without it the server never speaks and the connect fails
    within its timeout."""
    server = nats_server_factory(pki.server_config(extra="handshake_first: true"))
    ca = {"servers": server.url, "tls_ca": str(pki.path("ca.pem"))}
    with ja.connect(**ca, tls_first=True) as client:
        round_trip(client, "FIRST")
        seen = connection(server, client)
        assert seen.get("tls_first") is True, seen
    refused(ca)


# -- inbox prefix -------------------------------------------------------------------------

INBOX = "_limited"
LIMITED_STREAM = "LIMITED"


def test_inbox_prefix_under_permissions(nats_server_factory: Factory) -> None:
    """A user may subscribe only under its own inbox prefix: with ``inbox_prefix``
    every reply (API, publish acks, reads, fetches) arrives there; without it the
    server refuses the default inbox and the error says which option to set."""
    password = secret("pw")
    permissions = {
        "publish": {
            "allow": [
                "$JS.API.>",
                f"{LIMITED_STREAM}.>",
                # Acks of consumed messages go to their ack subjects.
                f"$JS.ACK.{LIMITED_STREAM}.>",
            ]
        },
        "subscribe": {"allow": [f"{INBOX}.>"]},
    }
    server = nats_server_factory(
        "authorization { users = [ "
        f"{{user: limited, password: {json.dumps(password)}, permissions: {json.dumps(permissions)}}}"
        " ] }"
    )
    options = {"servers": server.url, "user": "limited", "password": password}
    with ja.connect(**options, inbox_prefix=INBOX) as client:
        round_trip(client, LIMITED_STREAM)
        seen = connection(server, client)
    with ja.connect(**options, request_timeout=1.0) as client:
        t0 = time.monotonic()
        with pytest.raises(AuthorizationError, match="inbox_prefix") as info:
            client.stream_info(LIMITED_STREAM)
        assert time.monotonic() - t0 < REFUSAL_SECONDS
        assert_hidden(exception_text(info.value), [password], "the error")
        result = client.publish(
            pa.table({"subject": [f"{LIMITED_STREAM}.r"], "data": [b"x"]}),
            ack_timeout=1.0,
            raise_on_error=False,
        )
        assert result.failed == 1
        assert "inbox_prefix" in result.acks.column("error")[0].as_py()
    assert seen.get("authorized_user") == "limited"
    subscriptions = seen.get("subscriptions_list", [])
    assert subscriptions and all(s.startswith(f"{INBOX}.") for s in subscriptions), seen


# -- Spark -------------------------------------------------------------------------------

EXPLAIN_MODES = ("simple", "extended", "codegen", "cost", "formatted")


def explained(df: Any) -> str:
    """The text of every explain mode of ``df``."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for mode in EXPLAIN_MODES:
            df.explain(mode)
    return out.getvalue()


def spark_read(spark: Any, stream: str, **options: Any) -> Any:
    reader = spark.read.format("jetstream").option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@dataclass
class SparkServers:
    """A server with a password user and an nkey user, and one that takes a token; each
    has a stream ``SPARK`` of ``ROWS`` rows. ``hidden``: every secret, right and wrong."""

    users: NatsServer
    tokens: NatsServer
    password: str
    token: str
    seed: str
    wrong_password: str = field(default_factory=lambda: secret("pw"))
    wrong_token: str = field(default_factory=lambda: secret("tok"))
    wrong_seed: str = field(default_factory=lambda: new_keys(nkeys.PREFIX_BYTE_USER)[0])

    @property
    def hidden(self) -> list[str]:
        return [
            self.password,
            self.wrong_password,
            self.token,
            self.wrong_token,
            self.seed,
            self.wrong_seed,
        ]


@pytest.fixture
def spark_servers(nats_server_factory: Factory) -> SparkServers:
    password, token_value = secret("pw"), secret("tok")
    seed, keys = new_keys(nkeys.PREFIX_BYTE_USER)
    users = nats_server_factory(
        "authorization { users = [ "
        f"{{user: dave, password: {json.dumps(password)}}}, {{nkey: {public(keys)}}}"
        " ] }"
    )
    tokens = nats_server_factory(f"authorization {{ token: {json.dumps(token_value)} }}")
    for server, auth in (
        (users, {"user": "dave", "password": password}),
        (tokens, {"token": token_value}),
    ):
        with ja.connect(server.url, **auth) as client:
            client.create_stream("SPARK", ["SPARK.>"])
            data = [f"row-{i}".encode() for i in range(ROWS)]
            client.publish(pa.table({"subject": ["SPARK.r"] * ROWS, "data": data}))
    return SparkServers(users, tokens, password, token_value, seed)


@pytest.mark.spark
@pytest.mark.timeout(300)  # a JVM start under load counts too
def test_spark_reads_hide_secrets(
    spark: Any, spark_servers: SparkServers, package_logs: pytest.LogCaptureFixture
) -> None:
    """Batch reads with a password, an nkey seed, a token and URL credentials: their
    plans (every explain mode) show no secret, right ones read the rows, and a wrong
    one's failed query says AuthorizationError without any secret."""
    s = spark_servers
    right = [
        {"servers": s.users.url, "user": "dave", "password": s.password},
        {"servers": s.users.url, "nkeySeed": s.seed},
        {"servers": s.tokens.url, "token": s.token},
        {"servers": with_user_info(s.users.url, f"dave:{s.password}")},
    ]
    wrong = [
        {"servers": s.users.url, "user": "dave", "password": s.wrong_password},
        {"servers": s.users.url, "nkeySeed": s.wrong_seed},
        {"servers": s.tokens.url, "token": s.wrong_token},
        {"servers": with_user_info(s.users.url, f"dave:{s.wrong_password}")},
    ]
    for options in right:
        df = spark_read(spark, "SPARK", connectTimeout=3, **options)
        assert_hidden(explained(df), s.hidden, f"the plans of a read with {sorted(options)}")
        assert df.count() == ROWS
    for options in wrong:
        df = spark_read(spark, "SPARK", connectTimeout=3, **options)
        assert_hidden(explained(df), s.hidden, f"the plans of a read with {sorted(options)}")
        with pytest.raises(SPARK_ERRORS) as info:
            df.count()
        text = error_text(info)
        assert "AuthorizationError" in text, text
        assert_hidden(text, s.hidden, "a failed query's error")
    assert_hidden(log_text(package_logs), s.hidden, "the package's log")


@pytest.mark.spark
@pytest.mark.timeout(300)  # a JVM start under load counts too
def test_spark_writes_and_streams_hide_secrets(
    spark: Any, spark_servers: SparkServers, package_logs: pytest.LogCaptureFixture
) -> None:
    """A batch write with an nkey seed stores its rows and one with a wrong token fails
    with AuthorizationError naming no secret; a streaming read with a password shows no
    secret in its progress reports or its plans. (The package's log is checked in this
    process; a write's commit and abort reports are made in a Spark Python worker and
    checked by tests/spark/test_spark_write.py.)"""
    s = spark_servers
    df = spark.createDataFrame([("SPARK.w", b"w")] * 3, "subject string, data binary")

    def writer(**options: Any) -> Any:
        w = df.write.format("jetstream").mode("append").option("connectTimeout", 3)
        for key, value in options.items():
            w = w.option(key, value)
        return w

    writer(servers=s.users.url, nkeySeed=s.seed).save()
    with ja.connect(s.users.url, nkey_seed=s.seed) as client:
        assert client.stream_info("SPARK").state.messages == ROWS + 3
    with pytest.raises(SPARK_ERRORS) as info:
        writer(servers=s.tokens.url, token=s.wrong_token).save()
    text = error_text(info)
    assert "AuthorizationError" in text, text
    assert_hidden(text, s.hidden, "a failed write's error")

    reader = spark.readStream.format("jetstream").option("servers", s.users.url)
    for key, value in {"stream": "SPARK", "startingOffsets": "earliest", "user": "dave"}.items():
        reader = reader.option(key, value)
    stream = reader.option("password", s.password).load()
    query = (
        stream.writeStream.format("memory")
        .queryName(f"security_{uuid.uuid4().hex[:8]}")
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(60), "the streaming query did not finish in 60 s"
        plans = io.StringIO()
        with contextlib.redirect_stdout(plans):
            query.explain(True)
        progress = "\n".join(str(p) for p in query.recentProgress)
    finally:
        query.stop()
    assert sum(p.numInputRows for p in query.recentProgress) == ROWS + 3
    assert_hidden(plans.getvalue(), s.hidden, "the streaming query's plans")
    assert_hidden(progress, s.hidden, "the streaming query's progress")
    assert_hidden(log_text(package_logs), s.hidden, "the package's log")


@pytest.mark.spark
@pytest.mark.timeout(300)  # a JVM start under load counts too
def test_spark_reads_with_credentials_as_content(
    spark: Any,
    pki: Pki,
    nats_server_factory: Factory,
    tmp_path: Path,
    package_logs: pytest.LogCaptureFixture,
) -> None:
    """Executors with no file laid out: a read over mutual TLS with the CA, certificate
    and key as PEM text, and one with a creds file's text, read every row; their plans
    show neither the key nor the creds."""
    verify = f"ca_file: {json.dumps(str(pki.path('ca.pem')))}\n    verify: true"
    tls_server = nats_server_factory(pki.server_config(extra=verify))
    tls_options = {**pki.ca_options(as_content=True), **pki.client_options(as_content=True)}
    operator = Operator(tmp_path)
    creds_server = nats_server_factory(operator.config)
    creds_file, creds_secrets = operator.user_creds("spark")
    creds_text = creds_file.read_text()
    for server, options in (
        (tls_server, tls_options),
        (creds_server, {"creds_content": creds_text}),
    ):
        with ja.connect(server.url, **options) as client:
            client.create_stream("SPARK", ["SPARK.>"])
            data = [f"row-{i}".encode() for i in range(ROWS)]
            client.publish(pa.table({"subject": ["SPARK.r"] * ROWS, "data": data}))
    key_lines = [
        line for line in tls_options["tls_key_content"].splitlines() if "PRIVATE KEY" not in line
    ]
    hidden = key_lines + creds_secrets
    for server, spark_options in (
        (
            tls_server,
            {
                "tlsCaContent": tls_options["tls_ca_content"],
                "tlsCertContent": tls_options["tls_cert_content"],
                "tlsKeyContent": tls_options["tls_key_content"],
            },
        ),
        (creds_server, {"credsContent": creds_text}),
    ):
        df = spark_read(spark, "SPARK", servers=server.url, connectTimeout=3, **spark_options)
        assert_hidden(explained(df), hidden, f"the plans of a read with {sorted(spark_options)}")
        rows = sorted(r.data for r in df.select("data").collect())
        assert rows == sorted(f"row-{i}".encode() for i in range(ROWS))
    assert_hidden(log_text(package_logs), hidden, "the package's log")
