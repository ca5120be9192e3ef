"""Connection options: a plain, picklable value.

Spark ships these to executors, so they hold only configuration (strings, numbers,
file paths), never a live connection. Secrets are kept out of ``repr``, and so is
the user info of server URLs (``nats://user:password@host``, ``nats://token@host``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal, TypeVar, cast

from . import _core
from ._time import to_epoch_ns
from .exceptions import BadInputError

# The texts of credentials and TLS material are hidden too: a key is a secret, and a
# certificate's text only clutters a repr.
_SECRET_FIELDS = frozenset(
    {
        "password",
        "token",
        "nkey_seed",
        "creds_content",
        "tls_ca_content",
        "tls_cert_content",
        "tls_key_content",
    }
)

OnFull = Literal["wait", "fail"]
PublishMode = Literal["acked", "fast", "atomic"]
ReadMethod = Literal["auto", "consumer", "direct"]
Compression = Literal["zstd", "gzip", "zlib", "s2"]


def check_known_options(cls: type[Any], options: Mapping[str, Any], what: str) -> None:
    """Refuse keyword options that are not fields of the dataclass ``cls``, naming
    them and the known ones: a misspelt option must never be silently ignored."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise BadInputError(
            f"unknown {what} option(s) {', '.join(map(repr, unknown))}; "
            f"known options: {', '.join(sorted(known))}"
        )


@dataclass(frozen=True)
class ConnectOptions:
    """How to reach NATS and its JetStream API.

    ``servers`` is one URL or a comma-separated list. ``domain`` and ``api_prefix``
    are mutually exclusive: a domain ``hub`` means the API prefix ``$JS.hub.API``.
    Durations are seconds (floats). Credentials and TLS material are files
    (``creds``, ``tls_ca``, ``tls_cert``, ``tls_key``) or their text
    (``creds_content``, ``tls_ca_content``, ``tls_cert_content``,
    ``tls_key_content``: the ``.creds`` file's text, PEM), for processes where no file
    is laid out, such as Spark executors; each text is kept out of reprs, logs and
    errors. ``max_decompressed_bytes``: every read of the connection decompresses a
    compressed payload (``Content-Encoding``, see [`PublishOptions`][]) into at most
    this many bytes; one that would expand further (a zip bomb) fails the read with
    an error naming its stream sequence (default 64 MiB, the largest ``max_payload``
    a server accepts). ``decompress``: reads decompress such payloads (default);
    False hands every payload out as stored, its ``Content-Encoding`` header kept, for a
    stream whose payloads are compressed by a tool this package should not second-guess,
    or to copy compressed messages as they are.
    """

    servers: str = _core.DEFAULT_SERVERS
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    creds: str | None = None
    creds_content: str | None = field(default=None, repr=False)
    nkey_seed: str | None = field(default=None, repr=False)
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca_content: str | None = field(default=None, repr=False)
    tls_cert_content: str | None = field(default=None, repr=False)
    tls_key_content: str | None = field(default=None, repr=False)
    tls_required: bool = False
    tls_first: bool = False
    name: str | None = _core.DEFAULT_CLIENT_NAME
    connect_timeout: float = _core.DEFAULT_CONNECT_TIMEOUT
    request_timeout: float = _core.DEFAULT_REQUEST_TIMEOUT
    max_reconnects: int | None = _core.DEFAULT_MAX_RECONNECTS
    reconnect_delay: float = _core.DEFAULT_RECONNECT_DELAY
    retry_on_initial_connect: bool = False
    ping_interval: float = _core.DEFAULT_PING_INTERVAL
    domain: str | None = None
    api_prefix: str | None = None
    inbox_prefix: str | None = None
    max_decompressed_bytes: int = _core.DEFAULT_MAX_DECOMPRESSED_BYTES
    decompress: bool = True

    def __post_init__(self) -> None:
        # The native core decides what it takes: the options that exclude each other
        # or go together, ranges and types, refused here as connecting would.
        _core.check_connect_options(self)

    def __repr__(self) -> str:
        # The dataclass repr without the secret fields (repr=False) and with the user
        # info of the server URLs hidden: a URL may carry a password or a token.
        shown = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.repr}
        shown["servers"] = _core.redact_servers(self.servers)
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    @property
    def js_api_prefix(self) -> str:
        """The subject prefix of the JetStream API these options talk to."""
        return _core.js_api_prefix(self.domain, self.api_prefix)

    def to_dict(self) -> dict[str, Any]:
        """Every option as a plain dict."""
        return dataclasses.asdict(self)

    def cache_key(self) -> tuple[Any, ...]:
        """A hashable key: equal options share one connection in a worker process."""
        return dataclasses.astuple(self)

    @classmethod
    def from_kwargs(
        cls, servers: str | Sequence[str] | None = None, **options: Any
    ) -> ConnectOptions:
        """Build options from ``connect()``'s keyword arguments, naming unknown ones."""
        check_known_options(cls, options, "connect")
        if servers is not None and not isinstance(servers, str):
            servers = ",".join(servers)
        if servers is not None:
            options["servers"] = servers
        return cls(**options)

    def redacted(self) -> dict[str, Any]:
        """The options with secrets replaced, for logs and error messages."""
        out = self.to_dict()
        out["servers"] = _core.redact_servers(self.servers)
        for name in _SECRET_FIELDS:
            if out.get(name) is not None:
                out[name] = "***"
        return out


