"""A partitioned Parquet dataset as a sink's target, made exactly-once by a manifest.

Layout under the dataset's directory: Hive-style partition directories
(``date=2026-11-27/subject_token_2=eu/``) holding ``part-<commit>-<uuid>.parquet``
files, and ``_jetstream_arrow_manifest.json``, the dataset's one source of truth::

    {"format": "jetstream-arrow parquet dataset", "version": 1,
     "partition_by": ["date"], "schema": "<Arrow IPC schema, base64>",
     "positions": {"ORDERS": 20000},
     "created": {"ORDERS": 1795000000123456789},
     "commits": [{"commit": 1, "rows": 5000, "files": ["date=2026-11-27/part-..."],
                  "positions": {"ORDERS": 5000}}, ...]}

A commit writes its files under temporary names (``.part-....parquet.tmp``), syncs
them and renames them, then writes the manifest the same way (a temporary file,
``os.replace``): a file is part of the dataset once, and only once, the manifest lists
it. Readers take the files the manifest lists (:func:`dataset_files`); a sink that
starts again first removes the leftovers of a commit it did not finish (files named as
it names them, in its partition directories, that the manifest does not list; other
files are left alone), and reads on after the positions the manifest holds. ``created``
holds when each stream was created (nanoseconds since the epoch), which tells it from
a stream deleted and made again under its name (``origin.py``); a manifest of an older
release has none, and gets it with its next commit.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..exceptions import BadInputError, JetStreamArrowError
from .rows import NULL_PARTITION, check_partition_by
from .target import LakeTarget, TargetCommit

MANIFEST = "_jetstream_arrow_manifest.json"
MANIFEST_FORMAT = "jetstream-arrow parquet dataset"
MANIFEST_VERSION = 1


def read_manifest(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The manifest of the dataset at ``root``, or None when nothing was committed."""
    path = Path(root) / MANIFEST
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    if manifest.get("format") != MANIFEST_FORMAT or manifest.get("version") != MANIFEST_VERSION:
        raise JetStreamArrowError(
            f"{path} is not a version {MANIFEST_VERSION} {MANIFEST_FORMAT} manifest"
        )
    return manifest


def dataset_files(root: str | os.PathLike[str]) -> list[str]:
    """The paths of the Parquet files of the dataset at ``root``: those its manifest
    lists, in commit order. Read these, not the directory: a file not listed belongs
    to a commit that did not finish."""
    manifest = read_manifest(root)
    if manifest is None:
        return []
    return [str(Path(root) / f) for c in manifest["commits"] for f in c["files"]]


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: The name of a data file a commit writes, and of its temporary file before it is
#: renamed: ``part-<commit, 8 digits>-<uuid4 hex>.parquet``.
_DATA_FILE = re.compile(
    r"^(?:part-\d{8}-[0-9a-f]{32}\.parquet|\.part-\d{8}-[0-9a-f]{32}\.parquet\.tmp)$"
)


def _is_partition_directory(parts: Sequence[str], partition_by: list[str] | None) -> bool:
    """Whether the directory ``parts`` (relative to the dataset's root) is one a
    commit writes its files into: one ``<column>=<value>`` level per partition column,
    in order (any partition columns a sink can write, when ``partition_by`` is None)."""
    columns = [part.partition("=")[0] for part in parts]
    if not all("=" in part for part in parts):
        return False
    if partition_by is not None:
        return columns == partition_by
    try:
        check_partition_by(columns, "partition directory")
    except BadInputError:
        return False
    return True


def _partition_value(value: Any) -> str:
    if value is None:
        return NULL_PARTITION
    text = value.isoformat() if isinstance(value, date) else str(value)
    # A token may hold characters a path cannot: escaped as Hive escapes them.
    return "".join(f"%{ord(c):02X}" if c in '/\\%=:*?"<>|' or ord(c) < 32 else c for c in text)


