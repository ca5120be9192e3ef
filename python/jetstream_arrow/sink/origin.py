"""Which stream a target's position belongs to: a stream's name and when the server
created it. A stream deleted and made again under its name starts its sequences at 1
again; once it holds more messages than the target's position, the position alone
cannot tell it from the old one, and its first messages would be skipped without a
word. So each commit records the stream's creation time (``created`` of its info, to
the nanosecond) with its position, and a sink that finds another one refuses to go on.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from .._time import rfc3339_to_epoch_ns
from ..exceptions import BadInputError


def created_ns(info: Any) -> int | None:
    """When the server created the stream of ``info`` (a ``StreamInfo``), in
    nanoseconds since the epoch; None when the reply has none. Read from the reply's
    text: ``info.created`` keeps microseconds only."""
    raw = info.raw if isinstance(getattr(info, "raw", None), dict) else {}
    created = rfc3339_to_epoch_ns(raw.get("created"))
    return created if created is not None and created > 0 else None


def as_text(ns: int) -> str:
    """``ns`` (nanoseconds since the epoch) as RFC 3339 in UTC, to the nanosecond."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    whole = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{fraction:09d}Z"


def check_same_stream(
    target: Any,
    stream: str,
    recorded: int | None,
    created: int | None,
    position: int,
) -> None:
    """Refuse to land ``stream`` into ``target`` when the creation time the target
    recorded with its position differs from the stream's own: it is another stream
    under the same name. A target of an older release records none: it is taken as
    is, and records one with its next commit."""
    if recorded is None or created is None or recorded == created:
        return
    raise BadInputError(
        f"stream {stream} was created at {as_text(created)}, but {target!r} holds the "
        f"messages of a stream {stream} created at {as_text(recorded)} (up to sequence "
        f"{position}): the stream was deleted and made again, and its messages up to "
        "that sequence would be skipped. Nothing was landed; land the stream into a "
        "new table (another path) to start from its first message"
    )


def recorded_for(positions: Mapping[str, int], created: Mapping[str, int | None]) -> dict[str, int]:
    """The creation times a commit records: those of the streams whose positions it
    moves."""
    return {s: c for s, c in created.items() if s in positions and c is not None}
