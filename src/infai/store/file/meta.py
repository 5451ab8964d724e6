"""Reading a session's metadata files: ``session.json`` and the time HEAD names.

Model, in prose: ``session.json`` is the session's metadata, checked field by
field when read (a newer format is told apart from damage); ``HEAD`` names the
newest event, whose UUIDv7 id carries the time of the last append, which a
listing shows because ``session.json`` is not rewritten on every append. Both
the store and its listing index (:mod:`.listing`) read them through here.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..codec import now_rfc3339
from ..errors import CorruptionError, InvalidInput, UnsupportedFormat
from ..info import FORMAT_VERSION, SessionInfo
from .format import decode_head


def last_append(head_file: Path) -> str:
    """When HEAD's event was made, from its UUIDv7 id ("" if unknown: a hint only)."""
    try:
        head = decode_head(head_file.read_bytes())
    except OSError:
        return ""
    return "" if head is None else id_time(head.id)


def id_time(event_id: str) -> str:
    """The time in a UUIDv7 event id, RFC 3339 ("" for another kind of id)."""
    if len(event_id) != 36 or event_id[14] != "7":
        return ""
    try:
        millis = int(event_id[:8] + event_id[9:13], 16)
    except ValueError:
        return ""
    return now_rfc3339(millis / 1000)


def decode_info(data: bytes, where: str) -> SessionInfo:
    """Parse a session.json read from disk: newer formats and damage are told apart."""
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise CorruptionError(where, 0, f"malformed JSON: {exc}") from None
    version = obj.get("format") if isinstance(obj, dict) else None
    if type(version) is int and version > FORMAT_VERSION:
        raise UnsupportedFormat(
            f"{where}: store format {version}; this infai understands up to "
            f"{FORMAT_VERSION}: upgrade infai"
        )
    try:
        return SessionInfo.from_obj(obj, where)
    except InvalidInput as exc:
        raise CorruptionError(where, 0, str(exc).removeprefix(f"{where}: ")) from None
