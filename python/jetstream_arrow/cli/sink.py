"""``jetstream-arrow sink``: land streams into a Delta Lake table or a partitioned
Parquet dataset exactly once, until caught up or following the streams."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import connect
from .._core import DEFAULT_READ_BATCH_ROWS, DEFAULT_WRITER_LEASE, VALUE_FORMATS
from ..codec import ValueCodec
from ..exceptions import BadInputError, NotFoundError
from ..sink import (
    DEFAULT_COMMIT_ROWS,
    DEFAULT_COMMIT_SECONDS,
    DEFAULT_RESUME_TIMEOUT,
    MAX_COMMIT_ROWS,
    MAX_COMMIT_SECONDS,
    DeltaTarget,
    ParquetTarget,
    SinkProgress,
    run_sink,
)
from ..sink.queue import QUEUE_RETENTIONS
from ..sink.rows import PARTITION_HELP, check_partition_by
from . import value_schema
from .connection import add_connection_args, connect_options
from .errors import CliError, UsageError
from .progress import Progress, add_output_args, human_count, human_duration, human_rate

_EPILOG = f"""\
columns:
  stream, subject, seq, timestamp (and headers with --include-headers), then the
  payload: with --value-format, its decoded fields (a field named like a message
  column lands as value_<name>); without, the bytes as column data.

exactly once:
  each commit holds its rows and the last sequence of each stream they reach: in a
  Delta table, an app transaction 'jetstream-arrow:<stream>' in the same commit; in a
  Parquet dataset, its manifest (_jetstream_arrow_manifest.json), which lists the
  files readers may read. A sink started again reads on from there: stop it, kill
  it, run it again; no row is written twice or skipped.

work queues:
  a stream with workqueue or interest retention is consumed through the durable
  pull consumer --durable NAME, each message acknowledged after the commit that
  holds it; one delivered again at or below the table's position is acknowledged
  and not landed twice. One sink per consumer.

--partition-by: comma-separated {PARTITION_HELP}.
JSON values are decoded with the schema a load recorded in the stream's metadata,
else one inferred from the first messages read. Commits every {DEFAULT_COMMIT_ROWS:,}
rows or {DEFAULT_COMMIT_SECONDS:g} seconds by default. SIGTERM or Ctrl-C: the sink
commits what it has read, then stops.

outages:
  each call to the server waits up to --resume-timeout seconds while the server does
  not answer (restarting, cut off); with --follow the connection reconnects without
  limit, so a following sink outlives a server's restart.
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "sink",
        help="land streams into a Delta Lake table or a partitioned Parquet dataset, exactly once",
        usage="%(prog)s STREAM [STREAM ...] (--delta PATH | --parquet DIR) [options]",
        description="Land the messages of each STREAM into a lake table, exactly once.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(handler=run)
    p.add_argument("streams", nargs="+", metavar="STREAM")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--delta", metavar="PATH", help="a Delta Lake table (made if missing)")
    where.add_argument(
        "--parquet", metavar="DIR", help="a partitioned Parquet dataset (made if missing)"
    )
    until = p.add_mutually_exclusive_group()
    until.add_argument(
        "--until-caught-up",
        action="store_true",
        help="stop at each stream's last sequence when the sink starts (the default)",
    )
    until.add_argument(
        "--follow", action="store_true", help="keep landing new messages until stopped"
    )
    p.add_argument(
        "--subject",
        action="append",
        metavar="STREAM=FILTER",
        help="only these subjects of STREAM (wildcards allowed; repeat for more)",
    )
    p.add_argument(
        "--commit-rows",
        type=int,
        default=DEFAULT_COMMIT_ROWS,
        metavar="N",
        help=f"commit every N rows (default %(default)s, at most {MAX_COMMIT_ROWS:,})",
    )
    p.add_argument(
        "--commit-seconds",
        type=float,
        default=DEFAULT_COMMIT_SECONDS,
        metavar="T",
        help=f"commit T seconds after the first row read (default %(default)g, "
        f"at most {MAX_COMMIT_SECONDS:g})",
    )
    p.add_argument(
        "--value-format",
        choices=VALUE_FORMATS,
        help="decode payloads into typed columns (default: land them as bytes)",
    )
    p.add_argument(
        "--avro-schema",
        metavar="FILE",
        help="--value-format avro: the Avro schema (a .avsc file, or its JSON text)",
    )
    p.add_argument(
        "--protobuf-descriptor",
        metavar="FILE",
        help="--value-format protobuf: the descriptor set "
        "(protoc --include_imports --descriptor_set_out=FILE)",
    )
    p.add_argument(
        "--protobuf-message",
        metavar="NAME",
        help="--value-format protobuf: the message's full name (package.Message)",
    )
    p.add_argument("--include-headers", action="store_true", help="add a headers column")
    p.add_argument("--partition-by", metavar="P,...", help="partition columns (see below)")
    p.add_argument(
        "--dead-letter-stream",
        metavar="NAME",
        help="publish payloads that do not decode to this stream and go on "
        "(default: such a payload stops the sink); each once at any age where the "
        "stream holds writers' positions (jetstream-arrow streams enable-exactly-once)",
    )
    p.add_argument(
        "--dead-letter-lease",
        type=float,
        metavar="SECONDS",
        help="how long the sink's dead-letter position claims it: a sink started after "
        "one that died waits until then before its first dead letters (default "
        f"{DEFAULT_WRITER_LEASE:g})",
    )
    p.add_argument(
        "--batch-rows",
        type=int,
        default=DEFAULT_READ_BATCH_ROWS,
        metavar="N",
        help="rows per read batch (default %(default)s, at most --commit-rows)",
    )
    p.add_argument(
        "--durable",
        metavar="NAME",
        help="the durable pull consumer a workqueue or interest stream is landed "
        "through (made if missing; each message acknowledged after its commit)",
    )
    p.add_argument(
        "--resume-timeout",
        type=float,
        default=DEFAULT_RESUME_TIMEOUT,
        metavar="SECONDS",
        help="how long each call waits for a server that does not answer before the "
        "sink fails (default %(default)g)",
    )
    add_connection_args(p)
    add_output_args(p)


