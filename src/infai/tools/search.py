"""The searching tools: list files by glob, grep files by regular expression.

Both walk a tree under the working directory in a worker thread, never follow a
link out of the directory searched, and cap what they return.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from infai.llm import ToolSpec

from .base import ToolContext, ToolOutput
from .common import MAX_MATCHES, STR, cap, error, schema
from .paths import resolve


class ListFiles:
    """``list_files``: paths under a directory matching a glob, sorted, at most
    :data:`MAX_MATCHES`; a glob may not climb out of the directory."""

    spec = ToolSpec(
        "list_files",
        "List files matching a glob pattern (e.g. '**/*.py') under a directory.",
        schema([], pattern=STR, path=STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """:meth:`listing` in a worker thread."""
        return await asyncio.to_thread(self.listing, arguments, context)

    def listing(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """The blocking part (a walk of the tree), run in a worker thread."""
        base = resolve(context.working_dir, str(arguments.get("path") or "."))
        pattern = str(arguments.get("pattern") or "*")
        if problem := _glob_problem(pattern, "pattern"):
            return error(problem)
        if not base.path.is_dir():
            return error(f"{arguments.get('path', '.')} is not a directory")
        names = sorted(
            str(p.relative_to(base.path)) + ("/" if p.is_dir() else "")
            for p in base.path.glob(pattern)
        )
        listed = names[:MAX_MATCHES]
        more = f"\n[... {len(names) - len(listed)} more]" if len(names) > len(listed) else ""
        return ToolOutput("\n".join(listed) + more if listed else "(no matches)")


class Grep:
    """``grep``: a Python regex over the UTF-8 files under a directory, ``.git`` and
    binary files skipped, links leading out not followed, at most :data:`MAX_MATCHES`."""

    spec = ToolSpec(
        "grep",
        "Search files under a directory for a regular expression; lines as path:line:text.",
        schema(["pattern"], pattern=STR, path=STR, glob=STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """:meth:`search` in a worker thread."""
        return await asyncio.to_thread(self.search, arguments, context)

    def search(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """The blocking part (a walk of the tree), run in a worker thread."""
        try:
            regex = re.compile(str(arguments.get("pattern", "")))
        except re.error as exc:
            return error(f"bad regular expression: {exc}")
        base = resolve(context.working_dir, str(arguments.get("path") or "."))
        glob = str(arguments.get("glob") or "*")
        if problem := _glob_problem(glob, "glob"):
            return error(problem)
        files = [base.path] if base.path.is_file() else base.path.rglob(glob)
        hits: list[str] = []
        leaving = 0
        for file in files:
            if len(hits) >= MAX_MATCHES:
                hits.append(f"[... stopped after {MAX_MATCHES} matches]")
                break
            if not file.is_file() or ".git" in file.parts:
                continue
            if file != base.path and not _under(file, base.path):
                leaving += 1  # a link out of the directory searched: not read
                continue
            try:
                text = file.read_text(errors="strict")
            except (OSError, UnicodeDecodeError):
                continue  # unreadable or binary
            shown = file.relative_to(base.path) if file != base.path else Path(file.name)
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{shown}:{number}:{line[:300]}")
                    if len(hits) >= MAX_MATCHES:
                        break
        note = f"\n[{leaving} links leading out of {base.shown(context.working_dir)} not read]"
        text = cap("\n".join(hits)) if hits else "(no matches)"
        return ToolOutput(text + (note if leaving else ""))


def _glob_problem(pattern: str, field: str) -> str | None:
    """Why a glob may not be used: it must stay under the directory searched
    (leaving it is a matter for ``path``, which the permission policy sees)."""
    if pattern.startswith(("/", "~")) or ".." in Path(pattern).parts:
        return f"{field} {pattern!r} must stay under the directory searched; give path instead"
    return None


def _under(file: Path, root: Path) -> bool:
    real = file.resolve()
    return real == root or root in real.parents
