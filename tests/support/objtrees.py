"""Build workspace trees as store objects for tests: a dict of paths to bytes in,
the root tree's digest and every digest it reaches out."""

from __future__ import annotations

from infai.store.objects import ObjectStore
from infai.store.trees import TreeEntry, encode_tree


def put_tree(objects: ObjectStore, files: dict[str, bytes]) -> tuple[str, set[str]]:
    """Store ``files`` (``"a/b.txt"`` -> content) as trees; the root and all it reaches."""
    reached: set[str] = set()
    with objects.batch() as batch:
        root = _put_dir(batch, files, reached)
    return root, reached


def _put_dir(batch: object, files: dict[str, bytes], reached: set[str]) -> str:
    put = batch.put  # type: ignore[attr-defined]
    entries: list[TreeEntry] = []
    subdirs: dict[str, dict[str, bytes]] = {}
    for path, data in files.items():
        head, sep, rest = path.partition("/")
        if sep:
            subdirs.setdefault(head, {})[rest] = data
        else:
            digest = put(data)
            reached.add(digest)
            entries.append(TreeEntry(head, "file", digest, len(data)))
    for name, below in subdirs.items():
        digest = _put_dir(batch, below, reached)
        entries.append(TreeEntry(name, "dir", digest, sum(map(len, below.values()))))
    root: str = put(encode_tree(entries))
    reached.add(root)
    return root
