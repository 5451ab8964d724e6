"""Listing and comparing snapshots: the files of a tree, and what changed between two.

Model, in prose: a snapshot is a root tree; its files are the leaves, named by
their path from the root. Two trees are compared top-down, and a subtree whose
digest is the same on both sides is skipped without being read, so comparing
two snapshots of a big repository costs what changed between them. A change is
one path: ``added``, ``removed``, ``modified`` (other bytes, perhaps another
mode too), ``mode`` (only the executable bit) or ``type`` (a file became a
symlink or back). A file that became a directory is the file ``removed`` and
the files below ``added``. An empty directory is a path of its own (type
``dir``, the empty tree's digest): it is ``added`` or ``removed`` like a file,
and a directory that became empty or stopped being so is its files' changes
plus the empty directory's. For people, :func:`render_diff` turns changes into
unified diffs of text files (:mod:`difflib`) and a list of binary changes.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Literal

from infai.store.objects import ObjectStore
from infai.store.trees import EMPTY_TREE, TreeEntry, decode_tree

ChangeKind = Literal["added", "removed", "modified", "mode", "type"]
#: text diffs of files larger than this are not computed (listed as binary changes)
DIFF_SIZE_CAP = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One file, symlink or empty directory of a snapshot."""

    path: str
    type: Literal["file", "link", "dir"]
    digest: str
    size: int
    executable: bool = False

    def same(self, other: FileInfo | None) -> bool:
        """Whether ``other`` holds the same thing (type, bytes and mode)."""
        return (
            other is not None
            and self.type == other.type
            and self.digest == other.digest
            and self.executable == other.executable
        )

    def to_obj(self) -> dict[str, object]:
        """The JSON form (for ``--json`` and the server)."""
        return {
            "path": self.path,
            "type": self.type,
            "digest": self.digest,
            "size": self.size,
            "executable": self.executable,
        }


@dataclass(frozen=True, slots=True)
class Change:
    """One path that differs between two snapshots (``old`` → ``new``)."""

    path: str
    kind: ChangeKind
    old: FileInfo | None
    new: FileInfo | None

    def to_obj(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "path": self.path,
            "kind": self.kind,
            "old": self.old.to_obj() if self.old else None,
            "new": self.new.to_obj() if self.new else None,
        }


def _entries(objects: ObjectStore, tree: str | None) -> dict[str, TreeEntry]:
    if tree is None:
        return {}
    return {e.name: e for e in decode_tree(objects.get(tree), f"tree {tree}")}


def _info(path: str, entry: TreeEntry) -> FileInfo:
    return FileInfo(path, entry.type, entry.digest, entry.size, entry.executable)


def _empty_dir(entry: TreeEntry) -> bool:
    return entry.type == "dir" and entry.digest == EMPTY_TREE


def tree_files(objects: ObjectStore, tree: str, under: str = "") -> dict[str, FileInfo]:
    """Every file, symlink and empty directory of ``tree`` by path (``under``
    prefixes the paths)."""
    out: dict[str, FileInfo] = {}
    pending = [(under, tree)]
    while pending:
        prefix, digest = pending.pop()
        for entry in _entries(objects, digest).values():
            if entry.type == "dir" and not _empty_dir(entry):
                pending.append((prefix + entry.name + "/", entry.digest))
            else:
                out[prefix + entry.name] = _info(prefix + entry.name, entry)
    return dict(sorted(out.items()))


def _one_side(
    objects: ObjectStore, prefix: str, entry: TreeEntry, kind: ChangeKind, out: list[Change]
) -> None:
    path = prefix + entry.name
    if entry.type == "dir" and not _empty_dir(entry):
        for info in tree_files(objects, entry.digest, path + "/").values():
            out.append(
                Change(info.path, kind, None, info)
                if kind == "added"
                else Change(info.path, kind, info, None)
            )
    else:
        info = _info(path, entry)
        out.append(
            Change(path, kind, None, info) if kind == "added" else Change(path, kind, info, None)
        )


