"""Directory trees as objects: how a workspace snapshot names a whole directory.

Model, in prose: like git's trees, a tree object lists one directory's entries
(name, type, digest, size, executable bit), sorted by name; an entry of type
``dir`` names another tree object, a ``file`` its content object, a ``link``
an object holding the symlink's target (its bytes as the OS gives them). A
snapshot is one root tree digest. Because a tree's digest depends only on what
is below it, an unchanged directory has the same digest in every snapshot and
is stored once: a snapshot's metadata costs what changed, not the size of the
repository.

The encoding is canonical JSON (``{"v":1,"entries":[[name,type,digest,size,x],…]}``
with ASCII escapes, so names that are not UTF-8 survive as escaped surrogates),
so equal trees have equal bytes. Decoding is strict and names what is wrong.
:func:`reachable` walks trees from roots for garbage collection, reading each
distinct tree once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .codec import digest_of
from .errors import InvalidInput
from .objects import check_digest

if TYPE_CHECKING:
    from .objects import ObjectStore

#: the tree encoding's version (``"v"`` in every tree object)
TREE_VERSION = 1
EntryType = Literal["file", "link", "dir"]
_TYPES = ("file", "link", "dir")


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One name in a directory: what it is and the object holding it.

    ``size`` is the file's length, the link target's length, or for a directory
    the total size of the files below it. ``executable`` is kept for files only.
    """

    name: str
    type: EntryType
    digest: str
    size: int
    executable: bool = False


def _check_name(name: object, where: str) -> str:
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\0" in name:
        raise InvalidInput(f"{where}: bad entry name {name!r}")
    try:  # a name from a directory listing always is bytes: a lone surrogate is not
        name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise InvalidInput(f"{where}: bad entry name {name!r} (no file can have it)") from None
    return name


def encode_tree(entries: Iterable[TreeEntry]) -> bytes:
    """The canonical bytes of a tree holding ``entries`` (sorted here; a repeated
    name is ``InvalidInput``)."""
    ordered = sorted(entries, key=lambda e: e.name)
    rows: list[list[object]] = []
    previous = None
    for entry in ordered:
        _check_name(entry.name, "tree entry")
        if entry.name == previous:
            raise InvalidInput(f"tree entry: the name {entry.name!r} appears twice")
        previous = entry.name
        if entry.type not in _TYPES:
            raise InvalidInput(f"tree entry {entry.name!r}: unknown type {entry.type!r}")
        check_digest(entry.digest)
        if entry.size < 0:
            raise InvalidInput(f"tree entry {entry.name!r}: negative size")
        executable = 1 if entry.executable and entry.type == "file" else 0
        rows.append([entry.name, entry.type, entry.digest, entry.size, executable])
    text = json.dumps({"v": TREE_VERSION, "entries": rows}, separators=(",", ":"))
    return text.encode("ascii")


def encode_rows(rows: list[tuple[str, EntryType, str, int, bool]]) -> bytes:
    """:func:`encode_tree`'s bytes for rows ``(name, type, digest, size,
    executable)`` that are valid by construction (a snapshot's: names from the
    directory listing, digests it computed), without checking each: a warm
    snapshot re-encodes a changed directory, and the checks were a third of
    that. Sorts ``rows`` in place; the names must be distinct."""
    rows.sort()
    entries = [[n, t, d, s, 1 if x and t == "file" else 0] for n, t, d, s, x in rows]
    return json.dumps({"v": TREE_VERSION, "entries": entries}, separators=(",", ":")).encode(
        "ascii"
    )


#: the digest of the tree with no entries: an empty directory's entry names it
EMPTY_TREE = digest_of(encode_tree(()))


def _entry(row: object, where: str) -> TreeEntry:
    if not isinstance(row, list) or len(row) != 5:
        raise InvalidInput(f"{where}: an entry must be [name, type, digest, size, executable]")
    name, kind, digest, size, executable = row
    _check_name(name, where)
    if kind not in _TYPES:
        raise InvalidInput(f"{where}: unknown type {kind!r}")
    if not isinstance(digest, str):
        raise InvalidInput(f"{where}: digest must be a string")
    check_digest(digest)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise InvalidInput(f"{where}: size must be a non-negative integer")
    if executable not in (0, 1):
        raise InvalidInput(f"{where}: executable must be 0 or 1")
    return TreeEntry(name, kind, digest, size, bool(executable))


def decode_tree(data: bytes, where: str = "tree") -> list[TreeEntry]:
    """The entries of a tree object, strictly (errors name ``where`` and the entry)."""
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise InvalidInput(f"{where}: not a tree object: {exc}") from None
    if not isinstance(obj, dict) or obj.get("v") != TREE_VERSION:
        raise InvalidInput(f"{where}: not a version {TREE_VERSION} tree object")
    rows = obj.get("entries")
    if not isinstance(rows, list):
        raise InvalidInput(f"{where}: entries must be a list")
    return [_entry(row, f"{where}: entry {n}") for n, row in enumerate(rows)]


def reachable(objects: ObjectStore, roots: Sequence[str]) -> set[str]:
    """Every digest reachable from the root trees ``roots`` (roots included),
    reading each distinct tree once. A missing or damaged tree raises (gc must
    never guess what a tree it cannot read holds)."""
    seen: set[str] = set()
    pending = [check_digest(root) for root in roots]
    while pending:
        digest = pending.pop()
        if digest in seen:
            continue
        seen.add(digest)
        for entry in decode_tree(objects.get(digest), f"tree {digest}"):
            if entry.type == "dir":
                pending.append(entry.digest)
            else:
                seen.add(entry.digest)
    return seen
