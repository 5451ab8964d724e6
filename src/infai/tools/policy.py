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

A tool written in Python (:mod:`~infai.tools.decorator`, a plugin's) is ruled on
by the effects it declares (:mod:`~infai.tools.effects`): each path it reads
as ``read_file`` reading it, each it writes as ``write_file`` writing it (deny
and ask rules of the tool *and* of ``read_file``/``write_file`` bind it, the
defaults and the limits on outside paths and ``.git/`` apply; only an allow
rule naming the tool allows what the defaults would ask), the network asks
unless a rule naming the tool allows it; the strictest effect decides. A tool
declaring no effect is allowed unless a rule naming it says otherwise.

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

Rules themselves (parsing, subjects, what "allow always" offers) are
:mod:`~infai.tools.rules`; the names callers use are re-exported here.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from .base import Decision, ToolContext
from .commands import Analysis, analyse
from .effects import Effects, effects_of
from .git_hardening import included_config_files
from .questions import AllowAlways, Answer, Approver, Ask, DenyWith, Remember, Reply
from .rules import (
    DELEGATING,
    ESCALATED,
    GUARDED,
    MCP_PREFIX,
    PATH_ARGUMENT,
    READ_ONLY,
    VERDICTS,
    WRITING,
    Rule,
    RuleError,
    Target,
    Verdict,
    always_rules,
    escalates,
    exact_only_reason,
    guarded,
    is_exact,
    matcher,
    path_of,
    starts_outside,
    subject_of,
    target_of,
)
from .sandbox_verified import MODE_LABEL, system_read

#: a command longer than this is ruled on in a worker thread (the event loop stays free)
LONG_COMMAND = 4096
NO_SANDBOX = "the sandbox is not available here; shell commands always ask"


@dataclass(frozen=True, slots=True)
class Ruling:
    """What the rules and defaults say, before anyone is asked."""

    verdict: Verdict
    by: str
    reason: str = ""
    #: what the question names, when not the call's usual subject (a declared effect's path)
    subject: str | None = None


#: why the approval mode let a shell command run unasked
SANDBOXED_COMMAND = "confined by the sandbox to the working directory, with no network"


def _asked_by_hook(ruling: Ruling, why: str, hook_reason: str) -> Ruling:
    """After a hook's ``ask``: an allow asks, a question names its reason too, a deny stays."""
    if ruling.verdict == "allow":
        return Ruling("ask", "hook", why)
    said = "; the hook says: ".join(filter(None, [ruling.reason, hook_reason]))
    return replace(ruling, reason=said) if ruling.verdict == "ask" else ruling


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
        #: told of each question just before the approver is (a Notification hook);
        #: a delegated policy tells its parent's
        self.on_ask: Callable[[Ask], Awaitable[None]] | None = None
        #: the approval mode for a verified sandbox (:mod:`.sandbox_verified`), set by
        #: the harness where ``infai doctor`` passed: None, "files" (writes inside and
        #: system reads run unasked) or "commands" (and confined shell commands: the
        #: sandbox has no network)
        self.sandboxed: Literal["files", "commands"] | None = None

    def delegate(self, caller: str, remember: Remember | None = None) -> Policy:
        """A policy for a subagent: this one's rules (as they change), plus the
        subagent's own "allow always" answers, which stay with it (handed to
        ``remember``, never to this policy). Questions go to this policy's
        approver and name ``caller``."""
        child = Policy(remember=remember, shell_confined=self.shell_confined)
        child.protected = self.protected
        child.parent, child.caller = self, caller
        child.defaults = self.defaults
        child.sandboxed = self.sandboxed
        return child

    def all_rules(self) -> list[Rule]:
        """This policy's rules after those it inherits."""
        inherited = self.parent.all_rules() if self.parent is not None else []
        return [*inherited, *self.rules]

    def _approver(self) -> Approver | None:
        if self.approver is not None or self.parent is None:
            return self.approver
        return self.parent._approver()

    def _on_ask(self) -> Callable[[Ask], Awaitable[None]] | None:
        if self.on_ask is not None or self.parent is None:
            return self.on_ask
        return self.parent._on_ask()

    def _first(
        self, verdict: Verdict, tools: Iterable[str], subjects: Iterable[str]
    ) -> Rule | None:
        """The first rule of ``verdict`` matching one of the tools and one of the subjects."""
        tools, subjects = tuple(tools), tuple(subjects)
        for rule in self.all_rules():
            if rule.verdict != verdict or not any(fnmatchcase(t, rule.tool) for t in tools):
                continue
            matches = matcher(rule.pattern)
            if any(matches(subject) for subject in subjects):
                return rule
        return None

    def denies_reads(self) -> bool:
        """Whether any rule denies ``read_file`` or ``grep`` a path: then a file with
        several hard links may be a denied file under another name."""
        return any(
            rule.verdict == "deny" and any(fnmatchcase(t, rule.tool) for t in READS)
            for rule in self.all_rules()
        )

    def denied_read_patterns(self) -> tuple[str, ...]:
        """The patterns of the rules that deny reads (``read_file`` or ``grep``), for
        hiding the files they name from sandboxed commands too; a pattern that
        denies every read (empty, ``*``) is left out (it would hide the work)."""
        return tuple(
            rule.pattern
            for rule in self.all_rules()
            if rule.verdict == "deny"
            and rule.pattern.strip("*/") != ""
            and any(fnmatchcase(t, rule.tool) for t in READS)
        )

    def may_read(self, relative_path: str) -> bool:
        """False when a deny rule for ``read_file`` or ``grep`` matches this path
        (relative to the working directory), so searches skip what may not be read."""
        path = os.path.normpath(relative_path)
        return self._first("deny", READS, (path,)) is None

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
            return self._rule_on_path(tool, path_of(tool, arguments), target, context.working_dir)
        if (effects := effects_of(tool)) is not None:
            return self._rule_on_effects(tool, arguments, context, effects)
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

    def _rule_on_effects(
        self, tool: str, arguments: Mapping[str, Any], context: ToolContext, effects: Effects
    ) -> Ruling:
        """A declared tool's ruling: the strictest of its effects' (module docstring)."""
        rulings: list[Ruling] = []
        for effect, given in effects.paths(arguments):
            like = "read_file" if effect == "read" else "write_file"
            try:
                target = target_of(like, {"path": given}, context.working_dir, context.resolve)
            except ValueError as exc:
                return Ruling("deny", "default", f"the path cannot be resolved: {exc}")
            ruling = self._rule_on_path(tool, given, target, context.working_dir, like=like)
            if ruling.verdict == "deny":
                return ruling
            rulings.append(replace(ruling, subject=target.subject))
        if effects.network or not rulings:
            ruling = Ruling("allow", "default", f"{tool} declares it touches no file or network")
            if effects.network:
                ruling = Ruling("ask", "default", f"{tool} reaches the network", subject="")
            for verdict in VERDICTS:
                if rule := self._first(verdict, (tool,), ("",)):
                    ruling = Ruling(rule.verdict, by=f"rule '{rule}'", subject="")
                    break
            if ruling.verdict == "deny":
                return ruling
            rulings.append(ruling)
        asks = [ruling for ruling in rulings if ruling.verdict == "ask"]
        return asks[0] if asks else rulings[0]

    def _rule_on_path(
        self, tool: str, given: str, target: Target, working_dir: Path, like: str | None = None
    ) -> Ruling:
        """``tool``'s ruling on a path; ``like``: the built-in whose effect it has (a
        declared tool's read or write), whose deny and ask rules bind it too."""
        kind = like or tool
        writing = kind in WRITING and target.path is not None
        if guarded := self._path_guards(kind, (tool,) if like is None else (tool, like), target):
            return guarded
        passed_over = ""
        for rule in self.all_rules():
            if rule.verdict != "allow" or not any(rule.matches(tool, s) for s in target.allowed_as):
                continue
            if not target.inside and not starts_outside(rule.pattern):
                passed_over = f"; rule '{rule}' covers the working directory only"
            elif writing and _guarded(target, working_dir) and not is_exact(rule.pattern):
                passed_over = (
                    f"; rule '{rule}' does not reach .git/ or .infai/ or git's included "
                    "config (exact paths only)"
                )
            else:
                return Ruling("allow", by=f"rule '{rule}'")
        if (unasked := self._sandboxed_path(kind, target, writing, working_dir)) is not None:
            return unasked
        if not target.inside:
            shown = given
            if os.path.normpath(given) != target.subject:
                shown += f" ({target.subject})"
            why = f"{shown} is outside the working directory{passed_over}"
            return Ruling("ask", "default", why)
        if kind in READ_ONLY:
            return Ruling("allow", "default", "reads inside the working directory")
        if like is not None:
            return Ruling("ask", "default", f"{tool} writes {target.subject}{passed_over}")
        return Ruling("ask", "default", f"{tool} can change things{passed_over}")

    def _path_guards(self, kind: str, names: tuple[str, ...], target: Target) -> Ruling | None:
        """What decides a path call before any allow rule: deny rules, infai's own
        files, ask rules, and files with other hard links (None: none of them)."""
        if rule := self._first("deny", names, target.denied_as):
            return Ruling("deny", by=f"rule '{rule}'")
        if kind == "edit_file" and (rule := self._first("deny", READS, target.denied_as)):
            why = f"{target.subject} may not be read, and an edit reads it (old_text must match)"
            return Ruling("deny", f"rule '{rule}'", why)
        if kind in READS_A_FILE and self.denies_reads() and _hard_links(target.path) > 1:
            why = (
                f"{target.subject} has {_hard_links(target.path)} hard links: another name "
                "of it may be a file the read rules deny"
            )
            return Ruling("ask", "default", why)
        writing = kind in WRITING and target.path is not None
        if writing and (root := self._protected_root(target.path)) is not None:
            why = f"{target.subject} is in {root}: infai's own files are never written by tools"
            return Ruling("deny", "protected", why)
        if rule := self._first("ask", names, target.denied_as):
            return Ruling("ask", by=f"rule '{rule}'")
        if writing and (links := _hard_links(target.path)) > 1:
            why = (
                f"{target.subject} has {links} hard links: writing it changes a file "
                "that other names (perhaps outside the working directory) share"
            )
            return Ruling("ask", "default", why)
        return None

    def _sandboxed_path(
        self, tool: str, target: Target, writing: bool, working_dir: Path
    ) -> Ruling | None:
        """What the approval mode for a verified sandbox allows of a path tool's
        call that the rules left to the defaults: a system directory read, a write
        inside the working directory (not a guarded path); None: the defaults."""
        if not self.sandboxed:
            return None
        if not target.inside:
            if tool in READ_ONLY and system_read(target.path):
                return Ruling("allow", MODE_LABEL, "a system directory sandboxed commands read")
            return None
        if tool in READ_ONLY or (writing and _guarded(target, working_dir)):
            return None
        return Ruling("allow", MODE_LABEL, "a file inside the working directory")

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
            whole = rule.pattern == "*" or is_exact(rule.pattern)
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
        if self.sandboxed == "commands" and self.shell_confined:
            return Ruling("allow", MODE_LABEL, SANDBOXED_COMMAND)
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
        self,
        tool: str,
        arguments: Mapping[str, Any],
        context: ToolContext,
        *,
        hook: Literal["allow", "ask"] | None = None,
        hook_reason: str = "",
    ) -> Decision:
        """Rule on the call and, if that says ask, await the approver (none: deny).

        "Allow always" adds its rules to this policy and hands them to ``remember``;
        for an escalation it counts once. ``hook``: what a PreToolUse hook said
        (:mod:`infai.agent.hooks`): ``ask`` asks even where the rules allow;
        ``allow`` answers only the defaults' questions, never a deny or ask rule,
        an escalation or a command asked about because the sandbox is missing.
        """
        if len(str(arguments.get("command", ""))) > LONG_COMMAND:
            ruling = await asyncio.to_thread(self.rule_on, tool, arguments, context)
        else:
            ruling = self.rule_on(tool, arguments, context)
        why = hook_reason or f"a PreToolUse hook said {hook}"
        if hook == "ask":
            ruling = _asked_by_hook(ruling, why, hook_reason)
        elif (
            hook == "allow" and ruling.verdict == "ask" and _hook_may_allow(tool, arguments, ruling)
        ):
            return Decision("allow", "hook", why)
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
        on_ask = self._on_ask()
        if on_ask is not None:
            await on_ask(ask)
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
        return Decision("deny", "user", "denied by the user")

    def _question(
        self, tool: str, arguments: Mapping[str, Any], context: ToolContext, ruling: Ruling
    ) -> Ask:
        """The question for a call the ruling says to ask about."""
        name = ESCALATED if escalates(tool, arguments) else tool
        subject = ruling.subject
        if subject is None:
            subject = subject_of(name, arguments, context.working_dir)
        reason = ruling.reason or f"{ruling.by} asks"
        offered_nothing = name == ESCALATED or (tool == "bash" and not self.shell_confined)
        always = () if offered_nothing else tuple(always_rules(tool, subject))
        if not always and not subject and effects_of(tool) is not None:
            always = (Rule("allow", tool),)  # a declared tool's network: the tool itself
        note = exact_only_reason(name, subject)
        if tool == "bash" and not self.shell_confined and name != ESCALATED:
            note = f"{NO_SANDBOX}, so allow always is not offered"
        if self.caller:
            reason = f"{self.caller} asks: {reason}"
        return Ask(name, subject, reason, always, note, self.caller, dict(arguments))


