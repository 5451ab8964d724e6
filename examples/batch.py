"""A headless batch runner: each prompt in a session of its own, one JSON line each.

    python examples/batch.py --dir PROJECT --allow 'write_file notes/*' prompts.txt

Each non-empty line of the prompts file (``-``: standard input) is run as a turn
in a new session of PROJECT, under PROJECT's configuration (model, rules,
sandbox), exactly as ``infai run`` would run it; nobody is there to answer a
permission question, so what the rules and ``--allow`` do not allow is denied.
For each prompt a line is printed: the session, how the turn ended, the tools
it called and the final answer. Exit status: 0 if every turn ended ``done``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from infai import Harness, Saved, Streamed, TextDelta, ToolCallRecord, TurnEnded


async def run_one(harness: Harness, prompt: str) -> dict[str, object]:
    """One prompt, in a new session: what a script wants to know of the turn."""
    answer: list[str] = []
    tools: list[str] = []
    ended = TurnEnded("error", "no end")
    async with harness.session() as session:
        async for event in session.prompt(prompt):
            if isinstance(event, Streamed) and isinstance(event.event, TextDelta):
                answer.append(event.event.text)
            elif isinstance(event, Saved) and isinstance(event.event.record, ToolCallRecord):
                tools.append(event.event.record.name)
                answer.clear()  # the final answer is what follows the last tool call
            elif isinstance(event, TurnEnded):
                ended = event
        return {
            "session": session.session_id,
            "prompt": prompt,
            "outcome": ended.outcome,
            "error": ended.error,
            "tools": tools,
            "answer": "".join(answer),
        }


async def main(argv: list[str]) -> int:
    """Run every prompt of the file; exit 1 if any turn did not end ``done``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompts", help="a file with one prompt per line ('-': stdin)")
    parser.add_argument("--dir", default=".", help="the project the agent works in")
    parser.add_argument("--model", help="a model name (default: the configuration's)")
    parser.add_argument("--store", help="a store directory or postgresql:// URL")
    parser.add_argument("--allow", action="append", default=[], help="'TOOL [PATTERN]'")
    args = parser.parse_args(argv)
    text = sys.stdin.read() if args.prompts == "-" else Path(args.prompts).read_text()
    prompts = [line.strip() for line in text.splitlines() if line.strip()]
    harness = Harness.for_directory(
        args.dir, store=args.store, model=args.model, allow=tuple(args.allow)
    )
    async with harness:
        for notice in harness.start_notices():
            print(f"batch: {notice}", file=sys.stderr)
        failed = 0
        for prompt in prompts:
            result = await run_one(harness, prompt)
            failed += result["outcome"] != "done"
            print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
