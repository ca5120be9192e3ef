"""``jetstream-arrow load``: publish the rows of files into a stream."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from .._core import DEFAULT_ACK_TIMEOUT, DEFAULT_WINDOW
from .._read_ahead import ReadAhead
from ..exceptions import BadInputError, NotFoundError
from .connection import add_connection_args, client_factory
from .errors import CliError, UsageError
from .messages import MessageBuilder
from .progress import Progress, add_output_args, human_count, human_duration, human_rate
from .sources import FORMATS, InputFile, file_identity, guess_format
from .streams import check_subject_in_stream, describe_duplicate_window

# Rows read, converted and handed to the publisher at a time (the CLI's own choice:
# large enough to amortise each call, small enough that three fit in memory).
BATCH_ROWS = 32768

_EPILOG = """\
message contents:
  subject  --subject SUBJ for every row, or --subject-column C per row
  data     --data-column C as is (binary or text; other types as their text), or, without
           it, each row as one JSON object of all its columns except the headers and
           msg-id columns (built with Arrow kernels, about 0.5 M rows/s a core)
  headers  --headers-column C: a map, a struct, or text holding a JSON object per row
  msg id   --msg-id-column C, else "ja-<file id>-<row number>"

re-runs store each row once:
  Without --msg-id-column every message gets the id ja-<file id>-<row number>, so
  running the same load again (after a crash, Ctrl-C or a failure) publishes the same
  ids and the server drops the rows it already has. The file id is --file-id:
    content  SHA-256 of the file's size and bytes (default; reads the file once more
             first, at disk speed; a moved or re-downloaded copy keeps its id)
    quick    SHA-256 of the absolute path, size and modification time (no extra read)
  The server deduplicates within the stream's duplicate window (default 2 minutes):
  re-run within it, or create the stream with a longer --duplicate-window.

