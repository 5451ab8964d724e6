"""The file tools: read a range of lines, write a file, edit one exact occurrence.

Paths are resolved against the session's working directory (see
:mod:`~infai.tools.paths`); whether a path outside it may be touched is the
policy's question, asked before the tool runs. Writes are atomic: a crash leaves
the old file or the new one, never a mix.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infai.llm import ToolSpec

from .base import ToolContext, ToolOutput
from .common import INT, MAX_OUTPUT, READ_CHUNK, STR, error, schema
from .offload import off_loop
from .paths import resolve


class ReadFile:
    """``read_file``: a range of lines, capped at :data:`MAX_OUTPUT` characters, with
    where to read on when cut; the file is read only as far as needed."""

    spec = ToolSpec(
        "read_file",
        "Read a text file, optionally only lines start_line..end_line (1-based, inclusive).",
        schema(["path"], path=STR, start_line=INT, end_line=INT),
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
            return error(f"cannot read {arguments.get('path')}: {exc.strerror or exc}")
        if found.past_end:
            return error(f"start_line {start} is past the end ({found.total} lines)")
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
        schema(["path", "content"], path=STR, content=STR),
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
            return error(f"cannot write {arguments.get('path')}: {exc.strerror or exc}")
        return ToolOutput(f"wrote {len(content)} characters to {target.shown(context.working_dir)}")


def _undecodable(shown: object, exc: UnicodeDecodeError) -> ToolOutput:
    return error(
        f"{shown} is not UTF-8 text (byte {exc.start}: {exc.reason}); it cannot be edited as text"
    )


def _unencodable(shown: object, exc: UnicodeEncodeError) -> ToolOutput:
    return error(
        f"cannot write {shown}: the text is not valid Unicode at character {exc.start} "
        f"({exc.reason}); the file is unchanged"
    )


class EditFile:
    """``edit_file``: replace text that occurs exactly once; the file is rewritten
    atomically with ``\n`` line endings, and a non-UTF-8 file is refused."""

    spec = ToolSpec(
        "edit_file",
        "Replace the one exact occurrence of old_text in a file with new_text.",
        schema(["path", "old_text", "new_text"], path=STR, old_text=STR, new_text=STR),
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
            return error(f"cannot read {arguments.get('path')}: {exc.strerror or exc}")
        except UnicodeDecodeError as exc:
            return _undecodable(arguments.get("path"), exc)
        text = text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text() reads it
        count = text.count(old) if old else 0
        if count != 1:
            found = "not found" if count == 0 else f"found {count} times"
            return error(f"old_text {found} in {arguments.get('path')}; it must occur exactly once")
        try:
            replace_file(target.path, text.replace(old, new, 1))
        except UnicodeEncodeError as exc:
            return _unencodable(arguments.get("path"), exc)
        except OSError as exc:
            return error(f"cannot write {arguments.get('path')}: {exc.strerror or exc}")
        return ToolOutput(f"edited {target.shown(context.working_dir)}")
