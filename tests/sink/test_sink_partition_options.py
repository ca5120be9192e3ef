"""The lake sink's ``partition_by``: None is no partitions, and a subject token that is
the name Hive gives a null partition (``__HIVE_DEFAULT_PARTITION__``), which would read
back as null, is refused naming its message. Checked against independent oracles: the
payloads nats-py published, read back with ``json.loads``, against what ``deltalake``,
``pyarrow.dataset`` and DuckDB read from the targets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
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


def publish(url: str, messages: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each (subject, value) published as one JSON payload with nats-py; the values as
    ``json.loads`` reads the payloads back."""
    payloads = [(subject, json.dumps(v).encode()) for subject, v in messages]

    async def work(js: Any) -> None:
        for subject, p in payloads:
            await js.publish(subject, p)

    with_jetstream(url, work)
    return [json.loads(p) for _, p in payloads]


def target(kind: str, path: Path) -> ja.DeltaTarget | ja.ParquetTarget:
    return ja.DeltaTarget(path) if kind == "delta" else ja.ParquetTarget(path)


@pytest.mark.parametrize("kind", KINDS)
def test_partition_by_none_is_no_partitions(
    shared_nats_server: NatsServer, client: ja.Client, stream: str, tmp_path: Path, kind: str
) -> None:
    published = publish(shared_nats_server.url, [(f"{stream}.x", {"i": i}) for i in range(3)])
    report = ja.run_sink(client, [stream], target(kind, tmp_path), codec="json", partition_by=None)
    assert report.rows == 3
    if kind == "delta":
        table = DeltaTable(str(tmp_path))
        assert table.metadata().partition_columns == []
        rows = table.to_pyarrow_table().to_pylist()
    else:
        files = dataset_files(tmp_path)
        assert [Path(f).parent for f in files] == [tmp_path]
        rows = ds.dataset(files).to_table().to_pylist()
    assert sorted((r["seq"], r["i"]) for r in rows) == [
        (seq, v["i"]) for seq, v in enumerate(published, 1)
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_a_token_named_like_the_null_partition_is_refused_naming_its_message(
    shared_nats_server: NatsServer, client: ja.Client, stream: str, tmp_path: Path, kind: str
) -> None:
    subjects = [f"{stream}.eu.x", f"{stream}.us.x", f"{stream}.__HIVE_DEFAULT_PARTITION__.x"]
    publish(shared_nats_server.url, [(s, {"i": i}) for i, s in enumerate(subjects)])
    with pytest.raises(
        BadInputError,
        match=rf"option 'partition_by' 'subject_token_2': stream {stream} seq 3 has subject "
        rf"'{stream}\.__HIVE_DEFAULT_PARTITION__\.x'",
    ):
        ja.run_sink(
            client,
            [stream],
            target(kind, tmp_path),
            codec="json",
            partition_by=["subject_token_2"],
        )
    if kind == "delta":
        assert not DeltaTable.is_deltatable(str(tmp_path))
    else:
        assert dataset_files(tmp_path) == []
    # Left out by the subjects filter, the others land, each token as its subject has it.
    ja.run_sink(
        client,
        [stream],
        target(kind, tmp_path),
        codec="json",
        partition_by=["subject_token_2"],
        subjects={stream: [subjects[0], subjects[1]]},
    )
    if kind == "delta":
        rows = DeltaTable(str(tmp_path)).to_pyarrow_table().to_pylist()
        landed = sorted((r["seq"], r["subject_token_2"]) for r in rows)
    else:
        files = dataset_files(tmp_path)
        landed = duckdb.sql(
            f"select seq, subject_token_2 from read_parquet({files!r}, hive_partitioning=true) "
            "order by seq"
        ).fetchall()
    assert landed == [(1, "eu"), (2, "us")]
