"""The layering rules of docs/ARCHITECTURE.md, checked.

- Every module of the package imports on its own.
- No import cycle among the package's modules (imports inside ``if TYPE_CHECKING:``
  do not run and do not count; imports inside functions do: a lazy import that closes
  a cycle is still a cycle).
- No module crosses into another module's private (underscore) names, except the
  native module ``_core`` and the package-private helper modules whose name starts
  with an underscore (``_time``, ``_read_ahead``), which exist to be shared.
- A source file longer than 400 lines says at its top why it is one module.
- Only the core's ``retry.rs`` pauses between attempts: no other module of the core,
  the glue or the Python package sleeps, except the few waits listed below that are
  not retries (each says what it waits for).
- The core's top-level modules import each other only as ARCHITECTURE.md's layer
  table says, and in no circle.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import shutil
from pathlib import Path

import pytest

import jetstream_arrow
import pyspark_jetstream

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / "python"
PACKAGES = ("jetstream_arrow", "pyspark_jetstream")
LONG_MODULE_LINES = 400


def all_modules() -> list[str]:
    """Every module of the package, the native one included."""
    names = []
    for package in (jetstream_arrow, pyspark_jetstream):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            names.append(info.name)
    return sorted(names)


def python_modules() -> list[str]:
    """The modules written in Python (the ones with imports of their own)."""
    return [name for name in all_modules() if module_file(name).exists()]


def module_file(name: str) -> Path:
    path = PYTHON / Path(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def is_package(name: str) -> bool:
    return (PYTHON / Path(*name.split("."))).is_dir()


def known(name: str) -> bool:
    return module_file(name).exists() or name.endswith("._core")


def _type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def imports_of(name: str) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import that runs."""
    tree = ast.parse(module_file(name).read_text())
    package = name if is_package(name) else name.rsplit(".", 1)[0]
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if _type_checking_block(node):
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [alias.name for alias in node.names]
            # `from pkg import module` depends on the module, not on pkg's __init__.
            plain = [n for n in names if not known(f"{target}.{n}")]
            found.extend((f"{target}.{n}", []) for n in names if known(f"{target}.{n}"))
            if plain:
                found.append((target, plain))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return [(m, n) for m, n in found if m.split(".")[0] in PACKAGES and known(m)]


def test_every_module_imports() -> None:
    modules = all_modules()
    assert len(modules) > 20, modules
    for name in modules:
        importlib.import_module(name)


def find_cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of ``graph`` meets, each as the path around it."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []
    cycles: list[list[str]] = []

    def walk(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt)
        path.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            walk(node)
    return cycles


def test_no_import_cycles() -> None:
    graph = {name: sorted({m for m, _ in imports_of(name)} - {name}) for name in python_modules()}
    cycles = find_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


CORE = ROOT / "rust" / "core" / "src"
_RUST_PATH = r"((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)"


def core_modules(root: Path = CORE) -> dict[str, Path]:
    """The core's modules by path (``consume::pull``), each with its file."""
    modules = {}
    for file in root.rglob("*.rs"):
        parts = list(file.relative_to(root).with_suffix("").parts)
        if parts[-1] == "mod":
            parts.pop()
        if parts != ["lib"]:
            modules["::".join(parts)] = file
    return modules


def core_imports(root: Path = CORE) -> dict[str, list[str]]:
    """Which of the core's modules each module's code (not its comments or its unit
    tests) names, through ``crate::`` or ``super::`` paths. A module naming its own
    parent or child is not counted: that is how a folder's files share their home."""
    modules = core_modules(root)

    def resolve(path: str) -> str | None:
        parts = path.split("::")
        for k in range(len(parts), 0, -1):
            if (candidate := "::".join(parts[:k])) in modules:
                return candidate
        return None

    graph = {}
    for module, file in modules.items():
        code = file.read_text().split("#[cfg(test)]")[0]
        code = re.sub(r"//.*", "", code)
        parent = module.rpartition("::")[0]
        named = [resolve(p) for p in re.findall(r"\bcrate::" + _RUST_PATH, code)]
        if parent:
            named += [
                resolve(f"{parent}::{p}") for p in re.findall(r"\bsuper::" + _RUST_PATH, code)
            ]
        graph[module] = sorted(
            {
                n
                for n in named
                if n
                and n != module
                and not n.startswith(module + "::")
                and not module.startswith(n + "::")
            }
        )
    return graph


