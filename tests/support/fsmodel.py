"""Simulated power loss for the session store, the way SQLite and ALICE test it.

Three parts:

* :class:`RecordingIO`, a :class:`~infai.store.FileIO` that performs every write-path
  operation for real (so the workload runs against a real directory) and logs it
  as an :class:`Op`, with paths resolved from file descriptors and the byte offset
  each ``write`` landed at. It can also simulate the *process* dying before a
  chosen operation (:class:`ProcessDied`): from then on nothing reaches the disk
  and nothing is synced, so what the process wrote stays only in the (simulated)
  page cache.
* :class:`Model`, which replays a prefix of that log into a model of the file
  system in which every file has durable content plus pending (unsynced) writes
  and truncations, and every directory has durable entries plus pending entry
  changes (create, rename, unlink). ``fsync``/``fdatasync`` of a file makes its
  content durable; ``fsync_dir`` makes that directory's entries durable. Nothing
  else is assumed: in particular a file's fsync does not make its name durable.
  A rename across directories is atomic (both names change or neither) and is
  made durable by syncing the target directory, not the source one.
* :meth:`Model.crash_state`, which builds one state a power cut after the replayed
  prefix could leave on disk, according to a :class:`Variant`: per file, its
  unsynced writes dropped, applied, torn at a byte, zero-filled (size persisted,
  data not) or scrambled sector by sector; per directory, its unsynced entry
  changes dropped, applied, applied without the renames, or applied up to a
  random point (directory changes are journaled, so they persist in order).
  :func:`materialise` writes such a state into a fresh directory.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

from infai.store import FileIO

#: Granularity of torn/scrambled writes in the "scramble" fate (a disk sector).
SECTOR = 512

FILE_FATES = ("drop", "apply", "torn", "zero", "scramble")


# -- recording ---------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One write-path operation, as performed."""

    index: int
    name: str  # open close write pwrite fsync fdatasync ftruncate rename unlink mkdir fsync_dir
    path: str  # for fd operations: the path the fd was opened with
    fd: int = -1
    flags: int = 0
    offset: int = 0  # write/pwrite: where the bytes landed; ftruncate: the new length
    data: bytes = b""
    dst: str = ""  # rename target
    step: str = ""  # the workload step that issued it

    def describe(self, root: str = "") -> str:
        def rel(p: str) -> str:
            return os.path.relpath(p, root) if root and p else p

        what = f"#{self.index} {self.name}({rel(self.path)}"
        if self.name == "open":
            names = [n for n in ("O_CREAT", "O_TRUNC", "O_APPEND") if self.flags & getattr(os, n)]
            what += ", " + "|".join(names or ["-"])
        elif self.name in ("write", "pwrite"):
            what += f", {len(self.data)} bytes @ {self.offset}"
        elif self.name == "ftruncate":
            what += f", {self.offset}"
        elif self.name == "rename":
            what += f" -> {rel(self.dst)}"
        return what + f") [{self.step}]"


class ProcessDied(BaseException):
    """Raised by :class:`RecordingIO` to simulate the process dying before an operation.

    A ``BaseException`` so the store's ``except OSError`` handlers do not see it.
    """


