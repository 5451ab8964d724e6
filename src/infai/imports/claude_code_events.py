"""Claude Code chain lines as events: the conversion of one conversation.

Model, in prose: :class:`Builder` is fed the chain lines (``uuid`` and
``parentUuid``) of one conversation, in file order, and adds their events to an
:class:`~.base.EventTree` keyed by the lines' uuids: one ``message`` per API
response (its lines merged, its last line's usage kept), a ``tool_call`` per
``tool_use`` block, a ``tool_result`` per result block, a ``compaction`` per
``compact_boundary`` with the summary that follows it; other chain lines become
aliases of their parent. :meth:`Builder.settle` then lays each response's
parallel calls and their results in one line, as infai's own loop writes them.
The file-level work (side lines, sidechains, subagent files, the session's
metadata) is :mod:`.claude_code`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from infai.store.records import (
    CompactionRecord,
    MessageRecord,
    ToolCallRecord,
    ToolResultRecord,
    Usage,
)

from .base import EventTree, ImportReport, to_rfc3339

_SKIP_REASON = {
    "progress": "streaming progress for the tool's UI: children re-linked through it",
    "attachment": "context the tool attached (skill listings...): children re-linked",
    "system": "timing, hook and recap notices for the UI: children re-linked",
}


@dataclass
class ChainLine:
    """A chain line (one with a ``uuid``) and its line number."""

    number: int
    obj: dict[str, Any]

    @property
    def uuid(self) -> str:
        """The line's own id."""
        return str(self.obj["uuid"])

    @property
    def parent(self) -> str | None:
        """The id of the line it follows (None: a root)."""
        value = self.obj.get("parentUuid")
        return value if isinstance(value, str) else None


@dataclass
class _Response:
    """The assistant lines of one API response (one ``message.id``)."""

    key: str  # the message event's key
    texts: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    usage: Usage | None = None
    model: str | None = None
    stop: str | None = None
    first_uuid: str = ""
    message_id: str = ""
    calls: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    last: str = ""  # the last event of the response so far


@dataclass
class _Call:
    key: str
    name: str
    arguments: dict[str, Any]
    response: _Response


