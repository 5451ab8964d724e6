"""``infai tui`` (and plain ``infai``): the terminal UI, only on a terminal.

The UI reads keys from standard input and draws with escape sequences; on a
pipe, a script or ``< /dev/null`` it would write those sequences into the pipe
and spin waiting for keys that never come. So the command first checks that
standard input is a terminal and otherwise says so, points to ``infai run``
(the headless shell), and exits 2 without importing textual. On a first run
(no config file yet) it offers to set up a model first (:func:`first_run`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import click

from .agent import allow_option, continue_option, harness, model_option, session_option
from .common import come_back_command, echo, store_of
from .errors import BadInput, mapped_errors


def stdin_is_terminal() -> bool:
    """Whether standard input is a terminal the UI can read keys from."""
    stream = sys.stdin
    try:
        return stream is not None and stream.isatty()
    except ValueError:  # a closed stream: click's isatty on a closed file
        return False


NOT_A_TERMINAL = (
    "the terminal UI needs a terminal, and standard input is not one; "
    "for a script or a pipe use `infai run PROMPT` (or `infai chat`)"
)


#: what a first run's answer "no" leaves in the new config file
FIRST_RUN_FILE = """\
# infai's configuration (TOML). No model yet: the built-in offline model answers.
# `infai config model` adds one (OpenAI-compatible, Anthropic or Ollama).
"""


def first_run() -> None:
    """On a first run (no config file, and none named by ``$INFAI_CONFIG``), offer
    to set up a model before the UI opens; asked once: a "no" leaves a config file
    saying how to do it later."""
    if os.environ.get("INFAI_CONFIG"):
        return
    from infai.agent import user_config_path

    from .config_cmd import config_model, write_config

    path = user_config_path()
    if path.exists():
        return
    echo("infai: no model is configured yet; the built-in offline model answers (no network).")
    if click.confirm("Set up a model now?", default=True):
        click.get_current_context().invoke(config_model)
        return
    write_config(path, FIRST_RUN_FILE, private=False)
    echo(f"infai: wrote {path}; `infai config model` sets up a model later")


@click.command("tui")
@session_option
@continue_option
@model_option
@allow_option
@mapped_errors
def tui(
    session_id: str | None = None,
    resume: bool = False,
    model_name: str | None = None,
    allow: tuple[str, ...] = (),
) -> None:
    """The terminal UI (also what plain `infai` opens)."""
    if not stdin_is_terminal():
        raise BadInput(NOT_A_TERMINAL)
    if model_name is None:
        first_run()
    from ..tui import InfaiApp

    store = store_of(click.get_current_context())
    space = harness(store, Path(os.getcwd()), model_name, allow)
    try:
        if session_id is None and resume:
            latest = space.latest_here()
            if latest is None:  # as `run --continue`: said, not a new session in silence
                raise BadInput(
                    f"no session to continue in {space.working_dir}; plain `infai` starts a new one"
                )
            session_id = latest.id
        if session_id is not None:
            store.info(session_id)  # a clear error now rather than inside the UI
    except BaseException:
        asyncio.run(space.aclose())  # the app, which closes it, never ran
        raise
    app = InfaiApp(space, session_id)
    app.run()  # closes the harness as it ends
    if app.left_session is not None:  # not an empty new session (removed as the app ended)
        command = come_back_command(app.left_session, "")
        echo(f"infai: session {app.left_session}; come back with: {command}", err=True)


__all__ = ["FIRST_RUN_FILE", "NOT_A_TERMINAL", "first_run", "stdin_is_terminal", "tui"]
