"""The "allow always" rules a session keeps: in its metadata's ``extra.allowed``,
as ``tool pattern`` texts, applied again whenever the session is opened (by a
session and by a subagent's child session alike)."""

from __future__ import annotations

from typing import Any

from infai.store import InvalidInput, SessionInfo, SessionStore
from infai.tools import Rule

#: the key in a session's ``extra`` metadata that keeps its "allow always" rules
KEPT_RULES = "allowed"


def kept_rules(info: SessionInfo) -> list[Rule]:
    """The allow rules kept with a session; a damaged entry is an error naming it."""
    texts: Any = info.extra.get(KEPT_RULES, [])
    where = f"session {info.id} metadata, extra.{KEPT_RULES}"
    if not isinstance(texts, list) or not all(isinstance(t, str) and t.strip() for t in texts):
        raise InvalidInput(f"{where}: expected a list of 'tool pattern' texts")
    return [Rule.parse("allow", text) for text in texts]


def keep_rules(store: SessionStore, session_id: str, rules: list[Rule]) -> None:
    """Add ``rules`` to those kept with ``session_id`` (each once)."""
    info = store.info(session_id)
    kept = [f"{rule.tool} {rule.pattern}" for rule in kept_rules(info)]
    kept += [text for rule in rules if (text := f"{rule.tool} {rule.pattern}") not in kept]
    store.update_info(session_id, extra={**info.extra, KEPT_RULES: kept})


__all__ = ["KEPT_RULES", "keep_rules", "kept_rules"]
