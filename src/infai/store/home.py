"""Where this machine keeps infai's local files, whatever the backend.

Model, in prose: the *home* is a directory on this machine. The directory
store keeps its sessions there; with a database the sessions live elsewhere
but the home still holds this machine's own files (the server's token). It is
``--home``, else ``$INFAI_HOME``, else the platform's user config directory +
``infai/harness`` (``~/.config/infai/harness`` on Linux).
"""

from __future__ import annotations

import os
from pathlib import Path


def default_home() -> Path:
    """The home used when neither ``--home`` nor ``INFAI_HOME`` is given."""
    env = os.environ.get("INFAI_HOME")
    if env:
        return Path(env)
    from platformdirs import user_config_path

    return user_config_path("infai", appauthor=False) / "harness"
