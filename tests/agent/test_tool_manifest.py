"""The tools each model request offered are recorded: one object per distinct list,
named by every reply, across resume and fork (issue 16, "recorded in the session")."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from infai.agent import (
    MANIFEST_KEY,
    AgentSession,
    Harness,
    TaskTool,
    TurnEnded,
    load_manifest,
    manifest_of,
    record_manifest,
    run_turn,
)
from infai.agent.config import Config
from infai.agent.loop import INTERRUPTED_TURN
from infai.agent.manifest import manifest_bytes
from infai.llm import Done, Message, Request, ScriptedModel, TextDelta, ToolCall, ToolSpec
from infai.store import (
    CorruptionError,
    Event,
    MessageRecord,
    ObjectNotFound,
    Store,
    StoreIOError,
    UnsupportedFormat,
    open_store,
)
from infai.store.codec import digest_of
from infai.tools import AllowAll, Toolbox, ToolContext, ToolOutput, builtin_tools


class Echo:
    """A tool of the test's own: its spec is what the manifest must hold."""

    def __init__(self, name: str, description: str = "Echo the text back.") -> None:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        self.spec = ToolSpec(name, description, schema)

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        return ToolOutput(str(arguments.get("text", "")))


def call(name: str, **arguments: Any) -> Message:
    return Message(role="assistant", tool_calls=(ToolCall("c1", name, arguments),))


def turn(session: AgentSession, text: str) -> None:
    async def go() -> None:
        last: Any = None
        async for event in session.prompt(text):
            last = event
        assert isinstance(last, TurnEnded) and last.outcome == "done", last

    asyncio.run(go())


def replies(store: Store, sid: str) -> list[Event]:
    """The session's assistant messages, every branch, in order of appending."""
    with store.open_reader(sid) as reader:
        return [
            e
            for e in (reader.event(x.id) for x in reader.entries())
            if e.role == "assistant" and isinstance(e.record, MessageRecord)
        ]


def open_session(store: Store, sid: str, model: Any, tools: list[Any]) -> AgentSession:
    return AgentSession(store, sid, model=model, toolbox=Toolbox(tools), permissions=AllowAll())


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "home")


def test_each_reply_names_the_manifest_of_the_tools_its_request_offered(
    store: Store, tmp_path: Path
) -> None:
    sid = store.create_session(working_dir=str(tmp_path)).id
    model = ScriptedModel([call("echo", text="hi"), "said hi"])
    with open_session(store, sid, model, [Echo("echo"), Echo("alpha", "First.")]) as session:
        turn(session, "say hi")
    first, second = replies(store, sid)
    digest = manifest_of(first)
    assert digest is not None and manifest_of(second) == digest  # both steps, one list
    tools = load_manifest(store.objects, digest)
    assert [t["name"] for t in tools] == ["alpha", "echo"]  # sorted, whatever the order offered
    assert tools[0]["description"] == "First."
    assert tools[1]["parameters"] == Echo("echo").spec.parameters
    # exactly what the model was sent
    sent = {s.name: s for s in model.requests[0].tools}
    assert {t["name"]: ToolSpec(**t) for t in tools} == sent
    assert store.objects.stats()[0] == 1


def test_same_tools_again_and_after_resume_reuse_one_object_and_one_digest(
    store: Store, tmp_path: Path
) -> None:
    sid = store.create_session(working_dir=str(tmp_path)).id
    puts: list[bytes] = []
    real_put = store.objects.put

    def counting_put(data: bytes) -> str:
        puts.append(data)
        return real_put(data)

    store.objects.put = counting_put  # type: ignore[method-assign]
    with open_session(store, sid, ScriptedModel(["one", "two"]), [Echo("echo")]) as session:
        turn(session, "first")
        turn(session, "second")
    assert len(puts) == 1  # the second reply's manifest was known put: no write, no sync
    store.close()

    # resumed by another process (a store opened afresh: nothing cached)
    again = Store(store.home)
    with open_session(again, sid, ScriptedModel(["three"]), [Echo("echo")]) as session:
        turn(session, "third")
    digests = {manifest_of(e) for e in replies(again, sid)}
    assert len(digests) == 1 and None not in digests
    assert again.objects.stats()[0] == 1


