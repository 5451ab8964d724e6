"""One walk of a working directory: the state of a single snapshot as it goes.

Model, in prose (the whole story is :mod:`.snapshot`'s): :class:`_Walk`
visits directories depth first with ``os.scandir``, never entering ``.git`` nor
an ignored directory, and turns each into a tree object: subdirectories first,
then the files, taking a file's digest from the stat cache when its ``lstat``
key is the cached one and reading and hashing it otherwise. A directory whose
rules and files all match the cache keeps its cached tree; one the change
watcher vouches for is carried over whole without a syscall, and in one it
sends the walk to, a cached file no event names is a hit without an ``lstat``. New objects go
into one lazily opened batch. Progress (files seen, bytes hashed) is told at
most every :data:`PROGRESS_INTERVAL_S` seconds.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from infai.store.objects import ObjectBatch, ObjectStore
from infai.store.trees import EntryType, encode_rows

from .ignore import IGNORE_FILE, IgnoreRules
from .statcache import RACY_NS, DirEntry, FileEntry
from .watch import Watcher

#: the directory name a snapshot never enters and a restore never touches
GIT_DIR = ".git"
#: the project's infai directory: the sandbox makes it, empty, before each command
#: (a mount point kept read-only, :data:`infai.tools.sandbox.MADE_READ_ONLY`), so at
#: the top and empty it is infai's, not the user's: never recorded, never restored
INFAI_DIR = ".infai"


def _infai_mount_point(entry: os.DirEntry[str]) -> bool:
    """Whether ``entry`` is an empty directory (what the sandbox leaves as ``.infai``)."""
    try:
        if not entry.is_dir(follow_symlinks=False):
            return False
        with os.scandir(entry.path) as found:
            return next(found, None) is None
    except OSError:
        return False


#: directories deeper than this are left out (skipped, so a restore leaves them
#: alone): the walk recurses once per level, and Python's stack is not unbounded
MAX_DEPTH = 256

#: told (files seen, bytes read and hashed) while a snapshot runs
Progress = Callable[[int, int], None]
#: a snapshot's progress callback is called at most this often
PROGRESS_INTERVAL_S = 0.25

_NO_NAMES: set[str] = set()

#: the rules a nested repository (a directory below the root holding a
#: ``.git``) starts from, given its path and prefix, and their fingerprint;
#: ``None`` if its ``.git`` is no repository's (see :mod:`.repo`)
NestedRules = Callable[[str, str], "tuple[IgnoreRules, str] | None"]

#: a tree entry before it becomes a TreeEntry: (name, type, digest, size, executable)
_Row = tuple[str, EntryType, str, int, bool]


class _LazyBatch:
    """An object batch opened on the first put (an unchanged tree opens none)."""

    def __init__(self, objects: ObjectStore, stack: ExitStack, durable: bool = True) -> None:
        self._objects = objects
        self._stack = stack
        self._durable = durable
        self._batch: ObjectBatch | None = None

    def put(self, data: bytes) -> str:
        if self._batch is None:
            self._batch = self._stack.enter_context(self._objects.batch(durable=self._durable))
        return self._batch.put(data)


def _fingerprint(parent: str, prefix: str, gitignore: bytes) -> str:
    h = hashlib.sha256(parent.encode())
    h.update(os.fsencode(prefix) + b"\0" + gitignore)
    return h.hexdigest()[:32]


def _parent(prefix: str) -> str:
    """``"a/b/"`` → ``"a/"``, ``"a/"`` → ``""``."""
    return prefix[: prefix.rfind("/", 0, len(prefix) - 1) + 1]


def with_ancestors(dirty: set[str]) -> set[str]:
    """The directories to re-examine: those with events and every ancestor
    (a parent's tree embeds its children's digests)."""
    out: set[str] = set()
    for prefix in dirty:
        while prefix not in out:
            out.add(prefix)
            if not prefix:
                break
            prefix = _parent(prefix)
    return out


def _read_file(path: str, size: int) -> tuple[bytes, os.stat_result]:
    """A regular file's bytes (``size``: its length by ``lstat``, a hint) and its
    ``fstat`` after the read: the caller compares that with the ``lstat`` taken
    before, so a file changed or replaced meanwhile is never cached."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        data = os.read(fd, size + 1)
        if len(data) != size:  # it grew or shrank, or a short read: read to the end
            parts = [data]
            while chunk := os.read(fd, 1 << 20):
                parts.append(chunk)
            data = b"".join(parts)
        return data, os.fstat(fd)
    finally:
        os.close(fd)


