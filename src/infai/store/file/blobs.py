"""Content-addressed blobs: large records stored once, verified on every read.

A record whose serialised JSON exceeds the blob threshold is written to
``blobs/<hex>`` where ``<hex>`` is the SHA-256 of exactly those bytes; the event
line keeps ``"record": null`` and ``"digest": "sha256:<hex>"``. A blob is made
durable (temp file, fsync, rename, fsync of ``blobs/``) before the event that names
it is written, so an acknowledged event never points at a missing blob. Equal
payloads share one file. Reading hashes the bytes again and refuses a mismatch.
"""

from __future__ import annotations

import os

from ..codec import PREFIX, digest_of
from ..errors import BlobDigestError, CorruptionError
from .fsio import FileIO, write_file
from .layout import SessionPaths

__all__ = ["PREFIX", "digest_of", "put_blobs", "read_blob"]


def put_blobs(
    io: FileIO,
    paths: SessionPaths,
    payloads: list[tuple[str, bytes]],
    *,
    sync_existing: bool = False,
) -> None:
    """Make each ``(digest, data)`` durable under ``blobs/`` (skipping ones present).

    All new blobs are synced, renamed into place, then ``blobs/`` is synced once;
    with ``sync_existing`` it is synced even if every blob was already there.
    """
    created = sync_existing
    for digest, data in payloads:
        final = str(paths.blob(digest))
        if os.path.exists(final):
            continue
        # Temp files live in the session directory, so recovery finds leftovers
        # without listing blobs/, which grows with the session.
        tmp = f"{paths.root}/.blob-{digest.removeprefix(PREFIX)}.tmp"
        write_file(io, tmp, data)
        io.rename(tmp, final)
        created = True
    if created:
        io.fsync_dir(str(paths.blobs))


def read_blob(paths: SessionPaths, digest: str) -> bytes:
    """The blob's bytes, after checking they hash to ``digest``."""
    path = paths.blob_file(digest)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise CorruptionError(path, 0, f"blob {digest} is missing") from None
    try:
        data = os.read(fd, os.fstat(fd).st_size + 1)
    finally:
        os.close(fd)
    actual = digest_of(data)
    if actual != digest:
        raise BlobDigestError(path, 0, f"blob content hashes to {actual}, expected {digest}")
    return data
