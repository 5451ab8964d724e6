"""Paths a tool is given, resolved against the session's working directory.

A tool never trusts a path as given: it is joined to the working directory,
made absolute, and every symlink resolved, and only then compared with the
working directory (itself resolved). ``..``, absolute paths and symlinks that
lead elsewhere are therefore all seen for what they are: outside, which is a
permission question for the policy, not a silent success.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Resolved:
    """A tool's path made absolute with symlinks resolved, and whether it is inside."""

    path: Path
    inside: bool

    def shown(self, root: Path) -> str:
        """The path as the model should see it: relative when inside."""
        if self.inside:
            return str(self.path.relative_to(root.resolve())) or "."
        return str(self.path)


def resolve(working_dir: Path, given: str) -> Resolved:
    """Resolve ``given`` against ``working_dir``; ``inside`` is False if it leaves it."""
    root = working_dir.resolve()
    path = (root / given).resolve()  # follows symlinks, collapses ".."
    return Resolved(path, path == root or root in path.parents)
