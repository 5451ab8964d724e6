"""The file tools: read a range of lines, write a file, edit one exact occurrence.

A path is resolved once against the session's working directory (see
:mod:`~infai.tools.paths`; whether a path outside it may be touched is the
policy's question, asked before the tool runs), and the tool then acts on what
was resolved, through descriptors reached without following a symlink: a link
swapped in after the check cannot redirect a read or a write. Only regular
files are read (a FIFO or a device would hang or never end). Writes are atomic:
a crash leaves the old file or the new one, never a mix; an edit keeps the
file's line endings.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infai.llm import ToolSpec

from .base import ToolContext, ToolOutput
from .common import INT, MAX_OUTPUT, READ_CHUNK, STR, argument_problem, as_int, error, schema
from .offload import off_loop
from .paths import NulInPath, Resolved, open_parent, open_regular, open_regular_at, replace_at

#: bytes of a file edit_file takes in (it rewrites the file whole)
MAX_EDIT_BYTES = 16 << 20


def _target(arguments: dict[str, Any], context: ToolContext, spec: ToolSpec) -> Resolved | str:
    """The call's path, resolved once for the call; or why the arguments cannot be used."""
    if problem := argument_problem(spec, arguments):
        return problem
    try:
        return context.resolve(str(arguments.get("path") or ""))
    except NulInPath:
        return "argument 'path' has a NUL byte in it, which no path can hold"


class ReadFile:
    """``read_file``: a range of lines, capped at :data:`MAX_OUTPUT` characters, with
    where to read on when cut; the file is read only as far as needed, and only
    if it is a regular file."""

    #: reads only: no files snapshot after a call (:mod:`infai.checkpoints.session`)
    changes_files = False
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
        target = _target(arguments, context, self.spec)
        if isinstance(target, str):
            return error(target)
        start = max(1, as_int(arguments.get("start_line"), 1))
        end_line = as_int(arguments.get("end_line"), 0) or None
        try:
            found = read_lines(open_regular(target, context.working_dir), start, end_line)
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


def read_lines(source: Path | int, start: int, end: int | None, limit: int = MAX_OUTPUT) -> Lines:
    """Lines ``start..end`` (1-based, inclusive; None: to the end) of a text file
    (a path, or a descriptor this function then owns and closes).

    The file is read only as far as it must be: up to ``end``, or until
    ``limit`` characters are kept (a huge file, or one huge line, is never
    read whole). Bytes that are not UTF-8 are shown as replacement characters.
    """
    parts: list[str] = []
    kept, number, ended = 0, 1, True  # the line being read; whether the last read ended one
    with open(source, encoding="utf-8", errors="replace") as handle:
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


class WriteFile:
    """``write_file``: create or replace a file atomically (see
    :func:`~infai.tools.paths.replace_at`), making missing parent directories."""

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
        target = _target(arguments, context, self.spec)
        if isinstance(target, str):
            return error(target)
        content = str(arguments.get("content", ""))
        try:
            data = content.encode("utf-8")
            dir_fd, name = open_parent(target, context.working_dir, create=True)
            try:
                replace_at(dir_fd, name, data)
            finally:
                os.close(dir_fd)
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


def line_ending(text: str) -> str:
    """The line ending a text mostly uses: ``\\r\\n``, ``\\r`` or ``\\n``."""
    crlf = text.count("\r\n")
    cr, lf = text.count("\r") - crlf, text.count("\n") - crlf
    if crlf and crlf >= cr and crlf >= lf:
        return "\r\n"
    return "\r" if cr > lf else "\n"


def _in_endings(text: str, ending: str) -> str:
    """``text`` (as the model writes it, lines ending in ``\\n``) with ``ending``."""
    plain = text.replace("\r\n", "\n")
    return plain if ending == "\n" else plain.replace("\n", ending)


#: a line break of any kind, CRLF first
_BREAK = re.compile(r"\r\n|\r|\n")


