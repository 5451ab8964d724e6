"""``GET /v1/search``: the store's full-text search, over HTTP.

The route is a thin wrapper over :meth:`infai.store.SessionStore.search`: the
query and its filters (``session``, ``dir``, ``kind``, ``limit``) are checked
against the API's table (:mod:`.api`) like every route's parameters, the search
itself runs in a worker thread (it may catch the derived index up with appends,
which reads the disk or the database), and its errors go through the one
table (:mod:`.errors`): a query the grammar refuses, an unknown kind, a limit
out of range is 400 naming it; a lost database 503.

The answer is ``{"query", "window", "hits": [SearchHit…], "damaged"}``, best
first (:meth:`~infai.store.SearchResults.to_obj`; ``window`` is a number when
only that many of the newest matches were looked at, else null; ``damaged``
names the sessions whose damaged events are left out), each hit as
:meth:`~infai.store.SearchHit.to_obj` gives it (the snippet plus the character
offsets of the matched words, for the client to mark its own way), encoded
inert like every body (:class:`.channel.InertJSON`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from starlette.responses import Response

from infai.store import SessionNotFound

from .channel import InertJSON
from .errors import ApiError

if TYPE_CHECKING:
    from .routes import Call

#: hits when the request names no limit, and the most it may ask for
DEFAULT_LIMIT = 20
MAX_LIMIT = 200


async def search(call: Call) -> Response:
    """Ranked hits for ``q`` over every session and branch (the filters narrow it)."""
    query = call.query.get("q")
    if not query:
        raise ApiError(400, "query parameter q: required (the words to find)")
    limit = call.query.get("limit", DEFAULT_LIMIT)
    if not 1 <= limit <= MAX_LIMIT:
        raise ApiError(400, f"query parameter limit: must be 1 to {MAX_LIMIT}, not {limit}")
    store = call.sessions.store
    session, working_dir, kind = (call.query.get(k) for k in ("session", "dir", "kind"))

    def run() -> dict[str, object]:
        hits = store.search(query, session=session, working_dir=working_dir, kind=kind, limit=limit)
        return hits.to_obj(query)

    try:
        found = await asyncio.to_thread(run)
    except SessionNotFound as exc:  # a filter that names nothing: the request is wrong
        raise ApiError(400, f"query parameter session: {exc}") from None
    return InertJSON(found)


__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "search"]