def test_a_changed_tool_list_is_a_second_manifest_and_a_fork_keeps_the_first(
    store: Store, tmp_path: Path
) -> None:
    sid = store.create_session(working_dir=str(tmp_path)).id
    with open_session(store, sid, ScriptedModel(["one"]), [Echo("echo")]) as session:
        turn(session, "first")
    (old,) = replies(store, sid)
    # the configuration now adds a tool; the next turn branches from the first prompt
    tools = [Echo("echo"), Echo("mcp__notes__add", "Add a note.")]
    with open_session(store, sid, ScriptedModel(["two"]), tools) as session:
        assert old.parent_id is not None
        session.select(old.parent_id)
        turn(session, "again, with more tools")
    old_after, new = replies(store, sid)
    assert old_after.id == old.id
    with store.open_reader(sid) as reader:
        on_head = [e.id for e in reader.path()]
    assert new.id in on_head and old.id not in on_head  # a fork: the old reply is off HEAD
    old_digest, new_digest = manifest_of(old), manifest_of(new)
    assert old_digest and new_digest and old_digest != new_digest
    assert store.objects.stats()[0] == 2
    assert [t["name"] for t in load_manifest(store.objects, old_digest)] == ["echo"]
    assert [t["name"] for t in load_manifest(store.objects, new_digest)] == [
        "echo",
        "mcp__notes__add",
    ]


def test_a_manifest_removed_by_gc_is_put_again_before_a_reply_names_it(
    store: Store, tmp_path: Path
) -> None:
    sid = store.create_session(working_dir=str(tmp_path)).id
    with open_session(store, sid, ScriptedModel(["one", "two"]), [Echo("echo")]) as session:
        turn(session, "first")
        (digest,) = {manifest_of(e) for e in replies(store, sid)}
        assert digest is not None
        store.objects.remove([digest])  # the generation moves: the cache forgets
        turn(session, "second")
    assert store.objects.has(digest)
    assert {manifest_of(e) for e in replies(store, sid)} == {digest}


def test_a_subagent_records_the_tools_it_was_offered(store: Store, tmp_path: Path) -> None:
    sid = store.create_session(working_dir=str(tmp_path)).id
    child_model = ScriptedModel(["done"])
    task = TaskTool(store, child_model, [Echo("echo")], AllowAll())
    parent = ScriptedModel([call("task", prompt="do it"), "ok"])

    async def go() -> None:
        with store.open_writer(sid) as writer:
            async for _ in run_turn(
                writer,
                parent,
                "delegate",
                toolbox=Toolbox([Echo("echo"), task]),
                permissions=AllowAll(),
                context=ToolContext(tmp_path, sid),
                objects=store.objects,
            ):
                pass

    asyncio.run(go())
    (child,) = task.children
    (answer,) = replies(store, child)
    digest = manifest_of(answer)
    assert digest is not None
    assert [t["name"] for t in load_manifest(store.objects, digest)] == ["echo"]  # no task
    parent_digest = manifest_of(replies(store, sid)[0])
    assert parent_digest is not None
    assert [t["name"] for t in load_manifest(store.objects, parent_digest)] == ["echo", "task"]


def test_without_an_object_store_the_turn_records_no_manifest(store: Store, tmp_path: Path) -> None:
    sid = store.create_session(working_dir=str(tmp_path)).id

    async def go() -> None:
        with store.open_writer(sid) as writer:
            async for _ in run_turn(
                writer,
                ScriptedModel(["hi"]),
                "hello",
                toolbox=Toolbox(builtin_tools()),
                permissions=AllowAll(),
                context=ToolContext(tmp_path, sid),
            ):
                pass

    asyncio.run(go())
    (reply,) = replies(store, sid)
    assert isinstance(reply.record, MessageRecord) and MANIFEST_KEY not in reply.record.metadata


def test_the_manifest_is_canonical_and_its_errors_name_the_digest(store: Store) -> None:
    a, b = Echo("a"), Echo("b", "Ünïcode \x1b[31m and a lone \ud800")
    data = manifest_bytes([b.spec, a.spec])
    assert data == manifest_bytes([a.spec, b.spec])  # order offered does not matter
    assert data.isascii()
    digest = record_manifest(store.objects, [a.spec, b.spec])
    assert digest == digest_of(data)
    assert load_manifest(store.objects, digest)[1]["description"] == b.spec.description

    missing = digest_of(b"never written")
    with pytest.raises(ObjectNotFound, match=missing):
        load_manifest(store.objects, missing)
    garbage = store.objects.put(b'{"v": 1, "tools": "nope"}')
    with pytest.raises(CorruptionError, match=f"tool manifest {garbage}.*'tools' is not a list"):
        load_manifest(store.objects, garbage)
    newer = store.objects.put(b'{"v": 2, "tools": []}')
    with pytest.raises(UnsupportedFormat, match=newer):
        load_manifest(store.objects, newer)
    not_json = store.objects.put(b"\xff{")
    with pytest.raises(CorruptionError, match=f"tool manifest {not_json}"):
        load_manifest(store.objects, not_json)