_Options = TypeVar("_Options", bound="NativeOptions")


class NativeOptions:
    """An options dataclass the native core reads whole, by attribute: a field left
    None takes the core's default, and the core checks every value it is given."""

    #: The options' kind, as error messages name it ("unknown publish option ...").
    what: ClassVar[str]

    @classmethod
    def from_kwargs(cls: type[_Options], given: _Options | None = None, **options: Any) -> _Options:
        """``given`` (or the defaults) with ``options`` set, naming unknown ones."""
        check_known_options(cls, options, cls.what)
        return cast(_Options, dataclasses.replace(cast(Any, given or cls()), **options))


@dataclass(frozen=True)
class PublishOptions(NativeOptions):
    """How a publisher sends. A field left None takes the native core's default
    (``_core.DEFAULT_*``); the core checks every value and names the option at fault.

    ``subject``: every row goes to this subject (else each row's ``subject`` column).
    ``window``: publishes in flight before waiting for acks (``on_full="wait"``)
    or refusing further rows (``"fail"``). ``429``, ``503`` and ack timeouts are
    retried ``max_retries`` times with doubling backoff from ``retry_backoff``;
    a row without a msg id is retried after an ack timeout only when
    ``msg_id_prefix`` gives it one (otherwise a retry could store it twice).
    ``msg_id_prefix``: rows without a ``msg_id`` get ``<prefix><n>``, ``n``
    counting input rows from ``msg_id_start`` across a publisher's calls,
    so re-running the same input is deduplicated by the server.
    ``expected_*``: optimistic-concurrency checks on the first row of each call
    (``expected_stream`` on every row); the rest is sent only once it passed.
    ``mode``: ``"acked"`` (an ack per message) or ``"fast"`` (fast-ingest
    batches into a stream with ``allow_batched``, nats-server 2.14+: the server
    acks every N messages; a batch that fails part-way reports the rows after
    its last ack, which a re-run with msg ids stores once; ``acks.seq`` is null)
    or ``"atomic"`` (batches of ``batch_rows`` rows into a stream with
    ``allow_atomic``, nats-server 2.12+: each batch stored whole or not at all; a
    batch refused is reported for every row of it; one the server abandoned, or
    whose commit went unanswered and whose rows all have msg ids, is sent again).
    ``batch_rows``: rows per atomic batch (at most the server's limit, 1,000
    unless configured lower).
    ``keep_control_headers``: whether a ``headers`` column's headers that steer
    how the server stores a message (``Nats-TTL``, ``Nats-Rollup``,
    ``Nats-Expected-*``, ``Nats-Batch-*``, ``Nats-Schedule*``, counters) and those
    the server adds to what it delivers (``Nats-Stream``, ``Nats-Sequence``, ...)
    are published. ``None`` (default): as given, except when the input is a read
    of a stream (it has the read's ``stream`` and ``seq`` columns): a copy, whose
    control headers are dropped so they steer nothing in the stream it goes to.
    A ``Nats-Msg-Id`` header is always kept and is the row's msg id.
    ``compression``: ``"zstd"``, ``"gzip"``, ``"zlib"`` or ``"s2"``: each payload
    (after the codec encoded it) is compressed and marked ``Content-Encoding: <name>``,
    unless it is empty or would not shrink; every read decompresses by that header,
    message by message. A read leaves ``Content-Encoding`` out of the ``headers`` of
    the payloads it decompressed, so a copy (read, then published) stores them plain,
    or compressed again by its own ``compression``; a payload read as stored
    (``decompress=False``) keeps its header and is copied as it is.
    ``max_bytes_in_flight``: payload bytes sent and not yet acknowledged at most,
    whatever ``window`` says (default 32 MiB): a publisher holds every payload in
    flight until its ack, so this bounds its memory with large messages; lower it
    where many publishers share a process, raise it for a distant server.
    """

    what: ClassVar[str] = "publish"
    subject: str | None = None
    window: int | None = None
    on_full: OnFull | None = None
    ack_timeout: float | None = None
    max_retries: int | None = None
    retry_backoff: float | None = None
    msg_id_prefix: str | None = None
    msg_id_start: int | None = None
    expected_stream: str | None = None
    expected_last_seq: int | None = None
    expected_last_msg_id: str | None = None
    expected_last_subject_seq: int | None = None
    mode: PublishMode | None = None
    batch_rows: int | None = None
    keep_control_headers: bool | None = None
    compression: Compression | None = None
    max_bytes_in_flight: int | None = None


