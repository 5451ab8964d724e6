"""Typed records: the payload of each event kind, as pure values.

A record says *what happened* (a message, a tool call, its result, a compaction
summary); ids, parents, timestamps and on-disk locations are the store's business
and live on the :class:`~infai.store.events.Event` around it. Each record class
carries its event ``kind``; :data:`RECORD_TYPES` maps kinds to classes and is
versioned with the on-disk format (``KINDS_VERSION``). :func:`record_to_obj` and
:func:`record_from_obj` are the one (de)serialisation adapter: decoding is strict,
and a record that does not match its type is rejected with the field named.

The classes are plain ``__slots__`` classes and the JSON is the standard
library's: a cold resume must stay small, and a schema library's import alone
would cost more memory than the whole resume (see ``docs/store-format.md``).
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring  # the C string escaper json itself uses

from .errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: Version of the set of event kinds and their record shapes (2 added
#: ``snapshot`` and ``restore``, 3 ``gap``, 4 ``hook``; a session of an older
#: version holds none of the newer kinds and reads as is).
KINDS_VERSION = 4


class _Value:
    """Equality, repr and field order for small immutable-by-convention values."""

    __slots__ = ()

    def _fields(self) -> tuple[str, ...]:
        slots: tuple[str, ...] = self.__slots__
        return slots

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and all(
            getattr(self, f) == getattr(other, f) for f in self._fields()
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields())
        return f"{type(self).__name__}({args})"


class Usage(_Value):
    """Token usage reported by a provider for one model response."""

    __slots__ = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")

    def __init__(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> None:
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.cache_read_tokens = cache_read_tokens
        self.cache_write_tokens = cache_write_tokens


class MessageRecord(_Value):
    """A settled message: user prompt, assistant reply, or system notice."""

    kind = "message"
    __slots__ = ("content", "reasoning", "model", "stop_reason", "usage", "metadata")

    def __init__(
        self,
        *,
        content: str,
        reasoning: str | None = None,
        model: str | None = None,
        stop_reason: str | None = None,
        usage: Usage | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.content = content
        self.reasoning = reasoning
        self.model = model
        self.stop_reason = stop_reason
        self.usage = usage
        self.metadata = metadata or {}


class ToolCallRecord(_Value):
    """A tool invocation requested by the model, persisted before it runs."""

    kind = "tool_call"
    __slots__ = ("call_id", "name", "arguments", "metadata")

    def __init__(
        self,
        *,
        call_id: str,
        name: str,
        arguments: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.call_id = call_id
        self.name = name
        self.arguments = arguments or {}
        self.metadata = metadata or {}


class ToolResultRecord(_Value):
    """What a tool returned (or why it did not run), persisted after it ran."""

    kind = "tool_result"
    __slots__ = ("call_id", "name", "content", "is_error", "metadata")

    def __init__(
        self,
        *,
        call_id: str,
        name: str,
        content: str,
        is_error: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.call_id = call_id
        self.name = name
        self.content = content
        self.is_error = is_error
        self.metadata = metadata or {}


class CompactionRecord(_Value):
    """A context boundary: the summary stands in for every event before it."""

    kind = "compaction"
    __slots__ = (
        "summary",
        "goals",
        "constraints",
        "decisions",
        "files_changed",
        "unresolved",
        "facts",
        "tokens_before",
    )

    def __init__(
        self,
        *,
        summary: str,
        goals: list[str] | None = None,
        constraints: list[str] | None = None,
        decisions: list[str] | None = None,
        files_changed: list[str] | None = None,
        unresolved: list[str] | None = None,
        facts: list[str] | None = None,
        tokens_before: int | None = None,
    ) -> None:
        self.summary = summary
        self.goals = goals or []
        self.constraints = constraints or []
        self.decisions = decisions or []
        self.files_changed = files_changed or []
        self.unresolved = unresolved or []
        self.facts = facts or []
        self.tokens_before = tokens_before


class BranchSummaryRecord(_Value):
    """What was done on an abandoned branch, recorded where the work moved to."""

    kind = "branch_summary"
    __slots__ = ("summary", "abandoned_tip", "common_ancestor")

    def __init__(
        self,
        *,
        summary: str,
        abandoned_tip: str | None = None,
        common_ancestor: str | None = None,
    ) -> None:
        self.summary = summary
        self.abandoned_tip = abandoned_tip
        self.common_ancestor = common_ancestor


class SnapshotRecord(_Value):
    """The files of the working directory at this point of the timeline.

    ``tree`` is the root tree object (:mod:`.trees`) in the store's objects;
    every event after this one on its path, up to the next snapshot, has these
    files. ``reason`` says what took it ("turn start", "after bash", "before
    restore"); ``files`` and ``bytes`` count what it covers; ``changed`` how many
    paths differ from the previous snapshot on the path; ``skipped`` maps paths
    left out to why (ignored, over the size cap, unreadable), so a restore can say
    what it cannot bring back. Never sent to a model.
    """

    kind = "snapshot"
    __slots__ = ("tree", "reason", "files", "bytes", "changed", "skipped", "metadata")

    def __init__(
        self,
        *,
        tree: str,
        reason: str = "",
        files: int = 0,
        bytes: int = 0,
        changed: int = 0,
        skipped: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.tree = tree
        self.reason = reason
        self.files = files
        self.bytes = bytes
        self.changed = changed
        self.skipped = skipped or {}
        self.metadata = metadata or {}


class RestoreRecord(_Value):
    """Files put back on disk: the working directory now holds ``tree``, the files
    of the event ``source``.

    ``before`` is the snapshot event recorded (on the branch being left) just
    before the restore, so nothing on disk is lost; ``touched`` lists the paths
    written or removed; ``kept`` those the user chose to keep as they were.
    Never sent to a model.
    """

    kind = "restore"
    __slots__ = ("tree", "source", "before", "touched", "kept", "metadata")

    def __init__(
        self,
        *,
        tree: str,
        source: str,
        before: str | None = None,
        touched: list[str] | None = None,
        kept: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.tree = tree
        self.source = source
        self.before = before
        self.touched = touched or []
        self.kept = kept or []
        self.metadata = metadata or {}


class GapRecord(_Value):
    """Where events of a damaged session were lost: written by salvage between the
    nearest kept ancestor (or the root) and the kept events that followed the lost
    ones, so those are kept with a visible hole instead of dropped.

    ``lost`` names the ids of the events lost here, nearest first (the lost parent,
    its lost parent, ...); ``summary`` says so in words for people and models.
    """

    kind = "gap"
    __slots__ = ("summary", "lost")

    def __init__(self, *, summary: str, lost: list[str] | None = None) -> None:
        self.summary = summary
        self.lost = lost or []


class HookRecord(_Value):
    """One run of a user's hook command (:mod:`infai.agent.hooks`): which lifecycle
    ``event`` ran it (``PreToolUse``, ``Stop``, ...), the ``command``, its
    ``exit_code`` (None: it timed out or could not start), what it decided
    (``block``, ``deny``, ``allow``, ``ask``, ``stop``, ``error``, or nothing), why,
    how long it took, and its output (capped). ``context`` is text the hook added
    to the model's context (a ``UserPromptSubmit`` or ``SessionStart`` hook's
    output): the only part of a hook run a model is ever sent."""

    kind = "hook"
    __slots__ = (
        "event",
        "command",
        "exit_code",
        "decision",
        "reason",
        "duration_ms",
        "timed_out",
        "tool",
        "stdout",
        "stderr",
        "context",
    )

    def __init__(
        self,
        *,
        event: str,
        command: str,
        exit_code: int | None = None,
        decision: str | None = None,
        reason: str | None = None,
        duration_ms: int = 0,
        timed_out: bool = False,
        tool: str | None = None,
        stdout: str | None = None,
        stderr: str | None = None,
        context: str | None = None,
    ) -> None:
        self.event = event
        self.command = command
        self.exit_code = exit_code
        self.decision = decision
        self.reason = reason
        self.duration_ms = duration_ms
        self.timed_out = timed_out
        self.tool = tool
        self.stdout = stdout
        self.stderr = stderr
        self.context = context


Record = (
    MessageRecord
    | ToolCallRecord
    | ToolResultRecord
    | CompactionRecord
    | BranchSummaryRecord
    | SnapshotRecord
    | RestoreRecord
    | GapRecord
    | HookRecord
)

RECORD_TYPES: dict[str, type[Record]] = {
    "message": MessageRecord,
    "tool_call": ToolCallRecord,
    "tool_result": ToolResultRecord,
    "compaction": CompactionRecord,
    "branch_summary": BranchSummaryRecord,
    "snapshot": SnapshotRecord,
    "restore": RestoreRecord,
    "gap": GapRecord,
    "hook": HookRecord,
}
#: kinds that record the workspace, not the conversation: never sent to a model
CHECKPOINT_KINDS = frozenset({"snapshot", "restore"})
#: the kinds salvage writes where damaged events were lost (session format 3)
GAP_KINDS = frozenset({"gap"})
#: the kinds that record a hook's run (session format 4): never sent to a model,
#: but for the ``context`` a hook added
HOOK_KINDS = frozenset({"hook"})
KINDS: tuple[str, ...] = tuple(RECORD_TYPES)

# -- the adapter ------------------------------------------------------------

_STR_LISTS = {
    "goals",
    "constraints",
    "decisions",
    "files_changed",
    "unresolved",
    "facts",
    "touched",
    "kept",
    "lost",
}
_DICTS = {"metadata", "arguments", "skipped"}
_INTS = {"tokens_before", "files", "bytes", "changed", "exit_code", "duration_ms", *Usage.__slots__}
_BOOLS = {"is_error", "timed_out"}
_NOT_STR = _STR_LISTS | _DICTS | _INTS | _BOOLS | {"usage"}
#: fields a record cannot be written without
_REQUIRED = {"content", "call_id", "name", "summary", "tree", "source", "event", "command"}


def _plain(value: Any) -> Any:
    if isinstance(value, Usage):
        return {f: getattr(value, f) for f in Usage.__slots__ if getattr(value, f)}
    return value


def record_to_obj(record: Record) -> dict[str, Any]:
    """The record as a JSON-ready dict; fields at their default are left out."""
    out: dict[str, Any] = {}
    for name in record._fields():
        value = getattr(record, name)
        if value is None or value == {} or value == [] or value is False:
            continue
        out[name] = _plain(value)
    return out


def _type_error(where: str, expected: str, value: object) -> InvalidInput:
    got = "null" if value is None else type(value).__name__
    return InvalidInput(f"{where}: expected {expected}, got {got}")


#: how deeply metadata and tool arguments may nest (JSON parsers recurse)
MAX_DEPTH = 64


def _depth(value: Any) -> int:
    """Nesting depth of a JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list) and item:
            if level > MAX_DEPTH:
                return level
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def _check(name: str, value: Any, where: str) -> Any:
    """Validate one field's JSON value; returns the value to store."""
    if type(value) is str and name not in _NOT_STR:
        return value
    if name in _STR_LISTS:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _type_error(f"{where}.{name}", "a list of strings", value)
    elif name in _DICTS:
        if not isinstance(value, dict):
            raise _type_error(f"{where}.{name}", "an object", value)
        if _depth(value) > MAX_DEPTH:
            raise InvalidInput(f"{where}.{name}: nested deeper than {MAX_DEPTH} levels")
    elif name in _INTS:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _type_error(f"{where}.{name}", "an integer", value)
    elif name in _BOOLS:
        if not isinstance(value, bool):
            raise _type_error(f"{where}.{name}", "true or false", value)
    elif name == "usage":
        if not isinstance(value, dict):
            raise _type_error(f"{where}.{name}", "an object", value)
        return _build(Usage, value, f"{where}.{name}")
    elif not isinstance(value, str):
        raise _type_error(f"{where}.{name}", "a string", value)
    return value


