"""Server fan-out benchmark: settled events per second to many SSE clients, and latency.

The server runs in a child process (``--serve``, as ``infai serve`` would, on a
free loopback port) with a model that answers every request with a batch of
tool calls to a no-op tool the policy allows, so one turn appends hundreds of
settled events as fast as the store makes them durable. The parent connects N
SSE clients (httpx, one asyncio loop), starts the turn, and every client
records when each settled event arrives. The child records when each event was
fanned out (just after its append returned) with the same system-wide
monotonic clock, so:

- **fan-out rate**: settled events per second, from the first event's
  publication to the last client's receipt of the last event (and the same
  turn with no client watching, to show what the store alone allows);
- **latency**: receipt minus publication, per client and event (median, p99),
  i.e. what the server adds between an append and a client seeing it.

Run: ``python benchmarks/server_bench.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

TOKEN = "bench-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


# -- the server side (child process) --------------------------------------------


def serve(home: Path, times_file: Path, calls: int, steps: int) -> None:
    from infai.agent import Config, Harness
    from infai.llm import FunctionModel, Message, Model, Request, ToolCall, ToolSpec
    from infai.shells.server import create_app
    from infai.shells.server.run import InfaiServer, bind, uvicorn_config
    from infai.store import Event, Store
    from infai.tools import Policy, Rule, Toolbox, ToolContext, ToolOutput

    class Stamp:
        spec = ToolSpec("stamp", "Does nothing.", {"type": "object"})

        async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
            if arguments.get("ms"):
                await asyncio.sleep(arguments["ms"] / 1000)
            return ToolOutput("ok")

    count = 0

    def answer(request: Request) -> Message | str:
        """A burst: ``calls`` calls a reply; paced ("pace MS"): one call, MS apart."""
        nonlocal count
        count += 1
        if count % (steps + 1) == 0:
            return "done"
        prompt = next(m.content for m in reversed(request.messages) if m.role == "user")
        if prompt.startswith("pace "):
            call = ToolCall(f"c{count}", "stamp", {"ms": float(prompt.split()[1])})
            return Message(role="assistant", content="", tool_calls=(call,))
        batch = tuple(ToolCall(f"c{count}-{i}", "stamp", {}) for i in range(calls))
        return Message(role="assistant", content="", tool_calls=batch)

    class Bench(Harness):
        """The bench's model and its one tool (no subagents), allowed without asking."""

        def build_model(self, name: str) -> Model:
            return FunctionModel(answer, name="bench")

        def toolbox(self, model: Model, policy: Policy) -> Toolbox:
            return Toolbox([Stamp()])

    published: list[tuple[str, int]] = []

    def observe(event: Event) -> None:
        published.append((event.id, time.monotonic_ns()))

    store = Store(home)
    space = Bench(store, Path.cwd(), config=Config(rules=(Rule("allow", "stamp"),)))
    app = create_app(store, token=TOKEN, harness=space, observe=observe)
    sock = bind("127.0.0.1", 0)
    print(sock.getsockname()[1], flush=True)
    server = InfaiServer(uvicorn_config(app, log_config=None), app.state.sessions)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    times_file.write_text(json.dumps(published))


# -- the client side ---------------------------------------------------------------


async def watch(
    client: httpx.AsyncClient, sid: str, ready: asyncio.Event, counter: list[int]
) -> dict[str, int]:
    """Receipt time of every settled event of one turn."""
    received: dict[str, int] = {}
    async with client.stream("GET", f"/v1/sessions/{sid}/stream") as response:
        event_id = None
        announced = False
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
                received[event_id] = time.monotonic_ns()
            elif line == "event: ready" and not announced:
                announced = True
                counter[0] += 1
                if counter[0] == counter[1]:
                    ready.set()
            elif line == "event: turn_ended":
                break
    return received


async def one_turn(
    url: str, clients: int, prompt: str = "go"
) -> tuple[int, int, list[dict[str, int]]]:
    """Start a turn watched by ``clients``; (start ns, end ns, receipts per client)."""
    limits = httpx.Limits(max_connections=clients + 5, max_keepalive_connections=clients + 5)
    timeout = httpx.Timeout(60.0)
    async with httpx.AsyncClient(base_url=url, headers=AUTH, limits=limits, timeout=timeout) as c:
        sid = (await c.post("/v1/sessions", json={"name": "bench"})).json()["id"]
        ready, counter = asyncio.Event(), [0, clients]
        watchers = [asyncio.create_task(watch(c, sid, ready, counter)) for _ in range(clients)]
        if clients:
            await asyncio.wait_for(ready.wait(), 30)
        start = time.monotonic_ns()
        response = await c.post(f"/v1/sessions/{sid}/prompt", json={"text": prompt})
        assert response.status_code == 202, response.text
        if clients:
            receipts = await asyncio.gather(*watchers)
        else:
            receipts = []
            while (await c.get(f"/v1/sessions/{sid}")).json()["turn"] is not None:
                await asyncio.sleep(0.005)  # nobody watches: poll until the turn is over
        return start, time.monotonic_ns(), receipts


