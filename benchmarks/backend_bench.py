"""The store benchmark's workloads on both backends in one run, side by side.

The same seeded session tree as ``store_bench.py`` (40 branches, 5% of events
64 KiB tool results, an active path of 500 events) is written into a directory
store and into a PostgreSQL database, each through the one storage contract
(:func:`infai.store.open_store`), then:

1. cold resume: a fresh ``python -c`` process opens the store and builds the
   active context with every record loaded (imports before the timer); median
   time and the child's peak RSS;
2. durable appends: one ~1 KiB message per commit, and batches of 10, median ms;
3. listing sessions (metadata only), 500 by default.

PostgreSQL is the server at ``--pg URL``, else a throwaway cluster started for
the run with fsync on (``tests/support/pgserver.py``; the system's PostgreSQL
binaries), its data in ``--dir`` like the directory store's, so both commit to
the same disk. The database runs on the same 2 cores as the benchmark, reached
over loopback TCP: the numbers say what one machine sees, not a cluster.

    .venv/bin/python benchmarks/backend_bench.py            # 2,000 and 20,000 events
    .venv/bin/python benchmarks/backend_bench.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (HERE.parent, HERE.parent / "src", HERE.parent / "tests" / "support"):
    if str(_path) not in sys.path:  # run as a script: the project's packages, and pgserver
        sys.path.insert(0, str(_path))

from benchmarks.store_bench import build_session, filesystem_of, log  # noqa: E402
from benchmarks.workload import make_tree  # noqa: E402

CHILD = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {src!r})
from infai.store import open_store
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0
location, sid = sys.argv[1], sys.argv[2]
if location.startswith("postgresql"):
    import infai.store.pg  # imports before the timer, as for the directory store
start = time.perf_counter()
store = open_store(location)
with store.open_reader(sid) as reader:
    events = reader.context().events
elapsed = time.perf_counter() - start
store.close()
print(json.dumps({{"ms": elapsed * 1000, "rss_mb": rss(), "events": len(events)}}))
"""


def resume(location: str, sid: str, reps: int) -> dict[str, float]:
    program = CHILD.format(src=str(HERE.parent / "src"))
    runs = []
    for _ in range(reps):
        done = subprocess.run(
            [sys.executable, "-c", program, location, sid],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"resume child failed: {done.stderr}")
        runs.append(json.loads(done.stdout))
    return {
        "ms": statistics.median(r["ms"] for r in runs),
        "rss_mb": statistics.median(r["rss_mb"] for r in runs),
        "events": runs[0]["events"],
    }


def appends(store: Any, ops: int, batches: int) -> dict[str, float]:
    from infai.store import MessageRecord

    sid = store.create_session(name="appends").id
    text = "x" * 1000
    single, batched = [], []
    with store.open_writer(sid) as writer:
        for _ in range(ops):
            start = time.perf_counter()
            writer.append(MessageRecord(content=text), "user")
            single.append(time.perf_counter() - start)
        for _ in range(batches):
            items = [(MessageRecord(content=text), "user") for _ in range(10)]
            start = time.perf_counter()
            writer.append_batch(items)
            batched.append(time.perf_counter() - start)
    return {
        "single_ms": statistics.median(single) * 1000,
        "batch10_ms": statistics.median(batched) * 1000,
    }


def listing(store: Any, count: int, reps: int) -> float:
    existing = len(store.list_sessions())
    for i in range(existing, count):
        store.create_session(name=f"s{i}", working_dir="/w", model="offline")
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        listed = store.list_sessions()
        times.append(time.perf_counter() - start)
        assert len(listed) >= count
    return statistics.median(times) * 1000


def run_backend(location: str, sizes: list[int], reps: int, ops: int, args: Any) -> dict[str, Any]:
    from infai.store import open_store

    out: dict[str, Any] = {"resume": {}}
    store = open_store(location)
    try:
        for n in sizes:
            log(f"  building {n:,} events")
            sid = build_session(store, make_tree(n, args.seed), args.seed)
            log(f"  resume at {n:,}: {reps} fresh processes")
            out["resume"][str(n)] = resume(location, sid, reps)
        log(f"  appends: {ops} single, {ops // 2} batches of 10")
        out["append"] = appends(store, ops, ops // 2)
        log(f"  listing {args.sessions} sessions")
        out["list_ms"] = listing(store, args.sessions, 7)
    finally:
        store.close()
    return out


def render(res: dict[str, Any]) -> str:
    rows = [["workload", "directory", "postgresql", "pg / dir"]]

    def add(label: str, d: float, p: float, unit: str) -> None:
        rows.append([label, f"{d:,.2f}{unit}", f"{p:,.2f}{unit}", f"{p / d:.2f}x"])

    dirs, pgs = res["directory"], res["postgresql"]
    for n in res["config"]["sizes"]:
        d, p = dirs["resume"][str(n)], pgs["resume"][str(n)]
        add(f"cold resume @{int(n):,} (ms)", d["ms"], p["ms"], "")
        add(f"  peak RSS @{int(n):,} (MB)", d["rss_mb"], p["rss_mb"], "")
    add("durable append, 1 event (ms)", dirs["append"]["single_ms"], pgs["append"]["single_ms"], "")
    add("durable append, batch of 10 (ms)", dirs["append"]["batch10_ms"],
        pgs["append"]["batch10_ms"], "")  # fmt: skip
    add(f"list {res['config']['sessions']} sessions (ms)", dirs["list_ms"], pgs["list_ms"], "")
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [" | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                        enumerate(zip(r, widths, strict=True))) for r in rows]  # fmt: skip
    lines.insert(1, "-+-".join("-" * w for w in widths))
    env = res["env"]
    head = (
        f"python {env['python']} on {env['platform']}, {env['cpus']} cpus, {env['fs']}; "
        f"postgresql: {env['pg']}; median of {res['config']['reps']} fresh processes"
    )
    return head + "\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--pg", help="a postgresql:// URL to use (default: a throwaway cluster)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1,000 and 3,000 events")
    ap.add_argument("--reps", type=int, help="fresh-process resumes per size")
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--dir", help="parent of the temp dir (the disk to measure)")
    ap.add_argument("--seed", type=int, default=20260101)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sizes = [1_000, 3_000] if args.quick else [2_000, 20_000]
    reps = args.reps or (2 if args.quick else 5)
    ops = 40 if args.quick else 200
    if args.quick:
        args.sessions = min(args.sessions, 50)
    tmp = Path(tempfile.mkdtemp(prefix="infai-backends-", dir=args.dir))
    res: dict[str, Any] = {
        "config": {"sizes": sizes, "reps": reps, "ops": ops, "sessions": args.sessions},
        "env": {
            "python": sys.version.split()[0],
            "platform": sys.platform,
            "cpus": os.cpu_count(),
            "fs": filesystem_of(tmp),
        },
    }
    try:
        with ExitStack() as stack:
            url = args.pg
            if url is None:
                from pgserver import Cluster

                tmp.chmod(0o755)  # as root, the server runs as postgres and must reach it
                url = stack.enter_context(Cluster(durable=True, parent=tmp))
                res["env"]["pg"] = "throwaway cluster, fsync on, same disk"
            else:
                res["env"]["pg"] = "given by --pg"
            log("directory store")
            res["directory"] = run_backend(str(tmp / "home"), sizes, reps, ops, args)
            log("postgresql store")
            res["postgresql"] = run_backend(url, sizes, reps, ops, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(res, indent=2) if args.json else render(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