def _hook_may_allow(tool: str, arguments: Mapping[str, Any], ruling: Ruling) -> bool:
    """Whether a hook's "allow" may answer this ask: the defaults' own question, not
    an escalation out of the sandbox, a command asked about for want of one or
    because deny rules cannot see all it runs, nor a write to a hard-linked file."""
    if ruling.by != "default" or escalates(tool, arguments):
        return False
    return not any(why in ruling.reason for why in _BINDING_ASKS)


#: the defaults' questions a hook's "allow" never answers (see :func:`_hook_may_allow`)
_BINDING_ASKS = (NO_SANDBOX, "rules cannot see all it runs", "hard links")


#: the tools whose deny rules are read rules (:meth:`Policy.may_read`)
READS = ("read_file", "grep")
#: the tools that read one named file's bytes back to the model
READS_A_FILE = ("read_file", "edit_file", "grep")


def _guarded(target: Target, working_dir: Path) -> bool:
    """Whether a write reaches a ``.git/`` or ``.infai/`` directory: one is named on
    the way (the path as given, or resolved), or the path resolves into the
    working directory's own, which may be a symlink to a directory of another
    name (``.infai -> conf``: ``conf/config.toml`` is the project's config); or
    a config file the repository's git config includes, which is git config too."""
    if any(guarded(subject) for subject in target.denied_as):
        return True
    if target.path is None:
        return False
    for name in GUARDED:
        real = (working_dir / name).resolve()
        if target.path == real or real in target.path.parents:
            return True
    return target.path in included_config_files(working_dir)


def _hard_links(path: Path | None) -> int:
    """How many names a regular file has (0: none there, or not a regular file)."""
    try:
        found = os.stat(path) if path is not None else None
    except OSError:
        return 0
    return found.st_nlink if found is not None and stat.S_ISREG(found.st_mode) else 0


#: the policy's own names, and those of :mod:`.rules` its callers import from here
__all__ = [
    "LONG_COMMAND",
    "NO_SANDBOX",
    "AllowAlways",
    "Answer",
    "Approver",
    "Ask",
    "DenyWith",
    "Policy",
    "Remember",
    "Reply",
    "Rule",
    "RuleError",
    "Ruling",
    "Verdict",
    "always_rules",
]
