"""Exceptions raised by jetstream_arrow.

One base class, [`JetStreamArrowError`][], and one subclass per cause. Built-in
exceptions are extra bases where they fit, so ``except TimeoutError`` and
``except ValueError`` catch what a Python user expects them to catch.

The native core raises these same classes (it imports this module), so there is
one hierarchy whether an error starts in Rust or in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class JetStreamArrowError(Exception):
    """Base class of every error this package raises on purpose.

    ``result``: when the error stopped a publish (a lost connection, bad input, a
    timeout), what that publish had done by then, row by row (a ``PublishResult``:
    stored, duplicate, or failed with its reason); None for every other error.

    ``transient``: whether the native core counts the error as one a retry may cure
    (no reply in time, a lost connection, a ``503`` while a stream's leader is being
    elected or a server restarts); False for errors raised in Python."""

    result: Any = None
    transient: bool = False


class ConnectionFailedError(JetStreamArrowError, ConnectionError):
    """The NATS server could not be reached, or the connection was lost."""


class AuthorizationError(JetStreamArrowError, PermissionError):
    """The server refused the credentials, or a subject is not permitted."""


class OperationTimeoutError(JetStreamArrowError, TimeoutError):
    """A wait ran out of time. The message says what was waited for."""


class MissedHeartbeatsError(OperationTimeoutError):
    """A pull request saw neither messages nor idle heartbeats for two heartbeat periods."""


class ApiError(JetStreamArrowError):
    """The JetStream API answered with an error.

    ``code`` is the HTTP-like status (404, 400, 503, ...), ``err_code`` the
    JetStream error code (e.g. 10059 stream not found), ``description`` the
    server's text.
    """

    def __init__(
        self, message: str, code: int = 0, err_code: int = 0, description: str = ""
    ) -> None:
        super().__init__(message)
        self.code = code
        self.err_code = err_code
        self.description = description


class NotFoundError(ApiError, LookupError):
    """A stream, consumer or message does not exist."""


class JetStreamNotEnabledError(ApiError):
    """Nobody answers the JetStream API at this prefix or domain."""


class ConsumerDeletedError(ApiError):
    """The consumer was deleted while it was being read."""


class BadInputError(JetStreamArrowError, ValueError):
    """Input that cannot be sent as asked: a missing or mistyped column, a bad subject,
    a payload over the server's limit, an invalid option. The message names the
    option, column and row. ``result`` holds what an interrupted publish had already
    stored (or None when nothing was sent).

    ``options``: the options at fault, by their Python names, in the order the
    message names them (two that exclude each other, one that needs another); empty
    when the error is of no option. ``column``: the input column at fault, by the
    name the message gives it; None when the error is of no column. A caller that
    calls them otherwise (Spark's option names, the command line's flags) tells them
    by these attributes, never by the message's words."""

    options: tuple[str, ...] = ()
    column: str | None = None

    def __init__(
        self,
        message: str,
        result: Any = None,
        *,
        options: Sequence[str] = (),
        column: str | None = None,
    ) -> None:
        super().__init__(message)
        self.result = result
        self.options = tuple(options)
        self.column = column


class MalformedPayloadError(BadInputError):
    """A payload that does not decode with the value's format and schema (mode
    ``failfast``). The message names the stream, the sequence and the field; the
    message stays where it was (a consumer's is not acknowledged)."""


class NewFieldError(MalformedPayloadError):
    """A JSON payload holds a field the value's schema lacks (or a value where the
    schema, inferred from payloads that were all null there, has only nulls), read
    with ``ValueCodec(on_new_field="fail")``. ``seq`` is the message's stream
    sequence and ``field`` the field's path (``a.b``, ``items[].c``). The batch that
    holds it is not handed out (a consumer's is not acknowledged): read again from
    ``seq`` with a schema that has the field (a schema inferred from there has it)."""

    seq: int | None = None
    field: str | None = None


class NothingToInferError(BadInputError):
    """A read given no value schema (a JSON or Arrow codec alone) found no payload
    among the messages it sampled that holds a value to infer the schema from: give
    the codec a schema, or read from where such payloads are."""


class PublishError(JetStreamArrowError):
    """Some rows of a publish were not stored. ``result`` says row by row which were
    stored, which were duplicates and why the others failed."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class SparkSetupError(JetStreamArrowError, RuntimeError):
    """Spark cannot run this package here: Java is missing or too old, or Spark's
    Python workers cannot import ``jetstream_arrow``. The message says what to set."""


__all__ = [
    "ApiError",
    "AuthorizationError",
    "BadInputError",
    "MalformedPayloadError",
    "ConnectionFailedError",
    "ConsumerDeletedError",
    "JetStreamArrowError",
    "JetStreamNotEnabledError",
    "MissedHeartbeatsError",
    "NewFieldError",
    "NothingToInferError",
    "NotFoundError",
    "OperationTimeoutError",
    "PublishError",
    "SparkSetupError",
]
