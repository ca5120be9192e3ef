"""Read a NATS CLI context (``nats context add NAME ...``) as connect options.

A context is the JSON file ``$XDG_CONFIG_HOME/nats/context/<name>.json`` (default
``~/.config/nats/context/<name>.json``) written by the ``nats`` CLI. Its keys are
those of nats-io/jsm.go ``natscontext``: ``url``, ``user``, ``password``, ``token``,
``creds``, ``nkey`` (path of a seed file), ``cert``, ``key``, ``ca``, ``tls_first``,
``jetstream_domain``, ``jetstream_api_prefix``, ``inbox_prefix``, plus others this
package ignores (``description``, ``socks_proxy``, ``color_scheme``, ...). Paths
expand a leading ``~`` and ``$VARS`` as the nats CLI does; secret values may be given
as ``env://NAME`` or ``file://PATH`` references.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .exceptions import BadInputError

# context key -> ConnectOptions field (paths are expanded, secrets resolved)
_PATH_KEYS = {"creds": "creds", "cert": "tls_cert", "key": "tls_key", "ca": "tls_ca"}
_VALUE_KEYS = {
    "url": "servers",
    "user": "user",
    "password": "password",
    "token": "token",
    "jetstream_domain": "domain",
    "jetstream_api_prefix": "api_prefix",
    "inbox_prefix": "inbox_prefix",
}
_UNSUPPORTED = ("nsc", "user_jwt", "socks_proxy")


def context_dir() -> Path:
    """Where the nats CLI keeps contexts."""
    parent = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(parent) / "nats" / "context"


def selected_context() -> str | None:
    """The context selected with ``nats context select``, if any."""
    parent = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    try:
        name = (Path(parent) / "nats" / "context.txt").read_text().strip()
    except OSError:
        return None
    return name or None


def _expand_path(value: str) -> str:
    if value.startswith("file://"):
        value = value[len("file://") :]
    if value.startswith("~"):
        value = os.path.expanduser(value)
    return os.path.expandvars(value)


def _resolve_secret(key: str, value: str, name: str) -> str:
    if value.startswith("env://"):
        var = value[len("env://") :]
        resolved = os.environ.get(var)
        if not resolved:
            raise BadInputError(
                f"NATS context {name!r}: key {key!r} refers to environment variable "
                f"{var!r}, which is not set or empty"
            )
        return resolved
    if value.startswith("file://"):
        path = _expand_path(value)
        try:
            return Path(path).read_text().strip()
        except OSError as e:
            raise BadInputError(
                f"NATS context {name!r}: key {key!r} refers to {path!r}: {e.strerror}"
            ) from None
    if (
        "://" in value
        and key in ("password", "token")
        and value.split("://", 1)[0] in ("op", "nsc")
    ):
        raise BadInputError(
            f"NATS context {name!r}: key {key!r} uses a {value.split('://', 1)[0]}:// "
            "reference, which jetstream-arrow cannot resolve; give the value with "
            f"--{key} instead"
        )
    return value


def load_context(name: str, directory: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The connect options (``ConnectOptions`` field names) of context ``name``.

    Only keys set to a non-empty value are returned, so a caller can lay command
    line flags over them. ``name`` may also be the path of a context JSON file.
    """
    if name.endswith(".json") or os.sep in name:
        path = Path(_expand_path(name))
    else:
        if not name or ".." in name:
            raise BadInputError(f"invalid NATS context name {name!r}")
        path = (Path(directory) if directory is not None else context_dir()) / f"{name}.json"
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        where = path.parent
        known = sorted(p.stem for p in where.glob("*.json")) if where.is_dir() else []
        hint = f"known contexts: {', '.join(known)}" if known else f"no contexts in {where}"
        raise BadInputError(
            f"NATS context {name!r} not found (looked for {path}); {hint}. "
            "Create one with `nats context add NAME --server URL ...`"
        ) from None
    except OSError as e:
        raise BadInputError(f"cannot read NATS context file {path}: {e.strerror}") from None
    except ValueError as e:
        raise BadInputError(f"NATS context file {path} is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise BadInputError(f"NATS context file {path} does not hold a JSON object")

    options: dict[str, Any] = {}
    for key, field in _VALUE_KEYS.items():
        value = raw.get(key)
        if isinstance(value, str) and value:
            options[field] = _resolve_secret(key, value, name)
    for key, field in _PATH_KEYS.items():
        value = raw.get(key)
        if isinstance(value, str) and value:
            options[field] = _expand_path(value)
    nkey = raw.get("nkey")
    if isinstance(nkey, str) and nkey:
        nkey_path = _expand_path(nkey)
        try:
            options["nkey_seed"] = Path(nkey_path).read_text().strip()
        except OSError as e:
            raise BadInputError(
                f"NATS context {name!r}: cannot read the nkey seed file {nkey_path!r}: {e.strerror}"
            ) from None
    if raw.get("tls_first") is True:
        options["tls_first"] = True
    for key in _UNSUPPORTED:
        if raw.get(key):
            raise BadInputError(
                f"NATS context {name!r} sets {key!r}, which jetstream-arrow does not "
                "support; give the connection with flags (--servers, --creds, ...) instead"
            )
    return options
