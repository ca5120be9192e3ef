"""Filter pushdown: which of Spark's filters a read can apply itself, and how.

Predicates on ``seq`` narrow the planned sequence range exactly; ``subject``
equality, ``IN`` and prefixes ending in ``.`` become subject filters (only when
option ``subjects`` is not given); predicates on ``timestamp`` narrow the range too
but are left for Spark to check as well. Everything else is Spark's.

Kept apart from the batch reader (:mod:`.batch_reader`) because it is pure: filters
in, :class:`PushedFilters` out, no connection and no Spark session needed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime
from types import FrameType
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from .._time import to_epoch_micros
from .reading import MAX_SEQ

# An IN list longer than this stays Spark's: each subject is a filter of the consumer.
_MAX_PUSHED_SUBJECTS = 256


@dataclass
class PushedFilters:
    """What pushed-down filters allow: a sequence range, a time range (microseconds,
    end exclusive), literal subjects and subject prefixes."""

    seq_lo: int = 1
    seq_hi: int = MAX_SEQ
    time_lo: int | None = None
    time_hi: int | None = None
    subjects: set[str] | None = None
    prefixes: list[str] = field(default_factory=list)

    def subject_filters(self) -> list[str] | None:
        """NATS subject filters for the pushed subject predicates ([] matches nothing)."""
        if self.subjects is not None:
            return sorted(s for s in self.subjects if all(s.startswith(p) for p in self.prefixes))
        if self.prefixes:
            longest = max(self.prefixes, key=len)
            if all(longest.startswith(p) for p in self.prefixes):
                return [longest + ">"]
            return []
        return None

    def push(self, f: Filter, subjects_given: bool) -> bool:
        """Apply ``f`` to the planned read; True when the read alone makes it hold.
        ``subjects_given``: option ``subjects`` fixes the subjects, so subject
        predicates stay Spark's."""
        attribute = getattr(f, "attribute", None)
        if attribute == ("seq",):
            return self._push_seq(f)
        if attribute == ("timestamp",):
            self._push_time(f)
            return isinstance(f, IsNotNull)
        if attribute == ("subject",) and not subjects_given:
            return self._push_subject(f)
        return False

    def _push_seq(self, f: Filter) -> bool:
        if isinstance(f, IsNotNull):
            return True
        value: Any = getattr(f, "value", None)
        if isinstance(f, In):
            values = [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
            if values and len(values) == len(value):
                self.seq_lo = max(self.seq_lo, min(values))
                self.seq_hi = min(self.seq_hi, max(values))
            return False
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        if isinstance(f, EqualTo):
            self.seq_lo, self.seq_hi = max(self.seq_lo, value), min(self.seq_hi, value)
        elif isinstance(f, GreaterThan):
            self.seq_lo = max(self.seq_lo, value + 1)
        elif isinstance(f, GreaterThanOrEqual):
            self.seq_lo = max(self.seq_lo, value)
        elif isinstance(f, LessThan):
            self.seq_hi = min(self.seq_hi, value - 1)
        elif isinstance(f, LessThanOrEqual):
            self.seq_hi = min(self.seq_hi, value)
        else:
            return False
        return True

    def _push_time(self, f: Filter) -> None:
        value: Any = getattr(f, "value", None)
        if not isinstance(value, datetime) or value.tzinfo is None:
            return
        us = to_epoch_micros(value)
        lo, hi = None, None  # hi exclusive
        if isinstance(f, EqualTo):
            lo, hi = us, us + 1
        elif isinstance(f, GreaterThan):
            lo = us + 1
        elif isinstance(f, GreaterThanOrEqual):
            lo = us
        elif isinstance(f, LessThan):
            hi = us
        elif isinstance(f, LessThanOrEqual):
            hi = us + 1
        if lo is not None:
            self.time_lo = lo if self.time_lo is None else max(self.time_lo, lo)
        if hi is not None:
            self.time_hi = hi if self.time_hi is None else min(self.time_hi, hi)

    def _push_subject(self, f: Filter) -> bool:
        if isinstance(f, IsNotNull):
            return True
        value: Any = getattr(f, "value", None)
        if isinstance(f, EqualTo) and _literal_subject(value):
            values = {value}
        elif (
            isinstance(f, In)
            and 0 < len(value) <= _MAX_PUSHED_SUBJECTS
            and all(_literal_subject(v) for v in value)
        ):
            values = set(value)
        elif (
            isinstance(f, StringStartsWith)
            and isinstance(value, str)
            and value.endswith(".")
            and _literal_subject(value[:-1])
        ):
            # Subjects have no empty tokens, so "starts with 'a.b.'" is exactly "a.b.>".
            self.prefixes.append(value)
            return True
        else:
            return False
        self.subjects = values if self.subjects is None else self.subjects & values
        return True


def _literal_subject(value: Any) -> bool:
    return (
        isinstance(value, str)
        and bool(value)
        and not any(c in value for c in " \t\r\n*>")
        and all(value.split("."))
    )


def planning_with_pushdown() -> bool:
    """True when Spark asks for a reader in order to push filters into it.

    Spark refuses to plan a reader that implements ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false, and the data source is not
    told the setting. It does call ``reader()`` from a worker module of its own for
    pushdown, so that call is recognised by its caller and only then gets the reader
    with pushdown. Anything else gets the plain reader, which is always correct.
    """
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
            return True
        frame = frame.f_back
    return False
