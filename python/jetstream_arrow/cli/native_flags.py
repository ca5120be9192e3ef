"""Flags that set a native option, made from the core's declaration of it.

The value's type and bounds, its choices, its default and the help line are the
core's (``_core.OPTION_TABLES``), so a flag restates none of them: a value out of
bounds is refused by argparse, naming the flag, before anything connects. A flag
says only what is the command's own: its spelling, its metavar, an environment
variable it falls back to, or help worded for the command where the core's line
would mislead.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from ..option_tables import NativeOption, meaning_of, native_option

#: Marks a flag's default as its native option's.
CORE_DEFAULT: Any = object()

_METAVAR = {"count": "N", "seconds": "SECONDS", "number": "X", "path": "FILE"}


def _bounded(core: NativeOption) -> Callable[[str], int | float]:
    """argparse's ``type`` for a count or a number within the core's bounds."""
    whole = core["kind"] == "count"
    low, high = core["minimum"], core["maximum"]

    def parse(text: str) -> int | float:
        try:
            value: int | float = int(text) if whole else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be {'a whole number' if whole else 'a number'}, got {text!r}"
            ) from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if low is not None and value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {text!r}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}, got {text!r}")
        return value

    parse.__name__ = core["kind"]  # argparse names the type in some errors
    return parse


def add_native_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    table: str,
    name: str,
    *flags: str,
    default: Any = CORE_DEFAULT,
    env: str | None = None,
    help: str | None = None,
    **argparse_options: Any,
) -> argparse.Action:
    """The flag ``flags`` setting the native option ``name`` of the core's ``table``
    (``args.<name>``, unless ``dest`` is given). ``default``: the value when the flag
    is absent, the core's unless given (None where an environment variable or a
    context comes next); the help always shows the core's. A boolean option is a
    switch that turns its core default over."""
    core = native_option(table, name)
    shown = core["default"]
    text = help or meaning_of(core)
    if env is not None:
        text += f" (${env})"
    options: dict[str, Any] = {
        "dest": name,
        "default": shown if default is CORE_DEFAULT else default,
        **argparse_options,
    }
    if core["kind"] == "bool":
        options["action"] = "store_false" if shown else "store_true"
    else:
        if shown is not None and not isinstance(shown, bool):
            text += f" (default {shown:g})" if isinstance(shown, float) else f" (default {shown})"
        if core["kind"] in ("count", "seconds", "number"):
            options.setdefault("type", _bounded(core))
        if core["choices"]:
            options.setdefault("choices", tuple(core["choices"]))
        if core["kind"] in _METAVAR and "choices" not in options:
            options.setdefault("metavar", _METAVAR[core["kind"]])
    # argparse formats help with %: a literal one in the core's line must not be read.
    options["help"] = text.replace("%", "%%")
    return parser.add_argument(*flags, **options)
