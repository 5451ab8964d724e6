"""Files on the timeline through `infai run`: snapshots after tools, restore on --from."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main
from infai.store import RestoreRecord, SnapshotRecord, Store

ALLOW = ("--allow", "write_file *", "--allow", "bash *", "--allow", "edit_file *")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture(autouse=True)
def checkpoints_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-wide config turns snapshots off; these tests are about them."""
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "no-such-config.toml"))


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.txt").write_text("original\n")
    (root / ".gitignore").write_text("build/\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    monkeypatch.chdir(root)
    return root


def infai(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def script(tmp: Path, name: str, *replies: object) -> str:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "content": "",
        "tool_calls": [{"id": f"c-{name}", "name": name, "arguments": arguments}],
    }


def git_state(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted((root / ".git").rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if path.is_file() else b""
        out[str(path)] = f"{hashlib.sha256(data).hexdigest()} {st.st_mode} {st.st_mtime_ns}"
    return out


def files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def run_json(home: Path, *args: str, code: int = 0) -> list[dict[str, Any]]:
    out = infai(home, "run", "--json", *args, code=code)
    return [json.loads(line) for line in out.stdout.splitlines()]


def saved(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [x["event"] for x in lines if x["type"] == "saved" and x["event"]["kind"] == kind]


def two_turns(home: Path, work: Path, tmp: Path) -> tuple[str, str, str]:
    """Turn 1 writes new.txt and changes a.txt by bash; turn 2 changes both again.
    Returns (session, the end of turn 1, the end of turn 2)."""
    one = script(
        tmp,
        "one",
        call("write_file", path="new.txt", content="v1\n"),
        call("bash", command="echo changed > a.txt"),
        "done one",
    )
    first = run_json(home, "--model", one, *ALLOW, "first")
    snaps = saved(first, "snapshot")
    reasons = [e["record"]["reason"] for e in snaps]
    assert reasons == ["turn start", "after write_file", "after bash"], reasons
    sid = first[0]["session"]
    end_one = saved(first, "message")[-1]["id"]
    two = script(
        tmp,
        "two",
        call("write_file", path="new.txt", content="v2\n"),
        call("bash", command="rm a.txt && mkdir -p src && echo x > src/gen.py"),
        "done two",
    )
    second = run_json(home, "--model", two, *ALLOW, "--session", sid, "second")
    assert len(saved(second, "snapshot")) == 2  # turn start unchanged: not recorded
    end_two = saved(second, "message")[-1]["id"]
    return sid, end_one, end_two


def test_from_restores_older_files_and_back_again(home: Path, work: Path, tmp_path: Path) -> None:
    git_before = git_state(work)
    sid, end_one, end_two = two_turns(home, work, tmp_path)
    newest = files(work)
    assert newest == {".gitignore": "build/\n", "new.txt": "v2\n", "src/gen.py": "x\n"}
    back = run_json(home, "--session", sid, "--from", end_one, "again")
    assert files(work) == {".gitignore": "build/\n", "a.txt": "changed\n", "new.txt": "v1\n"}
    restore = saved(back, "restore")[0]
    assert restore["parent_id"] == end_one
    prompt = next(e for e in saved(back, "message") if e["role"] == "user")
    assert prompt["parent_id"] == restore["id"]
    run_json(home, "--session", sid, "--from", end_two, "forward")
    assert files(work) == newest  # nothing lost
    assert git_state(work) == git_before  # the user's repository untouched


def test_external_edit_refuses_then_force_keeps_it_recoverable(
    home: Path, work: Path, tmp_path: Path
) -> None:
    sid, end_one, _ = two_turns(home, work, tmp_path)
    (work / "new.txt").write_text("mine\n")  # outside the agent
    before = files(work)
    count = len(list(Store(home).open_reader(sid).entries()))
    out = infai(home, "run", "--session", sid, "--from", end_one, "again", code=2)
    assert "new.txt" in out.stderr and "restore refused" in out.stderr
    assert files(work) == before
    assert len(list(Store(home).open_reader(sid).entries())) == count  # nothing recorded
    forced = run_json(home, "--session", sid, "--from", end_one, "--force", "again")
    assert (work / "new.txt").read_text() == "v1\n"
    restore = saved(forced, "restore")[0]
    kept = saved(forced, "snapshot")[0]
    assert (
        kept["record"]["reason"] == "before restore" and restore["record"]["before"] == kept["id"]
    )
    # the edit comes back with a checkout of the "before restore" snapshot
    infai(home, "session", "checkout", sid, kept["id"])
    assert (work / "new.txt").read_text() == "mine\n"


def test_from_an_event_whose_files_are_on_disk_already_continues_from_it(
    home: Path, work: Path, tmp_path: Path
) -> None:
    """The disk holds the picked event's files (put back by hand), not HEAD's:
    nothing is restored, the files now are kept on the branch left, and the
    prompt still continues from the picked event, not from that snapshot."""
    sid, end_one, end_two = two_turns(home, work, tmp_path)
    (work / "src" / "gen.py").unlink()
    (work / "src").rmdir()
    (work / "a.txt").write_text("changed\n")
    (work / "new.txt").write_text("v1\n")
    back = run_json(home, "--session", sid, "--from", end_one, "again")
    assert not saved(back, "restore")
    kept = saved(back, "snapshot")[0]
    assert kept["record"]["reason"] == "before restore" and kept["parent_id"] == end_two
    prompt = next(e for e in saved(back, "message") if e["role"] == "user")
    assert prompt["parent_id"] == end_one


def test_keep_files_leaves_disk_alone(home: Path, work: Path, tmp_path: Path) -> None:
    sid, end_one, _ = two_turns(home, work, tmp_path)
    before = files(work)
    out = run_json(home, "--session", sid, "--from", end_one, "--keep-files", "again")
    assert files(work) == before and not saved(out, "restore")
    snap = saved(out, "snapshot")[0]  # the files now, recorded on the new branch
    assert snap["parent_id"] == end_one


def test_snapshot_failure_is_a_notice(
    home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.checkpoints import Checkpoints

    def broken(self: Checkpoints, previous: str | None = None) -> Any:
        raise OSError(30, "Read-only file system", "objects.sqlite")

    monkeypatch.setattr(Checkpoints, "snapshot", broken)
    one = script(tmp_path, "one", call("write_file", path="n.txt", content="x"), "ok")
    out = infai(home, "run", "--model", one, *ALLOW, "go")
    assert "files: snapshot (turn start) failed" in out.stderr
    assert "files: snapshot (after write_file) failed" in out.stderr
    assert out.stdout.strip().endswith("ok") and (work / "n.txt").read_text() == "x"


def test_disabled_in_config_takes_none(
    home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "user.toml"
    config.write_text("[checkpoints]\nenabled = false\n")
    monkeypatch.setenv("INFAI_CONFIG", str(config))
    lines = run_json(home, "hi")
    assert not saved(lines, "snapshot")


def test_records_name_their_trees(home: Path, work: Path, tmp_path: Path) -> None:
    sid, _, _ = two_turns(home, work, tmp_path)
    with Store(home).open_reader(sid) as reader:
        records = [reader.event(e.id, resolve=True).record for e in reader.entries()]
    trees = [r.tree for r in records if isinstance(r, SnapshotRecord | RestoreRecord)]
    assert len(trees) == len(set(trees)) == 5


def test_session_files_diff_and_checkout(home: Path, work: Path, tmp_path: Path) -> None:
    sid, end_one, end_two = two_turns(home, work, tmp_path)
    (work / "build").mkdir()
    (work / "build" / "out.o").write_bytes(b"\0")
    listed = json.loads(infai(home, "session", "files", sid, end_one, "--json").stdout)
    paths = {f["path"]: f for f in listed["files"]}
    # no .infai: the empty one made before the first shell command (which may not
    # make one) is the sandbox's mount point, never recorded
    assert set(paths) == {".gitignore", "a.txt", "new.txt"}
    assert paths["new.txt"]["size"] == 3
    assert paths["new.txt"]["digest"].startswith("sha256:") or len(paths["new.txt"]["digest"]) >= 64
    text = infai(home, "session", "files", sid, end_one).stdout
    assert "new.txt" in text and "a.txt" in text
    diff = json.loads(infai(home, "session", "diff", sid, end_one, end_two, "--json").stdout)
    assert {c["path"] for c in diff["changes"]} == {"a.txt", "new.txt", "src/gen.py"}
    plain = infai(home, "session", "diff", sid, end_one, end_two).stdout
    assert "-v1" in plain and "+v2" in plain
    (work / "new.txt").write_text("edited now\n")
    to_disk = infai(home, "session", "diff", sid, end_two).stdout  # TO: the disk now
    assert "+edited now" in to_disk and "build" not in to_disk
    (work / "new.txt").write_text("v2\n")
    before = files(work)
    dry = json.loads(infai(home, "session", "checkout", sid, end_one, "--dry-run", "--json").stdout)
    assert {a["path"] for a in dry["plan"]["actions"]} == {"a.txt", "new.txt", "src/gen.py"}
    assert files(work) == before and dry["restore"] is None
    count = len(list(Store(home).open_reader(sid).entries()))
    assert "nothing changed" in infai(home, "session", "checkout", sid, end_one, "--dry-run").stdout
    assert len(list(Store(home).open_reader(sid).entries())) == count
    done = json.loads(infai(home, "session", "checkout", sid, end_one, "--json").stdout)
    assert files(work)["new.txt"] == "v1\n" and "src/gen.py" not in files(work)
    assert (work / "build" / "out.o").read_bytes() == b"\0"  # ignored: untouched
    with Store(home).open_reader(sid) as reader:
        assert reader.head == done["restore"]
        assert reader.event(done["restore"]).parent_id == end_two  # recorded at HEAD


def inotify_fds() -> int:
    """This process's open inotify instances."""
    found = 0
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # the directory's own fd, gone by now
            found += os.readlink(fd) == "anon_inode:inotify"
    return found


def test_one_off_file_commands_start_no_change_watcher(
    home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.checkpoints import snapshot
    from infai.checkpoints.watch import Watcher

    sid, end_one, end_two = two_turns(home, work, tmp_path)
    made: list[object] = []

    class Counted(Watcher):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(snapshot, "Watcher", Counted)
    open_before = inotify_fds()
    infai(home, "session", "files", sid, end_one, "--json")
    infai(home, "session", "diff", sid, end_one, end_two, "--json")
    (work / "new.txt").write_text("edited now\n")
    infai(home, "session", "diff", sid, end_two)  # takes a snapshot of the disk now
    infai(home, "session", "checkout", sid, end_one, "--dry-run")
    infai(home, "session", "checkout", sid, end_one, "--force")
    assert files(work)["new.txt"] == "v1\n"  # the commands did their work
    assert made == [] and inotify_fds() == open_before
    # a session that runs turns does keep one (the counter counts)
    infai(home, "run", "--model", script(tmp_path, "three", "ok"), "--session", sid, "third")
    assert len(made) == 1


def test_run_prints_where_a_long_first_snapshot_is(
    home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.checkpoints import progress, walk

    monkeypatch.setattr(walk, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(progress, "QUIET_S", 0.0)  # every snapshot is "long"
    out = infai(home, "run", "--model", "offline", "hello")
    assert f"infai: files: snapshot of {work}:" in out.stderr


def modes(root: Path) -> dict[str, tuple[int, str]]:
    """Every path's mode bits and content (a link: its target), .git left out."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if ".git" in rel.parts:
            continue
        st = p.lstat()
        body = os.readlink(p) if p.is_symlink() else "" if p.is_dir() else p.read_text()
        out[str(rel)] = (st.st_mode & 0o777 if not p.is_symlink() else 0, body)
    return out


def test_every_kind_of_change_by_the_tools_comes_and_goes_with_the_branch(
    home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's scenario end to end, through `infai run` and the real tools (bash
    in its sandbox, or asking-free with --allow): on a git branch, files written,
    edited, deleted, renamed, chmod-ed, sed -i'd, a directory generated; going back
    gives exactly the older files, forward the newer; the user's .git, an ignored
    file and an oversized one are never touched, and the skipped one is reported."""
    config = tmp_path / "config.toml"
    config.write_text("[checkpoints]\nsize_cap_mb = 1\n")
    monkeypatch.setenv("INFAI_CONFIG", str(config))
    subprocess.run(["git", "-C", str(work), "checkout", "-q", "-b", "feature"], check=True)
    (work / "build").mkdir()
    (work / "build" / "out.o").write_text("ignored\n")
    (work / "big.bin").write_text("x" * (2 * 1024 * 1024))
    one = script(
        tmp_path,
        "one",
        call("write_file", path="util.py", content="X = 1\n"),
        call("write_file", path="old.txt", content="to be renamed\n"),
        call("write_file", path="doomed.txt", content="to be deleted\n"),
        call("write_file", path="script.sh", content="#!/bin/sh\necho hi\n"),
        "done one",
    )
    first = run_json(home, "--model", one, *ALLOW, "one")
    sid, end_one = first[0]["session"], saved(first, "message")[-1]["id"]
    state_one = modes(work)
    two = script(
        tmp_path,
        "two",
        call("edit_file", path="util.py", old_text="X = 1", new_text="X = 2"),
        call(
            "bash",
            command="rm doomed.txt && mv old.txt new.txt && sed -i 's/original/by sed/' a.txt"
            " && chmod +x script.sh && mkdir -p gen/out"
            " && for i in 1 2 3; do echo $i > gen/out/$i.txt; done"
            " && echo rebuilt > build/out.o",
        ),
        "done two",
    )
    second = run_json(home, "--model", two, *ALLOW, "--session", sid, "two")
    end_two = saved(second, "message")[-1]["id"]
    state_two = modes(work)
    assert state_two["script.sh"][0] & 0o100 and "gen/out/3.txt" in state_two
    assert "doomed.txt" not in state_two and state_two["new.txt"][1] == "to be renamed\n"
    assert state_two["util.py"][1] == "X = 2\n" and state_two["a.txt"][1] == "by sed\n"
    git_before = git_state(work)
    # (and the sandbox's empty .infai mount point, made by the first command: never
    # recorded, so never removed by going back)
    ignored = {"build", "build/out.o", "big.bin", ".infai"}

    def tracked(state: dict[str, tuple[int, str]]) -> dict[str, tuple[int, str]]:
        return {k: v for k, v in state.items() if k not in ignored}

    back = run_json(home, "--session", sid, "--from", end_one, "again")
    assert saved(back, "restore")
    assert tracked(modes(work)) == tracked(state_one)
    assert (work / "build" / "out.o").read_text() == "rebuilt\n"  # ignored: untouched
    assert (work / "big.bin").stat().st_size == 2 * 1024 * 1024  # oversized: untouched
    run_json(home, "--session", sid, "--from", end_two, "forward")
    assert modes(work) == state_two  # nothing lost, modes and all
    assert git_state(work) == git_before  # the user's repository, index and HEAD untouched
    listed = json.loads(infai(home, "session", "files", sid, end_one, "--json").stdout)
    assert "over the size cap" in listed["skipped"]["big.bin"]
    assert "build/" in listed["skipped"] or "build/out.o" in listed["skipped"]
