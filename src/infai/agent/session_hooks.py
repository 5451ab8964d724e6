"""The hook half of :class:`~.session.AgentSession` outside a turn: recording hook
runs fired between turns (a manual compaction's PreCompact, the user's own
``!cmd`` and ``@file``: :mod:`.user_context`) and SessionEnd."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from infai.llm import Notice
from infai.store import Event, Record, SessionLog
from infai.tools.offload import off_loop

from .context import ContextCache
from .hooks import Hooks
from .turn_events import AgentEvent, Saved, Streamed


class SessionHooks:
    """Mixed into :class:`~.session.AgentSession`, which supplies the attributes and
    the slot methods below."""

    hooks: Hooks | None
    writer: SessionLog
    cache: ContextCache
    _closed: bool

    async def _hold(self, what: str) -> None:
        raise NotImplementedError

    async def _free(self) -> None:
        raise NotImplementedError

    def _publish(self, item: AgentEvent) -> None:
        raise NotImplementedError

    async def _record_hooks(self) -> None:
        """Append the hook runs not yet recorded (the slot is held) and publish them."""
        assert self.hooks is not None
        for record in self.hooks.take():
            self.cache.invalidate()
            self._publish(Saved(await off_loop(self.writer.append, record, "system")))

    async def _hooks_between(self, event: str, name: str, **fields: Any) -> None:
        """In the slot, between turns: fire ``event``'s hooks matching ``name``,
        record their runs and publish what they have to tell the user (the TUI's
        /compact shows the hub's notices)."""
        if self.hooks is None or not self.hooks.wants(event, name):
            return
        said = await self.hooks.fire(event, (name,), **fields)
        await self._record_hooks()
        for notice in said.notices:
            self._publish(Streamed(Notice(notice)))

    async def _append_held(self, records: list[tuple[Record, str]], what: str) -> list[Event]:
        """In the slot (``what`` holds it): append the hook runs not yet recorded,
        then ``records`` (record, role), each published as it is durable."""
        await self._hold(what)
        try:
            runs = self.hooks.take() if self.hooks is not None else []
            events: list[Event] = []
            for record, role in [*((run, "system") for run in runs), *records]:
                event = await off_loop(self.writer.append, record, role)
                self.cache.appended([event])
                self._publish(Saved(event))
                events.append(event)
            return events
        finally:
            await self._free()

    async def end_hooks(self) -> None:
        """Fire the SessionEnd hooks and record their runs (best effort: a session
        that is busy elsewhere, or a store that fails, still closes)."""
        if self._closed or self.hooks is None or not self.hooks.has("SessionEnd"):
            return
        try:
            await self._hold("ending the session")
        except Exception:
            await self.hooks.fire("SessionEnd", ("other",), reason="other")  # run, not recorded
            return
        try:
            await self.hooks.fire("SessionEnd", ("other",), reason="other")
            with suppress(Exception):
                await self._record_hooks()
        finally:
            await self._free()
