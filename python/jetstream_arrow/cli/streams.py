"""``jetstream-arrow streams``: stream settings the other commands rely on, and small
checks about streams shared by the commands."""

from __future__ import annotations

import argparse
from typing import Any

from .._subjects import subject_matches
from .connection import add_connection_args, client_factory
from .errors import CliError
from .progress import add_output_args, human_duration

_EPILOG = """\
examples:
  jetstream-arrow streams enable-exactly-once ORDERS
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "streams",
        help="change a stream's settings (exactly once at any age)",
        description="Change the settings of a stream that the other commands rely on.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", title="actions")
    actions.required = True
    enable = actions.add_parser(
        "enable-exactly-once",
        help="let STREAM hold exactly-once writers' positions",
        usage="%(prog)s STREAM [options]",
        description=(
            "Let STREAM hold the positions of exactly-once writers (load, Spark writes, "
            "Client.publish with a writer, the sink's dead letters), so that a re-run at "
            "any age stores nothing twice: adds the subjects '$JA.POS.<STREAM>.>' and "
            "allow_rollup. Refused for a stream whose retention removes what consumers "
            "acknowledge (workqueue, interest) and for a mirror."
        ),
    )
    enable.set_defaults(handler=run_enable_exactly_once)
    enable.add_argument("stream", metavar="STREAM")
    add_connection_args(enable)
    add_output_args(enable, progress=False)


def run_enable_exactly_once(args: argparse.Namespace) -> int:
    from ..positions import holds_positions, position_subjects

    with client_factory(args)() as client:
        if holds_positions(client.stream_info(args.stream)) is None:
            if not args.quiet:
                print(f"stream {args.stream} holds exactly-once writers' positions already")
            return 0
        info = client.enable_exactly_once(args.stream)
    if not args.quiet:
        print(
            f"stream {args.stream} now holds exactly-once writers' positions: its subjects "
            f"also take {position_subjects(args.stream)!r} (now {', '.join(info.config.subjects or [])}) "
            "and it allows rollups"
        )
    return 0


def check_subject_in_stream(subject: str, info: Any) -> None:
    subjects = list(info.config.subjects or [])
    if subjects and not any(subject_matches(p, subject) for p in subjects):
        raise CliError(
            f"stream {info.config.name!r} does not store subject {subject!r} (its subjects: "
            f"{', '.join(subjects)}); choose a matching --subject or add the subject to "
            "the stream"
        )


def describe_duplicate_window(info: Any) -> str:
    window = info.config.duplicate_window
    if not window:
        return "within the stream's duplicate window (server default, 2 minutes)"
    seconds = float(window.total_seconds() if hasattr(window, "total_seconds") else window)
    return f"within the stream's duplicate window ({human_duration(seconds)})"
