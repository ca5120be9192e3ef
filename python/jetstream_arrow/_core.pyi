# Stubs of the native module jetstream_arrow._core (rust/python). Checked against the
# built module by `mypy.stubtest` in the test command, so they cannot drift.
#
# Arrow values cross the boundary through the Arrow PyCapsule interface: inputs are
# any object with __arrow_c_stream__ / __arrow_c_array__, outputs are small objects
# that implement them (turn them into pyarrow with pa.record_batch / pa.schema).
# Durations are seconds (float), timestamps nanoseconds since the epoch (int).
#
# Every method that waits returns a `Call`, declared once for both facades: the sync
# one calls `.wait()`, the asyncio one awaits it (an asyncio future of the running
# loop, completed by a task of the native runtime). Cancelling the awaiting task
# drops the call's work, except for a publish given a StopSignal.

from collections.abc import Generator
from typing import Any, Generic, Literal, Protocol, TypeVar, final

_T = TypeVar("_T", covariant=True)

__version__: str

# Every default of the package; their one home is rust/core/src/defaults.rs.
DEFAULT_SERVERS: str
DEFAULT_CLIENT_NAME: str
DEFAULT_CONNECT_TIMEOUT: float
DEFAULT_REQUEST_TIMEOUT: float
DEFAULT_MAX_RECONNECTS: int
DEFAULT_RECONNECT_DELAY: float
DEFAULT_PING_INTERVAL: float
DEFAULT_MAX_DECOMPRESSED_BYTES: int
DEFAULT_WINDOW: int
DEFAULT_PUBLISH_MODE: Literal["acked", "fast", "atomic"]
DEFAULT_ATOMIC_BATCH_ROWS: int
DEFAULT_ACK_TIMEOUT: float
DEFAULT_MAX_RETRIES: int
# The longest duration any option takes, in seconds.
MAX_SECONDS: float
DEFAULT_RETRY_BACKOFF: float
DEFAULT_MAX_BYTES_IN_FLIGHT: int
DEFAULT_ROWS_PER_RESULT: int
DEFAULT_POSITION_ROWS: int
DEFAULT_WRITER_LEASE: float
DEFAULT_ON_MALFORMED: str
DEFAULT_ON_NEW_FIELD: str
DEFAULT_VALUE_SAMPLE_ROWS: int
DEFAULT_AVRO_FRAMING: str
DEFAULT_READ_BATCH_ROWS: int
DEFAULT_READ_MAX_BYTES: int
DEFAULT_HEARTBEAT: float
DEFAULT_RESUME_TIMEOUT: float
DEFAULT_READ_METHOD: Literal["auto", "consumer", "direct"]
DEFAULT_FOLLOW_BATCH_WAIT: float
#: Limits checked before the engine would: the publisher's largest window, retry
#: count, and the longest range method "auto" reads by direct gets.
MAX_WINDOW: int
POSITION_SUBJECT_PREFIX: str
# Typed payloads: the decoded value's column, the raw bytes of bad payloads
# ("permissive"), the columns never a value's, and the names each setting takes.
VALUE_COLUMN: str
CORRUPT_RECORD_COLUMN: str
CORRUPT_REASON_COLUMN: str
MESSAGE_COLUMNS: list[str]
TTL_COLUMN: str
VALUE_FORMATS: list[str]
ON_MALFORMED_MODES: list[str]
AVRO_FRAMINGS: list[str]
MAX_RETRIES: int
DIRECT_READ_MAX_MESSAGES: int
DEFAULT_FETCH_MAX_MESSAGES: int
DEFAULT_FETCH_EXPIRES: float
DEFAULT_CONSUME_MAX_MESSAGES: int
DEFAULT_CONSUME_EXPIRES: float
DEFAULT_CONSUME_BATCH_ROWS: int
DEFAULT_CONSUME_BATCH_WAIT: float
DEFAULT_ACK_SYNC_TIMEOUT: float
DEFAULT_SILENCE_PROBE: float
DEFAULT_SPARK_BATCH_ROWS: int
DEFAULT_SPARK_MAX_MESSAGES_PER_PARTITION: int
DEFAULT_SPARK_MAX_TRIGGER_DELAY: float
DEFAULT_SPARK_CONSUMER_PIN_TIMEOUT: float

