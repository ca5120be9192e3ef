"""``jetstream-arrow export``: write a stream's messages to a file. One module: the
command's flags, the shape of each batch (payloads as text, base64 or decoded values)
and the writer of each format are read together, batch by batch."""

from __future__ import annotations

import argparse
import base64
import os
import re
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from .._time import EPOCH, to_datetime
from .._views import cast_without_views
from ..codec import ValueCodec
from ..exceptions import BadInputError, NotFoundError
from . import value_schema
from .connection import add_connection_args, add_decompress_arg, client_factory
from .errors import CliError, UsageError
from .json_rows import json_literals, lines_buffer
from .native_flags import add_native_flag
from .progress import Progress, add_output_args, human_count, human_duration, human_rate
from .sources import FORMATS, guess_format

DATA_AS = ("binary", "text", "base64", "json")
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$")
# A zone at the end of an ISO-8601 time of day: Z, +HH, +HHMM or +HH:MM (or -).
_ZONE = re.compile(r"(?:[zZ]|[+-]\d\d(?::?\d\d(?::?\d\d(?:\.\d+)?)?)?)$")
_NUMBER = re.compile(r"^[+-]?\d+(?:\.\d+)?$")

_EPILOG = """\
columns:
  stream, subject, seq, timestamp, data, and headers with --include-headers.
  --data-as decides how data is written: binary (parquet/arrow default), text (UTF-8;
  csv/jsonl default), base64, or json (each message is a JSON object; its fields become
  columns, fixed by the first batch). CSV holds headers as JSON text.

The file is written under a temporary name and renamed when complete, so a failed
export leaves no partial file. Memory is bounded by --batch-rows.
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "export",
        help="write a stream's messages to a Parquet, CSV, JSON-lines or Arrow file",
        usage="%(prog)s STREAM -o FILE [options]",
        description="Write the messages of STREAM, in sequence order, to a file.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(handler=run)
    p.add_argument("stream", metavar="STREAM")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="output file ('-' for standard output, with --format)",
    )
    p.add_argument("--format", choices=FORMATS, help="output format (default: from the extension)")
    add_native_flag(p, "read", "start_seq", "--start-seq")
    add_native_flag(p, "read", "end_seq", "--end-seq")
    p.add_argument(
        "--since",
        metavar="TIME",
        help="messages stored at or after TIME: ISO-8601, or a duration ago (15m, 2h, 1d)",
    )
    p.add_argument(
        "--until", metavar="TIME", help="messages stored before TIME (same forms as --since)"
    )
    p.add_argument(
        "--subjects",
        action="append",
        metavar="FILTER",
        help="only these subjects (wildcards allowed; comma-separated or repeated)",
    )
    add_native_flag(p, "read", "include_headers", "--include-headers")
    p.add_argument(
        "--data-as",
        choices=DATA_AS,
        help="how to write the data column (see below)",
    )
    p.add_argument(
        "--columns",
        action="append",
        metavar="C,...",
        help="write only these columns, in this order",
    )
    p.add_argument(
        "--compression",
        metavar="CODEC",
        help="parquet: zstd (default), snappy, gzip, none; arrow: zstd or lz4 (not for csv, jsonl)",
    )
    add_native_flag(p, "read", "batch_rows", "--batch-rows")
    add_decompress_arg(p)
    add_connection_args(p)
    add_output_args(p)


def parse_time(value: str, flag: str) -> datetime:
    """An ISO-8601 time (UTC when it names no zone), or a duration (``90s``, ``15m``,
    ``2h``, ``1d12h``) ago."""
    text = value.strip()
    wrong = UsageError(
        f"{flag} {value!r}: give an ISO-8601 time (2026-01-31T12:00:00Z) between 1970 "
        "and 2262, or a duration ago (90s, 15m, 2h, 1d)"
    )
    match = _DURATION.match(text)
    try:
        if text and match and any(match.groups()):
            d, h, m, s = match.groups()
            ago = timedelta(
                days=int(d or 0), hours=int(h or 0), minutes=int(m or 0), seconds=float(s or 0)
            )
            when = datetime.now(timezone.utc) - ago
        else:
            when = to_datetime(_utc_unless_zoned(text), flag)
    except (BadInputError, OverflowError):
        raise wrong from None
    # Times travel as int64 nanoseconds since the epoch; none is stored before it.
    if when < EPOCH:
        raise wrong
    return when


def _utc_unless_zoned(text: str) -> str:
    """The CLI reads an ISO-8601 time without a zone as UTC; the package's time parser
    wants the zone spelled out."""
    if _NUMBER.match(text):
        return text  # epoch seconds
    date_and_clock = re.split(r"[Tt ]", text, maxsplit=1)
    if len(date_and_clock) == 1:
        return f"{text}T00:00:00+00:00"
    if _ZONE.search(date_and_clock[1]):
        return text
    return f"{text}+00:00"


class _JsonlWriter:
    def __init__(self, sink: IO[bytes]) -> None:
        self._sink = sink

    def write(self, table: pa.Table) -> None:
        for batch in table.to_batches():
            if batch.num_rows:
                rows = value_schema.json_payloads(batch, batch.schema.names)
                self._sink.write(memoryview(lines_buffer(rows)))

    def close(self) -> None:
        pass


class _Writer:
    """One writer per format; the schema is fixed by the first batch."""

    def __init__(self, fmt: str, sink: IO[bytes], compression: str | None) -> None:
        self.fmt = fmt
        self.sink = sink
        self.compression = compression
        self._impl: Any = None
        self.schema: pa.Schema | None = None

    def write(self, table: pa.Table) -> None:
        if self._impl is None:
            self.schema = table.schema
            if self.fmt == "parquet":
                self._impl = pq.ParquetWriter(
                    self.sink, table.schema, compression=self.compression or "zstd"
                )
            elif self.fmt == "arrow":
                options = ipc.IpcWriteOptions(compression=self.compression)
                self._impl = ipc.new_file(self.sink, table.schema, options=options)
            elif self.fmt == "csv":
                self._impl = pacsv.CSVWriter(self.sink, table.schema)
            else:
                self._impl = _JsonlWriter(self.sink)
        elif table.schema != self.schema:
            assert self.schema is not None
            table = table.cast(self.schema)
        if self.fmt in ("jsonl", "csv"):
            self._impl.write(table)
        else:
            self._impl.write_table(table)

    def close(self, empty_schema: pa.Schema) -> None:
        if self._impl is None:
            self.write(empty_schema.empty_table())
        self._impl.close()
        self._impl = None

    def abort(self) -> None:
        """Close after a failure (the partial output is deleted by the caller)."""
        impl, self._impl = self._impl, None
        if impl is not None:
            try:
                impl.close()
            except Exception:
                pass


def _text(data: pa.Array) -> pa.Array:
    try:
        text = pc.cast(pc.cast(data, pa.binary()), pa.string())
        text.validate(full=True)
    except pa.ArrowInvalid:
        raise CliError(
            "some message data is not UTF-8 text; export it with --data-as base64 "
            "(or binary, for parquet and arrow)"
        ) from None
    return text


def _value_columns(table: pa.Table) -> pa.Table:
    """The decoded ``value`` struct's fields as columns in its place. A field named
    like a message column (a loaded table's own ``timestamp`` or ``seq``) is what was
    loaded: it takes the name, and the message column is left out."""
    value = table.column("value").combine_chunks()
    value_fields = [value.type.field(i) for i in range(value.type.num_fields)]
    taken = {f.name for f in value_fields}
    fields: list[pa.Field] = []
    arrays: list[pa.Array | pa.ChunkedArray] = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if field.name == "value":
            # The value's own fields, nullability included (a column loaded as
            # non-nullable comes back so).
            fields.extend(value_fields)
            arrays.extend(value.field(i) for i in range(len(value_fields)))
        elif field.name not in taken:
            fields.append(field)
            arrays.append(column)
    return pa.table(arrays, schema=pa.schema(fields))


def _shape(batch: pa.RecordBatch, data_as: str, fmt: str) -> pa.Table:
    table = pa.Table.from_batches([batch])
    if data_as == "json":
        # The read decoded the payloads into a struct (see _value_codec).
        table = _value_columns(table)
    if data_as in ("text", "base64"):
        i = table.schema.get_field_index("data")
        data = table.column("data").combine_chunks()
    if data_as == "text":
        table = table.set_column(i, "data", _text(data))
    elif data_as == "base64":
        encoded = [
            None if v is None else base64.b64encode(v).decode("ascii")
            for v in pc.cast(data, pa.binary()).to_pylist()
        ]
        table = table.set_column(i, "data", pa.array(encoded, pa.string()))

    if fmt == "csv" and "headers" in table.column_names:
        # CSV has no maps: one JSON object per row, e.g. {"Nats-Msg-Id":["x"]}
        k = table.schema.get_field_index("headers")
        table = table.set_column(k, "headers", json_literals(table.column("headers")))
    if fmt == "csv":
        # pyarrow's CSV writer takes no view types (a schema a load recorded from a
        # file that had them); Parquet and Arrow files keep them as loaded.
        table = cast_without_views(table)
    return table


def _payload_bytes(batch: pa.RecordBatch) -> int:
    """The payload bytes of a batch (its decoded columns' when payloads were decoded)."""
    if "data" in batch.schema.names:
        return int(batch.column("data").nbytes)
    return int(batch.nbytes)


def _value_codec(info: Any) -> ValueCodec:
    """How ``--data-as json`` decodes payloads: with the schema a load recorded in the
    stream's metadata (the loaded table's own types), else one the core infers from
    the first messages of the stream; into a struct, whose fields may have the names
    of message columns (:func:`_value_columns`)."""
    return ValueCodec("json", schema=value_schema.recorded(info), flatten=False)


def run(args: argparse.Namespace) -> int:
    connect = client_factory(args)
    fmt = args.format or (None if args.output == "-" else guess_format(args.output, None))
    if fmt is None:
        raise UsageError("-o - (standard output) needs --format")
    data_as = args.data_as or ("binary" if fmt in ("parquet", "arrow") else "text")
    if data_as == "binary" and fmt in ("csv", "jsonl"):
        raise UsageError(f"--data-as binary cannot be written as {fmt}; use text, base64 or json")
    if args.compression is not None and fmt in ("csv", "jsonl"):
        raise UsageError(
            f"--compression {args.compression!r} applies to parquet and arrow output; "
            f"{fmt} is written uncompressed (pipe -o - through gzip to compress it)"
        )
    since = parse_time(args.since, "--since") if args.since else None
    until = parse_time(args.until, "--until") if args.until else None
    subjects = [s for item in (args.subjects or []) for s in item.split(",") if s] or None
    columns = [c for item in (args.columns or []) for c in item.split(",") if c] or None

    with connect() as client:
        try:
            info = client.stream_info(args.stream)
        except NotFoundError:
            try:
                names = sorted(client.stream_names())
            except Exception:
                names = []
            known = f"streams here: {', '.join(names)}" if names else "this server has no streams"
            raise CliError(f"stream {args.stream!r} does not exist ({known})") from None
        first = args.start_seq or info.state.first_seq or 1
        last = args.end_seq or info.state.last_seq
        reader = client.read(
            args.stream,
            codec=_value_codec(info) if data_as == "json" else None,
            start_seq=args.start_seq,
            end_seq=args.end_seq,
            subjects=subjects,
            start_time=since,
            end_time=until,
            include_headers=args.include_headers,
            batch_rows=args.batch_rows,
        )
        if args.output == "-":
            return _export(reader, sys.stdout.buffer, fmt, data_as, columns, args, first, last)
        final = Path(args.output)
        partial = final.with_name(f".{final.name}.partial-{os.getpid()}")
        try:
            with open(partial, "wb") as sink:
                code = _export(reader, sink, fmt, data_as, columns, args, first, last)
            os.replace(partial, final)
        except OSError as e:
            raise CliError(f"cannot write {str(final)!r}: {e.strerror}") from None
        finally:
            partial.unlink(missing_ok=True)
        return code


def _export(
    reader: pa.RecordBatchReader,
    sink: IO[bytes],
    fmt: str,
    data_as: str,
    columns: list[str] | None,
    args: argparse.Namespace,
    first: int,
    last: int,
) -> int:
    writer = _Writer(fmt, sink, args.compression)
    progress = Progress(f"export {args.stream}", enabled=args.progress)
    rows = nbytes = 0
    span = max(last - first + 1, 1)
    try:
        for batch in reader:
            if batch.num_rows == 0:
                continue
            table = _shape(batch, data_as, fmt)
            if columns:
                missing = [c for c in columns if c not in table.column_names]
                if missing:
                    raise CliError(
                        f"--columns: no column {', '.join(map(repr, missing))}; the columns "
                        f"are: {', '.join(table.column_names)}"
                    )
                table = table.select(columns)
            try:
                writer.write(table)
            except pa.ArrowInvalid as e:
                # What the format's writer refuses of the rows (a null in a field the
                # schema declares non-nullable, say): said, with nothing left behind.
                raise CliError(
                    f"cannot write messages {batch.column('seq')[0].as_py()}.."
                    f"{batch.column('seq')[-1].as_py()} as {fmt}: {e}"
                ) from None
            rows += batch.num_rows
            payload = _payload_bytes(batch)
            nbytes += payload
            last_seq = batch.column("seq")[-1].as_py()
            progress.update(batch.num_rows, payload, (last_seq - first + 1) / span)
        nothing = pa.RecordBatch.from_pylist([], schema=reader.schema)
        empty = _shape(nothing, data_as, fmt)
        if columns:
            empty = empty.select([c for c in columns if c in empty.column_names])
        writer.close(empty.schema)
    finally:
        writer.abort()
        progress.clear()
        reader.close()
    elapsed = max(progress.elapsed, 1e-9)
    if not args.quiet:
        print(
            f"exported {human_count(rows)} messages from stream {args.stream} to "
            f"{args.output} in {human_duration(elapsed)} ({human_rate(rows / elapsed)} rows/s, "
            f"{nbytes / elapsed / 1e6:.1f} MB/s)",
            file=sys.stderr if args.output == "-" else sys.stdout,
        )
    return 0
