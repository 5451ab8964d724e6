"""The sandbox's cost per ``bash`` call: the same command through the ``bash`` tool,
confined by bubblewrap and not.

Each call runs ``true`` through :class:`~infai.tools.shell.Bash` in a working
directory that is a git repository (so both sides pay for the scrubbed
environment and the git hardening, which every command gets), alternating
confined (``Sandbox()``) and unconfined (``Sandbox.off()``) calls so load on
the machine hits both alike. The cost of the sandbox is the difference of the
medians; the ratio says how much slower a trivial command gets (a real
command's own time dilutes it). The availability probe runs once before
timing. Target: under 15 ms per call.

Run: ``python benchmarks/sandbox_bench.py [--calls N] [--quick] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(_ROOT / "src"), str(_ROOT)]

from infai.tools import Sandbox, ToolContext  # noqa: E402
from infai.tools.shell import Bash  # noqa: E402

TARGET_MS = 15.0


async def _time_calls(wd: Path, calls: int, command: str) -> dict[str, list[float]]:
    tools = {"confined": Bash(sandbox=Sandbox()), "unconfined": Bash(sandbox=Sandbox.off())}
    context = ToolContext(wd, "bench")
    times: dict[str, list[float]] = {name: [] for name in tools}
    for _ in range(calls):
        for name, tool in tools.items():
            t0 = time.perf_counter()
            out = await tool.run({"command": command}, context)
            times[name].append((time.perf_counter() - t0) * 1000)
            if out.is_error:
                raise SystemExit(f"{name} call failed: {out.content}")
    return times


def measure(calls: int, command: str = "true") -> dict[str, Any]:
    """Median milliseconds per call, confined and not, and the difference."""
    sandbox = Sandbox()
    if not sandbox.available:
        raise SystemExit(f"the sandbox is not available here: {sandbox.reason}")
    with tempfile.TemporaryDirectory(prefix="infai-sandbox-bench-") as tmp:
        wd = Path(tmp)
        subprocess.run(["git", "init", "-q", str(wd)], check=True)
        times = asyncio.run(_time_calls(wd, calls, command))
    confined = statistics.median(times["confined"])
    unconfined = statistics.median(times["unconfined"])
    return {
        "calls": calls,
        "command": command,
        "confined_ms": confined,
        "unconfined_ms": unconfined,
        "cost_ms": confined - unconfined,
        "ratio": confined / unconfined,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="a smoke run (20 calls)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    result = measure(20 if args.quick else args.calls)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    r = result
    print(f"bash tool, `{r['command']}`, {r['calls']} calls each, median per call:")
    print(f"  unconfined {r['unconfined_ms']:.1f} ms | sandboxed {r['confined_ms']:.1f} ms")
    verdict = "PASS" if r["cost_ms"] < TARGET_MS else "FAIL"
    print(
        f"sandbox cost: {r['cost_ms']:.1f} ms per call ({r['ratio']:.2f}x); "
        f"target < {TARGET_MS:g} ms: {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
