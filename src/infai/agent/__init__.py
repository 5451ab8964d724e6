"""The agent: context assembly from the store, the loop that runs a turn, and the
session object every shell drives.

One turn persists what must survive a crash before it matters (the user's
message before generation, each tool call before it runs) and streams the rest
live. :class:`Harness` is the one place the machinery is assembled (config,
model, policy, tools) and sessions are opened; an :class:`AgentSession` runs
one turn at a time and publishes every event on its :class:`Hub`, in the one
JSON form of :func:`event_to_obj`. Shells drive it; they never talk to the
store or a model directly.
"""

from infai.checkpoints import (
    CheckpointSettings,
    FilesState,
    OnRestore,
    Restored,
    RestoreRefused,
    SessionCheckpoints,
    files_at,
    working_files,
)

from .checkpoint_ops import checkout, diff_at
from .compaction import CompactionFailed, context_tokens, event_tokens
from .config import (
    Config,
    ConfigError,
    load_config,
    user_config_path,
)
from .context import (
    ContextDecision,
    ContextPart,
    ContextPipeline,
    ContextRule,
    ContextRuleFailed,
    UnsendableEvent,
    register_context_rule,
    to_messages,
    unregister_context_rule,
)
from .context.explain import explain_context
from .harness import Harness
from .hub import EventHub, Hub, Lagged, Subscription
from .loop import AgentEvent, Saved, Streamed, TurnEnded, run_turn
from .manifest import MANIFEST_KEY, load_manifest, manifest_of, record_manifest
from .model_list import describe_models
from .plugins import (
    Plugin,
    PluginError,
    load_context_rules,
    plugin_report,
    register_tool,
    unregister_tool,
)
from .prompt import system_prompt
from .questions import AnyApprover, Question, as_approver
from .session import AgentSession
from .session_api import SubagentResult
from .subagent import Narrowed, TaskTool
from .turn import Busy, NotInFlight, PromptBlocked, SlotConflict, Turn
from .unfinished import record_unfinished
from .user_context import USER_CONTEXT, add_context, file_note, run_as_user, shell_note
from .wire import event_to_obj, settled_obj

__all__ = [
    "MANIFEST_KEY",
    "USER_CONTEXT",
    "AgentEvent",
    "AgentSession",
    "AnyApprover",
    "Busy",
    "CheckpointSettings",
    "CompactionFailed",
    "Config",
    "ConfigError",
    "ContextDecision",
    "ContextPart",
    "ContextPipeline",
    "ContextRule",
    "ContextRuleFailed",
    "EventHub",
    "FilesState",
    "Harness",
    "Hub",
    "Lagged",
    "Narrowed",
    "NotInFlight",
    "OnRestore",
    "Plugin",
    "PluginError",
    "PromptBlocked",
    "Question",
    "RestoreRefused",
    "Restored",
    "Saved",
    "SessionCheckpoints",
    "SlotConflict",
    "Streamed",
    "SubagentResult",
    "Subscription",
    "TaskTool",
    "Turn",
    "TurnEnded",
    "UnsendableEvent",
    "add_context",
    "as_approver",
    "checkout",
    "context_tokens",
    "describe_models",
    "diff_at",
    "event_to_obj",
    "event_tokens",
    "explain_context",
    "file_note",
    "files_at",
    "load_config",
    "load_context_rules",
    "load_manifest",
    "manifest_of",
    "plugin_report",
    "record_manifest",
    "record_unfinished",
    "register_context_rule",
    "register_tool",
    "run_as_user",
    "run_turn",
    "settled_obj",
    "shell_note",
    "system_prompt",
    "to_messages",
    "unregister_context_rule",
    "unregister_tool",
    "user_config_path",
    "working_files",
]
