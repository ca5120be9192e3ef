"""``jetstream-arrow demo``: the main job, end to end, on this machine.

Starts a nats-server with JetStream (unless ``--servers`` names one), generates a data
set in Spark, writes it to a stream with ``df.write.format("jetstream")``, reads it
back with ``spark.read.format("jetstream")``, checks count and content, prints rows/s
for each step, and stops what it started.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
import tempfile
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ..embedded_server import EmbeddedServer
from ..exceptions import NotFoundError
from ..options import ConnectOptions
from .connection import add_connection_args, client_factory
from .errors import CliError, UsageError
from .progress import add_output_args, human_count, human_duration, human_rate

_T = TypeVar("_T")
_SUBJECTS = 8
# Spark logs only errors during the demo; its own output is the report.
_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# Spark treats a PySpark driver as a shell and announces a level for it (WARN) unless
# the shell's logger has one of its own.
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "demo",
        help="write and read 1M rows through Spark, check them, report rows/s",
        usage="%(prog)s [--rows N] [options]",
        description=textwrap.dedent(
            """\
            The main job, end to end: start nats-server with JetStream on a free port
            (unless --servers, --context or $NATS_URL names one), generate --rows rows in
            Spark, write them with df.write.format("jetstream"), read them back with
            spark.read.format("jetstream"), check count and content, print rows/s for
            each step, and stop what was started."""
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(handler=run)
    p.add_argument(
        "--rows", type=int, default=1_000_000, help="rows to generate (default %(default)s)"
    )
    p.add_argument("--stream", help="stream to create (default DEMO; with --servers a unique name)")
    p.add_argument("--master", default="local[2]", help="Spark master (default %(default)s)")
    p.add_argument(
        "--partitions",
        type=int,
        help="Spark partitions of the data set (default: cores, at least 2)",
    )
    p.add_argument(
        "--step-timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="give up on a Spark step (write, read, check) after this long (default %(default)g)",
    )
    p.add_argument(
        "--keep-stream",
        action="store_true",
        help="with --servers, keep the demo stream (default: delete it)",
    )
    add_connection_args(p)
    # Spark runs the steps; the demo has no progress line of its own to draw.
    add_output_args(p, progress=False)


def _say(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def _spark_preflight() -> None:
    """PySpark importable and a Java that Spark can run, or one line saying what is missing."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise CliError("the demo needs PySpark: pip install 'jetstream-arrow[spark]'") from None
    from ..spark.preflight import check_java

    check_java()


def _spark_session(master: str, partitions: int) -> Any:
    from pyspark.sql import SparkSession

    # Spark's Python workers must run this interpreter, which has jetstream_arrow.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Everything here is on loopback; this also silences Spark's hostname warning.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\..*")
    log_config = Path(tempfile.mkdtemp(prefix="jetstream-arrow-demo-")) / "log4j2.properties"
    log_config.write_text(_LOG4J)
    try:
        spark = (
            SparkSession.builder.master(master)
            .appName("jetstream-arrow demo")
            .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log_config}")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(partitions))
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .getOrCreate()
        )
    except Exception as e:  # no free port, a JVM that dies at start, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CliError(f"cannot start Spark ({master}): {first}") from None
    spark.sparkContext.setLogLevel("ERROR")
    try:
        from .. import spark as jetstream_spark

        register = getattr(jetstream_spark, "register", None)
        if register is not None:
            register(spark)
    except ImportError as e:
        spark.stop()
        raise CliError(
            f"the Spark data source jetstream_arrow.spark is not available: {e}"
        ) from None
    return spark


def _generated(spark: Any, rows: int, partitions: int) -> Any:
    from pyspark.sql import functions as F

    ids = spark.range(0, rows, numPartitions=partitions)
    return ids.select(
        F.concat(F.lit("demo."), (F.col("id") % _SUBJECTS).cast("string")).alias("subject"),
        F.to_json(
            F.struct(
                F.col("id"),
                F.concat(F.lit("customer-"), (F.col("id") % 9973).cast("string")).alias("customer"),
                (F.col("id") % 10000 / F.lit(100.0)).alias("amount"),
                F.when(F.col("id") % 3 == 0, F.lit("EUR"))
                .otherwise(F.lit("USD"))
                .alias("currency"),
            )
        ).alias("data"),
    )


