"""What every built-in tool shares: output caps, error outputs, argument schemas.

A tool's output is capped so one call cannot flood the context, and a failure
is an error output the model can act on, never an exception.
"""

from __future__ import annotations

from typing import Any

from .base import ToolOutput

MAX_OUTPUT = 30_000  # characters a tool returns at most
OUTPUT_BYTES = 4 * MAX_OUTPUT  # bytes of a command's output kept (UTF-8: up to 4 a character)
MAX_TIMEOUT = 3600.0  # seconds a command may run at most, whatever the model asks
MAX_MATCHES = 200
READ_CHUNK = 1 << 16  # characters read at a time from lines that are skipped


def cap(text: str, limit: int = MAX_OUTPUT) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


def error(message: str) -> ToolOutput:
    """An error output: the call failed or was refused, and the model is told why."""
    return ToolOutput(message, is_error=True)


def schema(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments: an object with these properties."""
    return {"type": "object", "properties": properties, "required": required}


STR = {"type": "string"}
INT = {"type": "integer"}
