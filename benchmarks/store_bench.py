"""Benchmark the infai session store against two baselines it has to beat.

Stores compared, all given the same logical, seeded session tree:

* ``infai``       - :class:`infai.store.Store` (fixtures built with ``append_batch``).
* ``naive jsonl`` - one file per session, one full event JSON per line (first line: session
  metadata). Resume parses every line into an id -> event dict, then walks parents from the
  last line's event back to the root (or nearest compaction). Append = write line + fsync.
* ``sqlite tree`` - stdlib sqlite3, WAL, synchronous=FULL, ``events(seq, id UNIQUE, parent_id,
  kind, role, timestamp, record)`` plus a ``head`` row updated in the same transaction as the
  insert. Resume = recursive CTE from HEAD along parent_id (stopping at a compaction), reading
  the records of the active path only. Listing = a ``sessions`` catalog table.

Workloads:

1. Durable appends: one ~1 KiB message per durable commit, and batches of 10 per commit,
   interleaved round-robin across stores on the same disk; median latency in ms, next to a raw
   4 KiB ``os.write`` + ``os.fsync``.
2. Cold resume: a fresh ``python -c`` child (this file's resume functions, with only the
   imports its store needs; imports happen before the timer) times opening the store and
   building the active context with every record loaded and decoded. Peak RSS is the child's
   own high-water mark (VmHWM on Linux, as ``ru_maxrss`` is inherited across fork+exec; else
   ``ru_maxrss``) for the whole process, interpreter and imports included; the RSS at the
   timer's start is reported too. The session has N events on 40 branches forking from random
   points of earlier branches, 5% are 64 KiB tool results, and the active path is 500 events.
   Median over several children.
   "Cold" means a fresh process: the OS page cache is NOT dropped.
3. The same resume at the smallest and largest sizes, and the growth ratio largest/smallest.
4. Listing sessions (metadata only), 500 by default; median over a few runs.

A PASS/FAIL table against the project's targets follows. Fixtures live in a temp dir removed
at the end. Run from the repo root (about a minute full, ~10 s quick, on 2 cores and an SSD)::

    .venv/bin/python benchmarks/store_bench.py             # sizes 2,000 / 20,000 / 100,000
    .venv/bin/python benchmarks/store_bench.py --quick     # smoke run: 2,000 / 5,000 / 10,000
    .venv/bin/python benchmarks/store_bench.py --json      # one JSON object on stdout
    .venv/bin/python benchmarks/store_bench.py --check     # exit 1 if any target FAILs

``--sizes``, ``--reps``, ``--dir`` (where the temp dir goes: it must be the disk you care
about, not a tmpfs) and ``--keep`` are also accepted; progress goes to stderr.

This module is the runner: the resume child process, the timed workloads, the tables, the
targets and the CLI. The seeded session tree and its records live in ``workload.py``, the two
baseline stores in ``baselines.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # run as a script: make the sibling ``benchmarks.*`` importable
    sys.path.insert(0, str(_ROOT))
_SRC = _ROOT / "src"
if _SRC.is_dir() and str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

from benchmarks.baselines import (  # noqa: E402  (needs the sys.path set up above)
    EVENT_KEYS,
    JSONL_DUMPS,
    SQLITE_PATH,
    NaiveSession,
    SqliteSession,
    build_naive,
    build_sqlite,
    event_id,
    meta_line,
    naive_list,
    naive_resume,
    sqlite_list,
    sqlite_resume,
    stamp,
)
from benchmarks.workload import (  # noqa: E402
    BASE_EPOCH,
    BRANCHES,
    PATH_LEN,
    Tree,
    content_chars,
    iter_events,
    make_tree,
    prose,
    record_for,
)

STORES = ("infai", "naive", "sqlite")
LABELS = {"infai": "infai", "naive": "naive jsonl", "sqlite": "sqlite tree"}


# ----------------------------------------------------------------------------- infai


def infai_available() -> str | None:
    """None if ``infai.store`` has the API this benchmark uses, else the reason."""
    try:
        import infai.store as mod
    except ImportError as exc:
        return str(exc)
    names = ("Store", "MessageRecord", "ToolCallRecord", "ToolResultRecord")
    missing = [name for name in names if not hasattr(mod, name)]
    return f"infai.store lacks {', '.join(missing)}" if missing else None


def build_infai(home: Path, tree: Tree, seed: int) -> str:
    from infai.store import Store

    return build_session(Store(home), tree, seed)


def build_session(store: Any, tree: Tree, seed: int) -> str:
    """The seeded tree as one session of ``store`` (any backend); returns its id."""
    from infai.store import MessageRecord, ToolCallRecord, ToolResultRecord

    def make(kind: str, r: dict[str, Any]) -> MessageRecord | ToolCallRecord | ToolResultRecord:
        if kind == "tool_result":
            return ToolResultRecord(call_id=r["call_id"], name=r["name"], content=r["content"])
        if kind == "tool_call":
            return ToolCallRecord(call_id=r["call_id"], name=r["name"], arguments=r["arguments"])
        return MessageRecord(content=r["content"])

    info = store.create_session(name="bench", working_dir="/tmp", model="offline")
    starts = {start: fork for start, _, fork in tree.segments}
    ids: list[str] = []
    batch: list[tuple[MessageRecord | ToolCallRecord | ToolResultRecord, str]] = []
    parent: str | None = None
    size = 0
    with store.open_writer(info.id) as w:
        for i, _, kind, role, rec in iter_events(tree, seed):
            if i in starts or len(batch) >= 256 or size >= 4 << 20:
                if batch:
                    ids.extend(ev.id for ev in w.append_batch(batch, parent=parent))
                    parent, batch, size = ids[-1], [], 0
                if i in starts:
                    parent = ids[starts[i]] if starts[i] >= 0 else None
            batch.append((make(kind, rec), role))
            size += len(rec.get("content", "")) + 200
        ids.extend(ev.id for ev in w.append_batch(batch, parent=parent))
        if w.head != ids[-1]:
            raise RuntimeError(f"infai HEAD {w.head} is not the last appended event {ids[-1]}")
    return str(info.id)


# ----------------------------------------------------------------------------- child process


def child_main(store: str, path: str, sid: str) -> None:
    """Runs in a fresh ``python -c`` process (see :func:`child_program`): imports first, then
    times opening the store and building the full active context."""
    if store == "infai":
        from infai.store import Store

        base, t0 = rss_mb(peak=False), time.perf_counter()
        with Store(Path(path)).open_reader(sid) as reader:
            events = reader.context().events
        elapsed = time.perf_counter() - t0
        records: list[Any] = [ev.record for ev in events]
    else:
        if store == "sqlite":
            import sqlite3  # noqa: F401  (before the timer, like infai's imports)
        resume = naive_resume if store == "naive" else sqlite_resume
        base, t0 = rss_mb(peak=False), time.perf_counter()
        loaded = resume(Path(path))
        elapsed = time.perf_counter() - t0
        records = [ev["record"] for ev in loaded]
    out = {"ms": elapsed * 1000, "rss_mb": rss_mb(), "rss_base_mb": base, "events": len(records)}
    print(JSONL_DUMPS(out | {"content_chars": content_chars(records)}))


def rss_mb(peak: bool = True) -> float:
    """Current or peak RSS of this process. On Linux from /proc (VmRSS/VmHWM): ``ru_maxrss``
    survives exec, so a child of a bigger parent would report the parent's peak, not its own."""
    key = "VmHWM:" if peak else "VmRSS:"
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    scale = 1 / (1 << 20) if sys.platform == "darwin" else 1 / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


