"""``jetstream-arrow server``: a local nats-server with JetStream, in the foreground."""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType

from ..embedded_server import EmbeddedServer
from .errors import CliError


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
