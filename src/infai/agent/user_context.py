"""Context the user adds by hand: a shell command's output (``!cmd``) and a file's
content (``@path``), for the model to read with the next prompt.

Why through the tools: the user's own command or file must meet exactly what
the model's would. :meth:`AgentSession.run_as_user
<infai.agent.AgentSession.run_as_user>` runs the ``bash`` or ``read_file`` tool
of the session's toolbox as a model's call runs (:func:`user_call`): its
PreToolUse hooks fire first (under Claude Code's names, ``Bash`` ``{command}``,
``Read`` ``{file_path}``; a block, exit 2, stops it and its stderr is the
output), then the session's permission policy decides (a deny rule refuses, an
ask rule or the defaults ask the shell's approver), it runs (``bash`` in the
sandbox, as a model's call), and its PostToolUse hooks fire with its output.
The hooks' runs are recorded in the session as any hook's are.

What was run or read is recorded as a ``user`` message (:func:`shell_note`,
:func:`file_note`) with :data:`USER_CONTEXT` in its metadata, appended with
:meth:`AgentSession.add_context <infai.agent.AgentSession.add_context>` (in
the session's slot, as a turn appends): durable, in the session's history (a
resume, an export and the next request all see it), and no turn's prompt
(:mod:`.unfinished` does not take it for an unanswered one).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from infai.llm import ToolCall
from infai.store import Event, MessageRecord
from infai.tools import Permissions, Toolbox, ToolContext, ToolOutput

from .hooks import Hooks, Outcome, fire_tool, updated_call, with_feedback
from .hooks_payload import tool_response
from .tool_run import decide_and_run, runnable

if TYPE_CHECKING:
    from .session import AgentSession

#: the metadata key of a message the user added as context: ``"shell"`` or ``"file"``
USER_CONTEXT = "user_context"


@dataclass(frozen=True, slots=True)
class UserCall:
    """What :func:`user_call` did: the output (with what the hooks told the model),
    whether it ran (False: a hook or the policy refused it), and the hooks'
    notices for the user (non-blocking errors)."""

    output: ToolOutput
    ran: bool
    notices: list[str] = field(default_factory=list)


async def user_call(
    tool: str,
    arguments: dict[str, Any],
    *,
    toolbox: Toolbox,
    permissions: Permissions,
    context: ToolContext,
    hooks: Hooks | None = None,
) -> UserCall:
    """Run ``tool`` for the user as a model's call of it runs: PreToolUse hooks,
    the policy's decision, the tool, PostToolUse hooks. The hooks' records are
    left in ``hooks.pending`` for the caller to append."""
    call = ToolCall(f"user-{uuid.uuid4().hex[:12]}", tool, arguments)
    pre: Outcome | None = None
    if hooks is not None and runnable(call, toolbox):
        pre = await fire_tool(hooks, "PreToolUse", tool, arguments, call.id)
    call = updated_call(call, pre)  # as a hook's updatedInput rewrote it
    output, decision = await decide_and_run(call, toolbox, permissions, context, pre)
    notices = list(pre.notices) if pre is not None else []
    if hooks is not None:  # a Notification hook's, while it asked
        notices += hooks.take_notices()
    if pre is not None and pre.blocked is None:
        output = replace(output, content=with_feedback(output.content, "PreToolUse", pre))
    allowed = decision.get("verdict") == "allow"
    if hooks is not None and allowed and not output.is_error:
        response = tool_response(
            tool, call.arguments, hooks.working_dir, output.content, output.is_error
        )
        post = await fire_tool(
            hooks, "PostToolUse", tool, call.arguments, call.id, tool_response=response
        )
        output = replace(output, content=with_feedback(output.content, "PostToolUse", post))
        notices += post.notices
    return UserCall(output, not decision or allowed, notices)


async def run_as_user(
    session: AgentSession, tool: str, arguments: dict[str, Any]
) -> tuple[ToolOutput, bool]:
    """:meth:`AgentSession.run_as_user <infai.agent.AgentSession.run_as_user>`, as a
    function (the form shells used first)."""
    return await session.run_as_user(tool, arguments)


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
    """:meth:`AgentSession.add_context <infai.agent.AgentSession.add_context>`, as a
    function (the form shells used first)."""
    return await session.add_context(note)


__all__ = [
    "USER_CONTEXT",
    "UserCall",
    "add_context",
    "file_note",
    "run_as_user",
    "shell_note",
    "user_call",
]
