"""The agent: context assembly from the store, and the loop that runs a turn.

One turn persists what must survive a crash before it matters (the user's
message before generation, each tool call before it runs) and streams the rest
live. Shells drive it; they never talk to the store or a model directly.
"""

from .context import to_messages
from .hub import EventHub, Lagged
from .loop import AgentEvent, Saved, Streamed, TurnEnded, run_turn
from .prompt import system_prompt
from .session import AgentSession
from .subagent import Narrowed, TaskTool

__all__ = [
    "AgentEvent",
    "AgentSession",
    "EventHub",
    "Lagged",
    "Narrowed",
    "Saved",
    "Streamed",
    "TaskTool",
    "TurnEnded",
    "run_turn",
    "system_prompt",
    "to_messages",
]
