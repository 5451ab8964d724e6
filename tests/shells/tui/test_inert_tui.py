"""Nothing the TUI draws can drive the terminal, and no text is read as markup (issue 12).

The attacks ride on everything a screen shows: a session's name and directory
(the title, the picker), stored events of every kind (a compaction's summary,
a user's prompt, a reply and its reasoning, a tool call's arguments and the
diff of a write, short and long tool results), a reply streaming in, an
approval's question, error toasts that quote input, the timeline.

Judged by effect: the test renders each screen as Textual would write it to
the terminal (the compositor's full update turned into the terminal's
sequences, the very string the driver writes) and looks for the attack's
sequences in it. Textual writes its own escapes (colours, cursor moves), so the
check is for the attacks themselves: OSC 0 and 52, ``ESC [ 2K``, BEL, DEL,
C1 and the bidi controls. A ``[bold red]…[/]`` in a name must be drawn as those
characters, not as a style.

A last test reads the TUI's sources: every widget is handed text through the
sanitizer (``inert_text`` / ``inert`` / ``inert_markup``), never a bare string.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from contextlib import suppress
from pathlib import Path

from textual import events
from textual._compositor import CompositorUpdate
from textual.pilot import Pilot
from textual.widgets import Collapsible

import astparse
from infai.llm import Message, ScriptedModel, ToolCall
from infai.shells.tui import InfaiApp
from infai.shells.tui.modals import ApprovalScreen, RenameScreen, SessionPicker
from infai.shells.tui.panels import PromptInput
from infai.store import (
    CompactionRecord,
    MessageRecord,
    Store,
    ToolCallRecord,
    ToolResultRecord,
)
from infai.tools import Ask, Rule
from tui_pilot import asked, harness, run_app, send, until

TITLE = "\x1b]0;pwned\x07"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
ERASE = "\x1b[2K"
MARKUP = "[bold red]loud[/bold red]"
PAYLOAD = f"A{TITLE}B{CLIPBOARD}C{ERASE}D\u202eE\x9bF\x7fG\u2066H{MARKUP}"
OSC_ONLY = f"A{TITLE}B{CLIPBOARD}C\u202eD\x9bE"
#: the attack's sequences; none may be in what is written to the terminal
ATTACKS = re.compile(
    "\x1b\\]|\x07|\x1b\\[2K|[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


#: what textual itself writes to a real terminal that the attack check would see
OWN_OSC = "\x1b]22;default\x07"


def drawn(app: InfaiApp) -> str:
    """What Textual writes to the terminal for the whole current screen."""
    update = app.screen._compositor.render_update(full=True)
    assert isinstance(update, CompositorUpdate)
    return str(update.render_segments(app.console))


async def assert_inert(pilot: Pilot[None], app: InfaiApp, where: str, shown: str = "pwned") -> str:
    """What the screen draws once ``shown`` is on it: no attack sequence in it."""
    with suppress(AssertionError):  # said below, with what was drawn instead
        await until(pilot, lambda: shown in drawn(app), f"{where}: {shown!r} drawn")
    output = drawn(app)
    attacks = sorted({repr(m) for m in ATTACKS.findall(output)})
    assert attacks == [], f"{where}: written to the terminal as they are: {attacks}"
    assert shown in output, f"{where}: {shown!r} is not drawn at all"
    return output


def test_every_part_of_the_screen_is_inert(tmp_path: Path) -> None:
    write = ToolCall("w1", "write_file", {"path": "x.txt", "content": PAYLOAD})
    model = ScriptedModel(
        [
            Message(role="assistant", content=PAYLOAD, reasoning=PAYLOAD, tool_calls=(write,)),
            f"done {PAYLOAD}",
        ]
    )
    space = harness(tmp_path, model)
    store = space.store
    sid = store.create_session(name=f"name {PAYLOAD}", working_dir=f"dir {PAYLOAD}").id
    long_output = "\n".join(f"line {i} {PAYLOAD}" for i in range(10))
    with store.open_writer(sid) as writer:
        writer.append(CompactionRecord(summary=f"summary {PAYLOAD}"), "system")
        writer.append(MessageRecord(content=f"user {PAYLOAD}"), "user")
        call = ToolCallRecord(call_id="c1", name="bash", arguments={"command": f"echo {PAYLOAD}"})
        writer.append(call, "assistant")
        writer.append(
            ToolResultRecord(call_id="c1", name="bash", content=f"short {PAYLOAD}"), "tool"
        )
        writer.append(ToolCallRecord(call_id="c2", name="bash", arguments={}), "assistant")
        writer.append(ToolResultRecord(call_id="c2", name="bash", content=long_output), "tool")
    app = InfaiApp(space, sid)

    async def scenario(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: app.session is not None, "the session")
        await assert_inert(pilot, app, "stored events")
        await send(pilot, "go")
        screen = await asked(pilot, app)  # the write asks: the diff is on the chat
        await assert_inert(pilot, app, "the approval dialog", shown="write_file")
        await pilot.press("n")
        await until(pilot, lambda: not app.busy, "the turn's end")
        for fold in app.query(Collapsible):  # reasoning, results, the summary: open
            fold.collapsed = False
        # the markup is drawn as text, once the opened folds are laid out
        await until(pilot, lambda: "[bold red]loud" in drawn(app), "the folds drawn")
        await assert_inert(pilot, app, "the chat, every fold open")
        await pilot.press("ctrl+t")
        await pilot.pause()
        await assert_inert(pilot, app, "the timeline", shown="summary")
        await app.command(f"/nosuch{PAYLOAD}")  # a toast quoting input
        await app.command(f"/model {PAYLOAD}")  # an error quoting the name
        await pilot.pause()
        assert "[bold red]loud" in await assert_inert(pilot, app, "the toasts")
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), "the picker")
        await pilot.pause()
        assert "[bold red]" in await assert_inert(pilot, app, "the picker")
        await pilot.press("escape")
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, RenameScreen), "rename")
        await pilot.pause()
        await assert_inert(pilot, app, "the rename dialog")
        await pilot.press("escape")
        assert screen is not app.screen

    run_app(app, scenario, (100, 40))


def test_a_paste_with_control_characters_is_kept_whole_and_not_drawn(tmp_path: Path) -> None:
    space = harness(tmp_path, ScriptedModel(["ok"]))
    app = InfaiApp(space)

    async def scenario(pilot: Pilot[None]) -> None:
        prompt = app.query_one("#prompt", PromptInput)
        prompt.post_message(events.Paste(f"look {OSC_ONLY}"))
        await until(pilot, lambda: "[pasted 1 line]" in prompt.value, "the paste marker")
        await assert_inert(pilot, app, "the prompt", shown="pasted 1 line")
        await pilot.press("enter")
        done = lambda: app.taken == 1 and not app.busy and prompt.value == ""  # noqa: E731
        await until(pilot, done, "the turn")

    run_app(app, scenario, (80, 24))
    [info] = space.store.list_sessions()
    with space.store.open_reader(info.id) as reader:
        # the turn's files snapshot comes first; the prompt is the first message
        kinds = [event.kind for event in reader.context().events]
        first = reader.context().events[kinds.index("message")].record
        assert isinstance(first, MessageRecord) and first.content == f"look {OSC_ONLY}"


def test_the_approval_dialog_is_inert(tmp_path: Path) -> None:
    app = InfaiApp(harness(tmp_path))
    rule = Rule("allow", "bash", f"echo {PAYLOAD}*")
    ask = Ask("bash", f"echo {PAYLOAD}", f"reason {PAYLOAD}", (rule,))

    async def scenario(pilot: Pilot[None]) -> None:
        app.push_screen(ApprovalScreen(ask))
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the dialog")
        await pilot.pause()
        assert "[bold red]" in await assert_inert(pilot, app, "the question")
        dialog = app.screen
        assert isinstance(dialog, ApprovalScreen)
        await dialog.action_edit()  # the pattern, editable
        await pilot.pause()
        await assert_inert(pilot, app, "the pattern's field")

    run_app(app, scenario, (100, 30))


def test_in_a_real_terminal_the_title_and_clipboard_stay_untouched(tmp_path: Path) -> None:
    """``infai --session`` in tmux over a session whose name, prompt, reply and
    tool output carry the attacks: tmux's pane title and paste buffers (what OSC 0
    and OSC 52 would set) stay untouched, and the raw bytes infai wrote to the
    terminal (tmux's pipe-pane) hold none of the attacks' sequences. (No ``[`` in
    these: the unsanitized app crashed on one, which the pilot tests catch.)"""
    tmux = shutil.which("tmux")
    assert tmux is not None, "tmux is needed for the real-terminal test"
    store = Store(tmp_path / "home")
    work = tmp_path / "work"  # infai's directory, and the session's: its files are looked at
    work.mkdir()
    sid = store.create_session(name=f"name {OSC_ONLY}", working_dir=str(work)).id
    with store.open_writer(sid) as writer:
        writer.append(MessageRecord(content=f"asked {OSC_ONLY}"), "user")
        call = ToolCallRecord(call_id="c1", name="bash", arguments={"command": OSC_ONLY})
        writer.append(call, "assistant")
        writer.append(ToolResultRecord(call_id="c1", name="bash", content=OSC_ONLY), "tool")
        writer.append(MessageRecord(content=f"replied {OSC_ONLY} pwned"), "assistant")
    store.close()
    socket = f"infai-inert-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    raw, ready = tmp_path / "raw.out", tmp_path / "piped"
    conf = tmp_path / "tmux.conf"
    conf.write_text(
        "set -g set-clipboard on\nset -g allow-rename on\nset -g default-shell /bin/sh\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}

    def tmux_run(*args: str) -> str:
        done = subprocess.run(
            [tmux, "-L", socket, *args], capture_output=True, text=True, env=env, timeout=10
        )
        return done.stdout

    infai = Path(sys.executable).parent / "infai"
    command = f"exec {infai} --session {sid}"
    (tmp_path / "no").write_text("")  # no user configuration: checkpoints on
    try:
        tmux_run("-f", str(conf), "new-session", "-d", "-s", "t", "-x", "100", "-y", "30",
                 "-c", str(work),
                 "-e", f"INFAI_HOME={tmp_path / 'home'}", "-e", f"INFAI_CONFIG={tmp_path / 'no'}",
                 "sh", "-c", f"until [ -e {ready} ]; do sleep 0.05; done; {command}")  # fmt: skip
        tmux_run("pipe-pane", "-o", "-t", "t", f"cat >> {raw}")
        ready.touch()  # infai starts once every byte it writes is piped (no race on load)
        deadline = time.monotonic() + 20
        while "replied" not in (shown := tmux_run("capture-pane", "-p", "-t", "t")):
            assert time.monotonic() < deadline, f"the session never showed:\n{shown}"
            time.sleep(0.1)
        time.sleep(0.5)  # everything drawn
        shown = tmux_run("capture-pane", "-p", "-t", "t")
        title = tmux_run("display-message", "-p", "-t", "t", "#{pane_title}")
        buffers = tmux_run("list-buffers")
        tmux_run("send-keys", "-t", "t", "C-c")
        tmux_run("send-keys", "-t", "t", "C-c")
    finally:
        tmux_run("kill-server")
    assert "pwned" not in title and "pwned" not in buffers, (title, buffers)
    assert "pwned" in shown  # on the screen, as text
    written = raw.read_bytes().decode("utf-8", "replace")
    assert "pwned" in written  # the attack was drawn, as text
    # textual writes OSC 22 (the pointer's shape) itself: the attacks are OSC 0 and 52
    attacks = sorted({repr(m) for m in ATTACKS.findall(written.replace(OWN_OSC, ""))})
    assert attacks == [], f"written to the terminal as they are: {attacks}"


#: the widgets (and rich objects) that draw the string they are given
DRAWS = {"Text", "Static", "Markdown", "Input", "Syntax", "Option", "Button", "Label"}
#: what a dynamic string may be wrapped in before it is drawn (the sanitizer, and
#: functions that return its result or only characters of their own: a bar, a label)
SANITIZED = {
    "inert",
    "inert_text",
    "inert_markup",
    "printable",
    "session_label",
    "_label",
    "_title",
}
SANITIZED |= {"edit_diff", "token_bar", "hit_label", "mcp_listing"}
SANITIZED |= {"restore_question", "event_diff_text", "numbered_diff", "transcript_text"}


def _safe(node: ast.expr) -> bool:
    """A literal, a module's constant, a number, or the sanitizer's result (an
    f-string or a conditional made only of those)."""
    if isinstance(node, ast.Constant) or (isinstance(node, ast.Name) and node.id.isupper()):
        return True
    if isinstance(node, ast.JoinedStr):
        return all(_safe(v) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        return _safe(node.value) or _numeric(node.value)
    if isinstance(node, ast.IfExp):
        return _safe(node.body) and _safe(node.orelse)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        return name in SANITIZED
    return False


def _numeric(node: ast.expr) -> bool:
    names = {"seq", "at", "start", "_shown_from", "used_tokens", "context_window", "pct"}
    return isinstance(node, ast.Attribute | ast.Name) and (
        getattr(node, "attr", None) in names or getattr(node, "id", None) in names
    )


def test_every_widget_is_handed_text_through_the_sanitizer() -> None:
    """Each widget that draws a string, each ``.update``, ``.append`` and ``title``
    in the TUI's modules takes a literal or the sanitizer's result."""
    root = Path(__file__).resolve().parents[3] / "src/infai/shells/tui"
    sources = sorted(root.glob("*.py"))
    assert len(sources) >= 6
    bare: list[str] = []
    for source in sources:
        for node in ast.walk(astparse.parse(source.read_text())):
            bare += [f"{source.name}:{getattr(node, 'lineno', 0)}: {x}" for x in _unsanitized(node)]
    assert bare == [], "\n".join(bare)


def test_the_source_check_sees_a_bare_string() -> None:
    bad = astparse.parse("Static(Text(reply))\nfold.title = name\nStatic(inert_text(reply))")
    found = [x for node in ast.walk(bad) for x in _unsanitized(node)]
    assert sorted(found) == [".title = name", "Static(Text(reply))", "Text(reply)"]


def _unsanitized(node: ast.AST) -> list[str]:
    """What ``node`` hands a widget without the sanitizer (empty: nothing)."""
    found: list[str] = []
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        arg = node.args[0] if node.args else None
        draws = name in DRAWS or (name in ("update", "append", "write") and _draws_into(func))
        if draws and arg is not None and not _safe(arg) and not _is_widget(arg):
            found.append(ast.unparse(node)[:80])
        found += [
            f"title={ast.unparse(k.value)[:60]}"
            for k in node.keywords
            if k.arg == "title" and not _safe(k.value)
        ]
    elif isinstance(node, ast.Assign) and not _safe(node.value):
        found += [
            f".title = {ast.unparse(node.value)[:60]}"
            for target in node.targets
            if isinstance(target, ast.Attribute) and target.attr == "title"
        ]
    return found


def _draws_into(func: ast.expr) -> bool:
    """``x.update(…)`` / ``x.append(…)`` / ``x.write(…)`` on a widget, a stream or a
    rich ``Text`` (by the names the TUI gives them), not on a dict or a list."""
    if not isinstance(func, ast.Attribute):
        return False
    target = ast.unparse(func.value)
    return any(part in target for part in ("_body", "_thoughts", "_markdown", "_stream", "text"))


def _is_widget(node: ast.expr) -> bool:
    """An argument that is itself a widget or a variable holding one (checked where made)."""
    return isinstance(node, ast.Name) and node.id in {"body_view", "diff", "keys", "text"}
