"""``@tool``: a typed function becomes a tool whose schema is its signature, which
runs off the event loop, behind the policy by the effects it declares, and is
recorded in the tool manifest of the session that offered it."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any, Literal

import pytest

from infai.agent import AgentSession, load_manifest, manifest_of
from infai.llm import Message, ScriptedModel, ToolCall
from infai.store import MessageRecord, Store, ToolResultRecord
from infai.tools import (
    FunctionTool,
    Policy,
    Rule,
    RuleError,
    Toolbox,
    ToolContext,
    ToolDefinitionError,
    ToolOutput,
    tool,
)
from infai.tools.effects import forget
from infai.tools.policy import Ask, Reply


@tool(reads=("path",))
def count_lines(path: Path, blank: bool = False, limit: int | None = None) -> str:
    """Count the lines of a file.

    Longer prose stays in the description.

    Args:
        path: the file, relative to the working directory
        blank: count blank lines too,
            which are skipped otherwise
        limit: stop counting here
    """
    lines = path.read_text().splitlines()
    counted = [line for line in lines if blank or line.strip()]
    return str(min(len(counted), limit) if limit is not None else len(counted))


@tool(writes=("target",), name="save_note")
async def save(target: Path, text: str, mode: Literal["append", "replace"] = "replace") -> str:
    """Save a note to a file.

    Args:
        target: where
        text: what
        mode: add to the file or replace it
    """
    if mode == "append" and target.exists():
        text = target.read_text() + text
    target.write_text(text)
    return f"saved {len(text)} characters"


@tool(network=True)
def fetch(url: str, tags: list[str] | None = None, ratio: float = 0.5) -> dict[str, Any]:
    """Fetch a URL (a stand-in: nothing is fetched)."""
    return {"url": url, "tags": tags or [], "ratio": ratio}


THREADS: list[str] = []


@tool
def where_am_i(context: ToolContext) -> str:
    """Say which thread runs this and where."""
    THREADS.append(threading.current_thread().name)
    return f"{context.working_dir.name} {context.session_id}"


def test_the_schema_is_the_signature_and_the_docstring() -> None:
    spec = count_lines.spec
    assert spec.name == "count_lines"
    assert (
        spec.description == "Count the lines of a file.\n\nLonger prose stays in the description."
    )
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "the file, relative to the working directory",
            },
            "blank": {
                "type": "boolean",
                "description": "count blank lines too, which are skipped otherwise",
                "default": False,
            },
            "limit": {"type": "integer", "description": "stop counting here"},
        },
        "required": ["path"],
    }
    assert save.spec.name == "save_note"
    assert save.spec.parameters["properties"]["mode"] == {
        "type": "string",
        "enum": ["append", "replace"],
        "description": "add to the file or replace it",
        "default": "replace",
    }
    assert save.spec.parameters["required"] == ["target", "text"]
    props = fetch.spec.parameters["properties"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["ratio"] == {"type": "number", "default": 0.5}
    assert where_am_i.spec.parameters == {"type": "object", "properties": {}, "required": []}
    assert count_lines(Path(__file__)) == count_lines.fn(Path(__file__))  # still a function


def _bad(fn: Any, **options: Any) -> str:
    with pytest.raises(ToolDefinitionError) as caught:
        tool(**options)(fn)
    return str(caught.value)


def test_bad_signatures_are_errors_at_decoration_naming_function_and_parameter() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        """Doc."""

    def star(*names: str) -> None:
        """Doc."""

    def odd(x: dict[str, int]) -> None:
        """Doc."""

    def undocumented(x: int) -> None:
        pass

    def stray(x: int) -> None:
        """Doc.

        Args:
            y: not a parameter
        """

    def mixed(x: Literal["a", 1]) -> None:
        """Doc."""

    def reads_int(x: int) -> None:
        """Doc."""

    assert ".untyped'" in _bad(untyped) and "'x': no type annotation" in _bad(untyped)
    assert "*args and **kwargs" in _bad(star)
    assert "parameter 'x': type dict[str, int] is not supported" in _bad(odd)
    assert "no description" in _bad(undocumented)
    assert "Args section names 'y'" in _bad(stray)
    assert "Literal choices" in _bad(mixed)
    assert "reads/writes name 'x', which is not a str or Path" in _bad(reads_int, reads=("x",))
    assert "reads/writes name 'nope'" in _bad(reads_int, writes=("nope",))
    assert "built-in tool" in _bad(reads_int, name="bash")
    assert "built-in tool" in _bad(reads_int, name="mcp__x__y")
    assert "name 'a b'" in _bad(reads_int, name="a b")


def run(tool_: FunctionTool, root: Path, **arguments: Any) -> ToolOutput:
    return asyncio.run(tool_.run(arguments, ToolContext(root, "sid")))


def test_calls_convert_arguments_run_off_the_loop_and_report_failures(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\n\nb\nc\n")
    assert run(count_lines, tmp_path, path="f.txt").content == "3"
    assert run(count_lines, tmp_path, path="f.txt", blank=True, limit="2").content == "2"
    assert run(save, tmp_path, target="n.md", text="hi", mode="append").content.startswith("saved")
    assert (tmp_path / "n.md").read_text() == "hi"
    bad_mode = run(save, tmp_path, target="n.md", text="x", mode="prepend")
    assert bad_mode.is_error and "'mode' must be one of 'append', 'replace'" in bad_mode.content
    unknown = run(count_lines, tmp_path, path="f.txt", colour="red")
    assert unknown.is_error and "unknown argument 'colour'" in unknown.content
    missing = run(count_lines, tmp_path, path="gone.txt")
    assert missing.is_error and "count_lines failed: FileNotFoundError" in missing.content
    assert json.loads(run(fetch, tmp_path, url="u", tags=["a"]).content) == {
        "url": "u",
        "tags": ["a"],
        "ratio": 0.5,
    }
    THREADS.clear()
    assert run(where_am_i, tmp_path).content == f"{tmp_path.name} sid"
    assert THREADS and THREADS[0] != threading.main_thread().name  # a worker thread


def decide(policy: Policy, root: Path, name: str, **arguments: Any) -> tuple[str, str]:
    decision = asyncio.run(policy.decide(name, arguments, ToolContext(root, "s")))
    return decision.verdict, decision.reason or decision.by


def test_the_policy_rules_on_the_declared_effects(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("SECRET=1\n")
    (tmp_path / "notes.md").write_text("x\n")
    bare = Policy()
    # a read inside the working directory is allowed, as read_file's is; outside asks
    assert decide(bare, tmp_path, "count_lines", path="notes.md")[0] == "allow"
    assert decide(bare, tmp_path, "count_lines", path="/etc/hostname")[0] == "deny"  # no approver
    # read_file's deny rule binds every tool that reads the file, by any name of it
    guarded = Policy([Rule.parse("deny", "read_file .env")])
    assert decide(guarded, tmp_path, "count_lines", path="sub/../.env")[0] == "deny"
    # writes ask, as write_file's do, and never reach infai's own files
    assert "save_note writes n.md" in decide(bare, tmp_path, "save_note", target="n.md", text="")[1]
    protected = Policy(protected=[tmp_path / "conf"])
    verdict, why = decide(protected, tmp_path, "save_note", target="conf/x", text="")
    assert verdict == "deny" and "infai's own files" in why
    allowed = Policy([Rule.parse("allow", "save_note *.md")])
    assert decide(allowed, tmp_path, "save_note", target="n.md", text="")[0] == "allow"
    assert decide(allowed, tmp_path, "save_note", target=".git/config", text="")[0] == "deny"
    # write_file's deny rules bind it; an allow for write_file does not reach another tool
    no_md = Policy([Rule.parse("deny", "write_file *.md"), Rule.parse("allow", "write_file *")])
    assert decide(no_md, tmp_path, "save_note", target="n.md", text="")[0] == "deny"
    # the network asks unless a rule names the tool; a tool declaring nothing is allowed
    assert "reaches the network" in decide(bare, tmp_path, "fetch", url="u")[1]
    assert decide(Policy([Rule.parse("allow", "fetch")]), tmp_path, "fetch", url="u")[0] == "allow"
    assert decide(bare, tmp_path, "where_am_i")[0] == "allow"
    assert decide(Policy([Rule.parse("deny", "where_am_i")]), tmp_path, "where_am_i")[0] == "deny"


def test_questions_name_the_effect_and_allow_always_remembers_it(tmp_path: Path) -> None:
    asked: list[Ask] = []

    async def approver(ask: Ask) -> Reply:
        asked.append(ask)
        return "allow-always"

    policy = Policy(approver=approver)
    assert decide(policy, tmp_path, "save_note", target="docs/a.md", text="")[0] == "allow"
    assert decide(policy, tmp_path, "save_note", target="docs/a.md", text="")[0] == "allow"
    assert decide(policy, tmp_path, "fetch", url="u")[0] == "allow"
    assert decide(policy, tmp_path, "fetch", url="v")[0] == "allow"
    assert [(a.tool, a.subject) for a in asked] == [("save_note", "docs/a.md"), ("fetch", "")]
    assert [str(r) for r in policy.rules] == ["allow save_note docs/a.md", "allow fetch *"]


def test_rules_may_name_a_declared_tool_and_no_unknown_one() -> None:
    assert str(Rule.parse("allow", "count_lines src/*")) == "allow count_lines src/*"
    with pytest.raises(RuleError, match="unknown tool 'count_linez'"):
        Rule.parse("allow", "count_linez")

    @tool(name="short_lived")
    def gone() -> str:
        """Briefly a tool."""
        return ""

    Rule.parse("deny", "short_lived")
    forget("short_lived")
    with pytest.raises(RuleError):
        Rule.parse("deny", "short_lived")


def test_a_session_calls_the_tool_and_records_it_in_the_manifest(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    work = tmp_path / "wd"
    work.mkdir()
    (work / "f.txt").write_text("one\ntwo\n")
    sid = store.create_session(working_dir=str(work)).id
    model = ScriptedModel(
        [
            Message(
                role="assistant",
                tool_calls=(ToolCall("c1", "count_lines", {"path": "f.txt"}),),
            ),
            "two lines",
        ]
    )
    session = AgentSession(
        store, sid, model=model, toolbox=Toolbox([count_lines]), permissions=Policy()
    )

    async def go() -> None:
        async for _ in session.prompt("count"):
            pass

    asyncio.run(go())
    with store.open_reader(sid) as reader:
        events = [reader.event(e.id) for e in reader.entries()]
    results = [e.record for e in events if isinstance(e.record, ToolResultRecord)]
    assert [(r.name, r.content, r.is_error) for r in results] == [("count_lines", "2", False)]
    replies = [e for e in events if isinstance(e.record, MessageRecord) and e.role == "assistant"]
    digest = manifest_of(replies[0])
    assert digest is not None
    tools = load_manifest(store.objects, digest)
    assert [t["name"] for t in tools] == ["count_lines"]
    assert tools[0]["parameters"] == count_lines.spec.parameters
    asyncio.run(session.aclose())
