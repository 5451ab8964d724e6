"""Deterministic, seeded workload shared by every store in ``store_bench.py``.

Holds the shape of the benchmark session (:class:`Tree`: ``BRANCHES`` chains forking from
random earlier events, an active path of ``PATH_LEN`` events, ``TOOL_FRACTION`` of them
64 KiB tool results), the record of each event (:func:`record_for`), and the validation
checksum a resume must reproduce (:func:`content_chars`). Nothing here touches a store; the
same tree and records feed the infai fixture and both baselines (``baselines.py``).
:func:`content_chars` is also copied verbatim into the resume child process (see
``store_bench.child_program``), so it must stay self-contained.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

BRANCHES = 40
PATH_LEN = 500
TOOL_FRACTION = 0.05
TOOL_RESULT_BYTES = 64 * 1024
BASE_EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z
WORDS = (
    "the a to of and in is it that for on with as this be are file test function error "
    "value return import class self def module path config session event store branch "
    "parent head index chunk blob record tool call result message user assistant model "
    "context compaction fix bug refactor check run output line build pass fail"
)
VOCAB = WORDS.split()


# ----------------------------------------------------------------------------- fixture data


@dataclass
class Tree:
    """Shape of one session: event i has parent ``parents[i]`` (-1 = root)."""

    parents: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    segments: list[tuple[int, int, int]] = field(default_factory=list)  # (start, end, fork)

    def active_path(self) -> list[int]:
        path, i = [], len(self.parents) - 1
        while i >= 0:
            path.append(i)
            i = self.parents[i]
        return path[::-1]


def make_tree(n: int, seed: int) -> Tree:
    """``BRANCHES`` chains appended one after another, each forking from a random earlier
    event; the last (active) one forks at a depth that makes its root path ``PATH_LEN`` long."""
    if n < 2 * PATH_LEN:
        raise SystemExit(f"size {n} too small: need >= {2 * PATH_LEN} events")
    rng = random.Random(seed)
    fork_depth = rng.randint(PATH_LEN * 2 // 5, PATH_LEN * 3 // 5)
    last_len = PATH_LEN - fork_depth - 1
    rest = n - last_len
    trunk = max(fork_depth + 1, rest // BRANCHES)
    q, r = divmod(rest - trunk, BRANCHES - 2)
    lengths = [trunk] + [q + (i < r) for i in range(BRANCHES - 2)] + [last_len]
    tree, depth = Tree(), list[int]()
    p_tool = TOOL_FRACTION / (1 - TOOL_FRACTION)  # a step emits a call+result pair w.p. p_tool
    for b, length in enumerate(lengths):
        if b == 0:
            fork = -1
        elif b == len(lengths) - 1:
            fork = rng.choice([i for i, d in enumerate(depth) if d == fork_depth])
        else:
            fork = rng.randrange(len(depth))
        start, prev, user_turn, j = len(tree.parents), fork, True, 0
        tree.segments.append((start, start + length, fork))
        while j < length:
            if length - j >= 2 and rng.random() < p_tool:
                steps = [("tool_call", "assistant"), ("tool_result", "tool")]
            else:
                steps = [("message", "user" if user_turn else "assistant")]
                user_turn = not user_turn
            for kind, role in steps:
                tree.parents.append(prev)
                tree.kinds.append(kind)
                tree.roles.append(role)
                depth.append(depth[prev] + 1 if prev >= 0 else 0)
                prev = len(tree.parents) - 1
            j += len(steps)
    assert len(tree.parents) == n and len(tree.active_path()) == PATH_LEN
    return tree


def prose(rng: random.Random, size: int) -> str:
    return " ".join(rng.choices(VOCAB, k=size // 3))[:size]


def record_for(i: int, kind: str, seed: int) -> dict[str, Any]:
    """Deterministic record of event i; tool results are 64 KiB of unique random hex."""
    rng = random.Random(seed * 1_000_003 + i)
    if kind == "tool_result":
        content = rng.randbytes(TOOL_RESULT_BYTES // 2).hex()
        return {"call_id": f"call_{i - 1}", "name": "bash", "content": content}
    if kind == "tool_call":
        args = {"command": f"pytest -q tests/test_{rng.randrange(1000)}.py"}
        return {"call_id": f"call_{i}", "name": "bash", "arguments": args}
    return {"content": prose(rng, rng.randint(200, 1000))}


def iter_events(tree: Tree, seed: int) -> Iterator[tuple[int, int, str, str, dict[str, Any]]]:
    for i, (parent, kind, role) in enumerate(
        zip(tree.parents, tree.kinds, tree.roles, strict=True)
    ):
        yield i, parent, kind, role, record_for(i, kind, seed)


def content_chars(records: Iterable[Any]) -> int:
    """Validation checksum: total characters of ``content`` over a path's records."""
    total = 0
    for rec in records:
        text = rec.get("content") if isinstance(rec, dict) else getattr(rec, "content", None)
        total += len(text) if isinstance(text, str) else 0
    return total
