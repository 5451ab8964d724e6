"""Tools written as typed Python functions: :func:`tool`.

::

    from pathlib import Path
    from infai.tools import tool

    @tool(reads=("path",))
    def count_lines(path: Path, blank: bool = False) -> str:
        \"\"\"Count the lines of a file.

        Args:
            path: the file, relative to the working directory
            blank: count blank lines too
        \"\"\"
        lines = path.read_text().splitlines()
        return str(len([l for l in lines if blank or l.strip()]))

The function's signature is the tool's JSON schema: each parameter a property
(``str``, ``int``, ``float``, ``bool``, ``Path``, ``list[...]`` of those,
``Literal[...]`` choices, and ``Optional``/``X | None`` of any of them); a
parameter with a default, or an optional one, is not required. The docstring's
first part is the description the model reads, its ``Args:`` section each
parameter's. A parameter annotated :class:`~infai.tools.base.ToolContext` gets
the call's context (working directory, session) and is not shown to the model.
Anything else (no annotation, an unsupported type, ``*args``, no docstring, an
``Args:`` entry naming no parameter, a name a built-in tool has) is a
:class:`ToolDefinitionError` when the function is decorated, naming the function
and the parameter: a mistake shows at import, not in the middle of a session.

A call runs off the event loop: a plain function in a worker thread, a
coroutine function awaited (it must not block). ``Path`` arguments arrive
resolved against the session's working directory, the very path the policy
checked. What the function returns is the output (a ``str`` as it is, a
:class:`~infai.tools.base.ToolOutput` as given, anything else as JSON); an
exception is an error output naming it, never a failed turn.

Permissions: the tool declares what it touches (:mod:`~infai.tools.effects`):
``reads`` and ``writes`` name the parameters holding paths it reads or writes,
``network=True`` says it reaches the network. The policy rules on those effects
as on the built-ins': reading a file is judged as ``read_file`` reading it
(allowed inside the working directory, deny rules for ``read_file`` bind it),
writing as ``write_file`` writing it (asked, never into infai's own files),
the network asks. A tool declaring nothing is allowed by default. Rules name it
like any tool: ``allow count_lines src/*``, ``deny fetch_url``.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Literal, overload

from infai.errors import InfaiError
from infai.llm import ToolSpec

from .base import ToolContext, ToolOutput
from .common import as_int, cap, error
from .effects import Effects, declare
from .offload import off_loop
from .rules import DELEGATING, MCP_PREFIX, TOOL_NAMES

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SCALARS: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_SECTION = re.compile(r"(Args|Arguments|Parameters|Returns?|Raises|Yields|Examples?|Notes?):\s*$")
_ENTRY = re.compile(r"(\s+)\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)")
SUPPORTED = "str, int, float, bool, Path, list[...], Literal[...], Optional[...]"


class ToolDefinitionError(InfaiError):
    """A function cannot be a tool as written (names the function and what is wrong)."""


@dataclass(frozen=True, slots=True)
class _Param:
    """One parameter as the model fills it."""

    name: str
    #: "string", "integer", "number", "boolean", "array", or "path" (a string, resolved)
    kind: str
    #: for an array: its items' kind
    items: str | None
    choices: tuple[Any, ...] | None
    required: bool
    #: the function's default for a Path parameter (resolved per call, not at import)
    path_default: str | None = None


def _kind(annotation: Any, where: str) -> tuple[str, dict[str, Any], tuple[Any, ...] | None]:
    """The kind, JSON schema and choices of a (non-optional) annotation."""
    if annotation in _SCALARS:
        return annotation.__name__, {"type": _SCALARS[annotation]}, None
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return "path", {"type": "string"}, None
    origin = typing.get_origin(annotation)
    if origin is Literal:
        choices = typing.get_args(annotation)
        kinds = {type(choice) for choice in choices}
        if len(kinds) != 1 or next(iter(kinds)) not in _SCALARS:
            raise ToolDefinitionError(f"{where}: Literal choices must all be str, int or bool")
        kind = next(iter(kinds))
        return kind.__name__, {"type": _SCALARS[kind], "enum": list(choices)}, choices
    if annotation is list or origin is list:
        args = typing.get_args(annotation)
        if not args:
            return "list", {"type": "array"}, None
        item_kind, item_schema, _ = _kind(args[0], f"{where} (list items)")
        if item_kind == "list":
            raise ToolDefinitionError(f"{where}: lists of lists are not supported")
        return "list", {"type": "array", "items": item_schema}, None
    plain = origin is None and getattr(annotation, "__name__", None)
    shown = plain or repr(annotation).removeprefix("typing.")
    raise ToolDefinitionError(f"{where}: type {shown} is not supported ({SUPPORTED})")


def _unoptional(annotation: Any) -> tuple[Any, bool]:
    """``X`` of ``Optional[X]`` / ``X | None``, and whether it was optional."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            return args[0], True
    return annotation, False


