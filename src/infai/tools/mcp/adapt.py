"""How an MCP server's tool becomes an infai tool: its schema checked, its results typed.

A server's tool is offered to the model only with an input schema infai can
pass on and check arguments against: a JSON object whose ``type`` is
``"object"``, whose ``properties`` (if any) is an object and ``required`` a
list of names, nested no deeper than :data:`MAX_DEPTH`, no larger than
:data:`MAX_SCHEMA_BYTES` as JSON (schemas flood the context), and whose every
``$ref`` points inside the schema itself (``#/...``) at something that is
there (infai fetches nothing). A schema that fails any of these makes *that
tool* unavailable, with the reason; the server's other tools stay.

A result becomes a :class:`~infai.tools.base.ToolOutput`: the text of its text
blocks (and of embedded text resources) joined by newlines; every other block
(an image, audio, a binary resource, a link) described in one line, never
inlined; ``isError`` becomes ``is_error``. Structured content is kept in the
output's metadata when small (:data:`MAX_STRUCTURED_BYTES`), and is the text
itself when the server sent no text. The store turns a large output into a
blob like any other tool's; :data:`MAX_OUTPUT_CHARS` bounds what is kept at all.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types

from ..base import ToolOutput

MAX_DEPTH = 32
MAX_SCHEMA_BYTES = 64 * 1024
MAX_STRUCTURED_BYTES = 8 * 1024
MAX_OUTPUT_CHARS = 4 * 1024 * 1024


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot be a tool's input schema here (None: it can)."""
    if not isinstance(schema, dict):
        return f"its input schema is not a JSON object but {type(schema).__name__}"
    if schema.get("type") != "object":
        return f"its input schema's type is {schema.get('type')!r}, not 'object'"
    if not isinstance(schema.get("properties", {}), dict):
        return "its input schema's properties is not an object"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "its input schema's required is not a list of names"
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError, RecursionError) as exc:
        return f"its input schema cannot be written as JSON: {exc}"
    if size > MAX_SCHEMA_BYTES:
        return f"its input schema is {size} bytes as JSON (at most {MAX_SCHEMA_BYTES})"
    return _walk(schema, schema, 0)


def _walk(node: Any, root: dict[str, Any], depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return f"its input schema is nested deeper than {MAX_DEPTH} levels"
    if isinstance(node, list):
        items = node
    elif isinstance(node, dict):
        ref = node.get("$ref")
        if ref is not None and (why := _ref_problem(ref, root)):
            return why
        items = list(node.values())
    else:
        return None
    for item in items:
        if why := _walk(item, root, depth + 1):
            return why
    return None


def _ref_problem(ref: Any, root: dict[str, Any]) -> str | None:
    """Why a ``$ref`` cannot be followed inside the schema (None: it can)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return f"its input schema refers to {ref!r}, outside itself (infai fetches nothing)"
    node: Any = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return f"its input schema refers to {ref!r}, which is not in it"
    return None


def describe_block(block: Any) -> str:
    """One content block as text: text itself, anything else described in a line."""
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]"
    if isinstance(block, mcp_types.EmbeddedResource):
        res = block.resource
        if isinstance(res, mcp_types.TextResourceContents):
            return f"[resource {res.uri}]\n{res.text}"
        size = len(res.blob) * 3 // 4
        return f"[resource {res.uri} ({res.mime_type or 'binary'}), {size} bytes, not shown]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[link to resource {block.uri} ({block.name})]"
    return f"[{getattr(block, 'type', type(block).__name__)} content, not shown]"


def to_output(result: mcp_types.CallToolResult, server: str, tool: str) -> ToolOutput:
    """A server's result as infai's tool output (the module docstring)."""
    parts = [describe_block(block) for block in result.content]
    text = "\n".join(parts)
    metadata: dict[str, Any] = {"mcp": {"server": server, "tool": tool}}
    structured = result.structured_content
    if structured is not None:
        try:
            shown = json.dumps(structured, ensure_ascii=False)
        except (TypeError, ValueError):
            shown = ""
        if shown and len(shown.encode()) <= MAX_STRUCTURED_BYTES:
            metadata["structured"] = structured
        if not text and shown:
            text = shown
    if len(text) > MAX_OUTPUT_CHARS:
        cut = len(text) - MAX_OUTPUT_CHARS
        text = text[:MAX_OUTPUT_CHARS] + f"\n[{cut} more characters left out]"
    return ToolOutput(text, is_error=bool(result.is_error), metadata=metadata)


__all__ = ["MAX_DEPTH", "describe_block", "schema_problem", "to_output"]
