"""The options a sink runs with: their defaults and limits, and the checks that refuse
bad ones, naming the option, before the sink asks anything of the server."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._core import DEFAULT_READ_BATCH_ROWS
from ..codec import ValueCodec
from ..exceptions import BadInputError
from .rows import check_partition_by

#: Commit after this many rows, at most (a Parquet file or Delta commit per commit).
DEFAULT_COMMIT_ROWS = 100_000
#: ... or this many seconds after the first row pending, whichever comes first.
DEFAULT_COMMIT_SECONDS = 60.0
#: The largest ``commit_rows``: a commit's rows are held in memory.
MAX_COMMIT_ROWS = 10_000_000
#: The longest ``commit_seconds``: a day.
MAX_COMMIT_SECONDS = 86_400.0
#: How long each call of a sink waits for a server that does not answer (restarting,
#: cut off, electing a leader) before the sink fails: minutes, so that a following
#: sink outlives a server's restart or a network cut.
DEFAULT_RESUME_TIMEOUT = 300.0


@dataclass(frozen=True)
class SinkSettings:
    """A sink's options, checked (``run_sink`` documents each): ``names`` the streams
    sunk, ``codecs`` the codec per stream (None: the payload lands as ``data``),
    ``partitions`` the partition columns, ``filters`` the subject filters per stream,
    ``rows_per_batch`` the rows of each read batch."""

    names: list[str]
    codecs: dict[str, ValueCodec | None]
    partitions: list[str]
    filters: dict[str, str | Sequence[str]]
    follow: bool
    include_headers: bool
    commit_rows: int
    commit_seconds: float
    rows_per_batch: int
    dead_letter_stream: str | None
    dead_letter_lease: float | None
    durable: str | None
    resume_timeout: float

    @property
    def read_headers(self) -> bool:
        """Whether reads take the headers: with a dead-letter stream too, where a payload
        still compressed is dead-lettered with its Content-Encoding (the rows land
        without them unless asked for)."""
        return self.include_headers or self.dead_letter_stream is not None

    @classmethod
    def checked(
        cls,
        streams: Sequence[str],
        *,
        follow: bool,
        subjects: Mapping[str, str | Sequence[str]] | None,
        codec: ValueCodec | str | Mapping[str, ValueCodec | str | None] | None,
        include_headers: bool,
        partition_by: Sequence[str] | None,
        commit_rows: int,
        commit_seconds: float,
        dead_letter_stream: str | None,
        dead_letter_lease: float | None,
        batch_rows: int | None,
        durable: str | None,
        resume_timeout: float,
    ) -> SinkSettings:
        """The settings of ``run_sink``'s options, or a ``BadInputError`` naming the
        first option that is wrong."""
        names = _check(streams, commit_rows, commit_seconds, batch_rows)
        _check_seconds("resume_timeout", resume_timeout)
        if dead_letter_lease is not None:
            _check_seconds("dead_letter_lease", dead_letter_lease)
        if dead_letter_stream is not None and dead_letter_stream in names:
            # Its dead letters would be read back as messages of the stream, and fail again.
            raise BadInputError(
                f"option 'dead_letter_stream' {dead_letter_stream!r} is one of the streams sunk"
            )
        codecs = _codecs(codec, names, dead_letter_stream)
        partitions = check_partition_by(partition_by, "option 'partition_by'")
        filters = dict(subjects or {})
        unknown = sorted(set(filters) - set(names))
        if unknown:
            raise BadInputError(
                f"option 'subjects' names streams the sink does not read: {unknown}"
            )
        return cls(
            names=names,
            codecs=codecs,
            partitions=partitions,
            filters=filters,
            follow=follow,
            include_headers=include_headers,
            commit_rows=commit_rows,
            commit_seconds=commit_seconds,
            rows_per_batch=min(batch_rows or DEFAULT_READ_BATCH_ROWS, commit_rows),
            dead_letter_stream=dead_letter_stream,
            dead_letter_lease=dead_letter_lease,
            durable=durable,
            resume_timeout=float(resume_timeout),
        )


def _check_seconds(option: str, seconds: float) -> None:
    if isinstance(seconds, bool) or not (isinstance(seconds, (int, float)) and seconds > 0):
        raise BadInputError(f"option '{option}' must be more than 0 seconds, got {seconds!r}")


def _check(
    streams: Sequence[str], commit_rows: int, commit_seconds: float, batch_rows: int | None
) -> list[str]:
    names = [streams] if isinstance(streams, str) else list(streams)
    if not names:
        raise BadInputError("option 'streams' names no stream")
    if len(set(names)) != len(names):
        raise BadInputError(f"option 'streams' names a stream twice: {names}")
    if isinstance(commit_rows, bool) or not isinstance(commit_rows, int):
        raise BadInputError(f"option 'commit_rows' must be an integer, got {commit_rows!r}")
    if not 1 <= commit_rows <= MAX_COMMIT_ROWS:
        raise BadInputError(
            f"option 'commit_rows' must be between 1 and {MAX_COMMIT_ROWS:,}, got {commit_rows}"
        )
    if not 0 < commit_seconds <= MAX_COMMIT_SECONDS:
        raise BadInputError(
            f"option 'commit_seconds' must be more than 0 and at most {MAX_COMMIT_SECONDS:,.0f}, "
            f"got {commit_seconds}"
        )
    if batch_rows is not None and batch_rows < 1:
        raise BadInputError(f"option 'batch_rows' must be at least 1, got {batch_rows}")
    return names


def _codecs(
    codec: ValueCodec | str | Mapping[str, ValueCodec | str | None] | None,
    streams: list[str],
    dead_letter_stream: str | None,
) -> dict[str, ValueCodec | None]:
    given = codec if isinstance(codec, Mapping) else dict.fromkeys(streams, codec)
    unknown = sorted(set(given) - set(streams))
    if unknown:
        raise BadInputError(f"option 'codec' names streams the sink does not read: {unknown}")
    out: dict[str, ValueCodec | None] = {}
    for stream in streams:
        one = ValueCodec.of(given.get(stream))
        if one is not None:
            # The value arrives as one struct column (flattened here, where a field
            # named like a message column is renamed); with a dead-letter stream,
            # bad payloads are kept (in _corrupt_record) to be sent there.
            settings: dict[str, Any] = {"flatten": False}
            if dead_letter_stream is not None:
                settings["on_malformed"] = "permissive"
            one = dataclasses.replace(one, **settings)
        out[stream] = one
    return out