def _fingerprint(df: Any) -> dict[str, Any]:
    """Count, sum of ids, subjects that match their id, and a checksum of every payload."""
    from pyspark.sql import functions as F

    data = F.col("data").cast("string")
    row_id = F.get_json_object(data, "$.id").cast("long")
    expected_subject = F.concat(F.lit("demo."), (row_id % _SUBJECTS).cast("string"))
    row = df.agg(
        F.count(F.lit(1)).alias("count"),
        F.sum(row_id).alias("id_sum"),
        F.countDistinct(row_id).alias("distinct_ids"),
        F.sum((F.col("subject") == expected_subject).cast("long")).alias("subjects_ok"),
        F.sum(F.crc32(F.col("data").cast("binary"))).alias("checksum"),
    ).collect()[0]
    fingerprint: dict[str, Any] = row.asDict()
    return fingerprint


def run(args: argparse.Namespace) -> int:
    from .. import connect

    connect_as_given = client_factory(args)
    if args.rows < 1:
        raise CliError("--rows must be at least 1")
    if not args.step_timeout > 0:
        raise UsageError("--step-timeout must be a positive number of seconds")
    quiet = args.quiet
    # Before any server starts: without Java the demo can only fail later.
    _spark_preflight()
    partitions = args.partitions or max(2, os.cpu_count() or 2)
    with ExitStack() as stack:
        if args.servers is None and args.context is None and not os.environ.get("NATS_URL"):
            _say("starting nats-server with JetStream ...", quiet)
            server = stack.enter_context(EmbeddedServer())
            url = server.url
            _say(f"  {url} (temporary store, removed at the end)", quiet)
            client = stack.enter_context(connect(url))
            stream = args.stream or "DEMO"
            options = {"servers": url}
        else:
            client = stack.enter_context(connect_as_given())
            stream = args.stream or f"JETSTREAM_ARROW_DEMO_{secrets.token_hex(4).upper()}"
            opts = client.options
            options = _spark_connect_options(opts)
            _say(f"using {opts.redacted()['servers']}", quiet)
        try:
            client.stream_info(stream)
            raise CliError(
                f"stream {stream!r} already exists; the demo writes into a new stream: "
                "give another --stream name"
            )
        except NotFoundError:
            pass
        # A stream that holds writers' positions: the write is exactly once at any age,
        # as writes into a new stream should be (docs/reliability.md).
        client.create_stream(stream, subjects=["demo.>"], exactly_once=True)
        if not args.keep_stream and args.servers is not None:
            stack.callback(_delete_stream, client, stream)
        _say(f"created stream {stream} (subjects demo.>, exactly once at any age)", quiet)

        _say(f"starting Spark ({args.master}) ...", quiet)
        started = time.monotonic()
        if quiet:
            # The JVM writes its start-up notices (incubator modules) to the stderr it
            # inherits: with --quiet that is a file, named if the demo fails.
            spark_output = Path(tempfile.mkdtemp(prefix="jetstream-arrow-demo-")) / "spark.log"
            with _stderr_to(spark_output):
                spark = _spark_session(args.master, partitions)
            stack.enter_context(_naming_on_failure(spark_output))
            stack.enter_context(_spark_reports_only_warnings())
        else:
            spark = _spark_session(args.master, partitions)
        stack.callback(spark.stop)
        _say(
            f"  Spark {spark.version} ready in {human_duration(time.monotonic() - started)}", quiet
        )

        df = _generated(spark, args.rows, partitions)
        _say(f"writing {human_count(args.rows)} rows through Spark ...", quiet)
        started = time.monotonic()
        writer = df.write.format("jetstream").mode("append").option("stream", stream)
        for key, value in options.items():
            writer = writer.option(key, value)
        _timed(spark, args.step_timeout, "writing the data set through Spark", writer.save)
        write_s = time.monotonic() - started
        stored = client.stream_info(stream).state.messages
        _report("write", args.rows, write_s, quiet)

        _say("reading the stream back through Spark ...", quiet)
        reader = spark.read.format("jetstream").option("stream", stream)
        for key, value in options.items():
            reader = reader.option(key, value)
        started = time.monotonic()
        got = _timed(
            spark,
            args.step_timeout,
            "reading the stream through Spark",
            lambda: _fingerprint(reader.load()),
        )
        read_s = time.monotonic() - started
        _report("read", got["count"], read_s, quiet)

        want = _timed(
            spark,
            args.step_timeout,
            "fingerprinting the generated data set",
            lambda: _fingerprint(df),
        )
        problems = []
        if stored != args.rows:
            problems.append(f"the stream holds {stored} messages, expected {args.rows}")
        for key, label in (
            ("count", "rows read"),
            ("distinct_ids", "distinct ids"),
            ("id_sum", "sum of ids"),
            ("subjects_ok", "rows on their expected subject"),
            ("checksum", "payload checksum"),
        ):
            if got[key] != want[key]:
                problems.append(f"{label}: read {got[key]}, wrote {want[key]}")
        if problems:
            raise CliError(
                "the data read back differs from what was written: " + "; ".join(problems)
            )
        if not quiet:
            print(
                f"check  ok: {human_count(args.rows)} rows, each id once, every payload and "
                "subject equal",
                flush=True,
            )
    return 0