def test_the_core_has_no_module_cycle() -> None:
    graph = core_imports()
    assert {"connection", "consume::pull", "publish", "read"} <= set(graph), sorted(graph)
    cycles = find_cycles(graph)
    assert not cycles, "module cycles in the core:\n" + "\n".join(" -> ".join(c) for c in cycles)


ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
LAYER_TABLE_HEADER = "| module of the core | imports of the core |"


def documented_core_rows() -> list[tuple[list[str], set[str]]]:
    """ARCHITECTURE.md's table of the core's top-level modules (a file or a folder
    of ``rust/core/src``) and the ones each imports, row by row: the modules of a row
    and what they import (``nothing`` for none)."""
    lines = ARCHITECTURE.read_text().splitlines()
    start = lines.index(LAYER_TABLE_HEADER) + 2  # past the header and its rule
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        modules, imports = (cell.strip() for cell in line.strip("|").split("|"))
        imported = set(re.findall(r"`(\w+)`", imports))
        assert imported or imports == "nothing", line
        rows.append((re.findall(r"`(\w+)`", modules), imported))
    return rows


def documented_core_layers() -> dict[str, set[str]]:
    """What each of the core's top-level modules imports, as the table says."""
    layers: dict[str, set[str]] = {}
    for modules, imported in documented_core_rows():
        for module in modules:
            assert module not in layers, f"{module} has two rows in the table"
            layers[module] = imported
    return layers


def core_layers(root: Path = CORE) -> dict[str, dict[str, list[str]]]:
    """For each top-level module of the core, the top-level modules its code imports,
    each with the modules (``codec::encode -> publish::ttl``) that do."""

    def top(module: str) -> str:
        return module.split("::")[0]

    layers: dict[str, dict[str, list[str]]] = {top(m): {} for m in core_modules(root)}
    for module, imported in core_imports(root).items():
        for target in imported:
            if top(target) != top(module):
                layers[top(module)].setdefault(top(target), []).append(f"{module} -> {target}")
    return layers


def layer_departures(root: Path = CORE) -> list[str]:
    """Where the core's imports depart from ARCHITECTURE.md's table, either way."""
    documented = documented_core_layers()
    found = core_layers(root)
    departures = [f"{m}: a module of the core not in the table" for m in found.keys() - documented]
    departures += [f"{m}: in the table, not in the core" for m in documented.keys() - found]
    for module in sorted(found.keys() & documented.keys()):
        for target, by in sorted(found[module].items()):
            if target not in documented[module]:
                departures.append(f"{module} imports {target}, which the table forbids: {by}")
        for target in sorted(documented[module] - found[module].keys()):
            departures.append(f"{module} no longer imports {target}: take it out of the table")
    return departures


def test_the_core_imports_as_its_layer_table_says() -> None:
    """ARCHITECTURE.md's table is the rule and the record: a module imports only what
    its row lists, and its row lists only what it imports."""
    assert {"arrow", "codec", "compression", "publish"} <= documented_core_layers().keys()
    departures = layer_departures()
    assert not departures, "\n".join(departures)


def test_the_core_layers_have_no_cycle() -> None:
    """No two of the core's folders or files import each other, directly or in a
    circle: in the table, each row imports only rows above it."""
    above: set[str] = set()
    upward = []
    for modules, imported in documented_core_rows():
        upward += [f"{modules} import {m}, not of a row above" for m in sorted(imported - above)]
        above.update(modules)
    assert not upward, "\n".join(upward)
    found = {m: sorted(targets) for m, targets in core_layers().items()}
    cycles = find_cycles(found)
    assert not cycles, "the core has cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_an_import_against_the_layers_is_found(tmp_path: Path) -> None:
    """The check reads the code: a codec module naming the publisher is caught."""
    root = tmp_path / "src"
    shutil.copytree(CORE, root)
    encode = root / "codec" / "encode.rs"
    encode.write_text("use crate::publish::input::OutgoingMessage;\n" + encode.read_text())
    departures = layer_departures(root)
    assert any(
        d.startswith("codec imports publish") and "codec::encode -> publish::input" in d
        for d in departures
    ), departures
    assert find_cycles({m: sorted(t) for m, t in core_layers(root).items()})


def test_no_private_names_cross_modules() -> None:
    crossings = []
    for name in python_modules():
        for target, names in imports_of(name):
            if target.rsplit(".", 1)[-1].startswith("_"):
                continue  # the native module and package-private helper modules
            for imported in names:
                if imported.startswith("_") and not imported.startswith("__"):
                    crossings.append(f"{name} imports {target}.{imported}")
    assert not crossings, "\n".join(crossings)


