"""The stat cache: what a working directory's files hashed to, by their ``lstat``.

Model, in prose: hashing ten thousand files to learn that one changed is what
makes other tools' snapshots slow. Like git's index, this cache remembers, per
path, the ``lstat`` key (mode, size, mtime_ns, inode, ctime_ns) it saw and the
digest the bytes had then; a later snapshot that sees the same key takes the
digest without reading the file. Per directory it also remembers the tree
digest it built, the fingerprint of the ``.gitignore`` rules in force there, and
how many entries it recorded, so a directory where every entry is a hit is not
even re-encoded.

A hit also promises that the object is *in the store*, which is only true until
garbage collection removes something: the cache is valid for the
:meth:`~infai.store.objects.ObjectStore.generation` it was made in and is
dropped when the generation moved. It also promises that the object outlives a
concurrent garbage collection until the snapshot naming it is recorded; gc
keeps what was put within its grace period, so the cache remembers when its
digests were last put (``touched``, wall-clock seconds): every digest it names
was put, or touched (:meth:`~infai.store.objects.ObjectStore.touch`), at or
after that time, and a snapshot touches them all again once it is older than
half the grace (see :mod:`.snapshot`). Git's "racy" problem (a file modified in the
same clock tick it was hashed in keeps its key) is handled the way git does it:
files whose mtime or ctime is within :data:`RACY_NS` of the snapshot are not
cached, so the next snapshot reads them again.

The cache is one file per working directory, ``<home>/cache/stat/<sha256 of the
path>.cache``: a version header, a SHA-256 of the payload, and a
:mod:`marshal` payload (ten thousand entries load in a couple of milliseconds,
which a warm snapshot's 30 ms budget needs). It is only a cache: written with
temp + rename and no fsync; a missing, damaged or foreign file is ignored and
rebuilt, never trusted. It lives under the store's home, written only by infai,
so it is as trusted as the store itself (marshal is not for hostile input).
"""

from __future__ import annotations

import hashlib
import marshal
import os
from pathlib import Path
from typing import Any

#: the cache file format (bumped when the payload's shape changes; 2 added ``touched``)
VERSION = 2
_MAGIC = b"infai-statcache\n"
#: a file modified this close to a snapshot is hashed again next time (git's racy rule)
RACY_NS = 2_000_000_000

#: per file: (lstat key, digest, size); the key is (mode, size, mtime_ns, ino, ctime_ns)
FileEntry = tuple[tuple[int, int, int, int, int], str, int]


class DirEntry:
    """One directory's cached state (see the module docstring)."""

    __slots__ = ("fingerprint", "tree", "size", "files", "count", "entries")

    def __init__(
        self,
        fingerprint: str,
        tree: str,
        size: int,
        files: int,
        count: int,
        entries: dict[str, FileEntry],
    ) -> None:
        self.fingerprint = fingerprint
        self.tree = tree
        self.size = size
        self.files = files
        self.count = count
        self.entries = entries

    def dump(self) -> tuple[Any, ...]:
        """The marshal-able form (the constructor's arguments, in order)."""
        return (self.fingerprint, self.tree, self.size, self.files, self.count, self.entries)


def cache_path(home: Path, workdir: str) -> Path:
    """Where the cache of ``workdir`` (an absolute path) lives under ``home``."""
    key = hashlib.sha256(os.fsencode(workdir)).hexdigest()[:32]
    return home / "cache" / "stat" / f"{key}.cache"


class StatCache:
    """The cache of one working directory, loaded lazily and saved when changed."""

    def __init__(self, path: Path, workdir: str) -> None:
        self.path = path
        self.workdir = workdir
        self.generation = -1
        #: every digest in ``dirs`` was put at or after this time (0: unknown)
        self.touched = 0.0
        self.dirs: dict[str, DirEntry] = {}
        self._loaded = False

    def load(self, generation: int) -> dict[str, DirEntry]:
        """The cached directories, or none if the cache is for another generation
        (or absent, damaged, or of another working directory)."""
        if not self._loaded:
            self._loaded = True
            self._read()
        if self.generation != generation:
            self.dirs = {}
            self.generation = generation
        return self.dirs

    def digests(self) -> set[str]:
        """Every object the cache names: file contents, link targets, trees."""
        named: set[str] = set()
        for entry in self.dirs.values():
            named.add(entry.tree)
            named.update(row[1] for row in entry.entries.values())
        return named

    def _read(self) -> None:
        try:
            raw = self.path.read_bytes()
        except OSError:
            return
        head = len(_MAGIC) + 32
        if len(raw) < head or not raw.startswith(_MAGIC):
            return
        digest, payload = raw[len(_MAGIC) : head], raw[head:]
        if hashlib.sha256(payload).digest() != digest:
            return
        try:
            version, workdir, generation, touched, dirs = marshal.loads(payload)
            if version != VERSION or workdir != self.workdir:
                return
            self.dirs = {prefix: DirEntry(*row) for prefix, row in dirs.items()}
            self.generation = int(generation)
            self.touched = float(touched)
        except (ValueError, TypeError, EOFError):
            self.dirs = {}

    def save(self, dirs: dict[str, DirEntry], generation: int) -> None:
        """Replace the cache with ``dirs`` (in memory and on disk, best effort)."""
        self.dirs = dirs
        self.generation = generation
        self._loaded = True
        payload = marshal.dumps(
            (
                VERSION,
                self.workdir,
                generation,
                self.touched,
                {p: d.dump() for p, d in dirs.items()},
            )
        )
        data = _MAGIC + hashlib.sha256(payload).digest() + payload
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)

    def clear(self) -> None:
        """Forget everything (the next snapshot hashes every file)."""
        self.dirs = {}
        self._loaded = True
        self.path.unlink(missing_ok=True)
