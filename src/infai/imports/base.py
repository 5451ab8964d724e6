"""The import framework: another tool's session file becomes an infai session.

Model, in prose: an importer reads a foreign file and builds a
:class:`ForeignSession`, a complete description of the session to write (its
metadata, its events as :data:`~infai.store.events.EventSpec` with ids,
parents and times given, its HEAD, and its subagents as child
:class:`ForeignSession` objects hanging from an event), plus an
:class:`ImportReport` of what was read, kept aside, skipped or odd. Nothing is
written while reading. :func:`~.write.commit` then writes it: a session the store does
not have is created whole or not at all (create, ``import_batch``,
``restore_info``; on any failure it is removed again, as
:func:`infai.store.transfer.import_session` does), and a session it has gets
only the events it lacks, appended after their parents. Every id is derived
from the source (:func:`derive_id`: a UUIDv7 whose time is the source's time
and whose other bits hash the source tool, session and entry ids), so a second
import of the same file finds every id present and writes nothing, and an
import after the tool appended to the file adds exactly the new entries.

How an importer is written (the interface the four importers share):

- a class with ``tool`` (the command-line name, e.g. ``"claude-code"``),
  ``default_paths()`` (where the tool keeps its sessions when no PATH is given),
  ``find(path)`` (a file or directory -> the session files under it, each one a
  unit that imports or fails on its own) and ``load(path)`` (one unit -> its
  :class:`ForeignSession` list, empty for a file with no conversation; raise
  :class:`~infai.store.errors.InvalidInput` naming file and line when the file
  cannot be imported at all);
- read lines with :func:`read_json_lines`, which reports two JSON values on one
  line, pretty-printed (multi-line) records and a torn last line, and refuses
  garbage in the middle of a file;
- build the tree with :class:`EventTree`: ``add`` one event per foreign entry
  under the foreign entry's own id (its *key*), ``alias`` the keys of entries
  that become no event (their children re-link to what the alias names), then
  ``finish(head)`` puts the events in an order the store accepts (every parent
  first, the HEAD's branch last so HEAD ends on the tool's own leaf), resolves
  dangling parents (reported; made roots, or with ``dangling="previous"`` hung
  from the entry before) and returns the specs; ``reparent`` and ``drop`` reshape
  the tree before that;
- name sessions with :func:`label`; count what was written with
  :meth:`ImportReport.count`; a session whose parent lives in another file sets
  ``parent_session`` and ``parent_event`` itself (see :class:`ForeignSession`);
- never carry permission rules: ``ForeignSession.extra`` goes to the session's
  ``extra["import"]`` and nothing else of ``extra`` is written; nor a working
  directory: ``ForeignSession.working_dir`` (the tool's) is recorded there too,
  as ``extra["import"]["working_dir"]``, and the session names none (it works
  where it is continued from: a file must not choose where checkouts write).

infai's own shapes to aim for (see :mod:`infai.agent.loop`): an assistant reply
is one ``message`` event (content, reasoning, model, stop reason, usage) followed
by its ``tool_call`` events in a line, then each ``tool_result`` (role
``tool``) in a line after them; parallel calls are therefore a chain, not
branches (the Claude Code importer keeps a response's calls and results in file
order, which a later import of the grown file reproduces). A compaction is a
``compaction`` event whose summary stands for everything before it on the path:
what the source keeps verbatim after the boundary must follow that event.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from infai.store.codec import NIL_ID
from infai.store.errors import InvalidInput
from infai.store.events import EventSpec
from infai.store.records import Record, ToolCallRecord, ToolResultRecord

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

#: the largest record a pretty-printed value may grow to while being read
MAX_RECORD_BYTES = 64 << 20


# -- ids and times -------------------------------------------------------------


def derive_id(namespace: str, key: str, timestamp: str | int | None) -> str:
    """A UUIDv7 for a foreign entry: the same inputs always give the same id.

    ``namespace`` names the source session (``"claude-code:<sessionId>"``),
    ``key`` the entry within it (its own id, or its line number where it has
    none). The 48-bit time field is ``timestamp`` (RFC 3339 text or epoch
    milliseconds; 0 if unknown), so ids sort by the source's time as infai's own
    do; the 74 other free bits come from SHA-256 of namespace and key.
    """
    millis = to_millis(timestamp) or 0
    millis = min(max(millis, 0), (1 << 48) - 1)
    digest = hashlib.sha256(f"{namespace}\x00{key}".encode()).digest()
    rand = int.from_bytes(digest[:10], "big")  # 80 bits, 74 used
    rand_a = rand >> 68 & 0xFFF
    rand_b = rand & ((1 << 62) - 1)
    value = millis << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def to_millis(value: object) -> int | None:
    """Epoch milliseconds of an RFC 3339 string or a number of milliseconds; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def to_rfc3339(value: object, fallback: str | None = None) -> str | None:
    """``value`` (RFC 3339 text or epoch ms) as the store's RFC 3339 UTC text."""
    millis = to_millis(value)
    if millis is None:
        return fallback
    when = datetime.fromtimestamp(millis / 1000, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def label(text: object, limit: int = 80) -> str | None:
    """A session name from foreign text: its first non-blank line, markup tags and
    control characters (an escape sequence in a prompt) removed, spaces collapsed."""
    if not isinstance(text, str):
        return None
    text = re.sub(r"<[^>]*>", " ", text)
    for line in text.splitlines():
        clean = " ".join("".join(ch if ch.isprintable() else " " for ch in line).split())
        if clean:
            return clean[:limit]
    return None


# -- the report ------------------------------------------------------------------


@dataclass
class ImportReport:
    """What reading one source file found, for the user and for ``--json``.

    ``events`` counts the events written by kind; ``kept`` the foreign entry types
    that became metadata (on the session or an event) rather than events;
    ``skipped`` the entry types not imported, each with its reason in ``reasons``;
    ``warnings`` are ``file:line: message`` lines (two values on one line, dangling
    parents, duplicate ids, a torn last line, a field of an unexpected type).
    """

    path: str
    events: Counter[str] = field(default_factory=Counter)
    kept: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: tool calls with no result in the source (interrupted turns)
    unanswered: int = 0

    def warn(self, line: int | None, message: str) -> None:
        """Note something odd at ``line`` (None: the file as a whole)."""
        where = self.path if line is None else f"{self.path}:{line}"
        self.warnings.append(f"{where}: {message}")

    def keep(self, kind: str) -> None:
        """Count an entry of ``kind`` kept as metadata instead of as an event."""
        self.kept[kind] += 1

    def skip(self, kind: str, reason: str) -> None:
        """Count an entry of ``kind`` not imported, and why (the first reason stays)."""
        self.skipped[kind] += 1
        self.reasons.setdefault(kind, reason)

    def count(self, specs: Sequence[EventSpec]) -> None:
        """Count the events about to be written, by kind, and the unanswered calls."""
        self.events.update(spec[5].kind for spec in specs)
        self.unanswered += len(unanswered_calls(specs))

    def to_obj(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "path": self.path,
            "events": dict(sorted(self.events.items())),
            "kept": dict(sorted(self.kept.items())),
            "skipped": {
                kind: {"count": n, "reason": self.reasons.get(kind, "")}
                for kind, n in sorted(self.skipped.items())
            },
            "unanswered_tool_calls": self.unanswered,
            "warnings": list(self.warnings),
        }


# -- reading lines -----------------------------------------------------------------


@dataclass
class Line:
    """One JSON value read from a file: where it starts (1-based line, byte offset)."""

    number: int
    offset: int
    value: Any


_decoder = json.JSONDecoder()


def _values(text: str) -> tuple[list[Any], int | None]:
    """The JSON values in ``text``; and where undecodable text starts (None: none)."""
    out: list[Any] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos >= end:
            return out, None
        try:
            value, pos = _decoder.raw_decode(text, pos)
        except ValueError:
            return out, pos
        out.append(value)


def read_json_lines(path: Path, report: ImportReport) -> Iterator[Line]:
    """Every JSON value in a JSON-lines file, in file order.

    Lines are split on ``\\n`` only. A line holding two values yields both (and a
    warning); a value spread over several lines (pretty-printed) is read whole
    (one warning for the file); a last line cut short (no newline, does not
    parse: the tool may still be writing) is skipped with a warning, so a later
    import picks it up once it is complete. Anything else that does not parse
    raises :class:`InvalidInput` naming the file, line and byte offset, before
    the caller has written anything.
    """
    pending = b""
    start_line = start_offset = offset = 0
    multi_line_noted = False
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if not pending:
                start_line, start_offset = number, offset
            offset += len(raw)
            buffer = pending + raw
            if pending and not raw.rstrip().endswith((b"}", b"]")):
                # inside a multi-line value: it can only end on a closing line
                if len(buffer) > MAX_RECORD_BYTES:
                    raise InvalidInput(
                        f"{path}:{start_line}: a record over {MAX_RECORD_BYTES} bytes"
                    )
                pending = buffer
                continue
            try:
                text = buffer.decode()
            except UnicodeDecodeError as exc:
                if not raw.endswith(b"\n") and exc.end == len(buffer):
                    pending = buffer  # the last line, cut inside a character: a torn tail
                    continue
                raise InvalidInput(
                    f"{path}:{number}: byte offset {start_offset + exc.start}: not UTF-8 text"
                ) from None
            values, bad = _values(text)
            if number != start_line and values and not multi_line_noted:
                multi_line_noted = True
                report.warn(start_line, "records span several lines (pretty-printed): read whole")
            if len(values) > 1 or (values and bad is not None):
                report.warn(start_line, "several JSON values on one line: each is read")
            yield from (Line(start_line, start_offset, value) for value in values)
            if bad is None:
                pending = b""
                continue
            head = len(text[:bad].encode())
            if not _incomplete(text[bad:]):
                raise InvalidInput(
                    f"{path}:{start_line}: byte offset {start_offset + head}: "
                    "not JSON (garbage in the file)"
                )
            if len(buffer) - head > MAX_RECORD_BYTES:
                raise InvalidInput(
                    f"{path}:{start_line}: a record larger than {MAX_RECORD_BYTES} bytes"
                )
            pending = buffer[head:]  # the value goes on on the next line (or was cut)
            if values:
                start_line, start_offset = number, start_offset + head
    if pending.strip():
        report.warn(
            start_line,
            f"the file ends inside a record (byte offset {start_offset}): "
            "cut mid-line, skipped (a later import reads it once complete)",
        )


def _incomplete(text: str) -> bool:
    """Whether ``text`` fails to parse only because it stops early (a prefix of a value)."""
    text = text.strip()
    try:
        _decoder.raw_decode(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text) or exc.msg.startswith("Unterminated string"):
            return True
        rest = text[exc.pos :]  # a literal or a number cut short: "fal", "-", "1e"
        return any(word.startswith(rest) for word in ("true", "false", "null")) or bool(
            _CUT_NUMBER.fullmatch(rest)
        )
    return False


_CUT_NUMBER = re.compile(r"-?[0-9]*\.?[0-9]*([eE][-+]?[0-9]*)?")


# -- the tree ------------------------------------------------------------------------


@dataclass
class _Node:
    key: str
    parent: str | None
    role: str
    timestamp: str
    record: Record
    line: int | None
    order: int
    id: str = ""


class EventTree:
    """Foreign entries as an event tree, keyed by the source's own ids.

    Keys are the foreign ids (or line numbers); the event id of a key is
    :func:`derive_id` of the tree's ``namespace`` and the key. Records may be
    replaced until :meth:`finish` (an importer that learns a compaction's summary
    from a later line sets it then).
    """

    def __init__(self, namespace: str, report: ImportReport) -> None:
        self.namespace = namespace
        self.report = report
        self.nodes: dict[str, _Node] = {}
        self.aliases: dict[str, str | None] = {}

    def __contains__(self, key: str) -> bool:
        return key in self.nodes or key in self.aliases

    def add(
        self,
        key: str,
        parent: str | None,
        role: str,
        timestamp: str,
        record: Record,
        *,
        line: int | None = None,
    ) -> str | None:
        """Add an event for entry ``key`` after entry ``parent`` (None: a root).

        Returns its id; a key seen before is reported and ignored (None).
        """
        if key in self.nodes or key in self.aliases:
            self.report.warn(line, f"duplicate entry id {key!r}: the first one is kept")
            return None
        node = _Node(key, parent, role, timestamp, record, line, len(self.nodes))
        node.id = derive_id(self.namespace, key, timestamp)
        self.nodes[key] = node
        return node.id

    def alias(self, key: str, target: str | None) -> None:
        """Make entry ``key`` (which becomes no event) stand for entry ``target``:
        whatever names ``key`` as its parent hangs from ``target`` (None: a root)."""
        if key not in self.nodes and key not in self.aliases:
            self.aliases[key] = target

    def parent(self, key: str) -> str | None:
        """The parent key ``key`` was added (or re-parented) under."""
        return self.nodes[key].parent

    def reparent(self, key: str, parent: str | None) -> None:
        """Hang the event of ``key`` from ``parent`` instead (before :meth:`finish`)."""
        self.nodes[key].parent = parent

    def drop(self, key: str) -> None:
        """Remove the event of ``key``: it becomes an alias of its parent."""
        node = self.nodes.pop(key)
        self.aliases[key] = node.parent

    def order(self, key: str) -> int:
        """The position ``key`` was added at (file order)."""
        return self.nodes[key].order

    def record(self, key: str) -> Record:
        """The record stored for ``key``."""
        return self.nodes[key].record

    def set_record(self, key: str, record: Record) -> None:
        """Replace the record of ``key`` (before :meth:`finish`)."""
        self.nodes[key].record = record

    def resolve(self, key: str | None) -> str | None:
        """The key of the event ``key`` stands for, following aliases (None: none)."""
        seen: set[str] = set()
        while key is not None and key not in self.nodes:
            if key in seen or key not in self.aliases:
                return None
            seen.add(key)
            key = self.aliases[key]
        return key

    def id_of(self, key: str | None) -> str | None:
        """The event id ``key`` stands for (None: it stands for none)."""
        resolved = self.resolve(key)
        return None if resolved is None else self.nodes[resolved].id

    def _parents(self, dangling: str) -> dict[str, str | None]:
        """Each node's resolved parent key; dangling parents and cycles are resolved."""
        parents: dict[str, str | None] = {}
        previous: str | None = None
        for node in self.nodes.values():
            parent = self.resolve(node.parent)
            if node.parent is not None and parent is None and node.parent not in self.aliases:
                if dangling == "previous" and previous is not None:
                    parent = previous
                    why = "attached to the entry before it"
                else:
                    why = "imported as a root"
                self.report.warn(node.line, f"parent {node.parent!r} is not in the file: {why}")
            parents[node.key] = parent
            previous = node.key
        done: set[str] = set()  # known to lead to a root
        for key in parents:  # break cycles (a foreign file can hold anything); linear
            path: set[str] = set()
            walk: str | None = key
            while walk is not None and walk not in done and walk not in path:
                path.add(walk)
                walk = parents[walk]
            if walk is not None and walk in path:
                line = self.nodes[walk].line
                self.report.warn(line, f"entry {walk!r} is its own ancestor: imported as a root")
                parents[walk] = None
            done |= path
        return parents

    def finish(
        self, head: str | None = None, *, dangling: Literal["root", "previous"] = "root"
    ) -> tuple[list[EventSpec], str | None]:
        """The events in an order the store accepts, and the HEAD event's id.

        An entry whose parent is in neither the tree nor its aliases is reported
        and becomes a root, or with ``dangling="previous"`` hangs from the entry
        added just before it (for formats whose files lose lines but keep order).

        Every parent comes before its children; siblings keep file order, except
        that the branch leading to ``head`` (default: the last entry in file order)
        comes last, so the store's HEAD (the last event written) is the tool's own
        current leaf. A head with later entries below it cannot be HEAD: the last
        of them is, with a warning.
        """
        if not self.nodes:
            return [], None
        parents = self._parents(dangling)
        children: dict[str | None, list[str]] = {}
        for key in self.nodes:  # file order
            children.setdefault(parents[key], []).append(key)
        head_key = self.resolve(head) if head is not None else None
        if head is not None and head_key is None:
            self.report.warn(None, f"head {head!r} is not in the file: the last entry is HEAD")
        if head_key is None:
            head_key = next(reversed(self.nodes))
        on_path: set[str] = set()
        walk: str | None = head_key
        while walk is not None:
            on_path.add(walk)
            walk = parents[walk]
        order: list[str] = []
        stack = list(reversed(_path_last(children.get(None, []), on_path)))
        while stack:
            key = stack.pop()
            order.append(key)
            stack.extend(reversed(_path_last(children.get(key, []), on_path)))
        if order[-1] != head_key:
            self.report.warn(
                self.nodes[head_key].line,
                f"the head entry {head_key!r} has later entries: the last of them is HEAD",
            )
        specs: list[EventSpec] = []
        for key in order:
            node = self.nodes[key]
            parent = parents[key]
            parent_id = NIL_ID if parent is None else self.nodes[parent].id
            specs.append((node.id, parent_id, None, node.role, node.timestamp, node.record))
        return specs, specs[-1][0]


def _path_last(keys: list[str], on_path: set[str]) -> list[str]:
    """``keys`` with the one on the HEAD path moved to the end."""
    return [k for k in keys if k not in on_path] + [k for k in keys if k in on_path]


def unanswered_calls(specs: Sequence[EventSpec]) -> list[str]:
    """Call ids of ``tool_call`` events no ``tool_result`` answers."""
    calls = [s[5].call_id for s in specs if isinstance(s[5], ToolCallRecord)]
    answered = {s[5].call_id for s in specs if isinstance(s[5], ToolResultRecord)}
    return [c for c in calls if c not in answered]


# -- foreign sessions and importers ---------------------------------------------------


@dataclass
class ForeignSession:
    """A session read from another tool, ready for :func:`commit`.

    ``session_id`` is derived (:func:`derive_id`) from the tool and the source
    session's id, so the same source always maps to the same infai session.
    ``events`` are in store order (parents first, HEAD last; ``branch_from`` is
    left None: :func:`commit` sets it). ``extra`` is the importer's notes
    (format version, which rule picked HEAD, a title...); the session's
    ``extra["import"]`` holds them with ``tool``, ``source_id``, ``paths`` and
    ``working_dir`` (the tool's directory, recorded for display: never the
    session's own).
    ``children`` are subagent sessions; each names the event of this session it
    hangs from in ``parent_event`` (None: linked to the session only). A session
    whose parent lives in another file (a Codex thread naming its parent) is a
    top-level one that sets ``parent_session`` (the parent's derived id) and
    ``parent_event`` itself; the link is recorded as given, even before the
    parent is imported.
    """

    tool: str
    source_id: str
    session_id: str
    paths: list[str]
    created_at: str
    updated_at: str
    report: ImportReport
    name: str | None = None
    working_dir: str | None = None
    model: str | None = None
    events: list[EventSpec] = field(default_factory=list)
    head: str | None = None
    parent_event: str | None = None
    parent_session: str | None = None
    children: list[ForeignSession] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def walk(self) -> Iterator[ForeignSession]:
        """This session and every descendant, parents first."""
        yield self
        for child in self.children:
            yield from child.walk()


class Importer(Protocol):
    """What each tool's importer offers (see the module's prose)."""

    #: the name on the command line: ``infai import <tool>``
    tool: str

    def default_paths(self) -> list[Path]:
        """Where the tool keeps its sessions when the user names no path."""

    def find(self, path: Path) -> list[Path]:
        """The session files at ``path`` (a file, or a directory searched), sorted;
        raises :class:`InvalidInput` when ``path`` does not exist."""

    def load(self, path: Path) -> list[ForeignSession]:
        """The sessions in one file (usually one, with its subagents as children);
        raises :class:`InvalidInput` naming file and line when it cannot be read."""
