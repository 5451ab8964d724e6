"""Hooks: the user's shell commands run at points of a session, as Claude Code runs them.

Configured in TOML as arrays of tables per event (``[[hooks.PreToolUse]]``:
``matcher``, ``command``, ``timeout``), a hook gets Claude Code's JSON payload
on stdin (:mod:`.hooks_payload` names the tools as Claude Code does) and
answers the way Claude Code reads it: exit 0 is success (a ``UserPromptSubmit``
or ``SessionStart`` hook's stdout is added to the model's context), exit 2
blocks (its stderr is the reason), any other exit, a timeout or a command that
cannot start is a non-blocking error the user is told of. A JSON object on
stdout is read on any exit: ``decision``/``reason``, ``continue: false`` with
``stopReason``, ``systemMessage`` (a notice for the user) and
``hookSpecificOutput`` (``permissionDecision``, ``permissionDecisionReason``,
``additionalContext``, ``updatedInput``: :func:`updated_call`).

Every run is recorded as a ``hook`` event (:class:`~infai.store.HookRecord`):
:meth:`Hooks.fire` queues the records and the turn appends them
(:meth:`Hooks.take`). The matching hooks of one event run at once; one
command configured twice runs once. A hook runs with the user's rights (not in
the sandbox: it is the user's own command, like their shell's), in the
session's working directory, with ``CLAUDE_PROJECT_DIR`` (and
``INFAI_PROJECT_DIR``) set to it.

Instead of a ``command``, a hook may name a ``handler``: an installed plugin's
hook handler (:mod:`.plugins`, group ``infai.hooks``), called in-process with
the same payload (as a dict); it answers by returning None (success), a
string (as a command's stdout) or a dict (as its JSON answer); an exception is
a non-blocking error, as another exit code is.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import re
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from infai.llm import ToolCall
from infai.store import Event, HookRecord
from infai.tools import Decision, Permissions, Policy, ToolContext
from infai.tools.offload import off_loop
from infai.tools.policy import Ask

from .hooks_payload import (
    tool_arguments,
    tool_input,
    tool_names,
    transcript_dir,
    write_transcript,
)
from .plugins import PluginError, hook_handler

EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "SessionEnd",
    "Notification",
)
#: the events whose matcher is matched against a tool's names (else: a source,
#: trigger or notification type, as in Claude Code)
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
#: the events an exit 2 cannot block: as in Claude Code, its stderr is only shown
#: to the user, as any other non-blocking error's
CANNOT_BLOCK = ("SessionStart", "PreCompact", "SessionEnd", "Notification")
DEFAULT_TIMEOUT = 60.0
#: how much of a hook's stdout and stderr a record keeps
OUTPUT_CAP = 4000
#: how many times Stop hooks may send a turn back to work before it ends anyway
MAX_STOP_CONTINUES = 8
#: the tool result's metadata key holding the arguments a PreToolUse hook's
#: ``updatedInput`` ran the call with (the stored call keeps the model's own)
HOOK_INPUT = "hook_input"
_PLAIN = re.compile(r"[A-Za-z0-9_|]+")


@dataclass(frozen=True)
class HookSpec:
    """One configured hook: the event, the command, which tools (or sources) it
    matches, its timeout, and the file that configured it."""

    event: str
    command: str
    matcher: str = ""
    timeout: float = DEFAULT_TIMEOUT
    source: str = ""
    #: an installed plugin's hook handler run instead of a command (``command`` names it)
    handler: str = ""

    def matches(self, names: Sequence[str]) -> bool:
        """Whether the matcher takes one of ``names``: empty or ``*`` takes all, a
        plain name (or ``A|B``) is exact, anything else a regular expression."""
        if self.matcher in ("", "*"):
            return True
        if _PLAIN.fullmatch(self.matcher):
            wanted = self.matcher.split("|")
            return any(name in wanted for name in names)
        pattern = re.compile(self.matcher)
        return any(pattern.search(name) for name in names)


def parse_hooks(path: Path, value: Any) -> list[HookSpec]:
    """The hooks of a file's ``hooks`` table; a ValueError names what is wrong."""
    if not isinstance(value, dict):
        raise ValueError("hooks must be a table of arrays of tables ([[hooks.PreToolUse]])")
    found: list[HookSpec] = []
    for event, entries in value.items():
        if event not in EVENTS:
            raise ValueError(f"hooks.{event}: unknown event (known: {', '.join(EVENTS)})")
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise ValueError(f"hooks.{event}: must be an array of tables ([[hooks.{event}]])")
        for number, entry in enumerate(entries):
            found.extend(_entry(path, event, entry, f"hooks.{event}[{number}]"))
    return found


