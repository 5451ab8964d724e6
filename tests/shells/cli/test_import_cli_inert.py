"""``infai import``'s progress bar shows a foreign file name inert (issue 28).

A session file named ``ESC ] 0 ; pwned BEL`` (an OSC sequence: it would set
the terminal's title; OSC 52 writes the clipboard) is imported on a real
terminal (a pty), where the progress bar shows each file's name. Every byte
the command writes is read back: once rich's own cursor and colour sequences
(CSI) are taken out, no ESC and no BEL is left, and the name shows escaped.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

LAUNCH = "import sys\nfrom infai.shells import cli\ncli.main(sys.argv[1:], prog_name='infai')\n"
EVIL = "zz\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07.jsonl"
#: the control sequences rich writes itself: cursor moves, erases, colours
CSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]")


def _pi_session(path: Path, sid: str) -> None:
    header = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-03-01T10:00:00Z"}
    entry = {
        "type": "message",
        "id": f"{sid}-1",
        "parentId": None,
        "timestamp": "2026-03-01T10:00:01Z",
        "message": {"role": "user", "content": "hi"},
    }
    path.write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n")


def _on_a_terminal(argv: list[str], cwd: Path) -> bytes:
    """Everything ``argv`` writes to its terminal (stdin, stdout and stderr a pty)."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "200"}
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the pty
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        assert proc.wait(timeout=60) == 0, out
    return out


def test_a_file_name_in_the_progress_bar_cannot_drive_the_terminal(tmp_path: Path) -> None:
    source = tmp_path / "pi"
    source.mkdir()
    _pi_session(source / "a.jsonl", "s-a")
    _pi_session(source / EVIL, "s-evil")  # last: its name is on the bar when it ends
    argv = [sys.executable, "-c", LAUNCH, "--home", str(tmp_path / "home"), "import", "pi"]
    written = _on_a_terminal([*argv, str(source)], tmp_path)
    assert b"importing" in written  # the bar was drawn
    plain = CSI.sub(b"", written)
    assert b"\x1b" not in plain and b"\x07" not in plain, plain
    assert b"zz\\x1b]0;pwned\\x07" in plain  # the name, shown escaped
