"""The command line on a PostgreSQL store: --store / INFAI_STORE, migrate, copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg

from infai.store import MessageRecord, Store, ToolResultRecord
from infai.store.pg import PgStore


def infai(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infai", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def test_session_commands_and_a_headless_run_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    new = infai("--store", pg_url, "session", "new", "--name", "shared", "--json")
    assert new.returncode == 0, new.stderr
    sid = json.loads(new.stdout)["id"]
    appended = infai("--store", pg_url, "session", "append", sid, "--kind", "message",
                     "--role", "user", "--content", "hello")  # fmt: skip
    assert appended.returncode == 0, appended.stderr
    listed = infai("session", "ls", "--json", env={"INFAI_STORE": pg_url})
    assert [s["id"] for s in json.loads(listed.stdout)] == [sid]
    ran = infai("run", "--session", sid, "second", env={"INFAI_STORE": pg_url}, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "offline model: you said 'second'" in ran.stdout
    log = infai("--store", pg_url, "session", "log", sid, "--json")
    logged = json.loads(log.stdout)
    contents = [entry["preview"] for entry in logged if entry["kind"] == "message"]
    assert contents[:2] == ["hello", "second"] and len(contents) == 3
    assert [entry["kind"] for entry in logged].count("snapshot") == 1  # the turn's files
    checked = infai("--store", pg_url, "session", "fsck", sid)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_bad_store_url_is_a_clear_error() -> None:
    out = infai("--store", "postgresql://nobody@127.0.0.1:1/none", "session", "ls")
    assert out.returncode == 1
    assert "cannot reach postgresql://127.0.0.1:1/none" in out.stderr
    assert "Traceback" not in out.stderr


def test_migrate_reports_the_schema(pg_url: str) -> None:
    first = infai("--store", pg_url, "store", "migrate")
    assert first.returncode == 0, first.stderr
    assert "applied migration 1: sessions, events, blobs" in first.stdout
    again = infai("--store", pg_url, "store", "migrate")
    assert again.stdout.strip() == "schema at version 4"


def test_copy_a_directory_to_postgresql_and_back_verified(pg_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = Store(home)
    info = store.create_session(name="to copy", working_dir="/src")
    big = ToolResultRecord(call_id="c", name="read_file", content="b" * 40_000)
    with store.open_writer(info.id) as writer:
        first = writer.append(MessageRecord(content="one"), "user")
        writer.append(big, "tool")
        writer.append(MessageRecord(content="branch"), "user", parent=first.id)
    empty = store.create_session(name="empty").id

    there = infai("store", "copy", "--from", str(home), "--to", pg_url)
    assert there.returncode == 0, there.stderr
    assert "copied 3 events, verified" in there.stderr and "copied 0 events" in there.stderr
    with PgStore(pg_url) as pg, pg.open_reader(info.id) as reader:
        assert reader.head == store.open_reader(info.id).head and reader.count == 3
        assert reader.entry_at(2).branch_from == first.id
        assert reader.event(reader.entry_at(1).id, resolve=True).record == big
        assert pg.info(empty).name == "empty"

    again = infai("store", "copy", "--from", str(home), "--to", pg_url)
    assert again.returncode == 0 and again.stderr.count("already there, identical") == 2

    back = tmp_path / "back"
    returned = infai("store", "copy", "--from", pg_url, "--to", str(back), info.id)
    assert returned.returncode == 0, returned.stderr
    with Store(back).open_reader(info.id) as reader:
        assert reader.count == 3 and reader.context().events[0].id == first.id

    with psycopg.connect(pg_url, autocommit=True) as conn:  # make the database copy differ
        conn.execute("UPDATE infai_sessions SET info = jsonb_set(info, '{name}', '\"x\"')")
    clash = infai("store", "copy", "--from", str(home), "--to", pg_url)
    assert clash.returncode == 1
    assert "already there and different (metadata differs)" in clash.stderr


def test_a_session_postgresql_cannot_hold_is_reported_and_the_rest_copied(
    pg_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    store = Store(home)
    odd = store.create_session(name="fine for now").id
    meta = home / "sessions" / odd / "session.json"
    # an older infai wrote a NUL into a name: the file store reads it, jsonb cannot hold it
    meta.write_text(meta.read_text().replace("fine for now", "bad\\u0000name"))
    assert store.info(odd).name == "bad\x00name"
    fine = store.create_session(name="fine").id
    copied = infai("store", "copy", "--from", str(home), "--to", pg_url)
    assert copied.returncode == 1
    assert f"{odd}" in copied.stderr and "field 'name' contains a NUL character" in copied.stderr
    assert "1 of 2 sessions were not copied" in copied.stderr
    with PgStore(pg_url) as pg:
        assert pg.info(fine).name == "fine" and not pg.exists(odd)
