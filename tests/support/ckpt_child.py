"""A child process that applies one restore, for the SIGKILL tests.

Usage: ``python ckpt_child.py HOME WORKDIR TARGET``. It plans the restore of
the tree TARGET (snapshotting the disk first, as the agent does), prints
``ready``, applies it, finishes, and exits. The parent kills it at a random
moment after ``ready``.

A new interpreter rather than a fork (a fork of a threaded pytest worker may
deadlock, and Python 3.12 warns about it). ``infai.agent``'s ``__init__``
imports the whole agent (models, tools, sessions), which a process that only
restores files does not need: the package is entered without running it, so
the child starts in a fraction of the time.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


def _import_checkpoints() -> types.ModuleType:
    spec = importlib.util.find_spec("infai.agent")
    assert spec is not None and spec.submodule_search_locations is not None
    package = types.ModuleType("infai.agent")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["infai.agent"] = package
    import infai.checkpoints as checkpoints

    return checkpoints


def main() -> None:
    home, workdir, target = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    checkpoints = _import_checkpoints()
    from infai.store.file.objects import FileObjects

    engine = checkpoints.Checkpoints(FileObjects(home), workdir, home)
    _, plan = engine.plan(target)
    print("ready", flush=True)
    engine.restorer.apply(plan)
    engine.finish()
    print("done", flush=True)


if __name__ == "__main__":
    main()
