"""Who may run what: rules of allow, ask and deny, and the defaults users expect.

A rule names a tool (or ``*``) and a pattern (shell-style, ``fnmatch``) that is
matched against the call's *subject*: the command for ``bash``, the path for
file tools and for the search tools (the directory or file searched; ``.``
when none is given). Precedence, from first to last:

1. a matching **deny** rule denies;
2. a matching **ask** rule asks;
3. a matching **allow** rule allows;
4. the defaults: reading, listing and searching inside the working directory
   are allowed, and so is ``task`` (a subagent, whose every call is decided
   by this policy again); writing, editing and shell commands ask; anything
   that leaves the working directory asks.

"Ask" goes to the approval callback the shell supplies (the TUI's dialog, the
server's approval queue). Without one (a headless run) ask means deny, unless
an allow rule, for example from ``--allow``, matched first. The callback may
answer "allow always", which adds the allow rules :func:`always_rules` names
(shown to the user with the question) for the rest of the session. Every
decision says who made it.

Two limits keep a wildcard allow rule from reaching further than it reads:

- a ``bash`` command that chains, substitutes or redirects (``;``, ``&``,
  ``|``, backquotes, ``$(``, ``<``, ``>``, a newline) is allowed only by a rule
  that names it exactly, or by one for any command at all (``allow bash``):
  ``allow bash git status*`` does not allow ``git status; rm -rf ~``;
- a file path is matched in its normal form (``src/../../x`` is ``../x``), and
  a path outside the working directory is allowed only by a rule whose pattern
  itself starts outside (``/`` or ``..``): ``allow write_file *`` means writes
  in the project, not anywhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from infai.errors import InfaiError

from .base import Decision, ToolContext
from .paths import resolve

Verdict = Literal["allow", "ask", "deny"]
#: "timeout": nobody answered in time (a served session's question expired)
Answer = Literal["allow", "allow-always", "deny", "timeout"]


@dataclass(frozen=True, slots=True)
class Ask:
    """A permission question as an approver sees it."""

    tool: str
    #: what rules match for this call: the command, the (normalised) path, the pattern
    subject: str
    #: why it asks: the rule that said so, or the default's reason
    reason: str
    #: the allow rules that answering "allow-always" adds
    always: tuple[Rule, ...]


@dataclass(frozen=True, slots=True)
class AllowAlways:
    """Allow this call, and from now on in this session what these patterns match."""

    patterns: tuple[str, ...]


Reply = Answer | AllowAlways
#: shows the user a question and returns the reply
Approver = Callable[[Ask], Awaitable[Reply]]
#: told the rules an "allow always" added, so a shell can keep them with the session
Remember = Callable[[list["Rule"]], None]

READ_ONLY = {"read_file", "list_files", "grep"}
#: the tools a rule may name (a misspelt name must not make a rule that never matches)
TOOL_NAMES = READ_ONLY | {"write_file", "edit_file", "bash", "task"}
#: tools that only start work whose every tool call meets this policy again
DELEGATING = {"task"}
PATH_ARGUMENT = {
    "read_file": "path",
    "write_file": "path",
    "edit_file": "path",
    "list_files": "path",
    "grep": "path",
}
#: tools whose path argument may be left out: they search the working directory
SEARCHING = {"list_files", "grep"}
#: commands whose "allow always" stays the exact command: a prefix of them is too wide
RISKY = frozenset({
    "rm", "rmdir", "shred", "dd", "mkfs", "sudo", "su", "doas", "chmod", "chown", "chgrp",
    "kill", "pkill", "killall", "sh", "bash", "zsh", "fish", "dash", "python", "python3",
    "node", "deno", "perl", "ruby", "php", "eval", "exec", "source", "env", "xargs",
    "nohup", "timeout", "watch", "find", "curl", "wget", "ssh", "scp", "rsync", "nc",
    "docker", "kubectl", "npx", "uvx",
    "git push", "git reset", "git clean", "git checkout", "git rebase", "git branch",
    "npm publish", "cargo publish", "pip install", "npm install",
})  # fmt: skip
#: shell syntax that chains, substitutes or redirects commands
SHELL_CONTROL = re.compile(r"[;&|`<>\n\r]|\$\(")


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
        if not any(c in tool for c in "*?[") and tool not in TOOL_NAMES:
            known = ", ".join(sorted(TOOL_NAMES))
            raise RuleError(f"{verdict} rule {text.strip()!r}: unknown tool {tool!r} ({known})")
        return cls(verdict, tool, pattern.strip() or "*")

    def matches(self, tool: str, subject: str) -> bool:
        """Whether tool and subject fit the rule's globs (case-sensitive; ``*`` crosses ``/``)."""
        return fnmatchcase(tool, self.tool) and fnmatchcase(subject, self.pattern)

    def __str__(self) -> str:
        return f"{self.verdict} {self.tool} {self.pattern}"


def subject_of(tool: str, arguments: dict[str, Any]) -> str:
    """What a rule's pattern is matched against, for this call."""
    if tool == "bash":
        return str(arguments.get("command", ""))
    if tool in PATH_ARGUMENT:
        given = _path_of(tool, arguments)
        return os.path.normpath(given) if given else ""
    return ""