def _subject_filters(given: list[str] | None, streams: list[str]) -> dict[str, list[str]]:
    filters: dict[str, list[str]] = {}
    for item in given or []:
        stream, sep, subject = item.partition("=")
        if not sep or not subject:
            raise UsageError(f"--subject {item!r}: give STREAM=FILTER, e.g. ORDERS=orders.eu.>")
        if stream not in streams:
            raise UsageError(f"--subject {item!r}: {stream!r} is not one of the streams sunk")
        filters.setdefault(stream, []).append(subject)
    return filters


def _format_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The codec settings of ``--value-format``'s own flags; a flag of another format
    is refused, naming it."""
    own = {
        "--avro-schema": ("avro", args.avro_schema),
        "--protobuf-descriptor": ("protobuf", args.protobuf_descriptor),
        "--protobuf-message": ("protobuf", args.protobuf_message),
    }
    for flag, (fmt, value) in own.items():
        if value is not None and args.value_format != fmt:
            raise UsageError(
                f"{flag} is for --value-format {fmt}, not "
                f"{args.value_format or 'none (payloads land as bytes)'}"
            )
    settings: dict[str, Any] = {}
    if args.value_format == "avro":
        if args.avro_schema is None:
            raise UsageError("--value-format avro needs --avro-schema")
        text = args.avro_schema
        if not text.lstrip().startswith(("{", "[", '"')):
            try:
                text = Path(text).read_text()
            except OSError as e:
                raise CliError(f"--avro-schema: cannot read {text!r}: {e.strerror}") from None
        try:
            json.loads(text)
        except ValueError as e:
            raise UsageError(f"--avro-schema: not JSON: {e}") from None
        settings["avro_schema"] = text
    if args.value_format == "protobuf":
        if args.protobuf_descriptor is None or args.protobuf_message is None:
            raise UsageError(
                "--value-format protobuf needs --protobuf-descriptor and --protobuf-message"
            )
        settings["protobuf_descriptor"] = args.protobuf_descriptor
        settings["protobuf_message"] = args.protobuf_message
    return settings


def _codec(args: argparse.Namespace, info: Any, settings: dict[str, Any]) -> ValueCodec | None:
    if args.value_format is None:
        return None
    try:
        if args.value_format == "json":
            # As an export decodes a loaded stream: with the table's own types.
            return ValueCodec("json", schema=value_schema.recorded(info))
        return ValueCodec(args.value_format, **settings)
    except BadInputError as e:
        if "protobuf_descriptor" in e.options:
            raise CliError(f"--protobuf-descriptor: {e}") from None
        raise CliError(str(e)) from None


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT (Ctrl-C) set ``stop``: the sink commits what it has read,
    then returns."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def handle(signum: int, frame: Any) -> None:
        stop.set()

    for s in previous:
        signal.signal(s, handle)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.commit_rows <= MAX_COMMIT_ROWS:
        raise UsageError(
            f"--commit-rows {args.commit_rows}: give 1 to {MAX_COMMIT_ROWS:,} rows per commit"
        )
    if not 0 < args.commit_seconds <= MAX_COMMIT_SECONDS:
        raise UsageError(
            f"--commit-seconds {args.commit_seconds:g}: give more than 0 and at most "
            f"{MAX_COMMIT_SECONDS:g} seconds"
        )
    if args.batch_rows < 1:
        raise UsageError(f"--batch-rows {args.batch_rows}: give at least 1")
    if args.dead_letter_lease is not None:
        if args.dead_letter_stream is None:
            raise UsageError("--dead-letter-lease is for --dead-letter-stream")
        if not args.dead_letter_lease > 0:
            raise UsageError(
                f"--dead-letter-lease {args.dead_letter_lease:g}: give more than 0 seconds"
            )
    if not args.resume_timeout > 0:
        raise UsageError(f"--resume-timeout {args.resume_timeout:g}: give more than 0 seconds")
    if args.dead_letter_stream in args.streams:
        raise UsageError(
            f"--dead-letter-stream {args.dead_letter_stream}: is one of the streams sunk "
            "(its dead letters would be read back and fail again)"
        )
    if len(set(args.streams)) != len(args.streams):
        raise UsageError(f"a STREAM is named twice: {' '.join(args.streams)}")
    try:
        partition_by = check_partition_by(
            [p for p in (args.partition_by or "").split(",") if p], "--partition-by"
        )
    except BadInputError as e:
        raise UsageError(str(e)) from None
    filters = _subject_filters(args.subject, args.streams)
    settings = _format_settings(args)
    options = connect_options(args)
    if args.follow:
        # A following sink runs until stopped: its connection must not give up on a
        # server that is down longer than its reconnect attempts last.
        options = dataclasses.replace(options, max_reconnects=None)
    target = DeltaTarget(args.delta) if args.delta else ParquetTarget(args.parquet)
    where = args.delta or args.parquet
    progress = Progress(f"sink to {where}", enabled=args.progress)
    stop = threading.Event()

    def show(state: SinkProgress) -> None:
        lag = sum(state.lag.values())
        label = f"sink to {where}  lag {human_count(lag)}"
        if state.dead_letters:
            label += f"  {human_count(state.dead_letters)} dead letters"
        progress.update(state.rows - progress.rows, state.bytes - progress.bytes, None, label)

    with connect(options=options) as client:
        codecs: dict[str, ValueCodec | str | None] = {}
        queued: list[str] = []
        for stream in args.streams:
            try:
                info = client.stream_info(stream, resume_timeout=args.resume_timeout)
            except NotFoundError:
                raise CliError(f"stream {stream!r} does not exist") from None
            codecs[stream] = _codec(args, info, settings)
            retention = info.config.retention
            if retention in QUEUE_RETENTIONS:
                queued.append(stream)
                if args.durable is None:
                    raise UsageError(
                        f"stream {stream} has {retention} retention: its messages go once "
                        "acknowledged, so it is landed through a durable consumer; give "
                        "--durable NAME (made if missing)"
                    )
        if args.durable is not None and not queued:
            raise UsageError(
                f"--durable {args.durable}: no STREAM has workqueue or interest retention "
                "(streams with limits retention are read by range, with no consumer)"
            )
        if args.dead_letter_stream is not None:
            try:
                client.stream_info(args.dead_letter_stream, resume_timeout=args.resume_timeout)
            except NotFoundError:
                raise CliError(
                    f"--dead-letter-stream {args.dead_letter_stream!r}: no such stream; "
                    "create it (with a duplicate window longer than a commit takes)"
                ) from None
        try:
            with _stop_on_signals(stop):
                report = run_sink(
                    client,
                    args.streams,
                    target,
                    follow=args.follow,
                    subjects=filters,
                    codec=codecs,
                    include_headers=args.include_headers,
                    partition_by=partition_by,
                    commit_rows=args.commit_rows,
                    commit_seconds=args.commit_seconds,
                    dead_letter_stream=args.dead_letter_stream,
                    dead_letter_lease=args.dead_letter_lease,
                    batch_rows=args.batch_rows,
                    durable=args.durable,
                    resume_timeout=args.resume_timeout,
                    stop=stop,
                    on_progress=show,
                )
        finally:
            progress.clear()
    if not args.quiet:
        seconds = max(report.seconds, 1e-9)
        positions = ", ".join(f"{s} at {seq}" for s, seq in report.positions.items())
        dead = (
            f", {human_count(report.dead_letters)} dead letters" if args.dead_letter_stream else ""
        )
        how = "stopped" if report.stopped else "caught up"
        print(
            f"sank {human_count(report.rows)} rows in {report.commits} commits to {where}{dead} "
            f"in {human_duration(seconds)} ({human_rate(report.rows / seconds)} rows/s); "
            f"{how}: {positions}"
        )
    return 0
