"""Messages and model providers, provider-neutral.

A model is anything with a ``stream(request)`` async iterator of typed
:mod:`~infai.llm.messages` events: text and reasoning deltas, tool-call
fragments, notices, provider errors *as data*, and finally the settled
:class:`~infai.llm.messages.Message`. The loop never sees an SDK type or an SDK
exception. :mod:`~infai.llm.fakes` ships the models tests and new users need:
a scripted model, a function-driven model, and the deterministic ``offline``
model that runs with no key and no network.
"""

from .local import FunctionModel, OfflineModel, ScriptedModel
from .messages import (
    Done,
    Message,
    Model,
    Notice,
    ProviderError,
    ReasoningDelta,
    Request,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    close_model,
    collect,
)
from .provider_registry import (
    ProviderInfo,
    openai_compatible,
    provider_names,
    register_provider,
)
from .providers import ModelUnavailable
from .tokens import estimate_tokens

__all__ = [
    "Done",
    "FunctionModel",
    "Message",
    "Model",
    "ModelUnavailable",
    "Notice",
    "OfflineModel",
    "ProviderError",
    "ProviderInfo",
    "ReasoningDelta",
    "Request",
    "ScriptedModel",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolSpec",
    "close_model",
    "collect",
    "estimate_tokens",
    "openai_compatible",
    "provider_names",
    "register_provider",
]
