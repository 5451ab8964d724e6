"""Export a session as one self-contained JSONL file, and import it back.

The first line is a header ``{"infai_export": 1, "session": {...session.json}}``;
each following line is one event in append order with its record inline (blobs
resolved and verified), so the file needs nothing else to be read or imported.
Import checks the whole file before it creates anything (ids are UUIDs and
unique, every parent appears earlier, every record matches its kind), then
writes the session with its id, event ids, parents, branch points and
timestamps preserved; the last event becomes HEAD, as it was.

Version 2 (written only when the session names store-wide objects: snapshot or
restore events, or a ``tool_manifest`` in some record's metadata, see
:mod:`.gc`) adds, after the events, one line per object those events reach:
``{"object": "sha256:<hex>", "data": "<base64>"}`` (each tree walked, every
file content and link target, each object once, sorted by digest). Import
checks every object hashes to its name, every tree decodes, and every object an
event reaches is in the file (and no other), then puts them in one batch before
it creates the session, so an imported snapshot is never missing its files.
A session that names no object is still written as version 1, which older
infai reads.

An export file comes from outside (a colleague, a bug report, a download), so
by default its metadata is not trusted with what only the user may decide
(:func:`untrusted_metadata`): the "allow always" rules a session keeps
(``extra.allowed``) are dropped, since they would let tools run unasked the
moment the session is continued, and a ``created_at`` or ``updated_at`` in the
future is set to now, since the most recently active session is the one
``--continue`` picks and a future stamp would keep an imported session on top
for ever. The session's ``working_dir`` is dropped: it says where a checkout
of its files writes and where its tools run, which the file must not choose
(the session then works in the directory it is continued from; the file's
is kept as ``extra["import"]["working_dir"]``, as the importers of other
tools keep theirs, only for ``session ls`` to group it by). An event id
that is a UUIDv7 stamped more than :data:`SKEW` in the future is refused for
the same reason as a future stamp (ids are kept, so it cannot be changed).
Each change is reported. ``store copy`` between the user's own stores passes
``trusted=True`` and keeps everything.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from .codec import NIL_ID, check_role, check_timestamp, check_uuid, digest_of, dumps, now_rfc3339
from .contract import SessionStore
from .errors import InvalidInput, SessionExists, StoreError
from .events import EventSpec
from .gc import record_roots, session_roots
from .info import SessionInfo
from .objects import check_digest
from .records import encode_record, record_from_obj
from .trees import decode_tree, reachable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import IO

EXPORT_VERSION = 2
#: the version written for a session that names no object (older infai reads it)
PLAIN_VERSION = 1
#: keys of ``extra`` an import from outside drops: ``allowed`` holds the session's
#: "allow always" rules (infai.agent.session.KEPT_RULES; the store cannot import it)
UNTRUSTED_EXTRA = ("allowed",)
#: how far in the future a UUIDv7 event id may be stamped (another machine's clock)
SKEW = timedelta(hours=1)
_EVENT_FIELDS = ("id", "parent_id", "branch_from", "kind", "role", "timestamp", "record")


def export_lines(store: SessionStore, session_id: str) -> Iterator[bytes]:
    """The export file's lines, header first (reads every event and blob, and every
    object the events reach; one that cannot be read stops the export)."""
    info = store.info(session_id)
    with store.open_reader(session_id) as reader:
        trees, leaves = session_roots(reader)  # a first pass: the header says the version
        try:
            carried = reachable(store.objects, sorted(trees)) | set(leaves)
        except StoreError as exc:
            raise StoreError(
                f"session {info.id}: cannot export the files of its snapshots: {exc}"
                " (infai session fsck names the event)"
            ) from None
        version = EXPORT_VERSION if carried else PLAIN_VERSION
        yield dumps({"infai_export": version, "session": info.to_obj()}) + b"\n"
        for entry in reader.entries():
            event = reader.event(entry.id, resolve=True)
            assert event.record is not None
            obj = event.to_obj()
            del obj["digest"]  # the record travels inline
            yield (dumps(obj) + b"\n")
    for digest in sorted(carried):
        data = base64.b64encode(store.objects.get(digest)).decode("ascii")
        yield dumps({"object": digest, "data": data}) + b"\n"


def _parse_object(raw: bytes, where: str, objects: dict[str, bytes]) -> None:
    """Check one object line and add it to ``objects``."""
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"{where}: malformed JSON: {exc}") from None
    if not isinstance(obj, dict) or set(obj) != {"object", "data"}:
        raise InvalidInput(f"{where}: an object line holds exactly 'object' and 'data'")
    name, text = obj["object"], obj["data"]
    if not isinstance(name, str) or not isinstance(text, str):
        raise InvalidInput(f"{where}: 'object' and 'data' must be strings")
    check_digest(name)
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{where}: object {name}: data is not base64") from None
    if digest_of(data) != name:
        raise InvalidInput(f"{where}: object {name}: its data does not hash to its name")
    if name in objects:
        raise InvalidInput(f"{where}: object {name} appears twice")
    objects[name] = data


def _check_objects(events: list[EventSpec], objects: dict[str, bytes], name: str) -> None:
    """Every object an event reaches is in the file, every tree decodes, and the
    file carries nothing else."""
    reached: set[str] = set()
    for number, spec in enumerate(events, start=2):
        tree, leaf = record_roots(spec[5])
        for digest in (tree, leaf):
            if digest is not None and digest not in objects:
                raise InvalidInput(f"{name}: line {number}: object {digest} is not in the file")
        if leaf is not None:
            reached.add(leaf)
        pending = [tree] if tree is not None else []
        while pending:
            digest = pending.pop()
            if digest in reached:
                continue
            reached.add(digest)
            for entry in decode_tree(objects[digest], f"{name}: tree {digest}"):
                if entry.digest not in objects:
                    raise InvalidInput(
                        f"{name}: tree {digest} names {entry.digest}, which is not in the file"
                    )
                if entry.type == "dir":
                    pending.append(entry.digest)
                else:
                    reached.add(entry.digest)
    extra = sorted(set(objects) - reached)
    if extra:
        raise InvalidInput(f"{name}: object {extra[0]} is reached by no event")


def _parse_event(raw: bytes, where: str, seen: set[str]) -> EventSpec:
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"{where}: malformed JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise InvalidInput(f"{where}: expected an object")
    missing = [f for f in _EVENT_FIELDS if f not in obj]
    if missing:
        raise InvalidInput(f"{where}: missing field {missing[0]!r}")
    for name in ("id", "parent_id", "kind", "role", "timestamp"):
        if not isinstance(obj[name], str):
            raise InvalidInput(f"{where}: field {name!r} must be a string")
    event_id = check_uuid(obj["id"], f"{where}: id")
    parent_id = check_uuid(obj["parent_id"], f"{where}: parent_id")
    branch_from = obj["branch_from"]
    if event_id in seen:
        raise InvalidInput(f"{where}: duplicate event id {event_id}")
    if parent_id != NIL_ID and parent_id not in seen:
        raise InvalidInput(f"{where}: parent {parent_id} does not appear earlier")
    if branch_from is not None and branch_from != obj["parent_id"]:
        raise InvalidInput(f"{where}: branch_from must equal parent_id")
    try:
        record = record_from_obj(obj["kind"], obj["record"])
        check_role(obj["role"])
        check_timestamp(obj["timestamp"])
        encode_record(record)  # everything the writer would refuse, refused up front
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None
    seen.add(event_id)
    return event_id, parent_id, branch_from and parent_id, obj["role"], obj["timestamp"], record


def _parse(
    lines: Iterable[bytes], name: str
) -> tuple[SessionInfo, list[EventSpec], dict[str, bytes]]:
    it = iter(lines)
    first = next(it, b"")
    try:
        header = json.loads(first)
        version = header.get("infai_export")
        if version not in (PLAIN_VERSION, EXPORT_VERSION) or isinstance(version, bool):
            raise InvalidInput(
                f"{name}: line 1: unsupported export version {version!r}"
                f" (this infai reads {PLAIN_VERSION} and {EXPORT_VERSION})"
            )
        info = SessionInfo.from_obj(header.get("session"), f"{name}: line 1: session")
    except (ValueError, AttributeError) as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput(f"{name}: line 1: not an infai export header") from None
    check_uuid(info.id, f"{name}: line 1: session id")
    seen: set[str] = set()
    events: list[EventSpec] = []
    objects: dict[str, bytes] = {}
    for number, raw in enumerate(it, start=2):
        if not raw.strip():
            continue
        if raw.lstrip().startswith(b'{"object"'):
            if version == PLAIN_VERSION:
                raise InvalidInput(f"{name}: line {number}: a version 1 export holds no objects")
            _parse_object(raw, f"{name}: line {number}", objects)
        else:
            events.append(_parse_event(raw, f"{name}: line {number}", seen))
    _check_objects(events, objects, name)
    return info, events, objects


def _instant(stamp: str, where: str) -> datetime:
    """``stamp`` (RFC 3339) as an aware datetime; InvalidInput naming ``where``."""
    check_timestamp(stamp, where)
    head, _, rest = stamp.partition(".")
    if rest:  # fromisoformat takes at most microseconds: cut nanoseconds
        digits = len(rest) - len(rest.lstrip("0123456789"))
        stamp = f"{head}.{rest[: min(digits, 6)]}{rest[digits:]}"
    return datetime.fromisoformat(stamp.replace("Z", "+00:00").replace("z", "+00:00"))


def untrusted_metadata(info: SessionInfo, name: str) -> tuple[SessionInfo, list[str]]:
    """``info`` made safe to import from outside, and what was changed (one line each).

    Dropped: the kept "allow always" rules (:data:`UNTRUSTED_EXTRA`) and the
    working directory (a checkout of the session's files writes there, and its
    tools run there: a file naming ``~/.ssh`` must not choose that), recorded in
    ``extra["import"]["working_dir"]`` for display instead. Set to now:
    a ``created_at`` or ``updated_at`` in the future (a stamp that is not RFC 3339
    is refused: it would sort anywhere).
    """
    notes: list[str] = []
    now = datetime.now(UTC)
    changes: dict[str, object] = {}
    for field in ("created_at", "updated_at"):
        stamp = getattr(info, field)
        if _instant(stamp, f"{name}: line 1: session.{field}") > now:
            changes[field] = now_rfc3339(now.timestamp())
            notes.append(f"{field} {stamp} is in the future: set to now")
    extra = dict(info.extra)
    if info.working_dir is not None:
        # where a checkout writes files and tools run: the importer's choice (the
        # directory the session is continued from), never the file's; kept for
        # display only, as the importers of other tools keep theirs
        changes["working_dir"] = None
        extra["import"] = _recorded_dir(extra.get("import"), info.working_dir)
        notes.append(
            f"working_dir {info.working_dir!r} dropped: an imported session works in"
            " the directory it is continued from (recorded as extra.import.working_dir,"
            " for display)"
        )
    dropped = {k: v for k, v in extra.items() if k in UNTRUSTED_EXTRA}
    for key in dropped:
        del extra[key]
    if extra != info.extra:
        changes["extra"] = extra
    for key, value in dropped.items():
        shown = ", ".join(map(str, value)) if isinstance(value, list) else repr(value)
        notes.append(
            f"extra.{key} dropped: an imported session brings no permission rules "
            f"(it allowed always: {shown or 'nothing'})"
        )
    return (info.replace(**changes) if changes else info), notes


def _recorded_dir(mark: object, working_dir: str) -> dict[str, object]:
    """The import metadata (``extra["import"]``) with ``working_dir`` recorded in it,
    as an import from another tool records the tool's directory: shown by ``session
    ls`` (grouping), never trusted. A mark the file brings (the session was itself
    imported from a tool) keeps its other keys; one that is not an object is no
    import metadata infai wrote, and is replaced."""
    kept = dict(mark) if isinstance(mark, dict) else {}
    return {**kept, "working_dir": working_dir}


def _check_event_times(events: list[EventSpec], name: str) -> None:
    """Refuse an event id stamped (UUIDv7) beyond :data:`SKEW` in the future: the
    file store takes a session's last activity from its HEAD's id."""
    limit = (datetime.now(UTC) + SKEW).timestamp() * 1000
    for number, spec in enumerate(events, start=2):
        event_id = spec[0]
        if event_id[14] == "7" and int(event_id[:8] + event_id[9:13], 16) > limit:
            raise InvalidInput(
                f"{name}: line {number}: event id {event_id} is stamped in the future "
                "(a UUIDv7 time); an imported session cannot claim activity to come"
            )


def import_session(
    store: SessionStore,
    source: IO[bytes],
    name: str = "<stdin>",
    *,
    trusted: bool = False,
    report: Callable[[str], None] | None = None,
) -> SessionInfo:
    """Create a session from an export file; all-or-nothing, ids preserved.

    Unless ``trusted`` (a copy between the user's own stores), what an outside
    file may not decide is changed or refused (see the module docstring) and
    each change is passed to ``report`` as a sentence naming the file.
    """
    info, events, objects = _parse(source, name)
    notes: list[str] = []
    if not trusted:
        info, notes = untrusted_metadata(info, name)
        _check_event_times(events, name)
    if store.exists(info.id):
        raise SessionExists(f"session {info.id} already exists; remove it first")
    if objects:  # first, so no event ever names an object not stored yet
        with store.objects.batch() as batch:
            for data in objects.values():
                batch.put(data)
    created = store.create_session(
        session_id=info.id,
        name=info.name,
        working_dir=info.working_dir,
        model=info.model,
    )
    try:
        with store.open_writer(created.id) as writer:
            step = 1000
            for start in range(0, len(events), step):
                writer.import_batch(events[start : start + step])
        # Metadata as it was exported (timestamps, links to a parent session, extra);
        # the format is what this store made of the events (2 if they hold snapshots)
        store.restore_info(info.replace(format=store.info(created.id).format))
    except BaseException:
        store.remove_session(created.id)
        raise
    for note in notes:
        if report is not None:
            report(f"{name}: {note}")
    return store.info(created.id)
