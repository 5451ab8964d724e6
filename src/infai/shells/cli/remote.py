"""``infai --remote URL …``: the command line against ``infai serve`` on another machine.

With ``--remote`` the root group runs these commands instead of the local ones
(:func:`.remote_forms.remote_command`): ``run`` (the prompt, live text, tool
results and approval questions travel over the API; Ctrl-C cancels the turn on
the server), ``session ls``, ``session log``, ``session tree`` and ``session
show`` here, and ``search``, ``compact`` and ``session context|files|diff|
checkout|export`` in :mod:`.remote_forms`, whose output is the local commands' own (the
server answers in the JSON they print, and the text is drawn by the same
functions). A command that has no remote form says so and changes nothing.
``infai login URL`` keeps a token for a server
(:mod:`infai.shells.remote.tokens`), ``infai logout URL`` drops it.

The token is ``--token``, else ``$INFAI_SERVER_TOKEN``, else the one stored by
``infai login``. What runs where: the turn runs on the server, in the session's
working directory there, under the server's configuration and policy; the
client's own files and configuration are not involved.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from .. import render
from ..inert import inert_json
from .common import echo, emit_json, json_option
from .errors import FAILURE, BadInput

if TYPE_CHECKING:
    from infai.shells.remote import Frame, Remote, RemoteError
    from infai.store import Entry

_REMOTE = "infai.remote"  # the root context's meta key for the open client
#: the commands that have a remote form (shown when one that has not is asked for)
REMOTE_FORMS = "run, search, compact, session ls|log|tree|show|context|files|diff|checkout|export"


def remote_of(ctx: click.Context) -> Remote:
    """The root's client of ``--remote URL``, opened on first use (closed with the
    command line); no token anywhere is bad input naming the three ways to give one."""
    root = ctx.find_root()
    client: Remote | None = root.meta.get(_REMOTE)
    if client is not None:
        return client
    client = connect(str(root.params.get("remote")), root.params.get("token"))
    root.meta[_REMOTE] = client
    root.call_on_close(client.close)
    return client


def connect(url: str, token: str | None) -> Remote:
    """The server's client under the first token given: ``--token``, then
    ``$INFAI_SERVER_TOKEN``, then the one ``infai login URL`` stored; none is bad
    input naming the three ways to give one."""
    import os

    from infai.shells.remote import Remote, stored_token

    token = token or os.environ.get("INFAI_SERVER_TOKEN")
    token = token or guard(lambda: stored_token(url))
    if not token:
        raise BadInput(
            f"no token for {url}: give --token, set INFAI_SERVER_TOKEN or run `infai login {url}`"
        )
    client: Remote = guard(lambda: Remote(url, token))
    return client


def guard(work: Any) -> Any:
    """``work()`` with a :class:`RemoteError` turned into the command line's answer."""
    from infai.shells.remote import RemoteError

    try:
        return work()
    except RemoteError as exc:
        raise remote_answer(exc) from exc


def session_arg(value: str) -> str:
    """A SESSION argument checked as the local commands check it (trimmed, lower-cased;
    bad input in their words, "session id 'x' is not a UUID") before it becomes part
    of a URL: ``../../other`` would otherwise send the token outside the API."""
    return _uuid(value, "session id")


def event_arg(value: str | None) -> str | None:
    """An EVENT argument (None: not given), checked as :func:`session_arg` checks."""
    return None if value is None else _uuid(value, "event id")


#: a UUID as the store takes one (after trimming and lower-casing)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _uuid(value: str, what: str) -> str:
    lowered = value.strip().lower()
    if not _UUID.fullmatch(lowered):  # the store's words (infai.store's check)
        raise BadInput(f"{what} {value!r} is not a UUID")
    return lowered


class RemoteFailure(click.ClickException):
    """A server that cannot be reached or failed: click prints it, exit code 1."""

    exit_code = FAILURE


def remote_answer(exc: RemoteError) -> click.ClickException:
    """A refusal of the user's input as bad input (exit 2), anything else (a server
    that cannot be reached, a server error) as a failure (exit 1)."""
    return BadInput(str(exc)) if exc.bad_input else RemoteFailure(str(exc))


# -- session ---------------------------------------------------------------------------


