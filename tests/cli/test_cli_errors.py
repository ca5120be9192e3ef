"""Errors a person can act on, with exit codes 1 (failure) and 2 (usage)."""

from __future__ import annotations

import json
import socket

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import jetstream_arrow as ja
from cli_helpers import cli, cli_process


@pytest.fixture
def rows_file(tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}), path)
    return path


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_help_reads_well():
    run = cli_process("--help")
    assert run.code == 0
    for command in ("load", "export", "server", "demo"):
        assert command in run.out
    assert "exit codes" in run.out
    run = cli_process("load", "--help")
    assert run.code == 0
    for flag in (
        "--subject-column",
        "--data-column",
        "--headers-column",
        "--msg-id-column",
        "--create-stream",
        "--context",
        "--creds",
        "--tls-ca",
        "--api-prefix",
        "duplicate window",
        "SHA-256",
        "--csv-types",
    ):
        assert flag in run.out, flag


@pytest.mark.parametrize(
    "argv",
    [
        ["load", "x.parquet", "--subject", "a"],  # no --stream
        ["load", "x.parquet", "--stream", "S"],  # neither --subject nor --subject-column
        ["load", "x.parquet", "--stream", "S", "--subject", "a", "--subject-column", "c"],
        # --csv-types for files none of which is CSV
        ["load", "x.parquet", "--stream", "S", "--subject", "a", "--csv-types", "infer"],
        ["export", "S"],  # no -o
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2(capsys, argv):
    run = cli(capsys, *argv)
    assert run.code == 2
    assert "usage:" in run.err


def test_unknown_extension_is_a_usage_error(capsys, tmp_path):
    path = tmp_path / "rows.xlsx"
    path.write_bytes(b"x")
    run = cli(capsys, "load", str(path), "--stream", "S", "--subject", "a")
    assert run.code == 2
    assert "--format" in run.err


def test_missing_file(capsys, tmp_path, nats_server):
    run = cli(
        capsys,
        "load",
        str(tmp_path / "nope.csv"),
        "--stream",
        "S",
        "--subject",
        "a",
        "-s",
        nats_server.url,
    )
    assert run.code == 1
    assert "nope.csv" in run.err and "does not exist" in run.err


def test_unreadable_file(capsys, tmp_path, nats_server):
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"this is not parquet at all" * 10)
    run = cli(capsys, "load", str(bad), "--stream", "S", "--subject", "a", "-s", nats_server.url)
    assert run.code == 1
    assert "cannot read" in run.err and "broken.parquet" in run.err and "parquet" in run.err
    assert "Traceback" not in run.err


def test_unknown_column(capsys, rows_file, nats_server):
    run = cli(
        capsys,
        "load",
        str(rows_file),
        "--stream",
        "S",
        "--subject",
        "a",
        "--data-column",
        "nmae",
        "-s",
        nats_server.url,
    )
    assert run.code == 1
    assert "'nmae'" in run.err and "id, name" in run.err


def test_unreachable_server(capsys, rows_file):
    url = f"nats://127.0.0.1:{closed_port()}"
    run = cli(
        capsys,
        "load",
        str(rows_file),
        "--stream",
        "S",
        "--subject",
        "a",
        "-s",
        url,
        "--connect-timeout",
        "1",
    )
    assert run.code == 1
    assert "cannot reach NATS" in run.err and url in run.err
    assert "Traceback" not in run.err


def test_missing_stream_suggests_create_stream(capsys, rows_file, nats_server):
    run = cli(
        capsys, "load", str(rows_file), "--stream", "NOPE", "--subject", "a", "-s", nats_server.url
    )
    assert run.code == 1
    assert "'NOPE' does not exist" in run.err and "--create-stream" in run.err
    run = cli(capsys, "export", "NOPE", "-o", "x.parquet", "-s", nats_server.url)
    assert run.code == 1
    assert "'NOPE' does not exist" in run.err


def test_subject_outside_stream(capsys, rows_file, nats_server):
    with ja.connect(nats_server.url) as client:
        client.create_stream("S", subjects=["s.>"])
    run = cli(
        capsys, "load", str(rows_file), "--stream", "S", "--subject", "other", "-s", nats_server.url
    )
    assert run.code == 1
    assert "does not store subject 'other'" in run.err


AUTH = """
authorization {
    users = [
        {user: loader, password: secret}
        {user: reader, password: secret, permissions: {
            publish: {allow: ["$JS.API.>", "_INBOX.>"]}
            subscribe: {allow: ["_INBOX.>"]}
        }}
    ]
}
"""


def test_wrong_password(capsys, rows_file, nats_server_factory):
    server = nats_server_factory(AUTH)
    run = cli(
        capsys,
        "load",
        str(rows_file),
        "--stream",
        "S",
        "--subject",
        "a",
        "-s",
        server.url,
        "--user",
        "loader",
        "--password",
        "wrong",
    )
    assert run.code == 1
    assert "permission denied" in run.err or "authorization" in run.err.lower()
    assert "--creds" in run.err or "credentials" in run.err


def test_publish_not_permitted(capsys, rows_file, nats_server_factory):
    server = nats_server_factory(AUTH)
    with ja.connect(server.url, user="loader", password="secret") as client:
        client.create_stream("S", subjects=["s.>"])
    run = cli(
        capsys,
        "load",
        str(rows_file),
        "--stream",
        "S",
        "--subject",
        "s.rows",
        "-s",
        server.url,
        "--user",
        "reader",
        "--password",
        "secret",
        "--ack-timeout",
        "1",
    )
    assert run.code == 1
    assert "permission" in run.err.lower() or "not permitted" in run.err.lower(), run.err


def test_context_file(capsys, rows_file, nats_server_factory, tmp_path, monkeypatch):
    server = nats_server_factory(AUTH)
    home = tmp_path / "config"
    (home / "nats" / "context").mkdir(parents=True)
    (home / "nats" / "context" / "local.json").write_text(
        json.dumps({"url": server.url, "user": "loader", "password": "env://LOADER_PW"})
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.setenv("LOADER_PW", "secret")
    run = cli(
        capsys,
        "load",
        str(rows_file),
        "--stream",
        "CTX",
        "--subject",
        "ctx",
        "--create-stream",
        "--context",
        "local",
    )
    assert run.code == 0, run.err
    assert "3 stored" in run.out

    run = cli(
        capsys, "load", str(rows_file), "--stream", "CTX", "--subject", "ctx", "--context", "remote"
    )
    assert run.code == 1
    assert "'remote' not found" in run.err and "local" in run.err


def test_failed_export_leaves_no_file(capsys, tmp_path, nats_server):
    with ja.connect(nats_server.url) as client:
        client.create_stream("BIN", subjects=["bin"])
        client.publish(pa.table({"data": [b"ok", b"\xff\xfe not utf-8"]}), subject="bin")
    out = tmp_path / "bin.jsonl"
    run = cli(capsys, "export", "BIN", "-o", str(out), "-s", nats_server.url)
    assert run.code == 1
    assert "not UTF-8" in run.err and "--data-as base64" in run.err
    assert list(tmp_path.iterdir()) == []

    run = cli(capsys, "export", "BIN", "-o", str(out), "--data-as", "base64", "-s", nats_server.url)
    assert run.code == 0, run.err
    assert json.loads(out.read_text().splitlines()[1])["data"] == "//4gbm90IHV0Zi04"
