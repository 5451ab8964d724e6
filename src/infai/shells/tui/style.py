"""The app's stylesheet, kept apart from the app's behaviour.

The chat beside the timeline (shown on Ctrl-T), the pending-parent bar, the
prompt and the status bar below; the classes the chat's widgets take (a user's
message, a notice, a failed tool call, a compaction's boundary); and the search
panel's box.
"""

from __future__ import annotations

CSS = """
#main { height: 1fr; }
ChatView { width: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
Timeline { width: 40%; max-width: 64; border-left: vkey $panel; display: none; }
Timeline { overflow-x: hidden; }  /* a long label is cut, never a stray scrollbar */
Timeline.shown { display: block; }
PendingBar { height: auto; color: $warning; padding: 0 1; display: none; }
#prompt { height: 3; }
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

__all__ = ["CSS"]