class RemoteGroup(click.Group):
    """``infai --remote URL session``: a subcommand that only works locally is
    refused by name (a name no form has stays click's "No such command")."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else None
        if name is not None and self.get_command(ctx, name) is None and name in _local_session():
            raise BadInput(
                f"`infai session {name}` does not work with --remote (these do: {REMOTE_FORMS})"
            )
        return super().resolve_command(ctx, args)


def _local_session() -> set[str]:
    """The names of the local ``infai session`` subcommands."""
    from .session import session
    from .share import share_command
    from .workfiles import checkout_command, diff_command, files_command

    extra = (files_command, diff_command, checkout_command, share_command)
    return set(session.commands) | {str(c.name) for c in extra}


@click.group("session", cls=RemoteGroup)
def remote_session() -> None:
    """Sessions on the server (ls, log, tree, show, context, files, diff, checkout, export)."""


@remote_session.command("ls")
@json_option
@click.pass_context
def remote_ls(ctx: click.Context, as_json: bool) -> None:
    """List the server's sessions, as `infai session ls` does."""
    from infai.store import SessionInfo, SessionSummary

    from .session import listing_lines

    listed = guard(lambda: remote_of(ctx).get("/sessions"))["sessions"]
    if as_json:
        emit_json(listed)
        return
    summaries = []
    for obj in listed:
        fields = {k: v for k, v in obj.items() if k not in ("title", "first_prompt", "events")}
        info = SessionInfo.from_obj(fields, "the server's session list")
        summaries.append(SessionSummary(info, obj.get("first_prompt"), int(obj["events"])))
    for line in listing_lines(summaries):
        echo(line)


def _timeline(ctx: click.Context, session_id: str, every: bool) -> dict[str, Any]:
    """The server's answer for the session's events: ``{head, events[, leaves]}``."""
    path = f"/sessions/{session_arg(session_id)}/events"
    answer: dict[str, Any] = guard(lambda: remote_of(ctx).get(path, all=every or None))
    return answer


def _entries(answer: dict[str, Any]) -> list[Entry]:
    """The timeline's entries (a backend's may carry more fields, such as the file
    store's ``location``: the JSON forms print them, the text forms need none)."""
    from infai.shells.remote import entry_of

    return [entry_of(obj) for obj in answer["events"]]


@remote_session.command("log")
@click.argument("session_id", metavar="SESSION")
@click.option("--all", "show_all", is_flag=True, help="Every event, not just the active path.")
@json_option
@click.pass_context
def remote_log(ctx: click.Context, session_id: str, show_all: bool, as_json: bool) -> None:
    """The active path on the server, as `infai session log` shows it."""
    answer = _timeline(ctx, session_id, show_all)
    if as_json:  # the server drew it with the local command's own function
        emit_json(answer["events"])
        return
    for entry in _entries(answer):
        echo(render.entry_line(entry, answer.get("head")))


