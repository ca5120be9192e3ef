"""Helpers for the command-line tests: run the CLI in-process or as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from jetstream_arrow.cli import main

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Run:
    code: int
    out: str
    err: str


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Run:
    """Run ``jetstream-arrow ARGV`` in this process; usage errors exit like the script."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's usage errors and --help
        code = int(e.code or 0)
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


def cli_process(*argv: str, timeout: float = 120.0, **kwargs: object) -> Run:
    """Run ``python -m jetstream_arrow ARGV`` as a separate process."""
    proc = subprocess.run(
        [sys.executable, "-m", "jetstream_arrow", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        **kwargs,  # type: ignore[arg-type]
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)
