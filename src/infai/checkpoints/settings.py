"""``[checkpoints]`` as the files on the timeline take it: whether snapshots are
taken, and the size cap of a file. Parsed from the TOML by the agent's
configuration (:func:`infai.agent.config.parse_checkpoints`), which knows the
files; this package only reads the values."""

from __future__ import annotations

from dataclasses import dataclass

from .snapshot import DEFAULT_SIZE_CAP


@dataclass(frozen=True)
class CheckpointSettings:
    """``[checkpoints]``: whether snapshots are taken, and the size cap of a file."""

    enabled: bool = True
    size_cap: int = DEFAULT_SIZE_CAP