def _spark_connect_options(opts: ConnectOptions) -> dict[str, Any]:
    """The connection as Spark options (the ConnectOptions fields in camelCase)."""
    default = ConnectOptions()
    out: dict[str, Any] = {}
    for name, value in opts.to_dict().items():
        if value is not None and (name == "servers" or value != getattr(default, name)):
            head, *rest = name.split("_")
            out[head + "".join(part.title() for part in rest)] = value
    return out


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Standard error (file descriptor 2, which child processes inherit) goes to ``path``."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "wb") as sink:
            os.dup2(sink.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextmanager
def _naming_on_failure(spark_output: Path) -> Iterator[None]:
    try:
        yield
    except CliError as e:
        raise type(e)(f"{e} (Spark's own output: {spark_output})") from e.__cause__


@contextmanager
def _spark_reports_only_warnings() -> Iterator[None]:
    """The data source reports each write on stderr (INFO); with --quiet only its
    warnings are shown."""
    log = logging.getLogger("jetstream_arrow.spark")
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("jetstream_arrow.spark: %(message)s"))
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)


def _timed(spark: Any, timeout: float, what: str, step: Callable[[], _T]) -> _T:
    """Run a Spark step; cancel its jobs and fail if it takes longer than ``timeout``."""
    expired = threading.Event()

    def cancel() -> None:
        expired.set()
        spark.sparkContext.cancelAllJobs()

    timer = threading.Timer(timeout, cancel)
    timer.daemon = True
    timer.start()
    try:
        result = step()
    except Exception as e:
        if expired.is_set():
            raise CliError(
                f"{what} did not finish within {timeout:g} s (--step-timeout); its Spark "
                "jobs were cancelled"
            ) from None
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CliError(f"{what} failed: {first}") from e
    finally:
        timer.cancel()
    # A deadline that passed before the step's Spark job started cancelled nothing:
    # the step ran to its end, and is still past the deadline.
    if expired.is_set():
        raise CliError(f"{what} did not finish within {timeout:g} s (--step-timeout)")
    return result


def _report(step: str, rows: int, seconds: float, quiet: bool) -> None:
    if quiet:
        return
    rate = rows / max(seconds, 1e-9)
    print(
        f"{step:<6} {human_count(rows)} rows through Spark in {seconds:.2f} s: "
        f"{human_rate(rate)} rows/s",
        flush=True,
    )


def _delete_stream(client: Any, stream: str) -> None:
    try:
        client.delete_stream(stream)
    except Exception as e:
        _say(f"could not delete the demo stream {stream}: {e}", quiet=False)