def _docs(doc: str, where: str) -> tuple[str, dict[str, str]]:
    """The description (the docstring before its sections) and each ``Args:`` entry's text."""
    lines = doc.splitlines()
    described: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    indent: str | None = None
    current: str | None = None
    for line in lines:
        header = _SECTION.fullmatch(line.strip()) if not line.startswith((" ", "\t")) else None
        if header:
            section, indent, current = header.group(1), None, None
            continue
        if section is None:
            described.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters") or not line.strip():
            continue
        entry = _ENTRY.fullmatch(line)
        if entry and (indent is None or entry.group(1) == indent):
            indent, current = entry.group(1), entry.group(2)
            params[current] = entry.group(3).strip()
        elif current is not None and line.startswith((" ", "\t")):
            params[current] = f"{params[current]} {line.strip()}".strip()
        else:
            raise ToolDefinitionError(f"{where}: cannot read the Args line {line.strip()!r}")
    return "\n".join(described).strip(), params


def _signature(fn: Callable[..., Any], where: str) -> inspect.Signature:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"{where}: no signature to read ({exc})") from None


def _hints(fn: Callable[..., Any], where: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception as exc:  # an annotation naming what is not importable
        raise ToolDefinitionError(f"{where}: cannot resolve its annotations: {exc}") from None


class FunctionTool:
    """A Python function as a :class:`~infai.tools.base.Tool` (made by :func:`tool`).

    Calling it calls the function, so a decorated function stays usable as one.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        reads: tuple[str, ...] = (),
        writes: tuple[str, ...] = (),
        network: bool = False,
    ) -> None:
        where = f"tool {getattr(fn, '__qualname__', fn)!r}"
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not _NAME.fullmatch(self.name):
            raise ToolDefinitionError(f"{where}: name {self.name!r}: 1-64 of A-Z a-z 0-9 _ -")
        if self.name in TOOL_NAMES | DELEGATING or self.name.startswith(MCP_PREFIX):
            raise ToolDefinitionError(
                f"{where}: name {self.name!r} is a built-in tool's (or an MCP tool's prefix)"
            )
        self._async = inspect.iscoroutinefunction(fn)
        summary, documented = _docs(inspect.getdoc(fn) or "", where)
        text = description or summary
        if not text:
            raise ToolDefinitionError(
                f"{where}: no description: give it a docstring (or description=...), "
                "which is what the model reads"
            )
        self._params, self._context_param, schema = self._read_params(fn, where, documented)
        for argument in (*reads, *writes):
            param = next((p for p in self._params if p.name == argument), None)
            if param is None or param.kind not in ("path", "str"):
                raise ToolDefinitionError(
                    f"{where}: reads/writes name {argument!r}, which is not a str or Path parameter"
                )
        defaults = tuple(
            (p.name, p.path_default)
            for p in self._params
            if p.path_default is not None and p.name in (*reads, *writes)
        )
        self.effects = Effects(tuple(reads), tuple(writes), bool(network), defaults)
        self.spec = ToolSpec(self.name, text, schema)
        declare(self.name, self.effects)

    def _read_params(
        self, fn: Callable[..., Any], where: str, documented: dict[str, str]
    ) -> tuple[list[_Param], str | None, dict[str, Any]]:
        hints = _hints(fn, where)
        params: list[_Param] = []
        context_param: str | None = None
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in _signature(fn, where).parameters.values():
            at = f"{where}, parameter {param.name!r}"
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolDefinitionError(f"{at}: *args and **kwargs cannot be tool arguments")
            if param.kind is param.POSITIONAL_ONLY:
                raise ToolDefinitionError(f"{at}: positional-only parameters cannot be named")
            if param.name not in hints:
                raise ToolDefinitionError(f"{at}: no type annotation ({SUPPORTED})")
            annotation, optional = _unoptional(hints[param.name])
            if annotation is ToolContext:
                context_param = param.name
                continue
            kind, schema, choices = _kind(annotation, at)
            items = None
            if kind == "list" and "items" in schema:
                items = _kind(typing.get_args(annotation)[0], at)[0]
            if param.name in documented:
                schema["description"] = documented[param.name]
            has_default = param.default is not param.empty
            if has_default and param.default is not None:
                schema["default"] = str(param.default) if kind == "path" else param.default
            is_required = not (has_default or optional)
            if is_required:
                required.append(param.name)
            properties[param.name] = schema
            path_default = (
                str(param.default) if kind == "path" and has_default and param.default else None
            )
            params.append(_Param(param.name, kind, items, choices, is_required, path_default))
        for extra in set(documented) - {p.name for p in params} - {context_param}:
            raise ToolDefinitionError(f"{where}: its Args section names {extra!r}, no parameter")
        schema = {"type": "object", "properties": properties, "required": required}
        return params, context_param, schema

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function itself (the tool stays usable as the function it was)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name} {self.effects}>"

    def _value(self, param: _Param, kind: str, value: Any, context: ToolContext) -> Any:
        if kind == "path":
            if not isinstance(value, str) or "\0" in value:
                raise ValueError(f"argument {param.name!r} must be a path")
            return context.resolve(value).path
        if kind == "int":
            return as_int(value, 0)
        if kind == "float":
            return float(value)
        if kind == "list":
            if not isinstance(value, list):
                raise ValueError(f"argument {param.name!r} must be an array")
            item = param.items
            return [v if item is None else self._value(param, item, v, context) for v in value]
        return value

    def arguments(self, given: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        """The function's keyword arguments for the model's ``given`` ones; ValueError
        naming the argument when one cannot be used."""
        known = {p.name for p in self._params}
        if unknown := sorted(set(given) - known):
            takes = ", ".join(sorted(known)) or "none"
            raise ValueError(f"unknown argument {unknown[0]!r} (it takes: {takes})")
        kwargs: dict[str, Any] = {}
        for param in self._params:
            value = given.get(param.name)
            if value is None and param.path_default is not None:
                value = param.path_default  # the working directory's, not the process's
            if value is None:
                if param.required:
                    raise ValueError(f"argument {param.name!r} is required")
                continue
            if param.choices is not None and value not in param.choices:
                allowed = ", ".join(repr(c) for c in param.choices)
                raise ValueError(f"argument {param.name!r} must be one of {allowed}")
            try:
                kwargs[param.name] = self._value(param, param.kind, value, context)
            except (TypeError, ValueError, OSError, RuntimeError) as exc:
                raise ValueError(f"argument {param.name!r}: {exc}") from None
        if self._context_param is not None:
            kwargs[self._context_param] = context
        return kwargs

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """Call the function (a plain one in a worker thread) with the model's
        arguments; its result is the output, an exception an error output."""
        try:
            kwargs = self.arguments(arguments, context)
        except ValueError as exc:
            return error(f"{self.name}: {exc}")
        try:
            if self._async:
                result = await typing.cast(Callable[..., Awaitable[Any]], self.fn)(**kwargs)
            else:
                result = await off_loop(self.fn, **kwargs)
        except Exception as exc:  # the tool's failure is the model's to hear about
            return error(f"{self.name} failed: {type(exc).__name__}: {exc}")
        return _output(result)


def _output(result: Any) -> ToolOutput:
    if isinstance(result, ToolOutput):
        return result
    if result is None:
        return ToolOutput("(no output)")
    if isinstance(result, str):
        return ToolOutput(cap(result))
    if isinstance(result, PurePath):
        return ToolOutput(str(result))
    return ToolOutput(cap(json.dumps(result, ensure_ascii=False, default=str)))


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    reads: tuple[str, ...] | list[str] = (),
    writes: tuple[str, ...] | list[str] = (),
    network: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    reads: tuple[str, ...] | list[str] = (),
    writes: tuple[str, ...] | list[str] = (),
    network: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a typed function a tool (see the module docstring): ``@tool`` or
    ``@tool(reads=("path",), network=True, name=..., description=...)``.

    Raises :class:`ToolDefinitionError` for a function that cannot be one.
    """

    def make(function: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            function,
            name=name,
            description=description,
            reads=tuple(reads),
            writes=tuple(writes),
            network=network,
        )

    return make(fn) if fn is not None else make


__all__ = ["SUPPORTED", "FunctionTool", "ToolDefinitionError", "tool"]
