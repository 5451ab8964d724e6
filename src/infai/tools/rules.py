"""The rule language of :mod:`~infai.tools.policy`, and what "allow always" offers.

A :class:`Rule` names a tool (or a glob of tools) and a pattern matched against
a call's *subject*: :func:`subject_of` says what that is for each tool (the
command, the path as resolved by :func:`target_of`); the policy's docstring
says how rules take precedence. :func:`always_rules` and
:func:`exact_only_reason` say which allow rules an "allow always" answer adds
for a call, and why they are only the exact call for some commands.

Kept apart from the policy itself (which rules, defaults and the approver
decide with) so each stays readable; :mod:`~infai.tools.policy` re-exports the
names callers use.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from infai.errors import InfaiError

from .commands import analyse, runs_arguments
from .effects import known_tool
from .paths import Resolved, resolve

Verdict = Literal["allow", "ask", "deny"]
#: in the order they take precedence
VERDICTS: tuple[Verdict, ...] = ("deny", "ask", "allow")

READ_ONLY = {"read_file", "list_files", "grep"}
#: a ``bash`` call that asks to run outside the sandbox
ESCALATED = "bash!"
#: the tools a rule may name (a misspelt name must not make a rule that never matches)
TOOL_NAMES = READ_ONLY | {"write_file", "edit_file", "bash", ESCALATED, "task"}
WRITING = {"write_file", "edit_file"}
#: tools that only start work whose every tool call meets this policy again
DELEGATING = {"task"}
PATH_ARGUMENT = {tool: "path" for tool in (*READ_ONLY, *WRITING)}
#: tools whose path argument may be left out: they search the working directory
SEARCHING = {"list_files", "grep"}
#: the tools of MCP servers (:mod:`infai.tools.mcp`): any such name may be ruled on
MCP_PREFIX = "mcp__"
#: directories whose files a wildcard allow rule never reaches for writing
GUARDED = (".git", ".infai")
_EXACT_ONLY_GROUPS = {
    "deletes, changes permissions or stops processes": "rm rmdir shred dd mkfs truncate "
    "chmod chown chgrp kill pkill killall",
    "runs with other privileges": "sudo su doas",
    "runs the command or code given to it": "sh bash zsh fish dash ksh eval exec source "
    "env xargs nohup timeout nice watch command builtin setsid stdbuf python python3 node "
    "deno bun perl ruby php lua Rscript osascript",
    "runs code or writes files through its options or its arguments": "sed awk gawk mawk "
    "nawk find tar make cmake ninja just rsync vim vi nvim emacs less",
    "reaches the network": "curl wget ssh scp sftp nc ncat socat telnet ftp",
    "runs containers or cluster commands": "docker podman kubectl helm",
    "runs package scripts or project code": "npm npx pnpm yarn pip pip3 pipx uv uvx poetry "
    "cargo go gem bundle composer mvn gradle dotnet apt apt-get brew conda",
    "can write files or run configured programs through its options (--output, "
    "external diff, pager)": "git diff|git log|git show|git grep|git config|git difftool|"
    "git mergetool|git submodule|git bisect|git filter-branch|git -c|git -C",
    "rewrites or publishes history": "git push|git reset|git clean|git checkout|git rebase|"
    "git branch|git am|git apply",
}
#: commands whose "allow always" stays the exact command, and why
EXACT_ONLY: dict[str, str] = {
    name.strip(): why
    for why, names in _EXACT_ONLY_GROUPS.items()
    for name in (names.split("|") if "|" in names else names.split())
}


class RuleError(InfaiError):
    """A permission rule's text names no tool, or a tool that does not exist."""