# JetStream error codes the package reacts to (rust/core/src/error.rs).
API_STREAM_CREATE: str
API_STREAM_UPDATE: str
API_STREAM_INFO: str
API_STREAM_DELETE: str
API_STREAM_PURGE: str
API_STREAM_LIST: str
API_STREAM_NAMES: str
API_STREAM_MSG_GET: str
API_STREAM_MSG_DELETE: str
API_DIRECT_GET: str
API_CONSUMER_CREATE: str
API_CONSUMER_INFO: str
API_CONSUMER_DELETE: str
API_CONSUMER_RESET: str
API_CONSUMER_LIST: str
API_CONSUMER_NAMES: str
API_CONSUMER_PAUSE: str
API_CONSUMER_UNPIN: str
API_CONSUMER_MSG_NEXT: str
ERR_CONSUMER_NOT_FOUND: int
ERR_STREAM_NOT_MATCH: int
ERR_MESSAGE_TTL_INVALID: int
ERR_MESSAGE_TTL_DISABLED: int
ERR_MESSAGE_INCR_DISABLED: int
ERR_MESSAGE_INCR_MISSING: int
ERR_MESSAGE_INCR_PAYLOAD: int
ERR_MESSAGE_INCR_INVALID: int
ERR_MESSAGE_COUNTER_BROKEN: int
ERR_MESSAGE_SCHEDULES_DISABLED: int
ERR_MESSAGE_SCHEDULES_PATTERN_INVALID: int
ERR_MESSAGE_SCHEDULES_TARGET_INVALID: int
ERR_CONSUMER_INVALID_RESET: int
ERR_NO_MESSAGE_FOUND: int
ERR_STREAM_NAME_IN_USE: int
ERR_STREAM_NOT_FOUND: int
ERR_TOO_MANY_REQUESTS: int
ERR_BATCH_PUBLISH_DISABLED: int
ERR_BATCH_PUBLISH_INVALID_PATTERN: int
ERR_BATCH_PUBLISH_INVALID_ID: int
ERR_BATCH_PUBLISH_UNKNOWN_ID: int
ERR_ATOMIC_PUBLISH_DISABLED: int
ERR_ATOMIC_PUBLISH_INCOMPLETE: int
ERR_ATOMIC_PUBLISH_UNSUPPORTED_HEADER: int
ERR_ATOMIC_PUBLISH_INVALID_ID: int
ERR_ATOMIC_PUBLISH_TOO_LARGE: int
ERR_ATOMIC_PUBLISH_DUPLICATE_MSG_ID: int
ERR_ATOMIC_PUBLISH_TOO_MANY_INFLIGHT: int
ERR_WRONG_LAST_MSG_ID: int
ERR_WRONG_LAST_SEQUENCE: int

# Every native option, declared once in the core (rust/core/src/options/): per options
# dataclass ("connect", "publish", "read", "consume", "follow", "push", "fetch") and per
# value format ("codec" for what every format shares, then "json", "avro", "arrow",
# "protobuf"), one dict per option, in declaration order, with exactly the keys
# name (str), kind ("count", "seconds", "bool", "text", "choice", "texts", "path",
# "time", "bytes" or "number"), default (the Python value; None when there is none or
# it depends on other options), minimum and maximum (int, float or None), choices
# (tuple of str, empty unless a choice) and doc (one line). The dataclasses read by the
# core have exactly these fields; each is read by its kind and checked by the core.
OPTION_TABLES: dict[str, tuple[dict[str, Any], ...]]

def validate_name(value: object, option: str = "name") -> str:
    """Return a valid stream or consumer name, or raise BadInputError naming `option`."""

def js_api_prefix(domain: str | None = None, api_prefix: str | None = None) -> str:
    """`api_prefix`, or `$JS.<domain>.API`, or `$JS.API`."""

def check_connect_options(options: Any) -> None:
    """Checks a `ConnectOptions` as connecting would, without connecting: options that
    exclude each other or go together, ranges and types, each named."""

def redact_servers(servers: str) -> str:
    """`servers` with each URL's user info (a password or a token) shown as `***`."""

def value_schema(codec: Any) -> Any:
    """The Arrow schema (an Arrow PyCapsule schema) a jetstream_arrow.ValueCodec
    decodes values into: given, or derived from its Avro schema."""

