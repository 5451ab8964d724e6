"""What ``infai session context --explain`` shows: each event on the path, which
rule kept, shortened or dropped it and why, and the messages the model gets.

The events before the last compaction are read too (a turn never reads them)
so the explanation shows what the compaction boundary stands in for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infai.llm import Message
from infai.store import Event, SessionView

from .parts import ContextPart
from .pipeline import ContextPipeline, Explained
from .registry import context_pipeline, registered_context_rules
from .rules import OPTIONAL_RULES

#: the rule named for an event sent as it is stored, no rule having touched it
AS_STORED = "as stored"


def path_events(view: SessionView, at: str | None = None) -> list[Event]:
    """The whole path to ``at`` (default HEAD), oldest first: the events before the
    nearest compaction unresolved (their previews), the context's resolved."""
    context = view.context(at).events
    if not context or context[0].kind != "compaction":
        return list(context)
    entries = view.path(at, to_boundary=False)
    earlier = [view.event(e.id) for e in entries[: len(entries) - len(context)]]
    return [*earlier, *context]


def decided_by(part: ContextPart) -> tuple[str, str]:
    """The rule that settled ``part`` and why: the step that dropped it, else the
    last that shortened it, else the last step (none: sent as stored)."""
    for action in ("dropped", "shortened"):
        for step in reversed(part.steps):
            if step.action == action:
                return step.rule, step.why
    if part.steps:
        return part.steps[-1].rule, part.steps[-1].why
    return AS_STORED, "a conversation event, sent as it is"


def message_obj(message: Message) -> dict[str, Any]:
    """A message as ``--json`` shows it (what the provider's request is built from)."""
    obj: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.reasoning:
        obj["reasoning"] = message.reasoning
    if message.tool_calls:
        obj["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    if message.role == "tool":
        obj["tool_call_id"] = message.tool_call_id
        obj["tool_name"] = message.tool_name
        obj["is_error"] = message.is_error
    return obj


def part_obj(part: ContextPart) -> dict[str, Any]:
    """One event's line of the explanation, as a JSON object."""
    event = part.event
    rule, why = decided_by(part)
    return {
        "id": event.id,
        "seq": event.seq,
        "kind": event.kind,
        "role": event.role,
        "preview": event.preview,
        "action": part.action,
        "rule": rule,
        "why": why,
        "steps": [{"rule": s.rule, "action": s.action, "why": s.why} for s in part.steps],
        "sent": None if part.message is None else message_obj(part.message),
    }


def explained_obj(explained: Explained) -> dict[str, Any]:
    """The whole explanation as one JSON object."""
    return {
        "rules": list(explained.rules),
        "events": [part_obj(part) for part in explained.parts],
        "messages": [message_obj(m) for m in explained.messages],
        "error": explained.error,
    }


def explain_view(view: SessionView, pipeline: ContextPipeline, at: str | None = None) -> Explained:
    """The explanation of the context at ``at`` (default HEAD) of ``view`` (an
    event no model takes is shown, and said in :attr:`Explained.error`)."""
    return pipeline.explain(path_events(view, at), strict=False)


def explain_context(
    view: SessionView,
    extra: Mapping[str, Any],
    names: Sequence[str] | None = None,
    at: str | None = None,
) -> dict[str, Any]:
    """``--explain --json``'s object for the session ``view`` (its metadata's
    ``extra``) at ``at``: the built-in rules, then the rules ``names`` (None: every
    registered one); a name not registered in this process cannot run here and is
    listed in ``missing_rules``."""
    missing: list[str] = []
    if names is not None:
        known = {*registered_context_rules(), *OPTIONAL_RULES}
        missing = [n for n in names if n not in known]
        names = [n for n in names if n in known]
    obj = explained_obj(explain_view(view, context_pipeline(extra, names), at))
    return {"at": at, **obj, "missing_rules": missing}