class RecordingIO(FileIO):
    """Performs every operation for real and logs it.

    ``real_sync=False`` (the default) skips the actual ``fsync`` syscalls: what is
    durable is decided by the model, not by the test machine's disk.
    """

    def __init__(self, *, real_sync: bool = False) -> None:
        self.ops: list[Op] = []
        self.fds: dict[int, tuple[str, int]] = {}
        self.real_sync = real_sync
        self.step = ""
        #: called with (index, op name, path) before each operation; True kills the process
        self.die_before: Callable[[int, str, str], bool] | None = None
        self.dead = False
        #: the operation the process died before, once it has
        self.death = ""

    # -- bookkeeping

    def _gate(self, name: str, path: str) -> None:
        if self.dead:
            raise ProcessDied(f"{name}({path}) after the process died")
        if self.die_before is not None and self.die_before(len(self.ops), name, path):
            self.dead = True
            self.death = f"#{len(self.ops)} {name}({path}) [{self.step}]"
            raise ProcessDied(f"process died before {self.death}")

    def _log(self, name: str, path: str, **kw: object) -> None:
        self.ops.append(Op(len(self.ops), name, path, step=self.step, **kw))  # type: ignore[arg-type]

    def _path(self, fd: int) -> str:
        return self.fds[fd][0]

    @contextmanager
    def dead_process(self) -> Iterator[None]:
        """Within: the process is dead (fds close; nothing is written, synced or renamed)."""
        self.dead = True
        try:
            yield
        finally:
            self.revive()

    def revive(self) -> None:
        """A new process starts (same disk, same page cache)."""
        self.dead = False
        self.die_before = None

    # -- FileIO

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        path = os.path.abspath(path)
        self._gate("open", path)
        fd = os.open(path, flags, mode)
        self.fds[fd] = (path, flags)
        self._log("open", path, fd=fd, flags=flags)
        return fd

    def close(self, fd: int) -> None:
        path = self.fds.pop(fd, ("?", 0))[0]
        os.close(fd)
        if not self.dead:
            self._log("close", path, fd=fd)

    def write(self, fd: int, data: bytes) -> int:
        if self.dead:
            return len(data)  # a dead process's cleanup code reaches nothing
        path = self._path(fd)
        self._gate("write", path)
        n = os.write(fd, data)
        end = os.lseek(fd, 0, os.SEEK_CUR)
        self._log("write", path, fd=fd, offset=end - n, data=bytes(data[:n]))
        return n

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        if self.dead:
            return len(data)
        path = self._path(fd)
        self._gate("pwrite", path)
        n = os.pwrite(fd, data, offset)
        self._log("pwrite", path, fd=fd, offset=offset, data=bytes(data[:n]))
        return n

    def fsync(self, fd: int) -> None:
        if self.dead:
            return
        path = self._path(fd)
        self._gate("fsync", path)
        if self.real_sync:
            os.fsync(fd)
        self._log("fsync", path, fd=fd)

    def fdatasync(self, fd: int) -> None:
        if self.dead:
            return
        path = self._path(fd)
        self._gate("fdatasync", path)
        if self.real_sync:
            os.fdatasync(fd)
        self._log("fdatasync", path, fd=fd)

    def ftruncate(self, fd: int, length: int) -> None:
        path = self._path(fd)
        self._gate("ftruncate", path)
        os.ftruncate(fd, length)
        self._log("ftruncate", path, fd=fd, offset=length)

    def rename(self, src: str, dst: str) -> None:
        src, dst = os.path.abspath(src), os.path.abspath(dst)
        self._gate("rename", src)
        os.replace(src, dst)
        self._log("rename", src, dst=dst)

    def unlink(self, path: str) -> None:
        path = os.path.abspath(path)
        self._gate("unlink", path)
        os.unlink(path)
        self._log("unlink", path)

    def mkdir(self, path: str) -> None:
        path = os.path.abspath(path)
        self._gate("mkdir", path)
        os.mkdir(path, 0o755)
        self._log("mkdir", path)

    def fsync_dir(self, path: str) -> None:
        if self.dead:
            return
        path = os.path.abspath(path)
        self._gate("fsync_dir", path)
        if self.real_sync:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._log("fsync_dir", path)


class NoSyncIO(FileIO):
    """Plain ``os`` calls without the syncs: for checking states, where speed matters."""

    def fsync(self, fd: int) -> None:
        pass

    def fdatasync(self, fd: int) -> None:
        pass

    def fsync_dir(self, path: str) -> None:
        pass


# -- the model ---------------------------------------------------------------


