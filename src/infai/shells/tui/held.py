"""A session another process holds: said at once, with what can be done instead.

Two writers at once would each move HEAD, so a session another infai has open
(its lock names the holder's pid) is not opened here, and nothing waits for
it: :class:`HeldScreen` says who holds it and offers to try again (an infai
holds a session only while a turn runs, so it is soon free), the session
picker, a new session, a read-only look at it (:class:`ReadOnlyScreen`, from a
reader that takes no lock, following what the holder appends) or quitting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from infai.agent import AgentSession
from infai.store import StoreError

from ..inert import inert, inert_text
from .elsewhere import LOOK_EVERY, stored_count
from .modals import MODAL_CSS
from .seam import TuiHarness
from .store_io import SessionHeld, off_loop, transcript

#: what the held session's dialog answers: open the picker, a new session, quit,
#: try the held session again
PICK, NEW, QUIT, RETRY = "pick", "new", "quit", "retry"
#: the characters of one message the read-only view shows
SHOWN_CHARS = 2000

Lines = list[tuple[str, str]]
#: the held session as the view reads it: its event count and its (who, text) lines
Read = tuple[int, Lines]


def transcript_text(lines: Lines) -> Text:
    """(who, text) lines as the read-only view draws them, inert."""
    text = Text()
    for who, said in lines:
        text.append(inert(f"{who}: "), style="bold")
        cut = said if len(said) <= SHOWN_CHARS else said[:SHOWN_CHARS] + "…"
        text.append(inert(cut))
        text.append("\n\n")
    if not lines:
        text.append("(no events yet)", style="dim")
    text.rstrip()
    return text


class ReadOnlyScreen(ModalScreen[None]):
    """The held session's conversation, scrolling; nothing can be sent. Esc closes.

    The holder is mid-turn, so the session grows while it is looked at: every
    :data:`~.elsewhere.LOOK_EVERY` s its event count is read (a reader in a
    thread, as the open session's look elsewhere does) and, when it grew, the
    conversation is read again; a view scrolled to its end stays at the end.
    """

    DEFAULT_CSS = (
        MODAL_CSS.format(name="ReadOnlyScreen")
        + """
    ReadOnlyScreen > Vertical { width: 100; height: 90%; }
    ReadOnlyScreen VerticalScroll { height: 1fr; }
    """
    )
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss(None)", "close")]

    def __init__(
        self,
        title: str,
        read: Read,
        count: Callable[[], Awaitable[int]] | None = None,
        load: Callable[[], Awaitable[Read]] | None = None,
    ) -> None:
        super().__init__()
        self.heading = title
        self.count, self.lines = read
        self._count, self._load = count, load
        self._looking = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(inert_text(f"{self.heading} (read-only)"), classes="title")
            with VerticalScroll():
                yield Static(transcript_text(self.lines), id="transcript")
            yield Static("[b]Esc[/b] back · follows new events", classes="keys")

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).scroll_end(animate=False)
        if self._count is not None and self._load is not None:
            self.set_interval(LOOK_EVERY, self._look)

    async def _look(self) -> None:
        """One look at a time: reread the conversation when the session grew."""
        if self._looking or self._count is None or self._load is None:
            return
        self._looking = True
        try:
            if await self._count() == self.count:
                return
            self.count, self.lines = await self._load()
            scroll = self.query_one(VerticalScroll)
            at_end = scroll.scroll_y >= scroll.max_scroll_y
            self.query_one("#transcript", Static).update(transcript_text(self.lines))
            if at_end:
                scroll.call_after_refresh(scroll.scroll_end, animate=False)
        finally:
            self._looking = False


class HeldScreen(ModalScreen[str | None]):
    """Says which process holds the session; r try again, p picker, n new,
    v read-only, q quit."""

    DEFAULT_CSS = MODAL_CSS.format(name="HeldScreen")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p,ctrl+o", f"dismiss('{PICK}')", "pick a session"),
        Binding("n,ctrl+n", f"dismiss('{NEW}')", "new session"),
        Binding("v", "view", "view read-only"),
        Binding("q", f"dismiss('{QUIT}')", "quit"),
        Binding("r", f"dismiss('{RETRY}')", "try again"),
        Binding("escape", "dismiss(None)", "close"),
    ]

    def __init__(
        self,
        said: str,
        load: Callable[[], Awaitable[Read]],
        count: Callable[[], Awaitable[int]] | None = None,
    ) -> None:
        super().__init__()
        self.said = said
        self._load = load
        self._count = count

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Session in use", classes="title")
            yield Static(
                inert_text(
                    f"{self.said}. Two writers at once would fork its HEAD, "
                    "so it is not opened here."
                ),
                id="held",
            )
            yield Static(
                "[b]r[/b] try again (it is let go between turns)\n"
                "[b]p[/b] pick another session   [b]n[/b] new session\n"
                "[b]v[/b] view it read-only   [b]q[/b] quit",
                classes="keys",
            )

    async def action_view(self) -> None:
        read = await self._load()
        title = self.said.split(" is open")[0]
        self.app.push_screen(ReadOnlyScreen(title, read, self._count, self._load))


class HeldApp(Protocol):
    """What :func:`ask_held` needs of the app."""

    harness: TuiHarness
    session: AgentSession | None

    def push_screen(self, screen: HeldScreen, callback: Callable[[str | None], Any]) -> Any:
        """Show the dialog; ``callback`` gets its answer."""

    async def action_quit(self) -> None:
        """End the app."""

    async def action_sessions(self) -> None:
        """Open the session picker."""

    async def open_session(self, session_id: str | None) -> bool:
        """Open a session (None: a new one)."""


def ask_held(app: HeldApp, held: SessionHeld) -> None:
    """Another process holds the session: say who, and offer to try again (still
    held: the same question), the picker, a new session, a read-only look or
    quitting (Esc with no session open: a new one, so the app never stays without
    a session)."""
    store = app.harness.store

    async def count() -> int:
        try:
            return await off_loop(lambda: stored_count(store, held.session_id))
        except StoreError:
            return -1  # unreadable now: read again, which says why

    async def load() -> Read:
        def read() -> Read:
            return stored_count(store, held.session_id), transcript(store, held.session_id)

        try:
            return await off_loop(read)
        except StoreError as exc:
            return -1, [("error", f"cannot read the session: {exc}")]

    async def chosen(choice: str | None) -> None:
        if choice == QUIT:
            await app.action_quit()
        elif choice == PICK:
            await app.action_sessions()
        elif choice == RETRY:
            await app.open_session(held.session_id)
        elif choice == NEW or app.session is None:
            await app.open_session(None)

    app.push_screen(HeldScreen(str(held), load, count), callback=chosen)