@remote_session.command("tree")
@click.argument("session_id", metavar="SESSION")
@json_option
@click.pass_context
def remote_tree(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Every branch of the server's session, as `infai session tree` draws it."""
    answer = _timeline(ctx, session_id, True)
    if as_json:
        emit_json(answer)
        return
    for line in render.tree_lines(_entries(answer), answer.get("head")):
        echo(line)


@remote_session.command("show")
@click.argument("session_id", metavar="SESSION")
@click.argument("event_id", metavar="EVENT")
@json_option
@click.pass_context
def remote_show(ctx: click.Context, session_id: str, event_id: str, as_json: bool) -> None:
    """One event with its record, as `infai session show` prints it."""
    path = f"/sessions/{session_arg(session_id)}/events/{event_arg(event_id)}"
    from infai.shells.remote import event_of

    event = event_of(guard(lambda: remote_of(ctx).get(path)))
    if as_json:
        emit_json(render.event_json(event))
    else:
        echo(render.event_text(event))


# -- run -------------------------------------------------------------------------------


@click.command("run")
@click.argument("prompt", required=False)
@click.option("--session", "session_id", help="Continue this session on the server.")
@click.option(
    "--continue", "resume", is_flag=True, help="Continue the server's most recent session."
)
@click.option("--from", "from_event", help="Branch: continue from this older event.")
@click.option("--force", is_flag=True, help="With --from: restore over files changed outside.")
@click.option("--keep-files", is_flag=True, help="With --from: continue without touching files.")
@click.option("--model", "model_name", help="A new session's model (the server's names).")
@click.option("--json", "as_json", is_flag=True, help="Print agent events as JSON lines.")
@click.pass_context
def remote_run(
    ctx: click.Context,
    prompt: str | None,
    session_id: str | None,
    resume: bool,
    from_event: str | None,
    force: bool,
    keep_files: bool,
    model_name: str | None,
    as_json: bool,
) -> None:
    """Run one prompt on the server to completion and print the answer.

    Approval questions are asked here when standard input is a terminal; else
    they are denied, as a local headless run denies them. Ctrl-C cancels the
    turn on the server (exit 130), as SIGTERM and SIGHUP do: even when started as a
    shell's background job, which inherits SIGINT ignored (as the local ``run``)."""
    from .agent import _prompt_text, _terminate_as_interrupt

    text = _prompt_text(prompt)
    from_event = event_arg(from_event)
    client = remote_of(ctx)
    sid = _session_for(client, session_id, resume, model_name)
    body: dict[str, Any] = {"text": text, "stream": True}
    if from_event:
        body.update({"from": from_event, "force": force, "keep_files": keep_files})
    try:
        with _terminate_as_interrupt():
            outcome = guard(lambda: _turn(client, sid, body, as_json))
    except KeyboardInterrupt:  # leaving the stream cancels the turn on the server
        echo(f"\ninfai: interrupted (session {sid})", err=True)
        sys.exit(130)
    if not as_json:
        echo(f"session {sid}", err=True)
    sys.exit(0 if outcome == "done" else 1)


def _session_for(client: Remote, given: str | None, resume: bool, model: str | None) -> str:
    if given and resume:
        raise BadInput("give --session or --continue, not both")
    if given:
        return session_arg(given)
    if resume:
        listed = guard(lambda: client.get("/sessions"))["sessions"]
        if not listed:
            raise BadInput("--continue: the server has no session yet")
        return str(listed[0]["id"])
    created = guard(lambda: client.post("/sessions", {"model": model} if model else {}))
    return str(created["id"])


def _turn(client: Remote, sid: str, body: dict[str, Any], as_json: bool) -> str:
    """Stream one turn: print it as the local ``run`` does; the outcome.

    A client that falls too far behind (a model faster than the network) is
    told ``lagged`` and the turn goes on without it: it then watches the session
    from the last event it saw, and prints the rest of the answer from the
    settled messages (the pieces it missed are gone). Ctrl-C while it watches
    cancels the turn, as leaving the turn's own stream does."""
    shown = _Shown(client, sid, as_json)
    frames = client.stream(f"/sessions/{sid}/prompt", body)
    while True:
        lagged = False
        for frame in frames:
            if frame.name == "approval":
                _approve(client, sid, frame.data)
            elif frame.name == "lagged":
                lagged = shown.behind = True
            elif shown.take(frame):
                shown.finish()
                return shown.outcome
        if not lagged:
            break
        frames = _watched(client, sid, shown)
    shown.finish()
    return shown.outcome


def _watched(client: Remote, sid: str, shown: _Shown) -> Iterator[Frame]:
    """The session's stream after the last event ``shown`` saw; Ctrl-C cancels the turn."""
    try:
        yield from client.stream(f"/sessions/{sid}/stream", after=shown.last_event)
    except KeyboardInterrupt:
        from infai.shells.remote import RemoteError

        with contextlib.suppress(RemoteError):  # over already, or the server is gone
            client.post(f"/sessions/{sid}/cancel", {"turn": shown.turn} if shown.turn else {})
        raise


class _Shown:
    """A turn's frames printed as ``infai run`` prints its events."""

    def __init__(self, client: Remote, sid: str, as_json: bool) -> None:
        self.client, self.sid, self.as_json = client, sid, as_json
        self.mid_line = False
        self.outcome = "error"
        self.error: str | None = "the stream ended before the turn did"
        #: the turn (from its first frame) and the last settled event seen
        self.turn: str | None = None
        self.last_event: str | None = None
        #: the answer's text printed since the last settled message
        self.said = ""
        #: whether frames were lost: text comes from the settled messages instead
        self.behind = False

    def take(self, frame: Frame) -> bool:
        """Show one frame; True at the turn's end."""
        if frame.name == "ready":  # watching again: is the turn still running?
            if self.turn is not None and frame.data.get("turn") == self.turn:
                return False
            last = frame.data.get("last_turn") or {}
            if self.turn is not None and last.get("turn") == self.turn:  # how it ended
                from infai.shells.remote import Frame

                return self.take(Frame("turn_ended", last))
            self.error = (  # it ended while this client was away: its end was not seen
                f"the turn ended while this client was behind; `infai session log {self.sid}`"
                " shows how"
            )
            return True
        self.turn = self.turn or frame.data.get("turn")
        data = {k: v for k, v in frame.data.items() if k != "turn"}
        if frame.name == "settled":
            self.last_event = frame.id or self.last_event
            self._settled(self._resolved(data))
        elif frame.name == "delta" and not self.behind:
            self._delta(data)
        elif frame.name == "turn_ended":
            self.outcome = str(data["outcome"])
            self.error = str(data["error"]) if data.get("error") else None
            if self.as_json:
                self._json({"type": "end", **data})
            return True
        return False

    def _resolved(self, event: dict[str, Any]) -> dict[str, Any]:
        """A settled event with its blob's record fetched (the stream leaves it out)."""
        if event.get("record") is None and event.get("digest"):
            return dict(self.client.get(f"/sessions/{self.sid}/events/{event['id']}"))
        return event

    def _json(self, obj: dict[str, Any]) -> None:
        click.echo(inert_json({**obj, "session": self.sid}))

    def _delta(self, data: dict[str, Any]) -> None:
        if self.as_json:
            self._json({"type": "stream", **data})
        elif data.get("kind") == "text":
            text = str(data.get("text", ""))
            echo(text, nl=False)
            self.said += text
            self.mid_line = True
        elif data.get("kind") == "notice":
            self._end_line()
            echo(f"infai: {data.get('message', '')}", err=True)

    def _settled(self, event: dict[str, Any]) -> None:
        from infai.store import ToolResultRecord, record_from_obj

        from .agent import _result_line

        if self.as_json:
            self._json({"type": "saved", "event": event})
            return
        if event.get("kind") == "message" and self.behind and event.get("role") == "assistant":
            self._rest_of(str((event.get("record") or {}).get("content") or ""))
        if event.get("kind") == "message":
            self.said = ""
            self._end_line()
        elif event.get("kind") == "tool_result" and event.get("record") is not None:
            record = record_from_obj("tool_result", event["record"])
            if isinstance(record, ToolResultRecord):
                echo(_result_line(record), err=True)

    def _rest_of(self, content: str) -> None:
        """A settled answer's text that its lost pieces did not print."""
        rest = content[len(self.said) :] if content.startswith(self.said) else content
        if rest:
            echo(rest, nl=False)
            self.mid_line = True

    def _end_line(self) -> None:
        if self.mid_line:
            echo()
            self.mid_line = False

    def finish(self) -> None:
        self._end_line()
        if self.error and not self.as_json:
            echo(f"infai: {self.error}", err=True)


def _approve(client: Remote, sid: str, question: dict[str, Any]) -> None:
    """Answer a permission question: asked on the terminal, else denied."""
    tool, subject = question.get("tool", "?"), question.get("subject", "")
    answer: dict[str, Any] = {"id": question["id"]}
    if not sys.stdin.isatty():
        answer.update(answer="deny", reason="asks for approval, and nobody can approve here")
    else:
        echo(f"infai: {tool} {subject}: {question.get('reason', '')}", err=True)
        always = question.get("always") or []
        offer = f" [a]lways ({', '.join(map(str, always))})" if always else ""
        choice = click.prompt(
            f"allow? [y]es{offer} [n]o", default="n", show_default=False, err=True
        ).strip()
        if choice in ("y", "yes"):
            answer["answer"] = "allow"
        elif choice in ("a", "always") and always:
            answer["answer"] = "allow-always"
        else:
            answer["answer"] = "deny"
    client.post(f"/sessions/{sid}/approvals", answer)


# -- login -----------------------------------------------------------------------------


@click.command("login")
@click.argument("url")
@click.option("--token", help="The server's token (default: asked, hidden).")
def login_command(url: str, token: str | None) -> None:
    """Keep a server's token (mode 0600) so `infai --remote URL` needs no --token.

    The token is checked against the server first; a refused one is not kept."""
    from infai.shells.remote import Remote, store_token

    given = str(token or click.prompt("token", hide_input=True, err=True))
    with guard(lambda: Remote(url, given)) as client:
        guard(lambda: client.get("/sessions"))
    path = guard(lambda: store_token(url, given))
    echo(f"token kept for {client.url} in {path}", err=True)


@click.command("logout")
@click.argument("url")
def logout_command(url: str) -> None:
    """Drop the token `infai login` kept for URL."""
    from infai.shells.remote import forget_token

    if not guard(lambda: forget_token(url)):
        raise BadInput(f"no token kept for {url}")
    echo(f"token for {url} dropped", err=True)