def infer_value_schema(codec: Any, payloads: list[bytes | None]) -> Any | None:
    """The Arrow schema (an Arrow PyCapsule schema) a jetstream_arrow.ValueCodec
    given no schema (JSON, Arrow) infers from `payloads`, as a read infers it from
    the payloads it samples; None when no payload holds a value to infer from."""

def check_publish_input(
    batch: Any, subject: str | None = None, names: dict[str, str] | None = None
) -> None:
    """Checks publish input as a publish would, on `batch`'s columns (an empty batch
    will do): the columns that steer a message, their types, and the constant
    `subject`; raises BadInputError naming the column or option. `names` maps a
    publish column to the caller's name for it: an error names that column so."""

def no_value_reasons(
    codec: Any, stream: str, seqs: list[int], payloads: list[bytes | None]
) -> list[str | None]:
    """For each payload sampled (`seqs` of `stream`), why it holds no value a schema
    could be inferred from, in the words of a read's `_corrupt_reason`; None for one
    that holds a value."""

def encode_values(batch: Any, codec: Any) -> _ArrowBatch:
    """`batch` with its value columns encoded by a jetstream_arrow.ValueCodec into a
    `data` column, as a publish would send them."""

def api_subject(verb: str, *tokens: str) -> str:
    """A JetStream API subject after the prefix: `verb` (an `API_*`), then `tokens`."""

class _ArrowBatch(Protocol):
    """A record batch exported through the PyCapsule interface (pa.record_batch takes it)."""

    def __arrow_c_array__(
        self, requested_schema: object | None = None
    ) -> tuple[object, object]: ...
    def __arrow_c_schema__(self) -> object: ...

class _ArrowArray(Protocol):
    """An array exported through the PyCapsule interface (pa.array takes it)."""

    def __arrow_c_array__(
        self, requested_schema: object | None = None
    ) -> tuple[object, object]: ...

class _ArrowSchema(Protocol):
    """A schema exported through the PyCapsule interface (pa.schema takes it)."""

    def __arrow_c_schema__(self) -> object: ...

@final
class Call(Generic[_T]):
    """A native call that waits, started once by `wait()` or by awaiting it."""

    def wait(self) -> _T:
        """Run the call and return its value, the GIL released; Ctrl-C interrupts it."""
    def __await__(self) -> Generator[Any, None, _T]: ...

