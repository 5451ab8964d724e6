"""The transcript's scrollback: paging it from the prompt, and copying from it.

Why full screen (see docs/tui.md): infai's transcript is not a log that only
grows. A continue from an older event, a rewind, a compaction or a reload
shows another path; a streaming reply, a folded result opened later and a tool
call that gets its result are redrawn in place. Inline rendering into the
terminal's own scrollback (as Codex, Claude Code and Pi do) cannot take back
what it printed, so those would be printed again below, out of order. So the
app keeps the screen and gives what the terminal's scrollback gave:

- **Page Up / Page Down** scroll the chat from wherever the keys are (the
  prompt keeps them); where the focused widget pages itself (the timeline, a
  dialog's list) the key is its own. The wheel scrolls what is under the
  pointer and never moves the keys.
- **Selecting with the mouse** (drag over the chat) and **Ctrl-C** copies the
  selection to the clipboard (OSC 52: the terminal, or tmux with
  ``set-clipboard on``, takes it); with nothing selected Ctrl-C cancels a turn
  or quits as before. Shift-drag still gives the terminal's own selection.
"""

from __future__ import annotations

from typing import ClassVar

from textual.actions import SkipAction
from textual.binding import Binding, BindingType

from .chat import ChatView
from .rewind import Rewind


class Scrollback(Rewind):
    """Page Up / Page Down for the chat, and Ctrl-C copying a selection."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("pageup", "page(-1)", "scroll up", show=False, priority=True),
        Binding("pagedown", "page(1)", "scroll down", show=False, priority=True),
    ]

    def action_page(self, step: int) -> None:
        """Scroll the chat a page; a dialog or the timeline keeps its own paging."""
        focused = self.focused
        if len(self.screen_stack) > 1 or (focused is not None and focused.id == "timeline"):
            raise SkipAction()
        chat = self.query_one(ChatView)
        page = max(1, chat.scrollable_content_region.height - 1)
        # from the target, not the position: several keys in a burst each go a page
        chat.scroll_to(y=chat.scroll_target_y + step * page, animate=False, immediate=True)

    async def action_interrupt(self) -> None:
        """Ctrl-C copies the text selected with the mouse; with none, it cancels, clears
        the draft or quits (:meth:`.usercontext.UserContext.action_interrupt`)."""
        if self.copied():
            return
        await super().action_interrupt()

    def copied(self) -> bool:
        """Copy the text selected with the mouse, if any (then Ctrl-C is done)."""
        screen = self.screen
        text = screen.get_selected_text()
        if not text:
            return False
        self.copy_to_clipboard(text)
        screen.clear_selection()
        lines = text.count("\n") + 1
        self.notify(f"copied {len(text)} characters ({lines} line{'s' * (lines != 1)})")
        return True
