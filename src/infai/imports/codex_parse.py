"""Reading one Codex CLI rollout into typed events, in the order Codex wrote them.

Model, in prose: a Codex rollout
(``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) is a linear log with no ids
or parent links, in one of two formats:

- *legacy* (2025): a bare meta object first, then bare response items with
  ``{"record_type": "state"}`` lines between them, no timestamps;
- *envelope* (0.58 onwards): every line ``{timestamp, type, payload}`` with
  ``session_meta``, ``turn_context``, ``response_item``, ``event_msg`` and
  ``compacted`` kinds (more appear release by release).

The response items are what the model saw, so they become the events; the
``event_msg`` copies of the same prompts, replies and reasoning are the UI's
view and are counted, not imported twice. One model response (its reasoning,
its text, the calls it made) becomes what infai itself writes for one: a single
assistant message carrying the reasoning, usage and model, followed by its tool
calls; each call's output is a tool result paired by ``call_id``. Usage comes
from ``token_count`` events, which Codex repeats without change: only a count
whose running total moved is new, and its ``last_token_usage`` belongs to the
response being written around it (before it in newer versions, after it in
0.58). A ``thread_rolled_back`` event (Codex dropping the last user turns)
makes what follows a branch from before those turns, so the dropped turns stay
in the session as a branch that was left. A ``compacted`` line becomes a
compaction event followed by the history Codex replaces the old one with, so an
imported session resumes with the same bounded context. What infai has no kind
for (``turn_context`` changes, ``ghost_snapshot``, ``task_started``, unknown
future types) rides along as metadata of the next event, and whatever follows
the last event goes to the session's metadata; every problem is reported with
its line.

Every event is keyed by the line it came from, so an import of the same file
grown later derives the same ids for the lines it already had.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from infai.store.records import (
    CompactionRecord,
    MessageRecord,
    Record,
    ToolCallRecord,
    ToolResultRecord,
    Usage,
)

from .base import ImportReport, Line, label, to_rfc3339

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

#: response items that are calls to a tool whose output comes back as an item
_CALLS = {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
#: response items that carry a call's output
_OUTPUTS = {
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "tool_search_output",
}
#: tools the provider runs itself: no output item follows; kept on the reply
_HOSTED = {"web_search_call", "image_generation_call"}
#: event_msg kinds that repeat a response item (the UI's copy)
_DUPLICATES = {"user_message", "agent_message", "agent_reasoning", "agent_reasoning_raw_content"}
#: how much of the earlier user messages Codex keeps after a compaction (its constant)
_KEPT_USER_TOKENS = 20_000
#: the prefixes of user messages Codex injects itself (not typed by the user)
_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
    "<subagent_notification>",
    "<turn_aborted>",
    "<user_shell_command>",
)


@dataclass
class Item:
    """One event to write: a stable key (its source line), role, record and time."""

    key: str
    role: str
    record: Record
    timestamp: str
    line: int
    parent: str | None  # the key of the event before it on its branch (None: the first)


@dataclass
class Thread:
    """A rollout read: its events in order and what it says about the session."""

    report: ImportReport
    thread_id: str | None = None
    items: list[Item] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    working_dir: str | None = None
    model: str | None = None
    created_at: str | None = None
    parent_thread_id: str | None = None
    forked_from_id: str | None = None
    #: child thread id -> key of the spawn_agent call that started it
    spawned: dict[str, str] = field(default_factory=dict)
    #: what followed the last event (kept in the session's metadata)
    trailing: list[dict[str, Any]] = field(default_factory=list)
    legacy: bool = False


def _text(content: object) -> str:
    """The text of a message's content list (or a string), images as a marker."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") in ("input_image", "image"):
            parts.append("[image]")
    return "\n".join(parts)


def _reasoning_text(payload: dict[str, Any]) -> str:
    texts = []
    for key in ("summary", "content"):
        parts = payload.get(key)
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return "\n\n".join(texts)


def _kind(value: object) -> str:
    """An entry's ``type`` as text (a redacted or corrupted one is named by its JSON type)."""
    return value if isinstance(value, str) else f"<{type(value).__name__}>"


