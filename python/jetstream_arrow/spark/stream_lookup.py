"""Which streams a read takes, and the JetStream API requests about them that the
driver and the executors make around their reads (a stream's state), asked again by
the core while they fail transiently (:data:`PATIENCE`).

A read names one stream (option ``stream``) or several (``streams``, or
``streamPattern`` matched against the names the server lists); :func:`streams_of`
answers with each stream's state and the subject filters it is read with.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._core import DEFAULT_RESUME_TIMEOUT
from .._time import rfc3339_to_epoch_ns
from ..client import Client
from ..exceptions import BadInputError, NotFoundError
from .options import ReadOptions

log = logging.getLogger("jetstream_arrow.spark")

# How long the requests around a read are asked again while they fail transiently
# (the core's rule and pauses: the clients' ``resume_timeout``) where the read's own
# option ``resumeTimeout`` is not at hand (a write's check of its stream). A read
# recovers for as long as that option says, opening included; the requests around it
# must outlast a leader election as well, or a partition fails where the read itself
# would have gone on.
PATIENCE = DEFAULT_RESUME_TIMEOUT


def created_ns(info: Any) -> int | None:
    """When the server created the stream of ``info``, in nanoseconds since the epoch
    (None when the reply has none). Beside the stream's name it tells a stream deleted
    and created again from the one an offset was made on (:func:`recreated_since`).
    Read from the reply's text (``info.created`` keeps microseconds only) and compared
    as an instant, whatever offset the text was written with."""
    raw = info.raw if isinstance(getattr(info, "raw", None), dict) else {}
    created = rfc3339_to_epoch_ns(raw.get("created"))
    # An offset keeps it as a non-negative count: a stream is not made before 1970.
    return created if created is not None and created > 0 else None


def _first_message_ns(info: Any) -> int | None:
    """When the stream's first message was stored (None when it is empty)."""
    raw = info.raw if isinstance(getattr(info, "raw", None), dict) else {}
    state = raw.get("state")
    return rfc3339_to_epoch_ns(state.get("first_ts")) if isinstance(state, dict) else None


def stream_state(client: Client, stream: str, patience: float = PATIENCE) -> Any:
    """The stream's state, with a missing stream reported against option 'stream';
    transient errors are asked through for ``patience`` seconds (a read's
    ``resumeTimeout``)."""
    return _stream_info(client, stream, patience).state


def _stream_info(client: Client, stream: str, patience: float, option: str = "stream") -> Any:
    try:
        return client.stream_info(stream, resume_timeout=patience)
    except NotFoundError as err:
        raise BadInputError(
            f"option {option!r}: there is no stream {stream!r} "
            f"(JetStream API {client.options.js_api_prefix}): {err.description or err}"
        ) from None


def streams_named(opts: ReadOptions) -> str:
    """How the read names its streams, for a reader's ``repr``: ``stream='S'``,
    ``streams=('A', 'B')`` or ``streamPattern='...'``."""
    if opts.streams is not None:
        return f"streams={opts.streams!r}"
    if opts.stream_pattern is not None:
        return f"streamPattern={opts.stream_pattern!r}"
    return f"stream={opts.stream!r}"


@dataclass(frozen=True)
class ChosenStream:
    """A stream a read takes: its state, the subject filters it is read with
    (None: every subject; empty: it stores none of the read's filters), and when it
    was created (:func:`created_ns`)."""

    state: Any
    subjects: tuple[str, ...] | None
    created: int | None = None
    first_message: int | None = None


def recreated_since(recorded: int | None, stream: ChosenStream) -> bool:
    """Whether ``stream`` was deleted and created again since an offset recorded its
    creation time ``recorded`` (ns since the epoch; None: not recorded).

    Another creation time alone does not tell: a stream restored from a snapshot into
    a cluster reports the time of the restore, which each replica keeps its own way
    (a new leader reports another), and servers before 2.14.5 gave a stream a new
    creation time when an application created it again with the same config. Those
    streams keep their messages and their times, older than the stream's creation;
    a stream made anew holds only messages stored after it was created. So a stream
    whose first message is older than its creation is the same stream, and an empty
    one is left to the test of its end (a new one ends before the query's position;
    one that moved past it holds no message of the old one either). Clocks of
    cluster nodes apart by more than the time between a creation and its first
    message can hide a recreation: then only the end tells."""
    if recorded is None or stream.created is None or recorded == stream.created:
        return False
    return stream.first_message is not None and stream.first_message >= stream.created


def streams_of(
    client: Client,
    opts: ReadOptions,
    subjects: Sequence[str] | None = None,
    *,
    missing_ok: bool = False,
) -> dict[str, ChosenStream]:
    """The streams a read with subject filters ``subjects`` (default: option
    ``subjects``) takes, by name in name order: option ``stream`` or ``streams`` as
    given, or the streams whose names match option ``streamPattern`` (with filters,
    those that store one of them).

    Of several streams each is read with the filters it stores, as the server tells
    (a filter that matches none of a stream's subjects is refused by a read of that
    stream); a stream without subjects of its own (a mirror, or one that only
    sources others) with all of them. A stream named but missing is an error, or
    left out with ``missing_ok`` (a streaming read asks again at each micro-batch,
    and decides what a stream gone since the last one means)."""
    filters = tuple(subjects) if subjects is not None else opts.subjects
    if not opts.several_streams:
        try:
            info = _stream_info(client, opts.stream, opts.resume_timeout)
        except BadInputError:
            if not missing_ok:
                raise
            return {}
        return {opts.stream: _chosen(info, filters)}
    infos: dict[str, Any] = {}
    holders: dict[str, set[str]] = {}
    if opts.stream_pattern is not None:
        pattern = re.compile(opts.stream_pattern)
        # The server chooses the streams that store a filter: one listing per filter.
        for subject in filters or (None,):
            listed = client.list_streams(subject, resume_timeout=opts.resume_timeout)
            for info in listed:
                if pattern.fullmatch(info.config.name) is not None:
                    infos[info.config.name] = info
                    holders.setdefault(info.config.name, set()).add(subject or "")
    else:
        for name in opts.streams or ():
            try:
                infos[name] = _stream_info(client, name, opts.resume_timeout, "streams")
            except BadInputError:
                if not missing_ok:
                    raise
        for subject in filters or ():
            names = client.stream_names(subject, resume_timeout=opts.resume_timeout)
            for name in set(names) & set(infos):
                holders.setdefault(name, set()).add(subject)

    def read_with(name: str) -> tuple[str, ...] | None:
        if filters is None or not infos[name].config.subjects:
            return filters
        return tuple(f for f in filters if f in holders.get(name, ()))

    return {name: _chosen(infos[name], read_with(name)) for name in sorted(infos)}


def stream_now(client: Client, stream: str, patience: float = PATIENCE) -> ChosenStream:
    """Stream ``stream`` as it is now (every subject): its state and when it was
    created, for :func:`recreated_since`."""
    return _chosen(_stream_info(client, stream, patience), None)


def _chosen(info: Any, subjects: tuple[str, ...] | None) -> ChosenStream:
    return ChosenStream(info.state, subjects, created_ns(info), _first_message_ns(info))
