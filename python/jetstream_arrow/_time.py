"""Times, one parser for the whole package.

Users give times as aware ``datetime`` objects, ISO-8601 text (``2026-01-31T12:00:00Z``)
or epoch seconds. They travel to the native core as int64 nanoseconds since the epoch,
to Spark as microseconds, and to the JetStream API as RFC 3339 text with nanoseconds.
Every conversion between those lives here, so a time means the same thing to the
facade, the Spark options, the CLI and the management API.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

from .exceptions import BadInputError

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# int64 nanoseconds since the epoch reach from 1677 to 2262.
_NS_LIMIT = 2**63
_NS_PER_SECOND = 1_000_000_000

_RFC3339 = re.compile(
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", re.IGNORECASE
)
# Go's zero time.Time, which the server sends for "never" (e.g. first_ts of an empty stream).
_GO_ZERO_TIME_PREFIX = "0001-01-01T00:00:00"

TIME_HELP = "an aware datetime, ISO-8601 text such as '2026-01-31T12:00:00Z', or epoch seconds"


#: The last time int64 nanoseconds since the epoch can hold (in 2262). A read bound
#: after it is still meaningful: no message is stored that late.
LAST_NS_TIME = EPOCH + timedelta(microseconds=(2**63 - 1) // 1000)


def to_datetime(value: Any, option: str, *, beyond_ns_range: bool = False) -> datetime:
    """An aware UTC datetime from a datetime, ISO-8601 text or epoch seconds.

    A time without a zone is refused (naming ``option``): guessing local time or UTC
    would silently move a read window by hours. Times outside what int64 nanoseconds
    hold (1678-2262) are refused unless ``beyond_ns_range``, for bounds that are only
    compared, never sent as nanoseconds.
    """
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        parsed = _from_epoch_seconds(value, option, beyond_ns_range)
    elif isinstance(value, str):
        text = value.strip()
        try:
            parsed = _from_epoch_seconds(float(text), option, beyond_ns_range)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(re.sub(r"[zZ]$", "+00:00", text))
            except ValueError:
                raise BadInputError(f"option {option!r}: {value!r} is not {TIME_HELP}") from None
    else:
        raise BadInputError(f"option {option!r}: expected {TIME_HELP}, got {value!r}")
    if parsed.tzinfo is None:
        raise BadInputError(
            f"option {option!r}: the time {value!r} has no time zone; add one "
            "(e.g. 'Z' or tzinfo=timezone.utc for UTC)"
        )
    parsed = parsed.astimezone(timezone.utc)
    in_range = -_NS_LIMIT < (parsed - EPOCH) // timedelta(microseconds=1) * 1000 < _NS_LIMIT
    if not (in_range or beyond_ns_range):
        raise BadInputError(f"option {option!r}: {value!r} is out of range (years 1678-2262)")
    return parsed


def _from_epoch_seconds(value: float, option: str, beyond_ns_range: bool = False) -> datetime:
    if value != value:  # NaN: no time at all, and no comparison would say so
        raise BadInputError(f"option {option!r}: expected {TIME_HELP}, got {value!r}")
    if not (beyond_ns_range or -_NS_LIMIT < value * _NS_PER_SECOND < _NS_LIMIT):
        raise BadInputError(f"option {option!r}: {value!r} is out of range (years 1678-2262)")
    try:
        return EPOCH + timedelta(seconds=value)
    except OverflowError:
        raise BadInputError(f"option {option!r}: {value!r} is out of range") from None


def to_epoch_ns(value: Any, option: str) -> int | None:
    """Nanoseconds since the epoch (what the native core takes); None stays None."""
    if value is None:
        return None
    return (to_datetime(value, option) - EPOCH) // timedelta(microseconds=1) * 1000


def to_epoch_micros(value: datetime) -> int:
    """Microseconds since the epoch (Spark's timestamp unit)."""
    return (value - EPOCH) // timedelta(microseconds=1)


def from_epoch_micros(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)


def to_rfc3339(value: datetime, option: str) -> str:
    """The JetStream API's spelling of a time (UTC, microseconds)."""
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise BadInputError(
            f"option {option!r} must be an aware datetime (e.g. tzinfo=timezone.utc), got {value!r}"
        )
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339_to_epoch_ns(value: str | None) -> int | None:
    """The server's RFC 3339 time in nanoseconds since the epoch, to the last digit it
    wrote (:func:`from_rfc3339` keeps microseconds). Go's zero time ("never"), an
    absent value and text of another form are None."""
    if not value or value.startswith(_GO_ZERO_TIME_PREFIX):
        return None
    match = _RFC3339.match(value)
    if not match:
        return None
    base, fraction, zone = match.groups()
    whole = from_rfc3339(f"{base}{zone}")
    assert whole is not None
    seconds = (whole - EPOCH) // timedelta(seconds=1)
    return seconds * _NS_PER_SECOND + int((fraction or "0")[:9].ljust(9, "0"))


def from_rfc3339(value: str | None) -> datetime | None:
    """Parse the server's RFC 3339 time (nanosecond precision) to an aware UTC datetime.

    Go's zero time ("never") and an absent value are None.
    """
    if not value or value.startswith(_GO_ZERO_TIME_PREFIX):
        return None
    match = _RFC3339.match(value)
    if not match:
        raise ValueError(f"unexpected time {value!r} in a JetStream API reply")
    base, fraction, zone = match.groups()
    parsed = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    if zone.upper() == "Z":
        tz = timezone.utc
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    return parsed.replace(microsecond=micros, tzinfo=tz).astimezone(timezone.utc)


def to_ns_duration(value: float | int | timedelta, option: str) -> int:
    """A non-negative duration in seconds (or a timedelta) as wire nanoseconds."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise BadInputError(
            f"option {option!r} must be a non-negative number of seconds, got {value!r}"
        )
    return round(value * _NS_PER_SECOND)


def from_ns_duration(value: int) -> float:
    return value / _NS_PER_SECOND
