"""KV buckets as tables: a bucket's entries read as rows of ``key``, ``value``,
``revision``, ``operation`` and ``created``, and rows of key and value written as the
messages a KV client would publish, in batches, with Arrow compute (no Python per row).

A bucket ``B`` is the stream ``KV_B``; the entry of key ``k`` is the last message on
subject ``$KV.B.k``, whose stream sequence is the key's revision. So a read of the
bucket is a read of the latest message of each subject (``Client.read(...,
last_per_subject=True)``), and a put is a publish to the key's subject, a delete or a
purge a publish with the header ``KV-Operation: DEL`` (or ``PURGE``, with
``Nats-Rollup: sub``, which makes the stream drop the key's history), and a
compare-and-set a put that expects the key's last revision
(``Nats-Expected-Last-Subject-Sequence``): these are what NATS's own KV clients send.
Written rows go through the publisher like any other, with its window, retries, msg
ids and per-row conflict reports.

Input columns of a write: ``key`` (string, required), ``value`` (binary or string; null
or absent for a delete), optional ``operation`` (``PUT``, ``DEL`` or ``PURGE``, any
case; null is ``PUT``), optional ``expected_revision`` (integer; the revision the key
must be at for the row to be stored, 0 for a key that has no entry at all) and
``msg_id`` (string, as in any publish). Other columns are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from .exceptions import BadInputError

#: The stream behind bucket ``B`` is ``KV_B``; its entries are on ``$KV.B.<key>``.
STREAM_PREFIX = "KV_"
SUBJECT_PREFIX = "$KV."
#: The header that marks a delete or a purge, and the values NATS's KV clients use.
OPERATION_HEADER = "KV-Operation"
OPERATIONS = ("PUT", "DEL", "PURGE")
#: The header of a marker the server writes itself when it removes a key's last
#: message (a bucket with ``subject_delete_marker_ttl``), and the operation each
#: reason means, as NATS's KV clients read them: a key expired by ``max_age`` or
#: purged is gone as after a purge, a removed one as after a delete.
MARKER_REASON_HEADER = "Nats-Marker-Reason"
MARKER_OPERATIONS = {"MaxAge": "PURGE", "Purge": "PURGE", "Remove": "DEL"}
#: The keys NATS's KV clients accept: letters, digits and ``-/_=.``, not starting or
#: ending with ``.``.
VALID_KEY = r"^[-/_=a-zA-Z0-9]([-/_=.a-zA-Z0-9]*[-/_=a-zA-Z0-9])?$"
#: The bucket names NATS's KV clients accept.
VALID_BUCKET = r"^[a-zA-Z0-9_-]+$"

_HEADERS_TYPE = pa.map_(pa.utf8(), pa.list_(pa.utf8()))

#: The columns of a bucket read as a table.
ENTRY_SCHEMA = pa.schema(
    [
        pa.field("key", pa.utf8(), nullable=False),
        pa.field("value", pa.binary()),
        pa.field("revision", pa.int64(), nullable=False),
        pa.field("operation", pa.utf8(), nullable=False),
        pa.field("created", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


def bucket_stream(bucket: str) -> str:
    """The stream that holds bucket ``bucket``, after checking its name."""
    if not pc.match_substring_regex(pa.array([bucket]), VALID_BUCKET)[0].as_py():
        raise BadInputError(
            f"bucket {bucket!r}: a KV bucket name is letters, digits, '-' and '_' only"
        )
    return f"{STREAM_PREFIX}{bucket}"


def refuse_compression(compression: object, kv_write: str) -> None:
    """A KV write (``kv_write``: what the user asked for one by) takes no compression:
    every KV client reads a value as stored, and none decompresses by a
    ``Content-Encoding`` header (NATS KV has no convention for compressed values), so
    a compressed value would be unreadable bytes to them."""
    if compression is not None:
        raise BadInputError(
            f"{kv_write} and option 'compression' exclude each other (compression "
            f"{compression!r}): KV clients read a value as stored and none would "
            "decompress it; compress column 'value' yourself if every reader of the "
            "bucket decompresses it"
        )


def _string(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_large_string(column.type) or pa.types.is_string_view(column.type):
        column = column.cast(pa.utf8())
    return column


@dataclass(frozen=True)
class KvColumns:
    """Which input columns feed a bucket's messages (names as in the input), and the
    bucket's subject prefix; :meth:`select` maps one batch."""

    bucket: str
    key: str
    value: str | None
    operation: str | None
    expected_revision: str | None
    msg_id: str | None = None
    #: Each key's own time to live (a duration column ``ttl``), sent as ``Nats-TTL``.
    ttl: str | None = None

    @classmethod
    def resolve(cls, schema: pa.Schema, bucket: str, msg_id_column: str | None = None) -> KvColumns:
        """Check the input columns for a write into ``bucket``, naming the one at fault.
        Names match case-insensitively, as Spark's do. The msg ids come from
        ``msg_id_column`` if given, else from a ``msg_id`` column if there is one."""
        bucket_stream(bucket)
        by_lower: dict[str, str] = {}
        for name in schema.names:
            by_lower.setdefault(name.lower(), name)

        def find(name: str, want: str, ok: Callable[[pa.DataType], bool]) -> str | None:
            found = by_lower.get(name)
            if found is not None and not ok(schema.field(found).type):
                raise BadInputError(
                    f"column {found!r} of a KV write must be {want}, got {schema.field(found).type}"
                )
            return found

        def is_string(t: pa.DataType) -> bool:
            return bool(
                pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)
            )

        def is_bytes(t: pa.DataType) -> bool:
            return bool(
                is_string(t)
                or pa.types.is_binary(t)
                or pa.types.is_large_binary(t)
                or pa.types.is_binary_view(t)
            )

        key = find("key", "string", is_string)
        if key is None:
            raise BadInputError(
                f"a KV write needs a 'key' column (string); columns: {', '.join(schema.names)}"
            )
        if msg_id_column is not None and by_lower.get(msg_id_column.lower()) is None:
            raise BadInputError(
                f"option 'msgIdColumn': no column {msg_id_column!r} (columns: {', '.join(schema.names)})"
            )
        msg_id = find((msg_id_column or "msg_id").lower(), "string", is_string)
        ttl = find("ttl", "a duration (whole seconds)", pa.types.is_duration)
        return cls(
            bucket=bucket,
            key=key,
            msg_id=msg_id,
            value=find("value", "binary or string", is_bytes),
            operation=find("operation", "string (PUT, DEL or PURGE)", is_string),
            expected_revision=find(
                "expected_revision", "an integer (a revision)", pa.types.is_integer
            ),
            ttl=ttl,
        )

    def select(self, batch: pa.RecordBatch, first_row: int = 0) -> pa.RecordBatch:
        """The publish input of one batch: ``subject``, ``data``, ``headers`` (with an
        ``operation`` column) and ``expected_last_subject_seq`` (with an
        ``expected_revision`` column). ``first_row`` is the batch's first row's number
        in the whole input, as errors name rows."""
        n = batch.num_rows
        keys = _string(batch.column(self.key))
        bad = pc.invert(pc.fill_null(pc.match_substring_regex(keys, VALID_KEY), False))
        if pc.any(bad).as_py():
            row = pc.index(bad, True).as_py()
            raise BadInputError(
                f"column {self.key!r}, row {first_row + row}: {keys[row].as_py()!r} is not a KV "
                "key (letters, digits and '-/_=.', not starting or ending with '.')"
            )
        subject = pc.binary_join_element_wise(
            pa.scalar(f"{SUBJECT_PREFIX}{self.bucket}"), keys, "."
        )
        operations = None
        if self.operation is not None:
            operations = pc.fill_null(pc.utf8_upper(_string(batch.column(self.operation))), "PUT")
            known = pc.is_in(operations, pa.array(OPERATIONS))
            if not pc.all(known).as_py():
                row = pc.index(known, False).as_py()
                raise BadInputError(
                    f"column {self.operation!r}, row {first_row + row}: "
                    f"{operations[row].as_py()!r} is not a KV operation ({', '.join(OPERATIONS)})"
                )
        if self.value is not None:
            data = batch.column(self.value)
            if isinstance(data, pa.ChunkedArray):
                data = data.combine_chunks()
            if not (pa.types.is_binary(data.type)):
                data = data.cast(pa.binary())
        else:
            data = pa.nulls(n, pa.binary())
        columns: dict[str, pa.Array] = {"subject": subject}
        if operations is not None:
            is_put = pc.equal(operations, "PUT")
            # A delete or a purge carries no value.
            columns["data"] = pc.if_else(is_put, data, pa.scalar(None, pa.binary()))
            columns["headers"] = _operation_headers(operations)
        else:
            columns["data"] = data
        if self.expected_revision is not None:
            columns["expected_last_subject_seq"] = batch.column(self.expected_revision)
        if self.msg_id is not None:
            columns["msg_id"] = _string(batch.column(self.msg_id))
        if self.ttl is not None:
            columns["ttl"] = batch.column(self.ttl)
        return pa.RecordBatch.from_pydict(columns)

    def select_all(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """:meth:`select` of each batch, lazily, rows numbered across them."""
        row = 0
        for batch in batches:
            yield self.select(batch, row)
            row += batch.num_rows


#: The headers of each operation, by its code (0 put, 1 delete, 2 purge); a row's
#: number of header entries is its code.
_HEADER_KEYS = pa.array([[], [OPERATION_HEADER], [OPERATION_HEADER, "Nats-Rollup"]])
_HEADER_VALUES = pa.array([[], [["DEL"]], [["PURGE"], ["sub"]]], pa.list_(pa.list_(pa.utf8())))


def _operation_headers(operations: pa.Array) -> pa.MapArray:
    """Per row: no headers for a put, ``KV-Operation: DEL`` for a delete, and
    ``KV-Operation: PURGE`` with ``Nats-Rollup: sub`` for a purge."""
    codes = pc.add(
        pc.equal(operations, "DEL").cast(pa.int32()),
        pc.multiply(pc.equal(operations, "PURGE").cast(pa.int32()), pa.scalar(2, pa.int32())),
    )
    offsets = pa.concat_arrays(
        [pa.array([0], pa.int32()), pc.cumulative_sum(codes).cast(pa.int32())]
    )
    return pa.MapArray.from_arrays(
        offsets,
        pc.list_flatten(pc.take(_HEADER_KEYS, codes)),
        pc.list_flatten(pc.take(_HEADER_VALUES, codes)),
        type=_HEADERS_TYPE,
    )


def key_subjects(bucket: str, keys: Iterable[str] | str | None) -> list[str]:
    """The subject filters of ``keys`` in ``bucket`` (wildcards allowed, as NATS's KV
    clients take them); every key when None."""
    prefix = f"{SUBJECT_PREFIX}{bucket}."
    if keys is None:
        return [f"{prefix}>"]
    return [f"{prefix}{key}" for key in ([keys] if isinstance(keys, str) else keys)]


def entries(
    batches: Iterable[pa.RecordBatch], bucket: str, include_deletes: bool
) -> Iterator[pa.RecordBatch]:
    """The latest messages of a bucket's subjects (read with headers) as entries:
    deletes and purges left out unless ``include_deletes``, then with a null value."""
    prefix_len = len(f"{SUBJECT_PREFIX}{bucket}.")
    for batch in batches:
        operations = _operations(batch.column("headers"))
        is_put = pc.equal(operations, "PUT")
        columns = [
            pc.utf8_slice_codeunits(batch.column("subject"), prefix_len),
            pc.if_else(is_put, batch.column("data"), pa.scalar(None, pa.binary())),
            batch.column("seq"),
            operations,
            batch.column("timestamp"),
        ]
        out = pa.RecordBatch.from_arrays(columns, schema=ENTRY_SCHEMA)
        if not include_deletes:
            out = out.filter(is_put)
        if out.num_rows:
            yield out


def _first_header(headers: pa.Array, name: str) -> pa.Array:
    return pc.list_element(pc.map_lookup(headers, name, "first"), 0)


def _operations(headers: pa.Array) -> pa.Array:
    """Each message's KV operation, read as NATS's KV clients read it: the
    ``KV-Operation`` header if there is one (``DEL``, ``PURGE``, anything else a put),
    else a server marker's reason (:data:`MARKER_OPERATIONS`), else a put."""
    raw = _first_header(headers, OPERATION_HEADER)
    given = pc.if_else(pc.is_in(raw, pa.array(["DEL", "PURGE"])), raw, "PUT")
    reason = _first_header(headers, MARKER_REASON_HEADER)
    marked = pa.scalar("PUT")
    for why, operation in MARKER_OPERATIONS.items():
        marked = pc.if_else(pc.fill_null(pc.equal(reason, why), False), operation, marked)
    operations = pc.if_else(pc.is_valid(raw), given, marked)
    return pc.fill_null(operations, "PUT")
