"""The status bar, the queued prompts, the pending-parent bar and the timeline of branches.

The timeline is drawn from the index alone (ids, links, kinds, previews): no
chunk line and no blob is read to show even a large session's tree. A run of
events without forks is one list; a fork opens one child node per branch, so
a long linear session is a flat list, not a 20,000-deep tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from infai.store import Entry, Event

from ..inert import inert, inert_text
from .prompt import PromptInput as PromptInput

BAR = 12
#: the longest model name the status bar shows in full
MODEL_CHARS = 28


def short_model(name: str, width: int = MODEL_CHARS) -> str:
    """A model name cut to ``width`` with an ellipsis; a path keeps its end
    (``scripted:…/replies.json``), another name its start."""
    if len(name) <= width:
        return name
    provider, colon, rest = name.partition(":")
    if colon and "/" in rest and len(provider) < width - 8:
        return f"{provider}:…{rest[-(width - len(provider) - 2) :]}"
    return name[: width - 1] + "…"


def fork_point(path: list[Entry]) -> int | None:
    """The sequence number where the newest fork on ``path`` left its parent
    (index entries only), or None on the session's first line."""
    for entry in reversed(path):
        if entry.branch_from is not None:
            return entry.parent_seq
    return None


def branch_label(head_seq: int, count: int, fork: int | None) -> str:
    """Where HEAD is, and which branch: the fork its line came from."""
    if head_seq < 0:
        return "empty"
    where = f"HEAD #{head_seq} of {count}"
    return where if fork is None else f"{where} ⑂ at #{fork}"


@dataclass
class Status:
    """What the status bar shows."""

    model: str = "offline"
    used_tokens: int = 0
    context_window: int = 1
    branch: str = "-"
    durability: str = "saved"
    notice: str = ""
    #: the files on disk are not HEAD's: what to say ("" when they are, or unknown)
    files: str = ""
    #: the directory the session's tools work in ("~" for the home directory)
    working_dir: str = ""


def token_bar(used: int, window: int, width: int = BAR) -> str:
    filled = min(width, round(width * used / window)) if window > 0 else 0
    return "█" * filled + "░" * (width - filled)


def _count(n: int) -> str:
    """A token count in a few characters: 950, 8.2k, 32k, 1.2M."""
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M".replace(".0M", "M")


def _tail(text: str, width: int) -> str:
    """``text`` cut to ``width`` at its start (a path keeps its end); 0: nothing."""
    if width <= 0:
        return ""
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def home_short(path: Path) -> str:
    """``path`` with the home directory as ``~`` (a status bar's few characters)."""
    try:
        return f"~/{path.relative_to(Path.home())}".removesuffix("/.")
    except (ValueError, RuntimeError):
        return str(path)


#: the fewest columns the working directory is shown in (its end: ``…/work``)
DIR_ROOM = 8


def short_dir(path: str, width: int) -> str:
    """``path`` in ``width`` columns: whole, else ``…/`` and its last parts that
    fit, else the end of its last part."""
    if len(path) <= width:
        return path
    parts = path.split("/")
    for start in range(1, len(parts)):
        tail = "…/" + "/".join(parts[start:])
        if len(tail) <= width:
            return tail
    return _tail(parts[-1], width)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


#: the status bar's parts: (field, style); what comes first is shown first
PARTS = ("notice", "files", "model", "saved", "tokens", "branch", "dir")
STYLES = {"notice": "bold reverse", "files": "bold black on yellow", "model": "bold"}


#: the last of :func:`status_parts`' steps
TIGHTEST = 9


def _notice(notice: str) -> str:
    """A retry's notice says what happens now: its "retrying …" part only."""
    _, sep, tail = notice.rpartition("; ")
    return tail if sep and tail.startswith("retrying") else notice


