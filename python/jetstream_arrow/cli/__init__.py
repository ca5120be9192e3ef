"""The ``jetstream-arrow`` command line: bulk load, export, a lake sink, a local server,
stream settings, the demo.

Exit codes: 0 success, 1 failure, 2 usage error, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from .errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, CliError, UsageError

PROG = "jetstream-arrow"

_DESCRIPTION = """\
Move data between files and NATS JetStream streams through Apache Arrow.
Run `jetstream-arrow COMMAND --help` for the options of a command.
"""

_EPILOG = """\
exit codes: 0 ok, 1 failure, 2 usage error, 130 interrupted
examples:
  jetstream-arrow server --port 4222 --store-dir ./js-data
  jetstream-arrow load orders.parquet --stream ORDERS --subject orders.new --create-stream
  jetstream-arrow export ORDERS -o orders.parquet --since 1h
  jetstream-arrow sink ORDERS --delta ./lake/orders --value-format json --follow
  jetstream-arrow streams enable-exactly-once ORDERS
  jetstream-arrow demo --rows 100000
"""


def build_parser() -> argparse.ArgumentParser:
    from . import demo, export, load, server, sink, streams

    parser = argparse.ArgumentParser(
        prog=PROG,
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    commands.required = True
    # Each command's module defines its flags next to the code that runs it, and sets
    # ``handler``, the function that runs it.
    for command in (load, export, sink, server, demo, streams):
        command.add_parser(commands)
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("jetstream-arrow")
    except Exception:
        return "unknown"


def _explain(error: BaseException, args: argparse.Namespace) -> str:
    """One paragraph a person can act on."""
    from ..exceptions import (
        AuthorizationError,
        ConnectionFailedError,
        JetStreamNotEnabledError,
        NotFoundError,
        OperationTimeoutError,
    )

    servers = "the server"
    try:
        from .connection import connect_options

        servers = connect_options(args).redacted()["servers"]
    except Exception:
        pass
    text = str(error).strip() or type(error).__name__
    if isinstance(error, ConnectionFailedError):
        return (
            f"cannot reach NATS at {servers}: {text}. Is a server running there? "
            "Check --servers (or $NATS_URL / --context); `jetstream-arrow server` starts one "
            "on this machine."
        )
    if isinstance(error, AuthorizationError):
        return (
            f"permission denied by {servers}: {text}. Check the credentials (--creds, "
            "--user/--password, --token, --context) and that this user may use the "
            "stream, its subjects and the JetStream API."
        )
    if isinstance(error, JetStreamNotEnabledError):
        return (
            f"{text}. JetStream is not enabled for this account, or the domain/API "
            "prefix is wrong (--domain, --api-prefix)."
        )
    if isinstance(error, NotFoundError):
        return text
    if isinstance(error, OperationTimeoutError):
        return f"timed out: {text}"
    if isinstance(error, FileNotFoundError) and error.filename:
        return f"{error.filename}: no such file"
    if isinstance(error, PermissionError) and error.filename:
        return f"{error.filename}: permission denied"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    from ..exceptions import JetStreamArrowError

    parser = build_parser()
    args = parser.parse_args(argv)
    debug = getattr(args, "debug", False) or bool(os.environ.get("JETSTREAM_ARROW_DEBUG"))
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except UsageError as e:
        if debug:
            raise
        parser.print_usage(sys.stderr)
        print(f"{PROG} {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_FAILURE
    except (CliError, JetStreamArrowError, OSError) as e:
        if debug:
            raise
        message = str(e) if isinstance(e, CliError) else _explain(e, args)
        print(f"{PROG} {args.command}: error: {message}", file=sys.stderr)
        return EXIT_FAILURE


def console_main() -> None:
    sys.exit(main())


__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "build_parser", "main"]
