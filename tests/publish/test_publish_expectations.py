"""Per-row expectations: the optional input columns ``expected_last_subject_seq`` and
``expected_last_msg_id`` make each row an optimistic-concurrency write, checked by
the server row by row. A conflict is reported for its row, in acked mode without
holding back the other rows and in atomic mode for its whole batch."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from engine_helpers import read_all, stream_state
from jetstream_arrow.exceptions import BadInputError, PublishError


@pytest.fixture
def keyed(client: ja.Client, unique_name: Callable[[str], str]) -> Iterator[str]:
    """A stream of one subject per key (``<name>.<key>``) allowing atomic batches,
    holding versions 1 of keys a, b and c at sequences 1, 2, 3."""
    name = unique_name("KEYED")
    client.create_stream(name, [f"{name}.>"], allow_atomic=True)
    client.publish(
        pa.table(
            {
                "subject": [f"{name}.a", f"{name}.b", f"{name}.c"],
                "data": [b"a1", b"b1", b"c1"],
                "msg_id": ["a1", "b1", "c1"],
            }
        )
    )
    yield name
    client.delete_stream(name)


def updates(name: str, changes: list[tuple[str, int | None]], version: int) -> pa.Table:
    """A new ``version`` of each key, each expecting the key's last sequence given."""
    return pa.table(
        {
            "subject": [f"{name}.{key}" for key, _ in changes],
            "data": [f"{key}{version}".encode() for key, _ in changes],
            "expected_last_subject_seq": pa.array([seq for _, seq in changes], pa.int64()),
        }
    )


def test_each_row_is_checked_and_a_conflict_is_reported_for_its_row(
    client: ja.Client, keyed: str
) -> None:
    # A second writer updated b (b2 at 4) after this one read the versions.
    client.publish(updates(keyed, [("b", 2)], 2))
    # This writer still thinks b is at 2: its b update conflicts, a and c go in,
    # and a new key d (expected never written: 0) is created; a null checks nothing.
    result = client.publish(
        updates(keyed, [("a", 1), ("b", 2), ("c", 3), ("d", 0), ("a", None)], 3),
        raise_on_error=False,
    )
    errors = result.acks.column("error").to_pylist()
    assert errors[1] is not None and errors[1].startswith(
        "conflict: expected last subject sequence 2 (wrong last sequence: 4"
    ), errors[1]
    assert [e is None for e in errors] == [True, False, True, True, True]
    assert result.acks.column("seq").to_pylist() == [5, None, 6, 7, 8]
    back = read_all(client, keyed)
    assert back.column("data").to_pylist() == [
        b"a1",
        b"b1",
        b"c1",
        b"b2",
        b"a3",
        b"c3",
        b"d3",
        b"a3",
    ]
    # The same checks again: every row now conflicts (each key moved on), nothing stored.
    again = client.publish(updates(keyed, [("a", 1), ("c", 3)], 4), raise_on_error=False)
    assert again.failed == 2 and stream_state(client, keyed).messages == 8


def test_expected_last_msg_id_is_checked_per_row(client: ja.Client, keyed: str) -> None:
    table = pa.table(
        {
            "subject": [f"{keyed}.a", f"{keyed}.a"],
            "data": [b"a2", b"a3"],
            "msg_id": ["a2", "a3"],
            # The first row finds c1 last and goes in; the second expects c1 too, but
            # the first row has just become the stream's last.
            "expected_last_msg_id": ["c1", "c1"],
        }
    )
    result = client.publish(table, raise_on_error=False)
    errors = result.acks.column("error").to_pylist()
    assert errors[0] is None
    assert errors[1] is not None and "conflict: expected last msg id c1" in errors[1], errors[1]
    assert stream_state(client, keyed).messages == 4


def test_in_atomic_mode_a_conflict_stores_nothing_of_its_batch(
    client: ja.Client, keyed: str
) -> None:
    result = client.publish(
        updates(keyed, [("a", 1), ("b", 99), ("c", 3), ("a", None)], 2),
        mode="atomic",
        batch_rows=2,
        raise_on_error=False,
    )
    errors = result.acks.column("error").to_pylist()
    # Batch rows 0..1 holds the conflict (b expected at 99): neither row is stored;
    # batch rows 2..3 is stored whole.
    assert errors[2:] == [None, None]
    for error in errors[:2]:
        assert error is not None and error.startswith(
            "atomic batch of rows 0..=1 not stored: conflict"
        )
        assert "row 1: expected last subject sequence 99" in error, error
    assert result.acks.column("seq").to_pylist() == [None, None, 4, 5]
    assert read_all(client, keyed).column("data").to_pylist()[3:] == [b"c2", b"a2"]


def test_expectation_columns_are_checked_and_named(client: ja.Client, keyed: str) -> None:
    negative = pa.RecordBatchReader.from_batches(
        updates(keyed, [("a", 1)], 2).schema,
        [
            updates(keyed, [("a", 1), ("b", 2)], 2).to_batches()[0],
            updates(keyed, [("c", 3), ("c", -1)], 2).to_batches()[0],
        ],
    )
    with pytest.raises(
        BadInputError, match=r"column 'expected_last_subject_seq', row 3: .*negative"
    ) as info:
        client.publish(negative)
    # As for any bad input, the rows before it were published: their checks passed.
    assert info.value.result.stored == 3  # type: ignore[attr-defined]
    wrong_type = updates(keyed, [("a", 1)], 2).set_column(
        2, "expected_last_subject_seq", pa.array(["1"])
    )
    with pytest.raises(BadInputError, match="'expected_last_subject_seq' must be an integer"):
        client.publish(wrong_type)
    with pytest.raises(BadInputError, match="as columns or as the option, not both"):
        client.publish(updates(keyed, [("a", 1)], 2), expected_last_seq=3)
    with pytest.raises(
        BadInputError, match="column 'expected_last_msg_id' does not work with mode='atomic'"
    ):
        client.publish(
            pa.table({"subject": [f"{keyed}.a"], "data": [b"x"], "expected_last_msg_id": ["c1"]}),
            mode="atomic",
        )
    with pytest.raises(BadInputError, match="work with mode='acked' or mode='atomic'"):
        client.publish(updates(keyed, [("a", 1)], 2), mode="fast")
    # None of the refused calls sent anything.
    assert stream_state(client, keyed).messages == 6
    with pytest.raises(PublishError):
        client.publish(updates(keyed, [("a", 7)], 2))
