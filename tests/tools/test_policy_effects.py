"""Rules match what a call touches, judged by effect through the real tools.

Each call goes through the policy and then, if allowed, through the real tool,
as the agent loop does; an attack has worked if a secret shows up in the
output or a file that had to survive is gone or changed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from infai.tools import Policy, Rule, RuleError, ToolContext, ToolOutput, builtin_tools
from infai.tools.policy import NO_SANDBOX, AllowAlways, Ask, Reply, always_rules

SECRET = "API_KEY=sk-live-0123456789"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "wd"
    (root / "sub").mkdir(parents=True)
    (root / ".env").write_text(SECRET + "\n")
    (root / "notes.md").write_text("public\n")
    return root


def through(policy: Policy, root: Path, tool: str, **arguments: Any) -> ToolOutput:
    """Decide, then run the real tool if allowed (what the loop does)."""
    context = ToolContext(root, "s")
    decision = asyncio.run(policy.decide(tool, arguments, context))
    if not decision.allowed:
        return ToolOutput(f"permission denied by {decision.by}: {decision.reason}", True)
    tools = {t.spec.name: t for t in builtin_tools()}
    return asyncio.run(tools[tool].run(arguments, context))


def verdict(policy: Policy, root: Path, tool: str, **arguments: Any) -> tuple[str, str, str]:
    d = asyncio.run(policy.decide(tool, arguments, ToolContext(root, "s")))
    return d.verdict, d.by, d.reason


# -- paths: the resolved path, relative to the working directory ---------------------------------


def test_a_read_deny_rule_holds_for_every_way_of_naming_the_file(work: Path) -> None:
    (work / "link").symlink_to(work / ".env")
    (work / "sub" / "up").symlink_to("../.env")
    (work / "sub" / "dir-link").symlink_to(work)
    policy = Policy([Rule.parse("deny", "read_file .env"), Rule.parse("deny", "grep .env")])
    names = [
        ".env",
        "./.env",
        str(work / ".env"),
        f"../{work.name}/.env",
        "sub/../.env",
        "link",
        "sub/up",
        "sub/dir-link/.env",
        str(work / "sub" / ".." / "link"),
    ]
    for name in names:
        out = through(policy, work, "read_file", path=name)
        assert out.is_error and SECRET not in out.content, name
        assert "rule 'deny read_file .env'" in out.content, name
        found = through(policy, work, "grep", pattern="KEY", path=name)
        assert SECRET not in found.content, name
    # the deny rule names the file, not everything: the rest still reads
    assert through(policy, work, "read_file", path="notes.md").content == "public\n"


def test_a_deny_rule_can_also_name_a_link_itself(work: Path) -> None:
    (work / "shortcut").symlink_to(work / "notes.md")
    policy = Policy([Rule.parse("deny", "read_file shortcut")])
    assert through(policy, work, "read_file", path="shortcut").is_error
    assert not through(policy, work, "read_file", path="notes.md").is_error


def test_an_allow_rule_matches_where_a_write_lands_not_the_name_given(work: Path) -> None:
    (work / "docs").symlink_to(work / "sub")  # docs/ is really sub/
    policy = Policy([Rule.parse("allow", "write_file docs/*")])
    out = through(policy, work, "write_file", path="docs/x.md", content="changed")
    assert out.is_error and "write_file can change things" in out.content
    assert not (work / "sub" / "x.md").exists()


def test_a_bad_path_is_denied_not_a_traceback(work: Path) -> None:
    assert verdict(Policy(), work, "read_file", path="a\0b")[:2] == ("deny", "default")


# -- hard links, .git and .infai, protected roots -------------------------------------------------


def test_a_file_with_more_than_one_hard_link_asks_even_when_allowed(
    work: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "bashrc"
    outside.write_text("original\n")
    os.link(outside, work / "rc")
    asks: list[Ask] = []

    async def deny(ask: Ask) -> Reply:
        asks.append(ask)
        return "deny"

    policy = Policy([Rule.parse("allow", "write_file *"), Rule.parse("allow", "edit_file *")])
    for tool, arguments in (
        ("write_file", {"path": "rc", "content": "pwned\n"}),
        ("edit_file", {"path": "rc", "old_text": "original", "new_text": "pwned"}),
    ):
        out = through(policy, work, tool, **arguments)
        assert out.is_error and "has 2 hard links" in out.content
        asked = Policy(policy.rules, approver=deny)
        assert through(asked, work, tool, **arguments).is_error
    assert outside.read_text() == "original\n" and (work / "rc").read_text() == "original\n"
    assert "hard links" in asks[0].reason
    # one name only: the allow rule holds
    assert not through(policy, work, "write_file", path="single", content="x").is_error


def test_git_and_infai_directories_need_a_rule_naming_the_exact_path(work: Path) -> None:
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n")
    wide = Policy([Rule.parse("allow", "write_file *"), Rule.parse("allow", "edit_file *")])
    hook = "[core]\n\tfsmonitor = touch /tmp/pwned\n"
    for tool, path, arguments in (
        ("write_file", ".git/config", {"content": hook}),
        ("write_file", ".git/hooks/pre-commit", {"content": "#!/bin/sh\n"}),
        ("write_file", "sub/.git/config", {"content": hook}),
        ("write_file", ".infai/config.toml", {"content": "x"}),
        ("edit_file", ".git/config", {"old_text": "[core]", "new_text": hook}),
    ):
        out = through(wide, work, tool, path=path, **arguments)
        assert out.is_error and "does not reach .git/ or .infai/" in out.content, path
    assert (work / ".git" / "config").read_text() == "[core]\n"
    assert not (work / ".infai").exists() and not (work / ".git" / "hooks").exists()
    # a rule naming the exact path is the user's explicit choice
    exact = Policy([Rule.parse("allow", "write_file .git/config")])
    assert not through(exact, work, "write_file", path=".git/config", content="[x]\n").is_error
    # and "allow always" for such a file stays exact
    assert [r.pattern for r in always_rules("write_file", ".git/hooks/x")] == [".git/hooks/x"]


def test_protected_roots_are_never_written_whatever_the_rules(work: Path) -> None:
    home = work / "dot-infai"  # infai's own home inside the working directory (run in $HOME)
    home.mkdir()
    (home / "config.toml").write_text("model = 'x'\n")
    (work / "alias").symlink_to(home)
    rules = [
        Rule.parse("allow", "write_file *"),
        Rule.parse("allow", "write_file dot-infai/config.toml"),
        Rule.parse("allow", "edit_file *"),
    ]

    async def yes(ask: Ask) -> Reply:
        return "allow"

    policy = Policy(rules, approver=yes, protected=[home])
    for tool, path, arguments in (
        ("write_file", "dot-infai/config.toml", {"content": "scripted = true\n"}),
        ("write_file", "alias/config.toml", {"content": "scripted = true\n"}),
        ("write_file", "dot-infai/new.toml", {"content": "x"}),
        ("edit_file", "dot-infai/config.toml", {"old_text": "x", "new_text": "y"}),
    ):
        out = through(policy, work, tool, path=path, **arguments)
        assert out.is_error and "permission denied by protected" in out.content, path
    assert (home / "config.toml").read_text() == "model = 'x'\n"
    assert sorted(p.name for p in home.iterdir()) == ["config.toml"]
    assert not through(policy, work, "write_file", path="ok.txt", content="x").is_error
    # reading is not what this guards
    assert not through(policy, work, "read_file", path="dot-infai/config.toml").is_error


# -- shell commands: every part, normalised ----------------------------------------------------

RM_VARIANTS = [
    "rm -rf victim",
    "/bin/rm -fr victim",
    "\\rm -r -f victim",
    "env rm --recursive --force victim",
    "env -i PATH=/usr/bin:/bin rm -rf victim",
    "command rm -fr victim",
    "true && rm -fr victim",
    "false || rm -fr victim",
    "echo hi; rm -rf victim",
    "echo hi\nrm -rf victim",
    "echo $(rm -fr victim)",
    'echo "$(rm -fr victim)"',
    "echo `rm -fr victim`",
    "find victim -delete",
    "find . -name victim -exec rm -rf {} +",
    "echo victim | xargs rm -r -f",
    "bash -c 'rm -fr victim'",
    'sh -c "rm -R -f victim"',
    "eval 'rm -rf victim'",
    "rm --rec --for victim",
    "X=1 rm -Rf victim",
    "(rm -rf victim)",
    "{ rm -rf victim; }",
    "rm -r victim -f",
    "timeout 5 rm -rf victim",
    "nice -n 5 rm -rf victim",
    "nohup rm -rf victim",
    "r''m -rf victim",
    '"rm" -rf victim',
    "if true; then rm -rf victim; fi",
    "rm -rf victim 2>/dev/null",
    "cat <(rm -rf victim)",
    "echo ok & rm -rf victim",
    "rm -v -f -r victim",
    "$'rm' -rf victim",
    "$'\\x72\\x6d' -rf victim",
    "busybox rm -rf victim",
    "exec rm -rf victim",
]


@pytest.mark.parametrize(
    "command",
    [
        "r$(echo)m -rf victim",
        "X=rm; $X -rf victim",
        'eval "$(echo cm0gLXJmIHZpY3RpbQ== | base64 -d)"',
        "sh -c \"$(printf 'rm -rf victim')\"",
        "/bin/r? -rf victim",
        "{rm,-rf,victim}",
        "`echo rm` -rf victim",
    ],
)
def test_what_deny_rules_cannot_see_asks_even_under_allow_bash(work: Path, command: str) -> None:
    (work / "victim").mkdir()
    (work / "victim" / "keep.txt").write_text("must survive\n")
    policy = Policy([Rule.parse("deny", "bash rm -rf*"), Rule.parse("allow", "bash")])
    out = through(policy, work, "bash", command=command)
    assert out.is_error and "cannot see all it runs" in out.content
    assert (work / "victim" / "keep.txt").read_text() == "must survive\n"
    # with no deny or ask rule for bash, "allow bash" means what it says
    assert verdict(Policy([Rule.parse("allow", "bash")]), work, "bash", command=command)[0] == (
        "allow"
    )


@pytest.mark.parametrize("command", RM_VARIANTS)
def test_a_shell_deny_rule_stops_every_spelling_of_the_command(work: Path, command: str) -> None:
    (work / "victim").mkdir()
    (work / "victim" / "keep.txt").write_text("must survive\n")
    # everything else is allowed, so only the deny rule stands between the command and the file
    policy = Policy([Rule.parse("deny", "bash rm -rf*"), Rule.parse("allow", "bash")])
    out = through(policy, work, "bash", command=command)
    assert out.is_error and "permission denied by rule 'deny bash rm -rf*'" in out.content
    assert (work / "victim" / "keep.txt").read_text() == "must survive\n"


def test_an_ask_rule_is_checked_against_every_part_too(work: Path) -> None:
    policy = Policy([Rule.parse("ask", "bash git push*"), Rule.parse("allow", "bash")])
    for command in ("git status && git push", "git -C . push -f", "env git push origin"):
        assert verdict(policy, work, "bash", command=command)[:2] == (
            "deny",
            "rule 'ask bash git push*'",
        ), command


def test_an_allow_rule_covers_a_chain_only_if_rules_cover_every_part(work: Path) -> None:
    (work / "victim").mkdir()
    policy = Policy([Rule.parse("allow", "bash ls*"), Rule.parse("allow", "bash echo *")])
    assert not through(policy, work, "bash", command="ls && echo done | ls").is_error
    for command in (
        "ls && rm -rf victim",
        "ls $(rm -rf victim)",
        "echo `rm -rf victim`",
        "ls | xargs -I{} sh -c 'rm -rf victim'",
        "echo x > victim/file",  # a redirection writes: not what "echo *" reads as
        "ls; $CMD",
        "cat <<EOF\nrm -rf victim\nEOF",
    ):
        out = through(policy, work, "bash", command=command)
        assert out.is_error and "permission denied by default" in out.content, command
    assert (work / "victim").is_dir() and not (work / "victim" / "file").exists()


def test_an_allow_rule_for_a_program_does_not_cover_a_local_file_of_that_name(
    work: Path,
) -> None:
    script = work / "ls"
    script.write_text("#!/bin/sh\ntouch pwned\n")
    script.chmod(0o755)
    policy = Policy([Rule.parse("allow", "bash ls*")])
    assert through(policy, work, "bash", command="./ls").is_error
    assert not (work / "pwned").exists()
    assert not through(policy, work, "bash", command="/bin/ls").is_error  # a system program


@pytest.mark.parametrize(
    "command",
    [
        "git diff --output=/tmp/x",
        "git log -p",
        "git show HEAD",
        "sed -n 1p notes.md",
        "awk 1 notes.md",
        "find . -name x",
        "make test",
        "tar tf a.tar",
        "env",
        "xargs echo",
        "perl -e 1",
        "python3 -c 1",
        "node x.js",
        "npm test",
        "pip list",
        "cargo build",
        "git -c core.pager=x status",
        "git --no-pager diff",
        "git --exec-path=. status",
    ],
)
def test_allow_always_is_exact_for_commands_that_write_or_run_code_through_options(
    work: Path, command: str
) -> None:
    asks: list[Ask] = []

    async def always(ask: Ask) -> Reply:
        asks.append(ask)
        return "deny"

    verdict(Policy(approver=always), work, "bash", command=command)
    [ask] = asks
    assert [r.pattern for r in ask.always] == [command.replace("*", "[*]")]
    assert ask.note and "exact" in ask.note


def test_allow_always_still_offers_a_prefix_for_plain_commands(work: Path) -> None:
    asks: list[Ask] = []

    async def always(ask: Ask) -> Reply:
        asks.append(ask)
        return "allow-always"

    policy = Policy(approver=always)
    assert verdict(policy, work, "bash", command="ls -la sub")[0] == "allow"
    assert [r.pattern for r in asks[0].always] == ["ls -la", "ls -la *"] and asks[0].note == ""
    assert verdict(policy, work, "bash", command="ls -la")[1] == "rule 'allow bash ls -la'"


def test_allow_always_never_offers_every_call_for_an_empty_subject(work: Path) -> None:
    asks: list[Ask] = []

    async def always(ask: Ask) -> Reply:
        asks.append(ask)
        return "allow-always"

    policy = Policy(approver=always)
    verdict(policy, work, "bash", command="  ")
    verdict(policy, work, "write_file", content="x")  # no path
    assert [a.always for a in asks] == [(), ()] and policy.rules == []
    verdict(policy, work, "bash", command="ls")  # a later command is asked again
    assert len(asks) == 3


# -- escalation: bash! -----------------------------------------------------------------------------


def test_a_call_outside_the_sandbox_always_asks_and_no_allow_rule_applies(work: Path) -> None:
    # such a rule cannot be written (it would never apply); made directly, it is ignored
    with pytest.raises(RuleError, match="always asks"):
        Rule.parse("allow", "bash! echo*")
    policy = Policy([Rule.parse("allow", "bash"), Rule("allow", "bash!", "echo*")])
    out = through(policy, work, "bash", command="echo hi > escaped", outside_sandbox=True)
    assert out.is_error and "outside the sandbox" in out.content
    assert "nobody can approve" in out.content and not (work / "escaped").exists()
    # the same command inside the sandbox: the allow rule applies
    assert not through(policy, work, "bash", command="echo hi", outside_sandbox=False).is_error
    # anything but absent or False counts as asking to leave (a "false" string too)
    for flag in ("false", 1, "yes"):
        assert verdict(policy, work, "bash", command="echo", outside_sandbox=flag)[1] == "default"


def test_deny_rules_for_bash_and_for_bash_bang_apply_to_an_escalation(work: Path) -> None:
    policy = Policy([Rule.parse("deny", "bash rm -rf*"), Rule.parse("deny", "bash! curl*")])
    assert verdict(policy, work, "bash", command="/bin/rm -fr x", outside_sandbox=True)[1] == (
        "rule 'deny bash rm -rf*'"
    )
    assert verdict(policy, work, "bash", command="curl x", outside_sandbox=True)[1] == (
        "rule 'deny bash! curl*'"
    )
    assert verdict(policy, work, "bash", command="curl x")[1] == "default"  # bash! only
    assert str(Rule.parse("ask", "bash! make*")) == "ask bash! make*"


def test_allow_always_is_not_offered_for_an_escalation_and_counts_once(work: Path) -> None:
    asks: list[Ask] = []
    replies: list[Reply] = ["allow-always", AllowAlways(("*",)), "deny"]

    async def approver(ask: Ask) -> Reply:
        asks.append(ask)
        return replies.pop(0)

    remembered: list[Rule] = []
    policy = Policy(approver=approver, remember=remembered.extend)
    first = verdict(policy, work, "bash", command="ls", outside_sandbox=True)
    assert first == (
        "allow",
        "user",
        "allowed once, outside the sandbox (allow always is not offered)",
    )
    assert verdict(policy, work, "bash", command="ls", outside_sandbox=True)[0] == "allow"
    assert verdict(policy, work, "bash", command="ls", outside_sandbox=True)[:2] == (
        "deny",
        "user",
    )
    assert len(asks) == 3 and policy.rules == [] and remembered == []
    assert all(a.tool == "bash!" and a.always == () and a.note for a in asks)


# -- the fallback without a sandbox --------------------------------------------------------------


def test_without_a_sandbox_shell_commands_ask_even_when_a_rule_allows(work: Path) -> None:
    asks: list[Ask] = []

    async def approver(ask: Ask) -> Reply:
        asks.append(ask)
        return "deny"

    rules = [Rule.parse("allow", "bash ls*"), Rule.parse("deny", "bash rm*")]
    unconfined = Policy(rules, shell_confined=False)
    verdict_, by, reason = verdict(unconfined, work, "bash", command="ls")
    assert (verdict_, by) == ("deny", "default") and NO_SANDBOX in reason
    assert verdict(unconfined, work, "bash", command="rm x")[1] == "rule 'deny bash rm*'"
    assert verdict(Policy(rules), work, "bash", command="ls")[0] == "allow"  # confined
    asking = Policy(rules, approver=approver, shell_confined=False)
    verdict(asking, work, "bash", command="ls")
    assert NO_SANDBOX in asks[0].reason and asks[0].always == ()
    # the file tools are not shell commands: their rules hold as before
    assert verdict(unconfined, work, "read_file", path="notes.md")[0] == "allow"


# -- what searches may read --------------------------------------------------------------------


def test_may_read_follows_read_and_grep_deny_rules(work: Path) -> None:
    policy = Policy(
        [
            Rule.parse("deny", "read_file .env"),
            Rule.parse("deny", "grep secrets/*"),
            Rule.parse("deny", "* *.pem"),
            Rule.parse("deny", "write_file notes.md"),
            Rule.parse("ask", "read_file notes.md"),
        ]
    )
    assert not policy.may_read(".env") and not policy.may_read("./.env")
    assert not policy.may_read("secrets/key") and not policy.may_read("keys/a.pem")
    assert policy.may_read("notes.md") and policy.may_read("src/.env.example")


# -- pathological commands -------------------------------------------------------------------------


def test_a_command_too_big_to_check_is_denied_where_deny_rules_exist(work: Path) -> None:
    (work / "victim").mkdir()
    huge = "ls -abcde x; " * 5000 + "rm -rf victim"
    checked = Policy([Rule.parse("deny", "bash rm -rf*"), Rule.parse("allow", "bash")])
    out = through(checked, work, "bash", command=huge)
    assert out.is_error and "too many parts" in out.content and (work / "victim").is_dir()
    # with no deny or ask rule for bash there is nothing to check: "allow bash" holds
    assert verdict(Policy([Rule.parse("allow", "bash")]), work, "bash", command=huge)[0] == "allow"


def test_a_long_command_is_ruled_on_off_the_event_loop(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    threads: list[int] = []
    original = Policy.rule_on

    def recording(self: Policy, *args: Any) -> Any:
        threads.append(threading.get_ident())
        return original(self, *args)

    monkeypatch.setattr(Policy, "rule_on", recording)

    async def both() -> int:
        policy = Policy([Rule.parse("allow", "bash")])
        await policy.decide("bash", {"command": "ls"}, ToolContext(work, "s"))
        await policy.decide("bash", {"command": "ls " * 5000}, ToolContext(work, "s"))
        return threading.get_ident()

    loop_thread = asyncio.run(both())
    assert threads[0] == loop_thread and threads[1] != loop_thread
