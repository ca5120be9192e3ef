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

from ..exceptions import BadInputError
from ..option_tables import native_option
from ..options import ConnectOptions
from .errors import CliError, UsageError
from .native_flags import add_native_flag

if TYPE_CHECKING:
    from ..client import Client

# The flags that set a connection option (each the ConnectOptions field of its name),
# the environment variable each falls back to (the ones the ``nats`` CLI reads), and
# its metavar.
_FLAGS: tuple[tuple[tuple[str, ...], str, str | None, str | None], ...] = (
    (("-s", "--servers"), "servers", "NATS_URL", "URL"),
    (("--creds",), "creds", "NATS_CREDS", "FILE"),
    (("--user",), "user", "NATS_USER", None),
    (("--password",), "password", "NATS_PASSWORD", None),
    (("--token",), "token", "NATS_TOKEN", None),
    (("--tls-cert", "--tlscert"), "tls_cert", "NATS_CERT", "FILE"),
    (("--tls-key", "--tlskey"), "tls_key", "NATS_KEY", "FILE"),
    (("--tls-ca", "--tlsca"), "tls_ca", "NATS_CA", "FILE"),
    (("--tls-first",), "tls_first", None, None),
    (("--domain",), "domain", None, None),
    (("--api-prefix",), "api_prefix", None, "PREFIX"),
)

#: A connection option's flag, as errors name it.
_FLAG_OF = {field: next(f for f in flags if f.startswith("--")) for flags, field, _, _ in _FLAGS}
_FLAG_OF["connect_timeout"] = "--connect-timeout"


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "connection",
        "Flags override $NATS_* environment variables, which override --context.\n"
        "Prefer --creds, a context or $NATS_PASSWORD to --password on a shared machine.",
    )
    for flags, field, env, metavar in _FLAGS:
        # No default of the flag's own: the environment and the context come next.
        extra = {"metavar": metavar} if metavar else {}
        add_native_flag(g, "connect", field, *flags, default=None, env=env, **extra)
    g.add_argument(
        "--context",
        metavar="NAME",
        help="NATS CLI context to read ($NATS_CONTEXT); "
        "~/.config/nats/context/NAME.json, or a path to such a file",
    )
    g.add_argument("--nkey", metavar="FILE", help="file holding an nkey seed ($NATS_NKEY)")
    add_native_flag(g, "connect", "connect_timeout", "--connect-timeout")


def add_decompress_arg(parser: argparse.ArgumentParser) -> None:
    """``--no-decompress``, for the commands that read a stream (ConnectOptions
    ``decompress``)."""
    add_native_flag(
        parser,
        "connect",
        "decompress",
        "--no-decompress",
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
    for _, field, env, _ in _FLAGS:
        value = getattr(args, field, None)
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
    for _, field, _, _ in _FLAGS:
        path = options.get(field)
        if path is None or native_option("connect", field)["kind"] != "path":
            continue
        if not os.path.isfile(os.path.expanduser(path)):
            raise CliError(f"{_FLAG_OF[field]}: file {path!r} does not exist")
        options[field] = os.path.expanduser(path)
    try:
        return ConnectOptions(**options)
    except ValueError as e:
        flags = _flags_of(e.options if isinstance(e, BadInputError) else ())
        raise UsageError(f"{e} (flags: {', '.join(flags)})" if flags else str(e)) from None


def _flags_of(options: tuple[str, ...]) -> list[str]:
    """The flags of connect ``options`` (an error's), in their order."""
    return [_FLAG_OF[o] for o in options if o in _FLAG_OF]
