"""``GET /v1/sessions/{id}/export``: the session's export file, streamed.

The answer's body is byte for byte what ``infai session export`` writes over the
same store (:func:`infai.store.export_lines`, each line made inert as the
command makes it), so ``infai --remote URL session export`` prints the local
command's output and ``infai session import`` reads either. The lines are read
in worker threads, a batch at a time, and sent as they come: a large session is
never held whole in memory. A session that does not exist is a 404 before
anything is sent (the header line is read first); a store error after that
cuts the answer off (the client sees a body that ended early, never a file
that looks whole), and is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

from starlette.responses import Response, StreamingResponse

from infai.store import export_lines

from ..inert import inert_json_line

if TYPE_CHECKING:
    from .routes import Call

log = logging.getLogger("infai.server")

#: the most lines, and about the most bytes, read in one worker-thread step
BATCH_LINES = 256
BATCH_BYTES = 1 << 20
MEDIA = "application/x-ndjson"


def _batch(lines: Iterator[bytes]) -> bytes:
    """The next lines of the export, inert, up to a batch (empty at the end)."""
    out: list[bytes] = []
    size = 0
    for line in lines:
        out.append(inert_json_line(line))
        size += len(out[-1])
        if len(out) >= BATCH_LINES or size >= BATCH_BYTES:
            break
    return b"".join(out)


async def _chunks(session_id: str, first: bytes, lines: Iterator[bytes]) -> AsyncIterator[bytes]:
    try:
        yield first
        while chunk := await asyncio.to_thread(_batch, lines):
            yield chunk
    except Exception:
        log.exception("the export of session %s broke off", session_id)
        raise
    finally:
        await asyncio.to_thread(_close, lines)


def _close(lines: Iterator[bytes]) -> None:
    """Stop the export's generator (its reader closes with it). A client that went
    mid-batch leaves the batch running in its worker thread: the generator cannot be
    closed under it, and is closed (its reader with it) when it is collected."""
    close = getattr(lines, "close", None)
    if close is not None:
        with contextlib.suppress(ValueError):  # "generator already executing"
            close()


async def export_session(call: Call) -> Response:
    """The export file of the session (404 for one that does not exist)."""
    store, session_id = call.sessions.store, call.session_id
    lines = export_lines(store, session_id)
    try:  # the header: an unknown session (or a store that is down) answers before any byte
        first = inert_json_line(await asyncio.to_thread(next, lines, b""))
    except BaseException:
        await asyncio.to_thread(_close, lines)
        raise
    name = f'attachment; filename="{session_id}.jsonl"'
    return StreamingResponse(
        _chunks(session_id, first, lines), media_type=MEDIA, headers={"Content-Disposition": name}
    )


__all__ = ["MEDIA", "export_session"]
