"""Connecting: option validation, unreachable servers, credentials, pickling."""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow.exceptions import (
    AuthorizationError,
    BadInputError,
    ConnectionFailedError,
    JetStreamNotEnabledError,
)
from jetstream_arrow.options import ConnectOptions
from natsserver import NatsServer, free_port

pytestmark = pytest.mark.timeout(60)

USERS = """
authorization {
    users = [ {user: a, password: "s3cret-pass"} ]
}
"""


def test_domain_and_api_prefix_exclude_each_other() -> None:
    with pytest.raises(BadInputError, match=r"'domain' and 'api_prefix'") as info:
        ja.connect("nats://127.0.0.1:1", domain="hub", api_prefix="$JS.hub.API")
    assert isinstance(info.value, ValueError)


def test_unknown_option_is_named() -> None:
    with pytest.raises(BadInputError, match=r"unknown connect option\(s\) 'timeout'") as info:
        ja.connect("nats://127.0.0.1:1", timeout=3)
    assert "connect_timeout" in str(info.value)  # lists the known ones


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"request_timeout": -1}, "request_timeout"),
        ({"user": "a"}, "password"),
        ({"tls_cert": "/x.pem"}, "tls_key"),
        ({"password": "p"}, "'password' needs 'user'"),
        ({"creds": "/a.creds", "creds_content": "x"}, "'creds' and 'creds_content' exclude"),
        ({"tls_ca": "/a.pem", "tls_ca_content": "x"}, "'tls_ca' and 'tls_ca_content' exclude"),
        ({"tls_key_content": "k"}, "'tls_cert' and 'tls_key'"),
        ({"ping_interval": 0.0}, "'ping_interval' must be a positive number"),
        ({"reconnect_delay": float("nan")}, "'reconnect_delay'"),
        ({"connect_timeout": 2e9}, "'connect_timeout' must be at most"),
        ({"connect_timeout": "3"}, "'connect_timeout' must be a number, got '3'"),
        ({"max_reconnects": -1}, "'max_reconnects'"),
        ({"max_reconnects": True}, "'max_reconnects' must be a whole number"),
        ({"max_reconnects": 1.5}, "'max_reconnects' must be a whole number, or None, got 1.5"),
        ({"connect_timeout": 1e-12}, "'connect_timeout' must be a positive number of seconds"),
        ({"connect_timeout": -1}, "'connect_timeout' must be a positive number of seconds"),
        ({"retry_on_initial_connect": 1}, "'retry_on_initial_connect' must be True or False"),
        # A secret of the wrong type is named by its type, never its value.
        (
            {"user": "a", "password": 4321},
            "'password' must be a string, or None, got a value of type int$",
        ),
    ],
)
def test_invalid_option_values(options: dict[str, object], match: str) -> None:
    """The core decides: making the options refuses them as connecting does, naming
    the option, before any server is asked."""
    with pytest.raises(BadInputError, match=match):
        ConnectOptions(**options)  # type: ignore[arg-type]
    with pytest.raises(BadInputError, match=match):
        ja.connect("nats://127.0.0.1:1", **options)


def test_options_object_or_keywords_not_both() -> None:
    with pytest.raises(BadInputError, match="either"):
        ja.connect("nats://127.0.0.1:1", options=ConnectOptions())


def test_unreachable_server_fails_within_connect_timeout() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(ConnectionFailedError) as info:
        ja.connect(url, connect_timeout=1.0)
    elapsed = time.monotonic() - t0
    assert elapsed < 3.0, elapsed
    assert isinstance(info.value, ConnectionError)
    assert url.rsplit(":", 1)[1] in str(info.value)  # names the address it tried


def test_wrong_password_is_authorization_error(
    nats_server_factory: Callable[..., NatsServer],
) -> None:
    server = nats_server_factory(USERS)
    t0 = time.monotonic()
    with pytest.raises(AuthorizationError) as info:
        ja.connect(server.url, user="a", password="wrong-pass", connect_timeout=3.0)
    assert time.monotonic() - t0 < 6
    assert isinstance(info.value, PermissionError)
    assert "wrong-pass" not in str(info.value)
    with pytest.raises(AuthorizationError):
        ja.connect(server.url, connect_timeout=3.0)  # no credentials at all
    with ja.connect(server.url, user="a", password="s3cret-pass") as client:
        assert client.server_info()["jetstream"] is True


def test_connected_client_basics(shared_nats_server: NatsServer) -> None:
    client = ja.connect(shared_nats_server.url, name="engine-tests")
    info = client.server_info()
    assert info["max_payload"] > 0
    assert info["headers"] is True
    assert client.api_prefix == "$JS.API"
    client.flush(timeout=2.0)
    assert "Client(" in repr(client)
    client.close()
    client.close()  # twice is fine
    with pytest.raises(ConnectionFailedError, match="closed"):
        client.publish(pa.table({"subject": ["x"], "data": [b"x"]}))


def test_client_is_not_picklable(shared_nats_server: NatsServer) -> None:
    with ja.connect(shared_nats_server.url) as client:
        with pytest.raises(TypeError, match=r"cannot be pickled.*\.options"):
            pickle.dumps(client)
        # Its options can travel and connect again elsewhere.
        options = pickle.loads(pickle.dumps(client.options))
        with ja.connect(options=options) as again:
            assert again.server_info()["server_id"] == client.server_info()["server_id"]


def test_connect_options_pickle_and_hide_secrets() -> None:
    options = ConnectOptions(
        servers="nats://h1:4222,nats://h2:4222",
        user="alice",
        password="hunter2-password",
        token="tok-abc123",
        domain="hub",
    )
    copy = pickle.loads(pickle.dumps(options))
    assert copy == options
    assert copy.password == "hunter2-password"
    assert copy.js_api_prefix == "$JS.hub.API"
    text = repr(options)
    assert "hunter2-password" not in text and "tok-abc123" not in text
    assert "alice" in text
    redacted = options.redacted()
    assert redacted["password"] == "***" and redacted["token"] == "***"
    assert hash(options.cache_key()) == hash(copy.cache_key())


def test_server_without_jetstream(nats_server_factory: Callable[..., NatsServer]) -> None:
    server = nats_server_factory(jetstream=False)
    with ja.connect(server.url, request_timeout=2.0) as client:
        t0 = time.monotonic()
        with pytest.raises(JetStreamNotEnabledError):
            client.read("ANY")
        with pytest.raises(JetStreamNotEnabledError):
            client.stream_names()
        assert time.monotonic() - t0 < 5
        result = client.publish(
            pa.table({"subject": ["a.b"], "data": [b"x"]}),
            max_retries=1,
            retry_backoff=0.01,
            raise_on_error=False,
        )
        assert result.failed == 1
        assert "503" in result.acks.column("error")[0].as_py()
        assert time.monotonic() - t0 < 8


def test_the_native_core_reads_exactly_the_fields_of_connect_options() -> None:
    import dataclasses

    from jetstream_arrow import _core

    assert [f.name for f in dataclasses.fields(ja.ConnectOptions)] == [
        option["name"] for option in _core.OPTION_TABLES["connect"]
    ]
