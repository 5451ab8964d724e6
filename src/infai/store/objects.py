"""Store-wide content-addressed objects: file contents, trees and manifests.

Model, in prose: an object is an immutable byte string named by the SHA-256 of
its bytes (``sha256:<hex>``, as blobs are). Unlike a session's blobs, which
belong to one session directory, objects belong to the whole store, so the same
file content saved by a hundred snapshots of a dozen sessions is kept once.
Objects never change; they are only added, and removed by garbage collection
when nothing reachable names them (``infai store gc``).

What is in an object is its writer's business: workspace snapshots store file
contents, symlink targets and directory trees (:mod:`.trees`); the agent stores
the tool manifest a turn was offered. The store neither parses nor interprets
them, except that :mod:`.trees` knows how to walk a tree for gc.

Writes come in batches (:meth:`ObjectStore.batch`): a snapshot of ten thousand
files is one transaction and one sync, not ten thousand. A batch's objects are
durable when the ``with`` block exits without an exception; on an exception none
of them is kept. ``batch(durable=False)`` commits without waiting for the disk:
the objects survive a killed process at once, and a power cut only after
:meth:`ObjectStore.sync`, which the caller must call before anything durable
names them (a snapshot's record on a timeline): so a recorded snapshot never
names an object a crash could lose, and a snapshot nobody records (a status
check, a diff against the disk) never waits for a sync. Reads verify the
digest: bytes that do not hash to their name raise
:class:`~.errors.BlobDigestError`, never a silent wrong answer.

Each removal bumps :meth:`ObjectStore.generation`, so a cache that remembers
which digests exist (the snapshot stat cache) can tell that its memory may be
stale and check again.

Every put, including one of an object already stored, records when it was made
(by the store's clock). Garbage collection keeps whatever was put within its
grace period, and checks that inside the transaction that removes, so an object
a snapshot has just put, or put again, and whose event is not appended yet, is
never removed under it (see :mod:`.gc`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol


class ObjectBatch(Protocol):
    """Objects being added in one transaction (see :meth:`ObjectStore.batch`)."""

    def put(self, data: bytes) -> str:
        """Add ``data`` (a no-op if an object with its digest exists); its digest."""


class ObjectStore(Protocol):
    """The store's content-addressed objects (both backends offer one)."""

    def batch(self, *, durable: bool = True) -> AbstractContextManager[ObjectBatch]:
        """A batch of puts, committed together when the ``with`` block exits, and
        durable then too unless ``durable`` is false (then :meth:`sync` later)."""

    def sync(self) -> None:
        """Make every batch committed here with ``durable=False`` durable (a
        no-op when there is none, or when commits are durable anyway)."""

    def put(self, data: bytes) -> str:
        """Add one object durably (a batch of one); its digest."""

    def get(self, digest: str) -> bytes:
        """The object's bytes, checked against ``digest``; raises ``ObjectNotFound``
        or ``BlobDigestError`` (corruption), ``InvalidInput`` for a malformed digest."""

    def has(self, digest: str) -> bool:
        """Whether the object is here (without reading it)."""

    def missing(self, digests: Iterable[str]) -> set[str]:
        """Those of ``digests`` that are not here (one query, not one per digest)."""

    def size(self, digest: str) -> int:
        """The object's length in bytes; raises ``ObjectNotFound``."""

    def digests(self) -> Iterator[str]:
        """Every object's digest, in no particular order (for gc)."""

    def remove(self, digests: Iterable[str], *, grace: float = 0.0) -> int:
        """Remove these objects (absent ones are skipped) and bump the generation;
        the bytes freed. Those put within the last ``grace`` seconds are kept: the
        check is made in the removing transaction, after every batch in flight has
        committed. Only garbage collection calls this."""

    def recent(self, seconds: float) -> set[str]:
        """Digests put (or put again) within the last ``seconds``, by the store's clock."""

    def touch(self, digests: Iterable[str]) -> set[str]:
        """Count the stored ones of ``digests`` as put now (their grace starts
        over), without their bytes; those not stored. Like a batch, it is held
        back by a removal in flight and holds one back, so a digest it does not
        return missing outlives any removal that had not begun."""

    def generation(self) -> int:
        """A number that grows with every :meth:`remove` (caches of "this digest is
        stored" are valid only for the generation they were made in)."""

    def stats(self) -> tuple[int, int]:
        """How many objects there are and their total size in bytes."""

    def disk_bytes(self) -> int:
        """What the objects take on disk now (the directory store: its database, log
        and packs; PostgreSQL: the objects tables with their indexes and TOAST)."""

    def reclaimable(self, digests: Iterable[str]) -> int:
        """About how many of :meth:`disk_bytes` removing ``digests`` and then
        :meth:`compact` would give back to the file system (gc's dry run)."""

    def compact(self) -> str | None:
        """Give the space removed objects left back to the file system, as far as the
        backend can while others work (gc calls it after removing); what was done or
        what the backend leaves to its own maintenance, in words (None: nothing to say)."""


#: a well-formed object digest (precompiled: a warm snapshot checks dozens per run,
#: and a per-character test was a fifth of its Python time)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def check_digest(digest: str) -> str:
    """``digest`` if it is ``sha256:`` and 64 lower-case hex digits, else ``InvalidInput``."""
    if type(digest) is not str or _DIGEST.fullmatch(digest) is None:
        from .errors import InvalidInput

        raise InvalidInput(f"malformed object digest {str(digest)[:80]!r} (want sha256:<64 hex>)")
    return digest
