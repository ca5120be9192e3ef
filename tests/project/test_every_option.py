"""Every public option of every entry point has a probe (tests/option_probes.py says
how options are enumerated and what a probe is): the probes live in the test module of
their entry point, ``tests/<area>/test_every_option_<entry>.py``, all imported here."""

from __future__ import annotations

import importlib
from collections import Counter
from pathlib import Path

from option_probes import ALL_PROBES, enumerated, key

TESTS = Path(__file__).resolve().parent.parent

#: The test modules that hold the probes, by the name pytest imports them under (the
#: folders of tests/ are packages).
PROBE_MODULES = sorted(
    f"{path.parent.name}.{path.stem}" for path in TESTS.glob("*/test_every_option_*.py")
)


def _all_keys() -> set[str]:
    return {key(entry, option) for entry, options in enumerated().items() for option in options}


def test_every_option_has_a_probe() -> None:
    """The enumerated options and the probe tables of all probe modules are the same
    set: an option without a probe, or a probe of an option that is gone, fails here."""
    assert PROBE_MODULES, f"no probe modules under {TESTS}"
    for module in PROBE_MODULES:
        importlib.import_module(module)
    options = _all_keys()
    missing = sorted(options - set(ALL_PROBES))
    stale = sorted(set(ALL_PROBES) - options)
    assert not missing and not stale, (
        f"options without a probe: {missing}; probes of no option: {stale}"
    )
    by_entry: dict[str, Counter[str]] = {}
    for probe in ALL_PROBES.values():
        by_entry.setdefault(probe.entry, Counter())[probe.kind] += 1
    kinds = Counter(p.kind for p in ALL_PROBES.values())
    lines = [
        f"{len(ALL_PROBES)} options of {len(by_entry)} entry points: "
        + ", ".join(f"{kinds[k]} by {k}" for k in ("effect", "refusal", "delegated"))
    ]
    for entry, counts in by_entry.items():
        lines.append(
            f"  {entry}: {sum(counts.values())} "
            f"({', '.join(f'{n} {k}' for k, n in sorted(counts.items()))})"
        )
    print("\n".join(lines))
