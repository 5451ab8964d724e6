"""The hook steps of a turn (:mod:`.hooks`): the loop's :class:`~.loop._Turn` mixes
them in, so that the loop itself only says where each event fires.

Each step is an async generator of the agent events it makes (a hook's record
appended, a notice); a step that hands an answer back yields it last.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from typing import Any

from infai.llm import Notice, ToolCall
from infai.store import MessageRecord, Record, SessionLog
from infai.tools import ToolOutput

from .hooks import MAX_STOP_CONTINUES, Hooks, Outcome, fire_tool, with_feedback
from .hooks_payload import tool_response
from .turn_events import AgentEvent, Saved, Streamed, TurnEnded

#: how a turn whose prompt a hook refused ends (its error begins so)
BLOCKED = "the prompt was blocked by a UserPromptSubmit hook"


class HookSteps:
    """The hook steps; the turn supplies :meth:`append` and the attributes below."""

    writer: SessionLog
    #: the user's hook commands (None: none configured)
    hooks: Hooks | None
    #: how many times Stop hooks sent this turn back to work
    stop_continues: int
    #: a hook's ``continue: false``: why the turn stops
    stopped: str | None

    async def append(self, record: Record, role: str) -> list[Saved]:
        """Append one record (the turn's own append)."""
        raise NotImplementedError

    async def flush_hooks(self) -> AsyncIterator[AgentEvent]:
        """Append the records of the hook runs not yet in the session; say what
        those fired outside the turn's steps (a Notification's) had to say."""
        if self.hooks is None:
            return
        for record in self.hooks.take():
            for item in await self.append(record, "system"):
                yield item
        for notice in self.hooks.take_notices():
            yield Streamed(Notice(notice))

    async def heard(self, outcome: Awaitable[Outcome]) -> AsyncIterator[AgentEvent | Outcome]:
        """Await hooks' ``outcome``; append their records and say their notices, then
        hand the outcome back (last)."""
        got = await outcome
        async for item in self.flush_hooks():
            yield item
        for notice in got.notices:
            yield Streamed(Notice(notice))
        self.stopped = self.stopped or got.stop
        yield got

    async def fire(
        self, event: str, names: tuple[str, ...] = (), **fields: Any
    ) -> AsyncIterator[AgentEvent | Outcome]:
        """:meth:`heard` for ``event``'s hooks (none configured: nothing at all)."""
        if self.hooks is not None and self.hooks.has(event):
            async for item in self.heard(self.hooks.fire(event, names, **fields)):
                yield item

    async def post_tool(
        self, call: ToolCall, output: ToolOutput
    ) -> AsyncIterator[AgentEvent | ToolOutput]:
        """PostToolUse for a call that ran: the output, with what the hooks said
        to the model, comes last."""
        assert self.hooks is not None
        response = tool_response(
            call.name, call.arguments, self.hooks.working_dir, output.content, output.is_error
        )
        hooked = fire_tool(
            self.hooks, "PostToolUse", call.name, call.arguments, call.id, tool_response=response
        )
        async for item in self.heard(hooked):
            if isinstance(item, Outcome):
                yield replace(output, content=with_feedback(output.content, "PostToolUse", item))
            else:
                yield item

    async def stop_hooks(self, reply: str = "") -> AsyncIterator[AgentEvent]:
        """The turn would end on ``reply`` (``last_assistant_message``): its Stop (a
        subagent's SubagentStop) hooks may send it back to work, with their reason
        as the next instruction, a bounded number of times; a ``continue: false``
        ends it all the same."""
        if self.hooks is None or not self.hooks.has(self.hooks.stop_event):
            yield TurnEnded("done")
            return
        said: Outcome | None = None
        active = self.stop_continues > 0
        stop = self.hooks.stop_event
        async for item in self.fire(stop, stop_hook_active=active, last_assistant_message=reply):
            said = item if isinstance(item, Outcome) else said
            if not isinstance(item, Outcome):
                yield item
        assert said is not None
        if (
            said.stop is not None
            or said.blocked is None
            or self.stop_continues >= MAX_STOP_CONTINUES
        ):
            if said.blocked is not None and said.stop is None:
                said_no = f"{self.hooks.stop_event} hooks blocked {MAX_STOP_CONTINUES} times"
                yield Streamed(Notice(f"{said_no}; the turn ends"))
            yield TurnEnded("done")
            return
        self.stop_continues += 1
        again = MessageRecord(
            content=f"{self.hooks.stop_event} hook feedback:\n{said.blocked}",
            metadata={"hook": self.hooks.stop_event},
        )
        for item in await self.append(again, "user"):
            yield item

    async def prompt_hooks(self, prompt: str) -> AsyncIterator[AgentEvent | Outcome]:
        """SessionStart (the first turn of this session object), then UserPromptSubmit;
        the last item is the prompt hooks' outcome (their records not yet appended:
        they follow the prompt, unless it was blocked)."""
        assert self.hooks is not None
        if not self.hooks.started:
            self.hooks.started = True
            source = self.hooks.source
            async for item in self.fire("SessionStart", (source,), source=source):
                if not isinstance(item, Outcome):
                    yield item
        outcome = await self.hooks.fire("UserPromptSubmit", prompt=prompt)
        for notice in outcome.notices:
            yield Streamed(Notice(notice))
        yield outcome

    async def prompt_gate(self, prompt: str) -> AsyncIterator[AgentEvent]:
        """The prompt's hooks (none configured: nothing); a block or ``continue:
        false`` records them and ends the turn (last item) before the prompt is stored."""
        if self.hooks is None or not self.hooks.prompts:
            return
        said = Outcome()
        async for got in self.prompt_hooks(prompt):
            if isinstance(got, Outcome):
                said = got
            else:
                yield got
        if (stop := said.blocked or said.stop or self.stopped) is not None:
            async for item in self.flush_hooks():
                yield item
            yield TurnEnded("error", f"{BLOCKED}: {stop}")
