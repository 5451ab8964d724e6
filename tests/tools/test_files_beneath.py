"""The file tools act on the path they resolved, beneath the working directory: a
symlink swapped in after the check never redirects a read or a write, only
regular files are read, and bad arguments are error results naming the field.

Each attack is judged by its effect: a file outside unchanged, a secret not in
the output, a call that returns at once instead of hanging.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.tools import ToolContext, ToolOutput, builtin_tools
from infai.tools import paths as paths_module


def run(
    tool_name: str, root: Path, context: ToolContext | None = None, /, **arguments: Any
) -> ToolOutput:
    tool = {t.spec.name: t for t in builtin_tools()}[tool_name]
    return asyncio.run(tool.run(arguments, context or ToolContext(root, "session")))


@pytest.fixture(params=["openat2", "walk"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Every test runs with openat2 (where the kernel has it) and with the walk."""
    if request.param == "walk":
        monkeypatch.setattr(paths_module, "_openat2_works", False)
    yield str(request.param)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "sub").mkdir(parents=True)
    outside.mkdir()
    (work / "sub" / "notes.txt").write_text("inside notes\n")
    (outside / "notes.txt").write_text("SECRET outside\n")
    return work, outside


def swap_after_resolving(
    monkeypatch: pytest.MonkeyPatch, ending: str, swap: Callable[[], None]
) -> list[bool]:
    """Run ``swap`` right after the path ending in ``ending`` is resolved: the window
    between the check and the use, made certain instead of raced."""
    real = os.path.realpath
    done: list[bool] = []

    def realpath(path: Any, *args: Any, **kwargs: Any) -> Any:
        found = real(path, *args, **kwargs)
        if not done and os.fspath(path).endswith(ending):
            done.append(True)
            swap()
        return found

    monkeypatch.setattr(os.path, "realpath", realpath)
    return done


def link_dir_out(work: Path, outside: Path) -> Callable[[], None]:
    def swap() -> None:
        (work / "sub").rename(work / "sub.moved")
        (work / "sub").symlink_to(outside, target_is_directory=True)

    return swap


