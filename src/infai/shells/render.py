"""Plain-text and JSON renderings of store objects for the command line.

The plain-text lines are printed through the command line's ``echo``, which
makes them inert (:mod:`.inert`); :func:`printable` also keeps a session's
name and directory on their one line of a listing.
"""

from __future__ import annotations

from typing import Any

from infai.store import Entry, Event, FsckReport, SessionInfo, record_to_obj

from .inert import inert, inert_json


def printable(text: str) -> str:
    """``text`` on one line and inert (:func:`.inert.inert`): a control character
    shown as its escape (``\\x1b``), a newline as ``\\n``, a tab as ``\\t``."""
    return inert(text).replace("\n", "\\n").replace("\t", "\\t")


def session_line(info: SessionInfo) -> str:
    name = printable(info.name or "-")
    return f"{info.id}  {info.updated_at}  {name}  {printable(info.working_dir or '')}".rstrip()


def entry_json(entry: Entry, head: str | None) -> dict[str, Any]:
    data = entry.to_obj()
    data["head"] = entry.id == head
    return data


def entry_line(entry: Entry, head: str | None) -> str:
    mark = "*" if entry.id == head else " "
    branch = " (branch)" if entry.branch_from else ""
    return f"{mark} {entry.id} {entry.timestamp} {entry.kind}/{entry.role}{branch}  {entry.preview}"


def event_json(event: Event) -> dict[str, Any]:
    return event.to_obj()


def event_text(event: Event) -> str:
    header = f"[{event.kind}/{event.role}] {event.id} {event.timestamp}"
    if event.branch_from:
        header += f" (branch from {event.branch_from})"
    if event.digest:
        header += f" blob {event.digest}"
    record = record_to_obj(event.record) if event.record is not None else None
    body = inert_json(record, indent=2)  # valid JSON: escapes in JSON's own form
    return f"{header}\n{body}"


#: the record metadata key naming a tool manifest (``infai.agent.MANIFEST_KEY``;
#: kept here so ``session show`` loads the agent only for an event that has one)
TOOL_MANIFEST = "tool_manifest"


def manifest_digest(event: Event) -> str | None:
    """The digest of the tool manifest ``event``'s record names (None: none)."""
    metadata = getattr(event.record, "metadata", None)
    digest = metadata.get(TOOL_MANIFEST) if isinstance(metadata, dict) else None
    return digest if isinstance(digest, str) else None


def manifest_lines(digest: str, tools: list[dict[str, Any]]) -> list[str]:
    """The tools a model request offered: each name, then its description indented
    (printed inert by ``echo``: an MCP server's text is not trusted)."""
    count = f"{len(tools)} tool" + ("" if len(tools) == 1 else "s")
    lines = [f"tools offered ({count}, manifest {digest}):"]
    for tool in tools:
        lines.append(f"  {printable(str(tool['name']))}")
        lines += [f"    {line}" for line in str(tool["description"]).splitlines()]
    return lines


def tree_lines(entries: list[Entry], head: str | None) -> list[str]:
    """Draw the event tree: a chain stays in its column, each fork indents."""
    children: dict[int, list[Entry]] = {}
    roots: list[Entry] = []
    for entry in entries:
        if entry.parent_seq < 0:
            roots.append(entry)
        else:
            children.setdefault(entry.parent_seq, []).append(entry)
    lines: list[str] = []
    stack: list[tuple[Entry, str, str]] = []

    def push(kids: list[Entry], prefix: str) -> None:
        if len(kids) == 1:
            stack.append((kids[0], prefix, prefix))
            return
        for i in reversed(range(len(kids))):
            last = i == len(kids) - 1
            first = prefix + ("└─" if last else "├─")
            stack.append((kids[i], first, prefix + ("  " if last else "│ ")))

    push(roots, "")
    while stack:
        entry, first, cont = stack.pop()
        mark = "*" if entry.id == head else "o"
        tag = "  <- HEAD" if entry.id == head else ""
        lines.append(f"{first}{mark} {entry.id} {entry.kind}/{entry.role}  {entry.preview}{tag}")
        push(children.get(entry.seq, []), cont)
    return lines


def tree_json(entries: list[Entry], head: str | None) -> dict[str, Any]:
    parents = {e.parent_seq for e in entries}
    return {
        "head": head,
        "events": [entry_json(e, head) for e in entries],
        "leaves": [e.id for e in entries if e.seq not in parents],
    }


def fsck_json(report: FsckReport) -> dict[str, Any]:
    return {
        "session": report.session_id,
        "ok": report.ok,
        "status": report.status,
        "events": report.events,
        "blobs": report.blobs,
        "problems": [
            {"path": p.path, "offset": p.offset, "detail": p.detail} for p in report.problems
        ],
        "pending_recovery": report.pending_recovery,
        "repaired": report.repaired,
        "orphan_blobs": report.orphans,
    }


def fsck_lines(report: FsckReport) -> list[str]:
    lines = [f"repaired: {r}" for r in report.repaired]
    lines += [f"needs recovery: {n}" for n in report.pending_recovery]
    lines += [f"problem: {p}" for p in report.problems]
    status = report.status
    lines.append(
        f"{report.session_id}: {status} ({report.events} events, {report.blobs} blobs, "
        f"{len(report.problems)} problems, {len(report.orphans)} unreferenced blobs)"
    )
    return lines