def text_of(content: object) -> str:
    """A content value (string or block list) as text; images as a placeholder."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content, ensure_ascii=False)
    parts = []
    for block in content:
        if not isinstance(block, dict):
            parts.append(str(block))
        elif block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "image":
            source = block.get("source")
            media = source.get("media_type", "image") if isinstance(source, dict) else "image"
            parts.append(f"[image: {media}]")
        else:
            parts.append(json.dumps(block, ensure_ascii=False))
    return "\n".join(parts)


def _usage(reported: object) -> Usage | None:
    """Anthropic's usage as infai keeps it (input counts cached tokens too)."""
    if not isinstance(reported, dict):
        return None

    def num(name: str) -> int:
        value = reported.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    read, write = num("cache_read_input_tokens"), num("cache_creation_input_tokens")
    return Usage(
        input_tokens=num("input_tokens") + read + write,
        output_tokens=num("output_tokens"),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


class Builder:
    """Turns the chain lines of one conversation (a file, or one inline sidechain)
    into an :class:`EventTree`."""

    def __init__(self, namespace: str, report: ImportReport) -> None:
        self.tree = EventTree(namespace, report)
        self.report = report
        self.responses: dict[str, _Response] = {}
        self.calls: dict[str, _Call] = {}
        self.compactions: dict[str, int] = {}  # boundary key -> line
        self.stamp = "1970-01-01T00:00:00.000Z"
        self.agent_calls: dict[str, str] = {}  # agentId -> tool_use id
        self.last_chain: str | None = None

    def time(self, line: ChainLine) -> str:
        """The line's time as RFC 3339; a line without one takes the one before."""
        stamp = to_rfc3339(line.obj.get("timestamp"))
        if stamp is None:
            self.report.warn(line.number, "no usable timestamp: the one before is used")
        else:
            self.stamp = stamp
        return self.stamp

    def feed(self, line: ChainLine) -> None:
        """Add one chain line."""
        self.last_chain = line.uuid
        kind = line.obj.get("type")
        if kind == "assistant":
            self.assistant(line)
        elif kind == "user":
            self.user(line)
        elif kind == "system" and line.obj.get("subtype") == "compact_boundary":
            self.boundary(line)
        else:
            self.passthrough(line, str(kind))

    def passthrough(self, line: ChainLine, kind: str) -> None:
        """A line that becomes no event: counted, and its children re-linked."""
        data = line.obj.get("data")
        sub = line.obj.get("subtype") or (data.get("type") if isinstance(data, dict) else None)
        label = f"{kind}/{sub}" if isinstance(sub, str) else kind
        reason = _SKIP_REASON.get(kind, "unknown entry type: children re-linked through it")
        self.report.skip(label, reason)
        self.tree.alias(line.uuid, line.parent)
        if isinstance(data, dict) and data.get("type") == "agent_progress":
            agent, call = data.get("agentId"), line.obj.get("parentToolUseID")
            if isinstance(agent, str) and isinstance(call, str):
                self.agent_calls.setdefault(agent, call)

    # -- assistant lines ---------------------------------------------------------

    def assistant(self, line: ChainLine) -> None:
        """One line of an API response: merged into the response's message."""
        message = line.obj.get("message")
        if not isinstance(message, dict):
            self.report.warn(line.number, "assistant line without a message object: skipped")
            self.tree.alias(line.uuid, line.parent)
            return
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        given = message.get("id")
        mid = given if isinstance(given, str) else line.uuid
        response = self.responses.get(mid)
        if response is None:
            key = f"{line.uuid}#message"
            self.tree.add(
                key,
                line.parent,
                "assistant",
                self.time(line),
                MessageRecord(content=""),
                line=line.number,
            )
            response = _Response(key=key, first_uuid=line.uuid, message_id=str(mid), last=key)
            self.responses[mid] = response
        else:
            self.time(line)
        usage = _usage(message.get("usage"))
        response.usage = usage or response.usage
        if isinstance(message.get("model"), str) and message["model"] != "<synthetic>":
            response.model = message["model"]
        if isinstance(message.get("stop_reason"), str):
            response.stop = message["stop_reason"]
        for number, block in enumerate(blocks):
            self.block(line, number, block, response)
        self.tree.alias(line.uuid, response.last)

    def block(self, line: ChainLine, number: int, block: object, response: _Response) -> None:
        """One content block of an assistant line."""
        if not isinstance(block, dict):
            self.report.warn(
                line.number, f"content block of type {type(block).__name__}: kept as text"
            )
            response.texts.append(str(block))
            return
        kind = block.get("type")
        if kind == "text":
            response.texts.append(text_of(block.get("text")))
        elif kind in ("thinking", "redacted_thinking"):
            response.thinking.append(str(block.get("thinking") or "[redacted thinking]"))
        elif kind == "tool_use":
            self.tool_use(line, number, block, response)
        else:
            self.report.warn(line.number, f"assistant block of type {kind!r}: kept as text")
            response.texts.append(json.dumps(block, ensure_ascii=False))

    def tool_use(
        self, line: ChainLine, number: int, block: dict[str, Any], response: _Response
    ) -> None:
        """A ``tool_use`` block: a tool_call event after the response's last event."""
        call_id = block.get("id")
        name = block.get("name")
        arguments = block.get("input")
        if not isinstance(call_id, str) or not isinstance(name, str):
            self.report.warn(line.number, "tool_use block without an id or name: skipped")
            return
        if not isinstance(arguments, dict):
            self.report.warn(line.number, f"tool_use {call_id}: input is not an object: wrapped")
            arguments = {"input": arguments}
        key = f"{line.uuid}#{number}"
        record = ToolCallRecord(call_id=call_id, name=name, arguments=arguments)
        if self.tree.add(key, response.last, "assistant", self.stamp, record, line=line.number):
            response.calls.append(key)
            response.last = key
            self.calls.setdefault(call_id, _Call(key, name, arguments, response))

    # -- user lines --------------------------------------------------------------

    def user(self, line: ChainLine) -> None:
        """A prompt, tool results, or the summary of the compaction before it."""
        message = line.obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        stamp = self.time(line)
        parent = line.parent
        if line.obj.get("isCompactSummary") and self.tree.resolve(parent) in self.compactions:
            boundary = self.tree.resolve(parent)
            assert boundary is not None
            old = self.tree.record(boundary)
            assert isinstance(old, CompactionRecord)
            summary = text_of(content)
            new = CompactionRecord(summary=summary, tokens_before=old.tokens_before)
            self.tree.set_record(boundary, new)
            del self.compactions[boundary]
            self.tree.alias(line.uuid, boundary)
            return
        blocks = content if isinstance(content, list) else [content]
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        rest = [b for b in blocks if b not in results]
        last = parent
        structured = line.obj.get("toolUseResult")
        for number, block in enumerate(results):
            key = f"{line.uuid}#{number}"
            # the tool's structured result belongs to the line; with one result on it
            # (what Claude Code writes) it is that result's
            extra = structured if len(results) == 1 else None
            if self.result(line, key, last, stamp, block, extra):
                last = key
        if structured is not None and len(results) != 1:
            self.report.warn(
                line.number,
                f"toolUseResult on a line with {len(results)} tool results: not kept",
            )
        if rest and (rest != [None] or not results):
            text = text_of(rest if isinstance(content, list) else content)
            source: dict[str, Any] = {"uuid": line.uuid}
            if line.obj.get("isMeta"):
                source["meta"] = True
            meta = {"source": source}
            key = f"{line.uuid}#text"
            record = MessageRecord(content=text, metadata=meta)
            if self.tree.add(key, last, "user", stamp, record, line=line.number):
                last = key
        self.tree.alias(line.uuid, last)

    def result(
        self,
        line: ChainLine,
        key: str,
        parent: str | None,
        stamp: str,
        block: dict[str, Any],
        structured: object = None,
    ) -> bool:
        """A ``tool_result`` block: a tool_result event (False: none was added).

        ``structured`` is the line's ``toolUseResult`` (the tool's own result: a
        Read's file and line range, an Edit's patch, a Task's agent id and usage),
        kept as ``metadata["tool_use_result"]`` unless it only repeats the text.
        """
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str):
            self.report.warn(line.number, "tool_result without a tool_use_id: skipped")
            return False
        call = self.calls.get(call_id)
        if call is None:
            self.report.warn(
                line.number, f"tool_result for {call_id}, whose call is not in the file"
            )
        is_error = block.get("is_error", False)
        if not isinstance(is_error, bool):
            self.report.warn(line.number, f"is_error is {type(is_error).__name__}, not a boolean")
            is_error = bool(is_error)
        content = text_of(block.get("content"))
        metadata: dict[str, Any] = {"source": {"uuid": line.uuid}}
        if structured is not None and structured != content:
            metadata["tool_use_result"] = structured
        record = ToolResultRecord(
            call_id=call_id,
            name=call.name if call else "unknown",
            content=content,
            is_error=is_error,
            metadata=metadata,
        )
        if not self.tree.add(key, parent, "tool", stamp, record, line=line.number):
            return False
        if call is not None:
            call.response.results.append(key)
        return True

    # -- compaction ----------------------------------------------------------------

    def boundary(self, line: ChainLine) -> None:
        """A compaction event after the line the boundary logically follows."""
        logical = line.obj.get("logicalParentUuid")
        parent = logical if isinstance(logical, str) else line.parent
        meta = line.obj.get("compactMetadata")
        tokens = meta.get("preTokens") if isinstance(meta, dict) else None
        record = CompactionRecord(
            summary="",
            tokens_before=tokens
            if isinstance(tokens, int) and not isinstance(tokens, bool)
            else None,
        )
        key = f"{line.uuid}#compaction"
        if self.tree.add(key, parent, "assistant", self.time(line), record, line=line.number):
            self.compactions[key] = line.number
            self.tree.alias(line.uuid, key)

    # -- the end ---------------------------------------------------------------------

    def settle(self) -> None:
        """Fill each response's message, lay its calls and results in a line (in
        file order), drop compactions whose summary never came."""
        for response in self.responses.values():
            self.tree.set_record(
                response.key,
                MessageRecord(
                    content="\n\n".join(t for t in response.texts if t),
                    reasoning="\n\n".join(response.thinking) or None,
                    model=response.model,
                    stop_reason=response.stop,
                    usage=response.usage,
                    metadata={
                        "source": {"uuid": response.first_uuid, "message_id": response.message_id}
                    },
                ),
            )
        tail_of: dict[str, str] = {}
        for response in self.responses.values():
            # file order: parallel calls come out as calls then results, calls run
            # one by one as call, result, call...; and a line appended later always
            # goes at the end, so a second import of a grown file agrees with the first
            chain = sorted(response.calls + response.results, key=self.tree.order)
            previous = response.key
            for key in chain:
                self.tree.reparent(key, previous)
                previous = key
            for key in chain[:-1]:
                tail_of[key] = chain[-1]
        if tail_of:
            successor = {
                self.tree.parent(k): k for r in self.responses.values() for k in r.calls + r.results
            }
            for key in list(self.tree.nodes):
                parent = self.tree.resolve(self.tree.parent(key))
                if parent in tail_of and successor.get(parent) != key:
                    self.tree.reparent(key, tail_of[parent])
        for key, number in self.compactions.items():
            self.report.warn(
                number, "compact_boundary without its summary (still being written?): skipped"
            )
            self.tree.drop(key)
