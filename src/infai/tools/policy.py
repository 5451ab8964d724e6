"""Who may run what: rules of allow, ask and deny, matched against what a call touches.

A rule names a tool (or a glob of tools, ``*``) and a pattern (shell-style,
``fnmatch``; ``*`` crosses ``/``) matched against the call's *subject*:

- for the file and search tools, the path **as resolved** (symlinks followed,
  ``..`` collapsed), relative to the resolved working directory when inside
  it, absolute when outside. ``deny read_file .env`` therefore holds for
  ``/abs/wd/.env``, ``../wd/.env``, ``sub/../.env`` and a link to ``.env``; deny
  and ask rules also see the path as given (normalised), so they can name a
  link itself. An outside path is also offered as ``../x`` (resolved), so a
  rule like ``allow read_file ../shared/*`` still reads naturally;
- for ``bash``, every command the string runs (see :mod:`~infai.tools.commands`):
  deny and ask rules are checked against each part of a chained or nested
  command, with the program and flags normalised (``/bin/rm -fr``, ``\\rm -r
  -f``, ``env rm --recursive --force`` and ``find . -delete`` all meet
  ``deny bash rm -rf*``), and against the whole text. An allow rule covers a
  command only if allow rules cover every part the shell starts, nothing is
  redirected into a file and every part was understood; a rule naming the
  exact text, or any command at all (``allow bash``), covers it whole. A
  command with a part deny rules cannot see (``$CMD -rf x``, ``eval "$(...)"``)
  asks wherever deny or ask rules for ``bash`` exist, even under ``allow bash``;
  one too large to check (:data:`~infai.tools.commands.FORM_BUDGET`) is denied;
- ``bash!`` is a ``bash`` call with ``outside_sandbox`` set: an escalation.

Precedence, from first to last:

1. a matching **deny** rule denies (for ``bash!``, deny rules for ``bash``
   apply too); a write into a *protected* root (infai's own configuration and
   store) is denied whatever the rules say;
2. a matching **ask** rule asks; so does a write to a file with more than one
   hard link (another name of it may be anywhere), and every ``bash!`` call:
   no allow rule ever applies to an escalation;
3. a matching **allow** rule allows, within two limits: a path outside the
   working directory is allowed only by a rule whose pattern starts outside
   (``/`` or ``..``), and a write under a ``.git/`` or ``.infai/`` directory only
   by a rule naming that exact path (``allow write_file *`` does not reach
   ``.git/config``). Where the sandbox is not available (``shell_confined``
   False) a shell command an allow rule covers is still asked;
4. the defaults: reading, listing and searching inside the working directory
   are allowed, and so is ``task`` (a subagent, whose every call is decided
   again); writing, editing and shell commands ask; leaving the working
   directory asks. An MCP server's tool (``mcp__SERVER__TOOL``; rules name it,
   or a glob such as ``mcp__github__*``, with no pattern) asks, unless its
   server marks it read-only *and* the user's configuration trusts that
   (``trust_read_only``): :attr:`Policy.defaults` says so.

"Ask" goes to the approval callback the shell supplies (the TUI's dialog, the
server's approval queue). Without one (a headless run) ask means deny. The
callback may answer "allow always", which adds the allow rules :func:`always_rules`
names (shown with the question) for the rest of the session. For a command
that can write or run code through its own options (``sed``, ``find``,
``git diff``, interpreters, package managers…) those rules are the exact
command only, and the question's ``note`` says why; an escalation offers no
"allow always" at all (an answer of it counts once). A subagent decides with
a :meth:`Policy.delegate` of its parent's policy: the parent's rules apply,
the subagent's own "allow always" stays with the subagent, and its questions
name it and show the call's arguments. Every decision says who made it.
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import json
import os
import re
import stat
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from infai.errors import InfaiError

from .base import Decision, ToolContext
from .commands import Analysis, analyse
from .paths import Resolved, resolve

Verdict = Literal["allow", "ask", "deny"]
#: in the order they take precedence
VERDICTS: tuple[Verdict, ...] = ("deny", "ask", "allow")
#: "timeout": nobody answered in time (a served session's question expired)
Answer = Literal["allow", "allow-always", "deny", "timeout"]


@dataclass(frozen=True, slots=True)
class Ask:
    """A permission question as an approver sees it."""

    tool: str
    #: what rules match for this call: the command, the resolved path, the pattern
    subject: str
    #: why it asks: the rule that said so, or the default's reason
    reason: str
    #: the allow rules that answering "allow-always" adds (empty: not offered)
    always: tuple[Rule, ...]
    #: why "allow always" is narrow (exact only) or not offered ("" when neither)
    note: str = ""
    #: who asks when it is not the session's own agent (a subagent)
    caller: str = ""
    #: the call's arguments, as the model gave them
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AllowAlways:
    """Allow this call, and from now on in this session what these patterns match."""

    patterns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DenyWith:
    """Deny this call and tell the model why, in the user's words."""

    reason: str