@dataclass(frozen=True, slots=True)
class Rule:
    """``verdict`` for calls of ``tool`` (a glob) whose subject matches ``pattern``."""

    verdict: Verdict
    tool: str
    pattern: str = "*"

    @classmethod
    def parse(cls, verdict: Verdict, text: str) -> Rule:
        """``"bash git status*"`` -> Rule(verdict, "bash", "git status*"); ``"grep"`` -> any."""
        tool, _, pattern = text.strip().partition(" ")
        if not tool:
            raise RuleError(f"empty {verdict} rule")
        named = tool in TOOL_NAMES or tool.startswith(MCP_PREFIX) or known_tool(tool)
        if not any(c in tool for c in "*?[") and not named:
            known = ", ".join(sorted(TOOL_NAMES))
            raise RuleError(f"{verdict} rule {text.strip()!r}: unknown tool {tool!r} ({known})")
        if verdict == "allow" and tool == ESCALATED:
            raise RuleError(
                f"allow rule {text.strip()!r}: {ESCALATED} (outside the sandbox) always asks; "
                "no allow rule applies to it"
            )
        return cls(verdict, tool, pattern.strip() or "*")

    def matches(self, tool: str, subject: str) -> bool:
        """Whether tool and subject fit the rule's globs (case-sensitive; ``*`` crosses ``/``)."""
        return fnmatchcase(tool, self.tool) and fnmatchcase(subject, self.pattern)

    def __str__(self) -> str:
        return f"{self.verdict} {self.tool} {self.pattern}"


def escalates(tool: str, arguments: Mapping[str, Any]) -> bool:
    """Whether a call asks to run outside the sandbox: ``bash`` with ``outside_sandbox``
    set to anything but absent or False (a "false" string asks too: better one
    question too many than a tool reading the value differently)."""
    flag = arguments.get("outside_sandbox")
    return tool == "bash" and flag is not None and flag is not False


def path_of(tool: str, arguments: Mapping[str, Any]) -> str:
    """A file tool's path argument as given ("." for a search given none)."""
    given = str(arguments.get(PATH_ARGUMENT[tool]) or "")
    return given or ("." if tool in SEARCHING else "")


@dataclass(frozen=True, slots=True)
class Target:
    """A path argument as rules see it (the module docstring)."""

    subject: str
    #: what allow rules match: the subject, and ``../x`` for an outside path
    allowed_as: tuple[str, ...]
    #: what deny and ask rules match: those, and the path as given (normalised)
    denied_as: tuple[str, ...]
    path: Path | None
    inside: bool


def target_of(
    tool: str,
    arguments: Mapping[str, Any],
    working_dir: Path,
    resolver: Callable[[str], Resolved] | None = None,
) -> Target:
    """Resolve a file tool's path argument against the working directory (with
    ``resolver``, the call's own: what the policy checks is what the tool uses).
    A path that cannot be resolved (a NUL byte, a link loop) raises ValueError."""
    given = path_of(tool, arguments)
    if not given:
        return Target("", ("",), ("",), None, True)
    try:
        found = resolver(given) if resolver is not None else resolve(working_dir, given)
    except (OSError, RuntimeError) as exc:
        raise ValueError(str(exc)) from exc
    root = working_dir.resolve()
    if found.inside:
        subject = found.shown(root)
        allowed: tuple[str, ...] = (subject,)
    else:
        subject = str(found.path)
        allowed = (subject, os.path.relpath(found.path, root))
    denied = (*allowed, os.path.normpath(given))
    return Target(subject, allowed, tuple(dict.fromkeys(denied)), found.path, found.inside)


def subject_of(tool: str, arguments: Mapping[str, Any], working_dir: Path | None = None) -> str:
    """What a rule's pattern is matched against, for this call (paths resolved
    against ``working_dir``; without one, only normalised)."""
    if tool in ("bash", ESCALATED):
        return str(arguments.get("command", ""))
    if tool in PATH_ARGUMENT:
        if working_dir is not None:
            try:
                return target_of(tool, arguments, working_dir).subject
            except ValueError:
                pass
        given = path_of(tool, arguments)
        return os.path.normpath(given) if given else ""
    return ""


