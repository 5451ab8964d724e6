"""Export a session as one self-contained JSONL file, and import it back.

The first line is a header ``{"infai_export": 1, "session": {...session.json}}``;
each following line is one event in append order with its record inline (blobs
resolved and verified), so the file needs nothing else to be read or imported.
Import checks the whole file before it creates anything (ids are UUIDs and
unique, every parent appears earlier, every record matches its kind), then
writes the session with its id, event ids, parents, branch points and
timestamps preserved; the last event becomes HEAD, as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Any

import msgspec

from .errors import InvalidInput, SessionExists
from .format import NIL_ID
from .layout import check_uuid
from .records import Record, record_from_obj
from .store import SessionInfo, Store

EXPORT_VERSION = 1
_encoder = msgspec.json.Encoder()


class ExportedEvent(msgspec.Struct, kw_only=True):
    id: str
    parent_id: str
    branch_from: str | None
    kind: str
    role: str
    timestamp: str
    record: dict[str, Any]


class ExportHeader(msgspec.Struct, kw_only=True):
    infai_export: int
    session: SessionInfo


def export_lines(store: Store, session_id: str) -> Iterator[bytes]:
    """The export file's lines, header first (reads every event and blob)."""
    info = store.info(session_id)
    yield _encoder.encode(ExportHeader(infai_export=EXPORT_VERSION, session=info)) + b"\n"
    with store.open_reader(session_id) as reader:
        for entry in reader.entries():
            event = reader.event(entry.id, resolve=True)
            assert event.record is not None
            yield (
                _encoder.encode(
                    {
                        "id": event.id,
                        "parent_id": event.parent_id,
                        "branch_from": event.branch_from,
                        "kind": event.kind,
                        "role": event.role,
                        "timestamp": event.timestamp,
                        "record": event.record,
                    }
                )
                + b"\n"
            )


def _parse(
    lines: Iterable[bytes], name: str
) -> tuple[SessionInfo, list[tuple[ExportedEvent, Record]]]:
    header_decoder = msgspec.json.Decoder(ExportHeader)
    event_decoder = msgspec.json.Decoder(ExportedEvent)
    it = iter(lines)
    first = next(it, b"")
    try:
        header = header_decoder.decode(first)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"{name}: line 1: not an infai export header: {exc}") from None
    if header.infai_export != EXPORT_VERSION:
        raise InvalidInput(f"{name}: line 1: unsupported export version {header.infai_export}")
    check_uuid(header.session.id, f"{name}: line 1: session id")
    seen: set[str] = set()
    events: list[tuple[ExportedEvent, Record]] = []
    for number, raw in enumerate(it, start=2):
        if not raw.strip():
            continue
        where = f"{name}: line {number}"
        try:
            ev = event_decoder.decode(raw)
        except msgspec.DecodeError as exc:
            raise InvalidInput(f"{where}: {exc}") from None
        ev.id = check_uuid(ev.id, f"{where}: id")
        ev.parent_id = check_uuid(ev.parent_id, f"{where}: parent_id")
        if ev.id in seen:
            raise InvalidInput(f"{where}: duplicate event id {ev.id}")
        if ev.parent_id != NIL_ID and ev.parent_id not in seen:
            raise InvalidInput(f"{where}: parent {ev.parent_id} does not appear earlier")
        if ev.branch_from is not None and ev.branch_from != ev.parent_id:
            raise InvalidInput(f"{where}: branch_from must equal parent_id")
        try:
            record = record_from_obj(ev.kind, ev.record)
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc}") from None
        seen.add(ev.id)
        events.append((ev, record))
    return header.session, events


def import_session(store: Store, source: IO[bytes], name: str = "<stdin>") -> SessionInfo:
    """Create a session from an export file; all-or-nothing, ids preserved."""
    info, events = _parse(source, name)
    try:
        store.paths(info.id)
    except KeyError:
        pass
    else:
        raise SessionExists(f"session {info.id} already exists; remove it first")
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
                writer.import_batch(
                    [
                        (ev.id, ev.parent_id, ev.branch_from, ev.role, ev.timestamp, record)
                        for ev, record in events[start : start + step]
                    ]
                )
    except BaseException:
        store.remove_session(created.id)
        raise
    return store.info(created.id)
