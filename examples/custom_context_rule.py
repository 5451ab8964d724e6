"""A custom context rule: tool outputs longer than N lines reach the model as one
line that says what was left out. The session keeps the whole output (the TUI,
``session log`` and a later rule change still see it); only what the model is
sent changes.

    python examples/custom_context_rule.py --max-lines 20 "read notes.txt and sum it up"

It runs one prompt in the current directory with the configured model (or
``--model``), prints the reply, and then the explanation of the context: which
rule kept, shortened or dropped each event (as ``infai session context
--explain`` prints it, with this program's rule registered).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

from infai.agent import (
    ContextDecision,
    ContextPart,
    Harness,
    Streamed,
    register_context_rule,
)
from infai.agent.context import context_pipeline
from infai.agent.context.explain import explain_view
from infai.llm import TextDelta
from infai.store import Store, default_home


class DropLongOutputs:
    """Tool outputs over ``max_lines`` lines are replaced by a one-line note."""

    name = "drop-long-outputs"

    def __init__(self, max_lines: int) -> None:
        self.max_lines = max_lines

    def apply(self, parts: Sequence[ContextPart]) -> Iterator[ContextDecision]:
        """Shorten each long tool result; leave everything else alone."""
        for part in parts:
            if part.kind != "tool_result":
                continue
            lines = len(part.text.splitlines())
            if lines > self.max_lines:
                note = f"[tool output of {lines} lines left out: over {self.max_lines} lines]"
                yield part.shorten(note, f"{lines} lines, over {self.max_lines}")


async def run(home: Path, model: str | None, prompt: str) -> str:
    """Run ``prompt`` in a new session of the store at ``home``; its id."""
    harness = Harness(Store(home), Path.cwd(), model_name=model)
    try:
        session = await asyncio.to_thread(harness.open)
        async with session:
            async for event in session.prompt(prompt):
                if isinstance(event, Streamed) and isinstance(event.event, TextDelta):
                    print(event.event.text, end="", flush=True)
            print()
            return session.session_id
    finally:
        await harness.aclose()


def main() -> None:
    """Register the rule, run the prompt, explain the context."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt")
    parser.add_argument("--max-lines", type=int, default=20)
    parser.add_argument("--model", help="a configured model's name (default: the configured one)")
    parser.add_argument("--home", type=Path, default=default_home(), help="the session store")
    args = parser.parse_args()
    register_context_rule(DropLongOutputs(args.max_lines))
    session_id = asyncio.run(run(args.home, args.model, args.prompt))
    store = Store(args.home)
    with store.open_reader(session_id) as view:
        explained = explain_view(view, context_pipeline(store.info(session_id).extra))
    for part in explained.parts:
        steps = "; ".join(f"{s.rule}: {s.why}" for s in part.steps) or "as stored"
        print(f"{part.kind:<12} {part.action:<9} {steps}")


if __name__ == "__main__":
    main()
