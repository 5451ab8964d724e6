"""Child process for test_agent_crash: runs one turn that hangs where told, then is killed.

Usage: python loop_child.py HOME SESSION WHERE   (WHERE: "generation" or "tool")
Prints "READY" once the hang point is reached (the prompt is then durable).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from infai.agent import run_turn
from infai.llm import Done, Message, Request, TextDelta, ToolCall, ToolSpec
from infai.store import Store
from infai.tools import AllowAll, Toolbox, ToolContext, ToolOutput


class Hang:
    spec = ToolSpec("hang", "never returns")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        print("READY", flush=True)
        await asyncio.Event().wait()
        raise AssertionError


class Model:
    name, context_window = "crashy", 100_000

    def __init__(self, where: str) -> None:
        self.where = where

    async def stream(self, request: Request) -> Any:
        yield TextDelta("partial answer that is never settled")
        if self.where == "generation":
            print("READY", flush=True)
            await asyncio.Event().wait()
        call = ToolCall("call_1", "hang", {"x": 1})
        yield Done(Message(role="assistant", content="calling", tool_calls=(call,)))


async def main(home: str, sid: str, where: str) -> None:
    store = Store(Path(home))
    with store.open_writer(sid) as writer:
        context = ToolContext(Path("."), sid)
        async for _ in run_turn(
            writer, Model(where), "please do it", toolbox=Toolbox([Hang()]),
            permissions=AllowAll(), context=context,
        ):  # fmt: skip
            pass


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