def test_a_directory_swapped_for_a_link_out_after_the_check_does_not_redirect_a_write(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """The old code resolved, then wrote by name: the temp file and the rename
    went through the planted link into the directory outside."""
    work, outside = layout
    swapped = swap_after_resolving(monkeypatch, "sub/notes.txt", link_dir_out(work, outside))
    out = run("write_file", work, path="sub/notes.txt", content="overwritten\n")
    assert swapped
    assert out.is_error and "symbolic link" in out.content
    assert (outside / "notes.txt").read_text() == "SECRET outside\n"
    assert sorted(p.name for p in outside.iterdir()) == ["notes.txt"]  # no temp file there


def test_a_directory_swapped_for_a_link_out_does_not_redirect_a_read_or_an_edit(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    work, outside = layout
    swap_after_resolving(monkeypatch, "sub/notes.txt", link_dir_out(work, outside))
    out = run("read_file", work, path="sub/notes.txt")
    assert out.is_error and "SECRET" not in out.content
    (work / "sub").unlink()
    (work / "sub.moved").rename(work / "sub")
    swap_after_resolving(monkeypatch, "sub/notes.txt", link_dir_out(work, outside))
    out = run("edit_file", work, path="sub/notes.txt", old_text="SECRET", new_text="gone")
    assert out.is_error and "SECRET" not in out.content
    assert (outside / "notes.txt").read_text() == "SECRET outside\n"


def test_a_file_swapped_for_a_link_out_is_replaced_not_followed(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """A link planted in place of the file itself: the write replaces the link (in
    the working directory) and the file it pointed at is untouched."""
    work, outside = layout

    def swap() -> None:
        (work / "sub" / "notes.txt").unlink()
        (work / "sub" / "notes.txt").symlink_to(outside / "notes.txt")

    swap_after_resolving(monkeypatch, "sub/notes.txt", swap)
    out = run("write_file", work, path="sub/notes.txt", content="mine\n")
    assert not out.is_error
    assert (outside / "notes.txt").read_text() == "SECRET outside\n"
    assert not (work / "sub" / "notes.txt").is_symlink()
    assert (work / "sub" / "notes.txt").read_text() == "mine\n"


def test_what_the_policy_checked_is_what_the_tool_uses(layout: tuple[Path, Path]) -> None:
    """Within one call (a context with a call id) a path is resolved once: the
    policy's check and the tool's use share it, so a link planted between them
    is met as a change and refused, not followed out."""
    work, outside = layout
    context = ToolContext(work, "session", call_event_id="call-1")
    checked = context.resolve("sub/notes.txt")  # what a policy would see
    assert checked.inside
    (work / "sub" / "notes.txt").unlink()
    (work / "sub" / "notes.txt").symlink_to(outside / "notes.txt")
    out = run("read_file", work, context, path="sub/notes.txt")
    assert out.is_error and "SECRET" not in out.content and "symbolic link" in out.content
    fresh = ToolContext(work, "session", call_event_id="call-2")
    assert not fresh.resolve("sub/notes.txt").inside  # the next call sees the link for what it is


def test_paths_the_policy_allowed_outside_still_work(layout: tuple[Path, Path], way: str) -> None:
    """The tool runs only after the policy decided; an outside path it allowed
    (after asking) is read and written, by its resolved path."""
    work, outside = layout
    assert run("read_file", work, path="../outside/notes.txt").content == "SECRET outside\n"
    out = run("write_file", work, path=str(outside / "new" / "made.txt"), content="hi\n")
    assert not out.is_error and (outside / "new" / "made.txt").read_text() == "hi\n"
    out = run("edit_file", work, path=str(outside / "notes.txt"), old_text="SECRET", new_text="x")
    assert not out.is_error and (outside / "notes.txt").read_text() == "x outside\n"
    (work / "inner-link").symlink_to(work / "sub")
    assert run("read_file", work, path="inner-link/notes.txt").content == "inside notes\n"


def test_reads_refuse_a_fifo_at_once(tmp_path: Path, way: str) -> None:
    """The old read_file opened the FIFO and waited for a writer for ever."""
    os.mkfifo(tmp_path / "pipe")
    started = time.monotonic()
    out = run("read_file", tmp_path, path="pipe")
    assert time.monotonic() - started < 1
    assert out.is_error and "FIFO" in out.content and "not a regular file" in out.content
    edit = run("edit_file", tmp_path, path="pipe", old_text="a", new_text="b")
    assert edit.is_error and "FIFO" in edit.content


def test_reads_refuse_devices_sockets_and_directories(tmp_path: Path) -> None:
    """/dev/zero through a link (the policy allowed the read outside) would never
    end; a socket cannot be opened; a directory is not a text file."""
    (tmp_path / "zero").symlink_to("/dev/zero")
    out = run("read_file", tmp_path, path="zero")
    assert out.is_error and "character device" in out.content
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        out = run("read_file", tmp_path, path="sock")
    assert out.is_error and "socket" in out.content
    (tmp_path / "dir").mkdir()
    assert "directory" in run("read_file", tmp_path, path="dir").content


@pytest.mark.parametrize("tool", ["read_file", "write_file", "edit_file", "list_files", "grep"])
def test_a_nul_byte_in_a_path_is_an_error_naming_the_argument(tmp_path: Path, tool: str) -> None:
    """The old tools raised ValueError (embedded null byte) instead of answering."""
    arguments = {"path": "notes\0.txt", "content": "", "old_text": "a", "new_text": "b"}
    arguments["pattern"] = "x"
    out = run(tool, tmp_path, **arguments)
    assert out.is_error and "'path'" in out.content and "NUL" in out.content
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("read_file", {"path": "a.txt", "start_line": "abc"}, "start_line"),
        ("read_file", {"path": "a.txt", "end_line": [3]}, "end_line"),
        ("read_file", {"path": 5}, "path"),
        ("write_file", {"path": "a.txt", "content": {"text": "x"}}, "content"),
        ("edit_file", {"path": "a.txt", "old_text": 1, "new_text": "x"}, "old_text"),
        ("grep", {"pattern": None}, "pattern"),
        ("list_files", {"pattern": True}, "pattern"),
    ],
)
def test_badly_typed_arguments_are_an_error_naming_the_field(
    tmp_path: Path, tool: str, arguments: dict[str, Any], field: str
) -> None:
    """The old read_file raised ValueError on int("abc"), and read "5" for path 5."""
    (tmp_path / "a.txt").write_text("one\n")
    out = run(tool, tmp_path, **arguments)
    assert out.is_error and f"argument {field!r}" in out.content
    assert (tmp_path / "a.txt").read_text() == "one\n"


def test_numbers_as_models_send_them_are_still_taken(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n")
    assert run("read_file", tmp_path, path="a.txt", start_line="2", end_line=2.0).content == "two\n"
    from infai.tools.common import argument_problem  # here: the old code had none

    bash = {t.spec.name: t for t in builtin_tools()}["bash"].spec
    assert argument_problem(bash, {"command": "true", "timeout_seconds": 0.5}) is None
    assert "'timeout_seconds'" in str(
        argument_problem(bash, {"command": "true", "timeout_seconds": "x"})
    )


def test_edit_keeps_crlf_line_endings(tmp_path: Path) -> None:
    """The old edit_file rewrote every line ending of the file as \\n."""
    target = tmp_path / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    out = run("edit_file", tmp_path, path="win.txt", old_text="two\nthree", new_text="2\n3\n4")
    assert not out.is_error, out.content
    assert target.read_bytes() == b"one\r\n2\r\n3\r\n4\r\n"
    out = run("edit_file", tmp_path, path="win.txt", old_text="one", new_text="1")
    assert not out.is_error and target.read_bytes() == b"1\r\n2\r\n3\r\n4\r\n"
    mixed = tmp_path / "mixed.txt"
    mixed.write_bytes(b"a\r\nb\r\nc\nd\n")
    out = run("edit_file", tmp_path, path="mixed.txt", old_text="c\nd", new_text="C\nD")
    assert not out.is_error and mixed.read_bytes() == b"a\r\nb\r\nC\nD\n"
    lf = tmp_path / "unix.txt"
    lf.write_bytes(b"x\ny\n")
    assert not run(
        "edit_file", tmp_path, path="unix.txt", old_text="x\ny", new_text="z\nw"
    ).is_error
    assert lf.read_bytes() == b"z\nw\n"


def test_edit_matches_across_mixed_endings_and_never_splits_a_crlf(tmp_path: Path) -> None:
    """The old edit_file found no old_text spanning lines of both endings, and took an
    old_text ending in a bare ``\\r`` literally, leaving a lone ``\\n`` behind."""
    mixed = tmp_path / "mixed.txt"
    mixed.write_bytes(b"a\r\nb\r\nc\nd\r\ne\r\n")
    out = run("edit_file", tmp_path, path="mixed.txt", old_text="b\nc\nd", new_text="1\n2")
    assert not out.is_error, out.content
    assert mixed.read_bytes() == b"a\r\n1\r\n2\r\ne\r\n"  # the file's ending, everywhere
    win = tmp_path / "win.txt"
    win.write_bytes(b"one\r\ntwo\r\n")
    out = run("edit_file", tmp_path, path="win.txt", old_text="one\r", new_text="1\n")
    assert not out.is_error, out.content
    assert win.read_bytes() == b"1\r\ntwo\r\n"
    out = run("edit_file", tmp_path, path="win.txt", old_text="two", new_text="2\n\r\n3")
    assert not out.is_error and win.read_bytes() == b"1\r\n2\r\n\r\n3\r\n"
    assert b"\n" not in win.read_bytes().replace(b"\r\n", b"")  # no lone ending at all
