"""Connection flags shared by every command, and connecting with errors a person can act on.

Precedence: a flag, then its environment variable (the ones the ``nats`` CLI reads),
then the NATS CLI context given by ``--context``/``$NATS_CONTEXT``, then the package's
default servers.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core import DEFAULT_CONNECT_TIMEOUT, DEFAULT_SERVERS
from ..exceptions import BadInputError
from ..options import ConnectOptions
from .errors import CliError, UsageError

if TYPE_CHECKING:
    from ..client import Client

# flag dest -> (ConnectOptions field, environment variable)
_FLAGS: dict[str, tuple[str, str | None]] = {
    "servers": ("servers", "NATS_URL"),
    "user": ("user", "NATS_USER"),
    "password": ("password", "NATS_PASSWORD"),
    "token": ("token", "NATS_TOKEN"),
    "creds": ("creds", "NATS_CREDS"),
    "tls_cert": ("tls_cert", "NATS_CERT"),
    "tls_key": ("tls_key", "NATS_KEY"),
    "tls_ca": ("tls_ca", "NATS_CA"),
    "domain": ("domain", None),
    "api_prefix": ("api_prefix", None),
}


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "connection",
        "Flags override $NATS_* environment variables, which override --context.\n"
        "Prefer --creds, a context or $NATS_PASSWORD to --password on a shared machine.",
    )
    g.add_argument(
        "-s",
        "--servers",
        metavar="URL",
        help=f"NATS server URL(s), comma-separated ($NATS_URL; default {DEFAULT_SERVERS})",
    )
    g.add_argument(
        "--context",
        metavar="NAME",
        help="NATS CLI context to read ($NATS_CONTEXT); "
        "~/.config/nats/context/NAME.json, or a path to such a file",
    )
    g.add_argument(
        "--creds", metavar="FILE", help="user credentials file (JWT + nkey seed) ($NATS_CREDS)"
    )
    g.add_argument("--user", help="user name ($NATS_USER); needs --password")
    g.add_argument("--password", help="password ($NATS_PASSWORD); needs --user")
    g.add_argument("--token", help="authentication token ($NATS_TOKEN)")
    g.add_argument("--nkey", metavar="FILE", help="file holding an nkey seed ($NATS_NKEY)")
    g.add_argument(
        "--tls-cert",
        "--tlscert",
        dest="tls_cert",
        metavar="FILE",
        help="client certificate ($NATS_CERT)",
    )
    g.add_argument(
        "--tls-key",
        "--tlskey",
        dest="tls_key",
        metavar="FILE",
        help="client private key ($NATS_KEY)",
    )
    g.add_argument(
        "--tls-ca",
        "--tlsca",
        dest="tls_ca",
        metavar="FILE",
        help="CA certificates to verify the server ($NATS_CA)",
    )
    g.add_argument(
        "--tls-first",
        action="store_true",
        default=None,
        help="TLS handshake before the NATS protocol starts",
    )
    g.add_argument("--domain", help="JetStream domain (API prefix $JS.<domain>.API)")
    g.add_argument(
        "--api-prefix",
        metavar="PREFIX",
        help="JetStream API subject prefix, e.g. JS.acc@hub.API (excludes --domain)",
    )
    g.add_argument(
        "--connect-timeout",
        type=float,
        default=DEFAULT_CONNECT_TIMEOUT,
        metavar="SECONDS",
        help="how long to try to connect (default %(default)g)",
    )


def add_decompress_arg(parser: argparse.ArgumentParser) -> None:
    """``--no-decompress``, for the commands that read a stream (ConnectOptions
    ``decompress``)."""
    parser.add_argument(
        "--no-decompress",
        dest="decompress",
        action="store_false",
        default=None,
        help="write payloads marked Content-Encoding as stored, compressed (default: "
        "decompress them by that header)",
    )


def client_factory(args: argparse.Namespace) -> Callable[[], Client]:
    """A function that connects as the flags describe.

    The options are worked out now, so a wrong flag is reported before any work starts.
    """
    from .. import connect

    options = connect_options(args)

    def factory() -> Client:
        return connect(options=options)

    return factory


def connect_options(args: argparse.Namespace) -> ConnectOptions:
    """The ConnectOptions the flags, environment and context describe."""
    from ..nats_context import load_context

    options: dict[str, Any] = {}
    context = getattr(args, "context", None) or os.environ.get("NATS_CONTEXT")
    if context:
        try:
            options.update(load_context(context))
        except ValueError as e:
            raise CliError(str(e)) from None

    given: dict[str, Any] = {}
    for dest, (field, env) in _FLAGS.items():
        value = getattr(args, dest, None)
        if value is None and env:
            value = os.environ.get(env) or None
        if value is not None:
            given[field] = value
    nkey = getattr(args, "nkey", None) or os.environ.get("NATS_NKEY")
    if nkey:
        try:
            given["nkey_seed"] = Path(nkey).expanduser().read_text().strip()
        except OSError as e:
            raise CliError(
                f"cannot read the nkey seed file {nkey!r} (--nkey): {e.strerror}"
            ) from None
    if getattr(args, "tls_first", None):
        given["tls_first"] = True
    if getattr(args, "decompress", None) is False:
        given["decompress"] = False
    if getattr(args, "connect_timeout", None) is not None:
        given["connect_timeout"] = args.connect_timeout

    # A flag for one way of authenticating replaces the context's way.
    if {"user", "token", "creds", "nkey_seed"} & given.keys():
        for field in ("user", "password", "token", "creds", "nkey_seed"):
            options.pop(field, None)
    if {"domain", "api_prefix"} & given.keys():
        options.pop("domain", None)
        options.pop("api_prefix", None)
    options.update(given)
    if getattr(args, "domain", None) and getattr(args, "api_prefix", None):
        raise UsageError("--domain and --api-prefix exclude each other: give one")
    for field, flag in (
        ("creds", "--creds"),
        ("tls_cert", "--tls-cert"),
        ("tls_key", "--tls-key"),
        ("tls_ca", "--tls-ca"),
    ):
        path = options.get(field)
        if path is not None and not os.path.isfile(os.path.expanduser(path)):
            raise CliError(f"{flag}: file {path!r} does not exist")
        if path is not None:
            options[field] = os.path.expanduser(path)
    try:
        return ConnectOptions(**options)
    except ValueError as e:
        flags = _flags_of(e.options if isinstance(e, BadInputError) else ())
        raise UsageError(f"{e} (flags: {', '.join(flags)})" if flags else str(e)) from None


#: The flags of the connect options a person may give wrong on the command line.
_OPTION_FLAGS = {
    "user": "--user",
    "password": "--password",
    "tls_cert": "--tls-cert",
    "tls_key": "--tls-key",
    "domain": "--domain",
    "api_prefix": "--api-prefix",
    "connect_timeout": "--connect-timeout",
}


def _flags_of(options: tuple[str, ...]) -> list[str]:
    """The flags of connect ``options`` (an error's), in their order."""
    return [_OPTION_FLAGS[o] for o in options if o in _OPTION_FLAGS]
