"""Benchmark search and listing on a large directory store, against the issue's targets.

Fixture: a file store of ``--sessions`` sessions x ``--events`` events (default 500 x
2,000 = 1M events), seeded: messages of 20-120 words drawn from a Zipf-distributed
vocabulary of 30,000 made-up words, tool calls, tool results, and 2% large tool results
that go to blobs; every session has branches (an event every 250 forks from an earlier
one). The store is written with ``import_batch`` before any index exists (so appends
pay nothing), then the search index is built once (``rebuild_search_index``, timed).

The fixture is written fast, because it is not what is measured: each session is one
``import_batch`` (one transaction), through a :class:`FileIO` whose fsyncs do nothing
(the fixture's durability is not measured; the page cache writes it out anyway), and
words are drawn from a table of the Zipf distribution indexed by random bits rather
than by a bisection per word. The store is then opened again with the ordinary
``FileIO`` for everything measured. Measured on the shared 2-core machine: 0.3 s
per 2,000-event session against 0.6 s for the old writer (1,000 events and ~25
fsyncs per transaction, a bisection per word), so 1M events in about 3 minutes
when it is quiet, 5.5 under load.

Measured:

1. search, warm: a mix of queries (a rare, a mid-frequency and a common word, a phrase,
   a prefix, an exclusion, one session, one kind), each run ``--reps`` times after a
   warm-up; the median over all runs, and each query's median;
2. index cost per append: ``--appends`` appends (default 2,000) to a session while the
   index is in use, timing the writer's after-append hook (it runs after the
   fdatasync: off the durable path) and the flush at the writer's close, per event.
   The index is an LSM tree (FTS5's segments): merging comes in quanta of some
   hundreds of pages every so many pages written, so a few hundred appends may see
   none or several; 2,000 (eight flushes of 256) averages over them;
3. index size: the SQLite file (WAL checkpointed) against the UTF-8 bytes of the text it
   indexes (each blob's text once);
4. listing ``--list`` sessions (default 5,000), warm: ``Store.list_sessions`` (the
   listing index, validated by stat), the old way (read every session.json and HEAD),
   and a baseline SQLite table of the same metadata read in the same run.

Run from the repo root (the full run took 14 minutes on a loaded 2-core machine)::

    .venv/bin/python benchmarks/search_bench.py            # 500 x 2,000 events, 5,000 listed
    .venv/bin/python benchmarks/search_bench.py --quick    # smoke run: 40 x 200, 300 listed
    .venv/bin/python benchmarks/search_bench.py --check    # exit 1 if any target FAILs

``--dir`` puts the temp dir on the disk to measure, ``--keep`` keeps it, ``--json``
prints one JSON object. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

_SRC = Path(__file__).resolve().parent.parent / "src"
if _SRC.is_dir() and str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

from infai.store import (  # noqa: E402  (needs the sys.path set up above)
    FileIO,
    MessageRecord,
    Record,
    SessionInfo,
    Store,
    ToolCallRecord,
    ToolResultRecord,
    record_to_obj,
)
from infai.store.search import searchable_text  # noqa: E402

TARGETS = {"search_ms": 50.0, "index_ms_per_append": 0.2, "size_ratio": 1.5, "list_ms": 50.0}
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "nu",
    "pe",
    "ra",
    "si",
    "to",
    "vu",
    "xe",
    "ba",
    "de",
    "fi",
    "go",
    "hu",
    "ja",
    "ke",
    "li",
    "mo",
    "ny",
]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    # Sorted first: a set's order depends on the hash seed, and the random keys are drawn
    # in iteration order, so runs would draw different vocabularies.
    return sorted(sorted(words), key=lambda w: (rng.random(), w))


#: the Zipf table has 2**TABLE_BITS slots: the rarest word (p ~ 3e-6) still gets ~13
TABLE_BITS = 22


class Corpus:
    """Seeded text: Zipf-distributed words over a made-up vocabulary.

    A word is drawn by indexing a table in which each word fills a share of the
    slots equal to its probability (1/rank, normalised) with 22 random bits: the
    same distribution as a bisection of the cumulative weights to within one slot
    (2.4e-7), at a fraction of the cost per word.
    """

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.vocab = vocabulary(self.rng, 30_000)
        total = sum(1.0 / (rank + 1) for rank in range(len(self.vocab)))
        slots = 1 << TABLE_BITS
        table: list[str] = []
        cum = 0.0
        for rank, word in enumerate(self.vocab):
            cum += 1.0 / (rank + 1)
            end = slots if rank == len(self.vocab) - 1 else round(cum / total * slots)
            table.extend([word] * (end - len(table)))
        self.table = table

    def word_list(self, n: int) -> list[str]:
        bits = array.array("I")
        bits.frombytes(self.rng.randbytes(4 * n))
        shift = 32 - TABLE_BITS
        table = self.table
        return [table[b >> shift] for b in bits]

    def words(self, n: int) -> str:
        return " ".join(self.word_list(n))

    def record(self, i: int) -> tuple[Record, str]:
        roll = self.rng.random()
        if roll < 0.02:
            words = self.word_list(12 * 220)  # 220 lines of 12 words, ~20 KB: a blob
            text = "\n".join(" ".join(words[at : at + 12]) for at in range(0, len(words), 12))
            return ToolResultRecord(call_id=f"c{i}", name="bash", content=text), "tool"
        if roll < 0.15:
            args = {"command": f"grep -rn {self.words(2)} src/{self.words(1)}.py"}
            return ToolCallRecord(call_id=f"c{i}", name="bash", arguments=args), "assistant"
        if roll < 0.28:
            return ToolResultRecord(call_id=f"c{i}", name="bash", content=self.words(60)), "tool"
        role = "user" if roll < 0.5 else "assistant"
        return MessageRecord(content=self.words(self.rng.randint(20, 120))), role


def event_id(n: int) -> str:
    """A deterministic UUIDv7-shaped id, time-ordered by ``n``."""
    ms = BASE_MS + n
    rand = (n * 0x9E3779B97F4A7C15) & ((1 << 62) - 1)
    return str(uuid.UUID(int=(ms << 80) | (0x7 << 76) | (0b10 << 62) | rand))


class NoSync(FileIO):
    """The fixture's write path: fsyncs do nothing (its durability is not measured)."""

    def fsync(self, fd: int) -> None:
        pass

    def fdatasync(self, fd: int) -> None:
        pass