@dataclass(frozen=True)
class ReadOptions(NativeOptions):
    """What a range read returns and how. A field left None takes the native core's
    default (``_core.DEFAULT_*``); the core checks every value and names the option.

    Reads from ``start_seq`` (or ``start_time``; default: the first message) up to
    ``end_seq`` inclusive (default: the last sequence when the read starts) and
    ``end_time``, only ``subjects`` (one filter or several) if given. Times are a
    datetime with a zone, ISO text or epoch seconds. Memory is bounded by
    ``batch_rows`` and ``max_bytes`` per pull. ``payload_views``: ``data`` as
    ``binary_view`` whose payloads of 2 KiB and more are the buffers the messages
    arrived in, not copies (shorter ones are copied, which costs less; a batch keeps
    those buffers until it is dropped; default ``binary``, all copied).
    ``heartbeat``: the consumer's idle
    heartbeat; ``resume_timeout``: how long the read keeps trying to recreate its
    consumer after losing it. ``method``: ``"auto"``, ``"consumer"`` or ``"direct"``
    (see [`Client.read`][jetstream_arrow.Client.read]). ``last_per_subject``: instead of a
    range, the latest message of each subject (of ``subjects``), as of ``as_of_seq``
    or ``as_of_time`` if given (default: the stream's last sequence when the read
    opens), read with batched direct gets (the stream needs ``allow_direct``).
    ``include_positions``: the messages exactly-once writers keep their positions in
    (subjects under ``$JA.POS.``) as rows too; by default every read leaves them out.
    """

    what: ClassVar[str] = "read"
    start_seq: int | None = None
    end_seq: int | None = None
    subjects: Sequence[str] | str | None = None
    start_time: datetime | str | float | None = None
    end_time: datetime | str | float | None = None
    include_headers: bool | None = None
    payload_views: bool | None = None
    include_ttl: bool | None = None
    include_positions: bool | None = None
    batch_rows: int | None = None
    max_bytes: int | None = None
    heartbeat: float | None = None
    resume_timeout: float | None = None
    method: ReadMethod | None = None
    last_per_subject: bool | None = None
    as_of_seq: int | None = None
    as_of_time: datetime | str | float | None = None

    # The fields given in Python's forms, normalised as the core reads them.
    @property
    def subject_filters(self) -> list[str]:
        """``subjects`` as a list (empty: every subject)."""
        if self.subjects is None:
            return []
        return [self.subjects] if isinstance(self.subjects, str) else list(self.subjects)

    @property
    def start_time_ns(self) -> int | None:
        return to_epoch_ns(self.start_time, "start_time")

    @property
    def end_time_ns(self) -> int | None:
        return to_epoch_ns(self.end_time, "end_time")

    @property
    def as_of_time_ns(self) -> int | None:
        return to_epoch_ns(self.as_of_time, "as_of_time")


