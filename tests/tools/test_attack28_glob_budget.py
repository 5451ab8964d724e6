"""Red team (attack28): the glob walk's budget counted only the paths a pattern
*matched*: pathlib walks the whole tree inside ``glob`` and yields nothing for a
pattern that matches nothing, so ``**/no-such-name`` (or a chained
``**/*/**/no-such-name``) walked every directory, past the path budget and past
the deadline, in a worker thread nobody can cancel, and never said it stopped.
The budget now counts each directory the walk reads."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from infai.tools import ToolContext, search
from infai.tools.search import Grep, ListFiles


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for a in range(20):
        for b in range(20):
            (tmp_path / f"d{a}" / f"e{b}").mkdir(parents=True)
    (tmp_path / "d0" / "e0" / "f.txt").write_text("needle\n")
    return tmp_path


@pytest.mark.parametrize("pattern", ["**/no-such-name", "**/*/**/no-such-name"])
def test_a_walk_that_matches_nothing_is_still_stopped(
    tree: Path, pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "MAX_GLOBBED", 50)  # the tree has 420 directories
    context = ToolContext(tree, "s")
    listed = asyncio.run(ListFiles().run({"pattern": pattern}, context)).content
    assert "[walk stopped after 50 paths" in listed, listed
    grepped = asyncio.run(Grep().run({"pattern": "x", "glob": "no-such-name"}, context)).content
    assert "[walk stopped after 50 paths" in grepped, grepped


def test_the_deadline_holds_when_nothing_matches(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "GLOB_SECONDS", 0.0)
    context = ToolContext(tree, "s")
    listed = asyncio.run(ListFiles().run({"pattern": "**/no-such-name"}, context)).content
    assert "[walk stopped after 0s" in listed, listed


def test_a_small_walk_is_whole(tree: Path) -> None:
    """Control: within the budget, every match is found and nothing is said."""
    context = ToolContext(tree, "s")
    listed = asyncio.run(ListFiles().run({"pattern": "**/f.txt"}, context)).content
    assert listed == "d0/e0/f.txt"
    grepped = asyncio.run(Grep().run({"pattern": "needle"}, context)).content
    assert grepped == "d0/e0/f.txt:1:needle"
