"""Pi sessions (``~/.pi/agent/sessions/--<cwd>--/<time>_<uuid>.jsonl``) as infai sessions.

Model, in prose: a Pi file is a header line (``type: "session"``: id, cwd,
format ``version``) and then entries. Format v1 (no version) is a list: each
entry follows the one before it. Formats v2 and v3 give every entry an ``id``
and a ``parentId``: a tree in one file, whose leaf (Pi's HEAD) is the last
entry written; ``/tree`` branches by writing the next entry under an earlier
one. Entries become events under keys that are their ids (v2+) or their
positions in the file (v1, header = 0, as Pi's own v1-to-v2 migration counts
them): a ``message`` from a user becomes a ``message``; from the assistant a
``message`` (text, thinking as reasoning, model, stop reason, usage) followed by
one ``tool_call`` per ``toolCall`` block; a ``toolResult`` a ``tool_result``
paired by ``toolCallId`` (the spilled-output path and truncation details kept in
its metadata); a ``bashExecution`` (the user's ``!`` command) a user message
holding the command and its output; a ``branch_summary`` a ``branch_summary``.

A ``compaction`` entry becomes a ``compaction`` event after the entry before it,
and since Pi's context after a compaction is the summary, *then the entries from
``firstKeptEntryId`` (v1: ``firstKeptEntryIndex``) up to the compaction*, then
what follows, those kept entries are written again after the compaction event
(copies whose metadata names the original), and what follows hangs from the
last copy: a resumed session sees exactly Pi's bounded context. A kept index
that points at the compaction itself (seen in a real v1 file) keeps nothing.

Labels (``label`` entries) are kept in the session's metadata, keyed by the
event they name; ``session_info`` names the session; settings changes
(``model_change``, ``thinking_level_change``) and extension state (``custom``)
become no event and are counted; an extension's ``custom_message`` (sent to the
model) is a user message. A ``/fork`` file (its header names the file it was
forked from: ``parentSession``, v1 ``branchedFrom``) is a child session of
that file's session, hanging from the entry it was forked at: found by ids
(v2/v3) or by the content the fork copied (v1), and reported where the source
cannot tell (see :mod:`.pi_fork`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infai.store.errors import InvalidInput
from infai.store.records import (
    BranchSummaryRecord,
    CompactionRecord,
    MessageRecord,
    Record,
    ToolCallRecord,
    ToolResultRecord,
    Usage,
    record_from_obj,
    record_to_obj,
)

from .base import (
    EventTree,
    ForeignSession,
    ImportReport,
    derive_id,
    label,
    read_json_lines,
    to_rfc3339,
)
from .pi_fork import fork_point

TOOL = "pi"
_SETTINGS = "settings change: the model and thinking level are on each reply"
_SKIPPED = {
    "model_change": _SETTINGS,
    "thinking_level_change": _SETTINGS,
    "custom": "extension state, never sent to the model",
}


def _text(content: object) -> str:
    """Pi content (a string or a list of text/image blocks) as text."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content, ensure_ascii=False)
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append(f"[image: {block.get('mimeType', 'image')}]")
        else:
            parts.append(json.dumps(block, ensure_ascii=False))
    return "\n".join(parts)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(reported: object) -> Usage | None:
    if not isinstance(reported, dict):
        return None
    read, write = _int(reported.get("cacheRead")), _int(reported.get("cacheWrite"))
    return Usage(
        input_tokens=_int(reported.get("input")) + read + write,
        output_tokens=_int(reported.get("output")),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


class _Reader:
    """The entries of one Pi file, added to an :class:`EventTree`."""

    def __init__(self, path: Path, header: dict[str, Any], report: ImportReport) -> None:
        self.path = path
        self.header = header
        self.report = report
        self.tree = EventTree(f"{TOOL}:{header.get('id')}", report)
        version = header.get("version")
        self.version = version if isinstance(version, int) else 1
        self.stamp = to_rfc3339(header.get("timestamp")) or "1970-01-01T00:00:00.000Z"
        self.keys: list[str] = ["header"]  # entry position -> key (v1 indexes)
        self.parent_of: dict[str, str | None] = {}
        self.labels: dict[str, str] = {}
        self.name: str | None = None
        self.models: list[str] = []
        self.first_prompt: str | None = None
        self.last: str | None = None
        self.compactions: list[tuple[str, dict[str, Any], int]] = []
        self.nodes_of: dict[str, list[str]] = {}  # entry key -> its event keys
        self.entry_of: dict[str, str] = {}  # event key -> its entry's key (copies: the kept one)
        self.entries: list[dict[str, Any]] = []  # in file order (a fork is matched by them)
        self.entry_by_key: dict[str, dict[str, Any]] = {}

    def links(self, entry: dict[str, Any]) -> tuple[str, str | None]:
        """The entry's key and its parent's key."""
        index = len(self.keys)
        if self.version < 2:
            key, parent = f"e{index}", (self.keys[-1] if index > 1 else None)
        else:
            given, above = entry.get("id"), entry.get("parentId")
            key = given if isinstance(given, str) else f"e{index}"
            parent = above if isinstance(above, str) else None
        self.keys.append(key)
        self.parent_of[key] = parent
        return key, parent

    def feed(self, entry: dict[str, Any], line: int) -> None:
        """Add one entry (any type)."""
        key, parent = self.links(entry)
        self.last = key
        self.entries.append(entry)
        self.entry_by_key.setdefault(key, entry)
        stamp = to_rfc3339(entry.get("timestamp"))
        if stamp is None:
            self.report.warn(line, "entry without a usable timestamp: the one before is used")
        self.stamp = stamp or self.stamp
        kind = entry.get("type")
        if kind == "message" and isinstance(entry.get("message"), dict):
            self.message(key, parent, entry["message"], line)
        elif kind == "compaction":
            self.compactions.append((key, entry, line))
            record = CompactionRecord(
                summary=str(entry.get("summary") or ""),
                tokens_before=_int(entry.get("tokensBefore")) or None,
            )
            self.tree.add(f"{key}#compaction", parent, "assistant", self.stamp, record, line=line)
            self.tree.alias(key, f"{key}#compaction")
        elif kind == "branch_summary":
            self.branch_summary(key, parent, entry, line)
        elif kind == "custom_message":  # an extension's message, sent to the model
            origin = {"entry": key, "custom_type": str(entry.get("customType"))}
            said = MessageRecord(content=_text(entry.get("content")), metadata={"source": origin})
            self.add(key, parent, "user", said, line)
        else:
            self.other(key, parent, str(kind), entry)

    def other(self, key: str, parent: str | None, kind: str, entry: dict[str, Any]) -> None:
        """An entry that becomes no event: kept in metadata, or counted."""
        self.tree.alias(key, parent)
        if kind == "label":
            target = entry.get("targetId")
            label = entry.get("label")
            if isinstance(target, str):
                self.labels.pop(target, None)
                if isinstance(label, str) and label:
                    self.labels[target] = label
            self.report.keep(kind)
        elif kind == "session_info":
            if isinstance(entry.get("name"), str):
                self.name = entry["name"]
            self.report.keep(kind)
        else:
            self.report.skip(kind, _SKIPPED.get(kind, "unknown entry type: children re-linked"))

    def add(self, key: str, parent: str | None, role: str, record: Record, line: int) -> None:
        """Add an event of the entry being read (``key`` may be one of several)."""
        if self.tree.add(key, parent, role, self.stamp, record, line=line):
            self.nodes_of.setdefault(self.keys[-1], []).append(key)
            self.entry_of[key] = self.keys[-1]

    def message(self, key: str, parent: str | None, message: dict[str, Any], line: int) -> None:
        """A ``message`` entry, by role."""
        role = message.get("role")
        origin: dict[str, Any] = {"entry": key}
        source = {"source": origin}
        if role == "assistant":
            self.assistant(key, parent, message, line)
        elif role == "toolResult":
            self.tool_result(key, parent, message, line)
        elif role == "bashExecution":
            command, output = str(message.get("command", "")), str(message.get("output", ""))
            text = f"Ran `{command}`\n```\n{output}\n```"
            meta = {"source": {"entry": key, "bash": {"exit_code": message.get("exitCode")}}}
            self.add(key, parent, "user", MessageRecord(content=text, metadata=meta), line)
        else:  # user, custom/hookMessage, branchSummary, compactionSummary, unknown
            if role not in ("user", "custom", "hookMessage", "branchSummary", "compactionSummary"):
                self.report.warn(line, f"message role {role!r}: kept as a user message")
            text = _text(message.get("content", message.get("summary")))
            if role == "user" and self.first_prompt is None and text.strip():
                self.first_prompt = text
            if role != "user":
                origin["role"] = str(role)
            self.add(key, parent, "user", MessageRecord(content=text, metadata=source), line)

    def assistant(self, key: str, parent: str | None, message: dict[str, Any], line: int) -> None:
        """An assistant message: the message event, then its tool calls in a line."""
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts, thinking, calls = [], [], []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                texts.append(str(block.get("text") or ""))
            elif kind == "thinking":
                thinking.append(str(block.get("thinking") or ""))
            elif kind == "toolCall":
                calls.append(block)
            else:
                self.report.warn(line, f"assistant block {kind!r}: kept as text")
                texts.append(json.dumps(block, ensure_ascii=False))
        model = message.get("model") if isinstance(message.get("model"), str) else None
        if model:
            self.models.append(model)
        meta: dict[str, Any] = {"source": {"entry": key}}
        if isinstance(message.get("errorMessage"), str):
            meta["error"] = message["errorMessage"]
        record = MessageRecord(
            content="\n\n".join(t for t in texts if t),
            reasoning="\n\n".join(t for t in thinking if t) or None,
            model=model,
            stop_reason=message.get("stopReason")
            if isinstance(message.get("stopReason"), str)
            else None,
            usage=_usage(message.get("usage")),
            metadata=meta,
        )
        last = f"{key}#message"
        self.add(last, parent, "assistant", record, line)
        for number, call in enumerate(calls):
            args = call.get("arguments")
            if not isinstance(args, dict):
                self.report.warn(line, "toolCall arguments are not an object: wrapped")
                args = {"input": args}
            record_call = ToolCallRecord(
                call_id=str(call.get("id", f"{key}-{number}")),
                name=str(call.get("name", "unknown")),
                arguments=args,
            )
            self.add(f"{key}#{number}", last, "assistant", record_call, line)
            last = f"{key}#{number}"
        self.tree.alias(key, last)

    def tool_result(self, key: str, parent: str | None, message: dict[str, Any], line: int) -> None:
        """A tool's result, paired with its call by ``toolCallId``."""
        is_error = message.get("isError", False)
        if not isinstance(is_error, bool):
            self.report.warn(line, f"isError is {type(is_error).__name__}, not a boolean")
            is_error = bool(is_error)
        meta: dict[str, Any] = {"source": {"entry": key}}
        details = message.get("details")
        if isinstance(details, dict):
            kept = {k: details[k] for k in ("truncation", "fullOutputPath") if k in details}
            if kept:
                meta["details"] = kept
        record = ToolResultRecord(
            call_id=str(message.get("toolCallId", "")),
            name=str(message.get("toolName", "unknown")),
            content=_text(message.get("content")),
            is_error=is_error,
            metadata=meta,
        )
        self.add(key, parent, "tool", record, line)

    def branch_summary(
        self, key: str, parent: str | None, entry: dict[str, Any], line: int
    ) -> None:
        """What an abandoned branch did, recorded where the work moved to."""
        left = entry.get("fromId")
        record = BranchSummaryRecord(
            summary=str(entry.get("summary") or ""),
            abandoned_tip=self.tree.id_of(left) if isinstance(left, str) else None,
            common_ancestor=self.tree.id_of(parent) if parent else None,
        )
        self.add(key, parent, "assistant", record, line)

    def kept(self, key: str, entry: dict[str, Any], line: int) -> list[str]:
        """The entry keys a compaction keeps verbatim, oldest first."""
        if self.version < 2:
            index = entry.get("firstKeptEntryIndex")
            position = self.keys.index(key)
            if not isinstance(index, int) or isinstance(index, bool) or index < 1:
                self.report.warn(
                    line, "compaction without a usable firstKeptEntryIndex: keeps none"
                )
                return []
            return self.keys[index:position]
        first = entry.get("firstKeptEntryId")
        path: list[str] = []
        walk = self.parent_of.get(key)
        while walk is not None and walk != first and len(path) <= len(self.keys):
            path.append(walk)
            walk = self.parent_of.get(walk)
        if walk is None or walk != first:
            self.report.warn(
                line, f"firstKeptEntryId {first!r} is not before the compaction: keeps none"
            )
            return []
        return [walk, *reversed(path)]

    def settle(self) -> None:
        """Write each compaction's kept entries again after it (see the module's prose)."""
        for key, entry, line in self.compactions:
            boundary = f"{key}#compaction"
            last = boundary
            stamp = self.tree.nodes[boundary].timestamp if boundary in self.tree.nodes else None
            if stamp is None:
                continue
            copies = 0
            for kept in self.kept(key, entry, line):
                for node in self.nodes_of.get(kept, []):
                    record = self.tree.record(node)
                    if isinstance(record, CompactionRecord | BranchSummaryRecord):
                        continue
                    obj = record_to_obj(record)
                    source = dict(obj.get("metadata") or {})
                    source["copy_of"] = self.tree.id_of(node)
                    obj["metadata"] = source
                    copy = f"{key}#keep{copies}"
                    copies += 1
                    role = self.tree.nodes[node].role
                    self.tree.add(
                        copy, last, role, stamp, record_from_obj(record.kind, obj), line=line
                    )
                    self.entry_of[copy] = kept
                    last = copy
            self.tree.aliases[key] = last


def _header(
    path: Path, report: ImportReport
) -> tuple[dict[str, Any] | None, list[tuple[dict[str, Any], int]]]:
    entries: list[tuple[dict[str, Any], int]] = []
    header: dict[str, Any] | None = None
    for item in read_json_lines(path, report):
        if not isinstance(item.value, dict):
            report.warn(item.number, f"a JSON {type(item.value).__name__}, not an object: skipped")
            continue
        if header is None:
            if item.value.get("type") != "session":
                raise InvalidInput(
                    f"{path}:{item.number}: not a Pi session (no session header first)"
                )
            header = item.value
            continue
        entries.append((item.value, item.number))
    return header, entries


def _read(path: Path, report: ImportReport) -> tuple[dict[str, Any], _Reader] | None:
    """A Pi file's header and its entries read into a tree (None: the file is empty)."""
    header, entries = _header(path, report)
    if header is None:
        return None
    source_id = header.get("id")
    if not isinstance(source_id, str) or not source_id:
        raise InvalidInput(f"{path}:1: the session header has no id")
    reader = _Reader(path, header, report)
    for entry, line in entries:
        reader.feed(entry, line)
    reader.settle()
    return header, reader


def _created(header: dict[str, Any], reader: _Reader) -> str:
    return to_rfc3339(header.get("timestamp")) or reader.stamp


def _fork_link(
    path: Path, header: dict[str, Any], reader: _Reader
) -> tuple[str, str | None, dict[str, Any] | None]:
    """The session and event a ``/fork`` file was forked from, and how the event was
    found (("", None, None): not a fork, or its parent is not found).

    The header names the parent file (``parentSession``; v1: ``branchedFrom``),
    looked for where it says and, if moved, beside this file; the fork point is
    found by :func:`.pi_fork.fork_point` (ids in v2/v3, content in v1).
    """
    named = header.get("parentSession") or header.get("branchedFrom")
    if not isinstance(named, str) or not named:
        return "", None, None
    found = next(
        (c for c in (Path(named), path.parent / Path(named).name) if c.is_file() and c != path),
        None,
    )
    if found is None:
        reader.report.warn(None, f"forked from {named}, which is not found: not linked")
        return "", None, None
    try:
        parent = _read(found, ImportReport(str(found)))
    except (InvalidInput, OSError) as exc:
        reader.report.warn(None, f"forked from {found}, which cannot be read: {exc}")
        return "", None, None
    if parent is None:
        return "", None, None
    p_header, p_reader = parent
    session = derive_id(TOOL, f"session:{p_header['id']}", _created(p_header, p_reader))
    event, note = fork_point(reader, p_reader, str(found))
    return session, event, note


def load_file(path: Path) -> ForeignSession | None:
    """The session in one Pi file (None: the file is empty)."""
    report = ImportReport(str(path))
    read = _read(path, report)
    if read is None:
        return None
    header, reader = read
    source_id = header["id"]
    events, head = reader.tree.finish(reader.last, dangling="previous")
    report.count(events)
    created_at = _created(header, reader)
    stamps = [spec[4] for spec in events]
    labels = {}
    for key, text in reader.labels.items():
        first = reader.nodes_of.get(key)  # an entry's first event (a reply's message)
        target = reader.tree.nodes[first[0]].id if first else reader.tree.id_of(key)
        if target:
            labels[target] = text
    extra: dict[str, Any] = {"version": reader.version, "head_rule": "last entry"}
    for name in ("parentSession", "branchedFrom", "provider", "thinkingLevel"):
        if isinstance(header.get(name), str):
            extra[name] = header[name]
    if labels:
        extra["labels"] = labels
    model = reader.models[-1] if reader.models else header.get("modelId")
    parent_session, parent_event, fork_note = _fork_link(path, header, reader)
    if fork_note is not None:
        extra["fork_point"] = fork_note
    return ForeignSession(
        tool=TOOL,
        source_id=source_id,
        session_id=derive_id(TOOL, f"session:{source_id}", created_at),
        paths=[str(path)],
        created_at=min([created_at, *stamps]),
        updated_at=max([created_at, *stamps]),
        report=report,
        name=label(reader.name) or label(reader.first_prompt),
        working_dir=header.get("cwd") if isinstance(header.get("cwd"), str) else None,
        model=model if isinstance(model, str) else None,
        events=events,
        head=head,
        extra=extra,
        parent_session=parent_session or None,
        parent_event=parent_event,
    )


class PiImporter:
    """``infai import pi``: sessions under ``~/.pi/agent/sessions``."""

    tool = TOOL

    def default_paths(self) -> list[Path]:
        """Pi's sessions directory."""
        return [Path.home() / ".pi" / "agent" / "sessions"]

    def find(self, path: Path) -> list[Path]:
        """Session files at ``path`` (a file, or every ``*.jsonl`` below a directory)."""
        if not path.exists():
            raise InvalidInput(f"{path}: no such file or directory")
        if path.is_file():
            return [path]
        return sorted(p for p in path.rglob("*.jsonl") if p.is_file())

    def load(self, path: Path) -> list[ForeignSession]:
        """The session in the file at ``path`` (none: an empty file)."""
        found = load_file(path)
        return [] if found is None else [found]
