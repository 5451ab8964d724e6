"""What every built-in tool shares: output caps, error outputs, argument schemas.

A tool's output is capped so one call cannot flood the context, and a failure
is an error output the model can act on, never an exception. The arguments a
model sends are checked against the tool's schema (:func:`argument_problem`)
before anything is decided or run: a wrong type or a NUL byte in a path is an
error result naming the argument.
"""

from __future__ import annotations

import math
from typing import Any

from infai.llm import ToolSpec

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


# -- arguments as the model sent them -----------------------------------------------------------

#: the arguments of each built-in tool that name a path (or a glob of paths): no NUL byte
PATH_FIELDS: dict[str, tuple[str, ...]] = {
    "read_file": ("path",),
    "write_file": ("path",),
    "edit_file": ("path",),
    "list_files": ("path", "pattern"),
    "grep": ("path", "glob"),
}
_WANTED = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "an array",
}


def _fits(value: object, wanted: str) -> bool:
    """Whether ``value`` can serve as a JSON ``wanted``; an integer may come as any
    finite number or a numeral (``"12"``), as models send them, but never as
    true/false."""
    if isinstance(value, bool):
        return wanted == "boolean"
    if wanted == "string":
        return isinstance(value, str)
    if wanted == "integer" and isinstance(value, str):
        try:  # what the tools then do with it (str.isdigit let "²" through)
            int(value.strip())
        except ValueError:  # not a numeral, or one past the digits int() takes
            return False
        return True
    if wanted in ("integer", "number"):  # 0.5 seconds is a fine timeout, whatever the schema
        return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
    if wanted == "object":
        return isinstance(value, dict)
    if wanted == "array":
        return isinstance(value, list)
    return False


def _shown(value: object) -> str:
    if value is None:
        return "null"
    text = repr(value) if isinstance(value, str | int | float) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def argument_problem(spec: ToolSpec, arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` cannot be used for ``spec``'s tool, naming the argument;
    None when they can.

    Checked against the spec's schema before the call is decided or run, so a
    badly typed argument (``start_line: "abc"``, ``path: 5``) is an error the
    model can fix rather than an exception, and the permission policy never
    rules on a path the tool would read differently. A path argument may not
    hold a NUL byte (no file has such a name). Arguments the schema does not
    name, and ``null`` for one that is not required, are let through.
    """
    properties: dict[str, Any] = spec.parameters.get("properties") or {}
    for name in spec.parameters.get("required") or ():
        if arguments.get(name) is None:
            return f"argument {name!r} is required"
    for name, value in arguments.items():
        wanted = (properties.get(name) or {}).get("type")
        if value is None or not isinstance(wanted, str) or wanted not in _WANTED:
            continue
        if not _fits(value, wanted):
            return f"argument {name!r} must be {_WANTED[wanted]}, not {_shown(value)}"
        if isinstance(value, str) and "\0" in value and name in PATH_FIELDS.get(spec.name, ()):
            return f"argument {name!r} has a NUL byte in it, which no path can hold"
    return None


def as_int(value: object, default: int) -> int:
    """An integer argument :func:`argument_problem` let through (``default`` when absent)."""
    if value is None or value == "":
        return default
    if isinstance(value, str):
        return int(value.strip())
    if isinstance(value, int | float):
        return int(value)
    raise TypeError(f"not an integer: {value!r}")