def literal(text: str) -> str:
    """A pattern that matches exactly ``text`` (glob characters escaped)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def is_exact(pattern: str) -> bool:
    """Whether ``pattern`` matches one text only (no wildcard outside ``[x]`` escapes)."""
    return re.fullmatch(r"(?:[^*?\[]|\[[*?\[]\])*", pattern) is not None


def starts_outside(pattern: str) -> bool:
    """Whether a pattern names paths outside the working directory (``/`` or ``..``)."""
    return pattern.startswith(("/", ".."))


def guarded(subject: str) -> bool:
    """Whether a path is under a ``.git/`` or ``.infai/`` directory (:data:`GUARDED`),
    in any case (``.INFAI`` is ``.infai`` on a case-insensitive file system)."""
    return any(part.lower() in GUARDED for part in Path(subject).parts)


def exact_only_reason(tool: str, subject: str) -> str:
    """Why "allow always" offers only this exact call ("" when it may offer more)."""
    if tool == ESCALATED:
        return "running outside the sandbox is asked every time; it is never allowed always"
    if tool != "bash":
        return ""
    found = analyse(subject)
    if not found.simple:
        return "this command chains, substitutes or redirects: only this exact text is allowed"
    command = found.started[0]
    words = command.written.split()
    if not command.program or words[0] != command.program:
        return "the program is named by a path or set up by assignments: exact only"
    if command.program == "git" and len(words) > 1 and words[1].startswith("-"):
        return "git's global options (-c, --exec-path, ...) can run configured programs: exact only"
    for key in (" ".join(words[:2]), words[0]):
        if key in EXACT_ONLY:
            return f"{key} {EXACT_ONLY[key]}: only this exact command is allowed"
    if runs_arguments(command.program):
        return f"{command.program} runs the command given to it: only this exact command is allowed"
    return ""


def always_rules(tool: str, subject: str) -> list[Rule]:
    """The allow rules that "allow always" adds for this call, shown before answering.

    A shell command's first two words and anything after them (``git status`` and
    ``git status *``), except where :func:`exact_only_reason` says why not;
    a file's directory (``src/*``; a file at the top, outside the working
    directory or under ``.git/``/``.infai/`` stays exact); otherwise exactly
    this call. An escalation (``bash!``) and a call with an empty subject (an
    empty command, a missing path) offer none.
    """
    if tool.startswith(MCP_PREFIX):  # its subject is empty: the rule names the tool
        return [Rule("allow", tool)]
    if tool == ESCALATED or (not subject.strip() and tool not in DELEGATING):
        return []  # nothing to name: "*" would allow every call of the tool
    if tool == "bash":
        if exact_only_reason(tool, subject):
            return [Rule("allow", tool, literal(subject))]
        prefix = literal(" ".join(analyse(subject).started[0].written.split()[:2]))
        return [Rule("allow", tool, prefix), Rule("allow", tool, f"{prefix} *")]
    if tool in PATH_ARGUMENT and tool not in SEARCHING and subject and not starts_outside(subject):
        parent = os.path.dirname(subject)
        if parent and not guarded(subject):
            return [Rule("allow", tool, f"{literal(parent)}/*")]
    return [Rule("allow", tool, literal(subject) or "*")]


@functools.lru_cache(maxsize=4096)
def matcher(pattern: str) -> Callable[[str], re.Match[str] | None]:
    """``fnmatchcase(text, pattern)`` as one compiled regex (many subjects, one pattern)."""
    return re.compile(fnmatch.translate(pattern)).match


__all__ = [
    "DELEGATING",
    "ESCALATED",
    "EXACT_ONLY",
    "GUARDED",
    "MCP_PREFIX",
    "PATH_ARGUMENT",
    "READ_ONLY",
    "SEARCHING",
    "TOOL_NAMES",
    "VERDICTS",
    "WRITING",
    "Rule",
    "RuleError",
    "Target",
    "Verdict",
    "always_rules",
    "escalates",
    "exact_only_reason",
    "guarded",
    "is_exact",
    "literal",
    "matcher",
    "path_of",
    "starts_outside",
    "subject_of",
    "target_of",
]
