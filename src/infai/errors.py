"""The root of every error infai raises on purpose, and the whole tree in one place.

Catching :class:`InfaiError` catches everything infai means to tell a user; any
other exception (``ValueError``, ``KeyError``, ``TypeError``…) is a bug and is
never reported as bad input. Each shell maps this tree to its own answers in one
table: exit codes in ``infai.shells.cli.errors``, HTTP statuses in
``infai.shells.server.errors``.

::

    InfaiError
    ├── StoreError                      infai.store.errors: the session store
    │   ├── InvalidInput                bad id, kind, record or metadata; nothing written
    │   ├── SessionNotFound             no session with that id
    │   ├── EventNotFound               no event with that id in the session
    │   ├── SessionExists               create or import would overwrite a session
    │   ├── WriterLocked                another process holds the session's writer lock
    │   ├── HeadConflict                (database) another writer moved HEAD first; retry
    │   ├── SessionBusy                 (database) another process runs a turn there
    │   ├── BackendUnavailable          (database) the server cannot be reached or refuses
    │   ├── UnsupportedFormat           written by a newer infai: upgrade to open it
    │   ├── StoreIOError                a write or fsync failed; the writer refuses more
    │   └── CorruptionError             bytes fail their checksum or do not parse
    │       └── BlobDigestError         a blob's content does not match its SHA-256 name
    ├── ModelUnavailable                infai.llm: a model name that cannot be built
    ├── ConfigError                     infai.agent.config: a bad configuration file
    ├── CompactionFailed                infai.agent.compaction: the summary could not be made
    └── Lagged                          infai.agent.hub: a watcher fell behind and was dropped

A provider's failure during a turn is not an exception: it is data
(:class:`~infai.llm.ProviderError`) carried by the turn's events, so a turn can
end cleanly and say what the provider said.
"""

from __future__ import annotations


class InfaiError(Exception):
    """Base class of every error infai raises for a user to read."""


__all__ = ["InfaiError"]
