"""Errors the command line reports in one line, with its exit code."""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A failure to report as ``jetstream-arrow: error: <message>`` (exit code 1)."""

    exit_code = EXIT_FAILURE


class UsageError(CliError):
    """The command line itself is wrong (exit code 2)."""

    exit_code = EXIT_USAGE


def add_debug_flag(parser: Any) -> None:
    """``--debug``: show the traceback of an error instead of its one line.

    ``parser`` is a parser or one of its argument groups.
    """
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
