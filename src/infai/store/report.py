"""What checking a session found: the report every backend's ``fsck`` returns.

Model, in prose: a check reads a whole session and changes nothing (unless
asked to repair what is provably safe). It counts events and blobs and lists
each :class:`Problem` with the place it was found: a file and byte offset in a
directory, a session and event in a database. Leftovers of a crash that opening
the session would clean up are reported apart, as pending recovery, since they
are not damage.
"""

from __future__ import annotations


class Problem:
    """One thing found wrong: where (file, byte offset) and what."""

    __slots__ = ("detail", "offset", "path")

    def __init__(self, path: str, offset: int, detail: str) -> None:
        self.path = path
        self.offset = offset
        self.detail = detail

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Problem) and (self.path, self.offset, self.detail) == (
            other.path,
            other.offset,
            other.detail,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Problem({self.path!r}, {self.offset}, {self.detail!r})"

    def __str__(self) -> str:
        return f"{self.path}: offset {self.offset}: {self.detail}"


class FsckReport:
    """What fsck found in one session."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.events = 0
        self.blobs = 0
        self.problems: list[Problem] = []
        #: what recovery on open would do (a crash's leftovers, not damage)
        self.pending_recovery: list[str] = []
        self.repaired: list[str] = []
        #: blob files no event names: harmless leftovers of a crash, removed by repair
        self.orphans: list[str] = []

    @property
    def status(self) -> str:
        """``ok``; ``needs recovery`` (a crash's leftovers, which opening the session
        or ``--repair`` fixes); or ``damaged`` (a problem recovery cannot fix)."""
        if self.problems:
            return "damaged"
        return "needs recovery" if self.pending_recovery else "ok"

    @property
    def ok(self) -> bool:
        """No damage and no recovery pending (orphan blobs do not count)."""
        return not self.problems and not self.pending_recovery
