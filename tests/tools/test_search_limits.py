"""grep and list_files name and read only what the read rules allow and what leads
into the directory searched; they skip what would hang or flood them, and a
catastrophic regular expression is stopped by a time limit.

Judged by effect: a denied secret absent from the output, a file outside not
named, a search that returns within seconds.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from infai.tools import ToolContext, ToolOutput, builtin_tools
from infai.tools import search as search_module
from infai.tools.common import MAX_MATCHES


def run(root: Path, tool_name: str, readable: Any = None, **arguments: Any) -> ToolOutput:
    tool = {t.spec.name: t for t in builtin_tools()}[tool_name]
    context = ToolContext(root, "session")
    if readable is not None:
        context = ToolContext(root, "session", readable=readable)
    return asyncio.run(tool.run(arguments, context))


def no_env(name: str) -> bool:
    """A read rule like ``deny read_file .env`` (and ``**/.env``)."""
    return name != ".env" and not name.endswith("/.env")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "app.py").write_text("API_KEY = os.environ['API_KEY']\n")
    (work / ".env").write_text("API_KEY=sk-live-123\n")
    (work / "src" / ".env").write_text("API_KEY=sk-live-456\n")
    (work / "innocent.txt").symlink_to(work / ".env")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("API_KEY=sk-outside\n")
    return work


def _grep_within(seconds: float, root: Path, **arguments: Any) -> ToolOutput:
    """grep in a daemon thread, so a regression fails the test instead of hanging it."""
    outcome: list[ToolOutput] = []
    worker = threading.Thread(
        target=lambda: outcome.append(run(root, "grep", **arguments)), daemon=True
    )
    worker.start()
    worker.join(seconds)
    assert outcome, f"grep ran for over {seconds}s"
    return outcome[0]


def test_denied_files_never_appear_in_grep_or_list_files(work: Path) -> None:
    """The old tools read and named every file, whatever the read rules said; a link
    to .env under another name is denied too (it is checked as what it reaches)."""
    hits = run(work, "grep", no_env, pattern="API_KEY")
    assert "sk-live" not in hits.content
    assert "src/app.py:1:" in hits.content
    assert "3 paths the read rules deny left out" in hits.content
    listed = run(work, "list_files", no_env, pattern="**/*").content
    assert ".env" not in listed and "innocent.txt" not in listed
    assert "src/app.py" in listed
    one = run(work, "grep", no_env, pattern="API_KEY", path="innocent.txt")
    assert "sk-live" not in one.content
    everything = run(work, "grep", None, pattern="sk-live")  # no rules: all readable
    assert everything.content.count("sk-live") == 3


def test_glob_matches_through_links_out_are_neither_named_nor_read(work: Path) -> None:
    """``ldir/*`` through a linked directory, and a link named in the pattern: the
    old list_files named the files outside."""
    (work / "ldir").symlink_to(work.parent / "outside", target_is_directory=True)
    (work / "lfile").symlink_to(work.parent / "outside" / "secret.txt")
    listed = run(work, "list_files", pattern="ldir/*")
    assert "secret" not in listed.content and "(no matches)" in listed.content
    assert "1 links leading out" in listed.content
    assert "lfile" not in run(work, "list_files", pattern="lfile").content
    assert "lfile" not in run(work, "list_files", pattern="*").content
    found = run(work, "grep", pattern="sk-outside", glob="ldir/*")
    assert "sk-outside" not in found.content and "(no matches)" in found.content
    assert "sk-outside" not in run(work, "grep", pattern="sk-outside").content


def test_grep_skips_a_fifo_without_waiting(work: Path) -> None:
    """The old grep opened the FIFO to read it and waited for a writer for ever."""
    os.mkfifo(work / "src" / "pipe.py")
    started = time.monotonic()
    out = _grep_within(5, work, pattern="API")
    assert time.monotonic() - started < 1
    assert "src/app.py:1:" in out.content and "pipe" not in out.content


def test_grep_caps_what_it_reads(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file over the cap is skipped (and the output says so); the old grep read a
    file whole, however big."""
    big = work / "big.log"
    with big.open("w") as handle:
        handle.write(("x" * 1023 + "\n") * (5 << 10))  # 5 MiB
        handle.write("API_KEY in the big file\n")
    out = run(work, "grep", pattern="API_KEY")
    assert "big.log" not in out.content and "1 files over 4 MiB not searched" in out.content
    monkeypatch.setattr(search_module, "MAX_TOTAL_BYTES", 40)
    for n in range(5):
        (work / f"f{n}.txt").write_text("API_KEY here\n")
    out = run(work, "grep", pattern="API_KEY")
    assert "stopped after reading" in out.content
    assert out.content.count("API_KEY here") < 5


def test_a_catastrophic_regex_is_stopped_by_a_time_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``(a+)+$`` on 30 a's and a b: the old grep (Python's re) backtracked for
    hours. ``(a|a)+$`` backtracks even in the regex package: the limit stops it."""
    (tmp_path / "a.txt").write_text("a" * 30 + "b\n")
    started = time.monotonic()
    out = _grep_within(5, tmp_path, pattern="(a+)+$")
    assert not out.is_error and "(no matches)" in out.content
    monkeypatch.setattr(search_module, "REGEX_SECONDS", 0.5)
    out = _grep_within(5, tmp_path, pattern="(a|a)+$")
    assert out.is_error and "timed out after 0.5s" in out.content
    assert time.monotonic() - started < 30  # hours without the limit; generous on a loaded machine


LINEWISE_PATTERNS = [
    "a", "^a", "a$", "^$", "a.*b", "[^a]+$", r"\s+$", r"\bab\b", "(?i)A", "(?im)^a$",
    r"(?<!a)b", r"b(?!\n)", r"\Aa", r"a\Z", "a*+$", "[^x]*+$", r"(a|b)\1", "(?s)a.b",
    r"\n", "x?$", "^(a|b)*$", r"\r", "[ \t]$", "b{2}+$",
]  # fmt: skip


@given(text=st.text(alphabet="ab x\n\r\t\x0c\u2028", max_size=40))
@settings(max_examples=150, deadline=None)
def test_the_whole_file_first_pass_never_loses_a_line(text: str) -> None:
    """grep searches a file whole before going line by line (the time limit is
    costly per call): the lines found must be exactly those a line-by-line
    search finds, for every kind of pattern."""
    lines = text.splitlines()
    for source in LINEWISE_PATTERNS:
        expected = [(n, line) for n, line in enumerate(lines, 1) if regex.search(source, line)]
        found = list(search_module.Matcher(source).lines(lines, search_module._Budget()))
        assert found == expected, source


def _deep_tree(root: Path, depth: int, fanout: int = 3) -> int:
    """A tree of ``fanout`` directories per level, each with one ``f.txt``; their count."""
    if depth == 0:
        return 0
    count = 0
    for i in range(fanout):
        child = root / f"d{i}"
        child.mkdir(parents=True)
        (child / "f.txt").write_text("x")
        count += 1 + _deep_tree(child, depth - 1, fanout)
    return count


def _within(seconds: float, call: Any) -> ToolOutput:
    outcome: list[ToolOutput] = []
    worker = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert outcome, f"the glob ran for over {seconds}s"
    return outcome[0]


def test_repeated_double_stars_walk_the_tree_once(tmp_path: Path) -> None:
    """Finding (issue 28, low): ``list_files`` with repeated ``**`` ran for over 90 s;
    eight of them on a 363-directory tree take minutes on the old code."""
    files = _deep_tree(tmp_path, 5)
    pattern = "/".join(["**"] * 8) + "/*.txt"
    listed = _within(30, lambda: run(tmp_path, "list_files", pattern=pattern))
    assert not listed.is_error
    assert len(listed.content.splitlines()) == min(files, MAX_MATCHES) + (
        1 if files > MAX_MATCHES else 0
    )
    grepped = _within(30, lambda: run(tmp_path, "grep", pattern="x", glob="**/**/**/*.txt"))
    assert "d0/f.txt:1:x" in grepped.content


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("list_files", {"pattern": "**/d*/**/d*/**/d*/**/*.txt"}),
        ("grep", {"pattern": "x", "glob": "d*/**/d*/**/*.txt"}),
    ],
)
def test_chained_double_stars_are_refused_with_the_reason(
    tmp_path: Path, tool: str, arguments: dict[str, str]
) -> None:
    _deep_tree(tmp_path, 3)
    result = run(tmp_path, tool, **arguments)
    assert result.is_error
    assert "'**' segments; at most" in result.content


def test_a_glob_walk_stops_at_its_budget_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _deep_tree(tmp_path, 4)
    monkeypatch.setattr(search_module, "MAX_GLOBBED", 50)
    listed = run(tmp_path, "list_files", pattern="**/*")
    assert "[walk stopped after 50 paths; narrow the pattern]" in listed.content
    assert len([line for line in listed.content.splitlines() if not line.startswith("[")]) <= 50
    monkeypatch.setattr(search_module, "MAX_GLOBBED", 10**6)
    monkeypatch.setattr(search_module, "GLOB_SECONDS", 0.0)
    grepped = run(tmp_path, "grep", pattern="x")
    assert "[walk stopped after 0s; narrow the pattern]" in grepped.content
