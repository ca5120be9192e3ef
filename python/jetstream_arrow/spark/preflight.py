"""Checks made on the driver before Spark runs anything: Java, and the workers' Python.

Both failures otherwise surface late and far from their cause: a missing Java as a
``JAVA_GATEWAY_EXITED`` trace when the session starts, a worker interpreter without
this package as ``ModuleNotFoundError`` inside every task (Spark starts its Python
workers with ``PYSPARK_PYTHON``, else ``python3`` from PATH, not with the driver's
interpreter). Each check here says in one line what is wrong and what to do.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Any

from ..exceptions import SparkSetupError

#: Spark 4 runs on Java 17 and newer.
MIN_JAVA = 17

#: How long ``<interpreter> -c "import jetstream_arrow"`` may take (a cold pyarrow
#: import on a busy machine takes a few seconds).
IMPORT_CHECK_TIMEOUT = 60.0

_JAVA_HINT = (
    f"Spark needs Java {MIN_JAVA} or newer: install a JDK or JRE "
    f"(e.g. `apt-get install openjdk-{MIN_JAVA}-jre-headless`) and put `java` on PATH "
    "or set JAVA_HOME"
)

# Interpreters already seen to import the package, so a job checks each once.
_checked_interpreters: set[str] = set()


def find_java() -> str | None:
    """The ``java`` Spark will start: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def probe_java() -> tuple[str | None, str | None]:
    """(the Java Spark would start, as ``Java <version> (<path>)``, None) when Spark
    can start a JVM here, else (None, one line saying why not)."""
    java = find_java()
    if java is None:
        where = "JAVA_HOME/bin/java" if os.environ.get("JAVA_HOME") else "no `java` on PATH"
        return None, f"{_JAVA_HINT} ({where})"
    try:
        probe = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=IMPORT_CHECK_TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{_JAVA_HINT} ({java} -version failed: {e})"
    # `java -version` writes e.g. `openjdk version "17.0.9"` or `"1.8.0_392"` to stderr.
    found = re.search(r'version "((\d+)(?:\.(\d+))?[^"]*)"', probe.stderr + probe.stdout)
    if found is None:
        return None, f"{_JAVA_HINT} ({java} -version printed no version)"
    major = int(found.group(2))
    if major == 1 and found.group(3):
        major = int(found.group(3))
    if major < MIN_JAVA:
        return None, f"{_JAVA_HINT} ({java} is Java {major})"
    return f"Java {found.group(1)} ({java})", None


def java_problem() -> str | None:
    """One line saying why Spark cannot start a JVM here, or None when it can."""
    return probe_java()[1]


def check_java() -> None:
    """Raise [`SparkSetupError`][] unless a Java that Spark can run is here."""
    problem = java_problem()
    if problem:
        raise SparkSetupError(problem)


def is_connect_session(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect client session (``builder.remote(...)``).

    Its Python workers run beside the Spark Connect server, which this process cannot
    inspect (the session has no ``sparkContext``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def worker_python(spark: Any) -> str:
    """The interpreter Spark starts for Python workers of this session's jobs.

    It is fixed when the SparkContext starts, from ``PYSPARK_PYTHON`` (which
    ``spark-submit`` sets from ``spark.pyspark.python``), else ``python3``.
    """
    exec_name = getattr(spark.sparkContext, "pythonExec", None)
    return str(exec_name or os.environ.get("PYSPARK_PYTHON") or "python3")


def worker_python_problem(interpreter: str) -> str | None:
    """One line saying why ``interpreter`` cannot run this package's Spark code."""
    path = shutil.which(interpreter)
    origin = (
        f"{interpreter!r}"
        if os.sep in interpreter
        else f"{interpreter!r} from PATH ({path or 'not found'})"
    )
    hint = (
        "set PYSPARK_PYTHON (spark.pyspark.python with spark-submit) to an interpreter "
        "that has jetstream-arrow installed, e.g. the one running this driver"
    )
    if path is None:
        return f"Spark's Python workers would run {origin}, which does not exist: {hint}"
    try:
        probe = subprocess.run(
            [path, "-c", "import jetstream_arrow"],
            capture_output=True,
            text=True,
            timeout=IMPORT_CHECK_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"Spark's Python workers would run {origin}, which failed to start ({e}): {hint}"
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["import failed"])[-1]
        return f"Spark's Python workers would run {origin}, which cannot import jetstream_arrow ({last}): {hint}"
    return None


def check_worker_python(spark: Any | None = None) -> None:
    """Raise [`SparkSetupError`][] when the workers of ``spark`` (default: the active
    session, if any) cannot import this package. Each interpreter is checked once.

    A Spark Connect session is not checked: its workers run in the server's Python
    environment, out of this process's sight (a server without the package fails the
    query with ``DATA_SOURCE_NOT_FOUND`` or a ``ModuleNotFoundError``)."""
    if spark is None:
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            return
        spark = SparkSession.getActiveSession()
        if spark is None:
            return
    if is_connect_session(spark):
        return
    interpreter = worker_python(spark)
    if interpreter in _checked_interpreters:
        return
    problem = worker_python_problem(interpreter)
    if problem:
        raise SparkSetupError(problem)
    _checked_interpreters.add(interpreter)


def main() -> int:
    """Print why Spark could not start a JVM here and return 1, or print the Java and
    the pyspark found and return 0: one line either way."""
    found, problem = probe_java()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    import pyspark

    print(f"{found} and pyspark {pyspark.__version__} found: Spark can start here")
    return 0
