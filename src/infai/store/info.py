"""Session metadata: what every backend keeps about a session besides its events.

Model, in prose: a session has an id (a UUIDv7), a format version, an
optional name, working directory and model, creation and update times, an
optional link to the session and event it was forked from, and an ``extra``
object for whatever the layers above want to keep. The file store writes it as
``session.json``; PostgreSQL keeps the same object in the session's row. Every
write checks it against what *either* backend can store and read back, so a
session moves between backends without loss.
"""

from __future__ import annotations

import json

from .codec import check_uuid, new_event_id, now_rfc3339
from .errors import InvalidInput

#: The newest session format this infai reads and writes (a newer one is refused).
#: Format 1: conversation events only. Format 2: the session may hold ``snapshot``
#: and ``restore`` events (kinds version 2), whose trees live in the store-wide
#: objects. A session is created as format 1 and becomes format 2 when its first
#: workspace event is appended, so sessions without snapshots stay readable by an
#: older infai, which refuses format 2 rather than misreading it. Format 3: the
#: session may hold ``gap`` events (kinds version 3, written by salvage), and
#: becomes format 3 the same way, before its first one. Format 4: the session
#: may hold ``hook`` events (kinds version 4: a user's hook command ran), and
#: becomes format 4 the same way, before its first one.
FORMAT_VERSION = 4
#: the format a new session is created with
BASE_FORMAT = 1
#: the format of a session holding workspace kinds (snapshot, restore)
WORKSPACE_FORMAT = 2
#: the format of a session holding a ``gap`` event
GAP_FORMAT = 3
#: the format of a session holding a ``hook`` event
HOOK_FORMAT = 4


def format_for(kinds: set[str] | frozenset[str]) -> int:
    """The session format events of ``kinds`` need (:data:`BASE_FORMAT` and up)."""
    if "hook" in kinds:
        return HOOK_FORMAT
    if "gap" in kinds:
        return GAP_FORMAT
    if "snapshot" in kinds or "restore" in kinds:
        return WORKSPACE_FORMAT
    return BASE_FORMAT


TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` costs a resume memory; annotations are strings here
    from typing import Any, TypeAlias

    #: a value :meth:`SessionStore.update_info` may set: text, or the ``extra`` object
    Changed: TypeAlias = str | dict[str, Any] | None

#: the fields :meth:`SessionStore.update_info` may change
UPDATABLE = frozenset({"name", "working_dir", "model", "extra"})


def check_changes(changes: dict[str, Changed]) -> None:
    """Refuse an update of a field that is not :data:`UPDATABLE`."""
    if not set(changes) <= UPDATABLE:
        raise InvalidInput(f"cannot change {sorted(set(changes) - UPDATABLE)}")


_INFO_FIELDS = (
    "id",
    "format",
    "name",
    "working_dir",
    "model",
    "created_at",
    "updated_at",
    "parent_session",
    "parent_event",
    "extra",
)


class SessionInfo:
    """The contents of ``session.json``."""

    __slots__ = _INFO_FIELDS

    def __init__(
        self,
        *,
        id: str,
        created_at: str,
        updated_at: str,
        format: int = BASE_FORMAT,
        name: str | None = None,
        working_dir: str | None = None,
        model: str | None = None,
        parent_session: str | None = None,
        parent_event: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.format = format
        self.name = name
        self.working_dir = working_dir
        self.model = model
        self.created_at = created_at
        self.updated_at = updated_at
        self.parent_session = parent_session
        self.parent_event = parent_event
        self.extra = extra or {}

    def to_obj(self) -> dict[str, Any]:
        """Every field as JSON-ready data (what session.json and the API hold)."""
        return {f: getattr(self, f) for f in _INFO_FIELDS}

    @classmethod
    def from_obj(cls, obj: object, where: str) -> SessionInfo:
        """Build from parsed JSON, checking every field's type (errors name it)."""
        if not isinstance(obj, dict):
            raise InvalidInput(f"{where}: expected an object")
        for key, value in obj.items():
            if key not in _INFO_FIELDS:
                raise InvalidInput(f"{where}: unknown field {key!r}")
            want = int if key == "format" else dict if key == "extra" else str
            required = key in ("id", "created_at", "updated_at", "format")
            if (not isinstance(value, want) or isinstance(value, bool)) and (
                required or value is not None
            ):
                raise InvalidInput(f"{where}: field {key!r} must be {want.__name__}")
            if isinstance(value, str):
                try:
                    value.encode()
                except UnicodeEncodeError:
                    raise InvalidInput(f"{where}: field {key!r} is not valid text") from None
        for key in ("id", "format", "created_at", "updated_at"):
            if key not in obj:
                raise InvalidInput(f"{where}: missing field {key!r}")
        return cls(**obj)

    def replace(self, **changes: Any) -> SessionInfo:
        """A copy with ``changes`` applied, unchecked (callers run :func:`check_info`)."""
        return SessionInfo(**{**self.to_obj(), **changes})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionInfo) and self.to_obj() == other.to_obj()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SessionInfo({self.to_obj()!r})"


class SessionSummary:
    """A session as a listing shows it: its metadata, the preview of its first user
    message (its title when it has no name) and how many events it holds.

    Both come from what each backend keeps for listings anyway (the file store's
    listing index, the database's session row and the first user event), so a
    listing of hundreds of sessions reads no event of theirs.
    """

    __slots__ = ("events", "first_prompt", "info")

    def __init__(self, info: SessionInfo, first_prompt: str | None, events: int) -> None:
        self.info = info
        #: the preview (at most 80 characters) of the first ``user`` message, if any
        self.first_prompt = first_prompt
        #: the number of events, every branch included
        self.events = events

    @property
    def title(self) -> str:
        """The session's name, else its first prompt, else ``""``."""
        return self.info.name or self.first_prompt or ""

    def to_obj(self) -> dict[str, Any]:
        """The metadata's fields, then ``title``, ``first_prompt`` and ``events``."""
        return {
            **self.info.to_obj(),
            "title": self.title,
            "first_prompt": self.first_prompt,
            "events": self.events,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionSummary) and self.to_obj() == other.to_obj()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SessionSummary({self.to_obj()!r})"


def _nul_in(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_nul_in(k) or _nul_in(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_nul_in(v) for v in value)
    return False


def check_info(info: SessionInfo) -> SessionInfo:
    """Refuse metadata that some backend could not store or read back (checked on
    every write, so a session moves between backends without loss)."""
    SessionInfo.from_obj(info.to_obj(), "session metadata")
    for key, value in info.to_obj().items():
        if _nul_in(value):
            raise InvalidInput(f"session metadata: field {key!r} contains a NUL character")
    try:
        json.dumps(info.extra, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"session metadata: field 'extra' is not plain JSON: {exc}") from None
    return info


def new_session_info(
    name: str | None,
    working_dir: str | None,
    model: str | None,
    parent_session: str | None,
    parent_event: str | None,
    session_id: str | None,
) -> SessionInfo:
    """The metadata of a session about to be created (any backend), checked."""
    if parent_event is not None:
        parent_event = check_uuid(parent_event, "parent event id")
    sid = check_uuid(session_id, "session id") if session_id else new_event_id()
    stamp = now_rfc3339()
    info = SessionInfo(
        id=sid,
        name=name,
        working_dir=working_dir,
        model=model,
        created_at=stamp,
        updated_at=stamp,
        parent_session=parent_session,
        parent_event=parent_event,
    )
    return check_info(info)
