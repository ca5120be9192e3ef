"""Input files read as a stream of record batches, in bounded memory.

- parquet: one row group's pages at a time (``ParquetFile.iter_batches``, no pre-buffer)
- csv: ``pyarrow.csv.open_csv``, a block at a time; every cell as its text unless
  ``csv_types`` is ``infer`` (then the first block fixes each column's type)
- arrow: IPC file format, memory-mapped, a record batch at a time; or IPC stream format

JSON-lines files are read line by line (:mod:`.json_lines`): their lines are the
payloads. Compressed csv/jsonl (``.gz``, ``.bz2``, ``.zst``, ``.lz4``) are
decompressed on the fly. Every batch is at most ``batch_rows`` rows (larger ones are
sliced, without copying).
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
import pyarrow.parquet as pq

from .errors import CliError, UsageError

FORMATS = ("parquet", "csv", "jsonl", "arrow")
# --csv-types: "text" keeps every cell as the file writes it ("02134", a 20-digit id,
# a "+02:00" offset); "infer" lets Arrow choose numbers, booleans and timestamps.
CSV_TYPES = ("text", "infer")
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
_BLOCK_SIZE = 8 << 20  # csv bytes parsed at a time; a row must fit in one block


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


def open_byte_stream(path: Path) -> tuple[pa.NativeFile, pa.NativeFile]:
    """``(raw file, decompressed stream)``; the raw file's position tells progress."""
    raw = pa.OSFile(str(path), "rb")
    _, codec = split_compression(str(path))
    try:
        return raw, (pa.CompressedInputStream(raw, codec) if codec else raw)
    except BaseException:
        raw.close()
        raise


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
    csv_types: str = "text"

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
        if self.format != "csv":
            raise AssertionError(f"{self.format} files are not read as record batches")
        column_types = None
        if self.csv_types == "text":
            # the header names the columns; every one is read as text
            column_types = {name: pa.string() for name in self._csv_column_names()}
        raw, source = open_byte_stream(self.path)
        size = max(self.size, 1)
        try:
            reader = self._open_csv(source, column_types)
            if schema_only:
                yield pa.RecordBatch.from_pylist([], schema=reader.schema), None
                return
            for block in reader:
                fraction = raw.tell() / size
                for batch in _slices(block, batch_rows):
                    yield batch, fraction
        finally:
            source.close()

    def _open_csv(
        self, source: pa.NativeFile, column_types: dict[str, pa.DataType] | None
    ) -> pacsv.CSVStreamingReader:
        return pacsv.open_csv(
            source,
            read_options=pacsv.ReadOptions(block_size=_BLOCK_SIZE),
            parse_options=pacsv.ParseOptions(delimiter=self.csv_delimiter, newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types=column_types,
                # with every column text, an empty cell is an empty string, and "NA"
                # or "null" are the words the file holds
                strings_can_be_null=False,
            ),
        )

    def _csv_column_names(self) -> list[str]:
        _, source = open_byte_stream(self.path)
        try:
            names: list[str] = self._open_csv(source, None).schema.names
            return names
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