def _compare(
    objects: ObjectStore, prefix: str, a: str | None, b: str | None, out: list[Change]
) -> None:
    left, right = _entries(objects, a), _entries(objects, b)
    for name in sorted(left.keys() | right.keys()):
        old, new = left.get(name), right.get(name)
        if (
            old is not None
            and new is not None
            and old.digest == new.digest
            and (old.type == new.type and old.executable == new.executable)
        ):
            continue
        path = prefix + name
        if old is not None and new is not None and old.type == "dir" and new.type == "dir":
            if _empty_dir(old):  # it was empty, it holds something now
                out.append(Change(path, "removed", _info(path, old), None))
            if _empty_dir(new):
                out.append(Change(path, "added", None, _info(path, new)))
            _compare(objects, path + "/", old.digest, new.digest, out)
        elif old is not None and new is not None and "dir" not in (old.type, new.type):
            kind: ChangeKind = "modified"
            if old.type != new.type:
                kind = "type"
            elif old.digest == new.digest:
                kind = "mode"
            out.append(Change(path, kind, _info(path, old), _info(path, new)))
        else:
            if old is not None:
                _one_side(objects, prefix, old, "removed", out)
            if new is not None:
                _one_side(objects, prefix, new, "added", out)


def diff_trees(objects: ObjectStore, old: str | None, new: str | None) -> list[Change]:
    """The changes from tree ``old`` to tree ``new`` (``None`` is the empty tree),
    sorted by path; equal subtrees are not read."""
    if old == new:
        return []
    out: list[Change] = []
    _compare(objects, "", old, new, out)
    return sorted(out, key=lambda c: (c.path, c.kind != "removed"))


@dataclass(frozen=True, slots=True)
class DiffReport:
    """Changes for people: ``text`` holds (path, unified diff) of text files,
    ``binary`` the changes that cannot be shown as text (or are too big)."""

    changes: list[Change]
    text: list[tuple[str, str]] = field(default_factory=list)
    binary: list[Change] = field(default_factory=list)

    def to_obj(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "changes": [c.to_obj() for c in self.changes],
            "text": [{"path": p, "diff": d} for p, d in self.text],
            "binary": [c.path for c in self.binary],
        }


def _text(objects: ObjectStore, info: FileInfo | None) -> list[str] | None:
    """The lines of a file if it is text (UTF-8, no NUL, not too big), else ``None``."""
    if info is None:
        return []
    if info.size > DIFF_SIZE_CAP:
        return None
    data = objects.get(info.digest)
    if b"\0" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if info.type == "link":
        return [f"-> {text}\n"]
    return text.splitlines(keepends=True)


def line_counts(
    objects: ObjectStore, old: FileInfo | None, new: FileInfo | None
) -> tuple[int, int] | None:
    """(lines added, lines removed) from ``old`` to ``new`` (``None``: no file),
    as a unified diff counts them; ``None`` when either side is not text (or is
    over :data:`DIFF_SIZE_CAP`), so a restore can say ``a.txt (+2 -1)``."""
    before, after = _text(objects, old), _text(objects, new)
    if before is None or after is None:
        return None
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


def diff_header(side: str, path: str) -> str:
    """A diff header's name (``side``: ``a/`` or ``b/``): an absolute path joined
    as git joins one (``a/tmp/x``, not ``a//tmp/x``), quoted with escapes as git
    does when it holds a newline, tab, quote or backslash (else a name could
    write header lines). Shared by the checkpoints' diffs and the TUI's."""
    name = side + path.lstrip("/")
    if any(c in name for c in '\n\t"\\'):
        return json.dumps(name, ensure_ascii=False)
    return name


def render_diff(objects: ObjectStore, changes: list[Change], context: int = 3) -> DiffReport:
    """Unified diffs of the text files among ``changes``; the rest as binary changes."""
    report = DiffReport(changes=list(changes))
    for change in changes:
        side = change.new if change.new is not None else change.old
        if side is not None and side.type == "dir":
            said = "new empty directory\n" if change.new else "deleted empty directory\n"
            report.text.append((change.path, said))
            continue
        if change.kind == "mode":
            old_x = change.old.executable if change.old else False
            mode = f"mode {'755' if old_x else '644'} -> {'644' if old_x else '755'}\n"
            report.text.append((change.path, mode))
            continue
        before, after = _text(objects, change.old), _text(objects, change.new)
        if before is None or after is None:
            report.binary.append(change)
            continue
        lines = difflib.unified_diff(
            before,
            after,
            fromfile="/dev/null" if change.old is None else diff_header("a/", change.path),
            tofile="/dev/null" if change.new is None else diff_header("b/", change.path),
            n=context,
        )
        body = "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            for line in lines
        )
        report.text.append((change.path, body))
    return report
