"""The write budget of a sandboxed command (``sandbox.write_budget``).

A command in the sandbox may write its working directory, and nothing stopped
it from filling the disk (1 GiB went in under a second). The budget, ``N``
bytes (default :data:`DEFAULT_BUDGET`), bounds what one confined command
writes, three ways:

- **No file grows past N.** In the sandbox, a shell sets ``RLIMIT_FSIZE`` to N
  (``ulimit -f``, soft and hard, :func:`limit_files`) before the command: the
  kernel refuses the write that would cross it (``SIGXFSZ``, "File size limit
  exceeded"; a program ignoring the signal gets ``EFBIG``, "File too large").
  Exact, and the sandbox's dropped capabilities keep the command from raising it.
- **No command writes more than N to disk in all.** While it runs, the bytes
  its processes wrote to disk (``write_bytes`` of ``/proc/PID/io``: the page
  cache they dirtied, so what a file system with a disk will write) are summed
  over every process of its PID namespace, read through the namespace's own
  ``/proc`` (``/proc/INIT/root/proc`` from outside: only the sandbox's
  processes, and a process that ended counts in its parent's total), about
  every 0.1 s and sooner when it writes fast (:class:`WriteGuard`). Past N the
  command is killed and its result says so. It may overshoot by what it wrote
  since the last look; files it wrote stay. The count is gross: a file written
  and deleted still counts.
- **The sandbox's memory file systems hold at most N each**: its private
  ``/tmp`` and ``/dev/shm`` are tmpfs sized to N (never above the kernel's
  default, half the RAM), and the rest of its ``/dev`` is read-only
  (:func:`ram_limits`; needs ``bwrap --size``, bubblewrap 0.8 or later, checked
  once per binary by running it: older ones keep the tmpfs default).

``write_budget = "off"`` turns all three off. Commands run outside the sandbox
(``outside_sandbox``, ``mode = "off"``, or no sandbox here) are not limited.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

#: what a command may write when the configuration says nothing (8 GiB)
DEFAULT_BUDGET = 8 << 30
#: the smallest budget accepted: below it, ordinary commands would fail
MIN_BUDGET = 1 << 20
#: how often the bytes written are read, at most and at least (seconds)
POLL, MIN_POLL = 0.1, 0.01
#: how many PIDs after bwrap's are tried first for its child
NEAR = 64
UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", re.IGNORECASE)
#: what a command prints when a file hit the limit, or a memory file system is full
FILE_MARKERS = ("File size limit exceeded", "File too large")
FULL_MARKER = "No space left on device"


def parse_budget(where: str, value: Any) -> int | None:
    """The budget in bytes a config value says (None: ``"off"``). ``value`` is a
    number of bytes or a string such as ``"8GiB"`` or ``"500MB"``; anything else is
    a ValueError naming ``where`` (the key)."""
    if value == "off" and isinstance(value, str):
        return None
    size: float | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str) and (found := _SIZE.fullmatch(value)):
        unit = UNITS.get(found[2].lower())
        size = None if unit is None else float(found[1]) * unit
    if size is None:
        raise ValueError(
            f'{where}: must be a size in bytes or a string like "8GiB", "500MB" '
            f'(units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB) or "off", not {value!r}'
        )
    if size < MIN_BUDGET:
        raise ValueError(f"{where}: {value!r} is less than 1MiB, too little for any command")
    return int(size)


def describe(size: int) -> str:
    """``size`` bytes for a person: ``8 GiB``, ``50 MiB``, ``1.5 GiB``."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):.4g} {unit}"
    return f"{size} bytes"


# -- the per-file limit ------------------------------------------------------------------


def limit_files(shell: Sequence[str], budget: int | None) -> list[str]:
    """``shell`` (``sh -c COMMAND``) started by a shell that first limits the size of
    every file it and what it starts may write to ``budget`` (``ulimit -f``, in
    POSIX's 512-byte blocks, soft and hard), then executes it unchanged: the same
    process, no argument more. Set inside the sandbox rather than by infai before
    starting bwrap: a ``preexec_fn`` makes Python fork its whole process instead of
    vfork (milliseconds a command). If infai's own hard limit is lower, it stays."""
    if budget is None:
        return list(shell)
    script = f'ulimit -f {budget // 512} 2>/dev/null; exec "$@"'
    return ["/bin/sh", "-c", script, "sh", *shell]