def _injected(text: str) -> bool:
    return text.lstrip().startswith(_INJECTED)


def _usage(info: object) -> tuple[object, Usage | None, str | None]:
    """(running total, this response's usage, a type problem) of a token_count's info."""
    if not isinstance(info, dict):
        return None, None, None if info is None else f"info is a {type(info).__name__}"
    total, last = info.get("total_token_usage"), info.get("last_token_usage")
    if not isinstance(last, dict):
        return total, None, f"last_token_usage is a {type(last).__name__}, not an object"

    def count(name: str) -> int:
        value = last.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    usage = Usage(
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        cache_read_tokens=count("cached_input_tokens"),
    )
    return total, usage, None


class _Reader:
    """Turns a rollout's records into :class:`Item` s (one instance per file)."""

    def __init__(self, thread: Thread) -> None:
        self.t = thread
        self.clock = "1970-01-01T00:00:00Z"
        self.reply: Item | None = None  # the assistant message of the response being read
        self.pending_usage: Usage | None = None
        self.last_total: object = None
        self.calls: dict[str, Item] = {}  # calls waiting for their output
        self.seen_calls: set[str] = set()
        self.notes: list[dict[str, Any]] = []
        self.last_context: dict[str, Any] | None = None
        self.user_texts: list[str] = []  # real user prompts so far (for compaction)
        self.warned: dict[str, list[int]] = {}  # message -> [first line, more lines]
        self.report = thread.report
        self.line = 1  # the source line being read
        self.path: list[Item] = []  # the branch being written (a rollback cuts it)
        self.turns: set[str] = set()  # keys of the user's own prompts (where turns start)

    # -- helpers -------------------------------------------------------------

    def warn(self, line: int, message: str) -> None:
        """Report ``message`` once per kind: later lines like it are counted."""
        first = self.warned.get(message)
        if first is None:
            self.warned[message] = [line, 0]
        else:
            first[1] += 1

    def emit(self, key: str, role: str, record: Record) -> Item:
        if self.notes and isinstance(record, MessageRecord | ToolCallRecord | ToolResultRecord):
            record.metadata.setdefault("codex", {})["notes"] = self.notes
            self.notes = []
        parent = self.path[-1].key if self.path else None
        item = Item(key, role, record, self.clock, self.line, parent)
        self.t.items.append(item)
        self.path.append(item)
        return item

    def note(self, kind: str, payload: object, key: str) -> None:
        self.notes.append({"type": kind, "line": key, "payload": payload})
        self.report.keep(kind)

    def close_reply(self) -> None:
        self.reply = None

    def open_reply(self, key: str) -> Item:
        if self.reply is None:
            record = MessageRecord(content="", model=self.t.model)
            self.reply = self.emit(key, "assistant", record)
            record.usage, self.pending_usage = self.pending_usage, None
        return self.reply

    # -- the dispatch ----------------------------------------------------------

    def feed(self, key: str, line: int, obj: dict[str, Any]) -> None:
        self.line = line
        if self.t.legacy:
            if "record_type" in obj:
                self.report.skip("record_type/state", "a marker line with no content")
                return
            self.response_item(key, line, obj)
            return
        stamp = to_rfc3339(obj.get("timestamp"))
        if stamp is None:
            self.warn(line, "a line without a readable timestamp: the one before it is used")
        else:
            self.clock = stamp
        kind, payload = _kind(obj.get("type")), obj.get("payload")
        if not isinstance(payload, dict):
            self.warn(line, f"{kind!r} line has no payload object; skipped")
            return
        if kind == "session_meta":
            self.session_meta(key, payload)
        elif kind == "turn_context":
            self.turn_context(key, payload)
        elif kind == "response_item":
            self.response_item(key, line, payload)
        elif kind == "event_msg":
            self.event_msg(key, line, payload)
        elif kind == "compacted":
            self.compacted(key, line, payload)
        else:
            self.note(str(kind), payload, key)

    def session_meta(self, key: str, payload: dict[str, Any]) -> None:
        if self.t.meta:
            self.note("session_meta", payload, key)
            return
        self.report.keep("session_meta")
        self.take_meta(payload)

    def take_meta(self, payload: dict[str, Any]) -> None:
        t = self.t
        for name in ("instructions", "base_instructions"):
            if payload.get(name):  # the system prompt Codex sent: kept on the first event
                self.note(f"session_meta.{name}", payload[name], "L1")
        t.meta = {
            k: v for k, v in payload.items() if k not in ("instructions", "base_instructions")
        }
        if isinstance(payload.get("id"), str):
            t.thread_id = payload["id"]
        if isinstance(payload.get("cwd"), str):
            t.working_dir = payload["cwd"]
        t.created_at = to_rfc3339(payload.get("timestamp"))
        self.clock = t.created_at or self.clock
        source = payload.get("source")
        spawn = source.get("subagent") if isinstance(source, dict) else None
        spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
        parent = payload.get("parent_thread_id") or (
            spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
        )
        t.parent_thread_id = parent if isinstance(parent, str) else None
        forked = payload.get("forked_from_id")
        t.forked_from_id = forked if isinstance(forked, str) else None

    def turn_context(self, key: str, payload: dict[str, Any]) -> None:
        self.report.keep("turn_context")
        if isinstance(payload.get("model"), str):
            self.t.model = payload["model"]
        same = {k: v for k, v in payload.items() if k != "turn_id"}
        if same != self.last_context:
            self.last_context = same
            self.notes.append({"type": "turn_context", "line": key, "payload": payload})

    def response_item(self, key: str, line: int, p: dict[str, Any]) -> None:
        kind = _kind(p.get("type"))
        if kind == "message":
            self.message(key, p)
        elif kind == "reasoning":
            reply = self.open_reply(key)
            text = _reasoning_text(p)
            record = reply.record
            assert isinstance(record, MessageRecord)
            if text:
                record.reasoning = f"{record.reasoning}\n\n{text}" if record.reasoning else text
            if p.get("encrypted_content"):
                codex = record.metadata.setdefault("codex", {})
                codex.setdefault("encrypted_reasoning", []).append(p["encrypted_content"])
        elif kind in _CALLS:
            self.call(key, line, p)
        elif kind in _OUTPUTS:
            self.output(key, line, p)
        elif kind in _HOSTED:
            record = self.open_reply(key).record
            assert isinstance(record, MessageRecord)
            record.metadata.setdefault("codex", {}).setdefault("hosted_tools", []).append(p)
            self.report.keep(f"response_item/{kind}")
        else:
            self.note(f"response_item/{kind}", p, key)

    def message(self, key: str, p: dict[str, Any]) -> None:
        role, text = p.get("role"), _text(p.get("content"))
        meta: dict[str, Any] = {}
        if p.get("phase") is not None:
            meta["phase"] = p["phase"]
        content = p.get("content")
        blocks = content if isinstance(content, list) else []
        images = [b for b in blocks if isinstance(b, dict) and "image_url" in b]
        if images:
            meta["images"] = images
        if role == "assistant":
            record = self.open_reply(key).record
            assert isinstance(record, MessageRecord)
            record.content = f"{record.content}\n\n{text}" if record.content else text
            if meta:
                record.metadata.setdefault("codex", {}).update(meta)
            return
        self.close_reply()
        if role == "user" and not _injected(text):
            self.user_texts.append(text)
            if self.t.name is None:
                self.t.name = label(text)
        infai_role = "user" if role == "user" else "system"
        if role != "user":
            meta["role"] = role
        record = MessageRecord(content=text, metadata={"codex": meta} if meta else None)
        item = self.emit(key, infai_role, record)
        if role == "user" and not _injected(text):
            self.turns.add(item.key)

    def call(self, key: str, line: int, p: dict[str, Any]) -> None:
        kind = _kind(p["type"])
        call_id = p.get("call_id") or p.get("id")
        if not isinstance(call_id, str) or not call_id:
            self.warn(line, f"{kind} has no call_id; kept as metadata")
            self.note(f"response_item/{kind}", p, key)
            return
        name = p.get("name")
        if not isinstance(name, str) or not name:
            name = kind.removesuffix("_call")
        meta: dict[str, Any] = {"type": kind}
        for extra in ("namespace", "status", "execution", "id"):
            if p.get(extra) is not None:
                meta[extra] = p[extra]
        if kind == "function_call":
            arguments = self.arguments(p.get("arguments"), line)
        elif kind == "custom_tool_call":
            arguments = {"input": p.get("input")}
        elif kind == "local_shell_call":
            arguments = {"action": p.get("action")}
        else:
            arguments = {"arguments": p.get("arguments")}
        self.open_reply(key)
        if call_id in self.seen_calls:
            self.warn(line, f"call_id {call_id} appears twice; the later call kept too")
        record = ToolCallRecord(
            call_id=call_id, name=name, arguments=arguments, metadata={"codex": meta}
        )
        self.seen_calls.add(call_id)
        self.calls[call_id] = self.emit(key + ".call", "assistant", record)

    def arguments(self, raw: object, line: int) -> dict[str, Any]:
        """A function call's arguments: a JSON object held in a string."""
        if isinstance(raw, dict):
            return raw
        if isinstance(raw, str):
            try:
                value = json.loads(raw)
            except ValueError:
                self.warn(line, "function_call.arguments is not JSON; kept as text")
                return {"raw": raw}
            if isinstance(value, dict):
                return value
            return {"value": value}
        return {"value": raw}

    def output(self, key: str, line: int, p: dict[str, Any]) -> None:
        self.close_reply()
        call_id = p.get("call_id")
        call = self.calls.pop(call_id, None) if isinstance(call_id, str) else None
        name = "unknown"
        if call is None:
            self.warn(line, f"output for call_id {call_id!r} with no call before it")
        else:
            assert isinstance(call.record, ToolCallRecord)
            name = call.record.name
        content, meta = _output(p)
        meta["type"] = p.get("type")
        record = ToolResultRecord(
            call_id=str(call_id), name=name, content=content, metadata={"codex": meta}
        )
        self.emit(key, "tool", record)
        if call is not None and name == "spawn_agent":
            self.spawned(call, content)

    def spawned(self, call: Item, content: str) -> None:
        try:
            value = json.loads(content)
        except ValueError:
            return
        if isinstance(value, dict) and isinstance(value.get("agent_id"), str):
            self.t.spawned[value["agent_id"]] = call.key

    def event_msg(self, key: str, line: int, p: dict[str, Any]) -> None:
        kind = _kind(p.get("type"))
        if kind in _DUPLICATES:
            self.report.skip(f"event_msg/{kind}", "the UI's copy of a response item")
            if kind == "user_message" and not self.t.name:
                self.t.name = label(p.get("message"))
        elif kind == "token_count":
            self.token_count(line, p)
        else:
            self.note(f"event_msg/{kind}", p, key)
            if kind == "thread_rolled_back":
                self.roll_back(line, p.get("num_turns"))

    def roll_back(self, line: int, turns: object) -> None:
        """Codex dropped the last ``turns`` user turns: what follows branches off before
        them, and the dropped turns stay in the session as the branch that was left."""
        if not isinstance(turns, int) or isinstance(turns, bool) or turns < 1:
            self.warn(line, f"thread_rolled_back.num_turns is {turns!r}, not a count: ignored")
            return
        starts = [i for i, item in enumerate(self.path) if item.key in self.turns]
        if not starts:
            self.warn(line, "thread_rolled_back with no user turn before it: ignored")
            return
        self.close_reply()
        del self.path[starts[-min(turns, len(starts))] :]

    def token_count(self, line: int, p: dict[str, Any]) -> None:
        """Put a new usage count on the response it closes (or the next one).

        Newer versions write the count after the response (and after its tool
        outputs); 0.58 writes it just before the response's items. A count whose
        running total did not move repeats the last one and is not counted again.
        """
        total, usage, problem = _usage(p.get("info"))
        if problem is not None:
            self.warn(line, f"token_count: {problem}; no usage taken")
        if usage is None or (total is not None and total == self.last_total):
            self.report.skip("event_msg/token_count", "repeats the previous count, or has none")
            return
        self.last_total = total
        self.report.keep("event_msg/token_count")
        target = self.last_reply_without_usage()
        if target is None:
            self.pending_usage = usage
        else:
            assert isinstance(target.record, MessageRecord)
            target.record.usage = usage

    def last_reply_without_usage(self) -> Item | None:
        for item in reversed(self.path):
            if item.role == "assistant" and isinstance(item.record, MessageRecord):
                return item if item.record.usage is None else None
            if item.role == "user":
                return None
        return None

    def compacted(self, key: str, line: int, p: dict[str, Any]) -> None:
        """A compaction: the summary, then the history Codex put in place of the old one."""
        self.close_reply()
        message = p.get("message") if isinstance(p.get("message"), str) else ""
        summary = message or "(Codex compacted the conversation; the history it kept follows.)"
        self.emit(key, "assistant", CompactionRecord(summary=summary))
        replacement = p.get("replacement_history")
        if isinstance(replacement, list):
            for index, item in enumerate(replacement):
                if isinstance(item, dict):
                    self.response_item(f"{key}.r{index}", line, item)
                    self.mark_replacement()
            self.close_reply()
            return
        if replacement is not None:
            self.warn(line, "compacted.replacement_history is not a list; ignored")
        # Without a replacement, Codex keeps the most recent user prompts (up to
        # its budget) and the summary: the prompts follow the compaction here.
        kept, budget = [], _KEPT_USER_TOKENS * 4  # Codex counts ~4 bytes a token
        for text in reversed(self.user_texts):
            size = len(text.encode())
            if size > budget:
                if budget > 0:
                    kept.append(text.encode()[:budget].decode(errors="ignore"))
                break
            kept.append(text)
            budget -= size
        for index, text in enumerate(reversed(kept)):
            meta = {"codex": {"kept_by_compaction": True}}
            self.emit(f"{key}.u{index}", "user", MessageRecord(content=text, metadata=meta))

    def mark_replacement(self) -> None:
        last = self.path[-1].record if self.path else None
        if isinstance(last, MessageRecord | ToolCallRecord | ToolResultRecord):
            last.metadata.setdefault("codex", {})["replacement_history"] = True


