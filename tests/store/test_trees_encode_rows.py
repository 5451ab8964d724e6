"""The snapshot's unchecked tree encoder gives the canonical encoder's exact bytes."""

from __future__ import annotations

import random

from infai.store.trees import EntryType, TreeEntry, decode_tree, encode_rows, encode_tree

_NAMES = ["a", "B", "é", "\udcff", "z z", "日本", "x.txt", "-", "a\tb", '"q"', "\\"]


def test_encode_rows_matches_encode_tree_byte_for_byte() -> None:
    rng = random.Random(14)
    for _ in range(300):
        names = rng.sample(_NAMES, rng.randint(0, len(_NAMES)))
        rows: list[tuple[str, EntryType, str, int, bool]] = []
        for name in names:
            kind: EntryType = rng.choice(["file", "link", "dir"])
            digest = "sha256:" + "".join(rng.choice("0123456789abcdef") for _ in range(64))
            rows.append((name, kind, digest, rng.randint(0, 10**9), rng.random() < 0.5))
        want = encode_tree(TreeEntry(*row) for row in rows)
        assert encode_rows(list(rows)) == want
        assert [e.name for e in decode_tree(want)] == sorted(names)
