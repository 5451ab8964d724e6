"""The system prompt, assembled for each request and never stored as an event.

It comes from the agent's configuration and the project: a short base that
says where the agent works and what it may do, plus the project's own
instructions from ``AGENTS.md`` in the working directory when there is one.
Changing either changes the next request, not the session's history.
"""

from __future__ import annotations

from pathlib import Path

BASE = """You are infai, a coding agent working in {working_dir}.
Use the tools to read, search, edit and run things there; paths are relative to it.
Some calls need the user's approval; a denied call comes back as an error result.
Be concise, and say what you changed."""

INSTRUCTION_FILES = ("AGENTS.md",)
MAX_INSTRUCTIONS = 20_000  # characters of project instructions kept


def system_prompt(working_dir: Path, extra: str = "") -> str:
    """The system prompt for a session working in ``working_dir``."""
    parts = [BASE.format(working_dir=working_dir)]
    for name in INSTRUCTION_FILES:
        path = working_dir / name
        try:
            text = path.read_text(errors="replace").strip()
        except OSError:
            continue
        if text:
            parts.append(f"Project instructions from {name}:\n{text[:MAX_INSTRUCTIONS]}")
    if extra.strip():
        parts.append(extra.strip())
    return "\n\n".join(parts)
