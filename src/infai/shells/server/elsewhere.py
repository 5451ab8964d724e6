"""Requests about a turn that may run on another node: cancel it, answer its question.

Why: with several servers on one store, the client that posts a cancel or an
answer may reach any of them. The request is recorded in the store, which
tells the node running the turn (:mod:`infai.store.pg.live`); the node asked
answers once that has taken effect, as if it ran the turn itself.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from infai.agent import NotInFlight
from infai.tools import Reply

from .errors import Conflict
from .remote import Live, reply_obj

if TYPE_CHECKING:
    from .routes import Call
    from .served import Served

#: seconds a cancel of another node's turn waits for it to stop
CANCEL_WAIT = 30.0
#: seconds between looks at whether it has
CANCEL_POLL = 0.05
#: seconds then given this node's watchers to be sent its end
ENDED_WAIT = 5.0


async def cancel_elsewhere(call: Call, live: Live, turn: str | None) -> tuple[str, str | None]:
    """Cancel the session's turn on whichever node runs it and wait until it has
    stopped (and this node's watchers were sent its end): its id and outcome."""
    sid = call.session_id
    found = await asyncio.to_thread(live.request_cancel, sid, turn)
    if found is None:
        what = f"turn {turn} is not" if turn else "no turn is"
        raise NotInFlight(f"{what} in flight in session {sid}")
    deadline = time.monotonic() + CANCEL_WAIT
    while True:
        ended, outcome = await asyncio.to_thread(live.turn_ended, found)
        if ended:
            break
        if time.monotonic() > deadline:
            raise Conflict(f"turn {found} did not stop within {CANCEL_WAIT:.0f} s; it may still")
        await asyncio.sleep(CANCEL_POLL)
    served = call.sessions.open.get(sid)
    if served is not None and served.mirror is not None:
        await served.mirror.wait_ended(found, ENDED_WAIT)
    return found, ("error" if outcome == "lost" else outcome)


async def answer_anywhere(call: Call, served: Served | None, question: str, reply: Reply) -> bool:
    """Answer a question asked on this node or another: False if none by that id waits."""
    if served is not None:
        return await served.answer_any(question, reply)
    node = call.sessions.node
    if node is None:
        return False
    recorded = await asyncio.to_thread(
        node.live.answer, call.session_id, question, reply_obj(reply)
    )
    return recorded is not None