def budget_report(budget: int | None, bwrap: str | None) -> dict[str, Any]:
    """What ``infai doctor`` reports of the budget: its bytes (None: off) and
    whether the sandbox's ``/tmp`` and ``/dev/shm`` get sized to it (``bwrap``:
    the working one, None if none works here)."""
    sized = bwrap is not None and budget is not None and sizes_memory(bwrap)
    counted = os.path.exists("/proc/self/io")  # CONFIG_TASK_IO_ACCOUNTING
    return {"write_budget": budget, "memory_fs_sized": sized, "disk_writes_counted": counted}


def budget_line(report: dict[str, Any]) -> str:
    """The line ``infai doctor`` prints for :func:`budget_report`."""
    budget = report["write_budget"]
    if budget is None:
        return "write budget:    off (sandbox.write_budget): a command may write any amount"
    memory = "each" if report["memory_fs_sized"] else "not sized here (bwrap without --size)"
    command = "a command on disk"
    if not report["disk_writes_counted"]:
        command = "not a command's total (no /proc/PID/io here)"
    return (
        f"write budget:    {describe(budget)} (sandbox.write_budget): a file, {command}; "
        f"/tmp and /dev/shm {memory}"
    )


# -- the memory file systems -------------------------------------------------------------

_SIZED: dict[str, bool] = {}
#: the mounts and namespaces :func:`sizes_memory` tries (those of the sandbox's base flags)
_TRIAL = (
    *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
    *("--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"),
)
_SIZED_LOCK = threading.Lock()


def ram_limits(bwrap: str, flags: Sequence[str], budget: int | None) -> list[str]:
    """``flags`` (the sandbox's base flags) with its ``/tmp`` and a ``/dev/shm`` of
    its own sized to ``budget`` (at most half the RAM) and the rest of ``/dev``
    read-only; unchanged when the budget is off or ``bwrap`` cannot do it."""
    if budget is None or not sizes_memory(bwrap):
        return list(flags)
    return _sized(flags, min(budget, _half_ram()))


def sizes_memory(bwrap: str) -> bool:
    """Whether ``bwrap`` can size the sandbox's ``/tmp`` and ``/dev/shm`` and remount
    its ``/dev`` read-only: it runs ``true`` so (once per binary; bubblewrap
    before 0.8 knows no ``--size``)."""
    with _SIZED_LOCK:
        works = _SIZED.get(bwrap)
        if works is None:
            works = _SIZED[bwrap] = _try(bwrap, _sized(_TRIAL, MIN_BUDGET))
        return works


def _sized(flags: Sequence[str], size: int) -> list[str]:
    out: list[str] = []
    for at, flag in enumerate(flags):
        if flag == "--tmpfs":
            out += ["--size", str(size)]
        out.append(flag)
        if at and flags[at - 1] == "--dev":  # flag is --dev's target
            out += ["--size", str(size), "--tmpfs", f"{flag}/shm", "--remount-ro", flag]
    return out


