"""How fast infai starts: real processes, against ``python -c "import click"`` in the same run.

Each case runs as a fresh subprocess, as a user starts it, several times in
turn (round robin, so a burst of load on the machine hits every case alike),
after one warm-up run each that is not counted (it writes the bytecode cache,
as ``pip install`` does for a user's install, and warms the page cache):

- ``import click``: ``python -c "import click"``, the floor every click program
  pays (the interpreter's start and click's import); the ratios are against it;
- ``infai --help``: the command line alone;
- ``infai run --model offline hi``: a whole turn with the built-in model, from
  start to exit (a new session in an empty directory, its files recorded);
- the TUI's first frame: plain ``infai`` started in a detached tmux session
  (100x30), timed from just before ``tmux new-session`` until ``capture-pane``
  first shows the prompt box's placeholder (the screen polled every 10 ms), so
  the figure includes tmux's own start; the same harness timing ``printf`` is
  printed beside it as that overhead;
- the same with a configured model on an OpenAI-compatible server (the
  quickstart's ``[models.local]``, its ``base_url`` an unused loopback port:
  nothing is asked of it at start), and that plus one MCP server (the tests'
  stdio server, ``tests/support/mcp_servers.py``, sandbox off): the first frame,
  and, for the MCP case, also the time until the session is open (the status
  bar's "opening session…" gone), which the first frame no longer waits for.

Every case runs with a store, a home and a config (empty unless it says) of its own under a
temporary directory, and with ``PYTHONDONTWRITEBYTECODE`` removed from the
environment (a user's install has its bytecode cached). The targets (issue 25):
``run`` within 0.5 s and the first frame within 1 s, medians on this machine.

Run: ``python benchmarks/startup_bench.py [--reps N] [--quick] [--json] [--check]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RUN_TARGET_S = 0.5
FRAME_TARGET_S = 1.0
#: what the TUI's first frame shows (the prompt box's placeholder)
PLACEHOLDER = "Ask infai"
FRAME_TIMEOUT_S = 30.0
POLL_S = 0.01
SIZE = (100, 30)


def infai_command() -> list[str]:
    """The console script beside this interpreter, else ``python -m infai``."""
    script = Path(sys.executable).parent / "infai"
    return [str(script)] if script.exists() else [sys.executable, "-m", "infai"]


#: the quickstart's model on an OpenAI-compatible server; the port is loopback and
#: unused (no request is made while the TUI starts)
OPENAI_CONFIG = """\
model = "local"

[models.local]
provider = "openai"
model = "qwen2.5-coder:14b"
base_url = "http://127.0.0.1:9/v1"
context_window = 32768
"""
#: the tests' MCP server (real, over stdio), if this is a checkout with the tests
MCP_SERVER = Path(__file__).resolve().parents[1] / "tests" / "support" / "mcp_servers.py"
#: what the status bar says until the session is open
OPENING = "opening"


def mcp_config(log: Path) -> str:
    """:data:`OPENAI_CONFIG` plus one stdio MCP server (the sandbox off: the
    interpreter and the tests' folder are reachable as they are)."""
    args = json.dumps([str(MCP_SERVER), "stdio", str(log)])
    return (
        f'{OPENAI_CONFIG}\n[sandbox]\nmode = "off"\n\n[mcp.servers.bench]\n'
        f"command = {json.dumps(sys.executable)}\nargs = {args}\n"
    )


class Sandbox:
    """A home, a store and a config (empty unless given) under ``root``; the
    environment that uses them."""

    def __init__(self, root: Path, config: str = "") -> None:
        root.mkdir(exist_ok=True)
        self.home = root / "home"
        self.work = root / "work"
        self.config = root / "config.toml"
        for folder in (self.home, self.work):
            folder.mkdir()
        self.config.write_text(config)
        drop = {"PYTHONDONTWRITEBYTECODE", "TMUX", "TMUX_PANE", "INFAI_STORE"}
        self.env = {k: v for k, v in os.environ.items() if k not in drop}
        self.env |= {
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "INFAI_HOME": str(self.home / "store"),
            "INFAI_CONFIG": str(self.config),
        }


#: one measurement: wall-clock seconds, and the CPU seconds the process used meanwhile
Timing = tuple[float, float]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_process(argv: list[str], box: Sandbox) -> Timing:
    """Seconds from start to exit of ``argv`` (which must succeed), and its CPU seconds."""
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=box.work, env=box.env, capture_output=True, check=False)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} failed: {done.stderr.decode(errors='replace')}")
    return took, _children_cpu() - cpu0


def _cpu_of(pid: str) -> float:
    """CPU seconds process ``pid`` has used so far (user and system, from /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Tmux:
    """A private tmux server for timing the first frame of a program in a fresh pane."""

    def __init__(self, box: Sandbox, root: Path) -> None:
        found = shutil.which("tmux")
        if found is None:
            raise SystemExit("tmux is needed to time the TUI's first frame (apt-get install tmux)")
        self.binary = found
        self.box = self.default = box
        self.conf = root / "tmux.conf"
        self.conf.write_text("set -g remain-on-exit on\nset -g default-shell /bin/sh\n")
        self.socket = ""
        self.launches = 0

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            [self.binary, "-L", self.socket, "-f", str(self.conf), *args],
            capture_output=True,
            text=True,
            env=self.box.env,
            timeout=10,
            check=False,
        )
        if done.returncode != 0 and args[0] != "kill-server":
            raise SystemExit(f"tmux {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    def first_shown(
        self, argv: list[str], shown: str, box: Sandbox | None = None, opened: bool = False
    ) -> Timing:
        """Seconds from launching ``argv`` in a new pane until the pane shows ``shown``
        (``opened``: and its status bar, the last lines, no longer says the session is
        opening), and the CPU seconds the pane's process had used by then."""
        self.box = box or self.default
        width, height = SIZE
        command = "exec " + shlex.join(argv)
        self.launches += 1  # a server of its own: a killed one may linger on its socket
        self.socket = f"infai-startup-{os.getpid()}-{self.launches}"
        t0 = time.perf_counter()
        self._tmux(
            "new-session", "-d", "-s", "bench", "-x", str(width), "-y", str(height),
            "-c", str(self.box.work), command,
        )  # fmt: skip
        try:
            while True:
                screen = self._tmux("capture-pane", "-p", "-t", "bench")
                status = "".join(screen.splitlines()[-3:])
                if shown in screen and not (opened and OPENING in status):
                    took = time.perf_counter() - t0
                    return took, _cpu_of(self._tmux("list-panes", "-F", "#{pane_pid}").strip())
                if time.perf_counter() - t0 > FRAME_TIMEOUT_S:
                    raise SystemExit(f"{shlex.join(argv)} showed no {shown!r}:\n{screen}")
                time.sleep(POLL_S)
        finally:
            self._tmux("kill-server")


