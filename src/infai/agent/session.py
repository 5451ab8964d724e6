"""One agent session object that every shell drives (CLI, TUI, server).

:class:`AgentSession` owns the session's writer (so it holds the writer lock
while open), the model, the tools and the permission policy. Shells call
:meth:`AgentSession.prompt` and render the events; they choose an older event
to continue from with :meth:`AgentSession.select` (HEAD moves only when the next
prompt is stored) and never touch the store or the model themselves.

Where several processes share a session (a database store), a turn, a
compaction or a summarised switch first takes the session's lease
(:meth:`AgentSession.slot`): another process trying the same gets
:class:`~infai.store.SessionBusy` at once instead of racing it.

One turn at a time: :meth:`AgentSession.start` runs a turn as a task (the
TUI and the server drive it so, watching the hub), and
:meth:`AgentSession.prompt` starts one the same way and yields what the hub
carries for it (the CLI, SDK programs: :mod:`.session_api`); a turn, a
compaction and a summarised switch share one slot, and anything else that would
write meanwhile gets :class:`Busy`.
:meth:`AgentSession.cancel` stops the turn in flight and waits for it to have
recorded its interruption.

Every event the session appends (prompts, replies, tool calls and results,
compactions, branch summaries, the interruption marker) is published on its
:attr:`AgentSession.hub` as :class:`~infai.agent.Saved` once it is durable,
with the turn's deltas and its end, so a watcher subscribed to the hub misses
nothing and need not read the store back. A turn's events leave by one path:
the turn's generator (:func:`~.loop.run_turn`) yields each exactly once, in
store order, the interruption marker included, and the session publishes what
it yields. Appends, store reads and the lease run in worker threads, never on
the event loop.

A long-lived host (the server) sets :attr:`AgentSession.park_between_turns`:
then the writer (and with it the file store's lock) is held only while the
slot's work runs. Between turns the session is *parked*: the writer is closed
and reads go to a reader; the next turn, compaction or switch opens a new
writer, which reads HEAD and everything another process appended meanwhile
(``infai session append``, ``infai run --session``), so the turn builds on
them; an event picked to continue from is carried over.

A turn another process left unfinished (killed mid-turn: its prompt or tool
call has no answer) is recorded as interrupted before this one writes: at open
where the writer's lock excludes every other process, else when the lease is
taken and HEAD has moved since (:mod:`.unfinished`). :meth:`start` returns at
once; :meth:`Turn.asked` waits until the prompt is durable.

The session's files on the timeline (restores before a continue, snapshots
after tools, checkout) are its :attr:`AgentSession.checkpoints`, a
:class:`~.checkpoint_steps.CheckpointSteps` it holds and delegates to.

What the user answered "allow always" is kept with the session (its metadata's
``extra.allowed``, as ``tool pattern`` texts) and applies again whenever the
session is opened, in any shell.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from infai.checkpoints import OnRestore, SessionCheckpoints
from infai.errors import InfaiError
from infai.llm import Model, Notice, close_model
from infai.store import (
    Event,
    Lease,
    MessageRecord,
    SessionStore,
    SessionView,
)
from infai.tools import Permissions, Policy, Rule, Toolbox
from infai.tools.offload import off_loop

from .checkpoint_steps import CheckpointSteps
from .compaction import DEFAULT_THRESHOLD, compact, summarize_branch
from .context import ContextCache, context_pipeline
from .continue_point import continue_point
from .hooks import Hooks, HookSpec
from .hub import EventHub
from .kept import KEPT_RULES as KEPT_RULES
from .kept import keep_rules
from .kept import kept_rules as kept_rules
from .loop import TURN_PROMPT, AgentEvent, Saved, Streamed, TurnEnded, run_turn
from .prompt import build_system_prompt
from .session_api import SessionApi
from .session_hooks import SessionHooks
from .session_lease import SessionLease
from .turn import Busy, NotInFlight, Turn
from .unfinished import record_unfinished


class AgentSession(SessionApi, SessionLease, SessionHooks):
    """A session opened for an agent: prompt it, branch it, close it."""

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        *,
        model: Model,
        toolbox: Toolbox,
        permissions: Permissions,
        instructions: str = "",
        compact_at: float | None = DEFAULT_THRESHOLD,
        owns_model: bool = True,
        files: SessionCheckpoints | None = None,
        default_dir: str | Path = ".",
        hooks: Sequence[HookSpec] = (),
        context_rules: Sequence[str] | None = None,
        max_steps: int = 50,
    ) -> None:
        """``default_dir``: where the tools run when the session names no working
        directory (an imported one may not): the workspace's, whose files are the
        ones snapshotted then. ``context_rules``: see :func:`.context.context_pipeline`."""
        self.store = store
        #: whether :meth:`aclose` closes the model (a workspace's shared one it does not)
        self.owns_model = owns_model
        info = store.info(session_id)
        self.working_dir = Path(info.working_dir or default_dir).resolve()
        self.model = model
        self.toolbox = toolbox
        self.permissions = permissions
        self.instructions = instructions
        #: auto-compaction threshold (fraction of the context window; None: off)
        self.compact_at = compact_at
        self.max_steps = max_steps
        self._told: str | None = None  # the instruction file a notice named last
        pipeline = context_pipeline(info.extra, context_rules)  # before the writer opens
        if isinstance(permissions, Policy):
            permissions.rules.extend(kept_rules(info))
            permissions.remember = self._keep
        #: internal: the session's writer. Shells read through :attr:`view` and
        #: change the session only through this object's methods.
        self.writer = store.open_writer(session_id)
        self.session_id = self.writer.session_id
        self._lease: Any = None
        self._held = 0
        self.cache = ContextCache(self.writer, pipeline=pipeline)
        #: the user's hook commands (:mod:`.hooks`; None: none configured)
        self.hooks = Hooks(hooks, self.working_dir, self.session_id) if hooks else None
        if self.hooks is not None:  # before this object appends anything (a turn's snapshot)
            self.hooks.source = "resume" if self.writer.head else "startup"
        if self.hooks is not None and isinstance(permissions, Policy):
            permissions.on_ask = self.hooks.notify
        #: every event of this session (each append as it is durable, the turns'
        #: deltas and ends), for any number of watchers
        self.hub = EventHub()
        #: what occupies the slot for work that writes (None: free)
        self.busy: str | None = None
        #: the turn started with :meth:`start` and still in flight
        self.turn: Turn | None = None
        self._closed = False
        #: release the writer whenever the slot is free (see the module docstring)
        self.park_between_turns = False
        #: while parked: the reader that serves :attr:`view`, and the picked event
        self._parked: SessionView | None = None
        self._pending: str | None = None
        #: the working directory's files on the timeline (None: not recorded)
        self.files = files
        #: the files steps around turns, restores and checkouts (they read this
        #: session's state; :meth:`restore_files` and the rest delegate to them)
        self.checkpoints = CheckpointSteps(self)
        #: what a continue from an older event does with the files (see
        #: :class:`~.workfiles.OnRestore`): a shell sets it before the prompt
        self.on_restore = OnRestore()
        #: what opening had to say (an interrupted restore rolled back), for the shell
        self.notices: list[str] = []
        #: the store's mark that this session is open here (see
        #: :func:`~.workfiles.other_writers`), released while parked, as the
        #: directory store's writer lock is
        self._open_mark: Lease | None = None
        #: the interruption markers recorded by :meth:`acquire`, not yet published
        self._found: list[Event] = []
        #: HEAD as this object last left it: the lease finding it moved means another
        #: process wrote meanwhile (see :mod:`.unfinished`)
        self._left: str | None = None
        try:
            self._open_mark = store.open_mark(self.session_id, str(self.working_dir))
            if not store.shared_writers:  # the writer's lock: nobody else is in a turn
                record_unfinished(self.writer)
                self._left = self.writer.head
            if info.model != model.name:
                store.update_info(self.session_id, model=model.name)
            if files is not None:
                self._recover(files)
        except BaseException:
            self.writer.close()  # never leave the lock held by a session nobody has
            if self._open_mark is not None:
                self._open_mark.release()
            raise

    def _recover(self, files: SessionCheckpoints) -> None:
        try:
            said = files.recover(self.writer)
        except InfaiError as exc:  # the conversation can go on; restores cannot yet
            said = f"files: an interrupted restore could not be recovered: {exc}"
        if said:
            self.notices.append(said)

    def _keep(self, rules: list[Rule]) -> None:
        keep_rules(self.store, self.session_id, rules)

    def use_model(self, model: Model, toolbox: Toolbox) -> None:
        """Answer with ``model`` from the next request on, keeping the session open
        (its writer, its lock and any event picked to continue from)."""
        self.store.update_info(self.session_id, model=model.name)
        self.model, self.toolbox = model, toolbox

    # -- the slot --------------------------------------------------------------

    #: set while the slot's holder gives it back (see :meth:`_free`); None otherwise
    _releasing: asyncio.Event | None = None

    def _claim(self, what: str) -> None:
        if self._closed:
            raise Busy(f"session {self.session_id} is closed")
        if self.busy is not None:
            raise Busy(f"session {self.session_id} is busy: {self.busy}")
        self.busy = what

    async def _hold(self, what: str) -> None:
        """Claim the slot, then the lease (in a worker thread); the slot is freed
        again if the lease cannot be had. Work that is over but still giving the
        slot back (:meth:`_free`) is waited for, not answered :class:`Busy`."""
        releasing = self._releasing
        if releasing is not None:
            await releasing.wait()
        self._claim(what)
        try:
            await off_loop(self.acquire)
        except BaseException:
            self.busy = None
            raise
        found, self._found = self._found, []
        for marker in found:  # an unfinished turn another process left
            self.cache.invalidate()
            self._publish(Saved(marker))

    async def _free(self) -> None:
        """Give the slot back: the lease released and, between turns, the writer
        parked, in a worker thread. The slot stays taken until that is done (a
        claim meanwhile would retake the writer beside the park), but the work that
        held it is over (a turn has already cleared :attr:`turn`): a claim or a
        cancel that comes meanwhile waits for :attr:`_releasing` instead of
        answering Busy or "not in flight" with the slot still taken."""
        releasing = self._releasing = asyncio.Event()
        try:
            await off_loop(self.release)
        finally:
            self.busy = None
            self._releasing = None
            releasing.set()

    def select(self, event_id: str | None) -> None:
        """Continue from ``event_id`` with the next prompt (None: from HEAD); a tool
        call whose result was recorded continues after it (:mod:`.continue_point`)."""
        if self.busy is not None:
            raise Busy(f"session {self.session_id} is busy: {self.busy}")
        event_id = event_id and continue_point(self.view, event_id)
        parked = self._parked
        if parked is None:
            self.writer.select(event_id)
        elif event_id is None:
            self._pending = None
        else:  # checked as the writer checks it: a well-formed id of this session
            parked.refresh()
            event_id = parked.entry_at(parked.seq_of(event_id)).id
            self._pending = None if event_id == parked.head else event_id

    # -- turns -----------------------------------------------------------------

    async def start(self, text: str, from_event: str | None = None) -> Turn:
        """Start a turn as a task of its own and return at once; its events go to
        :attr:`hub`. ``from_event`` picks the older event it continues from.

        Raises :class:`Busy` if the slot is taken, and
        :class:`~infai.store.SessionBusy` if another process holds the lease.
        """
        if from_event is not None:
            self.select(from_event)
        turn = Turn(str(uuid.uuid4()))
        await self._hold(f"turn {turn.id} is in flight")
        self.turn = turn
        turn.prompt = asyncio.get_running_loop().create_future()
        turn.task = asyncio.get_running_loop().create_task(self._run(turn, text))
        # let it begin: a task cancelled before its first step never runs its body,
        # so its ``finally`` (which frees the slot) would never run either
        await asyncio.sleep(0)
        return turn

    async def _run(self, turn: Turn, text: str) -> TurnEnded:
        ended = TurnEnded("error", "the turn ended without an outcome")
        try:
            async for event in self._turn(text):
                if isinstance(event, TurnEnded):
                    ended = event
        except asyncio.CancelledError:
            ended = TurnEnded("cancelled")
            raise
        except Exception as exc:  # a store failure: the turn ends, the session stays
            turn.failure = exc
            ended = TurnEnded("error", f"{type(exc).__name__}: {exc}")
        finally:
            turn.outcome = ended
            self.turn = None
            await self._free()
        return ended

    async def cancel(self, turn_id: str | None = None) -> Turn:
        """Cancel the turn in flight (``turn_id``: only if it is that one) and wait
        until it has stopped and recorded its interruption, and its slot is free.

        A turn that has just ended by itself is not in flight, but it may still be
        giving its slot back: that is waited for first, so once this returns (or
        raises :class:`NotInFlight`) a new turn can start at once."""
        turn = self.turn
        if turn is None or turn.task is None or (turn_id is not None and turn_id != turn.id):
            releasing = self._releasing
            if releasing is not None:
                await releasing.wait()
            what = f"turn {turn_id} is not" if turn_id else "no turn is"
            raise NotInFlight(f"{what} in flight in session {self.session_id}")
        turn.task.cancel()
        await asyncio.wait([turn.task])
        return turn

    def _publish(self, item: AgentEvent) -> None:
        """Publish ``item`` on the hub; the turn's first prompt stored is its :meth:`Turn.asked`."""
        turn = self.turn
        if (
            isinstance(item, Saved)
            and turn is not None
            and turn.prompt is not None
            and not turn.prompt.done()
            and isinstance(item.event.record, MessageRecord)
            and item.event.record.metadata.get(TURN_PROMPT) is True
        ):
            turn.prompt.set_result(item.event)
        self.hub.publish(item)

    async def _turn(self, text: str) -> AsyncIterator[AgentEvent]:
        """The turn's events, each published as it is yielded (an append once it is
        durable); a turn cut short ends on the hub too (even before the loop
        began: its system prompt could not be read)."""
        restored = self._restored_for
        try:
            choice, self._restored_for = self.on_restore, None
            if restored is not None and restored == self.writer.pending_parent:
                self.on_restore = OnRestore(keep_files=True)  # continue_from restored them
            try:
                async for event in self.checkpoints.files_first():
                    self._publish(event)
                    yield event
            finally:
                self.on_restore = choice
            built = await off_loop(build_system_prompt, self.working_dir, self.instructions)
            if built.source != self._told and (told := built.source) is not None:
                self._told = told  # said once a session, and again if it changes
                self._publish(notice := Streamed(Notice(f"project instructions from {told}")))
                yield notice
            system = built.text
            async for event in run_turn(
                self.writer,
                self.model,
                text,
                toolbox=self.toolbox,
                permissions=self.permissions,
                context=self.tool_context(),
                system=system,
                cache=self.cache,
                compact_at=self.compact_at,
                max_steps=self.max_steps,
                objects=getattr(self.store, "objects", None),  # tool manifests
                after_tool=self.checkpoints.after_tool if self.files is not None else None,
                hooks=self.hooks,
            ):
                self._publish(event)  # the one path: each event once, in order
                yield event
        except asyncio.CancelledError:
            self.hub.publish(TurnEnded("cancelled"))
            raise
        except Exception as exc:
            self.hub.publish(TurnEnded("error", f"{type(exc).__name__}: {exc}"))
            raise

    # -- compaction and branches ----------------------------------------------

    async def switch(
        self, event_id: str, *, summarize: bool = True, choice: OnRestore | None = None
    ) -> Event | None:
        """Move to another branch at ``event_id``.

        With ``summarize``, the abandoned branch is summarised into a
        ``branch_summary`` event after ``event_id`` (HEAD moves there now) and
        ``event_id``'s files are restored as a continue restores them (``choice``,
        default :attr:`on_restore`; a refusal raises before anything is stored);
        without, this is :meth:`select` (HEAD moves, and the files are restored,
        with the next prompt).
        """
        if not summarize:
            self.select(event_id)
            return None
        choice = choice or self.on_restore
        await self._hold("switching branches")
        try:
            left = await self.checkpoints.before_switch(event_id, choice)
            summary = await summarize_branch(self.writer, self.model, event_id)
            self.cache.invalidate()
            self._publish(Saved(summary))
            await self.checkpoints.after_switch(event_id, summary.id, left, choice)
        finally:
            await self._free()
        return summary

    async def compact(self) -> Event:
        """Compact now (after the PreCompact hooks, ``trigger: manual``); raises
        :class:`~infai.agent.compaction.CompactionFailed`."""
        await self._hold("compacting")
        try:
            await self._hooks_between("PreCompact", "manual", trigger="manual")
            summary = await compact(self.writer, self.model)
            self.cache.invalidate()
            self._publish(Saved(summary))
            await self._hooks_between("SessionStart", "compact", source="compact")
        finally:
            await self._free()
        return summary

    # -- closing ---------------------------------------------------------------

    def close(self) -> None:
        """Release the lease and the writer, and end the hub's streams.

        The model is closed by :meth:`aclose`, in the event loop it streamed in.
        """
        self._closed = True
        self.hub.close("session closed")
        self._release_all()

    def _release_all(self) -> None:
        if self._lease is not None:
            self._held = 0
            lease, self._lease = self._lease, None
            lease.release()
        if self.files is not None:
            self.files.close()
        mark, self._open_mark = self._open_mark, None
        if mark is not None:
            mark.release()
        parked, self._parked = self._parked, None
        if parked is not None:
            parked.close()  # the writer was closed when it was parked
        else:
            self.writer.close()

    async def aclose(self) -> None:
        """Cancel the turn in flight (it records its interruption), fire the
        SessionEnd hooks, close the session (as :meth:`close` does, in a worker
        thread) and the model it owns."""
        turn = self.turn
        if turn is not None and turn.task is not None and not turn.task.done():
            turn.task.cancel()
            await asyncio.wait([turn.task])
        releasing = self._releasing
        if releasing is not None:
            await releasing.wait()
        await self.end_hooks()
        releasing = self._releasing
        if releasing is not None:  # a slot being given back (parking, in a thread)
            await releasing.wait()
        self._closed = True
        self.hub.close("session closed")  # on the loop: the hub wakes its readers there
        await off_loop(self._release_all)
        if self.owns_model:
            await close_model(self.model)

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> AgentSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