def _try(bwrap: str, flags: list[str]) -> bool:
    """Whether ``bwrap`` runs ``true`` with ``flags`` (it knows ``--size`` and may
    remount ``/dev`` here)."""
    try:
        done = subprocess.run(
            [bwrap, *flags, "--", "true"],
            capture_output=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", os.defpath)},
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _half_ram() -> int:
    """The size of a tmpfs mounted without one: half the RAM."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (OSError, ValueError):
        return DEFAULT_BUDGET


# -- the running total ---------------------------------------------------------------------


class Meter:
    """Bytes the processes of one sandbox wrote to disk so far.

    ``outer`` is the bwrap process infai started; its child is the sandbox's
    PID 1, whose ``/proc/PID/root/proc`` is the namespace's own ``/proc``: every
    process of the sandbox and none other. Until bwrap has set its root up, that
    path is the host's ``/proc`` (same device) or missing: nothing is counted."""

    def __init__(self, outer: int) -> None:
        self.outer = outer
        self.init: int | None = None
        self.proc: str | None = None

    def read(self) -> int | None:
        """The total, or None while the sandbox's ``/proc`` cannot be read yet."""
        if self.proc is None and not self._found():
            return None
        assert self.proc is not None
        total = 0
        with contextlib.suppress(OSError):
            for name in os.listdir(self.proc):
                if name.isdigit():
                    total += _write_bytes(f"{self.proc}/{name}/io")
        return total

    def _found(self) -> bool:
        """Whether the sandbox's ``/proc`` is known now (found if need be)."""
        try:
            if self.init is None:
                self.init = _child_of(self.outer)
                if self.init is None:
                    return False
            path = f"/proc/{self.init}/root/proc"
            if os.stat(path).st_dev == os.stat("/proc").st_dev:
                return False  # not pivoted yet: the host's /proc
        except OSError:
            return False
        self.proc = path
        return True


def _write_bytes(path: str) -> int:
    try:
        with open(path, "rb") as file:
            for line in file:
                if line.startswith(b"write_bytes:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass  # ended meanwhile: its parent counts it now
    return 0


def _child_of(pid: int) -> int | None:
    """A child of ``pid`` (bwrap has one): from ``/proc/PID/task/PID/children``
    where the kernel has it, else among the next PIDs (it forked at once), else
    by reading every process's parent."""
    with contextlib.suppress(OSError, ValueError):
        with open(f"/proc/{pid}/task/{pid}/children") as file:
            kids = file.read().split()
        return int(kids[0]) if kids else None
    for near in range(pid + 1, pid + NEAR):
        if _parent(str(near)) == pid:
            return near
    for name in os.listdir("/proc"):
        if name.isdigit() and _parent(name) == pid:
            return int(name)
    return None


def _parent(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


class WriteGuard:
    """Watches one running sandboxed command and kills it past its budget.

    :meth:`start` it once the command runs, :meth:`stop` it once the command's
    output is read: it returns the bytes written when it was the guard that
    stopped the command (None otherwise)."""

    def __init__(self, task: asyncio.Task[int] | None, budget: int | None) -> None:
        self.task = task
        self.budget = budget

    @classmethod
    def start(cls, pid: int, budget: int | None, kill: Callable[[], None]) -> WriteGuard:
        """Watch the bwrap process ``pid``; ``kill`` ends the command (no budget:
        nothing watched)."""
        if budget is None:
            return cls(None, None)
        return cls(asyncio.ensure_future(_watch(Meter(pid), budget, kill)), budget)

    def stop(self) -> int | None:
        """Stop watching; the bytes written if the guard killed the command."""
        if self.task is None:
            return None
        if not self.task.done():
            self.task.cancel()
            return None
        if self.task.cancelled() or self.task.exception() is not None:
            return None
        return self.task.result()

    def report(self, written: int) -> str:
        """The line a command the guard stopped gets."""
        assert self.budget is not None
        return (
            f"[sandbox] stopped: the command wrote more than {describe(self.budget)} to "
            f"disk ({describe(written)} so far; sandbox.write_budget in your config). "
            "What it wrote is still there: remove what is not needed."
        )


async def _watch(meter: Meter, budget: int, kill: Callable[[], None]) -> int:
    """Read the total until it passes ``budget``, then ``kill`` and return it. The
    pause shrinks (down to :data:`MIN_POLL`) as the command writes faster, to
    overshoot less."""
    last, then = 0, time.monotonic()
    while True:
        written = await asyncio.to_thread(meter.read)
        if written is not None and written > budget:
            kill()
            return written
        now = time.monotonic()
        pause = POLL
        if written is not None:
            rate = (written - last) / max(now - then, 1e-3)
            if rate > 0:
                pause = min(POLL, max(MIN_POLL, (budget - written) / rate / 2))
            last, then = written, now
        await asyncio.sleep(pause)


#: the exit statuses of a command ended by ``SIGXFSZ`` (the shell's, and Python's)
_FILE_SIGNALLED = (128 + signal.SIGXFSZ, -signal.SIGXFSZ)


def notes(output: str, budget: int | None, code: int | None = None) -> str:
    """Lines telling the model a limit of the budget stopped part of a confined
    command, from what it printed or its exit ``code`` ("" if nothing shows that):
    bash runs a lone command in its own process, so nothing may print that it
    ended on ``SIGXFSZ``; only the status (128 + the signal) tells."""
    if budget is None:
        return ""
    said = ""
    size = describe(budget)
    if any(marker in output for marker in FILE_MARKERS) or code in _FILE_SIGNALLED:
        said += (
            f"\n[sandbox] no file a command writes may grow past {size} "
            "(sandbox.write_budget in your config)."
        )
    if FULL_MARKER in output:
        said += (
            f"\n[sandbox] if it was /tmp or /dev/shm that was full: each holds at most "
            f"{size} here (sandbox.write_budget); the working directory may hold more."
        )
    return said
