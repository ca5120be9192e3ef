"""Typed payloads: how each message's payload is read into columns and written from
them. The decoding and encoding run in the native core, batch by batch."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa

from . import _core
from .exceptions import BadInputError

_log = logging.getLogger("jetstream_arrow")

ValueFormat = Literal["json", "avro", "arrow", "protobuf"]
OnMalformed = Literal["failfast", "permissive", "dropmalformed"]
OnNewField = Literal["ignore", "fail"]
AvroFraming = Literal["raw", "single-object", "confluent"]


@dataclass(frozen=True)
class ValueCodec:
    """A payload format and the value's schema.

    - ``format``: ``"json"`` (one JSON object per message), ``"avro"`` (one Avro
      record: ``avro_framing`` ``"raw"``, ``"single-object"`` or ``"confluent"``) or
      ``"arrow"`` (an Arrow IPC stream per message, of any number of rows) or
      ``"protobuf"`` (one message of type ``protobuf_message``, described by
      ``protobuf_descriptor``).
    - ``schema``: the value's Arrow schema (anything with ``__arrow_c_schema__``).
      Without one, a read infers a JSON or Arrow schema from the first
      ``sample_rows`` messages it would read (a consumer: from the stream's first);
      Avro values are read with ``avro_schema``.
    - ``on_malformed``: ``"failfast"`` (the default: an error naming the stream,
      sequence and field), ``"permissive"`` (a null value, the payload's bytes in
      ``_corrupt_record`` and why it did not decode, the decoder's words, in
      ``_corrupt_reason``) or ``"dropmalformed"`` (the message left out; a
      consumer's is terminated so it is not delivered again).
    - ``flatten``: the value's fields as top-level columns instead of one struct
      column ``value``.
    - ``on_new_field`` (JSON): what a payload holding a field the schema lacks
      does (a schema inferred from a sample lacks the fields first seen after it):
      ``"ignore"`` (the default: the field is left out; a value where the inferred
      schema has only nulls is malformed) or ``"fail"`` (a
      [`NewFieldError`][jetstream_arrow.exceptions.NewFieldError] naming the
      message's ``seq`` and the ``field``, whatever ``on_malformed`` says; the batch
      holding it is not handed out, so reading again from ``seq`` loses nothing).
    - Avro: ``avro_schema`` (JSON text or a dict) the values are read as and written
      with; with Confluent framing, the writers' schemas by id
      (``avro_schemas_by_id``) and the id a publish writes (``avro_schema_id``).
    - Protobuf: ``protobuf_descriptor``, a ``FileDescriptorSet`` (bytes, or the path
      of the file ``protoc --include_imports --descriptor_set_out=FILE`` writes), and
      ``protobuf_message``, the message's full name (``package.Message``). The value's
      fields are the message's, under their ``.proto`` names; enums read as their
      value names, ``bytes`` as binary, ``map<K, V>`` as a map.

    A setting of another format than ``format`` (``avro_framing`` with ``"json"``,
    ``schema`` with ``"avro"``) is refused when the codec is used, naming it: it
    would be ignored otherwise.
    """

    format: ValueFormat
    schema: Any = None
    on_malformed: OnMalformed | None = None
    flatten: bool = False
    avro_schema: str | Mapping[str, Any] | None = None
    avro_framing: AvroFraming | None = None
    avro_schemas_by_id: Mapping[int, str | Mapping[str, Any]] | None = field(default=None)
    avro_schema_id: int | None = None
    protobuf_descriptor: bytes | str | os.PathLike[str] | None = None
    protobuf_message: str | None = None
    sample_rows: int | None = None
    on_new_field: OnNewField | None = None

    def __post_init__(self) -> None:
        if self.schema is not None and not isinstance(self.schema, pa.Schema):
            object.__setattr__(self, "schema", pa.schema(self.schema))
        if isinstance(self.protobuf_descriptor, (str, os.PathLike)):
            path = os.fspath(self.protobuf_descriptor)
            try:
                with open(path, "rb") as f:
                    object.__setattr__(self, "protobuf_descriptor", f.read())
            except OSError as e:
                raise BadInputError(
                    f"option 'protobuf_descriptor': cannot read the descriptor set {path!r}: {e}",
                    options=("protobuf_descriptor",),
                ) from e
        if isinstance(self.avro_schema, Mapping):
            object.__setattr__(self, "avro_schema", json.dumps(self.avro_schema))
        if self.avro_schemas_by_id is not None:
            object.__setattr__(
                self,
                "avro_schemas_by_id",
                {
                    int(k): v if isinstance(v, str) else json.dumps(v)
                    for k, v in self.avro_schemas_by_id.items()
                },
            )

    def value_schema(self) -> pa.Schema:
        """The Arrow schema values decode into: for JSON and Arrow ``schema`` (a read
        given none infers it), for Avro the Avro schema's, for Protobuf the
        message's."""
        return pa.schema(_core.value_schema(self))

    @classmethod
    def of(cls, codec: ValueCodec | str | None) -> ValueCodec | None:
        """``codec`` as a [`ValueCodec`][]: a format name is that format with
        everything else by default (a JSON schema inferred)."""
        if codec is None or isinstance(codec, ValueCodec):
            return codec
        if isinstance(codec, str):
            return cls(format=codec)  # type: ignore[arg-type]
        raise BadInputError(
            f"option 'codec' must be a ValueCodec or a format name, got {type(codec).__name__}"
        )


def report_malformed(stream: str, codec: ValueCodec | None, count: int) -> None:
    """Say, as a warning on logger ``jetstream_arrow``, how many payloads of a read of
    ``stream`` did not decode (mode ``dropmalformed`` left them out; ``permissive``
    kept their bytes in ``_corrupt_record``)."""
    if codec is None or count == 0:
        return
    mode = codec.on_malformed or "failfast"
    what = "left out" if mode == "dropmalformed" else "kept as _corrupt_record"
    _log.warning(
        "stream %r: %d payloads did not decode as %s and were %s (mode %r)",
        stream,
        count,
        codec.format,
        what,
        mode,
    )
