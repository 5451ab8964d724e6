"""From stored events to the messages a model is sent: an ordered pipeline of
named rules.

The active path from the store (HEAD back to the nearest compaction) becomes
provider-neutral :class:`~infai.llm.Message` values. Each event becomes a part
(:mod:`.parts`); the rules run in order, each returning what it keeps, shortens
or drops (:mod:`.rules`: the compaction boundary, files not sent, what hooks
added, branch summaries, salvage gaps, the interruption note, tool outputs an
imported session had pruned; then the user's registered rules,
:mod:`.registry`); assembly makes the messages every provider takes
(:mod:`.pipeline`). ``infai session context --explain`` shows each step.
"""

from .cache import ContextCache
from .parts import (
    SENDABLE_ROLES,
    ContextDecision,
    ContextError,
    ContextPart,
    ContextRuleFailed,
    ContextStep,
    UnsendableEvent,
    is_marker,
)
from .pipeline import ASSEMBLY, INTERRUPTED, ContextPipeline, Explained, to_messages
from .registry import (
    context_pipeline,
    register_context_rule,
    registered_context_rules,
    unregister_context_rule,
)
from .rules import (
    BUILTIN_RULES,
    INTERRUPTED_NOTE,
    PRUNED_OUTPUT,
    ContextRule,
    compaction_text,
    pruned_outputs,
)

__all__ = [
    "ASSEMBLY",
    "BUILTIN_RULES",
    "INTERRUPTED",
    "INTERRUPTED_NOTE",
    "PRUNED_OUTPUT",
    "SENDABLE_ROLES",
    "ContextCache",
    "ContextDecision",
    "ContextError",
    "ContextPart",
    "ContextPipeline",
    "ContextRule",
    "ContextRuleFailed",
    "ContextStep",
    "Explained",
    "UnsendableEvent",
    "compaction_text",
    "context_pipeline",
    "is_marker",
    "pruned_outputs",
    "register_context_rule",
    "registered_context_rules",
    "to_messages",
    "unregister_context_rule",
]
