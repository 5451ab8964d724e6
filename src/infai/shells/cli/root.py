"""The root ``infai`` group: the options every command shares, and plain ``infai``.

The root reads the store options into a :class:`~.common.StoreSpec` (opened
only by a command that needs the store) and, with no command, runs ``tui``
with the TUI's options. It knows no command by import: ``tui`` is looked up by
name among the commands :mod:`.main` named, so no command module is imported
here and none imports this module back. The root is a :class:`LazyGroup`: a
command's module is imported when that command runs (or ``--help`` lists
them all), so ``infai run`` does not pay for the server's, the importers' or
the TUI's imports.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .common import StoreSpec
from .errors import BadInput, InertGroup

TUI_FLAGS = ("--session", "--continue", "--model", "--allow")


class LazyGroup(InertGroup):
    """A group whose commands are named up front and loaded when first looked up.

    ``lazy`` maps a command's name to what builds it (importing its module);
    click asks :meth:`get_command` for the one command a line runs, and
    :meth:`list_commands` for all of them only to print help.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, Callable[[], click.Command]] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.lazy[cmd_name](), cmd_name)
        return self.commands.get(cmd_name)


class RootGroup(LazyGroup):
    """The root group: with ``--remote``, a command resolves to its remote form
    (:attr:`remote_forms`, set by :mod:`.main`: the root imports no command)."""

    #: the remote form of a command by its name (bad input for one that has none)
    remote_forms: Callable[[str], click.Command] | None = None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if ctx.params.get("remote") and name is not None and self.remote_forms is not None:
            return name, self.remote_forms(name), rest
        return name, command, rest


@click.group(cls=RootGroup, invoke_without_command=True)
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="INFAI_HOME",
    help="Store home, and this machine's own files such as the server token "
    "(default: $INFAI_HOME, else ~/.config/infai/harness).",
)
@click.option(
    "--durability",
    type=click.Choice(["fast", "strict"]),
    default="fast",
    show_default=True,
    help="Write sequence for appends (see docs/store-format.md).",
)
@click.option(
    "--store",
    "location",
    envvar="INFAI_STORE",
    metavar="URL|DIR",
    help="Where sessions live: a postgresql:// URL (shared by several machines) "
    "or a directory (default: $INFAI_STORE, else the home).",
)
@click.option(
    "--lock-timeout",
    type=click.FloatRange(min=0),
    help="Seconds to wait for a session that another process is writing (default: 10; `serve`: 2).",
)
@click.option(
    "--remote",
    envvar="INFAI_REMOTE",
    metavar="URL",
    help="Work against `infai serve` at URL instead of a local store "
    "(the TUI with no command; run, search, compact, "
    "session ls|log|tree|show|context|files|diff|checkout|export; docs/remote.md).",
)
@click.option(
    "--token",
    help="With --remote: the server's token (default: $INFAI_SERVER_TOKEN, else `infai login`).",
)
@click.option(
    "--dir",
    "server_dir",
    metavar="DIR",
    help="With --remote and no command: a new session works in DIR on the server "
    "(as `infai attach URL --dir DIR`).",
)
@click.option("--session", "session_id", help="With no command: open this session.")
@click.option(
    "--continue",
    "resume",
    is_flag=True,
    help="With no command: open the newest session of this directory.",
)
@click.option("--model", "model_name", help="With no command: the model (as `infai tui --model`).")
@click.option(
    "--allow", multiple=True, metavar="RULE", help="With no command: as `infai tui --allow`."
)
@click.version_option(package_name="infai")
@click.pass_context
def root(
    ctx: click.Context,
    home: Path | None,
    durability: str,
    location: str | None,
    lock_timeout: float | None,
    remote: str | None,
    token: str | None,
    server_dir: str | None,
    session_id: str | None,
    resume: bool,
    model_name: str | None,
    allow: tuple[str, ...],
) -> None:
    """infai: an agent harness with a durable, branchable session store.

    With no command, opens the terminal UI in the current directory, taking
    the options of `infai tui` (--session, --continue, --model, --allow).
    """
    tui_options = dict(session_id=session_id, resume=resume, model_name=model_name, allow=allow)
    if ctx.invoked_subcommand is not None:
        given = [flag for flag, value in zip(TUI_FLAGS, tui_options.values(), strict=True) if value]
        if given or server_dir is not None:
            raise BadInput(
                f"{given[0] if given else '--dir'} before a command is for the TUI only "
                f"(plain `infai`); give `{ctx.invoked_subcommand}` its options after its name"
            )
    if remote and ctx.invoked_subcommand is None:  # the TUI against the server
        if model_name or allow:
            raise BadInput("--model and --allow are the server's with --remote")
        from .attach import remote_tui

        remote_tui(ctx, remote, token, session_id, resume, server_dir)
        return
    if server_dir is not None:  # a local TUI works where it is started
        raise BadInput(
            "--dir names a directory on the server: give it with --remote "
            "(locally, start infai in DIR)"
        )
    ctx.obj = StoreSpec(
        location=location or None,
        home=home,
        durability="strict" if durability == "strict" else "fast",
        lock_timeout=lock_timeout,
    )
    if ctx.invoked_subcommand is None:
        assert isinstance(ctx.command, click.Group)
        tui = ctx.command.get_command(ctx, "tui")
        if tui is None:
            raise click.UsageError("no command given", ctx)
        ctx.invoke(tui, **tui_options)


__all__ = ["LazyGroup", "root"]
