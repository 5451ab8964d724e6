"""The built-in context rules, in the order they run, and what a rule is.

Each is a small object with a ``name`` and an ``apply`` that looks at the parts
still in the context and returns decisions (:mod:`.parts`). Together they make
exactly the context infai has always sent; a user's rule
(:func:`~infai.agent.context.register_context_rule`) runs after them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from infai.llm.tokens import estimate_tokens
from infai.store import (
    CHECKPOINT_KINDS,
    BranchSummaryRecord,
    CompactionRecord,
    GapRecord,
    HookRecord,
    MessageRecord,
)

from .parts import ContextDecision, ContextPart, is_marker

#: what the model is sent for an interruption marker
INTERRUPTED_NOTE = (
    "[turn interrupted: the turn before this point stopped before it finished; "
    "what it had not said or done did not happen]"
)

#: what a model is sent in place of a tool output the session's own tool had
#: pruned before it was imported (OpenCode's words, as its model saw them)
PRUNED_OUTPUT = "[Old tool result content cleared]"


@runtime_checkable
class ContextRule(Protocol):
    """A rule over what reaches the model: ``apply`` is given the parts still in
    the context (oldest first) and returns a decision for each part it changes
    (``part.drop(why)``, ``part.shorten(text, why)``, ``part.send(message, why)``).
    It must not change the parts itself, nor keep state between calls that
    changes its answer: it runs before every model call, and for ``--explain``."""

    @property
    def name(self) -> str:
        """The rule's name, in ``[context] rules`` and ``--explain``."""
        ...

    def apply(self, parts: Sequence[ContextPart]) -> Iterable[ContextDecision] | None:
        """The decisions about ``parts`` (None or nothing: leave them as they are)."""
        ...


class FunctionRule:
    """A plain function ``fn(parts) -> decisions`` registered as a rule."""

    def __init__(
        self, name: str, fn: Callable[[Sequence[ContextPart]], Iterable[ContextDecision] | None]
    ) -> None:
        self.name = name
        self.fn = fn

    def apply(self, parts: Sequence[ContextPart]) -> Iterable[ContextDecision] | None:
        """What the function decides."""
        return self.fn(parts)


def compaction_text(record: CompactionRecord) -> str:
    """What the model is sent for a compaction: its summary and sections."""
    sections = [
        ("Goals", record.goals),
        ("Constraints", record.constraints),
        ("Decisions", record.decisions),
        ("Files changed", record.files_changed),
        ("Unresolved work", record.unresolved),
        ("Facts worth keeping", record.facts),
    ]
    lines = [
        "Summary of the conversation so far (earlier messages were compacted):",
        record.summary,
    ]
    for title, items in sections:
        if items:
            lines.append(f"{title}:")
            lines += [f"- {item}" for item in items]
    return "\n".join(lines)


class CompactionBoundary:
    """The last compaction on the path stands in for everything before it: those
    events are dropped (a turn never reads them: the store's context starts at
    the boundary; ``--explain`` shows them), and its summary is sent."""

    name = "compaction-boundary"

    def apply(self, parts: Sequence[ContextPart]) -> Iterable[ContextDecision]:
        """Drop what precedes the last compaction; send the compaction's summary."""
        last = None
        for index, part in enumerate(parts):
            if part.kind == "compaction" and isinstance(part.record, CompactionRecord):
                last = index
        if last is None:
            return
        boundary = parts[last]
        for part in parts[:last]:
            yield part.drop(f"before the compaction {boundary.event.id[:8]}: its summary stands in")
        assert isinstance(boundary.record, CompactionRecord)
        yield boundary.send(compaction_text(boundary.record), "the summary of what came before it")


class WorkspaceFiles:
    """Snapshots and restores record the files on disk, not the conversation: no
    model sees them (a snapshot between a tool call and its result leaves the
    call waiting for its result)."""

    name = "workspace-files"

    def apply(self, parts: Sequence[ContextPart]) -> Iterable[ContextDecision]:
        """Drop every snapshot and restore event."""
        for part in parts:
            if part.kind in CHECKPOINT_KINDS:
                yield part.drop("files on disk, not conversation")


class HookContext:
    """What a hook added to the context (a ``UserPromptSubmit`` or ``SessionStart``
    hook's output) is sent as a user message that names the hook; the record of
    any other hook run is not sent."""

    name = "hook-context"

    def apply(self, parts: Sequence[ContextPart]) -> Iterable[ContextDecision]:
        """Send what hooks added; drop the other hook records."""
        for part in parts:
            record = part.record
            if not isinstance(record, HookRecord):
                continue
            if record.context:
                text = f"[{record.event} hook]\n{record.context}"
                yield part.send(text, f"what the {record.event} hook added")
            else:
                yield part.drop("a hook run that added nothing to the context")


