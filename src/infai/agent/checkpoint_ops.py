"""The files on the timeline as a shell reaches them: with the session's own
configuration (its working directory's ``[checkpoints]``), which the
:mod:`infai.checkpoints` layer below never reads itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infai import checkpoints
from infai.checkpoints import CheckpointSettings, OnRestore, Restored
from infai.store import SessionStore

from .config import load_config


def checkpoint_settings(store: SessionStore, session_id: str) -> CheckpointSettings:
    """``[checkpoints]`` as the session's working directory configures it."""
    return load_config(Path(checkpoints.workdir_of(store, session_id))).checkpoints


def diff_at(
    store: SessionStore, session_id: str, old: str, new: str | None = None
) -> dict[str, Any]:
    """:func:`infai.checkpoints.diff_at` under the session's size cap."""
    cap = checkpoint_settings(store, session_id).size_cap
    return checkpoints.diff_at(store, session_id, old, new, size_cap=cap)


def checkout(
    store: SessionStore,
    session_id: str,
    event_id: str,
    choice: OnRestore | None = None,
    *,
    dry_run: bool = False,
) -> Restored:
    """:func:`infai.checkpoints.checkout` under the session's ``[checkpoints]``."""
    settings = checkpoint_settings(store, session_id)
    return checkpoints.checkout(
        store, session_id, event_id, choice, dry_run=dry_run, settings=settings
    )
