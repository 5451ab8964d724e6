"""Subagents: a ``task`` tool that runs a prompt in a child session of its own.

The child session is linked both ways: its ``session.json`` names the parent
session and the ``tool_call`` event that started it, and the parent's
``tool_result`` names the child session in its metadata. The parent receives
only the child's final answer; none of the child's events enter the parent's
context. The child's permissions can only be narrower than the parent's: every
call is first checked against the child's own restrictions (which can only
deny) and then decided by a delegate of the parent's policy (see
:meth:`~infai.tools.Policy.delegate`): the parent's rules and approver, with
two differences. A question names the subagent and shows the call's arguments
(the person cannot see the child's transcript), and what the person answers
"allow always" to stays with the child: it widens neither the parent's policy
nor the parent session's kept rules, and is kept in the child session's
metadata instead. A parent whose permissions are not a :class:`Policy` (tests'
``AllowAll``) is asked as it is.

The child is offered the parent's built-in tools (``task`` aside: no
recursion) and the tools of ``sources``: the MCP servers of the working
directory, the very hub the parent's toolbox draws from (one server process
per directory, however many subagents call it). Those calls meet the same
narrowed, delegated policy as every other call of the child.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from infai.llm import Model, ToolSpec
from infai.store import MessageRecord, SessionLog, SessionStore
from infai.tools import Decision, Permissions, Policy, Rule, Toolbox, ToolContext, ToolOutput
from infai.tools.base import ToolSource
from infai.tools.offload import off_loop

from .hooks import Hooks
from .kept import keep_rules
from .loop import TurnEnded, run_turn
from .prompt import system_prompt


@dataclass(frozen=True)
class Narrowed:
    """The parent's permissions, narrowed: only ``tools`` (patterns) may run at all."""

    parent: Permissions
    tools: tuple[str, ...] = ("*",)
    by: str = "subagent"

    async def decide(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> Decision:
        """Deny a tool outside the subagent's list; ask the parent about the rest."""
        if not any(fnmatchcase(tool, pattern) for pattern in self.tools):
            return Decision("deny", self.by, f"{tool} is not among this subagent's tools")
        return await self.parent.decide(tool, arguments, context)


@dataclass
class TaskTool:
    """Starts a subagent for a self-contained piece of work and returns its answer."""

    store: SessionStore
    model: Model
    tools: Iterable[Any]
    permissions: Permissions
    allowed: tuple[str, ...] = ("*",)
    max_steps: int = 30
    children: list[str] = field(default_factory=list)
    #: tools that come and go (MCP servers), attached to every child's toolbox too
    sources: tuple[ToolSource, ...] = ()
    #: the parent session's hooks: a child's turn fires them, ending on SubagentStop
    hooks: Hooks | None = None

    spec = ToolSpec(
        "task",
        "Give a self-contained task to a subagent working in a session of its own; "
        "returns only its final answer.",
        {
            "type": "object",
            "properties": {"prompt": {"type": "string"}, "description": {"type": "string"}},
            "required": ["prompt"],
        },
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """Run the subagent in a child session of its own; its final answer is the result."""
        prompt = str(arguments.get("prompt", "")).strip()
        if not prompt:
            return ToolOutput("task needs a prompt", is_error=True)
        label = str(arguments.get("description") or prompt.splitlines()[0])[:60]
        child = await off_loop(
            self.store.create_session,
            name=f"subagent: {label}",
            working_dir=str(context.working_dir),
            model=self.model.name,
            parent_session=context.session_id,
            parent_event=context.call_event_id,
        )
        self.children.append(child.id)
        toolbox = Toolbox(t for t in self.tools if t.spec.name != "task")  # no recursion
        for source in self.sources:  # shared, never started again for the child
            toolbox.attach(source)
        permissions = Narrowed(self._delegated(child.id, label), self.allowed)
        outcome: TurnEnded | None = None
        system = await off_loop(
            system_prompt,
            context.working_dir,
            "You are a subagent: finish the task and answer with the result only.",
        )
        writer = await off_loop(self.store.open_writer, child.id)
        try:
            async for event in run_turn(
                writer,
                self.model,
                prompt,
                toolbox=toolbox,
                permissions=permissions,
                context=ToolContext(
                    context.working_dir,
                    child.id,
                    readable=context.readable,
                    reads_denied=context.reads_denied,
                    denied_reads=context.denied_reads,
                ),
                system=system,
                max_steps=self.max_steps,
                objects=getattr(self.store, "objects", None),  # tool manifests
                hooks=self.hooks.for_subagent(child.id) if self.hooks is not None else None,
            ):
                if isinstance(event, TurnEnded):
                    outcome = event
            answer = await off_loop(_final_answer, writer)
        finally:
            await off_loop(writer.close)
        metadata = {"child_session": child.id}
        if outcome is None or outcome.outcome != "done":
            why = outcome.error if outcome else "no outcome"
            return ToolOutput(f"subagent failed: {why}", is_error=True, metadata=metadata)
        return ToolOutput(answer, metadata=metadata)

    def _delegated(self, child_id: str, label: str) -> Permissions:
        """The parent's policy as the child decides with it (the module docstring)."""
        if not isinstance(self.permissions, Policy):
            return self.permissions
        store = self.store

        def keep(rules: list[Rule]) -> None:
            """Kept with the child session, as a session keeps its own."""
            keep_rules(store, child_id, rules)

        return self.permissions.delegate(f"subagent '{label}' (session {child_id})", keep)


def _final_answer(writer: SessionLog) -> str:
    """The child's last assistant message ("" if it gave none)."""
    return next(
        (
            e.record.content
            for e in reversed(writer.context().events)
            if e.role == "assistant" and isinstance(e.record, MessageRecord)
        ),
        "",
    )


def standard_toolbox(store: SessionStore, model: Model, permissions: Permissions) -> Toolbox:
    """The tools every shell offers: the built-ins plus ``task`` (subagents)."""
    from infai.tools import builtin_tools

    tools = builtin_tools()
    return Toolbox([*tools, TaskTool(store, model, tools, permissions)])
