"""Session listings for people: when in words, grouped by directory, this one first.

Model, in prose: a person looking for a session to resume remembers what it
was about and roughly when, and is nearly always looking for one of the
directory they are in. So a listing shows each session's title (its name,
else its first prompt), its last activity in local time relative to now
("3 min ago", "yesterday 14:03"), its event count, and groups the sessions by
working directory: the current directory's group first, then the others by
their most recent activity; within a group, most recent first. A session
imported from another tool names no working directory (the tool's is not
trusted: it would decide where a checkout writes) but is grouped under the
directory the tool recorded (:func:`shown_dir`), for display only. Sessions with
no directory at all come last. The store answers the rows cheaply
(:meth:`infai.store.SessionStore.list_summaries`); this module only arranges
and words them, the same for the command line and (if it wants) the TUI.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, tzinfo

from infai.store import SessionInfo, SessionSummary

#: the group of sessions that name no working directory
NO_DIRECTORY = ""


def relative_time(stamp: str, now: datetime, tz: tzinfo | None = None) -> str:
    """``stamp`` (RFC 3339, UTC) as a person says it, in local time (``tz``: the
    local zone if None; ``now`` must be timezone-aware): "just now", "3 min ago",
    "5 h ago", "yesterday 14:03", "Mon 14:03" within a week, else the date."""
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp or "-"
    if when.tzinfo is None:
        return stamp
    seconds = (now - when).total_seconds()
    local, today = when.astimezone(tz), now.astimezone(tz)
    if seconds < 60:
        return "just now"  # a clock a little ahead is "now" too
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 6 * 3600 or local.date() == today.date():
        return f"{int(seconds // 3600)} h ago"
    if local.date() == today.date() - timedelta(days=1):
        return f"yesterday {local:%H:%M}"
    if seconds < 6 * 86400:
        return f"{local:%a %H:%M}"
    return f"{local:%Y-%m-%d}"


def shown_dir(info: SessionInfo) -> str:
    """The directory a listing groups ``info`` under: its working directory, else,
    for a session imported from another tool, the tool's directory as its import
    recorded it (``extra["import"]["working_dir"]``), else :data:`NO_DIRECTORY`.

    Display, never trust: the recorded directory came from the imported file and
    is never where the session works, its files are restored or its tools run.
    """
    if info.working_dir:
        return info.working_dir
    mark = info.extra.get("import")
    recorded = mark.get("working_dir") if isinstance(mark, dict) else None
    return recorded if isinstance(recorded, str) and recorded else NO_DIRECTORY


def by_directory(
    summaries: list[SessionSummary], current: str
) -> list[tuple[str, list[SessionSummary]]]:
    """The sessions grouped by directory (:func:`shown_dir`; :data:`NO_DIRECTORY` for none):
    ``current``'s group first, then by most recent activity, the directory-less last.
    ``summaries`` come most recently active first, and keep that order in a group."""
    groups: dict[str, list[SessionSummary]] = {}
    for summary in summaries:
        groups.setdefault(shown_dir(summary.info), []).append(summary)

    order = sorted(groups, key=lambda k: max(s.info.updated_at for s in groups[k]), reverse=True)
    order.sort(key=lambda k: 0 if k == current else 2 if k == NO_DIRECTORY else 1)  # stable
    return [(key, groups[key]) for key in order]


def here() -> str:
    """The current directory as working directories are stored (absolute, resolved)."""
    return os.path.realpath(os.getcwd())


__all__ = ["NO_DIRECTORY", "by_directory", "here", "relative_time", "shown_dir"]
