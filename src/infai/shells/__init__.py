"""Shells: thin input and output over the agent and the store, one package per shell.

- :mod:`.cli`: the ``infai`` command line (store plumbing, ``run``, ``chat``,
  ``serve``, ``tui``), one module per command group over one root
- :mod:`.tui`: the terminal UI (textual)
- the HTTP/SSE server (starlette): :mod:`.server` and its modules
- :mod:`.render`: plain-text and JSON renderings of store objects, shared by
  the command line and the server
- :mod:`.listing`: session listings for people (grouped by directory, last
  activity in words), for the command line and the TUI

A shell gets its machinery from :class:`infai.agent.Harness` (the one
composition root), names lower-layer types only to render them or answer them,
and imports its heavy dependencies (textual, starlette, the SDKs) only when it
runs.
"""
