"""A hit's snippet is made from only as much of a large stored text as it needs (the
text decompressed a piece at a time until the match and a snippet's width after it
are in hand), and is exactly the snippet the whole text gives: same words, same
marks, an ellipsis where text was cut off."""

from __future__ import annotations

import random

import pytest

from infai.store.file.search_index import _pack, _unpack, _unpack_head
from infai.store.search import make_snippet, parse_query


def noise(rng: random.Random, n: int) -> str:
    """Words that compress poorly, so the stored text spans many pieces."""
    letters = "bcdfghjklmnpqrstvwxz"
    return " ".join("".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(n))


@pytest.mark.parametrize("where", [0.0, 0.4, 0.999, None])
def test_the_snippet_is_the_whole_texts(where: float | None) -> None:
    rng = random.Random(7)
    words = noise(rng, 40_000).split()
    if where is not None:  # the match near the start, in the middle, at the very end
        words.insert(int(len(words) * where), "Pelican")
    text = " ".join(words)
    packed = _pack(text)
    assert packed[:1] == b"z" and len(packed) > 8 * 4096
    query = parse_query("pelican")
    head = _unpack_head(packed, [b"pelican"])
    assert text.startswith(head)
    if where is not None and where < 0.9:
        assert len(head) < len(text) // 2 + 4096  # not all of it was needed
    assert make_snippet(head, query) == make_snippet(text, query)
    assert _unpack(packed) == text


def test_a_needle_not_in_the_bytes_takes_the_whole_text() -> None:
    # The folded needle ("eclair") never appears in the bytes as written: whole text.
    rng = random.Random(3)
    text = noise(rng, 20_000) + " Éclair " + noise(rng, 200)
    query = parse_query("eclair")
    head = _unpack_head(_pack(text), [b"eclair"])
    assert head == text
    assert make_snippet(head, query) == make_snippet(text, query)
