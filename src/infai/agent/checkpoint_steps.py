"""The files half of :class:`~.session.AgentSession`: its working directory's
snapshots and restores on the timeline, as the session drives them.

Model, in prose: :mod:`.workfiles` decides what a snapshot or a restore records;
this part decides when a session asks for one. The session *has* one
(:attr:`AgentSession.checkpoints <infai.agent.AgentSession.checkpoints>`) and
delegates to it; it reads the session's state (its writer, cache, hub, choice
on restore) through the session, which may swap its writer between turns.
Before a prompt that continues from an older event, that event's files are
restored (a refusal raises with nothing stored), then the files now are
snapshotted (:meth:`CheckpointSteps.files_first`, whose events the turn yields
and the session publishes, as it does the rest of the turn's); after every tool
call that may change files, a snapshot follows (:meth:`CheckpointSteps.after_tool`;
a cancel stops a long one). A shell may restore first to ask about conflicts
(:meth:`CheckpointSteps.restore_files`), put an event's files back with the
conversation staying at HEAD (:meth:`CheckpointSteps.checkout`), or ask whether
the disk holds HEAD's files (:meth:`CheckpointSteps.files_state`); what those
append outside a turn is published on the hub here. Disk and store work runs in
worker threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from infai.checkpoints import (
    FilesState,
    OnRestore,
    Restored,
    SessionCheckpoints,
    SnapshotNotices,
    changes_files,
)
from infai.errors import InfaiError
from infai.llm import Notice
from infai.store import Event, HeadConflict, InvalidInput, Record, SessionLog, SessionView
from infai.tools.offload import off_loop

from .context import ContextCache
from .hub import EventHub
from .loop import AgentEvent, Saved, Streamed


class CheckpointHost(Protocol):
    """What :class:`CheckpointSteps` reads of its session (an
    :class:`~.session.AgentSession`)."""

    files: SessionCheckpoints | None
    cache: ContextCache
    hub: EventHub
    on_restore: OnRestore

    @property
    def writer(self) -> SessionLog:
        """The session's writer now (a parked session opens a new one)."""

    @property
    def view(self) -> SessionView:
        """The session as stored."""

    async def _hold(self, what: str) -> None: ...

    async def _free(self) -> None: ...


class _Stopped(Exception):
    """A snapshot's walk stopped by a cancel (raised in its worker thread)."""


