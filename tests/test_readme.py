"""The README's option table stays in step with ConnectOptions."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from jetstream_arrow.options import ConnectOptions

README = Path(__file__).resolve().parent.parent / "README.md"


def camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def connect_option_rows() -> dict[str, tuple[str, str]]:
    section = README.read_text().split("## Connecting", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `(\w+)` \| `(\w+)` \| `([^`]*)` \|", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def test_every_connect_option_is_in_the_table_with_its_default() -> None:
    rows = connect_option_rows()
    fields = dataclasses.fields(ConnectOptions)
    assert list(rows) == [f.name for f in fields]
    for f in fields:
        spark_name, default = rows[f.name]
        assert spark_name == camel(f.name), f.name
        expected = f'"{f.default}"' if isinstance(f.default, str) else repr(f.default)
        assert default == expected, f.name
