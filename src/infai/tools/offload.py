"""Blocking work (the store's appends and reads, the file tools) runs off the event loop.

An append ends in an fdatasync (the file store) or a transaction with retries
(PostgreSQL); a context read parses chunk files; a grep walks a tree. Run on
the event loop, any of them stalls every other session, stream and key press
the loop serves. :func:`off_loop` runs such work in a worker thread.

Work that writes cannot be abandoned half-way: if the waiting task is
cancelled, :func:`off_loop` still waits for the thread to finish before the
cancellation goes on, so the writer is never used by two threads at once (the
interruption marker is appended after the interrupted append, never beside it).
:func:`read_off_loop` is for work that only reads: a cancel returns at once and
the thread's result is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def off_loop(work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``work(*args, **kwargs)`` in a worker thread; a cancel waits for it to finish."""
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, work, *args, **kwargs)
    future = loop.run_in_executor(None, call)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():  # the thread cannot be stopped: let it finish first
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([future])
        if not future.cancelled():
            future.exception()  # retrieved: its outcome is the cancel's now
        raise


async def read_off_loop(work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``work(*args, **kwargs)`` in a worker thread; for work that only reads."""
    return await asyncio.to_thread(work, *args, **kwargs)


__all__ = ["off_loop", "read_off_loop"]
