"""``infai search``: full-text search over every session and every branch.

Model, in prose: the store answers (:meth:`infai.store.SessionStore.search`);
this command only renders. Each hit is one line of facts (session, event, a
``*`` when the event is on the session's HEAD path, else ``branch``, its time
and kind) and one line of snippet with the matched words highlighted; rich
draws the highlight, and text from the sessions is printed as text (rich
markup and control characters in it are not interpreted). ``--json`` prints the
answer as the store gives it (``SearchResults.to_obj``: the query, the window,
the hits), the same object the server answers. When only a very common word's
newest matches were looked at, a line on stderr says so (``window`` in JSON).
``--rebuild`` builds the index again first, with a progress bar on stderr
(without a query it only rebuilds); a damaged index the store had to rebuild by
itself is named on stderr too. A session whose damaged events the index had to
leave out is named in a warning on stderr (and under ``damaged`` in JSON); the
search still answers from everything that verifies, and exits 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from infai.store import KINDS, DamagedSession, SearchHit, SearchResults, SessionStore

from .common import echo, emit_json, json_option, pass_store
from .errors import mapped_errors


def _safe(text: str) -> str:
    return text if text.isprintable() else "".join(c if c.isprintable() else "?" for c in text)


def hit_text(hit: SearchHit) -> Any:
    """The two lines of one hit as rich Text (never parsed as markup)."""
    from rich.text import Text

    where = "*" if hit.on_head_path else "branch"
    name = f" {_safe(hit.session_name)}" if hit.session_name else ""
    head = Text()
    head.append(hit.session_id, style="cyan")
    head.append(name, style="bold")
    head.append(f"  {hit.event_id} #{hit.seq}  ")
    head.append(where, style="green" if hit.on_head_path else "yellow")
    head.append(f"  {hit.timestamp}  {hit.kind}/{hit.role}", style="dim")
    snippet = Text("    " + _safe(hit.snippet))
    for start, end in hit.marks:
        snippet.stylize("bold reverse", start + 4, end + 4)
    return Text("\n").join([head, snippet])


def _warn(damaged: list[DamagedSession]) -> None:
    for session in damaged:
        echo(f"infai: warning: {_safe(session.note())}", err=True)


def _rebuild(store: SessionStore) -> list[DamagedSession]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("indexing sessions"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("index", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        damaged = store.rebuild_search_index(progress)
    echo("infai: search index rebuilt", err=True)
    return damaged


F = TypeVar("F", bound=Callable[..., Any])


def search_options(rebuild_help: str) -> Callable[[F], F]:
    """QUERY and the options of ``infai search``, written once for the local command
    and its ``--remote`` form (:mod:`.remote_forms`), so the two take the same
    line; only what ``--rebuild`` says differs (remotely it is refused)."""
    decorators = (
        click.argument("query", required=False),
        click.option(
            "--session", "session_id", metavar="SESSION", help="Only this session's events."
        ),
        click.option(
            "--dir", "working_dir", metavar="DIR", help="Only sessions working in DIR or below."
        ),
        click.option("--kind", type=click.Choice(KINDS), help="Only events of this kind."),
        click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True),
        click.option("--rebuild", is_flag=True, help=rebuild_help),
        json_option,
    )

    def apply(command: F) -> F:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


@click.command("search")
@search_options("Build the search index again first.")
@mapped_errors
@pass_store
def search_command(
    store: SessionStore,
    query: str | None,
    session_id: str | None,
    working_dir: str | None,
    kind: str | None,
    limit: int,
    rebuild: bool,
    as_json: bool,
) -> None:
    """Search every session and branch: words, "phrases", pref*, -word, a OR b.

    With --rebuild and no QUERY, only build the index again."""
    if query is None and not rebuild:
        raise click.UsageError("Missing argument 'QUERY' (or give --rebuild alone).")
    damaged = _rebuild(store) if rebuild else []
    if query is None:
        _warn(damaged)
        if as_json:
            emit_json({"rebuilt": True, "damaged": [d.to_obj() for d in damaged]})
        return
    hits = store.search(query, session=session_id, working_dir=working_dir, kind=kind, limit=limit)
    for note in store.index_notes:
        echo(f"infai: repaired: {note}", err=True)
    say_results(hits, query, as_json)


def say_results(hits: SearchResults, query: str, as_json: bool) -> None:
    """Print a search's answer (the local store's, or the server's read back)."""
    _warn(hits.damaged)
    if as_json:
        emit_json(hits.to_obj(query))
        return
    if not hits:
        echo("no matches", err=True)
        return
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    for hit in hits:
        console.print(hit_text(hit))
    if (cut := hits.window_note()) is not None:
        echo(f"infai: {cut}", err=True)