CHILD_HEADER = f"""from __future__ import annotations
import contextlib, json, resource, sys, time
from pathlib import Path
sys.path.insert(0, {str(_SRC)!r})
EVENT_KEYS = {EVENT_KEYS!r}
SQLITE_PATH = {SQLITE_PATH!r}
JSONL_DUMPS = json.JSONEncoder(separators=(",", ":")).encode
"""


def child_program() -> str:
    """``python -c`` source for a resume child: the real functions below, but only the imports
    they need, so each store's RSS is the interpreter plus its own imports, not this module's."""
    import inspect

    funcs = (rss_mb, content_chars, naive_resume, sqlite_resume, child_main)
    body = "\n\n".join(inspect.getsource(f) for f in funcs)
    return f"{CHILD_HEADER}\n{body}\nchild_main(*sys.argv[1:])\n"


def run_child(store: str, path: Path, sid: str) -> dict[str, Any]:
    cmd = [sys.executable, "-c", child_program(), store, str(path), sid]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{store} resume child failed ({proc.returncode}):\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# ----------------------------------------------------------------------------- workloads


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def bench_appends(tmp: Path, ops: int, batches: int, with_infai: bool) -> dict[str, Any]:
    d = tmp / "append"
    d.mkdir()
    rng = random.Random(99)
    texts = [prose(rng, 1024) for _ in range(64)]
    block = b"x" * 4096
    with contextlib.ExitStack() as stack:
        fd = os.open(d / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        stack.callback(os.close, fd)
        naive, lite = NaiveSession(d / "naive.jsonl"), SqliteSession(d / "sqlite.db")
        stack.callback(naive.close)
        stack.callback(lite.close)

        def raw(_content: str, _role: str) -> None:
            os.write(fd, block)
            os.fsync(fd)

        line = b"y" * 1400  # about one event's line

        def raw_line(_content: str, _role: str) -> None:
            os.write(fd, line)
            os.fdatasync(fd)

        def raw_lines(_items: list[tuple[str, str]]) -> None:
            os.write(fd, line * 10)  # a batch of ten: only the bytes differ
            os.fdatasync(fd)

        single: dict[str, Callable[[str, str], object]] = {
            "raw": raw,
            "raw_line": raw_line,
            "naive": lambda c, r: naive.append_batch([(c, r)]),
            "sqlite": lambda c, r: lite.append_batch([(c, r)]),
        }
        batch: dict[str, Callable[[list[tuple[str, str]]], object]] = {
            "raw_lines": raw_lines,
            "naive": naive.append_batch,
            "sqlite": lite.append_batch,
        }
        if with_infai:
            from infai.store import MessageRecord, Store

            store = Store(d / "infai")
            info = store.create_session(name="append", working_dir="/tmp", model="offline")
            w = stack.enter_context(store.open_writer(info.id))
            single["infai"] = lambda c, r: w.append(MessageRecord(content=c), role=r)
            batch["infai"] = lambda items: w.append_batch(
                [(MessageRecord(content=c), r) for c, r in items]
            )
        warmup, roles = 10, ("user", "assistant")
        single_s: dict[str, list[float]] = {name: [] for name in single}
        for k in range(warmup + ops):  # round-robin, so disk noise hits every store alike
            for name, fn in single.items():
                t0 = time.perf_counter()
                fn(texts[k % len(texts)], roles[k % 2])
                single_s[name].append(time.perf_counter() - t0)
        batch_s: dict[str, list[float]] = {name: [] for name in batch}
        for k in range(warmup + batches):
            items = [(texts[(k + j) % len(texts)], roles[j % 2]) for j in range(10)]
            for name, bfn in batch.items():
                t0 = time.perf_counter()
                bfn(items)
                batch_s[name].append(time.perf_counter() - t0)

    def ms(samples: list[float], p90: bool = False) -> float:
        kept = samples[warmup:]
        return (statistics.quantiles(kept, n=10)[-1] if p90 else statistics.median(kept)) * 1000

    return {
        "raw_fsync_4k_ms": ms(single_s.pop("raw")),
        "raw_fdatasync_1400b_ms": ms(single_s.pop("raw_line")),
        "raw_fdatasync_14000b_ms": ms(batch_s.pop("raw_lines")),
        "single_ms": {name: ms(v) for name, v in single_s.items()},
        "batch10_ms": {name: ms(v) for name, v in batch_s.items()},
        "single_p90_ms": {name: ms(v, p90=True) for name, v in single_s.items()},
    }


def bench_resume(
    tmp: Path, n: int, reps: int, seed: int, with_infai: bool, keep: bool
) -> dict[str, Any]:
    d = tmp / f"resume-{n}"
    d.mkdir()
    tree = make_tree(n, seed)
    path_ids = tree.active_path()
    expected = content_chars(record_for(i, tree.kinds[i], seed) for i in path_ids)
    log(f"  tree: {n:,} events, {len(tree.segments)} branches, path {len(path_ids)}")
    fixtures: dict[str, tuple[Path, str]] = {}
    build_s: dict[str, float] = {}
    builders = [("naive", d / "naive.jsonl"), ("sqlite", d / "sqlite.db")]
    if with_infai:
        builders.insert(0, ("infai", d / "infai"))
    for name, path in builders:
        t0 = time.perf_counter()
        if name == "infai":
            fixtures[name] = (path, build_infai(path, tree, seed))
        else:
            (build_naive if name == "naive" else build_sqlite)(path, tree, seed)
            fixtures[name] = (path, "-")
        build_s[name] = time.perf_counter() - t0
        log(f"  built {LABELS[name]} fixture in {build_s[name]:.1f}s")
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in fixtures}
    for _ in range(reps):  # interleave stores so disk/CPU noise hits them alike
        for name, (path, sid) in fixtures.items():
            samples[name].append(run_child(name, path, sid))
    out: dict[str, Any] = {}
    for name, runs in samples.items():
        ok = all(r["events"] == PATH_LEN and r["content_chars"] == expected for r in runs)
        if not ok:
            log(
                f"  WARNING: {LABELS[name]} resumed {runs[0]['events']} events / "
                f"{runs[0]['content_chars']} chars, expected {PATH_LEN} / {expected}"
            )
        out[name] = {
            "ms": statistics.median(r["ms"] for r in runs),
            "rss_mb": statistics.median(r["rss_mb"] for r in runs),
            "rss_base_mb": statistics.median(r["rss_base_mb"] for r in runs),
            "ms_all": [round(r["ms"], 3) for r in runs],
            "path_events": runs[0]["events"],
            "path_ok": ok,
            "build_s": round(build_s[name], 2),
            "path_content_mb": round(expected / 1e6, 2),
        }
        log(f"  {LABELS[name]:>12}: {out[name]['ms']:.1f} ms, {out[name]['rss_mb']:.1f} MB")
    if not keep:
        shutil.rmtree(d)  # 100k-event fixtures are ~1 GB together
    return out


