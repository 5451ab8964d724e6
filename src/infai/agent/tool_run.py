"""How one tool call is decided and run: the step a model's call and the user's
own (``!cmd``, ``@file``: :mod:`.user_context`) share, so both meet the same
argument checks, PreToolUse verdict, permission policy and tool.

The loop (:mod:`.loop`) fires the hooks around it and records the outcome;
this module only decides and runs.
"""

from __future__ import annotations

import asyncio

from infai.llm import ToolCall
from infai.store import now_rfc3339
from infai.tools import Permissions, Toolbox, ToolContext, ToolOutput
from infai.tools.common import argument_problem

from .hooks import Outcome, decide_with


def runnable(call: ToolCall, toolbox: Toolbox) -> bool:
    """Whether a call names a tool with arguments it takes (else it is answered an
    error, and its PreToolUse hooks do not fire)."""
    tool = toolbox.get(call.name)
    return (
        call.error is None and tool is not None and not argument_problem(tool.spec, call.arguments)
    )


async def decide_and_run(
    call: ToolCall,
    toolbox: Toolbox,
    permissions: Permissions,
    context: ToolContext,
    pre: Outcome | None = None,
) -> tuple[ToolOutput, dict[str, str]]:
    """Decide (``pre``: what its PreToolUse hooks said; a block wins), then run;
    every failure becomes an error output for the model. Also the decision, as
    recorded in the result's metadata (empty: the call was never decided)."""
    if call.error is not None:
        return ToolOutput(f"tool call {call.name!r} was not run: {call.error}", True), {}
    tool = toolbox.get(call.name)
    if tool is None:
        known = ", ".join(spec.name for spec in toolbox.specs()) or "none"
        return ToolOutput(f"unknown tool {call.name!r} (tools: {known})", is_error=True), {}
    if problem := argument_problem(tool.spec, call.arguments):  # before the policy sees them
        return ToolOutput(f"tool call {call.name!r} was not run: {problem}", True), {}
    if pre is not None and (blocked := pre.blocked or pre.stop) is not None:  # a hook's deny wins
        why = f"blocked by a PreToolUse hook: {blocked}"
        return ToolOutput(why, True), {"verdict": "deny", "by": "hook", "reason": blocked}
    decision = await decide_with(permissions, call.name, call.arguments, context, pre)
    record = {"verdict": decision.verdict, "by": decision.by, "reason": decision.reason}
    record["at"] = now_rfc3339()
    if not decision.allowed:
        return ToolOutput(decision.denial(), is_error=True), record
    try:
        return await tool.run(call.arguments, context), record
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a tool's bug must not crash the loop
        return ToolOutput(f"tool {call.name!r} failed: {type(exc).__name__}: {exc}", True), record


__all__ = ["decide_and_run", "runnable"]