def _splits_a_pair(text: str, at: int) -> bool:
    """Whether offset ``at`` falls between the ``\\r`` and the ``\\n`` of a CRLF."""
    return 0 < at < len(text) and text[at - 1] == "\r" and text[at] == "\n"


def _occurrences(text: str, pattern: re.Pattern[str]) -> list[re.Match[str]]:
    """The matches of ``pattern`` that neither begin nor end inside a CRLF (replacing
    one would leave half a line ending behind)."""
    return [
        match
        for match in pattern.finditer(text)
        if not _splits_a_pair(text, match.start()) and not _splits_a_pair(text, match.end())
    ]


def _any_endings(old: str) -> re.Pattern[str]:
    """``old`` with each line break matching any kind of line break."""
    return re.compile(r"(?:\r\n|\r|\n)".join(re.escape(part) for part in _BREAK.split(old)))


def edited(text: str, old: str, new: str) -> tuple[str | None, int]:
    """``text`` with its one occurrence of ``old`` replaced by ``new``, keeping the
    text's line endings (the model sees and sends ``\\n``); ``(None, count)`` when
    ``old`` does not occur exactly once.

    ``old`` is first looked for in the file's own line ending, and ``new`` put
    in it; if not found, with any line ending at each of its breaks (a file of
    mixed endings), and ``new`` put in the ending of the text it replaces when
    that has one kind, else the file's. A match never begins or ends between
    the two characters of a CRLF.
    """
    if not old:
        return None, 0
    ending = line_ending(text)
    count = 0
    exact = re.compile(re.escape(_in_endings(old, ending)))
    for pattern in (exact, _any_endings(old)):
        found = _occurrences(text, pattern)
        count = len(found)
        if count > 1:
            break
        if count == 1:
            [match] = found
            kinds = set(_BREAK.findall(match.group()))
            local = kinds.pop() if pattern is not exact and len(kinds) == 1 else ending
            return text[: match.start()] + _in_endings(new, local) + text[match.end() :], 1
    return None, count


class EditFile:
    """``edit_file``: replace text that occurs exactly once; the file is rewritten
    atomically, its line endings kept, and a non-UTF-8 file is refused."""

    spec = ToolSpec(
        "edit_file",
        "Replace the one exact occurrence of old_text in a file with new_text.",
        schema(["path", "old_text", "new_text"], path=STR, old_text=STR, new_text=STR),
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """:meth:`edit` in a worker thread; a cancel waits for the write to finish."""
        return await off_loop(self.edit, arguments, context)

    def edit(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """The blocking part, run in a worker thread (a cancel lets it finish).

        The file is read and rewritten through one directory descriptor: the
        file replaced is the file read.
        """
        target = _target(arguments, context, self.spec)
        if isinstance(target, str):
            return error(target)
        shown = arguments.get("path")
        old, new = str(arguments.get("old_text", "")), str(arguments.get("new_text", ""))
        try:
            dir_fd, name = open_parent(target, context.working_dir)
        except OSError as exc:
            return error(f"cannot read {shown}: {exc.strerror or exc}")
        try:
            try:
                with open(open_regular_at(dir_fd, name), "rb") as handle:
                    data = handle.read(MAX_EDIT_BYTES + 1)
                if len(data) > MAX_EDIT_BYTES:
                    return error(f"{shown} is over {MAX_EDIT_BYTES >> 20} MiB; it is not edited")
                text = data.decode("utf-8")
            except OSError as exc:
                return error(f"cannot read {shown}: {exc.strerror or exc}")
            except UnicodeDecodeError as exc:
                return _undecodable(shown, exc)
            result, count = edited(text, old, new)
            if result is None:
                found = "not found" if count == 0 else f"found {count} times"
                return error(f"old_text {found} in {shown}; it must occur exactly once")
            try:
                replace_at(dir_fd, name, result.encode("utf-8"))
            except UnicodeEncodeError as exc:
                return _unencodable(shown, exc)
            except OSError as exc:
                return error(f"cannot write {shown}: {exc.strerror or exc}")
        finally:
            os.close(dir_fd)
        return ToolOutput(f"edited {target.shown(context.working_dir)}")