@final
class Client:
    @staticmethod
    def connect(options: Any) -> Call[Client]:
        """Connect with a jetstream_arrow.ConnectOptions; waits at most connect_timeout."""
    @property
    def api_prefix(self) -> str: ...
    def server_info(self) -> dict[str, Any]:
        """The INFO of the connected server: server_id, version, max_payload, headers, jetstream, ..."""
    def api_request(
        self,
        subject: str,
        body: bytes | None = None,
        timeout: float | None = None,
        resume_timeout: float | None = None,
    ) -> Call[bytes]:
        """Request `<api_prefix>.<subject>` and return the raw JSON reply. Raises ApiError
        (or NotFoundError, JetStreamNotEnabledError) when the reply is an error. With
        resume_timeout, asked again while it fails transiently (no reply, a lost
        connection, 503) for up to that many seconds."""
    def publisher(self, options: Any, codec: Any = None) -> Call[Publisher]:
        """A publisher sending as a jetstream_arrow.PublishOptions says (None: defaults)."""
    def read(self, stream: str, options: Any, codec: Any = None) -> Call[ReadBatches]:
        """Open a read as a jetstream_arrow.ReadOptions says (None: defaults); errors of
        the opening raise here, batches follow in sequence order."""
    def follow(self, stream: str, options: Any, codec: Any = None) -> Call[ReadBatches]:
        """An open-ended ordered consumer of `stream` as a jetstream_arrow.FollowOptions
        says: its batches never end."""
    def pull_consumer(
        self,
        stream: str,
        name: str,
        *,
        ack_policy: str | None = None,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> PullConsumer:
        """Bind to an existing durable pull consumer without any info lookup."""
    def push_consumer(
        self,
        stream: str,
        name: str,
        *,
        deliver_subject: str | None = None,
        deliver_group: str | None = None,
        ack_policy: str | None = None,
    ) -> Call[PushConsumer]:
        """Bind to a durable push consumer (info lookup unless deliver_subject is given)."""
    def first_seq_at(
        self,
        stream: str,
        time_ns: int,
        subjects: list[str] = ...,
        resume_timeout: float | None = None,
    ) -> Call[int | None]:
        """The sequence of the first message stored at or after time_ns on any of
        subjects (all when empty); None when there is none. Asked again while the
        server restarts, for up to resume_timeout seconds (default: a read's)."""
    def flush(self, timeout: float | None = None) -> Call[None]: ...
    def close(self) -> Call[None]:
        """Closed from now on; the call ends once the connection has flushed and closed."""
    def is_closed(self) -> bool: ...

@final
class PublishOutcome:
    stored: int
    duplicates: int
    failed: int
    rows: int
    resends: int
    late_replies: int
    def acks(self) -> _ArrowBatch:
        """seq int64 (null unless stored/duplicate), duplicate bool, error utf8 (null when ok), one row per input row."""
    def error_codes(self) -> _ArrowArray:
        """Each row's JetStream error code: uint32, null unless the server refused the row with one."""

@final
class Publisher:
    def publish(
        self, data: object, subject: str | None = None, stop: StopSignal | None = None
    ) -> Call[PublishOutcome]:
        """Publish every row of an Arrow batch, table or stream; ends when every row is
        acknowledged, failed or (on_full="fail") refused. Without `stop`, Ctrl-C stops
        it before the input's next batch; once `stop` is set (looked at every 1,024
        rows) it takes no more rows and resolves to the outcome of those it took."""
    def close(self) -> None: ...

@final
class StopSignal:
    """Asks an asyncio publish to stop taking rows."""

    def __init__(self) -> None: ...
    def set(self) -> None: ...
    def is_set(self) -> bool: ...

@final
class ConsumedBatch:
    def batch(self) -> _ArrowBatch: ...
    @property
    def malformed(self) -> int:
        """Payloads of this batch that did not decode (dropped, or kept as _corrupt_record)."""
    def __len__(self) -> int: ...
    def ack(self, rows: list[int] | None = None) -> Call[None]: ...
    def ack_sync(self, rows: list[int] | None = None, timeout: float = ...) -> Call[None]:
        """Double ack: each ack is confirmed by the server, retried until confirmed or timeout."""
    def nak(self, rows: list[int] | None = None, delay: float | None = None) -> Call[None]: ...
    def term(self, rows: list[int] | None = None, reason: str | None = None) -> Call[None]: ...
    def in_progress(self, rows: list[int] | None = None) -> Call[None]: ...

@final
class PullConsumer:
    @property
    def stream(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def pin_id(self) -> str | None: ...
    def fetch(self, options: Any, codec: Any = None) -> Call[ConsumedBatch]:
        """One pull request as a jetstream_arrow.FetchOptions says."""
    def messages(self, options: Any, codec: Any = None) -> Call[MessageStream]:
        """Continuous consumption as a jetstream_arrow.ConsumeOptions says (None: defaults)."""

@final
class MessageStream:
    @property
    def flow_control_answers(self) -> int:
        """Flow-control answers sent so far (push consumers; 0 for pull consumers)."""
    @property
    def consumer_resets(self) -> int:
        """Resets of a flow-control push consumer to its ack floor (0 for pull)."""
    def next_batch(self) -> Call[ConsumedBatch | None]:
        """The next batch; None once closed (an interrupted call closes it)."""
    def close(self) -> Call[None]: ...

@final
class ReadBatches:
    """The batches of a read or an ordered consumer, in sequence order; errors raise
    the package's classes."""

    def schema(self) -> _ArrowSchema: ...
    @property
    def resets(self) -> int:
        """How often the read recreated its consumer to get past a failure."""
    @property
    def malformed(self) -> int:
        """Payloads that did not decode so far (dropped, or kept as _corrupt_record)."""
    def next_batch(self) -> Call[_ArrowBatch | None]:
        """The next batch; None at the end (an interrupted call ends the read)."""
    def close(self) -> Call[None]:
        """Stop reading and delete the read's consumer."""

@final
class PushConsumer:
    @property
    def stream(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def deliver_subject(self) -> str: ...
    def messages(self, options: Any, codec: Any = None) -> Call[MessageStream]:
        """Continuous consumption as a jetstream_arrow.PushOptions says."""
