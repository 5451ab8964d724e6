"""An imported session brings no permission rules and no future stamps (store.transfer).

An export file comes from outside: importing it must not let tools run unasked
(its kept "allow always" rules) nor keep it on top of the session list for ever
(a future ``updated_at``), which would make ``--continue`` pick it.
"""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from infai.agent.session import KEPT_RULES
from infai.shells.cli import main
from infai.store import InvalidInput, MessageRecord, Store, export_lines, import_session
from infai.store.transfer import UNTRUSTED_EXTRA

FUTURE = "2999-01-01T00:00:00.000000Z"


def _export(store: Store, working_dir: Path, **meta: object) -> bytes:
    """A one-message session exported with its metadata changed as ``meta`` says,
    then removed from ``store`` (so importing it there creates it again)."""
    sid = store.create_session(name="shared", working_dir=str(working_dir)).id
    with store.open_writer(sid) as writer:
        writer.append(MessageRecord(content="hello"), "user")
    lines = list(export_lines(store, sid))
    store.remove_session(sid)
    header = json.loads(lines[0])
    header["session"].update(meta)
    return json.dumps(header).encode() + b"\n" + b"".join(lines[1:])


def test_the_dropped_key_is_where_allow_always_rules_live() -> None:
    assert KEPT_RULES in UNTRUSTED_EXTRA  # the store cannot import the agent's constant


def test_kept_rules_are_dropped_and_future_stamps_clamped(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    data = _export(
        store,
        tmp_path,
        extra={"allowed": ["bash *"], "note": "kept"},
        updated_at=FUTURE,
        created_at=FUTURE,
    )
    said: list[str] = []
    info = import_session(store, io.BytesIO(data), "x.jsonl", report=said.append)
    assert info.extra == {"note": "kept", "import": {"working_dir": str(tmp_path)}}
    now = datetime.now(UTC).isoformat()
    assert info.updated_at < now and info.created_at < now
    assert store.list_sessions()[0].updated_at < now
    assert len(said) == 4 and all(s.startswith("x.jsonl: ") for s in said)
    assert info.working_dir is None  # where files are written is not the file's choice
    assert any(f"working_dir {str(tmp_path)!r} dropped" in s for s in said)
    assert any("extra.allowed dropped" in s and "bash *" in s for s in said)
    assert any("updated_at 2999-01-01" in s for s in said)


def test_a_copy_between_own_stores_keeps_everything(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    data = _export(store, tmp_path, extra={"allowed": ["bash ls"]}, updated_at=FUTURE)
    said: list[str] = []
    info = import_session(store, io.BytesIO(data), trusted=True, report=said.append)
    assert info.extra == {"allowed": ["bash ls"]} and info.updated_at == FUTURE and not said


@pytest.mark.parametrize("stamp", ["3000", "zzzz", "2999-01-01T00:00:00.123456789+05:00"])
def test_a_stamp_that_would_sort_first_is_clamped_or_refused(tmp_path: Path, stamp: str) -> None:
    store = Store(tmp_path / "home")
    data = _export(store, tmp_path, updated_at=stamp)
    try:
        info = import_session(store, io.BytesIO(data))
    except InvalidInput as exc:
        assert "session.updated_at" in str(exc) and "RFC 3339" in str(exc)
        assert store.list_sessions() == []  # bad input changes nothing
        return
    assert info.updated_at < datetime.now(UTC).isoformat()


def test_an_event_id_stamped_in_the_future_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    lines = _export(store, tmp_path).splitlines(keepends=True)
    event = json.loads(lines[1])
    millis = int(datetime(2999, 1, 1, tzinfo=UTC).timestamp() * 1000)
    forged = uuid.UUID(int=(millis << 80) | (0x7 << 76) | (0b10 << 62) | 1)
    event["id"] = str(forged)
    data = lines[0] + json.dumps(event).encode() + b"\n"
    with pytest.raises(InvalidInput, match=r"line 2: event id .* stamped in the future"):
        import_session(store, io.BytesIO(data))
    assert store.list_sessions() == []


def test_an_imported_session_still_asks_before_running_bash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack, judged by its effect: the file's "allow always: bash *" would
    run the model's command unasked in the session continued after import."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    data = _export(Store(home), work, extra={"allowed": ["bash *"]})
    export = tmp_path / "shared.jsonl"
    export.write_bytes(data)
    runner = CliRunner()
    imported = runner.invoke(main, ["--home", str(home), "session", "import", str(export)])
    assert imported.exit_code == 0, imported.output
    sid = imported.stdout.strip()
    assert "extra.allowed dropped" in imported.stderr and "bash *" in imported.stderr
    call = {"id": "c1", "name": "bash", "arguments": {"command": "touch pwned"}}
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": "", "tool_calls": [call]}, "done"]))
    argv = ["--home", str(home), "run", "--session", sid, "--model", f"scripted:{script}", "go"]
    ran = runner.invoke(main, argv)
    assert ran.exit_code == 0, (ran.output, ran.exception)
    assert "[bash error] permission denied" in ran.stderr
    assert not (work / "pwned").exists()