def _output(p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A call output's text and what else it said (0.58 wraps it in JSON with metadata)."""
    raw = p.get("output", p.get("tools"))
    meta: dict[str, Any] = {}
    if isinstance(raw, str):
        if raw.startswith('{"output":'):
            try:
                value = json.loads(raw)
            except ValueError:
                return raw, meta
            if isinstance(value, dict) and isinstance(value.get("output"), str):
                if isinstance(value.get("metadata"), dict):
                    meta["metadata"] = value["metadata"]
                return value["output"], meta
        return raw, meta
    if isinstance(raw, list):
        meta["content"] = raw
        return _text(raw), meta
    meta["output"] = raw
    return json.dumps(raw, ensure_ascii=False), meta


def parse_rollout(lines: Iterable[Line], report: ImportReport) -> Thread:
    """Read a rollout's values (from :func:`~.base.read_json_lines`) into a :class:`Thread`.

    Never raises on odd content: what cannot be used is reported. A record's key
    is its line (``L12``; a second value on the same line is ``L12.1``).
    """
    thread = Thread(report)
    reader = _Reader(thread)
    last, sub, first = -1, 0, True
    for line in lines:
        sub = sub + 1 if line.number == last else 0
        last = line.number
        value = line.value
        if not isinstance(value, dict):
            reader.warn(line.number, f"a JSON {type(value).__name__}, not an object: skipped")
            continue
        if first and "type" not in value and "record_type" not in value:
            thread.legacy = True  # a bare meta object opens the legacy format
            report.keep("session_meta")
            reader.take_meta(value)
        else:
            reader.feed(
                f"L{line.number}" if sub == 0 else f"L{line.number}.{sub}", line.number, value
            )
        first = False
    thread.trailing = reader.notes
    for message, (number, more) in reader.warned.items():
        report.warn(number, message + (f" (and {more} more lines like it)" if more else ""))
    return thread
