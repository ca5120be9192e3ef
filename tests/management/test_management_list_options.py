"""A string given where a stream's or a consumer's option takes a list is refused,
naming the option and how to give one item (no server is asked)."""

from __future__ import annotations

import pytest

from jetstream_arrow.exceptions import BadInputError
from jetstream_arrow.management import ConsumerConfig, StreamConfig


def test_stream_subjects_as_a_string_is_refused() -> None:
    with pytest.raises(BadInputError) as refused:
        StreamConfig(name="ORDERS", subjects="orders.*")  # type: ignore[arg-type]
    message = str(refused.value)
    assert "option 'subjects' takes a list" in message
    assert "subjects=['orders.*']" in message


def test_consumer_filter_subjects_as_a_string_names_both_ways() -> None:
    with pytest.raises(BadInputError) as refused:
        ConsumerConfig(durable_name="d", filter_subjects="orders.1")  # type: ignore[arg-type]
    message = str(refused.value)
    assert "option 'filter_subjects' takes a list" in message
    assert "filter_subjects=['orders.1']" in message
    assert "filter_subject='orders.1'" in message


def test_consumer_priority_groups_as_a_string_is_refused() -> None:
    with pytest.raises(BadInputError) as refused:
        ConsumerConfig(durable_name="d", priority_groups="jobs")  # type: ignore[arg-type]
    message = str(refused.value)
    assert "option 'priority_groups' takes a list" in message
    assert "priority_groups=['jobs']" in message


def test_lists_pass() -> None:
    assert StreamConfig(name="ORDERS", subjects=["orders.*"]).subjects == ["orders.*"]
    config = ConsumerConfig(durable_name="d", filter_subjects=["a"], priority_groups=["g"])
    assert config.filter_subjects == ["a"]
    assert config.priority_groups == ["g"]
