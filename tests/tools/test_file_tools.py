"""The file tools leave a user's files whole, read only what they return, and say
clearly why a file cannot be handled as text."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from infai.tools import ToolContext, ToolOutput, builtin_tools
from infai.tools.builtin import MAX_OUTPUT
from infai.tools.files import read_lines


def run(tool_name: str, root: Path, **arguments: Any) -> ToolOutput:
    tool = {t.spec.name: t for t in builtin_tools()}[tool_name]
    return asyncio.run(tool.run(arguments, ToolContext(root, "session")))


def test_a_write_that_fails_half_way_leaves_the_old_file_whole(tmp_path: Path) -> None:
    """The text cannot be encoded (a lone surrogate, as JSON may carry): the old
    code had truncated the file already when the write failed."""
    target = tmp_path / "notes.md"
    target.write_text("precious\n")
    out = run("write_file", tmp_path, path="notes.md", content="new text \ud800 more")
    assert out.is_error and "notes.md" in out.content and "unchanged" in out.content
    assert target.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]  # no temp file left


def test_a_write_killed_before_it_is_durable_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure before the new text is on disk (here: the flush to disk) must not
    have touched the user's file; the old code wrote in place."""
    target = tmp_path / "app.py"
    target.write_text("print('v1')\n")

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    out = run("write_file", tmp_path, path="app.py", content="print('v2')\n")
    assert out.is_error and "cannot write app.py" in out.content
    edit = run("edit_file", tmp_path, path="app.py", old_text="v1", new_text="v2")
    assert edit.is_error
    assert target.read_text() == "print('v1')\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.py"]


def test_write_and_edit_keep_the_files_mode(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("echo one\n")
    script.chmod(0o751)
    assert not run("edit_file", tmp_path, path="run.sh", old_text="one", new_text="two").is_error
    assert not run("write_file", tmp_path, path="run.sh", content="echo three\n").is_error
    assert script.read_text() == "echo three\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o751


def test_read_file_reads_no_further_than_it_returns(tmp_path: Path) -> None:
    """A FIFO fed 8 MiB: reading lines must stop once it has its cap, so the feeder
    finds the pipe closed early. The old code read everything, then cut.

    (read_file itself now refuses a FIFO, see test_files_beneath.py; the reading
    of lines it does for a regular file is tested here on the pipe directly.)"""
    fifo = tmp_path / "big.log"
    os.mkfifo(fifo)
    total = 8 << 20
    fed = 0

    def feed() -> None:
        nonlocal fed
        line = b"x" * 99 + b"\n"
        with contextlib.suppress(BrokenPipeError), fifo.open("wb", buffering=0) as pipe:
            while fed < total:
                fed += pipe.write(line * 655)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    found = read_lines(fifo, 1, None)
    feeder.join(10)
    assert not feeder.is_alive()
    assert found.cut
    assert found.text.startswith("x" * 99 + "\n")
    assert len(found.text) == MAX_OUTPUT
    assert fed < total // 4, f"read {fed} bytes to return {MAX_OUTPUT} characters"


def test_read_file_caps_one_huge_line_and_still_reads_by_lines(tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_text("y" * (MAX_OUTPUT * 3) + "\nsecond\nthird\n")
    out = run("read_file", tmp_path, path="one.txt")
    assert out.content.startswith("y" * MAX_OUTPUT) and "start_line=1" in out.content
    assert run("read_file", tmp_path, path="one.txt", start_line=2).content == "second\nthird\n"
    part = run("read_file", tmp_path, path="one.txt", start_line=3, end_line=9)
    assert part.content == "third\n" and part.metadata["lines"] == [3, 3]


def test_an_undecodable_file_is_named_with_the_byte_at_fault(tmp_path: Path) -> None:
    """The old edit_file raised UnicodeDecodeError, which the loop turned into a
    generic "tool failed"."""
    (tmp_path / "data.bin").write_bytes(b"abc\xff\xfe rest")
    out = run("edit_file", tmp_path, path="data.bin", old_text="abc", new_text="x")
    assert out.is_error
    assert "data.bin is not UTF-8 text (byte 3" in out.content
    assert (tmp_path / "data.bin").read_bytes() == b"abc\xff\xfe rest"
