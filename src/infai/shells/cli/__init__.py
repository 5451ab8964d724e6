"""The ``infai`` command line, as a package.

- :mod:`.root`: the root group and the options every command shares
- :mod:`.common`: the one way a command opens the store, and output helpers
- :mod:`.errors`: :class:`~.errors.BadInput` and the one table from the error
  tree (:mod:`infai.errors`) to exit codes
- one module per command group: :mod:`.session` (store plumbing),
  :mod:`.store` (migrate, copy), :mod:`.agent` (run, chat, compact, models),
  :mod:`.tui`, :mod:`.serve`
- :mod:`.main`: the only module that imports every command and adds it to the
  root; ``entry()`` is the console script

Plain-text and JSON renderings of store objects live beside the package, in
:mod:`infai.shells.render`, because the server uses them too.
"""

from .main import entry, main

__all__ = ["entry", "main"]
