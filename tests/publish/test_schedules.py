"""Scheduled messages (ADR-51, servers 2.12+, streams with `allow_msg_schedules`):
publish input's `schedule` and `schedule_target` columns sent as `Nats-Schedule` and
`Nats-Schedule-Target`; rows delayed by 2 s fire on time, a repeating `@every` and a
cron schedule fire, and a schedule the server cannot read is refused naming the row.
What fired is read with nats-py, independently of the package."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from jetstream_arrow import _core
from jetstream_arrow.exceptions import BadInputError, PublishError
from natspy import with_jetstream
from natsserver import NatsServer, wait_until

pytestmark = pytest.mark.timeout(90)


def fired(url: str, stream: str, subject: str) -> list[Any]:
    """The messages on ``subject`` as nats-py reads them (data, headers, stored time)."""

    async def work(js: Any) -> list[Any]:
        sub = await js.subscribe(subject, stream=stream, ordered_consumer=True)
        out = []
        try:
            while True:
                msg = await sub.next_msg(timeout=0.5)
                out.append((msg.data, dict(msg.headers or {}), msg.metadata.timestamp))
        except Exception:
            pass
        finally:
            await sub.unsubscribe()
        return out

    return with_jetstream(url, work)


def test_rows_delayed_by_two_seconds_fire_on_time_to_their_target(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer
) -> None:
    name = new_stream("SCHED", allow_msg_schedules=True)
    n = 1_000
    at = datetime.now(timezone.utc) + timedelta(seconds=2)
    table = pa.table(
        {
            # The server keeps one schedule per subject: one subject per row.
            "subject": [f"{name}.sched.{i}" for i in range(n)],
            "data": [f"row-{i}".encode() for i in range(n)],
            "schedule": pa.array([at] * n, pa.timestamp("ms", tz="UTC")),
            "schedule_target": [f"{name}.fired"] * n,
        }
    )
    published = time.monotonic()
    result = client.publish(table)
    assert (result.stored, result.failed) == (n, 0)
    assert time.monotonic() - published < 2.0, "the publish itself took the delay"
    # Nothing fired before its time.
    if datetime.now(timezone.utc) < at - timedelta(milliseconds=300):
        early = client.read(name, subjects=[f"{name}.fired"]).read_all()
        assert early.num_rows == 0 or datetime.now(timezone.utc) >= at

    def all_fired() -> bool:
        t = client.read(name, subjects=[f"{name}.fired"]).read_all()
        return t.num_rows >= n

    wait_until(all_fired, 20.0, f"{n} scheduled rows to fire")
    seen = fired(shared_nats_server.url, name, f"{name}.fired")
    assert sorted(d for d, _, _ in seen) == sorted(f"row-{i}".encode() for i in range(n))
    # Each fired message names its schedule; a one-off schedule is removed once fired.
    assert {h["Nats-Scheduler"] for _, h, _ in seen} == {f"{name}.sched.{i}" for i in range(n)}
    assert {h.get("Nats-Schedule-Next") for _, h, _ in seen} == {"purge"}
    stored_at = sorted(ts for _, _, ts in seen)
    # Within the server's precision: not before the instant (its clock rounds to the
    # millisecond), and all within a few seconds after (a loaded machine).
    assert stored_at[0] >= at - timedelta(milliseconds=5), (stored_at[0], at)
    assert stored_at[-1] <= at + timedelta(seconds=5), (stored_at[-1], at)
    wait_until(
        lambda: client.read(name, subjects=[f"{name}.sched.>"]).read_all().num_rows == 0,
        10.0,
        "the fired schedules to be removed",
    )


@pytest.mark.parametrize("schedule", ["@every 1s", "* * * * * *"])
def test_a_repeating_schedule_fires_again_until_its_subject_is_purged(
    client: ja.Client, new_stream: Callable[..., str], shared_nats_server: NatsServer, schedule: str
) -> None:
    name = new_stream("SCHEDREP", allow_msg_schedules=True)
    table = pa.table(
        {
            "subject": [f"{name}.tick"],
            "data": [b"tick"],
            "schedule": [schedule],
            "schedule_target": [f"{name}.ticks"],
        }
    )
    assert client.publish(table).stored == 1

    def ticks() -> int:
        return int(client.read(name, subjects=[f"{name}.ticks"]).read_all().num_rows)

    wait_until(lambda: ticks() >= 3, 15.0, f"{schedule!r} to fire three times")
    seen = fired(shared_nats_server.url, name, f"{name}.ticks")
    assert all(d == b"tick" and h["Nats-Scheduler"] == f"{name}.tick" for d, h, _ in seen)
    # A repeating schedule says when it fires next, not purge.
    assert all(h["Nats-Schedule-Next"] != "purge" for _, h, _ in seen)
    client.purge_stream(name, subject=f"{name}.tick")
    time.sleep(1.5)
    settled = ticks()
    time.sleep(2.0)
    assert ticks() == settled, "the schedule fired after its subject was purged"


def test_a_bad_schedule_is_refused_naming_the_row(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    name = new_stream("SCHEDBAD", allow_msg_schedules=True)

    def publish(schedules: list[str | None], target: str = f"{name}.out") -> ja.PublishResult:
        n = len(schedules)
        return client.publish(
            pa.table(
                {
                    "subject": [f"{name}.s.{i}" for i in range(n)],
                    "data": [b"x"] * n,
                    "schedule": pa.array(schedules, pa.utf8()),
                    "schedule_target": [target] * n,
                }
            )
        )

    # The server's refusal, naming the row and what it takes.
    with pytest.raises(PublishError, match=r"row 1: .*err_code 10189.*@every <duration") as exc:
        publish(["@every 1h", "@every 10ms", "@at yesterday"])
    acks = exc.value.result.acks
    assert [e is None for e in acks.column("error").to_pylist()] == [True, False, False]
    assert _core.ERR_MESSAGE_SCHEDULES_PATTERN_INVALID == 10189
    # A target outside the stream, or a missing one.
    with pytest.raises(PublishError, match=r"row 0: .*10190.*subject of the same stream"):
        publish(["@every 1h"], target="elsewhere.out")
    with pytest.raises(BadInputError, match=r"column 'schedule_target', row 0: .*needs"):
        client.publish(
            pa.table(
                {
                    "subject": [f"{name}.s.x"],
                    "data": [b"x"],
                    "schedule": ["@every 1h"],
                    "schedule_target": pa.array([None], pa.utf8()),
                }
            )
        )

    # An instant past what nanoseconds hold is refused, not sent unscheduled; the error
    # names its row in the whole input (here the second batch's second row).
    def instants(first: int, years: list[int]) -> pa.RecordBatch:
        return pa.record_batch(
            {
                "subject": [f"{name}.s.far{first + i}" for i in range(len(years))],
                "data": [b"x"] * len(years),
                "schedule": pa.array(
                    [datetime(y, 1, 1, tzinfo=timezone.utc) for y in years],
                    pa.timestamp("s", tz="UTC"),
                ),
                "schedule_target": [f"{name}.out"] * len(years),
            }
        )

    far = pa.Table.from_batches([instants(0, [2200, 2200]), instants(2, [2200, 2300])])
    with pytest.raises(BadInputError, match=r"column 'schedule', row 3: .*outside"):
        client.publish(far)
    assert client.read(name, subjects=f"{name}.s.far3").read_all().num_rows == 0
    # A stream without allow_msg_schedules.
    plain = new_stream("SCHEDOFF")
    with pytest.raises(PublishError, match=r"10188.*allow_msg_schedules"):
        client.publish(
            pa.table(
                {
                    "subject": [f"{plain}.s"],
                    "data": [b"x"],
                    "schedule": ["@every 1h"],
                    "schedule_target": [f"{plain}.out"],
                }
            )
        )
    # A `schedule` column without `schedule_target` is the table's own: no schedule.
    own = client.publish(
        pa.table({"subject": [f"{plain}.own"], "data": [b"x"], "schedule": ["weekly"]})
    )
    assert own.stored == 1
