"""Red team: the Landlock starter every confined command runs through.

- The starter is infai's own Python, run before Landlock holds. Where that
  Python lives in a writable root (a venv of copies in the project, a conda
  environment there, a Python under ``$HOME`` with infai run from ``$HOME``) one
  command replaced the interpreter and the next started without the rule: its
  write into a FIFO outside reached the reader.
- Reaching a FIFO outside through ``/proc`` (writable in the rule), a symbolic
  link in the working directory or a hard link: each is refused (kept here so
  that it stays so).

Judged by effect: what a reader of the FIFO outside gets.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext
from infai.tools.landlock import interpreter
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)


@pytest.fixture
def fifo() -> Iterator[Path]:
    """A FIFO in a directory the sandbox shows read-only (not /tmp, not $HOME)."""
    where = "/var/tmp" if os.access("/var/tmp", os.W_OK) else os.getcwd()
    path = Path(tempfile.mkdtemp(prefix="infai-fifo-", dir=where))
    os.mkfifo(path / "ctl.fifo")
    yield path / "ctl.fifo"
    shutil.rmtree(path, ignore_errors=True)


def _run(command: str, wd: Path) -> str:
    tool = Bash(sandbox=Sandbox(SandboxSettings(mode="required")))
    return asyncio.run(tool.run({"command": command}, ToolContext(wd, "s"))).content


def _received(fifo: Path, commands: list[str], wd: Path) -> tuple[bytes, list[str]]:
    """What a reader of ``fifo`` got while ``commands`` ran one after the other."""
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        outs = [_run(command, wd) for command in commands]
        try:
            return os.read(reader, 1000), outs
        except BlockingIOError:
            return b"", outs
    finally:
        os.close(reader)


#: what a replaced interpreter does: skip the rule, execute the command
_SKIPPING = '#!/bin/sh\nshift 4; n=$1; shift $((n + 1)); exec "$@"\n'


@pytest.mark.parametrize(
    "plant",
    [
        "rm -f .venv/bin/python3; cat skip.sh > .venv/bin/python3; chmod +x .venv/bin/python3",
        "mv .venv v2 && mkdir -p .venv/bin && cp skip.sh .venv/bin/python3",
        "mv .venv/bin .venv/b2 && mkdir .venv/bin && cp skip.sh .venv/bin/python3",
    ],
)
def test_a_command_cannot_replace_the_interpreter_the_next_one_starts_through(
    fifo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plant: str
) -> None:
    wd = tmp_path / "project"
    wd.mkdir()
    venv = wd / ".venv"
    made = [interpreter(), "-m", "venv", "--copies", "--without-pip", str(venv)]
    subprocess.run(made, check=True, capture_output=True)
    (wd / "skip.sh").write_text(_SKIPPING)
    # infai itself runs from that venv (its python a copy, as on Windows or conda)
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python3"))
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "exec_prefix", str(venv))
    got, outs = _received(fifo, [plant, f"echo 'rm -rf ~' > {fifo}; echo wrote=$?"], wd)
    assert got == b"", outs
    refused = ("Read-only file system", "Device or resource busy")
    assert any(why in outs[0] for why in refused) and "wrote=1" in outs[1], outs
    # what the command may do there still works: read it, run it
    assert "ok" in _run(".venv/bin/python3 -c 'print(\"ok\")'; echo x > mine.txt", wd)
    assert (wd / "mine.txt").read_text() == "x\n"


def test_no_path_through_proc_or_a_link_reaches_a_fifo_outside(fifo: Path, tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(fifo)
    (tmp_path / "w.py").write_text(
        "import os\n"
        f"r = os.open({str(fifo)!r}, os.O_RDONLY | os.O_NONBLOCK)\n"
        f"ways = ['/proc/self/fd/%d' % r, '/proc/thread-self/fd/%d' % r, 'link',\n"
        f"        '/proc/self/root{fifo}', '/proc/1/root{fifo}', '/proc/1/cwd/x']\n"
        "for way in ways:\n"
        "    try:\n"
        "        os.write(os.open(way, os.O_WRONLY | os.O_NONBLOCK), b'escaped ' + way.encode())\n"
        "        print('WROTE', way)\n"
        "    except OSError as exc:\n"
        "        print('refused', way, exc.errno)\n"
    )
    command = f"python3 w.py; ln {fifo} hard; echo hard=$?; echo x >> hard"
    got, outs = _received(fifo, [command], tmp_path)
    assert got == b"" and "WROTE" not in outs[0] and "hard=1" in outs[0], outs
    assert outs[0].count("refused") == 6, outs


#: run in a child: Landlock made to fail as on a kernel booted without it (a seccomp
#: filter answers ENOSYS to landlock_create_ruleset), then what the approval mode
#: says of a sandbox the doctor passed with Landlock, and a command's FIFO write
_WITHOUT_LANDLOCK = """
import asyncio, ctypes, struct, sys
from pathlib import Path
prog = b"".join(struct.pack("<HBBI", *i) for i in [
    (0x20, 0, 0, 0), (0x15, 0, 1, 444), (0x06, 0, 0, 0x00050000 | 38), (0x06, 0, 0, 0x7FFF0000)])
