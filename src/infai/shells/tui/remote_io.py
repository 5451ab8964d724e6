"""The TUI's :class:`~.backend.Backend` for ``infai serve``: sessions on a server.

``infai --remote URL`` (and ``infai attach URL``) open the same app over a
:class:`~infai.shells.remote.session.RemoteHarness`: sessions are listed
(``GET /sessions``), created (``POST /sessions``), opened (``GET
/sessions/{id}``, then its ``/stream`` followed until it is live: a turn in
flight and a question waiting are shown at once) and closed (the stream let
go; a turn keeps running on the server, to be followed again from anywhere).
An event's diff is ``GET …/files`` and ``GET …/diff`` of the snapshots on its
path. A rename is ``PATCH /sessions/{id}`` (through
:class:`~infai.shells.remote.session.RemoteStore`). What has no form over the
API says so in one line: the model is the server session's (switching it on
the server would switch the server's default model for every session).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, cast

from infai.store import CHECKPOINT_KINDS, InvalidInput

from .filescreens import EventDiff
from .modals import Listed
from .store_io import LISTED, off_loop

if TYPE_CHECKING:
    from infai.agent import AgentSession
    from infai.llm import Model
    from infai.shells.remote import Remote
    from infai.shells.remote.session import RemoteHarness, RemoteSession

    from .seam import TuiHarness, TuiStore

#: what a session made on the server says first (its directory is the server's)
NEW_SESSION = "a new session on the server, working in {dir} there (--dir DIR: another)"
#: what a model switch says with --remote
NO_MODEL_SWITCH = "/model does not work with --remote: the session keeps the server's model"


def _space(harness: TuiHarness) -> RemoteHarness:
    """``harness`` as the server's (a local one here is a bug of the shell)."""
    from infai.shells.remote.session import RemoteHarness

    if not isinstance(harness, RemoteHarness):
        raise TypeError(f"the remote backend needs a RemoteHarness, not {type(harness).__name__}")
    return harness


def _session(session: AgentSession) -> RemoteSession:
    """The :class:`RemoteSession` :meth:`RemoteBackend.open` handed the app (see there)."""
    return cast("RemoteSession", session)


class RemoteBackend:
    """A server's sessions, for the TUI; ``made``: a session the command line
    created for it (``--dir``), removed again if left unused."""

    remote = True

    def __init__(self, made: str | None = None) -> None:
        self.made = made

    async def open(self, harness: TuiHarness, session_id: str | None) -> tuple[AgentSession, bool]:
        from infai.shells.remote.session import RemoteSession

        space = _space(harness)
        remote = space.remote
        created = session_id is None or session_id == self.made
        if session_id is None:
            made = await off_loop(lambda: new_session(remote, space.server_dir))
            session_id = str(made["id"])
        sid = session_id
        detail = await off_loop(lambda: remote.get(f"/sessions/{sid}"))
        opened = RemoteSession(space, detail)
        if created:  # where it works is the server's: not this machine's directory
            opened.notices.append(NEW_SESSION.format(dir=opened.working_dir))
        space.model = opened.model  # what `/model` says: the open session's
        loop = asyncio.get_running_loop()
        try:
            await off_loop(lambda: opened.attach(loop))
        except BaseException:
            opened.close()
            raise
        # the app keeps its session as an AgentSession: the local-only paths
        # (`!cmd`, `@file`, in .usercontext) need one, and are never taken with
        # --remote. What the app uses of it is the seam's TuiSession (.seam; the
        # seam test checks that), which mypy proves RemoteSession satisfies
        return cast("AgentSession", opened), created

    async def close(self, session: AgentSession, store: TuiStore, discard: bool) -> None:
        opened = _session(session)
        unused = discard and not await off_loop(lambda: opened.view.count)
        opened.close()
        if unused:
            from infai.shells.remote.client import delete

            sid = opened.session_id
            await off_loop(lambda: delete(opened.remote, f"/sessions/{sid}"))

    async def sessions(self, harness: TuiHarness) -> list[Listed]:
        from infai.shells.remote.session import info_of

        remote = _space(harness).remote
        listed = await off_loop(lambda: remote.get("/sessions"))
        return [
            Listed(info_of(obj), str(obj.get("title") or ""), int(obj.get("events", 0)))
            for obj in listed["sessions"][:LISTED]
        ]

    async def event_diff(self, session: AgentSession, store: TuiStore, event: str) -> EventDiff:
        return await off_loop(lambda: _event_diff(_session(session), event))

    async def use_model(self, harness: TuiHarness, session: AgentSession, name: str) -> Model:
        raise InvalidInput(NO_MODEL_SWITCH)


def new_session(remote: Remote, server_dir: str | None) -> dict[str, Any]:
    """``POST /sessions``: a new session working in ``server_dir`` on the server
    (an existing absolute directory there, as the server's own create route
    requires; None: the server's directory)."""
    made: dict[str, Any] = remote.post(
        "/sessions", {"working_dir": server_dir} if server_dir else {}
    )
    return made


def _event_diff(session: RemoteSession, event_id: str) -> EventDiff:
    """As :func:`~.files.event_diff`, from the server: the snapshots on the event's
    path, then the files of the first or the diff of the last two."""
    view, remote = session.view, session.remote
    path = view.path(event_id, to_boundary=False)
    marks = [entry for entry in path if entry.kind in CHECKPOINT_KINDS]
    seq = path[-1].seq if path else "?"
    if not marks:
        return EventDiff(f"no files were recorded at or before #{seq}")
    new = marks[-1]
    at = f"#{new.seq}" + ("" if new.seq == seq else f" (the files of #{seq})")
    base = f"/sessions/{session.session_id}"
    if len(marks) == 1:
        listed = remote.get(f"{base}/files", event=new.id)
        paths = [str(item["path"]) for item in listed["files"]]
        return EventDiff(f"files at {at}: first recorded, {len(paths)} file(s)", listed=paths)
    old = marks[-2]
    report = remote.get(f"{base}/diff", **{"from": old.id, "to": new.id})
    return EventDiff(f"files at {at} against #{old.seq}", report=report)


__all__ = ["NEW_SESSION", "NO_MODEL_SWITCH", "RemoteBackend", "new_session"]