def _build(cls: Callable[..., Any], obj: dict[str, Any], where: str) -> Any:
    slots: tuple[str, ...] = cls.__slots__  # type: ignore[attr-defined]
    unknown = set(obj) - set(slots)
    if unknown:
        raise InvalidInput(f"{where}: unknown field {sorted(unknown)[0]!r}")
    kwargs = {k: _check(k, v, where) for k, v in obj.items() if v is not None}
    try:
        return cls(**kwargs)
    except TypeError:
        missing = [s for s in slots if s not in kwargs]
        raise InvalidInput(f"{where}: missing required field {missing[0]!r}") from None


def record_from_obj(kind: str, obj: object) -> Record:
    """Build the record of ``kind`` from parsed JSON, strictly (errors name the field)."""
    rtype = RECORD_TYPES.get(kind)
    if rtype is None:
        raise InvalidInput(f"unknown event kind {kind!r} (known: {', '.join(KINDS)})")
    if not isinstance(obj, dict):
        raise _type_error(f"invalid {kind} record: $", "an object", obj)
    record: Record = _build(rtype, obj, f"invalid {kind} record: $")
    return record


def record_from_stored(kind: str, obj: dict[str, Any]) -> Record:
    """Rebuild a record the store wrote and checksummed (checked when it was written).

    Raises ``TypeError`` or ``KeyError`` if the stored object does not fit.
    """
    usage = obj.get("usage")
    if usage is not None:
        obj["usage"] = Usage(**usage)
    record: Record = RECORD_TYPES[kind](**obj)
    return record


