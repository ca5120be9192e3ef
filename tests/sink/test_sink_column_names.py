"""Value fields whose names a lake table's columns would not hold apart: Delta (and
Spark) compare column names ignoring case. A field named like a message column in
any case lands as ``value_<name>``; a value that also holds that name, two fields
differing only by case in a Delta table, and a field named like a partition column
are refused, naming them. Checked against independent oracles: the payloads nats-py
published, read back with ``json.loads``, against what ``deltalake`` and
``pyarrow.dataset`` read from the targets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

import jetstream_arrow as ja
from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.sink import dataset_files
from natspy import with_jetstream
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(120)

KINDS = ["delta", "parquet"]


def publish(url: str, subject: str, values: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each value published as one JSON payload with nats-py; the values as
    ``json.loads`` reads the payloads back."""
    payloads = [json.dumps(v).encode() for v in values]

    async def work(js: Any) -> None:
        for p in payloads:
            await js.publish(subject, p)

    with_jetstream(url, work)
    return [json.loads(p) for p in payloads]


def target(kind: str, path: Path) -> ja.DeltaTarget | ja.ParquetTarget:
    return ja.DeltaTarget(path) if kind == "delta" else ja.ParquetTarget(path)


def landed(kind: str, path: Path) -> list[dict[str, Any]]:
    if kind == "delta":
        table = DeltaTable(str(path)).to_pyarrow_table()
    else:
        table = ds.dataset(dataset_files(path)).to_table()
    return sorted(table.to_pylist(), key=lambda r: r["seq"])


def nothing_landed(kind: str, path: Path) -> bool:
    if kind == "delta":
        return not DeltaTable.is_deltatable(str(path))
    return dataset_files(path) == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_field_named_like_a_message_column_in_another_case_is_renamed(
    shared_nats_server: NatsServer, client: ja.Client, stream: str, tmp_path: Path, kind: str
) -> None:
    values = [
        {"Timestamp": "2024-01-01T00:00:00Z", "Subject": "hello", "Seq": 7, "STREAM": "s", "Id": i}
        for i in range(3)
    ]
    published = publish(shared_nats_server.url, f"{stream}.x", values)
    report = ja.run_sink(client, [stream], target(kind, tmp_path), codec="json")
    assert report.rows == 3
    rows = landed(kind, tmp_path)
    assert [r["seq"] for r in rows] == [1, 2, 3]
    assert {r["subject"] for r in rows} == {f"{stream}.x"}
    message_columns = {"stream", "subject", "seq", "timestamp"}
    values_landed = [{k: v for k, v in r.items() if k not in message_columns} for r in rows]
    assert values_landed == [
        {("value_" + k if k != "Id" else k): v for k, v in p.items()} for p in published
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_a_value_holding_both_seq_and_value_seq_is_refused_naming_them(
    shared_nats_server: NatsServer, client: ja.Client, stream: str, tmp_path: Path, kind: str
) -> None:
    publish(shared_nats_server.url, f"{stream}.x", [{"x": 1}, {"seq": 5, "value_seq": 6, "x": 2}])
    with pytest.raises(
        BadInputError,
        match=rf"stream {stream} seq 2: the value has fields 'seq' and 'value_seq'",
    ):
        ja.run_sink(client, [stream], target(kind, tmp_path), codec="json")
    assert nothing_landed(kind, tmp_path)


def test_delta_refuses_two_fields_differing_only_by_case(
    shared_nats_server: NatsServer, client: ja.Client, stream: str, tmp_path: Path
) -> None:
    """A Delta table takes them for one column; a Parquet dataset holds both."""
    published = publish(shared_nats_server.url, f"{stream}.x", [{"a": 1, "A": 2}])
    with pytest.raises(
        BadInputError, match=r"columns '(a' and 'A|A' and 'a)' .* differ only by case"
    ):
        ja.run_sink(client, [stream], ja.DeltaTarget(tmp_path / "delta"), codec="json")
    assert nothing_landed("delta", tmp_path / "delta")
    ja.run_sink(client, [stream], ja.ParquetTarget(tmp_path / "parquet"), codec="json")
    [row] = landed("parquet", tmp_path / "parquet")
    assert {"a": row["a"], "A": row["A"]} == published[0]


@pytest.mark.parametrize("kind", KINDS)
def test_a_field_named_like_a_partition_column_in_another_case_is_refused(
    shared_nats_server: NatsServer, client: ja.Client, stream: str, tmp_path: Path, kind: str
) -> None:
    publish(shared_nats_server.url, f"{stream}.x", [{"Date": "1999-01-01", "x": 1}])
    with pytest.raises(BadInputError, match=r"option 'partition_by' 'date'.*field named 'Date'"):
        ja.run_sink(client, [stream], target(kind, tmp_path), codec="json", partition_by=["date"])
    assert nothing_landed(kind, tmp_path)
