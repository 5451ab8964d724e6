"""What the TUI uses of a session, its view, a harness and a store, as Protocols.

The app drives an :class:`~infai.agent.AgentSession` over a
:class:`~infai.agent.Harness` and its :class:`~infai.store.SessionStore`, or,
with ``--remote``, a :class:`~infai.shells.remote.session.RemoteSession` over a
``RemoteHarness`` and ``RemoteStore`` that answer the same members over
``infai serve``'s API. These Protocols are those members, with their types:
:class:`TuiSession`, :class:`TuiView`, :class:`TuiHarness`, :class:`TuiStore`,
:class:`TuiModel` and :class:`TuiMcp`. The checks at the end of this module
make ``mypy --strict`` prove that both sides satisfy them (a member missing or
of another type on either side fails the type check).

The app holds its harness as a :class:`TuiHarness` (so mypy also proves it
uses nothing else of a harness or its store; :class:`~.backend.LocalBackend`
and the local-only paths narrow it to a :class:`~infai.agent.Harness`). Its
session stays an ``AgentSession``, because the local-only ``!cmd`` and
``@file`` paths (:mod:`.usercontext`) hand it to the agent; the remote backend
hands its ``RemoteSession`` over with one cast, and
``tests/shells/tui/test_tui_remote_seam.py`` proves that every member of a
session and of its view the TUI's modules reach for is in :class:`TuiSession`
and :class:`TuiView`. So a member the app starts using is added here, and then
mypy asks for it on both sides. Members only the local path reaches (parking a
writer between turns, watching a shared store, switching the model) are not
here: :mod:`.store_io` and :class:`~.backend.LocalBackend` use them on the
local types.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from infai.agent import EventHub, Turn
    from infai.checkpoints import FilesState, OnRestore, Restored, RestoreRefused
    from infai.store import Entry, Event, SearchResults, SessionInfo
    from infai.tools import Approver


class TuiMcp(Protocol):
    """The MCP servers of a directory, as the help screen lists them."""

    def status(self) -> list[dict[str, Any]]: ...


class TuiModel(Protocol):
    """The model the status bar and ``/model`` name."""

    @property
    def name(self) -> str: ...

    @property
    def context_window(self) -> int: ...


class TuiView(Protocol):
    """The reads the TUI makes of a session as stored (:mod:`.store_io`)."""

    @property
    def head(self) -> str | None: ...

    @property
    def count(self) -> int: ...

    def refresh(self) -> None: ...

    def entry_at(self, seq: int) -> Entry: ...

    def entry(self, event_id: str) -> Entry: ...

    def entries(self) -> Iterator[Entry]: ...

    def path(self, at: str | None = None, *, to_boundary: bool = True) -> list[Entry]: ...

    def event(self, event_id: str, *, resolve: bool = False) -> Event: ...

    def close(self) -> None: ...

    def __enter__(self) -> TuiView: ...

    def __exit__(self, *exc: object) -> None: ...


class TuiSession(Protocol):
    """What the app drives of an open session: its turn slot, the event picked to
    continue from, compaction, its hub, and what opening it had to say."""

    session_id: str
    working_dir: Path
    turn: Turn | None
    notices: list[str]

    @property
    def model(self) -> TuiModel: ...

    @property
    def view(self) -> TuiView: ...

    @property
    def hub(self) -> EventHub: ...

    @property
    def busy(self) -> str | None: ...

    @property
    def pending_parent(self) -> str | None: ...

    @property
    def parked(self) -> bool: ...

    def select(self, event_id: str | None) -> None: ...

    async def start(self, text: str, from_event: str | None = None) -> Turn: ...

    async def cancel(self, turn_id: str | None = None) -> object: ...

    async def compact(self) -> Event: ...

    async def continue_from(
        self,
        event_id: str | None,
        choice: OnRestore | None = None,
        *,
        ask: Callable[[RestoreRefused], Awaitable[OnRestore | None]] | None = None,
    ) -> Restored | None: ...

    async def files_state(self) -> FilesState | None: ...

    def close(self) -> None: ...


class TuiStore(Protocol):
    """The store members the app reads: metadata, a reader, search, a rename."""

    @property
    def home(self) -> Path: ...

    @property
    def shared_writers(self) -> bool: ...

    @property
    def recovery_notes(self) -> dict[str, list[str]]: ...

    def info(self, session_id: str) -> SessionInfo: ...

    def open_reader(self, session_id: str) -> TuiView: ...

    def search(self, query: str, *, limit: int = 20) -> SearchResults: ...

    def update_info(self, session_id: str, **changes: Any) -> SessionInfo: ...


class TuiHarness(Protocol):
    """The harness members the app reads: the store, this machine's directory, the
    model, the approver it sets, notices, MCP status, and closing."""

    working_dir: Path
    approver: Approver | None

    @property
    def store(self) -> TuiStore: ...

    @property
    def model(self) -> TuiModel: ...

    def take_notices(self) -> list[str]: ...

    def mcp(self, working_dir: Path | None) -> TuiMcp | None: ...

    async def aclose(self) -> None: ...


if TYPE_CHECKING:  # mypy --strict proves both sides satisfy the seam (nothing runs)
    from infai.agent import AgentSession, Harness
    from infai.shells.remote.session import RemoteHarness, RemoteSession, RemoteStore
    from infai.shells.remote.view import RemoteView
    from infai.store import SessionStore, SessionView

    def _local(
        session: AgentSession, harness: Harness, store: SessionStore, view: SessionView
    ) -> None:
        _session: TuiSession = session
        _harness: TuiHarness = harness
        _store: TuiStore = store
        _view: TuiView = view

    def _remote(
        session: RemoteSession, harness: RemoteHarness, store: RemoteStore, view: RemoteView
    ) -> None:
        _session: TuiSession = session
        _harness: TuiHarness = harness
        _store: TuiStore = store
        _view: TuiView = view


__all__ = ["TuiHarness", "TuiMcp", "TuiModel", "TuiSession", "TuiStore", "TuiView"]
