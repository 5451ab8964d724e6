"""``infai import TOOL [PATH…]``: bring another coding agent's sessions into the store.

Model, in prose: the command resolves every PATH (or, without one, the tool's
own default location) to session files *before* it imports anything, so a
misspelt tool or a missing path exits with code 2 having changed nothing. Each
file is then a unit of its own: it is read whole, checked, and written whole
(or, when it was imported before, only its new entries are appended); a file
that cannot be read or written is reported and the others still import, and
the command then exits with code 1. While it works it shows a progress bar on
stderr (only on a terminal); at the end it prints a summary table (files,
sessions created / grown / unchanged, events added, entries skipped, warnings)
and the warnings themselves on stderr, or with ``--json`` one object with a
result per file. Imported sessions carry no permission rules: their working
directory is recorded (``extra["import"]["working_dir"]``, shown by ``session
ls``), never made the session's (it works where it is continued from).

(``infai session import`` is infai's own export format; this is other tools'.)
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import click

from infai.errors import InfaiError
from infai.imports import TOOLS as IMPORT_TOOLS
from infai.store import SessionStore

from ..inert import inert
from .common import echo, emit_json, json_option, pass_store
from .errors import BadInput, mapped_errors

#: the summary table's columns (keys of the totals)
COLUMNS = (
    "files",
    "failed",
    "empty",
    "created",
    "grown",
    "unchanged",
    "events",
    "skipped",
    "warnings",
)
#: warnings printed on stderr before "... and N more"
MAX_WARNINGS = 20


def _printable(text: str) -> str:
    """``text`` made inert (:func:`~infai.shells.inert.inert`) and on one line, any
    other character that is not printable shown escaped too: file names and ids
    come from other tools' files, and must not drive the terminal."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in inert(text))


def _files(tool: str, paths: tuple[Path, ...]) -> list[Path]:
    """Every session file to import, in order, each once; nothing is read yet."""
    from infai.imports import importer_for

    importer = importer_for(tool)
    given = list(paths)
    if not given:
        given = [p for p in importer.default_paths() if p.exists()]
        if not given:
            where = ", ".join(str(p) for p in importer.default_paths())
            raise BadInput(f"no {tool} sessions at {where}: name a file or directory")
    files: list[Path] = []
    for path in given:
        for found in importer.find(path):
            if found not in files:
                files.append(found)
    return files


def _import_file(store: SessionStore, tool: str, path: Path) -> dict[str, Any]:
    """Import one file: its result as JSON-ready data (never raises for bad input)."""
    from infai.imports import commit as commit_import
    from infai.imports import importer_for

    result: dict[str, Any] = {"path": str(path), "ok": False, "sessions": [], "reports": []}
    try:
        for foreign in importer_for(tool).load(path):
            reports = {id(s.report): s.report for s in foreign.walk()}
            try:
                result["sessions"].append(commit_import(store, foreign).to_obj())
            finally:  # after the commit: it reports too (a revised reply, a late link)
                result["reports"] += [r.to_obj() for r in reports.values()]
    except (InfaiError, OSError) as exc:
        result["error"] = str(exc) if isinstance(exc, InfaiError) else f"{path}: {exc.strerror}"
        return result
    result["ok"] = True
    if not result["sessions"]:
        result["note"] = "no conversation in this file"
    return result


def _walk(outcome: dict[str, Any]) -> list[dict[str, Any]]:
    out = [outcome]
    for child in outcome["children"]:
        out += _walk(child)
    return out


def _totals(results: list[dict[str, Any]]) -> dict[str, int]:
    totals: Counter[str] = Counter(files=len(results))
    for result in results:
        totals["failed"] += not result["ok"]
        totals["empty"] += "note" in result
        for outcome in (o for s in result["sessions"] for o in _walk(s)):
            totals[outcome["status"]] += 1
            totals["events"] += outcome["added"]
        for report in result["reports"]:
            totals["warnings"] += len(report["warnings"])
            totals["skipped"] += sum(item["count"] for item in report["skipped"].values())
            totals["kept"] += sum(report["kept"].values())
    for key in ("empty", "created", "grown", "unchanged", "events", "warnings", "skipped", "kept"):
        totals.setdefault(key, 0)
    return dict(totals)


def _run(store: SessionStore, tool: str, files: list[Path], quiet: bool) -> list[dict[str, Any]]:
    """Import each file, with a progress bar on a terminal's stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = Console(stderr=True)
    show = not quiet and console.is_terminal and len(files) > 1
    results = []
    columns = (
        TextColumn("importing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}", markup=False),  # a file name, never markup
    )
    with Progress(*columns, console=console, transient=True, disable=not show) as progress:
        task = progress.add_task("", total=len(files))
        for path in files:
            progress.update(task, description=_printable(path.name))
            results.append(_import_file(store, tool, path))
            progress.advance(task)
    return results


def _summary(tool: str, results: list[dict[str, Any]], totals: dict[str, int]) -> None:
    """The table on stdout; failures and warnings on stderr."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"infai import {tool}", title_justify="left")
    for name in COLUMNS:
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    table.add_row(*(str(totals.get(name, 0)) for name in COLUMNS))
    console = Console()
    if not console.is_terminal:  # piped: print the whole table, never squeezed to 80
        console = Console(width=max(console.width, 120))
    console.print(table)
    warnings = [w for r in results for rep in r["reports"] for w in rep["warnings"]]
    for line in warnings[:MAX_WARNINGS]:
        echo(f"infai: warning: {_printable(line)}", err=True)
    if len(warnings) > MAX_WARNINGS:
        echo(
            f"infai: ... and {len(warnings) - MAX_WARNINGS} more warnings (--json lists all)",
            err=True,
        )
    for result in results:
        if not result["ok"]:
            echo(f"infai: not imported: {_printable(result['error'])}", err=True)


@click.command("import")
@click.argument("tool", type=click.Choice(list(IMPORT_TOOLS)), metavar="TOOL")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@json_option
@mapped_errors
@pass_store
def import_command(store: SessionStore, tool: str, paths: tuple[Path, ...], as_json: bool) -> None:
    """Import sessions from another coding agent (TOOL: claude-code, codex, pi or
    opencode) from each PATH, or from the tool's default location.

    Importing again is safe: what was imported is left as it is, and entries the
    tool appended since are added. Exit code 2: an unknown tool or a missing
    path (nothing imported); 1: some file could not be imported (the others
    were).
    """
    files = _files(tool, paths)
    results = _run(store, tool, files, quiet=as_json)
    totals = _totals(results)
    if as_json:
        emit_json({"tool": tool, "totals": totals, "files": results})
    else:
        _summary(tool, results, totals)
    if totals["failed"]:
        sys.exit(1)


__all__ = ["import_command"]
