"""The option tables of the guides in docs/ stay in step with the code's defaults (whose
one home is the native core's `DEFAULT_*` constants)."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jetstream_arrow import Client, PullConsumer, __version__, _core
from jetstream_arrow.options import ConnectOptions

DOCS = Path(__file__).resolve().parents[2] / "docs"


def guide(page: str) -> str:
    return (DOCS / page).read_text()


def camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def connect_option_rows() -> dict[str, tuple[str, str]]:
    # The options table comes before the page's first section.
    section = guide("connecting.md").split("\n## ", 1)[0]
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


def option_table(page: str, after: str = "") -> dict[str, str]:
    """`| `name` | default | meaning |` rows of the first table after ``after`` in ``page``."""
    text = guide(page)
    text = text.split(after, 1)[1] if after else text
    rows: dict[str, str] = {}
    started = False
    for line in text.splitlines():
        # A row may name several options that share a default: | `a`, `b` | None | ...
        match = re.match(r"\| ((?:`\w+`(?:, )?)+) \| ([^|]+) \|", line)
        if match:
            started = True
            for name in re.findall(r"`(\w+)`", match.group(1)):
                rows[name] = match.group(2).strip().strip("`")
        elif started and not line.startswith("|"):
            break
    return rows


def table_defaults(key: str) -> dict[str, Any]:
    """The core's default of each option of a table (None: none, or it depends)."""
    return {option["name"]: option["default"] for option in _core.OPTION_TABLES[key]}


