"""A custom tool: a typed Python function the model can call, behind infai's policy.

    python examples/custom_tool.py "how many words are in notes.txt?"

``word_count`` is an ordinary function; ``@tool`` makes it a tool whose JSON
schema comes from its signature and docstring, and ``reads=("path",)`` tells the
permission policy that it reads the file its ``path`` argument names, so rules
about reading files (``deny read_file .env``) bind it as they bind ``read_file``.
:func:`~infai.agent.register_tool` offers it in every session this program's
harness opens, with the built-in tools.

The prompt runs in the current directory with the configured model (or
``--model``). Without a model to talk to, ``--demo`` runs a scripted model that
calls the tool once (on a file it writes into a temporary directory) and then
answers with what the tool returned, so the whole path can be watched offline.
Each tool call and its result is printed, then the reply.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Literal

from infai.agent import Harness, Saved, Streamed, register_tool
from infai.llm import TextDelta
from infai.store import Store, ToolCallRecord, ToolResultRecord, default_home
from infai.tools import tool


@tool(reads=("path",))
def word_count(path: Path, unit: Literal["words", "lines", "characters"] = "words") -> str:
    """Count the words (or lines, or characters) of a text file.

    Args:
        path: the file, relative to the working directory
        unit: what to count
    """
    text = path.read_text(encoding="utf-8", errors="replace")
    counted = {"words": len(text.split()), "lines": len(text.splitlines()), "characters": len(text)}
    return f"{path.name}: {counted[unit]} {unit}"


async def run(home: Path, directory: Path, model: str | None, prompt: str) -> None:
    """Run ``prompt`` in a new session in ``directory``, printing tools and reply."""
    harness = Harness(Store(home), directory, model_name=model)
    try:
        session = await asyncio.to_thread(harness.open)
        try:
            async for event in session.prompt(prompt):
                if isinstance(event, Streamed) and isinstance(event.event, TextDelta):
                    print(event.event.text, end="", flush=True)
                elif isinstance(event, Saved) and isinstance(event.event.record, ToolCallRecord):
                    record = event.event.record
                    print(f"[calls {record.name} {json.dumps(record.arguments)}]")
                elif isinstance(event, Saved) and isinstance(event.event.record, ToolResultRecord):
                    print(f"[{event.event.record.name} says: {event.event.record.content}]")
            print()
        finally:
            await session.aclose()
    finally:
        await harness.aclose()


def demo_script(directory: Path) -> str:
    """A scripted model for ``--demo``: one call of ``word_count``, then an answer."""
    (directory / "notes.txt").write_text("the quick brown fox\njumps over the lazy dog\n")
    replies = [
        {
            "content": "Let me count.",
            "tool_calls": [{"id": "c1", "name": "word_count", "arguments": {"path": "notes.txt"}}],
        },
        "notes.txt has 9 words.",
    ]
    script = directory / "script.json"
    script.write_text(json.dumps(replies))
    return f"scripted:{script}"


def main() -> None:
    """Register the tool and run the prompt."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("prompt", nargs="?", default="How many words are in notes.txt?")
    parser.add_argument("--model", help="a configured model's name (default: the configured one)")
    parser.add_argument("--home", type=Path, default=default_home(), help="the session store")
    parser.add_argument("--demo", action="store_true", help="a scripted model, in a temp dir")
    args = parser.parse_args()
    register_tool(word_count)
    if not args.demo:
        asyncio.run(run(args.home, Path.cwd(), args.model, args.prompt))
        return
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        model = demo_script(directory)
        asyncio.run(run(args.home, directory, model, args.prompt))


if __name__ == "__main__":
    main()