def status_parts(status: Status, tight: int = 0) -> dict[str, str]:
    """The bar's parts at a tightness (0: in full; each step shortens or drops the
    least useful part more). HEAD and the tokens are never dropped, only shortened."""
    pct = 100 * status.used_tokens / status.context_window if status.context_window else 0
    shown = "<1" if 0 < pct < 0.5 else f"{pct:.0f}"  # in use, not "0%"
    used, window = status.used_tokens, status.context_window
    tokens = f"{token_bar(used, window, 8)} {used:,}/{window:,} ({shown}%)"
    if tight >= 1:
        tokens = f"{_count(used)}/{_count(window)} {shown}%"
    saved = status.durability == "saved"
    notice = _notice(status.notice) if tight >= 1 else status.notice
    parts = {
        "notice": notice,
        "files": status.files,
        "model": short_model(status.model),
        "saved": f"{'✓' if saved else '●'} {status.durability}",
        "tokens": tokens,
        "branch": status.branch,
        "dir": "",  # the room left, at the first steps (:func:`status_text`)
    }
    if tight >= 5 and saved:
        parts["saved"] = "✓"
    if tight >= 6:
        parts["branch"] = status.branch.replace(" of ", "/").replace(" ⑂ at ", " ⑂")
    if tight >= 7:
        parts["model"] = short_model(status.model, 12)
    if tight >= 8:
        parts["model"] = ""
    if tight >= 9 and status.files.startswith("files ≠"):
        parts["files"] = "≠ HEAD"
    return parts


def _drawn(parts: dict[str, str]) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for name in PARTS:
        if not parts[name]:
            continue
        if name in STYLES:
            text.append(f" {inert(parts[name])} ", style=STYLES[name])
            text.append("" if name == "model" else " ")
        else:
            text.append(f"{'│' if text.plain.strip() else ''} {inert(parts[name])} ")
    return text


def status_text(status: Status, width: int) -> Text:
    """The bar for a terminal ``width`` wide: the fullest form that fits; at the
    tightest, a long notice (which comes first) is cut so HEAD still fits."""
    for tight in range(TIGHTEST + 1):
        parts = status_parts(status, tight)
        room = width - _drawn(parts).cell_len - 3 if width > 0 else 40
        if status.working_dir and room >= DIR_ROOM:  # the directory: in the room left
            parts["dir"] = short_dir(status.working_dir, min(room, 60))
        text = _drawn(parts)
        if width <= 0 or text.cell_len <= width:
            return text
    over = text.cell_len - width
    parts["notice"] = _cut(parts["notice"], max(8, len(parts["notice"]) - over))
    return _drawn(parts)


class StatusBar(Static):
    """Last notice (a retry, a compaction) · files · model · saved or saving ·
    tokens · branch · directory.

    It fits the terminal's width by shortening, not by cutting the end off: the
    directory takes the room left, shortened to its end (:func:`short_dir`); the
    model shortens, then goes; the tokens and HEAD stay, in fewer characters
    (:func:`status_parts`).
    """

    _status: Status | None = None

    def show(self, status: Status) -> None:
        self._status = status
        self.update(status_text(status, self.size.width or self.app.size.width))

    def on_resize(self) -> None:
        if self._status is not None:
            self.show(self._status)


class PendingBar(Static):
    """Says where the next prompt will continue from, when that is not HEAD."""

    def show(self, entry: Entry | None) -> None:
        self.display = entry is not None
        if entry is not None:
            preview = entry.preview.replace("\n", " ")[:50]
            self.update(
                inert_text(
                    f"↳ next prompt continues from #{entry.seq} {preview} — Esc: back to HEAD"
                )
            )


class QueueBar(Static):
    """The prompts typed during a turn, waiting for it to end (each is sent then,
    oldest first); Up on an empty prompt takes the last one back to edit."""

    def show(self, queued: list[str]) -> None:
        self.display = bool(queued)
        if queued:
            lines = [f"⧗ queued: {text.splitlines()[0][:60] if text else ''}" for text in queued]
            lines[-1] += "  — Up: take back to edit"
            self.update(inert_text("\n".join(lines)))


