"""Prompt history: what was sent from the TUI, per working directory, kept across runs.

One file in the store's home, ``tui-history.jsonl``: a JSON line per prompt
sent, ``{"dir": <working directory>, "text": <prompt>}``, appended as each is
sent. Up and Down walk the lines of the directory the TUI runs in (the same
project, whichever session). Prompts can hold secrets, so the file is the
owner's alone (mode 0600), as the store is. It is a convenience, not a
record: a line that does not parse is skipped, and when the file outgrows
:data:`KEEP` twice over it is rewritten with its newest :data:`KEEP` lines.
Every function here touches the disk and is run off the event loop.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

FILE = "tui-history.jsonl"
#: prompts kept per file (all directories together)
KEEP = 1000
#: prompts shown per directory
SHOWN = 200


def _lines(path: Path) -> list[dict[str, str]]:
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    kept = []
    for line in raw.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a torn or foreign line: history is a convenience
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            kept.append({"dir": str(item.get("dir", "")), "text": item["text"]})
    return kept


def load(home: Path, working_dir: Path) -> list[str]:
    """The prompts sent in ``working_dir``, oldest first (the newest :data:`SHOWN`)."""
    here = str(working_dir)
    return [item["text"] for item in _lines(home / FILE) if item["dir"] == here][-SHOWN:]


def append(home: Path, working_dir: Path, text: str) -> None:
    """Add ``text`` as sent in ``working_dir``; trim the file when it has grown too long."""
    path = home / FILE
    home.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"dir": str(working_dir), "text": text}, ensure_ascii=False) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as out:
        out.write(line)
    if path.stat().st_size > KEEP * 400:  # cheap check first; count only when large
        items = _lines(path)
        if len(items) > 2 * KEEP:
            fresh = path.with_suffix(".tmp")
            body = "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items[-KEEP:])
            fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(body)
            os.replace(fresh, path)
