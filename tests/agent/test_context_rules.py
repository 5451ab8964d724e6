"""Context rules: registration, the order and names in the configuration, what a
rule may decide (a dropped result takes its call along, and the other way), a
failing rule ends the turn with an error and sends nothing, and ``max_steps``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from infai.agent import (
    ContextDecision,
    ContextPart,
    ContextRuleFailed,
    Harness,
    TurnEnded,
    register_context_rule,
    run_turn,
    unregister_context_rule,
)
from infai.agent.config import ConfigError, load_config
from infai.agent.context import (
    BUILTIN_RULES,
    PRUNED_OUTPUT,
    ContextCache,
    ContextPipeline,
    context_pipeline,
)
from infai.agent.context.registry import RuleFunction
from infai.agent.context.rules import FunctionRule, builtin_rules
from infai.llm import Message, ScriptedModel, ToolCall
from infai.store import MessageRecord, Store, ToolCallRecord, ToolResultRecord
from infai.tools import AllowAll, Toolbox, ToolContext


class DropResults:
    name = "drop-results"

    def apply(self, parts: Sequence[ContextPart]) -> Iterator[ContextDecision]:
        for part in parts:
            if part.kind == "tool_result":
                yield part.drop("results are not wanted")


def _session(tmp_path: Path) -> tuple[Store, str]:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(MessageRecord(content="go"), "user")
        w.append(MessageRecord(content="calling"), "assistant")
        w.append(ToolCallRecord(call_id="a", name="t", arguments={}), "assistant")
        w.append(ToolResultRecord(call_id="a", name="t", content="out\n" * 50), "tool")
        w.append(MessageRecord(content="ok"), "assistant")
    return store, sid


def test_registration_by_object_and_function_and_what_is_refused() -> None:
    rule = DropResults()
    try:
        assert register_context_rule(rule) is rule
        register_context_rule(rule)  # again: a no-op
        with pytest.raises(ContextRuleFailed, match="already registered"):
            register_context_rule(DropResults())

        @register_context_rule
        def shout_less(parts: Sequence[ContextPart]) -> None:
            return None

        class Quiet:  # a class, as a plugin's entry point may name one
            name = "quiet"

            def apply(self, parts: Sequence[ContextPart]) -> None:
                return None

        register_context_rule(Quiet)
        register_context_rule(Quiet)  # again: a no-op
        names = context_pipeline().names
        assert names == (*BUILTIN_RULES, "drop-results", "shout-less", "quiet")
        assert isinstance(context_pipeline().rules[-1], Quiet)
        assert context_pipeline(names=["shout-less"]).names[-1] == "shout-less"
        unknown = "no context rule named 'nope' \\(there are: prune-tool-output, drop-results"
        with pytest.raises(ContextRuleFailed, match=unknown):
            context_pipeline(names=["nope"])
        with pytest.raises(ContextRuleFailed, match="built-in"):
            register_context_rule(lambda parts: None, name="gap-note")
        with pytest.raises(ContextRuleFailed, match="not a context rule"):
            register_context_rule(42)  # type: ignore[call-overload]
    finally:
        unregister_context_rule("drop-results")
        unregister_context_rule("shout-less")
        unregister_context_rule("quiet")
    assert context_pipeline().names == BUILTIN_RULES


def test_a_dropped_result_takes_its_call_along(tmp_path: Path) -> None:
    store, sid = _session(tmp_path)
    with store.open_reader(sid) as view:
        events = view.context().events
    plain = ContextPipeline.default().messages(events)
    assert [m.role for m in plain] == ["user", "assistant", "tool", "assistant"]
    explained = ContextPipeline([*builtin_rules(), DropResults()]).explain(events)
    # no call left waiting, so no "interrupted" result made up for it
    assert [(m.role, m.content, m.tool_calls) for m in explained.messages] == [
        ("user", "go", ()),
        ("assistant", "calling", ()),
        ("assistant", "ok", ()),
    ]
    call, result = explained.parts[2], explained.parts[3]
    assert (call.action, call.steps[-1].rule) == ("dropped", "assembly")
    assert "dropped by drop-results" in call.steps[-1].why
    assert (result.action, result.steps[-1].rule) == ("dropped", "drop-results")


def test_a_dropped_call_takes_its_result_along(tmp_path: Path) -> None:
    store, sid = _session(tmp_path)

    def no_calls(parts: Sequence[ContextPart]) -> Iterator[ContextDecision]:
        return (p.drop("no calls") for p in parts if p.kind == "tool_call")

    with store.open_reader(sid) as view:
        events = view.context().events
    pipeline = ContextPipeline([*builtin_rules(), _named(no_calls, "no-calls")])
    explained = pipeline.explain(events)
    assert [m.role for m in explained.messages] == ["user", "assistant", "assistant"]
    assert "its call was dropped by no-calls" in explained.parts[3].steps[-1].why


def _named(fn: RuleFunction, name: str) -> FunctionRule:
    return FunctionRule(name, fn)


def test_a_failing_rule_ends_the_turn_with_an_error_and_sends_nothing(tmp_path: Path) -> None:
    store, sid = _session(tmp_path)

    def broken(parts: Sequence[ContextPart]) -> None:
        raise KeyError("oops")

    def shortens_a_call(parts: Sequence[ContextPart]) -> Iterator[ContextDecision]:
        return (p.shorten("x", "why") for p in parts if p.kind == "tool_call")

    for rule, said in ((broken, "failed: KeyError"), (shortens_a_call, "drop it instead")):
        register_context_rule(rule)
        try:
            model = ScriptedModel(["never"])
            ended = asyncio.run(_one_turn(store, sid, model))
        finally:
            unregister_context_rule(rule.__name__.replace("_", "-"))
        assert ended.outcome == "error" and said in (ended.error or "")
        assert model.requests == []


async def _one_turn(
    store: Store, sid: str, model: ScriptedModel, names: list[str] | None = None
) -> TurnEnded:
    ended = TurnEnded("done")
    with store.open_writer(sid) as writer:
        async for item in run_turn(
            writer,
            model,
            "more",
            toolbox=Toolbox([]),
            permissions=AllowAll(),
            context=ToolContext(Path("."), sid),
            cache=ContextCache(writer, pipeline=context_pipeline(names=names)),
        ):
            if isinstance(item, TurnEnded):
                ended = item
    return ended


def test_config_names_rules_and_max_steps_and_refuses_bad_values(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    work = tmp_path / "work"
    (work / ".infai").mkdir(parents=True)
    user.write_text('max_steps = 7\n[context]\nrules = ["a", "b"]\n')
    config = load_config(work, user)
    assert (config.max_steps, config.context_rules) == (7, ("a", "b"))
    assert load_config(tmp_path, tmp_path / "none.toml").context_rules is None
    # an untrusted project may lower max_steps, not raise it, and not choose rules
    (work / ".infai" / "config.toml").write_text("max_steps = 900\n[context]\nrules = []\n")
    config = load_config(work, user)
    assert (config.max_steps, config.context_rules) == (7, ("a", "b"))
    assert any("[context] rules were left out" in w for w in config.warnings)
    (work / ".infai" / "config.toml").write_text("max_steps = 3\n")
    assert load_config(work, user).max_steps == 3
    for bad, said in (
        ("max_steps = 0", "max_steps: a whole number from 1"),
        ("max_steps = true", "max_steps: a whole number"),
        ('max_steps = "5"', "max_steps: a whole number"),
        ("[context]\nrules = [1]", "context.rules: must be a list of rule names"),
        ('[context]\nrules = ["a", "a"]', "context.rules: named twice: a"),
        ("[context]\nrule = []", "unknown key context.rule"),
    ):
        user.write_text(bad + "\n")
        with pytest.raises(ConfigError, match=said) as caught:
            load_config(tmp_path, user)
        assert str(user) in str(caught.value)


def test_max_steps_from_the_config_bounds_a_turn(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text("max_steps = 2\n")
    work = tmp_path / "work"
    work.mkdir()
    calls = [
        Message(role="assistant", tool_calls=(ToolCall(f"c{n}", "list_files", {}),))
        for n in range(5)
    ]
    model = ScriptedModel(calls)

    class Fixed(Harness):
        def build_model(self, name: str) -> ScriptedModel:
            return model

    async def go() -> list[TurnEnded]:
        harness = Fixed(Store(tmp_path / "home"), work, config=load_config(work, user))
        session = await asyncio.to_thread(harness.open)
        async with session:
            ends = [e async for e in session.prompt("loop") if isinstance(e, TurnEnded)]
        await harness.aclose()
        return ends

    (ended,) = asyncio.run(go())
    assert ended.error == "stopped after 2 model calls in one turn"
    assert len(model.requests) == 2


def test_prune_tool_output_runs_only_where_named_and_prunes_the_oldest(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        w.append(MessageRecord(content="go"), "user")
        for n in range(3):  # 25,000 estimated tokens each: only the newest fits 40,000
            w.append(ToolCallRecord(call_id=f"c{n}", name="t", arguments={}), "assistant")
            w.append(ToolResultRecord(call_id=f"c{n}", name="t", content=str(n) * 100_000), "tool")
    assert "prune-tool-output" not in context_pipeline().names  # opt-in
    asked = []
    for names in (None, ["prune-tool-output"]):
        model = ScriptedModel(["ok"])
        asyncio.run(_one_turn(store, sid, model, names))
        asked.append([m.content[:5] for m in model.requests[0].messages if m.role == "tool"])
    assert asked[0] == ["00000", "11111", "22222"]
    assert asked[1] == [PRUNED_OUTPUT[:5], PRUNED_OUTPUT[:5], "22222"]
