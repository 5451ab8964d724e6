"""What the user answered "allow always" stays with the session, on both backends.

The rules are kept in the session's metadata (``extra.allowed``), so reopening
the session (another shell, a restart, a model switch) applies them again, and
a session whose kept rules are damaged says so instead of dropping them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.agent import AgentSession, TurnEnded
from infai.agent.session import KEPT_RULES, kept_rules
from infai.llm import Message, OfflineModel, ScriptedModel, ToolCall
from infai.store import InvalidInput, SessionStore, ToolResultRecord, open_store
from infai.tools import Policy, Rule, Toolbox, builtin_tools
from infai.tools.policy import Ask, Reply


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    location = str(tmp_path / "home") if request.param == "file" else None
    opened = open_store(location or request.getfixturevalue("pg_url"))
    try:
        yield opened
    finally:
        opened.close()


def write(path: str, content: str) -> Message:
    call = ToolCall("c1", "write_file", {"path": path, "content": content})
    return Message(role="assistant", content="", tool_calls=(call,))


def run(session: AgentSession, text: str) -> TurnEnded:
    async def go() -> TurnEnded:
        last: Any = None
        async for event in session.prompt(text):
            last = event
        assert isinstance(last, TurnEnded)
        return last

    return asyncio.run(go())


def permissions_of(store: SessionStore, sid: str) -> list[str]:
    with store.open_reader(sid) as reader:
        results = [e.record for e in reader.context().events if e.kind == "tool_result"]
    return [r.metadata["permission"]["by"] for r in results if isinstance(r, ToolResultRecord)]


def test_allow_always_is_kept_with_the_session_and_applies_after_reopening(
    store: SessionStore, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    sid = store.create_session(working_dir=str(work)).id
    asked: list[Ask] = []

    async def approver(ask: Ask) -> Reply:
        asked.append(ask)
        return "allow-always"

    model = ScriptedModel([write("notes/a.txt", "1"), "one", write("notes/b.txt", "2"), "two"])
    policy = Policy(approver=approver)
    with AgentSession(
        store, sid, model=model, toolbox=Toolbox(builtin_tools()), permissions=policy
    ) as session:
        assert run(session, "first").outcome == "done"
    assert [str(r) for r in asked[0].always] == ["allow write_file notes/*"]
    assert store.info(sid).extra[KEPT_RULES] == ["write_file notes/*"]

    # reopened headless (nobody can approve): the kept rule still allows the write
    headless = Policy()
    with AgentSession(
        store, sid, model=model, toolbox=Toolbox(builtin_tools()), permissions=headless
    ) as session:
        assert Rule("allow", "write_file", "notes/*") in headless.rules
        assert run(session, "second").outcome == "done"
    assert (work / "notes" / "b.txt").read_text() == "2"
    assert permissions_of(store, sid) == ["user", "rule 'allow write_file notes/*'"]
    assert len(asked) == 1


def test_rules_are_added_once_and_other_metadata_is_kept(
    store: SessionStore, tmp_path: Path
) -> None:
    sid = store.create_session(working_dir=str(tmp_path), name="kept").id
    store.update_info(sid, extra={"mine": 1})
    policy = Policy()
    with AgentSession(
        store, sid, model=OfflineModel(), toolbox=Toolbox(), permissions=policy
    ) as session:
        assert policy.remember is not None
        policy.remember([Rule("allow", "bash", "make test")])
        policy.remember([Rule("allow", "bash", "make test"), Rule("allow", "grep", "*")])
        assert session.session_id == sid
    info = store.info(sid)
    assert info.extra == {"mine": 1, KEPT_RULES: ["bash make test", "grep *"]}
    assert info.name == "kept"
    assert kept_rules(info) == [Rule("allow", "bash", "make test"), Rule("allow", "grep", "*")]


@pytest.mark.parametrize("damaged", ["bash x", ["bash x", 3], [""]])
def test_damaged_kept_rules_are_an_error_naming_them(
    store: SessionStore, tmp_path: Path, damaged: Any
) -> None:
    sid = store.create_session(working_dir=str(tmp_path)).id
    store.update_info(sid, extra={KEPT_RULES: damaged})
    with pytest.raises(InvalidInput, match=rf"session {sid} metadata, extra.allowed"):
        AgentSession(store, sid, model=OfflineModel(), toolbox=Toolbox(), permissions=Policy())
    # the writer lock was not left behind: the session opens once repaired
    store.update_info(sid, extra={})
    AgentSession(store, sid, model=OfflineModel(), toolbox=Toolbox(), permissions=Policy()).close()


def test_update_info_refuses_other_fields(store: SessionStore, tmp_path: Path) -> None:
    sid = store.create_session(working_dir=str(tmp_path)).id
    with pytest.raises(InvalidInput, match="cannot change"):
        store.update_info(sid, created_at="2020-01-01T00:00:00Z")
