"""The rows a sink lands: a read's batch split into the rows that decoded and those
that did not, its decoded value's fields as columns beside the message columns, the
partition columns, and the check that a batch's columns fit the table's."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from .. import _core
from .._views import cast_without_views
from ..exceptions import BadInputError

#: The columns every landed row has, from its message (``headers`` when asked for).
MESSAGE_COLUMNS = ("stream", "subject", "seq", "timestamp", "headers")
#: A value field named like a message column lands under this prefix: the message
#: columns are what the sink's exactly-once checks and a reader's joins rely on.
RENAMED_VALUE_PREFIX = "value_"

_TOKEN = re.compile(r"^subject_token_([1-9]\d*)$")
#: The name Hive (and Delta, Spark, DuckDB) gives a partition whose value is null.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
PARTITION_HELP = "date (UTC day of the timestamp) or subject_token_N (the Nth token, from 1)"


@dataclass(frozen=True)
class SplitBatch:
    """One read batch: the rows to land, the rows whose payload did not decode
    (``stream``, ``subject``, ``seq``, ``_corrupt_record``, ``_corrupt_reason``), and
    the last stream sequence the batch covers."""

    rows: pa.Table
    malformed: pa.Table
    through_seq: int


def split(
    batch: pa.RecordBatch, partition_by: Sequence[str], include_headers: bool = True
) -> SplitBatch:
    """The rows of ``batch`` as they land, and the malformed ones set aside (with
    their ``headers``, when the batch has them: a dead letter keeps the payload's
    ``Content-Encoding``); the rows land without ``headers`` unless
    ``include_headers``."""
    through_seq = int(batch.column("seq")[-1].as_py())
    table = pa.Table.from_batches([batch])
    corrupt, reason = _core.CORRUPT_RECORD_COLUMN, _core.CORRUPT_REASON_COLUMN
    malformed = table.schema.empty_table().select([])
    if corrupt in table.column_names:
        bad = table.column(corrupt).is_valid()
        kept = ["stream", "subject", "seq", corrupt, reason]
        if "headers" in table.column_names:
            kept.append("headers")
        malformed = table.filter(bad).select(kept)
        table = table.filter(pc.invert(bad)).drop_columns([corrupt, reason])
    if not include_headers and "headers" in table.column_names:
        table = table.drop_columns(["headers"])
    if _core.VALUE_COLUMN in table.column_names:
        table = _value_fields_as_columns(table)
    # A value's view types (a schema recorded from a file that had them, an Arrow IPC
    # payload's own) land as string, binary and list: pyarrow's compute, which splits
    # the rows into partitions, takes no views, and the table's column is the same.
    table = _nullable(cast_without_views(table))
    for name in partition_by:
        same = [c for c in table.column_names if c.lower() == name.lower()]
        if same:
            # The partition column is made from the message: it would take the place
            # of the value's own field (Delta and Spark compare names ignoring case).
            raise BadInputError(
                f"option 'partition_by' {name!r}: the value has a field named {same[0]!r}, "
                "the name of the partition column; partition by another column, or "
                "give the codec a schema without that field"
            )
        table = table.append_column(name, partition_column(table, name))
    return SplitBatch(table, malformed, through_seq)


def _value_fields_as_columns(table: pa.Table) -> pa.Table:
    value = table.column(_core.VALUE_COLUMN).combine_chunks()
    # Names are compared case-insensitively: Delta and Spark take `Seq` for `seq`.
    message_names = {name.lower() for name in MESSAGE_COLUMNS}
    value_names = {f.name.lower(): f.name for f in value.type}
    fields: list[pa.Field] = []
    arrays: list[pa.Array | pa.ChunkedArray] = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if field.name != _core.VALUE_COLUMN:
            fields.append(field)
            arrays.append(column)
            continue
        for i in range(value.type.num_fields):
            inner = value.type.field(i)
            name = inner.name
            if name.lower() in message_names:
                name = RENAMED_VALUE_PREFIX + name
                taken = value_names.get(name.lower())
                if taken is not None:
                    # Renamed further, the column would hold one field in the rows
                    # before the other appeared, and the other after.
                    raise BadInputError(
                        f"stream {table.column('stream')[0].as_py()} seq "
                        f"{_first_seq(table, value, inner.name, taken)}: the value has "
                        f"fields {inner.name!r} and {taken!r}; a field named like a message "
                        f"column lands as {name!r}, which the other one is named: give the "
                        "codec a schema without one of them"
                    )
            fields.append(inner.with_name(name))
            arrays.append(value.field(i))
    return pa.table(arrays, schema=pa.schema(fields))


def _first_seq(table: pa.Table, value: pa.StructArray, *names: str) -> int:
    """The sequence of the first row whose value holds one of the fields ``names``
    (the first row when none does: the schema has them)."""
    held = functools.reduce(pc.or_, [value.field(n).is_valid() for n in names])
    rows = pc.indices_nonzero(held)
    first = rows[0].as_py() if len(rows) else 0
    return int(table.column("seq")[first].as_py())


def check_unique_ignoring_case(schema: pa.Schema, where: str) -> None:
    """Refuse two columns, or two fields of one struct, whose names differ only by
    case, naming them and ``where``: Delta (and Spark) take them for one."""
    _check_unique_ignoring_case(list(schema), "", where)


def _check_unique_ignoring_case(fields: list[pa.Field], path: str, where: str) -> None:
    seen: dict[str, str] = {}
    for f in fields:
        other = seen.setdefault(f.name.lower(), f.name)
        if other != f.name:
            raise BadInputError(
                f"columns {path + other!r} and {path + f.name!r} of {where} differ only by "
                "case, and a Delta table takes them for one: give the codec a schema "
                "without one of them, or land into a Parquet dataset"
            )
        t = f.type
        while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
            t = t.item_type if pa.types.is_map(t) else t.value_type
        if pa.types.is_struct(t):
            _check_unique_ignoring_case(list(t), f"{path}{f.name}.", where)


def _nullable(table: pa.Table) -> pa.Table:
    """Every landed column allows nulls: a later batch may lack a column an earlier
    one had (a JSON field absent from its sample), and a lake table's columns are
    added as nullable."""
    if all(f.nullable for f in table.schema):
        return table
    return table.cast(pa.schema([f.with_nullable(True) for f in table.schema]))


def check_partition_by(partition_by: str | Sequence[str] | None, option: str) -> list[str]:
    """The partition column names, each ``date`` or ``subject_token_N`` (None: no
    partitions; a string: one)."""
    if partition_by is None:
        return []
    names = [partition_by] if isinstance(partition_by, str) else list(partition_by)
    for name in names:
        if name != "date" and not _TOKEN.match(name):
            raise BadInputError(f"{option} {name!r}: each partition is {PARTITION_HELP}")
    if len(set(names)) != len(names):
        raise BadInputError(f"{option} {names}: a partition column is named twice")
    return names


def partition_column(table: pa.Table, name: str) -> pa.Array:
    """Column ``date`` (the UTC day of ``timestamp``) or ``subject_token_N``."""
    if name == "date":
        return pc.cast(table.column("timestamp"), pa.date32()).combine_chunks()
    match = _TOKEN.match(name)
    assert match is not None, name
    n = int(match.group(1))
    # Few distinct subjects per batch: each is split once, then taken by index.
    encoded = pc.dictionary_encode(table.column("subject")).combine_chunks()
    tokens = [
        None if s is None or len(s.split(".")) < n else s.split(".")[n - 1]
        for s in encoded.dictionary.to_pylist()
    ]
    if NULL_PARTITION in tokens:
        # Its directory, and Delta's partition value, would read back as null.
        at = pc.index(encoded.indices, tokens.index(NULL_PARTITION)).as_py()
        raise BadInputError(
            f"option 'partition_by' {name!r}: stream {table.column('stream')[at].as_py()} "
            f"seq {table.column('seq')[at].as_py()} has subject "
            f"{table.column('subject')[at].as_py()!r}, whose token {n} is {NULL_PARTITION}, "
            "the name a partition of null values takes, and would read back as null; "
            "partition by another column, or leave such subjects out (option 'subjects')"
        )
    return pa.array(tokens, pa.string()).take(encoded.indices)


def merged_schema(existing: pa.Schema | None, new: pa.Schema, where: str) -> pa.Schema:
    """The table's columns then the new ones of ``new``, at any depth: a struct takes
    the fields ``new`` adds to it (after its own), as Delta's schema merge adds them, so
    a Parquet dataset's manifest holds every field its files hold. A column, or a
    field at any depth, that ``new`` gives another type than ``existing`` does is
    refused, naming it (``o.y``) and ``where``: both targets keep a field's type. A
    part of the null type (a field always null when an earlier sink made the table)
    takes the type ``new`` gives it: Delta's schema merge retypes it, and a Parquet
    file of the null type reads as null beside files of another."""
    if existing is None:
        return new
    merged = _merged_type(pa.struct(list(existing)), pa.struct(list(new)), "", where)
    return pa.schema(list(merged), metadata=existing.metadata)


def _merged_type(known: pa.DataType, seen: pa.DataType, path: str, where: str) -> pa.DataType:
    """``known`` with what ``seen`` adds (``merged_schema``); ``path`` names the part."""
    if pa.types.is_null(known):
        return seen
    if pa.types.is_null(seen):
        return known
    if pa.types.is_struct(known) and pa.types.is_struct(seen):
        fields = {f.name: f for f in known}
        for f in seen:
            old = fields.get(f.name)
            inner = f"{path}.{f.name}" if path else f.name
            fields[f.name] = (
                f.with_nullable(True)
                if old is None
                else old.with_type(_merged_type(old.type, f.type, inner, where))
            )
        return pa.struct(list(fields.values()))
    lists = (
        (pa.types.is_list, pa.list_),
        (pa.types.is_large_list, pa.large_list),
    )
    for is_kind, make in lists:
        if is_kind(known) and is_kind(seen):
            item = _merged_type(known.value_type, seen.value_type, f"{path}[]", where)
            return make(known.value_field.with_type(item))
    if not same_type(known, seen, null_fits=True):
        raise BadInputError(
            f"column {path!r} arrives as {seen} but is {known} in {where}: a lake "
            "table's column keeps its type. Give the codec a schema with that type, or "
            "land into another table"
        )
    return known


def concat_refusing_conflicts(tables: Sequence[pa.Table], where: str) -> pa.Table:
    """The rows of one commit as one table: a column may be missing from some of
    them, or all null, but one that comes with two types is refused, naming it and
    both types (``where``: what the rows were read from), not promoted."""
    seen: dict[str, pa.DataType] = {}
    for table in tables:
        for field in table.schema:
            known = seen.setdefault(field.name, field.type)
            if pa.types.is_null(known):
                seen[field.name] = field.type
            elif not same_type(known, field.type, null_fits=True):
                raise BadInputError(
                    f"column {field.name!r} arrives as {field.type} but as {known} in other "
                    f"rows of the same commit ({where}): a lake table's column keeps one "
                    "type. Give the codec a schema with that type"
                )
    return pa.concat_tables(tables, promote_options="permissive")


_SAME = {
    pa.large_string(): pa.string(),
    pa.string_view(): pa.string(),
    pa.large_binary(): pa.binary(),
    pa.binary_view(): pa.binary(),
}


def same_type(a: pa.DataType, b: pa.DataType, null_fits: bool = False) -> bool:
    """Whether a column of type ``a`` takes values of type ``b`` unchanged: the same
    type up to offset widths, child names and nullability. A struct may lack fields
    of the other (a merge adds them). With ``null_fits``, a null type fits any."""
    a, b = _SAME.get(a, a), _SAME.get(b, b)
    if null_fits and (pa.types.is_null(a) or pa.types.is_null(b)):
        return True
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        names = {a.field(i).name: a.field(i).type for i in range(a.num_fields)}
        return all(
            same_type(names[b.field(i).name], b.field(i).type, null_fits)
            for i in range(b.num_fields)
            if b.field(i).name in names
        )
    lists = (pa.types.is_list, pa.types.is_large_list, pa.types.is_list_view)
    if any(t(a) for t in lists) and any(t(b) for t in lists):
        return same_type(a.value_type, b.value_type, null_fits)
    if pa.types.is_map(a) and pa.types.is_map(b):
        return same_type(a.key_type, b.key_type, null_fits) and same_type(
            a.item_type, b.item_type, null_fits
        )
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        # Delta stores timestamps in microseconds, zoned to UTC or without a zone.
        return (a.tz is None) == (b.tz is None)
    return bool(a == b)
