"""A read deny holds for the file, not only for its name.

Finding (issue 28, medium): with ``deny read_file .env``, a hard link to ``.env``
made by an allowed command read it, and under ``allow edit_file *`` an edit with
equal old and new text told the model whether the denied file held a guess.
Judged by effect: the secret never reaches a tool's output.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from infai.tools import Policy, Rule, ToolContext, ToolOutput, builtin_tools

SECRET = "API_KEY=sk-live-123"


def through(policy: Policy, root: Path, tool: str, **arguments: Any) -> ToolOutput:
    """Decide, then run the real tool if allowed (what the loop does)."""
    context = ToolContext(root, "s", readable=policy.may_read, reads_denied=policy.denies_reads())
    decision = asyncio.run(policy.decide(tool, arguments, context))
    if not decision.allowed:
        return ToolOutput(f"permission denied by {decision.by}: {decision.reason}", True)
    tools = {t.spec.name: t for t in builtin_tools()}
    return asyncio.run(tools[tool].run(arguments, context))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".env").write_text(SECRET + "\n")
    os.link(work / ".env", work / "notes.txt")  # what an allowed `ln .env notes.txt` makes
    (work / "plain.txt").write_text("nothing secret\n")
    return work


POLICY = [
    Rule.parse("deny", "read_file .env"),
    Rule.parse("allow", "edit_file *"),
    Rule.parse("allow", "read_file *"),
]


def test_a_hard_link_to_a_denied_file_is_not_read(work: Path) -> None:
    policy = Policy(POLICY)
    out = through(policy, work, "read_file", path="notes.txt")
    assert SECRET not in out.content and "hard links" in out.content
    for tool, arguments in (("grep", {"pattern": "sk-live"}), ("list_files", {"pattern": "*"})):
        out = through(policy, work, tool, **arguments)
        assert SECRET not in out.content and "notes.txt" not in out.content, tool
    assert "plain.txt" in through(policy, work, "list_files", pattern="*").content
    # the control: with no read deny rule, the linked file reads as any other
    open_policy = Policy([Rule.parse("allow", "read_file *")])
    assert SECRET in through(open_policy, work, "read_file", path="notes.txt").content


def test_an_edit_of_a_denied_file_is_refused_so_it_is_no_oracle(work: Path) -> None:
    policy = Policy(POLICY)
    for guess in (SECRET, "API_KEY=sk-wrong"):
        out = through(policy, work, "edit_file", path=".env", old_text=guess, new_text=guess)
        assert out.is_error and "may not be read" in out.content
    assert (work / ".env").read_text() == SECRET + "\n"
    # an ordinary file is still edited under the same rules
    out = through(policy, work, "edit_file", path="plain.txt", old_text="nothing", new_text="no")
    assert not out.is_error and (work / "plain.txt").read_text() == "no secret\n"


def test_a_file_swapped_for_a_hard_link_after_the_walk_is_not_read(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """grep judged the file while walking, then opened it: a command running beside
    it that swaps the plain file for a hard link to ``.env`` in that gap (forced
    here, between the walk and the read) does not get the secret read. What decides
    is the file grep opened (its descriptor's link count), not the one it judged."""
    from infai.tools import search

    (work / "notes.txt").unlink()
    (work / "notes.txt").write_text("harmless notes sk-live\n")
    judged = search.matches

    def then_swapped(*args: Any, **kwargs: Any) -> search.Found:
        found = judged(*args, **kwargs)
        (work / "notes.txt").unlink()
        os.link(work / ".env", work / "notes.txt")
        return found

    monkeypatch.setattr(search, "matches", then_swapped)
    out = through(Policy(POLICY), work, "grep", pattern="sk-live")
    assert SECRET not in out.content, out.content
