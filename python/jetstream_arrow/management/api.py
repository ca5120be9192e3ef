"""The management methods :class:`jetstream_arrow.Client` inherits: create, update,
inspect, list, purge and delete streams and consumers, and read or delete one stored
message, each over the JetStream JSON API with the types of ``streams`` and
``consumers``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar, cast

from .. import _core
from .._core import api_subject, validate_name
from .._time import to_datetime, to_rfc3339
from ..exceptions import ApiError, BadInputError, NotFoundError
from ..options import check_known_options
from ..positions import holds_positions, with_positions
from .consumers import ConsumerConfig, ConsumerInfo, ConsumerPause
from .listing import consumer_name, every_page, stream_name
from .streams import PurgeResult, StoredMessage, StreamConfig, StreamInfo

_T = TypeVar("_T")


def _build(cls: type[_T], given: _T | None, options: dict[str, Any], what: str) -> _T:
    """A config from an instance, keyword options, or an instance with overrides."""
    check_known_options(cls, options, what)
    if given is None:
        return cls(**options)
    if not isinstance(given, cls):
        raise BadInputError(f"expected a {cls.__name__}, got {type(given).__name__}")
    return dataclasses.replace(cast(Any, given), **options) if options else given


class ManagementMixin:
    """Stream and consumer management for :class:`jetstream_arrow.Client`.

    Every method is one (or, for listings, a few) JetStream API requests. Errors are
    raised as :class:`~jetstream_arrow.exceptions.ApiError`, or
    :class:`~jetstream_arrow.exceptions.NotFoundError` for a missing stream, consumer
    or message, by the request itself (the native client types every error reply).
    """

    def _api_json(
        self,
        subject: str,
        body: dict[str, Any] | None = None,
        resume_timeout: float | None = None,
    ) -> dict[str, Any]:
        """Request ``<api prefix>.<subject>`` with a JSON body; the JSON reply. Raises
        ApiError (NotFoundError, ...) when the reply is an error; with
        ``resume_timeout``, only once transient failures have lasted that long.
        Provided by the class that mixes this in."""
        raise NotImplementedError

    def _paged(
        self,
        subject: str,
        key: str,
        body: dict[str, Any] | None = None,
        missing: list[str] | None = None,
        resume_timeout: float | None = None,
        name_of: Callable[[Any], str] = str,
    ) -> list[Any]:
        """Every page of listing ``subject`` (:func:`.listing.every_page`), each
        request asked again as :meth:`stream_info` says for ``resume_timeout``."""

        def page_at(offset: int) -> dict[str, Any]:
            return self._api_json(subject, {**(body or {}), "offset": offset}, resume_timeout)

        return every_page(subject, page_at, key, name_of, missing)

    # -- streams ----------------------------------------------------------------------
    def create_stream(
        self,
        name: str | StreamConfig,
        subjects: list[str] | None = None,
        *,
        exactly_once: bool = False,
        **config: Any,
    ) -> StreamInfo:
        """Create a stream: ``create_stream("ORDERS", ["orders.>"], max_age=3600)`` or
        ``create_stream(StreamConfig(...))``. Creating a stream that exists with the
        same config succeeds; with a different config it raises ApiError (10058).

        ``exactly_once=True`` makes a stream that holds exactly-once writers'
        positions (see [Exactly once at any age](reliability.md#exactly-once-at-any-age)):
        its subjects also take ``$JA.POS.<name>.>`` and it allows rollups."""
        cfg = self._stream_config(name, subjects, config)
        if exactly_once:
            cfg = with_positions(cfg)
        return self._write_stream(_core.API_STREAM_CREATE, cfg)

    def enable_exactly_once(self, name: str) -> StreamInfo:
        """Let an existing stream hold exactly-once writers' positions: adds the
        subjects ``$JA.POS.<name>.>`` and allows rollups. Refused (``BadInputError``,
        saying why) for a stream whose retention removes what consumers acknowledge."""
        info = self.stream_info(name)
        why = holds_positions(info, after_enabling=True)
        if why is not None:
            raise BadInputError(f"stream {name!r} cannot hold writers' positions: {why}")
        return self._write_stream(_core.API_STREAM_UPDATE, with_positions(info.config))

    def update_stream(
        self, name: str | StreamConfig, subjects: list[str] | None = None, **config: Any
    ) -> StreamInfo:
        """Replace a stream's config. Unset fields return to the server's defaults, so
        start from ``stream_info(name).config`` to change one field:

            client.update_stream(client.stream_info("S").config, max_msgs=100)
        """
        return self._write_stream(
            _core.API_STREAM_UPDATE, self._stream_config(name, subjects, config)
        )

    def create_or_update_stream(
        self, name: str | StreamConfig, subjects: list[str] | None = None, **config: Any
    ) -> StreamInfo:
        """Create the stream, or replace its config if it exists (as
        [`update_stream`][] does)."""
        cfg = self._stream_config(name, subjects, config)
        try:
            return self._write_stream(_core.API_STREAM_CREATE, cfg)
        except ApiError as err:
            if err.err_code != _core.ERR_STREAM_NAME_IN_USE:
                raise
        return self._write_stream(_core.API_STREAM_UPDATE, cfg)

    def _write_stream(self, verb: str, cfg: StreamConfig) -> StreamInfo:
        return StreamInfo.from_api(self._api_json(api_subject(verb, cfg.name), cfg.to_api()))

    @staticmethod
    def _stream_config(
        name: str | StreamConfig, subjects: list[str] | None, config: dict[str, Any]
    ) -> StreamConfig:
        if subjects is not None:
            config["subjects"] = subjects
        if isinstance(name, StreamConfig):
            return _build(StreamConfig, name, config, "stream")
        check_known_options(StreamConfig, config, "stream")
        return StreamConfig(name=name, **config)

    def stream_info(self, name: str, *, resume_timeout: float | None = None) -> StreamInfo:
        """A stream's config and state.

        ``resume_timeout`` (seconds; default: ask once): ask again while the request
        fails as it does while a server restarts or the stream elects its leader (no
        reply, a lost connection, ``503``), for up to that long, then raise the last
        error with its class; what a read does while it recovers."""
        validate_name(name, "stream")
        subject = api_subject(_core.API_STREAM_INFO, name)
        return StreamInfo.from_api(self._api_json(subject, None, resume_timeout))

    def delete_stream(self, name: str) -> bool:
        """Delete a stream and its messages; whether the server reports success."""
        validate_name(name, "stream")
        return bool(self._api_json(api_subject(_core.API_STREAM_DELETE, name)).get("success"))

    def list_streams(
        self, subject: str | None = None, *, resume_timeout: float | None = None
    ) -> list[StreamInfo]:
        """Every stream (that stores ``subject``, when given), with config and state.
        Each request of the listing is asked again as :meth:`stream_info` says for
        ``resume_timeout``. Streams deleted while the listing pages hide no other.

        In a cluster the listing leaves out (as ``missing``) the streams whose leaders
        did not answer in time; each of those is asked for on its own, so a slow
        leader does not make its stream look deleted. One deleted meanwhile is left
        out; one that still does not answer raises."""
        body = {"subject": subject} if subject else None
        missing: list[str] = []
        listed: list[StreamInfo] = []
        seen: set[str] = set()
        paged = self._paged(
            _core.API_STREAM_LIST, "streams", body, missing, resume_timeout, stream_name
        )
        for s in paged:
            info = StreamInfo.from_api(s)
            if info.config.name not in seen:  # a stream created between pages
                seen.add(info.config.name)
                listed.append(info)
        for name in dict.fromkeys(missing):
            if name in seen:
                continue
            try:
                listed.append(self.stream_info(name, resume_timeout=resume_timeout))
            except NotFoundError:
                continue
        return listed

    def stream_names(
        self, subject: str | None = None, *, resume_timeout: float | None = None
    ) -> list[str]:
        """The names of every stream (that stores ``subject``, when given); each
        request asked again as :meth:`stream_info` says for ``resume_timeout``.
        Streams deleted while the listing pages hide no other."""
        body = {"subject": subject} if subject else None
        names = self._paged(_core.API_STREAM_NAMES, "streams", body, None, resume_timeout)
        return [str(s) for s in names]

    def purge_stream(
        self,
        name: str,
        subject: str | None = None,
        up_to_seq: int | None = None,
        keep: int | None = None,
    ) -> int:
        """Remove messages; returns how many. ``subject`` limits it to matching
        messages, ``up_to_seq`` purges below that sequence (exclusive), ``keep``
        keeps the newest N. ``up_to_seq`` and ``keep`` exclude each other."""
        validate_name(name, "stream")
        if up_to_seq is not None and keep is not None:
            raise BadInputError("options 'up_to_seq' and 'keep' exclude each other")
        body: dict[str, Any] = {}
        if subject is not None:
            body["filter"] = subject
        if up_to_seq is not None:
            body["seq"] = int(up_to_seq)
        if keep is not None:
            body["keep"] = int(keep)
        reply = self._api_json(api_subject(_core.API_STREAM_PURGE, name), body or None)
        return PurgeResult.from_api(reply).purged

    def get_message(
        self, stream: str, seq: int | None = None, last_by_subject: str | None = None
    ) -> StoredMessage:
        """One stored message, by sequence or as the last one on a subject."""
        validate_name(stream, "stream")
        if (seq is None) == (last_by_subject is None):
            raise BadInputError("give exactly one of 'seq' and 'last_by_subject'")
        body = {"seq": int(seq)} if seq is not None else {"last_by_subj": last_by_subject}
        reply = self._api_json(api_subject(_core.API_STREAM_MSG_GET, stream), body)
        return StoredMessage.from_api(reply["message"])

    def delete_message(self, stream: str, seq: int, erase: bool = False) -> bool:
        """Delete one message. ``erase=True`` also overwrites its bytes on disk."""
        validate_name(stream, "stream")
        body: dict[str, Any] = {"seq": int(seq)}
        if not erase:
            body["no_erase"] = True
        return bool(
            self._api_json(api_subject(_core.API_STREAM_MSG_DELETE, stream), body).get("success")
        )

    # -- consumers --------------------------------------------------------------------
    def create_consumer(
        self, stream: str, config: ConsumerConfig | None = None, **options: Any
    ) -> ConsumerInfo:
        """Create a consumer: durable with ``durable_name``/``name``, else ephemeral;
        push when ``deliver_subject`` is set, else pull. A single filter may be given
        as ``filter_subject="orders.new"``. Creating a consumer that exists with the
        same config succeeds; with another config it raises ApiError."""
        return self._write_consumer(stream, config, options, "create")

    def update_consumer(
        self, stream: str, config: ConsumerConfig | None = None, **options: Any
    ) -> ConsumerInfo:
        """Change an existing named consumer (not every field may change)."""
        return self._write_consumer(stream, config, options, "update")

    def create_or_update_consumer(
        self, stream: str, config: ConsumerConfig | None = None, **options: Any
    ) -> ConsumerInfo:
        """Create the consumer, or change it if it exists."""
        return self._write_consumer(stream, config, options, None)

    def _write_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None,
        options: dict[str, Any],
        action: str | None,
    ) -> ConsumerInfo:
        validate_name(stream, "stream")
        if "filter_subject" in options:
            single = options.pop("filter_subject")
            if options.get("filter_subjects"):
                raise BadInputError("give 'filter_subject' or 'filter_subjects', not both")
            options["filter_subjects"] = None if single is None else [single]
        cfg = _build(ConsumerConfig, config, options, "consumer")
        name = cfg.consumer_name
        if name is None:
            if action == "update":
                raise BadInputError("update_consumer needs the consumer's 'durable_name' or 'name'")
            tokens = [stream]
        else:
            tokens = [stream, name]
            filters = cfg.filter_subjects or []
            # The filter in the subject lets permissions restrict what a user may
            # consume; a wildcard cannot travel as a literal subject token.
            if len(filters) == 1 and not re.search(r"[*>]", filters[0]):
                tokens.append(filters[0])
        body: dict[str, Any] = {"stream_name": stream, "config": cfg.to_api()}
        if action:
            body["action"] = action
        return ConsumerInfo.from_api(
            self._api_json(api_subject(_core.API_CONSUMER_CREATE, *tokens), body)
        )

    def consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        """A consumer's config and delivery state."""
        validate_name(stream, "stream")
        validate_name(name, "consumer")
        return ConsumerInfo.from_api(
            self._api_json(api_subject(_core.API_CONSUMER_INFO, stream, name))
        )

    def reset_consumer(self, stream: str, name: str, seq: int | None = None) -> int:
        """Move a consumer's delivery back to its ack floor (or to stream sequence
        ``seq``): everything not yet acknowledged is delivered again at once, from
        consumer sequence 1 (server 2.14+). Returns the next stream sequence it delivers."""
        validate_name(stream, "stream")
        validate_name(name, "consumer")
        body = {} if seq is None else {"seq": int(seq)}
        reply = self._api_json(api_subject(_core.API_CONSUMER_RESET, stream, name), body)
        return int(reply.get("reset_seq", 0))

    def pause_consumer(
        self, stream: str, name: str, until: datetime | timedelta | str | float
    ) -> ConsumerPause:
        """Stop a consumer delivering until ``until`` (a datetime with a zone, ISO
        text, epoch seconds, or a ``timedelta`` from now), server 2.11+. Its pull
        requests wait meanwhile: the server holds them, answers none with a status, and
        ends each at its expiry as usual (so a ``PullConsumer`` raises nothing and
        delivers again once the pause ends, as nats.go's and async-nats's do). Messages
        delivered before the pause can still be acknowledged. A pull held through a
        ``resume_consumer`` is not served but ended at its expiry (nats-server 2.15.1);
        the next one is."""
        validate_name(stream, "stream")
        validate_name(name, "consumer")
        when = (
            datetime.now(timezone.utc) + until
            if isinstance(until, timedelta)
            else to_datetime(until, "until")
        )
        body = {"pause_until": to_rfc3339(when, "until")}
        return ConsumerPause.from_api(
            self._api_json(api_subject(_core.API_CONSUMER_PAUSE, stream, name), body)
        )

    def resume_consumer(self, stream: str, name: str) -> ConsumerPause:
        """Let a paused consumer deliver again now (a pause with no end time)."""
        validate_name(stream, "stream")
        validate_name(name, "consumer")
        return ConsumerPause.from_api(
            self._api_json(api_subject(_core.API_CONSUMER_PAUSE, stream, name), {})
        )

    def unpin_consumer(self, stream: str, name: str, group: str) -> None:
        """Take the pin of priority group ``group`` (policy ``pinned_client``) from
        the client holding it; the server pins the next client that pulls (server
        2.11+). The unpinned client's next pull is turned away (``423``) and it pulls
        again as a candidate, without its pin."""
        validate_name(stream, "stream")
        validate_name(name, "consumer")
        self._api_json(api_subject(_core.API_CONSUMER_UNPIN, stream, name), {"group": group})

    def delete_consumer(self, stream: str, name: str) -> bool:
        """Delete a consumer; whether the server reports success."""
        validate_name(stream, "stream")
        validate_name(name, "consumer")
        return bool(
            self._api_json(api_subject(_core.API_CONSUMER_DELETE, stream, name)).get("success")
        )

    def list_consumers(self, stream: str) -> list[ConsumerInfo]:
        """Every consumer of ``stream``, with config and delivery state."""
        validate_name(stream, "stream")
        return [
            ConsumerInfo.from_api(c)
            for c in self._paged(
                api_subject(_core.API_CONSUMER_LIST, stream), "consumers", name_of=consumer_name
            )
        ]

    def consumer_names(self, stream: str) -> list[str]:
        """The names of every consumer of ``stream``."""
        validate_name(stream, "stream")
        return [
            str(c) for c in self._paged(api_subject(_core.API_CONSUMER_NAMES, stream), "consumers")
        ]
