"""The Codex CLI importer: rollout files become infai sessions, subagent threads
their children.

Model, in prose: Codex keeps one rollout file per thread under
``$CODEX_HOME/sessions`` (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``). A
rollout is linear, so each becomes a chain of events in file order, HEAD on the
last (Codex has no other notion of a current leaf), branched only where Codex
rolled turns back; :mod:`.codex_parse` reads it. A subagent's rollout names its
parent thread in ``session_meta`` (``parent_thread_id``, or
``source.subagent.thread_spawn``) and the parent's ``spawn_agent`` call
returned the child's thread id, so when both files are found together the child
is imported as a child session hanging from that call, as infai's own subagents
hang from their ``task`` call. A fork names the thread it was copied from
(``forked_from_id``) and is linked to that session, as a child of it, hanging
from where its copy of that thread's history ends when that rollout is found. Ids are
derived from the thread id and the line each event came from, so importing a
file again writes nothing and importing it after Codex appended to it adds only
what is new.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from infai.store.errors import InvalidInput
from infai.store.records import record_to_obj

from .base import (
    EventTree,
    ForeignSession,
    ImportReport,
    derive_id,
    read_json_lines,
    to_rfc3339,
)
from .codex_parse import Thread, parse_rollout

#: the session_meta fields kept in the session's import notes
_META_KEPT = (
    "cli_version",
    "originator",
    "source",
    "thread_source",
    "model_provider",
    "git",
    "agent_nickname",
    "agent_role",
    "memory_mode",
    "multi_agent_version",
)


def _peek(path: Path) -> tuple[str | None, str | None]:
    """(thread id, parent thread id) from a rollout's first record; Nones if unreadable."""
    try:
        first = next(iter(read_json_lines(path, ImportReport(str(path)))), None)
    except (InvalidInput, OSError):
        return None, None
    value = first.value if first is not None else None
    if not isinstance(value, dict):
        return None, None
    meta = value.get("payload") if value.get("type") == "session_meta" else value
    if not isinstance(meta, dict):
        return None, None
    thread = meta.get("id")
    parent = meta.get("parent_thread_id")
    source = meta.get("source")
    if parent is None and isinstance(source, dict):
        spawn = source.get("subagent")
        spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
        parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    return (
        thread if isinstance(thread, str) else None,
        parent if isinstance(parent, str) else None,
    )


class CodexImporter:
    """Imports Codex CLI rollouts (legacy and envelope formats)."""

    tool = "codex"

    def __init__(self) -> None:
        #: parent rollout -> its subagents' rollouts, learned by :meth:`find`
        self._children: dict[Path, list[Path]] = {}
        #: subagent rollout -> its parent's rollout (the inverse of the above)
        self._parent_file: dict[Path, Path] = {}
        #: rollouts whose directory :meth:`find` has grouped already
        self._grouped: set[Path] = set()

    def default_paths(self) -> list[Path]:
        """``$CODEX_HOME/sessions`` (``~/.codex/sessions`` by default), and the
        ``archived_sessions`` Codex moves archived threads to."""
        home = os.environ.get("CODEX_HOME")
        base = Path(home) if home else Path.home() / ".codex"
        return [base / "sessions", base / "archived_sessions"]

    def find(self, path: Path) -> list[Path]:
        """The rollouts at ``path`` (every ``*.jsonl`` below a directory; Codex names them
        ``rollout-*.jsonl``), subagent threads left out where their parent is found
        (they are imported with it); a named file is taken as it is."""
        if not path.exists():
            raise InvalidInput(f"{path}: no such file or directory")
        if path.is_file():
            return [path]
        return self._group(sorted(p for p in path.rglob("*.jsonl") if p.is_file()))

    def _group(self, files: list[Path]) -> list[Path]:
        """Files that are not the subagent of another file in ``files`` (the roots)."""
        peeked = {f: _peek(f) for f in files}
        by_thread = {thread: f for f, (thread, _) in peeked.items() if thread}
        roots = []
        for f in files:
            self._grouped.add(f)
            parent = by_thread.get(peeked[f][1] or "")
            if parent is not None and parent != f and not self._is_ancestor(f, parent, peeked):
                self._children.setdefault(parent, []).append(f)
                self._parent_file[f] = parent
            else:
                roots.append(f)
        return roots

    @staticmethod
    def _is_ancestor(
        f: Path, candidate: Path, peeked: dict[Path, tuple[str | None, str | None]]
    ) -> bool:
        """Whether ``f`` is already above ``candidate`` (a cycle of parent ids)."""
        by_thread = {thread: p for p, (thread, _) in peeked.items() if thread}
        seen: set[Path] = set()
        walk: Path | None = candidate
        while walk is not None and walk not in seen:
            if walk == f:
                return True
            seen.add(walk)
            walk = by_thread.get(peeked[walk][1] or "")
        return False

    def load(self, path: Path) -> list[ForeignSession]:
        """The thread in ``path``, with the subagent threads found beside it as children."""
        if path not in self._grouped and path.parent.is_dir():
            siblings = sorted(p for p in path.parent.glob("rollout-*.jsonl") if p.is_file())
            self._group([path, *(p for p in siblings if p != path)])
        foreign = self._load(path, set())
        parent = foreign.extra.get("parent_thread_id")
        if isinstance(parent, str):  # a subagent thread imported on its own
            foreign.parent_session = session_id_of(parent, None)
            parent_file = self._parent_file.get(path)
            if parent_file is not None:
                foreign.parent_event = _spawn_event(parent_file, foreign.source_id)
        elif isinstance(forked := foreign.extra.get("forked_from_id"), str):
            # a fork (``/fork``, or a thread started from another's history) is a child
            # of the thread it copied, hanging from where the copy ends when the source
            # rollout is found (the fork does not say which of its lines that was)
            foreign.parent_session = session_id_of(forked, None)
            foreign.parent_event = _fork_event(path, forked)
        return [foreign]

    def _load(self, path: Path, loading: set[Path]) -> ForeignSession:
        report = ImportReport(str(path))
        thread = parse_rollout(read_json_lines(path, report), report)
        if thread.thread_id is None:
            raise InvalidInput(f"{path}: no session_meta with a thread id: not a Codex rollout")
        foreign, tree = _session(path, thread, report)
        loading = loading | {path}
        for child_path in self._children.get(path, []):
            if child_path in loading:
                continue
            try:
                child = self._load(child_path, loading)
            except (InvalidInput, OSError) as exc:
                report.warn(None, f"subagent rollout {child_path} not imported: {exc}")
                continue
            call = thread.spawned.get(child.source_id)
            child.parent_event = tree.id_of(call) if call is not None else None
            if child.parent_event is None:
                report.warn(None, f"subagent {child.source_id}: no spawn_agent call names it")
            foreign.children.append(child)
        return foreign


