"""``infai session files | diff | checkout``: the working directory's files on the timeline.

A session's files at an event are those of the nearest snapshot (or restore)
at or before it on its path (:mod:`infai.checkpoints.session`). ``files`` lists
them (paths, sizes, digests, and what the snapshot skipped), ``diff`` compares
two events' files (or one event's with the working directory now), and
``checkout`` puts an event's files back on disk, recorded on the timeline as a
restore at HEAD (the conversation stays where it is); ``--dry-run`` prints the
plan and changes nothing. Files changed outside the agent (since its last
snapshot, or recorded between turns rather than after a tool) that the restore
would replace or remove make ``checkout`` refuse (exit 2, nothing changed, the
files named) unless ``--force``; a restore prints one line naming every file it
changed. Everything a file holds is printed through the inert helpers.
"""

from __future__ import annotations

from typing import Any

import click

from infai.store import SessionStore

from ..inert import inert_json
from .common import echo, emit_json, json_option, pass_store
from .errors import mapped_errors


@click.command("files")
@click.argument("session_id", metavar="SESSION")
@click.argument("event_id", metavar="EVENT", required=False)
@json_option
@mapped_errors
@pass_store
def files_command(
    store: SessionStore, session_id: str, event_id: str | None, as_json: bool
) -> None:
    """The files recorded at EVENT (default: HEAD): paths, sizes, digests, skipped."""
    from infai.agent import files_at

    say_files(files_at(store, session_id, event_id), as_json)


def say_files(got: dict[str, Any], as_json: bool) -> None:
    """Print ``files``' answer (the local one, or the server's: the same object)."""
    if as_json:
        emit_json(got)
        return
    echo(f"files at snapshot {got['snapshot']} (tree {got['tree']}):")
    for info in got["files"]:
        mode = "x" if info.get("executable") else "-"
        echo(f"  {info['size']:>10} {mode} {info['digest'][:19]}  {_shown(info['path'])}")
    for path, why in sorted(got["skipped"].items()):
        echo(f"  skipped: {_shown(path)} ({why})")


@click.command("diff")
@click.argument("session_id", metavar="SESSION")
@click.argument("from_event", metavar="FROM")
@click.argument("to_event", metavar="TO", required=False)
@json_option
@mapped_errors
@pass_store
def diff_command(
    store: SessionStore, session_id: str, from_event: str, to_event: str | None, as_json: bool
) -> None:
    """What changed in the files from FROM to TO (default: the working directory now)."""
    from infai.agent import diff_at

    say_diff(diff_at(store, session_id, from_event, to_event), as_json)


def say_diff(got: dict[str, Any], as_json: bool) -> None:
    """Print ``diff``'s answer (the local one, or the server's: the same object)."""
    if as_json:
        emit_json(got)
        return
    for item in got["text"]:
        echo(item["diff"], nl=not item["diff"].endswith("\n"))
    for path in got["binary"]:
        echo(f"binary: {_shown(path)}")
    if not got["changes"]:
        echo("no changes")


@click.command("checkout")
@click.argument("session_id", metavar="SESSION")
@click.argument("event_id", metavar="EVENT")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option(
    "--force", is_flag=True, help="Overwrite files changed outside the agent (snapshotted first)."
)
@json_option
@mapped_errors
@pass_store
def checkout_command(
    store: SessionStore, session_id: str, event_id: str, dry_run: bool, force: bool, as_json: bool
) -> None:
    """Put EVENT's files back on disk (the conversation stays at HEAD)."""
    from infai.agent import OnRestore, checkout

    done = checkout(store, session_id, event_id, OnRestore(force=force), dry_run=dry_run)
    answer = {
        "dry_run": dry_run,
        "plan": done.plan,
        "restore": done.event_id,
        "before": done.before_id,
        "touched": done.touched,
        "changed": done.changed,
        "notices": done.notices,
    }
    say_checkout(answer, as_json)


def say_checkout(answer: dict[str, Any], as_json: bool) -> None:
    """Print what a checkout did (the server's answer has these fields too): its
    notices on stderr, then the plan, or with ``as_json`` the answer without them."""
    notices, touched = list(answer["notices"]), list(answer["touched"])
    said = _summary(notices, touched)
    for notice in notices:
        if notice != said:  # the summary is the result: on stdout, below
            echo(f"infai: {notice}", err=True)
    if as_json:
        emit_json({k: v for k, v in answer.items() if k != "notices"})
        return
    _say_plan(answer["plan"], bool(answer["dry_run"]), said)


def _summary(notices: list[str], touched: list[str]) -> str:
    """The notice naming every file the restore changed ("restored 2 files: ...")."""
    if not touched:
        return ""
    return next((n for n in notices if n.startswith("restored ")), "")


def _shown(path: str) -> str:
    """A file name for a line of its own: quoted with escapes, as git does, when it
    holds a newline, tab, quote or backslash (a name with a newline would
    otherwise print a line of its choosing, e.g. a fake ``skipped:``)."""
    if any(c in path for c in '\n\t"\\'):
        return inert_json(path)
    return path


def _say_plan(plan: dict[str, Any], dry_run: bool, said: str) -> None:
    """A dry run: each planned path and what would happen to it; a restore: the
    line naming every file it changed (``restored 2 files: a.txt (+2 -1), ...``).
    Either way, the paths that cannot be restored."""
    actions: list[Any] = list(plan.get("actions", []))
    if dry_run:
        for action in actions:
            if isinstance(action, dict):
                echo(f"  {action.get('op', '?')} {_shown(str(action.get('path', '')))}")
    for path, why in sorted(dict(plan.get("not_restorable", {})).items()):
        echo(f"  cannot restore: {_shown(path)} ({why})")
    if dry_run:
        echo(f"dry run: {len(actions)} path(s) would change; nothing changed")
    else:
        echo(said or "restored: no file changed")