def _path_of(tool: str, arguments: dict[str, Any]) -> str:
    given = str(arguments.get(PATH_ARGUMENT[tool]) or "")
    return given or ("." if tool in SEARCHING else "")


def _paths_of(tool: str, arguments: dict[str, Any]) -> list[str]:
    return [_path_of(tool, arguments)] if tool in PATH_ARGUMENT else []


@dataclass(frozen=True, slots=True)
class Ruling:
    """What the rules and defaults say, before anyone is asked."""

    verdict: Verdict
    by: str
    reason: str = ""


def _literal(text: str) -> str:
    """A pattern that matches exactly ``text`` (glob characters escaped)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _is_exact(pattern: str) -> bool:
    """Whether ``pattern`` matches one text only (no wildcard outside ``[x]`` escapes)."""
    return re.fullmatch(r"(?:[^*?\[]|\[[*?\[]\])*", pattern) is not None


def _starts_outside(pattern: str) -> bool:
    return pattern.startswith(("/", ".."))


def always_rules(tool: str, subject: str) -> list[Rule]:
    """The allow rules that "allow always" adds for this call, shown before answering.

    A shell command's first two words and anything after them (``git status`` and
    ``git status *``), except a chained command and a command in :data:`RISKY`
    (deleting, running code, privileges, the network, publishing), which stay
    exact; a file's directory (``src/*``; a file at the top or outside the working
    directory stays exact); otherwise exactly this call.
    """
    words = subject.split()
    if tool == "bash" and words and not SHELL_CONTROL.search(subject):
        if words[0] in RISKY or " ".join(words[:2]) in RISKY:
            return [Rule("allow", tool, _literal(" ".join(words)))]
        prefix = _literal(" ".join(words[:2]))
        return [Rule("allow", tool, prefix), Rule("allow", tool, f"{prefix} *")]
    if tool in PATH_ARGUMENT and tool not in SEARCHING and subject and not _starts_outside(subject):
        parent = os.path.dirname(subject)
        if parent:
            return [Rule("allow", tool, f"{_literal(parent)}/*")]
    return [Rule("allow", tool, _literal(subject) or "*")]


class Policy:
    """Rules plus defaults, with an optional approver for "ask"."""

    def __init__(
        self,
        rules: list[Rule] | None = None,
        approver: Approver | None = None,
        *,
        remember: Remember | None = None,
    ) -> None:
        self.rules = list(rules or [])
        self.approver = approver
        self.remember = remember

    def rule_on(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> Ruling:
        """The ruling for a call, by the precedence in this module's docstring."""
        subject = subject_of(tool, arguments)
        outside = [
            given
            for given in _paths_of(tool, arguments)
            if not resolve(context.working_dir, given).inside
        ]
        chained = tool == "bash" and SHELL_CONTROL.search(subject) is not None
        passed_over = ""
        for wanted in ("deny", "ask", "allow"):
            for rule in self.rules:
                if rule.verdict != wanted or not rule.matches(tool, subject):
                    continue
                covers_chains = rule.pattern == "*" or _is_exact(rule.pattern)
                if wanted == "allow" and chained and not covers_chains:
                    passed_over = f"; rule '{rule}' does not cover a chained command"
                    continue
                reaches = not outside or tool not in PATH_ARGUMENT or _starts_outside(rule.pattern)
                if wanted == "allow" and not reaches:
                    passed_over = f"; rule '{rule}' covers the working directory only"
                    continue
                return Ruling(rule.verdict, by=f"rule '{rule}'")
        if outside:
            reason = f"{outside[0]} is outside the working directory{passed_over}"
            return Ruling("ask", "default", reason)
        if tool in READ_ONLY:
            return Ruling("allow", "default", "reads inside the working directory")
        if tool in DELEGATING:
            return Ruling("allow", "default", "each call it makes is decided on its own")
        return Ruling("ask", "default", f"{tool} can change things{passed_over}")

    async def decide(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> Decision:
        """Rule on the call and, if that says ask, await the approver (none: deny).

        "Allow always" adds its rules to this policy and hands them to ``remember``.
        """
        ruling = self.rule_on(tool, arguments, context)
        if ruling.verdict == "allow":
            return Decision("allow", ruling.by, ruling.reason)
        if ruling.verdict == "deny":
            return Decision("deny", ruling.by, ruling.reason)
        if self.approver is None:
            why = f"{ruling.reason}; " if ruling.reason else ""
            return Decision(
                "deny", ruling.by, f"{why}asks for approval, and nobody can approve here"
            )
        subject = subject_of(tool, arguments)
        reason = ruling.reason or f"{ruling.by} asks"
        ask = Ask(tool, subject, reason, tuple(always_rules(tool, subject)))
        answer = await self.approver(ask)
        if answer == "allow-always" or isinstance(answer, AllowAlways):
            added = (
                [Rule("allow", tool, p) for p in answer.patterns]
                if isinstance(answer, AllowAlways)
                else list(ask.always)
            )
            self.rules.extend(added)
            if self.remember is not None:
                self.remember(added)
            shown = ", ".join(f"'{rule}'" for rule in added)
            return Decision("allow", "user", f"allowed always for this session: {shown}")
        if answer == "allow":
            return Decision("allow", "user", "allowed once")
        if answer == "timeout":
            return Decision("deny", "timeout", "nobody answered in time")
        return Decision("deny", "user", "denied")
