"""How the app looks, kept apart from what it does: its stylesheet and its toasts.

The chat beside the timeline (shown on Ctrl-T), the pending-parent bar, the
prompt and the status bar below; the classes the chat's widgets take (a user's
message, a notice, a failed tool call, a compaction's boundary); and the search
panel's box.

:class:`Styled` is the app's base: it carries the stylesheet and draws every
toast (``notify``) as inert text, never markup, because toasts quote errors,
session names and the agent's notices (:mod:`infai.shells.inert`).
"""

from __future__ import annotations

from textual.app import App
from textual.notifications import SeverityLevel

from ..inert import inert

CSS = """
#main { height: 1fr; }
ChatView { width: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
Timeline { width: 40%; max-width: 64; border-left: vkey $panel; display: none; }
Timeline { overflow-x: hidden; }  /* a long label is cut, never a stray scrollbar */
Timeline.shown { display: block; }
/* under 100 columns the timeline takes the width while open: its previews keep 30+ characters */
Screen.-narrow Timeline { width: 100%; max-width: 100%; }
PendingBar { height: auto; color: $warning; padding: 0 1; display: none; }
QueueBar { height: auto; color: $text-muted; padding: 0 1; display: none; }
Timeline:focus { border-left: vkey $accent; }
#prompt { height: auto; min-height: 3; max-height: 33vh; padding: 0 1; }
StatusBar { height: 1; background: $panel; color: $text; }
.user { background: $boost; padding: 0 1; margin: 1 0 0 0; text-style: bold; }
.interrupted { color: $warning; text-style: italic; }
.notice { color: $text-muted; text-style: italic; }
.notice.error { color: $error; text-style: bold; }
ToolView .call { color: $text-muted; }
ToolView.failed .call { color: $error; }
.boundary { color: $accent; }
.empty { height: 0; }
.more { width: 100%; }
"""


class Styled(App[None]):
    """The app's stylesheet, and toasts that are inert text."""

    CSS = CSS
    #: the screen's class by its width: under 100 columns the timeline takes the width
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]  # noqa: RUF012 (App's ClassVar)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every toast is inert and never markup: it quotes errors, names and notices."""
        super().notify(
            inert(message), title=inert(title), severity=severity, timeout=timeout, markup=False
        )


__all__ = ["CSS", "Styled"]
