"""The built-in tools: read, write and edit files, list, search, run a command.

Paths are resolved against the session's working directory (see
:mod:`~infai.tools.paths`); whether a path outside it may be touched is the
policy's question, asked before the tool runs. Failures come back as error
outputs the model can act on, never as exceptions. Output is capped so one
call cannot flood the context.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from pathlib import Path
from typing import Any

from infai.llm import ToolSpec

from .base import Tool, ToolContext, ToolOutput
from .paths import resolve

MAX_OUTPUT = 30_000  # characters a tool returns at most
OUTPUT_BYTES = 4 * MAX_OUTPUT  # bytes of a command's output kept (UTF-8: up to 4 a character)
MAX_TIMEOUT = 3600.0  # seconds a command may run at most, whatever the model asks
MAX_MATCHES = 200


def _cap(text: str, limit: int = MAX_OUTPUT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


def _error(message: str) -> ToolOutput:
    return ToolOutput(message, is_error=True)


def _schema(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_STR = {"type": "string"}
_INT = {"type": "integer"}


class ReadFile:
    spec = ToolSpec(
        "read_file",
        "Read a text file, optionally only lines start_line..end_line (1-based, inclusive).",
        _schema(["path"], path=_STR, start_line=_INT, end_line=_INT),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        target = resolve(context.working_dir, str(arguments.get("path", "")))
        try:
            text = target.path.read_text(errors="replace")
        except OSError as exc:
            return _error(f"cannot read {arguments.get('path')}: {exc.strerror}")
        lines = text.splitlines(keepends=True)
        start = max(1, int(arguments.get("start_line") or 1))
        end = min(len(lines), int(arguments.get("end_line") or len(lines)))
        if start > max(end, 1) and lines:
            return _error(f"start_line {start} is past the end ({len(lines)} lines)")
        return ToolOutput(_cap("".join(lines[start - 1 : end])), metadata={"lines": [start, end]})


class WriteFile:
    spec = ToolSpec(
        "write_file",
        "Create or overwrite a text file with the given content.",
        _schema(["path", "content"], path=_STR, content=_STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        target = resolve(context.working_dir, str(arguments.get("path", "")))
        content = str(arguments.get("content", ""))
        try:
            target.path.parent.mkdir(parents=True, exist_ok=True)
            target.path.write_text(content)
        except OSError as exc:
            return _error(f"cannot write {arguments.get('path')}: {exc.strerror}")
        return ToolOutput(f"wrote {len(content)} characters to {target.shown(context.working_dir)}")


class EditFile:
    spec = ToolSpec(
        "edit_file",
        "Replace the one exact occurrence of old_text in a file with new_text.",
        _schema(["path", "old_text", "new_text"], path=_STR, old_text=_STR, new_text=_STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        target = resolve(context.working_dir, str(arguments.get("path", "")))
        old, new = str(arguments.get("old_text", "")), str(arguments.get("new_text", ""))
        try:
            text = target.path.read_text()
        except OSError as exc:
            return _error(f"cannot read {arguments.get('path')}: {exc.strerror}")
        count = text.count(old) if old else 0
        if count != 1:
            found = "not found" if count == 0 else f"found {count} times"
            return _error(
                f"old_text {found} in {arguments.get('path')}; it must occur exactly once"
            )
        try:
            target.path.write_text(text.replace(old, new, 1))
        except OSError as exc:
            return _error(f"cannot write {arguments.get('path')}: {exc.strerror}")
        return ToolOutput(f"edited {target.shown(context.working_dir)}")


class ListFiles:
    spec = ToolSpec(
        "list_files",
        "List files matching a glob pattern (e.g. '**/*.py') under a directory.",
        _schema([], pattern=_STR, path=_STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        base = resolve(context.working_dir, str(arguments.get("path") or "."))
        pattern = str(arguments.get("pattern") or "*")
        if problem := _glob_problem(pattern, "pattern"):
            return _error(problem)
        if not base.path.is_dir():
            return _error(f"{arguments.get('path', '.')} is not a directory")
        names = sorted(
            str(p.relative_to(base.path)) + ("/" if p.is_dir() else "")
            for p in base.path.glob(pattern)
        )
        listed = names[:MAX_MATCHES]
        more = f"\n[... {len(names) - len(listed)} more]" if len(names) > len(listed) else ""
        return ToolOutput("\n".join(listed) + more if listed else "(no matches)")


class Grep:
    spec = ToolSpec(
        "grep",
        "Search files under a directory for a regular expression; lines as path:line:text.",
        _schema(["pattern"], pattern=_STR, path=_STR, glob=_STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        try:
            regex = re.compile(str(arguments.get("pattern", "")))
        except re.error as exc:
            return _error(f"bad regular expression: {exc}")
        base = resolve(context.working_dir, str(arguments.get("path") or "."))
        glob = str(arguments.get("glob") or "*")
        if problem := _glob_problem(glob, "glob"):
            return _error(problem)
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
        text = _cap("\n".join(hits)) if hits else "(no matches)"
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


class Bash:
    """A shell command in the working directory, with a timeout and an output cap.

    The command runs in its own process group, so a timeout or a cancelled turn
    kills everything it started.
    """

    spec = ToolSpec(
        "bash",
        "Run a shell command in the working directory; returns exit code and output.",
        _schema(["command"], command=_STR, timeout_seconds=_INT),
    )

    def __init__(self, default_timeout: float = 120.0) -> None:
        self.default_timeout = default_timeout

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        command = str(arguments.get("command", ""))
        timeout = float(arguments.get("timeout_seconds") or self.default_timeout)
        timeout = min(max(timeout, 0.1), MAX_TIMEOUT)
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=context.working_dir,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        kept = bytearray()
        dropped = 0

        async def pump() -> None:
            """Read as it comes (memory stays bounded however much is printed)."""
            nonlocal dropped
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(1 << 16):
                room = max(0, OUTPUT_BYTES - len(kept))
                kept.extend(chunk[:room])
                dropped += len(chunk) - min(room, len(chunk))
            await proc.wait()

        try:
            await asyncio.wait_for(pump(), timeout)
        except (TimeoutError, asyncio.CancelledError) as exc:
            await _stop(proc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return _error(f"timed out after {timeout:g}s: {command}")
        text = _cap(kept.decode(errors="replace"))
        if dropped:
            text += f"\n[... {dropped} more bytes cut]"
        code = proc.returncode
        return ToolOutput(
            f"exit code {code}\n{text}", is_error=code != 0, metadata={"exit_code": code}
        )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Kill the command's process group and reap it. The pipe is drained to its
    end first: asyncio reaps a process only once its pipes are closed, and a pipe
    left full would wait for a reader forever."""
    _kill_group(proc.pid)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(5):
            while proc.stdout is not None and await proc.stdout.read(1 << 16):
                pass
            await proc.wait()


def builtin_tools() -> list[Tool]:
    """Every built-in tool, ready for a :class:`~infai.tools.base.Toolbox`."""
    return [ReadFile(), WriteFile(), EditFile(), ListFiles(), Grep(), Bash()]
