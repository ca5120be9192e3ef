"""``jetstream-arrow load``: publish the rows of files into a stream.

One module for the command's options, its checks before anything is sent, and the
publishing loop: each check exists for a step of that loop (ids across files, the
duplicate comparison, the progress line)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .._core import DEFAULT_WRITER_LEASE
from .._read_ahead import ReadAhead
from ..exactly_once import ExactlyOnceUnavailableWarning, NumberedRows, exactly_once_wanted
from ..exceptions import (
    ApiError,
    AuthorizationError,
    BadInputError,
    JetStreamArrowError,
    NotFoundError,
)
from . import value_schema
from .connection import add_connection_args, client_factory
from .errors import CliError, UsageError
from .json_lines import JsonLinesFile, LineFields
from .messages import MessageBuilder
from .native_flags import add_native_flag
from .progress import Progress, add_output_args, human_count, human_duration, human_rate
from .sources import CSV_TYPES, FORMATS, InputFile, file_identity, guess_format
from .streams import check_subject_in_stream, describe_duplicate_window

# Rows read, converted and handed to the publisher at a time (the CLI's own choice:
# large enough to amortise each call, small enough that three fit in memory).
BATCH_ROWS = 32768
# Rows whose acks are gathered into one result while a file streams through one
# publish: bounds the memory the acks take, and how often failures are looked at.
ROWS_PER_RESULT = 262144

_EPILOG = """\
message contents:
  subject  --subject SUBJ for every row, or --subject-column C per row
  data     --data-column C as is (binary or text; other types as their text), or, without
           it, each row as one JSON object of all its columns except the headers and
           msg-id columns (built with Arrow kernels, about 0.5 M rows/s a core)
  headers  --headers-column C: a map, a struct, or text holding a JSON object per row
  msg id   --msg-id-column C, else "ja-<file id>-<row number>"
  ttl      --ttl DURATION for every row (Nats-TTL, whole seconds; "never" outlives the
           stream's max_age); a TTL in a row's headers as well stops the load, naming the row

values are stored as the file writes them:
  csv      every cell is its text ("02134", a 20-digit id, "+02:00" stay as written);
           --csv-types infer lets Arrow make numbers, booleans and timestamps of them
  jsonl    each line is its message's payload byte for byte (checked to be JSON, never
           re-serialised; the line ending is not part of it, blank lines are skipped).
           The column flags name fields of each line's object; --data-column F makes
           the payload that field (a string as is, any other value as JSON).
           Every line of every JSON-lines file is checked before anything is
           published: a bad line, or one over the server's max_payload, is named
           FILE:LINE and nothing is sent.

re-runs store each row once:
  Without --msg-id-column every message gets the id ja-<file id>-<row number>, so
  running the same load again (after a crash, Ctrl-C or a failure) publishes the same
  ids and the server drops the rows it already has. The file id is --file-id:
    content  SHA-256 of the file's size and bytes (default; reads the file once more
             first, at disk speed; a moved or re-downloaded copy keeps its id)
    quick    SHA-256 of the absolute path, size and modification time (no extra read)
  With --msg-id-prefix P the ids are P<n>, n counting rows across all the files of
  the load in the order given (as if they were one file): re-run with the same files
  in the same order. The server deduplicates within the stream's duplicate window
  (default 2 minutes): re-run within it, or create the stream with a longer
  --duplicate-window. Rows dropped because another row of the same load had their
  id (two files with the same content, a repeated --msg-id-column value) are
  reported on stderr. A file whose rows come back as duplicates of earlier messages
  has its first such row compared with the stored message: other content under the
  same id (another load with the same --msg-id-prefix) fails the load.

