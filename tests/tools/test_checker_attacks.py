"""The command checker's findings, as attacks through the policy and the real ``bash`` tool.

Each command goes through :meth:`Policy.decide` and, if allowed, through the
real tool (as the agent loop does). An attack worked if the file it creates
exists or the file it removes is gone: the effect is what is checked.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from infai.tools import (
    Policy,
    Rule,
    Sandbox,
    SandboxSettings,
    ToolContext,
    ToolOutput,
    bash_path,
    builtin_tools,
)
from infai.tools.policy import always_rules
from infai.tools.shell import Bash


def through(policy: Policy, root: Path, **arguments: Any) -> ToolOutput:
    """Decide, then run the real bash tool if allowed (what the loop does)."""
    context = ToolContext(root, "s")
    decision = asyncio.run(policy.decide("bash", arguments, context))
    if not decision.allowed:
        return ToolOutput(f"permission denied by {decision.by}: {decision.reason}", True)
    tools = {t.spec.name: t for t in builtin_tools()}
    return asyncio.run(tools["bash"].run(arguments, context))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "wd"
    root.mkdir()
    (root / "victim").write_text("must survive\n")
    return root


# the three misreads of the finding; {act} is what the attack wants to run
MISREADS = {
    "a quoted } inside ${...}": "ls ${x-'}'}; {act} #'",
    "a # inside $(...)": "ls $(ls #'\n{act}\nls ')'\n) #'",
    "$'...' (dash does not decode it)": "ls $'\\';{act};'\\'",
}


@pytest.mark.parametrize("attack", MISREADS.values(), ids=MISREADS.keys())
def test_allow_ls_does_not_run_another_command(work: Path, attack: str) -> None:
    policy = Policy([Rule.parse("allow", "bash ls *")])
    through(policy, work, command=attack.replace("{act}", "touch pwned"))
    assert not (work / "pwned").exists()


@pytest.mark.parametrize("attack", MISREADS.values(), ids=MISREADS.keys())
def test_deny_rm_is_not_walked_past(work: Path, attack: str) -> None:
    policy = Policy([Rule.parse("deny", "bash rm *"), Rule.parse("allow", "bash")])
    through(policy, work, command=attack.replace("{act}", "rm victim"))
    assert (work / "victim").read_text() == "must survive\n"


def test_commands_run_under_bash_not_sh(work: Path) -> None:
    command = "echo $'a\\tb' ${BASH_VERSION:+bash}"
    out = through(Policy([Rule.parse("allow", "bash")]), work, command=command)
    assert out.content.splitlines()[1] == "a\tb bash"


def test_without_bash_the_command_is_refused_and_nothing_runs(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bash_path, "BASH_CANDIDATES", (str(work / "no-bash"),))
    out = asyncio.run(Bash().run({"command": "touch pwned"}, ToolContext(work, "s")))
    assert out.is_error and "bash is not installed" in out.content
    assert "nothing ran" in out.content
    assert not (work / "pwned").exists()


def test_a_bash_earlier_on_path_is_not_the_shell(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = work / "bin" / "bash"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ntouch pwned\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    out = through(Policy([Rule.parse("allow", "bash")]), work, command="echo ok")
    assert out.content.endswith("ok\n") and not (work / "pwned").exists()


def test_variables_that_change_how_bash_starts_never_reach_it(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (work / "startup").write_text("touch pwned\n")
    monkeypatch.setenv("BASH_ENV", str(work / "startup"))
    monkeypatch.setenv("ENV", str(work / "startup"))
    monkeypatch.setenv("BASH_FUNC_ls%%", "() { touch pwned; }")
    sandbox = Sandbox(SandboxSettings(mode="off", pass_env=("*ENV", "BASH_FUNC_*")))
    out = asyncio.run(Bash(sandbox=sandbox).run({"command": "ls"}, ToolContext(work, "s")))
    assert not out.is_error and not (work / "pwned").exists()


# -- programs that run their arguments: seen through, or unclear -----------------------------------

#: each removes ``victim`` through a program that runs its arguments
RUNNERS = [
    "echo victim | xargs rm",
    "echo victim | xargs -0 -r rm",
    "echo victim | xargs -i rm {}",
    "echo victim | xargs -I{} rm {}",
    "find . -name victim -exec rm {} ;",
    "find . -name victim -execdir rm {} +",
    "find -L . -name victim -ok rm {} ;",
    "env rm victim",
    "env - rm victim",
    "env -i PATH=/usr/bin:/bin rm victim",
    "env -S 'rm victim'",
    "env -S rm victim",
    "nice rm victim",
    "nice -5 rm victim",
    "nice -n5 rm victim",
    "nohup rm victim",
    "timeout 5 rm victim",
    "timeout -k 1 5 rm victim",
    "sudo rm victim",
    "sudo -Eu root rm victim",
    "sudo X=1 rm victim",
    "doas -u root rm victim",
    "stdbuf -oL rm victim",
    "setsid -w rm victim",
    "time rm victim",
    "time -p rm victim",
    "\\time -f %e rm victim",
    "command rm victim",
    "exec rm victim",
    "builtin exec rm victim",
    "builtin eval rm victim",
    "watch -d rm victim",
    "watch -n 1 -g 'rm victim'",
    "flock lockfile rm victim",
    "flock -w 5 lockfile -c 'rm victim'",
    "chroot / rm victim",
    "unshare -r rm victim",
    "unshare --map-root-user rm victim",
    "nsenter -t 1 -m rm victim",
    "ionice -c 3 rm victim",
    "taskset -c 0 rm victim",
    "taskset 1 rm victim",
    "chrt -o 0 rm victim",
    "sh -c 'rm victim'",
    "bash -c 'rm victim'",
    "bash -ec 'rm victim'",
    "echo rm victim | bash",
    "echo rm victim | sh -s",
    "bash <(echo rm victim)",
    "source <(echo rm victim)",
    "eval 'rm victim'",
    "trap 'rm victim' EXIT",
    "alias ls='rm victim'",
    "strace -f rm victim",
    "setpriv --reuid=0 rm victim",
    "x='a[$(rm victim)]'; echo $((x))",
    "x='a[$(rm victim)]'; ((x))",
    "x='a[$(rm victim)]'; let x",
    "x='a[$(rm victim)]'; [[ $x -eq 0 ]]",
    "declare -i x='a[$(rm victim)]'",
    "i='a[$(rm victim)]'; echo ${a[i]}",
    "x=abc; o='a[$(rm victim)]'; echo ${x:o}",
    "function f { rm victim; }; f",
    "PS4='$(rm victim)'; set -x; ls",
    "hash -p /bin/rm ls; ls victim",
    "BASH_CMDS[ls]=/bin/rm; ls victim",
    "declare BASH_CMDS[ls]=/bin/rm; ls victim",
    "BASH_ALIASES[ls]='rm victim'; shopt -s expand_aliases\nls",
    "coproc rm victim",
    "echo $\\\n(rm victim)",  # a line continuation inside $(
    "i\\\nf rm victim; then :; fi",  # ... inside the keyword if
    "cat <<EOF\nx'\nEOF\nrm victim\n'",
]


@pytest.mark.parametrize("command", RUNNERS)
def test_a_program_that_runs_its_arguments_does_not_walk_past_deny(
    work: Path, command: str
) -> None:
    policy = Policy([Rule.parse("deny", "bash rm *"), Rule.parse("allow", "bash")])
    out = through(policy, work, command=command)
    assert out.is_error and "permission denied" in out.content
    assert (work / "victim").read_text() == "must survive\n"


@pytest.mark.parametrize("command", ["echo victim | xargs rm", "flock lockfile rm victim"])
def test_what_a_wrapper_runs_is_not_covered_by_an_allow_rule_for_another_program(
    work: Path, command: str
) -> None:
    """Allow rules see what the shell starts (``xargs``), deny rules what it runs."""
    policy = Policy(
        [
            Rule.parse("deny", "bash rm *"),
            Rule.parse("allow", "bash echo *"),
            Rule.parse("allow", "bash xargs *"),
            Rule.parse("allow", "bash flock *"),
        ]
    )
    assert through(policy, work, command=command).is_error
    assert (work / "victim").exists()


def test_a_wrapper_that_reads_cleanly_still_runs(work: Path) -> None:
    """Seen through, not refused: without a matching deny rule the command runs."""
    policy = Policy([Rule.parse("deny", "bash rm *"), Rule.parse("allow", "bash")])
    assert shutil.which("timeout")
    for command in ("timeout 5 touch made", "env X=1 nice -n 5 touch made2", "echo a | xargs echo"):
        assert not through(policy, work, command=command).is_error, command
    assert (work / "made").exists() and (work / "made2").exists()


@pytest.mark.parametrize(
    "command", ["flock f make", "unshare -r make", "ionice -c 3 make", "trap 'make' EXIT"]
)
def test_allow_always_for_a_program_that_runs_its_arguments_is_exact(command: str) -> None:
    """Else "allow always" for ``flock f make`` would allow ``flock f`` anything."""
    assert always_rules("bash", command) == [Rule("allow", "bash", command)]