#: the index previews of the harness's records (:func:`infai.store.records.preview`)
SNAPSHOT_PREVIEW = re.compile(r"files: (\d+) \((\d+) changed\) ?(.*)")
RESTORE_PREVIEW = re.compile(r"files restored from \S+: (\d+) touched")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def files_mark(entry: Entry | Event) -> str | None:
    """What a ``snapshot`` or ``restore`` event did to the files, with a count, from
    its index preview (the timeline reads no record); None for other events, or
    a preview of another form. The chat says it in the same words."""
    if entry.kind == "snapshot" and (found := SNAPSHOT_PREVIEW.fullmatch(entry.preview)):
        files, changed, reason = int(found[1]), int(found[2]), found[3]
        what = f"{changed} changed" if changed else f"{_plural(files, 'file')} recorded"
        return f"▣ files: {what}" + (f" · {reason}" if reason else "")
    if entry.kind == "restore" and (found := RESTORE_PREVIEW.match(entry.preview)):
        return f"↺ restored {_plural(int(found[1]), 'file')}"
    return None


#: Markdown's marks a reply's preview drops: emphasis and code marks, a heading's or
#: a quote's or a list item's lead, a link's brackets and address
_MARKS = (
    (re.compile(r"\*\*|__|`+"), ""),
    (re.compile(r"^\s{0,3}(?:#{1,6}|>|[-*+]|\d+\.)\s+", re.MULTILINE), ""),
    (re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*\)"), r"\1"),
)


def plain(text: str) -> str:
    """``text`` (a reply, written in Markdown) as a line of plain words: the
    timeline shows what was said, not its markup."""
    for pattern, replacement in _MARKS:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


def _label(
    entry: Entry, head: str | None, pending: str | None, calls: list[str] | None = None
) -> Text:
    """An event's row; ``calls``: the tools a reply called (shown when it said nothing)."""
    mark = "◆ " if entry.id == head else "▷ " if entry.id == pending else "  "
    said = plain(entry.preview) if entry.role == "assistant" else entry.preview
    preview = said.replace("\n", " ")[:48]
    style = "bold" if entry.id == head else "italic" if entry.id == pending else ""
    files = files_mark(entry)
    if files is not None:
        return inert_text(f"{mark}#{entry.seq} {files}", style or "cyan")
    if calls and not preview:
        return inert_text(f"{mark}#{entry.seq} {entry.role} → {', '.join(calls)}", style)
    return inert_text(f"{mark}#{entry.seq} {entry.role}: {preview}", style)


def _silent_reply(entry: Entry) -> bool:
    """A reply without text (it only called tools): its row names the tools instead."""
    return entry.kind == "message" and entry.role == "assistant" and not entry.preview.strip()