class _Walk:
    """One walk of the working directory (state of a single snapshot).

    ``needs`` is ``None`` for a full walk; otherwise the prefixes to
    re-examine, and any other directory in ``trusted`` (watched since its
    cache entry was made) keeps its cached subtree unvisited.

    A watched walk *carries* the last walk's maps over: ``new``,
    ``new_children`` and ``new_skips`` start as copies of the old ones (a
    C-speed dict copy, where visiting every kept subtree to copy it entry by
    entry cost a third of a warm snapshot), each visited directory overwrites
    its own entries, and the subtrees of old subdirectories it no longer
    records are dropped (:meth:`_prune`). It needs ``old_skips`` and
    ``old_children`` made by the walk that made ``old``; without them the walk
    is a full one.
    """

    def __init__(
        self,
        batch: _LazyBatch,
        old: dict[str, DirEntry],
        size_cap: int,
        now_ns: int,
        watcher: Watcher | None = None,
        needs: set[str] | None = None,
        old_skips: dict[str, list[tuple[str, str]]] | None = None,
        old_children: dict[str, Sequence[str]] | None = None,
    ) -> None:
        self.batch = batch
        self.old = old
        self.new: dict[str, DirEntry] = {}
        self.size_cap = size_cap
        self.racy_after = now_ns - RACY_NS
        self.skipped: list[tuple[str, str]] = []
        self.hashed = 0
        self.hashed_bytes = 0
        self.watcher = watcher if watcher is not None and watcher.ok else None
        self.needs = needs if self.watcher is not None and old_children is not None else None
        self.trusted = frozenset(self.watcher.watched) if self.watcher is not None else frozenset()
        #: per directory, the paths skipped by looking at its own entries
        self.new_skips: dict[str, list[tuple[str, str]]] = {}
        self.direct: list[tuple[str, str]] = []
        #: the recorded subdirectories of each recorded directory (the last
        #: walk's, and this walk's)
        self._children: dict[str, Sequence[str]] = old_children or {}
        self.new_children: dict[str, Sequence[str]] = {}
        #: the names with events per directory (see :meth:`_fresh`)
        self._events: dict[str, set[str] | None] | None = None
        self.carry = self.needs is not None
        if self.carry:
            self.new = dict(old)
            self.new_children = dict(self._children)
            self.new_skips = dict(old_skips or {})
            assert self.watcher is not None
            self._events = self.watcher.names
        self.progress: Progress | None = None
        #: where a nested repository's rules come from (``None``: the outer ones go on)
        self.nested: NestedRules | None = None
        self.seen = 0
        self._report_at = time.monotonic() + PROGRESS_INTERVAL_S

    def tick(self, files: int) -> None:
        """Count ``files`` seen; tell ``progress`` if it is time to."""
        self.seen += files
        if self.progress is not None:
            now = time.monotonic()
            if now >= self._report_at:
                self._report_at = now + PROGRESS_INTERVAL_S
                self.progress(self.seen, self.hashed_bytes)

    def skip(self, path: str, reason: str) -> None:
        self.skipped.append((path, reason))
        self.direct.append((path, reason))

    def reusable(self, prefix: str) -> bool:
        """Whether ``prefix``'s cached subtree stands without a look: no event in
        it or below it, and watched since its cache entry was made."""
        return (
            self.needs is not None
            and prefix not in self.needs
            and prefix in self.trusted
            and prefix in self.old
        )

    def reuse(self, prefix: str) -> DirEntry:
        """Keep ``prefix``'s cached subtree (its entries and skipped paths are
        carried over already: see the class)."""
        kept = self.old[prefix]
        self.tick(kept.files)
        return kept

    def _drop(self, prefix: str) -> None:
        """Forget ``prefix`` and its old subtree (carried over, not recorded now)."""
        todo = [prefix]
        while todo:
            at = todo.pop()
            self.new.pop(at, None)
            self.new_skips.pop(at, None)
            self.new_children.pop(at, None)
            todo.extend(self._children.get(at, ()))

    def _prune(self, prefix: str, recorded: bool) -> None:
        """After a carrying walk visited ``prefix``: drop what it no longer records
        (itself if not ``recorded``; else old subdirectories not among its new ones)."""
        if not recorded:
            self._drop(prefix)
            return
        was = self._children.get(prefix)
        now = self.new_children[prefix]
        if was and was != now:
            keep = set(now)
            for sub in was:
                if sub not in keep:
                    self._drop(sub)

    def _fresh(self, prefix: str) -> set[str] | None:
        """The names in ``prefix`` with events since the last walk, if the
        watcher vouches that no other entry changed (watched since its cache
        entry was made, no event about the directory itself); else ``None``:
        look at every file."""
        if self._events is None or prefix not in self.trusted:
            return None
        return self._events.get(prefix, _NO_NAMES)

    def every_skipped(self) -> list[tuple[str, str]]:
        """Every path skipped, this walk's and the kept subtrees'."""
        if not self.carry:
            return self.skipped
        out = [s for skips in self.new_skips.values() for s in skips]
        out.extend(self.direct)  # (an unrecorded root's)
        return out

    def _gitignore(self, entries: list[os.DirEntry[str]]) -> tuple[bytes | None, bool]:
        """The directory's ``.gitignore`` bytes (``None``: none, or unreadable)
        and whether it holds a ``.git``."""
        data: bytes | None = None
        dotgit = False
        for entry in entries:
            name = entry.name
            if name == GIT_DIR:
                dotgit = True
            elif name == IGNORE_FILE and entry.is_file(follow_symlinks=False):
                try:
                    with open(entry.path, "rb") as f:
                        data = f.read()
                except OSError:
                    data = None
        return data, dotgit

    def _rules_here(
        self,
        entries: list[os.DirEntry[str]],
        path: str,
        prefix: str,
        rules: IgnoreRules,
        fp: str,
    ) -> tuple[IgnoreRules, str]:
        """The rules in force in a directory and their fingerprint, from its
        parent's: a nested repository's own, then its ``.gitignore`` if any."""
        gitignore, dotgit = self._gitignore(entries)
        if dotgit and prefix and self.nested is not None:
            restart = self.nested(path, prefix)
            if restart is not None:  # a repository of its own: its rules, not ours
                rules, fp = restart
        if gitignore:
            rules = rules.enter(prefix, gitignore)
            fp = _fingerprint(fp, prefix, gitignore)
        return rules, fp

    def _read(self, entry: os.DirEntry[str], st: os.stat_result, rel: str) -> FileEntry | None:
        """Read and store one file or link; its cache entry (stat key of what was read)."""
        key = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        if stat.S_ISLNK(st.st_mode):
            data = os.readlink(os.fsencode(entry.path))
        elif st.st_size > self.size_cap:
            self.skip(rel, f"over the size cap ({st.st_size} > {self.size_cap} bytes)")
            return None
        else:
            data, after = _read_file(entry.path, st.st_size)
            key = (after.st_mode, after.st_size, after.st_mtime_ns, after.st_ino, after.st_ctime_ns)
            if (
                st.st_mtime_ns != after.st_mtime_ns
                or st.st_ino != after.st_ino
                or len(data) != after.st_size
            ):
                key = (0, -1, 0, 0, 0)  # changed while read (or replaced): never a hit
        digest = self.batch.put(data)
        self.hashed += 1
        self.hashed_bytes += len(data)
        return key, digest, len(data)

    def _file(
        self,
        entry: os.DirEntry[str],
        rel: str,
        rules: IgnoreRules,
        hit: FileEntry | None,
        known: bool,
    ) -> tuple[_Row, FileEntry | None, bool] | None:
        """One file or link: its row, its new cache entry (``None``: racy, not
        cached) and whether it was a cache hit; ``None`` if it is left out."""
        st = entry.stat(follow_symlinks=False)
        if rules.active and not known and rules.ignored(rel, False):
            self.skip(rel, "ignored")
            return None
        mode = st.st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            self.skip(rel, "not a regular file, directory or symlink")
            return None
        key = (mode, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        was_hit = hit is not None and hit[0] == key
        cached: FileEntry | None = hit
        if not was_hit:
            cached = self._read(entry, st, rel)
            if cached is None:
                return None
            hit = cached
            if max(cached[0][2], cached[0][4]) >= self.racy_after:
                cached = None
        assert hit is not None
        link = stat.S_ISLNK(mode)
        kind: EntryType = "link" if link else "file"
        row: _Row = (
            entry.name,
            kind,
            hit[1],
            hit[2],
            not link and bool(mode & 0o100),
        )
        return row, cached, was_hit

    def _unchanged(
        self,
        files: list[os.DirEntry[str]],
        prefix: str,
        old: DirEntry,
        rules: IgnoreRules,
        want: int,
    ) -> bool:
        """The fast path of a directory whose rules did not change: whether
        ``files`` are ``want`` cache hits and the rest ignored (if not, nothing
        is recorded). One ``lstat`` per file, no tuple kept."""
        cached = old.entries
        mark, dmark = len(self.skipped), len(self.direct)
        hits = 0
        for entry in files:
            hit = cached.get(entry.name)
            if hit is None:
                if rules.active and rules.ignored(prefix + entry.name, False):
                    self.skip(prefix + entry.name, "ignored")
                    continue
                break
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                break
            if hit[0] != (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns):
                break
            hits += 1
        else:
            if hits == want:
                self.tick(hits)
                return True
        del self.skipped[mark:]  # _files records them again
        del self.direct[dmark:]
        return False

    def _files(
        self,
        plain: list[os.DirEntry[str]],
        prefix: str,
        rules: IgnoreRules,
        old_entries: dict[str, FileEntry],
        same_rules: bool,
        rows: list[_Row],
        fresh: set[str] | None = None,
    ) -> tuple[dict[str, FileEntry], int, int, int]:
        """The slow path: every file of a changed directory, appended to
        ``rows``; the directory's new cache entries, bytes, file count and how
        many of those files were cache hits. A cached file whose name is not
        in ``fresh`` (the names with events, when the watcher vouches for the
        rest: see :meth:`_fresh`) is a hit without an ``lstat``."""
        new_entries: dict[str, FileEntry] = {}
        size = files = hits = 0
        for entry in plain:
            name = entry.name
            hit = old_entries.get(name)
            if hit is not None and same_rules:
                # the common case of a changed directory: this file is a cache hit
                key = hit[0]
                if fresh is not None and name not in fresh and key[1] >= 0:
                    same = True  # no event names it: the watcher vouches for its key
                else:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        st = None
                    same = st is not None and key == (
                        st.st_mode,
                        st.st_size,
                        st.st_mtime_ns,
                        st.st_ino,
                        st.st_ctime_ns,
                    )
                if same:
                    mode = key[0]
                    link = stat.S_ISLNK(mode)
                    executable = not link and bool(mode & 0o100)
                    rows.append((name, "link" if link else "file", hit[1], hit[2], executable))
                    new_entries[name] = hit
                    size += hit[2]
                    files += 1
                    hits += 1
                    continue
            rel = prefix + name
            try:
                done = self._file(entry, rel, rules, hit, same_rules and hit is not None)
            except OSError as exc:
                self.skip(rel, f"unreadable: {exc.strerror}")
                continue
            if done is None:
                continue
            row, cached, _ = done
            self.tick(1)
            if cached is not None:
                new_entries[name] = cached
            rows.append(row)
            size += row[3]
            files += 1
        self.tick(hits)  # (the others were counted one by one)
        return new_entries, size, files, hits

    def directory(
        self, path: str, prefix: str, rules: IgnoreRules, fp: str
    ) -> tuple[str, int, int, bool] | None:
        """Record one directory (see :meth:`_directory`), watched before it is
        listed, and remember the paths skipped directly in it."""
        if self.watcher is not None:
            self.watcher.watch(path, prefix)
        outer, self.direct = self.direct, []
        try:
            got = self._directory(path, prefix, rules, fp)
        finally:
            mine, self.direct = self.direct, outer
        if mine:
            if got is None:
                outer.extend(mine)  # an unrecorded directory's skips are its parent's
            else:
                self.new_skips[prefix] = mine
        elif got is not None:
            self.new_skips.pop(prefix, None)
        if self.carry:
            self._prune(prefix, got is not None)
        elif got is None:
            self.new_children.pop(prefix, None)
        return got

    def _directory(
        self, path: str, prefix: str, rules: IgnoreRules, fp: str
    ) -> tuple[str, int, int, bool] | None:
        """Record one directory: (tree digest, bytes, files, clean), or ``None`` if
        nothing in it is recorded. ``clean`` means the cached tree was reused.

        Subdirectories first; then, if the ``.gitignore`` rules here are the
        cached ones, the files' fast path (:meth:`_unchanged`): a directory where
        nothing changed reuses its cached tree and cache entry as they are.
        """
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError as exc:
            self.skip(prefix or "./", f"unreadable: {exc.strerror}")
            return None
        rules, fp = self._rules_here(entries, path, prefix, rules, fp)
        old = self.old.get(prefix)
        same_rules = old is not None and old.fingerprint == fp
        rows: list[_Row] = []
        clean = same_rules
        size = files = 0
        plain: list[os.DirEntry[str]] = []
        # (reusable() inlined: a warm snapshot asks it of every subdirectory)
        kept_map = self.old if same_rules and self.needs is not None else {}
        needs, trusted = self.needs or set(), self.trusted
        for entry in entries:
            name = entry.name
            if name == GIT_DIR:
                continue
            if not prefix and name == INFAI_DIR and _infai_mount_point(entry):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if not is_dir:
                plain.append(entry)
                continue
            rel = prefix + name
            sub = rel + "/"
            kept = kept_map.get(sub)
            if kept is not None and sub not in needs and sub in trusted:
                self.seen += kept.files  # (see reuse(); told by the tick below)
                rows.append((name, "dir", kept.tree, kept.size, False))
                size += kept.size
                files += kept.files
                continue
            known = same_rules and sub in self.old
            if rules.active and not known and rules.ignored(rel, True):
                self.skip(sub, "ignored")
                continue
            if sub.count("/") > MAX_DEPTH:  # the walk recurses once per level
                self.skip(sub, f"nested deeper than {MAX_DEPTH} directories")
                continue
            got = self.directory(entry.path, sub, rules, fp)
            if got is not None:
                tree, dsize, dfiles, dclean = got
                clean = clean and dclean
                rows.append((name, "dir", tree, dsize, False))
                size += dsize
                files += dfiles
        self.new_children[prefix] = [prefix + row[0] + "/" for row in rows]
        self.tick(0)
        # an empty tree stands only for an empty directory: one whose entries
        # are all left out is not recorded (below), whatever the cache says
        clean = clean and (not entries or not prefix or old is None or old.count > 0)
        # A full walk tries the cheap all-hits check first; a walk the watcher
        # sent here (something changed in it) goes straight to the rows, and
        # keeps the cached tree if they turn out to be all hits after all.
        if (
            clean
            and old is not None
            and self.needs is None
            and self._unchanged(plain, prefix, old, rules, old.count - len(rows))
        ):
            self.new[prefix] = old
            return old.tree, old.size, old.files, True
        old_entries = old.entries if old is not None else {}
        dirs = len(rows)
        new_entries, fsize, nfiles, hits = self._files(
            plain, prefix, rules, old_entries, same_rules, rows, self._fresh(prefix)
        )
        if clean and old is not None and hits == nfiles and hits + dirs == old.count:
            self.new[prefix] = old
            return old.tree, old.size, old.files, True
        size += fsize
        files += nfiles
        if not rows and prefix and entries:
            return None  # everything in it is left out: the skips say it is there
        tree = self.batch.put(encode_rows(rows))
        self.new[prefix] = DirEntry(fp, tree, size, files, len(rows), new_entries)
        return tree, size, files, False