class CheckpointSteps:
    """The files steps of one :class:`~.session.AgentSession` (its
    :attr:`~.session.AgentSession.checkpoints`): the state they use is the
    session's own, read through ``host`` each time."""

    def __init__(self, host: CheckpointHost) -> None:
        self.host = host

    async def snapshot(self, reason: str, say: Callable[[str], object]) -> Record | str | None:
        """The snapshot record to append (None: files unchanged), or a notice
        saying why none could be taken: a failed snapshot never fails a turn.
        A long (first) snapshot says where it is through ``say``, called from
        its worker thread. A cancel stops the walk at its next progress report
        (a few times a second), so Ctrl-C during the first snapshot of a big
        tree does not wait for it; nothing is recorded then, and the next
        snapshot walks everything."""
        files, writer = self.host.files, self.host.writer
        assert files is not None
        notices = SnapshotNotices(files.workdir, say)
        stop = threading.Event()

        def progress(seen: int, hashed: int) -> None:
            if stop.is_set():
                raise _Stopped(f"files: snapshot ({reason}) stopped by a cancel")
            notices(seen, hashed)

        pending = writer.pending_parent
        work = asyncio.ensure_future(
            off_loop(files.snapshot_record, writer, pending, reason, progress)
        )
        try:
            record: Record | None = await asyncio.shield(work)
            return record
        except asyncio.CancelledError:
            stop.set()
            while not work.done():  # the thread cannot be killed: it stops itself
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait([work])
            if not work.cancelled():
                work.exception()  # retrieved: the cancel is the outcome
            raise
        except Exception as exc:
            return f"files: snapshot ({reason}) failed: {type(exc).__name__}: {exc}"

    async def files_first(self) -> AsyncIterator[AgentEvent]:
        """Before the prompt: a continue from an older event restores its files
        (:meth:`restore_files`; a refusal raises, nothing stored), then the files
        now are snapshotted if they changed. Nothing is published here: the
        turn yields these and the session publishes them."""
        files, host = self.host.files, self.host
        if files is None:
            return
        picked = host.writer.pending_parent
        if picked is not None and not host.on_restore.keep_files:
            done = await off_loop(
                files.restore, host.writer, picked, host.on_restore, attach=picked
            )
            for event in self._restored(done):
                yield event
        out: list[Any] = []
        async for text in self._saying(functools.partial(self.snapshot, "turn start"), out):
            yield Streamed(Notice(text))  # a long first snapshot says where it is
        said = out[0]
        if isinstance(said, str):
            yield Streamed(Notice(said))
        elif said is not None:
            for item in await self._append_system(said):
                yield item

    async def after_tool(self, tool: Any) -> AsyncIterator[Record | str]:
        """After a call of ``tool`` (None: unknown): if it may change files, what
        its snapshot says while it runs, then the record to append (if the files
        changed) or why none was taken (see :data:`~.loop.AfterTool`)."""
        if tool is None or not changes_files(tool):
            return
        out: list[Any] = []
        work = functools.partial(self.snapshot, f"after {tool.spec.name}")
        async for text in self._saying(work, out):
            yield text
        if out[0] is not None:
            yield out[0]

    async def _saying(
        self, work: Callable[[Callable[[str], object]], Awaitable[Any]], out: list[Any]
    ) -> AsyncIterator[str]:
        """Run ``work(say)``, yielding each text it says (from any thread) while it
        runs; its result is appended to ``out``."""
        loop = asyncio.get_running_loop()
        said: asyncio.Queue[str] = asyncio.Queue()
        task = asyncio.ensure_future(
            work(lambda text: loop.call_soon_threadsafe(said.put_nowait, text))
        )
        try:
            while not task.done():
                heard = asyncio.ensure_future(said.get())
                await asyncio.wait({task, heard}, return_when=asyncio.FIRST_COMPLETED)
                if heard.done():
                    yield heard.result()
                else:
                    heard.cancel()
            await asyncio.sleep(0)  # a notice said just before the end is queued by now
            while not said.empty():
                yield said.get_nowait()
            out.append(task.result())
        finally:
            if not task.done():  # the consumer went away: the work still finishes
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _publish(self, items: list[AgentEvent]) -> None:
        """What was appended or said outside a turn, on the session's hub."""
        for item in items:
            self.host.hub.publish(item)

    def _restored(self, done: Restored) -> list[AgentEvent]:
        """What a restore appended, and its notices."""
        self.host.cache.invalidate()
        notices: list[AgentEvent] = [Streamed(Notice(text)) for text in done.notices]
        return [*notices, *(Saved(event) for event in done.events)]

    async def _append_system(self, record: Any) -> list[AgentEvent]:
        """Append a turn-start snapshot; if another writer appended first (a shared
        store's :class:`HeadConflict`), say so: the next snapshot records the files."""
        host = self.host
        try:
            event: Event = await off_loop(host.writer.append, record, "system")
        except HeadConflict as exc:  # the writer has re-read HEAD: the turn goes on
            host.cache.invalidate()
            return [
                Streamed(
                    Notice(
                        "files: the turn-start snapshot was not recorded: another process "
                        f"appended to the session first ({exc}); the next snapshot records them"
                    )
                )
            ]
        host.cache.appended([event])
        return [Saved(event)]

    async def before_switch(self, event_id: str, choice: OnRestore) -> str | None:
        """A summarised switch's first step (the slot held): refuse as the restore
        would (nothing stored), else record the files now at the tip of the branch
        left (published). That tip, after which the restore keeps the branch's files
        (None: this switch leaves the files alone, or there is nothing to abandon)."""
        files, host = self.host.files, self.host
        if files is None or choice.keep_files:
            return None
        if event_id == host.writer.head:
            return None  # the summary refuses: nothing is abandoned
        saved = await off_loop(files.before_switch, host.writer, event_id, choice)
        if saved is not None:
            host.cache.invalidate()
            self._publish([Saved(saved)])
        head: str | None = host.writer.head
        return head

    async def after_switch(
        self, event_id: str, summary_id: str, left: str | None, choice: OnRestore
    ) -> None:
        """Restore ``event_id``'s files after the switch's summary. The switch is
        done by now, so a failure (the files changed while the summary was written)
        is a notice: the files on disk stay as they were, nothing is lost."""
        files, host = self.host.files, self.host
        if files is None or left is None:
            return
        try:
            done = await off_loop(
                files.restore, host.writer, event_id, choice, attach=summary_id, left=left
            )
        except InfaiError as exc:
            said = f"files: switched branches, but the files were not restored: {exc}"
            self._publish([Streamed(Notice(said))])
            return
        self._publish(self._restored(done))

    async def files_state(self) -> FilesState | None:
        """Whether the files on disk are HEAD's (None: checkpoints off). Safe
        beside a turn: checkpoint work is serialised, nothing is recorded."""
        files = self.host.files
        if files is None:
            return None
        return await off_loop(files.state, self.host.view)

    async def restore_files(self, choice: OnRestore | None = None) -> Restored | None:
        """Restore the picked event's files now (None: none picked, or keep_files), as
        the next prompt would; raises :class:`~.workfiles.RestoreRefused` with
        nothing changed. A shell that asks about conflicts calls this first."""
        return await self._restore(None, choice or self.host.on_restore, dry_run=False)

    async def checkout(
        self, event_id: str, choice: OnRestore | None = None, *, dry_run: bool = False
    ) -> Restored:
        """Put ``event_id``'s files on disk, the conversation staying at HEAD (the
        restore is recorded there); ``dry_run``: only the plan."""
        if self.host.files is None:
            raise InvalidInput("checkpoints are disabled ([checkpoints] enabled = false)")
        done = await self._restore(event_id, choice or OnRestore(), dry_run=dry_run)
        assert done is not None
        return done

    async def _restore(self, to: str | None, choice: OnRestore, dry_run: bool) -> Restored | None:
        """``to``'s files recorded at HEAD (None: the picked event's, after it)."""
        host = self.host
        if host.files is None:
            return None
        await host._hold("restoring files")
        try:
            picked = host.writer.pending_parent
            event, attach = (to, None) if to is not None else (picked, picked)
            if event is None or (to is None and choice.keep_files):
                return None
            restore = host.files.restore
            done = await off_loop(
                restore, host.writer, event, choice, attach=attach, dry_run=dry_run
            )
            self._publish(self._restored(done))
            return done
        finally:
            await host._free()


__all__ = ["CheckpointHost", "CheckpointSteps"]