class FileNode:
    """A regular file: durable bytes, the bytes the process sees, and what lies between."""

    def __init__(self, ino: int, data: bytes = b"") -> None:
        self.ino = ino
        self.durable = bytes(data)
        self.current = bytearray(data)
        #: ("write", offset, data) or ("truncate", length, b""), oldest first
        self.pending: list[tuple[str, int, bytes]] = []


class DirNode:
    """A directory: durable entries, current entries, and the changes between them."""

    def __init__(self, ino: int) -> None:
        self.ino = ino
        self.durable: dict[str, Node] = {}
        self.current: dict[str, Node] = {}
        self.pending: list[DirOp] = []


Node: TypeAlias = FileNode | DirNode


@dataclass(frozen=True, eq=False)
class DirOp:
    """A pending entry change. A rename across directories is two linked halves,
    ``rename_out`` (in the source directory) and ``rename_in`` (in the target),
    which a crash applies together or not at all (a rename is atomic), as the
    target half goes; only a sync of the target directory makes it durable."""

    kind: str  # "create" | "unlink" | "rename" | "rename_out" | "rename_in"
    name: str
    node: Node
    dst: str = ""  # rename: the new name; rename_out/rename_in: the other half's name
    pair: tuple[DirNode, DirOp] | None = field(default=None, repr=False)


#: A materialisable state: names to file bytes or to sub-trees.
Tree: TypeAlias = "dict[str, bytes | Tree]"


@dataclass(frozen=True)
class Variant:
    """How a power cut treats what was not synced.

    ``files``: drop | apply | torn-half | zero | random (per file: drop, apply,
    torn at a random byte, zero-filled, or scrambled by sector).
    ``dirs``: drop | apply | no-renames | random (per directory: a random prefix).
    """

    name: str
    files: str
    dirs: str
    seed: int = 0


DETERMINISTIC_VARIANTS = (
    Variant("all-dropped", "drop", "drop"),
    Variant("all-applied", "apply", "apply"),
    Variant("torn-half", "torn-half", "apply"),
    Variant("zero-filled", "zero", "apply"),
    Variant("new-entries-missing", "apply", "drop"),
    Variant("renames-lost", "apply", "no-renames"),
)


def random_variants(n: int, base_seed: int = 0) -> tuple[Variant, ...]:
    return tuple(
        Variant(f"random-{base_seed + i}", "random", "random", base_seed + i) for i in range(n)
    )


def _replay_dir(durable: dict[str, Node], ops: list[DirOp]) -> dict[str, Node]:
    """``durable`` with ``ops`` applied in order (a change whose source is gone is skipped)."""
    out = dict(durable)
    for op in ops:
        if op.kind in ("create", "rename_in"):
            out[op.name] = op.node
        elif op.kind in ("unlink", "rename_out"):
            if out.get(op.name) is op.node:
                del out[op.name]
        elif out.get(op.name) is op.node:  # rename within the directory
            del out[op.name]
            out[op.dst] = op.node
    return out


def _apply_write(buf: bytearray, offset: int, data: bytes) -> None:
    if offset > len(buf):
        buf.extend(bytes(offset - len(buf)))
    buf[offset : offset + len(data)] = data


def _apply_truncate(buf: bytearray, length: int) -> None:
    if length < len(buf):
        del buf[length:]
    else:
        buf.extend(bytes(length - len(buf)))


def _pending_bytes(node: FileNode) -> int:
    return sum(len(data) for kind, _, data in node.pending if kind == "write")


def torn(node: FileNode, cut: int) -> bytes:
    """The unsynced changes applied in order, up to ``cut`` bytes of written data."""
    buf = bytearray(node.durable)
    budget = cut
    for kind, arg, data in node.pending:
        if budget <= 0:
            break
        if kind == "truncate":
            _apply_truncate(buf, arg)
            continue
        take = min(len(data), budget)
        _apply_write(buf, arg, data[:take])
        budget -= take
    return bytes(buf)


