"""What a program does with an open session, beyond starting and cancelling
turns: iterate a turn's events, answer its questions, read the context as the
model will get it, continue from an older event, put files back, add context
by hand, run a subagent.

The methods of :class:`~.session.AgentSession` (a mixin, so that module stays
small). A turn's output leaves the session by one path, its hub
(:attr:`AgentSession.hub`): :meth:`SessionApi.prompt` starts the turn as a task
(:meth:`AgentSession.start`) and yields what the hub carries for it, exactly
what the TUI and the server's streams see, until the turn's
:class:`~infai.agent.TurnEnded`. So :meth:`AgentSession.cancel` stops a turn
however it was started, and a program that closes the iteration early (its
own cancellation, :func:`contextlib.aclosing`, or a ``break`` once the
generator is collected) cancels the turn, which records its interruption.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from infai.checkpoints import FilesState, OnRestore, Restored, RestoreRefused
from infai.llm import Notice, Request
from infai.store import Event, InvalidInput, MessageRecord, Record, SessionBusy
from infai.tools import Ask, Permissions, Policy, Reply, Toolbox, ToolContext, ToolOutput
from infai.tools.offload import off_loop

from .checkpoint_steps import CheckpointSteps
from .context import ContextCache
from .hooks import Hooks
from .hub import EventHub
from .loop import AgentEvent, Streamed, TurnEnded, build_request
from .prompt import system_prompt
from .questions import Question
from .subagent import TaskTool
from .turn import Busy, SlotConflict, Turn
from .user_context import user_call

if TYPE_CHECKING:
    from pathlib import Path

    from infai.store import SessionView


@dataclass(frozen=True, slots=True)
class SubagentResult:
    """What :meth:`SessionApi.subagent` returns: the subagent's final answer (or
    why it failed) and the child session that holds its whole transcript."""

    answer: str
    session_id: str | None
    ok: bool


class SessionApi:
    """The program-facing methods of :class:`~.session.AgentSession`."""

    hub: EventHub
    permissions: Permissions
    toolbox: Toolbox
    cache: ContextCache
    working_dir: Path
    instructions: str
    session_id: str
    on_restore: OnRestore
    busy: str | None
    checkpoints: CheckpointSteps
    hooks: Hooks | None

    if TYPE_CHECKING:  # the session's own, used here

        @property
        def view(self) -> SessionView:
            """The session as stored."""

        @property
        def pending_parent(self) -> str | None:
            """The event the next prompt continues from."""

        @property
        def parked(self) -> bool:
            """Whether the writer is released."""

        async def start(self, text: str, from_event: str | None = None) -> Turn:
            """Start a turn as a task."""

        def select(self, event_id: str | None) -> None:
            """Pick the event the next prompt continues from."""

        def _publish(self, item: AgentEvent) -> None:
            """Publish on the hub."""

        async def _append_held(self, records: list[tuple[Record, str]], what: str) -> list[Event]:
            """Append in the slot, with the hook runs not yet recorded."""

    #: set by :meth:`continue_from`: the next turn does not restore the files again
    _restored_for: str | None = None

    async def prompt(
        self, text: str, *, from_event: str | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run ``text`` as a turn and yield its events as they happen, ending with
        its :class:`~infai.agent.TurnEnded` (``from_event``: continue from that
        older event, as :meth:`start` does).

        Raises :class:`~.turn.Busy` if the slot is taken, and what ended the turn
        if the session could not be saved (a store's failure), after the turn
        has stopped. Questions go to the session's approver.
        """
        async with aclosing(self._stream(text, from_event, questions=False)) as items:
            async for item in items:  # closed with this generator: the turn stops at once
                if not isinstance(item, Question):
                    yield item

    async def prompt_with_questions(
        self, text: str, *, from_event: str | None = None
    ) -> AsyncGenerator[AgentEvent | Question, None]:
        """As :meth:`prompt`, and the turn's permission questions are yielded too,
        as :class:`~.questions.Question` events, in order: the turn waits until
        the program answers one (:meth:`Question.answer`). For this turn they
        replace the session's approver (a subagent's questions come too)."""
        async with aclosing(self._stream(text, from_event, questions=True)) as items:
            async for item in items:
                yield item

    async def _stream(
        self, text: str, from_event: str | None, *, questions: bool
    ) -> AsyncGenerator[AgentEvent | Question, None]:
        # unbounded: this reader is the caller, who may read slowly but must miss nothing
        subscription = self.hub.subscribe(limit=sys.maxsize)
        policy = self.permissions if questions and isinstance(self.permissions, Policy) else None
        before = policy.approver if policy is not None else None
        if policy is not None:
            loop = asyncio.get_running_loop()

            async def approver(ask: Ask) -> Reply:
                question = Question(ask, loop.create_future())
                # in the turn's own stream, after every event published before it
                cast(Any, subscription).offer(question)
                return await question.reply

            policy.approver = approver
        turn: Turn | None = None
        try:
            turn = await self.start(text, from_event)
            async for item in cast(AsyncIterator[AgentEvent | Question], subscription):
                if isinstance(item, TurnEnded):
                    await _ended(turn)  # a store's failure is raised, not yielded
                    yield item
                    return
                yield item
            await _ended(turn)  # the session was closed under the turn
            yield turn.outcome or TurnEnded("cancelled")
        finally:
            self.hub.unsubscribe(subscription)
            if turn is not None and turn.task is not None and not turn.task.done():
                turn.task.cancel()  # the caller stopped listening: the turn stops too
                await asyncio.wait([turn.task])
            if policy is not None:
                policy.approver = before

    # -- reading the context ---------------------------------------------------

    async def context(self) -> Request:
        """The request the model would be sent if a turn asked it now: the system
        prompt (with the working directory's ``AGENTS.md``), the messages of the
        active context (from the last compaction on, at the event picked to
        continue from, else at HEAD; pruned tool output as the model sees it)
        and the tools offered (MCP servers are started to list theirs). Built by
        the loop's own :func:`~infai.agent.loop.build_request`. A new prompt's
        message is not in it yet. Between turns: while one runs (the context is
        changing under it) this is :class:`~.turn.Busy`."""
        if self.busy is not None:
            raise Busy(f"session {self.session_id} is busy: {self.busy}")
        tip = self.pending_parent or self.view.head
        view = self.view
        events = await off_loop(lambda: list(view.context(tip).events))
        system = await off_loop(system_prompt, self.working_dir, self.instructions)
        messages = tuple(self.cache.pipeline.messages(events))  # the user's rules too
        await self.toolbox.prepare()
        return build_request(messages, system, self.toolbox)

    # -- branches --------------------------------------------------------------

    async def continue_from(
        self,
        event_id: str | None,
        choice: OnRestore | None = None,
        *,
        ask: Callable[[RestoreRefused], Awaitable[OnRestore | None]] | None = None,
    ) -> Restored | None:
        """Pick ``event_id`` (None: HEAD) for the next prompt, and put its files
        back now, as the TUI does before it sends: a refusal (files changed
        outside the agent, another session in the directory) raises
        :class:`~.workfiles.RestoreRefused` with nothing changed and the event
        still picked, so the program can try again with a ``choice``
        (``OnRestore(force=True)``, ``OnRestore(keep=...)`` or
        ``OnRestore(keep_files=True)``). With ``ask``, a refusal is asked about
        instead (a dialog, a prompt on a terminal): its answer is the choice the
        restore is tried again with, until it is done; None gives up (the
        refusal is raised, nothing changed). HEAD moves only when the next
        prompt is stored (two-phase, as in the store); that prompt does not
        restore again."""
        self.select(event_id)
        if event_id is None:
            return None
        choice = choice or OnRestore()
        while True:
            try:
                done = await self.restore_files(choice)
                break
            except RestoreRefused as refused:
                answer = await ask(refused) if ask is not None else None
                if answer is None:
                    raise
                choice = answer
        self._restored_for = self.pending_parent
        return done

    # -- files (delegated to :attr:`checkpoints`) --------------------------------

    async def files_state(self) -> FilesState | None:
        """Whether the files on disk are HEAD's (None: checkpoints off); see
        :meth:`.CheckpointSteps.files_state`."""
        return await self.checkpoints.files_state()

    async def restore_files(self, choice: OnRestore | None = None) -> Restored | None:
        """Restore the picked event's files now, as the next prompt would; see
        :meth:`.CheckpointSteps.restore_files`."""
        return await self.checkpoints.restore_files(choice)

    async def checkout(
        self, event_id: str, choice: OnRestore | None = None, *, dry_run: bool = False
    ) -> Restored:
        """Put ``event_id``'s files on disk, the conversation staying at HEAD; see
        :meth:`.CheckpointSteps.checkout`."""
        return await self.checkpoints.checkout(event_id, choice, dry_run=dry_run)

    # -- context the user adds (:mod:`.user_context`) ---------------------------

    async def run_as_user(self, tool: str, arguments: dict[str, Any]) -> tuple[ToolOutput, bool]:
        """Run ``tool`` for the user (a shell's ``!cmd``: ``bash``, ``@file``:
        ``read_file``) as a model's call of it would run: PreToolUse hooks (a block
        refuses it, its reason in the output), the session's policy, the tool,
        PostToolUse hooks. Returns (its output, whether it ran: False when a hook,
        the policy or the user refused). Nothing of the output is recorded (that is
        :meth:`add_context`'s); the hook runs are, at once when no older event is
        picked and no turn runs, else with the next append. Hooks' notices are
        published on the hub."""
        hooks, before = self.hooks, self.hooks.events if self.hooks is not None else None
        if hooks is not None:  # their transcript: the context the next prompt follows
            view, tip = self.view, self.pending_parent
            hooks.events = lambda: list(view.context(tip).events)
        try:
            done = await user_call(
                tool,
                arguments,
                toolbox=self.toolbox,
                permissions=self.permissions,
                context=self.tool_context(),
                hooks=hooks,
            )
        finally:
            if hooks is not None:
                hooks.events = before
        for notice in done.notices:
            self._publish(Streamed(Notice(notice)))
        if self.hooks is not None and self.hooks.pending and self.pending_parent is None:
            try:
                await self._append_held([], "recording hook runs")
            except (SlotConflict, SessionBusy) as exc:  # kept: they follow the next append
                self._publish(Streamed(Notice(f"hook runs not recorded yet: {exc}")))
        return done.output, done.ran

    async def add_context(self, note: MessageRecord) -> Event:
        """Append ``note`` (see :func:`~.user_context.shell_note`,
        :func:`~.user_context.file_note`) as a ``user`` message between turns, in
        the session's slot (no turn, compaction or other process writes meanwhile;
        :class:`~.turn.Busy` if one is running), after any hook runs not yet
        recorded; published on the hub as every append is."""
        events = await self._append_held([(note, "user")], "adding context")
        return events[-1]

    # -- subagents -------------------------------------------------------------

    async def subagent(self, prompt: str, description: str = "") -> SubagentResult:
        """Run a subagent on ``prompt`` in a child session of this one (linked to
        it), under this session's policy narrowed as the ``task`` tool narrows it,
        with its tools and hooks; returns its final answer. Nothing is appended
        to this session (the model's own ``task`` calls record call and result)."""
        task = self.toolbox.get("task")
        if not isinstance(task, TaskTool):
            raise InvalidInput(f"session {self.session_id} has no task tool to run a subagent")
        context = self.tool_context()
        output = await task.run({"prompt": prompt, "description": description}, context)
        child = output.metadata.get("child_session")
        return SubagentResult(output.content, str(child) if child else None, not output.is_error)

    def tool_context(self) -> ToolContext:
        """Where this session's tools run, with the read rules its searches obey."""
        policy = self.permissions if isinstance(self.permissions, Policy) else None
        return ToolContext(
            self.working_dir,
            self.session_id,
            # read deny rules hold for every file a search reads or names
            readable=policy.may_read if policy is not None else None,
            reads_denied=policy is not None and policy.denies_reads(),
            denied_reads=policy.denied_read_patterns() if policy is not None else (),
        )


async def _ended(turn: Turn) -> None:
    """Wait for ``turn``'s task (its slot given back); raise what failed it."""
    assert turn.task is not None
    await asyncio.wait([turn.task])
    if turn.failure is not None:
        raise turn.failure


__all__ = ["SessionApi", "SubagentResult"]
