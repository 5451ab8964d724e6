"""infai from another machine: a client of ``infai serve`` and its stored tokens.

:class:`Remote` speaks the HTTP API (docs/server.md); :mod:`.tokens` keeps the
tokens ``infai login`` was given; :func:`event_of` and :func:`entry_of` read the
API's ``Event`` and ``Entry`` objects back as the store's, for every client here
(the TUI's view, the command line). The command line's ``--remote URL`` commands
(:mod:`infai.shells.cli.remote`) are its first users.
"""

from .client import Frame, Remote, RemoteError, api_url, parse_frames
from .tokens import forget_token, store_token, stored_token, tokens_path
from .view import entry_of, event_of

__all__ = [
    "Frame",
    "Remote",
    "RemoteError",
    "api_url",
    "entry_of",
    "event_of",
    "forget_token",
    "parse_frames",
    "store_token",
    "stored_token",
    "tokens_path",
]
