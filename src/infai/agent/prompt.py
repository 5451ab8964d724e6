"""The system prompt, assembled for each request and never stored as an event.

It comes from the agent's configuration and the project: a short base that
says where the agent works and what it may do, plus the project's own
instructions from ``AGENTS.md`` in the working directory when there is one,
else from ``CLAUDE.md`` (the file Claude Code reads: a repository set up for it
works as it is); :class:`SystemPrompt` says which was read, so a shell can say
it. Changing either changes the next request, not the session's history.

An instruction file comes with the repository, so it is not trusted further than the
file tools would trust it: it is read only if it resolves *inside* the working
directory to a *regular file* (a symlink to ``/dev/zero``, a FIFO or a file
elsewhere is left unread, so it cannot hang the request, fill memory or show
the model a file outside), through a descriptor reached without following a
link (see :mod:`infai.tools.paths`), and at most :data:`MAX_INSTRUCTIONS`
bytes of it, saying where it was cut.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from infai.tools.paths import open_regular, resolve

log = logging.getLogger("infai.agent")

BASE = """You are infai, a coding agent working in {working_dir}.
Use the tools to read, search, edit and run things there; paths are relative to it.
Some calls need the user's approval; a denied call comes back as an error result.
Be concise, and say what you changed."""

#: the project instruction files, the first one present read (and only it)
INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
MAX_INSTRUCTIONS = 64 << 10  # bytes of project instructions kept


def read_instructions(working_dir: Path, name: str) -> str | None:
    """The text of instruction file ``name``, cut at :data:`MAX_INSTRUCTIONS` bytes;
    None when there is none, or it is not a regular file inside ``working_dir``."""
    target = resolve(working_dir, name)
    if not target.inside:
        log.warning("%s leads outside the working directory; not read", name)
        return None
    try:
        fd = open_regular(target, working_dir)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("%s not read: %s", name, exc.strerror or exc)
        return None
    with open(fd, "rb") as handle:
        data = handle.read(MAX_INSTRUCTIONS + 1)
    text = data[:MAX_INSTRUCTIONS].decode("utf-8", errors="replace").strip()
    if len(data) > MAX_INSTRUCTIONS:
        text += f"\n[... {name} cut at {MAX_INSTRUCTIONS >> 10} KiB]"
    return text


@dataclass(frozen=True, slots=True)
class SystemPrompt:
    """A system prompt and the instruction file it took in (None: none was read)."""

    text: str
    source: str | None = None


def build_system_prompt(working_dir: Path, extra: str = "") -> SystemPrompt:
    """The system prompt for a session working in ``working_dir``, with the first
    of :data:`INSTRUCTION_FILES` that is there (``CLAUDE.md`` only where there is
    no readable ``AGENTS.md``)."""
    parts = [BASE.format(working_dir=working_dir)]
    source = None
    for name in INSTRUCTION_FILES:
        text = read_instructions(working_dir, name)
        if text is None:
            continue
        source = name
        if text:
            parts.append(f"Project instructions from {name}:\n{text}")
        break
    if extra.strip():
        parts.append(extra.strip())
    return SystemPrompt("\n\n".join(parts), source)


def system_prompt(working_dir: Path, extra: str = "") -> str:
    """The system prompt's text (see :func:`build_system_prompt`)."""
    return build_system_prompt(working_dir, extra).text
