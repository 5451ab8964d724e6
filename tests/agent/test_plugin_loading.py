"""The plugin loader in one process: entry points made by hand (as the packages'
metadata would declare them) over a module written for the test."""

from __future__ import annotations

import asyncio
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

import infai.agent
from infai.agent import plugins
from infai.agent.plugins import PluginError, PluginTools, load, load_context_rules

MODULE = '''
from infai.tools import tool

class Rule:
    name = "{tag}-rule"
    def apply(self, parts):
        return iter(())

RULE = Rule()
NOT_A_RULE = 42

@tool(name="{tag}_tool")
def the_tool(text: str) -> str:
    """Echo."""
    return text
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    tag = request.node.name.removeprefix("test_")[:20].replace("-", "_")
    name = f"plugin_target_{tag}"
    (tmp_path / f"{name}.py").write_text(MODULE.format(tag=tag))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def installed(monkeypatch: pytest.MonkeyPatch, *points: EntryPoint) -> None:
    def entries(group: str) -> list[EntryPoint]:
        return [ep for ep in points if ep.group == group]

    monkeypatch.setattr(plugins, "entries", entries)


def test_context_rules_go_to_the_pipeline_s_registration_once(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[Any] = []

    def register(rule: Any) -> Any:
        if not hasattr(rule, "apply"):
            raise TypeError(f"{rule!r} is not a context rule")
        given.append(rule)
        return rule

    monkeypatch.setattr(infai.agent, "register_context_rule", register, raising=False)
    good = EntryPoint("good", f"{module}:RULE", "infai.context")
    bad = EntryPoint("bad", f"{module}:NOT_A_RULE", "infai.context")
    installed(monkeypatch, good, bad)
    notices = load_context_rules()
    assert [rule.name for rule in given] == ["context_rules_go_to_-rule"]
    assert notices == [
        "plugin context rule 'bad' (? ?) skipped: TypeError: 42 is not a context rule"
    ]
    assert load_context_rules() == [
        "plugin context rule 'bad' (? ?) skipped: " + ("TypeError: 42 is not a context rule")
    ]
    assert len(given) == 1  # registered once, however many sessions open


def test_without_a_context_pipeline_registration_a_notice_says_so(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(infai.agent, "register_context_rule", raising=False)
    installed(monkeypatch, EntryPoint("lonely", f"{module}:RULE", "infai.context"))
    assert load_context_rules() == [
        "context rule plugins are not supported by this infai ('lonely')"
    ]


def test_tools_load_at_the_first_request_and_a_misnamed_one_is_skipped(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = "tools_load_at_the_fi"
    right = EntryPoint(f"{tag}_tool", f"{module}:the_tool", "infai.tools")
    wrong = EntryPoint("other_name", f"{module}:the_tool", "infai.tools")
    installed(monkeypatch, right, wrong)
    source = PluginTools()
    assert source.tools() == []  # nothing imported yet
    notices = asyncio.run(source.prepare())
    assert [t.spec.name for t in source.tools()] == [f"{tag}_tool"]
    assert notices == [
        f"plugin tool 'other_name' (? ?) skipped: {module}:the_tool is the tool "
        f"'{tag}_tool', but its entry point is named 'other_name'"
    ]
    assert asyncio.run(source.prepare()) == []  # said once
    with pytest.raises(PluginError, match="entry point is named 'other_name'"):
        load(wrong)  # the failure is kept: the module is not imported again
