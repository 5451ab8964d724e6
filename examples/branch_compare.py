"""Branch and compare: two approaches from one event, then the diff of their files.

    python examples/branch_compare.py --dir PROJECT --allow 'write_file *' \\
        "set up the task" "try approach A" "try approach B"

The first prompt runs in a new session (or give ``--session S --from EVENT`` and
only the two approaches, to branch from an event of an existing session). Then
each approach continues from that same event: its files are put back first, as
the TUI does when you send from an older event (a branch never starts on the
other branch's edits), and HEAD moves when the approach's prompt is stored.
Both branches stay in the session (``infai session tree S``). Finally the files
the two branches ended with are compared and the diff printed: which files
differ, and a unified diff of each text file.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from infai import AgentSession, Harness, TurnEnded, diff_at


async def turn(session: AgentSession, prompt: str, from_event: str | None = None) -> str:
    """Run ``prompt`` (from ``from_event``, its files put back first); returns the
    event the branch ended on."""
    if from_event is not None:
        await session.continue_from(from_event)
    async for event in session.prompt(prompt):
        if isinstance(event, TurnEnded) and event.outcome != "done":
            raise SystemExit(f"branch_compare: the turn ended {event.outcome}: {event.error}")
    head = session.view.head
    assert head is not None
    return head


async def main(argv: list[str]) -> int:
    """Set up (or take the event given), run both approaches, print the diff."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompts", nargs="+", help="[setup] approach-A approach-B")
    parser.add_argument("--dir", default=".", help="the project the agent works in")
    parser.add_argument("--model", help="a model name (default: the configuration's)")
    parser.add_argument("--store", help="a store directory or postgresql:// URL")
    parser.add_argument("--allow", action="append", default=[], help="'TOOL [PATTERN]'")
    parser.add_argument("--session", help="branch in this session ...")
    parser.add_argument("--from", dest="from_event", help="... from this event")
    args = parser.parse_args(argv)
    setup_given = args.session is None
    if len(args.prompts) != (3 if setup_given else 2):
        parser.error("give a setup prompt and two approaches (with --session/--from: two)")
    async with Harness.for_directory(
        args.dir, store=args.store, model=args.model, allow=tuple(args.allow)
    ) as harness:
        async with harness.session(args.session) as session:
            base = args.from_event
            if setup_given:
                base = await turn(session, args.prompts[0])
            first, second = args.prompts[-2:]
            tip_a = await turn(session, first, from_event=base)
            tip_b = await turn(session, second, from_event=base)
            sid = session.session_id
        report = await asyncio.to_thread(diff_at, harness.store, sid, tip_a, tip_b)
    print(f"session {sid}: branched at {base}; A ends at {tip_a}, B at {tip_b}")
    for change in report["changes"]:
        print(f"{change['kind']:>8}  {change['path']}")
    for text in report["text"]:
        print(text["diff"], end="" if text["diff"].endswith("\n") else "\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