memory:
  Files are read a batch at a time (parquet: by row group pages; csv/jsonl: 8 MiB
  blocks; arrow: memory-mapped batches); at most three batches are in memory, and
  --window messages are in flight.
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
        default="file",
        help="storage of a stream made by --create-stream (default %(default)s)",
    )
    p.add_argument(
        "--duplicate-window",
        type=float,
        metavar="SECONDS",
        help="duplicate window of a stream made by --create-stream (server default 120)",
    )
    p.add_argument(
        "--delimiter", default=",", metavar="CHAR", help="CSV field delimiter (default %(default)s)"
    )
    p.add_argument(
        "--batch-rows",
        type=int,
        default=BATCH_ROWS,
        metavar="N",
        help="rows per published batch (default %(default)s)",
    )
    p.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW,
        metavar="N",
        help="messages in flight awaiting their ack (default %(default)s)",
    )
    p.add_argument(
        "--ack-timeout",
        type=float,
        default=DEFAULT_ACK_TIMEOUT,
        metavar="SECONDS",
        help="how long to wait for each ack before retrying it (default %(default)g)",
    )
    p.add_argument(
        "--max-rate",
        type=float,
        metavar="ROWS_PER_S",
        help="publish at most this many rows a second",
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
    failures: list[str] = field(default_factory=list)


def _converted(
    file: InputFile, builder: MessageBuilder, batch_rows: int
) -> Iterator[tuple[pa.RecordBatch, int, int, float | None]]:
    for batch, fraction in file.batches(batch_rows):
        messages, nbytes = builder(batch)
        yield messages, batch.num_rows, nbytes, fraction


def run(args: argparse.Namespace) -> int:
    connect = client_factory(args)
    if args.batch_rows < 1:
        raise UsageError("--batch-rows must be at least 1")
    if args.window < 1:
        raise UsageError("--window must be at least 1")
    if args.max_rate is not None and args.max_rate <= 0:
        raise UsageError("--max-rate must be a positive number of rows per second")
    if args.data_column and args.data_column in (args.headers_column, args.msg_id_column):
        raise UsageError("--data-column must differ from --headers-column and --msg-id-column")
    files = [
        InputFile(Path(p), guess_format(p, args.format), csv_delimiter=args.delimiter)
        for p in args.files
    ]
    # Check every file and its columns before anything is published.
    builders = []
    for f in files:
        f.check_readable()
        builders.append(
            MessageBuilder(
                f.schema(),
                source=str(f.path),
                subject_column=args.subject_column,
                data_column=args.data_column,
                headers_column=args.headers_column,
                msg_id_column=args.msg_id_column,
            )
        )

    out = sys.stdout
    batch_rows = args.batch_rows
    if args.max_rate is not None:
        # small batches keep a throttled load smooth
        batch_rows = max(1, min(batch_rows, int(args.max_rate // 10) or 1))

    with connect() as client:
        info = _ensure_stream(client, args)
        if args.subject is not None:
            check_subject_in_stream(args.subject, info)
        if args.msg_id_column is None and not args.quiet:
            print(
                f"re-running this load stores no row twice {describe_duplicate_window(info)}",
                file=sys.stderr,
            )
        totals = Totals()
        started = time.monotonic()
        progress = Progress("load", enabled=args.progress)
        try:
            for f, builder in zip(files, builders, strict=True):
                _load_file(client, args, f, builder, batch_rows, totals, progress, started)
                if totals.failed:
                    break
        except KeyboardInterrupt:
            progress.clear()
            print(
                f"interrupted: {human_count(totals.stored + totals.duplicates)} rows were "
                "acknowledged. Run the same command again to finish: rows already stored "
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
    config: dict[str, Any] = {"storage": args.storage}
    if args.duplicate_window is not None:
        config["duplicate_window"] = args.duplicate_window
    client.create_stream(args.stream, subjects=subjects, **config)
    if not args.quiet:
        print(f"created stream {args.stream} for subjects {', '.join(subjects)}", file=sys.stderr)
    return client.stream_info(args.stream)


def _load_file(
    client: Any,
    args: argparse.Namespace,
    f: InputFile,
    builder: MessageBuilder,
    batch_rows: int,
    totals: Totals,
    progress: Progress,
    started: float,
) -> None:
    prefix = None
    if args.msg_id_column is None:
        if args.msg_id_prefix is not None:
            prefix = args.msg_id_prefix
        else:
            progress.update(label=f"hashing {f.path.name}")
            prefix = f"ja-{file_identity(f.path, args.file_id)}-"
    label = f"load {f.path.name}"
    progress.update(label=label, fraction=0.0)
    row_offset = 0
    # Files are read and converted in a thread while the previous batch is published.
    prefetch = ReadAhead(_converted(f, builder, batch_rows), name="jetstream-arrow-reader")
    try:
        with client.publisher(
            subject=args.subject,
            window=args.window,
            ack_timeout=args.ack_timeout,
            msg_id_prefix=prefix,
            msg_id_start=0,
            raise_on_error=False,
        ) as publisher:
            for messages, rows, nbytes, fraction in prefetch:
                try:
                    result = publisher.publish(messages)
                except BadInputError as e:
                    raise CliError(
                        f"{f.path}: rows {row_offset}..{row_offset + rows - 1}: {e}"
                    ) from None
                totals.rows += rows
                totals.stored += result.stored
                totals.duplicates += result.duplicates
                totals.nbytes += nbytes
                progress.update(rows, nbytes, fraction)
                if result.failed:
                    totals.failed += result.failed
                    failed = result.failed_rows().slice(0, 5).to_pylist()
                    totals.failures.extend(
                        f"{f.path} row {row_offset + r['row']}: {r['error']}" for r in failed
                    )
                    return
                row_offset += rows
                if args.max_rate is not None:
                    ahead = totals.rows / args.max_rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
    finally:
        prefetch.close()
    totals.files += 1