def zero_filled(node: FileNode) -> bytes:
    """The file's new size persisted but none of its new data: the rest reads as zeros."""
    size = len(node.current)
    keep = node.durable[:size]
    return keep + bytes(size - len(keep))


def scrambled(node: FileNode, rng: random.Random) -> bytes:
    """Each sector of each unsynced write independently persisted or not (writeback order)."""
    buf = bytearray(node.durable)
    for kind, arg, data in node.pending:
        if kind == "truncate":
            _apply_truncate(buf, arg)
            continue
        pos = arg
        while pos < arg + len(data):
            end = min((pos // SECTOR + 1) * SECTOR, arg + len(data))
            piece = data[pos - arg : end - arg]
            if rng.random() < 0.5:
                _apply_write(buf, pos, piece)
            pos = end
    if rng.random() < 0.5 and len(buf) < len(node.current):
        buf.extend(bytes(len(node.current) - len(buf)))  # the size persisted, holes read as zeros
    return bytes(buf)


class Model:
    """The file system under ``root`` as a power cut sees it, op by op."""

    def __init__(self, root: str | Path) -> None:
        self.root = os.path.abspath(root)
        self._ino = 0
        self.top = self._dir()
        self.fds: dict[int, Node] = {}
        self.applied = 0

    def _dir(self) -> DirNode:
        self._ino += 1
        return DirNode(self._ino)

    def _file(self, data: bytes = b"") -> FileNode:
        self._ino += 1
        return FileNode(self._ino, data)

    @classmethod
    def snapshot(cls, root: str | Path) -> Model:
        """A model whose every file and directory under ``root`` is durable as it is now."""
        model = cls(root)

        def load(path: str, node: DirNode) -> None:
            for name in sorted(os.listdir(path)):
                full = os.path.join(path, name)
                child: Node
                if os.path.isdir(full):
                    child = model._dir()
                    load(full, child)
                else:
                    with open(full, "rb") as f:
                        child = model._file(f.read())
                node.durable[name] = node.current[name] = child

        load(model.root, model.top)
        return model

    # -- replay

    def _split(self, path: str) -> tuple[DirNode, str]:
        rel = os.path.relpath(path, self.root)
        parts = rel.split(os.sep)
        assert parts[0] != "..", f"{path} is outside {self.root}"
        node: Node = self.top
        for part in parts[:-1]:
            assert isinstance(node, DirNode)
            node = node.current[part]
        assert isinstance(node, DirNode), path
        return node, parts[-1]

    def _lookup(self, path: str) -> Node:
        if os.path.abspath(path) == self.root:
            return self.top
        parent, name = self._split(path)
        return parent.current[name]

    def apply(self, op: Op) -> None:
        self.applied += 1
        name = op.name
        if name == "open":
            parent, base = self._split(op.path)
            node = parent.current.get(base)
            if node is None:
                assert op.flags & os.O_CREAT, op
                node = self._file()
                parent.current[base] = node
                parent.pending.append(DirOp("create", base, node))
            if op.flags & os.O_TRUNC:
                assert isinstance(node, FileNode)
                node.current.clear()
                node.pending.append(("truncate", 0, b""))
            self.fds[op.fd] = node
        elif name == "close":
            self.fds.pop(op.fd, None)
        elif name in ("write", "pwrite"):
            node = self.fds[op.fd]
            assert isinstance(node, FileNode)
            _apply_write(node.current, op.offset, op.data)
            node.pending.append(("write", op.offset, op.data))
        elif name == "ftruncate":
            node = self.fds[op.fd]
            assert isinstance(node, FileNode)
            _apply_truncate(node.current, op.offset)
            node.pending.append(("truncate", op.offset, b""))
        elif name in ("fsync", "fdatasync"):
            self._sync(self.fds[op.fd])
        elif name == "fsync_dir":
            self._sync(self._lookup(op.path))
        elif name == "mkdir":
            parent, base = self._split(op.path)
            assert base not in parent.current, op
            node = self._dir()
            parent.current[base] = node
            parent.pending.append(DirOp("create", base, node))
        elif name == "unlink":
            parent, base = self._split(op.path)
            node = parent.current.pop(base)
            parent.pending.append(DirOp("unlink", base, node))
        elif name == "rename":
            parent, base = self._split(op.path)
            dparent, dbase = self._split(op.dst)
            node = parent.current.pop(base)
            dparent.current[dbase] = node
            if parent is dparent:
                parent.pending.append(DirOp("rename", base, node, dbase))
            else:
                inn = DirOp("rename_in", dbase, node, base)
                out = DirOp("rename_out", base, node, dbase, pair=(dparent, inn))
                object.__setattr__(inn, "pair", (parent, out))
                parent.pending.append(out)
                dparent.pending.append(inn)
        else:  # pragma: no cover
            raise AssertionError(f"unknown op {op}")

    @staticmethod
    def _sync(node: Node) -> None:
        if isinstance(node, FileNode):
            node.durable = bytes(node.current)
            node.pending.clear()
            return
        # A rename across directories is durable once its *target* directory is
        # synced (then both halves are: a rename is atomic, and journaled after
        # the source's earlier changes). Syncing only the source directory does
        # not make it durable: the old name stays.
        kept: list[DirOp] = []
        durable = dict(node.current)
        for op in node.pending:
            if op.pair is None:
                continue
            other, half = op.pair
            if op.kind == "rename_in" and half in other.pending:
                # The source's earlier changes (the old name's creation) come with it.
                upto = other.pending.index(half) + 1
                other.durable = _replay_dir(other.durable, other.pending[:upto])
                del other.pending[:upto]
            elif op.kind == "rename_out" and half in other.pending:
                kept.append(op)
                durable.setdefault(op.name, op.node)
        node.durable = durable
        node.pending[:] = kept

    # -- crash states

    def nodes(self) -> Iterator[tuple[str, Node]]:
        """Every node reachable now or durably, with a path (for reports)."""
        seen: set[int] = set()

        def walk(path: str, node: Node) -> Iterator[tuple[str, Node]]:
            if node.ino in seen:
                return
            seen.add(node.ino)
            yield path, node
            if isinstance(node, DirNode):
                named = [*node.durable.items(), *node.current.items()]
                named += [(op.name, op.node) for op in node.pending]
                for name, child in named:
                    yield from walk(f"{path}/{name}" if path else name, child)

        yield from walk("", self.top)

    def unsynced(self) -> list[str]:
        """Paths with pending changes, e.g. ``index.jsonl(2 writes)``."""
        out = []
        for path, node in self.nodes():
            if node.pending:
                out.append(f"{path or '.'}({len(node.pending)})")
        return out

    def crash_state(self, variant: Variant, k: int) -> tuple[Tree, list[str]]:
        """One state a power cut now could leave, and what was chosen per file/dir."""
        rng = random.Random(f"{variant.seed}:{k}")
        choices: list[str] = []
        files: dict[int, bytes] = {}
        dirs: dict[int, dict[str, Node]] = {}
        # Which pending entry changes survive, decided per directory first.
        chosen: dict[int, bool] = {}
        for _, node in self.nodes():
            if isinstance(node, DirNode) and node.pending:
                n = len(node.pending)
                if variant.dirs == "apply":
                    keep = n
                elif variant.dirs == "drop":
                    keep = 0
                elif variant.dirs == "random":
                    keep = rng.randint(0, n)
                else:
                    assert variant.dirs == "no-renames", variant.dirs
                    keep = n
                for i, op in enumerate(node.pending):
                    chosen[id(op)] = i < keep and not (
                        variant.dirs == "no-renames" and op.kind.startswith("rename")
                    )
        for _, node in self.nodes():  # a cross-directory rename goes as its target half goes
            if isinstance(node, DirNode):
                for op in node.pending:
                    if op.kind == "rename_out" and op.pair is not None:
                        chosen[id(op)] = chosen[id(op.pair[1])]

        def content(path: str, node: FileNode) -> bytes:
            if node.ino in files:
                return files[node.ino]
            fate = variant.files
            if node.pending and fate == "random":
                fate = rng.choice(FILE_FATES)
            if not node.pending or fate == "drop":
                data = node.durable
            elif fate == "apply":
                data = bytes(node.current)
            elif fate == "torn-half":
                data = torn(node, _pending_bytes(node) // 2)
            elif fate == "torn":
                cut = rng.randint(0, _pending_bytes(node))
                data = torn(node, cut)
                fate = f"torn@{cut}/{_pending_bytes(node)}"
            elif fate == "zero":
                data = zero_filled(node)
            elif fate == "scramble":
                data = scrambled(node, rng)
            else:  # pragma: no cover
                raise AssertionError(fate)
            if node.pending:
                choices.append(f"{path}: {fate} ({len(node.pending)} pending, {len(data)} bytes)")
            files[node.ino] = data
            return data

        def entries(path: str, node: DirNode) -> dict[str, Node]:
            if node.ino in dirs:
                return dirs[node.ino]
            if not node.pending:
                return node.durable
            ops = [op for op in node.pending if chosen[id(op)]]
            out = _replay_dir(node.durable, ops)
            changes = ", ".join(
                f"{o.kind} {o.name}" + (f"->{o.dst}" if o.kind == "rename" else "")
                for o in node.pending
            )
            choices.append(
                f"{path or '.'}/: {len(ops)} of {len(node.pending)} entry changes ({changes})"
            )
            dirs[node.ino] = out
            return out

        def build(path: str, node: DirNode) -> Tree:
            tree: Tree = {}
            for name, child in sorted(entries(path, node).items()):
                sub = f"{path}/{name}" if path else name
                tree[name] = (
                    content(sub, child) if isinstance(child, FileNode) else build(sub, child)
                )
            return tree

        return build("", self.top), choices


def fingerprint(tree: Tree) -> str:
    h = hashlib.sha256()

    def feed(t: Tree) -> None:
        for name in sorted(t):
            value = t[name]
            if isinstance(value, bytes):
                h.update(b"F%d:%s\0%d:" % (len(name), name.encode(), len(value)))
                h.update(value)
            else:
                h.update(b"D%d:%s\0" % (len(name), name.encode()))
                feed(value)
                h.update(b"U")

    feed(tree)
    return h.hexdigest()


def materialise(tree: Tree, dest: Path) -> None:
    """Write ``tree`` under ``dest`` (created)."""
    dest.mkdir(parents=True)
    for name, value in tree.items():
        if isinstance(value, bytes):
            (dest / name).write_bytes(value)
        else:
            materialise(value, dest / name)


def read_tree(root: Path, *, skip: frozenset[str] = frozenset({"LOCK"})) -> dict[str, bytes]:
    """Every file under ``root`` by relative path (for "nothing changed" checks)."""
    out: dict[str, bytes] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            if name in skip:
                continue
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, root)] = f.read()
    return out


@dataclass
class CrashPoint:
    """A crash after ``k`` operations, under one variant."""

    k: int
    variant: Variant
    tree: Tree
    choices: list[str] = field(default_factory=list)


def crash_points(
    root: str | Path,
    base: Model,
    ops: list[Op],
    variants: Callable[[int], tuple[Variant, ...]],
    *,
    first: int = 0,
) -> Iterator[CrashPoint]:
    """For every k in ``first..len(ops)``, replay ops[:k] into ``base`` and yield its states.

    ``base`` is consumed (replayed in place).
    """
    for k in range(len(ops) + 1):
        if k >= first:
            for variant in variants(k):
                tree, choices = base.crash_state(variant, k)
                yield CrashPoint(k, variant, tree, choices)
        if k < len(ops):
            base.apply(ops[k])