def bench_listing(tmp: Path, count: int, reps: int, with_infai: bool) -> dict[str, float]:
    import sqlite3

    d = tmp / "listing"
    (d / "naive").mkdir(parents=True)
    catalog = sqlite3.connect(d / "catalog.db", isolation_level=None)
    catalog.execute("PRAGMA journal_mode=WAL")
    catalog.execute(
        "CREATE TABLE sessions(id TEXT PRIMARY KEY, name TEXT, working_dir TEXT, model TEXT,"
        " created_at TEXT, updated_at TEXT)"
    )
    catalog.execute("CREATE INDEX sessions_updated ON sessions(updated_at)")
    rng = random.Random(5)
    catalog.execute("BEGIN")
    for i in range(count):
        sid, when = event_id(i), BASE_EPOCH + i * 60
        with open(d / "naive" / f"{sid}.jsonl", "wb") as f:
            f.write(meta_line(sid, f"session {i}", when))
            for j in range(4):
                ev = {"id": event_id(10_000 + j), "kind": "message", "role": "user"}
                f.write(JSONL_DUMPS(ev | {"record": {"content": prose(rng, 300)}}).encode() + b"\n")
        row = (sid, f"session {i}", "/tmp", "offline", stamp(when), stamp(when))
        catalog.execute("INSERT INTO sessions VALUES (?,?,?,?,?,?)", row)
    catalog.execute("COMMIT")
    catalog.close()
    funcs: dict[str, Any] = {
        "naive": lambda: naive_list(d / "naive"),
        "sqlite": lambda: sqlite_list(d / "catalog.db"),
    }
    if with_infai:
        from infai.store import MessageRecord, Store

        store = Store(d / "infai")
        for i in range(count):
            info = store.create_session(name=f"session {i}", working_dir="/tmp", model="offline")
            with store.open_writer(info.id) as w:
                w.append_batch([(MessageRecord(content=prose(rng, 300)), "user")] * 4)
        funcs["infai"] = lambda: Store(d / "infai").list_sessions()
    times: dict[str, list[float]] = {name: [] for name in funcs}
    for _ in range(reps):
        for name, fn in funcs.items():
            t0 = time.perf_counter()
            listed = fn()
            times[name].append(time.perf_counter() - t0)
            if len(listed) != count:
                log(f"  WARNING: {LABELS[name]} listed {len(listed)} sessions, expected {count}")
    return {name: statistics.median(v) * 1000 for name, v in times.items()}