def _entry(path: Path, event: str, entry: dict[str, Any], where: str) -> list[HookSpec]:
    """One entry: a hook, or Claude Code's settings shape written in TOML (a
    ``matcher`` and ``hooks = [{type = "command", command = ...}]``), so a user's
    settings.json carries over field for field."""
    nested = entry.get("hooks")
    if nested is None:
        return [_spec(path, event, entry, where)]
    if not isinstance(nested, list) or not all(isinstance(hook, dict) for hook in nested):
        raise ValueError(f"{where}.hooks: must be an array of tables, each one hook")
    if unknown := set(entry) - {"matcher", "hooks"}:
        raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r} beside hooks (matcher)")
    specs = []
    for number, hook in enumerate(nested):
        if "matcher" in hook:
            raise ValueError(f"{where}.hooks[{number}].matcher: belongs to the entry, not the hook")
        with_matcher = {**hook, "matcher": entry.get("matcher", "")}
        specs.append(_spec(path, event, with_matcher, f"{where}.hooks[{number}]"))
    return specs


def _spec(path: Path, event: str, entry: dict[str, Any], where: str) -> HookSpec:
    if entry.get("type", "command") != "command":  # Claude Code's http, prompt, agent...
        kind = entry["type"]
        raise ValueError(f"{where}.type: only command hooks run here, not {kind!r} ones")
    unknown = set(entry) - {"matcher", "command", "timeout", "handler", "type"}
    if unknown:
        known = "matcher, command, handler, timeout, type"
        raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r} ({known})")
    command, matcher = entry.get("command"), entry.get("matcher", "")
    handler = entry.get("handler", "")
    if not isinstance(handler, str) or ("handler" in entry and (not handler or command)):
        raise ValueError(f"{where}.handler: a plugin hook handler's name, instead of a command")
    if handler:
        command = f"handler:{handler}"
    if not isinstance(command, str) or not command.strip():
        raise ValueError(f"{where}.command: the shell command to run is required")
    if not isinstance(matcher, str):
        raise ValueError(f"{where}.matcher: must be a string")
    if matcher not in ("", "*") and not _PLAIN.fullmatch(matcher):
        try:
            re.compile(matcher)
        except re.error as exc:
            raise ValueError(f"{where}.matcher: not a regular expression: {exc}") from None
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"{where}.timeout: must be a positive number of seconds")
    return HookSpec(event, command, matcher, float(timeout), str(path), handler)


@dataclass
class Outcome:
    """What the hooks of one event said, together."""

    #: exit 2, or ``decision: block`` (a PreToolUse deny too): the reason
    blocked: str | None = None
    #: a PreToolUse hook's ``permissionDecision`` (deny > ask > allow), and why
    permission: str | None = None
    permission_reason: str = ""
    #: text for the model's context (additionalContext; a prompt hook's stdout)
    context: list[str] = field(default_factory=list)
    #: ``continue: false``: the turn stops, this is what the user is told
    stop: str | None = None
    #: for the user: non-blocking errors and what a block said
    notices: list[str] = field(default_factory=list)
    #: a PreToolUse hook's ``updatedInput``: the call's whole new input, in Claude
    #: Code's fields (:func:`updated_call` makes it infai's)
    updated_input: dict[str, Any] | None = None


def _cap(text: str) -> str:
    return text if len(text) <= OUTPUT_CAP else text[:OUTPUT_CAP] + "…"


def _json(stdout: str) -> dict[str, Any] | None:
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


_RANK = {"deny": 3, "ask": 2, "allow": 1}


