"""Tools the model may call, and the permission seam in front of them.

A tool is a :class:`~infai.tools.base.Tool`: a :class:`~infai.llm.ToolSpec`
the model sees and an async ``run`` that returns a
:class:`~infai.tools.base.ToolOutput`. A tool never raises for a failure the
model should hear about: it returns an error output. Before any tool runs, the
loop asks a :class:`~infai.tools.base.Permissions` object for a decision.
A typed Python function becomes a tool with :func:`~infai.tools.decorator.tool`.
"""

from .base import (
    AllowAll,
    Decision,
    Permissions,
    Tool,
    Toolbox,
    ToolContext,
    ToolOutput,
)
from .bash_path import bash_missing, find_bash
from .builtin import builtin_tools
from .decorator import FunctionTool, ToolDefinitionError, tool
from .effects import Effects
from .landlock import interpreter as sandbox_interpreter
from .policy import (
    AllowAlways,
    Answer,
    Approver,
    Ask,
    DenyWith,
    Policy,
    Reply,
    Rule,
    RuleError,
    always_rules,
)
from .sandbox import Sandbox, SandboxSettings, parse_sandbox
from .sandbox_hide import hidden_report
from .sandbox_home import home_report
from .sandbox_verified import record_pass
from .write_budget import budget_line, budget_report

__all__ = [
    "AllowAll",
    "AllowAlways",
    "Answer",
    "Approver",
    "Ask",
    "Decision",
    "DenyWith",
    "Effects",
    "FunctionTool",
    "Permissions",
    "Policy",
    "Reply",
    "Rule",
    "RuleError",
    "Sandbox",
    "SandboxSettings",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolOutput",
    "Toolbox",
    "always_rules",
    "bash_missing",
    "budget_line",
    "budget_report",
    "builtin_tools",
    "find_bash",
    "hidden_report",
    "home_report",
    "parse_sandbox",
    "record_pass",
    "sandbox_interpreter",
    "tool",
]
