"""The Spark guide's option tables (docs/spark.md) are rendered from the declarations:
every row from its option's spec, whose native options take their default and meaning
from the core's tables. A table that differs fails here, showing the table it should
be; ``JETSTREAM_ARROW_WRITE_DOCS=1`` writes the rendered tables into the guide instead
(then review the diff)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jetstream_arrow.spark.option_specs import READ_SPECS, WRITE_SPECS, OptionSpec

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "spark.md"
HEADER = "| Python | Spark option | default | meaning |\n|---|---|---|---|"


def shown(default: object) -> str:
    if default is None:
        return "—"
    if isinstance(default, bool):
        return "`true`" if default else "`false`"
    return f"`{default}`"


def render(specs: list[OptionSpec]) -> str:
    rows = [f"| `{s.python}` | `{s.spark}` | {shown(s.default)} | {s.meaning} |" for s in specs]
    return "\n".join([HEADER, *rows])


@pytest.mark.parametrize(
    ("marker", "specs"),
    [("\nReading:\n", READ_SPECS), ("\nWriting:\n", WRITE_SPECS)],
    ids=["read", "write"],
)
def test_the_spark_guides_option_tables_are_the_declarations(
    marker: str, specs: list[OptionSpec]
) -> None:
    text = GUIDE.read_text()
    start = text.index(HEADER, text.index(marker))
    end = text.find("\n\n", start)
    end = len(text) if end < 0 else end
    wanted = render(specs)
    if text[start:end] != wanted and os.environ.get("JETSTREAM_ARROW_WRITE_DOCS") == "1":
        GUIDE.write_text(text[:start] + wanted + text[end:])
        return
    assert text[start:end] == wanted, (
        f"docs/spark.md: the option table after {marker.strip()!r} is not the "
        f"declarations'; it should read:\n{wanted}"
    )
