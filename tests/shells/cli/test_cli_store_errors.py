"""What the CLI says when the store refuses its input, or recovers a session on open."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from infai.shells.cli import main
from infai.store import MessageRecord, Store


def msg(text: str) -> MessageRecord:
    return MessageRecord(content=text)


# -- CLI input that escapes as a non-StoreError ----------------------------------------------


def test_cli_new_with_undecodable_name_is_bad_input(tmp_path: Path) -> None:
    """A name from argv holding non-UTF-8 bytes (surrogate-escaped by Python) passes the
    metadata check, then `dumps(...).encode()` raises UnicodeEncodeError inside
    create_session: a traceback with exit 1, and a `.new-<id>` directory left behind
    forever (nothing ever removes it)."""
    home = tmp_path / "home"
    result = CliRunner().invoke(main, ["--home", str(home), "session", "new", "--name", "\udcff"])
    assert result.exit_code == 2, result.exception
    sessions = home / "sessions"
    assert not sessions.exists() or os.listdir(sessions) == []


def test_cli_deeply_nested_record_is_bad_input(tmp_path: Path) -> None:
    """json.loads raises RecursionError (not ValueError) on deep nesting; the CLI catches
    only ValueError, so the user gets a traceback and exit 1 instead of one line and 2.
    (Nesting just under the limit is stored, and then `export` of the session fails with
    RecursionError: the store accepts records it cannot read back from a deeper stack.)"""
    home = tmp_path / "home"
    runner = CliRunner()
    sid = runner.invoke(main, ["--home", str(home), "session", "new"]).stdout.strip()
    record = '{"call_id":"c","name":"n","arguments":' + '{"a":' * 5000 + "{}" + "}" * 5001
    result = runner.invoke(
        main,
        [
            "--home",
            str(home),
            "session",
            "append",
            sid,
            "--kind",
            "tool_call",
            "--role",
            "assistant",
            "--record",
            record,
        ],
    )
    assert result.exit_code == 2, result.exception


# -- recovery is reported, as the format doc says ----------------------------------------------


def test_cli_reports_a_truncated_tail(tmp_path: Path) -> None:
    """docs/store-format.md, recovery step 1: the truncation "is reported, never silent".
    The notes land in Store.recovery_notes, which nothing in the CLI reads: `session
    append` after a crash truncates the torn tail without a word."""
    home = tmp_path / "home"
    store = Store(home)
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(msg("a"), "user")
    with open(store.paths(sid).chunk(0), "ab") as f:
        f.write(b'{"seq":1,"id":"torn')
    result = CliRunner().invoke(
        main,
        [
            "--home",
            str(home),
            "session",
            "append",
            sid,
            "--kind",
            "message",
            "--role",
            "user",
            "--content",
            "b",
        ],
    )
    assert result.exit_code == 0, result.exception
    assert "truncated" in result.stderr
