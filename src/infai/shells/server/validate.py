"""The small JSON Schema subset the API's tables use, checked with messages that
name the field (``body.patterns[0]: must be a string``).

Why not a JSON Schema library: the API needs a dozen keywords, and its messages
must name the field in a request's own terms; every schema the tables in
:mod:`.api` use is checked by this module, and the OpenAPI document generated
from the same tables says the same.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

Schema = dict[str, Any]
#: no named schemas to follow ``$ref`` into
NO_COMPONENTS: Mapping[str, Schema] = MappingProxyType({})

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _type_name(value: object) -> str:
    for name, types in _JSON_TYPES.items():
        if isinstance(value, types) and not (isinstance(value, bool) and name != "boolean"):
            return name
    return type(value).__name__


def _is(value: object, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    return isinstance(value, _JSON_TYPES[kind])


def validate(
    value: Any,
    schema: Schema,
    where: str = "body",
    components: Mapping[str, Schema] = MappingProxyType({}),
) -> str | None:
    """The first way ``value`` breaks ``schema`` (a message naming the field), or None.

    Understands ``type`` (a name or a list), ``enum``, ``properties``,
    ``required``, ``additionalProperties: false``, ``items``, ``minItems``,
    ``maxItems``, ``minLength``, ``maxLength``, ``format: uuid`` and ``$ref`` into
    :data:`COMPONENTS`.
    Every string must be valid Unicode (no lone surrogates): the store writes UTF-8.
    """
    if "$ref" in schema:
        return validate(value, components[schema["$ref"].rsplit("/", 1)[-1]], where, components)
    kinds = schema.get("type")
    if kinds is not None:
        wanted = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, k) for k in wanted):
            return f"{where}: expected {' or '.join(wanted)}, got {_type_name(value)}"
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(repr(c) for c in schema["enum"])
        return f"{where}: must be one of {choices}"
    if isinstance(value, str):
        return _check_string(value, schema, where)
    if isinstance(value, list) and len(value) < schema.get("minItems", 0):
        return f"{where}: needs at least {schema['minItems']} item(s)"
    if isinstance(value, list) and len(value) > schema.get("maxItems", len(value)):
        return f"{where}: more than {schema['maxItems']} items"
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problem = validate(item, schema["items"], f"{where}[{i}]", components)
            if problem:
                return problem
    if isinstance(value, dict):
        return _check_object(value, schema, where, components)
    return None


def _check_string(value: str, schema: Schema, where: str) -> str | None:
    try:
        value.encode()
    except UnicodeEncodeError:
        return f"{where}: not valid text (a lone surrogate)"
    if len(value) < schema.get("minLength", 0):
        return f"{where}: must not be empty" if not value else f"{where}: too short"
    if len(value) > schema.get("maxLength", len(value)):
        return f"{where}: longer than {schema['maxLength']} characters"
    if schema.get("format") == "uuid" and not _UUID_RE.fullmatch(value):
        return f"{where}: {value[:60]!r} is not a UUID"
    return None


def _check_object(
    value: dict[str, Any], schema: Schema, where: str, components: Mapping[str, Schema]
) -> str | None:
    properties: dict[str, Schema] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in value:
            return f"{where}: missing field {name!r}"
    for name, item in value.items():
        if name in properties:
            problem = validate(item, properties[name], f"{where}.{name}", components)
            if problem:
                return problem
        elif schema.get("additionalProperties", True) is False:
            known = ", ".join(properties) or "none"
            return f"{where}: unknown field {name[:60]!r} (fields: {known})"
    return None


__all__ = ["Schema", "validate"]