def cut_short(store: Store, sid: str, tmp_path: Path, objects: Any) -> None:
    """A turn whose model hangs mid-reply, cancelled there."""
    streaming = asyncio.Event()

    class Hanging:
        name, context_window = "hanging", 1000

        async def stream(self, request: Request) -> Any:
            yield TextDelta("The answer ")
            streaming.set()
            await asyncio.Event().wait()
            yield Done(Message(role="assistant"))

    async def scenario() -> None:
        with store.open_writer(sid) as writer:
            task = asyncio.create_task(
                _drain(
                    run_turn(
                        writer,
                        Hanging(),
                        "question",
                        toolbox=Toolbox([Echo("echo")]),
                        permissions=AllowAll(),
                        context=ToolContext(tmp_path, sid),
                        objects=objects,
                    )
                )
            )
            await streaming.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(scenario())


def test_a_reply_cut_short_names_the_manifest_its_request_offered(
    store: Store, tmp_path: Path
) -> None:
    sid = store.create_session(working_dir=str(tmp_path)).id
    cut_short(store, sid, tmp_path, store.objects)
    (cut,) = replies(store, sid)
    assert isinstance(cut.record, MessageRecord) and cut.record.metadata["interrupted"] is True
    digest = manifest_of(cut)
    assert digest is not None
    assert [t["name"] for t in load_manifest(store.objects, digest)] == ["echo"]


def test_a_manifest_that_cannot_be_put_does_not_lose_the_interruption(
    store: Store, tmp_path: Path
) -> None:
    class Failing:
        def generation(self) -> int:
            return 0

        def put(self, data: bytes) -> str:
            raise StoreIOError("objects.sqlite: disk full")

    sid = store.create_session(working_dir=str(tmp_path)).id
    cut_short(store, sid, tmp_path, Failing())
    with store.open_reader(sid) as reader:
        kept = [e.record for e in reader.context().events]
    assert [r.content for r in kept if isinstance(r, MessageRecord)] == [
        "question",
        "The answer ",
        INTERRUPTED_TURN,
    ]
    (cut,) = replies(store, sid)
    assert manifest_of(cut) is None  # said in the log; the cut reply and marker are kept


async def _drain(events: Any) -> None:
    async for _ in events:
        pass


def test_the_standard_tools_give_one_manifest_across_workspaces(tmp_path: Path) -> None:
    """Resumed by a new process (a new harness: its own sandbox, its own tools), a
    session's standard tool list (built-ins and ``task``) names the same manifest."""

    class Space(Harness):
        def build_model(self, name: str) -> Any:
            return ScriptedModel(["ok"])

    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    digests = []
    sid = None
    for _ in range(2):
        store = Store(home)
        space = Space(store, work, config=Config())
        session = space.open(sid)
        sid = session.session_id
        with session:
            turn(session, "hello")
        digests.append(manifest_of(replies(store, sid)[-1]))
        store.close()
    assert digests[0] is not None and digests[0] == digests[1]
    store = Store(home)
    names = [t["name"] for t in load_manifest(store.objects, digests[0])]
    assert "task" in names and "bash" in names and names == sorted(names)


@pytest.mark.parametrize("backend", ["file", "postgresql"])
def test_both_backends_record_one_manifest_across_resume(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """On either backend, two sessions' turns with the same tools (one resumed by a
    store opened afresh) name one manifest, loadable from the store's objects."""
    location = str(tmp_path / "home") if backend == "file" else request.getfixturevalue("pg_url")
    digests: list[str | None] = []
    sid = None
    for text in ("first", "resumed"):
        opened: Any = open_store(location)
        try:
            sid = sid or opened.create_session(working_dir=str(tmp_path)).id
            with open_session(opened, sid, ScriptedModel(["ok"]), [Echo("echo")]) as session:
                turn(session, text)
            with opened.open_reader(sid) as reader:
                digests.append(manifest_of(reader.event(reader.head or "")))
            digest = digests[-1]
            assert digest is not None
            assert [t["name"] for t in load_manifest(opened.objects, digest)] == ["echo"]
        finally:
            opened.close()
    assert digests[0] == digests[1]
