"""``infai session export -o FILE``: all or nothing, synced, and no temporary file left.

FILE is either what it was or the whole export: the export is written beside
it, synced, renamed over it and the directory synced; any failure (a corrupt
chunk met half-way, an unknown session, a failed fsync) removes the temporary
file and leaves an existing FILE untouched.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main


def run(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def session_with_messages(home: Path, count: int) -> str:
    sid = run(home, "session", "new").stdout.strip()
    for i in range(count):
        run(home, "session", "append", sid, "--kind", "message", "--role", "user",
            "--content", f"message {i}")  # fmt: skip
    return sid


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    path.mkdir()
    return path


def test_a_corrupt_chunk_met_half_way_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, out_dir: Path
) -> None:
    home = tmp_path / "home"
    sid = session_with_messages(home, 3)
    target = out_dir / "s.jsonl"
    run(home, "session", "export", sid, "-o", str(target))
    before = target.read_bytes()
    assert len(before.splitlines()) == 4
    chunk = home / "sessions" / sid / "chunks" / "000000.jsonl"
    data = bytearray(chunk.read_bytes())
    data[data.index(b"\n") + 41] ^= 0x01  # the second event fails its checksum
    chunk.write_bytes(bytes(data))
    failed = run(home, "session", "export", sid, "-o", str(target), code=1)
    assert "corruption" in failed.stderr
    assert target.read_bytes() == before
    assert sorted(p.name for p in out_dir.iterdir()) == ["s.jsonl"]


def test_an_unknown_session_writes_nothing(tmp_path: Path, out_dir: Path) -> None:
    missing = "01890000-0000-7000-8000-000000000000"
    run(tmp_path / "home", "session", "export", missing, "-o", str(out_dir / "s.jsonl"), code=2)
    assert list(out_dir.iterdir()) == []


def test_a_failed_fsync_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, out_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    sid = session_with_messages(home, 2)
    target = out_dir / "s.jsonl"
    target.write_bytes(b"the previous export\n")

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", failing_fsync)
    failed = run(home, "session", "export", sid, "-o", str(target), code=1)
    assert f"cannot write {target}" in failed.stderr
    assert target.read_bytes() == b"the previous export\n"
    assert sorted(p.name for p in out_dir.iterdir()) == ["s.jsonl"]


def test_the_file_is_synced_before_the_rename_and_the_directory_after(
    tmp_path: Path, out_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    sid = session_with_messages(home, 2)
    target = out_dir / "s.jsonl"
    synced: list[tuple[str, bool]] = []  # (what was synced, whether FILE existed then)
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), target.exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    done = run(home, "session", "export", sid, "-o", str(target), "--json")
    assert json.loads(done.stdout)["events"] == 2
    mine = [entry for entry in synced if entry[0].startswith(str(out_dir))]
    (tmp, existed), directory = mine  # a temporary file of its own beside FILE, then the dir
    assert Path(tmp).parent == out_dir and re.fullmatch(
        r"s\.jsonl\.[0-9a-f]{12}\.tmp", Path(tmp).name
    )
    assert not existed and directory == (str(out_dir), True)
    assert len(target.read_bytes().splitlines()) == 3


def test_a_pipe_or_a_link_is_written_through_never_replaced(tmp_path: Path, out_dir: Path) -> None:
    """``-o /dev/stdout`` (a link to a pipe or a terminal) used to be replaced by a
    regular file (as root: /dev/stdout itself), and a named pipe's reader got
    nothing; a link to a file was replaced by a file, its target left stale."""
    home = tmp_path / "home"
    sid = session_with_messages(home, 2)
    whole = run(home, "session", "export", sid).stdout_bytes
    pipe = out_dir / "pipe"
    os.mkfifo(pipe)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()), daemon=True)
    reader.start()
    run(home, "session", "export", sid, "-o", str(pipe))
    reader.join(10)
    assert got == [whole] and stat.S_ISFIFO(os.lstat(pipe).st_mode)
    link = out_dir / "stdout"
    link.symlink_to("pipe")  # as /dev/stdout -> /proc/self/fd/1 -> a pipe
    reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()), daemon=True)
    reader.start()
    run(home, "session", "export", sid, "-o", str(link))
    reader.join(10)
    assert got == [whole, whole] and link.is_symlink()
    (out_dir / "real.jsonl").write_bytes(b"old\n")
    (out_dir / "latest.jsonl").symlink_to("real.jsonl")
    run(home, "session", "export", sid, "-o", str(out_dir / "latest.jsonl"))
    assert (out_dir / "latest.jsonl").is_symlink()
    assert (out_dir / "real.jsonl").read_bytes() == whole
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "latest.jsonl",
        "pipe",
        "real.jsonl",
        "stdout",
    ]