_strict_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def encode_record(record: Record) -> bytes:
    """Check a record against its type and serialise it to compact JSON bytes.

    These are the bytes a blob digest covers. Anything the store could not read
    back (a wrong field type, NaN, an object JSON cannot hold, a lone surrogate)
    raises :class:`InvalidInput` naming the field, before anything is written.
    """
    where = f"invalid {record.kind} record: $"
    parts = []
    try:
        for name in record._fields():
            value = getattr(record, name)
            if type(value) is str and name not in _NOT_STR:
                # By far the common case: escape with json's own C escaper.
                parts.append(f'"{name}":{encode_basestring(value)}')
                continue
            if value is None or value == {} or value == [] or value is False:
                if name in _REQUIRED:
                    raise InvalidInput(f"{where}: missing required field {name!r}")
                continue
            plain = _plain(value)
            _check(name, plain, where)
            parts.append(f'"{name}":{_strict_dumps(plain)}')
        return ("{" + ",".join(parts) + "}").encode()
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput(f"{where}: {exc}") from None


def decode_record(kind: str, data: bytes) -> Record:
    """Parse a record of ``kind`` from JSON bytes, strictly."""
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise InvalidInput(f"malformed JSON in {kind} record: {exc}") from None
    return record_from_obj(kind, obj)


