"""Reading OpenCode's sessions from wherever they are kept, into one neutral shape.

Model, in prose: OpenCode keeps a session as three kinds of JSON object —
the session's info, each message's info, and each message's parts — and has
stored them in three ways. The *JSON era* writes one pretty-printed file per
object under ``<data>/storage/``: ``session/<projectID>/<sessionID>.json``,
``message/<sessionID>/<messageID>.json`` and ``part/<messageID>/<partID>.json``.
The *SQLite era* keeps the same objects in ``<data>/opencode.db``, tables
``session``, ``message`` and ``part``, the JSON in a ``data`` column without
the ids the row's columns already hold. And OpenCode's server streams the same
objects as events (``message.part.updated`` and friends), which is what the
corpus holds: a *capture*, where a part appears once per update and the last
version is the one that counts. Each reader here returns the same
:class:`RawSession` objects (info, messages and parts sorted by id, which
sorts them by creation), so one converter turns all three into events.

A file or row that is not JSON refuses the session (it would be imported
half); odd but readable content is left for the converter to report.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infai.store.errors import InvalidInput

from .base import ImportReport, read_json_lines


@dataclass
class RawSession:
    """One OpenCode session as stored: info, message infos and parts, by id."""

    id: str
    info: dict[str, Any] = field(default_factory=dict)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    parts: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # by message

    @property
    def parent_id(self) -> str | None:
        """The session this one is a child of (set by OpenCode's ``task`` tool)."""
        parent = self.info.get("parentID")
        return parent if isinstance(parent, str) and parent else None

    def ordered(self) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """Messages oldest first, each with its parts oldest first (ids sort by time)."""
        ids = sorted(set(self.messages) | set(self.parts))
        return [
            (self.messages.get(mid, {}), [p for _, p in sorted(self.parts.get(mid, {}).items())])
            for mid in ids
        ]


def _load_json(path: Path) -> dict[str, Any]:
    """One storage file's object; :class:`InvalidInput` naming file and offset if not."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot be read: {exc.strerror}") from None
    try:
        value = json.loads(data)
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path}: byte offset {exc.start}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        short = exc.pos >= len(data.rstrip()) or exc.msg.startswith("Unterminated string")
        cut = " (the file is cut short)" if short else ""
        raise InvalidInput(f"{path}: byte offset {exc.pos}: not JSON: {exc.msg}{cut}") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{path}: a JSON {type(value).__name__}, not an object")
    return value


# -- the JSON era: storage/ -----------------------------------------------------------


def storage_root(path: Path) -> Path | None:
    """The ``storage`` directory at or under ``path`` (OpenCode's data dir works too)."""
    for candidate in (path, path / "storage"):
        if (candidate / "session").is_dir():
            return candidate
    return None


def layout_sessions(root: Path) -> dict[str, Path]:
    """Every session file under ``root/session``, by session id (the file's name)."""
    return {p.stem: p for p in sorted((root / "session").glob("*/*.json")) if p.is_file()}


def _id(obj: dict[str, Any], file: Path) -> str:
    """An object's own id, else its file's name (the two agree in OpenCode's files)."""
    value = obj.get("id")
    return value if isinstance(value, str) and value else file.stem


def read_layout_session(root: Path, session_file: Path, report: ImportReport) -> RawSession:
    """A session's info, messages and parts from the storage tree."""
    info = _load_json(session_file)
    sid = _id(info, session_file)
    if sid != session_file.stem:
        report.warn(None, f"{session_file}: holds session {sid!r}, not {session_file.stem!r}")
    raw = RawSession(sid, info)
    for message_file in sorted((root / "message" / sid).glob("*.json")):
        message = _load_json(message_file)
        mid = _id(message, message_file)
        if message.get("sessionID") not in (None, sid):
            report.warn(None, f"{message_file}: names session {message.get('sessionID')!r}")
        if mid in raw.messages:
            report.warn(None, f"{message_file}: duplicate message id {mid!r}: the first is kept")
            continue
        raw.messages[mid] = message
        for part_file in sorted((root / "part" / mid).glob("*.json")):
            part = _load_json(part_file)
            pid = _id(part, part_file)
            if part.get("messageID") not in (None, mid):
                report.warn(None, f"{part_file}: names message {part.get('messageID')!r}")
            raw.parts.setdefault(mid, {})[pid] = part
    return raw


# -- a capture of the server's events ---------------------------------------------------


def read_capture(path: Path, report: ImportReport) -> dict[str, RawSession]:
    """Sessions rebuilt from captured server events (the last version of each object wins)."""
    sessions: dict[str, RawSession] = {}

    def session(sid: str) -> RawSession:
        return sessions.setdefault(sid, RawSession(sid))

    for line in read_json_lines(path, report):
        event = line.value
        props = event.get("properties") if isinstance(event, dict) else None
        kind = event.get("type") if isinstance(event, dict) else None
        if not isinstance(props, dict):
            report.warn(line.number, "not an OpenCode event (no properties): skipped")
            continue
        if kind == "message.part.updated" and isinstance(props.get("part"), dict):
            part = props["part"]
            sid, mid, pid = part.get("sessionID"), part.get("messageID"), part.get("id")
            if not all(isinstance(x, str) and x for x in (sid, mid, pid)):
                report.warn(line.number, "a part without its ids: skipped")
                continue
            session(sid).parts.setdefault(mid, {})[pid] = part
        elif kind == "message.updated" and isinstance(props.get("info"), dict):
            info = props["info"]
            if isinstance(info.get("sessionID"), str) and isinstance(info.get("id"), str):
                session(info["sessionID"]).messages[info["id"]] = info
        elif kind in ("session.updated", "session.created") and isinstance(props.get("info"), dict):
            info = props["info"]
            if isinstance(info.get("id"), str):
                session(info["id"]).info = info
        elif kind in ("message.removed", "message.part.removed"):
            _remove(sessions, props)
        else:
            report.skip(f"event/{kind}", "a server event that carries no session content")
    return sessions


def _remove(sessions: dict[str, RawSession], props: dict[str, Any]) -> None:
    raw = sessions.get(props.get("sessionID") or "")
    mid = props.get("messageID")
    if raw is None or not isinstance(mid, str):
        return
    if isinstance(props.get("partID"), str):
        raw.parts.get(mid, {}).pop(props["partID"], None)
    else:
        raw.messages.pop(mid, None)
        raw.parts.pop(mid, None)


# -- the SQLite era: opencode.db --------------------------------------------------------


def _json_column(value: object, where: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value) if isinstance(value, str | bytes) else value
    except ValueError as exc:
        raise InvalidInput(f"{where}: the data column is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise InvalidInput(f"{where}: the data column is not a JSON object")
    return parsed


def read_database(path: Path) -> dict[str, RawSession]:
    """Every session in an ``opencode.db``, read-only (the JSON the rows hold, ids restored)."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InvalidInput(f"{path}: cannot be opened as SQLite: {exc}") from None
    db.row_factory = sqlite3.Row
    try:
        return _read_rows(db, path)
    except sqlite3.Error as exc:
        raise InvalidInput(f"{path}: not an OpenCode database: {exc}") from None
    finally:
        db.close()


def _read_rows(db: sqlite3.Connection, path: Path) -> dict[str, RawSession]:
    sessions: dict[str, RawSession] = {}
    for row in db.execute("SELECT * FROM session ORDER BY id"):
        cols = dict(row)
        info: dict[str, Any] = {
            "id": cols["id"],
            "title": cols.get("title"),
            "directory": cols.get("directory"),
            "parentID": cols.get("parent_id"),
            "projectID": cols.get("project_id"),
            "version": cols.get("version"),
            "time": {"created": cols.get("time_created"), "updated": cols.get("time_updated")},
        }
        if cols.get("revert"):
            info["revert"] = _json_column(cols["revert"], f"{path}: session {cols['id']}")
        sessions[cols["id"]] = RawSession(cols["id"], info)
    for row in db.execute("SELECT id, session_id, data FROM message ORDER BY id"):
        raw = sessions.get(row["session_id"])
        data = _json_column(row["data"], f"{path}: message {row['id']}")
        if raw is not None:
            raw.messages[row["id"]] = {**data, "id": row["id"], "sessionID": row["session_id"]}
    for row in db.execute("SELECT id, message_id, session_id, data FROM part ORDER BY id"):
        raw = sessions.get(row["session_id"])
        data = _json_column(row["data"], f"{path}: part {row['id']}")
        if raw is not None:
            part = {**data, "id": row["id"], "messageID": row["message_id"]}
            raw.parts.setdefault(row["message_id"], {})[row["id"]] = {
                **part,
                "sessionID": row["session_id"],
            }
    return sessions
