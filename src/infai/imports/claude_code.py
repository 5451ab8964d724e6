"""Claude Code transcripts (``~/.claude/projects/<project>/<sessionId>.jsonl``) as infai sessions.

Model, in prose: a transcript is a tree of *chain* lines (``uuid`` and
``parentUuid``) plus *side* lines that annotate the session (titles, the last
prompt's leaf, file-history snapshots, permission modes). Chain lines become
events: a ``user`` line's typed prompt becomes a ``message``, its
``tool_result`` blocks ``tool_result`` events (role ``tool``), paired with their
call by ``tool_use_id``; the ``assistant`` lines of one API response (one line
per content block, sharing ``message.id``) become one ``message`` (text and
thinking joined; the usage of the response's *last* line, because every line
repeats it and only the last has the final output count) followed by one
``tool_call`` per ``tool_use`` block. Parallel calls fan out in the source (each
result hangs from its own call line); they are laid in a line as infai's own
loop writes them (message, calls, results), and whatever continued from any of
them continues from the last. A ``compact_boundary`` (a root, whose
``logicalParentUuid`` names the last line before it) and its
``isCompactSummary`` message become one ``compaction`` event after that line,
so a resumed session's context starts at the summary, as Claude Code's does.
Lines that are no conversation (``progress``, ``attachment``, ``system``
timing/hook/recap lines, unknown future types) become no event: their children
re-link through them to their parent, and the report counts them by type.

Subagents become child sessions linked to the ``Task`` call they ran for: in
2.x they are files beside the transcript (``<sessionId>/subagents/agent-*.jsonl``,
linked through ``progress/agent_progress`` records or the result's ``agentId``;
the compaction helper ``agent-acompact-*`` through its first line's parent); in
1.0.x they are ``isSidechain`` lines inline, each subtree its own root, linked
only by its first prompt being the ``Task`` call's ``prompt``, or
``agent-<hex>.jsonl`` files in the project directory, whose lines name the
parent's ``sessionId`` (read with the ``<sessionId>.jsonl`` beside them, and
linked like the 2.x files, else by prompt).

HEAD is the last ``last-prompt`` line's ``leafUuid`` when the file has one (2.1
and later), else the last chain line in the file. Entries whose parent is
missing from the file hang from the line before them (published files lose
lines; Claude Code's own order is append order), with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infai.store.errors import InvalidInput

from .base import ForeignSession, ImportReport, derive_id, label, read_json_lines, to_rfc3339
from .claude_code_events import Builder, ChainLine, text_of

TOOL = "claude-code"
#: side-line types, and what becomes of them
_SIDE = {
    "summary": "kept",
    "ai-title": "kept",
    "custom-title": "kept",
    "last-prompt": "kept",
    "file-history-snapshot": "file backups live outside the transcript (~/.claude/file-history)",
    "permission-mode": "permission modes and rules are never carried into infai",
    "queue-operation": "prompts queued in the UI (the prompt itself is a message)",
}

# -- files ---------------------------------------------------------------------------


@dataclass
class _File:
    """One transcript file read: its chain lines and what its side lines said."""

    path: Path
    chain: list[ChainLine] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    leaf: str | None = None
    summary_leaf: str | None = None
    session_id: str | None = None


def _read(path: Path, report: ImportReport) -> _File:
    found = _File(path)
    for item in read_json_lines(path, report):
        obj = item.value
        if not isinstance(obj, dict):
            report.warn(item.number, f"a JSON {type(obj).__name__}, not an object: skipped")
            continue
        kind = obj.get("type")
        if isinstance(obj.get("sessionId"), str) and found.session_id is None:
            found.session_id = obj["sessionId"]
        if isinstance(obj.get("uuid"), str):
            found.chain.append(ChainLine(item.number, obj))
        elif isinstance(kind, str) and kind in _SIDE:
            _side(found, kind, obj, report)
        else:
            report.skip(str(kind), "unknown line type without a uuid: not part of the tree")
    return found


def _side(found: _File, kind: str, obj: dict[str, Any], report: ImportReport) -> None:
    reason = _SIDE[kind]
    if reason != "kept":
        report.skip(kind, reason)
        return
    report.keep(kind)
    if kind == "summary" and isinstance(obj.get("summary"), str):
        found.titles.insert(0, obj["summary"])  # a guess: a real title wins
        if isinstance(obj.get("leafUuid"), str):
            found.summary_leaf = obj["leafUuid"]
    elif kind in ("ai-title", "custom-title"):
        title = obj.get("aiTitle") or obj.get("customTitle") or obj.get("title")
        if isinstance(title, str):
            found.titles.append(title)
    elif kind == "last-prompt" and isinstance(obj.get("leafUuid"), str):
        found.leaf = obj["leafUuid"]


def _first_prompt(lines: list[ChainLine]) -> str | None:
    for line in lines:
        message = line.obj.get("message")
        if line.obj.get("type") == "user" and isinstance(message, dict):
            content = message.get("content")
            if isinstance(content, str) and content.strip():
                return content
            if isinstance(content, list):
                text = text_of(
                    [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
                )
                if text.strip():
                    return text
    return None


def _session(
    source_id: str,
    paths: list[Path],
    lines: list[ChainLine],
    report: ImportReport,
    *,
    head: str | None = None,
    name: str | None = None,
) -> tuple[ForeignSession, Builder]:
    """The foreign session made of ``lines`` (one conversation)."""
    builder = Builder(f"{TOOL}:{source_id}", report)
    for line in lines:
        builder.feed(line)
    builder.settle()
    if head is not None and builder.tree.resolve(head) is None:
        report.warn(None, f"last-prompt leaf {head!r} is not in the file: the last line is HEAD")
        head = None
    events, head_id = builder.tree.finish(head or builder.last_chain, dangling="previous")
    report.count(events)
    stamps = [s[4] for s in events]
    first = to_rfc3339(
        next((ln.obj.get("timestamp") for ln in lines if ln.obj.get("timestamp")), None)
    )
    created = first or (min(stamps) if stamps else "1970-01-01T00:00:00.000Z")
    models = [b.model for b in builder.responses.values() if b.model]
    cwd = next((ln.obj["cwd"] for ln in lines if isinstance(ln.obj.get("cwd"), str)), None)
    version = next(
        (ln.obj["version"] for ln in reversed(lines) if isinstance(ln.obj.get("version"), str)),
        None,
    )
    foreign = ForeignSession(
        tool=TOOL,
        source_id=source_id,
        session_id=derive_id(TOOL, f"session:{source_id}", created),
        paths=[str(p) for p in paths],
        created_at=created,
        updated_at=max([created, *stamps]),
        report=report,
        name=label(name) or label(_first_prompt(lines)),
        working_dir=cwd,
        model=models[-1] if models else None,
        events=events,
        head=head_id,
        extra={"version": version, "head_rule": "last-prompt" if head else "last line"},
    )
    return foreign, builder


def _sidechains(lines: list[ChainLine]) -> tuple[list[ChainLine], dict[str, list[ChainLine]]]:
    """Main-chain lines, and inline sidechain lines grouped by their root's uuid."""
    by_uuid = {line.uuid: line for line in lines}
    main: list[ChainLine] = []
    groups: dict[str, list[ChainLine]] = {}
    root_of: dict[str, str] = {}  # sidechain line -> its root's uuid (memo: linear time)
    for line in lines:
        if not line.obj.get("isSidechain"):
            main.append(line)
            continue
        walk, path = line, [line.uuid]
        while walk.uuid not in root_of:
            above = by_uuid.get(str(walk.parent))
            if above is None or not above.obj.get("isSidechain") or above.uuid in path:
                root_of[walk.uuid] = walk.uuid
                break
            walk = above
            path.append(walk.uuid)
        root = root_of[walk.uuid]
        root_of.update((uuid, root) for uuid in path)
        groups.setdefault(root, []).append(line)
    return main, groups