def configured_cases(term: Tmux, infai: list[str], tmp: Path) -> dict[str, Callable[[], Timing]]:
    """The TUI with a configured model, and with one MCP server too (when the tests'
    server is there): the first frame, and the MCP session open."""
    model = Sandbox(tmp / "openai", OPENAI_CONFIG)
    cases = {
        "TUI + openai model, frame": lambda: term.first_shown(infai, PLACEHOLDER, model),
    }
    if MCP_SERVER.exists():
        mcp = Sandbox(tmp / "mcp", mcp_config(tmp / "mcp.log"))
        cases["TUI + model + MCP, frame"] = lambda: term.first_shown(infai, PLACEHOLDER, mcp)
        cases["TUI + model + MCP, open"] = lambda: term.first_shown(
            infai, PLACEHOLDER, mcp, opened=True
        )
    return cases


def measure(reps: int, tui: bool) -> dict[str, Any]:
    """Median seconds of each case over ``reps`` rounds, and the ratios to ``import click``."""
    infai = infai_command()
    with tempfile.TemporaryDirectory(prefix="infai-startup-bench-") as tmp:
        box = Sandbox(Path(tmp))
        cases: dict[str, Callable[[], Timing]] = {
            "import click": lambda: time_process([sys.executable, "-c", "import click"], box),
            "infai --help": lambda: time_process([*infai, "--help"], box),
            "infai run --model offline hi": lambda: time_process(
                [*infai, "run", "--model", "offline", "hi"], box
            ),
        }
        if tui:
            term = Tmux(box, Path(tmp))
            cases["tmux harness (printf)"] = lambda: term.first_shown(
                ["sh", "-c", f"printf '{PLACEHOLDER}'; sleep 30"], PLACEHOLDER
            )
            cases["infai (TUI), first frame"] = lambda: term.first_shown(infai, PLACEHOLDER)
            cases.update(configured_cases(term, infai, Path(tmp)))
        for case in cases.values():  # warm-up: bytecode and page cache
            case()
        times: dict[str, list[Timing]] = {name: [] for name in cases}
        for _ in range(reps):
            for name, case in cases.items():
                times[name].append(case())
    medians = {name: statistics.median(t[0] for t in values) for name, values in times.items()}
    cpu = {name: statistics.median(t[1] for t in values) for name, values in times.items()}
    floor = medians["import click"]
    return {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        "reps": reps,
        "median_s": medians,
        "ratio_to_click": {name: value / floor for name, value in medians.items()},
        "min_s": {name: min(t[0] for t in values) for name, values in times.items()},
        "cpu_median_s": {name: None if math.isnan(v) else v for name, v in cpu.items()},
    }


def targets(result: dict[str, Any]) -> list[tuple[str, float, float, bool]]:
    """(what, median seconds, limit, met) for the issue's two targets."""
    medians = result["median_s"]
    rows = [("infai run --model offline hi", RUN_TARGET_S)]
    if "infai (TUI), first frame" in medians:
        rows.append(("infai (TUI), first frame", FRAME_TARGET_S))
    return [(name, medians[name], limit, medians[name] <= limit) for name, limit in rows]


def report(result: dict[str, Any]) -> str:
    load = ", ".join(f"{x:.1f}" for x in result["load"])
    lines = [
        f"python {result['python']}, {result['cpus']} cpus, load {load}; "
        f"median of {result['reps']} fresh processes per case (one warm-up each, bytecode cached)",
        "",
        f"{'case':<30} | median s | min s | x import click | CPU s (median)",
        f"{'-' * 30}-+----------+-------+---------------+---------------",
    ]
    for name, median in result["median_s"].items():
        ratio = result["ratio_to_click"][name]
        cpu = result["cpu_median_s"][name]
        shown = "-" if cpu is None else f"{cpu:.3f}"
        fastest = result["min_s"][name]
        lines.append(f"{name:<30} | {median:8.3f} | {fastest:5.3f} | {ratio:13.1f} | {shown:>14}")
    lines.append("")
    for name, value, limit, met in targets(result):
        lines.append(f"target: {name} <= {limit} s: {'PASS' if met else 'FAIL'} ({value:.3f} s)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=9, help="rounds of every case (default 9)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 rounds")
    parser.add_argument("--no-tui", action="store_true", help="leave out the TUI (no tmux)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    result = measure(2 if args.quick else args.reps, tui=not args.no_tui)
    print(json.dumps(result, indent=2) if args.json else report(result))
    if args.check and not all(met for *_, met in targets(result)):
        sys.exit(1)


if __name__ == "__main__":
    main()