def source_files() -> list[Path]:
    files = sorted(PYTHON.rglob("*.py")) + sorted((ROOT / "rust").rglob("*.rs"))
    return [f for f in files if "target" not in f.parts]


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_long_module_says_why_it_is_one(path: Path) -> None:
    lines = path.read_text().splitlines()
    if len(lines) <= LONG_MODULE_LINES:
        return
    head = " ".join(lines[:30]).lower()
    assert "one module" in head, (
        f"{path.relative_to(ROOT)} has {len(lines)} lines: say at its top why it is one "
        "module (a line with the words 'one module'), or split it by concern"
    )


# Sleeps that are not a retry's pause, and what each waits for. Every other pause
# between attempts is the core's `retry.rs`, where the rule (what is transient), the
# backoff and the budget live once.
WAITS_THAT_ARE_NOT_RETRIES = {
    "rust/python/src/runtime.rs": "checks for Ctrl-C every 50 ms while Python waits on the core",
    "rust/python/src/logging.rs": "waits at exit for the log events already handed to Python",
    "python/jetstream_arrow/embedded_server.py": "polls a server process it started",
    "python/jetstream_arrow/cli/server.py": "polls the server's log until it listens",
    "python/jetstream_arrow/cli/load.py": "holds a load to --max-rate",
    "python/jetstream_arrow/positions.py": "waits out another writer's lease on an identity",
}
RETRY_HOME = "rust/core/src/retry.rs"
SLEEPS = {
    ".rs": re.compile(r"\b(?:tokio::time::sleep|thread::sleep|time::sleep)\("),
    ".py": re.compile(r"\b(?:time\.sleep|asyncio\.sleep)\("),
}


def test_only_the_retry_home_pauses() -> None:
    sources = [*(ROOT / "rust").glob("*/src/**/*.rs"), *PYTHON.rglob("*.py")]
    sleeping = {
        path.relative_to(ROOT).as_posix()
        for path in sources
        if SLEEPS[path.suffix].search(path.read_text())
    }
    assert RETRY_HOME in sleeping, "the retry home pauses (or the pattern misses it)"
    unexplained = sleeping - {RETRY_HOME} - set(WAITS_THAT_ARE_NOT_RETRIES)
    assert not unexplained, (
        f"{sorted(unexplained)} sleep: pause between attempts with the core's retry.rs "
        "(Retry, Backoff::wait, or a patient request), or list a wait that is not a retry "
        "in WAITS_THAT_ARE_NOT_RETRIES with what it waits for"
    )
    stale = set(WAITS_THAT_ARE_NOT_RETRIES) - sleeping
    assert not stale, f"listed as waiting but no longer sleeping: {sorted(stale)}"


SPARK = PYTHON / "jetstream_arrow" / "spark"
OPTION_DECLARATIONS = SPARK / "option_specs.py"


def test_spark_declares_its_options_only_as_fields() -> None:
    """Every Spark option is a field of ReadOptions or WriteOptions (or ConnectOptions),
    declared by ``option(...)`` in ``spark/option_specs.py``; no other module of the
    Spark package builds an option's spec or keeps a hand list of read or write options
    (three or more of their names in one literal, or as the first items of its pairs):
    what applies where is declared with the option."""
    from jetstream_arrow.spark.option_specs import (
        CONNECT_SPECS,
        READ_SPECS,
        WRITE_SPECS,
        ReadOptions,
        WriteOptions,
        specs_of,
    )

    assert specs_of(ReadOptions, "read") == READ_SPECS
    assert specs_of(WriteOptions, "write") == WRITE_SPECS
    # Connection options are ConnectOptions's, shared with the CLI and the client.
    connect = {spec.python for spec in CONNECT_SPECS}
    names = {spec.python for spec in READ_SPECS + WRITE_SPECS} - connect
    names |= {spec.spark for spec in READ_SPECS + WRITE_SPECS} - connect
    found = []
    for path in sorted(SPARK.rglob("*.py")):
        if path == OPTION_DECLARATIONS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
                "OptionSpec",
                "option",
            ):
                found.append(f"{where}: {node.func.id}(...)")  # type: ignore[attr-defined]
            literal = None
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                literal = node.elts
            elif isinstance(node, ast.Dict):
                literal = [k for k in node.keys if k is not None]
            if literal:
                firsts = [e.elts[0] if isinstance(e, ast.Tuple) and e.elts else e for e in literal]
                strings = [e.value for e in firsts if isinstance(e, ast.Constant)]
                if len(strings) >= 3 and all(isinstance(s, str) and s in names for s in strings):
                    found.append(f"{where}: a hand list of options {strings}")
    assert not found, "Spark options declared outside spark/option_specs.py:\n" + "\n".join(found)