memory:
  Files are read a batch at a time (parquet: by row group pages; csv: 8 MiB blocks;
  jsonl: 1 MiB chunks, batches of at most 8 MiB; arrow: memory-mapped batches); at
  most three batches are in memory, and --window messages are in flight.
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "load",
        help="publish the rows of Parquet, CSV, JSON-lines or Arrow files",
        usage="%(prog)s FILE... --stream S (--subject SUBJ | --subject-column C) [options]",
        description="Publish every row of FILES as one message into a JetStream stream.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(handler=run)
    p.add_argument("files", nargs="+", metavar="FILE", help="input files (read in order)")
    p.add_argument("--stream", required=True, metavar="S", help="the stream to load into")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--subject", metavar="SUBJ", help="publish every row to this subject")
    which.add_argument("--subject-column", metavar="C", help="column holding each row's subject")
    p.add_argument("--format", choices=FORMATS, help="input format (default: from the extension)")
    p.add_argument(
        "--data-column", metavar="C", help="column holding the payload (default: the row as JSON)"
    )
    p.add_argument("--headers-column", metavar="C", help="column holding message headers")
    p.add_argument("--msg-id-column", metavar="C", help="column holding each message's Nats-Msg-Id")
    p.add_argument(
        "--file-id",
        choices=("content", "quick"),
        default="content",
        help="how a file's identity in message ids is computed (see below)",
    )
    p.add_argument(
        "--msg-id-prefix",
        metavar="P",
        help="message ids are P<row number> instead of ja-<file id>-<row number>",
    )
    p.add_argument(
        "--create-stream", action="store_true", help="create the stream if it does not exist"
    )
    p.add_argument(
        "--stream-subjects",
        action="append",
        metavar="SUBJ",
        help="subjects of a stream made by --create-stream (repeatable; default: --subject)",
    )
    p.add_argument(
        "--storage",
        choices=("file", "memory"),
        help="storage of a stream made by --create-stream (default file)",
    )
    p.add_argument(
        "--duplicate-window",
        type=float,
        metavar="SECONDS",
        help="duplicate window of a stream made by --create-stream (server default 120)",
    )
    p.add_argument("--delimiter", metavar="CHAR", help="field delimiter of CSV files (default ,)")
    p.add_argument(
        "--csv-types",
        choices=CSV_TYPES,
        help="CSV cells as their text (default), or infer numbers, booleans and timestamps",
    )
    p.add_argument(
        "--batch-rows",
        type=int,
        default=BATCH_ROWS,
        metavar="N",
        help="rows per published batch (default %(default)s)",
    )
    add_native_flag(p, "publish", "window", "--window")
    add_native_flag(p, "publish", "ack_timeout", "--ack-timeout")
    p.add_argument(
        "--ttl",
        type=_ttl_seconds,
        metavar="DURATION",
        help="every row's time to live (Nats-TTL): 90s, 5m, 1h30m, whole seconds, or "
        "'never'; the stream needs allow_msg_ttl (--create-stream sets it)",
    )
    add_native_flag(p, "publish", "compression", "--compression")
    p.add_argument(
        "--max-rate",
        type=float,
        metavar="ROWS_PER_S",
        help="publish at most this many rows a second",
    )
    once = p.add_mutually_exclusive_group()
    once.add_argument(
        "--exactly-once",
        dest="exactly_once",
        action="store_const",
        const=True,
        default=None,
        help="re-running the load stores no row twice at any age: each file keeps its "
        "position in the stream (default where the stream holds positions, as "
        "--create-stream makes it; refused where it cannot)",
    )
    once.add_argument(
        "--no-exactly-once",
        dest="exactly_once",
        action="store_const",
        const=False,
        help="rely on the stream's duplicate window alone",
    )
    p.add_argument(
        "--writer-lease",
        type=_positive_seconds,
        metavar="SECONDS",
        help="how long a file's position claims it: a second load of the same file waits "
        f"this long after the last position of one that died (default {DEFAULT_WRITER_LEASE:g})",
    )
    add_connection_args(p)
    add_output_args(p)


@dataclass
class Totals:
    rows: int = 0
    stored: int = 0
    duplicates: int = 0
    failed: int = 0
    nbytes: int = 0
    files: int = 0
    # rows handed to the publisher (ahead of their acks), for --max-rate
    handed: int = 0
    failures: list[str] = field(default_factory=list)
    # duplicates of a message this same load stored, and the first of them
    repeated: int = 0
    first_repeated: str = ""
    writers: set[str] = field(default_factory=set)  # exactly-once files of this load


# (message batch, input rows, payload bytes, fraction of the file read)
Messages = Iterator[tuple[pa.RecordBatch, int, int, float | None]]