class Timeline(Tree[str]):
    """Every event of the session as branches; selecting one sets the pending parent.

    Built once from the index when shown; afterwards new events are added to it
    (a turn adds a few), so a long session's tree is not rebuilt at every turn.

    It never takes text: the app gives a printable key, a paste, Backspace and
    the like to the prompt, with the focus (:mod:`.keys`). Its own keys are the
    tree's (arrows, Page Up/Down, Home/End; Enter continues from the event), Esc
    (close) and Ctrl-D: the diff of the files at the event under the cursor
    (:class:`DiffWanted`).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close the timeline", show=False),
        Binding("ctrl+d", "diff", "diff of the files"),
    ]

    class Closed(Message):
        """Esc: close the timeline."""

    class DiffWanted(Message):
        """Ctrl-D: show what changed in the files at ``event_id``."""

        def __init__(self, event_id: str | None) -> None:
            super().__init__()
            self.event_id = event_id

    def action_close(self) -> None:
        self.post_message(self.Closed())

    def action_diff(self) -> None:
        node = self.cursor_node
        self.post_message(self.DiffWanted(node.data if node is not None else None))

    def __init__(self, **kwargs: object) -> None:
        super().__init__("session", **kwargs)  # type: ignore[arg-type]
        self.show_root = False
        self.guide_depth = 2
        self.session_id: str | None = None
        self.loaded = 0
        self._event_entries: dict[str, Entry] = {}
        self._by_event: dict[str, TreeNode[str]] = {}
        self._run_of: dict[str, TreeNode[str]] = {}
        self._child_count: dict[str, int] = {}
        self._marks: tuple[str | None, str | None] = (None, None)
        #: the tools a reply without text called (its row lists them), and each
        #: call's reply (the calls of one reply follow one another)
        self._calls: dict[str, list[str]] = {}
        self._reply_of: dict[str, str] = {}

    def load(
        self, entries: list[Entry], head: str | None, pending: str | None, session_id: str = ""
    ) -> None:
        """Rebuild from index entries (oldest first)."""
        self.clear()
        self.session_id, self.loaded = session_id, len(entries)
        self._event_entries = {e.id: e for e in entries}
        self._by_event, self._run_of, self._child_count = {}, {}, {}
        self._calls, self._reply_of = {}, {}
        self._marks = (head, pending)
        children: dict[str, list[Entry]] = {}
        roots: list[Entry] = []
        for entry in entries:
            if entry.parent_seq < 0:
                roots.append(entry)
            else:
                children.setdefault(entry.parent_id, []).append(entry)
                self._child_count[entry.parent_id] = self._child_count.get(entry.parent_id, 0) + 1
        # (node to add to, the branch's first event), walked without recursion
        work: list[tuple[TreeNode[str], Entry]] = [(self.root, r) for r in reversed(roots)]
        while work:
            parent, entry = work.pop()
            while True:
                self._add(parent, entry)
                kids = children.get(entry.id, [])
                if len(kids) == 1:
                    entry = kids[0]
                    continue
                forks = [(self._fork(parent, entry), kid) for kid in kids]
                work.extend(reversed(forks))
                break
        self.root.expand()
        self._cursor(head, pending)

    def _add(self, container: TreeNode[str], entry: Entry) -> None:
        node = container.add_leaf(self._text(entry), data=entry.id)
        self._by_event[entry.id] = node
        self._run_of[entry.id] = container
        if entry.kind == "tool_call":
            self._called(entry)

    def _text(self, entry: Entry) -> Text:
        head, pending = self._marks
        return _label(entry, head, pending, self._calls.get(entry.id))

    def _called(self, call: Entry) -> None:
        """Note a tool call on the reply it follows; a reply without text is relabelled."""
        parent = self._event_entries.get(call.parent_id)
        if parent is None:
            return
        reply = self._reply_of.get(parent.id, parent.id if _silent_reply(parent) else None)
        node = self._by_event.get(reply or "")
        if reply is None or node is None:
            return
        self._reply_of[call.id] = reply
        self._calls.setdefault(reply, []).append(call.preview.partition("(")[0])
        node.set_label(self._text(self._event_entries[reply]))

    def _fork(self, container: TreeNode[str], at: Entry) -> TreeNode[str]:
        return container.add(Text(f"⑂ branch at #{at.seq}"), expand=True)

    def _cursor(self, head: str | None, pending: str | None) -> None:
        """The cursor on the picked event, else on HEAD, scrolled into view."""
        node = self._by_event.get(pending or head or "")
        if node is None:
            return
        self.get_node_at_line(0)  # builds the tree's lines, which gives the node its line
        self.move_cursor(node)
        self.call_after_refresh(self.scroll_to_node, node, animate=False)  # once laid out

    def extend(self, entries: list[Entry], head: str | None, pending: str | None) -> bool:
        """Add events appended since the last load; False when only a rebuild will do
        (a second child of an event whose first child continues its line)."""
        old = self._marks
        self._marks = (head, pending)
        for entry in entries:
            parent = entry.parent_id
            count = self._child_count.get(parent, 0)
            if entry.parent_seq < 0 or parent not in self._by_event or count == 1:
                return False
            self._event_entries[entry.id] = entry
            if count == 0:  # the line goes on
                self._add(self._run_of[parent], entry)
            else:  # one more branch at an existing fork
                self._add(self._fork(self._run_of[parent], self._event_entries[parent]), entry)
            self._child_count[parent] = count + 1
            self.loaded += 1
        for event_id in {*old, head, pending} - {None}:  # markers moved: relabel
            node = self._by_event.get(event_id or "")
            if node is not None and event_id is not None:
                node.set_label(self._text(self._event_entries[event_id]))
        self._cursor(head, pending)
        return True