Reply = Answer | AllowAlways | DenyWith
#: shows the user a question and returns the reply
Approver = Callable[[Ask], Awaitable[Reply]]
#: told the rules an "allow always" added, so a shell can keep them with the session
Remember = Callable[[list["Rule"]], None]

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
#: a command longer than this is ruled on in a worker thread (the event loop stays free)
LONG_COMMAND = 4096
NO_SANDBOX = "the sandbox is not available here; shell commands always ask"
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
        named = tool in TOOL_NAMES or tool.startswith(MCP_PREFIX)
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


def _path_of(tool: str, arguments: Mapping[str, Any]) -> str:
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
    given = _path_of(tool, arguments)
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
        given = _path_of(tool, arguments)
        return os.path.normpath(given) if given else ""
    return ""


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


def _guarded(subject: str) -> bool:
    return any(part in GUARDED for part in Path(subject).parts)


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
            return [Rule("allow", tool, _literal(subject))]
        prefix = _literal(" ".join(analyse(subject).started[0].written.split()[:2]))
        return [Rule("allow", tool, prefix), Rule("allow", tool, f"{prefix} *")]
    if tool in PATH_ARGUMENT and tool not in SEARCHING and subject and not _starts_outside(subject):
        parent = os.path.dirname(subject)
        if parent and not _guarded(subject):
            return [Rule("allow", tool, f"{_literal(parent)}/*")]
    return [Rule("allow", tool, _literal(subject) or "*")]


