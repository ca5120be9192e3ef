"""Input files read as a stream of record batches, in bounded memory.

- parquet: one row group's pages at a time (``ParquetFile.iter_batches``, no pre-buffer)
- csv: ``pyarrow.csv.open_csv``, a block at a time
- jsonl: ``pyarrow.json.open_json``, a block at a time (the first block fixes the columns)
- arrow: IPC file format, memory-mapped, a record batch at a time; or IPC stream format

Compressed csv/jsonl (``.gz``, ``.bz2``, ``.zst``, ``.lz4``) are decompressed on the fly.
Every batch is at most ``batch_rows`` rows (larger ones are sliced, without copying).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from .errors import CliError, UsageError

FORMATS = ("parquet", "csv", "jsonl", "arrow")
_EXTENSIONS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".arrow": "arrow",
    ".arrows": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
}
_COMPRESSION = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".lz4": "lz4"}
_BLOCK_SIZE = 8 << 20  # csv/jsonl bytes parsed at a time; a row must fit in one block


def split_compression(path: str) -> tuple[str, str | None]:
    stem, ext = os.path.splitext(path)
    codec = _COMPRESSION.get(ext.lower())
    return (stem, codec) if codec else (path, None)


def guess_format(path: str, given: str | None) -> str:
    if given:
        return given
    stem, _ = split_compression(path)
    ext = os.path.splitext(stem)[1].lower()
    fmt = _EXTENSIONS.get(ext)
    if fmt is None:
        raise UsageError(
            f"cannot tell the format of {path!r} from its extension {ext or '(none)'!r}; "
            f"give --format ({'|'.join(FORMATS)})"
        )
    return fmt


def file_identity(path: Path, mode: str) -> str:
    """16 hex digits naming a file's content (``content``: SHA-256 of its bytes and
    size) or its place (``quick``: absolute path, size and modification time)."""
    st = path.stat()
    h = hashlib.sha256()
    if mode == "quick":
        h.update(f"{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    else:
        h.update(f"{st.st_size}\0".encode())
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()[:16]


def _slices(batch: pa.RecordBatch, rows: int) -> Iterator[pa.RecordBatch]:
    if batch.num_rows <= rows:
        yield batch
        return
    for offset in range(0, batch.num_rows, rows):
        yield batch.slice(offset, rows)


@dataclass
class InputFile:
    path: Path
    format: str
    csv_delimiter: str = ","

    @property
    def size(self) -> int:
        return self.path.stat().st_size

    def _fail(self, error: Exception) -> CliError:
        detail = getattr(error, "strerror", None) or str(error).strip().splitlines()[0]
        return CliError(f"cannot read {str(self.path)!r} as {self.format}: {detail}")

    def check_readable(self) -> None:
        if not self.path.exists():
            raise CliError(f"input file {str(self.path)!r} does not exist")
        if self.path.is_dir():
            raise CliError(f"input {str(self.path)!r} is a directory; give files")
        try:
            with open(self.path, "rb") as f:
                f.read(1)
        except OSError as e:
            raise self._fail(e) from None

    def schema(self) -> pa.Schema:
        """The file's columns (reads only metadata or the first block)."""
        for batch, _ in self.batches(1, schema_only=True):
            return batch.schema
        raise AssertionError("unreachable")

    def batches(
        self, batch_rows: int, schema_only: bool = False
    ) -> Iterator[tuple[pa.RecordBatch, float | None]]:
        """Yield ``(batch, fraction of the file read so far)``."""
        try:
            yield from self._batches(batch_rows, schema_only)
        except (pa.ArrowException, OSError) as e:
            raise self._fail(e) from None

    def _batches(
        self, batch_rows: int, schema_only: bool
    ) -> Iterator[tuple[pa.RecordBatch, float | None]]:
        if self.format == "parquet":
            pf = pq.ParquetFile(self.path, buffer_size=1 << 20, pre_buffer=False)
            if schema_only:
                yield pa.RecordBatch.from_pylist([], schema=pf.schema_arrow), None
                return
            total = max(pf.metadata.num_rows, 1)
            done = 0
            for batch in pf.iter_batches(batch_size=batch_rows):
                done += batch.num_rows
                yield batch, done / total
            return
        if self.format == "arrow":
            yield from self._arrow(batch_rows, schema_only)
            return
        raw = pa.OSFile(str(self.path), "rb")
        _, codec = split_compression(str(self.path))
        source = pa.CompressedInputStream(raw, codec) if codec else raw
        size = max(self.size, 1)
        try:
            if self.format == "csv":
                reader = pacsv.open_csv(
                    source,
                    read_options=pacsv.ReadOptions(block_size=_BLOCK_SIZE),
                    parse_options=pacsv.ParseOptions(
                        delimiter=self.csv_delimiter, newlines_in_values=True
                    ),
                )
            else:
                reader = pajson.open_json(
                    source, read_options=pajson.ReadOptions(block_size=_BLOCK_SIZE)
                )
            if schema_only:
                yield pa.RecordBatch.from_pylist([], schema=reader.schema), None
                return
            for block in reader:
                fraction = raw.tell() / size
                for batch in _slices(block, batch_rows):
                    yield batch, fraction
        finally:
            source.close()

    def _arrow(
        self, batch_rows: int, schema_only: bool
    ) -> Iterator[tuple[pa.RecordBatch, float | None]]:
        source = pa.memory_map(str(self.path), "r")
        try:
            try:
                file_reader = ipc.open_file(source)
            except pa.ArrowInvalid:
                source.seek(0)
                stream_reader = ipc.open_stream(source)
                if schema_only:
                    yield pa.RecordBatch.from_pylist([], schema=stream_reader.schema), None
                    return
                size = max(self.size, 1)
                for block in stream_reader:
                    fraction = source.tell() / size
                    for batch in _slices(block, batch_rows):
                        yield batch, fraction
                return
            if schema_only:
                yield pa.RecordBatch.from_pylist([], schema=file_reader.schema), None
                return
            n = max(file_reader.num_record_batches, 1)
            for i in range(file_reader.num_record_batches):
                for batch in _slices(file_reader.get_batch(i), batch_rows):
                    yield batch, (i + 1) / n
        finally:
            source.close()
