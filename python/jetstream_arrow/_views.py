"""Arrow's view types (``string_view``, ``binary_view``, ``list_view``,
``large_list_view``) as the types most readers and writers take: ``string``,
``binary``, ``list``, ``large_list``, at any depth.

A schema can hold view types wherever a file came from: pyarrow and Polars write
them, a ``load`` of such a file records them in the stream's metadata, and an Arrow
IPC payload carries its own. Not every consumer takes them: pyarrow's compute has no
``take`` or ``filter`` kernel for some, Spark and pyarrow's CSV writer none at all. The
paths that hand values on to such consumers (the lake sink, Spark's value schema, a
CSV export) convert them here, once; the values are the same.
"""

from __future__ import annotations

from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

_PLAIN = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}

_Data = TypeVar("_Data", pa.Table, pa.RecordBatch)


def without_views(t: pa.DataType) -> pa.DataType:
    """``t`` with each view type, at any depth, made its plain counterpart."""
    if t in _PLAIN:
        return _PLAIN[t]
    if pa.types.is_list_view(t) or pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(without_views(t.value_type)))
    if pa.types.is_large_list_view(t) or pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(without_views(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(without_views(t.value_type)), t.list_size)
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(without_views(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(without_views(t.key_type)),
            t.item_field.with_type(without_views(t.item_type)),
            t.keys_sorted,
        )
    return t


def schema_without_views(schema: pa.Schema) -> pa.Schema:
    """``schema`` with :func:`without_views` applied to each field's type."""
    return pa.schema([f.with_type(without_views(f.type)) for f in schema], metadata=schema.metadata)


def _has_list_view(t: pa.DataType) -> bool:
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_list_view(f.type) for f in t)
    if pa.types.is_map(t):
        return _has_list_view(t.key_type) or _has_list_view(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _has_list_view(t.value_type)
    return False


def _plain_array(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as ``target`` (its type without views). pyarrow casts string and
    binary views, but its cast of a list view makes an invalid list (26.0): a list
    view, and whatever holds one, is built again from its values."""
    t = array.type
    if t == target:
        return array
    if not _has_list_view(t):
        return array.cast(target)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(t):
        children = [
            _plain_array(pc.struct_field(array, [i]), target.field(i).type)
            for i in range(t.num_fields)
        ]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_fixed_size_list(t):
        size = t.list_size
        values = array.values.slice(array.offset * size, len(array) * size)
        return pa.FixedSizeListArray.from_arrays(
            _plain_array(values, target.value_type), type=target, mask=mask
        )
    # A list, list view or map: its rows' values in order, and offsets from lengths.
    large = pa.types.is_large_list(target)
    lengths = pc.fill_null(pc.list_value_length(array), 0)
    offset_type = pa.int64() if large else pa.int32()
    offsets = pa.concat_arrays(
        [pa.array([0], offset_type), pc.cumulative_sum(lengths).cast(offset_type)]
    )
    flat = pc.list_flatten(array)
    if pa.types.is_map(t):
        entries = _plain_array(flat, pa.struct([target.key_field, target.item_field]))
        return pa.MapArray.from_arrays(
            offsets, entries.field(0), entries.field(1), type=target, mask=mask
        )
    values = _plain_array(flat, target.value_type)
    cls = pa.LargeListArray if large else pa.ListArray
    return cls.from_arrays(offsets, values, type=target, mask=mask)


def cast_without_views(data: _Data) -> _Data:
    """``data`` (a table or a record batch) with its view types cast to their plain
    counterparts; itself when it has none."""
    plain = schema_without_views(data.schema)
    if plain.equals(data.schema):
        return data
    if not any(_has_list_view(f.type) for f in data.schema):
        return data.cast(plain)
    if isinstance(data, pa.RecordBatch):
        arrays = [_plain_array(c, f.type) for c, f in zip(data.columns, plain, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=plain)
    columns = [
        pa.chunked_array([_plain_array(c, f.type) for c in column.chunks], f.type)
        for column, f in zip(data.columns, plain, strict=True)
    ]
    return pa.table(columns, schema=plain)
