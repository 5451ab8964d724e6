"""The OpenCode importer: sessions, their messages and parts become infai sessions.

Model, in prose: an OpenCode session is a list of messages ordered by id (no
tree inside it), each a list of parts (see :mod:`.opencode_storage` for where
they are read from). A user message becomes a user ``message`` event (its text
parts; files and agents named in it kept as metadata). An assistant message is
split at its ``step-start`` parts, one step per model request, and each step
becomes what infai writes for one response: an assistant ``message`` (text,
reasoning, model, the step's usage from ``step-finish``) followed by one
``tool_call`` per tool part and then a ``tool_result`` for each call that
finished (``completed`` or ``error``; a ``pending`` or ``running`` call stays
unanswered, as in the source). The last assistant message is left for a later
import while OpenCode is still writing it (no completion time): the results of
its running tools would otherwise have to go between events already written. An
assistant message marked ``summary`` is a compaction: it becomes a
``compaction`` event and the user message that asked for it (its ``compaction``
part) is kept as metadata. Patches, snapshots and part types infai has no kind
for ride along as metadata of their reply. A pending revert (``session.revert``)
puts HEAD before the reverted messages and parts, which stay on a branch beside
it (see :mod:`.opencode_revert`).

Child sessions (``parentID``, made by the ``task`` tool) are imported as child
sessions hanging from the ``task`` call that names them. Event keys are
OpenCode's own message and part ids, so a second import writes nothing and an
import after the session grew adds only what is new.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from infai.store.errors import InvalidInput
from infai.store.records import (
    CompactionRecord,
    MessageRecord,
    Record,
    ToolCallRecord,
    ToolResultRecord,
    Usage,
)

from .base import EventTree, ForeignSession, ImportReport, derive_id, label, to_rfc3339
from .opencode_revert import apply_revert, cut_message, replay_key
from .opencode_storage import (
    RawSession,
    layout_sessions,
    read_capture,
    read_database,
    read_layout_session,
    storage_root,
)

#: parts that belong to a step but carry no text of their own (kept as metadata)
_STEP_META = {"patch", "snapshot", "retry", "agent", "subtask", "file"}


def _obj(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (foreign fields drift)."""
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(tokens: object) -> Usage | None:
    """OpenCode's ``tokens`` object as usage (None when it is not an object)."""
    if not isinstance(tokens, dict):
        return None
    cache = _obj(tokens.get("cache"))
    return Usage(
        input_tokens=_int(tokens.get("input")),
        output_tokens=_int(tokens.get("output")) + _int(tokens.get("reasoning")),
        cache_read_tokens=_int(cache.get("read")),
        cache_write_tokens=_int(cache.get("write")),
    )


