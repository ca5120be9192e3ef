"""Publish input made safe to hand to the native module over the Arrow C interface.

arrow-rs (the native module's Arrow) misreads a struct inside a list, fixed-size
list or map when it imports it over the C data interface from an array that was
sliced (``table.slice``) at that level or above: the slice's offset is applied twice
and the import fails with an assertion instead of reading the rows. Columns of such a
type (also inside an extension type, a struct or another list) are passed on copied
into fresh buffers, offsets 0, whenever pyarrow's view of them may carry an offset;
other columns go as they are, without a copy. A column pyarrow cannot copy
(no concatenation for its type) goes as it is. Input of other producers (polars,
DuckDB, nanoarrow, ...) is imported by pyarrow from their Arrow C stream or array,
without a copy, and treated the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa


def _storage(data_type: pa.DataType) -> pa.DataType:
    while isinstance(data_type, pa.BaseExtensionType):
        data_type = data_type.storage_type
    return data_type


def _lists(data_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(data_type)
        or pa.types.is_large_list(data_type)
        or pa.types.is_fixed_size_list(data_type)
        or pa.types.is_map(data_type)
    )


def _has_struct(data_type: pa.DataType) -> bool:
    data_type = _storage(data_type)
    if pa.types.is_struct(data_type):
        return True
    return any(_has_struct(data_type.field(i).type) for i in range(_fields(data_type)))


def _fields(data_type: pa.DataType) -> int:
    # Only nesting types are walked: dictionary, run-end and union types are left as
    # they are (their import is not affected).
    if _lists(data_type) or pa.types.is_struct(data_type):
        return int(data_type.num_fields)
    return 0


def _misread(data_type: pa.DataType) -> bool:
    """Whether a column of this type can hold a struct under a list."""
    data_type = _storage(data_type)
    if _lists(data_type):
        return any(_has_struct(data_type.field(i).type) for i in range(_fields(data_type)))
    return any(_misread(data_type.field(i).type) for i in range(_fields(data_type)))


def _fresh(array: pa.Array) -> pa.Array:
    # A child may be sliced where its parent is not, and pyarrow does not show a
    # child's own offset: every column of a misread type is copied.
    try:
        return pa.concat_arrays([array])  # writes new buffers, offsets 0
    except pa.ArrowNotImplementedError:
        return array


def _batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    if not any(_misread(field.type) for field in batch.schema):
        return batch
    columns = [
        _fresh(column) if _misread(field.type) else column
        for field, column in zip(batch.schema, batch.columns, strict=True)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def importable(data: Any) -> Any:
    """``data`` as the native module can import it (see the module's doc)."""
    if isinstance(data, pa.RecordBatch):
        return _batch(data)
    if isinstance(data, (pa.Table, pa.RecordBatchReader)):
        if not any(_misread(field.type) for field in data.schema):
            return data
        batches = data.to_batches() if isinstance(data, pa.Table) else data

        def fresh() -> Iterator[pa.RecordBatch]:
            for batch in batches:
                yield _batch(batch)

        return pa.RecordBatchReader.from_batches(data.schema, fresh())
    # Any other Arrow producer (polars, DuckDB, nanoarrow, ...) through pyarrow, which
    # imports its buffers as they are, so that the same columns are copied.
    if hasattr(data, "__arrow_c_stream__"):
        return importable(pa.RecordBatchReader.from_stream(data))
    if hasattr(data, "__arrow_c_array__"):
        try:
            batch = pa.record_batch(data)
        except (TypeError, ValueError, pa.ArrowException):
            return data  # not a batch (an array): the native module says what it takes
        return importable(batch)
    return data