def build_store(home: Path, sessions: int, events: int, corpus: Corpus) -> tuple[Store, int]:
    """The fixture; returns the store (opened again, with the ordinary write path) and
    the bytes of text the index will hold."""
    store = Store(home, io=NoSync())
    text_bytes, counter = 0, 0
    for s in range(sessions):
        sid = store.create_session(name=f"session {s}", working_dir=f"/work/p{s % 25}").id
        specs: list[Any] = []
        ids: list[str] = []
        for i in range(events):
            record, role = corpus.record(i)
            parent = i - 1
            if i and i % 250 == 0:
                parent = corpus.rng.randrange(0, i)  # a branch from an earlier event
            counter += 1
            eid = event_id(counter)
            pid = ids[parent] if parent >= 0 else "00000000-0000-0000-0000-000000000000"
            branch = pid if parent not in (-1, i - 1) else None
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((BASE_MS + counter) / 1000))
            specs.append((eid, pid, branch, role, stamp, record))
            ids.append(eid)
            text_bytes += len(searchable_text(record.kind, record_to_obj(record)).encode())
        with store.open_writer(sid) as w:
            w.import_batch(specs)  # the whole session in one transaction
        if (s + 1) % 50 == 0:
            log(f"  {s + 1}/{sessions} sessions written")
    store.close()
    os.sync()  # what the fsyncs skipped, before anything is measured
    return Store(home), text_bytes


def timed(fn: Callable[[], Any], reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def bench_search(store: Store, corpus: Corpus, reps: int) -> dict[str, Any]:
    v = corpus.vocab
    some = store.list_sessions()[len(store.list_sessions()) // 2].id
    queries: dict[str, dict[str, Any]] = {
        "rare word": {"query": v[20_000]},
        "mid word": {"query": v[2_000]},
        "common word": {"query": v[30]},
        "phrase": {"query": f'"{v[100]} {v[101]}"'},
        "prefix": {"query": v[5_000][:4] + "*"},
        "two words, one excluded": {"query": f"{v[800]} {v[900]} -{v[10]}"},
        "one session": {"query": v[300], "session": some},
        "tool results only": {"query": v[700], "kind": "tool_result"},
    }
    per: dict[str, float] = {}
    every: list[float] = []
    for label, q in queries.items():
        args: dict[str, Any] = dict(q)
        text = args.pop("query")
        store.search(text, **args)  # warm

        def once(text: str = text, args: dict[str, Any] = args) -> None:
            store.search(text, **args)

        runs = timed(once, reps)
        per[label] = statistics.median(runs)
        every += runs
    return {"median_ms": statistics.median(every), "per_query_ms": per}


def bench_append_cost(store: Store, corpus: Corpus, n: int) -> tuple[float, float]:
    """ms per event spent in the writer's after-append index hook: wall clock, and the
    thread's CPU time (on a shared machine the wall clock also counts waiting for a CPU)."""
    spent: list[float] = []
    cpu: list[float] = []
    hook = store._appended

    def timed_hook(session_id: str, events: Any) -> None:
        t0, c0 = time.perf_counter(), time.thread_time()
        hook(session_id, events)
        spent.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.thread_time() - c0) * 1000)

    store._appended = timed_hook  # type: ignore[method-assign]
    sid = store.create_session(name="appends").id
    with store.open_writer(sid) as w:
        for i in range(n):
            record, role = corpus.record(i)
            w.append(record, role)
        t0, c0 = time.perf_counter(), time.thread_time()
        store.search_index().flush(sid)  # what the close indexes, counted too
        spent.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.thread_time() - c0) * 1000)
    store._appended = hook  # type: ignore[method-assign]
    return sum(spent) / n, sum(cpu) / n