def _latencies(receipts: list[dict[str, int]], published: dict[str, int]) -> list[int]:
    ids = list(receipts[0])
    assert all(list(r) == ids for r in receipts), "clients saw different events"
    return sorted(r[i] - published[i] for r in receipts for i in ids)


def run(clients: int, calls: int, steps: int, pace_ms: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="infai-server-bench-") as tmp:
        home, times = Path(tmp) / "home", Path(tmp) / "published.json"
        args = [sys.executable, __file__, "--serve", str(home), str(times)]
        args += ["--calls", str(calls), "--steps", str(steps)]
        child = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            port = int(child.stdout.readline())
            url = f"http://127.0.0.1:{port}"
            asyncio.run(one_turn(url, 0))
            watched = asyncio.run(one_turn(url, clients))
            paced = asyncio.run(one_turn(url, clients, f"pace {pace_ms}"))
        finally:
            child.send_signal(signal.SIGINT)
            child.wait(30)
        published = dict(json.loads(times.read_text()))
    receipts = watched[2]
    ids = list(receipts[0])
    first = min(published[i] for i in ids)
    last = max(r[ids[-1]] for r in receipts)
    burst = _latencies(receipts, published)
    latencies = _latencies(paced[2], published)
    slowest = sorted(max(r[i] for r in paced[2]) - published[i] for i in paced[2][0])
    seen = set(ids) | set(paced[2][0])
    quiet_ids = [i for i in published if i not in seen]
    quiet_span = max(published[i] for i in quiet_ids) - min(published[i] for i in quiet_ids)
    return {
        "clients": clients,
        "events": len(ids),
        "events_per_s": len(ids) / ((last - first) / 1e9),
        "deliveries_per_s": len(ids) * clients / ((last - first) / 1e9),
        "unwatched_events_per_s": len(quiet_ids) / (quiet_span / 1e9),
        "burst_latency_median_ms": statistics.median(burst) / 1e6,
        "latency_median_ms": statistics.median(latencies) / 1e6,
        "latency_p99_ms": latencies[int(len(latencies) * 0.99)] / 1e6,
        "last_client_median_ms": statistics.median(slowest) / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--serve", nargs=2, metavar=("HOME", "TIMES"), help=argparse.SUPPRESS)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=10, help="tool calls per model reply")
    parser.add_argument("--steps", type=int, default=40, help="model replies with calls per turn")
    parser.add_argument("--pace", type=float, default=5.0, help="ms between paced tool calls")
    parser.add_argument("--runs", type=int, default=3, help="medians over this many runs")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve[0]), Path(args.serve[1]), args.calls, args.steps)
        return
    if args.quick:
        args.clients, args.steps, args.runs = 5, 5, 1
    results = [run(args.clients, args.calls, args.steps, args.pace) for _ in range(args.runs)]
    summary = {k: statistics.median(r[k] for r in results) for k in results[0]}
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(
        f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} cpus; "
        f"server in a child process, {args.clients} SSE clients in one asyncio process; "
        f"{summary['events']:.0f} settled events per turn; median of {args.runs} runs"
    )
    rows = [
        ("settled events/s, no client watching", summary["unwatched_events_per_s"], "{:,.0f}"),
        (f"settled events/s to {args.clients} clients", summary["events_per_s"], "{:,.0f}"),
        ("  deliveries/s (events x clients)", summary["deliveries_per_s"], "{:,.0f}"),
        (
            "  append -> receipt in that burst, median (ms)",
            summary["burst_latency_median_ms"],
            "{:.1f}",
        ),
        (
            f"paced ({args.pace:g} ms apart): append -> receipt, median (ms)",
            summary["latency_median_ms"],
            "{:.2f}",
        ),
        ("  p99 (ms)", summary["latency_p99_ms"], "{:.2f}"),
        (
            "  append -> last client's receipt, median (ms)",
            summary["last_client_median_ms"],
            "{:.2f}",
        ),
    ]
    width = max(len(name) for name, _, _ in rows)
    for name, value, fmt in rows:
        print(f"{name:<{width}} | {fmt.format(value):>9}")


if __name__ == "__main__":
    main()