PREVIEW_CHARS = 80


def hook_summary(record: HookRecord) -> str:
    """A hook run in one line: event (tool), how it ended, what it decided, then the
    command (last: a preview cut short keeps what the hook did)."""
    what = f"{record.event}({record.tool})" if record.tool else record.event
    if record.timed_out:
        ended = "timed out"
    elif record.exit_code is None:
        ended = "did not start"
    else:
        ended = f"exit {record.exit_code}"
    decided = f" {record.decision}" if record.decision else ""
    return f"hook {what} {ended}{decided} ({record.duration_ms} ms): {record.command}"


def preview(record: Record) -> str:
    """A one-line summary for timelines, computed when the event is written."""
    if isinstance(record, MessageRecord):
        text = record.content
    elif isinstance(record, ToolCallRecord):
        text = f"{record.name}({json.dumps(record.arguments, ensure_ascii=False)})"
    elif isinstance(record, ToolResultRecord):
        text = f"{record.name}{' error' if record.is_error else ''}: {record.content}"
    elif isinstance(record, SnapshotRecord):
        text = f"files: {record.files} ({record.changed} changed) {record.reason}"
    elif isinstance(record, RestoreRecord):
        text = f"files restored from {record.source}: {len(record.touched)} touched"
    elif isinstance(record, HookRecord):
        text = hook_summary(record)
    else:
        text = record.summary
    text = text[: PREVIEW_CHARS * 2]
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else " " for ch in text)
    # Only spaces are left as whitespace; collapse runs (skipped when there are none).
    if "  " in text or text[:1] == " " or text[-1:] == " ":
        text = " ".join(text.split())
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    return text