def index_size(home: Path) -> int:
    path = home / "index" / "search.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(
        os.path.getsize(f"{path}{suffix}")
        for suffix in ("", "-wal")
        if os.path.exists(f"{path}{suffix}")
    )


def build_listing(home: Path, count: int) -> None:
    """``count`` sessions made by copying one real session (fast), ids and names changed."""
    store = Store(home)
    template = store.create_session(name="template", working_dir="/work")
    with store.open_writer(template.id) as w:
        w.append(MessageRecord(content="hello"), "user")
        w.append(MessageRecord(content="hi"), "assistant")
    src = store.sessions_dir / template.id
    meta = json.loads((src / "session.json").read_text())
    for i in range(count - 1):
        sid = event_id(10_000_000 + i)
        dst = store.sessions_dir / sid
        shutil.copytree(src, dst)
        (dst / "session.json").write_text(json.dumps(meta | {"id": sid, "name": f"s{i}"}))
    # Steady state: nothing changed in the last seconds (the listing index does not trust
    # a signature younger than that, see store/file/derived.py).
    old = time.time() - 60
    for name in os.listdir(store.sessions_dir):
        for f in ("session.json", "HEAD"):
            os.utime(store.sessions_dir / name / f, (old, old))
    os.utime(store.sessions_dir, (old, old))


def legacy_list(store: Store) -> list[SessionInfo]:
    """The listing before the index: read every session.json and HEAD."""
    from infai.store.file.meta import decode_info, last_append

    out = []
    for name in os.listdir(store.sessions_dir):
        meta = store.sessions_dir / name / "session.json"
        info = decode_info(meta.read_bytes(), str(meta))
        appended = last_append(store.sessions_dir / name / "HEAD")
        out.append(info.replace(updated_at=appended) if appended > info.updated_at else info)
    out.sort(key=lambda i: (i.updated_at, i.id), reverse=True)
    return out


def sqlite_baseline(dir: Path, infos: list[SessionInfo]) -> Callable[[], list[SessionInfo]]:
    """A plain SQLite table of the same metadata; listing reads it whole, newest first."""
    conn = sqlite3.connect(dir / "baseline.sqlite")
    conn.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, format INT, name TEXT, working_dir TEXT,"
        " model TEXT, created_at TEXT, updated_at TEXT, parent_session TEXT,"
        " parent_event TEXT, extra TEXT)"
    )
    conn.execute("CREATE INDEX by_time ON sessions (updated_at DESC, id DESC)")
    conn.executemany(
        "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (i.id, i.format, i.name, i.working_dir, i.model, i.created_at, i.updated_at,
             i.parent_session, i.parent_event, json.dumps(i.extra) if i.extra else None)
            for i in infos
        ],
    )  # fmt: skip
    conn.commit()

    def listing() -> list[SessionInfo]:
        rows = conn.execute("SELECT * FROM sessions ORDER BY updated_at DESC, id DESC").fetchall()
        return [
            SessionInfo(
                id=r[0], format=r[1], name=r[2], working_dir=r[3], model=r[4],
                created_at=r[5], updated_at=r[6], parent_session=r[7], parent_event=r[8],
                extra=json.loads(r[9]) if r[9] else None,
            )
            for r in rows
        ]  # fmt: skip

    return listing