def _shown(arguments: Mapping[str, Any], limit: int = 2000) -> str:
    text = json.dumps(dict(arguments), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


class Policy:
    """Rules plus defaults, with an optional approver for "ask".

    ``protected``: directories no tool may write into, whatever the rules
    (infai's own configuration and store). ``shell_confined``: whether shell
    commands run in the sandbox; where they do not, every command asks.
    """

    def __init__(
        self,
        rules: list[Rule] | None = None,
        approver: Approver | None = None,
        *,
        remember: Remember | None = None,
        protected: Iterable[Path | str] = (),
        shell_confined: bool = True,
    ) -> None:
        self.rules = list(rules or [])
        self.approver = approver
        self.remember = remember
        self.protected = tuple(Path(p).resolve() for p in protected)
        self.shell_confined = shell_confined
        #: the policy this one was delegated from (its rules apply here too)
        self.parent: Policy | None = None
        #: who asks, in questions from a delegated policy
        self.caller = ""
        #: why a tool no rule names is allowed by default (None: it is not); an MCP
        #: hub's :meth:`~infai.tools.mcp.McpHub.default_allow` (trusted read-only tools)
        self.defaults: Callable[[str], str | None] | None = None

    def delegate(self, caller: str, remember: Remember | None = None) -> Policy:
        """A policy for a subagent: this one's rules (as they change), plus the
        subagent's own "allow always" answers, which stay with it (handed to
        ``remember``, never to this policy). Questions go to this policy's
        approver and name ``caller``."""
        child = Policy(remember=remember, shell_confined=self.shell_confined)
        child.protected = self.protected
        child.parent, child.caller = self, caller
        child.defaults = self.defaults
        return child

    def all_rules(self) -> list[Rule]:
        """This policy's rules after those it inherits."""
        inherited = self.parent.all_rules() if self.parent is not None else []
        return [*inherited, *self.rules]

    def _approver(self) -> Approver | None:
        if self.approver is not None or self.parent is None:
            return self.approver
        return self.parent._approver()

    def _first(
        self, verdict: Verdict, tools: Iterable[str], subjects: Iterable[str]
    ) -> Rule | None:
        """The first rule of ``verdict`` matching one of the tools and one of the subjects."""
        tools, subjects = tuple(tools), tuple(subjects)
        for rule in self.all_rules():
            if rule.verdict != verdict or not any(fnmatchcase(t, rule.tool) for t in tools):
                continue
            matches = _matcher(rule.pattern)
            if any(matches(subject) for subject in subjects):
                return rule
        return None

    def may_read(self, relative_path: str) -> bool:
        """False when a deny rule for ``read_file`` or ``grep`` matches this path
        (relative to the working directory), so searches skip what may not be read."""
        path = os.path.normpath(relative_path)
        return self._first("deny", ("read_file", "grep"), (path,)) is None

    def rule_on(self, tool: str, arguments: Mapping[str, Any], context: ToolContext) -> Ruling:
        """The ruling for a call, by the precedence in this module's docstring."""
        if escalates(tool, arguments):
            return self._rule_on_escalation(str(arguments.get("command", "")))
        if tool == "bash":
            return self._rule_on_shell(str(arguments.get("command", "")))
        if tool in PATH_ARGUMENT:
            try:
                target = target_of(tool, arguments, context.working_dir, context.resolve)
            except ValueError as exc:
                return Ruling("deny", "default", f"the path cannot be resolved: {exc}")
            return self._rule_on_path(tool, _path_of(tool, arguments), target)
        for verdict in VERDICTS:
            if rule := self._first(verdict, (tool,), ("",)):
                return Ruling(rule.verdict, by=f"rule '{rule}'")
        if self.defaults is not None and (why := self.defaults(tool)):
            return Ruling("allow", "default", why)
        if tool in DELEGATING:
            return Ruling("allow", "default", "each call it makes is decided on its own")
        if tool.startswith(MCP_PREFIX):
            return Ruling("ask", "default", f"{tool} is an MCP server's tool: it may do anything")
        return Ruling("ask", "default", f"{tool} can change things")

    def _rule_on_path(self, tool: str, given: str, target: Target) -> Ruling:
        if rule := self._first("deny", (tool,), target.denied_as):
            return Ruling("deny", by=f"rule '{rule}'")
        writing = tool in WRITING and target.path is not None
        if writing and (root := self._protected_root(target.path)) is not None:
            why = f"{target.subject} is in {root}: infai's own files are never written by tools"
            return Ruling("deny", "protected", why)
        if rule := self._first("ask", (tool,), target.denied_as):
            return Ruling("ask", by=f"rule '{rule}'")
        if writing and (links := _hard_links(target.path)) > 1:
            why = (
                f"{target.subject} has {links} hard links: writing it changes a file "
                "that other names (perhaps outside the working directory) share"
            )
            return Ruling("ask", "default", why)
        passed_over = ""
        for rule in self.all_rules():
            if rule.verdict != "allow" or not any(rule.matches(tool, s) for s in target.allowed_as):
                continue
            if not target.inside and not _starts_outside(rule.pattern):
                passed_over = f"; rule '{rule}' covers the working directory only"
            elif writing and _guarded(target.subject) and not _is_exact(rule.pattern):
                passed_over = f"; rule '{rule}' does not reach .git/ or .infai/ (exact paths only)"
            else:
                return Ruling("allow", by=f"rule '{rule}'")
        if not target.inside:
            shown = given
            if os.path.normpath(given) != target.subject:
                shown += f" ({target.subject})"
            why = f"{shown} is outside the working directory{passed_over}"
            return Ruling("ask", "default", why)
        if tool in READ_ONLY:
            return Ruling("allow", "default", "reads inside the working directory")
        return Ruling("ask", "default", f"{tool} can change things{passed_over}")

    def _protected_root(self, path: Path | None) -> Path | None:
        for root in self.protected:
            if path is not None and (path == root or root in path.parents):
                return root
        return None

    def _shell_denial(self, tools: tuple[str, ...], command: str, found: Analysis) -> Ruling | None:
        """A deny or ask rule matching the command's text or any of its parts."""
        forms = list(dict.fromkeys([command, *(f for part in found.commands for f in part.forms)]))
        checked = any(
            rule.verdict != "allow" and fnmatchcase(tool, rule.tool)
            for rule in self.all_rules()
            for tool in tools
        )
        if found.overflow and checked:
            why = f"too many parts ({len(found.commands)}) to check against the rules; split it"
            return Ruling("deny", "default", why)
        for verdict in VERDICTS[:2]:
            if rule := self._first(verdict, tools, forms):
                part = next(f for f in forms if any(rule.matches(t, f) for t in tools))
                why = "" if part == command else f"it runs {part!r}"
                return Ruling(verdict, by=f"rule '{rule}'", reason=why)
        if found.hidden and checked:  # no allow rule, not even "allow bash", decides this
            why = f"the deny and ask rules cannot see all it runs: {found.hidden}"
            return Ruling("ask", "default", why)
        return None

    def _rule_on_shell(self, command: str) -> Ruling:
        found = analyse(command)
        if denial := self._shell_denial(("bash",), command, found):
            return denial
        allowed_by: Rule | None = None
        passed_over = ""
        for rule in self.all_rules():
            if rule.verdict != "allow" or not fnmatchcase("bash", rule.tool):
                continue
            whole = rule.pattern == "*" or _is_exact(rule.pattern)
            if whole and rule.matches("bash", command):
                allowed_by = rule
                break
            if rule.matches("bash", command) and not passed_over:
                passed_over = f"; rule '{rule}' does not cover a chained command"
        if allowed_by is None and (cover := self._covering(found)):
            allowed_by = cover
        if allowed_by is not None and not self.shell_confined:
            return Ruling("ask", "default", f"{NO_SANDBOX} (rule '{allowed_by}' would allow it)")
        if allowed_by is not None:
            return Ruling("allow", by=f"rule '{allowed_by}'")
        if not found.simple and passed_over and found.unclear:
            passed_over += f" ({found.unclear})"
        return Ruling("ask", "default", f"bash can change things{passed_over}")

    def _covering(self, found: Analysis) -> Rule | None:
        """The allow rule that covers the first part, if allow rules cover every
        part the shell starts (and nothing is redirected into a file or unclear)."""
        if found.writes or found.unclear or not found.started:
            return None
        covering = [self._first("allow", ("bash",), (part.written,)) for part in found.started]
        return covering[0] if all(covering) else None

    def _rule_on_escalation(self, command: str) -> Ruling:
        denial = self._shell_denial(("bash", ESCALATED), command, analyse(command))
        if denial is not None and denial.verdict == "deny":
            return denial
        why = "runs outside the sandbox: nothing confines what it writes or reaches"
        return Ruling("ask", denial.by if denial else "default", why)

    async def decide(
        self, tool: str, arguments: Mapping[str, Any], context: ToolContext
    ) -> Decision:
        """Rule on the call and, if that says ask, await the approver (none: deny).

        "Allow always" adds its rules to this policy and hands them to ``remember``;
        for an escalation it counts once.
        """
        if len(str(arguments.get("command", ""))) > LONG_COMMAND:
            ruling = await asyncio.to_thread(self.rule_on, tool, arguments, context)
        else:
            ruling = self.rule_on(tool, arguments, context)
        if ruling.verdict == "allow":
            return Decision("allow", ruling.by, ruling.reason)
        if ruling.verdict == "deny":
            return Decision("deny", ruling.by, ruling.reason)
        approver = self._approver()
        if approver is None:
            why = f"{ruling.reason}; " if ruling.reason else ""
            return Decision(
                "deny", ruling.by, f"{why}asks for approval, and nobody can approve here"
            )
        ask = self._question(tool, arguments, context, ruling)
        answer = await approver(ask)
        wants_always = answer == "allow-always" or isinstance(answer, AllowAlways)
        if wants_always and not ask.always:  # not offered: it counts once
            where = ", outside the sandbox" if ask.tool == ESCALATED else ""
            return Decision("allow", "user", f"allowed once{where} (allow always is not offered)")
        if wants_always:
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
            once = "allowed once, outside the sandbox" if ask.tool == ESCALATED else "allowed once"
            return Decision("allow", "user", once)
        if answer == "timeout":
            return Decision("deny", "timeout", "nobody answered in time")
        if isinstance(answer, DenyWith) and answer.reason.strip():
            return Decision("deny", "user", f"denied by the user: {answer.reason.strip()}")
        return Decision("deny", "user", "denied")

    def _question(
        self, tool: str, arguments: Mapping[str, Any], context: ToolContext, ruling: Ruling
    ) -> Ask:
        """The question for a call the ruling says to ask about."""
        name = ESCALATED if escalates(tool, arguments) else tool
        subject = subject_of(name, arguments, context.working_dir)
        reason = ruling.reason or f"{ruling.by} asks"
        offered_nothing = name == ESCALATED or (tool == "bash" and not self.shell_confined)
        always = () if offered_nothing else tuple(always_rules(tool, subject))
        note = exact_only_reason(name, subject)
        if tool == "bash" and not self.shell_confined and name != ESCALATED:
            note = f"{NO_SANDBOX}, so allow always is not offered"
        if self.caller:
            reason = f"{self.caller} asks: {reason}"
        return Ask(name, subject, reason, always, note, self.caller, dict(arguments))


@functools.lru_cache(maxsize=4096)
def _matcher(pattern: str) -> Callable[[str], re.Match[str] | None]:
    """``fnmatchcase(text, pattern)`` as one compiled regex (many subjects, one pattern)."""
    return re.compile(fnmatch.translate(pattern)).match


def _hard_links(path: Path | None) -> int:
    """How many names a regular file has (0: none there, or not a regular file)."""
    try:
        found = os.stat(path) if path is not None else None
    except OSError:
        return 0
    return found.st_nlink if found is not None and stat.S_ISREG(found.st_mode) else 0