# ----------------------------------------------------------------------------- report


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def evaluate(res: dict[str, Any]) -> list[dict[str, Any]]:
    small, mid, large = res["config"]["sizes"]
    at_mid, app = res["resume"][str(mid)], res["append"]

    def val(table: dict[str, Any], store: str, key: str | None = None) -> float | None:
        v = table.get(store)
        return v if key is None or v is None else v[key]

    rows = [
        (f"cold resume @{mid:,}: infai/sqlite time", "<=", 1.0,
         ratio(val(at_mid, "infai", "ms"), val(at_mid, "sqlite", "ms"))),
        (f"peak RSS @{mid:,}: infai/sqlite", "<=", 1.0,
         ratio(val(at_mid, "infai", "rss_mb"), val(at_mid, "sqlite", "rss_mb"))),
        (f"cold resume @{mid:,}: naive/infai speedup", ">=", 40.0,
         ratio(val(at_mid, "naive", "ms"), val(at_mid, "infai", "ms"))),
        (f"resume growth {large:,}/{small:,}: infai", "<=", 1.3, val(res["growth"], "infai")),
        ("durable append: infai/sqlite", "<=", 1.5,
         ratio(val(app["single_ms"], "infai"), val(app["single_ms"], "sqlite"))),
        ("batch of 10 / single append: infai", "<=", 1.5,
         ratio(val(app["batch10_ms"], "infai"), val(app["single_ms"], "infai"))),
        (f"list {res['config']['sessions']} sessions: infai (ms)", "<", 20.0,
         val(res["list_ms"], "infai")),
    ]  # fmt: skip
    checks = {"<=": float.__le__, ">=": float.__ge__, "<": float.__lt__}
    return [
        {"target": name, "value": v, "limit": f"{op} {lim:g}"}
        | {"pass": v is not None and checks[op](float(v), lim)}
        for name, op, lim, v in rows
    ]


