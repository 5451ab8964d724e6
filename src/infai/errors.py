"""The root of every error infai raises on purpose, and the whole tree in one place.

Catching :class:`InfaiError` catches everything infai means to tell a user; any
other exception (``ValueError``, ``KeyError``, ``TypeError``…) is a bug and is
never reported as bad input. Each shell maps this tree to its own answers in one
table: exit codes in ``infai.shells.cli.errors``, HTTP statuses in
``infai.shells.server.errors``.

::

    InfaiError
    ├── StoreError                 infai.store: the session store
    │   ├── InvalidInput           bad id, kind, record or metadata; nothing written (a ValueError)
    │   ├── SessionHeld            infai.shells.tui: another process has it open for writing
    │   ├── SessionNotFound        no session with that id (a KeyError)
    │   ├── EventNotFound          no event with that id in the session (a KeyError)
    │   ├── ObjectNotFound         no store-wide object with that digest (a KeyError)
    │   ├── SessionExists          create or import would overwrite a session
    │   ├── WriterLocked           another process holds the session's writer lock
    │   ├── HeadConflict           (database) another writer moved HEAD first; retry
    │   ├── SessionBusy            (database) another process runs a turn there
    │   ├── BackendUnavailable     (database) the server cannot be reached or refuses
    │   ├── GcRefused              gc could not read a session or tree; removed nothing
    │   ├── UnsupportedFormat      written by a newer infai: upgrade to open it
    │   ├── StoreIOError           a write or fsync failed; the writer refuses more (an OSError)
    │   └── CorruptionError        bytes fail their checksum or do not parse (file, offset)
    │       └── BlobDigestError    a blob's content does not match its SHA-256 name
    ├── ModelUnavailable           infai.llm: a model name that cannot be built
    ├── RuleError                  infai.tools: a permission rule that does not parse
    ├── ToolDefinitionError        infai.tools: a function @tool cannot make a tool of
    ├── ConfigError                infai.agent: a bad configuration file (names file and key)
    ├── PluginError                infai.agent: an installed plugin that cannot be used (skipped)
    ├── CompactionFailed           infai.agent: the summary could not be made; nothing changed
    ├── ContextError               infai.agent: the context for the model cannot be built
    │   ├── UnsendableEvent        an event on the path no model can take
    │   └── ContextRuleFailed      a context rule raised; nothing was sent
    ├── Lagged                     infai.agent: a watcher fell behind and was dropped
    ├── SlotConflict               infai.agent: the session's turn slot says no
    │   ├── Busy                   a turn (or compaction) already runs in this session
    │   ├── NotInFlight            no such turn is running (nothing to cancel)
    │   └── PromptBlocked          a UserPromptSubmit hook refused the prompt (not stored)
    ├── RestoreError               infai.agent: files could not be restored (names path, why)
    │   ├── RestorePending         an interrupted restore must be recovered first
    │   ├── RestoreRefused         conflicts or another open session; nothing changed
    │   └── PlanStale              files changed since the restore was planned; plan again
    ├── SnapshotError              infai.agent: the working directory cannot be read (names it)
    ├── BadInput                   infai.shells.cli: the command line's bad input (exit 2)
    ├── ApiError                   infai.shells.server: a request the API refuses (4xx)
    ├── Conflict                   infai.shells.server: the session's state forbids it (409)
    ├── TokenError                 infai.shells.server: the server token file is unusable
    └── RemoteError                infai.shells.remote: a server refused a request or is unreachable

The store's three mix-ins (``ValueError``, ``KeyError``, ``OSError``) let plain
Python code catch them as it would expect; no shell catches those bare types as
bad input.

A provider's failure during a turn is not an exception: it is data
(:class:`~infai.llm.ProviderError`) carried by the turn's events, so a turn can
end cleanly and say what the provider said.
"""

from __future__ import annotations


class InfaiError(Exception):
    """Base class of every error infai raises for a user to read."""


__all__ = ["InfaiError"]
