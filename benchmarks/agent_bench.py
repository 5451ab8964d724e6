"""Harness overhead per agent turn, model time excluded.

For sessions of 2,000 and 20,000 events (the store benchmark's workload: 40
branches, an active path of ~500 events, 5% 64 KiB tool results), an
:class:`~infai.agent.AgentSession` with the ``offline`` model runs a series of
turns. Each turn stores the prompt, streams the reply and stores it. The
script times every turn and subtracts the time spent inside the model's stream
and inside fsync/fdatasync, leaving the harness's own work: context assembly,
encoding, checksums, index and HEAD. The first turn after opening rebuilds the
context from the store and is shown apart; later turns use the in-memory
context. Target: under 5 ms per turn plus the syncs, and independent of the
session's size.

Run: ``python benchmarks/agent_bench.py [--turns N] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(_ROOT / "src"), str(_ROOT)]

from benchmarks.store_bench import build_infai  # noqa: E402
from benchmarks.workload import make_tree  # noqa: E402
from infai.agent import AgentSession  # noqa: E402
from infai.llm import OfflineModel, Request, StreamEvent  # noqa: E402
from infai.store import FileIO, Store, StoreOptions  # noqa: E402
from infai.tools import AllowAll, Toolbox  # noqa: E402

TARGET_MS = 5.0


class SyncTimer(FileIO):
    """Counts and times the syncs the store makes."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.count = 0

    def fsync(self, fd: int) -> None:
        t0 = time.perf_counter()
        super().fsync(fd)
        self.seconds += time.perf_counter() - t0
        self.count += 1

    def fdatasync(self, fd: int) -> None:
        t0 = time.perf_counter()
        super().fdatasync(fd)
        self.seconds += time.perf_counter() - t0
        self.count += 1


class TimedModel:
    """The offline model, with the time spent inside its stream measured."""

    def __init__(self) -> None:
        self.inner = OfflineModel(context_window=10_000_000)
        self.seconds = 0.0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def context_window(self) -> int:
        return self.inner.context_window

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        t0 = time.perf_counter()
        events = self.inner.stream(request)
        self.seconds += time.perf_counter() - t0
        while True:
            t0 = time.perf_counter()
            try:
                event = await events.__anext__()
            except StopAsyncIteration:
                self.seconds += time.perf_counter() - t0
                return
            self.seconds += time.perf_counter() - t0
            yield event


def measure(home: Path, sid: str, turns: int) -> dict[str, Any]:
    io, model = SyncTimer(), TimedModel()
    store = Store(home, StoreOptions(), io=io)
    rows: list[tuple[float, float, float, int]] = []  # total, model, sync, syncs
    with AgentSession(store, sid, model=model, toolbox=Toolbox(), permissions=AllowAll()) as s:

        async def turn(text: str) -> None:
            async for _ in s.prompt(text):
                pass

        for k in range(turns + 1):
            io.seconds, io.count, model.seconds = 0.0, 0, 0.0
            t0 = time.perf_counter()
            asyncio.run(turn(f"turn {k}: what next?"))
            rows.append((time.perf_counter() - t0, model.seconds, io.seconds, io.count))
    overhead = [(t - m - y) * 1000 for t, m, y, _ in rows]
    return {
        "first_turn_overhead_ms": overhead[0],
        "overhead_ms": statistics.median(overhead[1:]),
        "sync_ms": statistics.median(y * 1000 for _, _, y, _ in rows[1:]),
        "syncs_per_turn": statistics.median(c for *_, c in rows[1:]),
        "turn_ms": statistics.median(t * 1000 for t, *_ in rows[1:]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--sizes", default="2000,20000")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--seed", type=int, default=20260101)
    args = ap.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="infai-agent-bench-") as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            home = Path(tmp) / f"s{n}"
            sid = build_infai(home, make_tree(n, args.seed), args.seed)
            results[str(n)] = measure(home, sid, args.turns)
            print(f"measured {n:,} events", file=sys.stderr)
    sizes = list(results)
    growth = results[sizes[-1]]["overhead_ms"] / results[sizes[0]]["overhead_ms"]
    if args.json:
        print(json.dumps({"results": results, "growth": growth}, indent=2))
        return 0
    print(f"harness overhead per turn (offline model, {args.turns} turns, median; model time and "
          "syncs excluded)")  # fmt: skip
    print("events  | overhead ms | first turn ms | syncs/turn | sync ms | whole turn ms")
    for size, r in results.items():
        print(
            f"{int(size):>7,} | {r['overhead_ms']:>11.2f} | {r['first_turn_overhead_ms']:>13.2f} | "
            f"{r['syncs_per_turn']:>10.0f} | {r['sync_ms']:>7.2f} | {r['turn_ms']:>13.2f}"
        )
    worst = max(r["overhead_ms"] for r in results.values())
    print(f"target: overhead < {TARGET_MS} ms: {'PASS' if worst < TARGET_MS else 'FAIL'} "
          f"({worst:.2f}); growth {sizes[-1]}/{sizes[0]}: {growth:.2f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