@dataclass
class LoadFile:
    """One input file, checked, and how to read its message batches."""

    path: Path
    messages: Callable[[int], Messages]
    json_lines: JsonLinesFile | None = None
    #: The schema of the columns encoded as JSON payloads (None: payloads as given).
    value_schema: pa.Schema | None = None


def _converted(file: InputFile, builder: MessageBuilder, batch_rows: int) -> Messages:
    """The message batches of a file read as record batches (all but JSON-lines)."""
    for batch, fraction in file.batches(batch_rows):
        messages, nbytes = builder(batch)
        yield messages, batch.num_rows, nbytes, fraction


def _prepare(args: argparse.Namespace, progress: Progress) -> list[LoadFile]:
    """Check every file before anything is published: columns for all, and every line
    of JSON-lines files (after the cheap checks of all files)."""
    prepared = []
    for name in args.files:
        fmt = guess_format(name, args.format)
        f = InputFile(Path(name), fmt, csv_delimiter=args.delimiter, csv_types=args.csv_types)
        f.check_readable()
        if fmt == "jsonl":
            fields = LineFields(
                subject=args.subject_column,
                data=args.data_column,
                headers=args.headers_column,
                msg_id=args.msg_id_column,
            )
            lines = JsonLinesFile(f.path, fields)
            prepared.append(LoadFile(f.path, lines.messages, lines))
            continue
        builder = MessageBuilder(
            f.schema(),
            source=str(f.path),
            subject_column=args.subject_column,
            data_column=args.data_column,
            headers_column=args.headers_column,
            msg_id_column=args.msg_id_column,
        )
        prepared.append(
            LoadFile(
                f.path,
                functools.partial(_converted, f, builder),
                value_schema=builder.value_schema,
            )
        )
    for lf in prepared:
        if lf.json_lines is not None:
            progress.update(label=f"checking {lf.path.name}")
            lf.json_lines.check()
    progress.clear()
    return prepared