def defaults_of(function: Callable[..., Any]) -> dict[str, Any]:
    defaults = {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    # Their options are the fields of an options dataclass, each None (the core's default).
    core_defaults = {
        Client.publisher: table_defaults("publish"),
        Client.read: table_defaults("read"),
        PullConsumer.messages: table_defaults("consume"),
    }
    if function in core_defaults:
        del defaults["options"]
        defaults.update(core_defaults[function])
    return defaults


@pytest.mark.parametrize(
    ("page", "after", "function"),
    [
        ("publishing.md", "", Client.publisher),
        ("reading.md", "", Client.read),
        ("consumers.md", "`fetch()`:", PullConsumer.fetch),
        ("consumers.md", "`messages()` (", PullConsumer.messages),
    ],
    ids=["publisher", "read", "fetch", "messages"],
)
def test_option_tables_show_the_defaults_of_the_code(
    page: str, after: str, function: Callable[..., Any]
) -> None:
    rows = option_table(page, after)
    defaults = defaults_of(function)
    assert rows, f"no option table in docs/{page}"
    for name, shown in rows.items():
        assert name in defaults, f"{page}: {name!r} is not an option of {function.__qualname__}"
        expected = (
            f'"{defaults[name]}"' if isinstance(defaults[name], str) else repr(defaults[name])
        )
        assert shown == expected, f"{page}: {name!r} shows {shown}, the code says {expected}"
    documented = set(rows) | {"subject", "raise_on_error", "rows_per_result"}
    assert set(defaults) <= documented, set(defaults) - documented


def test_the_facade_defaults_are_the_cores() -> None:
    assert defaults_of(Client.publisher)["window"] == _core.DEFAULT_WINDOW
    assert defaults_of(Client.read)["batch_rows"] == _core.DEFAULT_READ_BATCH_ROWS
    assert defaults_of(PullConsumer.messages)["heartbeat"] == _core.DEFAULT_HEARTBEAT
    assert ConnectOptions().max_reconnects == _core.DEFAULT_MAX_RECONNECTS
    assert f"default {_core.DEFAULT_ROWS_PER_RESULT:,}" in guide("publishing.md")
    assert f"`ack_sync(timeout={_core.DEFAULT_ACK_SYNC_TIMEOUT})`" in guide("consumers.md")
    sample = f"{_core.DEFAULT_VALUE_SAMPLE_ROWS:,}"
    assert f"(default {sample})" in guide("payloads.md")
    assert f"its first {sample} messages" in guide("cli.md")


def test_the_direct_read_threshold_in_the_text_is_the_cores() -> None:
    for page, said in (
        ("reading.md", "direct gets for a range of at most {:,} sequences"),
        ("spark.md", "a range of at most {:,} sequences, such as a small streaming"),
        ("benchmarks.md", "Range reads of up to {:,} messages are faster by direct gets"),
        ("reading.md", "under {:,} messages a consumer's create and delete cost more"),
    ):
        text = " ".join(guide(page).split())
        assert said.format(_core.DIRECT_READ_MAX_MESSAGES) in text, (page, said)
    architecture = " ".join(guide("ARCHITECTURE.md").split())
    assert f"`DIRECT_READ_MAX_MESSAGES` ({_core.DIRECT_READ_MAX_MESSAGES:,})" in architecture


# Pages made on the site only (from the docstrings), which README.md's map does not name:
# on GitHub they are their directives, not their text.
SITE_ONLY_PAGES = ("api.md",)


def test_the_readme_names_the_two_commands_and_maps_every_guide() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    assert "bash scripts/demo.sh" in readme
    assert "bash scripts/test.sh" in readme
    nav = re.findall(r"^  - [^:\n]+: (\S+\.md)$", (DOCS.parent / "mkdocs.yml").read_text(), re.M)
    assert sorted(nav) == sorted(page.name for page in DOCS.glob("*.md"))
    guides = [page for page in nav if page != "index.md" and page not in SITE_ONLY_PAGES]
    missing = [page for page in guides if f"](docs/{page}" not in readme]
    assert not missing, f"README.md's map of the docs lacks {missing}"


def test_the_home_page_is_the_readme_and_links_the_site_only_pages() -> None:
    """docs/index.md includes README.md rather than copying it: it holds no text of its
    own beyond the sentence that stands for the README's link to the docs/ folder, and
    that sentence links the pages made on the site only."""
    index = guide("index.md")
    includes = re.findall(r'\{%\s*include-markdown "\.\./README\.md"', index)
    assert len(includes) == 2, (
        "docs/index.md must include README.md (before and after its own sentence)"
    )
    own = re.sub(r"\{%.*?%\}|<!--.*?-->", "", index, flags=re.S).strip()
    assert len(own.split("\n\n")) == 1, (
        f"docs/index.md has text of its own beyond one paragraph: {own!r}"
    )
    for page in SITE_ONLY_PAGES:
        assert f"]({page})" in own, f"docs/index.md does not link {page}"


def test_the_changelog_has_a_section_for_this_version() -> None:
    """The version is declared once (Cargo.toml, read by the native module); CHANGELOG.md
    has its release section beside the Unreleased one."""
    changelog = (DOCS.parent / "CHANGELOG.md").read_text()
    assert "\n## [Unreleased]\n" in changelog
    assert f"\n## [{__version__}]" in changelog, f"CHANGELOG.md has no section for {__version__}"
    assert f"\n[{__version__}]: " in changelog, f"CHANGELOG.md has no link for {__version__}"


def test_the_kafka_option_map_names_what_the_parser_advises() -> None:
    """Every Kafka option the parser recognises stands in the guide's map beside the
    Spark name of its counterpart, so the two cannot drift apart."""
    from jetstream_arrow.spark.option_specs import READ_SPECS, WRITE_SPECS
    from jetstream_arrow.spark.options import KAFKA_EQUIVALENTS

    text = guide("spark.md")
    table = text[text.index("| Kafka option | `jetstream` |") :].split("\n\n")[0]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    spark_name = {spec.python: spec.spark for spec in READ_SPECS + WRITE_SPECS}
    spark_name.update({"servers": "servers"})
    for kafka, equivalents in KAFKA_EQUIVALENTS.items():
        row = next((r for r in rows if f"`{kafka}`" in r[0].lower()), None)
        assert row is not None, f"Kafka option {kafka!r} is not in the map of docs/spark.md"
        for python in equivalents:
            assert f"`{spark_name[python]}`" in row[1], (kafka, python, row)
