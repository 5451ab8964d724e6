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
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infai.llm import ToolSpec

from .base import Tool, ToolContext, ToolOutput
from .offload import off_loop
from .paths import resolve

MAX_OUTPUT = 30_000  # characters a tool returns at most
OUTPUT_BYTES = 4 * MAX_OUTPUT  # bytes of a command's output kept (UTF-8: up to 4 a character)
MAX_TIMEOUT = 3600.0  # seconds a command may run at most, whatever the model asks
MAX_MATCHES = 200
READ_CHUNK = 1 << 16  # characters read at a time from lines that are skipped


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
    """``read_file``: a range of lines, capped at :data:`MAX_OUTPUT` characters, with
    where to read on when cut; the file is read only as far as needed."""

    spec = ToolSpec(
        "read_file",
        "Read a text file, optionally only lines start_line..end_line (1-based, inclusive).",
        _schema(["path"], path=_STR, start_line=_INT, end_line=_INT),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """:meth:`read` in a worker thread (a cancel does not wait: it only reads)."""
        return await asyncio.to_thread(self.read, arguments, context)

    def read(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """The blocking part, run in a worker thread."""
        target = resolve(context.working_dir, str(arguments.get("path", "")))
        start = max(1, int(arguments.get("start_line") or 1))
        end_line = arguments.get("end_line")
        try:
            found = read_lines(target.path, start, int(end_line) if end_line else None)
        except OSError as exc:
            return _error(f"cannot read {arguments.get('path')}: {exc.strerror or exc}")
        if found.past_end:
            return _error(f"start_line {start} is past the end ({found.total} lines)")
        text = found.text
        if found.cut:
            text += f"\n[... cut at {MAX_OUTPUT} characters; read on with start_line={found.last}]"
        return ToolOutput(text, metadata={"lines": [start, found.last]})


@dataclass(frozen=True)
class Lines:
    """What :func:`read_lines` found."""

    text: str
    #: the last line read (in part, if ``cut``)
    last: int
    cut: bool = False
    #: the range asked for starts after the file's last line
    past_end: bool = False
    #: the file's line count, when it was read to its end
    total: int | None = None


def read_lines(path: Path, start: int, end: int | None, limit: int = MAX_OUTPUT) -> Lines:
    """Lines ``start..end`` (1-based, inclusive; None: to the end) of a text file.

    The file is read only as far as it must be: up to ``end``, or until
    ``limit`` characters are kept (a huge file, or one huge line, is never
    read whole). Bytes that are not UTF-8 are shown as replacement characters.
    """
    parts: list[str] = []
    kept, number, ended = 0, 1, True  # the line being read; whether the last read ended one
    with path.open(encoding="utf-8", errors="replace") as handle:
        while end is None or number <= end:
            wanted = number >= start
            piece = handle.readline(limit - kept + 1 if wanted else READ_CHUNK)
            if not piece:
                break
            ended = piece.endswith("\n")
            if wanted:
                parts.append(piece)
                kept += len(piece)
                if kept > limit:
                    return Lines("".join(parts)[:limit], number, cut=True)
            if ended:
                number += 1
        else:
            return Lines("".join(parts), end)
    total = number - 1 if ended else number
    if start > max(total, 1) and total:
        return Lines("", total, past_end=True, total=total)
    return Lines("".join(parts), total, total=total)


def replace_file(path: Path, content: str) -> None:
    """Replace (or create) ``path`` with ``content`` atomically.

    The text goes to a temporary file beside it, is flushed to disk, and is
    renamed over the old file: a crash or a kill at any moment leaves either
    the old file or the new one, never a truncated mix. The file's permission
    bits are kept (a new file gets the usual ones, after the umask).
    """
    try:
        mode: int | None = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):  # the rename itself is durable once its directory is
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class WriteFile:
    """``write_file``: create or replace a file atomically (see :func:`replace_file`),
    making missing parent directories."""

    spec = ToolSpec(
        "write_file",
        "Create or overwrite a text file with the given content.",
        _schema(["path", "content"], path=_STR, content=_STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """:meth:`write` in a worker thread; a cancel waits for the write to finish."""
        return await off_loop(self.write, arguments, context)

    def write(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """The blocking part, run in a worker thread (a cancel lets it finish)."""
        target = resolve(context.working_dir, str(arguments.get("path", "")))
        content = str(arguments.get("content", ""))
        try:
            target.path.parent.mkdir(parents=True, exist_ok=True)
            replace_file(target.path, content)
        except UnicodeEncodeError as exc:
            return _unencodable(arguments.get("path"), exc)
        except OSError as exc:
            return _error(f"cannot write {arguments.get('path')}: {exc.strerror or exc}")
        return ToolOutput(f"wrote {len(content)} characters to {target.shown(context.working_dir)}")


def _undecodable(shown: object, exc: UnicodeDecodeError) -> ToolOutput:
    return _error(
        f"{shown} is not UTF-8 text (byte {exc.start}: {exc.reason}); it cannot be edited as text"
    )


def _unencodable(shown: object, exc: UnicodeEncodeError) -> ToolOutput:
    return _error(
        f"cannot write {shown}: the text is not valid Unicode at character {exc.start} "
        f"({exc.reason}); the file is unchanged"
    )


class EditFile:
    """``edit_file``: replace text that occurs exactly once; the file is rewritten
    atomically with ``\n`` line endings, and a non-UTF-8 file is refused."""

    spec = ToolSpec(
        "edit_file",
        "Replace the one exact occurrence of old_text in a file with new_text.",
        _schema(["path", "old_text", "new_text"], path=_STR, old_text=_STR, new_text=_STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """:meth:`edit` in a worker thread; a cancel waits for the write to finish."""
        return await off_loop(self.edit, arguments, context)

    def edit(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """The blocking part, run in a worker thread (a cancel lets it finish)."""
        target = resolve(context.working_dir, str(arguments.get("path", "")))
        old, new = str(arguments.get("old_text", "")), str(arguments.get("new_text", ""))
        try:
            text = target.path.read_bytes().decode("utf-8")
        except OSError as exc:
            return _error(f"cannot read {arguments.get('path')}: {exc.strerror or exc}")
        except UnicodeDecodeError as exc:
            return _undecodable(arguments.get("path"), exc)
        text = text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text() reads it
        count = text.count(old) if old else 0
        if count != 1:
            found = "not found" if count == 0 else f"found {count} times"
            return _error(
                f"old_text {found} in {arguments.get('path')}; it must occur exactly once"
            )
        try:
            replace_file(target.path, text.replace(old, new, 1))
        except UnicodeEncodeError as exc:
            return _unencodable(arguments.get("path"), exc)
        except OSError as exc:
            return _error(f"cannot write {arguments.get('path')}: {exc.strerror or exc}")
        return ToolOutput(f"edited {target.shown(context.working_dir)}")


class ListFiles:
    """``list_files``: paths under a directory matching a glob, sorted, at most
    :data:`MAX_MATCHES`; a glob may not climb out of the directory."""

    spec = ToolSpec(
        "list_files",
        "List files matching a glob pattern (e.g. '**/*.py') under a directory.",
        _schema([], pattern=_STR, path=_STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """:meth:`listing` in a worker thread."""
        return await asyncio.to_thread(self.listing, arguments, context)

    def listing(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """The blocking part (a walk of the tree), run in a worker thread."""
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
    """``grep``: a Python regex over the UTF-8 files under a directory, ``.git`` and
    binary files skipped, links leading out not followed, at most :data:`MAX_MATCHES`."""

    spec = ToolSpec(
        "grep",
        "Search files under a directory for a regular expression; lines as path:line:text.",
        _schema(["pattern"], pattern=_STR, path=_STR, glob=_STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """:meth:`search` in a worker thread."""
        return await asyncio.to_thread(self.search, arguments, context)

    def search(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """The blocking part (a walk of the tree), run in a worker thread."""
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
        """Run the command under ``sh`` with stdin closed and stderr merged into stdout;
        a non-zero exit is an error output, a cancel kills the group and propagates."""
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
