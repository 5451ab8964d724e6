"""The SDK's own promises, each as a program meets it.

- ``import infai`` loads no other module; ``from infai import Harness`` loads
  what that name needs.
- ``session.prompt`` reads the session's hub: ``session.cancel()`` stops a turn
  being iterated, from another task, and the iteration ends ``cancelled``; a
  program that closes the iteration early cancels the turn, which records its
  interruption (before, the turn was dropped with no marker).
- A plain approver function works, in a worker thread; questions can be events
  of the turn, yielded in order, and the session's approver is back afterwards.
- ``continue_from`` restores once: the next prompt does not restore again; with
  ``ask``, a refused restore is asked about and tried again as answered.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from infai import (
    Ask,
    Busy,
    Config,
    Harness,
    Message,
    MessageRecord,
    OnRestore,
    Question,
    Reply,
    RestoreRefused,
    Saved,
    ScriptedModel,
    ToolCall,
    ToolCallRecord,
    ToolResultRecord,
    TurnEnded,
    open_store,
)
from infai.agent.loop import INTERRUPTED_TURN
from infai.llm import Request, TextDelta
from infai.store import InvalidInput


def test_import_infai_loads_nothing_else_until_a_name_is_used() -> None:
    code = (
        "import sys, infai\n"
        "print(sorted(m for m in sys.modules if m.startswith('infai') or m == 'typing'))\n"
        "from infai import Harness\n"
        "print(Harness.__module__, 'infai.agent' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["['infai']", "infai.agent.harness True"]


class Stalls:
    """A model that starts a reply, then waits until the turn is cancelled."""

    name = "stalls"
    context_window = 8_000

    def __init__(self) -> None:
        self.streaming = asyncio.Event()

    async def stream(self, request: Request) -> Any:
        yield TextDelta("thinking")
        self.streaming.set()
        await asyncio.Event().wait()


def harness(tmp_path: Path, model: Any, **kwargs: Any) -> Harness:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return Harness(open_store(tmp_path / "home"), work, config=Config(), model=model, **kwargs)


def test_cancel_stops_a_turn_that_is_being_iterated(tmp_path: Path) -> None:
    model = Stalls()

    async def main() -> list[Any]:
        async with harness(tmp_path, model) as space, space.session() as session:
            seen: list[Any] = []

            async def cancel_when_streaming() -> None:
                await model.streaming.wait()
                await session.cancel()

            canceller = asyncio.create_task(cancel_when_streaming())
            async for event in session.prompt("go"):
                seen.append(event)
            await canceller
            assert session.busy is None  # the slot is free again at once
            path = session.view.context().events
            assert path[-1].record.content == INTERRUPTED_TURN  # type: ignore[union-attr]
            return seen

    seen = asyncio.run(asyncio.wait_for(main(), 30))  # a regression fails, never hangs
    assert seen[-1] == TurnEnded("cancelled")


def test_closing_the_iteration_cancels_the_turn_and_records_it(tmp_path: Path) -> None:
    model = Stalls()

    async def main() -> None:
        async with harness(tmp_path, model) as space, space.session() as session:
            async with aclosing(session.prompt("go")) as events:
                async for _event in events:
                    if model.streaming.is_set():
                        break
            assert session.busy is None and session.turn is None
            texts = [getattr(e.record, "content", "") for e in session.view.context().events]
            assert texts[-2:] == ["thinking", INTERRUPTED_TURN]  # what it had said, kept

    asyncio.run(asyncio.wait_for(main(), 30))


def writes(*paths: str) -> Message:
    calls = [
        ToolCall(f"c{n}", "write_file", {"path": p, "content": "x"}) for n, p in enumerate(paths)
    ]
    return Message("assistant", tool_calls=tuple(calls))


def test_a_plain_approver_is_asked_in_a_worker_thread(tmp_path: Path) -> None:
    threads: list[int] = []

    def approve(ask: Ask) -> Reply:
        threads.append(threading.get_ident())
        return "allow"

    async def main() -> None:
        model = ScriptedModel([writes("a.txt"), "done"])
        space = harness(tmp_path, model, approver=approve)
        async with space, space.session() as session:
            async for _event in session.prompt("write"):
                pass

    asyncio.run(main())
    assert len(threads) == 1 and threads[0] != threading.get_ident()
    assert (tmp_path / "work" / "a.txt").read_text() == "x"


def test_questions_come_in_order_and_the_approver_is_back_after(tmp_path: Path) -> None:
    async def main() -> list[str]:
        model = ScriptedModel([writes("a.txt", "b.txt"), "done", writes("c.txt"), "done"])
        order: list[str] = []
        async with harness(tmp_path, model) as space, space.session() as session:
            async for event in session.prompt_with_questions("write"):
                if isinstance(event, Question):
                    order.append(f"asked {event.ask.subject}")
                    event.answer("allow" if event.ask.subject == "a.txt" else "deny")
                elif isinstance(event, Saved) and isinstance(event.event.record, ToolCallRecord):
                    order.append(f"call {event.event.record.arguments['path']}")
                elif isinstance(event, Saved) and isinstance(event.event.record, ToolResultRecord):
                    order.append(f"result {event.event.record.metadata['permission']['verdict']}")
            async for _event in session.prompt("again"):  # no approver: asking denies
                pass
            last = session.view.context().events[-2].record
            assert isinstance(last, ToolResultRecord) and "nobody can approve" in last.content
        return order

    assert asyncio.run(main()) == [
        "call a.txt",
        "call b.txt",
        "asked a.txt",
        "result allow",
        "asked b.txt",
        "result deny",
    ]


def test_continue_from_restores_once(tmp_path: Path) -> None:
    async def main() -> None:
        model = ScriptedModel([writes("a.txt"), "one", writes("b.txt"), "two", "three"])
        space = harness(tmp_path, model, allow=("write_file *",))
        async with space, space.session() as session:
            async for _event in session.prompt("first"):
                pass
            first = session.view.head
            async for _event in session.prompt("second"):
                pass
            done = await session.continue_from(first)
            assert done is not None and not (tmp_path / "work" / "b.txt").exists()
            async for _event in session.prompt("third"):
                pass
            kinds = [e.kind for e in session.view.context().events]
            assert kinds.count("restore") == 1, kinds

    asyncio.run(main())


def test_continue_from_asks_about_a_refusal_and_tries_again(tmp_path: Path) -> None:
    """``ask``: a refused restore (a file changed by hand) is a question; its answer
    is the choice tried again, and None gives up with nothing changed."""

    async def main() -> None:
        model = ScriptedModel([writes("a.txt"), "one", writes("b.txt"), "two"])
        space = harness(tmp_path, model, allow=("write_file *",))
        async with space, space.session() as session:
            async for _event in session.prompt("first"):
                pass
            first = session.view.head
            async for _event in session.prompt("second"):
                pass
            (tmp_path / "work" / "b.txt").write_text("mine")
            asked: list[tuple[str, ...]] = []

            async def give_up(refused: RestoreRefused) -> OnRestore | None:
                asked.append(tuple(refused.conflicts))
                return None

            with pytest.raises(RestoreRefused):
                await session.continue_from(first, ask=give_up)
            assert (tmp_path / "work" / "b.txt").read_text() == "mine"  # nothing changed

            async def keep_mine(refused: RestoreRefused) -> OnRestore | None:
                asked.append(tuple(refused.conflicts))
                return OnRestore(keep=tuple(refused.conflicts))

            done = await session.continue_from(first, ask=keep_mine)
            assert done is not None
            assert asked == [("b.txt",), ("b.txt",)]
            assert (tmp_path / "work" / "b.txt").read_text() == "mine"  # kept, as answered

    asyncio.run(main())


def test_the_same_program_runs_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    """``store=`` a URL: sessions created, listed, resumed and closed in the database
    (the harness opened the store, so it closes it)."""
    work = tmp_path / "work"
    work.mkdir()

    async def main() -> None:
        space = Harness.for_directory(work, store=pg_url, model="offline")
        async with space:
            async with space.session() as session:
                async for _event in session.prompt("remember 7"):
                    pass
                first = session.session_id
            async with space.session(resume=True) as again:
                assert again.session_id == first
                async for event in again.prompt("which number?"):
                    last = event
                assert last == TurnEnded("done")
            listed = space.sessions()
            assert [info.id for info in listed] == [first]
            assert listed[0].working_dir == str(work)
        assert not space.owns_store  # closed with the harness

    asyncio.run(main())
    with open_store(pg_url) as store, store.open_reader(store.list_sessions()[0].id) as view:
        events = view.context().events
        prompts = [e.record.content for e in events if isinstance(e.record, MessageRecord)]
    assert prompts[0::2] == ["remember 7", "which number?"]  # and the answers between


def test_a_directory_that_is_not_one_is_refused_before_anything_opens(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with pytest.raises(InvalidInput, match=r"for_directory: .*nope is not a directory"):
        Harness.for_directory(tmp_path / "nope", store=store)
    assert not store.exists()  # no store was created for it


def test_the_context_is_not_read_while_a_turn_changes_it(tmp_path: Path) -> None:
    model = Stalls()

    async def main() -> None:
        async with harness(tmp_path, model) as space, space.session() as session:
            turn = await session.start("go")
            await model.streaming.wait()
            with pytest.raises(Busy):
                await session.context()
            await session.cancel(turn.id)
            assert (await session.context()).messages[0].content == "go"

    asyncio.run(asyncio.wait_for(main(), 30))
