"""The search panel (Ctrl-F or ``/search``): find an event in any session, open it there.

Model: the panel is a modal over the chat with a query field and a ranked list
of hits from :meth:`infai.store.SessionStore.search` (every session, every
branch). Each keystroke starts a new search after a short pause
(:data:`PAUSE`); a newer one cancels the older (a Textual worker group with
``exclusive``), so a slow search never overwrites the answer to what is typed
now. The search itself runs in a thread through :mod:`.store_io`, like every
store call the TUI makes, and its errors (a query the grammar refuses, a store
that cannot be read) are shown under the field, never raised.

A hit is two lines: where it is (◆ on HEAD's path, ⑂ on a branch that was
left; the session's title, its name else its first prompt; the event's number,
kind and role, its time) and a snippet with the matched words highlighted.
Everything drawn goes through the sanitizer (:mod:`infai.shells.inert`): a
session's name or a tool's output cannot drive the terminal or be read as
markup.

Enter (in the field: the highlighted hit, else the first; in the list: the one
chosen) dismisses the panel with the :class:`~infai.store.SearchHit`; the app
then opens its session and picks its event as the timeline does
(:meth:`InfaiApp.open_hit <infai.shells.tui.app.InfaiApp.open_hit>`). Esc closes
the panel and changes nothing.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from infai.store import InvalidInput, SearchHit, StoreError

from ..inert import inert, inert_text
from . import store_io
from .modals import MODAL_CSS
from .seam import TuiStore
from .store_io import off_loop

#: seconds of no typing before the query is searched
PAUSE = 0.15
#: hits shown at most
LIMIT = 50


def hit_label(hit: SearchHit, title: str = "") -> Text:
    """Where the hit is (HEAD's path or a branch, the session's title, event,
    time), then its snippet with the matched words highlighted; every part inert."""
    where = "◆ HEAD" if hit.on_head_path else "⑂ branch"
    name = inert(title or hit.session_name or hit.session_id[:13]).replace("\n", " ")
    when = hit.timestamp[:16].replace("T", " ")
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(inert(f"{where:<9}"), style="bold" if hit.on_head_path else "italic")
    text.append(inert(name[:40]), style="bold")
    text.append(inert(f"  #{hit.seq} {hit.kind}/{hit.role}  {when}"), style="dim")
    text.append("\n  ")
    at = 0
    for start, end in hit.marks:  # offsets into the snippet as stored: cut, then escape
        text.append(inert(hit.snippet[at:start]))
        text.append(inert(hit.snippet[start:end]), style="bold reverse")
        at = end
    text.append(inert(hit.snippet[at:]))
    return text


class SearchScreen(ModalScreen[SearchHit | None]):
    """A query field over ranked hits from every session; Enter opens one, Esc closes."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="SearchScreen")
        + """
    SearchScreen > Vertical { width: 96; }
    SearchScreen OptionList { height: auto; max-height: 20; }
    SearchScreen #search-status { color: $text-muted; }
    SearchScreen #search-status.error { color: $error; }
    """
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "close"),
        Binding("down", "to_hits", "hits", show=False),
    ]

    def __init__(self, store: TuiStore, query: str = "") -> None:
        super().__init__()
        self.store = store
        self.query_text = query
        self.hits: list[SearchHit] = []
        #: the sessions' titles (their name, else their first prompt), by id
        self.titles: dict[str, str] = {}
        #: how many searches have finished (tests wait on it)
        self.searched = 0

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Search every session", classes="title")
            placeholder = 'words, "a phrase", pref*, -word'
            yield Input(inert(self.query_text), placeholder=placeholder, id="q")
            yield Static("", id="search-status")
            yield OptionList(id="hits")
            yield Static(
                "[b]Enter[/b] open at the event   [b]↓[/b] to the hits   [b]Esc[/b] close",
                classes="keys",
            )

    def on_mount(self) -> None:
        self.query_one("#q", Input).focus()
        if self.query_text.strip():
            self._search(self.query_text)

    def on_input_changed(self, message: Input.Changed) -> None:
        message.stop()
        self._search(message.value)

    def _search(self, query: str) -> None:
        self.run_worker(self._run(query), group="search", exclusive=True, exit_on_error=False)

    async def _run(self, query: str) -> None:
        """Search ``query`` after a pause, in a thread; a newer search cancels this one."""
        await asyncio.sleep(PAUSE)
        status = self.query_one("#search-status", Static)
        if not query.strip():
            self._show([], "")
            return
        store = self.store
        try:
            hits = await off_loop(lambda: store_io.search(store, query, LIMIT))
            self.titles = await off_loop(lambda: store_io.titles(store, list(hits)))
        except (InvalidInput, StoreError) as exc:
            self._show([], str(exc))
            status.add_class("error")
            return
        status.remove_class("error")
        count = f"{len(hits)} hit{'s' if len(hits) != 1 else ''}" if hits else "no hits"
        if hits.damaged:  # hits may be missing from these: said, never hidden
            names = ", ".join(d.session_id[:8] for d in hits.damaged)
            count += f" (damaged sessions left partly unsearched: {names}; see session fsck)"
        if (cut := hits.window_note()) is not None:  # only the newest matches looked at
            self._show(hits, f"{count}: {cut}")
            return
        self._show(hits, count + (f" (the best {LIMIT})" if len(hits) == LIMIT else ""))

    def _show(self, hits: list[SearchHit], status: str) -> None:
        self.hits = hits
        self.query_one("#search-status", Static).update(inert_text(status))
        found = self.query_one("#hits", OptionList)
        found.clear_options()
        found.add_options(
            [Option(hit_label(hit, self.titles.get(hit.session_id, ""))) for hit in hits]
        )
        if hits:
            found.highlighted = 0
        self.searched += 1

    def action_to_hits(self) -> None:
        if self.hits:
            self.query_one("#hits", OptionList).focus()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        message.stop()
        if self.hits:
            index = self.query_one("#hits", OptionList).highlighted or 0
            self.dismiss(self.hits[index])

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        message.stop()
        self.dismiss(self.hits[message.option_index])


__all__ = ["LIMIT", "PAUSE", "SearchScreen", "hit_label"]
