"""The native core's option tables, looked up by table and name.

Every native option is declared once, in the core, with its kind, default, bounds,
choices and one line saying what it does (``_core.OPTION_TABLES``). What offers a
native option under another shape (a Spark option, a CLI flag, a row of the docs'
option tables) reads those facts from here instead of restating them.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

from . import _core


class NativeOption(TypedDict):
    """One entry of a core option table."""

    name: str  # the field's Python name
    # "count", "seconds", "bool", "text", "choice", "texts", "path", "time", "bytes", "number"
    kind: str
    default: Any  # None: no default, or one that depends on other fields
    minimum: int | float | None
    maximum: int | float | None
    choices: tuple[str, ...]  # a "choice" option's values
    doc: str  # one line


def native_options(table: str) -> tuple[NativeOption, ...]:
    """The options of one core table ("connect", "publish", "read", ..., or a value
    format's), in their declared order."""
    tables = cast(dict[str, tuple[NativeOption, ...]], _core.OPTION_TABLES)
    try:
        return tables[table]
    except KeyError:
        raise KeyError(f"the core has no option table {table!r}; it has {sorted(tables)}") from None


def native_option(table: str, name: str) -> NativeOption:
    """The core's declaration of option ``name`` of ``table``."""
    for option in native_options(table):
        if option["name"] == name:
            return option
    raise KeyError(f"the core's {table!r} options have no {name!r}")


def meaning_of(option: NativeOption) -> str:
    """The core's line as a help text or a docs table says it: lower case, no full
    stop."""
    first, *rest = option["doc"].rstrip(".").split(" ", 1)
    if not first[1:] or first[1:].islower():  # not a name such as TLS
        first = first.lower()
    return " ".join([first, *rest])
