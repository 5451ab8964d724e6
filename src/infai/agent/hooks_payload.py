"""What a hook command reads: Claude Code's names for infai's tools and events.

A hook script written for Claude Code reads a JSON object on stdin and looks
for ``tool_name`` and ``tool_input`` under Claude Code's names (``Bash``
``{command}``, ``Write`` ``{file_path, content}``...). infai's tools are
presented so, with absolute paths, so those scripts work unchanged; a matcher
may name either the Claude Code name or infai's own (``Agent`` is an alias of
``Task``, as in Claude Code). An MCP tool (``mcp__SERVER__TOOL``) and any
other tool keep their name and arguments as they are.

``transcript_path`` names a JSONL file in Claude Code's transcript shapes,
written from the session's context before each hook run
(:func:`write_transcript`): infai's own session files are not that format.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from infai.store import Event, HookRecord, MessageRecord, ToolCallRecord, ToolResultRecord

#: infai's tool name -> Claude Code's
CLAUDE_NAMES = {
    "bash": "Bash",
    "read_file": "Read",
    "write_file": "Write",
    "edit_file": "Edit",
    "grep": "Grep",
    "list_files": "Glob",
    "task": "Task",
}
#: the names a matcher may match a tool by, beyond the two above
ALIASES = {"task": ("Agent",)}
#: the first line of infai's bash output (:mod:`infai.tools.shell`)
_EXIT_LINE = re.compile(r"\Aexit code -?\d+\n")


def tool_names(name: str) -> tuple[str, ...]:
    """Every name a hook's matcher may match the tool ``name`` by: Claude Code's
    first, then infai's own and any alias."""
    claude = CLAUDE_NAMES.get(name)
    if claude is None:
        return (name,)
    return (claude, name, *ALIASES.get(name, ()))


def _absolute(working_dir: Path, given: Any) -> str:
    """The path absolute and normalised (``..`` taken out, symlinks kept), as Claude
    Code gives it: a guard comparing it with ``$CLAUDE_PROJECT_DIR/`` is not fooled
    by ``../``."""
    return os.path.normpath(working_dir / Path(str(given)).expanduser())


def tool_input(name: str, arguments: Mapping[str, Any], working_dir: Path) -> dict[str, Any]:
    """A call's arguments as Claude Code's tool of that kind takes them (paths absolute)."""
    args = dict(arguments)
    if name == "bash":
        shown: dict[str, Any] = {"command": args.get("command", "")}
        if "timeout_seconds" in args:
            shown["timeout"] = int(args["timeout_seconds"]) * 1000  # Claude Code: milliseconds
        if args.get("outside_sandbox"):
            shown["dangerouslyDisableSandbox"] = True
        return shown
    if name in ("read_file", "write_file", "edit_file"):
        shown = {"file_path": _absolute(working_dir, args.get("path", ""))}
        if name == "write_file":
            shown["content"] = args.get("content", "")
        elif name == "edit_file":
            shown["old_string"] = args.get("old_text", "")
            shown["new_string"] = args.get("new_text", "")
            shown["replace_all"] = False
        elif "start_line" in args:
            shown["offset"] = args["start_line"]
            if "end_line" in args:
                shown["limit"] = int(args["end_line"]) - int(args["start_line"]) + 1
        return shown
    if name in ("grep", "list_files"):
        shown = {"pattern": args.get("pattern", "*" if name == "list_files" else "")}
        shown["path"] = _absolute(working_dir, args.get("path") or ".")
        if name == "grep" and "glob" in args:
            shown["glob"] = args["glob"]
        return shown
    if name == "task":
        return {"prompt": args.get("prompt", ""), "description": args.get("description", "")}
    return args


#: per tool whose fields Claude Code names otherwise: its input field -> infai's argument
_ARGUMENTS = {
    "bash": {"command": "command"},
    "read_file": {"file_path": "path"},
    "write_file": {"file_path": "path", "content": "content"},
    "edit_file": {"file_path": "path", "old_string": "old_text", "new_string": "new_text"},
    "grep": {"pattern": "pattern", "path": "path", "glob": "glob"},
    "list_files": {"pattern": "pattern", "path": "path"},
    "task": {"prompt": "prompt", "description": "description"},
}