def _task_calls(builder: Builder) -> dict[str, list[str]]:
    """Task calls by prompt: prompt -> tool_use ids, in order."""
    out: dict[str, list[str]] = {}
    for call_id, call in builder.calls.items():
        prompt = call.arguments.get("prompt")
        if call.name in ("Task", "Agent") and isinstance(prompt, str):
            out.setdefault(prompt.strip(), []).append(call_id)
    return out


def _call_label(builder: Builder, call_id: str | None, fallback: str | None) -> str | None:
    call = builder.calls.get(call_id) if call_id else None
    described = call.arguments.get("description") if call else None
    text = described if isinstance(described, str) and described else fallback
    return f"subagent: {label(text)}" if text else "subagent"


def load_file(path: Path, agents: list[Path] | None = None) -> ForeignSession | None:
    """The session in one transcript, its subagents as children; None for a file
    with no conversation (older versions leave files of ``summary`` lines only).

    ``agents``: project-level ``agent-*.jsonl`` files (1.0.x) that name this
    transcript's session, imported as its children too.
    """
    report = ImportReport(str(path))
    found = _read(path, report)
    if not found.chain:
        return None
    sid = found.session_id or path.stem
    source_id = sid if path.stem == sid else f"{sid}/{path.stem}"
    main, inline = _sidechains(found.chain)
    if not main:  # a sidechain file on its own (an older agent-*.jsonl)
        main, inline = found.chain, {}
    name = found.titles[-1] if found.titles else None
    foreign, builder = _session(source_id, [path], main, report, head=found.leaf, name=name)
    if found.summary_leaf is not None:
        foreign.extra["summary_leaf"] = found.summary_leaf
    tasks = _task_calls(builder)
    for root, lines in inline.items():
        prompt = _first_prompt(lines)
        call_id = (
            tasks.get((prompt or "").strip(), [None]).pop(0)
            if tasks.get((prompt or "").strip())
            else None
        )
        named = _call_label(builder, call_id, prompt)
        child, _ = _session(f"{source_id}/sidechain-{root}", [path], lines, report, name=named)
        _link(child, builder, call_id, None, report)
        foreign.children.append(child)
    for sub in sorted((path.parent / path.stem / "subagents").glob("agent-*.jsonl")):
        foreign.children.append(_subagent(sub, source_id, builder))
    for sub in agents or []:
        foreign.children.append(_subagent(sub, source_id, builder))
    return foreign