def session_id_of(thread_id: str, created: str | None) -> str:
    """The infai session id of a Codex thread, derivable from the thread id alone
    when that is a UUIDv7 (every thread that can have subagents), so a subagent
    imported on its own names its parent's session before the parent is read."""
    try:
        parsed = uuid.UUID(thread_id)
    except ValueError:
        parsed = None
    if parsed is not None and parsed.version == 7:
        return derive_id("codex", thread_id, parsed.int >> 80)
    return derive_id("codex", thread_id, created)


def _spawn_event(parent_file: Path, child_thread: str) -> str | None:
    """The id of the ``spawn_agent`` call in ``parent_file`` that started ``child_thread``."""
    report = ImportReport(str(parent_file))
    try:
        thread = parse_rollout(read_json_lines(parent_file, report), report)
    except (InvalidInput, OSError):
        return None
    call = thread.spawned.get(child_thread)
    if thread.thread_id is None or call is None:
        return None
    _foreign, tree = _session(parent_file, thread, report)
    return tree.id_of(call)


def _fork_event(path: Path, source_thread: str) -> str | None:
    """The event of ``source_thread`` a fork at ``path`` was copied up to, if found.

    Codex names rollouts ``rollout-<time>-<thread id>.jsonl`` under dated
    directories, so the source is looked for by name under the sessions root
    (three levels up from a dated fork, else beside it). The fork begins with a
    copy of the source's history: the last of the source's events whose records
    (metadata aside: it names lines) match the fork's, in order, is where it hangs.
    """
    roots = [path.parents[3]] if len(path.parents) > 3 and path.parent.name.isdigit() else []
    pattern = f"rollout-*-{source_thread}.jsonl"
    found = next((p for root in [*roots, path.parent] for p in root.rglob(pattern)), None)
    if found is None:
        return None
    report = ImportReport(str(found))
    try:
        source = parse_rollout(read_json_lines(found, report), report)
        fork = parse_rollout(read_json_lines(path, ImportReport(str(path))), report)
    except (InvalidInput, OSError):
        return None
    if source.thread_id is None:
        return None

    def shape(item: Any) -> tuple[str, str, dict[str, Any]]:
        obj = record_to_obj(item.record)
        obj.pop("metadata", None)
        return item.record.kind, item.role, obj

    common = 0
    for mine, theirs in zip(fork.items, source.items, strict=False):
        if shape(mine) != shape(theirs):
            break
        common += 1
    if not common:
        return None
    _foreign, tree = _session(found, source, report)
    return tree.id_of(source.items[common - 1].key)


def _session(path: Path, thread: Thread, report: ImportReport) -> tuple[ForeignSession, EventTree]:
    """The thread as a :class:`ForeignSession` (a chain in file order, branched where
    Codex rolled turns back; HEAD the last entry) and its tree."""
    assert thread.thread_id is not None
    tree = EventTree(f"codex:{thread.thread_id}", report)
    for item in thread.items:
        tree.add(item.key, item.parent, item.role, item.timestamp, item.record, line=item.line)
    specs, head = tree.finish()
    report.count(specs)
    mtime = to_rfc3339(int(path.stat().st_mtime * 1000))
    assert mtime is not None
    created = thread.created_at or (specs[0][4] if specs else mtime)
    updated = max((s[4] for s in specs), default=created)
    extra: dict[str, Any] = {
        "format": "legacy" if thread.legacy else "envelope",
        "head": "the last line (Codex keeps no other current entry)",
    }
    extra.update({k: thread.meta[k] for k in _META_KEPT if thread.meta.get(k) is not None})
    if thread.parent_thread_id:
        extra["parent_thread_id"] = thread.parent_thread_id
    if thread.forked_from_id:
        extra["forked_from_id"] = thread.forked_from_id
    if thread.trailing:
        extra["after_last_event"] = thread.trailing
    foreign = ForeignSession(
        tool="codex",
        source_id=thread.thread_id,
        session_id=session_id_of(thread.thread_id, created),
        paths=[str(path)],
        created_at=created,
        updated_at=updated,
        report=report,
        name=thread.name,
        working_dir=thread.working_dir,
        model=thread.model,
        events=specs,
        head=head,
        extra=extra,
    )
    return foreign, tree
