"""Nothing the command line prints can drive the terminal (issue 12: everything shown is inert).

A model's reply, a tool's output and a session's metadata carry the attacks:
set the window title (``ESC ] 0 ; … BEL``), write the clipboard (OSC 52),
erase the line (``ESC [ 2K``), reorder what is read (U+202E), a one-byte CSI
(U+009B). Each test captures the bytes the command writes, with click told it
writes to a terminal (``color=True``: click strips nothing, as on a real one),
and judges the effect: no raw ESC, BEL, DEL, C1 or bidi control in them, and
the attack shown as visible text instead of vanishing.
"""

from __future__ import annotations

import json
import re
import tokenize
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main
from infai.shells.inert import inert, inert_json
from infai.store import MessageRecord, Store

TITLE = "\x1b]0;pwned\x07"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
ERASE = "\x1b[2K"
PAYLOAD = f"A{TITLE}B{CLIPBOARD}C{ERASE}D\u202eE\x9bF\x7fG\rH\u2066I"

#: what must never reach the terminal as it is (judged on the decoded bytes)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def assert_inert(data: bytes, *, shown: bool = True) -> None:
    """``data`` (what was written) holds no control or bidi character; with
    ``shown``, the title attack is there as visible text."""
    assert b"\x1b" not in data and b"\x07" not in data
    text = data.decode("utf-8")
    found = sorted({f"U+{ord(c):04X}" for c in RAW.findall(text)})
    assert found == [], f"raw control characters written: {found}"
    if shown:  # shown as text (\x1b]0;pwned\x07, or \u001b in JSON), not dropped
        assert re.search(r"\\(x1b|u001b)\]0;pwned\\(x07|u0007)", text), text


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def infai(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args], color=True)
    assert result.exit_code == code, (result.output, result.exception)
    return result


def test_the_sanitizer_escapes_visibly_and_keeps_text() -> None:
    assert inert("a\tb\nc") == "a\tb\nc"
    assert inert("ünïcödé ✓ 日本") == "ünïcödé ✓ 日本"
    assert inert(TITLE) == "\\x1b]0;pwned\\x07"
    assert inert("x\u202ey\x9b\x7f") == "x\\u202ey\\x9b\\x7f"
    assert inert("one\r\ntwo\rthree") == "one\ntwo\\x0dthree"
    encoded = inert_json({"k": PAYLOAD, "ü": "✓"})
    assert RAW.search(encoded) is None and "✓" in encoded
    assert json.loads(encoded) == {"k": PAYLOAD, "ü": "✓"}  # the same value to a parser


def test_run_prints_reply_tool_output_and_errors_inert(home: Path, work: Path) -> None:
    (work / "evil.txt").write_text(f"{PAYLOAD}\nsecond line\n")
    read = {
        "content": f"reading {PAYLOAD}",
        "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "evil.txt"}}],
    }
    script = work / "script.json"
    script.write_text(json.dumps([read, f"the file says {PAYLOAD}"]))
    out = infai(home, "run", "--model", f"scripted:{script}", "--allow", "read_file *", "look")
    assert_inert(out.stdout_bytes)
    assert_inert(out.stderr_bytes)  # the tool's result line: the file's first line
    assert "[read_file ok]" in out.stderr
    sid = out.stderr.strip().splitlines()[-1].removeprefix("session ")
    script.write_text(json.dumps([{"error": f"boom {PAYLOAD}", "status": 500}]))
    failed = infai(home, "run", "--model", f"scripted:{script}", "--session", sid, "hi", code=1)
    assert_inert(failed.stderr_bytes)  # the provider's error message
    assert "boom" in failed.stderr


def test_run_json_escapes_and_round_trips(home: Path, work: Path) -> None:
    script = work / "script.json"
    script.write_text(json.dumps([PAYLOAD]))
    out = infai(home, "run", "--json", "--model", f"scripted:{script}", "hi")
    assert_inert(out.stdout_bytes, shown=False)
    saved = [json.loads(line) for line in out.stdout.splitlines()]
    replies = [
        x["event"]["record"]["content"]
        for x in saved
        if x["type"] == "saved" and x["event"]["kind"] == "message"
    ]
    assert replies[-1] == PAYLOAD  # escaped for the terminal, intact for a parser


