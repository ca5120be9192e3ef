"""Counter streams (ADR-49, nats-server 2.12+) read as tables.

A stream created with ``allow_msg_counter`` stores only counter increments: a
message with header ``Nats-Incr`` (``+5``, ``-3``: an integer of any size) and no
payload, which the server adds to the subject's counter, storing the new value as
``{"val":"<decimal>"}``. So a counter's current value is the latest message of its
subject, and a read of the counters is a read of the latest message of each subject
(``Client.read(..., last_per_subject=True)``) without reading their history.

A stream that sources counter streams adds each source's value to its own and records
what every source contributed in the header ``Nats-Counter-Sources``
(``{"<stream>":{"<subject>":"<value>"}}``): the ``sources`` column.

Values are decimal128(38, 0) when every value of the read fits in 38 digits, else
text (utf8) for the whole table; never a float.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import pyarrow as pa

from .exceptions import BadInputError

#: The header of a counter stream's message with its sources' values.
SOURCES_HEADER = "Nats-Counter-Sources"
#: The type of a counter value that fits.
DECIMAL = pa.decimal128(38, 0)
#: Digits a decimal128(38, 0) holds.
MAX_DIGITS = 38


def sources_type(value: pa.DataType) -> pa.DataType:
    """The ``sources`` column's type with values of type ``value``."""
    return pa.list_(
        pa.struct(
            [
                pa.field("stream", pa.utf8(), nullable=False),
                pa.field("subject", pa.utf8(), nullable=False),
                pa.field("value", value),
            ]
        )
    )


def counter_schema(value: pa.DataType) -> pa.Schema:
    """A counter read's columns with values of type ``value``."""
    return pa.schema(
        [
            pa.field("subject", pa.utf8(), nullable=False),
            pa.field("value", value, nullable=False),
            pa.field("sources", sources_type(value)),
            pa.field("seq", pa.int64(), nullable=False),
        ]
    )


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key, values in headers:
        if key.lower() == name.lower() and values:
            return str(values[-1])
    return None


def _integer(text: Any, what: str) -> int:
    if not isinstance(text, str):
        raise ValueError(f"{what} is {text!r}, not decimal text")
    return int(text, 10)


def counter_table(batches: Iterable[pa.RecordBatch], stream: str) -> pa.Table:
    """The counters of a latest-per-subject read (with headers) of ``stream``."""
    subjects: list[str] = []
    values: list[int] = []
    sources: list[list[dict[str, Any]] | None] = []
    seqs: list[int] = []
    for batch in batches:
        columns = batch.to_pydict()
        for subject, seq, data, headers in zip(
            columns["subject"], columns["seq"], columns["data"], columns["headers"], strict=True
        ):
            if not data:
                # A marker the server left where it removed the counter (no value).
                continue
            try:
                value = _integer(json.loads(data)["val"], "'val'")
                raw = _header(headers, SOURCES_HEADER)
                by_source = None
                if raw is not None:
                    by_source = [
                        {"stream": s, "subject": subj, "value": _integer(v, "a source's value")}
                        for s, subjects_of in sorted(json.loads(raw).items())
                        for subj, v in sorted(subjects_of.items())
                    ]
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                raise BadInputError(
                    f"stream {stream!r}, subject {subject!r}, seq {seq}: not a counter value "
                    f"({err}): {bytes(data)[:100]!r}; read_counters reads streams created "
                    "with allow_msg_counter"
                ) from None
            subjects.append(subject)
            values.append(value)
            sources.append(by_source)
            seqs.append(seq)
    everything = values + [s["value"] for row in sources if row for s in row]
    fits = all(len(str(abs(v))) <= MAX_DIGITS for v in everything)
    value_type = DECIMAL if fits else pa.utf8()

    def typed(v: int) -> Decimal | str:
        return Decimal(v) if fits else str(v)

    return pa.table(
        {
            "subject": pa.array(subjects, pa.utf8()),
            "value": pa.array([typed(v) for v in values], value_type),
            "sources": pa.array(
                [
                    None if row is None else [{**s, "value": typed(s["value"])} for s in row]
                    for row in sources
                ],
                sources_type(value_type),
            ),
            "seq": pa.array(seqs, pa.int64()),
        },
        schema=counter_schema(value_type),
    )