class ParquetTarget(LakeTarget):
    """A partitioned Parquet dataset in the directory ``path`` (made if missing)."""

    _kind = "dataset"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.root = Path(path)
        self._manifest: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"ParquetTarget({str(self.root)!r})"

    @property
    def identity(self) -> str:
        """The dataset, the same whatever directory the sink runs in: its absolute
        path."""
        return str(self.root.resolve())

    def _schema(self) -> pa.Schema | None:
        if self._manifest is None:
            return None
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(self._manifest["schema"])))

    def positions(self, streams: Sequence[str]) -> dict[str, int]:
        """The last sequence of each stream the dataset holds (0: none), once the
        files of any unfinished commit are removed."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._manifest = read_manifest(self.root)
        self._remove_unlisted()
        held = self._manifest["positions"] if self._manifest else {}
        return {s: int(held.get(s, 0)) for s in streams}

    def created(self, streams: Sequence[str]) -> dict[str, int | None]:
        """When each stream whose position the dataset holds was created, as recorded
        with it (nanoseconds since the epoch; None: nothing recorded), as
        :meth:`positions` read them."""
        held = (self._manifest or {}).get("created") or {}
        return {s: None if held.get(s) is None else int(held[s]) for s in streams}

    def _remove_unlisted(self) -> None:
        """Remove the files an unfinished commit left: only those named as this
        target names its files, in the partition directories it writes; whatever
        else shares the directory (another tool's ``part-00000-....snappy.parquet``)
        is not the sink's."""
        manifest = self._manifest or {}
        listed = {f for c in manifest.get("commits", []) for f in c["files"]}
        # Before the first commit the partitioning is not known yet: any of the
        # partition columns a sink can write, in any order.
        partition_by: list[str] | None = manifest.get("partition_by")
        partial_manifest = self.root / f".{MANIFEST}.tmp"
        if partial_manifest.is_file():
            partial_manifest.unlink()
        for path in self.root.rglob("*"):
            if not path.is_file() or not _DATA_FILE.match(path.name):
                continue
            relative = path.relative_to(self.root)
            if relative.as_posix() in listed:
                continue
            if _is_partition_directory(relative.parts[:-1], partition_by):
                path.unlink()

    def _location(self) -> str:
        return str(self.root)

    def _partitioning(self) -> list[str] | None:
        return None if self._manifest is None else list(self._manifest["partition_by"])

    def _write(self, commit: TargetCommit) -> None:
        """Write the commit's rows as new files, then list them, and the streams' new
        positions and creation times, in the manifest."""
        previous = self._manifest
        rows = commit.rows
        number = len(previous["commits"]) + 1 if previous else 1
        files = self._write_files(rows, number, commit.partition_by) if rows.num_rows else []
        held = dict(previous["positions"]) if previous else {}
        held.update(commit.positions)
        held_created = dict(previous.get("created") or {}) if previous else {}
        held_created.update(commit.created)
        manifest = {
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "partition_by": commit.partition_by,
            "schema": base64.b64encode(commit.schema.serialize().to_pybytes()).decode("ascii"),
            "positions": held,
            "created": held_created,
            "commits": [
                *(previous["commits"] if previous else []),
                {
                    "commit": number,
                    "rows": rows.num_rows,
                    "files": files,
                    "positions": commit.positions,
                },
            ],
        }
        partial = self.root / f".{MANIFEST}.tmp"
        partial.write_text(json.dumps(manifest, indent=1))
        _fsync(partial)
        os.replace(partial, self.root / MANIFEST)
        _fsync(self.root)
        self._manifest = manifest

    def _write_files(self, rows: pa.Table, number: int, partition_by: list[str]) -> list[str]:
        groups = (
            rows.group_by(partition_by, use_threads=False).aggregate([]).to_pylist()
            if partition_by
            else [{}]
        )
        written = []
        for values in groups:
            part = rows
            for column, value in values.items():
                if value is None:
                    part = part.filter(part.column(column).is_null())
                else:
                    part = part.filter(pc.equal(part.column(column), value))
            directory = self.root.joinpath(
                *(f"{c}={_partition_value(values[c])}" for c in partition_by)
            )
            directory.mkdir(parents=True, exist_ok=True)
            name = f"part-{number:08d}-{uuid.uuid4().hex}.parquet"
            partial = directory / f".{name}.tmp"
            # The partition columns stay in the file too, with their own types: a
            # reader that took a value from its directory's name alone would guess
            # its type (subject_token_2=007 read as the integer 7).
            pq.write_table(part, partial, compression="zstd")
            _fsync(partial)
            os.replace(partial, directory / name)
            _fsync(directory)
            written.append((directory / name).relative_to(self.root).as_posix())
        return written
