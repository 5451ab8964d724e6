"""A child process for the crash and concurrency tests (``tests/test_crash.py``).

Run as ``python tests/support/crash_child.py HOME SESSION MODE [options]``. It writes one
line per fact to stdout and flushes each, so the parent can SIGKILL it at any
moment and still know exactly what was acknowledged:

``OPENING``
    about to open the writer (and maybe wait for the lock).
``READY <count> <head> <waited>``
    the writer is open (recovery done); ``waited`` is seconds spent on the lock.
``BEGIN <op> <n> <parent> <branch_from> <spec>...``
    printed *before* an append call: ``n`` events will follow ``parent`` (the
    intended parent of the first; ``-`` for HEAD), ``branch_from`` is what the
    first event must carry (``-`` for none), and each ``spec`` is
    ``kind:tag:length`` describing the record of one event, in order.
``ACK <op> <i> <seq> <id> <parent_id> <branch_from>``
    printed only after the append call returned (the event is acknowledged).
``CLOSED``, ``LOCKED <message>``
    the writer was closed; opening failed with :class:`WriterLocked`.

Modes:

``loop``
    append a seeded random mix forever (or ``--max-ops``): single messages,
    batches (some with blob-sized members), blob-sized tool results (> 16 KiB),
    a payload shared by several events (deduplicated blob), explicit branches
    via ``parent=`` and two-phase branches via ``select``.
``chain``
    ``--rounds`` times: open the writer (waiting up to ``--lock-timeout``),
    append ``--per-round`` events after HEAD (some as batches), close.
``hold``
    open the writer, print ``READY``, then keep the lock until stdin closes.
``try``
    try to open the writer with ``--lock-timeout``; print ``LOCKED`` or ``READY``.

Record contents are ``tag + ":" + filler`` padded to ``length`` characters, so
the parent can check every event's payload from the ``BEGIN`` line alone.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from infai.store import (
    NIL_ID,
    Event,
    MessageRecord,
    Record,
    SessionWriter,
    Store,
    StoreOptions,
    ToolResultRecord,
    WriterLocked,
)

#: the blob threshold is 16 KiB of JSON; these lengths are safely above / below it
BLOB_MIN, BLOB_MAX = 17 * 1024, 48 * 1024
SHARED_TAG = "shared"
SHARED_LENGTH = 20 * 1024


def content_for(tag: str, length: int) -> str:
    """The deterministic payload of an event: its tag, a colon, then filler."""
    head = tag + ":"
    filler = "x" if tag != SHARED_TAG else "s"
    return head + filler * (length - len(head))


def make_record(kind: str, tag: str, length: int) -> Record:
    text = content_for(tag, length)
    if kind == "message":
        return MessageRecord(content=text)
    return ToolResultRecord(call_id=tag, name="read_file", content=text)


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Child:
    def __init__(self, writer: SessionWriter, label: str) -> None:
        self.w = writer
        self.label = label
        self.op = 0

    def run_op(
        self,
        specs: list[tuple[str, str, int]],
        *,
        parent: str | None = None,
        select: str | None = None,
    ) -> list[Event]:
        """Append ``specs`` (kind, tag, length) after ``parent`` (or the selection)."""
        w = self.w
        head = w.head or NIL_ID
        if select is not None:
            w.select(select)
        intended = parent if parent is not None else (w.pending_parent or head)
        branch = intended if intended != head else "-"
        spec_text = " ".join(f"{k}:{t}:{n}" for k, t, n in specs)
        emit(f"BEGIN {self.op} {len(specs)} {intended} {branch} {spec_text}")
        items = [
            (make_record(k, t, n), "tool" if k == "tool_result" else "user") for k, t, n in specs
        ]
        events = w.append_batch(items, parent=parent)
        acks = [
            f"ACK {self.op} {i} {e.seq} {e.id} {e.parent_id} {e.branch_from or '-'}"
            for i, e in enumerate(events)
        ]
        emit("\n".join(acks))
        self.op += 1
        return events

    def tag(self, i: int = 0) -> str:
        return f"{self.label}.{self.op}.{i}"

    def random_spec(self, rng: random.Random, i: int, blob_share: float) -> tuple[str, str, int]:
        roll = rng.random()
        if roll < blob_share:
            return ("tool_result", self.tag(i), rng.randrange(BLOB_MIN, BLOB_MAX))
        if roll < blob_share + 0.03:
            return ("tool_result", SHARED_TAG, SHARED_LENGTH)
        return ("message", self.tag(i), rng.randrange(len(self.tag(i)) + 1, 400))

    def random_op(self, rng: random.Random, blob_share: float, batch_share: float) -> None:
        w = self.w
        roll = rng.random()
        n = rng.randrange(2, 7) if roll < batch_share else 1
        specs = [self.random_spec(rng, i, blob_share) for i in range(n)]
        parent: str | None = None
        select: str | None = None
        branch_roll = rng.random()
        if w.count and branch_roll < 0.12:
            parent = w.entry_at(rng.randrange(w.count)).id  # explicit parent: a branch
        elif w.count and branch_roll < 0.17:
            select = w.entry_at(rng.randrange(w.count)).id  # two-phase: select, then append
        self.run_op(specs, parent=parent, select=select)


def open_writer(store: Store, session: str) -> tuple[SessionWriter, float]:
    emit("OPENING")
    start = time.monotonic()
    writer = store.open_writer(session)
    return writer, time.monotonic() - start


def ready(writer: SessionWriter, waited: float) -> None:
    emit(f"READY {writer.count} {writer.head or '-'} {waited:.3f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("home")
    p.add_argument("session")
    p.add_argument("mode", choices=["loop", "chain", "hold", "try"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--label", default="c")
    p.add_argument("--durability", choices=["fast", "strict"], default="fast")
    p.add_argument("--chunk-size", type=int, default=4 * 1024 * 1024)
    p.add_argument("--lock-timeout", type=float, default=10.0)
    p.add_argument("--max-ops", type=int, default=0, help="0: run until killed")
    p.add_argument("--blob-share", type=float, default=0.15)
    p.add_argument("--batch-share", type=float, default=0.25)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--per-round", type=int, default=5)
    p.add_argument("--hold-file", help="chain: in round 0, keep the lock until this file exists")
    args = p.parse_args(argv)

    options = StoreOptions(
        chunk_size=args.chunk_size,
        durability=args.durability,
        lock_timeout=args.lock_timeout,
    )
    store = Store(args.home, options)
    rng = random.Random(args.seed)

    if args.mode == "try":
        try:
            writer, waited = open_writer(store, args.session)
        except WriterLocked as exc:
            emit(f"LOCKED {exc}")
            return 3
        ready(writer, waited)
        writer.close()
        emit("CLOSED")
        return 0

    if args.mode == "hold":
        writer, waited = open_writer(store, args.session)
        ready(writer, waited)
        sys.stdin.read()  # until the parent closes our stdin
        writer.close()
        emit("CLOSED")
        return 0

    if args.mode == "chain":
        for r in range(args.rounds):
            writer, waited = open_writer(store, args.session)
            ready(writer, waited)
            child = Child(writer, f"{args.label}{r}")
            while r == 0 and args.hold_file and not os.path.exists(args.hold_file):
                time.sleep(0.005)
            done = 0
            while done < args.per_round:
                n = min(rng.choice([1, 1, 1, 2, 3]), args.per_round - done)
                child.run_op([("message", child.tag(i), 60) for i in range(n)])
                done += n
            writer.close()
            emit("CLOSED")
            time.sleep(rng.uniform(0.0, 0.03))  # give the other writer a chance at the lock
        return 0

    writer, waited = open_writer(store, args.session)
    ready(writer, waited)
    child = Child(writer, args.label)
    while args.max_ops == 0 or child.op < args.max_ops:
        child.random_op(rng, args.blob_share, args.batch_share)
    writer.close()
    emit("CLOSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
