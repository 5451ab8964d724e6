"""The `infai session` plumbing: outputs, --json, exit codes, and nothing changed on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def run(home: Path, *args: str, input: str | None = None, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args], input=input)
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def snapshot(home: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(home)): p.read_bytes()
        for p in sorted(home.rglob("*"))
        if p.is_file() and p.name != "LOCK"
    }


def new_session(home: Path, *extra: str) -> str:
    return run(home, "session", "new", *extra).stdout.strip()


def append(home: Path, sid: str, content: str, *extra: str) -> str:
    out = run(
        home,
        "session",
        "append",
        sid,
        "--kind",
        "message",
        "--role",
        "user",
        "--content",
        content,
        *extra,
    )
    return out.stdout.strip()


def test_new_ls_and_json(home: Path) -> None:
    wd = str(home.parent)  # a working dir must exist (issue 13)
    a = new_session(home, "--name", "first", "--working-dir", wd, "--model", "offline")
    b = new_session(home, "--name", "second")
    append(home, a, "touch a so it is the most recently used")
    listed = json.loads(run(home, "session", "ls", "--json").stdout)
    assert [s["id"] for s in listed] == [a, b]
    assert listed[0]["name"] == "first" and listed[0]["working_dir"] == wd
    assert listed[0]["model"] == "offline" and listed[0]["format"] == 1
    plain = run(home, "session", "ls").stdout.splitlines()
    assert plain[0].split()[0] == "SESSION"  # a header first (issue 13)
    assert "first" in next(line for line in plain if a in line)
    info = json.loads(run(home, "session", "new", "--json").stdout)
    assert info["created_at"].endswith("Z")


def test_append_branch_log_tree_show_context(home: Path) -> None:
    sid = new_session(home)
    a = append(home, sid, "first")
    b = append(home, sid, "second")
    c = append(home, sid, "alternative", "--parent", a)
    log = json.loads(run(home, "session", "log", sid, "--json").stdout)
    assert [e["id"] for e in log] == [a, c]
    assert log[-1]["head"] and log[-1]["branch_from"] == a
    everything = json.loads(run(home, "session", "log", sid, "--all", "--json").stdout)
    assert [e["id"] for e in everything] == [a, b, c]
    tree = run(home, "session", "tree", sid).stdout.splitlines()
    assert tree[0].startswith(f"o {a}")
    assert tree[1].startswith(f"├─o {b}") and tree[2].startswith(f"└─* {c}")
    assert tree[2].endswith("<- HEAD")
    tree_json = json.loads(run(home, "session", "tree", sid, "--json").stdout)
    assert set(tree_json["leaves"]) == {b, c} and tree_json["head"] == c
    shown = json.loads(run(home, "session", "show", sid, b, "--json").stdout)
    assert shown["record"] == {"content": "second"} and shown["parent_id"] == a
    ctx = json.loads(run(home, "session", "context", sid, "--at", b, "--json").stdout)
    assert [e["record"]["content"] for e in ctx] == ["first", "second"]


def test_record_file_stdin_blob_and_compaction_boundary(home: Path, tmp_path: Path) -> None:
    sid = new_session(home)
    append(home, sid, "before")
    big = {"call_id": "c1", "name": "bash", "content": "x" * 40_000}
    out = run(
        home,
        "session",
        "append",
        sid,
        "--kind",
        "tool_result",
        "--role",
        "tool",
        "--record-file",
        "-",
        "--json",
        input=json.dumps(big),
    )
    blob_event = json.loads(out.stdout)
    assert blob_event["digest"].startswith("sha256:")
    record_file = tmp_path / "c.json"
    record_file.write_text(json.dumps({"summary": "so far", "goals": ["ship"]}))
    run(
        home,
        "session",
        "append",
        sid,
        "--kind",
        "compaction",
        "--role",
        "assistant",
        "--record-file",
        str(record_file),
    )
    after = append(home, sid, "after")
    ctx = json.loads(run(home, "session", "context", sid, "--json").stdout)
    assert [e["kind"] for e in ctx] == ["compaction", "message"]
    assert ctx[0]["record"]["goals"] == ["ship"] and ctx[-1]["id"] == after
    shown = json.loads(run(home, "session", "show", sid, blob_event["id"], "--json").stdout)
    assert shown["record"]["content"] == "x" * 40_000


@pytest.mark.parametrize(
    "args",
    [
        ["session", "show", "../../etc", "00000000-0000-0000-0000-000000000000"],
        ["session", "log", "not-a-uuid"],
        ["session", "log", "01a23736-10fd-74ac-986a-9e7ccbd35e99"],
        ["session", "append", "{sid}", "--kind", "message", "--role", "user", "--record", "{"],
        [
            "session",
            "append",
            "{sid}",
            "--kind",
            "message",
            "--role",
            "user",
            "--record",
            '{"content": 5}',
        ],
        [
            "session",
            "append",
            "{sid}",
            "--kind",
            "message",
            "--role",
            "user",
            "--record",
            '{"text": "x"}',
        ],
        [
            "session",
            "append",
            "{sid}",
            "--kind",
            "message",
            "--role",
            "user",
            "--content",
            "x",
            "--parent",
            "01a23736-10fd-74ac-986a-9e7ccbd35e99",
        ],
        ["session", "append", "{sid}", "--kind", "message", "--role", "User!", "--content", "x"],
        ["session", "append", "{sid}", "--kind", "message", "--role", "user"],
        ["session", "append", "{sid}", "--kind", "tool_call", "--role", "user", "--content", "x"],
        ["session", "append", "{sid}", "--kind", "nope", "--role", "user", "--content", "x"],
        [
            "session",
            "append",
            "{sid}",
            "--kind",
            "message",
            "--role",
            "user",
            "--record-file",
            "/nonexistent/file.json",
        ],
        ["session", "show", "{sid}", "01a23736-10fd-74ac-986a-9e7ccbd35e99"],
        ["session", "fsck"],
        ["session", "import", "/nonexistent/export.jsonl"],
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(home: Path, args: list[str]) -> None:
    sid = new_session(home)
    append(home, sid, "existing")
    before = snapshot(home)
    result = run(home, *[a.replace("{sid}", sid) for a in args], code=2)
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 or "Usage:" in message
    assert snapshot(home) == before


def test_fsck_reports_corruption_with_exit_1(home: Path) -> None:
    sid = new_session(home)
    for i in range(3):
        append(home, sid, f"message {i}")
    assert (
        run(home, "session", "fsck", sid)
        .stdout.strip()
        .endswith("ok (3 events, 0 blobs, 0 problems, 0 unreferenced blobs)")
    )
    chunk = home / "sessions" / sid / "chunks" / "000000.jsonl"
    data = bytearray(chunk.read_bytes())
    second = data.index(b"\n") + 1
    data[second + 40] ^= 0x01
    chunk.write_bytes(bytes(data))
    report = json.loads(run(home, "session", "fsck", sid, "--json", code=1).stdout)[0]
    assert not report["ok"]
    # one flipped byte: one problem, where it is (issue 13)
    assert report["problems"] == [
        {"path": str(chunk), "offset": second, "detail": "line fails its checksum"}
    ]
    assert report["status"] == "damaged"
    all_reports = run(home, "session", "fsck", "--all", code=1).stdout
    assert f"{sid}: damaged" in all_reports


def test_fsck_repair_rebuilds_a_deleted_index(home: Path) -> None:
    sid = new_session(home)
    ids = [append(home, sid, f"m{i}") for i in range(4)]
    index = home / "sessions" / sid / "index.jsonl"
    index.unlink()
    out = json.loads(run(home, "session", "fsck", sid, "--repair", "--json").stdout)[0]
    assert out["ok"] and out["repaired"]
    log = json.loads(run(home, "session", "log", sid, "--json").stdout)
    assert [e["id"] for e in log] == ids


def test_export_rm_import_roundtrip(home: Path, tmp_path: Path) -> None:
    sid = new_session(home, "--name", "trip")
    a = append(home, sid, "one")
    append(home, sid, "two")
    append(home, sid, "three", "--parent", a)
    run(
        home,
        "session",
        "append",
        sid,
        "--kind",
        "tool_result",
        "--role",
        "tool",
        "--record",
        json.dumps({"call_id": "c", "name": "read", "content": "y" * 50_000}),
    )
    before = json.loads(run(home, "session", "log", sid, "--all", "--json").stdout)
    meta_before = json.loads(run(home, "session", "ls", "--json").stdout)
    exported = tmp_path / "s.jsonl"
    run(home, "session", "export", sid, "-o", str(exported))
    assert len(exported.read_text().splitlines()) == 5
    run(home, "session", "import", str(exported), code=2)  # exists
    run(home, "session", "rm", sid)
    run(home, "session", "log", sid, code=2)
    assert run(home, "session", "import", str(exported)).stdout.strip() == sid
    after = json.loads(run(home, "session", "log", sid, "--all", "--json").stdout)
    strip = [{k: v for k, v in e.items() if k != "location"} for e in before]
    assert [{k: v for k, v in e.items() if k != "location"} for e in after] == strip
    assert json.loads(run(home, "session", "fsck", sid, "--json").stdout)[0]["ok"]
    # Metadata comes back as it was: name, timestamps, links.
    assert json.loads(run(home, "session", "ls", "--json").stdout) == meta_before
    other = tmp_path / "other-home"
    assert run(other, "session", "import", "-", input=exported.read_text()).stdout.strip() == sid


def test_import_rejects_a_dangling_parent_and_creates_nothing(home: Path, tmp_path: Path) -> None:
    sid = new_session(home)
    append(home, sid, "one")
    exported = tmp_path / "s.jsonl"
    run(home, "session", "export", sid, "-o", str(exported))
    lines = exported.read_text().splitlines()
    event = json.loads(lines[1])
    event["parent_id"] = "01a23736-10fd-74ac-986a-9e7ccbd35e99"
    exported.write_text("\n".join([lines[0], json.dumps(event)]) + "\n")
    other = tmp_path / "other"
    result = run(other, "session", "import", str(exported), code=2)
    assert "line 2" in result.stderr and "does not appear earlier" in result.stderr
    assert run(other, "session", "ls", "--json").stdout.strip() == "[]"


def test_console_script_runs_in_a_real_process(home: Path) -> None:
    exe = Path(sys.executable).with_name("infai")
    env = {**os.environ, "INFAI_HOME": str(home)}
    sid = subprocess.run(
        [str(exe), "session", "new"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    bad = subprocess.run(
        [str(exe), "session", "log", "nope"], env=env, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "not a UUID" in bad.stderr
    assert (home / "sessions" / sid / "session.json").is_file()
