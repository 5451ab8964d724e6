"""Tool manifests: what tools a model request offered, kept once per distinct list.

Model, in prose: every model request offers the model a list of tools (built-in,
the subagent ``task``, MCP servers' tools), each a name, a description and a JSON
Schema of its parameters. That list can change between two turns of one session
(a configuration edit, an MCP server that added a tool or went away), so a
transcript alone does not say what the model could call. The list is therefore
recorded: its canonical JSON, ``{"v": 1, "tools": [...]}`` with the tools sorted
by name and every key sorted, ASCII only, no spaces, is a *manifest*, put into the
store's content-addressed objects (:mod:`infai.store.objects`). Equal lists are
equal bytes and so one object, whatever session or process offered them.

The turn names it where the model's answer is stored: the assistant message of
each model response carries ``metadata["tool_manifest"] = "sha256:..."`` (an
interrupted reply too). So "what did the model see at event X" is answered at the
assistant message X itself, and for a tool call or result by its parent assistant
message; a user prompt carries none, since one prompt may lead to several model
requests whose tool lists need not agree. Store garbage collection keeps every
object named under that key.

The object is put before the event naming it is appended. A process remembers
which digests it has put (per object store, for the store's current gc
generation), so the same tool list does not cost a write and a sync per model
call; a removal by gc bumps the generation and the next request puts again.
"""

from __future__ import annotations

import contextlib
import json
import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from infai.llm import ToolSpec
from infai.store import CorruptionError, Event, MessageRecord, UnsupportedFormat
from infai.store.codec import digest_of

if TYPE_CHECKING:
    from infai.store.objects import ObjectStore

#: the record metadata key naming the manifest (store gc treats its values as roots)
MANIFEST_KEY = "tool_manifest"
#: the manifest format this infai writes and reads
MANIFEST_VERSION = 1

_lock = threading.Lock()
#: per object store: (its gc generation, the digests this process put in it then)
_put: weakref.WeakKeyDictionary[Any, tuple[int, set[str]]] = weakref.WeakKeyDictionary()


def manifest_bytes(specs: Iterable[ToolSpec]) -> bytes:
    """The canonical manifest of ``specs``: the same tools give the same bytes,
    in whatever order they were offered."""
    tools = sorted(
        (
            {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
            for spec in specs
        ),
        key=lambda tool: str(tool["name"]),
    )
    text = json.dumps(
        {"v": MANIFEST_VERSION, "tools": tools},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,  # canonical and encodable whatever a server's text holds
        # a schema's NaN (Python's JSON reader takes one) is kept as written, not
        # refused: a tool list the provider was sent must never fail the turn here
        allow_nan=True,
    )
    return text.encode("ascii")


def record_manifest(objects: ObjectStore, specs: Iterable[ToolSpec]) -> str:
    """Put the manifest of ``specs`` into ``objects`` (unless this process already
    did, since the last gc) and return its digest. Blocks on the store."""
    data = manifest_bytes(specs)
    digest = digest_of(data)
    generation = objects.generation()
    with _lock:
        known = _cached(objects)
        if known is not None and known[0] == generation and digest in known[1]:
            return digest
    objects.put(data)
    with _lock:
        known = _cached(objects)
        if known is None or known[0] != generation:
            known = (generation, set())
            _remember(objects, known)
        known[1].add(digest)
    return digest


def _cached(objects: object) -> tuple[int, set[str]] | None:
    try:
        return _put.get(objects)
    except TypeError:  # an object store that cannot be weakly referenced: no cache
        return None


def _remember(objects: object, known: tuple[int, set[str]]) -> None:
    with contextlib.suppress(TypeError):  # cannot be weakly referenced: no cache
        _put[objects] = known


def load_manifest(objects: ObjectStore, digest: str) -> list[dict[str, Any]]:
    """The tools of the manifest ``digest``: ``name``, ``description`` and
    ``parameters`` each, sorted by name.

    Raises :class:`~infai.store.ObjectNotFound` naming the digest if the object
    is gone, :class:`~infai.store.CorruptionError` if its bytes are not a
    manifest, and :class:`~infai.store.UnsupportedFormat` for a newer version.
    """
    where = f"tool manifest {digest}"
    data = objects.get(digest)
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptionError(where, getattr(exc, "pos", 0), f"not JSON: {exc}") from exc
    if not isinstance(value, dict) or not isinstance(value.get("v"), int):
        raise CorruptionError(where, 0, "not a tool manifest (no version 'v')")
    if value["v"] > MANIFEST_VERSION:
        raise UnsupportedFormat(f"{where}: version {value['v']} is newer than this infai")
    tools = value.get("tools")
    if not isinstance(tools, list):
        raise CorruptionError(where, 0, "'tools' is not a list")
    for number, tool in enumerate(tools):
        if not (
            isinstance(tool, dict)
            and isinstance(tool.get("name"), str)
            and isinstance(tool.get("description"), str)
            and isinstance(tool.get("parameters"), dict)
        ):
            raise CorruptionError(
                where, 0, f"tools[{number}] needs a string name and description, object parameters"
            )
    return tools


def manifest_of(event: Event) -> str | None:
    """The digest of the manifest ``event`` names (None: it names none)."""
    record = event.record
    if not isinstance(record, MessageRecord):
        return None
    digest = record.metadata.get(MANIFEST_KEY)
    return digest if isinstance(digest, str) else None


__all__ = [
    "MANIFEST_KEY",
    "MANIFEST_VERSION",
    "load_manifest",
    "manifest_bytes",
    "manifest_of",
    "record_manifest",
]
