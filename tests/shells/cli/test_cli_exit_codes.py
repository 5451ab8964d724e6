"""The one table from the error tree to exit codes, and what stays out of it.

A user's mistake exits 2, a failure of the store (or any other error of the
tree) exits 1 with one line on stderr; an exception outside the tree (a bare
``ValueError``) is a bug and keeps its traceback instead of passing for bad
input.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from infai.errors import InfaiError
from infai.llm.providers import ModelUnavailable
from infai.shells.cli import main
from infai.shells.cli.errors import MODEL_HINT, BadInput, answer
from infai.store import CorruptionError, SessionNotFound, StoreError, StoreIOError


def test_bad_input_is_an_infai_error_that_click_reports_with_code_2() -> None:
    assert issubclass(BadInput, InfaiError) and issubclass(BadInput, click.ClickException)
    assert BadInput("no such thing").exit_code == 2


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (SessionNotFound("x"), 2, "no session x"),
        (ModelUnavailable("no model y"), 2, f"no model y\n  {MODEL_HINT}"),
        (CorruptionError("c.jsonl", 7, "bad line"), 1, "corruption: c.jsonl: offset 7: bad line"),
        (StoreIOError("disk full"), 1, "disk full"),
        (StoreError("lock not released"), 1, "lock not released"),
        (InfaiError("anything else infai says"), 1, "anything else infai says"),
    ],
)
def test_the_table_answers_the_tree(error: Exception, code: int, message: str) -> None:
    mapped = answer(error)
    assert mapped is not None
    assert (mapped.exit_code, mapped.format_message()) == (code, message)


@pytest.mark.parametrize("error", [ValueError("a bug"), KeyError("a bug"), TypeError("a bug")])
def test_errors_outside_the_tree_are_not_answered(error: Exception) -> None:
    assert answer(error) is None


def test_a_value_error_while_building_the_workspace_is_a_bug_not_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.agent import Harness

    def broken(self: object, *args: object, **kwargs: object) -> None:
        raise ValueError("a programming error")

    monkeypatch.setattr(Harness, "__init__", broken)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "run", "hi"])
    assert result.exit_code != 2
    assert isinstance(result.exception, ValueError)


def test_a_bad_model_name_and_a_bad_allow_rule_are_bad_input(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    wrong_model = CliRunner().invoke(main, ["--home", home, "run", "--model", "nope:x", "hi"])
    assert wrong_model.exit_code == 2, wrong_model.output
    wrong_rule = CliRunner().invoke(main, ["--home", home, "run", "--allow", "frobnicate", "hi"])
    assert wrong_rule.exit_code == 2 and "unknown tool" in wrong_rule.stderr