def test_session_commands_print_metadata_and_records_inert(home: Path, work: Path) -> None:
    evil = work / PAYLOAD  # a working dir must exist (issue 13): one named with the attack
    evil.mkdir()
    made = infai(home, "session", "new", "--name", PAYLOAD, "--working-dir", str(evil))
    sid = made.stdout.strip()
    store = Store(home)
    assert store.info(sid).name == PAYLOAD  # stored as given: only its showing is inert
    store.close()
    eid = infai(home, "session", "append", sid, "--kind", "message", "--role", "user",
                "--content", PAYLOAD).stdout.strip()  # fmt: skip
    human = [
        ("session", "ls"),
        ("session", "show", sid, eid),
        ("session", "context", sid),
        ("session", "log", sid),
        ("session", "tree", sid),
    ]
    for args in human:
        out = infai(home, *args)
        assert_inert(out.stdout_bytes, shown=args[1] in ("ls", "show", "context"))
    for args in [*human, ("session", "new", "--name", PAYLOAD)]:
        out = infai(home, *args, "--json")
        assert_inert(out.stdout_bytes, shown=False)
        json.loads(out.stdout)
    shown = json.loads(infai(home, "session", "show", sid, eid, "--json").stdout)
    assert shown["record"]["content"] == PAYLOAD


def test_an_export_is_inert_and_imports_to_the_same_text(home: Path, work: Path) -> None:
    sid = infai(home, "session", "new", "--name", PAYLOAD).stdout.strip()
    infai(home, "session", "append", sid, "--kind", "message", "--role", "user",
          "--content", PAYLOAD)  # fmt: skip
    exported = infai(home, "session", "export", sid)
    assert_inert(exported.stdout_bytes, shown=False)
    infai(home, "session", "export", sid, "-o", str(work / "out.jsonl"))
    assert (work / "out.jsonl").read_bytes() == exported.stdout_bytes
    infai(home, "session", "rm", sid)
    infai(home, "session", "import", str(work / "out.jsonl"))
    store = Store(home)
    assert store.info(sid).name == PAYLOAD
    with store.open_reader(sid) as reader:
        [event] = reader.context().events
        assert isinstance(event.record, MessageRecord) and event.record.content == PAYLOAD
    store.close()


def test_error_messages_that_quote_input_are_inert(home: Path, work: Path) -> None:
    sid = infai(home, "session", "new").stdout.strip()
    for args in [
        ("session", "show", sid, PAYLOAD),  # not an event id: the store quotes it
        ("session", "log", PAYLOAD),  # not a session id
        ("session", "append", sid, "--kind", PAYLOAD, "--role", "user"),  # click's own
        ("session", "import", f"/nonexistent/{PAYLOAD}"),
    ]:
        out = infai(home, *args, code=2)
        assert_inert(out.stderr_bytes, shown=False)
        assert "pwned" in out.stderr, args  # the input is quoted, visibly


def test_search_output_is_inert(home: Path, work: Path) -> None:
    """``infai search`` draws hits with rich: a session's name and an event's text
    carrying the attacks still reach the terminal inert."""
    sid = infai(home, "session", "new", "--name", PAYLOAD).stdout.strip()
    infai(home, "session", "append", sid, "--kind", "message", "--role", "user",
          "--content", f"quokka {PAYLOAD} [bold]x[/bold]")  # fmt: skip
    out = infai(home, "search", "quokka")
    assert "quokka" in out.stdout and "[bold]x[/bold]" in out.stdout
    assert_inert(out.stdout_bytes, shown=False)
    assert_inert(out.stderr_bytes, shown=False)
    assert_inert(infai(home, "search", "quokka", "--json").stdout_bytes, shown=False)


def _code_lines(source: Path) -> list[str]:
    """``source``'s lines with the text of its string literals blanked: a
    program the doctor runs in the sandbox (``"print('ran')"``) prints nothing here."""
    lines = source.read_text().splitlines()
    with source.open("rb") as handle:
        strings = [t for t in tokenize.tokenize(handle.readline) if t.type == tokenize.STRING]
    for token in reversed(strings):
        (row, col), (end_row, end_col) = token.start, token.end
        for at in range(row, end_row + 1):
            text = lines[at - 1]
            start = col if at == row else 0
            end = end_col if at == end_row else len(text)
            lines[at - 1] = text[:start] + " " * (end - start) + text[end:]
    return lines


def test_every_line_the_command_line_prints_goes_through_the_sanitizer() -> None:
    """Only ``common`` calls ``click.echo`` (its ``echo`` and ``emit_json``), and
    JSON lines, elsewhere, only through ``inert_json``."""
    sources = sorted((Path(__file__).resolve().parents[3] / "src/infai/shells/cli").glob("*.py"))
    assert len(sources) > 5
    offenders = []
    for source in sources:
        for number, line in enumerate(_code_lines(source), 1):
            if source.name != "common.py" and "click.echo(" in line and "inert_json(" not in line:
                offenders.append(f"{source.name}:{number}: {line.strip()}")
            printed = "print(" in line and "console.print(" not in line  # rich: judged below
            if "json.dumps(" in line or "sys.stdout.write(" in line or printed:
                offenders.append(f"{source.name}:{number}: {line.strip()}")
    assert offenders == []
