"""The seam between the TUI and where its sessions are: a local store or a server.

The app drives a session object (an :class:`~infai.agent.AgentSession`, or a
:class:`~infai.shells.remote.session.RemoteSession` that offers the same
members over ``infai serve``'s API) and reads it through :mod:`.store_io`,
whose functions take the session's read-only view (a remote session's is a
:class:`~infai.shells.remote.view.RemoteView`). What differs beyond that is
this :class:`Backend`: opening, closing and listing sessions, an event's
diff and a model switch. The harness and store it is given are typed as the
seam's Protocols (:mod:`.seam`), which the local and the remote ones satisfy.
:data:`LOCAL` runs :mod:`.store_io`'s functions in a thread;
:class:`~.remote_io.RemoteBackend` asks the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from infai.agent import Harness

from . import store_io
from .store_io import off_loop

if TYPE_CHECKING:
    from infai.agent import AgentSession
    from infai.llm import Model

    from .filescreens import EventDiff
    from .modals import Listed
    from .seam import TuiHarness, TuiStore


class Backend(Protocol):
    """Where the TUI's sessions are (every call may block: each is awaited)."""

    #: whether the sessions are a server's: what runs on this machine (``!cmd``,
    #: ``@file``, the model) does not reach them, and closing leaves a turn running
    remote: bool

    async def open(self, harness: TuiHarness, session_id: str | None) -> tuple[AgentSession, bool]:
        """Open ``session_id`` (None: a new one); also whether it was created."""

    async def close(self, session: AgentSession, store: TuiStore, discard: bool) -> None:
        """Close ``session``; ``discard``: one nobody used goes away."""

    async def sessions(self, harness: TuiHarness) -> list[Listed]:
        """The sessions the picker lists, most recently active first."""

    async def event_diff(self, session: AgentSession, store: TuiStore, event: str) -> EventDiff:
        """The files at ``event`` against the snapshot before them."""

    async def use_model(self, harness: TuiHarness, session: AgentSession, name: str) -> Model:
        """Switch to the model ``name``; the model used before."""


def local(harness: TuiHarness) -> Harness:
    """``harness`` as the :class:`~infai.agent.Harness` the local backend was given
    (a server's harness here is a bug of the shell that paired them)."""
    if not isinstance(harness, Harness):
        raise TypeError(f"the local backend needs a Harness, not {type(harness).__name__}")
    return harness


class LocalBackend:
    """The sessions of the harness's own store (:mod:`.store_io`, in a thread)."""

    remote = False

    async def open(self, harness: TuiHarness, session_id: str | None) -> tuple[AgentSession, bool]:
        return await off_loop(lambda: store_io.open_session(local(harness), session_id))

    async def close(self, session: AgentSession, store: TuiStore, discard: bool) -> None:
        await off_loop(lambda: store_io.close_session(session, session.store, discard))

    async def sessions(self, harness: TuiHarness) -> list[Listed]:
        return await off_loop(lambda: store_io.sessions(local(harness)))

    async def event_diff(self, session: AgentSession, store: TuiStore, event: str) -> EventDiff:
        return await off_loop(lambda: store_io.event_diff(session, session.store, event))

    async def use_model(self, harness: TuiHarness, session: AgentSession, name: str) -> Model:
        return await off_loop(lambda: store_io.use_model(local(harness), session, name))


#: the local store's backend (the app's default)
LOCAL: Backend = LocalBackend()

__all__ = ["LOCAL", "Backend", "LocalBackend", "local"]
