"""infai: an agent harness whose heart is a durable, branchable session store.

Layers (imports point only downward, enforced by a test):
``store`` <- ``llm`` <- ``tools`` <- ``agent`` <- ``shells``.

The SDK's one entry point is this package: ``from infai import Harness`` (the
names below; ``docs/sdk.md`` shows them at work). Each name is loaded on first
use (a module ``__getattr__``), so ``import infai`` itself loads nothing and
the command line starts as fast as before.
"""

from __future__ import annotations

import importlib as _importlib

TYPE_CHECKING = False  # as typing's, without importing typing (start-up time)

__version__ = "0.1.0"

#: each public name and the package that defines it
_SDK = {
    "AgentEvent": "infai.agent",
    "AgentSession": "infai.agent",
    "AllowAlways": "infai.tools",
    "Ask": "infai.tools",
    "Busy": "infai.agent",
    "Config": "infai.agent",
    "DenyWith": "infai.tools",
    "Event": "infai.store",
    "Harness": "infai.agent",
    "InfaiError": "infai.errors",
    "Message": "infai.llm",
    "MessageRecord": "infai.store",
    "Model": "infai.llm",
    "Notice": "infai.llm",
    "OnRestore": "infai.agent",
    "Question": "infai.agent",
    "ReasoningDelta": "infai.llm",
    "Reply": "infai.tools",
    "Request": "infai.llm",
    "RestoreRefused": "infai.agent",
    "Restored": "infai.agent",
    "Saved": "infai.agent",
    "ScriptedModel": "infai.llm",
    "Streamed": "infai.agent",
    "SubagentResult": "infai.agent",
    "TextDelta": "infai.llm",
    "ToolCall": "infai.llm",
    "ToolCallDelta": "infai.llm",
    "ToolCallRecord": "infai.store",
    "ToolResultRecord": "infai.store",
    "TurnEnded": "infai.agent",
    "as_approver": "infai.agent",
    "diff_at": "infai.agent",
    "file_note": "infai.agent",
    "files_at": "infai.agent",
    "open_store": "infai.store",
    "shell_note": "infai.agent",
}

if TYPE_CHECKING:
    from infai.agent import (
        AgentEvent,
        AgentSession,
        Busy,
        Config,
        Harness,
        OnRestore,
        Question,
        Restored,
        RestoreRefused,
        Saved,
        Streamed,
        SubagentResult,
        TurnEnded,
        as_approver,
        diff_at,
        file_note,
        files_at,
        shell_note,
    )
    from infai.errors import InfaiError
    from infai.llm import (
        Message,
        Model,
        Notice,
        ReasoningDelta,
        Request,
        ScriptedModel,
        TextDelta,
        ToolCall,
        ToolCallDelta,
    )
    from infai.store import Event, MessageRecord, ToolCallRecord, ToolResultRecord, open_store
    from infai.tools import AllowAlways, Ask, DenyWith, Reply


def __getattr__(name: str) -> object:
    """Load a public name from its package on first use (see the module docstring)."""
    package = _SDK.get(name)
    if package is None:
        raise AttributeError(f"module 'infai' has no attribute {name!r}")
    value = getattr(_importlib.import_module(package), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_SDK})


__all__ = [
    "AgentEvent",
    "AgentSession",
    "AllowAlways",
    "Ask",
    "Busy",
    "Config",
    "DenyWith",
    "Event",
    "Harness",
    "InfaiError",
    "Message",
    "MessageRecord",
    "Model",
    "Notice",
    "OnRestore",
    "Question",
    "ReasoningDelta",
    "Reply",
    "Request",
    "RestoreRefused",
    "Restored",
    "Saved",
    "ScriptedModel",
    "Streamed",
    "SubagentResult",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallRecord",
    "ToolResultRecord",
    "TurnEnded",
    "as_approver",
    "diff_at",
    "file_note",
    "files_at",
    "open_store",
    "shell_note",
]
