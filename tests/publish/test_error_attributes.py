"""Errors say what is at fault by attribute, not only in words: the options of a bad
option (``BadInputError.options``), the column of bad input (``.column``), the
JetStream error code of each failed row (``PublishResult.error_codes``). Callers that
name things otherwise (Spark, the command line) rely on these."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

import jetstream_arrow as ja
from cli_helpers import cli
from jetstream_arrow import _core
from jetstream_arrow.exceptions import BadInputError, PublishError


@pytest.mark.parametrize(
    ("given", "options"),
    [
        ({"user": "u"}, ("user", "password")),
        ({"password": "p"}, ("password", "user")),
        ({"domain": "hub", "api_prefix": "$JS.X.API"}, ("domain", "api_prefix")),
        ({"connect_timeout": 0}, ("connect_timeout",)),
        ({"connect_timeout": -1.5}, ("connect_timeout",)),
        ({"max_reconnects": True}, ("max_reconnects",)),
        ({"max_reconnects": -1}, ("max_reconnects",)),
        ({"ping_interval": "soon"}, ("ping_interval",)),
        ({"creds": "a.creds", "creds_content": "x"}, ("creds", "creds_content")),
        ({"tls_cert": "c.pem"}, ("tls_cert", "tls_key", "tls_cert_content", "tls_key_content")),
    ],
)
def test_a_bad_connect_option_is_named_by_attribute(
    given: dict[str, object], options: tuple[str, ...]
) -> None:
    with pytest.raises(BadInputError) as raised:
        ja.ConnectOptions(**given)  # type: ignore[arg-type]
    assert raised.value.options == options, raised.value
    # The message names them too, for people.
    assert all(f"'{o}'" in str(raised.value) for o in options[:1])


def test_an_error_of_no_option_names_none() -> None:
    with pytest.raises(BadInputError) as raised:
        _core.check_publish_input(pa.record_batch({"data": [b"x"]}))
    assert raised.value.options == () and raised.value.column is None


def test_a_codec_setting_of_another_format_is_named() -> None:
    with pytest.raises(BadInputError) as raised:
        _core.value_schema(ja.ValueCodec("json", avro_schema='"long"'))
    assert raised.value.options == ("avro_schema",)


@pytest.mark.parametrize(
    ("columns", "column"),
    [
        ({"subject": [1], "data": [b"x"]}, "subject"),
        ({"subject": ["s"], "data": [1]}, "data"),
        ({"subject": ["s"], "data": [b"x"], "msg_id": [1]}, "msg_id"),
        (
            {"subject": ["s"], "data": [b"x"], "expected_last_subject_seq": ["7"]},
            "expected_last_subject_seq",
        ),
        ({"subject": ["s"], "data": [b"x"], "headers": [1]}, "headers"),
    ],
)
def test_a_bad_column_is_named_by_attribute_and_as_the_caller_calls_it(
    columns: dict[str, list[object]], column: str
) -> None:
    batch = pa.record_batch(columns)
    with pytest.raises(BadInputError) as raised:
        _core.check_publish_input(batch)
    assert raised.value.column == column
    assert f"column '{column}'" in str(raised.value)
    # Taken under another name (Spark's msgIdColumn, another case): named so.
    theirs = f"My_{column}"
    with pytest.raises(BadInputError) as renamed:
        _core.check_publish_input(batch, None, {column: theirs})
    assert renamed.value.column == theirs
    assert f"column '{theirs}'" in str(renamed.value)
    assert f"column '{column}'" not in str(renamed.value)


def test_a_row_refused_for_its_expected_stream_has_that_error_code(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    stream, other = new_stream("ES"), new_stream("ES_OTHER")
    rows = pa.table({"subject": [f"{stream}.a", f"{stream}.b"], "data": [b"1", b"2"]})
    stored = client.publish(rows, expected_stream=stream)
    assert stored.failed == 0 and stored.error_codes is None
    with pytest.raises(PublishError) as raised:
        client.publish(rows, expected_stream=other, max_retries=0)
    result = raised.value.result
    assert result.failed == 2 and result.error_codes is not None
    assert result.error_codes.type == pa.uint32()
    assert result.error_codes.to_pylist() == [_core.ERR_STREAM_NOT_MATCH] * 2 == [10060] * 2
    assert result.first_failure() == (result.acks["error"][0].as_py(), 10060)


def test_a_row_failed_without_an_error_code_has_none(
    client: ja.Client, new_stream: Callable[..., str]
) -> None:
    stream = new_stream("CODES")
    rows = pa.table(
        {
            "subject": [f"{stream}.a"] * 2,
            "data": [b"1", b"2"],
            "expected_last_subject_seq": pa.array([0, 5], pa.uint64()),
        }
    )
    with pytest.raises(PublishError) as raised:
        client.publish(rows)
    result = raised.value.result
    assert result.acks.column("error").is_valid().to_pylist() == [False, True]
    # The conflict of an expected-last check is told in the row's words; the stored
    # row has no code.
    assert result.error_codes is not None and result.error_codes[0].as_py() is None


def test_the_command_line_names_the_flags_of_bad_connect_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = cli(
        capsys, "streams", "enable-exactly-once", "S", "-s", "nats://127.0.0.1:1", "--user", "u"
    )
    assert run.code == 2, run
    assert "option 'user' needs 'password'" in run.err
    assert "(flags: --user, --password)" in run.err, run.err
