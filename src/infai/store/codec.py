"""The canonical encodings both backends share: JSON bytes, time stamps, ids, digests.

Model, in prose: an event means the same thing in a directory and in a
database, so the small rules that give it its bytes live here, once. JSON is
compact and deterministic (UTF-8, keys in insertion order); times are RFC 3339
in UTC with microseconds; ids are lower-case UUIDs (events use UUIDv7, so their
ids sort by creation); the root's parent is the nil UUID; a blob is named by the
SHA-256 of its bytes, written ``sha256:<hex>``. Nothing here touches a file or a
connection.
"""

from __future__ import annotations

import json
import re  # json imports it anyway

from .errors import InvalidInput

try:
    # What ``hashlib.sha256`` is when Python has OpenSSL, without ``hashlib`` itself,
    # which on import builds and probes a constructor for every algorithm it knows.
    from _hashlib import openssl_sha256 as _sha256
except ImportError:  # a Python built without OpenSSL
    from hashlib import sha256 as _sha256

#: the parent id of a root event
NIL_ID = "00000000-0000-0000-0000-000000000000"
#: how a blob digest starts
PREFIX = "sha256:"

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)", re.ASCII)
_ROLE_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_-")


def dumps(obj: object) -> bytes:
    """Compact, deterministic JSON (UTF-8, keys in insertion order)."""
    return _dumps(obj).encode()


def digest_of(data: bytes) -> str:
    """The name of a blob holding ``data``: ``sha256:<hex>``."""
    return PREFIX + _sha256(data).hexdigest()


def check_uuid(value: str, what: str = "id") -> str:
    """Return ``value`` lower-cased if it is a UUID; else raise naming ``what``."""
    lowered = value.strip().lower()
    if not _UUID_RE.match(lowered):
        raise InvalidInput(f"{what} {value!r} is not a UUID")
    return lowered


def check_timestamp(value: object, what: str = "timestamp") -> str:
    """``value`` if it is an RFC 3339 date-time (as events carry); else InvalidInput."""
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise InvalidInput(f"{what} {value!r:.60} is not an RFC 3339 date-time")
    return value


def check_role(role: str) -> str:
    """``role`` if it is 1-32 lower-case letters, digits, '_' or '-' (a letter first)."""
    if not role or len(role) > 32 or not set(role) <= _ROLE_CHARS or not role[0].isalpha():
        raise InvalidInput(f"role {role!r} must be 1-32 lower-case letters, digits, '_' or '-'")
    return role


def now_rfc3339(at: float | None = None) -> str:
    """The current time (or the POSIX time ``at``) as RFC 3339 in UTC with microseconds."""
    from datetime import UTC, datetime  # not needed (nor imported) by readers

    when = datetime.now(UTC) if at is None else datetime.fromtimestamp(at, UTC)
    return when.isoformat(timespec="microseconds").replace("+00:00", "Z")


def new_event_id() -> str:
    """A fresh UUIDv7 (time-ordered) id."""
    import uuid_utils

    return str(uuid_utils.uuid7())