@dataclass
class _Run:
    spec: HookSpec
    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: int
    timed_out: bool = False
    failed: str = ""

    def read_into(self, outcome: Outcome, adds_stdout: bool) -> HookRecord:
        """Fold this run's answer into ``outcome``; the record of the run."""
        decision, reason, context = None, None, None
        said = _json(self.stdout)
        if self.exit_code == 2 and self.spec.event not in CANNOT_BLOCK:
            decision, reason = "block", self.stderr.strip() or "blocked by a hook (exit 2)"
        elif self.timed_out or self.failed or self.exit_code != 0:
            decision = "error"
            why = self.failed or (
                f"timed out after {self.spec.timeout:g} s"
                if self.timed_out
                else f"exit {self.exit_code}"
            )
            detail = f": {self.stderr.strip()}" if self.stderr.strip() else ""
            outcome.notices.append(
                f"{self.spec.event} hook {self.spec.command!r} failed ({why}){detail}"
            )
        elif adds_stdout and said is None and self.stdout.strip():
            context = self.stdout.strip()
        if said is not None:
            decision, reason, context = _read_json(said, outcome, decision, reason, context)
            shown = said.get("systemMessage")  # Claude Code shows it to the user, not the model
            if isinstance(shown, str) and shown.strip():
                outcome.notices.append(f"{self.spec.event} hook: {shown.strip()}")
        if decision == "block":
            outcome.blocked = outcome.blocked or reason
        if context:
            outcome.context.append(context)
        return HookRecord(
            event=self.spec.event,
            command=self.spec.command,
            exit_code=self.exit_code,
            decision=decision,
            reason=reason,
            duration_ms=self.duration_ms,
            timed_out=self.timed_out,
            stdout=_cap(self.stdout) or None,
            stderr=_cap(self.stderr) or None,
            context=context if adds_stdout else None,
        )


def _read_json(
    said: dict[str, Any],
    outcome: Outcome,
    decision: str | None,
    reason: str | None,
    context: str | None,
) -> tuple[str | None, str | None, str | None]:
    """Claude Code's JSON answer folded in: block/approve, continue, hookSpecificOutput."""
    why = said.get("reason")
    if said.get("decision") == "block":
        decision, reason = "block", str(why or reason or "blocked by a hook")
    elif said.get("decision") == "approve":  # Claude Code's older PreToolUse "allow"
        decision = "allow"
        _permission(outcome, "allow", str(why or ""))
    specific = said.get("hookSpecificOutput")
    if isinstance(specific, Mapping):
        verdict = specific.get("permissionDecision")
        if verdict in _RANK:
            why = str(specific.get("permissionDecisionReason") or "")
            _permission(outcome, str(verdict), why)
            if verdict == "deny":
                decision, reason = "block", why or "denied by a PreToolUse hook"
            elif decision != "block":
                decision, reason = str(verdict), why or None
        if isinstance(new := specific.get("updatedInput"), Mapping):
            outcome.updated_input = dict(new)
        extra = specific.get("additionalContext")
        if isinstance(extra, str) and extra.strip():
            context = "\n".join(filter(None, [context, extra.strip()]))
    if said.get("continue") is False:
        outcome.stop = str(said.get("stopReason") or "a hook stopped the turn")
        decision = "stop"
    return decision, reason, context


def _permission(outcome: Outcome, verdict: str, why: str) -> None:
    if outcome.permission is None or _RANK[verdict] > _RANK[outcome.permission]:
        outcome.permission, outcome.permission_reason = verdict, why