def run(args: argparse.Namespace) -> int:
    connect = client_factory(args)
    if args.batch_rows < 1:
        raise UsageError("--batch-rows must be at least 1")
    if args.max_rate is not None and args.max_rate <= 0:
        raise UsageError("--max-rate must be a positive number of rows per second")
    if args.data_column and args.data_column in (args.headers_column, args.msg_id_column):
        raise UsageError("--data-column must differ from --headers-column and --msg-id-column")
    formats = {guess_format(p, args.format) for p in args.files}
    if args.csv_types is not None and "csv" not in formats:
        raise UsageError("--csv-types applies to CSV files; none of the files is CSV")
    if args.csv_types is None:
        args.csv_types = "text"
    if args.delimiter is not None and "csv" not in formats:
        raise UsageError("--delimiter applies to CSV files; none of the files is CSV")
    if args.delimiter is None:
        args.delimiter = ","
    if not args.create_stream:
        # These describe the stream --create-stream makes; an existing stream keeps its own.
        for flag, value in (
            ("--stream-subjects", args.stream_subjects),
            ("--storage", args.storage),
            ("--duplicate-window", args.duplicate_window),
        ):
            if value is not None:
                raise UsageError(
                    f"{flag} applies to the stream made by --create-stream; without "
                    "--create-stream the stream is used as it is"
                )
    progress = Progress("load", enabled=args.progress)
    files = _prepare(args, progress)

    out = sys.stdout
    batch_rows = args.batch_rows
    if args.max_rate is not None:
        # small batches keep a throttled load smooth
        batch_rows = max(1, min(batch_rows, int(args.max_rate // 10) or 1))

    with connect() as client:
        info = _ensure_stream(client, args)
        if args.subject is not None:
            check_subject_in_stream(args.subject, info)
        schemas = [f.value_schema for f in files]
        if schemas and all(s is not None for s in schemas):
            # Every file's rows become JSON objects: the stream keeps their columns'
            # schema, so an export gives back the same types. A user who may publish
            # but not update the stream still loads; the export then infers types.
            schema = schemas[0]
            for f, other in zip(files[1:], schemas[1:], strict=True):
                schema = value_schema.merged(schema, other, f"the files before {f.path}")
            try:
                value_schema.record(client, args.stream, schema)
            except (AuthorizationError, ApiError) as e:
                print(
                    f"warning: the table's schema was not recorded in stream "
                    f"{args.stream}'s metadata ({e}); `export --data-as json` will infer "
                    "the types from the messages",
                    file=sys.stderr,
                )
        max_payload = client.server_info().get("max_payload")
        for f in files:
            # Compressed, a longer line may fit: the publish checks each message's
            # size as it is sent, naming its row.
            if f.json_lines is not None and max_payload and args.compression is None:
                f.json_lines.check_payload_limit(int(max_payload))
        # A duplicate whose original is newer than this had its id given to another
        # row of this same load.
        last_seq_before = int(info.state.last_seq or 0)
        args.exactly_once = _exactly_once(client, args)
        if args.msg_id_column is None and not args.quiet:
            print(
                "re-running this load stores no row twice "
                + (
                    "at any age (each file keeps its position in the stream)"
                    if args.exactly_once
                    else describe_duplicate_window(info)
                ),
                file=sys.stderr,
            )
        totals = Totals()
        started = time.monotonic()
        progress.started = started
        try:
            for f in files:
                _load_file(client, args, f, batch_rows, totals, progress, started, last_seq_before)
                if totals.failed:
                    break
        except KeyboardInterrupt:
            progress.clear()
            print(
                f"interrupted: {human_count(totals.stored + totals.duplicates)} rows were "
                "acknowledged"
                + (f", {human_count(totals.failed)} failed" if totals.failed else "")
                + ". Run the same command again to finish: rows already stored "
                f"are recognised as duplicates {describe_duplicate_window(info)}.",
                file=sys.stderr,
            )
            raise
        finally:
            progress.clear()
        elapsed = max(time.monotonic() - started, 1e-9)

    if totals.failed:
        for line in totals.failures[:5]:
            print(f"  {line}", file=sys.stderr)
        raise CliError(
            f"{human_count(totals.failed)} rows were not stored (first errors above); "
            f"{human_count(totals.stored)} stored, {human_count(totals.duplicates)} duplicates. "
            "Fix the cause and run the same command again: rows already stored are "
            f"recognised as duplicates {describe_duplicate_window(info)}."
        )
    if totals.repeated:
        print(
            f"warning: {human_count(totals.repeated)} rows of this load were not stored: an "
            "earlier row of this same load had the same message id "
            f"(first: {totals.first_repeated}). {_why_repeated(args)}",
            file=sys.stderr,
        )
    if not args.quiet:
        print(
            f"loaded {human_count(totals.rows)} rows from {totals.files} "
            f"file{'s' if totals.files != 1 else ''} into stream {args.stream} in "
            f"{human_duration(elapsed)} ({human_rate(totals.rows / elapsed)} rows/s, "
            f"{totals.nbytes / elapsed / 1e6:.1f} MB/s): {human_count(totals.stored)} stored, "
            f"{human_count(totals.duplicates)} duplicates (already in the stream)",
            file=out,
        )
    return 0


def _why_repeated(args: argparse.Namespace) -> str:
    if args.msg_id_column is not None:
        return f"The column {args.msg_id_column!r} (--msg-id-column) holds that id more than once."
    if args.msg_id_prefix is None and args.file_id == "content":
        return (
            "Files with the same content get the same ids (--file-id content); give "
            "--file-id quick to load each copy."
        )
    return "Another publisher gave the same ids to the stream while this load ran."


def _positive_seconds(text: str) -> float:
    """``--writer-lease``: seconds, more than 0."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds, more than 0")
    return seconds


_TTL_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|m|s)")


def _ttl_seconds(text: str) -> int:
    """``--ttl``: whole seconds as the publish's ``ttl`` column takes them (-1 for
    ``never``). A Go duration of hours, minutes and seconds as the server reads
    ``Nats-TTL`` (``90s``, ``5m``, ``1h30m``, ``1.5h``), or whole seconds."""
    text = text.strip()
    if text.lower() == "never":
        return -1
    if text.isdigit():
        seconds = float(text)
    else:
        parts = _TTL_PART.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a duration (e.g. 90s, 5m, 1h30m, 3600, never)"
            )
        per = {"h": 3600, "m": 60, "s": 1}
        seconds = sum(float(n) * per[u] for n, u in parts)
    if seconds < 1 or seconds != int(seconds):
        raise argparse.ArgumentTypeError(
            f"{text!r}: the server keeps a TTL in whole seconds, at least 1 (or 'never')"
        )
    return int(seconds)


def _ensure_stream(client: Any, args: argparse.Namespace) -> Any:
    try:
        return client.stream_info(args.stream)
    except NotFoundError:
        if not args.create_stream:
            raise CliError(
                f"stream {args.stream!r} does not exist; add --create-stream to create it "
                "(with --stream-subjects when the subjects come from --subject-column), "
                "or create it with `nats stream add`"
            ) from None
    subjects = args.stream_subjects or ([args.subject] if args.subject else None)
    if not subjects:
        raise UsageError(
            "--create-stream with --subject-column needs --stream-subjects, the subjects "
            "the new stream stores (e.g. --stream-subjects 'orders.>')"
        )
    config: dict[str, Any] = {"storage": args.storage or "file"}
    if args.ttl is not None:
        config["allow_msg_ttl"] = True
    if args.duplicate_window is not None:
        config["duplicate_window"] = args.duplicate_window
    # A new stream holds the files' positions, unless the load asked for none.
    client.create_stream(
        args.stream, subjects=subjects, exactly_once=args.exactly_once is not False, **config
    )
    if not args.quiet:
        print(f"created stream {args.stream} for subjects {', '.join(subjects)}", file=sys.stderr)
    return client.stream_info(args.stream)


def _load_file(
    client: Any,
    args: argparse.Namespace,
    f: LoadFile,
    batch_rows: int,
    totals: Totals,
    progress: Progress,
    started: float,
    last_seq_before: int,
) -> None:
    prefix = None
    first_id = 0
    file_id = ""
    if args.msg_id_column is None:
        progress.update(label=f"hashing {f.path.name}")
        file_id = file_identity(f.path, args.file_id)
        if args.msg_id_prefix is not None:
            # numbered across the files of this load, as if they were one file
            prefix = args.msg_id_prefix
            first_id = totals.rows
        else:
            prefix = f"ja-{file_id}-"
    label = f"load {f.path.name}"
    progress.update(label=label, fraction=0.0)
    # Files are read and converted in a thread while the previous batch is published.
    prefetch = ReadAhead(f.messages(batch_rows), name="jetstream-arrow-reader")

    # The file's first batch, kept to compare with what the stream holds when its rows
    # come back as duplicates of messages stored before this load.
    first_batch: list[pa.RecordBatch] = []
    compared = args.msg_id_column is not None  # the user's own ids: not compared

    def handed_over() -> Iterator[pa.RecordBatch]:
        # Runs as the publisher pulls the next batch: the whole file is one pipelined
        # publish, so the ack window never drains between batches.
        for messages, rows, nbytes, fraction in prefetch:
            if args.ttl is not None:
                # The publish's own `ttl` column: each row's Nats-TTL.
                ttl = pa.array([args.ttl] * messages.num_rows, pa.duration("s"))
                messages = messages.append_column("ttl", ttl)
            if not first_batch:
                first_batch.append(messages)
            totals.nbytes += nbytes
            totals.handed += rows
            progress.update(rows, nbytes, fraction)
            yield messages
            if args.max_rate is not None:
                ahead = totals.handed / args.max_rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)

    # The file row the next result starts at (a bad row's error counts from it).
    next_offset = 0
    publish_options: dict[str, Any] = {
        "subject": args.subject,
        "window": args.window,
        "ack_timeout": args.ack_timeout,
        "compression": args.compression,
    }
    once: NumberedRows | None = None
    repeated = False
    try:
        with contextlib.ExitStack() as stack:
            if args.exactly_once and prefix is not None:
                # The file is a writer, and its rows' numbers are its position (see
                # jetstream_arrow.exactly_once).
                writer = _writer(args, prefix, file_id, first_id)
                repeated = writer in totals.writers
                totals.writers.add(writer)
                once = NumberedRows(
                    client,
                    args.stream,
                    writer,
                    prefix,
                    start=first_id,
                    lease=args.writer_lease,
                    **publish_options,
                )
                results: Iterator[tuple[Any, int, bool]] = (
                    (sent.result, sent.first_row - first_id, sent.contiguous)
                    for sent in once.publish(handed_over())
                )
            else:
                publisher = stack.enter_context(
                    client.publisher(
                        msg_id_prefix=prefix,
                        msg_id_start=first_id,
                        raise_on_error=False,
                        **publish_options,
                    )
                )
                results = _offsets(
                    publisher.publish_batches(handed_over(), rows_per_result=ROWS_PER_RESULT)
                )
            while True:
                try:
                    result, row_offset, contiguous = next(results)
                except StopIteration:
                    break
                except KeyboardInterrupt as interrupted:
                    # The rows taken before Ctrl-C, acknowledged: counted in the
                    # message that tells the user where the load stopped.
                    taken = getattr(interrupted, "result", None)
                    if taken is not None:
                        totals.rows += taken.rows
                        totals.stored += taken.stored
                        totals.duplicates += taken.duplicates
                        totals.failed += taken.failed
                    raise
                except BadInputError as e:
                    # the engine counts rows from the first of the current result
                    where = (
                        f" (rows counted from row {next_offset} of the file)" if next_offset else ""
                    )
                    raise CliError(f"{f.path}{where}: {e}") from None
                totals.rows += result.rows
                totals.stored += result.stored
                totals.duplicates += result.duplicates
                next_offset = row_offset + result.rows
                if result.duplicates and contiguous:
                    _count_repeated(result, f, row_offset, last_seq_before, totals)
                    if not compared and first_batch:
                        compared = True
                        _compare_earlier_duplicate(
                            client, args, f, result, row_offset, first_batch[0], last_seq_before
                        )
                if result.failed:
                    totals.failed += result.failed
                    failed = result.failed_rows().slice(0, 5).to_pylist()
                    totals.failures.extend(
                        f"{f.path} row {row_offset + r['row']}: {r['error']}" for r in failed
                    )
                    return
    finally:
        prefetch.close()
        if once is not None:
            # Rows the stream held already (before the file's position, or found after
            # it): duplicates, as a re-run within the duplicate window reports them.
            totals.rows += once.skipped
            totals.duplicates += once.skipped
            if repeated and once.skipped and not totals.repeated:
                totals.first_repeated = (
                    f"{f.path} row 0, a file this load took before under the same ids"
                )
            if repeated:
                totals.repeated += once.skipped
    totals.files += 1


def _writer(args: argparse.Namespace, prefix: str, file_id: str, first_id: int) -> str:
    """A file's identity as an exactly-once writer: its ids' prefix, the file, and
    the options that shape its messages. The same file loaded with other options is
    another writer: its rows are sent, and the duplicate check of the ids (within
    the window) tells the user, as it always did."""
    shaping = {
        name: getattr(args, name, None)
        for name in (
            "subject",
            "subject_column",
            "format",
            "data_column",
            "headers_column",
            "csv_types",
            "delimiter",
            "ttl",
        )
    }
    digest = hashlib.sha256(json.dumps(shaping, sort_keys=True, default=str).encode())
    # With --msg-id-prefix the rows are numbered across the files from `first_id`:
    # numbered otherwise (other files before it), it is another writer.
    start = f" from {first_id}" if args.msg_id_prefix is not None else ""
    return f"load {prefix}{start} file {file_id} options {digest.hexdigest()[:16]}"


def _offsets(results: Iterator[Any]) -> Iterator[tuple[Any, int, bool]]:
    """Each result of one pipelined publish with the file row its rows start at."""
    offset = 0
    for result in results:
        yield result, offset, True
        offset += result.rows


def _exactly_once(client: Any, args: argparse.Namespace) -> bool:
    """Whether this load keeps its files' positions (see --exactly-once)."""
    if args.writer_lease is not None and args.exactly_once is False:
        raise UsageError(
            "--writer-lease is for a load that keeps positions; drop --no-exactly-once"
        )
    if args.msg_id_column is not None:
        if args.exactly_once:
            raise UsageError(
                "--exactly-once numbers each file's rows, and --msg-id-column gives them "
                "ids of their own, which a restart cannot find by number; drop one"
            )
        return False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ExactlyOnceUnavailableWarning)
        try:
            wanted = exactly_once_wanted(client, args.stream, args.exactly_once, "load")
        except BadInputError as e:
            raise UsageError(f"--exactly-once: {e}") from None
    for warning in caught:
        if not args.quiet:
            print(f"warning: {warning.message}", file=sys.stderr)
    return wanted


def _compare_earlier_duplicate(
    client: Any,
    args: argparse.Namespace,
    f: LoadFile,
    result: Any,
    row_offset: int,
    first_batch: pa.RecordBatch,
    last_seq_before: int,
) -> None:
    """A re-run finds its rows in the stream as they were sent. Rows dropped because
    the stream holds their id with other content (two loads that both chose
    --msg-id-prefix P) are data lost: the first such row of a file is compared with
    the stored message, one request per file."""
    acks = result.acks
    mask = pc.and_(
        pc.fill_null(acks["duplicate"], False),
        pc.fill_null(pc.less_equal(acks["seq"], last_seq_before), False),
    )
    found = int(pc.index(mask, True).as_py())
    row = row_offset + found
    if found < 0 or row >= first_batch.num_rows:
        return
    seq = int(acks["seq"][found].as_py())
    sent = first_batch.column("data")[row].as_py()
    sent = sent.encode() if isinstance(sent, str) else sent
    # Read as any read reads it (decompressed, as --compression sent it), with its
    # headers; nothing there: removed since (limits, a purge), nothing to compare with.
    try:
        found_rows = client.read(
            args.stream, start_seq=seq, end_seq=seq, include_headers=True
        ).read_all()
    except JetStreamArrowError:
        # Removed since (limits, a purge), or a read this user may not make: the
        # comparison is a courtesy, the rows' fate is in the acks.
        return
    if found_rows.num_rows == 0 or found_rows.column("seq")[0].as_py() != seq:
        return
    stored_data = found_rows.column("data")[0].as_py()
    stored_headers = dict(found_rows.column("headers")[0].as_py() or [])
    if args.ttl is not None:
        # The core sends the --ttl of a row as "<seconds>s", -1 as "never".
        sent_ttl: str | None = "never" if args.ttl == -1 else f"{args.ttl}s"
    else:
        sent_ttl = _row_header(first_batch, row, "Nats-TTL")
    same_ttl = (stored_headers.get("Nats-TTL") or [None])[-1] == sent_ttl
    if stored_data == sent and same_ttl:
        return
    if args.msg_id_prefix is not None:
        cause = (
            f"another load used --msg-id-prefix {args.msg_id_prefix!r}; give this load a "
            "prefix of its own"
        )
    else:
        cause = (
            "the same file was loaded before with other options (such as --csv-types, "
            "--data-column or --ttl); load it into another stream, or after the duplicate "
            "window"
        )
    raise CliError(
        f"{f.path} row {row} was not stored: the stream already holds its message id "
        f"at sequence {seq} with other content, so the server dropped it as a duplicate "
        f"({human_count(result.duplicates)} rows of this file so far). Probably {cause}."
    )


def _row_header(batch: pa.RecordBatch, row: int, name: str) -> str | None:
    """The last value of header ``name`` in the ``headers`` column of ``batch`` (the
    file's own, --headers-column), or None."""
    if "headers" not in batch.schema.names:
        return None
    found = None
    for key, value in batch.column("headers")[row].as_py() or []:
        if key == name:
            found = value[-1] if isinstance(value, list) and value else value
    return found if isinstance(found, str) else None


def _count_repeated(
    result: Any, f: LoadFile, row_offset: int, last_seq_before: int, totals: Totals
) -> None:
    """Count the duplicates whose original this load stored (its seq is newer than the
    stream's last when the load began)."""
    acks = result.acks
    mask = pc.and_(
        pc.fill_null(acks["duplicate"], False),
        pc.fill_null(pc.greater(acks["seq"], last_seq_before), False),
    )
    repeated = int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)
    if not repeated:
        return
    if not totals.repeated:
        row = int(pc.index(mask, True).as_py())
        seq = acks["seq"][row].as_py()
        totals.first_repeated = f"{f.path} row {row_offset + row}, the id of stream sequence {seq}"
    totals.repeated += repeated
