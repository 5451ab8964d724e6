"""Context the user adds by hand: a shell command's output (``!cmd``) and a file's
content (``@path``), for the model to read with the next prompt.

Why through the tools: the user's own command or file must meet exactly what
the model's would. :func:`run_as_user` runs the ``bash`` or ``read_file`` tool
of the session's toolbox after the session's permission policy has decided
(:func:`~infai.agent.loop` runs a model's call the same way), in the session's
:meth:`~infai.agent.AgentSession.tool_context`: a deny rule refuses, an ask
rule or the defaults ask the shell's approver, and ``bash`` runs in the
sandbox as a model's call does. PreToolUse hooks are the model's guard and do
not run for the user's own calls.

What was run or read is recorded as a ``user`` message (:func:`shell_note`,
:func:`file_note`) with :data:`USER_CONTEXT` in its metadata, appended with
:func:`add_context` (in the session's slot, as a turn appends): durable, in the
session's history (a resume, an export and the next request all see it), and no
turn's prompt (:mod:`.unfinished` does not take it for an unanswered one).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from infai.llm import ToolCall
from infai.store import Event, MessageRecord
from infai.tools import ToolOutput
from infai.tools.offload import off_loop

from .loop import _run_tool

if TYPE_CHECKING:
    from .session import AgentSession

#: the metadata key of a message the user added as context: ``"shell"`` or ``"file"``
USER_CONTEXT = "user_context"


async def run_as_user(
    session: AgentSession, tool: str, arguments: dict[str, Any]
) -> tuple[ToolOutput, bool]:
    """Run ``tool`` as the model's call would run (decided, then run) for the
    user; (its output, whether it ran: False when the policy or the user denied)."""
    call = ToolCall(f"user-{uuid.uuid4().hex[:12]}", tool, arguments)
    output, decision = await _run_tool(
        call, session.toolbox, session.permissions, session.tool_context()
    )
    ran = not decision or decision.get("verdict") == "allow"
    return output, ran


def shell_note(command: str, output: ToolOutput) -> MessageRecord:
    """The record of the user's ``!command`` and what it printed."""
    body = output.content.rstrip("\n")
    text = f"I ran a shell command myself: `{command}`\n\n```\n{body}\n```"
    meta: dict[str, Any] = {USER_CONTEXT: "shell", "command": command}
    if output.is_error:
        meta["is_error"] = True
    return MessageRecord(content=text, metadata=meta)


def file_note(path: str, output: ToolOutput) -> MessageRecord:
    """The record of the file ``@path`` the user attached, as the read tool read it."""
    body = output.content.rstrip("\n")
    text = f"I attached the file `{path}` (as read_file reads it):\n\n```\n{body}\n```"
    return MessageRecord(content=text, metadata={USER_CONTEXT: "file", "path": path})


async def add_context(session: AgentSession, note: MessageRecord) -> Event:
    """Append ``note`` between turns, in the session's slot (so no turn, compaction
    or other process writes meanwhile), published as any append is."""
    await session._hold("adding context")
    try:
        event = await off_loop(session.writer.append, note, "user")
    finally:
        await session._free()
    session.cache.appended([event])
    session._saved(event)
    return event
