"""A permission question and its answers: what the policy asks an approver (the
TUI's dialog, the server's approval queue, an SDK program's function) and what it
may reply. Split from :mod:`.policy`, which decides when to ask."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .rules import Rule

#: "timeout": nobody answered in time (a served session's question expired)
Answer = Literal["allow", "allow-always", "deny", "timeout"]


@dataclass(frozen=True, slots=True)
class Ask:
    """A permission question as an approver sees it."""

    tool: str
    #: what rules match for this call: the command, the resolved path, the pattern
    subject: str
    #: why it asks: the rule that said so, or the default's reason
    reason: str
    #: the allow rules that answering "allow-always" adds (empty: not offered)
    always: tuple[Rule, ...]
    #: why "allow always" is narrow (exact only) or not offered ("" when neither)
    note: str = ""
    #: who asks when it is not the session's own agent (a subagent)
    caller: str = ""
    #: the call's arguments, as the model gave them
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AllowAlways:
    """Allow this call, and from now on in this session what these patterns match."""

    patterns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DenyWith:
    """Deny this call and tell the model why, in the user's words."""

    reason: str


Reply = Answer | AllowAlways | DenyWith
#: shows the user a question and returns the reply
Approver = Callable[[Ask], Awaitable[Reply]]
#: told the rules an "allow always" added, so a shell can keep them with the session
Remember = Callable[[list["Rule"]], None]
