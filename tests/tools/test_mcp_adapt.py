"""MCP names, schemas, results and rules: the pure parts, no server needed."""

from __future__ import annotations

from pathlib import Path

import mcp_types
import pytest

from infai.tools import Policy, Rule, RuleError, ToolContext
from infai.tools.landlock import interpreter
from infai.tools.mcp import ServerConfig, tool_name
from infai.tools.mcp.adapt import MAX_DEPTH, schema_problem, to_output
from infai.tools.mcp.config import MissingVariable, expand


def test_names_are_what_providers_accept_and_long_ones_stay_apart() -> None:
    assert tool_name("github", "list_issues") == "mcp__github__list_issues"
    assert tool_name("s", "a.b/c d!") == "mcp__s__a_b_c_d_"
    one, two = tool_name("s", "x" * 80 + "1"), tool_name("s", "x" * 80 + "2")
    assert len(one) == len(two) == 64 and one != two
    assert all(c.isalnum() or c in "_-" for c in one)


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "string"}, "type is 'string'"),
        (["not", "a", "dict"], "not a JSON object"),
        ({"type": "object", "properties": []}, "properties is not an object"),
        ({"type": "object", "required": "x"}, "required is not a list"),
        ({"type": "object", "properties": {"a": {"$ref": "https://x/s.json"}}}, "outside"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/b"}}}, "not in it"),
    ],
)
def test_schemas_infai_cannot_use_say_why(schema: object, why: str) -> None:
    problem = schema_problem(schema)
    assert problem is not None and why in problem


def test_usable_schemas_pass_and_depth_is_bounded() -> None:
    local = {
        "type": "object",
        "$defs": {"b": {"type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/b"}},
    }
    assert schema_problem(local) is None
    assert schema_problem({"type": "object"}) is None
    deep: dict[str, object] = {"type": "string"}
    for _ in range(MAX_DEPTH):
        deep = {"type": "object", "properties": {"a": deep}}
    problem = schema_problem(deep)
    assert problem is not None and "deeper than" in problem


def test_results_become_outputs_text_joined_others_described() -> None:
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="one"),
            mcp_types.ImageContent(data="AAAA", mime_type="image/png"),
            mcp_types.TextContent(text="two"),
        ],
        structured_content={"n": 1},
        is_error=True,
    )
    out = to_output(result, "s", "t")
    assert out.content == "one\n[image image/png, 3 bytes, not shown]\ntwo"
    assert out.is_error and out.metadata["structured"] == {"n": 1}
    only = to_output(mcp_types.CallToolResult(content=[], structured_content={"n": 2}), "s", "t")
    assert only.content == '{"n": 2}' and not only.is_error


def test_variables_in_values_are_filled_in_or_named_when_missing() -> None:
    assert expand("Bearer ${TOKEN}", {"TOKEN": "abc"}) == "Bearer abc"
    with pytest.raises(MissingVariable, match=r"\$\{NOPE\} is not set"):
        expand("${NOPE}", {})


def test_include_and_exclude_tools() -> None:
    server = ServerConfig("s", command="x", include_tools=("list_*",), exclude_tools=("*_all",))
    assert server.offers("list_issues") and not server.offers("list_all")
    assert not server.offers("delete")


def test_rules_name_mcp_tools_and_patterns_over_them(tmp_path: Path) -> None:
    import asyncio

    context = ToolContext(tmp_path, "s")
    policy = Policy(
        [
            Rule.parse("allow", "mcp__github__*"),
            Rule.parse("deny", "mcp__github__delete_repo"),
        ]
    )

    def verdict(tool: str) -> str:
        return asyncio.run(policy.decide(tool, {}, context)).verdict

    assert verdict("mcp__github__list_issues") == "allow"
    assert verdict("mcp__github__delete_repo") == "deny"
    assert verdict("mcp__other__list") == "deny"  # asks; nobody can approve here
    assert policy.rule_on("mcp__other__list", {}, context).verdict == "ask"
    # a name with no glob must still be a tool that can exist
    assert Rule.parse("allow", "mcp__github__list_issues").tool == "mcp__github__list_issues"
    with pytest.raises(RuleError):
        Rule.parse("allow", "github__list_issues")


def test_default_allowance_for_trusted_read_only_tools_never_beats_a_rule(
    tmp_path: Path,
) -> None:
    context = ToolContext(tmp_path, "s")
    policy = Policy([Rule.parse("ask", "mcp__s__count")])
    policy.defaults = lambda tool: "read-only" if tool.startswith("mcp__s__") else None
    assert policy.rule_on("mcp__s__list", {}, context).verdict == "allow"
    assert policy.rule_on("mcp__s__count", {}, context).verdict == "ask"  # the rule wins
    assert policy.rule_on("mcp__other__x", {}, context).verdict == "ask"
    child = policy.delegate("subagent")
    assert child.rule_on("mcp__s__list", {}, context).verdict == "allow"


def test_allow_always_for_an_mcp_tool_names_the_tool() -> None:
    from infai.tools import always_rules

    assert [str(r) for r in always_rules("mcp__s__t", "")] == ["allow mcp__s__t *"]


def test_a_source_tool_whose_name_is_taken_is_left_out_with_one_notice(tmp_path: Path) -> None:
    import asyncio

    from infai.llm import ToolSpec
    from infai.tools import Toolbox, ToolOutput, builtin_tools

    class Named:
        def __init__(self, name: str) -> None:
            self.spec = ToolSpec(name, "from a source")

        async def run(self, arguments: dict[str, object], context: ToolContext) -> ToolOutput:
            return ToolOutput("source")

    class Source:
        def tools(self) -> list[Named]:
            return [Named("read_file"), Named("mcp__s__x")]

        async def prepare(self) -> list[str]:
            return []

    box = Toolbox(builtin_tools())
    box.attach(Source())  # type: ignore[arg-type]
    first, second = asyncio.run(box.prepare()), asyncio.run(box.prepare())
    assert first == ["tool 'read_file' left out: another tool has that name"] and second == []
    names = [spec.name for spec in box.specs()]
    assert names.count("read_file") == 1 and names[-1] == "mcp__s__x"
    builtin = box.get("read_file")
    assert builtin is not None and builtin.spec.description != "from a source"


def test_an_argv_launch_is_confined_with_its_own_network_setting(tmp_path: Path) -> None:
    from infai.tools import Sandbox, SandboxSettings

    sandbox = Sandbox(SandboxSettings(network=True), bwrap="/bin/true")
    from infai.tools.sandbox import _PROBES, Probe

    _PROBES["/bin/true"] = Probe(True, "/bin/true")  # as if bubblewrap worked here
    try:
        closed = sandbox.launch_argv(["srv", "--x"], tmp_path, seccomp_fd=3)
        opened = sandbox.launch_argv(["srv"], tmp_path, network=True, seccomp_fd=3)
    finally:
        del _PROBES["/bin/true"]
    assert closed.confined and closed.argv[-2:] == ["srv", "--x"]
    assert closed.argv.index("--") < closed.argv.index(interpreter())  # the starter
    assert "--share-net" not in closed.argv  # the commands' network is not the server's
    assert "--share-net" in opened.argv
    assert closed.fds == () and "--unshare-all" in closed.argv
    off = Sandbox.off().launch_argv(["srv"], tmp_path)
    assert off.argv == ["srv"] and not off.confined and "GIT_CONFIG_COUNT" in off.env