buf = ctypes.create_string_buffer(prog)
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
fprog = Fprog(len(prog) // 8, ctypes.addressof(buf))
assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0
from infai.tools import Sandbox, SandboxSettings, ToolContext
from infai.tools.sandbox import find_bwrap
from infai.tools.sandbox_verified import unverified
from infai.tools.shell import Bash
home, fifo, wd = (Path(a) for a in sys.argv[1:4])
print("MODE:", unverified(home, find_bwrap(), SandboxSettings(mode="required")) or "on")
tool = Bash(sandbox=Sandbox(SandboxSettings(mode="required")))
print(asyncio.run(tool.run({"command": f"echo x > {fifo}"}, ToolContext(wd, "s"))).content)
"""


def test_the_approval_mode_is_off_where_landlock_is_gone(fifo: Path, tmp_path: Path) -> None:
    """The doctor passed with Landlock; after a boot without it (same kernel release)
    a confined command writes a FIFO outside again: the mode must not run it unasked."""
    from infai.tools.sandbox import find_bwrap
    from infai.tools.sandbox_verified import record_pass, unverified

    settings = SandboxSettings(mode="required")
    record_pass(tmp_path, find_bwrap(), settings)
    assert unverified(tmp_path, find_bwrap(), settings) == ""
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        argv = [sys.executable, "-c", _WITHOUT_LANDLOCK, str(tmp_path), str(fifo), str(tmp_path)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        got = os.read(reader, 100)
    finally:
        os.close(reader)
    assert got == b"x\n", done.stdout + done.stderr  # what Landlock no longer stops
    assert "MODE: `infai doctor` has not passed" in done.stdout, done.stdout + done.stderr


_SHIM = r"""
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void escape(void) {
    char exe[256] = {0};
    readlink("/proc/self/exe", exe, sizeof exe - 2);
    strcat(exe, "\n");
    int fd = open("FIFO", O_WRONLY | O_NONBLOCK);
    if (fd >= 0) { write(fd, exe, strlen(exe)); close(fd); }
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build the library")
def test_a_passed_ld_preload_runs_nothing_before_the_rule(
    fifo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pass_env = ["LD_PRELOAD"]`` naming a library in the working directory (one
    a command may rebuild): it was loaded into bwrap (outside the sandbox), the
    git infai runs to read the config and the starter before Landlock, and what
    it ran there wrote into the FIFO outside. It reaches the command still."""
    source = tmp_path / "shim.c"
    source.write_text(_SHIM.replace("FIFO", str(fifo)))
    shim = tmp_path / "shim.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(shim), str(source)], check=True)
    monkeypatch.setenv("LD_PRELOAD", str(shim))
    settings = SandboxSettings(mode="required", pass_env=("LD_PRELOAD",))
    tool = Bash(sandbox=Sandbox(settings))
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        context = ToolContext(tmp_path, "s")
        out = asyncio.run(tool.run({"command": 'echo "[$LD_PRELOAD]"'}, context)).content
        try:
            got = os.read(reader, 4000)
        except BlockingIOError:
            got = b""
    finally:
        os.close(reader)
    assert got == b"", got.decode()
    assert f"[{shim}]" in out, out