class Hooks:
    """The hooks of one session: fires an event's matching hooks, keeps their records.

    ``stop_event`` is the event that ends a turn here (``Stop``; a subagent's
    session fires ``SubagentStop``).
    """

    def __init__(
        self,
        specs: Sequence[HookSpec],
        working_dir: Path,
        session_id: str,
        *,
        stop_event: str = "Stop",
        project_dir: Path | None = None,
    ) -> None:
        self.specs = tuple(specs)
        self.working_dir = working_dir
        self.session_id = session_id
        self.stop_event = stop_event
        self.project_dir = project_dir or working_dir
        #: records of runs not yet appended to the session (see :meth:`take`)
        self.pending: list[HookRecord] = []
        #: what hooks fired from outside the turn's steps (:meth:`notify`) have to
        #: tell the user, for the turn to say with their records
        self.notices: list[str] = []
        #: whether SessionStart has fired for this session object
        self.started = False
        #: SessionStart's ``source``: ``startup`` for a session opened empty,
        #: ``resume`` for one opened with history (set when it is opened: by the
        #: first prompt, the turn's own snapshot already stands in the session)
        self.source = "startup"
        #: whether a prompt fires UserPromptSubmit (a subagent's does not)
        self.prompts = True
        #: the session's context now (blocking; None: no transcript is written)
        self.events: Callable[[], list[Event]] | None = None

    def for_subagent(self, session_id: str) -> Hooks:
        """The same hooks for a subagent's child session: its tool calls fire them, its
        turn ends on SubagentStop, and its prompt (the parent's task) fires none."""
        child = Hooks(
            self.specs,
            self.working_dir,
            session_id,
            stop_event="SubagentStop",
            project_dir=self.project_dir,
        )
        child.started, child.prompts = True, False
        return child

    async def notify(self, ask: Ask) -> None:
        """A permission question is about to be asked: the Notification hooks
        (``notification_type: permission_prompt``); their records wait for the turn."""
        if self.has("Notification"):
            name = tool_names(ask.tool.rstrip("!"))[0]
            said = await self.fire(
                "Notification",
                ("permission_prompt",),
                message=f"infai needs your permission to use {name}",
                notification_type="permission_prompt",
            )
            self.notices += said.notices

    def has(self, event: str) -> bool:
        """Whether any hook is configured for ``event``."""
        return any(spec.event == event for spec in self.specs)

    def wants(self, event: str, name: str) -> bool:
        """Whether a hook of ``event`` matches ``name`` (a source, a trigger)."""
        return any(spec.event == event and spec.matches((name,)) for spec in self.specs)

    def take(self) -> list[HookRecord]:
        """The records of the runs since the last take, to append."""
        taken, self.pending = self.pending, []
        return taken

    def take_notices(self) -> list[str]:
        """What :meth:`notify`'s hooks had to tell the user since the last take."""
        taken, self.notices = self.notices, []
        return taken

    async def transcript(self) -> str | None:
        """The context written as a transcript for the hooks to read (None: none)."""
        events = self.events
        if events is None:
            return None
        path = transcript_dir() / f"{self.session_id}.jsonl"

        def work() -> Path:
            return write_transcript(events(), path, self.working_dir, self.session_id)

        try:
            return str(await off_loop(work))
        except OSError:  # a hook still runs; it reads no transcript
            return None

    def payload(self, event: str, transcript: str | None = None, **fields: Any) -> dict[str, Any]:
        """Claude Code's stdin object for ``event``: the common fields, then ``fields``."""
        return {
            "session_id": self.session_id,
            "transcript_path": transcript,
            "cwd": str(self.working_dir),
            "hook_event_name": event,
            "permission_mode": "default",
            **fields,
        }

    async def fire(
        self, event: str, names: Sequence[str] = (), tool: str | None = None, **fields: Any
    ) -> Outcome:
        """Run ``event``'s hooks whose matcher takes one of ``names`` (for a tool
        event: the tool's names; else the source, trigger or type), together, and
        read their answers. ``tool`` is recorded with each run."""
        outcome = Outcome()
        chosen: dict[str, HookSpec] = {}
        for spec in self.specs:
            if spec.event == event and (not names or spec.matches(names)):
                chosen.setdefault(spec.command, spec)  # one command configured twice runs once
        if not chosen:
            return outcome
        transcript = await self.transcript()
        data = json.dumps(self.payload(event, transcript, **fields), ensure_ascii=False).encode()
        runs = await asyncio.gather(*(self._run(spec, data) for spec in chosen.values()))
        adds = event in ("UserPromptSubmit", "SessionStart")
        for run in runs:
            record = run.read_into(outcome, adds)
            record.tool = tool
            self.pending.append(record)
        return outcome

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["CLAUDE_PROJECT_DIR"] = env["INFAI_PROJECT_DIR"] = str(self.project_dir)
        env["INFAI_SESSION_ID"] = self.session_id
        return env

    async def _run(self, spec: HookSpec, data: bytes) -> _Run:
        if spec.handler:
            return await _run_handler(spec, data)
        started = time.monotonic()

        def took() -> int:
            return int((time.monotonic() - started) * 1000)

        try:
            process = await asyncio.create_subprocess_shell(
                spec.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.working_dir,
                env=self._env(),
                start_new_session=True,  # its own process group: a timeout kills it all
            )
        except OSError as exc:
            return _Run(spec, None, "", "", took(), failed=f"cannot start: {exc.strerror or exc}")
        try:
            out, err = await asyncio.wait_for(process.communicate(data), spec.timeout)
        except TimeoutError:
            await _kill(process)
            return _Run(spec, None, "", "", took(), timed_out=True)
        except BaseException:  # a cancelled turn: the hook goes with it
            await _kill(process)
            raise
        text = out.decode(errors="replace"), err.decode(errors="replace")
        return _Run(spec, process.returncode, text[0], text[1], took())


