"""A one-line progress display on stderr: rows, rows/s, MB/s, percent and ETA.

Drawn only when stderr is a terminal (or when forced with ``--progress``), at most
five times a second, and erased before the final summary is printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

from .errors import add_debug_flag


def add_output_args(parser: argparse.ArgumentParser, *, progress: bool = True) -> None:
    """The output flags of the commands that move data: progress, quiet, debug.

    ``progress=False`` leaves ``--progress`` out, for a command that draws no progress
    line (a flag it offered would be taken and do nothing)."""
    g = parser.add_argument_group("output")
    if progress:
        g.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="show a progress line on stderr (default: when stderr is a terminal)",
        )
    g.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    add_debug_flag(g)


def human_count(n: float) -> str:
    return f"{n:,.0f}"


def human_rate(n: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n:.0f}"


def human_duration(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.5))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Counts rows and bytes; ``fraction`` (0..1), when known, gives percent and ETA."""

    def __init__(
        self,
        label: str,
        enabled: bool | None = None,
        stream: TextIO | None = None,
        interval: float = 0.2,
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = label
        self.rows = 0
        self.bytes = 0
        self.fraction: float | None = None
        self.started = time.monotonic()
        self._interval = interval
        self._last_draw = 0.0
        self._width = 0

    @property
    def elapsed(self) -> float:
        return max(time.monotonic() - self.started, 1e-9)

    def update(
        self,
        rows: int = 0,
        nbytes: int = 0,
        fraction: float | None = None,
        label: str | None = None,
    ) -> None:
        self.rows += rows
        self.bytes += nbytes
        if fraction is not None:
            self.fraction = min(max(fraction, 0.0), 1.0)
        if label is not None:
            self.label = label
        now = time.monotonic()
        if self.enabled and now - self._last_draw >= self._interval:
            self._last_draw = now
            self._draw()

    def line(self) -> str:
        elapsed = self.elapsed
        parts = [self.label]
        if self.fraction is not None:
            width = 20
            filled = int(self.fraction * width)
            parts.append(f"{self.fraction * 100:5.1f}% [{'#' * filled}{'.' * (width - filled)}]")
        parts.append(f"{human_count(self.rows)} rows")
        parts.append(f"{human_rate(self.rows / elapsed)} rows/s")
        parts.append(f"{self.bytes / elapsed / 1e6:.1f} MB/s")
        if self.fraction:
            remaining = elapsed * (1 - self.fraction) / self.fraction
            parts.append(f"ETA {human_duration(remaining)}")
        else:
            parts.append(human_duration(elapsed))
        return "  ".join(parts)

    def _draw(self) -> None:
        text = self.line()
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def clear(self) -> None:
        """Erase the line (call before printing anything else)."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
