"""The files half of :class:`~.session.AgentSession`: its working directory's
snapshots and restores on the timeline, as the session drives them.

Model, in prose: :mod:`.workfiles` decides what a snapshot or a restore records;
this mixin decides when a session asks for one and publishes what was appended
on the session's hub. Before a prompt that continues from an older event, that
event's files are restored (a refusal raises with nothing stored), then the
files now are snapshotted; after every tool call that may change files, a
snapshot follows (:meth:`CheckpointSteps._snapshot`; a cancel stops a long one).
A shell may restore first to ask about conflicts
(:meth:`CheckpointSteps.restore_files`), put an event's files back with the
conversation staying at HEAD (:meth:`CheckpointSteps.checkout`), or ask whether the
disk holds HEAD's files (:meth:`CheckpointSteps.files_state`). Disk and store work
runs in worker threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

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
from infai.store import Event, HeadConflict, InvalidInput, SessionLog, SessionView
from infai.tools.offload import off_loop

from .context import ContextCache
from .hub import EventHub
from .loop import AgentEvent, Saved, Streamed


class _Stopped(Exception):
    """A snapshot's walk stopped by a cancel (raised in its worker thread)."""


class CheckpointSteps:
    """The files methods of :class:`~.session.AgentSession` (a mixin: the state it
    uses is the session's own)."""

    files: SessionCheckpoints | None
    writer: SessionLog
    cache: ContextCache
    hub: EventHub
    on_restore: OnRestore

    if TYPE_CHECKING:  # the session's own, used here

        @property
        def view(self) -> SessionView:
            """The session as stored."""

        async def _hold(self, what: str) -> None: ...

        async def _free(self) -> None: ...

        def _saved(self, event: Event) -> None: ...

    async def _snapshot(self, reason: str, say: Callable[[str], object] | None = None) -> Any:
        """The snapshot record to append (None: files unchanged), or a notice
        saying why none could be taken: a failed snapshot never fails a turn.
        A long (first) snapshot says where it is through ``say``, called from
        its worker thread (default: a notice published on the hub). A cancel
        stops the walk at its next progress report (a few times a second), so
        Ctrl-C during the first snapshot of a big tree does not wait for it;
        nothing is recorded then, and the next snapshot walks everything."""
        files = self.files
        assert files is not None
        loop = asyncio.get_running_loop()
        notices = SnapshotNotices(
            files.workdir, say or (lambda text: loop.call_soon_threadsafe(self._notice, text))
        )
        stop = threading.Event()

        def progress(seen: int, hashed: int) -> None:
            if stop.is_set():
                raise _Stopped(f"files: snapshot ({reason}) stopped by a cancel")
            notices(seen, hashed)

        pending = self.writer.pending_parent
        work = asyncio.ensure_future(
            off_loop(files.snapshot_record, self.writer, pending, reason, progress)
        )
        try:
            return await asyncio.shield(work)
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

    async def _files_first(self) -> AsyncIterator[AgentEvent]:
        """Before the prompt: a continue from an older event restores its files
        (:meth:`restore_files`; a refusal raises, nothing stored), then the files
        now are snapshotted if they changed."""
        files = self.files
        if files is None:
            return
        picked = self.writer.pending_parent
        if picked is not None and not self.on_restore.keep_files:
            done = await off_loop(
                files.restore, self.writer, picked, self.on_restore, attach=picked
            )
            for event in self._published_restore(done):
                yield event
        out: list[Any] = []
        async for notice in self._saying(functools.partial(self._snapshot, "turn start"), out):
            yield notice  # a long first snapshot says where it is, in the turn's events
        said = out[0]
        if isinstance(said, str):
            yield self._notice(said)
        elif said is not None:
            for saved in await self._append_system(said):
                yield saved

    async def _saying(
        self, work: Callable[[Callable[[str], object]], Awaitable[Any]], out: list[Any]
    ) -> AsyncIterator[AgentEvent]:
        """Run ``work(say)``, yielding each text it says (from any thread) as a
        notice while it runs; its result is appended to ``out``."""
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
                    yield self._notice(heard.result())
                else:
                    heard.cancel()
            await asyncio.sleep(0)  # a notice said just before the end is queued by now
            while not said.empty():
                yield self._notice(said.get_nowait())
            out.append(task.result())
        finally:
            if not task.done():  # the consumer went away: the work still finishes
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _notice(self, text: str) -> AgentEvent:
        event = Streamed(Notice(text))
        self.hub.publish(event)
        return event

    def _published_restore(self, done: Restored) -> list[AgentEvent]:
        """Publish what a restore appended and its notices."""
        self.cache.invalidate()
        out: list[AgentEvent] = []
        for text in done.notices:
            out.append(self._notice(text))
        for event in done.events:
            self._saved(event)
            out.append(Saved(event))
        return out

    async def _append_system(self, record: Any) -> list[AgentEvent]:
        """Append a turn-start snapshot; if another writer appended first (a shared
        store's :class:`HeadConflict`), say so: the next snapshot records the files."""
        try:
            event = await off_loop(self.writer.append, record, "system")
        except HeadConflict as exc:  # the writer has re-read HEAD: the turn goes on
            self.cache.invalidate()
            return [
                self._notice(
                    "files: the turn-start snapshot was not recorded: another process "
                    f"appended to the session first ({exc}); the next snapshot records them"
                )
            ]
        self.cache.appended([event])
        self._saved(event)
        return [Saved(event)]

    async def _after_tool(self, tool: Any) -> Any:
        if tool is None or not changes_files(tool):
            return None
        return await self._snapshot(f"after {tool.spec.name}")

    async def _before_switch(self, event_id: str, choice: OnRestore) -> str | None:
        """A summarised switch's first step (the slot held): refuse as the restore
        would (nothing stored), else record the files now at the tip of the branch
        left. That tip, after which the restore keeps the branch's files (None: this
        switch leaves the files alone, or there is nothing to abandon)."""
        files = self.files
        if files is None or choice.keep_files:
            return None
        if event_id == self.writer.head:
            return None  # the summary refuses: nothing is abandoned
        saved = await off_loop(files.before_switch, self.writer, event_id, choice)
        if saved is not None:
            self.cache.invalidate()
            self._saved(saved)
        return self.writer.head

    async def _after_switch(
        self, event_id: str, summary_id: str, left: str | None, choice: OnRestore
    ) -> None:
        """Restore ``event_id``'s files after the switch's summary. The switch is
        done by now, so a failure (the files changed while the summary was written)
        is a notice: the files on disk stay as they were, nothing is lost."""
        files = self.files
        if files is None or left is None:
            return
        try:
            done = await off_loop(
                files.restore, self.writer, event_id, choice, attach=summary_id, left=left
            )
        except InfaiError as exc:
            self._notice(f"files: switched branches, but the files were not restored: {exc}")
            return
        self._published_restore(done)

    async def files_state(self) -> FilesState | None:
        """Whether the files on disk are HEAD's (None: checkpoints off). Safe
        beside a turn: checkpoint work is serialised, nothing is recorded."""
        if self.files is None:
            return None
        return await off_loop(self.files.state, self.view)

    async def restore_files(self, choice: OnRestore | None = None) -> Restored | None:
        """Restore the picked event's files now (None: none picked, or keep_files), as
        the next prompt would; raises :class:`~.workfiles.RestoreRefused` with
        nothing changed. A shell that asks about conflicts calls this first."""
        return await self._restore(None, choice or self.on_restore, dry_run=False)

    async def checkout(
        self, event_id: str, choice: OnRestore | None = None, *, dry_run: bool = False
    ) -> Restored:
        """Put ``event_id``'s files on disk, the conversation staying at HEAD (the
        restore is recorded there); ``dry_run``: only the plan."""
        if self.files is None:
            raise InvalidInput("checkpoints are disabled ([checkpoints] enabled = false)")
        done = await self._restore(event_id, choice or OnRestore(), dry_run=dry_run)
        assert done is not None
        return done

    async def _restore(self, to: str | None, choice: OnRestore, dry_run: bool) -> Restored | None:
        """``to``'s files recorded at HEAD (None: the picked event's, after it)."""
        if self.files is None:
            return None
        await self._hold("restoring files")
        try:
            picked = self.writer.pending_parent
            event, attach = (to, None) if to is not None else (picked, picked)
            if event is None or (to is None and choice.keep_files):
                return None
            restore = self.files.restore
            done = await off_loop(
                restore, self.writer, event, choice, attach=attach, dry_run=dry_run
            )
            self._published_restore(done)
            return done
        finally:
            await self._free()


__all__ = ["CheckpointSteps"]
