"""The command line's one answer to every error: a line on stderr and an exit code.

The codes are a contract that scripts rely on:

- **2, bad input**: the user asked for something that cannot be: an unknown
  session or event, an id that is not a UUID, malformed JSON, a model name or
  configuration that cannot be used, an ``--allow`` rule that does not parse,
  a token too short. Nothing was changed.
- **1, a failure**: the store is corrupt, a write or fsync failed, a writer lock
  was not released in time, the database cannot be reached, a compaction could
  not be made; any other :class:`~infai.errors.InfaiError`.

:data:`exit_table` is the single table from the error tree (drawn in
:mod:`infai.errors`) to these codes, and :func:`mapped_errors` is the one place
that applies it; every command runs under it. It matches classes by name and
by ``isinstance``, never ``ValueError`` or ``KeyError``: those are bugs and keep
their traceback. The table's classes are imported only when an error is being
answered, so a command's cold start pays nothing for the agent's modules.

An error's message often quotes input (a file name, an option's value, a
session's name): :class:`InertGroup`, the root group's class, makes every
message click prints inert (:mod:`infai.shells.inert`), click's own usage
errors included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

import click

from infai.errors import InfaiError

from ..inert import inert

F = TypeVar("F", bound=Callable[..., Any])

BAD_INPUT = 2
FAILURE = 1


class BadInput(click.ClickException, InfaiError):
    """Input the command refuses, having changed nothing: click prints it, exit code 2."""

    exit_code = BAD_INPUT


def exit_table() -> list[tuple[type[BaseException], int, str]]:
    """(error class, exit code, prefix of the message), most specific first."""
    from infai.agent import CompactionFailed, ConfigError, RestoreRefused
    from infai.llm import ModelUnavailable
    from infai.store import (
        CorruptionError,
        EventNotFound,
        InvalidInput,
        SessionExists,
        SessionNotFound,
        StoreError,
    )
    from infai.tools import RuleError

    return [
        (InvalidInput, BAD_INPUT, ""),
        (SessionNotFound, BAD_INPUT, ""),
        (EventNotFound, BAD_INPUT, ""),
        (SessionExists, BAD_INPUT, ""),
        (ModelUnavailable, BAD_INPUT, ""),
        (ConfigError, BAD_INPUT, ""),
        (RuleError, BAD_INPUT, ""),
        (RestoreRefused, BAD_INPUT, ""),
        (CorruptionError, FAILURE, "corruption: "),
        (CompactionFailed, FAILURE, "compaction failed, nothing changed: "),
        (StoreError, FAILURE, ""),
        (InfaiError, FAILURE, ""),
    ]


#: what a model that cannot be used is answered with, after why
MODEL_HINT = "to set up a model: infai config model (`infai models` lists them)"


def _hint(exc: BaseException) -> str:
    """How to fix what ``exc`` says, where there is a command for it."""
    from infai.llm import ModelUnavailable

    if isinstance(exc, ModelUnavailable):
        return f"\n  {MODEL_HINT}"
    return ""


def answer(exc: BaseException) -> click.ClickException | None:
    """The click error that reports ``exc`` with its exit code; None if ``exc`` is
    not in the table (a bug, to be raised as it is)."""
    if isinstance(exc, click.ClickException):
        return exc  # BadInput, or click's own usage errors: already an answer
    for kind, code, prefix in exit_table():
        if isinstance(exc, kind):
            if code == BAD_INPUT:
                return BadInput(f"{prefix}{exc}{_hint(exc)}")
            return click.ClickException(f"{prefix}{exc}")
    return None


def mapped_errors(func: F) -> F:
    """Run a command so that every error of the tree leaves by :func:`answer`."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            mapped = answer(exc)
            if mapped is None or mapped is exc:
                raise
            raise mapped from None

    return wrapper  # type: ignore[return-value]


@contextmanager
def inert_messages() -> Iterator[None]:
    """A click error leaving this block has an inert message (it may quote input)."""
    try:
        yield
    except click.ClickException as exc:
        exc.message = inert(exc.message)  # type: ignore[misc]  # (Final in click's stubs)
        raise


class InertGroup(click.Group):
    """The root group: whatever error click is about to print, from parsing a
    command line or from a command, says its input inertly."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with inert_messages():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with inert_messages():
            return super().invoke(ctx)


__all__ = [
    "BAD_INPUT",
    "FAILURE",
    "MODEL_HINT",
    "BadInput",
    "InertGroup",
    "answer",
    "exit_table",
    "inert_messages",
    "mapped_errors",
]