#: what a handler's timeout recorded says happened to it (coroutine or not): a
#: command is killed, a coroutine cancelled, a plain function cannot be stopped
_TIMED_OUT = {
    True: "the handler was cancelled",
    False: "the handler cannot be stopped: it runs on in its thread, its answer ignored",
}


async def _run_handler(spec: HookSpec, data: bytes) -> _Run:
    """Call a plugin's hook handler with the payload, as a command would be run."""
    started = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        handler = await off_loop(hook_handler, spec.handler)
    except PluginError as exc:
        return _Run(spec, None, "", "", took(), failed=f"cannot load: {exc}")
    payload = json.loads(data)
    coroutine = inspect.iscoroutinefunction(handler)
    try:
        if coroutine:
            said = await asyncio.wait_for(handler(payload), spec.timeout)
        else:  # a thread cannot be killed: past its timeout it is left to finish
            said = await asyncio.wait_for(asyncio.to_thread(handler, payload), spec.timeout)
    except TimeoutError:  # a non-blocking error, as a command's timeout; said and recorded
        return _Run(spec, None, "", _TIMED_OUT[coroutine], took(), timed_out=True)
    except Exception as exc:  # the handler's failure: a non-blocking error, as exit 1
        return _Run(spec, 1, "", f"{type(exc).__name__}: {exc}", took())
    stdout = said if isinstance(said, str) else "" if said is None else json.dumps(said)
    return _Run(spec, 0, stdout, "", took())


async def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill the hook's whole process group and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(BaseException):  # reaped even if the turn is cancelled meanwhile
        await asyncio.shield(process.wait())


async def fire_tool(
    hooks: Hooks, event: str, name: str, arguments: Mapping[str, Any], call_id: str, **more: Any
) -> Outcome:
    """Fire a tool event (PreToolUse, PostToolUse) for one call, under Claude Code's
    names for the tool and its input."""
    return await hooks.fire(
        event,
        tool_names(name),
        tool=name,
        tool_name=tool_names(name)[0],
        tool_input=tool_input(name, arguments, hooks.working_dir),
        tool_use_id=call_id,
        **more,
    )


def updated_call(call: ToolCall, pre: Outcome | None) -> ToolCall:
    """The call as its PreToolUse hooks rewrote it (``updatedInput``, which replaces
    its whole input, as in Claude Code), for the policy to decide on and the tool
    to run; the call itself if no hook rewrote it, or one blocked it."""
    if pre is None or pre.updated_input is None or pre.blocked or pre.stop:
        return call
    return replace(call, arguments=tool_arguments(call.name, pre.updated_input))


async def decide_with(
    permissions: Permissions,
    tool: str,
    arguments: dict[str, Any],
    context: ToolContext,
    pre: Outcome | None,
) -> Decision:
    """The permission decision for a call its PreToolUse hooks let through: a
    hook's ``ask`` or ``allow`` is heard by a :class:`~infai.tools.Policy` (which
    never lets it override a deny rule or the sandbox); other permissions decide alone."""
    verdict = pre.permission if pre is not None else None
    if isinstance(permissions, Policy) and verdict in ("allow", "ask"):
        assert pre is not None
        hook: Literal["allow", "ask"] = "allow" if verdict == "allow" else "ask"
        return await permissions.decide(
            tool, arguments, context, hook=hook, hook_reason=pre.permission_reason
        )
    return await permissions.decide(tool, arguments, context)


def with_feedback(content: str, event: str, outcome: Outcome | None) -> str:
    """A tool's output with what its hooks told the model appended (a PostToolUse
    block's reason, any hook's additionalContext), as Claude Code feeds them back."""
    if outcome is None:
        return content
    said = [f"[{event} hook: {outcome.blocked}]"] if outcome.blocked else []
    said += [f"[{event} hook context: {text}]" for text in outcome.context]
    return "\n\n".join([content, *said]) if said else content
