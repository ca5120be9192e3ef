"""The requirements the README and docs/development.md list, checked as a user meets
them: without Java the Spark paths say in one line what to install; a worker interpreter
without the package is named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jetstream_arrow.exceptions import SparkSetupError
from jetstream_arrow.spark import preflight

pytestmark = pytest.mark.timeout(120)


def env_without_java(tmp_path: Path, fake_java: str | None = None) -> dict[str, str]:
    """This interpreter's environment with no ``java`` on PATH and no JAVA_HOME; with
    ``fake_java``, a ``java`` that runs that shell script instead."""
    tools = tmp_path / "tools"
    tools.mkdir()
    if fake_java is not None:
        java = tools / "java"
        java.write_text("#!/bin/sh\n" + fake_java)
        java.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    # The interpreter's own directory (the venv: python, nats-server) and the fake tools.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(tools)])
    return env


def test_the_preflight_finds_this_machines_java() -> None:
    assert preflight.java_problem() is None


def test_without_java_the_check_prints_one_line_naming_what_to_install(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "jetstream_arrow.spark"],
        env=env_without_java(tmp_path),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "Java 17 or newer" in lines[0]
    assert "openjdk-17-jre-headless" in lines[0]
    assert "JAVA_HOME" in lines[0]


def test_without_java_the_demo_fails_in_one_line_before_starting_anything(
    tmp_path: Path,
) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "jetstream_arrow", "demo", "--rows", "10"],
        env=env_without_java(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("jetstream-arrow demo: error: Spark needs Java 17 or newer")
    assert "Traceback" not in run.stderr


def test_an_old_java_is_named_with_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = env_without_java(tmp_path, fake_java="echo 'java version \"1.8.0_392\"' >&2\n")
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.delenv("JAVA_HOME", raising=False)
    problem = preflight.java_problem()
    assert problem is not None
    assert "is Java 8" in problem
    with pytest.raises(SparkSetupError, match="Java 17 or newer"):
        preflight.check_java()


def test_a_worker_interpreter_without_the_package_is_named(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = str(bare / "bin" / "python")
    problem = preflight.worker_python_problem(python)
    assert problem is not None
    assert python in problem
    assert "cannot import jetstream_arrow" in problem
    assert "PYSPARK_PYTHON" in problem
    assert "\n" not in problem
    assert preflight.worker_python_problem(sys.executable) is None
    missing = preflight.worker_python_problem("no-such-python-here")
    assert missing is not None and "does not exist" in missing