class _Converter:
    """Turns one :class:`RawSession` into events on an :class:`EventTree`."""

    def __init__(self, raw: RawSession, report: ImportReport) -> None:
        self.raw = raw
        self.report = report
        self.tree = EventTree(f"opencode:{raw.id}", report)
        self.previous: str | None = None
        #: message id -> the key of the event before its first one (where a revert goes)
        self.before: dict[str, str | None] = {}
        self.clock = to_rfc3339(_first_time(raw)) or "1970-01-01T00:00:00.000Z"
        self.model: str | None = None
        self.cwd: str | None = None
        self.task_calls: dict[str, str] = {}  # child session id -> task call's key
        self.compaction_asked = False
        self.first_prompt: str | None = None
        revert = _obj(raw.info.get("revert"))
        target, part = revert.get("messageID"), revert.get("partID")
        #: a pending revert inside a message: (message id, first part undone)
        self.cut = (target, part) if isinstance(target, str) and isinstance(part, str) else None
        #: the key of the last event OpenCode keeps of a message reverted from a part on
        self.kept_tail: str | None = None
        self.part_reverted = False
        self.replaying = False
        #: tool results whose output OpenCode pruned: event key -> when (``time.compacted``)
        self.pruned: dict[str, object] = {}

    def add(self, key: str, role: str, record: Record, when: object = None) -> None:
        self.clock = to_rfc3339(when, self.clock) or self.clock
        if self.replaying:
            replayed = replay_key(self.tree, key, self.previous, record)
            if replayed is None:  # the same event as kept: shared by both branches
                self.previous = key
                return
            key = replayed
        if self.tree.add(key, self.previous, role, self.clock, record) is not None:
            self.previous = key

    def run(self) -> None:
        ids = set(self.raw.messages)
        ordered = self.raw.ordered()
        for n, (info, parts) in enumerate(ordered):
            mid = info.get("id") or (parts[0].get("messageID") if parts else None)
            if not isinstance(mid, str):
                continue
            role = info.get("role") or _guess_role(parts)
            if role == "assistant" and n == len(ordered) - 1 and _in_progress(info):
                # Its tools' results would land between events already written: it is
                # imported whole by a later import, once OpenCode has finished it.
                self.report.skip("message in progress", "OpenCode was still writing it")
                continue
            parent = info.get("parentID")
            if role == "assistant" and isinstance(parent, str) and parent not in ids:
                self.report.warn(None, f"message {mid}: parentID {parent!r} is not in the session")
            self.before[mid] = self.previous  # where a revert to this message goes back to
            if self.cut is not None and self.cut[0] == mid:
                cut_message(self, mid, str(role), info, parts, self.cut[1])
            else:
                self.message(mid, str(role), info, parts)

    def message(
        self, mid: str, role: str, info: dict[str, Any], parts: list[dict[str, Any]]
    ) -> None:
        """One message's events, by role."""
        if role == "user":
            self.user(mid, info, parts)
        elif role == "assistant":
            self.assistant(mid, info, parts)
        else:
            self.report.skip(f"message/{role}", "a message role infai has no kind for")

    def user(self, mid: str, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        texts, meta = [], []
        for part in parts:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
                if part.get("synthetic"):
                    meta.append({"type": "synthetic_text", "part": part.get("id")})
            elif kind == "compaction":
                self.compaction_asked = True
                self.report.keep("part/compaction")
            else:
                meta.append(part)
                self.report.keep(f"part/{kind}")
                if kind == "file":
                    texts.append(f"[file: {part.get('filename') or part.get('url') or '?'}]")
        if not texts and self.compaction_asked:
            return  # only asked for the compaction that follows
        extra = {"message": mid, **({"parts": meta} if meta else {})}
        for key in ("agent", "model"):
            if info.get(key) is not None:
                extra[key] = info[key]
        record = MessageRecord(content="\n".join(texts), metadata={"opencode": extra})
        if self.first_prompt is None:
            self.first_prompt = label(record.content)
        self.add(mid, "user", record, _time(info, "created"))

    def assistant(self, mid: str, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        if isinstance(info.get("modelID"), str):
            self.model = info["modelID"]
        path = info.get("path")
        if isinstance(path, dict) and isinstance(path.get("cwd"), str):
            self.cwd = path["cwd"]
        if info.get("summary") is True or (
            self.compaction_asked and info.get("mode") == "compaction"
        ):
            self.summary(mid, info, parts)
            return
        steps: list[list[dict[str, Any]]] = [[]]
        for part in parts:
            if part.get("type") == "step-start" and any(
                p.get("type") != "step-start" for p in steps[-1]
            ):
                steps.append([])
            steps[-1].append(part)
        has_step_usage = any(p.get("type") == "step-finish" for p in parts)
        for index, step in enumerate(steps):
            last = index == len(steps) - 1
            self.step(mid, info, step, index, last and not has_step_usage, last)

    def step(
        self,
        mid: str,
        info: dict[str, Any],
        parts: list[dict[str, Any]],
        index: int,
        message_usage: bool,
        last: bool,
    ) -> None:
        texts, reasoning, tools, notes = [], [], [], []
        usage: Usage | None = _usage(info.get("tokens")) if message_usage else None
        for part in parts:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "reasoning" and isinstance(part.get("text"), str):
                reasoning.append(part["text"])
            elif kind == "tool":
                tools.append(part)
            elif kind == "step-finish":
                usage = _usage(part.get("tokens"))
                if usage is None:
                    self.report.warn(None, f"part {part.get('id')}: tokens is not an object")
                notes.append({k: v for k, v in part.items() if k in ("cost", "reason")})
            elif kind != "step-start":
                notes.append(part)
                self.report.keep(f"part/{kind}")
        meta: dict[str, Any] = {"message": mid, "step": index}
        for key in ("providerID", "mode", "agent", "cost"):
            if last and info.get(key) is not None:
                meta[key] = info[key]
        if last and info.get("error") is not None:
            meta["error"] = info["error"]
        if notes:
            meta["parts"] = notes
        record = MessageRecord(
            content="\n\n".join(texts),
            reasoning="\n\n".join(reasoning) or None,
            model=info.get("modelID") if isinstance(info.get("modelID"), str) else None,
            stop_reason=("error" if info.get("error") else _str(info.get("finish")))
            if last
            else None,
            usage=usage,
            metadata={"opencode": meta},
        )
        key = mid if index == 0 else str(parts[0].get("id") or f"{mid}/{index}")
        self.add(key, "assistant", record, _time(info, "created"))
        self.tools(tools, _time(info, "created"))

    def tools(self, parts: list[dict[str, Any]], when: object) -> None:
        """Calls in a line, then the results of those that finished.

        A call is timed like its message (its own start is in its metadata): a
        ``pending`` call has no start yet, and an id derived from a time that
        appears later would make the same call a new event on the next import.
        """
        finished = []
        for part in parts:
            state = _obj(part.get("state"))
            call_id = _str(part.get("callID")) or str(part.get("id"))
            name = _str(part.get("tool")) or "unknown"
            arguments = _obj(state.get("input"))
            meta = {"part": part.get("id"), "status": state.get("status")}
            if _time(state, "start") is not None:
                meta["start"] = _time(state, "start")
            record = ToolCallRecord(
                call_id=str(call_id), name=name, arguments=arguments, metadata={"opencode": meta}
            )
            key = str(part.get("id"))
            self.add(key, "assistant", record, when)
            if name == "task":
                self.note_task(key, state)
            if state.get("status") in ("completed", "error"):
                finished.append((key, str(call_id), name, state))
        for key, call_id, name, state in finished:
            error = state.get("status") == "error"
            content = state.get("error") if error else state.get("output")
            meta = {k: state[k] for k in ("title", "metadata", "time") if state.get(k) is not None}
            pruned = _time(state, "compacted")
            times = meta.get("time")
            if isinstance(times, dict) and "compacted" in times:
                # the prune is recorded on the session: OpenCode sets it on old parts later,
                # and an event imported before must not change under it (see PRUNED)
                meta["time"] = {k: v for k, v in times.items() if k != "compacted"}
            result = ToolResultRecord(
                call_id=call_id,
                name=name,
                content=content if isinstance(content, str) else str(content or ""),
                is_error=error,
                metadata={"opencode": meta},
            )
            self.add(f"{key}/result", "tool", result, _time(state, "end"))
            if pruned is not None and (self.previous or "").split("~")[0] == f"{key}/result":
                self.pruned[self.previous or ""] = pruned

    def note_task(self, key: str, state: dict[str, Any]) -> None:
        """Remember which child session a ``task`` call ran (newer versions name it in
        ``metadata.sessionId``; older ones only in the child's parts it summarises)."""
        meta = _obj(state.get("metadata"))
        named = [meta.get("sessionId"), meta.get("sessionID")]
        summary = meta.get("summary")
        for item in summary if isinstance(summary, list) else ():
            if isinstance(item, dict):
                named.append(item.get("sessionID"))
        for child in named:
            if isinstance(child, str) and child:
                self.task_calls.setdefault(child, key)

    def summary(self, mid: str, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        """A compaction: the summary stands for everything before it."""
        text = "\n\n".join(
            p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)
        )
        self.compaction_asked = False
        if not text:
            self.report.warn(None, f"message {mid}: a compaction without its summary: skipped")
            return
        tokens = _obj(info.get("tokens"))
        record = CompactionRecord(summary=text, tokens_before=_int(tokens.get("input")) or None)
        self.add(mid, "assistant", record, _time(info, "created"))


def _time(obj: object, key: str) -> object:
    """``obj["time"][key]`` (epoch ms) where it is there."""
    times = obj.get("time") if isinstance(obj, dict) else None
    return times.get(key) if isinstance(times, dict) else None


def _first_time(raw: RawSession) -> int | None:
    """The session's earliest time: its info's, else its messages' and parts' (a capture
    has parts only, and only some carry a time)."""
    created = _time(raw.info, "created")
    if isinstance(created, int) and not isinstance(created, bool):
        return created
    times = [_time(m, "created") for m in raw.messages.values()]
    for parts in raw.parts.values():
        for part in parts.values():
            times += [_time(part, "start"), _time(_obj(part.get("state")), "start")]
    found = [t for t in times if isinstance(t, int) and not isinstance(t, bool)]
    return min(found) if found else None


def _in_progress(info: dict[str, Any]) -> bool:
    """Whether an assistant message is still being written (no completion, no error)."""
    times = _obj(info.get("time"))
    return bool(times) and times.get("completed") is None and info.get("error") is None


def _guess_role(parts: list[dict[str, Any]]) -> str:
    """A capture has parts without their message: steps and tools mean an assistant."""
    kinds = {p.get("type") for p in parts}
    return "assistant" if kinds & {"step-start", "step-finish", "tool", "reasoning"} else "user"


#: what OpenCode's model is sent instead of a pruned tool output (``message-v2.ts``)
PRUNED = "[Old tool result content cleared]"


def _pruned(conv: _Converter, report: ImportReport) -> dict[str, Any]:
    """The tool outputs OpenCode pruned (``state.time.compacted``), for the session's
    import metadata, with a warning saying what that means for a resumed session.

    OpenCode's prune keeps the output in its storage and sends :data:`PRUNED` to
    the model in its place. So does infai: the output is imported whole (so it
    is searchable and shown), the prune is recorded on the session rather than
    on the event, since OpenCode prunes old parts after they were written and an
    event imported before cannot change, and the agent's context sends the
    placeholder for the events listed (``infai.agent.context.pruned_outputs``).
    """
    events = {}
    for key, when in conv.pruned.items():
        event = conv.tree.id_of(key)
        if event is not None:
            events[event] = to_rfc3339(when) or str(when)
    if not events:
        return {}
    report.warn(
        None,
        f"{len(events)} tool outputs were pruned by OpenCode (its model is sent {PRUNED!r} "
        "in their place): imported whole, and listed under 'pruned' in the session's import "
        "metadata; a resumed session sends the placeholder in their place, as OpenCode does",
    )
    return {"placeholder": PRUNED, "events": events}


def convert(raw: RawSession, path: str, report: ImportReport) -> tuple[ForeignSession, _Converter]:
    """One OpenCode session as a :class:`ForeignSession` (children not attached)."""
    conv = _Converter(raw, report)
    conv.run()
    info = raw.info
    revert = info.get("revert")
    summary = apply_revert(conv, revert, report) if revert is not None else None
    specs, head = conv.tree.finish(summary)
    report.count(specs)
    created = to_rfc3339(_first_time(raw)) or "1970-01-01T00:00:00.000Z"
    updated = to_rfc3339(_time(info, "updated")) or max((s[4] for s in specs), default=created)
    extra: dict[str, Any] = {"head": "the last message (OpenCode keeps no other current entry)"}
    for key in ("projectID", "version", "slug", "share"):
        if info.get(key) is not None:
            extra[key] = info[key]
    if not info:
        extra["info"] = "no session info in the source (a capture of parts)"
    if info.get("revert") is not None:
        extra["revert"] = info["revert"]
    pruned = _pruned(conv, report)
    if pruned:
        extra["pruned"] = pruned
    directory = info.get("directory")
    title = info.get("title")
    foreign = ForeignSession(
        tool="opencode",
        source_id=raw.id,
        session_id=derive_id("opencode", raw.id, created),
        paths=[path],
        created_at=created,
        updated_at=updated,
        report=report,
        name=label(title) or conv.first_prompt,
        working_dir=directory if isinstance(directory, str) else conv.cwd,
        model=conv.model,
        events=specs,
        head=head,
        extra=extra,
    )
    return foreign, conv


def _tree(
    raws: dict[str, RawSession], paths: dict[str, str], reports: dict[str, ImportReport]
) -> list[ForeignSession]:
    """Sessions with their children attached (roots: no parent among ``raws``)."""
    converted = {}
    for sid, raw in raws.items():
        report = reports.setdefault(sid, ImportReport(paths[sid]))
        converted[sid] = convert(raw, paths[sid], report)
    for sid, (_foreign, conv) in converted.items():
        for child in conv.task_calls:  # a capture has no session info: the task call says
            if child in raws and child != sid and raws[child].parent_id is None:
                raws[child].info.setdefault("parentID", sid)
    roots = []
    for sid, (foreign, _conv) in converted.items():
        parent = raws[sid].parent_id
        if parent is None or parent not in converted or _cycle(raws, sid):
            roots.append(foreign)
            continue
        parent_foreign, parent_conv = converted[parent]
        call = parent_conv.task_calls.get(sid)
        foreign.parent_event = parent_conv.tree.id_of(call) if call else None
        if foreign.parent_event is None:
            parent_foreign.report.warn(None, f"child session {sid}: no task call names it")
        parent_foreign.children.append(foreign)
    return roots


def _cycle(raws: dict[str, RawSession], sid: str) -> bool:
    """Whether following ``parentID`` from ``sid`` comes back to it."""
    seen: set[str] = set()
    walk: str | None = raws[sid].parent_id
    while walk is not None and walk in raws and walk not in seen:
        if walk == sid:
            return True
        seen.add(walk)
        walk = raws[walk].parent_id
    return walk == sid


class OpenCodeImporter:
    """Imports OpenCode sessions: its storage tree, its database, or a capture of its events."""

    tool = "opencode"

    def __init__(self) -> None:
        #: storage root -> session id -> (session file, parent session id)
        self._index: dict[Path, dict[str, tuple[Path, str | None]]] = {}

    def default_paths(self) -> list[Path]:
        """OpenCode's data directory (``$XDG_DATA_HOME/opencode``, ``~/.local/share/opencode``)."""
        data = os.environ.get("XDG_DATA_HOME")
        base = Path(data) if data else Path.home() / ".local" / "share"
        return [base / "opencode"]

    def find(self, path: Path) -> list[Path]:
        """Units at ``path``: each session file of a storage tree that is no other's
        child (children come with their parent), an ``opencode.db``, or a capture
        (``.jsonl``); a named file is taken as it is."""
        if not path.exists():
            raise InvalidInput(f"{path}: no such file or directory")
        if path.is_file():
            return [path]
        units: list[Path] = []
        root = storage_root(path)
        if root is not None:
            index = self._sessions(root)
            units += [f for f, parent in index.values() if parent not in index]
        if (path / "opencode.db").is_file():
            units.append(path / "opencode.db")
        if root is None and not units:
            units = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        return units

    def _sessions(self, root: Path) -> dict[str, tuple[Path, str | None]]:
        """Every session file of a storage tree and its parent session (read once)."""
        if root not in self._index:
            index: dict[str, tuple[Path, str | None]] = {}
            for sid, file in layout_sessions(root).items():
                try:
                    parent = json.loads(file.read_bytes()).get("parentID")
                except (OSError, ValueError, AttributeError):
                    parent = None  # load() reports it when it reads the file
                index[sid] = (file, parent if isinstance(parent, str) else None)
            self._index[root] = index
        return self._index[root]

    def load(self, path: Path) -> list[ForeignSession]:
        """The sessions of one unit, children attached to their parents."""
        if path.suffix == ".db":
            raws = read_database(path)
            return _tree(raws, dict.fromkeys(raws, str(path)), {})
        if path.suffix == ".jsonl":
            report = ImportReport(str(path))
            raws = read_capture(path, report)
            if not raws:
                raise InvalidInput(f"{path}: no OpenCode session objects in it")
            return _tree(raws, dict.fromkeys(raws, str(path)), {next(iter(raws)): report})
        return [self._load_layout(path)]

    def _load_layout(self, session_file: Path) -> ForeignSession:
        """A session file of a storage tree, with every session below it as children."""
        root = session_file.parents[2] if len(session_file.parents) > 2 else session_file
        if session_file.suffix != ".json" or not (root / "session").is_dir():
            raise InvalidInput(f"{session_file}: not a session file of an OpenCode storage tree")
        index = self._sessions(root)
        raws: dict[str, RawSession] = {}
        reports: dict[str, ImportReport] = {}
        paths: dict[str, str] = {}
        pending = [session_file]
        while pending:  # the session and, below it, every child session
            current = pending.pop()
            report = ImportReport(str(current))
            raw = read_layout_session(root, current, report)
            if raw.id in raws:
                continue
            raws[raw.id], reports[raw.id], paths[raw.id] = raw, report, str(current)
            pending += [
                f for sid, (f, parent) in index.items() if parent == raw.id and sid not in raws
            ]
        top_id = next(iter(raws))
        return next(f for f in _tree(raws, paths, reports) if f.source_id == top_id)