def fmt(v: float | None, suffix: str = "") -> str:
    if v is None:
        return "n/a"
    digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2 if abs(v) >= 0.1 else 3
    return f"{v:.{digits}f}{suffix}"


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        " | ".join(
            [r[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True))]
        )
        for r in rows
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def render(res: dict[str, Any]) -> str:
    app, cfg = res["append"], res["config"]
    head = ["workload", *(LABELS[s] for s in STORES), "infai/sqlite", "infai/naive"]
    rows = [head]

    def add(label: str, vals: dict[str, Any]) -> None:
        i, n, s = (vals.get(k) for k in STORES)
        rows.append([label, fmt(i), fmt(n), fmt(s), fmt(ratio(i, s), "x"), fmt(ratio(i, n), "x")])

    add("durable append, 1 event (ms)", app["single_ms"])
    add("durable append, batch of 10 (ms/batch)", app["batch10_ms"])
    add("durable append, batch of 10 (ms/event)", {k: v / 10 for k, v in app["batch10_ms"].items()})
    for size in cfg["sizes"]:
        per = res["resume"][str(size)]
        add(f"cold resume, {size:,} events (ms)", {k: v["ms"] for k, v in per.items()})
        add(f"  peak RSS, {size:,} events (MB)", {k: v["rss_mb"] for k, v in per.items()})
        if size == cfg["sizes"][1]:
            add(
                "  of which RSS before the timer (MB)",
                {k: v["rss_base_mb"] for k, v in per.items()},
            )
    small, _, large = cfg["sizes"]
    add(f"resume growth {large:,}/{small:,} (x)", res["growth"])
    add(f"list {cfg['sessions']} sessions (ms)", res["list_ms"])
    trows = [["target", "value", "limit", "result"]]
    for t in res["targets"]:
        trows.append([t["target"], fmt(t["value"]), t["limit"], "PASS" if t["pass"] else "FAIL"])
    env = res["env"]
    notes = [
        f"python {env['python']} on {env['platform']}, {env['cpus']} cpus; fixtures on "
        f"{env['fs']} ({env['dir']}); resume = median of {cfg['reps']} fresh processes, "
        f"path {PATH_LEN} events, {BRANCHES} branches, 5% 64 KiB tool results",
        f"raw 4 KiB os.write+os.fsync on this disk: {fmt(app['raw_fsync_4k_ms'])} ms (median)",
        f"raw append+fdatasync of one 1,400-byte line: {fmt(app['raw_fdatasync_1400b_ms'])} ms, "
        f"of ten (a batch's bytes): {fmt(app['raw_fdatasync_14000b_ms'])} ms",
    ]
    if env["fs"] in ("tmpfs", "ramfs"):
        notes.append(f"WARNING: {env['fs']} makes fsync free; rerun with --dir on a real disk")
    if res["infai_error"]:
        notes.append(f"infai store not importable: {res['infai_error']}")
    return "\n".join([*notes, "", table(rows), "", table(trows)])