def bench_listing(dir: Path, count: int, reps: int) -> dict[str, float]:
    home = dir / "listing"
    build_listing(home, count)
    store = Store(home)
    first = timed(store.list_sessions, 1)[0]  # builds the listing index
    infos = store.list_sessions()
    assert len(infos) == count and infos == legacy_list(store)
    baseline = sqlite_baseline(dir, infos)

    def fresh() -> None:
        with Store(home) as opened:  # what a new `infai session ls` process pays
            opened.list_sessions()

    return {
        "first_ms": first,
        "index_ms": statistics.median(timed(store.list_sessions, reps)),
        "fresh_ms": statistics.median(timed(fresh, reps)),
        "legacy_ms": statistics.median(timed(lambda: legacy_list(store), max(3, reps // 3))),
        "sqlite_ms": statistics.median(timed(baseline, reps)),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    corpus = Corpus(args.seed)
    dir = Path(tempfile.mkdtemp(prefix="infai-search-bench-", dir=args.dir))
    try:
        log(f"writing {args.sessions} sessions x {args.events} events in {dir}")
        store, text_bytes = build_store(dir / "home", args.sessions, args.events, corpus)
        log("building the search index")
        t0 = time.perf_counter()
        store.rebuild_search_index()
        build_s = time.perf_counter() - t0
        log("searching")
        search = bench_search(store, corpus, args.reps)
        size = index_size(dir / "home")
        log("appending with the index in use")
        per_append, per_append_cpu = bench_append_cost(store, corpus, args.appends)
        store.close()
        log(f"listing {args.list} sessions")
        listing = bench_listing(dir, args.list, args.reps)
    finally:
        if args.keep:
            log(f"kept {dir}")
        else:
            shutil.rmtree(dir, ignore_errors=True)
    events = args.sessions * args.events
    res = {
        "config": {"sessions": args.sessions, "events": events, "listed": args.list},
        "index_build_s": build_s,
        "index_build_us_per_event": build_s * 1e6 / events,
        "search": search,
        "index_ms_per_append": per_append,
        "index_cpu_ms_per_append": per_append_cpu,
        "index_bytes": size,
        "text_bytes": text_bytes,
        "size_ratio": size / text_bytes,
        "listing": listing,
    }
    res["targets"] = [
        ("search median, warm (ms)", search["median_ms"], TARGETS["search_ms"]),
        ("index cost per append (ms)", per_append, TARGETS["index_ms_per_append"]),
        ("index size / indexed text", size / text_bytes, TARGETS["size_ratio"]),
        (f"list {args.list} sessions, warm (ms)", listing["index_ms"], TARGETS["list_ms"]),
        (
            f"list {args.list} sessions, warm, newly opened store (ms)",
            listing["fresh_ms"],
            TARGETS["list_ms"],
        ),
    ]
    return res


def render(res: dict[str, Any]) -> str:
    cfg, lst = res["config"], res["listing"]
    lines = [
        f"store: {cfg['sessions']} sessions, {cfg['events']:,} events; "
        f"index built in {res['index_build_s']:.1f} s "
        f"({res['index_build_us_per_event']:.0f} us/event)",
        f"search median over all queries, warm: {res['search']['median_ms']:.2f} ms",
    ]
    for label, ms in res["search"]["per_query_ms"].items():
        lines.append(f"  {label:<26} {ms:8.2f} ms")
    lines += [
        f"index cost per append (after the fdatasync): {res['index_ms_per_append']:.3f} ms "
        f"wall clock, {res['index_cpu_ms_per_append']:.3f} ms CPU",
        f"index size {res['index_bytes'] / 1e6:.1f} MB for {res['text_bytes'] / 1e6:.1f} MB "
        f"of text: {res['size_ratio']:.2f}x",
        f"list {cfg['listed']} sessions: index {lst['index_ms']:.2f} ms warm in one process, "
        f"{lst['fresh_ms']:.2f} ms from a newly opened store (first ever {lst['first_ms']:.0f} ms)",
        f"  sqlite table baseline {lst['sqlite_ms']:.2f} ms: newly opened store / baseline "
        f"{lst['fresh_ms'] / lst['sqlite_ms']:.1f}x; reading every session.json+HEAD "
        f"{lst['legacy_ms']:.2f} ms ({lst['legacy_ms'] / lst['fresh_ms']:.1f}x the newly opened)",
        "",
    ]
    for label, value, limit in res["targets"]:
        verdict = "PASS" if value <= limit else "FAIL"
        lines.append(f"{verdict}  {label}: {value:.3f} (target <= {limit})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="smoke run: 40 x 200 events, 300 listed")
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--events", type=int, default=2000, help="events per session")
    ap.add_argument("--list", type=int, default=5000, help="sessions in the listing store")
    ap.add_argument("--appends", type=int, default=2000, help="appends timed with the index on")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--seed", type=int, default=20260101)
    ap.add_argument("--dir", help="parent directory of the temp dir (the disk to measure)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--check", action="store_true", help="exit 1 if any target FAILs")
    args = ap.parse_args(argv)
    if args.quick:
        args.sessions, args.events, args.list, args.appends, args.reps = 40, 200, 300, 50, 3
    res = run(args)
    print(json.dumps(res, indent=2) if args.json else render(res))
    failed = any(value > limit for _, value, limit in res["targets"])
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