def tool_arguments(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """A PreToolUse hook's ``updatedInput`` (Claude Code's fields, :func:`tool_input`'s
    shape) as the arguments of infai's tool ``name``. It replaces the whole input,
    as in Claude Code; a field infai's tool has no counterpart for is dropped, and
    any other tool's input (MCP, plugins) is taken as it is."""
    fields = _ARGUMENTS.get(name)
    if fields is None:
        return dict(given)
    args = {mine: given[theirs] for theirs, mine in fields.items() if theirs in given}
    if name == "bash":
        timeout = given.get("timeout")  # Claude Code: milliseconds
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
            args["timeout_seconds"] = max(1, math.ceil(timeout / 1000))
        if given.get("dangerouslyDisableSandbox") is True:  # the policy asks, as for the model's
            args["outside_sandbox"] = True
    offset, limit = given.get("offset"), given.get("limit")
    if name == "read_file" and isinstance(offset, int) and not isinstance(offset, bool):
        args["start_line"] = offset
    if name == "read_file" and isinstance(limit, int) and not isinstance(limit, bool):
        args["end_line"] = int(args.get("start_line", 1)) + limit - 1
    return args


def tool_response(
    name: str, arguments: Mapping[str, Any], working_dir: Path, content: str, is_error: bool
) -> dict[str, Any]:
    """What a ``PostToolUse`` hook reads as ``tool_response``: the tool's output, in
    the fields Claude Code's tool of that kind reports (as near as infai has them)."""
    if name == "bash":  # the command's output, without the line infai tells the model its exit by
        stdout = _EXIT_LINE.sub("", content, count=1)
        return {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}
    response: dict[str, Any] = {"success": not is_error, "output": content}
    if name in ("read_file", "write_file", "edit_file"):
        response["filePath"] = _absolute(working_dir, arguments.get("path", ""))
    return response


def transcript_line(event: Event, working_dir: Path, session_id: str) -> dict[str, Any] | None:
    """One event of the context as a line of a Claude Code transcript (None: no
    line: files on the timeline, hook runs). Messages and tool calls keep Claude
    Code's shapes (``type``, ``message.role``, ``message.content`` blocks), so a
    hook that reads the transcript finds what it looks for."""
    record = event.record
    base = {"uuid": event.id, "timestamp": event.timestamp, "sessionId": session_id}
    base["cwd"] = str(working_dir)
    if isinstance(record, MessageRecord) and event.role in ("user", "assistant", "system"):
        role = "assistant" if event.role == "assistant" else "user"
        content: Any = record.content
        if role == "assistant":
            content = [{"type": "text", "text": record.content}] if record.content else []
        message = {"role": role, "content": content}
        if record.model:
            message["model"] = record.model
        return {**base, "type": role, "message": message}
    if isinstance(record, ToolCallRecord):
        use = {
            "type": "tool_use",
            "id": record.call_id,
            "name": tool_names(record.name)[0],
            "input": tool_input(record.name, record.arguments, working_dir),
        }
        return {**base, "type": "assistant", "message": {"role": "assistant", "content": [use]}}
    if isinstance(record, ToolResultRecord):
        result = {
            "type": "tool_result",
            "tool_use_id": record.call_id,
            "content": record.content,
            "is_error": record.is_error,
        }
        return {**base, "type": "user", "message": {"role": "user", "content": [result]}}
    if isinstance(record, HookRecord) and record.context:
        return {**base, "type": "user", "message": {"role": "user", "content": record.context}}
    return None


def write_transcript(events: list[Event], path: Path, working_dir: Path, session_id: str) -> Path:
    """Write the context's events to ``path`` as a Claude Code style JSONL transcript
    (replacing it whole: a hook never reads half a file). Blocking: a worker thread's."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lines = (transcript_line(event, working_dir, session_id) for event in events)
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines if line)
    partial = path.with_suffix(".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return path


def transcript_dir() -> Path:
    """Where hook transcripts are written: a private directory of this user's in the
    system's temporary directory."""
    return Path(tempfile.gettempdir()) / f"infai-{os.getuid()}" / "transcripts"