def _agent_session(path: Path) -> str | None:
    """The ``sessionId`` a project-level ``agent-*.jsonl`` names (None: unreadable)."""
    try:
        for item in read_json_lines(path, ImportReport(str(path))):
            if isinstance(item.value, dict) and isinstance(item.value.get("sessionId"), str):
                return str(item.value["sessionId"])
    except (InvalidInput, OSError):
        return None
    return None


def _link(
    child: ForeignSession,
    builder: Builder,
    call_id: str | None,
    entry: str | None,
    report: ImportReport,
) -> None:
    """Hang ``child`` from the call (or entry) it ran for, in the parent's tree."""
    key = builder.calls[call_id].key if call_id and call_id in builder.calls else entry
    child.parent_event = builder.tree.id_of(key) if key else None
    if child.parent_event is None:
        report.warn(
            None,
            f"subagent {child.source_id}: the call it ran for was not found: "
            "linked to the session only",
        )
    else:
        child.extra["parent_entry"] = call_id or entry


def _subagent(path: Path, parent_source: str, builder: Builder) -> ForeignSession:
    """A 2.x subagent file as a child session of the transcript beside it."""
    report = ImportReport(str(path))
    found = _read(path, report)
    agent = path.stem.removeprefix("agent-")
    own = {line.uuid for line in found.chain}
    entry = None
    for line in found.chain:
        outside = line.parent is not None and line.parent not in own
        if outside and entry is None and builder.tree.resolve(line.parent) is not None:
            entry = line.parent  # where it forked from the parent's chain
            line.obj = {**line.obj, "parentUuid": None}
    call_id = builder.agent_calls.get(agent)
    prompt = _first_prompt(found.chain)
    if call_id is None and entry is None and prompt:  # 1.0.x: only the prompt links them
        matches = _task_calls(builder).get(prompt.strip())
        call_id = matches[0] if matches else None
    helper = "compaction summary (subagent)" if agent.startswith("acompact") else None
    child, _ = _session(
        f"{parent_source}/agent-{agent}",
        [path],
        found.chain,
        report,
        name=helper or _call_label(builder, call_id, prompt),
    )
    child.extra["agent_id"] = agent
    _link(child, builder, call_id, entry, report)
    return child


class ClaudeCodeImporter:
    """``infai import claude-code``: transcripts under ``~/.claude/projects``."""

    tool = TOOL

    def default_paths(self) -> list[Path]:
        """Claude Code's projects directory."""
        return [Path.home() / ".claude" / "projects"]

    def __init__(self) -> None:
        #: transcript -> the project-level agent files (1.0.x) that name its session
        self._agents: dict[Path, list[Path]] = {}
        #: directories whose agent files were grouped already
        self._grouped: set[Path] = set()

    def find(self, path: Path) -> list[Path]:
        """Transcripts at ``path``; subagent files are read with their parent's."""
        if not path.exists():
            raise InvalidInput(f"{path}: no such file or directory")
        if path.is_file():
            if path.parent.name == "subagents":
                parent = path.parent.parent.with_suffix(".jsonl")
                return [parent] if parent.is_file() else [path]
            if path.name.startswith("agent-"):
                owner = self._agent_parent(path)
                return [owner if owner is not None else path]
            return [path]
        files = sorted(
            p for p in path.rglob("*.jsonl") if p.parent.name != "subagents" and p.is_file()
        )
        return [p for p in files if not p.name.startswith("agent-") or not self._agent_parent(p)]

    def _group(self, directory: Path) -> None:
        """Learn which transcript each project-level agent file in ``directory`` names."""
        if directory in self._grouped:
            return
        self._grouped.add(directory)
        for agent in sorted(directory.glob("agent-*.jsonl")):
            sid = _agent_session(agent)
            parent = directory / f"{sid}.jsonl" if sid else None
            if parent is not None and parent != agent and parent.is_file():
                self._agents.setdefault(parent, []).append(agent)

    def _agent_parent(self, path: Path) -> Path | None:
        """The transcript a project-level agent file belongs to, if it is there."""
        self._group(path.parent)
        return next((p for p, subs in self._agents.items() if path in subs), None)

    def load(self, path: Path) -> list[ForeignSession]:
        """The transcript at ``path`` with its subagents (none: no conversation)."""
        if not path.name.startswith("agent-"):
            self._group(path.parent)
        found = load_file(path, self._agents.get(path))
        return [] if found is None else [found]
