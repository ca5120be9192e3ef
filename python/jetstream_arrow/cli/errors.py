"""Errors the command line reports in one line, with its exit code."""

from __future__ import annotations

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
