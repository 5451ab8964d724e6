"""The approval dialog says why "allow always" is exact only or not offered, and
shows a subagent's call arguments (its transcript is not on the screen)."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.app import App

from infai.shells.tui.modals import GRACE, ApprovalScreen
from infai.tools import Ask, Rule

EXACT = Ask(
    "bash",
    "sed -i s/a/b/ f",
    "bash can change things",
    (Rule("allow", "bash", "sed -i s/a/b/ f"),),
    note="sed runs code or writes files through its options: only this exact command",
)
ESCALATION = Ask(
    "bash!",
    "make install",
    "subagent 'build' (session s2) asks: runs outside the sandbox",
    (),
    note="running outside the sandbox is asked every time; it is never allowed always",
    caller="subagent 'build' (session s2)",
    arguments={"command": "make install", "outside_sandbox": True},
)


def show(ask: Ask, keys: tuple[str, ...]) -> tuple[dict[str, str], list[Any]]:
    """Open the dialog, read its parts, press ``keys``; what it showed and answered."""
    answers: list[Any] = []
    shown: dict[str, str] = {}

    async def go() -> None:
        app: App[None] = App()
        async with app.run_test(size=(80, 24)) as pilot:
            await app.push_screen(ApprovalScreen(ask), callback=answers.append)
            await pilot.pause(GRACE + 0.05)
            screen = app.screen
            for part in ("note", "keys", "arguments"):
                found = screen.query(f"#{part}")
                shown[part] = str(found.first().render()) if found else ""
            for key in keys:
                await pilot.press(key)
                await pilot.pause(0.01)

    asyncio.run(go())
    return shown, answers


def test_the_dialog_says_why_allow_always_is_exact_only() -> None:
    shown, answers = show(EXACT, ("a",))
    assert "only this exact command" in shown["note"]
    assert "allow always: bash sed -i s/a/b/ f" in shown["keys"]
    assert shown["arguments"] == ""  # the session's own call: shown in the transcript
    assert answers == ["allow-always"]


def test_an_escalation_offers_no_allow_always_and_shows_the_subagents_arguments() -> None:
    shown, answers = show(ESCALATION, ("a", "e", "y"))
    assert "never allowed always" in shown["note"]
    assert "allow always" not in shown["keys"]
    assert '"outside_sandbox": true' in shown["arguments"]
    assert answers == ["allow"]  # "a" and "e" did nothing; "y" allowed once