def filesystem_of(path: Path) -> str:
    best, fs = "", "unknown"
    with contextlib.suppress(OSError), open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 2 and str(path).startswith(parts[1]) and len(parts[1]) > len(best):
                best, fs = parts[1], parts[2]
    return fs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="smoke run: sizes 2k/5k/10k, fewer reps")
    ap.add_argument("--sizes", help="three comma-separated sizes: small,mid,large")
    ap.add_argument("--reps", type=int, help="fresh-process resumes per store and size")
    ap.add_argument("--sessions", type=int, default=500, help="sessions to list (default 500)")
    ap.add_argument("--dir", help="parent directory of the temp dir (the disk to measure)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--seed", type=int, default=20260101)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    ap.add_argument("--check", action="store_true", help="exit 1 if any target FAILs")
    args = ap.parse_args(argv)
    sizes = [2_000, 5_000, 10_000] if args.quick else [2_000, 20_000, 100_000]
    if args.sizes:
        sizes = sorted(int(s) for s in args.sizes.split(","))
        if len(sizes) != 3:
            ap.error("--sizes takes exactly three sizes: small,mid,large")
    reps = args.reps or (3 if args.quick else 7)
    ops, batches = (60, 30) if args.quick else (300, 200)
    infai_error = infai_available()
    if infai_error:
        log(f"infai store not importable ({infai_error}); benchmarking the baselines only")
    tmp = Path(tempfile.mkdtemp(prefix="infai-bench-", dir=args.dir))
    started = time.perf_counter()
    res: dict[str, Any] = {
        "config": {"sizes": sizes, "reps": reps, "append_ops": ops, "batch_ops": batches}
        | {"sessions": args.sessions, "seed": args.seed, "path_len": PATH_LEN},
        "env": {"python": sys.version.split()[0], "platform": sys.platform, "cpus": os.cpu_count()}
        | {"dir": str(tmp), "fs": filesystem_of(tmp)},
        "infai_error": infai_error,
    }
    if res["env"]["fs"] in ("tmpfs", "ramfs"):
        log(f"WARNING: {tmp} is on {res['env']['fs']}: fsync is free there; use --dir")
    try:
        log(f"appends: {ops} single, {batches} batches of 10 (in {tmp})")
        res["append"] = bench_appends(tmp, ops, batches, not infai_error)
        res["resume"] = {}
        for n in sizes:
            log(f"resume at {n:,} events, {reps} fresh processes per store")
            res["resume"][str(n)] = bench_resume(
                tmp, n, reps, args.seed, not infai_error, args.keep
            )
        small, large = res["resume"][str(sizes[0])], res["resume"][str(sizes[-1])]
        res["growth"] = {s: large[s]["ms"] / small[s]["ms"] for s in small}
        log(f"listing {args.sessions} sessions")
        res["list_ms"] = bench_listing(tmp, args.sessions, 7, not infai_error)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    res["targets"] = evaluate(res)
    res["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(res, indent=2) if args.json else render(res))
    log(f"done in {res['elapsed_s']:.0f}s")
    return 1 if args.check and not all(t["pass"] for t in res["targets"]) else 0


if __name__ == "__main__":
    sys.exit(main())