@dataclass(frozen=True)
class ConsumeOptions(NativeOptions):
    """Continuous consumption of a durable pull consumer (nats.go's ``Messages()``
    options). A field left None takes the native core's default; the core checks
    every value and names the option.

    Up to ``max_messages`` (or ``max_bytes``) are kept buffered; a new pull is sent
    when the buffer falls to ``threshold_messages`` / ``threshold_bytes`` (default
    half). Each pull request lasts ``expires`` seconds with an idle ``heartbeat``.
    Batches hold up to ``batch_rows`` messages: after the first, what arrives within
    ``batch_wait`` seconds. ``include_headers`` adds the headers column.
    """

    what: ClassVar[str] = "consume"
    max_messages: int | None = None
    max_bytes: int | None = None
    threshold_messages: int | None = None
    threshold_bytes: int | None = None
    expires: float | None = None
    heartbeat: float | None = None
    batch_rows: int | None = None
    batch_wait: float | None = None
    include_headers: bool | None = None


@dataclass(frozen=True)
class FollowOptions(NativeOptions):
    """An open-ended ordered read (``Client.ordered_consumer``): what it delivers and
    how it batches. A field left None takes the native core's default; the core checks
    every value and names the option.

    Every message of ``subjects`` (all when None) from ``start_seq``, ``start_time``,
    the first, or (``deliver_new``) the next one stored, then each new one. Batches
    hold up to ``batch_rows`` rows and ``max_bytes`` payload bytes: after the first
    message, what arrives within ``batch_wait`` seconds. ``heartbeat``: the consumer's
    idle heartbeat; ``resume_timeout``: how long it keeps recreating its consumer after
    losing it.
    """

    what: ClassVar[str] = "follow"
    subjects: Sequence[str] | str | None = None
    start_seq: int | None = None
    start_time: datetime | str | float | None = None
    deliver_new: bool | None = None
    include_headers: bool | None = None
    include_ttl: bool | None = None
    include_positions: bool | None = None
    batch_rows: int | None = None
    batch_wait: float | None = None
    max_bytes: int | None = None
    heartbeat: float | None = None
    resume_timeout: float | None = None


@dataclass(frozen=True)
class PushOptions(NativeOptions):
    """Consumption of a durable push consumer (``PushConsumer.messages``). A field left
    None takes the native core's default; the core checks every value.

    Batches hold up to ``batch_rows`` messages: after the first, what arrives within
    ``batch_wait`` seconds. ``heartbeat``: the consumer's idle heartbeat, when it was
    bound without an info lookup. ``include_headers`` adds the headers column.
    """

    what: ClassVar[str] = "push"
    batch_rows: int | None = None
    batch_wait: float | None = None
    include_headers: bool | None = None
    heartbeat: float | None = None


@dataclass(frozen=True)
class FetchOptions(NativeOptions):
    """One pull request of a durable pull consumer (``PullConsumer.fetch``). A field
    left None takes the native core's default; the core checks every value.

    Up to ``max_messages`` (or ``max_bytes``) within ``expires`` seconds; with
    ``no_wait``, at once with what is there. ``heartbeat``: the request's idle
    heartbeat. ``include_headers`` adds the headers column.
    """

    what: ClassVar[str] = "fetch"
    max_messages: int | None = None
    max_bytes: int | None = None
    expires: float | None = None
    no_wait: bool | None = None
    heartbeat: float | None = None
    include_headers: bool | None = None
