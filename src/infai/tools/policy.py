"""Who may run what: rules of allow, ask and deny, and the defaults users expect.

A rule names a tool (or ``*``) and a pattern (shell-style, ``fnmatch``) that is
matched against the call's *subject*: the command for ``bash``, the path for
file tools, the pattern for search tools. Precedence, from first to last:

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
answer "allow always", which adds an allow rule for that subject for the rest
of the session. Every decision says who made it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from .base import Decision, ToolContext
from .paths import resolve

Verdict = Literal["allow", "ask", "deny"]
#: "timeout": nobody answered in time (a served session's question expired)
Answer = Literal["allow", "allow-always", "deny", "timeout"]
#: shows the user a question (tool, subject) and returns the answer
Approver = Callable[[str, str], Awaitable[Answer]]

READ_ONLY = {"read_file", "list_files", "grep"}
#: tools that only start work whose every tool call meets this policy again
DELEGATING = {"task"}
PATH_ARGUMENT = {"read_file": "path", "write_file": "path", "edit_file": "path"}


@dataclass(frozen=True, slots=True)
class Rule:
    verdict: Verdict
    tool: str
    pattern: str = "*"

    @classmethod
    def parse(cls, verdict: Verdict, text: str) -> Rule:
        """``"bash git status*"`` -> Rule(verdict, "bash", "git status*"); ``"grep"`` -> any."""
        tool, _, pattern = text.strip().partition(" ")
        if not tool:
            raise ValueError(f"empty {verdict} rule")
        return cls(verdict, tool, pattern.strip() or "*")

    def matches(self, tool: str, subject: str) -> bool:
        return fnmatchcase(tool, self.tool) and fnmatchcase(subject, self.pattern)

    def __str__(self) -> str:
        return f"{self.verdict} {self.tool} {self.pattern}"


def subject_of(tool: str, arguments: dict[str, Any]) -> str:
    """What a rule's pattern is matched against, for this call."""
    if tool == "bash":
        return str(arguments.get("command", ""))
    if tool in PATH_ARGUMENT:
        return str(arguments.get(PATH_ARGUMENT[tool], ""))
    if tool in ("list_files", "grep"):
        return str(arguments.get("pattern", ""))
    return ""


def _paths_of(tool: str, arguments: dict[str, Any]) -> list[str]:
    if tool in PATH_ARGUMENT:
        return [str(arguments.get(PATH_ARGUMENT[tool], ""))]
    if tool in ("list_files", "grep"):
        return [str(arguments.get("path", "."))]
    return []


@dataclass(frozen=True, slots=True)
class Ruling:
    """What the rules and defaults say, before anyone is asked."""

    verdict: Verdict
    by: str
    reason: str = ""


def _literal(text: str) -> str:
    """A pattern that matches exactly ``text`` (glob characters escaped)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


class Policy:
    """Rules plus defaults, with an optional approver for "ask"."""

    def __init__(self, rules: list[Rule] | None = None, approver: Approver | None = None) -> None:
        self.rules = list(rules or [])
        self.approver = approver

    def rule_on(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> Ruling:
        """The ruling for a call, by the precedence in this module's docstring."""
        subject = subject_of(tool, arguments)
        for wanted in ("deny", "ask", "allow"):
            for rule in self.rules:
                if rule.verdict == wanted and rule.matches(tool, subject):
                    return Ruling(rule.verdict, by=f"rule '{rule}'")
        for given in _paths_of(tool, arguments):
            if not resolve(context.working_dir, given).inside:
                return Ruling("ask", "default", f"{given} is outside the working directory")
        if tool in READ_ONLY:
            return Ruling("allow", "default", "reads inside the working directory")
        if tool in DELEGATING:
            return Ruling("allow", "default", "each call it makes is decided on its own")
        return Ruling("ask", "default", f"{tool} can change things")

    async def decide(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> Decision:
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
        answer = await self.approver(tool, subject)
        if answer == "allow-always":
            self.rules.append(Rule("allow", tool, _literal(subject) or "*"))
            return Decision("allow", "user", "allowed always for this session")
        if answer == "allow":
            return Decision("allow", "user", "allowed once")
        if answer == "timeout":
            return Decision("deny", "timeout", "nobody answered in time")
        return Decision("deny", "user", "denied")
