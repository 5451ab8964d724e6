"""The agent: context assembly from the store, and the loop that runs a turn.

One turn persists what must survive a crash before it matters (the user's
message before generation, each tool call before it runs) and streams the rest
live. Shells drive it; they never talk to the store or a model directly.
"""

from .context import to_messages
from .hub import EventHub, Hub, Lagged, Subscription
from .loop import AgentEvent, Saved, Streamed, TurnEnded, run_turn
from .prompt import system_prompt
from .session import AgentSession, Busy, NotInFlight, SlotConflict, Turn
from .subagent import Narrowed, TaskTool
from .wire import event_to_obj

__all__ = [
    "AgentEvent",
    "AgentSession",
    "Busy",
    "EventHub",
    "Hub",
    "Lagged",
    "Narrowed",
    "NotInFlight",
    "Saved",
    "SlotConflict",
    "Streamed",
    "Subscription",
    "TaskTool",
    "Turn",
    "TurnEnded",
    "event_to_obj",
    "run_turn",
    "system_prompt",
    "to_messages",
]