class BranchSummary:
    """The summary of a branch that was left (``/tree`` with a summary) is sent as
    a user message that says what it is."""

    name = "branch-summary"

    def apply(self, parts: Sequence[ContextPart]) -> Iterable[ContextDecision]:
        """Send each branch summary."""
        for part in parts:
            if isinstance(part.record, BranchSummaryRecord):
                text = f"Summary of work on a branch that was left:\n{part.record.summary}"
                yield part.send(text, "the summary of a branch that was left")


class GapNote:
    """Where salvage lost events, a note says so, so the model sees why a turn is
    missing."""

    name = "gap-note"

    def apply(self, parts: Sequence[ContextPart]) -> Iterable[ContextDecision]:
        """Send each gap as a note."""
        for part in parts:
            if isinstance(part.record, GapRecord):
                yield part.send(f"[Note: {part.record.summary}]", "events lost here (salvage)")


class InterruptionNote:
    """The interruption marker is sent as :data:`INTERRUPTED_NOTE` (joined with the
    user messages beside it when the context is assembled)."""

    name = "interruption-note"

    def apply(self, parts: Sequence[ContextPart]) -> Iterable[ContextDecision]:
        """Send each marker as the note."""
        for part in parts:
            record = part.record
            if isinstance(record, MessageRecord) and is_marker(record, part.event.role):
                yield part.send(INTERRUPTED_NOTE, "a turn stopped here before it finished")


def pruned_outputs(extra: Mapping[str, Any]) -> frozenset[str]:
    """The tool-result events an imported session's tool had pruned (its import
    metadata's ``pruned.events``, see :mod:`infai.imports.opencode`): they are
    sent as :data:`PRUNED_OUTPUT`, as that tool would. Metadata of another shape
    names none (it can only ever hide outputs from the model, never add text)."""
    imported = extra.get("import")
    pruned = imported.get("pruned") if isinstance(imported, Mapping) else None
    events = pruned.get("events") if isinstance(pruned, Mapping) else None
    if not isinstance(events, Mapping):
        return frozenset()
    return frozenset(key for key in events if isinstance(key, str))


class ImportedPruning:
    """Old tool outputs the session's own tool had pruned before it was imported
    are sent as that tool sent them: :data:`PRUNED_OUTPUT`."""

    name = "imported-pruning"

    def __init__(self, pruned: frozenset[str] = frozenset()) -> None:
        #: the tool-result events to prune (:func:`pruned_outputs`)
        self.pruned = pruned

    def apply(self, parts: Sequence[ContextPart]) -> Iterable[ContextDecision]:
        """Shorten each pruned output to the placeholder."""
        if not self.pruned:
            return
        for part in parts:
            if part.kind == "tool_result" and part.event.id in self.pruned:
                yield part.shorten(PRUNED_OUTPUT, "its tool had pruned it before the import")


#: tool output (estimated tokens) :class:`PruneToolOutput` keeps whole, newest first
KEEP_TOOL_OUTPUT = 40_000


class PruneToolOutput:
    """Opt-in (``[context] rules = ["prune-tool-output"]``): the newest tool outputs
    are kept whole up to :data:`KEEP_TOOL_OUTPUT` estimated tokens; every older one
    is sent as :data:`PRUNED_OUTPUT`, as OpenCode prunes. The call stays, so the
    model still sees what it ran, and can run it again."""

    name = "prune-tool-output"

    def __init__(self, keep: int = KEEP_TOOL_OUTPUT) -> None:
        self.keep = keep

    def apply(self, parts: Sequence[ContextPart]) -> Iterable[ContextDecision]:
        """Shorten the tool outputs older than the newest ``keep`` tokens of them."""
        kept = 0
        for part in reversed(parts):
            if part.kind != "tool_result" or part.text == PRUNED_OUTPUT:
                continue
            kept += estimate_tokens(part.text)
            if kept > self.keep:
                kept = self.keep + 1  # and everything older goes too
                why = f"older than the newest {self.keep:,} tokens of tool output"
                yield part.shorten(PRUNED_OUTPUT, why)


#: rules that run only where the configuration names them, by name
OPTIONAL_RULES: dict[str, type[PruneToolOutput]] = {PruneToolOutput.name: PruneToolOutput}

#: the built-in rules' names, in the order they run
BUILTIN_RULES = (
    CompactionBoundary.name,
    WorkspaceFiles.name,
    HookContext.name,
    BranchSummary.name,
    GapNote.name,
    InterruptionNote.name,
    ImportedPruning.name,
)


def builtin_rules(pruned: frozenset[str] = frozenset()) -> list[ContextRule]:
    """The built-in rules, in order (``pruned``: see :class:`ImportedPruning`)."""
    return [
        CompactionBoundary(),
        WorkspaceFiles(),
        HookContext(),
        BranchSummary(),
        GapNote(),
        InterruptionNote(),
        ImportedPruning(pruned),
    ]
