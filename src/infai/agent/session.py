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
:attr:`AgentSession.hub` as :class:`~infai.agent.Saved` the moment it is
durable, with the turn's deltas and its end, so a watcher subscribed to the hub
misses nothing and need not read the store back. Appends, store reads and the
lease run in worker threads, never on the event loop.

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
after tools, checkout) are the :class:`~.checkpoint_steps.CheckpointSteps` half of
the class, in their own module.

What the user answered "allow always" is kept with the session (its metadata's
``extra.allowed``, as ``tool pattern`` texts) and applies again whenever the
session is opened, in any shell.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager, suppress
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
from .turn import Busy, NotInFlight, Turn
from .unfinished import record_unfinished


class AgentSession(SessionApi, CheckpointSteps, SessionHooks):
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

    @property
    def view(self) -> SessionView:
        """The session as stored, read-only: its tree, events and context."""
        view: SessionView = self._parked or self.writer
        return view

    @property
    def pending_parent(self) -> str | None:
        """The older event the next prompt continues from (None: HEAD)."""
        if self._parked is not None:
            return self._pending
        pending: str | None = self.writer.pending_parent
        return pending

    @property
    def parked(self) -> bool:
        """Whether the writer is released (between turns, see :meth:`park`)."""
        return self._parked is not None

    def park(self) -> None:
        """Release the writer (the file store's lock) until the slot is next claimed;
        reads go to a reader meanwhile. Nothing happens while the slot is held or
        once closed. Blocking store work: call it in a worker thread."""
        if self._parked is not None or self._held or self._closed:
            return
        reader = self.store.open_reader(self.session_id)
        self._pending = self.writer.pending_parent
        self._parked = reader
        self.writer.close()
        mark, self._open_mark = self._open_mark, None
        if mark is not None:  # between turns nothing here writes files
            mark.release()

    def _unpark(self) -> None:
        """Take a writer again (it reads HEAD: whatever was appended meanwhile is the
        base of the next append) and restore the picked event."""
        parked = self._parked
        if parked is None:
            return
        writer = self.store.open_writer(self.session_id)  # may wait for another writer
        try:
            if self._pending is not None:
                writer.select(self._pending)
            self._open_mark = self.store.open_mark(self.session_id, str(self.working_dir))
        except BaseException:
            writer.close()
            raise
        self.writer, self._parked, self._pending = writer, None, None
        self.cache = ContextCache(writer, pipeline=self.cache.pipeline)
        parked.close()

    def _keep(self, rules: list[Rule]) -> None:
        keep_rules(self.store, self.session_id, rules)

    def use_model(self, model: Model, toolbox: Toolbox) -> None:
        """Answer with ``model`` from the next request on, keeping the session open
        (its writer, its lock and any event picked to continue from)."""
        self.store.update_info(self.session_id, model=model.name)
        self.model, self.toolbox = model, toolbox

    # -- the lease -------------------------------------------------------------

    def acquire(self) -> None:
        """Take the session's lease for a turn (nested takes are counted).

        A store whose writers are exclusive anyway (the file store's lock) has no
        lease. Taking one re-reads HEAD, so the turn starts from the latest event
        any process appended. Raises :class:`~infai.store.SessionBusy`.
        """
        if self._held == 0:
            take = getattr(self.store, "lease", None)
            if take is not None:
                self._lease = take(self.session_id)
            try:
                self._unpark()
                refresh = getattr(self.writer, "refresh", None)
                if self._lease is not None and refresh is not None:
                    refresh()
                if self.writer.head != self._left:  # another process wrote, may have died
                    found = record_unfinished(self.writer)
                    if found is not None:
                        self._found.append(found)
            except BaseException:
                if self._lease is not None:
                    self._lease.release()
                    self._lease = None
                raise
        self._held += 1

    def release(self) -> None:
        """Give back one :meth:`acquire`; the last one releases the lease."""
        self._held -= 1
        if self._held == 0:
            self._left = self.writer.head
        if self._held == 0 and self._lease is not None:
            lease, self._lease = self._lease, None
            lease.release()
        if self._held == 0 and self.park_between_turns:
            # best effort: if it fails the writer stays held (the work itself
            # succeeded) and the next release tries again
            with suppress(Exception):
                self.park()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold the session's lease for the block (see :meth:`acquire`)."""
        self.acquire()
        try:
            yield
        finally:
            self.release()

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
            self._saved(marker)

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

    def _saved(self, event: Event) -> None:
        turn = self.turn
        if (
            turn is not None
            and turn.prompt is not None
            and not turn.prompt.done()
            and isinstance(event.record, MessageRecord)
            and event.record.metadata.get(TURN_PROMPT) is True
        ):
            turn.prompt.set_result(event)  # the turn's first append of a prompt
        self.hub.publish(Saved(event))

    async def _turn(self, text: str) -> AsyncIterator[AgentEvent]:
        """The turn's events; each append is published as it is durable, the rest
        as it is yielded, and a turn cut short ends on the hub too (even before
        the loop began: its system prompt could not be read)."""
        restored = self._restored_for
        try:
            choice, self._restored_for = self.on_restore, None
            if restored is not None and restored == self.writer.pending_parent:
                self.on_restore = OnRestore(keep_files=True)  # continue_from restored them
            try:
                async for event in self._files_first():
                    yield event
            finally:
                self.on_restore = choice
            built = await off_loop(build_system_prompt, self.working_dir, self.instructions)
            if built.source != self._told and (told := built.source) is not None:
                self._told = told  # said once a session, and again if it changes
                self.hub.publish(notice := Streamed(Notice(f"project instructions from {told}")))
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
                on_saved=self._saved,
                objects=getattr(self.store, "objects", None),  # tool manifests
                after_tool=self._after_tool if self.files is not None else None,
                hooks=self.hooks,
            ):
                if not isinstance(event, Saved):  # a Saved was published when appended
                    self.hub.publish(event)
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
            left = await self._before_switch(event_id, choice)
            summary = await summarize_branch(self.writer, self.model, event_id)
            self.cache.invalidate()
            self._saved(summary)
            await self._after_switch(event_id, summary.id, left, choice)
        finally:
            await self._free()
        return summary

    async def compact(self) -> Event:
        """Compact now (after the PreCompact hooks, ``trigger: manual``); raises
        :class:`~infai.agent.compaction.CompactionFailed`."""
        await self._hold("compacting")
        try:
            if self.hooks is not None and self.hooks.has("PreCompact"):
                await self.hooks.fire("PreCompact", ("manual",), trigger="manual")
                await self._record_hooks()
            summary = await compact(self.writer, self.model)
        finally:
            await self._free()
        self.cache.invalidate()
        self._saved(summary)
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
