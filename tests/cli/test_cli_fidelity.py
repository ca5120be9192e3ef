"""``jetstream-arrow load`` stores what the files say, and a load of several files
stores every file: against a real nats-server.

- CSV cells keep their text unless ``--csv-types infer`` is given.
- A JSON-lines line is its message's payload byte for byte; a line that is not JSON,
  or longer than the server's max_payload, stops the load before anything of the
  files is sent, naming file and line.
- Message ids continue across the files of one load, so no file is taken for a
  duplicate of another, and a re-run of the same command stores nothing twice.
- One file's batches go to the server through one pipelined publish.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import jetstream_arrow as ja
from cli_helpers import cli
from jetstream_arrow.positions import POSITION_SUBJECT_PREFIX
from natspy import data_messages, first_data_seq


def _stored(url: str, stream: str, headers: bool = False) -> list[dict]:
    with ja.connect(url) as client:
        table = pa.Table.from_batches(list(client.read(stream, include_headers=headers)))
    return table.to_pylist()


def _messages(url: str, stream: str) -> int:
    """The data messages of ``stream`` (a load keeps one position message per file in
    a stream it made, which is not a row)."""
    return data_messages(url, stream)


def _load(capsys, url: str, *argv: str):
    return cli(capsys, "load", *argv, "-s", url)


# -- several files in one load --------------------------------------------------------


def test_files_of_one_load_get_distinct_ids_and_a_rerun_stores_nothing(
    nats_server, tmp_path, capsys
):
    files = []
    for k in range(3):
        path = tmp_path / f"part{k}.csv"
        pacsv.write_csv(pa.table({"file": [k] * 1000, "row": range(1000)}), path)
        files.append(str(path))
    argv = [*files, "--stream", "M", "--subject", "m.rows", "--msg-id-prefix", "P"]

    run = _load(capsys, nats_server.url, *argv, "--create-stream")
    assert run.code == 0, run.err
    assert "3,000 stored, 0 duplicates" in run.out, run.out
    assert _messages(nats_server.url, "M") == 3000
    stored = _stored(nats_server.url, "M", headers=True)
    ids = [dict(m["headers"])["Nats-Msg-Id"][0] for m in stored]
    # numbered as if the files were one: the first file's ids are those of a
    # single-file load, so a load started as one file keeps its ids
    assert ids == [f"P{n}" for n in range(3000)]

    run = _load(capsys, nats_server.url, *argv)
    assert run.code == 0, run.err
    assert "0 stored, 3,000 duplicates" in run.out, run.out
    assert _messages(nats_server.url, "M") == 3000


def test_duplicates_within_one_load_are_reported(nats_server, tmp_path, capsys):
    """Two files with the same content get the same ids (the default, content-based
    file id): the second adds nothing, and the load says which file and why."""
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    pacsv.write_csv(pa.table({"row": range(500)}), first)
    second.write_bytes(first.read_bytes())
    run = _load(
        capsys,
        nats_server.url,
        str(first),
        str(second),
        "--stream",
        "D",
        "--subject",
        "d",
        "--create-stream",
    )
    assert run.code == 0, run.err
    assert "500 stored, 500 duplicates" in run.out, run.out
    assert "500 rows of this load" in run.err, run.err
    assert f"{second}" in run.err and "same message id" in run.err, run.err
    assert _messages(nats_server.url, "D") == 500


def test_ids_taken_by_another_load_are_not_taken_for_a_rerun(nats_server, tmp_path, capsys):
    """Two loads that both chose --msg-id-prefix P: the second one's rows come back as
    duplicates, and the load says they were not stored instead of exiting 0."""
    monday, tuesday = tmp_path / "monday.csv", tmp_path / "tuesday.csv"
    pacsv.write_csv(pa.table({"day": ["mon"] * 300, "n": range(300)}), monday)
    pacsv.write_csv(pa.table({"day": ["tue"] * 300, "n": range(300)}), tuesday)
    common = ["--stream", "DAYS", "--subject", "days", "--msg-id-prefix", "P"]
    assert _load(capsys, nats_server.url, str(monday), *common, "--create-stream").code == 0
    run = _load(capsys, nats_server.url, str(tuesday), *common)
    assert run.code == 1, run.out
    assert f"{tuesday} row 0 was not stored" in run.err, run.err
    assert "--msg-id-prefix 'P'" in run.err, run.err
    # a re-run of the first load is still a re-run
    run = _load(capsys, nats_server.url, str(monday), *common)
    assert run.code == 0, run.err
    assert "0 stored, 300 duplicates" in run.out


def test_a_file_is_published_in_one_pipelined_call(nats_server, tmp_path, capsys, monkeypatch):
    """Batches of a file flow through one publish, so the ack window does not drain
    at each batch boundary; the totals still count every batch."""
    from jetstream_arrow.client import Publisher

    # Each call: the rows it took when it is a write of the file's position (one
    # row on a $JA.POS. subject, its own publish by design), else None.
    calls: list[int | None] = []
    original = Publisher.publish

    def counting(self, data, subject=None):
        position = (
            isinstance(data, pa.Table)
            and "subject" in data.column_names
            and all(s.startswith(POSITION_SUBJECT_PREFIX) for s in data["subject"].to_pylist())
        )
        calls.append(data.num_rows if position else None)
        return original(self, data, subject)

    monkeypatch.setattr(Publisher, "publish", counting)
    src = tmp_path / "rows.csv"
    pacsv.write_csv(pa.table({"row": range(2000)}), src)
    run = _load(
        capsys,
        nats_server.url,
        str(src),
        "--stream",
        "W",
        "--subject",
        "w",
        "--create-stream",
        "--batch-rows",
        "100",
    )
    assert run.code == 0, run.err
    assert "loaded 2,000 rows" in run.out and "2,000 stored" in run.out
    # The load keeps the file's position (the default into a stream it made): the
    # position is written apart from the rows, one message per write, at least when
    # the file is claimed and when it is closed. The rows are still one publish.
    positions = [rows for rows in calls if rows is not None]
    assert len(positions) >= 2 and set(positions) == {1}, calls
    rows_calls = calls.count(None)
    assert rows_calls == 1, f"{rows_calls} publish calls for 20 batches of one file"


# -- CSV ------------------------------------------------------------------------------

CSV_TEXT = (
    "zip,account,at\n"
    "02134,18446744073709551615,2024-03-01T10:00:00+02:00\n"
    "00501,18446744073709551614,2024-03-01T23:30:00.123456789+02:00\n"
)


def test_csv_cells_keep_their_text(nats_server, tmp_path, capsys):
    src = tmp_path / "accounts.csv"
    src.write_text(CSV_TEXT)
    run = _load(
        capsys, nats_server.url, str(src), "--stream", "T", "--subject", "t", "--create-stream"
    )
    assert run.code == 0, run.err
    payloads = [json.loads(m["data"]) for m in _stored(nats_server.url, "T")]
    assert payloads == [
        {"zip": "02134", "account": "18446744073709551615", "at": "2024-03-01T10:00:00+02:00"},
        {
            "zip": "00501",
            "account": "18446744073709551614",
            "at": "2024-03-01T23:30:00.123456789+02:00",
        },
    ]


def test_csv_types_infer_is_asked_for(nats_server, tmp_path, capsys):
    src = tmp_path / "numbers.csv"
    src.write_text("zip,n\n02134,7\n")
    run = _load(
        capsys,
        nats_server.url,
        str(src),
        "--stream",
        "I",
        "--subject",
        "i",
        "--create-stream",
        "--csv-types",
        "infer",
    )
    assert run.code == 0, run.err
    assert [json.loads(m["data"]) for m in _stored(nats_server.url, "I")] == [{"zip": 2134, "n": 7}]


# -- JSON-lines -----------------------------------------------------------------------


def _odd_lines(count: int) -> list[bytes]:
    """Lines a parser and a serialiser would not give back as they were: spacing, key
    order, escapes, numbers beyond 64 bits, trailing zeros, ``-0.0``."""

    def line(i: int) -> str:
        shapes = [
            f'{{ "b" :  {i} , "a":"caf\\u00e9 {i}"  }}',
            f'{{"a":"café {i}","b":{i}.50,"c":null}}',
            f'{{"z": [1, 2.0, 3e5], "a": 1234567890123456789012{i}}}',
            '\t{"a" : true , "emoji":"\\ud83d\\ude00", "b":-0.0}  ',
            f'{{"nested":{{"k":"v\\"q\\"","n":{i}}},"a":"\\/slash"}}',
        ]
        return shapes[i % len(shapes)]

    return [line(i).encode() for i in range(count)]


def test_jsonl_lines_are_stored_byte_for_byte(nats_server, tmp_path, capsys):
    lines = _odd_lines(200)
    for line in lines:
        json.loads(line)  # the fixture itself is valid JSON
    src = tmp_path / "odd.jsonl"
    # CRLF and a blank line: the terminators are not part of the payload
    src.write_bytes(b"\r\n".join(lines[:100]) + b"\r\n\n" + b"\n".join(lines[100:]) + b"\n")
    run = _load(
        capsys, nats_server.url, str(src), "--stream", "J", "--subject", "j", "--create-stream"
    )
    assert run.code == 0, run.err
    assert "200 stored" in run.out
    assert [m["data"] for m in _stored(nats_server.url, "J")] == lines


def test_jsonl_subject_and_msg_id_fields_leave_the_line_whole(nats_server, tmp_path, capsys):
    lines = [f'{{ "topic":"e.{i % 2}", "id": "k{i}", "v": {i}.0 }}'.encode() for i in range(10)]
    src = tmp_path / "events.jsonl"
    src.write_bytes(b"\n".join(lines))  # no newline after the last line
    run = _load(
        capsys,
        nats_server.url,
        str(src),
        "--stream",
        "E",
        "--subject-column",
        "topic",
        "--msg-id-column",
        "id",
        "--create-stream",
        "--stream-subjects",
        "e.>",
    )
    assert run.code == 0, run.err
    stored = _stored(nats_server.url, "E", headers=True)
    assert [m["data"] for m in stored] == lines
    assert [m["subject"] for m in stored] == [f"e.{i % 2}" for i in range(10)]
    assert [dict(m["headers"])["Nats-Msg-Id"] for m in stored] == [[f"k{i}"] for i in range(10)]


def test_jsonl_field_first_seen_after_the_first_block(nats_server, tmp_path, capsys):
    """The reader once fixed the columns from the first 8 MiB block."""
    filler = "x" * 400
    rows = 22_000  # about 9.5 MB: past the first 8 MiB block
    src = tmp_path / "late.jsonl"
    with src.open("w") as f:
        for i in range(rows):
            f.write(json.dumps({"i": i, "pad": filler}) + "\n")
        f.write('{"i": -1, "late": "first seen here"}\n')
    run = _load(
        capsys,
        nats_server.url,
        str(src),
        "--stream",
        "L",
        "--subject",
        "l",
        "--create-stream",
        "--storage",
        "memory",
    )
    assert run.code == 0, run.err
    assert f"{rows + 1:,} stored" in run.out
    # the file's last row: the rows follow the file's first position message
    first = first_data_seq(nats_server.url, "L")
    with ja.connect(nats_server.url) as client:
        last = client.get_message("L", seq=first + rows)
    assert last.data == b'{"i": -1, "late": "first seen here"}'


def test_jsonl_bad_line_stops_the_load_before_anything_is_sent(nats_server, tmp_path, capsys):
    good = tmp_path / "good.jsonl"
    good.write_text("".join(f'{{"n": {i}}}\n' for i in range(100)))
    bad = tmp_path / "bad.jsonl"
    lines = [f'{{"n": {i}}}' for i in range(1000)]
    lines[499] = '{"n": 499,}'  # line 500
    bad.write_text("\n".join(lines) + "\n")
    with ja.connect(nats_server.url) as client:
        client.create_stream("B", subjects=["b"])
    run = _load(capsys, nats_server.url, str(good), str(bad), "--stream", "B", "--subject", "b")
    assert run.code == 1
    assert f"{bad}:500" in run.err, run.err
    assert _messages(nats_server.url, "B") == 0


def test_jsonl_line_over_max_payload_is_named(small_payload_nats_server, tmp_path, capsys):
    url = small_payload_nats_server.url
    with ja.connect(url) as client:
        limit = int(client.server_info()["max_payload"])
        client.create_stream("H", subjects=["h"])
    src = tmp_path / "huge.jsonl"
    src.write_text('{"n": 1}\n' + json.dumps({"blob": "y" * (limit + 10)}) + '\n{"n": 3}\n')
    run = _load(capsys, url, str(src), "--stream", "H", "--subject", "h")
    assert run.code == 1
    assert f"{src}:2" in run.err and "max_payload" in run.err, run.err
    assert _messages(url, "H") == 0


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        (b'{"topic": "t"}\n{"topic": "t", "n": NaN}\n', "not JSON"),
        (b'{"topic": "t"}\n{"topic": "t\xff"}\n', "UTF-8"),
        (b'{"topic": "t"}\n{"other": 1}\n', "--subject-column 'topic'"),
    ],
)
def test_jsonl_lines_are_checked_before_connecting(tmp_path, capsys, text, detail):
    src = tmp_path / "f.jsonl"
    src.write_bytes(text)
    # no server: the file is checked before the connection is made
    run = cli(
        capsys,
        "load",
        str(src),
        "--stream",
        "X",
        "--subject-column",
        "topic",
        "-s",
        "nats://127.0.0.1:1",
    )
    assert run.code == 1
    assert f"{src}:2" in run.err and detail in run.err, run.err
