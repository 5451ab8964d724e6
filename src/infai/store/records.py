"""Typed records: the payload of each event kind, as pure values.

A record says *what happened* (a message, a tool call, its result, a compaction
summary); ids, parents, timestamps and on-disk locations are the store's business
and live on the :class:`~infai.store.events.Event` around it. Each record type is a
``msgspec.Struct`` tagged with its event ``kind``; :data:`RECORD_TYPES` maps kinds to
types and is versioned with the on-disk format (``KINDS_VERSION``). One encoder and
one decoder per kind do all (de)serialisation, strictly: a record that does not
match its type is rejected with the offending field named.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec

from .errors import InvalidInput

#: Version of the set of event kinds and their record shapes.
KINDS_VERSION = 1

Kind = Literal["message", "tool_call", "tool_result", "compaction", "branch_summary"]


class Usage(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """Token usage reported by a provider for one model response."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class MessageRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """A settled message: user prompt, assistant reply, or system notice."""

    kind: ClassVar[Kind] = "message"
    content: str
    reasoning: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: Usage | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class ToolCallRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """A tool invocation requested by the model, persisted before it runs."""

    kind: ClassVar[Kind] = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class ToolResultRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """What a tool returned (or why it did not run), persisted after it ran."""

    kind: ClassVar[Kind] = "tool_result"
    call_id: str
    name: str
    content: str
    is_error: bool = False
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class CompactionRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """A context boundary: the summary stands in for every event before it."""

    kind: ClassVar[Kind] = "compaction"
    summary: str
    goals: list[str] = msgspec.field(default_factory=list)
    constraints: list[str] = msgspec.field(default_factory=list)
    decisions: list[str] = msgspec.field(default_factory=list)
    files_changed: list[str] = msgspec.field(default_factory=list)
    unresolved: list[str] = msgspec.field(default_factory=list)
    facts: list[str] = msgspec.field(default_factory=list)
    tokens_before: int | None = None


class BranchSummaryRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """What was done on an abandoned branch, recorded where the work moved to."""

    kind: ClassVar[Kind] = "branch_summary"
    summary: str
    abandoned_tip: str | None = None
    common_ancestor: str | None = None


Record = MessageRecord | ToolCallRecord | ToolResultRecord | CompactionRecord | BranchSummaryRecord

RECORD_TYPES: dict[str, type[Record]] = {
    t.kind: t
    for t in (
        MessageRecord,
        ToolCallRecord,
        ToolResultRecord,
        CompactionRecord,
        BranchSummaryRecord,
    )
}
KINDS: tuple[str, ...] = tuple(RECORD_TYPES)

_encoder = msgspec.json.Encoder()
_decoders = {kind: msgspec.json.Decoder(t) for kind, t in RECORD_TYPES.items()}


def encode_record(record: Record) -> bytes:
    """Serialise a record to compact JSON bytes (the bytes a blob digest covers)."""
    return _encoder.encode(record)


def decode_record(kind: str, data: bytes | msgspec.Raw) -> Record:
    """Parse a record of ``kind`` strictly; raise :class:`InvalidInput` naming the field."""
    decoder = _decoders.get(kind)
    if decoder is None:
        raise InvalidInput(f"unknown event kind {kind!r} (known: {', '.join(KINDS)})")
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"invalid {kind} record: {exc}") from None
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"malformed JSON in {kind} record: {exc}") from None


def record_from_obj(kind: str, obj: object) -> Record:
    """Convert already-parsed JSON (a dict) into the record type of ``kind``."""
    rtype = RECORD_TYPES.get(kind)
    if rtype is None:
        raise InvalidInput(f"unknown event kind {kind!r} (known: {', '.join(KINDS)})")
    try:
        return msgspec.convert(obj, rtype)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"invalid {kind} record: {exc}") from None


PREVIEW_CHARS = 80


def preview(record: Record) -> str:
    """A one-line summary for timelines, computed when the event is written."""
    match record:
        case MessageRecord(content=content):
            text = content
        case ToolCallRecord(name=name, arguments=arguments):
            text = f"{name}({_encoder.encode(arguments).decode()})"
        case ToolResultRecord(name=name, content=content, is_error=is_error):
            text = f"{name}{' error' if is_error else ''}: {content}"
        case CompactionRecord(summary=summary) | BranchSummaryRecord(summary=summary):
            text = summary
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text[:4096]).split())
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    return text
