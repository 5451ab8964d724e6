"""``infai run``, ``chat``, ``compact`` and ``models``: the agent from the command line.

``run`` sends one prompt and prints the answer as it streams (or, with
``--json``, one JSON object per agent event); it exits 0 when the turn ends
normally, 1 when it fails (a provider error, too many steps), 2 on bad input,
and 130 when interrupted (the session stays valid; the turn is marked
interrupted). ``chat`` is a plain line-based loop over the same session object
(SIGTERM and SIGHUP stop its answer and end it with 130; Ctrl-C only stops the
answer). Each signal does so even when inherited as ignored, as a script's
background job inherits SIGINT.
In these headless shells a call the policy would ask about is denied unless an
``--allow`` rule allows it.

:func:`harness` and :func:`open_session` are how every command that runs the
agent (these, ``tui`` and ``serve``) gets its configuration, model, rules and
session: all of it is assembled by :class:`~infai.agent.Harness`, nothing
here. A user's mistake there (a bad configuration, model name or rule) is an
error of the tree, answered as bad input by :mod:`.errors`. The session and
the harness are closed with ``aclose`` in the event loop that used them;
each closes the models it owns, so none is closed twice.

``--json`` prints each agent event in the one JSON form,
:func:`infai.agent.event_to_obj` (the objects the server sends as SSE data),
with the session's id added as ``session``: a script that runs several
sessions, or starts a new one, knows which one each line belongs to.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from infai.store import SessionStore, StoreError

from .. import render
from ..inert import inert_json
from .common import (
    come_back_command,
    echo,
    emit_json,
    json_option,
    pass_store,
    report_recovery,
)
from .errors import BadInput, mapped_errors

if TYPE_CHECKING:
    from infai.agent import AgentSession, Harness
    from infai.store import ToolResultRecord
    from infai.tools import Approver

T = TypeVar("T")


def harness(
    store: SessionStore,
    working_dir: Path,
    model_name: str | None = None,
    allow: tuple[str, ...] = (),
    approver: Approver | None = None,
) -> Harness:
    """The command's :class:`~infai.agent.Harness`, where everything it runs is built.

    A bad configuration, model name or ``--allow`` rule raises its own error,
    which the exit table (:mod:`.errors`) answers as bad input; configuration
    warnings go to stderr.
    """
    from infai.agent import Harness

    space = Harness.for_directory(
        working_dir, store=store, model=model_name, allow=allow, approver=approver
    )
    for notice in space.start_notices():
        echo(f"infai: {notice}", err=True)
    unset = space.config.default_model == "offline" and not space.config.models
    if model_name is None and unset and _stderr_is_terminal():
        echo(f"infai: {no_model_hint()}", err=True)
    return space


def no_model_hint() -> str:
    """What a person running infai with no model configured is told (the built-in
    offline model answers then), naming the command that sets one up."""
    from infai.agent import user_config_path

    return (
        "no model is configured, so the built-in offline model answers; "
        f"`infai config model` sets one up (in {user_config_path()})"
    )


def _stderr_is_terminal() -> bool:
    return sys.stderr is not None and sys.stderr.isatty()


def open_session(
    store: SessionStore,
    session_id: str | None,
    resume: bool,
    model_name: str | None,
    allow: tuple[str, ...],
    working_dir: Path,
    from_event: str | None = None,
) -> tuple[Harness, AgentSession]:
    """The harness and the session a command runs the agent in (None: a new one;
    ``resume``: this directory's newest; ``from_event`` alone: the session of this
    directory holding that event). Close both with :func:`_close`.

    Everything is checked before anything is created: a bad event id, or one no
    session here holds, creates no session.
    """
    if session_id is not None:
        # the session's own directory decides the configuration and rules, as it
        # decides where its tools run, wherever the command is started from
        try:
            kept = store.info(session_id).working_dir
        except StoreError:
            kept = None  # opening it below says what is wrong
        if kept and Path(kept).is_dir():
            working_dir = Path(kept)
    space = harness(store, working_dir, model_name, allow)
    try:
        if session_id is None and resume:
            latest = space.latest_here()
            if latest is None:
                raise BadInput(f"no session to continue in {space.working_dir}")
            session_id = latest.id
        elif session_id is None and from_event is not None:
            session_id = space.session_of_event(from_event)
            if session_id is None:
                raise BadInput(
                    f"no session of {space.working_dir} holds event {from_event}; "
                    "name its session with --session"
                )
        session = space.open(session_id)
    except BaseException:
        asyncio.run(space.aclose())  # the model built for it holds connections
        raise
    for notice in space.take_notices():  # its own directory's file, if not this one
        echo(f"infai: {notice}", err=True)
    report_recovery(store, session.session_id)
    for notice in session.notices:  # an interrupted restore of files, recovered
        echo(f"infai: {notice}", err=True)
    return space, session


async def _close(space: Harness, session: AgentSession) -> None:
    """Close the session, then the harness, in the event loop that used them; each
    closes the models it owns (an SDK client's connections belong to the loop)."""
    try:
        await session.aclose()
    finally:
        await space.aclose()


def _drive(space: Harness, session: AgentSession, work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work()`` in a new event loop, then close the session and the harness
    in it, whatever happened (Ctrl-C, SIGTERM and SIGHUP included: each ends in
    KeyboardInterrupt once the turn has stopped and everything is closed)."""
    stopped_by: list[int] = []

    async def main() -> T:
        restore = _signals_stop_the_task(stopped_by)
        try:
            return await work()
        finally:
            try:
                await _close(space, session)
            finally:
                restore()

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if stopped_by:
            raise KeyboardInterrupt from None
        raise
    finally:
        session.close()  # a no-op once closed: the writer's lock is never left held


async def _turn(session: AgentSession, prompt: str, as_json: bool) -> str:
    from infai.agent import Saved, Streamed, TurnEnded, event_to_obj
    from infai.llm import Notice, TextDelta
    from infai.store import ToolResultRecord

    outcome, error, mid_line = "done", None, False
    async for event in session.prompt(prompt):
        if as_json:  # one line, naming the session (a script may run several at once)
            click.echo(inert_json({**event_to_obj(event), "session": session.session_id}))
        elif isinstance(event, Streamed) and isinstance(event.event, TextDelta):
            echo(event.event.text, nl=False)
            mid_line = True
        elif isinstance(event, Streamed) and isinstance(event.event, Notice):
            if mid_line:
                echo()
                mid_line = False
            echo(f"infai: {event.event.message}", err=True)
        elif isinstance(event, Saved) and event.event.kind == "message" and mid_line:
            echo()  # the streamed message is complete
            mid_line = False
        elif isinstance(event, Saved) and isinstance(event.event.record, ToolResultRecord):
            echo(_result_line(event.event.record), err=True)
        if isinstance(event, TurnEnded):
            outcome, error = event.outcome, event.error
    if mid_line:
        echo()
    if error:
        echo(f"infai: {error}", err=True)
    return outcome


#: characters of a tool's error shown on stderr (an ok result shows its first line)
ERROR_SHOWN = 2000


def _result_line(result: ToolResultRecord) -> str:
    """A tool result as the headless shells show it: an error whole (it is what the
    user needs to act on), up to :data:`ERROR_SHOWN` characters; else its first line."""
    if result.is_error:
        text = result.content.strip()
        cut = f" [... {len(text) - ERROR_SHOWN} more characters]" if len(text) > ERROR_SHOWN else ""
        return f"[{result.name} error] {text[:ERROR_SHOWN]}{cut}"
    first = (result.content.splitlines() or [""])[0]
    more = " ..." if len(first) > 200 or "\n" in result.content.strip() else ""
    return f"[{result.name} ok] {first[:200]}{more}"


#: what stops a turn of ``run``: Ctrl-C, ``timeout``, a supervisor, a closed terminal
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP stop a turn alike, whatever their inherited
    disposition: the stream and any running tool stop, the turn is marked
    interrupted, and no tool process is left behind.

    A shell starts background jobs (``sh -c 'infai run ... &'``) with SIGINT
    ignored, and Python then leaves it ignored: a handler is installed for each
    signal here explicitly. It raises KeyboardInterrupt itself rather than
    re-sending SIGINT, which could be ignored too. While the event loop runs,
    :func:`_signals_stop_the_task` takes over.
    """

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = {s: signal.signal(s, interrupt) for s in STOPPING}
    try:
        yield
    finally:
        for number, handler in old.items():
            signal.signal(number, handler)


def _signals_stop_the_task(stopped_by: list[int]) -> Callable[[], None]:
    """Route SIGINT, SIGTERM and SIGHUP through the running loop: they cancel the main task.

    Store and tool work runs in worker threads, and the kernel may hand a
    process signal to any thread: a handler of the loop's own (its wakeup fd)
    wakes the main thread at once, whichever thread caught it (a quiet
    ``sleep 30`` tool would otherwise hold it asleep in ``select`` for 30 s).
    Cancelling the task is what Ctrl-C does under ``asyncio.run``, but
    ``asyncio.run`` does it only when SIGINT was not inherited as ignored; a
    handler of the loop's own does it whatever the disposition was. The signal
    is noted in ``stopped_by`` so the caller turns the cancellation into
    KeyboardInterrupt. Returns what puts the previous handlers back.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    numbers = STOPPING
    previous = {number: signal.getsignal(number) for number in numbers}

    def stop(number: int) -> None:
        stopped_by.append(number)
        if task is not None:
            task.cancel()

    for number in numbers:
        loop.add_signal_handler(number, stop, number)

    def restore() -> None:
        for number, handler in previous.items():
            loop.remove_signal_handler(number)
            signal.signal(number, handler)

    return restore


session_option = click.option("--session", "session_id", help="Continue this session.")
continue_option = click.option(
    "--continue", "resume", is_flag=True, help="Continue the newest session of this directory."
)
model_option = click.option(
    "--model",
    "model_name",
    help="offline, provider:model (openai:gpt-4.1) or a configured name "
    "(default: the config's 'model', else offline).",
)
allow_option = click.option(
    "--allow",
    multiple=True,
    metavar="RULE",
    help="Allow calls matching 'TOOL [PATTERN]', e.g. --allow 'bash git status*'.",
)


def _prompt_text(prompt: str | None) -> str:
    """The prompt given, or (none, or ``-``) standard input's text; never empty."""
    if prompt is None or prompt == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise BadInput("no prompt: give one as an argument or on standard input")
        prompt = sys.stdin.read()
    if not prompt.strip():
        raise BadInput("the prompt is empty")
    return prompt


@click.command("run")
@click.argument("prompt", required=False)
@session_option
@continue_option
@click.option("--from", "from_event", help="Branch: continue from this older event.")
@click.option(
    "--force",
    is_flag=True,
    help="With --from: restore the event's files even over files changed outside the "
    "agent (they stay recoverable from the 'before restore' snapshot).",
)
@click.option(
    "--keep-files", is_flag=True, help="With --from: continue without touching the files."
)
@model_option
@allow_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print agent events as JSON lines (each names its session).",
)
@mapped_errors
@pass_store
def run(
    store: SessionStore,
    prompt: str | None,
    session_id: str | None,
    resume: bool,
    from_event: str | None,
    force: bool,
    keep_files: bool,
    model_name: str | None,
    allow: tuple[str, ...],
    as_json: bool,
) -> None:
    """Run one prompt to completion and print the answer.

    PROMPT may be left out (or be '-') to read it from standard input. With
    --from, the event's files are put back first (after the files now are
    recorded); files changed outside the agent make it refuse (exit 2, nothing
    changed) unless --force.
    """
    from infai.agent import OnRestore

    text = _prompt_text(prompt)
    space, session = open_session(
        store, session_id, resume, model_name, allow, Path(os.getcwd()), from_event
    )

    session.on_restore = OnRestore(force=force, keep_files=keep_files)

    async def turn() -> str:
        if from_event:
            await asyncio.to_thread(session.select, from_event)
        return await _turn(session, text, as_json)

    try:
        with _terminate_as_interrupt():
            outcome = _drive(space, session, turn)
    except KeyboardInterrupt:
        echo(f"\ninfai: interrupted (session {session.session_id})", err=True)
        sys.exit(130)
    if not as_json:
        echo(f"session {session.session_id}", err=True)
    sys.exit(0 if outcome == "done" else 1)


@click.command("compact")
@click.argument("session_id", metavar="SESSION")
@model_option
@json_option
@mapped_errors
@pass_store
def compact_command(
    store: SessionStore, session_id: str, model_name: str | None, as_json: bool
) -> None:
    """Summarise the session's active context into a compaction event (prints its id;
    with --json, the event)."""
    space, session = open_session(store, session_id, False, model_name, (), Path(os.getcwd()))
    event = _drive(space, session, session.compact)  # CompactionFailed: exit 1
    if as_json:
        emit_json(render.event_json(event))
    else:
        echo(event.id)


#: what ``/help`` prints in ``infai chat``
CHAT_HELP = """\
Each line is sent as a prompt; the answer streams below it.
  /help         this help
  /quit, /exit  leave (so do Ctrl-D and Ctrl-C at the prompt)
  Ctrl-C        during an answer: stop it (what was said is kept)
A line that is a slash and one word is a command here and is never sent."""

#: a line that is a chat command rather than a prompt: a slash and one word
_COMMAND = re.compile(r"/[A-Za-z][A-Za-z0-9_-]*")


def _chat_lines(interactive: bool) -> Iterator[str]:
    """The prompts typed, stripped, blank ones skipped; shows the ``>`` marker on
    stderr before each when a person is typing (not when stdin is a file or a pipe).
    Ends at end of input, ``/quit``, ``/exit`` or Ctrl-C at the prompt; answers
    ``/help`` and any other command itself."""
    while True:
        if interactive:
            echo("> ", err=True, nl=False)
        try:
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            echo(err=True)
            return
        if not line:
            if interactive:
                echo(err=True)  # end the marker's line
            return
        text = line.strip()
        if text in ("/quit", "/exit"):
            return
        if text == "/help":
            echo(CHAT_HELP, err=True)
        elif _COMMAND.fullmatch(text):
            echo(f"infai: unknown command {text}; /help lists them (nothing was sent)", err=True)
        elif text:
            yield text


def _stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def _chat_turn(runner: asyncio.Runner, session: AgentSession, text: str) -> bool:
    """One prompt of ``chat``; True when SIGTERM or SIGHUP stopped it (the chat ends).

    Ctrl-C stops the answer and the chat goes on; SIGTERM and SIGHUP stop it the
    same way, then end the chat. Each does so whatever the signal's inherited
    disposition (see :func:`_signals_stop_the_task`).
    """
    stopped_by: list[int] = []

    async def turn() -> None:
        restore = _signals_stop_the_task(stopped_by)
        try:
            await _turn(session, text, as_json=False)
        finally:
            restore()

    try:
        runner.run(turn())
    except asyncio.CancelledError:
        if not stopped_by:
            raise
        echo("\ninfai: interrupted", err=True)
    except KeyboardInterrupt:  # a signal just before the loop's handlers were in place
        echo("\ninfai: interrupted", err=True)
    return any(number != signal.SIGINT for number in stopped_by)


@click.command("chat")
@session_option
@continue_option
@model_option
@allow_option
@mapped_errors
@pass_store
def chat(
    store: SessionStore,
    session_id: str | None,
    resume: bool,
    model_name: str | None,
    allow: tuple[str, ...],
) -> None:
    """A line-based chat: each line is a prompt; '/help' lists the commands, '/quit'
    (or end of input) leaves and prints the command that comes back to the session.

    A prompt marker ('> ') is shown on stderr when standard input is a terminal.
    A new session left empty (no prompt was sent) is removed again on the way out.
    Ctrl-C stops an answer; SIGTERM or SIGHUP stop it and end the chat (exit 130).
    """
    space, session = open_session(store, session_id, resume, model_name, allow, Path(os.getcwd()))
    created = session_id is None and not resume
    terminated = False
    # one event loop for the whole chat: an SDK client's connections belong to it
    with session, asyncio.Runner() as runner, _terminate_as_interrupt():
        echo(f"session {session.session_id} ({session.model.name}); /help, /quit", err=True)
        try:
            for text in _chat_lines(_stdin_is_terminal()):
                if terminated := _chat_turn(runner, session, text):
                    break
        finally:
            empty = session.view.count == 0
            runner.run(_close(space, session))
    if created and empty:
        store.remove_session(session.session_id)
        echo("infai: nothing was sent; the new session was removed", err=True)
    else:
        command = come_back_command(session.session_id, "chat")
        echo(f"infai: session {session.session_id}; come back with: {command}", err=True)
    if terminated:
        sys.exit(130)


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per model.")
@mapped_errors
def models_command(as_json: bool) -> None:
    """List the models you can name with --model (built-in and configured)."""
    from infai.agent import describe_models, load_config

    config = load_config(Path(os.getcwd()))  # a ConfigError is bad input
    for warning in config.warnings:
        echo(f"infai: {warning}", err=True)
    rows = describe_models(config)
    if as_json:
        for row in rows:
            click.echo(inert_json(dict(row)))
        return
    for row in rows:
        mark = "*" if row["name"] == config.default_model else " "
        line = f"{mark} {row['name']:<20} {row['provider']:<10} {row['model']}"
        if "context_window" in row:
            line += f"  window {row['context_window']}"
            if row.get("base_url"):
                line += f"  at {row['base_url']}"
            elif not row["key_set"]:  # a local server (a base URL) may need none
                line += f"  (no key: {row['key_env']})"
        echo(line)
    from infai.llm import provider_names

    echo(f"  PROVIDER:MODEL names any model of {', '.join(provider_names())}", err=True)
    sources = ", ".join(str(p) for p in config.sources) or "no config file"
    echo(f"  config: {sources}; * marks the default", err=True)


__all__ = [
    "chat",
    "compact_command",
    "harness",
    "models_command",
    "no_model_hint",
    "open_session",
    "run",
]
