"""A work queue's value schema, inferred when the sink is given none, is the one a
range read infers (the core's inference): an integer beyond int64 lands as a decimal
of 38 digits, exact, where a float would lose its digits. Checked against independent
oracles: the integers nats-py published against what ``deltalake`` reads back.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import jetstream_arrow as ja
from natspy import with_jetstream
from natsserver import NatsServer

pytestmark = pytest.mark.timeout(120)

#: Beyond int64, and beyond a float's 53 bits of mantissa (a float reads it as ...992).
BIG = [18446744073709551615, 9007199254740993]


def test_integers_beyond_int64_land_exact_as_decimals(
    shared_nats_server: NatsServer,
    client: ja.Client,
    new_stream: Callable[..., str],
    tmp_path: Path,
) -> None:
    stream = new_stream("WQ_BIG_INT", retention="workqueue")

    async def work(js: Any) -> None:
        for n in BIG:
            await js.publish(f"{stream}.x", b'{"id": %d}' % n)

    with_jetstream(shared_nats_server.url, work)
    report = ja.run_sink(client, [stream], ja.DeltaTarget(tmp_path), codec="json", durable="lake")
    assert (report.rows, report.dead_letters) == (2, 0)
    table = DeltaTable(str(tmp_path)).to_pyarrow_table()
    assert table.schema.field("id").type == pa.decimal128(38, 0)
    rows = sorted(table.select(["seq", "id"]).to_pylist(), key=lambda r: r["seq"])
    assert rows == [{"seq": 1, "id": Decimal(BIG[0])}, {"seq": 2, "id": Decimal(BIG[1])}]
